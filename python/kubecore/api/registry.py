"""The resource registry: which group/version/resources exist and how they are named.

One ``ResourceType`` per served resource (plural) in one group/version, with upstream's discovery
data: short names, categories, verbs and subresources (``kubectl api-resources`` of a 1.3x
cluster). ``Registry`` answers lookups by resource or kind and lists group/versions in upstream's
discovery order (core first, then the aggregator's group priorities, then custom groups by name).
CRD-backed types are added and removed at run time with ``add`` / ``remove``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

__all__ = [
    "ResourceType", "Registry", "builtin_registry", "STANDARD_VERBS", "GROUP_PRIORITY",
    "SUBRESOURCE_VERBS", "subresource_kind", "version_priority_key",
]

STANDARD_VERBS: tuple[str, ...] = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
_NO_DELETECOLLECTION: tuple[str, ...] = ("create", "delete", "get", "list", "patch", "update", "watch")

# Verbs of each subresource as upstream's discovery reports them.
SUBRESOURCE_VERBS: dict[str, tuple[str, ...]] = {
    "status": ("get", "patch", "update"),
    "scale": ("get", "patch", "update"),
    "binding": ("create",),
    "eviction": ("create",),
    "finalize": ("update",),
}


@dataclass(frozen=True)
class ResourceType:
    """One resource in one group/version.

    ``name_rule`` selects the name validator (``subdomain``, ``label``, ``dns1035``, ``path``);
    ``tracks_generation`` says whether metadata.generation is set on create and bumped on spec
    changes (upstream sets it only in the strategies of kinds that have a spec to observe).
    """

    group: str
    version: str
    resource: str
    kind: str
    namespaced: bool
    singular: str
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = STANDARD_VERBS
    subresources: tuple[str, ...] = ()
    name_rule: str = "subdomain"
    tracks_generation: bool = False
    # Custom resources (set from the CRD; built-in types keep the defaults):
    # ``crd`` the CRD's name; ``schema`` this version's openAPIV3Schema; ``scale_paths`` the
    # scale subresource's (specReplicasPath, statusReplicasPath, labelSelectorPath);
    # ``printer_columns`` the version's additionalPrinterColumns (NAME and AGE when it has none);
    # ``storage_version`` the version objects are stored in; ``converts`` whether stored objects
    # are rewritten on read (several versions: apiVersion; schema defaults: applied on read, as
    # upstream's storage decoder does); ``terminating`` the CRD is being deleted (no creates).
    # A built-in view of another group's storage (events.k8s.io/v1 events are core/v1 events, as
    # upstream stores them) sets ``storage_group`` (the group whose keys and form it shares),
    # ``storage_version`` and ``converts``; kubecore.apiserver.crstore converts both ways.
    crd: str = ""
    schema: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    scale_paths: tuple[str, str, str] | None = None
    printer_columns: tuple[dict[str, Any], ...] | None = field(default=None, compare=False, repr=False)
    storage_version: str = ""
    converts: bool = False
    terminating: bool = False
    storage_group: str | None = None

    @cached_property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @cached_property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @cached_property
    def storage_prefix(self) -> str:
        group = self.group if self.storage_group is None else self.storage_group
        if group:
            return f"/registry/{group}/{self.resource}/"
        return f"/registry/{self.resource}/"

    @cached_property
    def shares_storage(self) -> bool:
        """A built-in view of another group's stored objects (events.k8s.io/v1 events)."""
        return self.storage_group is not None and self.storage_group != self.group

    def key(self, namespace: str | None, name: str) -> bytes:
        if self.namespaced:
            return f"{self.storage_prefix}{namespace or ''}/{name}".encode()
        return f"{self.storage_prefix}{name}".encode()

    def list_prefix(self, namespace: str | None) -> bytes:
        """Key prefix of a LIST: all objects, or one namespace's objects."""
        if self.namespaced and namespace:
            return f"{self.storage_prefix}{namespace}/".encode()
        return self.storage_prefix.encode()

    def has_verb(self, verb: str) -> bool:
        return verb in self.verbs


def subresource_kind(rt: ResourceType, sub: str) -> tuple[str, str, str]:
    """(group, version, kind) of the object a subresource accepts/returns, as in discovery."""
    if sub == "scale":
        return ("autoscaling", "v1", "Scale")
    if sub == "binding":
        return ("", "v1", "Binding")
    if sub == "eviction":
        return ("policy", "v1", "Eviction")
    return (rt.group, rt.version, rt.kind)


# The kube-aggregator's group priorities (pkg/controlplane/apiserver/aggregator.go), highest first:
# this is the order of /apis. Groups not listed (custom resources) follow, sorted by name.
GROUP_PRIORITY: tuple[str, ...] = (
    "", "apiregistration.k8s.io", "apps", "events.k8s.io", "authentication.k8s.io",
    "authorization.k8s.io", "autoscaling", "batch", "certificates.k8s.io", "networking.k8s.io",
    "policy", "rbac.authorization.k8s.io", "storage.k8s.io", "admissionregistration.k8s.io",
    "apiextensions.k8s.io", "scheduling.k8s.io", "coordination.k8s.io", "node.k8s.io",
    "discovery.k8s.io", "flowcontrol.apiserver.k8s.io", "resource.k8s.io", "internal.apiserver.k8s.io",
    "storagemigration.k8s.io",
)
_GROUP_RANK = {g: i for i, g in enumerate(GROUP_PRIORITY)}

_KUBE_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority_key(version: str) -> tuple[int, int, int, str]:
    """Sort key for kube-aware version order: GA > beta > alpha, higher numbers first, others last by name."""
    m = _KUBE_VERSION.match(version)
    if not m:
        return (3, 0, 0, version)
    major = int(m.group(1))
    stage = {None: 0, "beta": 1, "alpha": 2}[m.group(2)]
    minor = int(m.group(3) or 0)
    return (stage, -major, -minor, "")


class Registry:
    """Lookup tables over a set of ResourceTypes. Not thread-safe; mutate from the event loop only."""

    def __init__(self, types: Iterable[ResourceType] = ()) -> None:
        self._by_resource: dict[tuple[str, str, str], ResourceType] = {}
        self._by_kind: dict[tuple[str, str, str], ResourceType] = {}
        self.generation = 0  # bumped by every add/remove: caches of derived documents key on it
        for rt in types:
            self.add(rt)

    def add(self, rt: ResourceType) -> None:
        """Add or replace a type (replacing keeps lookups by kind consistent)."""
        self.generation += 1
        old = self._by_resource.get((rt.group, rt.version, rt.resource))
        if old is not None:
            self.remove(old.group, old.version, old.resource)
        self._by_resource[(rt.group, rt.version, rt.resource)] = rt
        self._by_kind.setdefault((rt.group, rt.version, rt.kind), rt)

    def remove(self, group: str, version: str, resource: str) -> None:
        rt = self._by_resource.pop((group, version, resource), None)
        if rt is None:
            return
        self.generation += 1
        if self._by_kind.get((group, version, rt.kind)) is rt:
            del self._by_kind[(group, version, rt.kind)]
            for other in self._by_resource.values():  # another resource of the same kind (core vs ...)
                if (other.group, other.version, other.kind) == (group, version, rt.kind):
                    self._by_kind[(group, version, rt.kind)] = other
                    break

    def get(self, group: str, version: str, resource: str) -> ResourceType | None:
        return self._by_resource.get((group, version, resource))

    def by_kind(self, group: str, version: str, kind: str) -> ResourceType | None:
        return self._by_kind.get((group, version, kind))

    def by_name(self, name: str) -> list[ResourceType]:
        """Types whose plural, singular, short name or lower-case kind is ``name`` (kubectl-style)."""
        n = name.lower()
        return [rt for rt in self.all() if n in (rt.resource, rt.singular, rt.kind.lower()) or n in rt.short_names]

    def all(self) -> list[ResourceType]:
        out: list[ResourceType] = []
        for g, v in self.group_versions():
            out.extend(self.resources(g, v))
        return out

    def groups(self) -> list[str]:
        """Groups in discovery order (core "" first)."""
        present = {g for g, _, _ in self._by_resource}
        known = [g for g in GROUP_PRIORITY if g in present]
        return known + sorted(present - set(known))

    def versions(self, group: str) -> list[str]:
        """Versions of a group, preferred first (kube-aware order)."""
        vs = {v for g, v, _ in self._by_resource if g == group}
        return sorted(vs, key=version_priority_key)

    def group_versions(self) -> list[tuple[str, str]]:
        return [(g, v) for g in self.groups() for v in self.versions(g)]

    def resources(self, group: str, version: str) -> list[ResourceType]:
        """Resources of one group/version sorted by plural name, as in the discovery document."""
        rts = [rt for (g, v, _), rt in self._by_resource.items() if g == group and v == version]
        return sorted(rts, key=lambda rt: rt.resource)

    def preferred_version(self, group: str) -> str:
        vs = self.versions(group)
        if not vs:
            raise KeyError(group)
        return vs[0]

    def __contains__(self, key: object) -> bool:
        return key in self._by_resource

    def __len__(self) -> int:
        return len(self._by_resource)


def _t(group: str, resource: str, kind: str, *, namespaced: bool = True, short: tuple[str, ...] = (),
       cat: tuple[str, ...] = (), verbs: tuple[str, ...] = STANDARD_VERBS, sub: tuple[str, ...] = (),
       name_rule: str = "subdomain", gen: bool = False, version: str = "v1") -> ResourceType:
    return ResourceType(group=group, version=version, resource=resource, kind=kind, namespaced=namespaced,
                        singular=kind.lower(), short_names=short, categories=cat, verbs=verbs,
                        subresources=sub, name_rule=name_rule, tracks_generation=gen)


_ALL = ("all",)

BUILTIN_TYPES: tuple[ResourceType, ...] = (
    # core/v1
    _t("", "bindings", "Binding", verbs=("create",)),
    _t("", "configmaps", "ConfigMap", short=("cm",)),
    _t("", "endpoints", "Endpoints", short=("ep",)),
    _t("", "events", "Event", short=("ev",)),
    _t("", "limitranges", "LimitRange", short=("limits",)),
    _t("", "namespaces", "Namespace", namespaced=False, short=("ns",), verbs=_NO_DELETECOLLECTION,
       sub=("finalize", "status"), name_rule="label"),
    _t("", "nodes", "Node", namespaced=False, short=("no",), sub=("status",)),
    _t("", "persistentvolumeclaims", "PersistentVolumeClaim", short=("pvc",), sub=("status",)),
    _t("", "persistentvolumes", "PersistentVolume", namespaced=False, short=("pv",), sub=("status",)),
    _t("", "pods", "Pod", short=("po",), cat=_ALL, sub=("attach", "binding", "eviction", "exec", "log", "portforward", "status"),
       gen=True),
    _t("", "podtemplates", "PodTemplate"),
    _t("", "replicationcontrollers", "ReplicationController", short=("rc",), cat=_ALL,
       sub=("scale", "status"), gen=True),
    _t("", "resourcequotas", "ResourceQuota", short=("quota",), sub=("status",)),
    _t("", "secrets", "Secret"),
    _t("", "serviceaccounts", "ServiceAccount", short=("sa",)),
    _t("", "services", "Service", short=("svc",), cat=_ALL, verbs=_NO_DELETECOLLECTION, sub=("status",),
       name_rule="dns1035"),
    # apps/v1
    _t("apps", "controllerrevisions", "ControllerRevision"),
    _t("apps", "daemonsets", "DaemonSet", short=("ds",), cat=_ALL, sub=("status",), gen=True),
    _t("apps", "deployments", "Deployment", short=("deploy",), cat=_ALL, sub=("scale", "status"), gen=True),
    _t("apps", "replicasets", "ReplicaSet", short=("rs",), cat=_ALL, sub=("scale", "status"), gen=True),
    _t("apps", "statefulsets", "StatefulSet", short=("sts",), cat=_ALL, sub=("scale", "status"), gen=True),
    # events.k8s.io/v1: a view of the core/v1 events (one resource, /registry/events/, stored as core/v1)
    replace(_t("events.k8s.io", "events", "Event", short=("ev",)), storage_group="", storage_version="v1",
            converts=True),
    # autoscaling/v2
    _t("autoscaling", "horizontalpodautoscalers", "HorizontalPodAutoscaler", short=("hpa",), cat=_ALL,
       sub=("status",), version="v2"),
    # batch/v1
    _t("batch", "cronjobs", "CronJob", short=("cj",), cat=_ALL, sub=("status",), gen=True),
    _t("batch", "jobs", "Job", cat=_ALL, sub=("status",), gen=True),
    # networking.k8s.io/v1
    _t("networking.k8s.io", "ingressclasses", "IngressClass", namespaced=False, gen=True),
    _t("networking.k8s.io", "ingresses", "Ingress", short=("ing",), sub=("status",), gen=True),
    _t("networking.k8s.io", "networkpolicies", "NetworkPolicy", short=("netpol",), gen=True),
    # policy/v1
    _t("policy", "poddisruptionbudgets", "PodDisruptionBudget", short=("pdb",), sub=("status",), gen=True),
    # rbac.authorization.k8s.io/v1
    _t("rbac.authorization.k8s.io", "clusterrolebindings", "ClusterRoleBinding", namespaced=False, name_rule="path"),
    _t("rbac.authorization.k8s.io", "clusterroles", "ClusterRole", namespaced=False, name_rule="path"),
    _t("rbac.authorization.k8s.io", "rolebindings", "RoleBinding", name_rule="path"),
    _t("rbac.authorization.k8s.io", "roles", "Role", name_rule="path"),
    # storage.k8s.io/v1
    _t("storage.k8s.io", "storageclasses", "StorageClass", namespaced=False, short=("sc",)),
    # apiextensions.k8s.io/v1
    _t("apiextensions.k8s.io", "customresourcedefinitions", "CustomResourceDefinition", namespaced=False,
       short=("crd", "crds"), cat=("api-extensions",), sub=("status",), name_rule="crd", gen=True),
    # scheduling.k8s.io/v1
    _t("scheduling.k8s.io", "priorityclasses", "PriorityClass", namespaced=False, short=("pc",)),
    # coordination.k8s.io/v1
    _t("coordination.k8s.io", "leases", "Lease"),
    # discovery.k8s.io/v1
    _t("discovery.k8s.io", "endpointslices", "EndpointSlice", gen=True),
)


def builtin_registry() -> Registry:
    """A fresh Registry holding every built-in type (callers may add CRD types to it)."""
    return Registry(BUILTIN_TYPES)
