"""The websocket protocols of current kubectl in front of a runtime streaming server that speaks
only SPDY/3.1 and the pre-1.29 websocket protocols (upstream's StreamTranslatorProxy and
port-forward tunneling, which upstream runs in the API server; kubecore's kubelet server runs it,
as the one that knows its runtime).

kubectl 1.30+ first asks for a websocket: `v5.channel.k8s.io` for exec/attach and
`SPDY/3.1+portforward.k8s.io` for port-forward. containerd 1.6/1.7's CRI streaming server
(Kubernetes 1.24-1.28 libraries) refuses both with 403, and kubectl retries with SPDY. The kubelet
server answers them itself (`KubeletServer._stream`, for runtimes whose
`streaming_needs_translation` is true):

- exec/attach with `v5.channel.k8s.io` offered: the websocket is accepted with that protocol and
  a SPDY/3.1 session is opened to the runtime's URL (remotecommand `v4.channel.k8s.io`: one
  stream per channel, made with a `streamType` header: error, stdin, stdout, stderr, resize).
  Each websocket message is a channel byte and a payload: stdin 0, stdout 1, stderr 2, error 3 (a
  metav1.Status JSON: Success, or NonZeroExitCode with the exit code, or an InternalError Failure
  when the runtime's connection ends before it reported the outcome), resize 4 (the terminal
  size JSON, passed as it is), and 255 = close, whose payload is the id of a stream the client
  has finished (stdin: the SPDY stdin stream is half-closed, so `echo hi | kubectl exec -i pod --
  cat` ends). Once stdout, stderr and error have all ended the websocket is closed normally (1000).
- port-forward with `SPDY/3.1+portforward.k8s.io` offered: the websocket is accepted and the
  runtime is asked for a SPDY upgrade (`portforward.k8s.io`); from then on every binary message
  is a piece of the client's SPDY byte stream and goes to the runtime as it is, and the runtime's
  bytes come back as binary messages (client-go's TunnelingConnection).

The runtime is dialled before the websocket is accepted, so its refusal reaches the client as
that HTTP answer. Offers without those protocols (SPDY, the older websocket protocols, which the
runtime serves itself) are not handled here.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

import aiohttp
import msgspec
from aiohttp import web

from kubecore.client.spdy_session import SpdySession, SpdyStream, SpdyStreamError
from kubecore.client.upgrade import Target, UpgradeRefused, Upgraded, dial_upgrade

log = logging.getLogger(__name__)
V5 = "v5.channel.k8s.io"
REMOTECOMMAND_SPDY = "v4.channel.k8s.io"
TUNNEL = "SPDY/3.1+portforward.k8s.io"
PORTFORWARD_SPDY = "portforward.k8s.io"
STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
READ_CHUNK = 64 * 1024
_ENDED = (ConnectionError, RuntimeError, SpdyStreamError)
"""How a copy ends when one side goes away (aiohttp raises RuntimeError/ConnectionResetError
for a closed websocket)."""
_SUCCESS = msgspec.json.encode({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"})


def _failure(why: str) -> bytes:
    """The Status of a stream the runtime dropped before reporting the command's outcome."""
    return msgspec.json.encode({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                "message": f"the container runtime's stream ended early: {why}",
                                "reason": "InternalError", "code": 500})


class TranslateError(Exception):
    """The runtime switched protocols but not to what the translation needs."""


@dataclass(frozen=True)
class ExecStreams:
    """The streams of an exec/attach (the kubelet's `stream_flags`: a tty has no stderr)."""
    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool

    def spdy_types(self) -> list[str]:
        """The SPDY streams to open, the error stream first (as client-go does)."""
        wanted = (("stdin", self.stdin), ("stdout", self.stdout), ("stderr", self.stderr), ("resize", self.tty))
        return ["error", *(name for name, on in wanted if on)]


_CHANNEL_OF = {"stdout": STDOUT, "stderr": STDERR}


def offered_protocols(request: web.BaseRequest) -> list[str]:
    """The websocket subprotocols a request offers (none unless it asks for a websocket)."""
    if request.headers.get("Upgrade", "").lower() != "websocket":
        return []
    joined = ",".join(request.headers.getall("Sec-WebSocket-Protocol", []))
    return [p.strip() for p in joined.split(",") if p.strip()]


def translation_for(request: web.BaseRequest, kind: str) -> str | None:
    """The websocket protocol this module answers for the request, or None (pass it through)."""
    offered = offered_protocols(request)
    wanted = TUNNEL if kind == "portForward" else V5
    return wanted if wanted in offered else None


def channel_message(channel: int, payload: bytes) -> bytes:
    return bytes((channel,)) + payload


def split_message(message: bytes) -> tuple[int, bytes]:
    """(channel, payload) of a v5 message; an empty message is channel -1."""
    return (message[0], message[1:]) if message else (-1, b"")


def _websocket(protocol: str) -> web.WebSocketResponse:
    return web.WebSocketResponse(protocols=(protocol,), compress=False, max_msg_size=0, autoping=True)


async def _spdy_to_runtime(target: Target, protocol: str) -> Upgraded:
    up = await dial_upgrade(target, protocol="SPDY/3.1", headers=[("X-Stream-Protocol-Version", protocol)])
    chosen = up.header("X-Stream-Protocol-Version")
    if chosen != protocol:
        up.writer.close()
        raise TranslateError(f"the runtime chose stream protocol {chosen!r}, not {protocol!r}")
    return up


# -- exec / attach ---------------------------------------------------------------------------------
async def translate_exec(request: web.Request, target: Target, streams: ExecStreams) -> web.StreamResponse:
    """Serve a v5 websocket exec/attach over SPDY to `target` (see the module docstring).
    UpgradeError/TranslateError/SpdyStreamError when the runtime cannot be used."""
    try:
        up = await _spdy_to_runtime(target, REMOTECOMMAND_SPDY)
    except UpgradeRefused as e:
        return e.response
    session = SpdySession(up.reader, up.writer)
    try:
        opened = {kind: await session.open_stream({"streamtype": [kind]}) for kind in streams.spdy_types()}
        ws = _websocket(V5)
        await ws.prepare(request)
        log.debug("exec: websocket %s translated to SPDY %s", V5, REMOTECOMMAND_SPDY)
        await _pump_exec(ws, opened)
        return ws
    finally:
        await session.close()


async def _pump_exec(ws: web.WebSocketResponse, opened: dict[str, SpdyStream]) -> None:
    lock = asyncio.Lock()

    async def send(channel: int, payload: bytes) -> None:
        async with lock:
            await ws.send_bytes(channel_message(channel, payload))

    outputs = [_copy_output(opened[k], _CHANNEL_OF[k], send) for k in ("stdout", "stderr") if k in opened]
    finished = asyncio.ensure_future(_finish_outputs(opened["error"], outputs, send))
    inbound = asyncio.ensure_future(_copy_input(ws, opened))
    try:
        await asyncio.wait((finished, inbound), return_when=asyncio.FIRST_COMPLETED)
        if finished.done():
            finished.result()
            await ws.close(code=aiohttp.WSCloseCode.OK)
    except _ENDED as e:  # the client or the runtime went away mid-stream
        log.debug("exec websocket ended: %s", e)
    finally:
        await _cancel(finished, inbound)


async def _cancel(*tasks: asyncio.Future[None]) -> None:
    for task in tasks:
        task.cancel()
        try:
            await task
        except (asyncio.CancelledError, *_ENDED) as e:
            log.debug("stream copy ended: %r", e)


async def _copy_output(stream: SpdyStream, channel: int, send: Any) -> None:
    while chunk := await stream.read():
        await send(channel, chunk)


async def _finish_outputs(error: SpdyStream, outputs: list[Any], send: Any) -> None:
    """Copy stdout/stderr until they end, then the error stream's Status as one message."""
    status_parts: list[bytes] = []

    async def read_error() -> None:
        while chunk := await error.read():
            status_parts.append(chunk)

    await asyncio.gather(read_error(), *outputs)
    await send(ERROR, b"".join(status_parts) or (_SUCCESS if error.aborted is None else _failure(error.aborted)))


async def _copy_input(ws: web.WebSocketResponse, opened: dict[str, SpdyStream]) -> None:
    """Client messages to the SPDY streams, until the client closes the websocket."""
    async for msg in ws:
        if msg.type != aiohttp.WSMsgType.BINARY:
            continue
        channel, payload = split_message(msg.data)
        if channel == STDIN and "stdin" in opened:
            await opened["stdin"].write(payload)
        elif channel == RESIZE and "resize" in opened:
            await opened["resize"].write(payload)
        elif channel == CLOSE and payload[:1] == bytes((STDIN,)) and "stdin" in opened:
            opened["stdin"].close_write()


# -- port-forward ----------------------------------------------------------------------------------
async def tunnel_port_forward(request: web.Request, target: Target) -> web.StreamResponse:
    """Serve a tunneled SPDY port-forward (see the module docstring)."""
    try:
        up = await _spdy_to_runtime(target, PORTFORWARD_SPDY)
    except UpgradeRefused as e:
        return e.response
    try:
        ws = _websocket(TUNNEL)
        await ws.prepare(request)
        log.debug("portforward: websocket %s tunneled to SPDY %s", TUNNEL, PORTFORWARD_SPDY)
        down = asyncio.ensure_future(_runtime_to_client(up, ws))
        upward = asyncio.ensure_future(_client_to_runtime(ws, up))
        try:
            await asyncio.wait((down, upward), return_when=asyncio.FIRST_COMPLETED)
        finally:
            await _cancel(down, upward)
            await ws.close(code=aiohttp.WSCloseCode.OK)
        return ws
    finally:
        up.writer.close()


async def _runtime_to_client(up: Upgraded, ws: web.WebSocketResponse) -> None:
    while chunk := await up.reader.read(READ_CHUNK):
        await ws.send_bytes(chunk)


async def _client_to_runtime(ws: web.WebSocketResponse, up: Upgraded) -> None:
    async for msg in ws:
        if msg.type == aiohttp.WSMsgType.BINARY:
            up.writer.write(msg.data)
            await up.writer.drain()
