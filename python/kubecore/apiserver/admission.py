"""Admission: the checks every write passes after authorization and before storage.

Built in so far: NamespaceLifecycle (no new objects in a missing or terminating namespace; the
system namespaces cannot be deleted), then the pod plugins of admission_pods.py (ServiceAccount,
LimitRanger, Priority, DefaultTolerationSeconds), then ResourceQuota (quota_admission.py: refuses
what would exceed a quota of the namespace, charges status.used of the quotas it matches).
Mutating plugins run before validating ones; ResourceQuota runs last, on the mutated object.
"""

from __future__ import annotations

from typing import Any

from kubecore.api import errors, meta
from kubecore.api.registry import Registry, ResourceType
from kubecore.apiserver.admission_pods import PodAdmission, is_pod, system_priority_classes
from kubecore.apiserver.lookups import Lookups
from kubecore.apiserver.quota_admission import ResourceQuotaAdmission
from kubecore.apiserver.storage import ObjectStore

Obj = dict[str, Any]
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
UNDELETABLE = frozenset({"default", "kube-system", "kube-public"})


class Admission:
    def __init__(self, registry: Registry, objects: ObjectStore) -> None:
        self.objects = objects
        ns = registry.get("", "v1", "namespaces")
        assert ns is not None, "the registry serves core/v1 namespaces"
        self.namespaces = ns
        self.lookups = Lookups(objects)
        self.pods = PodAdmission(registry, self.lookups)
        self.quota = ResourceQuotaAdmission(registry, objects, self.lookups)

    async def admit_create(self, rt: ResourceType, obj: Obj, *, dry_run: bool = False) -> None:
        """Mutates or refuses a new object; charges quota unless `dry_run`."""
        if rt.namespaced:
            self._namespace_accepts_new_content(obj["metadata"]["namespace"])
        if is_pod(rt):
            self.pods.admit(obj)
        if rt.namespaced:
            await self.quota.admit(rt, obj, dry_run=dry_run)

    async def admit_update(self, rt: ResourceType, new: Obj, old: Obj, *, subresource: str = "",
                           dry_run: bool = False) -> None:
        """Refuses an update (or charges its extra quota usage unless `dry_run`); subresource
        writes are not quota'd (upstream's ResourceQuota ignores them)."""
        if rt.namespaced and not subresource:
            await self.quota.admit(rt, new, old, dry_run=dry_run)

    async def admit_delete(self, rt: ResourceType, old: Obj) -> None:
        if rt is self.namespaces and old["metadata"]["name"] in UNDELETABLE:
            raise errors.forbidden(rt, old["metadata"]["name"], "this namespace may not be deleted")

    def _namespace_accepts_new_content(self, namespace: str) -> None:
        ns = self.lookups.get(self.namespaces, "", namespace)
        if ns is None:
            raise errors.not_found(self.namespaces, namespace)
        if ns.get("metadata", {}).get("deletionTimestamp") or (ns.get("status") or {}).get("phase") == "Terminating":
            raise errors.forbidden(
                self.namespaces,
                namespace,
                f"unable to create new content in namespace {namespace} because it is being terminated",
            )


async def ensure_system_namespaces(objects: ObjectStore, registry: Registry, now: str, new_uid: Any) -> None:
    """Creates default, kube-system, kube-public, kube-node-lease and the system priority classes
    when missing."""
    ns_type = registry.get("", "v1", "namespaces")
    pc_type = registry.get("scheduling.k8s.io", "v1", "priorityclasses")
    assert ns_type is not None and pc_type is not None
    wanted: list[tuple[ResourceType, Obj]] = [
        (ns_type, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}) for n in SYSTEM_NAMESPACES
    ]
    wanted += [(pc_type, pc) for pc in system_priority_classes()]
    for rt, body in wanted:
        name = body["metadata"]["name"]
        try:
            objects.get(rt, "", name)
            continue
        except errors.StatusError as e:
            if e.code != 404:
                raise
        obj = meta.prepare_create(rt, body, namespace=None, now=now, uid=new_uid())
        try:
            await objects.create(rt, "", name, obj)
        except errors.StatusError as e:
            if e.code != 409:
                raise
