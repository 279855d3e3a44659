"""Admission: the checks every write passes after authorization and before storage.

Built in so far: NamespaceLifecycle (no new objects in a missing or terminating namespace; the
system namespaces cannot be deleted). Mutating plugins run before validating ones, as upstream.
"""

from __future__ import annotations

from typing import Any

from kubecore.api import errors
from kubecore.api.registry import Registry, ResourceType
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

    async def admit_create(self, rt: ResourceType, obj: Obj) -> None:
        if rt.namespaced:
            self._namespace_accepts_new_content(obj["metadata"]["namespace"])

    async def admit_update(self, rt: ResourceType, new: Obj, old: Obj) -> None:
        return None

    async def admit_delete(self, rt: ResourceType, old: Obj) -> None:
        if rt is self.namespaces and old["metadata"]["name"] in UNDELETABLE:
            raise errors.forbidden(rt, old["metadata"]["name"], "this namespace may not be deleted")

    def _namespace_accepts_new_content(self, namespace: str) -> None:
        ns = self.objects.get(self.namespaces, "", namespace)  # 404 `namespaces "x" not found`
        if ns.get("metadata", {}).get("deletionTimestamp") or (ns.get("status") or {}).get("phase") == "Terminating":
            raise errors.forbidden(
                self.namespaces,
                namespace,
                f"unable to create new content in namespace {namespace} because it is being terminated",
            )


async def ensure_system_namespaces(objects: ObjectStore, registry: Registry, now: str, new_uid: Any) -> None:
    """Creates default, kube-system, kube-public and kube-node-lease when missing."""
    from kubecore.api import meta

    ns_type = registry.get("", "v1", "namespaces")
    assert ns_type is not None
    for name in SYSTEM_NAMESPACES:
        try:
            objects.get(ns_type, "", name)
            continue
        except errors.StatusError as e:
            if e.code != 404:
                raise
        obj = meta.prepare_create(
            ns_type, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}, namespace=None, now=now, uid=new_uid()
        )
        try:
            await objects.create(ns_type, "", name, obj)
        except errors.StatusError as e:
            if e.code != 409:
                raise
