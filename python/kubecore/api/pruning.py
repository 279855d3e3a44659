"""What the apiextensions server does to a custom resource when decoding it, before validation:
prune unknown fields, drop non-nullable nulls, drop unknown ObjectMeta fields, apply defaults.

Ports apiserver/schema/pruning (Prune), defaulting (PruneNonNullableNullsWithoutDefaults,
Default) and objectmeta (Coerce, Validate for embedded resources) over the structural part of a
CRD schema: ``properties``, ``additionalProperties``, ``items``, ``default``, ``nullable``,
``x-kubernetes-preserve-unknown-fields`` and ``x-kubernetes-embedded-resource``. Value
validations (allOf, anyOf, ...) never keep a field, as upstream.

Worked example (schema: spec.replicas integer with default 1, no other fields)::

    {"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "x", "bogus": 1},
     "spec": {"extra": true}}
    -> unknown: ["metadata.bogus", "spec.extra"]
    -> {"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "x"}, "spec": {"replicas": 1}}

Unknown-field paths use the pruning algorithm's notation (``spec.items[0].foo``) and come back
sorted; a request with ``fieldValidation=Strict`` turns them into a 400.
"""

from __future__ import annotations

import copy
from typing import Any

from kubecore.api.errors import FieldError
from kubecore.api.validation import is_dns1035_label

__all__ = ["prune", "prune_nulls", "apply_defaults", "coerce_metadata", "has_defaults", "coerce",
           "validate_embedded", "OBJECT_META_FIELDS"]

Schema = dict[str, Any]
_META = ("apiVersion", "kind", "metadata")
OBJECT_META_FIELDS = frozenset({
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations",
    "ownerReferences", "finalizers", "managedFields",
})


def _props(s: Schema | None) -> dict[str, Any]:
    p = (s or {}).get("properties")
    return p if isinstance(p, dict) else {}


def _has_additional(s: Schema | None) -> bool:
    return s is not None and "additionalProperties" in s and s["additionalProperties"] is not None


def _additional(s: Schema | None) -> Schema | None:
    ap = (s or {}).get("additionalProperties")
    return ap if isinstance(ap, dict) else None


def _items(s: Schema | None) -> Schema | None:
    it = (s or {}).get("items")
    return it if isinstance(it, dict) else None


def _join(parent: str, key: str) -> str:
    return f"{parent}.{key}" if parent else key


# ---- pruning ---------------------------------------------------------------------------------

def prune(obj: Any, schema: Schema | None, *, root: bool = True) -> list[str]:
    """Removes every field the schema does not specify (in place); returns the removed paths,
    sorted. At the resource root apiVersion, kind and metadata are kept (metadata is coerced
    separately), as for any ``x-kubernetes-embedded-resource``."""
    s: Schema = dict(schema or {})
    if root:
        s["x-kubernetes-embedded-resource"] = True
    unknown: list[str] = []
    _prune(obj, s, "", unknown)
    return sorted(unknown)


def _prune(x: Any, s: Schema | None, path: str, unknown: list[str]) -> None:
    if s is not None and s.get("x-kubernetes-preserve-unknown-fields"):
        _skip_prune(x, s, path, unknown)
        return
    if isinstance(x, dict):
        if s is None:
            unknown.extend(_join(path, k) for k in x)
            x.clear()
            return
        for k in _prune_known(x, s, path, unknown):
            if k not in _META or path:
                unknown.append(_join(path, k))
            del x[k]
    elif isinstance(x, list):
        items = _items(s)
        for i, v in enumerate(x):
            _prune(v, items, f"{path}[{i}]", unknown)


def _prune_known(x: dict[str, Any], s: Schema, path: str, unknown: list[str]) -> list[str]:
    """Prunes inside the keys of `x` the schema describes; returns the keys it does not describe
    (an embedded resource's apiVersion/kind/metadata are left alone)."""
    embedded = bool(s.get("x-kubernetes-embedded-resource"))
    props = _props(s)
    rest: list[str] = []
    for k in list(x):
        if embedded and k in _META:
            continue
        if k in props:
            _prune(x[k], props[k] if isinstance(props[k], dict) else None, _join(path, k), unknown)
        elif _has_additional(s):
            _prune(x[k], _additional(s), _join(path, k), unknown)
        else:
            rest.append(k)
    return rest


def _skip_prune(x: Any, s: Schema | None, path: str, unknown: list[str]) -> None:
    if s is None:
        return
    if isinstance(x, dict):
        _prune_known(x, s, path, unknown)  # unknown keys stay: the schema preserves them
    elif isinstance(x, list):
        for i, v in enumerate(x):
            _skip_prune(v, _items(s), f"{path}[{i}]", unknown)


def _field_schema(key: str, s: Schema | None) -> Schema | None:
    props = _props(s)
    if key in props:
        return props[key] if isinstance(props[key], dict) else None
    return _additional(s)


def prune_nulls(x: Any, s: Schema | None) -> None:
    """PruneNonNullableNullsWithoutDefaults: a null where the schema allows no null and has no
    default is dropped (a null with a default is left for defaulting)."""
    if isinstance(x, dict):
        for k in list(x):
            sub = _field_schema(k, s)
            if x[k] is None and sub is not None and not sub.get("nullable") and "default" not in sub:
                del x[k]
            else:
                prune_nulls(x[k], sub)
    elif isinstance(x, list):
        items = _items(s)
        for v in x:
            prune_nulls(v, items)


# ---- defaulting ------------------------------------------------------------------------------

def _non_nullable_null(x: Any, s: Schema | None) -> bool:
    return x is None and s is not None and not s.get("nullable")


def apply_defaults(x: Any, s: Schema | None) -> None:
    """structural defaulting.Default: fills missing (or non-nullable null) fields from their
    schema's ``default`` (deep copies), then descends."""
    if s is None:
        return
    if isinstance(x, dict):
        props = _props(s)
        for k, prop in props.items():
            if not isinstance(prop, dict) or "default" not in prop:
                continue
            if k not in x or _non_nullable_null(x[k], prop):
                x[k] = copy.deepcopy(prop["default"])
        extra = _additional(s)
        for k in list(x):
            if k in props:
                apply_defaults(x[k], props[k] if isinstance(props[k], dict) else None)
            elif extra is not None:
                if _non_nullable_null(x[k], extra):
                    x[k] = copy.deepcopy(extra.get("default"))
                apply_defaults(x[k], extra)
    elif isinstance(x, list):
        items = _items(s)
        for i in range(len(x)):
            if _non_nullable_null(x[i], items) and items is not None:
                x[i] = copy.deepcopy(items.get("default"))
            apply_defaults(x[i], items)


def has_defaults(s: Any) -> bool:
    """Whether any schema node below ``s`` has a ``default``."""
    if isinstance(s, dict):
        if "default" in s:
            return True
        return any(has_defaults(v) for k, v in s.items() if k not in ("enum", "example", "default"))
    if isinstance(s, list):
        return any(has_defaults(v) for v in s)
    return False


# ---- ObjectMeta --------------------------------------------------------------------------------

def coerce_metadata(x: Any, s: Schema | None, *, path: str = "", root: bool = True) -> list[str]:
    """objectmeta.Coerce: unknown ObjectMeta fields of the resource (and of every embedded
    resource) are dropped; returns their paths."""
    unknown: list[str] = []
    if not isinstance(x, dict):
        return unknown
    if root or (s is not None and s.get("x-kubernetes-embedded-resource")):
        meta = x.get("metadata")
        if isinstance(meta, dict):
            for k in list(meta):
                if k not in OBJECT_META_FIELDS:
                    unknown.append(_join(_join(path, "metadata"), k))
                    del meta[k]
    for k, v in x.items():
        if root and k == "metadata":
            continue
        sub = _field_schema(k, s)
        if isinstance(v, dict):
            unknown.extend(coerce_metadata(v, sub, path=_join(path, k), root=False))
        elif isinstance(v, list):
            items = _items(sub)
            for i, it in enumerate(v):
                unknown.extend(coerce_metadata(it, items, path=f"{_join(path, k)}[{i}]", root=False))
    return unknown


def coerce(obj: dict[str, Any], schema: Schema | None) -> list[str]:
    """The whole decode-time treatment of a custom resource (in place): prune, drop
    non-nullable nulls, coerce metadata, default. Returns the unknown field paths."""
    unknown = prune(obj, schema)
    prune_nulls(obj, schema)
    unknown += coerce_metadata(obj, schema)
    apply_defaults(obj, schema)
    return sorted(unknown)


def validate_embedded(x: Any, s: Schema | None, path: str = "") -> list[FieldError]:
    """objectmeta.Validate below the root: every ``x-kubernetes-embedded-resource`` object
    needs a string apiVersion and kind (a DNS-1035 label, any case)."""
    errs: list[FieldError] = []
    if s is None:
        return errs
    if isinstance(x, dict):
        if s.get("x-kubernetes-embedded-resource"):
            errs.extend(_embedded_errors(x, path))
        for k, v in x.items():
            errs.extend(validate_embedded(v, _field_schema(k, s), _join(path, k)))
    elif isinstance(x, list):
        for i, v in enumerate(x):
            errs.extend(validate_embedded(v, _items(s), f"{path}[{i}]"))
    return errs


def _embedded_errors(x: dict[str, Any], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for key in ("apiVersion", "kind"):
        if key not in x:
            errs.append(FieldError.required(_join(path, key)))
            continue
        v = x[key]
        f = _join(path, key)
        if not isinstance(v, str):
            errs.append(FieldError.invalid(f, v, "must be a string"))
        elif not v:
            errs.append(FieldError.invalid(f, v, "must not be empty"))
        elif key == "kind" and is_dns1035_label(v.lower()):
            msg = ",".join(is_dns1035_label(v.lower()))
            errs.append(FieldError.invalid(f, v, "may have mixed case, but should otherwise match: " + msg))
        elif key == "apiVersion" and v.count("/") > 1:
            errs.append(FieldError.invalid(f, v, f"unexpected GroupVersion string: {v}"))
    return errs
