"""The resource quota controller: status.hard and status.used of every ResourceQuota (upstream
pkg/controller/resourcequota: resource_quota_controller.go + resource_quota_monitor.go).

Level-driven; the queue holds quota keys:
- a quota added, deleted, or updated with a different spec.hard enqueues itself (status writes,
  including ours and the ResourceQuota admission's charges, do not);
- every `resync_period` (5 min, kube-controller-manager's --resource-quota-sync-period) all
  quotas are enqueued: the full recalculation that catches anything missed;
- replenishment: usage rises at admission (the API server charges status.used when it admits a
  create), so only what lowers it enqueues the quotas of the namespace that measure the kind
  (`Monitors`): a deletion, or an update upstream's DefaultUpdateFilter lets through (a pod
  that stops being charged, a service whose quota'd type changes, a claim whose allocated
  storage changes). Reacting to creations too would let a sync from a lagging pod cache undo
  a charge the admission has just made.

A sync (upstream syncResourceQuota) reads the quota from the cache and makes sure an informer
(a monitor) runs for every kind its hard names need (pods, services, persistentvolumeclaims,
configmaps, ..., any count/<resource>.<group> that discovery resolves), then computes usage from
those caches (`kubecore.api.quota.calculate_usage`, shared with the admission). status.used keeps
previous values for names no evaluator can measure, and is limited to the names in spec.hard. The
status is written (PUT .../status) when status.hard differs from spec.hard, a used value changed,
or it was never written.

Difference from upstream, on purpose: monitors are started on demand for the kinds quotas name,
not for every discovered resource.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.client.factory import SharedInformerFactory
from kubecore.client.indexer import NAMESPACE_INDEX, DeletedFinalStateUnknown, Indexer
from kubecore.client.informer import EventHandlerFuncs, SharedIndexInformer
from kubecore.client.resource import ResourceClient
from kubecore.client.rest import RestClient
from kubecore.controllers.base import ControllerContext, QueueController, cancel_and_wait, register
from kubecore.api.quota import (
    GroupResource, calculate_usage, evaluator_for, from_json, group_resources_for, quota_v1_pod, rl_equal, rl_mask,
    to_json,
)
from kubecore.controllers.controller_utils import meta

log = logging.getLogger(__name__)

Obj = dict[str, Any]
NAME = "resourcequota"
RESYNC_PERIOD = 300.0
MONITOR_SYNC_TIMEOUT = 30.0


def _unwrap(obj: Obj | DeletedFinalStateUnknown) -> Obj:
    return obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj


def _quota_service_type(svc: Obj) -> str:
    """GetQuotaServiceType: NodePort or LoadBalancer, else ""."""
    kind = (svc.get("spec") or {}).get("type")
    return str(kind) if kind in ("NodePort", "LoadBalancer") else ""


def needs_update(old: Obj, new: Obj, gr: GroupResource, now: float) -> bool:
    """Whether an update of an object of `gr` may lower some quota's usage (upstream's
    DefaultUpdateFilter; increases are charged at admission)."""
    if gr == ("", "pods"):
        return quota_v1_pod(old, now) and not quota_v1_pod(new, now)
    if gr == ("", "services"):
        return _quota_service_type(old) != _quota_service_type(new)
    if gr == ("", "persistentvolumeclaims"):
        def allocated(pvc: Obj) -> Any:
            return ((pvc.get("status") or {}).get("allocatedResources") or {}).get("storage")
        return bool(allocated(old) != allocated(new))
    return False


def new_quota_status(quota: Obj, computed: dict[str, Any]) -> Obj | None:
    """The status to write (None when unchanged): hard = spec.hard, used = previous used updated
    with `computed`, masked to the hard names."""
    spec_hard = from_json((quota.get("spec") or {}).get("hard"))
    status = quota.get("status") or {}
    prev_used = from_json(status.get("used"))
    used = rl_mask({**prev_used, **computed}, spec_hard.keys())
    dirty = (status.get("hard") is None or status.get("used") is None
             or not rl_equal(from_json(status.get("hard")), spec_hard) or not rl_equal(used, prev_used))
    if not dirty:
        return None
    return {"hard": to_json(spec_hard), "used": to_json(used)}


class ResourceQuotaController(QueueController):
    """Runs until cancelled: `await ResourceQuotaController(rest=..., informers=...).run(5)`."""

    name = NAME
    description = "resource quota controller"

    def __init__(self, *, rest: RestClient, informers: SharedInformerFactory, clock: Clock = REAL_CLOCK,
                 resync_period: float = RESYNC_PERIOD) -> None:
        super().__init__(rest=rest, informers=informers, clock=clock)
        self.resync_period = resync_period
        self._monitors: dict[GroupResource, SharedIndexInformer] = {}
        self._monitor_lock = asyncio.Lock()
        self.quotas: ResourceClient
        self.rq_indexer: Indexer

    async def wire(self) -> None:
        self.quotas = await self.rest.resource("v1", "resourcequotas")
        rq_inf = await self.informers.informer_for("v1", "resourcequotas")
        self.rq_indexer = rq_inf.indexer
        self.wiring.add(rq_inf, EventHandlerFuncs(
            on_add_func=lambda q, _i: self.enqueue(q), on_update_func=self._quota_updated,
            on_delete_func=lambda q: self.enqueue(_unwrap(q))))

    async def work(self, workers: int) -> None:
        """The workers, and every resync_period every quota enqueued (a full recalculation)."""
        resync = asyncio.create_task(self._resync_loop())
        try:
            await super().work(workers)
        finally:
            await cancel_and_wait([resync])

    async def _resync_loop(self) -> None:
        while True:
            await self.clock.sleep(self.resync_period)
            for key in self.rq_indexer.list_keys():
                self.queue.add(key)

    def _quota_updated(self, old: Obj, cur: Obj) -> None:
        if (old.get("spec") or {}).get("hard") != (cur.get("spec") or {}).get("hard"):
            self.enqueue(cur)

    # -- monitors -----------------------------------------------------------------------------------------
    async def monitor(self, gr: GroupResource) -> SharedIndexInformer:
        """The informer for `gr`, started (and its replenishment handler registered) on first use."""
        async with self._monitor_lock:
            informer = self._monitors.get(gr)
            if informer is None:
                group, resource = gr
                api_version = "v1" if not group else None
                informer = await self.informers.informer_for(api_version, f"{resource}.{group}" if group else resource)
                self.wiring.add(informer, EventHandlerFuncs(
                    on_update_func=lambda o, n: self.replenish(gr, n) if needs_update(o, n, gr, self.clock.now())
                    else None,
                    on_delete_func=lambda o: self.replenish(gr, _unwrap(o))), wait=False)
                self._monitors[gr] = informer
                self.informers.start()
        if not await informer.wait_for_sync(MONITOR_SYNC_TIMEOUT):
            raise RuntimeError(f"timed out waiting for the cache of {gr[1]}.{gr[0] or 'core'} to sync")
        return informer

    def replenish(self, gr: GroupResource, obj: Obj) -> None:
        """Enqueue the quotas of the object's namespace that measure its kind."""
        namespace = str(meta(obj).get("namespace") or "")
        if not namespace:
            return
        ev = evaluator_for(gr)
        for quota in self.rq_indexer.by_index(NAMESPACE_INDEX, namespace):
            if ev.matching(from_json((quota.get("spec") or {}).get("hard")).keys()):
                self.enqueue(quota)

    # -- sync ---------------------------------------------------------------------------------------------
    async def sync(self, key: str) -> None:
        quota = self.rq_indexer.get_by_key(key)
        if quota is None:
            return
        namespace = str(meta(quota).get("namespace") or "")
        hard_names = from_json((quota.get("spec") or {}).get("hard")).keys()
        objects: dict[GroupResource, list[Obj]] = {}
        errors: list[Exception] = []
        for gr in sorted(group_resources_for(hard_names)):
            try:
                informer = await self.monitor(gr)
            except Exception as e:  # an unknown kind: its names keep their previous usage
                errors.append(e)
                continue
            objects[gr] = informer.indexer.by_index(NAMESPACE_INDEX, namespace)
        status = new_quota_status(quota, calculate_usage(quota, objects, now=self.clock.now()))
        if status is not None:
            body = {**quota, "apiVersion": "v1", "kind": "ResourceQuota", "status": status}
            await self.quotas.update_status(body, namespace=namespace)
        if errors:
            raise errors[0]


@register(NAME, workers=5, aliases=("resourcequota-controller",))
def new_resourcequota_controller(ctx: ControllerContext) -> ResourceQuotaController:
    return ResourceQuotaController(rest=ctx.rest, informers=ctx.informers, clock=ctx.clock,
                                   resync_period=float(ctx.options.get("resource_quota_sync_period", RESYNC_PERIOD)))
