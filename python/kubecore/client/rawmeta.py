"""What a client reads off an object's JSON bytes without decoding the object.

A watch event is one pod's JSON (about 2 KB from a real server); decoding it into dicts is the
dearest thing an informer does per event, and every extra pass over the bytes (even one that only
skips values) costs a fifth of that. This module keeps those passes to one and makes the decode
that follows cheaper:

- `probe(raw)` is one typed pass over an object's bytes that keeps what the client machinery needs
  of its metadata: `resourceVersion`, `annotations` (a bookmark's initial-events-end) and the
  *bytes* of `managedFields` (located, not decoded). It also checks that `raw` is exactly one JSON
  object whose metadata, if any, is an object (`msgspec.DecodeError` / `ValidationError` if not).
- `decode_without_managed_fields(raw, probe=...)` is kube-scheduler's and kube-controller-manager's
  informer transform (`indexer.strip_managed_fields`: drop metadata.managedFields) done on the
  bytes: the member is cut out and only the rest is decoded, so its nested dicts (fieldsV1 has one
  per field: most of a pod's dicts) are never built. It returns the object and its bytes, which the
  cache then keeps without encoding the object again. Without a probe from the caller, a
  managedFields value that an earlier probe validated (objects written by one client in one second
  share it, and a pod keeps it when bound) is recognised by comparing bytes, and only the document
  up to the member is read to place it: the probe's pass over the whole object is saved.

Guarantee of the cut: the object is exactly (same keys, same order) what
`strip_managed_fields(msgspec.json.decode(raw))` gives, and the bytes decode to it. The cut is
made only when it is certain: either the probe found the member in metadata and located its
value, the key is written compactly (`"managedFields":`) exactly once in the document and that
occurrence is followed by the located value; or the first compact key is metadata's member (the
document up to it decodes as such) and is followed by a value validated before (`_known_value`).
In both cases the decoded result must have no metadata.managedFields left. In
every other case (no such member, another layout, a member of that name elsewhere in the object,
a key spelled with escapes) the whole object is decoded and the member removed from the dict, as
the plain transform does; only then are the bytes encoded again. A value that is not a JSON object
comes back as decoded, for the caller to refuse; invalid JSON raises `msgspec.DecodeError`.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["MetaProbe", "probe", "decode_without_managed_fields"]

_KEY = b'"managedFields":'
_MEMBER = "managedFields"
_ABSENT = object()
_SPACE = b" \t\r\n"
_decode = msgspec.json.decode
_encode = msgspec.json.encode


class _Meta(msgspec.Struct):
    resourceVersion: str = ""
    annotations: dict[str, str] | None = None
    managedFields: msgspec.Raw = msgspec.Raw()


class MetaProbe(msgspec.Struct):
    """The probed parts of an object (see `probe`); `metadata.managedFields` is empty when absent."""

    metadata: _Meta = msgspec.field(default_factory=_Meta)


_probe = msgspec.json.Decoder(MetaProbe)


def probe(raw: bytes) -> MetaProbe:
    """One typed pass over `raw` (see the module docstring)."""
    return _probe.decode(raw)


def _cut(raw: bytes, start: int, end: int) -> bytes:
    """`raw` without the member at [start, end) and one comma next to it."""
    if start > 0 and raw[start - 1] == 0x2C:  # "," just before it: the compact layout, no scanning
        return raw[:start - 1] + raw[end:]
    before = start
    while before > 0 and raw[before - 1] in _SPACE:
        before -= 1
    if before > 0 and raw[before - 1] == 0x2C:  # ","
        return raw[:before - 1] + raw[end:]
    after = end
    while after < len(raw) and raw[after] in _SPACE:
        after += 1
    if after < len(raw) and raw[after] == 0x2C:
        return raw[:start] + raw[after + 1:]
    return raw[:start] + raw[end:]


def _slow(raw: bytes) -> tuple[Any, bytes]:
    """Decode everything, drop the member from the dict, encode again only if it was there."""
    obj = _decode(raw)
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if isinstance(meta, dict) and meta.pop(_MEMBER, _ABSENT) is not _ABSENT:
        return obj, _encode(obj)
    return obj, raw


class _HeadMeta(msgspec.Struct):
    managedFields: msgspec.Raw = msgspec.Raw()


class _Head(msgspec.Struct):
    metadata: _HeadMeta = msgspec.field(default_factory=_HeadMeta)


_head = msgspec.json.Decoder(_Head)
_ZERO = msgspec.Raw(b"0")
_FINGERPRINT = 128
"""Leading bytes of a managedFields value that key `_validated` (they reach the first entry's time);
only longer values are kept (a shorter one costs little to pass over)."""
_VALIDATED_LIMIT = 128
_VALIDATED_MAX_BYTES = 8192
_validated: dict[bytes, tuple[bytes, ...]] = {}
"""managedFields values a full `probe` located, by their first `_FINGERPRINT` bytes (up to 4 per
fingerprint, up to `_VALIDATED_LIMIT` fingerprints, the oldest dropped first; at most 4 MB): each
is one complete JSON array. Objects written by one client in one second share theirs, and a pod's
binding keeps it, so a few entries cover a burst of events."""


def _remember_validated(value: bytes) -> None:
    if not _FINGERPRINT < len(value) <= _VALIDATED_MAX_BYTES or value[:1] != b"[":  # (arrays only: see
        return                                                                     # `_known_value`)
    key = value[:_FINGERPRINT]
    known = _validated.get(key, ())
    if value in known:
        return
    if not known and len(_validated) >= _VALIDATED_LIMIT:
        _validated.pop(next(iter(_validated)), None)
    _validated[key] = (*known[-3:], value)


def _known_value(raw: bytes, at: int) -> int:
    """The length of the value after the compact `"managedFields":` key at `at` when that value is
    one already validated and the key is certainly a member of the top-level object's metadata;
    0 otherwise. Reads only the document up to the key, and compares the value's bytes.

    Why that is enough: `raw` up to the key's colon, closed with `0}}`, must decode with
    metadata.managedFields = 0 (so that part is a well-formed prefix whose last key is that
    member); the bytes from there must start with a validated value, a complete JSON array (no
    array is a prefix of another, so in a well-formed document it is the whole value); and the
    caller decodes the document without the member, which checks everything after it. Together
    these make `raw` well-formed with exactly that member, as `probe` would have found it; a key
    of that name elsewhere (another object's, or metadata's spelled with escapes) is left for the
    caller's final check."""
    start = at + len(_KEY)
    candidates = _validated.get(raw[start:start + _FINGERPRINT])
    if candidates is None:
        return 0
    for value in candidates:
        if raw.startswith(value, start):
            break
    else:
        return 0
    try:
        head = _head.decode(raw[:start] + b"0}}")
    except msgspec.DecodeError:
        return 0
    return len(value) if head.metadata.managedFields == _ZERO else 0


def decode_without_managed_fields(raw: bytes, *, probed: MetaProbe | None = None) -> tuple[Any, bytes]:
    """(the object without metadata.managedFields, its JSON bytes); `probed`: `probe(raw)` if the
    caller has it (without it, a managedFields value validated before is not passed over again:
    `_known_value`). See the module docstring."""
    at = raw.find(_KEY)
    if at < 0:
        return _slow(raw)
    n = 0 if probed is not None else _known_value(raw, at)
    if not n:
        if raw.find(_KEY, at + 1) >= 0:  # (a key spelled otherwise, or another object's: the slow path)
            return _slow(raw)
        fresh = probed is None
        if probed is None:
            try:
                probed = _probe.decode(raw)
            except msgspec.ValidationError:
                return _slow(raw)
        value = probed.metadata.managedFields
        n = len(value)
        if not n or not raw.startswith(value, at + len(_KEY)):  # (a Raw is a buffer: no copy)
            return _slow(raw)
        if fresh:
            _remember_validated(bytes(value))
    cut = _cut(raw, at, at + len(_KEY) + n)
    try:
        obj = _decode(cut)
    except msgspec.DecodeError:  # the rest of `raw` is not JSON: the plain decode raises
        return _slow(raw)
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict) or _MEMBER in meta:
        return _slow(raw)
    return obj, cut
