"""A lean HTTP/1.1 keep-alive transport for the client's request/response calls.

`RestClient.request()` is the hot path of every controller (a ReplicaSet scaling to 10,000 pods is
10,000 POSTs). aiohttp's client spends about half a millisecond of CPU per request on this machine
(request/response objects, cookie jar, tracing hooks, URL building); this transport does the same
exchange on a bare `asyncio.Protocol` for a small fraction of that. Watches (long-lived streaming
answers) stay on aiohttp.

    transport = HttpTransport("https://10.0.0.1:6443", ssl=context)
    answer = await transport.request("POST", "/api/v1/namespaces/a/pods", headers=h, body=b, timeout=30)
    answer.status, answer.headers["Content-Type"], answer.body

What it does, and nothing more:
- one request at a time per connection; idle connections are kept (LIFO) and reused; a
  connection the server closes while idle leaves the pool at once (`connection_lost`);
- at most `max_connections` (100, like HTTP/2's default stream limit that client-go multiplexes
  over) are open at once: further requests wait, first come first served, for one to come back.
  Opening a connection costs both sides far more than a request on an open one, so thousands of
  concurrent calls (a scheduler binding a burst of pods) reuse a hundred connections instead of
  opening thousands;
- bodies framed by Content-Length, chunked transfer coding, or the end of the connection; HEAD,
  1xx, 204 and 304 answers have none; `Content-Encoding: gzip`/`deflate` is decoded
  (`Accept-Encoding: gzip` is sent, as Go's transport does for client-go);
- `Connection: close` or an HTTP/1.0 answer retires the connection after the answer;
- failures are typed: `ConnectError` when no connection could be made (nothing was sent: safe to
  retry any verb), `ConnectionLost` when it broke mid-exchange, `TimeoutError` past `timeout`
  (the connection is dropped: its state is unknown). All are OSError subclasses.
"""

from __future__ import annotations

import asyncio
import ssl as ssl_module
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from multidict import CIMultiDict, CIMultiDictProxy

MAX_HEAD = 64 * 1024
"""An answer whose status line and headers exceed this is refused (malformed or hostile)."""
MAX_IDLE = 256
"""Idle connections kept; more are closed when they come back."""
MAX_CONNECTIONS = 100
"""Connections open at once per transport (idle or busy); more requests wait for one."""


class ConnectError(OSError):
    """No connection could be made: the request was not sent."""


class ConnectionLost(OSError):
    """The connection broke before the whole answer arrived (the request may have been processed)."""


class ProtocolError(ConnectionLost):
    """The server's bytes are not HTTP/1.1 this transport understands."""


@dataclass(slots=True)
class RawResponse:
    status: int
    headers: CIMultiDictProxy[str]
    body: bytes


_NO_BODY_STATUS = frozenset({204, 304})


class _Connection(asyncio.Protocol):
    """One TCP (or TLS) connection; parses one answer at a time into `self.waiter`."""

    def __init__(self, on_lost: Callable[[_Connection], None]) -> None:
        self._on_lost = on_lost
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.waiter: asyncio.Future[RawResponse] | None = None
        self._buf = bytearray()
        self._head_only = False
        self._status = 0
        self._headers: CIMultiDict[str] | None = None
        self._length: int | None = None     # Content-Length, or None
        self._chunked = False
        self._until_close = False
        self._chunks: list[bytes] = []
        self.keep_alive = True

    # -- asyncio.Protocol --------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            if self._until_close and self._headers is not None:
                self._finish(bytes(self._buf))
            else:
                why = f": {exc}" if exc else ""
                waiter.set_exception(ConnectionLost(f"server closed the connection mid-answer{why}"))
        self._on_lost(self)

    def data_received(self, data: bytes) -> None:
        if self.waiter is None or self.waiter.done():
            # Bytes nobody asked for: the connection is out of step; retire it.
            self.keep_alive = False
            self.close()
            return
        self._buf += data
        try:
            self._parse()
        except ProtocolError as e:
            self.keep_alive = False
            if not self.waiter.done():
                self.waiter.set_exception(e)
            self.close()

    # -- one exchange ------------------------------------------------------------------------------
    def send(self, data: bytes, *, head: bool, loop: asyncio.AbstractEventLoop) -> asyncio.Future[RawResponse]:
        assert self.transport is not None
        self.waiter = loop.create_future()
        self._buf.clear()
        self._head_only = head
        self._headers = None
        self._length = None
        self._chunked = self._until_close = False
        self._chunks = []
        self.transport.write(data)
        return self.waiter

    def close(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.close()

    def _parse(self) -> None:
        if self._headers is None and not self._parse_head():
            return
        if self._chunked:
            self._parse_chunks()
        elif self._length is not None and len(self._buf) >= self._length:
            body = bytes(self._buf[:self._length])
            self._finish(body)

    def _parse_head(self) -> bool:
        end = self._buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buf) > MAX_HEAD:
                raise ProtocolError("answer headers too large")
            return False
        lines = bytes(self._buf[:end]).decode("latin-1").split("\r\n")
        del self._buf[:end + 4]
        version, _, rest = lines[0].partition(" ")
        if not version.startswith("HTTP/1."):
            raise ProtocolError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
        try:
            status = int(rest[:3])
        except ValueError:
            raise ProtocolError(f"bad status line: {lines[0][:80]!r}") from None
        if 100 <= status < 200:  # an interim answer: skip it, the real one follows
            return self._parse_head() if self._buf else False
        headers: CIMultiDict[str] = CIMultiDict()
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                raise ProtocolError(f"bad header line: {line[:80]!r}")
            headers.add(name.strip(), value.strip())
        self._status, self._headers = status, headers
        conn = headers.get("Connection", "").lower()
        self.keep_alive = version == "HTTP/1.1" and "close" not in conn
        if self._head_only or status in _NO_BODY_STATUS:
            self._length = 0
        elif "chunked" in headers.get("Transfer-Encoding", "").lower():
            self._chunked = True
        elif (length := headers.get("Content-Length")) is not None:
            try:
                self._length = int(length)
            except ValueError:
                raise ProtocolError(f"bad Content-Length {length!r}") from None
        else:
            self._until_close = True
            self.keep_alive = False
        return True

    def _parse_chunks(self) -> None:
        buf = self._buf
        while True:
            eol = buf.find(b"\r\n")
            if eol < 0:
                return
            try:
                size = int(bytes(buf[:eol]).split(b";", 1)[0], 16)
            except ValueError:
                raise ProtocolError("bad chunk size line") from None
            if size == 0:  # the last chunk; trailers (usually none) end with an empty line
                if buf.find(b"\r\n\r\n", eol) < 0:
                    return
                self._finish(b"".join(self._chunks))
                return
            if len(buf) < eol + 2 + size + 2:
                return
            self._chunks.append(bytes(buf[eol + 2:eol + 2 + size]))
            del buf[:eol + 2 + size + 2]

    def _finish(self, body: bytes) -> None:
        assert self._headers is not None and self.waiter is not None
        encoding = self._headers.get("Content-Encoding", "").lower()
        try:
            if encoding == "gzip":
                body = zlib.decompress(body, 16 + zlib.MAX_WBITS)
            elif encoding == "deflate":
                body = zlib.decompress(body)
        except zlib.error as e:
            self.waiter.set_exception(ProtocolError(f"cannot decode {encoding} body: {e}"))
            return
        self._buf.clear()
        self.waiter.set_result(RawResponse(self._status, CIMultiDictProxy(self._headers), body))


def _expire(waiter: asyncio.Future[RawResponse], timeout: float) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError(f"no complete answer within {timeout:g} s"))


class HttpTransport:
    """A pool of keep-alive connections to one server (see the module docstring)."""

    def __init__(self, base_url: str, *, ssl: ssl_module.SSLContext | bool = False,
                 max_connections: int = MAX_CONNECTIONS) -> None:
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, not {max_connections}")
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"server URL must be http(s)://host[:port], not {base_url!r}")
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.https else 80)
        self.ssl: ssl_module.SSLContext | None = None
        if self.https:
            self.ssl = ssl if isinstance(ssl, ssl_module.SSLContext) else ssl_module.create_default_context()
        host = f"[{self.host}]" if ":" in self.host else self.host
        default_port = 443 if self.https else 80
        self.host_header = host if self.port == default_port else f"{host}:{self.port}"
        self.prefix = parts.path.rstrip("/")
        """A path the server URL carries (a proxy's `/k8s/clusters/c1`), put before every target."""
        self._idle: deque[_Connection] = deque()
        self._all: set[_Connection] = set()
        self.max_connections = max_connections
        self._opening = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        """Requests waiting for a connection slot, oldest first."""
        self._loop: asyncio.AbstractEventLoop | None = None
        """The loop the pool's connections belong to (`_follow_loop`)."""

    async def request(self, method: str, target: str, *, headers: dict[str, str], body: bytes | None,
                      timeout: float | None) -> RawResponse:
        """One exchange. `target` is the path with its query string already encoded."""
        loop = self._loop
        if loop is None or not loop.is_running():
            loop = self._follow_loop()
        data = self._encode(method, target, headers, body)
        conn = await self._acquire(loop, timeout)
        waiter = conn.send(data, head=method == "HEAD", loop=loop)
        expiry = None if timeout is None else loop.call_later(timeout, _expire, waiter, timeout)
        try:
            answer = await waiter
        except BaseException:
            conn.keep_alive = False
            conn.close()
            raise
        finally:
            conn.waiter = None
            if expiry is not None:
                expiry.cancel()
        self._release(conn)
        return answer

    def _follow_loop(self) -> asyncio.AbstractEventLoop:
        """The caller's loop, looked up once per loop rather than per request (get_running_loop()
        is a getpid() system call on Python 3.11). A cached loop that is not running cannot be the
        caller's: it was stopped or closed, and the connections opened on it went with it."""
        loop = asyncio.get_running_loop()
        if self._loop is not None and self._loop is not loop:
            self._idle.clear()
            self._all.clear()
            self._waiters.clear()
            self._opening = 0
        self._loop = loop
        return loop

    def _encode(self, method: str, target: str, headers: dict[str, str], body: bytes | None) -> bytes:
        lines = [f"{method} {self.prefix}{target} HTTP/1.1", f"Host: {self.host_header}", "Accept-Encoding: gzip"]
        lines.extend(f"{k}: {v}" for k, v in headers.items())
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body or b'')}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        return head + body if body else head

    async def _acquire(self, loop: asyncio.AbstractEventLoop, timeout: float | None) -> _Connection:
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            while self._idle:
                conn = self._idle.pop()
                if not conn.closed:
                    return conn
            if len(self._all) + self._opening < self.max_connections:
                break
            await self._wait_for_slot(loop, deadline)
        self._opening += 1
        conn = _Connection(self._forget)
        try:
            connect = loop.create_connection(lambda: conn, self.host, self.port, ssl=self.ssl,
                                             server_hostname=self.host if self.ssl else None)
            left = None if deadline is None else max(deadline - loop.time(), 0.0)
            transport, _ = await (asyncio.wait_for(connect, left) if left is not None else connect)
        except (OSError, asyncio.TimeoutError, ssl_module.SSLError) as e:
            raise ConnectError(f"cannot connect to {self.host}:{self.port}: {e}") from e
        finally:
            self._opening -= 1
            self._wake()  # a failed attempt frees its slot; a successful one is in _all now
        conn.transport = transport  # uvloop may call connection_made after the await returns
        self._all.add(conn)
        return conn

    async def _wait_for_slot(self, loop: asyncio.AbstractEventLoop, deadline: float | None) -> None:
        fut: asyncio.Future[None] = loop.create_future()
        self._waiters.append(fut)
        try:
            if deadline is None:
                await fut
            else:
                await asyncio.wait_for(fut, max(deadline - loop.time(), 0.0))
        except asyncio.TimeoutError:
            raise TimeoutError(f"no connection to {self.host}:{self.port} came free in time "
                               f"({self.max_connections} busy)") from None
        finally:
            if not fut.done():  # timed out or cancelled: still queued (woken ones were popped)
                fut.cancel()
                try:
                    self._waiters.remove(fut)
                except ValueError:
                    pass

    def _wake(self) -> None:
        """A connection came back or a slot opened: the oldest waiter tries again."""
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                return

    def _release(self, conn: _Connection) -> None:
        if conn.closed or not conn.keep_alive or len(self._idle) >= MAX_IDLE:
            conn.close()  # its slot frees when connection_lost calls _forget
            return
        self._idle.append(conn)
        self._wake()

    def _forget(self, conn: _Connection) -> None:
        self._all.discard(conn)
        try:
            self._idle.remove(conn)
        except ValueError:
            pass
        self._wake()

    def close(self) -> None:
        """Close every connection, idle or busy (busy exchanges fail with ConnectionLost)."""
        for conn in list(self._all):
            conn.close()
        self._idle.clear()
