"""PATCH bodies: JSON patch (RFC 6902), JSON merge patch (RFC 7386) and strategic merge patch.

Strategic merge patch here covers the common cases: maps merge recursively, `null` deletes,
lists of objects with a known merge key (containers by name, ports by containerPort, ...) merge
element by element, `$patch: delete|replace` directives; other lists are replaced. Directive keys
that only steer ordering (`$setElementOrder/...`, `$retainKeys`) are dropped. The merge keys are
the per-type facts of kubecore.api.typefacts (shared with server-side apply).

Apply patches (application/apply-patch+yaml) are decoded here (`decode_apply`: YAML or JSON, the
first document) and merged by kubecore.api.fieldmanager.
"""

from __future__ import annotations

import base64
from typing import Any

import yaml

from kubecore.api.jsoncopy import json_copy
from kubecore.api import errors
from kubecore.api.typefacts import SMP_MERGE_KEYS

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH)

# Field name -> merge key for lists of objects (upstream's patchMergeKey tags on core types).
MERGE_KEYS = SMP_MERGE_KEYS
PORT_KEYS = {"containerPort", "port"}


def _bad_patch(message: str) -> errors.StatusError:
    return errors.StatusError(422, "Invalid", message)


def mentions_resource_version(content_type: str, patch: Any) -> bool:
    """Whether the patch itself reads or sets metadata.resourceVersion (then it is a precondition)."""
    if content_type == JSON_PATCH:
        return isinstance(patch, list) and any(
            isinstance(op, dict) and "/metadata/resourceVersion" in (op.get("path"), op.get("from")) for op in patch
        )
    meta = patch.get("metadata") if isinstance(patch, dict) else None
    return isinstance(meta, dict) and "resourceVersion" in meta


# Lists of scalars merged as sets (patchStrategy "merge" on a primitive list).
PRIMITIVE_MERGE = {"finalizers"}


def apply_patch(content_type: str, target: dict[str, Any], patch: Any) -> dict[str, Any]:
    if content_type == JSON_PATCH:
        return json_patch(target, patch)
    if not isinstance(patch, dict):
        raise errors.bad_request("a merge patch must be a JSON object")
    if content_type == MERGE_PATCH:
        out = merge_patch(target, patch)
    else:
        out = strategic_merge(target, patch)
    if not isinstance(out, dict):
        raise errors.bad_request("the patch does not produce an object")
    return out


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return json_copy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = merge_patch(result.get(k), v)
    return result


def strategic_merge(target: Any, patch: Any, field: str = "") -> Any:
    if not isinstance(patch, dict):
        return json_copy(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: json_copy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if k.startswith("$deleteFromPrimitiveList/"):
            field_name = k.split("/", 1)[1]
            if isinstance(result.get(field_name), list) and isinstance(v, list):
                result[field_name] = [x for x in result[field_name] if x not in v]
            continue
        if k.startswith("$"):
            continue
        if k in PRIMITIVE_MERGE and isinstance(v, list) and isinstance(result.get(k), list):
            result[k] = result[k] + [x for x in v if x not in result[k]]
            continue
        if v is None:
            result.pop(k, None)
        elif isinstance(v, list) and isinstance(result.get(k), list):
            result[k] = _merge_list(k, result[k], v)
        else:
            merged = strategic_merge(result.get(k), v, k)
            if merged is None and isinstance(v, dict) and v.get("$patch") == "delete":
                result.pop(k, None)
            else:
                result[k] = merged
    return result


def _merge_key(field: str, items: list[Any]) -> str | None:
    if field in MERGE_KEYS:
        return MERGE_KEYS[field]
    if field == "ports" and items and isinstance(items[0], dict):
        return next((k for k in PORT_KEYS if k in items[0]), None)
    return None


def _merge_list(field: str, current: list[Any], patch: list[Any]) -> list[Any]:
    key = _merge_key(field, patch or current)
    if key is None or not all(isinstance(x, dict) for x in current + patch):
        if any(isinstance(x, dict) and x.get("$patch") == "replace" for x in patch):
            return [x for x in patch if not (isinstance(x, dict) and "$patch" in x)]
        return json_copy(patch)
    out = [dict(x) for x in current]
    index = {x.get(key): i for i, x in enumerate(out)}
    for item in patch:
        if item.get("$patch") == "replace":
            return [x for x in patch if "$patch" not in x]
        k = item.get(key)
        if item.get("$patch") == "delete":
            out = [x for x in out if x.get(key) != k]
            index = {x.get(key): i for i, x in enumerate(out)}
        elif k in index:
            out[index[k]] = strategic_merge(out[index[k]], item, field)
        else:
            index[k] = len(out)
            out.append(json_copy(item))
    return out


# ---- RFC 6902 ------------------------------------------------------------------------------

def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise errors.bad_request(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc: Any, parts: list[str]) -> Any:
    for p in parts:
        if isinstance(doc, list):
            doc = doc[_index(p, len(doc), allow_end=False)]
        elif isinstance(doc, dict) and p in doc:
            doc = doc[p]
        else:
            raise _bad_patch(f"path not found: /{'/'.join(parts)}")
    return doc


def _index(p: str, n: int, *, allow_end: bool) -> int:
    if p == "-" and allow_end:
        return n
    if not p.isdigit() or int(p) > n or (int(p) == n and not allow_end):
        raise _bad_patch(f"array index {p!r} out of range")
    return int(p)


def _add(doc: Any, parts: list[str], value: Any) -> Any:
    if not parts:
        return value
    parent = _walk(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, list):
        parent.insert(_index(last, len(parent), allow_end=True), value)
    elif isinstance(parent, dict):
        parent[last] = value
    else:
        raise _bad_patch(f"cannot add to a scalar at /{'/'.join(parts)}")
    return doc


def _remove(doc: Any, parts: list[str]) -> Any:
    if not parts:
        raise _bad_patch("cannot remove the whole document")
    parent = _walk(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, list):
        return parent.pop(_index(last, len(parent), allow_end=False))
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    raise _bad_patch(f"path not found: /{'/'.join(parts)}")


def json_patch(target: dict[str, Any], ops: Any) -> dict[str, Any]:
    if not isinstance(ops, list):
        raise errors.bad_request("a JSON patch must be a list of operations")
    doc: Any = json_copy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise errors.bad_request(f"invalid JSON patch operation: {op!r}")
        kind, parts = op["op"], _pointer(str(op["path"]))
        if kind == "add":
            doc = _add(doc, parts, json_copy(op.get("value")))
        elif kind == "remove":
            _remove(doc, parts)
        elif kind == "replace":
            _remove(doc, parts)
            doc = _add(doc, parts, json_copy(op.get("value")))
        elif kind in ("move", "copy"):
            src = _pointer(str(op.get("from", "")))
            value = _remove(doc, src) if kind == "move" else json_copy(_walk(doc, src))
            doc = _add(doc, parts, value)
        elif kind == "test":
            if _walk(doc, parts) != op.get("value"):
                raise _bad_patch(f"test failed at {op['path']}")
        else:
            raise errors.bad_request(f"unknown JSON patch operation {kind!r}")
    if not isinstance(doc, dict):
        raise errors.bad_request("the patch does not produce an object")
    return doc


# ---- apply configurations ------------------------------------------------------------------------

class _ApplyLoader(yaml.CSafeLoader if hasattr(yaml, "CSafeLoader") else yaml.SafeLoader):  # type: ignore[misc]
    """YAML as sigs.k8s.io/yaml reads it into JSON: timestamps stay strings."""


_ApplyLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _jsonable(v: Any) -> Any:
    """YAML data as JSON data: map keys become strings (true/false/null spelled as JSON)."""
    if isinstance(v, dict):
        return {_key(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(v).decode()
    return v


def _key(k: Any) -> str:
    if isinstance(k, bool):
        return "true" if k else "false"
    if k is None:
        return "null"
    return str(k)


def decode_apply(raw: bytes) -> dict[str, Any]:
    """An apply patch body (YAML, of which JSON is a subset) as a JSON object; 400 otherwise."""
    try:
        docs = yaml.load_all(raw, Loader=_ApplyLoader)
        doc = next(docs, None)
    except yaml.YAMLError as e:
        detail = str(e).replace("\n", " ")
        raise errors.bad_request(f"error encoding patch: error converting YAML to JSON: yaml: {detail}") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        kind = "array" if isinstance(doc, list) else ("string" if isinstance(doc, str) else "number")
        raise errors.bad_request(
            f"error decoding patch: json: cannot unmarshal {kind} into Go value of type map[string]interface {{}}")
    out: dict[str, Any] = _jsonable(doc)
    return out
