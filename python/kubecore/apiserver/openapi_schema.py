"""OpenAPI schemas of the built-in types, named and shaped as upstream publishes them.

Sources (no hand-written schema): `kubecore.api.protobuf.schema` (every message's JSON fields in Go
struct order, their types and omitempty), `kubecore.api.openapi_facts` (required fields, list types,
atomic structs/maps from the Go markers) and the strategic-merge facts of `patch.py` (so the patch
metadata kubectl reads is exactly what this server applies).

    definitions(v3=False)  -> {"io.k8s.api.core.v1.Pod": {...}, ...}  every message, once, cached
    closure(defs, roots)   -> the names reachable from `roots` (what one document must carry)
    definition_name(msg)   -> "core.v1.Pod" -> "io.k8s.api.core.v1.Pod"
    kind_message(g, v, k)  -> the message of a built-in kind, or None

Shapes: v2 references are `{"$ref": "#/definitions/N"}`; v3 references are
`#/components/schemas/N`, and a non-pointer struct field is `{"allOf": [{"$ref"}], "default": {}}`
(kube-openapi's v3 convention). IntOrString and Quantity differ between v2 (`type: string`) and v3
(`oneOf`), as upstream. Descriptions are short and kubecore's own (most fields have none).
"""

from __future__ import annotations

import copy
from functools import lru_cache
from typing import Any

from kubecore.api.openapi_facts import FACTS
from kubecore.api.protobuf.schema import KINDS, MESSAGES
from kubecore.apiserver.patch import MERGE_KEYS, PORT_KEYS, PRIMITIVE_MERGE

Schema = dict[str, Any]

META = "io.k8s.apimachinery.pkg.apis.meta.v1."
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
RAW_EXTENSION = "io.k8s.apimachinery.pkg.runtime.RawExtension"

# Scalar type codes of the message table -> OpenAPI type/format.
SCALARS: dict[str, Schema] = {
    "string": {"type": "string"},
    "bytes": {"type": "string", "format": "byte"},
    "bool": {"type": "boolean"},
    "int32": {"type": "integer", "format": "int32"},
    "uint32": {"type": "integer", "format": "int32"},
    "int64": {"type": "integer", "format": "int64"},
    "uint64": {"type": "integer", "format": "int64"},
    "double": {"type": "number", "format": "double"},
    "float": {"type": "number", "format": "float"},
    "strlist": {"type": "array", "items": {"type": "string"}},
}
# Special type codes -> the definition they reference.
SPECIAL_REFS = {
    "time": META + "Time",
    "microtime": META + "MicroTime",
    "duration": META + "Duration",
    "fieldsv1": META + "FieldsV1",
    "quantity": QUANTITY,
    "intorstring": INT_OR_STRING,
    "rawextension": RAW_EXTENSION,
}


def _special_definitions(v3: bool) -> dict[str, Schema]:
    ts = "a timestamp in RFC 3339 form; serialized as a string"
    out: dict[str, Schema] = {
        META + "Time": {"description": ts, "type": "string", "format": "date-time"},
        META + "MicroTime": {"description": ts + " with microseconds", "type": "string", "format": "date-time"},
        META + "Duration": {"description": "a duration such as 1h30m; serialized as a string", "type": "string"},
        META + "FieldsV1": {"description": "a set of fields in the FieldsV1 trie form", "type": "object"},
        RAW_EXTENSION: {"description": "an embedded object of any kind", "type": "object"},
    }
    qty = "a fixed-point number with an optional suffix (100m, 1Gi, 2e3); serialized as a string"
    ios = "either an integer or a string"
    if v3:
        out[QUANTITY] = {"description": qty, "oneOf": [{"type": "string"}, {"type": "number"}]}
        out[INT_OR_STRING] = {"description": ios, "format": "int-or-string",
                              "oneOf": [{"type": "integer"}, {"type": "string"}]}
    else:
        out[QUANTITY] = {"description": qty, "type": "string"}
        out[INT_OR_STRING] = {"description": ios, "type": "string", "format": "int-or-string"}
    return out


def definition_name(msg: str) -> str:
    """Upstream's definition name of a message of the table."""
    pkg, _, name = msg.rpartition(".")
    if pkg == "meta.v1":
        return META + name
    return f"io.k8s.api.{pkg}.{name}"


def kind_message(group: str, version: str, kind: str) -> str | None:
    return KINDS.get((group, version, kind))


def _ref(name: str, v3: bool) -> Schema:
    return {"$ref": ("#/components/schemas/" if v3 else "#/definitions/") + name}


def _type_schema(code: str, v3: bool) -> Schema:
    if code in SCALARS:
        return copy.deepcopy(SCALARS[code])
    if code in SPECIAL_REFS:
        return _ref(SPECIAL_REFS[code], v3)
    if code.startswith("msg:"):
        return _ref(definition_name(code[4:]), v3)
    if code.startswith("[]"):
        return {"type": "array", "items": _type_schema(code[2:], v3)}
    if code.startswith("map["):
        value = code[code.index("]") + 1:]
        return {"type": "object", "additionalProperties": _type_schema(value, v3)}
    raise ValueError(f"unknown type code {code!r}")


def _patch_meta(field: str, code: str) -> tuple[str, str] | None:
    """(strategy, merge key) from patch.py's facts: the merge key must be a field of the element."""
    if not code.startswith("[]"):
        return None
    elem = code[2:]
    if not elem.startswith("msg:"):
        return ("merge", "") if field in PRIMITIVE_MERGE else None
    names = {f[0] for f in _flat_fields(elem[4:])}
    key = MERGE_KEYS.get(field)
    if key is None and field == "ports":
        key = next((k for k in sorted(PORT_KEYS) if k in names), None)
    return ("merge", key) if key and key in names else None


@lru_cache(maxsize=None)
def _flat_fields(msg: str) -> tuple[tuple[str, str, str, str], ...]:
    """(json name, type code, flags, owner message) of a message, inline members flattened."""
    out: list[tuple[str, str, str, str]] = []
    for _num, name, code, flags in MESSAGES[msg]:
        if "-" in flags:
            continue
        if "I" in flags:
            out.extend(_flat_fields(code[4:]))
        else:
            out.append((name, code, flags, msg))
    return tuple(out)


def _property(field: str, code: str, flags: str, owner: str, v3: bool) -> Schema:
    prop = _type_schema(code, v3)
    facts = FACTS.get(owner, {})
    list_type = facts.get("lists", {}).get(field)
    if list_type:
        prop["x-kubernetes-list-type"] = list_type[0]
        if list_type[1]:
            prop["x-kubernetes-list-map-keys"] = list(list_type[1])
    if field in facts.get("atomic_maps", ()):
        prop["x-kubernetes-map-type"] = "atomic"
    patch = _patch_meta(field, code)
    if patch:
        if patch[1]:
            prop["x-kubernetes-patch-merge-key"] = patch[1]
        prop["x-kubernetes-patch-strategy"] = patch[0]
    if v3 and "$ref" in prop and "P" not in flags and code.startswith("msg:"):
        prop = {"allOf": [prop], "default": {}}
    return prop


def _gvks_by_message() -> dict[str, list[dict[str, str]]]:
    out: dict[str, list[dict[str, str]]] = {}
    for (g, v, k), m in KINDS.items():
        if g != "meta.k8s.io":  # meta kinds get theirs per document (meta_gvks)
            out.setdefault(m, []).append({"group": g, "kind": k, "version": v})
    return out


TOP_LEVEL = frozenset(KINDS.values())


def _message_schema(msg: str, v3: bool, gvks: list[dict[str, str]]) -> Schema:
    props: dict[str, Schema] = {}
    required: list[str] = []
    for name, code, flags, owner in _flat_fields(msg):
        props[name] = _property(name, code, flags, owner, v3)
        if name in FACTS.get(owner, {}).get("required", ()):
            required.append(name)
    if msg in TOP_LEVEL:
        props["apiVersion"] = {"description": "the versioned schema of this object", "type": "string"}
        props["kind"] = {"description": "the kind of this object (CamelCase)", "type": "string"}
    kind = msg.rpartition(".")[2]
    out: Schema = {"description": _describe(msg, gvks)} if gvks else {}
    out.update({"type": "object", "properties": dict(sorted(props.items()))})
    if required:
        out["required"] = sorted(required)
    if gvks:
        out["x-kubernetes-group-version-kind"] = gvks
    if FACTS.get(msg, {}).get("atomic"):
        out["x-kubernetes-map-type"] = "atomic"
    if kind.endswith("List") and "items" in props:
        out["description"] = f"a list of {kind[:-4]} objects"
    return out


def _describe(msg: str, gvks: list[dict[str, str]]) -> str:
    g = gvks[0]
    return f"{g['kind']} ({g['group'] or 'core'}/{g['version']})"


@lru_cache(maxsize=2)
def definitions(v3: bool = False) -> dict[str, Schema]:
    """Every message of the table and the special types, by upstream definition name. Built once
    per flavour; callers must not mutate the result (documents copy what they publish)."""
    out = _special_definitions(v3)
    gvks = _gvks_by_message()
    for msg in MESSAGES:
        out[definition_name(msg)] = _message_schema(msg, v3, gvks.get(msg, []))
    return out


def meta_gvks(group_versions: list[tuple[str, str]], kind: str) -> list[dict[str, str]]:
    """The GVK list of a meta.k8s.io kind (DeleteOptions, Status, WatchEvent ...): upstream lists it
    under every served group-version."""
    return [{"group": g, "kind": kind, "version": v} for g, v in group_versions]


def refs(schema: Any) -> list[str]:
    """Definition names that a schema references directly (anywhere inside it)."""
    found: list[str] = []
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                found.append(ref.rpartition("/")[2])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


def closure(defs: dict[str, Schema], roots: list[str]) -> list[str]:
    """Names reachable from `roots` through references, roots first, each once."""
    seen: dict[str, None] = {}
    todo = [r for r in roots if r in defs]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen[name] = None
        todo.extend(r for r in refs(defs[name]) if r in defs and r not in seen)
    return list(seen)
