"""Per-type facts that field ownership (server-side apply) and strategic merge patch need.

Upstream derives these from the OpenAPI schema of each built-in type (k8s.io/kube-openapi
schemaconv): a list is *associative* (x-kubernetes-list-type=map) keyed by its
x-kubernetes-list-map-keys, or keyed by its patchMergeKey when it only has patchStrategy=merge; a
list with patchStrategy=merge and no key is a *set* (items identify themselves); every other list
is *atomic* (owned and replaced as a whole). Maps are granular unless marked +mapType=atomic /
+structType=atomic. kubecore has no per-type schema here, so the facts are keyed by field name
(and, where a name means different things, by its parent field or the kind) — the same names the
strategic-merge-patch code in kubecore.apiserver.patch uses.

Custom resources take these facts from their CRD's structural schema (``SchemaFacts``); without
a schema they follow upstream's untyped rules: maps are granular, lists atomic.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ListType", "ATOMIC", "SET", "SMP_MERGE_KEYS", "KEY_DEFAULTS", "TypeFacts", "SchemaFacts", "facts_for",
    "skeleton", "NameTables", "name_tables",
]


@dataclass(frozen=True)
class ListType:
    """How a list is owned and merged: "atomic", "set" or "map" (keyed by ``keys``).
    ``atomic_items``: each item of a keyed list is one leaf (its type is +structType=atomic)."""

    relationship: str
    keys: tuple[str, ...] = ()
    atomic_items: bool = False

    @property
    def atomic(self) -> bool:
        return self.relationship == "atomic"


ATOMIC = ListType("atomic")
SET = ListType("set")

# Field name -> patchMergeKey (strategic merge patch keys of the core types' list fields).
SMP_MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "conditions": "type",
    "hostAliases": "ip",
    "ownerReferences": "uid",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
    "schedulingGates": "name",
    "secrets": "name",
    "podIPs": "ip",
    "hostIPs": "ip",
}

# x-kubernetes-list-map-keys that differ from (or exist without) a patchMergeKey.
_MAP_KEYS_OVERRIDE: dict[str, tuple[str, ...]] = {
    "topologySpreadConstraints": ("topologyKey", "whenUnsatisfiable"),
    "claims": ("name",),  # container resources.claims
}
# Keyed lists whose items are +structType=atomic (ObjectReference, LocalObjectReference, OwnerReference).
_ATOMIC_ITEMS = frozenset({"ownerReferences", "imagePullSecrets", "secrets"})
# Container ports and service ports: keyed by number and protocol (protocol defaults to TCP).
_CONTAINER_PORTS = ListType("map", ("containerPort", "protocol"))
_SERVICE_PORTS = ListType("map", ("port", "protocol"))
_CONTAINER_FIELDS = frozenset({"containers", "initContainers", "ephemeralContainers"})
# A key field missing from an item takes its schema default (upstream reads it from the OpenAPI default).
KEY_DEFAULTS: dict[str, Any] = {"protocol": "TCP"}

# Maps and structs owned as a whole (+mapType=atomic / +structType=atomic), by field name.
_ATOMIC_MAPS = frozenset({
    "selector", "nodeSelector", "labelSelector", "namespaceSelector", "podSelector",
    "involvedObject", "related", "regarding", "fieldRef", "resourceFieldRef", "secretKeyRef",
    "configMapKeyRef", "configMapRef", "secretRef", "claimRef", "dataSource", "dataSourceRef",
    "roleRef", "scaleTargetRef", "requiredDuringSchedulingIgnoredDuringExecution",
})


def _keyed(field: str) -> ListType | None:
    keys = _MAP_KEYS_OVERRIDE.get(field)
    if keys is None and field in SMP_MERGE_KEYS:
        keys = (SMP_MERGE_KEYS[field],)
    if keys is None:
        return None
    return ListType("map", keys, atomic_items=field in _ATOMIC_ITEMS)


@dataclass(frozen=True)
class NameTables:
    """The tables above as plain data, for the native field-set walkers (kubecore._native.FieldFacts),
    which apply the rules of TypeFacts._list_type / atomic_map and SchemaFacts to them."""

    keyed: dict[str, tuple[list[str], bool]]  # field -> _keyed(field): (keys, atomic items)
    container_ports: list[str]
    service_ports: list[str]
    container_fields: list[str]
    atomic_maps: list[str]
    key_defaults: dict[str, Any]


def name_tables() -> NameTables:
    keyed: dict[str, tuple[list[str], bool]] = {}
    for name in sorted(set(SMP_MERGE_KEYS) | set(_MAP_KEYS_OVERRIDE)):
        lt = _keyed(name)
        if lt is not None:
            keyed[name] = (list(lt.keys), lt.atomic_items)
    return NameTables(keyed, list(_CONTAINER_PORTS.keys), list(_SERVICE_PORTS.keys), sorted(_CONTAINER_FIELDS),
                      sorted(_ATOMIC_MAPS), dict(KEY_DEFAULTS))


class TypeFacts:
    """List and map semantics for one kind. ``names`` are the field names from the object's root
    to the node, list items left out (``("spec", "containers", "ports")``)."""

    def __init__(self, group: str, kind: str, *, typed: bool = True) -> None:
        self.group = group
        self.kind = kind
        self.typed = typed
        self._cache: dict[tuple[str, ...], ListType] = {}

    def list_type(self, names: tuple[str, ...]) -> ListType:
        lt = self._cache.get(names)
        if lt is None:
            lt = self._cache[names] = self._list_type(names)
        return lt

    def _list_type(self, names: tuple[str, ...]) -> ListType:
        if not self.typed or not names:
            return ATOMIC
        field = names[-1]
        if names == ("metadata", "finalizers"):
            return SET
        if names == ("metadata", "ownerReferences"):
            return _keyed(field) or ATOMIC
        if field == "ports":
            if len(names) >= 2 and names[-2] in _CONTAINER_FIELDS:
                return _CONTAINER_PORTS
            if self.group == "" and self.kind == "Service" and names == ("spec", "ports"):
                return _SERVICE_PORTS
            return ATOMIC
        return _keyed(field) or ATOMIC

    def atomic_map(self, names: tuple[str, ...]) -> bool:
        return self.typed and bool(names) and names[-1] in _ATOMIC_MAPS


class SchemaFacts(TypeFacts):
    """List and map semantics read from a custom resource's structural schema
    (x-kubernetes-list-type, x-kubernetes-list-map-keys, x-kubernetes-map-type); lists without a
    list type are atomic, as upstream."""

    def __init__(self, group: str, kind: str, schema: dict[str, Any]) -> None:
        super().__init__(group, kind, typed=True)
        self.schema = schema

    def _node(self, names: tuple[str, ...]) -> dict[str, Any] | None:
        node: Any = self.schema
        for n in names:
            while isinstance(node, dict) and node.get("type") == "array":
                node = node.get("items")
            if not isinstance(node, dict):
                return None
            props = node.get("properties")
            if isinstance(props, dict) and isinstance(props.get(n), dict):
                node = props[n]
            elif isinstance(node.get("additionalProperties"), dict):
                node = node["additionalProperties"]
            else:
                return None
        return node if isinstance(node, dict) else None

    def _list_type(self, names: tuple[str, ...]) -> ListType:
        if names == ("metadata", "finalizers"):
            return SET
        if names == ("metadata", "ownerReferences"):
            return _keyed("ownerReferences") or ATOMIC
        node = self._node(names) or {}
        kind = node.get("x-kubernetes-list-type")
        if kind == "set":
            return SET
        keys = node.get("x-kubernetes-list-map-keys")
        if kind == "map" and isinstance(keys, list) and keys:
            items = node.get("items")
            atomic_items = isinstance(items, dict) and items.get("x-kubernetes-map-type") == "atomic"
            return ListType("map", tuple(str(k) for k in keys), atomic_items=atomic_items)
        return ATOMIC

    def atomic_map(self, names: tuple[str, ...]) -> bool:
        if not names or names[0] == "metadata":
            return False
        node = self._node(names)
        return node is not None and node.get("x-kubernetes-map-type") == "atomic"


_FACTS: dict[tuple[str, str], TypeFacts] = {}


def facts_for(group: str, kind: str, *, typed: bool = True) -> TypeFacts:
    """The (cached) facts of one kind; ``typed=False`` for kinds without a schema (custom resources)."""
    key = (group, kind if typed else "\x00" + kind)
    f = _FACTS.get(key)
    if f is None:
        f = _FACTS[key] = TypeFacts(group, kind, typed=typed)
    return f


# ---- the empty object ---------------------------------------------------------------------------
# What upstream's `New()` of a kind looks like as JSON: struct fields that are values (not
# pointers) are present even when empty. Ownership of a create is computed against it, so an
# empty struct that is always there (a pod's spec, a deployment's spec.template.metadata) is not
# "added" and gets no `.` entry, while a pointer struct the client sets (spec.strategy.rollingUpdate)
# does.

def _template() -> dict[str, Any]:
    return {"metadata": {}, "spec": {"containers": None}}  # PodSpec.containers has no omitempty


def _skeletons() -> dict[tuple[str, str], dict[str, Any]]:
    with_status: dict[str, Any] = {"spec": {}, "status": {}}
    return {
        ("", "Pod"): {"spec": {"containers": None}, "status": {}},
        ("", "Namespace"): with_status,
        ("", "PersistentVolume"): with_status,
        ("", "ReplicationController"): with_status,
        ("", "ResourceQuota"): with_status,
        ("", "LimitRange"): {"spec": {}},
        ("", "Service"): {"spec": {}, "status": {"loadBalancer": {}}},
        ("", "Node"): {"spec": {}, "status": {"daemonEndpoints": {"kubeletEndpoint": {}}, "nodeInfo": {}}},
        ("", "PersistentVolumeClaim"): {"spec": {"resources": {}}, "status": {}},
        ("apps", "Deployment"): {"spec": {"selector": None, "template": _template(), "strategy": {}}, "status": {}},
        ("apps", "ReplicaSet"): {"spec": {"selector": None, "template": _template()}, "status": {}},
        ("apps", "StatefulSet"): {"spec": {"selector": None, "template": _template(), "updateStrategy": {}}, "status": {}},
        ("apps", "DaemonSet"): {"spec": {"selector": None, "template": _template(), "updateStrategy": {}}, "status": {}},
        ("batch", "Job"): {"spec": {"template": _template()}, "status": {}},
        ("batch", "CronJob"): {"spec": {"jobTemplate": {"metadata": {}, "spec": {"template": _template()}}}, "status": {}},
        ("autoscaling", "HorizontalPodAutoscaler"): {"spec": {"scaleTargetRef": {}}, "status": {}},
        ("networking.k8s.io", "Ingress"): {"spec": {}, "status": {"loadBalancer": {}}},
        ("networking.k8s.io", "NetworkPolicy"): {"spec": {"podSelector": {}}},
        ("policy", "PodDisruptionBudget"): with_status,
        ("coordination.k8s.io", "Lease"): {"spec": {}},
        ("apiextensions.k8s.io", "CustomResourceDefinition"): {"spec": {"names": {}}, "status": {"acceptedNames": {}}},
    }


_SKELETONS = _skeletons()


def skeleton(group: str, kind: str) -> dict[str, Any]:
    """A fresh empty object of the kind (metadata always present)."""
    out: dict[str, Any] = {"metadata": {}}
    out.update(copy.deepcopy(_SKELETONS.get((group, kind), {})))
    return out
