"""Builders shared by the ReplicaSet controller's unit tests (pods, ReplicaSets, a fake PodControl).

Times are fixed offsets from FAKE_EPOCH; nothing here reads the wall clock."""

from __future__ import annotations

from typing import Any

from kubecore.client.clock import FAKE_EPOCH
from kubecore.client.errors import ApiError
from kubecore.controllers.controller_utils import format_time

Obj = dict[str, Any]
NOW = FAKE_EPOCH
RS_UID = "rs-uid-1"


def make_pod(name: str, *, ns: str = "default", node: str = "", phase: str = "Running",
             ready_since: float | None = None, not_ready: bool = False, restarts: int = 0,
             created: float | None = NOW - 3600, uid: str | None = None, labels: dict[str, str] | None = None,
             owner_uid: str | None = None, owner_kind: str = "ReplicaSet", deleting: bool = False,
             cost: int | None = None, rv: str = "1") -> Obj:
    meta: Obj = {"name": name, "namespace": ns, "uid": uid or f"uid-{name}", "resourceVersion": rv,
                 "labels": {"app": "web"} if labels is None else labels}
    if created is not None:
        meta["creationTimestamp"] = format_time(created)
    if owner_uid is not None:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner_kind, "name": "web", "uid": owner_uid,
                                    "controller": True, "blockOwnerDeletion": True}]
    if deleting:
        meta["deletionTimestamp"] = format_time(NOW)
    if cost is not None:
        meta["annotations"] = {"controller.kubernetes.io/pod-deletion-cost": str(cost)}
    status: Obj = {"phase": phase, "containerStatuses": [{"name": "c", "restartCount": restarts}]}
    if ready_since is not None:
        status["conditions"] = [{"type": "Ready", "status": "True", "lastTransitionTime": format_time(ready_since)}]
    elif not_ready:
        status["conditions"] = [{"type": "Ready", "status": "False"}]
    spec: Obj = {"containers": [{"name": "c", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def make_rs(name: str = "web", *, ns: str = "default", replicas: int = 3, uid: str = RS_UID,
            selector: Obj | None = None, template_labels: dict[str, str] | None = None, min_ready: int = 0,
            generation: int = 1, status: Obj | None = None, deleting: bool = False, rv: str = "10",
            controller_uid: str | None = None) -> Obj:
    labels = {"app": "web"} if template_labels is None else template_labels
    meta: Obj = {"name": name, "namespace": ns, "uid": uid, "generation": generation, "resourceVersion": rv}
    if deleting:
        meta["deletionTimestamp"] = format_time(NOW)
    if controller_uid is not None:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "dep",
                                    "uid": controller_uid, "controller": True}]
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": meta,
            "spec": {"replicas": replicas, "minReadySeconds": min_ready,
                     "selector": selector if selector is not None else {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}}},
            "status": status or {}}


def api_error(cls: type[ApiError], message: str = "boom", causes: list[Obj] | None = None) -> ApiError:
    details: Obj = {"causes": causes} if causes else {}
    return cls({"kind": "Status", "message": message, "details": details}, code=cls.code)


class FakePodControl:
    """Records calls; `fail_create_after` / `fail_delete` / `fail_patch` make calls raise."""

    def __init__(self) -> None:
        self.created: list[tuple[str, Obj, Obj]] = []
        self.deleted: list[tuple[str, str]] = []
        self.patches: list[tuple[str, str, Obj]] = []
        self.fail_create_after: int | None = None
        self.create_error: Exception = api_error(ApiError, "quota exceeded")
        self.fail_delete: dict[str, Exception] = {}
        self.fail_patch: dict[str, Exception] = {}
        self.create_calls = 0

    async def create_pods(self, namespace: str, template: Obj, owner: Obj, controller_ref: Obj) -> None:
        self.create_calls += 1
        if self.fail_create_after is not None and self.create_calls > self.fail_create_after:
            raise self.create_error
        self.created.append((namespace, template, controller_ref))

    async def delete_pod(self, namespace: str, name: str, owner: Obj) -> None:
        if name in self.fail_delete:
            raise self.fail_delete[name]
        self.deleted.append((namespace, name))

    async def patch_pod(self, namespace: str, name: str, patch: Obj) -> None:
        if name in self.fail_patch:
            raise self.fail_patch[name]
        self.patches.append((namespace, name, patch))
