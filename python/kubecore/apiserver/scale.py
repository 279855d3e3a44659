"""The scale subresource: an ``autoscaling/v1`` Scale view of a replicated object.

GET answers ``{spec: {replicas}, status: {replicas, selector}}`` built from the parent;
PUT/PATCH change only the parent's replica count (``kubectl scale`` sends a merge patch of the
Scale). Where the numbers live is a triple of JSON paths per type: (spec replicas, status
replicas, label selector); built-in kinds are listed here, custom resources carry theirs in
``ResourceType.scale_paths`` (from the CRD's scale subresource).
"""

from __future__ import annotations

from typing import Any

from kubecore.api.jsoncopy import json_copy
from kubecore.api import errors
from kubecore.api.errors import FieldError
from kubecore.api.registry import ResourceType

Obj = dict[str, Any]
Paths = tuple[str, str, str]

_REPLICATED: Paths = (".spec.replicas", ".status.replicas", ".spec.selector")
BUILTIN_PATHS: dict[tuple[str, str], Paths] = {
    ("apps", "deployments"): _REPLICATED,
    ("apps", "replicasets"): _REPLICATED,
    ("apps", "statefulsets"): _REPLICATED,
    ("", "replicationcontrollers"): _REPLICATED,
}


def paths(rt: ResourceType) -> Paths | None:
    custom: Paths | None = getattr(rt, "scale_paths", None)
    return custom or BUILTIN_PATHS.get((rt.group, rt.resource))


def _split(path: str) -> list[str]:
    return [p for p in path.split(".") if p]


def get_path(obj: Any, path: str) -> Any:
    cur = obj
    for p in _split(path):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(p)
    return cur


def set_path(obj: Obj, path: str, value: Any) -> None:
    parts = _split(path)
    cur = obj
    for p in parts[:-1]:
        nxt = cur.get(p)
        if not isinstance(nxt, dict):
            nxt = cur[p] = {}
        cur = nxt
    cur[parts[-1]] = value


def _requirement(expr: Obj) -> tuple[str, str]:
    key, op = str(expr.get("key", "")), expr.get("operator")
    values = ",".join(sorted(str(v) for v in expr.get("values") or []))
    if op == "In":
        return key, f"{key} in ({values})"
    if op == "NotIn":
        return key, f"{key} notin ({values})"
    if op == "Exists":
        return key, key
    if op == "DoesNotExist":
        return key, f"!{key}"
    raise errors.bad_request(f"{op!r} is not a valid label selector operator")


def selector_string(selector: Any) -> str:
    """A LabelSelector (or an RC's map selector) as labels.Selector.String() prints it:
    requirements sorted by key, values sorted."""
    if not isinstance(selector, dict):
        return "" if selector is None else str(selector)
    if "matchLabels" not in selector and "matchExpressions" not in selector:
        reqs = [(k, f"{k}={v}") for k, v in selector.items()]  # a plain label map (RC)
    else:
        reqs = [(k, f"{k}={v}") for k, v in (selector.get("matchLabels") or {}).items()]
        reqs += [_requirement(e) for e in selector.get("matchExpressions") or []]
    return ",".join(text for _, text in sorted(reqs, key=lambda r: r[0]))


def to_scale(rt: ResourceType, obj: Obj) -> Obj:
    """The Scale of `obj`."""
    spec_path, status_path, selector_path = paths(rt) or _REPLICATED
    m = obj.get("metadata") or {}
    meta = {k: m[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp") if k in m}
    status: Obj = {"replicas": int(get_path(obj, status_path) or 0)}
    selector = selector_string(get_path(obj, selector_path)) if selector_path else ""
    if selector:
        status["selector"] = selector
    spec: Obj = {}
    replicas = get_path(obj, spec_path)
    if replicas is not None:
        spec["replicas"] = replicas
    return {"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": meta, "spec": spec, "status": status}


def apply_scale(rt: ResourceType, parent: Obj, scale: Any) -> Obj:
    """`parent` with the replica count of `scale` (validated), ready to be written with the
    Scale's resourceVersion as its precondition."""
    if not isinstance(scale, dict):
        raise errors.bad_request("the request body must be a Scale object")
    name = parent["metadata"]["name"]
    replicas = (scale.get("spec") or {}).get("replicas", 0)
    if isinstance(replicas, bool) or not isinstance(replicas, int):
        raise errors.bad_request(f"spec.replicas must be an integer, not {replicas!r}")
    if replicas < 0:
        raise errors.invalid(("autoscaling", "Scale"), name,
                             [FieldError.invalid("spec.replicas", replicas, "must be greater than or equal to 0")])
    sm = scale.get("metadata") or {}
    uid = sm.get("uid")
    if uid and uid != parent["metadata"].get("uid"):
        raise errors.conflict(rt, name, f"Precondition failed: UID in precondition: {uid}, "
                              f"UID in object meta: {parent['metadata'].get('uid', '')}")
    new = json_copy(parent)
    set_path(new, (paths(rt) or _REPLICATED)[0], replicas)
    new["metadata"].pop("resourceVersion", None)
    if sm.get("resourceVersion"):
        new["metadata"]["resourceVersion"] = sm["resourceVersion"]
    return new
