"""Field sets and metadata.managedFields, in upstream's encoding (structured-merge-diff fieldpath).

A *field set* is a set of paths; a path is a tuple of path elements:

    ("f", "data")                          a field of a map or struct          f:data
    ("k", '{"name":"main"}')               an item of an associative list      k:{"name":"main"}
    ("v", '"example.com/x"')               an item of a set list               v:"example.com/x"
    ("i", 3)                               a list index (only read, never produced)

Key and value elements keep their JSON text (keys sorted, Go's escaping), so equal items are
equal tuples. A set holds its *members*; a path whose descendants are also members is written
with a ``.`` entry in FieldsV1. Worked example (a configmap created with data a=1, then the
label app=x added by another request):

    {"f:data": {".": {}, "f:a": {}}}          # "data" was added as a whole, and its key a
    {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}

``field_set`` is upstream's ToFieldSet (what an applied configuration claims), ``compare`` is
typed.Compare (what an update added, modified, removed). The entries of metadata.managedFields
that hold these sets are kubecore.api.managedentries.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from kubecore import _native
from kubecore.api.errors import encode_go_json, go_quote
from kubecore.api.typefacts import KEY_DEFAULTS, ListType, SchemaFacts, TypeFacts, name_tables

__all__ = [
    "ABSENT", "PE", "Path", "FieldPathError", "canon", "item_element", "path_string", "to_fields_v1",
    "from_fields_v1", "iterate", "ensure_named_fields", "filter_paths", "field_set", "Comparison",
    "compare",
]

PE = tuple[str, Any]
Path = tuple[PE, ...]
_decode = msgspec.json.decode


class _Absent:
    """A field that is not there (as opposed to a field whose value is null)."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()


# An object that cannot be turned into field paths (a keyed list item without its key): a
# ValueError, raised by the native walkers as well as by item_element.
FieldPathError = _native.FieldPathError


# ---- path elements ------------------------------------------------------------------------------

def _sorted_json(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _sorted_json(v[k]) for k in sorted(v)}
    if isinstance(v, list):
        return [_sorted_json(x) for x in v]
    return v


def canon(v: Any) -> str:
    """The JSON text upstream writes for a key or set value (sorted keys, Go escaping)."""
    return encode_go_json(_sorted_json(v)).decode()


def item_element(item: Any, lt: ListType, names: tuple[str, ...]) -> PE:
    """The path element of one item of a set or associative list."""
    if lt.relationship == "set":
        return ("v", canon(item))
    if not isinstance(item, dict):
        raise FieldPathError(f".{'.'.join(names)}: associative list with keys has an element that is not a map")
    key: dict[str, Any] = {}
    for k in lt.keys:
        v = item.get(k)
        if v is None and k in item:
            raise FieldPathError(f".{'.'.join(names)}: key field {go_quote(k)} cannot be null")
        if v is None:
            if k not in KEY_DEFAULTS:
                raise FieldPathError(
                    f".{'.'.join(names)}: associative list with keys has an element that omits key field "
                    f"{go_quote(k)} (and doesn't have default value)")
            v = KEY_DEFAULTS[k]
        key[k] = v
    return ("k", canon(key))


def _value_key(v: Any) -> tuple[Any, ...]:
    """value.Compare's total order: numbers, strings, bools, lists, maps, null."""
    if isinstance(v, bool):
        return (2, v)
    if isinstance(v, (int, float)):
        return (0, v)
    if isinstance(v, str):
        return (1, v)
    if isinstance(v, list):
        return (3, tuple(_value_key(x) for x in v))
    if isinstance(v, dict):
        return (4, tuple((k, _value_key(v[k])) for k in sorted(v)))
    return (5,)


@functools.lru_cache(maxsize=8192)
def _pe_key(pe: PE) -> tuple[Any, ...]:
    kind, raw = pe
    if kind == "f":
        return (0, raw)
    if kind == "k":
        fields = _decode(raw)
        return (1, tuple((k, _value_key(fields[k])) for k in sorted(fields)))
    if kind == "v":
        return (2, _value_key(_decode(raw)))
    return (3, raw)


def _to_string(v: Any) -> str:
    """value.ToString: strings quoted as Go's %q."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return go_quote(v)
    if isinstance(v, list):
        return "[" + ",".join(_to_string(x) for x in v) + "]"
    if isinstance(v, dict):
        return "".join(f"{k}={_to_string(x)}" for k, x in v.items())
    return str(v)


def _pe_string(pe: PE) -> str:
    kind, raw = pe
    if kind == "f":
        return "." + str(raw)
    if kind == "k":
        fields = _decode(raw)
        return "[" + ",".join(f"{k}={_to_string(fields[k])}" for k in sorted(fields)) + "]"
    if kind == "v":
        return f"[={_to_string(_decode(raw))}]"
    return f"[{raw}]"


def path_string(path: Path) -> str:
    """fieldpath.Path.String(): ``.spec.containers[name="main"].image``."""
    return "".join(_pe_string(pe) for pe in path)


def _serialize_pe(pe: PE) -> str:
    kind, raw = pe
    return f"{kind}:{raw}"


def _parse_pe(s: str) -> PE | None:
    """A FieldsV1 key; None for an unknown element type (skipped, as upstream does)."""
    if len(s) < 2 or s[1] != ":":
        raise ValueError(f"missing colon: {s}")
    kind, raw = s[0], s[2:]
    if kind == "f":
        return ("f", raw)
    if kind in ("k", "v"):
        try:
            value = _decode(raw)
        except msgspec.DecodeError as e:
            raise ValueError(f"parsing key as path element: {e}") from None
        if kind == "k" and not isinstance(value, dict):
            raise ValueError(f"parsing key as path element: {s} is not an object")
        return (kind, canon(value))
    if kind == "i":
        if not raw.lstrip("-").isdigit():
            raise ValueError(f"parsing key as path element: invalid index {raw!r}")
        return ("i", int(raw))
    return None


# ---- sets as trees: FieldsV1, iteration order ----------------------------------------------------

_Tree = dict[PE, list[Any]]  # element -> [is_member, children tree]


def _tree(paths: Iterable[Path]) -> _Tree:
    root: _Tree = {}
    for p in paths:
        node = root
        for pe in p[:-1]:
            entry = node.get(pe)
            if entry is None:
                entry = node[pe] = [False, {}]
            node = entry[1]
        last = node.get(p[-1])
        if last is None:
            node[p[-1]] = [True, {}]
        else:
            last[0] = True
    return root


def _emit(tree: _Tree, include_self: bool) -> dict[str, Any]:
    out: dict[str, Any] = {".": {}} if include_self and tree else {}
    for pe in sorted(tree, key=_pe_key) if len(tree) > 1 else tree:
        member, children = tree[pe]
        out[f"{pe[0]}:{pe[1]}"] = _emit(children, member) if children else {}
    return out


# Both conversions are pure and the same sets come back on every write of an object (each
# manager's entry is read and written again), so recent results are remembered: a set by its
# paths, a FieldsV1 object by its JSON bytes. Results are handed out as copies.
_MEMO_SIZE = 2048
_to_memo: dict[frozenset[Path], bytes] = {}
_from_memo: dict[bytes, frozenset[Path]] = {}
_encode_json = msgspec.json.Encoder().encode
_decode_json = msgspec.json.Decoder(dict[str, Any]).decode


def _remember(memo: dict[Any, Any], key: Any, value: Any) -> None:
    if len(memo) >= _MEMO_SIZE:
        memo.clear()
    memo[key] = value


def to_fields_v1(paths: Iterable[Path]) -> dict[str, Any]:
    """The FieldsV1 object of a set (upstream's Set.ToJSON, same key order)."""
    key = paths if isinstance(paths, frozenset) else frozenset(paths)
    raw = _to_memo.get(key)
    if raw is None:
        raw = _encode_json(_emit(_tree(key), False))
        _remember(_to_memo, key, raw)
    return _decode_json(raw)


def from_fields_v1(raw: Any) -> set[Path]:
    """Parses a FieldsV1 object; raises ValueError when it is malformed."""
    if not isinstance(raw, dict):
        raise ValueError("FieldsV1 must be a JSON object")
    key = _encode_json(raw)
    known = _from_memo.get(key)
    if known is not None:
        return set(known)
    out: set[Path] = set()
    _read(raw, (), out)
    _remember(_from_memo, key, frozenset(out))
    return out


def _read(node: dict[str, Any], prefix: Path, out: set[Path]) -> bool:
    """Adds the members under `prefix`; returns whether `prefix` itself is a member."""
    member = not node
    for k, v in node.items():
        if k == ".":
            member = True
            continue
        pe = _parse_pe(k)
        if pe is None:
            continue
        if not isinstance(v, dict):
            raise ValueError(f"FieldsV1 entry {k!r} must be an object")
        if _read(v, prefix + (pe,), out):
            out.add(prefix + (pe,))
    return member


def iterate(paths: Iterable[Path]) -> list[Path]:
    """Set.Iterate order: at each level the members (sorted), then each child's subtree."""
    out: list[Path] = []

    def walk(tree: _Tree, prefix: Path) -> None:
        order = sorted(tree, key=_pe_key)
        out.extend(prefix + (pe,) for pe in order if tree[pe][0])
        for pe in order:
            if tree[pe][1]:
                walk(tree[pe][1], prefix + (pe,))

    walk(_tree(paths), ())
    return out


def ensure_named_fields(paths: Iterable[Path]) -> set[Path]:
    """Set.EnsureNamedFieldsAreMembers: every field on the way to a member is a member too."""
    out = set(paths)
    for p in list(out):
        for i in range(1, len(p)):
            if p[i - 1][0] == "f":
                out.add(p[:i])
    return out


def filter_paths(paths: Iterable[Path], skip: frozenset[str]) -> set[Path]:
    """The paths outside the top-level fields `skip` (reset fields: status on a main resource)."""
    if not skip:
        return set(paths)
    return {p for p in paths if not p or p[0][1] not in skip}


# ---- the walkers: ToFieldSet and Compare, native ----------------------------------------------------
# kubecore._native.FieldFacts (rust/fieldpath) walks the JSON of whole objects; it applies the
# rules of TypeFacts / SchemaFacts to typefacts' name tables (or to a CRD's structural schema),
# handed over once per facts object. tests/unit/api/fieldpath_reference.py holds the Python
# walkers it reproduces (the oracle of a differential test).

_encode_obj = msgspec.json.Encoder().encode
_NATIVE: dict[TypeFacts, _native.FieldFacts] = {}
_NATIVE_SIZE = 1024


def _build_native(facts: TypeFacts) -> _native.FieldFacts:
    t = name_tables()
    schema: bytes | None = None
    if isinstance(facts, SchemaFacts):
        schema = _encode_obj(facts.schema)
    elif type(facts) is not TypeFacts:
        raise TypeError(f"no native field-set walker for {type(facts).__name__}: use TypeFacts or SchemaFacts")
    return _native.FieldFacts(
        facts.group, facts.kind, typed=facts.typed, keyed=t.keyed, container_ports=t.container_ports,
        service_ports=t.service_ports, container_fields=t.container_fields, atomic_maps=t.atomic_maps,
        key_defaults={k: canon(v) for k, v in t.key_defaults.items()}, schema=schema)


def _walker(facts: TypeFacts) -> _native.FieldFacts:
    native = _NATIVE.get(facts)
    if native is None:
        if len(_NATIVE) >= _NATIVE_SIZE:
            _NATIVE.clear()
        native = _NATIVE[facts] = _build_native(facts)
    return native


def field_set(obj: Any, facts: TypeFacts, *, skip: frozenset[str] = frozenset()) -> set[Path]:
    """The fields an object (an applied configuration) sets: leaves, list items, empty maps,
    nulls; nothing under the top-level fields `skip`."""
    if not isinstance(obj, dict):
        return set()
    return _walker(facts).field_set(_encode_obj(obj), tuple(skip) if skip else ())


@dataclass
class Comparison:
    added: set[Path] = field(default_factory=set)
    modified: set[Path] = field(default_factory=set)
    removed: set[Path] = field(default_factory=set)


def _without(obj: Any, skip: frozenset[str]) -> Any:
    if isinstance(obj, dict) and not skip.isdisjoint(obj):
        return {k: v for k, v in obj.items() if k not in skip}
    return obj


def compare(lhs: Any, rhs: Any, facts: TypeFacts, *, skip: frozenset[str] = frozenset()) -> Comparison:
    """What changed from `lhs` to `rhs` (typed.Compare): containers that appear or disappear as a
    whole are reported themselves, as well as every leaf under them. Top-level fields in `skip`
    are not compared (upstream's ExcludeFields of reset fields). Either side may be ABSENT."""
    if skip:  # skipped fields are not even encoded: a status update compares the status alone
        lhs, rhs = _without(lhs, skip), _without(rhs, skip)
    added, modified, removed = _walker(facts).compare(
        None if lhs is ABSENT else _encode_obj(lhs), None if rhs is ABSENT else _encode_obj(rhs),
        tuple(skip) if skip else ())
    return Comparison(added, modified, removed)
