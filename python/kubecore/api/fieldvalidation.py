"""Field validation of write bodies: unknown and duplicate JSON fields, per `fieldValidation`.

Upstream decodes a body into the kind's Go struct, so unknown fields never reach storage, and its
strict JSON decoder reports unknown and duplicate fields in document order as
`unknown field "spec.bogus"` / `duplicate field "metadata.name"`. Per the request's directive:

    Strict  create/update: 400 `<Kind> in version "<v>" cannot be handled as a <Kind>: strict decoding
            error: <errors joined by ", ">`; patch: 422 Invalid on field `patch` (as upstream)
    Warn    (the default) every error becomes a `Warning: 299 - "<error>"` response header
    Ignore  nothing is said
and in every mode unknown fields are dropped from the object before it is stored. Kinds without a
built-in schema (custom resources) are left alone: their schemas prune them elsewhere.

Cost (the create path is hot): one walk over the body's known structure, that visits each object
once and never builds a path unless it finds an unknown field. Duplicates are found without a second
parser in the common case: the walk counts the keys it saw, and the raw body's key count is
`raw.count(b'":') - raw.count(b'\\\\":')` (a `"` inside a string is always escaped); only when the
two differ (a duplicate, or unusual spacing) is the body parsed again with ordered pairs to name them.
The count runs natively (`native_count`: kubecore._native.NativeFieldModel, a kind's model compiled
once); `fast_count` is its reference, and decides what the native walk leaves to Python.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from kubecore._native import NativeFieldModel
from kubecore.api import errors
from kubecore.api.gofmt import go_float
from kubecore.api.protobuf.schema import KINDS, MESSAGES
from kubecore.api.registry import ResourceType

STRICT, WARN, IGNORE = "Strict", "Warn", "Ignore"
DIRECTIVES = ("", IGNORE, STRICT, WARN)  # upstream's allowed values, sorted
OPTIONS_KIND = {"create": "CreateOptions", "update": "UpdateOptions", "patch": "PatchOptions"}

# Node kinds of the compiled model: LEAF a scalar or a list of scalars; SMAP a map of scalars; FREE
# a value of any shape (RawExtension, FieldsV1); MSG/LIST/MAP a message, a list of them, a map of them.
LEAF, MSG, LIST, MAP, FREE, SMAP = 0, 1, 2, 3, 4, 5
FREE_TYPES = ("rawextension", "fieldsv1")


class Node:
    """One message's fields: `spec` name -> (kind, child node); `known` all names; `inner` the
    names whose values the fast count must look into (every kind but LEAF); `native` the tree
    from this node compiled for `native_count`, once asked for."""

    __slots__ = ("spec", "known", "inner", "native")

    def __init__(self) -> None:
        self.spec: dict[str, tuple[int, Any]] = {}  # (kind, child Node or None)
        self.known: frozenset[str] = frozenset()
        self.inner: frozenset[str] = frozenset()
        self.native: NativeFieldModel | None = None

    def seal(self) -> None:
        self.known = frozenset(self.spec)
        self.inner = frozenset(k for k, (kind, _) in self.spec.items() if kind != LEAF)


def directive(value: str | None, verb: str) -> str:
    """The request's fieldValidation (absent or empty -> Warn); 422 for an unknown value."""
    if not value:
        return WARN
    if value in DIRECTIVES:
        return value
    cause = errors.FieldError.not_supported("fieldValidation", value, DIRECTIVES)
    raise errors.invalid(("meta.k8s.io", OPTIONS_KIND.get(verb, "CreateOptions")), "", [cause])


# ---- the model -----------------------------------------------------------------------------

def _compile(msg: str, nodes: dict[str, Node]) -> Node:
    if msg in nodes:
        return nodes[msg]
    node = Node()
    nodes[msg] = node  # before recursing: messages may refer to themselves
    _fill(msg, node, nodes)
    node.seal()
    return node


def _kind_of(code: str) -> int:
    if any(t in code for t in FREE_TYPES):
        return FREE
    return SMAP if code.startswith("map[") else LEAF


def _fill(msg: str, node: Node, nodes: dict[str, Node]) -> None:
    for _num, name, code, flags in MESSAGES[msg]:
        if "-" in flags:
            continue
        if "I" in flags:
            _fill(code[4:], node, nodes)
        elif code.startswith("msg:"):
            node.spec[name] = (MSG, _compile(code[4:], nodes))
        elif code.startswith("[]msg:"):
            node.spec[name] = (LIST, _compile(code[6:], nodes))
        elif code.startswith("map[") and "]msg:" in code:
            node.spec[name] = (MAP, _compile(code.split("]msg:", 1)[1], nodes))
        else:
            node.spec[name] = (_kind_of(code), None)


@lru_cache(maxsize=None)
def model(group: str, version: str, kind: str) -> Node | None:
    """The compiled field tree of a built-in kind (apiVersion and kind included), or None."""
    msg = KINDS.get((group, version, kind))
    if msg is None or group == "meta.k8s.io":
        return None
    root = Node()
    root.spec.update(_compile(msg, _NODES).spec)
    root.spec["apiVersion"] = root.spec["kind"] = (LEAF, None)
    root.seal()
    return root


_NODES: dict[str, Node] = {}


# ---- the fast walk -------------------------------------------------------------------------

def _count(v: Any) -> int:
    """Keys inside a value the schema does not describe (free-form, or unknown)."""
    if type(v) is dict:
        n = len(v)
        for x in v.values():
            if type(x) is dict or type(x) is list:
                n += _count(x)
        return n
    if type(v) is list:
        n = 0
        for x in v:
            if type(x) is dict or type(x) is list:
                n += _count(x)
        return n
    return 0


def fast_count(obj: dict[str, Any], node: Node) -> int:
    """Keys of a body that has no unknown field, or -1 as soon as one is seen. Set operations in C
    do the per-key work; only values that can hold objects are visited."""
    if not obj.keys() <= node.known:
        return -1
    n = len(obj)
    spec = node.spec
    for k in obj.keys() & node.inner:
        kind, child = spec[k]
        v = obj[k]
        tv = type(v)
        if kind == MSG:
            if tv is dict:
                c = fast_count(v, child)
                if c < 0:
                    return -1
                n += c
        elif kind == LIST:
            if tv is list:
                for item in v:
                    if type(item) is dict:
                        c = fast_count(item, child)
                        if c < 0:
                            return -1
                        n += c
        elif kind == SMAP:
            if tv is dict:
                n += len(v)
        elif kind == FREE:
            n += _count(v)
        elif tv is dict:  # MAP of messages
            for item in v.values():
                if type(item) is dict:
                    c = fast_count(item, child)
                    if c < 0:
                        return -1
                    n += c
    return n


def native_count(obj: dict[str, Any], node: Node) -> int:
    """`fast_count` by the compiled model (built at the first call for `node`, which must not
    change afterwards); `fast_count` itself for what the model leaves to Python (None: a dict
    subclass, a key that is not a str, an object nested very deep)."""
    compiled = node.native
    if compiled is None:
        compiled = node.native = NativeFieldModel(node)
    n = compiled.count(obj)
    return fast_count(obj, node) if n is None else n


def walk(obj: dict[str, Any], node: Node, prefix: str, unknown: list[str]) -> int:
    """Drops fields that `node` does not know (their paths appended to `unknown`, in document
    order); returns how many keys the object held, for the duplicate check.

    A map of scalars adds its length without looking at its values: a value that is an object
    there makes the count differ, which only sends the body to the exact check."""
    n = len(obj)
    drop: list[str] | None = None
    get = node.spec.get
    for k, v in obj.items():
        spec = get(k)
        if spec is None:
            unknown.append(f"{prefix}.{k}" if prefix else k)
            drop = [k] if drop is None else drop + [k]
            n += _count(v)
            continue
        kind = spec[0]
        if kind == LEAF:
            pass
        elif kind == SMAP:
            if type(v) is dict:
                n += len(v)
        elif kind == MSG:
            if type(v) is dict:
                n += walk(v, spec[1], f"{prefix}.{k}" if prefix else k, unknown)
        elif kind == LIST:
            if type(v) is list:
                child = spec[1]
                base = f"{prefix}.{k}" if prefix else k
                for i, item in enumerate(v):
                    if type(item) is dict:
                        n += walk(item, child, f"{base}[{i}]", unknown)
        elif kind == FREE:
            n += _count(v)
        elif type(v) is dict:  # MAP of messages
            child = spec[1]
            base = f"{prefix}.{k}" if prefix else k
            for mk, item in v.items():
                if type(item) is dict:
                    n += walk(item, child, f"{base}.{mk}", unknown)
    if drop:
        for k in drop:
            del obj[k]
    return n


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def raw_key_count(raw: bytes) -> int:
    """Object keys in a JSON text written with `"key":` (no space before the colon)."""
    return raw.count(b'":') - raw.count(b'\\":')


# ---- the exact (slow) path: ordered pairs ----------------------------------------------------

class _Pairs(list[tuple[str, Any]]):
    """A JSON object as its ordered (key, value) pairs."""


def _ordered(raw: bytes) -> Any:
    try:
        return json.loads(raw, object_pairs_hook=_Pairs)
    except ValueError:
        return None


def ordered_errors(value: Any, node: Node | None, prefix: str = "") -> list[str]:
    """Unknown and duplicate fields of an ordered-pairs tree, in document order (upstream's order).
    With node None (free-form), only duplicates are reported."""
    out: list[str] = []
    if isinstance(value, list) and not isinstance(value, _Pairs):
        for i, item in enumerate(value):
            out += ordered_errors(item, node, f"{prefix}[{i}]")
        return out
    if not isinstance(value, _Pairs):
        return out
    seen: set[str] = set()
    for k, v in value:
        path = _join(prefix, k)
        if k in seen:
            out.append(f'duplicate field "{path}"')
            continue
        seen.add(k)
        spec = node.spec.get(k) if node is not None else (LEAF, None)
        if spec is None:
            out.append(f'unknown field "{path}"')
        elif spec[0] in (MSG, LIST):
            out += ordered_errors(v, spec[1], path)
        elif spec[0] == MAP and isinstance(v, _Pairs):
            seen_keys: set[str] = set()
            for mk, item in v:
                out += [f'duplicate field "{_join(path, mk)}"'] if mk in seen_keys else ordered_errors(item, spec[1], _join(path, mk))
                seen_keys.add(mk)
        elif isinstance(v, list):  # a map or free-form value: only duplicates, at any depth
            out += ordered_errors(v, None, path)
    return out


def strict_errors(obj: dict[str, Any], node: Node, raw: bytes | None) -> list[str]:
    """Prunes unknown fields of `obj`; returns upstream's strict decoding errors for it."""
    unknown: list[str] = []
    seen = native_count(obj, node)
    if seen < 0:  # some field is unknown: the ordered walk names and drops them
        seen = walk(obj, node, "", unknown)
    found = [f'unknown field "{p}"' for p in unknown]
    if raw is not None and raw_key_count(raw) != seen:
        pairs = _ordered(raw)
        if pairs is not None:
            found = ordered_errors(pairs, node)
    return found


def patch_duplicates(raw: bytes | None, patch: Any) -> list[str]:
    """Duplicate fields of a merge or strategic-merge patch body (upstream decodes it strictly)."""
    if raw is None or raw_key_count(raw) == _count(patch):
        return []
    pairs = _ordered(raw)
    return ordered_errors(pairs, None) if pairs is not None else []


# ---- per request -----------------------------------------------------------------------------

def _model_of(rt: ResourceType) -> Node | None:
    if getattr(rt, "schema", None) is not None:
        return None  # a custom resource: pruned by its own structural schema
    return model(rt.group, rt.version, rt.kind)


def check_body(rt: ResourceType, body: dict[str, Any], *, mode: str, raw: bytes | None) -> list[str]:
    """create / update / update_status: prunes unknown fields of `body`; returns the warnings to
    send (Warn), nothing (Ignore), or raises upstream's 400 (Strict)."""
    node = _model_of(rt)
    if node is None:
        return []
    found = strict_errors(body, node, raw if mode != IGNORE else None)
    if not found or mode == IGNORE:
        return []
    if mode == STRICT:
        api_version = body.get("apiVersion")
        version = api_version.rpartition("/")[2] if isinstance(api_version, str) and api_version else rt.version
        kind = body.get("kind") if isinstance(body.get("kind"), str) and body.get("kind") else rt.kind
        raise errors.bad_request(
            f"{kind} in version {errors.go_quote(version)} cannot be handled as a {rt.kind}: "
            f"strict decoding error: {', '.join(found)}")
    return found


def check_patched(rt: ResourceType, patched: dict[str, Any], *, mode: str, patch: Any, raw: bytes | None,
                  strategic: bool) -> list[str]:
    """patch: prunes unknown fields of the patched object; duplicates are looked for in the patch
    body itself (merge and strategic-merge patches; `raw` None for JSON patches). Strict fails with
    upstream's 422 on the field `patch`."""
    node = _model_of(rt)
    if node is None:
        return []
    found = patch_duplicates(raw, patch) if mode != IGNORE else []
    # Strict names the patched object as it was before pruning (not a hot path: kubectl patches
    # with the default directive, Warn).
    value = "" if mode != STRICT else go_format(patch) if strategic else errors.encode_go_json(patched).decode()
    unknown: list[str] = []
    walk(patched, node, "", unknown)
    found += [f'unknown field "{p}"' for p in unknown]
    if not found or mode == IGNORE:
        return []
    if mode == STRICT:
        detail = "strict decoding error: " + ", ".join(found)
        raise errors.invalid(("", ""), "", [errors.FieldError.invalid("patch", value, detail)])
    return found


def go_format(v: Any) -> str:
    """Go's %+v of a decoded JSON value (map keys sorted, strings bare), as upstream prints a
    strategic merge patch in its strict-decoding error."""
    if isinstance(v, dict):
        return "map[" + " ".join(f"{k}:{go_format(v[k])}" for k in sorted(v)) + "]"
    if isinstance(v, list):
        return "[" + " ".join(go_format(x) for x in v) + "]"
    if v is None:
        return "<nil>"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return go_float(v)
    return str(v)


def warning_header(text: str) -> str:
    """A Warning header value as upstream writes it: code 299, agent "-", the text Go-quoted."""
    return f"299 - {errors.go_quote(text)}"
