"""Per-resource selectable fields: what ``fieldSelector`` may name and each object's values.

Two halves, as upstream splits them:
- label conversion (pkg/apis/*/v1/conversion.go ``AddFieldLabelConversionFunc``): which labels a
  LIST/WATCH may use for a kind, legacy renames (pods ``spec.host``, events.k8s.io ``regarding.*``),
  and the exact error text for anything else;
- field extraction (pkg/registry/*/strategy.go ``ToSelectableFields`` / ``GetAttrs``): the
  ``dict[str, str]`` a selector is matched against. A label accepted but absent from the set
  (pods ``status.podIPs``, statefulsets ``status.successful``) matches as the empty string.
Objects are v1 JSON dicts (already defaulted by the API server).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kubecore.api.errors import go_quote

if TYPE_CHECKING:
    from kubecore.api.registry import ResourceType

__all__ = ["object_fields", "supported_fields", "convert_field_label"]

Extractor = Callable[[Mapping[str, Any]], dict[str, str]]


def _get(obj: Mapping[str, Any], *path: str) -> Any:
    cur: Any = obj
    for p in path:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(p)
    return cur


def _s(v: Any) -> str:
    """fmt of a Go string/int field: missing -> zero value."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _i(v: Any) -> str:
    return str(v) if isinstance(v, int) and not isinstance(v, bool) else "0"


def _b(v: Any) -> str:
    return "true" if v is True else "false"


def _pod(o: Mapping[str, Any]) -> dict[str, str]:
    ips = _get(o, "status", "podIPs")
    pod_ip = ""
    if isinstance(ips, list) and ips and isinstance(ips[0], Mapping):
        pod_ip = _s(ips[0].get("ip"))
    else:
        pod_ip = _s(_get(o, "status", "podIP"))
    return {
        "spec.nodeName": _s(_get(o, "spec", "nodeName")),
        "spec.restartPolicy": _s(_get(o, "spec", "restartPolicy")),
        "spec.schedulerName": _s(_get(o, "spec", "schedulerName")),
        "spec.serviceAccountName": _s(_get(o, "spec", "serviceAccountName")),
        "spec.hostNetwork": _b(_get(o, "spec", "hostNetwork")),
        "status.phase": _s(_get(o, "status", "phase")),
        "status.podIP": pod_ip,
        "status.nominatedNodeName": _s(_get(o, "status", "nominatedNodeName")),
    }


def _core_event(o: Mapping[str, Any]) -> dict[str, str]:
    io = o.get("involvedObject") or {}
    return {
        "involvedObject.kind": _s(io.get("kind")),
        "involvedObject.namespace": _s(io.get("namespace")),
        "involvedObject.name": _s(io.get("name")),
        "involvedObject.uid": _s(io.get("uid")),
        "involvedObject.apiVersion": _s(io.get("apiVersion")),
        "involvedObject.resourceVersion": _s(io.get("resourceVersion")),
        "involvedObject.fieldPath": _s(io.get("fieldPath")),
        "reason": _s(o.get("reason")),
        "reportingComponent": _s(o.get("reportingComponent")),
        # upstream's ToSelectableFields: source.component, or reportingController when it is empty
        "source": _s(_get(o, "source", "component")) or _s(o.get("reportingComponent")),
        "type": _s(o.get("type")),
    }


def _events_k8s_io_event(o: Mapping[str, Any]) -> dict[str, str]:
    """events.k8s.io/v1 Event mapped onto the core field set (upstream stores both as one type:
    the same stored object gives the same set through either group)."""
    reg = o.get("regarding") or {}
    return {
        "involvedObject.kind": _s(reg.get("kind")),
        "involvedObject.namespace": _s(reg.get("namespace")),
        "involvedObject.name": _s(reg.get("name")),
        "involvedObject.uid": _s(reg.get("uid")),
        "involvedObject.apiVersion": _s(reg.get("apiVersion")),
        "involvedObject.resourceVersion": _s(reg.get("resourceVersion")),
        "involvedObject.fieldPath": _s(reg.get("fieldPath")),
        "reason": _s(o.get("reason")),
        "reportingComponent": _s(o.get("reportingController")),
        "source": _s(_get(o, "deprecatedSource", "component")) or _s(o.get("reportingController")),
        "type": _s(o.get("type")),
    }


_NOT_SUPPORTED = "field label not supported: {label}"


class _Kind:
    """Field support of one kind: accepted label -> canonical label, error format, extractor."""

    __slots__ = ("labels", "error", "extract")

    def __init__(self, labels: Mapping[str, str], error: str, extract: Extractor | None) -> None:
        self.labels = dict(labels)
        self.error = error
        self.extract = extract


def _same(*labels: str) -> dict[str, str]:
    return {label: label for label in labels}


_NS_META = ("metadata.name", "metadata.namespace")

_KINDS: dict[tuple[str, str], _Kind] = {
    ("", "Pod"): _Kind(
        {**_same(*_NS_META, "spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
                 "spec.hostNetwork", "status.phase", "status.podIP", "status.podIPs", "status.nominatedNodeName"),
         "spec.host": "spec.nodeName"},
        _NOT_SUPPORTED, _pod),
    ("", "Node"): _Kind(_same("metadata.name", "spec.unschedulable"), _NOT_SUPPORTED,
                        lambda o: {"spec.unschedulable": _b(_get(o, "spec", "unschedulable"))}),
    ("", "ReplicationController"): _Kind(_same(*_NS_META, "status.replicas"), _NOT_SUPPORTED,
                                         lambda o: {"status.replicas": _i(_get(o, "status", "replicas"))}),
    ("", "Event"): _Kind(_same(*_NS_META, "involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
                               "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
                               "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"),
                         _NOT_SUPPORTED, _core_event),
    ("", "Namespace"): _Kind(_same("metadata.name", "status.phase"), _NOT_SUPPORTED,
                             lambda o: {"status.phase": _s(_get(o, "status", "phase"))}),
    ("", "Secret"): _Kind(_same(*_NS_META, "type"), _NOT_SUPPORTED, lambda o: {"type": _s(o.get("type"))}),
    ("", "Service"): _Kind(_same(*_NS_META, "spec.clusterIP", "spec.type"), _NOT_SUPPORTED,
                           lambda o: {"spec.clusterIP": _s(_get(o, "spec", "clusterIP")),
                                      "spec.type": _s(_get(o, "spec", "type"))}),
    ("events.k8s.io", "Event"): _Kind(
        {"reason": "reason", "regarding.kind": "involvedObject.kind",
         "regarding.namespace": "involvedObject.namespace", "regarding.name": "involvedObject.name",
         "regarding.uid": "involvedObject.uid", "regarding.apiVersion": "involvedObject.apiVersion",
         "regarding.resourceVersion": "involvedObject.resourceVersion",
         "regarding.fieldPath": "involvedObject.fieldPath", "reportingController": "reportingComponent",
         "source": "source", "type": "type", "metadata.namespace": "metadata.namespace",
         "metadata.name": "metadata.name"},
        _NOT_SUPPORTED, _events_k8s_io_event),
    ("apps", "ReplicaSet"): _Kind(_same(*_NS_META, "status.replicas"),
                                  "field label not supported for appsv1.ReplicaSet: {label}",
                                  lambda o: {"status.replicas": _i(_get(o, "status", "replicas"))}),
    ("apps", "StatefulSet"): _Kind(_same(*_NS_META, "status.successful"),
                                   "field label not supported for appsv1.StatefulSet: {label}", None),
    ("batch", "Job"): _Kind(_same(*_NS_META, "status.successful"),
                            "field label {qlabel} not supported for batchv1.Job",
                            lambda o: {"status.successful": _i(_get(o, "status", "succeeded"))}),
}

_DEFAULT_ERROR = '{qlabel} is not a known field selector: only "metadata.name", "metadata.namespace"'
_DEFAULT = _Kind(_same(*_NS_META), _DEFAULT_ERROR, None)


def _builtin_groups() -> frozenset[str]:
    from kubecore.api.registry import BUILTIN_TYPES
    return frozenset(rt.group for rt in BUILTIN_TYPES)


_BUILTIN_GROUPS: frozenset[str] | None = None


def _kind(rt: ResourceType) -> _Kind:
    global _BUILTIN_GROUPS
    k = _KINDS.get((rt.group, rt.kind))
    if k is not None:
        return k
    if _BUILTIN_GROUPS is None:
        _BUILTIN_GROUPS = _builtin_groups()
    if rt.group in _BUILTIN_GROUPS:
        return _DEFAULT
    # A custom resource (apiextensions-apiserver's selectable-field converter).
    labels = _same(*_NS_META) if rt.namespaced else _same("metadata.name")
    gvk = f"{rt.group}/{rt.version}, Kind={rt.kind}"
    return _Kind(labels, "field label not supported for " + gvk.replace("{", "{{").replace("}", "}}") + ": {label}",
                 None)


def supported_fields(rt: ResourceType) -> set[str]:
    """Every label a field selector may use for ``rt`` (including legacy aliases)."""
    return set(_kind(rt).labels)


def convert_field_label(rt: ResourceType, label: str) -> str:
    """The canonical label for ``label``; ValueError with upstream's message if unsupported."""
    k = _kind(rt)
    canonical = k.labels.get(label)
    if canonical is None:
        raise ValueError(k.error.format(label=label, qlabel=go_quote(label)))
    return canonical


def object_fields(rt: ResourceType, obj: Mapping[str, Any]) -> dict[str, str]:
    """The selectable field set of one object (GetAttrs): metadata.name, metadata.namespace for
    namespaced kinds, plus the kind's own fields."""
    meta = obj.get("metadata") or {}
    fields = {"metadata.name": _s(meta.get("name"))}
    if rt.namespaced:
        fields["metadata.namespace"] = _s(meta.get("namespace"))
    extract = _kind(rt).extract
    if extract is not None:
        fields.update(extract(obj))
    return fields
