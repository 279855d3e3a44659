"""The pod garbage collector (upstream pkg/controller/podgc/gc_controller.go).

Every `gc_check_period` (20 s) one pass over the pod and node caches does, in upstream's order:

1. terminated pods: when more pods than `terminated_pod_gc_threshold` (12500; 0 turns this off)
   are in a phase other than Pending/Running/Unknown, the excess is deleted, evicted pods first,
   then oldest first (creationTimestamp, then name);
2. terminating pods on out-of-service nodes: a pod with a deletionTimestamp whose node is not
   Ready and carries the node.kubernetes.io/out-of-service taint is deleted, same order;
3. orphaned pods: a pod bound to a node missing from the cache puts that node name in
   quarantine (40 s, a delaying queue); names whose quarantine ended and that a fresh GET still
   does not find are deleted nodes, and their pods are deleted with a DisruptionTarget condition
   (reason DeletionByPodGC, "PodGC: node no longer exists");
4. unscheduled terminating pods: a pod with a deletionTimestamp and no nodeName is deleted.

The scan reads slim pod views (`podview`); only the pods it picks are decoded whole, so the
status patch keeps their conditions intact. Every deletion is upstream's markFailedAndDeletePod:
a pod not yet Succeeded/Failed first gets phase Failed (plus the condition, for orphans) through a
status patch pinned to its UID, then is deleted with gracePeriodSeconds 0. Errors are logged; the
next pass tries again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.client.errors import NotFound
from kubecore.client.factory import SharedInformerFactory
from kubecore.client.indexer import Indexer
from kubecore.client.resource import ResourceClient
from kubecore.client.rest import RestClient
from kubecore.client.workqueue import DelayingQueue
from kubecore.controllers.base import ControllerContext, Wiring, register, run_every
from kubecore.controllers.controller_utils import format_time, meta, node_name, object_key, parse_time, pod_phase
from kubecore.controllers.podview import pod_view

log = logging.getLogger(__name__)

Obj = dict[str, Any]
NAME = "podgc"
GC_CHECK_PERIOD = 20.0
QUARANTINE_TIME = 40.0
DEFAULT_TERMINATED_POD_THRESHOLD = 12500
"""kube-controller-manager's --terminated-pod-gc-threshold default."""
TAINT_OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"
DISRUPTION_TARGET = "DisruptionTarget"
ORPHAN_CONDITION: Obj = {"type": DISRUPTION_TARGET, "status": "True", "reason": "DeletionByPodGC",
                         "message": "PodGC: node no longer exists"}


# -- pure helpers -----------------------------------------------------------------------------------
def is_pod_terminated(pod: Obj) -> bool:
    """Any phase but Pending, Running and Unknown (an empty phase counts as terminated, as upstream)."""
    return pod_phase(pod) not in ("Pending", "Running", "Unknown")


def is_pod_evicted(pod: Obj) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Failed" and status.get("reason") == "Evicted"


def gc_order(pod: Obj) -> tuple[bool, float, str]:
    """Sort key: evicted pods first, then by creationTimestamp, then by name."""
    m = meta(pod)
    return (not is_pod_evicted(pod), parse_time(m.get("creationTimestamp")) or 0.0, str(m.get("name") or ""))


def terminated_to_delete(pods: Iterable[Obj], threshold: int) -> list[Obj]:
    """The terminated pods beyond `threshold`, in deletion order (none when threshold <= 0)."""
    if threshold <= 0:
        return []
    terminated = [p for p in pods if is_pod_terminated(p)]
    excess = len(terminated) - threshold
    if excess <= 0:
        return []
    return sorted(terminated, key=gc_order)[:excess]


def _node_ready(node: Obj) -> bool:
    for c in (node.get("status") or {}).get("conditions") or ():
        if isinstance(c, dict) and c.get("type") == "Ready":
            return c.get("status") == "True"
    return False


def is_out_of_service(node: Obj) -> bool:
    """Not Ready and tainted node.kubernetes.io/out-of-service."""
    taints = (node.get("spec") or {}).get("taints") or ()
    return not _node_ready(node) and any(isinstance(t, dict) and t.get("key") == TAINT_OUT_OF_SERVICE
                                         for t in taints)


def terminating_on_out_of_service(pods: Iterable[Obj], nodes: Indexer) -> list[Obj]:
    out = []
    for pod in pods:
        if not meta(pod).get("deletionTimestamp"):
            continue
        node = nodes.get_by_key(node_name(pod))
        if node is not None and is_out_of_service(node):
            out.append(pod)
    return sorted(out, key=gc_order)


def unscheduled_terminating(pods: Iterable[Obj]) -> list[Obj]:
    return [p for p in pods if meta(p).get("deletionTimestamp") and not node_name(p)]


def with_condition(conditions: list[Obj], condition: Obj, *, now: str) -> list[Obj]:
    """upstream's UpdatePodCondition: add or replace the condition of that type; the transition
    time is `now` unless the status is unchanged."""
    out = [dict(c) for c in conditions]
    new = {**condition, "lastTransitionTime": now}
    for i, old in enumerate(out):
        if old.get("type") == condition.get("type"):
            if old.get("status") == condition.get("status") and old.get("lastTransitionTime"):
                new["lastTransitionTime"] = old["lastTransitionTime"]
            out[i] = new
            return out
    out.append(new)
    return out


def failed_status_patch(pod: Obj, condition: Obj | None, *, now: str) -> Obj | None:
    """The status patch that marks `pod` Failed (None when it is already Succeeded/Failed)."""
    if pod_phase(pod) in ("Succeeded", "Failed"):
        return None
    status: Obj = {"phase": "Failed"}
    if condition is not None:
        status["conditions"] = with_condition(list((pod.get("status") or {}).get("conditions") or []),
                                              condition, now=now)
    return {"metadata": {"uid": meta(pod).get("uid")}, "status": status}


# -- the controller -----------------------------------------------------------------------------------
class PodGCController:
    """Runs until cancelled: `await PodGCController(rest=..., informers=...).run(1)`."""

    name = NAME

    def __init__(self, *, rest: RestClient, informers: SharedInformerFactory, clock: Clock = REAL_CLOCK,
                 terminated_pod_threshold: int = DEFAULT_TERMINATED_POD_THRESHOLD,
                 gc_check_period: float = GC_CHECK_PERIOD, quarantine_time: float = QUARANTINE_TIME) -> None:
        self.rest = rest
        self.informers = informers
        self.clock = clock
        self.terminated_pod_threshold = terminated_pod_threshold
        self.gc_check_period = gc_check_period
        self.quarantine_time = quarantine_time
        self.node_queue: DelayingQueue[str] = DelayingQueue(clock=clock)
        self.pods: ResourceClient
        self.nodes: ResourceClient
        self.pod_indexer: Indexer
        self.node_indexer: Indexer

    async def run(self, workers: int) -> None:
        self.pods = await self.rest.resource("v1", "pods")
        self.nodes = await self.rest.resource("v1", "nodes")
        pod_informer = await self.informers.informer_for("v1", "pods")
        node_informer = await self.informers.informer_for("v1", "nodes")
        self.pod_indexer, self.node_indexer = pod_informer.indexer, node_informer.indexer
        wiring = Wiring(self.informers)
        wiring.add(pod_informer)
        wiring.add(node_informer)
        await wiring.run("pod garbage collector",
                         lambda: run_every(self.gc_check_period, self.gc, clock=self.clock, what="pod GC pass"),
                         queues=[self.node_queue])

    def pod_views(self) -> list[Obj]:
        """Slim views of every cached pod (`podview`: a pass must not decode 150,000 whole pods)."""
        codec, out = self.pod_indexer.codec, []
        for key in self.pod_indexer.list_keys():
            entry = self.pod_indexer.entry(key)
            if entry is not None:
                out.append(pod_view(codec.raw(entry)))
        return out

    def full(self, pods: list[Obj]) -> list[Obj]:
        """The whole cached objects of `pods` (views), in the same order; gone ones left out."""
        out = []
        for view in pods:
            obj = self.pod_indexer.get_by_key(object_key(view))
            if obj is not None:
                out.append(obj)
        return out

    async def gc(self) -> None:
        """One pass (upstream's gc)."""
        views = self.pod_views()
        terminated = [v for v in views if is_pod_terminated(v)]
        if self.terminated_pod_threshold > 0 and len(terminated) > self.terminated_pod_threshold:
            # evicted-first ordering needs status.reason, which views leave out
            await self._delete_all(terminated_to_delete(self.full(terminated), self.terminated_pod_threshold))
        await self._delete_all(self.full(terminating_on_out_of_service(views, self.node_indexer)))
        await self.gc_orphaned(views)
        await self._delete_all(self.full(unscheduled_terminating(views)))

    async def gc_orphaned(self, pods: list[Obj]) -> None:
        existing = set(self.node_indexer.list_keys())
        for pod in pods:
            node = node_name(pod)
            if node and node not in existing:
                self.node_queue.add_after(node, self.quarantine_time)
        deleted = await self.discover_deleted_nodes(existing)
        orphans = [p for p in pods if node_name(p) in deleted]
        await self._delete_all(self.full(orphans) if orphans else [], condition=ORPHAN_CONDITION)

    async def discover_deleted_nodes(self, existing: set[str]) -> set[str]:
        """Node names whose quarantine is over and that the server says are gone."""
        deleted: set[str] = set()
        while len(self.node_queue) > 0:
            name = await self.node_queue.get()
            try:
                if name not in existing and not await self._node_exists(name):
                    deleted.add(name)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("error getting node %s: %s", name, e)  # retried when seen again
            finally:
                self.node_queue.done(name)
        return deleted

    async def _node_exists(self, name: str) -> bool:
        try:
            await self.nodes.get(name)
        except NotFound:
            return False
        return True

    async def _delete_all(self, pods: list[Obj], *, condition: Obj | None = None) -> None:
        if not pods:
            return
        log.info("garbage collecting %d pods", len(pods))
        results = await asyncio.gather(*(self.mark_failed_and_delete(p, condition=condition) for p in pods),
                                       return_exceptions=True)
        for pod, result in zip(pods, results):
            if isinstance(result, asyncio.CancelledError):
                raise result
            if isinstance(result, BaseException) and not isinstance(result, NotFound):
                log.warning("failed to delete pod %s/%s: %s", meta(pod).get("namespace"), meta(pod).get("name"),
                            result)

    async def mark_failed_and_delete(self, pod: Obj, *, condition: Obj | None = None) -> None:
        m = meta(pod)
        name, ns = str(m.get("name")), str(m.get("namespace"))
        log.info("PodGC is force deleting Pod %s/%s", ns, name)
        patch = failed_status_patch(pod, condition, now=format_time(self.clock.now()))
        if patch is not None:
            await self.pods.patch(name, patch, namespace=ns, subresource="status")
        await self.pods.delete(name, namespace=ns, grace_period_seconds=0)


@register(NAME, workers=1, aliases=("pod-garbage-collector-controller",))
def new_podgc_controller(ctx: ControllerContext) -> PodGCController:
    opts = ctx.options
    return PodGCController(
        rest=ctx.rest, informers=ctx.informers, clock=ctx.clock,
        terminated_pod_threshold=int(opts.get("terminated_pod_gc_threshold", DEFAULT_TERMINATED_POD_THRESHOLD)),
        gc_check_period=float(opts.get("podgc_check_period", GC_CHECK_PERIOD)),
        quarantine_time=float(opts.get("podgc_quarantine_time", QUARANTINE_TIME)))
