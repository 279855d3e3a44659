"""A scripted SPDY/3.1 server for tests: it answers an HTTP upgrade (or starts at once), replies to
every SYN_STREAM and hands each frame to a test-supplied handler, which answers with frames."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from kubecore.client import spdy

Handler = Callable[["Peer", spdy.Frame], list[spdy.Frame]]


@dataclass
class Peer:
    handler: Handler
    upgrade_status: int = 101
    stream_protocol: str = "v4.channel.k8s.io"
    with_http: bool = True
    received: list[spdy.Frame] = field(default_factory=list)
    request_heads: list[str] = field(default_factory=list)
    streams: dict[int, str] = field(default_factory=dict)
    """Stream id -> its streamtype header."""

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if self.with_http and not await self._upgrade(reader, writer):
                return
            frames, compressor = spdy.FrameReader(), spdy.HeaderCompressor()
            while chunk := await reader.read(65536):
                for frame in frames.feed(chunk):
                    self.received.append(frame)
                    if isinstance(frame, spdy.SynStream):
                        self.streams[frame.stream_id] = (frame.headers.get("streamtype") or [""])[0]
                    for answer in self.handler(self, frame):
                        writer.write(spdy.encode(answer, compressor=compressor))
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass  # the test is over
        finally:
            writer.close()

    async def _upgrade(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        self.request_heads.append(head)
        if self.upgrade_status != 101:
            body = b"container not found\n"
            writer.write(f"HTTP/1.1 {self.upgrade_status} Not Found\r\nContent-Type: text/plain\r\n"
                         f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            await writer.drain()
            return False
        writer.write(("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
                      f"X-Stream-Protocol-Version: {self.stream_protocol}\r\n\r\n").encode())
        return True

    def stream_of(self, kind: str) -> int:
        return next(sid for sid, t in self.streams.items() if t == kind)


def replies(peer: Peer, frame: spdy.Frame) -> list[spdy.Frame]:
    """The base behaviour: SYN_REPLY to every new stream."""
    return [spdy.SynReply(frame.stream_id, {})] if isinstance(frame, spdy.SynStream) else []


@contextlib.asynccontextmanager
async def running(peer: Peer) -> AsyncIterator[tuple[str, int]]:
    server = await asyncio.start_server(peer.serve, "127.0.0.1", 0)
    try:
        yield "127.0.0.1", int(server.sockets[0].getsockname()[1])
    finally:
        server.close()
