"""The Endpoints controller: the legacy core/v1 Endpoints object of every Service with a selector
(upstream pkg/controller/endpoint/endpoints_controller.go).

Level-driven; the queue holds Service keys (an Endpoints object has its Service's name):
- a Service added, updated or deleted, and an Endpoints object deleted, enqueue that key;
- a pod event enqueues the Services whose endpoints it may change (`services_to_update`);
- at start every existing Endpoints object is enqueued once, so leftovers of deleted Services are
  removed (leader-election records, annotated control-plane.alpha.kubernetes.io/leader, are not).

A sync:
1. Service gone -> DELETE the Endpoints of that name (NotFound is fine). ExternalName, or no
   selector -> nothing (selector-less Services have user-managed Endpoints).
2. Pods matching the selector that should be listed (not terminal, with an IP; terminating ones
   only with publishNotReadyAddresses) become one address each (IP of the Service's family,
   nodeName, targetRef, hostname when the pod's subdomain is the Service), per Service port whose
   targetPort resolves in the pod (named ports looked up in the pod's containers); ready pods (or
   all, with publishNotReadyAddresses) go to `addresses`, others to `notReadyAddresses`. A headless
   Service without ports lists addresses with no ports. Subsets are then repacked.
3. Nothing to write when the cached Endpoints already has equal subsets (ignoring targetRef
   resourceVersions), the Service's labels and a correct over-capacity annotation. Otherwise the
   object is created or updated with: the subsets truncated to 1000 addresses
   (endpoints.kubernetes.io/over-capacity: truncated when cut), the Service's labels plus
   service.kubernetes.io/headless for headless Services, and endpoints.kubernetes.io/
   last-change-trigger-time (removed when there is no new trigger).
A write that fails records FailedToCreateEndpoint / FailedToUpdateEndpoint and is retried; a
create refused because the namespace is terminating is dropped. After an update the old
resourceVersion is remembered: a sync that still finds it in the cache fails and is retried, so a
stale cache never causes a write based on old data.
"""

from __future__ import annotations

import logging
from typing import Any

from kubecore.client.errors import NotFound
from kubecore.client.factory import SharedInformerFactory
from kubecore.client.indexer import NAMESPACE_INDEX, DeletedFinalStateUnknown, Indexer, split_meta_namespace_key
from kubecore.client.informer import EventHandlerFuncs
from kubecore.client.resource import ResourceClient
from kubecore.client.rest import RestClient
from kubecore.controllers.base import ControllerContext, QueueController, register
from kubecore.controllers.controller_utils import (
    NAMESPACE_TERMINATING_CAUSE, format_time, has_status_cause, is_pod_ready, labels_of, meta,
)
from kubecore.controllers.endpoints_subsets import (
    ANNOTATION_OVER_CAPACITY, TRUNCATED, capacity_annotation_correct, repack_subsets, subsets_equal_ignoring_rv,
    truncate_subsets,
)
from kubecore.controllers.endpointslice_tracking import TriggerTimeTracker
from kubecore.controllers.endpointslice_utils import (
    ANNOTATION_TRIGGER_TIME, CLUSTER_IP_NONE, IPV6, LABEL_HEADLESS, find_port, is_ipv6, is_service_ip_set, pod_ips,
    service_selects, services_to_update, should_pod_be_in_endpoints, should_set_hostname,
)
from kubecore.controllers.podcontrol import EventRecorderLike

log = logging.getLogger(__name__)

Obj = dict[str, Any]
NAME = "endpoint"
COMPONENT = "endpoint-controller"
LEADER_ANNOTATION = "control-plane.alpha.kubernetes.io/leader"


def _unwrap(obj: Obj | DeletedFinalStateUnknown) -> Obj:
    return obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj


def _service_wants_ipv6(service: Obj, pod: Obj) -> bool:
    spec = service.get("spec") or {}
    families = spec.get("ipFamilies") or []
    if families:
        return bool(families[0] == IPV6)
    if is_service_ip_set(service):
        return is_ipv6(str(spec["clusterIP"]))
    ips = pod_ips(pod)
    return bool(ips) and is_ipv6(ips[0])


def pod_address(service: Obj, pod: Obj) -> Obj | None:
    """The EndpointAddress of `pod` for `service` (None: no IP of the Service's family)."""
    want_v6 = _service_wants_ipv6(service, pod)
    ip = next((i for i in pod_ips(pod) if is_ipv6(i) == want_v6), None)
    if ip is None:
        return None
    m = meta(pod)
    addr: Obj = {"ip": ip}
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        addr["nodeName"] = node
    addr["targetRef"] = {"kind": "Pod", "namespace": m.get("namespace", ""), "name": m.get("name", ""),
                         "uid": m.get("uid", "")}
    if should_set_hostname(pod, service):
        addr["hostname"] = (pod.get("spec") or {})["hostname"]
    return addr


def _endpoint_port(service_port: Obj, number: int) -> Obj:
    port: Obj = {"port": number, "protocol": service_port.get("protocol") or "TCP"}
    if service_port.get("name"):
        port["name"] = service_port["name"]
    if service_port.get("appProtocol") is not None:
        port["appProtocol"] = service_port["appProtocol"]
    return port


def build_subsets(service: Obj, pods: list[Obj]) -> list[Obj]:
    """The repacked subsets for `service` from the pods its selector matches."""
    spec = service.get("spec") or {}
    publish = bool(spec.get("publishNotReadyAddresses"))
    subsets: list[Obj] = []
    for pod in pods:
        if not should_pod_be_in_endpoints(pod, include_terminating=publish):
            continue
        addr = pod_address(service, pod)
        if addr is None:
            continue
        field = "addresses" if publish or is_pod_ready(pod) else "notReadyAddresses"
        service_ports = spec.get("ports") or []
        if not service_ports:
            if spec.get("clusterIP") == CLUSTER_IP_NONE:
                subsets.append({field: [addr], "ports": []})
            continue
        for sp in service_ports:
            number = find_port(pod, sp)
            if number is not None:
                subsets.append({field: [addr], "ports": [_endpoint_port(sp, number)]})
    return repack_subsets(subsets)


def desired_endpoints(service: Obj, current: Obj | None, subsets: list[Obj], *, trigger_time: float | None) -> Obj:
    """The Endpoints object to write (a copy of `current`, or a new one)."""
    m = meta(service)
    new: Obj = dict(current) if current is not None else {
        "apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": m.get("name"), "namespace": m.get("namespace")}}
    new_meta = dict(meta(new))
    annotations = dict(new_meta.get("annotations") or {})
    if trigger_time is not None:
        annotations[ANNOTATION_TRIGGER_TIME] = format_time(trigger_time)
    else:
        annotations.pop(ANNOTATION_TRIGGER_TIME, None)
    subsets, truncated = truncate_subsets(subsets)
    if truncated:
        annotations[ANNOTATION_OVER_CAPACITY] = TRUNCATED
    else:
        annotations.pop(ANNOTATION_OVER_CAPACITY, None)
    labels = dict(labels_of(service))
    if not is_service_ip_set(service):
        labels[LABEL_HEADLESS] = ""
    else:
        labels.pop(LABEL_HEADLESS, None)
    new_meta["annotations"], new_meta["labels"] = annotations, labels
    new["metadata"], new["subsets"] = new_meta, subsets
    return new


def up_to_date(current: Obj, service: Obj, subsets: list[Obj]) -> bool:
    labels = {k: v for k, v in labels_of(current).items() if k != LABEL_HEADLESS}
    return (subsets_equal_ignoring_rv(current.get("subsets"), subsets) and labels == labels_of(service)
            and capacity_annotation_correct(meta(current).get("annotations") or {}, current.get("subsets") or []))


class EndpointsController(QueueController):
    """Runs until cancelled: `await EndpointsController(rest=..., informers=...).run(5)`."""

    name = NAME
    description = "endpoint controller"

    def __init__(self, *, rest: RestClient, informers: SharedInformerFactory,
                 recorder: EventRecorderLike | None = None, endpoint_updates_batch_period: float = 0.0) -> None:
        super().__init__(rest=rest, informers=informers, recorder=recorder)
        self.batch_period = endpoint_updates_batch_period
        self.trigger_times = TriggerTimeTracker()
        self._stale_rv: dict[str, str] = {}
        self.endpoints: ResourceClient
        self.svc_indexer: Indexer
        self.pod_indexer: Indexer
        self.ep_indexer: Indexer

    async def wire(self) -> None:
        self.endpoints = await self.rest.resource("v1", "endpoints")
        svc_inf = await self.informers.informer_for("v1", "services")
        pod_inf = await self.informers.informer_for("v1", "pods")
        ep_inf = await self.informers.informer_for("v1", "endpoints")
        self.svc_indexer, self.pod_indexer, self.ep_indexer = svc_inf.indexer, pod_inf.indexer, ep_inf.indexer
        self.wiring.add(svc_inf, EventHandlerFuncs(
            on_add_func=lambda s, _i: self.enqueue(s), on_update_func=lambda _o, s: self.enqueue(s),
            on_delete_func=lambda s: self.enqueue(_unwrap(s))))
        self.wiring.add(pod_inf, EventHandlerFuncs(
            on_add_func=lambda p, _i: self._pod_changed(None, p), on_update_func=self._pod_changed,
            on_delete_func=lambda p: self._pod_changed(_unwrap(p), None)))
        self.wiring.add(ep_inf, EventHandlerFuncs(on_delete_func=lambda e: self.enqueue(_unwrap(e))))

    async def work(self, workers: int) -> None:
        self.check_leftover_endpoints()
        await super().work(workers)

    def check_leftover_endpoints(self) -> None:
        for ep in self.ep_indexer.list():
            if LEADER_ANNOTATION not in (meta(ep).get("annotations") or {}):
                self.enqueue(ep)

    def _pod_changed(self, old: Obj | None, new: Obj | None) -> None:
        pod = new if new is not None else old
        assert pod is not None
        services = self.svc_indexer.by_index(NAMESPACE_INDEX, str(meta(pod).get("namespace") or ""))
        for key in services_to_update(services, old, new):
            self.queue.add_after(key, self.batch_period)

    async def sync(self, key: str) -> None:
        namespace, name = split_meta_namespace_key(key)
        service = self.svc_indexer.get_by_key(key)
        if service is None:
            try:
                await self.endpoints.delete(name, namespace=namespace)
            except NotFound:
                pass
            self.trigger_times.delete_service(namespace, name)
            self._stale_rv.pop(key, None)
            return
        spec = service.get("spec") or {}
        if spec.get("type") == "ExternalName" or spec.get("selector") is None:
            return
        pods = [p for p in self.pod_indexer.by_index(NAMESPACE_INDEX, namespace)
                if service_selects(service, labels_of(p))]
        trigger_time = self.trigger_times.compute(namespace, service, pods)
        subsets = build_subsets(service, pods)
        current = self.ep_indexer.get_by_key(key)
        if current is not None and self._stale_rv.get(key) == meta(current).get("resourceVersion"):
            raise RuntimeError(f"endpoints informer cache is out of date, resource version "
                               f"{meta(current).get('resourceVersion')} already processed for endpoints {key}")
        if current is not None and up_to_date(current, service, subsets):
            return
        new = desired_endpoints(service, current, subsets, trigger_time=trigger_time)
        await self._write(new, current, namespace=namespace, key=key)

    async def _write(self, new: Obj, current: Obj | None, *, namespace: str, key: str) -> None:
        event_obj = {**new, "apiVersion": "v1", "kind": "Endpoints"}
        if current is None:
            try:
                await self.endpoints.create(new, namespace=namespace)
            except Exception as e:
                if has_status_cause(e, NAMESPACE_TERMINATING_CAUSE):
                    return
                self.recorder.event(event_obj, "Warning", reason="FailedToCreateEndpoint",
                                    message=f"Failed to create endpoint for service {key}: {e}")
                raise
            return
        try:
            updated = await self.endpoints.update(new, namespace=namespace)
        except Exception as e:
            self.recorder.event(event_obj, "Warning", reason="FailedToUpdateEndpoint",
                                message=f"Failed to update endpoint {key}: {e}")
            raise
        old_rv = str(meta(current).get("resourceVersion") or "")
        if meta(updated).get("resourceVersion") != old_rv:
            self._stale_rv[key] = old_rv


@register(NAME, workers=5, aliases=("endpoint-controller", "endpoints"))
def new_endpoints_controller(ctx: ControllerContext) -> EndpointsController:
    batch_period = float(ctx.options.get("endpoint_updates_batch_period", 0.0))
    return EndpointsController(rest=ctx.rest, informers=ctx.informers, recorder=ctx.recorder(COMPONENT),
                               endpoint_updates_batch_period=batch_period)
