"""Passing an HTTP upgrade through to another server, byte for byte (upstream's
UpgradeAwareHandler, as the API server and the kubelet use it for exec, attach and port-forward).

    return await proxy_upgrade(request, Target("10.0.0.5", 10250, "/exec/ns/pod/c?command=ls&output=1"))

What it does with an aiohttp request:
1. Opens a TCP connection to the target and sends the request's method, the target's path and
   the request's headers (the ones that make the upgrade: Connection, Upgrade, Sec-WebSocket-*,
   X-Stream-Protocol-Version, ...; not Host, Authorization, Cookie or the body framing).
2. Reads the target's response head. Not 101: the response (status, content type, body) is
   answered to the client as it is — a runtime's or kubelet's error reaches kubectl unchanged.
3. 101 Switching Protocols: the same head goes to the client, and from then on bytes are copied
   both ways without looking at them (SPDY/3.1 and websocket alike: the protocol is between the
   client and the target). It ends when either side closes; the other is then closed too.

Errors before anything was sent to the client raise `UpgradeError` (the caller answers them in
its own format). Nothing here is specific to Kubernetes.

`dial_upgrade(target, protocol=..., headers=...)` is the client half alone, for a caller that
speaks the new protocol itself (`kubelet/streamtranslate.py` opens SPDY/3.1 to a runtime): the
upgraded connection on 101, `UpgradeRefused` carrying the target's answer otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any, cast

from aiohttp import web

CONNECT_TIMEOUT = 10.0
HEAD_TIMEOUT = 60.0
MAX_HEAD = 64 * 1024
MAX_ERROR_BODY = 1 << 20
COPY_CHUNK = 64 * 1024
_DROPPED = frozenset({"host", "authorization", "cookie", "content-length", "transfer-encoding", "expect",
                      "proxy-authorization", "te", "trailer", "keep-alive"})


class UpgradeError(Exception):
    """The target could not be reached, or did not answer with an HTTP response."""


@dataclass(frozen=True)
class Target:
    host: str
    port: int
    path: str
    """Path and query, as sent in the request line."""


class _Feed:
    """The aiohttp protocol's payload parser once the connection is upgraded: every byte the client
    sends goes to the target."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.eof = asyncio.get_running_loop().create_future()

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        if not self.writer.is_closing():
            self.writer.write(data)
        return False, b""

    def feed_eof(self) -> None:
        if not self.eof.done():
            self.eof.set_result(None)
        if not self.writer.is_closing() and self.writer.can_write_eof():
            with contextlib.suppress(OSError):
                self.writer.write_eof()


def _request_head(request: web.BaseRequest, target: Target, body: bytes) -> bytes:
    lines = [f"{request.method} {target.path} HTTP/1.1", f"Host: {target.host}:{target.port}"]
    for name, value in request.headers.items():
        if name.lower() not in _DROPPED:
            lines.append(f"{name}: {value}")
    if body or request.method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _parse_head(raw: bytes) -> tuple[int, str, list[tuple[str, str]]]:
    lines = raw.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise UpgradeError(f"the target answered something that is not HTTP: {lines[0][:80]!r}")
    headers = []
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers.append((name.strip(), value.strip()))
    return int(parts[1]), parts[2] if len(parts) > 2 else "", headers


def _header(headers: list[tuple[str, str]], name: str, default: str = "") -> str:
    """The first value of header `name` (any case)."""
    lname = name.lower()
    return next((v for k, v in headers if k.lower() == lname), default)


async def _read_body(reader: asyncio.StreamReader, headers: list[tuple[str, str]]) -> bytes:
    length = _header(headers, "Content-Length")
    if length:
        return await reader.readexactly(min(int(length), MAX_ERROR_BODY))
    if "chunked" not in _header(headers, "Transfer-Encoding").lower():
        return await reader.read(MAX_ERROR_BODY)
    out = bytearray()
    while len(out) < MAX_ERROR_BODY:
        size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
        if size == 0:
            break
        out += await reader.readexactly(size)
        await reader.readline()
    return bytes(out)


async def _exchange(target: Target, head: bytes) -> tuple[asyncio.StreamReader, asyncio.StreamWriter,
                                                             tuple[int, str, list[tuple[str, str]]]]:
    """Connect, send a request head (and body) and read the response head."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(target.host, target.port), CONNECT_TIMEOUT)
    except (OSError, asyncio.TimeoutError) as e:
        raise UpgradeError(f"dial tcp {target.host}:{target.port}: {e or 'timed out'}") from None
    try:
        writer.write(head)
        try:
            raw = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError, OSError) as e:
            raise UpgradeError(f"no response from {target.host}:{target.port}: {e!r}") from None
        return reader, writer, _parse_head(raw)
    except BaseException:
        writer.close()
        raise


async def _refusal(reader: asyncio.StreamReader, status: int, headers: list[tuple[str, str]], *,
                   target: Target) -> web.Response:
    """A target's non-101 answer, as a response for the client; UpgradeError when that answer
    cannot be read (cut short, or an unreadable length)."""
    try:
        data = await asyncio.wait_for(_read_body(reader, headers), HEAD_TIMEOUT)
    except (asyncio.IncompleteReadError, asyncio.TimeoutError, ValueError, OSError) as e:
        raise UpgradeError(f"unreadable {status} answer from {target.host}:{target.port}: {e!r}") from None
    ctype = _header(headers, "Content-Type", "text/plain; charset=utf-8")
    return web.Response(status=status, body=data, headers={"Content-Type": ctype})


async def proxy_upgrade(request: web.Request, target: Target) -> web.StreamResponse:
    """Pass `request` through to `target` (see the module docstring)."""
    body = await request.read() if request.can_read_body else b""
    reader, writer, (status, reason, headers) = await _exchange(target, _request_head(request, target, body) + body)
    try:
        if status != 101:
            return await _refusal(reader, status, headers, target=target)
        return await _relay(request, reader, writer, status=status, reason=reason, headers=headers)
    finally:
        writer.close()


@dataclass(frozen=True)
class Upgraded:
    """A connection the target switched to another protocol: raw bytes from here on."""
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    headers: list[tuple[str, str]]

    def header(self, name: str) -> str:
        return _header(self.headers, name)


class UpgradeRefused(Exception):
    """The target answered without switching protocols; `response` is that answer for the client."""

    def __init__(self, response: web.Response) -> None:
        super().__init__(f"the target answered {response.status}")
        self.response = response


async def dial_upgrade(target: Target, *, protocol: str, headers: list[tuple[str, str]]) -> Upgraded:
    """POST to `target` asking to switch to `protocol` (e.g. SPDY/3.1) with extra `headers`; the
    caller closes the writer. UpgradeError when unreachable, UpgradeRefused when not 101."""
    lines = [f"POST {target.path} HTTP/1.1", f"Host: {target.host}:{target.port}", "Connection: Upgrade",
             f"Upgrade: {protocol}", "Content-Length: 0", *(f"{k}: {v}" for k, v in headers)]
    reader, writer, (status, _, answered) = await _exchange(target, ("\r\n".join(lines) + "\r\n\r\n").encode())
    if status == 101:
        return Upgraded(reader, writer, answered)
    try:
        raise UpgradeRefused(await _refusal(reader, status, answered, target=target))
    finally:
        writer.close()


async def _relay(request: web.Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                 status: int, reason: str, headers: list[tuple[str, str]]) -> web.StreamResponse:
    resp = web.StreamResponse(status=status, reason=reason or None)
    for name, value in headers:
        if name.lower() not in ("date", "server", "content-length"):
            resp.headers.add(name, value)
    feed = _Feed(writer)
    cast(Any, request.protocol).set_parser(feed)
    await resp.prepare(request)
    while True:
        data = await reader.read(COPY_CHUNK)
        if not data:
            break
        await resp.write(data)
    transport = request.transport
    if transport is not None:
        transport.close()
    return resp
