"""Websocket v5 exec and tunneled port-forward answered over SPDY (`kubelet/streamtranslate.py`),
against a scripted SPDY runtime (`tests/unit/client/spdy_peer.py`) and aiohttp's websocket client."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import msgspec
import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from kubecore.kubelet import streamtranslate as st
from kubecore.client import spdy
from kubecore.client.upgrade import Target, UpgradeError, dial_upgrade
from kubecore.kubelet.server import stream_flags
from tests.unit.client.spdy_peer import Peer, replies, running

EXIT_3 = msgspec.json.encode({"metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
                              "details": {"causes": [{"reason": "ExitCode", "message": "3"}]}})


def test_v5_messages_are_a_channel_byte_and_a_payload() -> None:
    assert st.channel_message(st.STDOUT, b"hi") == b"\x01hi"
    assert st.split_message(b"\x00data") == (st.STDIN, b"data")
    assert st.split_message(st.channel_message(st.CLOSE, bytes((st.STDIN,)))) == (255, b"\x00")
    assert st.split_message(b"") == (-1, b"")


def test_the_spdy_streams_follow_the_query_error_first() -> None:
    streams = st.ExecStreams(*stream_flags({"input": "1", "output": "1", "error": "1"}))
    assert streams.spdy_types() == ["error", "stdin", "stdout", "stderr"]
    tty = st.ExecStreams(*stream_flags({"output": "1", "error": "1", "tty": "1"}))
    assert (tty.stderr, tty.spdy_types()) == (False, ["error", "stdout", "resize"])


def test_only_the_protocols_old_runtimes_lack_are_translated() -> None:
    def req(upgrade: str, *protocols: str) -> Any:
        headers = {"Upgrade": upgrade, "Connection": "Upgrade"}
        if protocols:
            headers["Sec-WebSocket-Protocol"] = ", ".join(protocols)
        return make_mocked_request("GET", "/x", headers=headers)

    assert st.translation_for(req("websocket", "v5.channel.k8s.io", "v4.channel.k8s.io"), "exec") == st.V5
    assert st.translation_for(req("websocket", "v4.channel.k8s.io"), "exec") is None
    assert st.translation_for(req("SPDY/3.1"), "exec") is None
    assert st.translation_for(req("websocket", st.TUNNEL), "portForward") == st.TUNNEL
    assert st.translation_for(req("websocket", "v5.channel.k8s.io"), "portForward") is None
    assert st.translation_for(req("websocket", st.TUNNEL), "attach") is None


def runtime(peer: Peer, frame: spdy.Frame) -> list[spdy.Frame]:
    """remotecommand as a runtime serves it: stdin echoed to stdout; at stdin's end, a line on
    stderr, every stream finished and exit code 3 on the error stream; resizes recorded."""
    if not isinstance(frame, spdy.Data) or peer.streams.get(frame.stream_id) != "stdin":
        return replies(peer, frame)
    out: list[spdy.Frame] = [spdy.Data(peer.stream_of("stdout"), frame.data)] if frame.data else []
    if frame.fin:
        out += [spdy.Data(peer.stream_of("stderr"), b"done\n"),
                spdy.Data(peer.stream_of("stdout"), b"", spdy.FLAG_FIN),
                spdy.Data(peer.stream_of("stderr"), b"", spdy.FLAG_FIN),
                spdy.Data(peer.stream_of("error"), EXIT_3, spdy.FLAG_FIN)]
    return out


@contextlib.asynccontextmanager
async def kubelet_app(target: Target) -> AsyncIterator[str]:
    """An aiohttp app serving /exec and /portforward through the translator to `target` (a runtime)."""
    async def exec_(request: web.Request) -> web.StreamResponse:
        return await st.translate_exec(request, target, st.ExecStreams(*stream_flags(request.query)))

    async def forward(request: web.Request) -> web.StreamResponse:
        return await st.tunnel_port_forward(request, target)

    app = web.Application()
    app.router.add_get("/exec", exec_)
    app.router.add_get("/portforward", forward)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def collect(ws: aiohttp.ClientWebSocketResponse) -> dict[int, bytes]:
    got: dict[int, bytes] = {}
    async for msg in ws:
        assert msg.type == aiohttp.WSMsgType.BINARY
        channel, payload = st.split_message(msg.data)
        got[channel] = got.get(channel, b"") + payload
    return got


async def test_a_v5_exec_reaches_the_spdy_runtime_and_ends_with_its_status() -> None:
    peer = Peer(runtime)
    async with running(peer) as (host, port), kubelet_app(Target(host, port, "/exec/ns/p/c?input=1")) as url, \
            aiohttp.ClientSession() as http:
        query = "?input=1&output=1&error=1"
        async with http.ws_connect(url + "/exec" + query, protocols=(st.V5,)) as ws:
            assert ws.protocol == st.V5
            await ws.send_bytes(b"\x00hello ")
            await ws.send_bytes(b"\x00world\n")
            await ws.send_bytes(b"\xff\x00")  # stdin is finished
            got = await asyncio.wait_for(collect(ws), 10)
            assert ws.close_code == aiohttp.WSCloseCode.OK
    assert got == {st.STDOUT: b"hello world\n", st.STDERR: b"done\n", st.ERROR: EXIT_3}
    head = peer.request_heads[0]
    assert head.startswith("POST /exec/ns/p/c?input=1 HTTP/1.1") and "Upgrade: SPDY/3.1" in head
    assert "X-Stream-Protocol-Version: v4.channel.k8s.io" in head
    assert list(peer.streams.values()) == ["error", "stdin", "stdout", "stderr"]


async def test_resizes_go_to_the_resize_stream_and_a_quiet_end_is_success() -> None:
    def tty(peer: Peer, frame: spdy.Frame) -> list[spdy.Frame]:
        if isinstance(frame, spdy.Data) and peer.streams.get(frame.stream_id) == "resize":
            return [spdy.Data(peer.stream_of(k), b"", spdy.FLAG_FIN) for k in ("stdout", "error")]
        return replies(peer, frame)

    peer = Peer(tty)
    async with running(peer) as (host, port), kubelet_app(Target(host, port, "/exec/ns/p/c")) as url, \
            aiohttp.ClientSession() as http:
        async with http.ws_connect(url + "/exec?output=1&tty=1", protocols=(st.V5,)) as ws:
            await ws.send_bytes(b'\x04{"Width":80,"Height":24}')
            got = await asyncio.wait_for(collect(ws), 10)
    assert msgspec.json.decode(got[st.ERROR])["status"] == "Success"
    resized = [f for f in peer.received if isinstance(f, spdy.Data) and peer.streams[f.stream_id] == "resize"]
    assert resized[0].data == b'{"Width":80,"Height":24}'


async def test_a_runtime_that_goes_away_mid_exec_is_a_failure_not_success() -> None:
    def gone(peer: Peer, frame: spdy.Frame) -> list[spdy.Frame]:
        if isinstance(frame, spdy.Data) and peer.streams.get(frame.stream_id) == "stdin":
            return [spdy.GoAway(0, 0)]
        return replies(peer, frame)

    async with running(Peer(gone)) as (host, port), kubelet_app(Target(host, port, "/exec/ns/p/c")) as url, \
            aiohttp.ClientSession() as http:
        async with http.ws_connect(url + "/exec?input=1&output=1&error=1", protocols=(st.V5,)) as ws:
            await ws.send_bytes(b"\x00hello\n")
            got = await asyncio.wait_for(collect(ws), 10)
    status = msgspec.json.decode(got[st.ERROR])
    assert status["status"] == "Failure" and status["reason"] == "InternalError", status
    assert "went away" in status["message"]


async def test_the_runtimes_refusal_reaches_the_client_before_any_websocket() -> None:
    async with running(Peer(runtime, upgrade_status=404)) as (host, port), \
            kubelet_app(Target(host, port, "/exec/ns/p/c")) as url, aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.WSServerHandshakeError) as e:
            await http.ws_connect(url + "/exec?output=1", protocols=(st.V5,))
        assert e.value.status == 404


async def test_another_remotecommand_version_is_an_error() -> None:
    async with running(Peer(runtime, stream_protocol="v3.channel.k8s.io")) as (host, port):
        request = make_mocked_request("GET", "/exec")
        with pytest.raises(st.TranslateError, match="v3.channel.k8s.io"):
            await st.translate_exec(request, Target(host, port, "/exec/ns/p/c"), st.ExecStreams(False, True, False,
                                                                                                 False))


async def test_port_forward_bytes_tunnel_through_unchanged() -> None:
    frames_seen: list[spdy.Frame] = []

    def forwarder(peer: Peer, frame: spdy.Frame) -> list[spdy.Frame]:
        frames_seen.append(frame)
        if isinstance(frame, spdy.Data):
            return [spdy.Data(frame.stream_id, frame.data[::-1])]
        return replies(peer, frame)

    peer = Peer(forwarder, stream_protocol="portforward.k8s.io")
    async with running(peer) as (host, port), kubelet_app(Target(host, port, "/portForward/ns/p")) as url, \
            aiohttp.ClientSession() as http:
        async with http.ws_connect(url + "/portforward", protocols=(st.TUNNEL,)) as ws:
            assert ws.protocol == st.TUNNEL
            compressor, reader = spdy.HeaderCompressor(), spdy.FrameReader()
            syn = spdy.encode(spdy.SynStream(1, {"streamtype": ["data"], "port": ["80"]}), compressor=compressor)
            await ws.send_bytes(syn[:5])  # message boundaries mean nothing inside the tunnel
            await ws.send_bytes(syn[5:] + spdy.encode(spdy.Data(1, b"abc")))
            frames: list[spdy.Frame] = []
            while len(frames) < 2:
                msg = await asyncio.wait_for(ws.receive(), 10)
                frames += reader.feed(msg.data)
    assert frames == [spdy.SynReply(1, {}), spdy.Data(1, b"cba")]
    assert "X-Stream-Protocol-Version: portforward.k8s.io" in peer.request_heads[0]
    assert peer.streams == {1: "data"}


async def test_a_refusal_cut_short_is_an_upgrade_error_naming_the_runtime() -> None:
    async def cut_short(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 100\r\n\r\nshort")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(cut_short, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(UpgradeError, match=f"unreadable 404 answer from 127.0.0.1:{port}"):
            await dial_upgrade(Target("127.0.0.1", port, "/exec/ns/p/c"), protocol="SPDY/3.1", headers=[])
    finally:
        server.close()
        await server.wait_closed()
