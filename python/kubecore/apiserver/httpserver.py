"""The lean HTTP/1.1 server: the API server's listening socket, answering plain requests itself
and handing anything else to aiohttp.

aiohttp spends about 65 µs of the event loop's thread on each request before and after the
handler runs (its parser's message objects, a payload stream, a task per request, the response
writer); a create's whole budget at 5,000/s is 200 µs. This protocol reads a complete request
from the socket (headers, then a Content-Length body), builds a `LeanRequest` (a `web.Request`
that the handler chain uses unchanged), runs the chain and writes the `web.Response` it returns:
about 20 µs of HTTP work per request.

What it serves itself — every request whose framing is plain:
- HTTP/1.1 or HTTP/1.0, a Content-Length body (or none) of at most MAX_BODY bytes;
- no Transfer-Encoding, Upgrade, Expect;
- not a watch (``?watch=`` or a ``/watch/`` path) nor a pod's log/exec/attach/portforward: those
  are long streams (or upgrades); aiohttp writes them.
A plain GET of one object first tries the read fast path (`fastpath.FastReads`).

Anything else — and everything after it on the same connection — goes to aiohttp: the
connection's transport is given to a new aiohttp request handler along with the bytes not yet
consumed, and that handler owns the connection from then on (it parses, answers errors, writes
streams). Responses stay in request order: while a request is being served, later bytes on the
connection wait in the buffer.

Large bodies (a LIST of many objects) are written with flow control: `LeanRequest.send` waits
while the transport's buffer is above its high-water mark.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from email.utils import formatdate
from typing import Any, cast
from urllib.parse import parse_qsl, unquote

from aiohttp import web, web_protocol
from multidict import CIMultiDict, CIMultiDictProxy, MultiDict, MultiDictProxy

from kubecore.api import errors
from kubecore.apiserver.fastpath import FastReads

log = logging.getLogger("kubecore.apiserver.http")
Handler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]
Fallback = Callable[[], web_protocol.RequestHandler]
MAX_BODY = 4 * 1024 * 1024  # larger bodies go to aiohttp, whose client_max_size answers 413
MAX_HEAD = 64 * 1024  # request line + headers; beyond this aiohttp answers (431 / 400)
IDLE_TIMEOUT = 90.0  # a keep-alive connection with no request for this long is closed (Go's IdleTimeout in kube-apiserver)
_EMPTY_QUERY: MultiDictProxy[str] = MultiDictProxy(MultiDict())
_HANDED = (b"transfer-encoding", b"upgrade", b"expect")


class LeanRequest(web.Request):
    """A `web.Request` built from a parsed request, without aiohttp's message and payload objects.
    It has what the handler chain reads: method, path, query, headers, content type and length,
    the body, the per-request state, and `send` for streamed bodies."""

    def __init__(self, conn: LeanProtocol, method: str, target: str, headers: CIMultiDictProxy[str],
                 body: bytes) -> None:  # noqa: D107 - aiohttp's constructor is skipped on purpose
        path, _, qs = target.partition("?")
        self._conn = conn
        self._method = method
        self._path = unquote(path) if "%" in path else path
        self._qs = qs
        self._query = None if qs else _EMPTY_QUERY
        self._headers = headers
        self._body = body
        self._state: dict[Any, Any] = {}
        self._cache: dict[str, Any] = {}

    @property
    def method(self) -> str:
        return self._method

    @property
    def path(self) -> str:
        return self._path

    @property
    def query_string(self) -> str:
        return self._qs

    @property
    def query(self) -> MultiDictProxy[str]:
        q = self._query
        if q is None:
            q = self._query = MultiDictProxy(MultiDict(parse_qsl(self._qs, keep_blank_values=True)))
        return q

    # the per-request state, without aiohttp's check for a first use of each string key
    def __setitem__(self, key: Any, value: Any) -> None:
        self._state[key] = value

    def __getitem__(self, key: Any) -> Any:
        return self._state[key]

    def __contains__(self, key: object) -> bool:
        return key in self._state

    def get(self, key: Any, default: Any = None) -> Any:
        return self._state.get(key, default)

    @property
    def headers(self) -> CIMultiDictProxy[str]:
        return self._headers

    @property
    def host(self) -> str:
        return self._headers.get("Host") or "localhost"

    @property
    def can_read_body(self) -> bool:
        return bool(self._body)

    @property
    def content_type(self) -> str:
        raw = self._headers.get("Content-Type")
        if raw is None:
            return "application/octet-stream"
        return raw.partition(";")[0].strip().lower()

    async def read(self) -> bytes:
        return self._body

    async def send(self, status: int, headers: dict[str, str], chunks: Iterable[bytes], length: int) -> web.StreamResponse:
        """Writes a response of `length` bytes from `chunks`, waiting for the socket between them;
        returns a response object that tells the connection it was already written."""
        await self._conn.write_streamed(status, headers, chunks, length)
        return Written(status=status)


class Written(web.StreamResponse):
    """What `LeanRequest.send` returns: the response is already on the wire."""


class LeanProtocol(asyncio.Protocol):
    """One client connection (see the module docstring)."""

    def __init__(self, *, handler: Handler, fallback: Fallback, fast: FastReads | None,
                 connections: set[LeanProtocol]) -> None:
        self.handler, self.fallback, self.fast = handler, fallback, fast
        self.connections = connections
        self.transport: asyncio.Transport | None = None
        self.buf = b""
        self.busy = False  # a request is being served: later bytes wait in buf
        self.handed = False
        self._paused = False
        self._reading_paused = False
        self._drain: asyncio.Future[None] | None = None
        self._loop = asyncio.get_running_loop()
        self.last_active = self._loop.time()

    # -- asyncio.Protocol ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass it
        self.connections.add(self)

    def connection_lost(self, exc: BaseException | None) -> None:
        self.connections.discard(self)
        self.transport = None
        self._wake()

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake()

    def data_received(self, data: bytes) -> None:
        self.buf = self.buf + data if self.buf else data
        self.last_active = self._loop.time()
        if not self.busy:
            self._consume()
        elif len(self.buf) > MAX_BODY + MAX_HEAD and self.transport is not None and not self._reading_paused:
            self._reading_paused = True  # a client sending far ahead of its responses waits
            self.transport.pause_reading()

    # -- requests --------------------------------------------------------------------------
    def _consume(self) -> None:
        """Serves the complete requests at the front of the buffer, in order; stops at an
        incomplete one, at one being served, or after handing the connection to aiohttp."""
        while self.buf and not self.busy and self.transport is not None:
            buf = self.buf
            head_end = buf.find(b"\r\n\r\n")
            if head_end < 0:
                if len(buf) > MAX_HEAD:
                    self._hand_over()
                return
            parsed = _parse_head(buf, head_end)
            if parsed is None:
                self._hand_over()
                return
            method, target, keep_alive, length, headers = parsed
            end = head_end + 4 + length
            if len(buf) < end:
                return
            if method == "GET" and (_is_watch(target) or _is_pod_stream(target)):
                self._hand_over()
                return
            if method == "GET" and length == 0 and self.fast is not None and self.fast.enabled:
                out = self.fast.serve(buf[:end])
                if out is not None:
                    self.buf = buf[end:]
                    self.transport.write(out)
                    if not keep_alive:
                        self.transport.close()
                    continue
            self.buf = buf[end:]
            request = LeanRequest(self, method, target, headers, buf[head_end + 4:end])
            self.busy = True
            self._loop.create_task(self._serve(request, keep_alive=keep_alive))

    async def _serve(self, request: LeanRequest, *, keep_alive: bool) -> None:
        try:
            try:
                resp = await self.handler(request)
            except web.HTTPException as e:
                resp = e
            except ConnectionResetError:
                return
            except Exception as e:  # noqa: BLE001 - the chain answers its own errors; this is a bug
                log.error("internal error serving %s %s", request.method, request.path, exc_info=e)
                resp = web.Response(body=errors.internal("an internal error occurred; see the server log").body(),
                                    status=500, content_type="application/json")
            if type(resp) is not Written and self.transport is not None:  # (isinstance on aiohttp's ABCs is slow)
                self.transport.write(_serialize(resp, head=request.method == "HEAD"))
        finally:
            self.busy = False
            self.last_active = self._loop.time()
            if self._reading_paused and self.transport is not None:
                self._reading_paused = False
                self.transport.resume_reading()
        if self.transport is None:
            return
        if not keep_alive:
            self.transport.close()
        elif self.buf:
            self._consume()

    def _hand_over(self) -> None:
        """aiohttp owns this connection from now on, starting with the unconsumed bytes."""
        transport, data = self.transport, self.buf
        assert transport is not None
        self.buf, self.handed = b"", True
        self.connections.discard(self)
        handler = self.fallback()
        transport.set_protocol(handler)
        handler.connection_made(transport)
        if data:
            handler.data_received(data)

    # -- streamed responses ------------------------------------------------------------------
    def _wake(self) -> None:
        if self._drain is not None and not self._drain.done():
            self._drain.set_result(None)

    async def write_streamed(self, status: int, headers: dict[str, str], chunks: Iterable[bytes], length: int) -> None:
        if self.transport is None:
            raise ConnectionResetError("the client closed the connection")
        self.transport.write(_head(status, web.Response(status=status).reason, headers.items(), length))
        for chunk in chunks:
            if self.transport is None:
                raise ConnectionResetError("the client closed the connection")
            self.transport.write(chunk)
            while self._paused and self.transport is not None:
                self._drain = self._loop.create_future()
                await self._drain


def _parse_head(buf: bytes, head_end: int) -> tuple[str, str, bool, int, CIMultiDictProxy[str]] | None:
    """(method, target, keep-alive, body length, headers) of a request aiohttp need not see, or None."""
    line_end = buf.find(b"\r\n", 0, head_end + 2)
    parts = buf[:line_end].split(b" ")
    if len(parts) != 3 or parts[2] not in (b"HTTP/1.1", b"HTTP/1.0"):
        return None
    try:
        method, target = parts[0].decode("ascii"), parts[1].decode("ascii")
    except UnicodeDecodeError:
        return None
    if not method.isalpha() or not method.isupper() or not target.startswith("/"):
        return None
    block = buf[line_end + 2:head_end]
    parsed = _BLOCKS.get(block) or _parse_headers(block)
    if parsed is None:
        return None
    length, close, keep, headers = parsed
    keep_alive = not close and (keep or parts[2] == b"HTTP/1.1")
    return method, target, keep_alive, length, headers


# A client sends the same header block on every request (only Content-Length varies, over a few
# values): each distinct block is parsed once, into a read-only mapping the requests share.
_BLOCKS: dict[bytes, tuple[int, bool, bool, CIMultiDictProxy[str]]] = {}


def _parse_headers(block: bytes) -> tuple[int, bool, bool, CIMultiDictProxy[str]] | None:
    """(body length, Connection says close, Connection says keep-alive, headers) of a header
    block, or None when aiohttp must serve the request."""
    headers: CIMultiDict[str] = CIMultiDict()
    length = 0
    close = keep = False
    for line in block.split(b"\r\n"):
        name, sep, value = line.partition(b":")
        lname = name.lower()
        if not sep or not name or b" " in name or b"\t" in name or lname in _HANDED:
            return None
        try:
            text = value.strip().decode("latin-1")
        except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
            return None
        if lname == b"content-length":
            if not text.isdigit() or (length and int(text) != length):
                return None
            length = int(text)
        elif lname == b"connection":
            tokens = {t.strip().lower() for t in text.split(",")}
            close = close or "close" in tokens
            keep = keep or "keep-alive" in tokens
        headers.add(name.decode("latin-1"), text)
    if length > MAX_BODY:
        return None
    if len(_BLOCKS) >= 512:
        _BLOCKS.clear()
    parsed = _BLOCKS[block] = (length, close, keep, CIMultiDictProxy(headers))
    return parsed


def _is_watch(target: str) -> bool:
    path, _, qs = target.partition("?")
    if "/watch/" in path:
        return True
    if "watch=" not in qs:
        return False
    first = next((v for k, v in parse_qsl(qs, keep_blank_values=True) if k == "watch"), "")
    return first.lower() in ("1", "true")  # requestinfo's rule for the watch verb


_POD_STREAMS = ("/log", "/exec", "/attach", "/portforward")


def _is_pod_stream(target: str) -> bool:
    path = target.partition("?")[0].rstrip("/")
    return "/pods/" in path and path.endswith(_POD_STREAMS)


_date_cache: list[Any] = [-1, b""]


def _date() -> bytes:
    now = int(time.time())
    if now != _date_cache[0]:
        _date_cache[0], _date_cache[1] = now, formatdate(now, usegmt=True).encode()
    date: bytes = _date_cache[1]
    return date


def _head(status: int, reason: str, headers: Iterable[tuple[str, str]], length: int) -> bytes:
    lines = [b"HTTP/1.1 %d %s\r\n" % (status, reason.encode("latin-1"))]
    for k, v in headers:
        if k.lower() not in ("content-length", "transfer-encoding", "date"):
            lines.append(f"{k}: {v}\r\n".encode("latin-1"))
    lines.append(b"Date: %s\r\nContent-Length: %d\r\n\r\n" % (_date(), length))
    return b"".join(lines)


def _serialize(resp: web.StreamResponse, *, head: bool) -> bytes:
    """The whole HTTP response for a (non-streamed) `web.Response`."""
    if type(resp) is not web.Response and not isinstance(resp, web.Response):
        raise TypeError(f"a streamed response ({type(resp).__name__}) must be written with LeanRequest.send")
    body = resp.body
    if body is None:
        body = b""
    elif not isinstance(body, (bytes, bytearray)):
        raise TypeError(f"unsupported response body {type(body).__name__}")
    key = (resp.status, *resp.headers.items())
    start = _STARTS.get(key)
    if start is None:  # the status line and headers up to Date, the same for most responses
        if len(_STARTS) >= 256:
            _STARTS.clear()
        start = _STARTS[key] = _head(resp.status, resp.reason, resp.headers.items(), 0).partition(b"Date: ")[0]
    out = b"%sDate: %s\r\nContent-Length: %d\r\n\r\n" % (start, _date(), len(body))
    return out if head or not body else out + bytes(body)


_STARTS: dict[tuple[Any, ...], bytes] = {}


class LeanServer:
    """The listening socket; `close` stops accepting and closes the lean connections (aiohttp's
    runner closes the ones it was handed)."""

    def __init__(self, *, handler: Handler, fallback: Fallback, fast: FastReads | None) -> None:
        self.handler, self.fallback, self.fast = handler, fallback, fast
        self.connections: set[LeanProtocol] = set()
        self._server: asyncio.AbstractServer | None = None
        self._sweeper: asyncio.Task[None] | None = None

    def _protocol(self) -> LeanProtocol:
        return LeanProtocol(handler=self.handler, fallback=self.fallback, fast=self.fast, connections=self.connections)

    async def start(self, host: str, port: int, *, backlog: int) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._protocol, host, port, reuse_address=True, backlog=backlog)
        self._sweeper = loop.create_task(self._close_idle())

    async def _close_idle(self) -> None:
        """Closes keep-alive connections that sent nothing for IDLE_TIMEOUT seconds (checked every
        tenth of it): clients that vanished without closing do not hold sockets forever."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(IDLE_TIMEOUT / 10)
            cutoff = loop.time() - IDLE_TIMEOUT
            for conn in list(self.connections):
                if not conn.busy and conn.last_active < cutoff and conn.transport is not None:
                    conn.transport.close()

    @property
    def port(self) -> int:
        assert self._server is not None
        sockets = getattr(self._server, "sockets")  # asyncio's and uvloop's servers have it
        port: int = sockets[0].getsockname()[1]
        return port

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.close()
        self.connections.clear()


__all__ = ["LeanProtocol", "LeanRequest", "LeanServer", "MAX_BODY", "Written"]
