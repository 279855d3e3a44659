"""SPDY/3.1 frames and header blocks: what kubectl, the kubelet and container runtimes speak
for exec, attach and port-forward (draft-mbelshe-httpbis-spdy-00 with the 3.1 flow control).

    frames = FrameReader()
    for frame in frames.feed(chunk):           # any split of the byte stream
        ...
    wire = encode(SynStream(1, {"streamtype": ["error"]}), compressor=HeaderCompressor())

Guarantees:
- `encode` and `FrameReader` are inverses for every frame type here (SYN_STREAM, SYN_REPLY,
  RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE, DATA); unknown control frames are
  skipped as the spec asks, so a newer peer does not break the session.
- Header blocks are zlib streams primed with the SPDY/3 dictionary (`DICTIONARY`), one
  compression context per direction for the whole session, each block ending with a sync flush.
  The compressor and decompressor are therefore stateful: use one of each per connection.
- Header names are lowercased on the way out (SPDY/3 requires it); values with several entries
  travel NUL-separated and come back as lists.
- A malformed frame raises `SpdyError`; nothing here does I/O.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

VERSION = 3
FLAG_FIN = 0x01
FLAG_UNIDIRECTIONAL = 0x02
MAX_LENGTH = (1 << 24) - 1
INITIAL_WINDOW = 64 * 1024
SETTINGS_INITIAL_WINDOW_SIZE = 7
RST_PROTOCOL_ERROR, RST_INVALID_STREAM, RST_REFUSED_STREAM, RST_CANCEL = 1, 2, 3, 5

SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = 1, 2, 3, 4, 6, 7, 8, 9
_STREAM_ID = 0x7FFFFFFF

Headers = dict[str, list[str]]


class SpdyError(Exception):
    """A frame or header block that does not follow SPDY/3.1."""


def _dictionary() -> bytes:
    """The SPDY/3 header dictionary: length-prefixed common header words, then common values."""
    words = ("options head post put delete trace accept accept-charset accept-encoding accept-language "
             "accept-ranges age allow authorization cache-control connection content-base content-encoding "
             "content-language content-length content-location content-md5 content-range content-type date "
             "etag expect expires from host if-match if-modified-since if-none-match if-range "
             "if-unmodified-since last-modified location max-forwards pragma proxy-authenticate "
             "proxy-authorization range referer retry-after server te trailer transfer-encoding upgrade "
             "user-agent vary via warning www-authenticate method get status").split()
    words += ["200 OK", "version", "HTTP/1.1", "url", "public", "set-cookie", "keep-alive", "origin"]
    codes = ("100 101 201 202 205 206 300 302 303 304 305 306 307 402 405 406 407 408 409 410 411 412 413 "
             "414 415 416 417 502 504 505").replace(" ", "")
    phrases = ("203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request"
               "401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented"
               "503 Service Unavailable")
    dates = "Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT"
    values = ("chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,"
              "text/plain,text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8"
              "charset=iso-8859-1,utf-,*,enq=0.")
    prefixed = b"".join(struct.pack(">I", len(w)) + w.encode() for w in words)
    return prefixed + (codes + phrases + dates + values).encode()


DICTIONARY = _dictionary()


# -- frames ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SynStream:
    stream_id: int
    headers: Headers
    flags: int = 0
    associated_to: int = 0
    priority: int = 0


@dataclass(frozen=True)
class _StreamHeaders:
    stream_id: int
    headers: Headers
    flags: int = 0


class SynReply(_StreamHeaders):
    """The peer's acceptance of a stream."""


class HeadersFrame(_StreamHeaders):
    """More headers on an open stream (FIN may end it)."""


@dataclass(frozen=True)
class RstStream:
    stream_id: int
    status: int


@dataclass(frozen=True)
class Settings:
    values: dict[int, int] = field(default_factory=dict)
    """Setting id -> value (the per-entry persist flags are dropped)."""
    flags: int = 0


@dataclass(frozen=True)
class Ping:
    ping_id: int


@dataclass(frozen=True)
class GoAway:
    last_good_stream_id: int
    status: int = 0


@dataclass(frozen=True)
class WindowUpdate:
    stream_id: int
    delta: int


@dataclass(frozen=True)
class Data:
    stream_id: int
    data: bytes
    flags: int = 0

    @property
    def fin(self) -> bool:
        return bool(self.flags & FLAG_FIN)


Frame = SynStream | SynReply | HeadersFrame | RstStream | Settings | Ping | GoAway | WindowUpdate | Data


# -- header blocks ---------------------------------------------------------------------------------
class HeaderCompressor:
    """One direction's compression context (see the module docstring)."""

    def __init__(self) -> None:
        self._z = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, zlib.MAX_WBITS, 9,
                                   zlib.Z_DEFAULT_STRATEGY, DICTIONARY)

    def compress(self, headers: Headers) -> bytes:
        return self._z.compress(pack_headers(headers)) + self._z.flush(zlib.Z_SYNC_FLUSH)


class HeaderDecompressor:
    """The other direction's context: feeds blocks through one zlib stream, giving the dictionary
    when the stream asks for it."""

    def __init__(self) -> None:
        self._z = zlib.decompressobj(zlib.MAX_WBITS, zdict=DICTIONARY)

    def decompress(self, block: bytes) -> Headers:
        try:
            raw = self._z.decompress(block)
        except zlib.error as e:
            raise SpdyError(f"bad header block: {e}") from None
        return unpack_headers(raw)


def pack_headers(headers: Headers) -> bytes:
    """The uncompressed name/value block: a count, then length-prefixed names and values."""
    out = [struct.pack(">I", len(headers))]
    for name, values in headers.items():
        for part in (name.lower().encode(), "\0".join(values).encode()):
            out.append(struct.pack(">I", len(part)) + part)
    return b"".join(out)


def unpack_headers(raw: bytes) -> Headers:
    try:
        (count,), pos = struct.unpack_from(">I", raw), 4
        headers: Headers = {}
        for _ in range(count):
            (n,) = struct.unpack_from(">I", raw, pos)
            name = raw[pos + 4:pos + 4 + n].decode()
            pos += 4 + n
            (n,) = struct.unpack_from(">I", raw, pos)
            value = raw[pos + 4:pos + 4 + n].decode()
            pos += 4 + n
            headers.setdefault(name, []).extend(value.split("\0"))
    except (struct.error, UnicodeDecodeError) as e:
        raise SpdyError(f"bad name/value block: {e}") from None
    if pos != len(raw):
        raise SpdyError("name/value block has trailing bytes")
    return headers


# -- encoding --------------------------------------------------------------------------------------
def _control(kind: int, flags: int, payload: bytes) -> bytes:
    if len(payload) > MAX_LENGTH:
        raise SpdyError(f"control frame of {len(payload)} bytes")
    return struct.pack(">HHI", 0x8000 | VERSION, kind, (flags << 24) | len(payload)) + payload


def encode(frame: Frame, *, compressor: HeaderCompressor | None = None) -> bytes:
    """The frame's bytes; frames with headers need the connection's `compressor`."""
    if isinstance(frame, Data):
        if len(frame.data) > MAX_LENGTH:
            raise SpdyError(f"data frame of {len(frame.data)} bytes")
        return struct.pack(">II", frame.stream_id & _STREAM_ID, (frame.flags << 24) | len(frame.data)) + frame.data
    if isinstance(frame, (SynStream, SynReply, HeadersFrame)):
        if compressor is None:
            raise SpdyError("a header frame needs the connection's compressor")
        block = compressor.compress(frame.headers)
        if isinstance(frame, SynStream):
            head = struct.pack(">IIBB", frame.stream_id & _STREAM_ID, frame.associated_to & _STREAM_ID,
                               (frame.priority & 7) << 5, 0)
            return _control(SYN_STREAM, frame.flags, head + block)
        kind = SYN_REPLY if isinstance(frame, SynReply) else HEADERS
        return _control(kind, frame.flags, struct.pack(">I", frame.stream_id & _STREAM_ID) + block)
    if isinstance(frame, RstStream):
        return _control(RST_STREAM, 0, struct.pack(">II", frame.stream_id & _STREAM_ID, frame.status))
    if isinstance(frame, Settings):
        entries = b"".join(struct.pack(">II", k & 0xFFFFFF, v) for k, v in frame.values.items())
        return _control(SETTINGS, frame.flags, struct.pack(">I", len(frame.values)) + entries)
    if isinstance(frame, Ping):
        return _control(PING, 0, struct.pack(">I", frame.ping_id))
    if isinstance(frame, GoAway):
        return _control(GOAWAY, 0, struct.pack(">II", frame.last_good_stream_id & _STREAM_ID, frame.status))
    return _control(WINDOW_UPDATE, 0, struct.pack(">II", frame.stream_id & _STREAM_ID, frame.delta & _STREAM_ID))


# -- decoding --------------------------------------------------------------------------------------
class FrameReader:
    """Frames out of a byte stream fed in pieces; owns the inbound header decompressor."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._headers = HeaderDecompressor()

    def feed(self, chunk: bytes) -> list[Frame]:
        self._buf += chunk
        frames: list[Frame] = []
        while len(self._buf) >= 8:
            word, length_flags = struct.unpack_from(">II", self._buf)
            length = length_flags & MAX_LENGTH
            if len(self._buf) < 8 + length:
                break
            payload = bytes(self._buf[8:8 + length])
            del self._buf[:8 + length]
            flags = length_flags >> 24
            if not word & 0x80000000:
                frames.append(Data(word & _STREAM_ID, payload, flags))
                continue
            version, kind = (word >> 16) & 0x7FFF, word & 0xFFFF
            if version != VERSION:
                raise SpdyError(f"SPDY version {version}, not {VERSION}")
            frame = self._control(kind, flags, payload)
            if frame is not None:
                frames.append(frame)
        return frames

    def _control(self, kind: int, flags: int, p: bytes) -> Frame | None:
        try:
            if kind == SYN_STREAM:
                sid, assoc, pri = struct.unpack_from(">IIB", p)
                return SynStream(sid & _STREAM_ID, self._headers.decompress(p[10:]), flags,
                                 assoc & _STREAM_ID, pri >> 5)
            if kind in (SYN_REPLY, HEADERS):
                (sid,) = struct.unpack_from(">I", p)
                cls = SynReply if kind == SYN_REPLY else HeadersFrame
                return cls(sid & _STREAM_ID, self._headers.decompress(p[4:]), flags)
            if kind == RST_STREAM:
                sid, status = struct.unpack_from(">II", p)
                return RstStream(sid & _STREAM_ID, status)
            if kind == SETTINGS:
                (count,) = struct.unpack_from(">I", p)
                pairs = (struct.unpack_from(">II", p, 4 + 8 * i) for i in range(count))
                return Settings({k & 0xFFFFFF: v for k, v in pairs}, flags)
            if kind == PING:
                return Ping(struct.unpack_from(">I", p)[0])
            if kind == GOAWAY:
                last, status = struct.unpack_from(">II", p) if len(p) >= 8 else (*struct.unpack_from(">I", p), 0)
                return GoAway(last & _STREAM_ID, status)
            if kind == WINDOW_UPDATE:
                sid, delta = struct.unpack_from(">II", p)
                return WindowUpdate(sid & _STREAM_ID, delta & _STREAM_ID)
        except struct.error as e:
            raise SpdyError(f"short control frame of type {kind}: {e}") from None
        return None  # an unknown control frame is ignored
