"""The node lifecycle controller: notice nodes that stop reporting, say so in their status and
taints, and mark their pods not ready (upstream pkg/controller/nodelifecycle/
node_lifecycle_controller.go; the pod deleting is the taint eviction controller's,
`nodelifecycle_eviction`).

What a user sees, with the defaults (node-monitor-period 5 s, node-monitor-grace-period 50 s,
the current upstream default, node-startup-grace-period 60 s):

- A node whose kubelet neither renews its Lease `kube-node-lease/<node>` nor posts status for
  the grace period gets Ready, MemoryPressure, DiskPressure and PIDPressure = Unknown, reason
  NodeStatusUnknown, "Kubelet stopped posting node status." (`nodelifecycle_health`), an event
  NodeNotReady, and Ready=False on each of its pods (MarkPodsNotReady; also for pods bound to it
  later).
- Ready=Unknown -> taint node.kubernetes.io/unreachable:NoExecute; Ready=False ->
  node.kubernetes.io/not-ready:NoExecute (each with timeAdded). These go through a per-zone
  rate-limited queue (`nodelifecycle_zones`: node-eviction-rate 0.1 nodes/s, slower or stopped
  when a zone is mostly down, none when every zone is down). The taint eviction controller then
  deletes pods that do not tolerate the taint, at once or after their tolerationSeconds.
- Ready=True again -> both NoExecute taints removed (pending evictions are cancelled).
- TaintNodeByCondition: NoSchedule taints follow the conditions (not-ready, unreachable,
  memory/disk/pid-pressure, network-unavailable) and spec.unschedulable
  (node.kubernetes.io/unschedulable), on every node add/update.
- The beta os/arch labels are kept equal to kubernetes.io/os and kubernetes.io/arch.

Settings, from `ctx.options` (the controller manager's flags of the same upstream names):
node_monitor_period, node_monitor_grace_period, node_startup_grace_period, node_eviction_rate,
secondary_node_eviction_rate, large_cluster_size_threshold, unhealthy_zone_threshold.
Time comes from `ctx.clock`. Leases are read through the informer factory: a factory scoped to
one namespace would not see kube-node-lease (node status heartbeats still count then).
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any

from kubecore.client.indexer import Indexer
from kubecore.client.informer import EventHandlerFuncs
from kubecore.client.resource import ResourceClient
from kubecore.client.workqueue import RateLimitingQueue, WorkQueue
from kubecore.controllers.base import ControllerContext, Wiring, cancel_and_wait, register, run_every
from kubecore.controllers.controller_utils import meta, node_name, parse_time
from kubecore.controllers.nodelifecycle_eviction import NODE_NAME_INDEX, unwrap, node_name_index, pods_on_node
from kubecore.controllers.nodelifecycle_health import Decision, NodeHealth, evaluate
from kubecore.controllers.nodelifecycle_taints import (
    FALSE, NOT_READY_TAINT, READY, TRUE, UNKNOWN, UNREACHABLE_TAINT, controller_no_schedule_taints,
    excluded_from_disruption, get_condition, no_schedule_taints_for, node_taints, ready_condition, taint_exists,
    taint_set_diff, zone_key,
)
from kubecore.controllers.nodelifecycle_writes import (
    mark_pods_not_ready, record_node_event, record_node_status_change, remove_taints_off_node, retry_on_conflict,
    swap_node_controller_taint,
)
from kubecore.controllers.nodelifecycle_zones import (
    ENTER_FULL_DISRUPTION, EXIT_FULL_DISRUPTION, TimedValue, ZoneTracker,
)
from kubecore.controllers.podcontrol import NORMAL

log = logging.getLogger(__name__)

Obj = dict[str, Any]
NAME = "nodelifecycle"
COMPONENT = "node-controller"
NODE_LEASE_NAMESPACE = "kube-node-lease"
NODE_EVICTION_PERIOD = 0.1
"""How often the per-zone tainting queues are tried (scheduler.NodeEvictionPeriod)."""
NODE_HEALTH_UPDATE_RETRY, RETRY_SLEEP = 5, 0.02
MONITOR_PARALLELISM = 8
POD_UPDATE_WORKERS = 4
LABEL_RECONCILE = (("kubernetes.io/os", "beta.kubernetes.io/os"), ("kubernetes.io/arch", "beta.kubernetes.io/arch"))


@dataclass(frozen=True)
class NodeLifecycleOptions:
    node_monitor_period: float = 5.0
    node_monitor_grace_period: float = 50.0
    node_startup_grace_period: float = 60.0
    node_eviction_rate: float = 0.1
    secondary_node_eviction_rate: float = 0.01
    large_cluster_size_threshold: int = 50
    unhealthy_zone_threshold: float = 0.55

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> NodeLifecycleOptions:
        base = cls()
        return replace(base, **{k: type(getattr(base, k))(v) for k, v in options.items() if hasattr(base, k)})


class NodeLifecycleController:
    name = NAME

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.clock = ctx.clock
        self.opts = NodeLifecycleOptions.from_options(ctx.options)
        self.recorder = ctx.recorder(COMPONENT)
        self.zones = ZoneTracker(eviction_qps=self.opts.node_eviction_rate,
                                 secondary_eviction_qps=self.opts.secondary_node_eviction_rate,
                                 large_cluster_threshold=self.opts.large_cluster_size_threshold,
                                 unhealthy_zone_threshold=self.opts.unhealthy_zone_threshold, clock=ctx.clock)
        self.health: dict[str, NodeHealth] = {}
        self.known_nodes: dict[str, Obj] = {}
        self.nodes_to_retry: set[str] = set()
        self.node_queue: WorkQueue[str] = WorkQueue()
        self.pod_queue: RateLimitingQueue[str] = RateLimitingQueue(clock=ctx.clock)
        self.nodes_client: ResourceClient
        self.pods_client: ResourceClient
        self.node_indexer: Indexer
        self.pod_indexer: Indexer
        self.lease_indexer: Indexer

    # -- wiring -----------------------------------------------------------------------------------
    async def setup(self) -> Wiring:
        """Clients, informers (pods indexed by node) and event handlers."""
        rest, informers = self.ctx.rest, self.ctx.informers
        self.nodes_client = await rest.resource("v1", "nodes")
        self.pods_client = await rest.resource("v1", "pods")
        nodes = await informers.informer_for("v1", "nodes")
        pods = await informers.informer_for("v1", "pods", indexers={NODE_NAME_INDEX: node_name_index})
        leases = await informers.informer_for("coordination.k8s.io/v1", "leases")
        self.node_indexer, self.pod_indexer, self.lease_indexer = nodes.indexer, pods.indexer, leases.indexer
        wiring = Wiring(informers)
        wiring.add(nodes, EventHandlerFuncs(
            on_add_func=lambda n, _i: self.node_queue.add(str(meta(n).get("name"))),
            on_update_func=lambda _o, n: self.node_queue.add(str(meta(n).get("name"))),
            on_delete_func=lambda n: self.nodes_to_retry.discard(str(meta(unwrap(n)).get("name")))))
        wiring.add(pods, EventHandlerFuncs(on_add_func=lambda p, _i: self.pod_updated(None, p),
                                           on_update_func=self.pod_updated))
        wiring.add(leases)
        return wiring

    async def run(self, workers: int) -> None:
        wiring = await self.setup()
        await wiring.run(NAME, lambda: self._work(workers), queues=[self.node_queue, self.pod_queue])

    async def _work(self, workers: int) -> None:
        """Node workers (NoSchedule taints, labels), pod workers (pods bound to not-ready nodes), the
        NoExecute tainting pass and the monitor pass."""
        tasks = [asyncio.ensure_future(self._node_worker()) for _ in range(max(1, workers))]
        tasks += [asyncio.ensure_future(self._pod_worker()) for _ in range(POD_UPDATE_WORKERS)]
        tasks.append(asyncio.ensure_future(run_every(NODE_EVICTION_PERIOD, self.no_execute_tainting_pass,
                                                     clock=self.clock, what=f"{NAME}: NoExecute tainting pass")))
        tasks.append(asyncio.ensure_future(run_every(self.opts.node_monitor_period, self.monitor_node_health,
                                                     clock=self.clock, what=f"{NAME}: node health pass")))
        try:
            await asyncio.gather(*tasks)
        finally:
            await cancel_and_wait(tasks)

    # -- node updates: NoSchedule taints and labels -------------------------------------------------
    async def _node_worker(self) -> None:
        async for name in self.node_queue:
            try:
                await self.no_schedule_tainting_pass(name)
                await self.reconcile_node_labels(name)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.error("failed to process node %s: %s", name, e)
            finally:
                self.node_queue.done(name)

    async def no_schedule_tainting_pass(self, name: str) -> None:
        """Make the node's condition/unschedulable NoSchedule taints match (doNoScheduleTaintingPass)."""
        node = self.node_indexer.get_by_key(name)
        if node is None:
            return
        add, remove = taint_set_diff(no_schedule_taints_for(node), controller_no_schedule_taints(node_taints(node)))
        if not add and not remove:
            return
        if not await swap_node_controller_taint(self.nodes_client, node, add=add, remove=remove, clock=self.clock):
            raise RuntimeError(f"failed to swap taints of node {name}")

    async def reconcile_node_labels(self, name: str) -> None:
        node = self.node_indexer.get_by_key(name)
        labels = (meta(node).get("labels") or {}) if node is not None else {}
        wanted = {beta: labels[ga] for ga, beta in LABEL_RECONCILE if ga in labels and labels.get(beta) != labels[ga]}
        if not wanted:
            return

        async def attempt() -> None:
            await self.nodes_client.patch(name, {"metadata": {"labels": wanted}}, patch_type="merge")

        await retry_on_conflict(attempt, clock=self.clock)

    # -- pod updates: pods bound to a node that is not ready ---------------------------------------
    def pod_updated(self, old: Obj | None, new: Obj) -> None:
        bound = node_name(new)
        if bound and (old is None or node_name(old) != bound):
            m = meta(new)
            self.pod_queue.add(f"{m.get('namespace')}/{m.get('name')}")

    async def _pod_worker(self) -> None:
        async for key in self.pod_queue:
            try:
                if await self.process_pod(key):
                    self.pod_queue.forget(key)
                else:
                    self.pod_queue.add_rate_limited(key)
            finally:
                self.pod_queue.done(key)

    async def process_pod(self, key: str) -> bool:
        """Mark a newly bound pod not ready if its node is not (processPod); False to retry."""
        pod = self.pod_indexer.get_by_key(key)
        if pod is None:
            return True
        bound = node_name(pod)
        health = self.health.get(bound)
        if health is None:
            return True
        if self.node_indexer.get_by_key(bound) is None:
            return False
        current = get_condition(health.status, READY)
        if current is None or current.get("status") == TRUE:
            return True
        errors = await mark_pods_not_ready(self.pods_client, self.recorder, [pod], bound, now=self.clock.now())
        return not errors

    # -- the monitor pass --------------------------------------------------------------------------
    async def monitor_node_health(self) -> None:
        """Check every node's heartbeats (monitorNodeHealth); see the module docstring."""
        nodes = self.node_indexer.list()
        names = {str(meta(n).get("name")) for n in nodes}
        for node in nodes:
            name = str(meta(node).get("name"))
            if name in self.known_nodes:
                self.zones.ensure_zone(zone_key(node))
                continue
            log.info("controller observed a new node %s", name)
            record_node_event(self.recorder, name, str(meta(node).get("uid") or ""), event_type=NORMAL,
                              reason="RegisteredNode", event=f"Registered Node {name} in Controller")
            self.known_nodes[name] = node
            self.zones.ensure_zone(zone_key(node))
            await self._mark_reachable_logged(node)
        for name in [n for n in self.known_nodes if n not in names]:
            gone = self.known_nodes.pop(name)
            log.info("controller observed a node deletion %s", name)
            record_node_event(self.recorder, name, str(meta(gone).get("uid") or ""), event_type=NORMAL,
                              reason="RemovingNode", event=f"Removing Node {name} from Controller")
        zone_conditions: dict[str, list[Obj | None]] = defaultdict(list)
        limit = asyncio.Semaphore(MONITOR_PARALLELISM)

        async def one(node: Obj) -> None:
            async with limit:
                await self.update_node(node, zone_conditions)

        await asyncio.gather(*(one(n) for n in nodes))
        change = self.zones.handle_disruption(dict(zone_conditions))
        if change == ENTER_FULL_DISRUPTION:
            for node in nodes:
                await self._mark_reachable_logged(node)
        elif change == EXIT_FULL_DISRUPTION:
            now = self.clock.now()
            for name in names:
                if name in self.health:
                    self.health[name] = replace(self.health[name], probe_timestamp=now, ready_transition_timestamp=now)

    async def update_node(self, node: Obj, zone_conditions: dict[str, list[Obj | None]]) -> None:
        """One node of the monitor pass: health, taint decision, pods not ready."""
        name = str(meta(node).get("name"))
        decision = await self._health_with_retries(node)
        if decision is None:
            return
        if not excluded_from_disruption(node):
            zone_conditions[zone_key(node)].append(decision.current_ready)
        current, observed = decision.current_ready, decision.observed_ready
        if current is not None:
            pods = pods_on_node(self.pod_indexer, name)
            await self.process_taint_based_eviction(node, observed)
            became_not_ready = current.get("status") != TRUE and observed.get("status") == TRUE
            if became_not_ready:
                record_node_status_change(self.recorder, node, "NodeNotReady")
            if became_not_ready or (name in self.nodes_to_retry and observed.get("status") != TRUE):
                errors = await mark_pods_not_ready(self.pods_client, self.recorder, pods, name, now=self.clock.now())
                if errors:
                    log.warning("unable to mark all pods NotReady on node %s: %s; queuing for retry", name, errors[0])
                    self.nodes_to_retry.add(name)
                    return
        self.nodes_to_retry.discard(name)

    async def _health_with_retries(self, node: Obj) -> Decision | None:
        name = str(meta(node).get("name"))
        for _ in range(NODE_HEALTH_UPDATE_RETRY):
            try:
                return await self.try_update_node_health(node)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.info("updating health of node %s failed: %s; retrying", name, e)
            await self.clock.sleep(RETRY_SLEEP)
            try:
                node = await self.nodes_client.get(name)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.error("failed while getting node %s to retry updating its health: %s", name, e)
                return None
        log.error("update health of node %s from controller failed; skipping - no pods will be evicted", name)
        return None

    async def try_update_node_health(self, node: Obj) -> Decision:
        """Observe the node and its Lease; write Unknown conditions when it stopped reporting."""
        name = str(meta(node).get("name"))
        lease = self.lease_indexer.get_by_key(f"{NODE_LEASE_NAMESPACE}/{name}")
        renew = parse_time(((lease or {}).get("spec") or {}).get("renewTime")) if lease is not None else None
        decision = evaluate(node, self.health.get(name), lease_renew=renew, now=self.clock.now(),
                            monitor_grace=self.opts.node_monitor_grace_period,
                            startup_grace=self.opts.node_startup_grace_period)
        self.health[name] = decision.health
        if decision.node_to_write is not None and decision.health_after_write is not None:
            await self.nodes_client.update_status({**decision.node_to_write, "apiVersion": "v1", "kind": "Node"})
            self.health[name] = decision.health_after_write
        return decision

    # -- NoExecute taints ---------------------------------------------------------------------------
    async def process_taint_based_eviction(self, node: Obj, observed: Obj) -> None:
        status, taints = observed.get("status"), node_taints(node)
        if status == FALSE:
            if taint_exists(taints, UNREACHABLE_TAINT):
                if not await swap_node_controller_taint(self.nodes_client, node, add=[NOT_READY_TAINT],
                                                        remove=[UNREACHABLE_TAINT], clock=self.clock):
                    log.error("failed to instantly swap UnreachableTaint to NotReadyTaint; will try again")
            elif self.mark_node_for_tainting(node, FALSE):
                log.info("node %s is NotReady; adding it to the taint queue", meta(node).get("name"))
        elif status == UNKNOWN:
            if taint_exists(taints, NOT_READY_TAINT):
                if not await swap_node_controller_taint(self.nodes_client, node, add=[UNREACHABLE_TAINT],
                                                        remove=[NOT_READY_TAINT], clock=self.clock):
                    log.error("failed to instantly swap NotReadyTaint to UnreachableTaint; will try again")
            elif self.mark_node_for_tainting(node, UNKNOWN):
                log.info("node %s is unresponsive; adding it to the taint queue", meta(node).get("name"))
        elif status == TRUE:
            if await self._mark_reachable_logged(node):
                log.info("node %s is healthy again, removed all taints", meta(node).get("name"))

    def mark_node_for_tainting(self, node: Obj, status: str) -> bool:
        name, taints = str(meta(node).get("name")), node_taints(node)
        tainter = self.zones.tainter(zone_key(node))
        if (status == FALSE and not taint_exists(taints, NOT_READY_TAINT)) or \
                (status == UNKNOWN and not taint_exists(taints, UNREACHABLE_TAINT)):
            tainter.remove(name)
        return tainter.add(name, str(meta(node).get("uid") or ""))

    async def mark_node_as_reachable(self, node: Obj) -> bool:
        """Remove both NoExecute taints and forget any queued tainting (markNodeAsReachable)."""
        name = str(meta(node).get("name"))
        await remove_taints_off_node(self.nodes_client, name, node, [UNREACHABLE_TAINT, NOT_READY_TAINT],
                                     clock=self.clock)
        return self.zones.tainter(zone_key(node)).remove(name)

    async def _mark_reachable_logged(self, node: Obj) -> bool:
        try:
            return await self.mark_node_as_reachable(node)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.error("failed to remove taints from node %s: %s", meta(node).get("name"), e)
            return False

    async def no_execute_tainting_pass(self) -> None:
        for zone in list(self.zones.tainters):
            await self.zones.tainters[zone].try_(self._taint_one)

    async def _taint_one(self, value: TimedValue) -> tuple[bool, float]:
        node = self.node_indexer.get_by_key(value.value)
        if node is None:
            return True, 0.0
        cond = ready_condition(node)
        if cond is None:
            return False, 0.05
        if cond.get("status") == FALSE:
            add, opposite = NOT_READY_TAINT, UNREACHABLE_TAINT
        elif cond.get("status") == UNKNOWN:
            add, opposite = UNREACHABLE_TAINT, NOT_READY_TAINT
        else:
            return True, 0.0  # ready again: nothing to taint
        ok = await swap_node_controller_taint(self.nodes_client, node, add=[add], remove=[opposite], clock=self.clock)
        return ok, 0.0


@register(NAME, workers=8, aliases=("node-lifecycle-controller",))
def new_node_lifecycle_controller(ctx: ControllerContext) -> NodeLifecycleController:
    return NodeLifecycleController(ctx)
