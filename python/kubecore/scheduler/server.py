"""The scheduler as a process: informers, the framework, binding through the API, leader
election and metrics (kube-scheduler's app/server.go and scheduler.go wiring).

    server = SchedulerServer(load_kubeconfig(path), options=SchedulerOptions(config=load_config(file)))
    code = await server.run()            # until cancelled, or leadership lost (1)

One leadership term is a `LiveScheduler`: a fresh informer factory (pods, nodes, PVCs, PVs,
StorageClasses, PodDisruptionBudgets, Namespaces; Services, ReplicationControllers, ReplicaSets and
StatefulSets for PodTopologySpread's default selector), a fresh `SchedulerCore` built from the configuration with
`Services` that read those informers and write through `ApiWrites`, the handlers of
`eventhandlers` (pods' affinity namespaceSelectors resolved by `namespaces`), then — once every informer has synced and `gc.freeze()` has moved the cached
objects out of the collector's way — the `Driver` loop until cancelled. Tests run a
`LiveScheduler` in-process against a real API server.

Leader election (default on) competes for the Lease kube-system/kube-scheduler as
`<hostname>_<uuid>`; only the holder schedules. Losing the lease ends the term; `run()` then
returns 1 (`exit_on_lost_lease`, as upstream) or competes again. Metrics are served in every
state (standbys too) on `metrics_port` (0: none).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.client.codec import CompactCodec
from kubecore.client.config import ClientConfig
from kubecore.client.events_v1 import EventBroadcaster
from kubecore.client.factory import SharedInformerFactory
from kubecore.client.indexer import NAMESPACE_INDEX, strip_managed_fields
from kubecore.client.informer import SharedIndexInformer
from kubecore.client.leaderelection import (DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD,
                                            compete_and_lead)
from kubecore.client.rest import RestClient
from kubecore.client.sinks import EventsV1Sink, RestApiSink
from kubecore.controllers.manager import default_identity
from kubecore.heap import settle_heap
from kubecore.scheduler import defaultspread
from kubecore.scheduler import events as ev
from kubecore.scheduler.apiwrites import ApiWrites, TaskSet
from kubecore.scheduler.binding import Bound
from kubecore.scheduler.config import SchedulerConfig, default_config
from kubecore.scheduler.driver import Driver
from kubecore.scheduler.eventhandlers import PodHandlers, node_handler, storage_handler
from kubecore.scheduler.handle import Services
from kubecore.scheduler.metrics import DEFAULT_METRICS_PORT, MetricsServer, SchedulerMetrics
from kubecore.scheduler.namespaces import NamespaceResolver
from kubecore.scheduler.plugins.coscheduling import POD_GROUP_LABEL
from kubecore.scheduler.podinfo import Obj
from kubecore.scheduler.registry import SchedulerCore, build_scheduler
from kubecore.scheduler.schedule_one import Failed

__all__ = ["SchedulerOptions", "SchedulerServer", "LiveScheduler", "LEASE_NAME", "COMPONENT"]

log = logging.getLogger(__name__)

LEASE_NAMESPACE = "kube-system"
LEASE_NAME = "kube-scheduler"
COMPONENT = "default-scheduler"
"""The events' source component, as upstream's (the default profile's name)."""
SYNC_TIMEOUT = 60.0
CONTROLLER_RESOURCES = {("v1", "ReplicationController"): "replicationcontrollers",
                        ("apps/v1", "ReplicaSet"): "replicasets", ("apps/v1", "StatefulSet"): "statefulsets"}
"""The controllers whose selectors join a pod's default spread selector, and their informers."""


POD_GROUP_INDEX = "scheduling.x-k8s.io/pod-group"
"""Pods by `<namespace>/<pod group label>` (Coscheduling's sibling lookups)."""


def pod_group_index(pod: Obj) -> list[str]:
    meta = pod.get("metadata") or {}
    group = (meta.get("labels") or {}).get(POD_GROUP_LABEL)
    return [f"{meta.get('namespace') or ''}/{group}"] if group else []


def _nothing_pending() -> Mapping[str, int]:
    return {}


POD_LRU_SIZE = 8192
"""Decoded pods the scheduler's pod informer keeps (the client's default is 1,024)."""


@dataclass
class SchedulerOptions:
    config: SchedulerConfig = field(default_factory=default_config)
    leader_elect: bool = True
    lease_duration: float = DEFAULT_LEASE_DURATION
    renew_deadline: float = DEFAULT_RENEW_DEADLINE
    retry_period: float = DEFAULT_RETRY_PERIOD
    lease_namespace: str = LEASE_NAMESPACE
    lease_name: str = LEASE_NAME
    identity: str = ""
    release_on_cancel: bool = True
    exit_on_lost_lease: bool = True
    metrics_port: int = DEFAULT_METRICS_PORT
    """0: no metrics endpoint."""
    freeze_gc: bool = True
    pop_from_backoff: bool = False
    """Upstream's SchedulerPopFromBackoffQ feature gate (`--feature-gates`); see queue.py."""


class LiveScheduler:
    """One scheduler wired to the API through `rest` (see the module docstring)."""

    def __init__(self, rest: RestClient, *, config: SchedulerConfig, clock: Clock = REAL_CLOCK,
                 freeze_gc: bool = True, metrics: SchedulerMetrics | None = None,
                 pop_from_backoff: bool = False) -> None:
        self.rest = rest
        self.config = config
        self.pop_from_backoff = pop_from_backoff
        self.clock = clock
        self.freeze_gc = freeze_gc
        self.metrics = metrics
        self.factory = SharedInformerFactory(rest, clock=clock)
        # upstream's createClients: events go through a client of their own (same config, its own
        # rate limiter and connections), so a burst of events never delays a binding
        self.events_rest = RestClient(rest.config, clock=clock)
        self.broadcaster = EventBroadcaster(EventsV1Sink(self.events_rest), clock=clock)
        self.tasks = TaskSet()
        self.core: SchedulerCore | None = None
        self.driver: Driver | None = None
        self.synced = asyncio.Event()
        """Set once the informers synced and scheduling began (tests wait on it)."""
        self._informers: dict[str, SharedIndexInformer] = {}

    async def _informer(self, api_version: str, resource: str) -> SharedIndexInformer:
        informer = await self.factory.informer_for(api_version, resource)
        if resource == "pods":
            # kube-scheduler's pod informer drops managedFields (a third of a pod, never read).
            informer.set_transform(strip_managed_fields)
            # The scheduler's cache holds every assigned pod decoded anyway: deflating the
            # informer's copy would save little memory for ~5 µs per pod event.
            if not len(informer.indexer):
                informer.indexer.codec = CompactCodec(compress=False)
            # A pod's bind event follows its add by up to a few seconds of scheduling at thousands of
            # pods/s: keep that many decoded, so the update's old object costs no second decode.
            informer.indexer.lru_size = max(informer.indexer.lru_size, POD_LRU_SIZE)
        self._informers[resource] = informer
        return informer

    def _services(self, writes: ApiWrites) -> Services:
        inf = self._informers

        def get_pvc(namespace: str, name: str) -> Obj | None:
            return inf["persistentvolumeclaims"].indexer.get_by_key(f"{namespace}/{name}")

        def get_pv(name: str) -> Obj | None:
            return inf["persistentvolumes"].indexer.get_by_key(name)

        def list_pdbs() -> list[Obj]:
            return inf["poddisruptionbudgets"].indexer.list()

        def list_pods(namespace: str) -> list[Obj]:
            return inf["pods"].indexer.by_index(NAMESPACE_INDEX, namespace)

        group_index: list[bool] = []

        def list_pod_group(namespace: str, group: str) -> list[Obj]:
            indexer = inf["pods"].indexer
            if not group_index:  # on first use: an object-based index makes every pod update decode
                indexer.add_indexers({POD_GROUP_INDEX: pod_group_index})
                group_index.append(True)
            return indexer.by_index(POD_GROUP_INDEX, f"{namespace}/{group}")

        def default_selector(pod: Obj) -> Obj | None:
            namespace = (pod.get("metadata") or {}).get("namespace") or ""
            ref = defaultspread.controller_ref(pod)
            kind = (str(ref.get("apiVersion") or ""), str(ref.get("kind") or "")) if ref else ("", "")
            resource = CONTROLLER_RESOURCES.get(kind)
            owner = inf[resource].indexer.get_by_key(f"{namespace}/{ref['name']}") if ref and resource else None
            services = inf["services"].indexer.by_index(NAMESPACE_INDEX, namespace)
            return defaultspread.default_selector(pod, services=services, controller=owner, controller_kind=kind)

        def activate(pods: list[Obj]) -> None:
            if self.core is not None:
                self.core.queue.activate(pods)

        return Services(bind=writes.bind, evict=writes.evict, evict_victims=writes.evict_victims, activate=activate,
                        clear_nominated_node=writes.clear_nominated_node,
                        get_pvc=get_pvc, get_pv=get_pv, list_pdbs=list_pdbs, list_pods=list_pods,
                        list_pod_group=list_pod_group, default_selector=default_selector)

    async def build(self) -> SchedulerCore:
        """The informers and the core, handlers attached, nothing started yet."""
        pods = await self._informer("v1", "pods")
        nodes = await self._informer("v1", "nodes")
        storage = {ev.PERSISTENT_VOLUME_CLAIM: await self._informer("v1", "persistentvolumeclaims"),
                   ev.PERSISTENT_VOLUME: await self._informer("v1", "persistentvolumes"),
                   ev.STORAGE_CLASS: await self._informer("storage.k8s.io/v1", "storageclasses")}
        await self._informer("policy/v1", "poddisruptionbudgets")
        await self._informer("v1", "services")  # these and the controllers: PodTopologySpread's default selector
        for (api_version, _), resource in CONTROLLER_RESOURCES.items():
            await self._informer(api_version, resource)
        namespaces = await self._informer("v1", "namespaces")
        host = socket.gethostname()  # upstream: one recorder per profile, reportingController = its schedulerName
        recorders = {p.scheduler_name: self.broadcaster.new_recorder(p.scheduler_name,
                                                                     reporting_instance=f"{p.scheduler_name}-{host}")
                     for p in self.config.profiles}
        writes = ApiWrites(self.rest, recorders, tasks=self.tasks, clock=self.clock, lookup=pods.indexer.get_by_key)
        core = build_scheduler(self.config, services=self._services(writes), clock=self.clock,
                               pop_from_backoff=self.pop_from_backoff)
        nodes.add_event_handler(node_handler(core))
        resolver = NamespaceResolver(namespaces.indexer.list)
        handlers = PodHandlers(core, namespaces=resolver, json_of=pods.indexer.json_of)
        pods.add_event_handler(handlers.handler())
        namespaces.add_event_handler(handlers.namespace_handler())
        for resource, informer in storage.items():
            informer.add_event_handler(storage_handler(core, resource))
        self.core = core
        self.driver = Driver(core, concurrent_binds=True, on_bound=self._on_bound(writes),
                             on_failed=self._on_failed(writes, core, lookup=pods.indexer.get_by_key),
                             on_skipped=writes.skipped)
        return core

    def _on_bound(self, writes: ApiWrites) -> Callable[[Bound], None]:
        metrics = self.metrics

        def on_bound(b: Bound) -> None:
            writes.scheduled(b)
            if metrics is not None:
                metrics.bound(b)

        return on_bound

    def _on_failed(self, writes: ApiWrites, core: SchedulerCore, *,
                   lookup: Callable[[str], Obj | None]) -> Callable[[Failed], None]:
        metrics = self.metrics

        def on_failed(f: Failed) -> None:
            log.info("unable to schedule pod %s: %s", f.pinfo.key, f.message)
            writes.failed(f)
            latest = lookup(f.pinfo.key)
            if latest is None or (latest.get("spec") or {}).get("nodeName"):
                # deleted or bound while in flight: the driver gave it back to the queue, take it out
                core.queue.delete(f.pinfo.pod)
            if metrics is not None:
                fw = core.framework_for(f.pinfo.pod)
                metrics.failed(f, fw.name if fw is not None else "")

        return on_failed

    async def run(self) -> None:
        """Build, start the informers, wait for them, then schedule until cancelled."""
        core = self.core or await self.build()
        assert self.driver is not None
        if self.metrics is not None:
            self.metrics.pending = core.queue.counts
        try:
            self.factory.start()
            synced = await self.factory.wait_for_cache_sync(SYNC_TIMEOUT)
            missing = [name for name, ok in synced.items() if not ok]
            if missing:
                raise RuntimeError(f"informers did not sync within {SYNC_TIMEOUT:g} s: {', '.join(missing)}")
            if self.freeze_gc:
                settle_heap()
            log.info("scheduler: caches synced (%d nodes); scheduling", core.cache.num_nodes)
            self.synced.set()
            self.broadcaster.start()
            await self.driver.run()
        finally:
            core.queue.close()
            self.tasks.cancel()
            await self.factory.shutdown()
            await self.broadcaster.shutdown(drain=False)
            await self.events_rest.close()
            if self.freeze_gc:
                gc.unfreeze()


class SchedulerServer:
    """Leader election around `LiveScheduler` terms, plus the metrics endpoint."""

    def __init__(self, config: ClientConfig, *, options: SchedulerOptions | None = None,
                 clock: Clock = REAL_CLOCK) -> None:
        self.client_config = config
        self.options = options or SchedulerOptions()
        self.clock = clock
        self.identity = self.options.identity or default_identity()
        self.metrics = SchedulerMetrics(pending=_nothing_pending, clock=clock)
        self.metrics_server: MetricsServer | None = None
        self.leading = asyncio.Event()

    async def run(self) -> int:
        """Run until cancelled, or until leadership is lost (returns 1 then, unless told to compete again)."""
        o = self.options
        if o.metrics_port:
            self.metrics_server = MetricsServer(self.metrics.render)
            port = await self.metrics_server.start(o.metrics_port)
            log.info("scheduler: metrics on http://127.0.0.1:%d/metrics", port)
        try:
            async with RestClient(self.client_config, clock=self.clock) as rest:
                if not o.leader_elect:
                    await self._lead(rest)
                    return 0
                return await compete_and_lead(RestApiSink(rest), o, component="scheduler", identity=self.identity,
                                              lead=lambda: self._lead(rest), clock=self.clock)
        finally:
            if self.metrics_server is not None:
                await self.metrics_server.stop()

    async def _lead(self, rest: RestClient) -> None:
        log.info("scheduler %s: leading; profiles %s", self.identity,
                 ", ".join(p.scheduler_name for p in self.options.config.profiles))
        live = LiveScheduler(rest, config=self.options.config, clock=self.clock, freeze_gc=self.options.freeze_gc,
                             metrics=self.metrics, pop_from_backoff=self.options.pop_from_backoff)
        self.leading.set()
        try:
            await live.run()
        finally:
            self.leading.clear()
            self.metrics.pending = _nothing_pending
