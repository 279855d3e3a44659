"""The taint eviction controller: delete pods from nodes with NoExecute taints they do not
tolerate (upstream pkg/controller/tainteviction/taint_eviction.go and timed_workers.go; since
Kubernetes 1.29 its own controller, `taint-eviction-controller`, next to the node lifecycle one).

For every pod bound to a node (spec.nodeName) and the node's NoExecute taints:
- no taints: any scheduled deletion is cancelled;
- a taint the pod does not tolerate: the pod is deleted now;
- all tolerated, none with tolerationSeconds: it stays (scheduled deletion cancelled);
- all tolerated, the shortest tolerationSeconds is S: it is deleted S seconds after the taint was
  first seen to apply to it (a later, later-firing re-evaluation keeps the earlier deadline).
Deleting first adds the pod condition DisruptionTarget=True, reason DeletionByTaintManager,
message "Taint manager: deleting due to NoExecute taint", then issues a plain DELETE (the pod's
own grace period applies). Events on the pod, reason TaintManagerEviction: "Marking for deletion
Pod <ns>/<name>" and "Cancelling deletion of Pod <ns>/<name>".

Triggers: a node whose NoExecute taints changed re-evaluates all its pods; a pod added, deleted,
moved or with changed tolerations re-evaluates that pod. Evaluations are synchronous (they only
read the caches and arm timers), so there is no interleaving between a node's and its pods'
updates; the deletions run as tasks on `TimedWorkerQueue`, timed by `ctx.clock`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.client.errors import NotFound
from kubecore.client.indexer import DeletedFinalStateUnknown, Indexer
from kubecore.client.informer import EventHandlerFuncs
from kubecore.client.resource import ResourceClient
from kubecore.client.workqueue import WorkQueue
from kubecore.controllers.base import ControllerContext, Wiring, register
from kubecore.controllers.controller_utils import meta, node_name
from kubecore.controllers.nodelifecycle_taints import (
    get_matching_tolerations, min_toleration_time, no_execute_taints, node_taints, pod_tolerations,
)
from kubecore.controllers.nodelifecycle_writes import add_condition_and_delete_pod
from kubecore.controllers.podcontrol import NORMAL, EventRecorderLike

log = logging.getLogger(__name__)

Obj = dict[str, Any]
NAME = "tainteviction"
COMPONENT = "taint-eviction-controller"
NODE_NAME_INDEX = "spec.nodeName"
RETRIES, RETRY_PAUSE = 5, 0.01
EVICTION_REASON = "TaintManagerEviction"


def node_name_index(pod: Obj) -> list[str]:
    """Index function: the node a pod is bound to (none while unscheduled)."""
    name = node_name(pod)
    return [name] if name else []


def pods_on_node(indexer: Indexer, node: str) -> list[Obj]:
    return indexer.by_index(NODE_NAME_INDEX, node)


@dataclass
class TimedWorker:
    key: str
    created_at: float
    fire_at: float
    timed: bool
    task: asyncio.Task[None] | None = None
    started: bool = False


WorkFunc = Callable[[str, float], Awaitable[None]]
"""work(key "<namespace>/<name>", fire_at)."""


@dataclass
class TimedWorkerQueue:
    """Work that runs no earlier than its fire time, one per key (TimedWorkerQueue).

    Invariant: `workers[key]` is the latest work added for key until it finishes or is cancelled;
    an immediate work (fire time not after creation) is not "timed": it cannot be cancelled and
    `get_worker` does not return it, as upstream keeps no timer for it."""

    work: WorkFunc
    clock: Clock = REAL_CLOCK
    workers: dict[str, TimedWorker] = field(default_factory=dict)

    def add_work(self, key: str, *, created_at: float, fire_at: float) -> None:
        if key in self.workers:
            return
        worker = TimedWorker(key=key, created_at=created_at, fire_at=fire_at, timed=fire_at > created_at)
        worker.task = asyncio.ensure_future(self._run(worker))
        self.workers[key] = worker

    async def _run(self, worker: TimedWorker) -> None:
        delay = worker.fire_at - worker.created_at
        if delay > 0:
            await self.clock.sleep(delay)
        worker.started = True
        try:
            await self.work(worker.key, worker.fire_at)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.error("taint eviction: timed worker for %s failed: %s", worker.key, e)
        finally:
            if self.workers.get(worker.key) is worker:
                del self.workers[worker.key]

    def get_worker(self, key: str) -> TimedWorker | None:
        w = self.workers.get(key)
        return w if w is not None and w.timed else None

    def cancel_work(self, key: str) -> bool:
        """Forget the work of `key`; True if a timed one was cancelled."""
        worker = self.workers.pop(key, None)
        if worker is None or not worker.timed:
            return False
        if not worker.started and worker.task is not None:
            worker.task.cancel()
        return True

    async def cancel_and_wait(self) -> None:
        tasks = [w.task for w in self.workers.values() if w.task is not None]
        self.workers.clear()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class TaintEvictionController:
    name = NAME

    def __init__(self, ctx: ControllerContext, *, recorder: EventRecorderLike | None = None) -> None:
        self.ctx = ctx
        self.clock = ctx.clock
        self.recorder: EventRecorderLike = recorder if recorder is not None else ctx.recorder(COMPONENT)
        self.queue = TimedWorkerQueue(self._delete_pod, clock=ctx.clock)
        self.tainted_nodes: dict[str, list[Obj]] = {}
        self.node_queue: WorkQueue[str] = WorkQueue()
        self.pod_queue: WorkQueue[tuple[str, str, str]] = WorkQueue()
        self.pods_client: ResourceClient
        self.pod_indexer: Indexer
        self.node_indexer: Indexer

    async def setup(self) -> Wiring:
        """The pods client, informers (pods indexed by node) and event handlers."""
        self.pods_client = await self.ctx.rest.resource("v1", "pods")
        pods = await self.ctx.informers.informer_for("v1", "pods", indexers={NODE_NAME_INDEX: node_name_index})
        nodes = await self.ctx.informers.informer_for("v1", "nodes")
        self.pod_indexer, self.node_indexer = pods.indexer, nodes.indexer
        wiring = Wiring(self.ctx.informers)
        wiring.add(pods, EventHandlerFuncs(on_add_func=lambda p, _i: self.pod_updated(None, p),
                                           on_update_func=self.pod_updated,
                                           on_delete_func=lambda p: self.pod_updated(unwrap(p), None)))
        wiring.add(nodes, EventHandlerFuncs(on_add_func=lambda n, _i: self.node_updated(None, n),
                                            on_update_func=self.node_updated,
                                            on_delete_func=lambda n: self.node_updated(unwrap(n), None)))
        return wiring

    async def run(self, workers: int) -> None:
        """One node worker and one pod worker (their work is synchronous); pending deletions are
        cancelled when it stops."""
        wiring = await self.setup()
        try:
            await wiring.run(COMPONENT, lambda: asyncio.gather(self._node_worker(), self._pod_worker()),
                             queues=[self.node_queue, self.pod_queue])
        finally:
            await self.queue.cancel_and_wait()

    # -- event handlers -----------------------------------------------------------------------------
    def pod_updated(self, old: Obj | None, new: Obj | None) -> None:
        if old is not None and new is not None and pod_tolerations(old) == pod_tolerations(new) \
                and node_name(old) == node_name(new):
            return
        pod = new if new is not None else old
        if pod is None:
            return
        m = meta(pod)
        self.pod_queue.add((str(m.get("namespace") or ""), str(m.get("name") or ""), node_name(pod)))

    def node_updated(self, old: Obj | None, new: Obj | None) -> None:
        if old is not None and new is not None and \
                no_execute_taints(node_taints(old)) == no_execute_taints(node_taints(new)):
            return
        node = new if new is not None else old
        if node is not None:
            self.node_queue.add(str(meta(node).get("name")))

    async def _node_worker(self) -> None:
        async for name in self.node_queue:
            try:
                self.handle_node_update(name)
            finally:
                self.node_queue.done(name)

    async def _pod_worker(self) -> None:
        async for item in self.pod_queue:
            try:
                self.handle_pod_update(*item)
            finally:
                self.pod_queue.done(item)

    # -- decisions ----------------------------------------------------------------------------------
    def handle_node_update(self, name: str) -> None:
        node = self.node_indexer.get_by_key(name)
        if node is None:
            self.tainted_nodes.pop(name, None)
            return
        taints = no_execute_taints(node_taints(node))
        if taints:
            self.tainted_nodes[name] = taints
        else:
            self.tainted_nodes.pop(name, None)
        pods = pods_on_node(self.pod_indexer, name)
        if not taints:
            for pod in pods:
                self.cancel_work_with_event(_key(pod))
            return
        now = self.clock.now()
        for pod in pods:
            self.process_pod_on_node(_key(pod), pod_tolerations(pod), taints, now=now)

    def handle_pod_update(self, namespace: str, name: str, node: str) -> None:
        key = f"{namespace}/{name}"
        pod = self.pod_indexer.get_by_key(key)
        if pod is None:
            self.cancel_work_with_event(key)
            return
        if node_name(pod) != node or not node:
            return
        taints = self.tainted_nodes.get(node)
        if taints is None:
            return
        self.process_pod_on_node(key, pod_tolerations(pod), taints, now=self.clock.now())

    def process_pod_on_node(self, key: str, tolerations: list[Obj], taints: list[Obj], *, now: float) -> None:
        if not taints:
            self.cancel_work_with_event(key)
        all_tolerated, used = get_matching_tolerations(taints, tolerations)
        if not all_tolerated:
            log.info("not all taints are tolerated after update for pod %s", key)
            self.cancel_work_with_event(key)
            self.queue.add_work(key, created_at=now, fire_at=now)
            return
        seconds = min_toleration_time(used)
        if seconds < 0:
            self.cancel_work_with_event(key)
            return
        start, trigger = now, now + seconds
        scheduled = self.queue.get_worker(key)
        if scheduled is not None:
            start = scheduled.created_at
            if start + seconds < trigger:
                return
            self.cancel_work_with_event(key)
        self.queue.add_work(key, created_at=start, fire_at=trigger)

    def cancel_work_with_event(self, key: str) -> None:
        if self.queue.cancel_work(key):
            self._event(key, f"Cancelling deletion of Pod {key}")

    def _event(self, key: str, message: str) -> None:
        namespace, _, name = key.partition("/")
        self.recorder.event({"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": namespace},
                            NORMAL, reason=EVICTION_REASON, message=message)

    async def _delete_pod(self, key: str, fire_at: float) -> None:
        namespace, _, name = key.partition("/")
        log.info("taint eviction: deleting pod %s", key)
        self._event(key, f"Marking for deletion Pod {key}")
        for attempt in range(RETRIES):
            try:
                await add_condition_and_delete_pod(self.pods_client, name, namespace, now=self.clock.now())
                return
            except NotFound:
                return
            except asyncio.CancelledError:
                raise
            except Exception as e:
                if attempt == RETRIES - 1:
                    raise
                log.info("taint eviction: deleting %s failed (%s); retrying", key, e)
                await self.clock.sleep(RETRY_PAUSE)


def unwrap(obj: Obj | DeletedFinalStateUnknown) -> Obj:
    return obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj


def _key(pod: Obj) -> str:
    m = meta(pod)
    return f"{m.get('namespace')}/{m.get('name')}"


@register(NAME, workers=8, aliases=(COMPONENT,))
def new_taint_eviction_controller(ctx: ControllerContext) -> TaintEvictionController:
    return TaintEvictionController(ctx)
