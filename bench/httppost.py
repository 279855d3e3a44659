"""A lean HTTP/1.1 POST load generator for the benchmarks that create objects through the API server.

The benchmarks run the API server, the scheduler (or controllers) and the load generator on one
small machine, so whatever the load generator spends is taken from the system it measures.
`kubecore.client.RestClient` (aiohttp, retries, token bucket, typed errors) costs about 45 µs of
CPU per POST; this one sends requests encoded beforehand on plain keep-alive connections and
reads only the status line and `Content-Length` of each answer, for about a quarter of that.
Upstream's scheduler_perf creates its pods with client-go from 30 goroutines, which costs its
machine little; this keeps the same shape (`concurrency` closed-loop workers, one connection each).

Every answer must have the expected status (201 Created unless told otherwise): anything else
raises `PostError` with the answer's body, so a benchmark never counts objects that were not made.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Sequence
from typing import cast
from urllib.parse import urlsplit

__all__ = ["PostError", "post_all"]


class PostError(RuntimeError):
    """The API server answered a POST with an unexpected status, or the connection failed."""


class _Connection(asyncio.Protocol):
    """One keep-alive connection: one request in flight, its answer's status and body."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.lost: Exception | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass asyncio's

    def data_received(self, data: bytes) -> None:
        self.buf += data
        self._answer()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = exc or ConnectionResetError("the API server closed the connection")
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(PostError(f"connection lost: {self.lost}"))

    def _answer(self) -> None:
        head_end = self.buf.find(b"\r\n\r\n")
        if head_end < 0 or self.waiter is None:
            return
        head = bytes(self.buf[:head_end]).lower()
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                self.waiter.set_exception(PostError("a chunked answer to a POST: not supported by this load generator"))
                return
        end = head_end + 4 + length
        if len(self.buf) < end:
            return
        status = int(head[9:12])
        body = bytes(self.buf[head_end + 4:end])
        del self.buf[:end]
        waiter, self.waiter = self.waiter, None
        if not waiter.done():
            waiter.set_result((status, body))

    async def post(self, request: bytes) -> tuple[int, bytes]:
        if self.lost is not None or self.transport is None:
            raise PostError(f"connection lost: {self.lost}")
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return await self.waiter


def _request(host: str, path: str, body: bytes) -> bytes:
    return (b"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (path.encode(), host.encode(), len(body))) + body


async def post_all(url: str, path_and_body: Sequence[tuple[str, bytes]], *, concurrency: int,
                   expect: int = 201) -> float:
    """POSTs every body to the API server at `url` (plain http), `concurrency` closed-loop
    workers on a connection each; the seconds taken. Raises `PostError` on any answer whose
    status is not `expect` (after the workers in flight finish their request)."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname or not parts.port:
        raise ValueError(f"post_all needs an http://host:port URL, not {url!r}")
    host = f"{parts.hostname}:{parts.port}"
    requests: Iterator[bytes] = (_request(host, p, b) for p, b in path_and_body)
    loop = asyncio.get_running_loop()
    workers = min(concurrency, len(path_and_body)) or 1
    conns: list[_Connection] = []
    try:
        for _ in range(workers):
            _, proto = await loop.create_connection(_Connection, parts.hostname, parts.port)
            conns.append(proto)

        async def worker(conn: _Connection) -> None:
            for request in requests:
                status, body = await conn.post(request)
                if status != expect:
                    raise PostError(f"POST answered {status} (wanted {expect}): {body[:500].decode(errors='replace')}")

        t0 = time.perf_counter()
        await asyncio.gather(*(worker(c) for c in conns))
        return time.perf_counter() - t0
    finally:
        for c in conns:
            if c.transport is not None:
                c.transport.close()
