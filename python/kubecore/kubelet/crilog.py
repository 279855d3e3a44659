"""Container logs as CRI runtimes write them, read back for `kubectl logs` (upstream
pkg/kubelet/kuberuntime/logs).

A CRI log file holds one record per line:

    2026-01-02T03:04:05.123456789Z stdout F hello world
    <RFC3339Nano time> <stdout|stderr> <F|P> <text>

`F` ends a message; `P` is a partial piece of a longer one (the runtime splits long lines), and
the pieces up to the next `F` of the same stream are joined into one message. The message keeps
the time of its first piece.

`read_messages` yields what a request with PodLogOptions (`kubecore.api.podlogoptions`) wants:

- `since` (sinceSeconds/sinceTime as epoch seconds): messages older than it are skipped;
- `tail_lines`: only the last N messages (of those not skipped);
- `stream` Stdout/Stderr: only that stream's messages;
- `timestamps`: each message is prefixed with its time as the runtime wrote it (RFC3339Nano);
- `limit_bytes`: output stops after that many bytes (a message may be cut);
- `follow`: at the end of the file, wait for more until `running()` says the container is gone
  (checked every `FOLLOW_CHECK` seconds) and nothing more arrived.

A line that does not parse is passed through as an stdout message with time 0 (upstream returns
an error for it; a log with a stray line is more useful shown than refused).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass

from kubecore.api.podlogoptions import LogOptions, parse_rfc3339

FOLLOW_POLL = 0.2
"""Seconds between looks at a followed file that has no new data."""
FOLLOW_CHECK = 1.0
"""Seconds between asking whether a followed container still runs."""
READ_CHUNK = 64 * 1024


@dataclass(frozen=True)
class LogMessage:
    time: float
    """Epoch seconds (0: unknown)."""
    stamp: str
    """The time as written in the file (RFC3339Nano)."""
    stream: str
    text: bytes
    """The message, with its newline."""


def format_rfc3339_nano(t: float) -> str:
    """Epoch seconds -> Go's RFC3339Nano in UTC (fraction without trailing zeros)."""
    whole = int(t // 1)
    nanos = int(round((t - whole) * 1e9))
    if nanos >= 1_000_000_000:
        whole, nanos = whole + 1, nanos - 1_000_000_000
    base = dt.datetime.fromtimestamp(whole, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    frac = f".{nanos:09d}".rstrip("0") if nanos else ""
    return f"{base}{frac}Z"


def format_line(t: float, stream: str, text: str, *, partial: bool = False) -> bytes:
    """One CRI log record (what a runtime writes; the simulated runtime uses it)."""
    return f"{format_rfc3339_nano(t)} {stream} {'P' if partial else 'F'} {text}\n".encode()


def parse_line(line: bytes) -> tuple[float, str, str, bool, bytes]:
    """(time, stamp, stream, partial, text with newline unless partial) of one record."""
    parts = line.split(b" ", 3)
    if len(parts) == 4 and parts[1] in (b"stdout", b"stderr") and parts[2] in (b"F", b"P"):
        stamp = parts[0].decode(errors="replace")
        t = parse_rfc3339(stamp)
        if t is not None:
            partial = parts[2] == b"P"
            text = parts[3]
            if partial:
                text = text.rstrip(b"\n")
            elif not text.endswith(b"\n"):
                text += b"\n"
            return t, stamp, parts[1].decode(), partial, text
    text = line if line.endswith(b"\n") else line + b"\n"
    return 0.0, "", "stdout", False, text


class Joiner:
    """Joins partial records into messages, per stream (stdout and stderr interleave)."""

    def __init__(self) -> None:
        self._pending: dict[str, tuple[float, str, list[bytes]]] = {}

    def feed(self, line: bytes) -> LogMessage | None:
        t, stamp, stream, partial, text = parse_line(line)
        started = self._pending.get(stream)
        if partial:
            if started is None:
                self._pending[stream] = (t, stamp, [text])
            else:
                started[2].append(text)
            return None
        if started is not None:
            del self._pending[stream]
            return LogMessage(started[0], started[1], stream, b"".join([*started[2], text]))
        return LogMessage(t, stamp, stream, text)


def messages_of(lines: Iterable[bytes]) -> list[LogMessage]:
    joiner = Joiner()
    return [msg for line in lines if (msg := joiner.feed(line)) is not None]


def render(msg: LogMessage, *, timestamps: bool) -> bytes:
    if not timestamps:
        return msg.text
    stamp = msg.stamp or format_rfc3339_nano(msg.time)  # the runtime's own text: exact to the nanosecond
    return f"{stamp} ".encode() + msg.text


class _Limit:
    """What is left of limitBytes (None: no limit)."""

    def __init__(self, limit: int | None) -> None:
        self.left = limit

    def cut(self, data: bytes) -> bytes:
        if self.left is None:
            return data
        data = data[:self.left]
        self.left -= len(data)
        return data

    @property
    def done(self) -> bool:
        return self.left is not None and self.left <= 0


class _Reader:
    """One request's pass over a file: complete lines become messages, rendered and cut to the
    byte limit; a line not yet complete waits for its end."""

    def __init__(self, opts: LogOptions, since: float | None) -> None:
        self.opts = opts
        self.since = since
        self.limit = _Limit(opts.limit_bytes)
        self.joiner = Joiner()
        self.rest = b""
        self.offset = 0

    def messages(self, data: bytes) -> list[LogMessage]:
        self.offset += len(data)
        lines = (self.rest + data).split(b"\n")
        self.rest = lines.pop()
        return [msg for line in lines if (msg := self.joiner.feed(line + b"\n")) is not None
                and _wanted(msg, self.opts, self.since)]

    def out(self, msg: LogMessage) -> bytes:
        return self.limit.cut(render(msg, timestamps=self.opts.timestamps))


async def read_messages(path: str, opts: LogOptions, *, now: float,
                        running: Callable[[], Awaitable[bool]] | None = None) -> AsyncIterator[bytes]:
    """The bytes a log request answers with (see the module docstring). A file that does not
    exist yet reads as empty (a followed one is waited for while the container runs)."""
    reader = _Reader(opts, opts.since(now))
    tail: deque[LogMessage] | None = deque(maxlen=opts.tail_lines) if opts.tail_lines is not None else None
    while data := _read_from(path, reader.offset):
        for msg in reader.messages(data):
            if tail is not None:
                tail.append(msg)
                continue
            if out := reader.out(msg):
                yield out
            if reader.limit.done:
                return
    for msg in tail or ():
        if out := reader.out(msg):
            yield out
        if reader.limit.done:
            return
    if opts.follow and running is not None:
        async for out in _follow(path, reader, running=running):
            yield out


def _wanted(msg: LogMessage, opts: LogOptions, since: float | None) -> bool:
    if since is not None and msg.time and msg.time < since:
        return False
    return opts.stream in (None, "All") or msg.stream == (opts.stream or "").lower()


def _read_from(path: str, offset: int) -> bytes | None:
    """Up to READ_CHUNK bytes at `offset` (b"" at the end), or None when there is no file."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read(READ_CHUNK)
    except FileNotFoundError:
        return None


async def _follow(path: str, reader: _Reader, *, running: Callable[[], Awaitable[bool]]) -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    next_check = loop.time() + FOLLOW_CHECK
    alive = True
    reader.since = None
    while True:
        data = _read_from(path, reader.offset)
        if data:
            for msg in reader.messages(data):
                if out := reader.out(msg):
                    yield out
                if reader.limit.done:
                    return
            continue
        if not alive:
            return  # one more read after the container ended found nothing new
        await asyncio.sleep(FOLLOW_POLL)
        if loop.time() >= next_check:
            next_check = loop.time() + FOLLOW_CHECK
            alive = await running()
