"""Decode Kubernetes protobuf request bodies into the JSON dict a JSON client would have sent.

A body is ``k8s\\x00`` + ``runtime.Unknown{typeMeta{apiVersion, kind}, raw, contentEncoding,
contentType}``; ``raw`` is the object's message (schemas in :mod:`.schema`).

The JSON produced follows what Go's ``encoding/json`` writes for the decoded Go struct, because that
is what a JSON client (kubectl with JSON, ``kubectl create --dry-run=client -o json``) sends:

* fields in Go struct order; inline (embedded) structs flattened into their parent;
* ``omitempty`` drops "", 0, false, nil pointers and empty slices/maps, never a non-pointer struct;
  ``omitzero`` drops zero values (a zero ``metav1.Time``); other absent fields appear as their zero
  value (``null`` for nil pointers, slices and maps);
* an absent non-pointer scalar is its zero value; a pointer scalar is set exactly when it is on the
  wire (so ``replicas: 0`` survives);
* int64 as JSON numbers, ``[]byte`` as base64, maps from map entries, ``Quantity`` as its string,
  ``IntOrString`` as an int or a string, ``Time`` as RFC 3339 seconds (``MicroTime`` with
  microseconds), ``Duration`` as Go's ``time.Duration`` string, ``RawExtension``/``FieldsV1`` as the
  embedded JSON.
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
from typing import Any

from kubecore.api.gotime import format_duration

from kubecore.api import errors
from kubecore.api.protobuf import wire
from kubecore.api.protobuf.schema import KINDS, MESSAGES

__all__ = ["MAGIC", "MEDIA_TYPE", "decode_body", "decode_message", "lookup_kind"]

MAGIC = b"k8s\x00"
MEDIA_TYPE = "application/vnd.kubernetes.protobuf"

# Kinds of meta.k8s.io/v1 that are registered in every group version (DeleteOptions bodies are sent
# with the resource's apiVersion, e.g. "apps/v1" or "v1").
_META_KINDS = frozenset({
    "DeleteOptions", "CreateOptions", "UpdateOptions", "PatchOptions", "GetOptions", "ListOptions",
    "Status", "WatchEvent", "PartialObjectMetadata", "PartialObjectMetadataList", "TableOptions",
})

_SCALARS = frozenset({"string", "bytes", "bool", "int32", "int64", "uint32", "uint64", "double", "float"})
# Struct-backed types with their own JSON marshalling (never dropped by omitempty unless a pointer).
_STRUCTS = frozenset({"time", "microtime", "duration", "intorstring", "quantity", "rawextension",
                      "fieldsv1"})


class _Malformed(Exception):
    """Decoding failed; the message is upstream-like text for a 400."""


class _Type:
    """A parsed type code from the schema table."""

    __slots__ = ("code", "elem", "key", "msg", "value")

    def __init__(self, code: str) -> None:
        self.code = code  # scalar name | special name | "msg" | "list" | "map" | "strlist"
        self.elem: _Type | None = None
        self.key: _Type | None = None
        self.value: _Type | None = None
        self.msg = ""


def _parse_type(t: str) -> _Type:
    if t.startswith("[]"):
        r = _Type("list")
        r.elem = _parse_type(t[2:])
        return r
    if t.startswith("map["):
        close = t.index("]")
        r = _Type("map")
        r.key = _parse_type(t[4:close])
        r.value = _parse_type(t[close + 1:])
        return r
    if t.startswith("msg:"):
        r = _Type("msg")
        r.msg = t[4:]
        return r
    return _Type(t)


class _Field:
    __slots__ = ("inline", "json", "name", "nilable", "num", "omitempty", "omitzero", "type")

    def __init__(self, num: int, name: str, type_code: str, flags: str) -> None:
        self.num = num
        self.name = name
        self.type = _parse_type(type_code)
        self.omitempty = "E" in flags
        self.omitzero = "Z" in flags
        self.nilable = "P" in flags
        self.inline = "I" in flags
        self.json = "-" not in flags


_compiled: dict[str, tuple[tuple[_Field, ...], dict[int, _Field]]] = {}


def _schema(name: str) -> tuple[tuple[_Field, ...], dict[int, _Field]]:
    got = _compiled.get(name)
    if got is None:
        table = MESSAGES.get(name)
        if table is None:  # pragma: no cover - the table is closed under references
            raise _Malformed(f"no protobuf schema for {name}")
        fields = tuple(_Field(*f) for f in table)
        got = (fields, {f.num: f for f in fields})
        _compiled[name] = got
    return got


# ---------------------------------------------------------------------------------------------
# scalar and special values

def _scalar(t: str, wt: int, v: wire.FieldValue, where: str) -> Any:
    if t == "string":
        if not isinstance(v, bytes):
            raise _Malformed(f"{where}: wrong wire type {wt} for a string")
        return v.decode("utf-8", errors="replace")
    if t == "bytes":
        if not isinstance(v, bytes):
            raise _Malformed(f"{where}: wrong wire type {wt} for bytes")
        return v
    if isinstance(v, bytes):
        raise _Malformed(f"{where}: wrong wire type {wt} for {t}")
    if t in ("double", "float"):
        if t == "double" and wt == wire.FIXED64:
            return wire.as_double(v)
        if t == "float" and wt == wire.FIXED32:
            return wire.as_float(v)
        raise _Malformed(f"{where}: wrong wire type {wt} for {t}")
    if wt != wire.VARINT:
        raise _Malformed(f"{where}: wrong wire type {wt} for {t}")
    if t == "bool":
        return v != 0
    if t == "int32":
        return wire.as_int32(v)
    if t == "int64":
        return wire.as_int64(v)
    if t == "uint32":
        return wire.as_uint32(v)
    return v  # uint64


def _scalar_zero(t: str) -> Any:
    if t == "string":
        return ""
    if t == "bool":
        return False
    if t in ("double", "float"):
        return 0.0
    if t == "bytes":
        return None
    return 0


def _timestamp(data: bytes, micro: bool) -> str | None:
    """metav1.Time / MicroTime: empty -> the zero time (JSON null)."""
    if not data:
        return None
    seconds = 0
    nanos = 0
    for num, wt, v in wire.iter_fields(data):
        if isinstance(v, bytes) or wt != wire.VARINT:
            continue
        if num == 1:
            seconds = wire.as_int64(v)
        elif num == 2:
            nanos = wire.as_int32(v)
    try:
        t = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC) + _dt.timedelta(seconds=seconds)
    except OverflowError:
        raise _Malformed(f"timestamp {seconds} is out of range") from None
    base = f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}"
    if not micro:
        return base + "Z"  # metav1.Time keeps only seconds (as upstream's Time.Unmarshal)
    micros = max(0, min(nanos, 999_999_999)) // 1000
    return f"{base}.{micros:06d}Z"


def _single_field(data: bytes, num: int) -> wire.FieldValue | None:
    last: wire.FieldValue | None = None
    for n, _wt, v in wire.iter_fields(data):
        if n == num:
            last = v
    return last


def _raw_json(raw: bytes, where: str) -> Any:
    if raw.startswith(MAGIC):
        return _decode_envelope(raw)
    try:
        return json.loads(raw)
    except ValueError:
        raise _Malformed(f"{where}: embedded raw object is neither JSON nor Kubernetes protobuf") from None


def _special(t: str, data: bytes | None, where: str) -> Any:
    """A special (custom-marshalled) struct from its message bytes; None bytes means absent/zero."""
    buf = data or b""
    if t == "time":
        return _timestamp(buf, micro=False)
    if t == "microtime":
        return _timestamp(buf, micro=True)
    if t == "duration":
        v = _single_field(buf, 1)
        return format_duration(wire.as_int64(v) if isinstance(v, int) else 0)
    if t == "quantity":
        v = _single_field(buf, 1)
        s = v.decode("utf-8", errors="replace") if isinstance(v, bytes) else ""
        return s or "0"
    if t == "intorstring":
        kind = 0
        ival = 0
        sval = ""
        for num, _wt, v in wire.iter_fields(buf):
            if num == 1 and isinstance(v, int):
                kind = wire.as_int64(v)
            elif num == 2 and isinstance(v, int):
                ival = wire.as_int32(v)
            elif num == 3 and isinstance(v, bytes):
                sval = v.decode("utf-8", errors="replace")
        if kind == 0:
            return ival
        if kind == 1:
            return sval
        raise _Malformed(f"{where}: impossible IntOrString.Type {kind}")
    if t in ("rawextension", "fieldsv1"):
        if data is None:
            return None
        v = _single_field(buf, 1)
        if not isinstance(v, bytes):
            return None
        return _raw_json(v, where)
    if t == "strlist":
        if data is None:
            return None
        return [v.decode("utf-8", errors="replace") for n, _wt, v in wire.iter_fields(buf)
                if n == 1 and isinstance(v, bytes)]
    raise _Malformed(f"{where}: unknown type {t}")  # pragma: no cover


# ---------------------------------------------------------------------------------------------
# messages

def _value(t: _Type, data: bytes | None, where: str) -> Any:
    """A message-typed or special value from (possibly merged) bytes; None = absent."""
    if t.code == "msg":
        return _message(t.msg, data or b"", where)
    return _special(t.code, data, where)


def _elem(t: _Type, wt: int, v: wire.FieldValue, where: str) -> Any:
    """One element of a repeated field or a map value, fully converted to JSON."""
    if t.code in _SCALARS:
        out = _scalar(t.code, wt, v, where)
        if t.code == "bytes":
            return base64.b64encode(out).decode("ascii")
        return out
    if not isinstance(v, bytes):
        raise _Malformed(f"{where}: wrong wire type {wt} for a message")
    return _value(t, v, where)


def _map_entry(t: _Type, data: bytes, where: str) -> tuple[str, Any]:
    assert t.key is not None and t.value is not None
    key: Any = None
    val_wt = -1
    val: wire.FieldValue | None = None
    for num, wt, v in wire.iter_fields(data):
        if num == 1:
            key = _scalar(t.key.code, wt, v, where)
        elif num == 2:
            if val is not None and isinstance(val, bytes) and isinstance(v, bytes) and \
                    t.value.code not in _SCALARS:
                val = val + v
            else:
                val = v
            val_wt = wt
    if key is None:
        key = _scalar_zero(t.key.code)
    key_s = key if isinstance(key, str) else json.dumps(key)
    if val is None:
        if t.value.code in _SCALARS:
            z = _scalar_zero(t.value.code)
            return key_s, ("" if t.value.code == "bytes" else z)
        return key_s, _value(t.value, b"", where)
    return key_s, _elem(t.value, val_wt, val, where)


def _is_empty(f: _Field, v: Any) -> bool:
    """Go's omitempty test for the JSON value of field ``f``."""
    if v is None:
        return True
    code = f.type.code
    if code in ("list", "map", "strlist"):
        return len(v) == 0
    if code in _SCALARS:
        if f.nilable and code != "bytes":
            return False  # a set pointer is never empty, even when it points at a zero value
        return bool(v == "" or v == 0 or v is False)  # bytes are base64 text here: "" when empty
    return False  # structs are never empty


def decode_message(name: str, data: bytes, where: str = "") -> dict[str, Any]:
    """Decode the message ``name`` (a key of MESSAGES) into its JSON dict; raises StatusError 400."""
    try:
        return _message(name, data, where or name)
    except (_Malformed, wire.WireError) as e:
        raise errors.bad_request(f"unable to decode protobuf {name}: {e}") from None
    except RecursionError:
        raise errors.bad_request(f"unable to decode protobuf {name}: nesting too deep") from None


def _message(name: str, data: bytes, where: str) -> dict[str, Any]:
    fields, by_num = _schema(name)
    single: dict[int, Any] = {}      # scalar values / merged message bytes
    lists: dict[int, list[Any]] = {}
    maps: dict[int, dict[str, Any]] = {}
    for num, wt, v in wire.iter_fields(data):
        f = by_num.get(num)
        if f is None:
            continue  # unknown fields are ignored, as upstream's generated decoders do
        t = f.type
        fw = f"{where}.{f.name or t.msg}"
        if t.code == "list":
            assert t.elem is not None
            acc = lists.setdefault(num, [])
            if wt == wire.LEN and t.elem.code in _SCALARS and t.elem.code not in ("string", "bytes"):
                assert isinstance(v, bytes)
                ewt = wire.FIXED64 if t.elem.code == "double" else \
                    wire.FIXED32 if t.elem.code == "float" else wire.VARINT
                acc.extend(_scalar(t.elem.code, ewt, x, fw) for x in wire.unpack_packed(v, ewt))
            else:
                acc.append(_elem(t.elem, wt, v, fw))
        elif t.code == "map":
            if not isinstance(v, bytes):
                raise _Malformed(f"{fw}: wrong wire type {wt} for a map entry")
            k, val = _map_entry(t, v, fw)
            maps.setdefault(num, {})[k] = val
        elif t.code in _SCALARS:
            single[num] = _scalar(t.code, wt, v, fw)
        else:
            if not isinstance(v, bytes):
                raise _Malformed(f"{fw}: wrong wire type {wt} for a message")
            prev = single.get(num)
            single[num] = v if prev is None else prev + v  # repeated message = merge

    out: dict[str, Any] = {}
    for f in fields:
        if not f.json:
            continue
        t = f.type
        present = f.num in single or f.num in lists or f.num in maps
        value: Any
        if t.code == "list":
            value = lists.get(f.num)
        elif t.code == "map":
            value = maps.get(f.num)
        elif t.code in _SCALARS:
            if f.num in single:
                value = single[f.num]
                if t.code == "bytes":
                    value = base64.b64encode(value).decode("ascii")
            else:
                value = None if (f.nilable or t.code == "bytes") else _scalar_zero(t.code)
        elif not present and f.nilable:
            value = None
        else:
            value = _value(t, single.get(f.num), f"{where}.{f.name or t.msg}")
        if f.inline:
            if isinstance(value, dict):
                out.update(value)
            continue
        if f.omitzero and _is_zero(f, value, present):
            continue
        if f.omitempty and _is_empty(f, value):
            continue
        out[f.name] = value
    return out


def _is_zero(f: _Field, v: Any, present: bool) -> bool:
    """Go's omitzero: the zero value of the field's type (IsZero() for time)."""
    if v is None:
        return True
    code = f.type.code
    if code in _SCALARS:
        return v in ("", 0, False) if code != "bytes" else False
    if code == "msg" and not f.nilable:
        return bool(v == _message(f.type.msg, b"", ""))
    if code in ("list", "map", "strlist"):
        return False
    return not present and code in _STRUCTS


# ---------------------------------------------------------------------------------------------
# the envelope

def _split_api_version(api_version: str) -> tuple[str, str]:
    if "/" in api_version:
        g, _, v = api_version.partition("/")
        return g, v
    return "", api_version


def lookup_kind(api_version: str, kind: str) -> str | None:
    """The schema message for a (apiVersion, kind), or None when not known."""
    group, version = _split_api_version(api_version)
    msg = KINDS.get((group, version, kind))
    if msg is None and kind in _META_KINDS:
        msg = KINDS.get(("meta.k8s.io", "v1", kind))
    return msg


def _decode_envelope(raw: bytes) -> dict[str, Any]:
    if not raw.startswith(MAGIC):
        raise _Malformed(f"provided data does not appear to be a protobuf message, expected prefix {list(MAGIC)}")
    api_version = ""
    kind = ""
    payload = b""
    encoding = ""
    content_type = ""
    for num, _wt, v in wire.iter_fields(raw[len(MAGIC):]):
        if not isinstance(v, bytes):
            continue
        if num == 1:
            for n2, _wt2, v2 in wire.iter_fields(v):
                if isinstance(v2, bytes) and n2 == 1:
                    api_version = v2.decode("utf-8", errors="replace")
                elif isinstance(v2, bytes) and n2 == 2:
                    kind = v2.decode("utf-8", errors="replace")
        elif num == 2:
            payload = v
        elif num == 3:
            encoding = v.decode("utf-8", errors="replace")
        elif num == 4:
            content_type = v.decode("utf-8", errors="replace")
    if encoding:
        raise _Malformed(f"unsupported content encoding {encoding!r} in the protobuf envelope")
    if content_type and content_type != MEDIA_TYPE:
        raise _Malformed(f"unsupported content type {content_type!r} in the protobuf envelope")
    if not kind:
        raise _Malformed("Object 'Kind' is missing in the protobuf envelope")
    if not api_version:
        raise _Malformed("Object 'apiVersion' is missing in the protobuf envelope")
    msg = lookup_kind(api_version, kind)
    if msg is None:
        raise _UnknownKind(api_version, kind)
    obj: dict[str, Any] = {"kind": kind, "apiVersion": api_version}
    obj.update(_message(msg, payload, kind))
    return obj


class _UnknownKind(_Malformed):
    def __init__(self, api_version: str, kind: str) -> None:
        super().__init__(f'no kind "{kind}" is registered for version "{api_version}" in the protobuf decoder')


def decode_body(raw: bytes) -> dict[str, Any]:
    """Decode a ``application/vnd.kubernetes.protobuf`` request body into a JSON-shaped dict.

    Returns the object as a JSON client would have sent it, with ``kind`` and ``apiVersion`` first.
    Raises ``StatusError`` 400 BadRequest for malformed input and for kinds with no protobuf schema.
    """
    try:
        return _decode_envelope(bytes(raw))
    except _UnknownKind as e:
        raise errors.bad_request(str(e)) from None
    except (_Malformed, wire.WireError) as e:
        raise errors.bad_request(f"the body of the request could not be decoded as protobuf: {e}") from None
    except RecursionError:
        raise errors.bad_request("the body of the request could not be decoded as protobuf: nesting too deep") \
            from None
