"""The EndpointSlice controller: discovery.k8s.io/v1 EndpointSlices for every Service with a
selector, from its pods' IPs, ports and readiness (upstream pkg/controller/endpointslice).

Level-driven; the queue holds Service keys:
- a Service added, updated or deleted enqueues itself;
- a pod event enqueues the Services (of its namespace) whose endpoints it may change
  (`services_to_update`: new or deleted pods; readiness, deletionTimestamp or IP changes; label
  changes enqueue the Services it joined or left), after `endpoint_updates_batch_period` (0);
- an EndpointSlice event enqueues its Service when the slice is managed by this controller and
  was not written by it (`EndpointSliceTracker.should_sync`), or was deleted by someone else, or
  its managed-by label changed.

A sync reads the Service from the cache. Gone -> forget it (the slices go with the garbage
collector, through their ownerReference). ExternalName, or no selector -> nothing (slices of
selector-less Services are someone else's). Otherwise: the pods the selector matches, the slices
labelled kubernetes.io/service-name=<svc> and managed-by=endpointslice-controller.k8s.io (those
being deleted ignored); when the cache does not show this controller's own last writes yet the
sync fails ("EndpointSlice informer cache is out of date") and is retried. Then
`endpointslice_reconciler` computes and applies the writes. A failure records a Warning event
FailedToUpdateEndpointSlices on the Service and is retried with backoff.

Nodes are read from a node informer: an endpoint's zone is its node's topology.kubernetes.io/zone
label, and a pod whose node is unknown is left out (and the sync retried) unless the Service
publishes not-ready addresses, as upstream.
"""

from __future__ import annotations

import logging
from typing import Any

from kubecore.client.factory import SharedInformerFactory
from kubecore.client.indexer import NAMESPACE_INDEX, DeletedFinalStateUnknown, Indexer, split_meta_namespace_key
from kubecore.client.informer import EventHandlerFuncs
from kubecore.client.rest import RestClient
from kubecore.controllers.base import ControllerContext, QueueController, register
from kubecore.controllers.controller_utils import labels_of, meta
from kubecore.controllers.endpointslice_reconciler import MAX_ENDPOINTS_PER_SLICE, Reconciler
from kubecore.controllers.endpointslice_tracking import EndpointSliceTracker, TriggerTimeTracker
from kubecore.controllers.endpointslice_utils import (
    CONTROLLER_NAME, LABEL_MANAGED_BY, LABEL_SERVICE_NAME, service_selects, services_to_update,
)
from kubecore.controllers.podcontrol import EventRecorderLike

log = logging.getLogger(__name__)

Obj = dict[str, Any]
NAME = "endpointslice"
COMPONENT = "endpoint-slice-controller"


def _unwrap(obj: Obj | DeletedFinalStateUnknown) -> Obj:
    return obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj


class EndpointSliceController(QueueController):
    """Runs until cancelled: `await EndpointSliceController(rest=..., informers=...).run(5)`."""

    name = NAME
    description = "endpoint slice controller"

    def __init__(self, *, rest: RestClient, informers: SharedInformerFactory,
                 recorder: EventRecorderLike | None = None, max_endpoints_per_slice: int = MAX_ENDPOINTS_PER_SLICE,
                 endpoint_updates_batch_period: float = 0.0) -> None:
        super().__init__(rest=rest, informers=informers, recorder=recorder)
        self.max_endpoints_per_slice = max_endpoints_per_slice
        self.batch_period = endpoint_updates_batch_period
        self.tracker = EndpointSliceTracker()
        self.trigger_times = TriggerTimeTracker()
        self.reconciler: Reconciler
        self.svc_indexer: Indexer
        self.pod_indexer: Indexer
        self.node_indexer: Indexer
        self.slice_indexer: Indexer

    async def wire(self) -> None:
        slices = await self.rest.resource("discovery.k8s.io/v1", "endpointslices")
        self.reconciler = Reconciler(slices, self.tracker, max_per_slice=self.max_endpoints_per_slice)
        svc_inf = await self.informers.informer_for("v1", "services")
        pod_inf = await self.informers.informer_for("v1", "pods")
        node_inf = await self.informers.informer_for("v1", "nodes")
        slice_inf = await self.informers.informer_for("discovery.k8s.io/v1", "endpointslices")
        self.svc_indexer, self.pod_indexer = svc_inf.indexer, pod_inf.indexer
        self.node_indexer, self.slice_indexer = node_inf.indexer, slice_inf.indexer
        self.wiring.add(svc_inf, EventHandlerFuncs(
            on_add_func=lambda s, _i: self.enqueue(s), on_update_func=lambda _o, s: self.enqueue(s),
            on_delete_func=lambda s: self.enqueue(_unwrap(s))))
        self.wiring.add(pod_inf, EventHandlerFuncs(
            on_add_func=lambda p, _i: self._pod_changed(None, p), on_update_func=self._pod_changed,
            on_delete_func=lambda p: self._pod_changed(_unwrap(p), None)))
        self.wiring.add(node_inf)
        self.wiring.add(slice_inf, EventHandlerFuncs(
            on_add_func=lambda s, _i: self._slice_added(s), on_update_func=self._slice_updated,
            on_delete_func=self._slice_deleted))

    # -- event handlers -----------------------------------------------------------------------------
    def _pod_changed(self, old: Obj | None, new: Obj | None) -> None:
        pod = new if new is not None else old
        assert pod is not None
        services = self.svc_indexer.by_index(NAMESPACE_INDEX, str(meta(pod).get("namespace") or ""))
        for key in services_to_update(services, old, new):
            self.queue.add_after(key, self.batch_period)

    def _managed(self, s: Obj) -> bool:
        return labels_of(s).get(LABEL_MANAGED_BY) == CONTROLLER_NAME

    def _queue_service_of(self, s: Obj) -> None:
        svc = labels_of(s).get(LABEL_SERVICE_NAME)
        if svc:
            self.queue.add_after(f"{meta(s).get('namespace')}/{svc}", self.batch_period)

    def _slice_added(self, s: Obj) -> None:
        if self._managed(s) and self.tracker.should_sync(s):
            self._queue_service_of(s)

    def _slice_updated(self, old: Obj, cur: Obj) -> None:
        if labels_of(old).get(LABEL_SERVICE_NAME) != labels_of(cur).get(LABEL_SERVICE_NAME):
            self._queue_service_of(old)  # moved away from a Service: that one needs a look too
        if self._managed(old) != self._managed(cur) or (self._managed(cur) and self.tracker.should_sync(cur)):
            self._queue_service_of(cur)

    def _slice_deleted(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        s = _unwrap(obj)
        if self._managed(s) and self.tracker.has(s):
            if self.tracker.handle_deletion(s):
                self._queue_service_of(s)

    # -- sync ---------------------------------------------------------------------------------------
    def _node(self, name: str) -> Obj | None:
        return self.node_indexer.get_by_key(name) if name else None

    async def sync(self, key: str) -> None:
        namespace, name = split_meta_namespace_key(key)
        service = self.svc_indexer.get_by_key(key)
        if service is None:
            self.trigger_times.delete_service(namespace, name)
            self.tracker.delete_service(namespace, name)
            return
        spec = service.get("spec") or {}
        if spec.get("type") == "ExternalName" or spec.get("selector") is None:
            return
        pods = [p for p in self.pod_indexer.by_index(NAMESPACE_INDEX, namespace)
                if service_selects(service, labels_of(p))]
        slices = [s for s in self.slice_indexer.by_index(NAMESPACE_INDEX, namespace)
                  if labels_of(s).get(LABEL_SERVICE_NAME) == name and self._managed(s)
                  and not meta(s).get("deletionTimestamp")]
        if self.tracker.stale_slices(service, slices):
            raise RuntimeError("EndpointSlice informer cache is out of date")
        trigger_time = self.trigger_times.compute(namespace, service, pods)
        try:
            await self.reconciler.reconcile(service, pods, slices, node_lookup=self._node, trigger_time=trigger_time)
        except Exception as e:
            self.recorder.event({**service, "apiVersion": "v1", "kind": "Service"}, "Warning",
                                reason="FailedToUpdateEndpointSlices",
                                message=f"Error updating Endpoint Slices for Service {namespace}/{name}: {e}")
            raise


@register(NAME, workers=5, aliases=("endpointslice-controller",))
def new_endpointslice_controller(ctx: ControllerContext) -> EndpointSliceController:
    return EndpointSliceController(
        rest=ctx.rest, informers=ctx.informers, recorder=ctx.recorder(COMPONENT),
        max_endpoints_per_slice=int(ctx.options.get("max_endpoints_per_slice", MAX_ENDPOINTS_PER_SLICE)),
        endpoint_updates_batch_period=float(ctx.options.get("endpointslice_updates_batch_period", 0.0)))
