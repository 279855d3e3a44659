"""The API writes of the node lifecycle and taint eviction controllers (upstream
pkg/controller/controller_utils.go AddOrUpdateTaintOnNode / RemoveTaintOffNode / PatchNodeTaints,
pkg/controller/util/node MarkPodsNotReady / SwapNodeControllerTaint / RecordNode*, pkg/api/v1/pod
UpdatePodCondition, and the taint eviction controller's addConditionAndDeletePod).

Node taints are written with a merge patch of `spec.taints` carrying the node's
`metadata.resourceVersion` as a precondition, so a concurrent change to the node makes the write
fail with Conflict instead of overwriting someone else's taints; the read-modify-patch is then
retried up to 5 times with a jittered 100 ms backoff (UpdateTaintBackoff). Taints the controller
adds carry `timeAdded` (the taint eviction controller and kubectl show it).

Events (component "node-controller" for the lifecycle controller):
    Node  Normal  RegisteredNode / RemovingNode  "Node <n> event: Registered Node <n> in Controller"
    Node  Normal  NodeNotReady                   "Node <n> status is now: NodeNotReady"
    Pod   Warning NodeNotReady                   "Node is not ready"
"""

from __future__ import annotations

import asyncio
import copy
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.client.errors import Conflict, NotFound
from kubecore.client.resource import ResourceClient
from kubecore.controllers.controller_utils import format_time, meta, node_name
from kubecore.controllers.nodelifecycle_taints import (
    FALSE, READY, add_or_update_taint, get_condition, node_taints, remove_taint, taint_exists,
)
from kubecore.controllers.podcontrol import NORMAL, WARNING, EventRecorderLike

log = logging.getLogger(__name__)

Obj = dict[str, Any]
T = TypeVar("T")

UPDATE_TAINT_STEPS, UPDATE_TAINT_DELAY = 5, 0.1
DISRUPTION_TARGET = "DisruptionTarget"
REASON_DELETION_BY_TAINT_MANAGER = "DeletionByTaintManager"
MESSAGE_DELETION_BY_TAINT_MANAGER = "Taint manager: deleting due to NoExecute taint"


async def retry_on_conflict(fn: Callable[[], Awaitable[T]], *, clock: Clock = REAL_CLOCK) -> T:
    """Call `fn` until it does not raise Conflict, at most UPDATE_TAINT_STEPS times
    (client-go RetryOnConflict with UpdateTaintBackoff: 100 ms, jitter 1.0)."""
    for step in range(UPDATE_TAINT_STEPS):
        try:
            return await fn()
        except Conflict:
            if step == UPDATE_TAINT_STEPS - 1:
                raise
            await clock.sleep(UPDATE_TAINT_DELAY * (1.0 + random.random()))
    raise AssertionError("not reached")


async def patch_node_taints(nodes: ResourceClient, name: str, old: Obj, taints: list[Obj]) -> None:
    """Replace the node's taints, conditional on `old`'s resourceVersion (PatchNodeTaints)."""
    body = {"metadata": {"resourceVersion": meta(old).get("resourceVersion")},
            "spec": {"taints": taints or None}}
    await nodes.patch(name, body, patch_type="merge")


async def add_or_update_taints_on_node(nodes: ResourceClient, name: str, taints: list[Obj], *,
                                       clock: Clock = REAL_CLOCK) -> None:
    if not taints:
        return

    async def attempt() -> None:
        old = await nodes.get(name)
        current, changed = node_taints(old), False
        for taint in taints:
            current, updated = add_or_update_taint(current, taint)
            changed = changed or updated
        if changed:
            await patch_node_taints(nodes, name, old, current)

    await retry_on_conflict(attempt, clock=clock)


async def remove_taints_off_node(nodes: ResourceClient, name: str, node: Obj | None, taints: list[Obj], *,
                                 clock: Clock = REAL_CLOCK) -> None:
    """Remove every taint matching one of `taints`; no request at all when the (cached) `node`
    has none of them."""
    if not taints:
        return
    if node is not None and not any(taint_exists(node_taints(node), t) for t in taints):
        return

    async def attempt() -> None:
        old = await nodes.get(name)
        current, changed = node_taints(old), False
        for taint in taints:
            current, removed = remove_taint(current, taint)
            changed = changed or removed
        if changed:
            await patch_node_taints(nodes, name, old, current)

    await retry_on_conflict(attempt, clock=clock)


async def swap_node_controller_taint(nodes: ResourceClient, node: Obj, *, add: list[Obj], remove: list[Obj],
                                     clock: Clock = REAL_CLOCK) -> bool:
    """Add `add` (stamped with timeAdded = now) then remove `remove`; False on failure."""
    name = str(meta(node).get("name"))
    stamp = format_time(clock.now())
    stamped = [{**t, "timeAdded": stamp} for t in add]
    try:
        await add_or_update_taints_on_node(nodes, name, stamped, clock=clock)
    except asyncio.CancelledError:
        raise
    except Exception as e:
        log.warning("unable to taint %s unresponsive node %r: %s", [t["key"] for t in add], name, e)
        return False
    try:
        await remove_taints_off_node(nodes, name, node, remove, clock=clock)
    except asyncio.CancelledError:
        raise
    except Exception as e:
        log.warning("unable to remove %s unneeded taint from unresponsive node %r: %s",
                    [t["key"] for t in remove], name, e)
        return False
    return True


def update_pod_condition(status: Obj, condition: Obj, *, now: float) -> tuple[Obj, bool]:
    """A copy of a pod status with `condition` set; lastTransitionTime kept when the status did
    not change. Returns (new status, changed) (UpdatePodCondition)."""
    out = copy.deepcopy(status)
    new = {**condition, "lastTransitionTime": format_time(now)}
    conditions = out.setdefault("conditions", [])
    for i, old in enumerate(conditions):
        if isinstance(old, dict) and old.get("type") == new.get("type"):
            if new.get("status") == old.get("status"):
                new["lastTransitionTime"] = old.get("lastTransitionTime")
            same = all(new.get(k) == old.get(k) for k in
                       ("status", "reason", "message", "lastProbeTime", "lastTransitionTime"))
            conditions[i] = new
            return out, not same
    conditions.append(new)
    return out, True


async def mark_pods_not_ready(pods_client: ResourceClient, recorder: EventRecorderLike, pods: list[Obj],
                              node: str, *, now: float) -> list[Exception]:
    """Set Ready=False on each pod of `node` that has a Ready condition (MarkPodsNotReady);
    returns the errors (a pod that is gone is not one)."""
    errors: list[Exception] = []
    for pod in pods:
        if node_name(pod) != node:
            continue
        ready = get_condition(pod.get("status"), READY)
        if ready is None:
            continue
        status, changed = update_pod_condition(pod.get("status") or {}, {**ready, "status": FALSE}, now=now)
        if not changed:
            continue
        log.info("updating ready status of pod %s/%s to false", meta(pod).get("namespace"), meta(pod).get("name"))
        try:
            await pods_client.update_status({**pod, "apiVersion": "v1", "kind": "Pod", "status": status})
        except NotFound:
            continue
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.info("failed to update status for pod %s: %s", meta(pod).get("name"), e)
            errors.append(e)
        recorder.event({**pod, "apiVersion": "v1", "kind": "Pod"}, WARNING, reason="NodeNotReady",
                       message="Node is not ready")
    return errors


def node_ref(name: str, uid: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid}


def record_node_event(recorder: EventRecorderLike, name: str, uid: str, *, event_type: str, reason: str,
                      event: str) -> None:
    recorder.event(node_ref(name, uid), event_type, reason=reason, message=f"Node {name} event: {event}")


def record_node_status_change(recorder: EventRecorderLike, node: Obj, new_status: str) -> None:
    name = str(meta(node).get("name"))
    recorder.event(node_ref(name, str(meta(node).get("uid") or "")), NORMAL, reason=new_status,
                   message=f"Node {name} status is now: {new_status}")


async def add_condition_and_delete_pod(pods_client: ResourceClient, name: str, namespace: str, *,
                                       now: float) -> None:
    """Mark the pod DisruptionTarget=True (reason DeletionByTaintManager) and delete it."""
    pod = await pods_client.get(name, namespace=namespace)
    status, changed = update_pod_condition(pod.get("status") or {}, {
        "type": DISRUPTION_TARGET, "status": "True", "reason": REASON_DELETION_BY_TAINT_MANAGER,
        "message": MESSAGE_DELETION_BY_TAINT_MANAGER}, now=now)
    if changed:
        cond = get_condition(status, DISRUPTION_TARGET)
        await pods_client.patch(name, {"metadata": {"uid": meta(pod).get("uid")}, "status": {"conditions": [cond]}},
                                namespace=namespace, patch_type="strategic", subresource="status")
    await pods_client.delete(name, namespace=namespace)
