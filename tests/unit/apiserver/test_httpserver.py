"""The lean HTTP server in front of the handler chain: plain requests answered by it, in order;
everything else (chunked bodies, watches, malformed requests) handed to aiohttp on the same
connection, which keeps working."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest

from kubecore.api import meta
from kubecore.apiserver import rest
from kubecore.apiserver.admission import ensure_system_namespaces
from kubecore.apiserver.app import DIRECT, FAST_READS, OBJECTS, REGISTRY, build_app
from kubecore.api.meta import now_rfc3339
from kubecore.apiserver.fastpath import FastAppRunner
from kubecore.apiserver import httpserver
from kubecore.apiserver.httpserver import MAX_BODY, LeanServer
from kubecore.store import Store

PODS = "/api/v1/namespaces/default/pods"


def pod(name: str) -> bytes:
    return msgspec.json.encode({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                                "spec": {"containers": [{"name": "c", "image": "busybox"}]}})


def post(path: str, body: bytes, *extra: str) -> bytes:
    head = [f"POST {path} HTTP/1.1", "Host: t", "Content-Type: application/json", f"Content-Length: {len(body)}", *extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def get(path: str, *extra: str, version: str = "HTTP/1.1") -> bytes:
    return ("\r\n".join([f"GET {path} {version}", "Host: t", *extra]) + "\r\n\r\n").encode()


class Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def response(self) -> tuple[int, dict[str, str], bytes]:
        """One response with a Content-Length or chunked body."""
        head = await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), 10)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
        if "content-length" in headers:
            return status, headers, await self.reader.readexactly(int(headers["content-length"]))
        body = b""
        while True:  # chunked
            size = int((await self.reader.readuntil(b"\r\n")).strip(), 16)
            chunk = await self.reader.readexactly(size + 2)
            if size == 0:
                return status, headers, body
            body += chunk[:-2]

    async def first_chunk(self) -> tuple[int, bytes]:
        head = await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), 10)
        size = int((await asyncio.wait_for(self.reader.readuntil(b"\r\n"), 10)).strip(), 16)
        return int(head.split(b" ")[1]), await self.reader.readexactly(size)

    async def closed(self) -> bool:
        return await asyncio.wait_for(self.reader.read(1), 10) == b""

    def close(self) -> None:
        self.writer.close()


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[LeanServer, int]]:
    store = Store.open(tmp_path / "s", fsync=False)
    app = build_app(store)
    await ensure_system_namespaces(app[OBJECTS], app[REGISTRY], now_rfc3339(), meta.new_uid)
    runner = FastAppRunner(app, fast=app[FAST_READS], direct=app[DIRECT], access_log=None, handle_signals=False,
                           shutdown_timeout=0.5)
    await runner.setup()
    assert runner.server is not None
    lean = LeanServer(handler=app[DIRECT], fallback=runner.server, fast=app[FAST_READS])
    await lean.start("127.0.0.1", 0, backlog=16)
    try:
        yield lean, lean.port
    finally:
        await lean.close()
        await runner.cleanup()
        store.close()


async def connect(port: int) -> Conn:
    return Conn(*await asyncio.open_connection("127.0.0.1", port))


async def test_pipelined_requests_are_answered_in_order(server: tuple[LeanServer, int]) -> None:
    c = await connect(server[1])
    await c.send(post(PODS, pod("a")) + post(PODS, pod("b")) + get(f"{PODS}/a") + post(PODS, pod("a")))
    results = [await c.response() for _ in range(4)]
    assert [r[0] for r in results] == [201, 201, 200, 409]
    assert [msgspec.json.decode(r[2])["metadata"]["name"] for r in results[:3]] == ["a", "b", "a"]
    assert msgspec.json.decode(results[3][2])["reason"] == "AlreadyExists"
    assert results[0][1]["content-type"] == "application/json" and "date" in results[0][1]
    c.close()


async def test_a_request_cut_across_reads_is_served_when_complete(server: tuple[LeanServer, int]) -> None:
    c = await connect(server[1])
    data = post(PODS, pod("cut"))
    for at in (0, 7, 40, len(data) - 30, len(data) - 1):  # inside the line, the headers, the body
        await c.send(data[at:{0: 7, 7: 40, 40: len(data) - 30, len(data) - 30: len(data) - 1}.get(at, len(data))])
        await asyncio.sleep(0.01)
    await c.send(data[len(data) - 1:])
    status, _, body = await c.response()
    assert status == 201 and msgspec.json.decode(body)["metadata"]["name"] == "cut"
    c.close()


async def test_connection_close_and_http_1_0_close_after_the_response(server: tuple[LeanServer, int]) -> None:
    c = await connect(server[1])
    await c.send(get("/version", "Connection: close"))
    assert (await c.response())[0] == 200
    assert await c.closed()
    c = await connect(server[1])
    await c.send(get("/healthz", version="HTTP/1.0"))
    status, _, body = await c.response()
    assert (status, body) == (200, b"ok")
    assert await c.closed()


async def test_head_has_a_length_and_no_body(server: tuple[LeanServer, int]) -> None:
    c = await connect(server[1])
    await c.send(get("/version").replace(b"GET ", b"HEAD ", 1) + get("/healthz"))
    head = await asyncio.wait_for(c.reader.readuntil(b"\r\n\r\n"), 10)
    assert head.startswith(b"HTTP/1.1 200") and b"Content-Length: " in head
    status, _, body = await c.response()  # the next response follows the head directly
    assert (status, body) == (200, b"ok")
    c.close()


async def test_chunked_body_goes_to_aiohttp_and_the_connection_keeps_working(server: tuple[LeanServer, int]) -> None:
    c = await connect(server[1])
    body = pod("chunked")
    chunked = (f"POST {PODS} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
               f"{len(body):x}\r\n").encode() + body + b"\r\n0\r\n\r\n"
    await c.send(chunked + get(f"{PODS}/chunked"))
    first, second = await c.response(), await c.response()
    assert first[0] == 201 and second[0] == 200
    assert msgspec.json.decode(second[2])["metadata"]["name"] == "chunked"
    assert server[0].connections == set()  # handed over: aiohttp owns it now
    c.close()


async def test_a_watch_is_streamed_by_aiohttp(server: tuple[LeanServer, int]) -> None:
    c = await connect(server[1])
    await c.send(post(PODS, pod("w")))
    assert (await c.response())[0] == 201
    await c.send(get(f"{PODS}?watch=true&timeoutSeconds=5"))
    status, chunk = await c.first_chunk()
    event = msgspec.json.decode(chunk.splitlines()[0])
    assert status == 200 and event["type"] == "ADDED" and event["object"]["metadata"]["name"] == "w"
    c.close()


async def test_malformed_request_gets_aiohttps_400(server: tuple[LeanServer, int]) -> None:
    c = await connect(server[1])
    await c.send(b"GET /version HTTP/1.1\r\nHost t\r\n\r\n")  # a header line without a colon
    status, _, _ = await c.response()
    assert status == 400
    c.close()


async def test_a_body_over_the_limit_is_refused_with_413(server: tuple[LeanServer, int]) -> None:
    c = await connect(server[1])
    big = b'{"metadata":{"name":"big"},"data":{"x":"' + b"x" * (MAX_BODY + 10) + b'"}}'
    await c.send(post("/api/v1/namespaces/default/configmaps", big))
    status, _, body = await c.response()
    assert status == 413
    c.close()


async def test_a_large_list_is_written_in_chunks_with_flow_control(server: tuple[LeanServer, int],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rest, "STREAM_CHUNK", 512)  # every LIST body is "large"
    c = await connect(server[1])
    for i in range(30):
        await c.send(post(PODS, pod(f"p{i:02d}")))
        assert (await c.response())[0] == 201
    await c.send(get(PODS) + get(f"{PODS}?resourceVersion=0") + get("/healthz"))
    for _ in range(2):
        status, headers, body = await c.response()
        items = msgspec.json.decode(body)["items"]
        assert status == 200 and int(headers["content-length"]) == len(body)
        assert [p["metadata"]["name"] for p in items] == [f"p{i:02d}" for i in range(30)]
    assert (await c.response())[2] == b"ok"
    c.close()


async def test_an_idle_connection_is_closed_and_a_busy_one_is_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(httpserver, "IDLE_TIMEOUT", 0.5)
    store = Store.open(tmp_path / "s", fsync=False)
    app = build_app(store)
    runner = FastAppRunner(app, fast=app[FAST_READS], direct=app[DIRECT], access_log=None, handle_signals=False)
    await runner.setup()
    assert runner.server is not None
    lean = LeanServer(handler=app[DIRECT], fallback=runner.server, fast=app[FAST_READS])
    await lean.start("127.0.0.1", 0, backlog=16)
    try:
        idle, active = await connect(lean.port), await connect(lean.port)
        for _ in range(8):  # 1.6 s of a request every 0.2 s on one, nothing on the other
            await active.send(get("/healthz"))
            assert (await active.response())[2] == b"ok"
            await asyncio.sleep(0.2)
        assert await idle.closed()
        await active.send(get("/healthz"))
        assert (await active.response())[2] == b"ok"
        idle.close()
        active.close()
    finally:
        await lean.close()
        await runner.cleanup()
        store.close()


async def test_a_write_whose_client_went_away_still_completes(server: tuple[LeanServer, int]) -> None:
    """The lean listener never cancels a request it serves, which is why its writes run without
    `rest.shielded`'s shield: a binding sent by a client that closes at once is applied."""
    c = await connect(server[1])
    await c.send(post(PODS, pod("gone")))
    assert (await c.response())[0] == 201
    c.close()
    node = msgspec.json.encode({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    c = await connect(server[1])
    await c.send(post("/api/v1/nodes", node))
    assert (await c.response())[0] == 201
    c.close()
    binding = msgspec.json.encode({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "gone"},
                                   "target": {"kind": "Node", "name": "n1"}})
    quitter = await connect(server[1])
    await quitter.send(post(f"{PODS}/gone/binding", binding))
    quitter.writer.transport.abort()  # gone before any answer
    c = await connect(server[1])
    for _ in range(100):
        await c.send(get(f"{PODS}/gone"))
        status, _, body = await c.response()
        if status == 200 and msgspec.json.decode(body)["spec"].get("nodeName") == "n1":
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the binding of a client that went away was not applied")
    c.close()


def test_a_repeated_header_block_is_parsed_once_and_read_the_same() -> None:
    def head(version: str, *lines: str) -> bytes:
        return ("POST /api/v1/namespaces/ns/pods HTTP/" + version + "\r\n" + "".join(f"{x}\r\n" for x in lines)
                + "\r\n").encode("latin-1")

    block = ("Host: h", "User-Agent: kubecore-test/1.0", "Content-Type: application/json", "Content-Length: 12")
    httpserver._BLOCKS.clear()
    first = httpserver._parse_head(head("1.1", *block), head("1.1", *block).find(b"\r\n\r\n"))
    again = httpserver._parse_head(head("1.1", *block), head("1.1", *block).find(b"\r\n\r\n"))
    assert first is not None and again is not None
    assert first[:4] == again[:4] == ("POST", "/api/v1/namespaces/ns/pods", True, 12)
    assert again[4] is first[4] and again[4]["user-agent"] == "kubecore-test/1.0"
    assert len(httpserver._BLOCKS) == 1
    # the same block under HTTP/1.0 is not kept alive; Connection decides either way
    old = head("1.0", *block)
    assert httpserver._parse_head(old, old.find(b"\r\n\r\n"))[2] is False  # type: ignore[index]
    for version, connection, alive in (("1.0", "keep-alive", True), ("1.1", "close", False),
                                       ("1.1", "keep-alive, close", False)):
        raw = head(version, *block, f"Connection: {connection}")
        assert httpserver._parse_head(raw, raw.find(b"\r\n\r\n"))[2] is alive  # type: ignore[index]
    # a block aiohttp must serve is never cached as servable
    for bad in ("Transfer-Encoding: chunked", "Bad Name: x", "Content-Length: 1x"):
        raw = head("1.1", "Host: h", bad)
        assert httpserver._parse_head(raw, raw.find(b"\r\n\r\n")) is None
        assert httpserver._parse_head(raw, raw.find(b"\r\n\r\n")) is None


def test_a_target_is_parsed_once_and_its_query_counts() -> None:
    """The chain's request info is shared by requests for the same method, path and query."""
    from kubecore.apiserver.app import Chain

    def req(target: str, method: str = "GET") -> httpserver.LeanRequest:
        return httpserver.LeanRequest(None, method, target, httpserver.CIMultiDictProxy(httpserver.CIMultiDict()), b"")  # type: ignore[arg-type]

    first = Chain.request_info(req(PODS))
    assert Chain.request_info(req(PODS)) is first and first.verb == "list" and first.resource == "pods"
    watch = Chain.request_info(req(PODS + "?watch=1"))
    assert watch.verb == "watch" and watch is not first
    assert Chain.request_info(req(PODS, "POST")).verb == "create"
    one, other = Chain.request_info(req(PODS + "/one")), Chain.request_info(req(PODS + "/other"))
    assert (one.verb, one.name, other.name) == ("get", "one", "other")
    assert Chain.request_info(req(PODS + "/one")) is not one  # objects' paths are not kept
