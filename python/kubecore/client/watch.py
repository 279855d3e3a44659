"""Reading a watch: newline-delimited JSON events off a chunked HTTP answer, as an async iterator.

    async with await pods.watch(namespace="ns", resource_version="42") as stream:
        async for ev in stream:
            ev.type        # "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR"
            ev.raw         # the object's JSON bytes, exactly as the server sent them
            ev.object      # decoded on first access (msgspec), then kept

An event is split off the byte stream at each newline (the JSON framer every Kubernetes server
uses: one event per line); lines may arrive in any chunking and be of any size. Only the envelope
is decoded eagerly (`type` plus the object's bytes, with one typed pass over them that reads its
resourceVersion: `rawmeta.probe`), so a consumer that stores bytes (the informer's cache) never
pays for a dict it does not need. A consumer that decodes every object anyway sets the stream's
`decoder` (the informer sets its cache's): each object is then decoded by it as its line is parsed
(`ev.prepared`), and that decode, not a probe, is the pass that checks the object.

The iterator ends when the server closes the stream (timeoutSeconds elapsed, server shutdown).
A connection that breaks mid-stream also just ends the iteration, and `stream.broken` says so —
the reflector treats both as "watch again from the last resourceVersion", as client-go's
StreamWatcher does. An ERROR event is yielded like any other; `ev.error()` turns its Status into
the typed exception (410 -> `errors.Gone`). `close()` (or leaving the `async with`) releases the
connection at once, also from another task while one is blocked reading.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import Any

import aiohttp
import msgspec

from kubecore.client import errors
from kubecore.client.rawmeta import MetaProbe, probe

log = logging.getLogger(__name__)

ADDED, MODIFIED, DELETED, BOOKMARK, ERROR = "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


class _Envelope(msgspec.Struct):
    type: str
    object: msgspec.Raw


_envelope = msgspec.json.Decoder(_Envelope)
_decode = msgspec.json.decode
_TYPES = {t.encode(): t for t in (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR)}
_HEAD = b'{"type":"'
_OBJECT = b'","object":'
_SPACE = b" \t\r\n"
_HEAD_LEN, _OBJECT_LEN = len(_HEAD), len(_OBJECT)
_NO_META: dict[str, Any] = {}
_OBJECT_BY = len(_HEAD) + max(map(len, _TYPES)) + len(_OBJECT)
"""Where `","object":` must have ended in a compact line (after the longest type)."""


Decoder = Callable[[bytes], tuple[Any, bytes]]
"""A consumer's decode of an event's object bytes: (what it keeps of the object, its JSON bytes);
`msgspec.DecodeError` if the bytes are not JSON (`Indexer.raw_decoder`)."""


class WatchEvent:
    """One event; `object` is decoded lazily from `raw`, `probe()` (rawmeta) at most once.
    `prepared` is the stream's `decoder` answer for `raw` when the stream has one."""

    __slots__ = ("type", "raw", "_object", "_probe", "prepared")

    def __init__(self, type: str, raw: bytes, obj: dict[str, Any] | None = None, *,
                 probed: MetaProbe | None = None, prepared: tuple[dict[str, Any], bytes] | None = None) -> None:
        self.type = type
        self.raw = raw
        self._object = obj
        self._probe = probed
        self.prepared = prepared

    @property
    def object(self) -> dict[str, Any]:
        if self._object is None:
            decoded = _decode(self.raw)
            self._object = decoded if isinstance(decoded, dict) else {}
        return self._object

    @property
    def is_decoded(self) -> bool:
        """Whether `object` is already decoded (then use it rather than decoding `raw` again)."""
        return self._object is not None

    @property
    def probed(self) -> MetaProbe | None:
        """`probe()`'s answer if it was already computed (None otherwise; never computes it)."""
        return self._probe

    def probe(self) -> MetaProbe:
        """`rawmeta.probe(raw)`, computed once."""
        if self._probe is None:
            self._probe = probe(self.raw)
        return self._probe

    def resource_version(self) -> str:
        """metadata.resourceVersion without decoding the whole object."""
        if self._object is not None:
            return str((self._object.get("metadata") or {}).get("resourceVersion") or "")
        if self.prepared is not None:  # (checked to be a str or absent, as probe() would)
            return str(self.prepared[0].get("metadata", _NO_META).get("resourceVersion", ""))
        return self.probe().metadata.resourceVersion

    def is_initial_events_end(self) -> bool:
        """A BOOKMARK that ends a sendInitialEvents stream."""
        if self.type != BOOKMARK:
            return False
        ann = self.probe().metadata.annotations or {}
        return ann.get(INITIAL_EVENTS_END) == "true"

    def error(self) -> errors.ApiError:
        """The typed error of an ERROR event's Status."""
        status = self.object
        code = status.get("code")
        return errors.error_for(status, code=int(code) if isinstance(code, int) else 500)

    def __repr__(self) -> str:
        return f"WatchEvent({self.type}, {len(self.raw)} bytes)"


def _probe_accepts(obj: Any) -> bool:
    """Whether `probe` accepts an object that decoded to `obj` (metadata.managedFields aside):
    a JSON object whose metadata, if present, is an object with a string resourceVersion and
    string annotations, if present."""
    if type(obj) is not dict:
        return False
    meta = obj.get("metadata", _NO_META)
    if type(meta) is not dict:
        return False
    if type(meta.get("resourceVersion", "")) is not str:
        return False
    ann = meta.get("annotations")
    return ann is None or (type(ann) is dict and all(type(v) is str for v in ann.values()))


def _parse_compact(line: bytes, decoder: Decoder | None = None) -> WatchEvent | None:
    """The event of a line laid out as `{"type":"T","object":OBJ}` (how every server writes
    them), with OBJ probed in the same pass that checks it is one JSON object (or, with a
    `decoder`, decoded by it instead: the decode is that check); None otherwise."""
    if not line.startswith(_HEAD):
        return None
    at = line.find(_OBJECT, _HEAD_LEN, _OBJECT_BY)
    if at < 0 or line[-1:] != b"}":
        return None
    kind = _TYPES.get(line[_HEAD_LEN:at])
    raw = line[at + _OBJECT_LEN:-1]
    if kind is None or not raw or raw[-1] in _SPACE:
        return None
    if decoder is not None:
        try:
            prepared = decoder(raw)
        except msgspec.DecodeError:
            return None
        if _probe_accepts(prepared[0]):
            return WatchEvent(kind, raw, prepared=prepared)
    try:
        probed = probe(raw)
    except msgspec.DecodeError:
        return None
    return WatchEvent(kind, raw, probed=probed)


def parse_line(line: bytes, decoder: Decoder | None = None) -> WatchEvent:
    """One event line (no trailing newline). Lines in the usual compact layout cost one typed pass
    over the object (with a `decoder`: its decode instead); others go through a full envelope
    decode."""
    ev = _parse_compact(line, decoder)
    if ev is not None:
        return ev
    env = _envelope.decode(line)
    return WatchEvent(env.type, bytes(env.object))


class WatchStream:
    """An open watch. Iterate once; close when done (idempotent)."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self._closed = False
        self.broken = False
        """True when the stream ended because the connection broke, not because the server ended it."""
        self.events = 0
        self.decoder: Decoder | None = None
        """Set before iterating: each object is decoded by it as its line is parsed (`prepared`),
        instead of being probed for the consumer to decode later (the informer sets its cache's)."""
        self._iter: AsyncIterator[WatchEvent] | None = None

    async def __aenter__(self) -> WatchStream:
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._response.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def __aiter__(self) -> AsyncIterator[WatchEvent]:
        """One iterator per stream: a second `async for` continues where the first stopped."""
        if self._iter is None:
            self._iter = self._events()
        return self._iter

    async def _events(self) -> AsyncIterator[WatchEvent]:
        buf = bytearray()
        try:
            async for chunk in self._response.content.iter_any():
                buf += chunk
                start = 0
                while (nl := buf.find(b"\n", start)) >= 0:
                    line, start = bytes(buf[start:nl]), nl + 1
                    if line and not line.isspace():  # (strip() would copy the line)
                        self.events += 1
                        yield parse_line(line, self.decoder)
                if start:
                    del buf[:start]
            if bytes(buf).strip():  # a last event without its newline
                self.events += 1
                yield parse_line(bytes(buf), self.decoder)
        except (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError) as e:
            if not self._closed:
                self.broken = True
                log.debug("watch stream broke: %s", e)
        except msgspec.DecodeError as e:
            self.broken = True
            log.warning("watch stream sent an undecodable event: %s", e)
        finally:
            self.close()
