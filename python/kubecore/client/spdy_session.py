"""The client end of a SPDY/3.1 connection over an asyncio stream pair (an upgraded HTTP
connection): streams opened with SYN_STREAM, their replies, data both ways, half-close.

    session = SpdySession(reader, writer)
    stream = await session.open_stream({"streamtype": ["stdout"]})
    while chunk := await stream.read(): ...
    await session.close()

Guarantees:
- `stream.read()` gives the peer's data in order and `b""` once the peer has finished the stream
  (FIN), reset it (RST_STREAM) or the connection is gone; it never raises for those.
- `open_stream` waits for the peer's SYN_REPLY and raises `SpdyStreamError` when the stream is
  reset or the connection ends first.
- Flow control as SPDY/3.1 asks, once the peer shows it does flow control (a WINDOW_UPDATE or an
  initial-window SETTINGS): WINDOW_UPDATE for what the readers consumed (stream and connection
  windows; what was owed before is included) and sends held to the peer's windows. Peers that
  never do (Go's spdystream: container runtimes, kubelets, kubectl) get no WINDOW_UPDATE and are
  not waited for: a frame they never read would be unread input when they close, and the kernel
  then resets the connection and drops the end of their output.
- PINGs are answered; a GOAWAY or EOF ends every stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from kubecore.client import spdy

log = logging.getLogger(__name__)
READ_CHUNK = 64 * 1024
MAX_DATA_FRAME = 16 * 1024


class SpdyStreamError(Exception):
    """A stream the peer refused or reset, or a connection that ended under it."""


class SpdyStream:
    """One stream of a `SpdySession` (see the module docstring)."""

    def __init__(self, session: SpdySession, stream_id: int) -> None:
        self.session = session
        self.id = stream_id
        self.reply: asyncio.Future[spdy.Headers] = asyncio.get_running_loop().create_future()
        self.send_window = session.initial_send_window
        self._incoming: asyncio.Queue[bytes] = asyncio.Queue()
        self._ended = False
        self._fin = False
        self.aborted: str | None = None
        """Why the stream ended without the peer's FIN (reset, GOAWAY, lost connection); None
        while it is open or after a clean end."""
        self.unacked = 0
        """Bytes read but not yet granted back to the peer with a WINDOW_UPDATE."""
        self._write_closed = False

    async def read(self) -> bytes:
        """The next data from the peer; b"" at the end (see the module docstring)."""
        if self._ended and self._incoming.empty():
            return b""
        chunk = await self._incoming.get()
        if not chunk:
            self._ended = True
            return b""
        self.unacked += len(chunk)
        self.session.consumed(self, len(chunk))
        return chunk

    async def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view and not self._write_closed:
            if self.session.closed:
                raise SpdyStreamError("the SPDY connection is closed")
            size = await self.session.send_allowance(self, min(len(view), MAX_DATA_FRAME))
            self.session.send(spdy.Data(self.id, bytes(view[:size])))
            view = view[size:]
        await self.session.drain()

    def close_write(self) -> None:
        """Half-close: an empty DATA frame with FIN; the peer's side stays readable."""
        if not self._write_closed:
            self._write_closed = True
            self.session.send(spdy.Data(self.id, b"", spdy.FLAG_FIN))

    def _deliver(self, data: bytes) -> None:
        if not data:
            self._fin = True
        self._incoming.put_nowait(data)

    def _end(self, why: str) -> None:
        if not self._fin and self.aborted is None:
            self.aborted = why
        self._incoming.put_nowait(b"")
        if not self.reply.done():
            self.reply.set_exception(SpdyStreamError(why))


class SpdySession:
    """A client SPDY/3.1 session (see the module docstring)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._compressor = spdy.HeaderCompressor()
        self._frames = spdy.FrameReader()
        self._streams: dict[int, SpdyStream] = {}
        self._next_id = 1
        self.initial_send_window = spdy.INITIAL_WINDOW
        self.send_window = spdy.INITIAL_WINDOW
        self.peer_flow_control = False
        self._window_grew = asyncio.Event()
        self._unacked = 0
        self.closed = False
        self._loop_task = asyncio.get_running_loop().create_task(self._read_loop())

    def send(self, frame: spdy.Frame) -> None:
        if not self.closed and not self._writer.is_closing():
            self._writer.write(spdy.encode(frame, compressor=self._compressor))

    async def drain(self) -> None:
        with contextlib.suppress(ConnectionError):
            await self._writer.drain()

    async def open_stream(self, headers: spdy.Headers) -> SpdyStream:
        if self.closed:
            raise SpdyStreamError("the SPDY connection is closed")
        stream = SpdyStream(self, self._next_id)
        self._next_id += 2
        self._streams[stream.id] = stream
        self.send(spdy.SynStream(stream.id, headers))
        await stream.reply
        return stream

    def consumed(self, stream: SpdyStream, size: int) -> None:
        """A reader took `size` bytes: WINDOW_UPDATE for the stream and the connection once half a
        window is owed, if the peer does flow control (see the module docstring)."""
        self._unacked += size
        if not self.peer_flow_control:
            return
        if stream.unacked >= spdy.INITIAL_WINDOW // 2:
            self.send(spdy.WindowUpdate(stream.id, stream.unacked))
            stream.unacked = 0
        if self._unacked >= spdy.INITIAL_WINDOW // 2:
            self.send(spdy.WindowUpdate(0, self._unacked))
            self._unacked = 0

    async def send_allowance(self, stream: SpdyStream, wanted: int) -> int:
        """How much of `wanted` may go now, waiting for the peer's windows if it enforces them."""
        while self.peer_flow_control and min(stream.send_window, self.send_window) <= 0 and not self.closed:
            self._window_grew.clear()
            await self._window_grew.wait()
        size = min(wanted, stream.send_window, self.send_window) if self.peer_flow_control else wanted
        stream.send_window -= size
        self.send_window -= size
        return max(size, 0) if self.peer_flow_control else size

    async def close(self) -> None:
        """Close the connection; every stream ends."""
        self._finish("the SPDY connection was closed")
        self._writer.close()
        self._loop_task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._loop_task

    def _finish(self, why: str) -> None:
        self.closed = True
        for stream in self._streams.values():
            stream._end(why)
        self._streams.clear()
        self._window_grew.set()

    async def _read_loop(self) -> None:
        why = "the SPDY connection ended"
        try:
            while True:
                chunk = await self._reader.read(READ_CHUNK)
                if not chunk:
                    break
                for frame in self._frames.feed(chunk):
                    self._dispatch(frame)
        except (ConnectionError, spdy.SpdyError) as e:
            why = f"the SPDY connection failed: {e}"
            log.debug("%s", why)
        finally:
            self._finish(why)

    def _dispatch(self, frame: spdy.Frame) -> None:
        if isinstance(frame, spdy.Data):
            self._on_data(frame)
        elif isinstance(frame, (spdy.SynReply, spdy.HeadersFrame)):
            self._on_headers(frame)
        elif isinstance(frame, spdy.RstStream):
            stream = self._streams.pop(frame.stream_id, None)
            if stream is not None:
                stream._end(f"stream {frame.stream_id} reset by the peer (status {frame.status})")
        elif isinstance(frame, spdy.Ping):
            self.send(frame)
        elif isinstance(frame, spdy.WindowUpdate):
            self._on_window_update(frame)
        elif isinstance(frame, spdy.Settings):
            self._on_settings(frame)
        elif isinstance(frame, spdy.GoAway):
            self._finish(f"the peer went away (status {frame.status})")
        elif isinstance(frame, spdy.SynStream):
            self.send(spdy.RstStream(frame.stream_id, spdy.RST_REFUSED_STREAM))

    def _on_data(self, frame: spdy.Data) -> None:
        stream = self._streams.get(frame.stream_id)
        if stream is None:
            self.send(spdy.RstStream(frame.stream_id, spdy.RST_INVALID_STREAM))
            return
        if frame.data:
            stream._deliver(frame.data)
        if frame.fin:
            stream._deliver(b"")

    def _on_headers(self, frame: spdy.SynReply | spdy.HeadersFrame) -> None:
        stream = self._streams.get(frame.stream_id)
        if stream is None:
            return
        if isinstance(frame, spdy.SynReply) and not stream.reply.done():
            stream.reply.set_result(frame.headers)
        if frame.flags & spdy.FLAG_FIN:
            stream._deliver(b"")

    def _on_window_update(self, frame: spdy.WindowUpdate) -> None:
        self.peer_flow_control = True
        if frame.stream_id == 0:
            self.send_window += frame.delta
        elif frame.stream_id in self._streams:
            self._streams[frame.stream_id].send_window += frame.delta
        self._window_grew.set()

    def _on_settings(self, frame: spdy.Settings) -> None:
        size = frame.values.get(spdy.SETTINGS_INITIAL_WINDOW_SIZE)
        if size is None:
            return
        self.peer_flow_control = True
        for stream in self._streams.values():
            stream.send_window += size - self.initial_send_window
        self.initial_send_window = size
        self._window_grew.set()
