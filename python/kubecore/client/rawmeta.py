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
  cache then keeps without encoding the object again.

Guarantee of the cut: the object is exactly (same keys, same order) what
`strip_managed_fields(msgspec.json.decode(raw))` gives, and the bytes decode to it. The cut is
made only when it is certain: the probe found the member in metadata and located its value, the
key is written compactly (`"managedFields":`) exactly once in the document and that occurrence is
followed by the located value, and the decoded result has no metadata.managedFields left. In
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


def decode_without_managed_fields(raw: bytes, *, probed: MetaProbe | None = None) -> tuple[Any, bytes]:
    """(the object without metadata.managedFields, its JSON bytes); `probed`: `probe(raw)` if the
    caller has it. See the module docstring."""
    at = raw.find(_KEY)
    if at < 0 or raw.find(_KEY, at + 1) >= 0:  # (no member, or a key spelled otherwise: the slow path)
        return _slow(raw)
    if probed is None:
        try:
            probed = _probe.decode(raw)
        except msgspec.ValidationError:
            return _slow(raw)
    value = probed.metadata.managedFields
    start, n = at + len(_KEY), len(value)
    if not n or not raw.startswith(bytes(value), start):
        return _slow(raw)
    cut = _cut(raw, at, start + n)
    try:
        obj = _decode(cut)
    except msgspec.DecodeError:  # cannot happen after the checks above; the plain decode decides
        return _slow(raw)
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict) or _MEMBER in meta:
        return _slow(raw)
    return obj, cut
