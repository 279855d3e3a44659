"""Binding a pod to a node: `POST .../pods/NAME/binding` and `POST .../bindings` (what a
scheduler writes). Sets spec.nodeName and the PodScheduled condition in one conditional write, as
upstream's BindingREST: a pod that is already bound or being deleted is a 409 Conflict.
"""

from __future__ import annotations

from typing import Any

from kubecore.api import errors
from kubecore.api.meta import now_rfc3339
from kubecore.api.registry import ResourceType
from kubecore.apiserver.storage import ObjectStore

Obj = dict[str, Any]


async def bind(objects: ObjectStore, pods: ResourceType, namespace: str, pod_name: str, binding: Obj) -> None:
    target = binding.get("target") or {}
    node = target.get("name") if isinstance(target, dict) else None
    if not isinstance(node, str) or not node:
        raise errors.invalid(("", "Binding"), pod_name, [{"reason": "FieldValueRequired", "field": "target.name",
                                                          "message": "Required value"}])
    if target.get("kind") not in (None, "", "Node"):
        raise errors.invalid(("", "Binding"), pod_name, [{"reason": "FieldValueNotSupported", "field": "target.kind",
                                                          "message": f'Unsupported value: "{target["kind"]}": supported values: "Node"'}])
    for _ in range(100):  # concurrent status writes only mean: read again
        pod = objects.get(pods, namespace, pod_name)
        meta, spec = pod["metadata"], pod.setdefault("spec", {})
        if meta.get("deletionTimestamp"):
            raise errors.conflict(pods, pod_name, f"pod {pod_name} is being deleted, cannot be assigned to a host")
        if spec.get("nodeName"):
            raise errors.conflict(pods, pod_name, f'pod {pod_name} is already assigned to node "{spec["nodeName"]}"')
        rv = int(meta["resourceVersion"])
        # `pod` is a fresh decoding of the stored bytes (nothing else holds it): edit it in place
        spec["nodeName"] = node
        annotations = (binding.get("metadata") or {}).get("annotations") or {}
        if annotations:
            meta.setdefault("annotations", {}).update(annotations)
        _set_scheduled(pod)
        meta.pop("resourceVersion", None)
        try:
            await objects.replace(pods, namespace, pod_name, pod, expect_revision=rv)
            return
        except errors.StatusError as e:
            if e.code != 409:
                raise
    raise errors.conflict(pods, pod_name, "too many concurrent writes; try again")


def _set_scheduled(pod: Obj) -> None:
    status = pod.setdefault("status", {})
    conds = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
    conds.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now_rfc3339()})
    status["conditions"] = conds
