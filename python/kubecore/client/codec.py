"""How the informer cache keeps objects small: JSON bytes, deflated against a shared dictionary.

A decoded pod is ~20-25 KB of Python dicts, lists and strings; 150,000 of them would not fit in
1 GB. The cache therefore keeps each object as the JSON bytes the server sent, compressed with
zlib using a *preset dictionary* (RFC 1950 FDICT): the first object the codec sees. Objects of one
resource share almost all their keys and most values (image, labels, owner, tolerations, status
shape), so against that dictionary a ~3.5 KB pod deflates to ~120-250 bytes, where plain zlib
gets ~1.4 KB. Decoding is a decompress (~10 µs) plus the msgspec decode the caller would pay anyway.

Entry format (first byte is a tag, so entries written before the dictionary existed stay readable):

    b"{" ...          plain JSON (objects stored before the dictionary was chosen, or tiny ones)
    b"\\x01" + deflate  raw deflate stream against this codec's dictionary

The deflate window is sized to the dictionary (twice its length, 512 B to 32 KB: `window_bits`), not
zlib's default 32 KB: setting up a compressor with the default window and hash table costs ~20 µs
per object (they are large enough for malloc to map fresh pages each time), a 4 KB window ~5 µs,
and a pod compresses to the same size either way. Entries live in memory only, so the stream is
raw deflate (no zlib header or checksum) and its window size is the codec's own business.

The dictionary is chosen once (the first object at least `MIN_DICT` bytes long) and never changes,
so every entry remains decodable for the codec's lifetime; an entry must only be decoded by the
codec that encoded it. `CompactCodec(compress=False)` keeps plain JSON (for measuring the gain).
"""

from __future__ import annotations

import zlib
from typing import Any

import msgspec

_PLAIN = ord("{")
_DEFLATED = 1
MIN_DICT = 256
"""Objects shorter than this do not make a useful dictionary (and are not worth deflating)."""
MAX_DICT = 32 * 1024
"""zlib's window: dictionary bytes past this would be ignored."""

_encode = msgspec.json.encode
_decode = msgspec.json.decode


def window_bits(dictionary_length: int) -> int:
    """Raw-deflate window bits (negative, as zlib takes them) for a dictionary of this length: a
    window of at least twice its length, so one object after it still reaches all of it."""
    need = max(2 * dictionary_length, 512)
    return -max(9, min(15, (need - 1).bit_length()))


class CodecError(ValueError):
    """An entry this codec cannot read (written by another codec, or corrupted)."""


class CompactCodec:
    """Encode objects to compact bytes and back. Invariant: once `dictionary` is set it never changes."""

    def __init__(self, *, compress: bool = True, level: int = 1, dictionary: bytes | None = None) -> None:
        self.compress = compress
        self.level = level
        self.dictionary: bytes | None = None
        self.wbits = -15
        if dictionary:
            self._set_dictionary(dictionary)

    def _set_dictionary(self, raw: bytes) -> None:
        self.dictionary = raw[:MAX_DICT]
        self.wbits = window_bits(len(self.dictionary))

    def _choose_dictionary(self, raw: bytes) -> None:
        if self.dictionary is None and len(raw) >= MIN_DICT:
            self._set_dictionary(raw)

    def encode_raw(self, raw: bytes) -> bytes:
        """Compact form of one object's JSON bytes (as the server sent them)."""
        if not self.compress or len(raw) < MIN_DICT:
            return raw if raw[:1] == b"{" else raw.lstrip()
        self._choose_dictionary(raw)
        assert self.dictionary is not None
        c = zlib.compressobj(self.level, zlib.DEFLATED, self.wbits, zdict=self.dictionary)
        return b"\x01" + c.compress(raw) + c.flush()

    def encode(self, obj: dict[str, Any]) -> bytes:
        return self.encode_raw(_encode(obj))

    def raw(self, entry: bytes) -> bytes:
        """The JSON bytes of an entry."""
        if not entry:
            raise CodecError("an empty cache entry")
        tag = entry[0]
        if tag == _PLAIN:
            return entry
        if tag == _DEFLATED:
            if self.dictionary is None:
                raise CodecError("a deflated entry but this codec has no dictionary")
            d = zlib.decompressobj(self.wbits, zdict=self.dictionary)
            try:
                return d.decompress(entry[1:]) + d.flush()
            except zlib.error as e:
                raise CodecError(f"a deflated entry does not inflate against this codec's dictionary: {e}") from e
        raise CodecError(f"unknown cache entry tag {tag:#x}")

    def decode(self, entry: bytes) -> dict[str, Any]:
        """The object of an entry, freshly decoded (the caller owns it)."""
        obj = _decode(self.raw(entry))
        if not isinstance(obj, dict):
            raise CodecError("a cache entry that is not a JSON object")
        return obj
