"""HttpTransport against a raw asyncio server that writes hand-made HTTP/1.1 answers: framing
(Content-Length, chunked, until close, no-body statuses, interim 100), gzip, keep-alive reuse and
retirement, a server that closes an idle connection, timeouts and typed failures."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest

from kubecore.client.transport import ConnectError, ConnectionLost, HttpTransport, ProtocolError

Answer = Callable[[bytes], bytes | None]
"""Given the request head (+ body), the raw bytes to send back; None: close without answering."""


@dataclass
class RawServer:
    answer: Answer
    url: str = ""
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)
    close_after: bool = False
    server: asyncio.Server | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                request = head + (await reader.readexactly(length) if length else b"")
                self.requests.append(request)
                out = self.answer(request)
                if out is None:
                    break
                for piece in (out[: len(out) // 2], out[len(out) // 2:]):  # split across reads
                    writer.write(piece)
                    await writer.drain()
                if self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def raw_server() -> AsyncIterator[Callable[[Answer], RawServer]]:
    servers: list[RawServer] = []

    def make(answer: Answer) -> RawServer:
        s = RawServer(answer)
        servers.append(s)
        return s

    yield make
    for s in servers:
        if s.server is not None:
            s.server.close()


async def start(s: RawServer) -> HttpTransport:
    s.server = await asyncio.start_server(s.handle, "127.0.0.1", 0)
    port = s.server.sockets[0].getsockname()[1]
    return HttpTransport(f"http://127.0.0.1:{port}")


def ok(body: bytes, *extra: str) -> bytes:
    head = ["HTTP/1.1 200 OK", f"Content-Length: {len(body)}", "Content-Type: application/json", *extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def chunked(*pieces: bytes, trailer: str = "") -> bytes:
    out = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    for p in pieces:
        out += f"{len(p):x};ext=1\r\n".encode() + p + b"\r\n"
    return out + b"0\r\n" + trailer.encode() + b"\r\n"


async def test_content_length_and_keep_alive_reuse(raw_server: Callable[[Answer], RawServer]) -> None:
    s = raw_server(lambda req: ok(b'{"n":1}'))
    t = await start(s)
    for _ in range(5):
        r = await t.request("GET", "/api?x=1", headers={"Accept": "application/json"}, body=None, timeout=5)
        assert (r.status, r.body, r.headers["content-type"]) == (200, b'{"n":1}', "application/json")
    assert s.connections == 1, "one keep-alive connection serves every request"
    assert s.requests[0].startswith(b"GET /api?x=1 HTTP/1.1\r\nHost: 127.0.0.1:")
    t.close()


async def test_post_body_and_content_length(raw_server: Callable[[Answer], RawServer]) -> None:
    s = raw_server(lambda req: ok(req.split(b"\r\n\r\n", 1)[1]))
    t = await start(s)
    r = await t.request("POST", "/p", headers={"Content-Type": "application/json"}, body=b'{"a":2}', timeout=5)
    assert r.body == b'{"a":2}'
    assert b"Content-Length: 7" in s.requests[0]
    t.close()


async def test_chunked_with_extensions_and_trailers(raw_server: Callable[[Answer], RawServer]) -> None:
    answers = iter([chunked(b'{"items":', b"[1,2", b"]}"), chunked(b"x", trailer="X-Trailer: 1\r\n")])
    s = raw_server(lambda req: next(answers))
    t = await start(s)
    assert (await t.request("GET", "/a", headers={}, body=None, timeout=5)).body == b'{"items":[1,2]}'
    assert (await t.request("GET", "/b", headers={}, body=None, timeout=5)).body == b"x"
    assert s.connections == 1
    t.close()


async def test_gzip_body_is_decoded(raw_server: Callable[[Answer], RawServer]) -> None:
    s = raw_server(lambda req: ok(gzip.compress(b'{"big":true}'), "Content-Encoding: gzip"))
    t = await start(s)
    assert (await t.request("GET", "/", headers={}, body=None, timeout=5)).body == b'{"big":true}'
    assert b"Accept-Encoding: gzip" in s.requests[0]
    t.close()


async def test_no_body_statuses_and_interim_answer(raw_server: Callable[[Answer], RawServer]) -> None:
    answers = iter([b"HTTP/1.1 204 No Content\r\n\r\n",
                    b"HTTP/1.1 100 Continue\r\n\r\n" + ok(b"after-continue")])
    s = raw_server(lambda req: next(answers))
    t = await start(s)
    r = await t.request("DELETE", "/x", headers={}, body=None, timeout=5)
    assert (r.status, r.body) == (204, b"")
    assert (await t.request("GET", "/y", headers={}, body=None, timeout=5)).body == b"after-continue"
    t.close()


async def test_body_until_close_and_connection_close_retires(raw_server: Callable[[Answer], RawServer]) -> None:
    s = raw_server(lambda req: b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nstreamed to the end")
    s.close_after = True
    t = await start(s)
    assert (await t.request("GET", "/", headers={}, body=None, timeout=5)).body == b"streamed to the end"
    assert (await t.request("GET", "/", headers={}, body=None, timeout=5)).body == b"streamed to the end"
    assert s.connections == 2, "a Connection: close answer is not reused"
    t.close()


async def test_idle_connection_closed_by_server_leaves_the_pool(raw_server: Callable[[Answer], RawServer]) -> None:
    s = raw_server(lambda req: ok(b"1"))
    s.close_after = True  # the server closes right after each answer, without saying so
    t = await start(s)
    await t.request("GET", "/", headers={}, body=None, timeout=5)
    for _ in range(50):  # connection_lost reaches the pool
        if not t._idle:
            break
        await asyncio.sleep(0.01)
    assert (await t.request("GET", "/", headers={}, body=None, timeout=5)).body == b"1"
    assert s.connections == 2
    t.close()


async def test_connection_lost_mid_answer(raw_server: Callable[[Answer], RawServer]) -> None:
    s = raw_server(lambda req: b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort")
    s.close_after = True
    t = await start(s)
    with pytest.raises(ConnectionLost, match="mid-answer"):
        await t.request("GET", "/", headers={}, body=None, timeout=5)
    t.close()


async def test_garbage_is_a_protocol_error(raw_server: Callable[[Answer], RawServer]) -> None:
    s = raw_server(lambda req: b"SSH-2.0-OpenSSH\r\n\r\n")
    t = await start(s)
    with pytest.raises(ProtocolError, match="status line"):
        await t.request("GET", "/", headers={}, body=None, timeout=5)
    t.close()


async def test_timeout_drops_the_connection(raw_server: Callable[[Answer], RawServer]) -> None:
    calls = 0

    def answer(req: bytes) -> bytes:
        nonlocal calls
        calls += 1
        return b"" if calls == 1 else ok(b"late-but-fresh")  # the first request never gets an answer

    s = raw_server(answer)
    t = await start(s)
    with pytest.raises(TimeoutError):
        await t.request("GET", "/slow", headers={}, body=None, timeout=0.2)
    assert (await t.request("GET", "/", headers={}, body=None, timeout=5)).body == b"late-but-fresh"
    assert s.connections == 2, "the timed-out connection is not reused"
    t.close()


async def test_connect_refused_is_connect_error() -> None:
    srv = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    srv.close()
    await srv.wait_closed()
    t = HttpTransport(f"http://127.0.0.1:{port}")
    with pytest.raises(ConnectError, match="cannot connect"):
        await t.request("GET", "/", headers={}, body=None, timeout=5)


async def test_url_prefix_and_host_header() -> None:
    t = HttpTransport("https://example.test/k8s/clusters/c1/")
    head = t._encode("GET", "/api", {"A": "b"}, None).decode()
    assert head.startswith("GET /k8s/clusters/c1/api HTTP/1.1\r\nHost: example.test\r\n")
    with pytest.raises(ValueError):
        HttpTransport("unix:///run/x.sock")


async def test_at_most_max_connections_and_waiters_time_out(raw_server: Callable[[Answer], RawServer]) -> None:
    """200 concurrent requests share 3 connections; with every connection busy past a request's
    timeout, that request fails with TimeoutError and never opens a fourth."""
    s = raw_server(lambda req: ok(req.split(b" ")[1]))
    await start(s)
    assert s.server is not None
    t = HttpTransport(f"http://127.0.0.1:{s.server.sockets[0].getsockname()[1]}", max_connections=3)
    answers = await asyncio.gather(*(t.request("GET", f"/{i}", headers={}, body=None, timeout=10) for i in range(200)))
    assert [a.body for a in answers] == [f"/{i}".encode() for i in range(200)]
    assert s.connections == 3
    with pytest.raises(ValueError):
        HttpTransport("http://127.0.0.1:1", max_connections=0)

    hang = raw_server(lambda req: b"" if b"/hang" in req else ok(b"fine"))  # /hang is never answered
    await start(hang)
    assert hang.server is not None
    t2 = HttpTransport(f"http://127.0.0.1:{hang.server.sockets[0].getsockname()[1]}", max_connections=1)
    stuck = asyncio.ensure_future(t2.request("GET", "/hang", headers={}, body=None, timeout=1.0))
    await asyncio.sleep(0.05)
    with pytest.raises(TimeoutError, match="came free in time"):
        await t2.request("GET", "/other", headers={}, body=None, timeout=0.2)
    with pytest.raises(TimeoutError):
        await stuck
    # the timed-out exchange gave its slot back: the next request gets a fresh connection
    assert (await t2.request("GET", "/other", headers={}, body=None, timeout=5)).body == b"fine"
    assert hang.connections == 2
    t.close()
    t2.close()


def test_one_transport_serves_requests_from_successive_event_loops() -> None:
    """The transport keeps the loop of its requests (no lookup per request) but follows the caller
    to a new loop once the old one stopped (a client reused across asyncio.run calls)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            body = b"ok"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        transport = HttpTransport(f"http://127.0.0.1:{server.server_address[1]}")

        async def twice() -> list[bytes]:
            return [(await transport.request("GET", "/", headers={}, body=None, timeout=10)).body for _ in range(2)]

        async def twice_and_close() -> list[bytes]:
            try:
                return await twice()
            finally:
                transport.close()

        assert asyncio.run(twice()) == [b"ok", b"ok"]
        assert asyncio.run(twice_and_close()) == [b"ok", b"ok"]  # the first loop is gone: its connections too
    finally:
        server.shutdown()
        server.server_close()
