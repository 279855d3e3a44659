"""What the kubelets of one process share: one REST client (one connection pool and rate
limiter), one pod watch and one node watch dispatched by node name, one timer heap, one status
writer, one event broadcaster.

    host = KubeletHost(rest, clock=clock)
    host.add(Kubelet(config, runtime=..., handlers=..., host=host, node_ip=...))   # one or thousands
    await host.start()          # prepare, register, watch, run
    ...
    await host.stop()

A process with one kubelet watches its pods with `fieldSelector=spec.nodeName=<node>` and its node
with `metadata.name=<node>`, as upstream's kubelet does. A hollow-node process with many watches
every bound pod (`spec.nodeName!=`) and every node once, and hands each event to the kubelet of
that node (others' pods and nodes are ignored): a thousand nodes cost two watches, not two
thousand.

Start order (`start`): timers and the status writer; every kubelet's `prepare` (first relist of
its runtime: what still runs is known before any pod arrives); the node watch; registration of
every node (`register_concurrency` at a time, reporting progress); then the pod watch, whose
initial list dispatches every pod already bound; then each kubelet's periodic work, staggered
evenly over the period so a thousand nodes do not renew their Leases in the same instant.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.client.events import EventBroadcaster, EventRecorder
from kubecore.client.indexer import DeletedFinalStateUnknown, Indexer
from kubecore.client.informer import EventHandlerFuncs, SharedIndexInformer
from kubecore.client.resource import Selectors
from kubecore.client.rest import RestClient
from kubecore.client.sinks import RestApiSink
from kubecore.kubelet import podutil
from kubecore.kubelet.config import MachineInfo
from kubecore.kubelet.kubelet import Kubelet
from kubecore.kubelet.status_manager import StatusWriter
from kubecore.kubelet.timers import Spawner, Timers

log = logging.getLogger(__name__)
Obj = dict[str, Any]
Progress = Callable[[str], None]
DECODED_CACHE = 128
"""Decoded objects each watch cache keeps (the rest stay compact bytes, decoded when a sync reads
them): a decoded pod is ~15-25 KB of dicts, and thirty thousand of them would not fit."""


class KubeletHost:
    """Shared machinery for the kubelets of one process (see the module docstring)."""

    def __init__(self, rest: RestClient, *, clock: Clock = REAL_CLOCK, status_workers: int = 4,
                 record_events: bool = True, machine: MachineInfo | None = None) -> None:
        self.rest = rest
        self.clock = clock
        self.timers = Timers(clock)
        self.spawner = Spawner(name="kubelet")
        self.status_writer = StatusWriter(rest, timers=self.timers, workers=status_workers)
        self.lease_sink = RestApiSink(rest)
        self.broadcaster = EventBroadcaster(RestApiSink(rest), clock=clock) if record_events else None
        self.recorder: Callable[[str], EventRecorder] | None = self._recorder if record_events else None
        self._recorders: dict[str, EventRecorder] = {}
        self.machine = machine or MachineInfo.read()
        self.kubelets: dict[str, Kubelet] = {}
        self._pods: SharedIndexInformer | None = None
        self._nodes: SharedIndexInformer | None = None
        self.started = False

    def _recorder(self, node_name: str) -> EventRecorder:
        rec = self._recorders.get(node_name)
        if rec is None:
            assert self.broadcaster is not None
            rec = self._recorders[node_name] = self.broadcaster.new_recorder("kubelet", host=node_name)
        return rec

    def add(self, kubelet: Kubelet) -> None:
        if self.started:
            raise RuntimeError("kubelets are added before the host starts")
        if kubelet.name in self.kubelets:
            raise ValueError(f"a kubelet for node {kubelet.name!r} is already here")
        self.kubelets[kubelet.name] = kubelet

    # -- lookups ---------------------------------------------------------------------------------
    def node(self, name: str) -> Obj | None:
        return self._nodes.indexer.get_by_key(name) if self._nodes is not None else None

    def pod(self, key: str) -> Obj | None:
        return self._pods.indexer.get_by_key(key) if self._pods is not None else None

    def pods_synced(self) -> bool:
        return self._pods is not None and self._pods.has_synced()

    # -- dispatch --------------------------------------------------------------------------------
    def _kubelet_of(self, pod: Obj) -> Kubelet | None:
        return self.kubelets.get(str(podutil.spec(pod).get("nodeName") or ""))

    def _on_pod(self, pod: Obj) -> None:
        kubelet = self._kubelet_of(pod)
        if kubelet is not None:
            kubelet.pod_upserted(pod)

    def _on_pod_update(self, old: Obj, new: Obj) -> None:
        if podutil.uid_of(old) != podutil.uid_of(new):  # deleted and created again between two lists
            self._on_pod_delete(old)
        self._on_pod(new)

    def _on_pod_delete(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        pod = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        if isinstance(pod, dict):
            kubelet = self._kubelet_of(pod)
            if kubelet is not None:
                kubelet.pod_removed(pod)

    # -- lifecycle ---------------------------------------------------------------------------------
    async def _informer(self, resource: str, field_selector: str | None) -> SharedIndexInformer:
        rc = await self.rest.resource("v1", resource)
        return SharedIndexInformer(rc, selectors=Selectors(field_selector=field_selector), clock=self.clock,
                                   indexer=Indexer(lru_size=DECODED_CACHE), name=f"kubelet-{resource}")

    async def start(self, *, register_concurrency: int = 32, progress: Progress | None = None,
                    sync_timeout: float = 60.0) -> None:
        if not self.kubelets:
            raise ValueError("no kubelet to run")
        say = progress or (lambda _m: None)
        self.started = True
        self.timers.start()
        self.status_writer.start()
        for kubelet in self.kubelets.values():
            await kubelet.prepare()
        single = next(iter(self.kubelets)) if len(self.kubelets) == 1 else None
        self._nodes = await self._informer("nodes", f"metadata.name={single}" if single else None)
        self._nodes.start()
        await self._register_all(register_concurrency, say)
        self._pods = await self._informer("pods", f"spec.nodeName={single}" if single else "spec.nodeName!=")
        self._pods.add_event_handler(EventHandlerFuncs(on_add_func=lambda p, _i: self._on_pod(p),
                                                       on_update_func=self._on_pod_update,
                                                       on_delete_func=self._on_pod_delete))
        self._pods.start()
        if not await self._pods.wait_for_sync(sync_timeout):
            raise TimeoutError(f"the pod watch did not sync within {sync_timeout:.0f}s")
        n = len(self.kubelets)
        for i, kubelet in enumerate(self.kubelets.values()):
            kubelet.start(phase=i / n)
        say(f"{n} node(s) running")

    async def _register_all(self, concurrency: int, say: Progress) -> None:
        sem = asyncio.Semaphore(max(1, concurrency))
        done = 0
        total = len(self.kubelets)
        step = max(1, total // 10)

        async def one(kubelet: Kubelet) -> None:
            nonlocal done
            async with sem:
                await kubelet.register()
            done += 1
            if done % step == 0 or done == total:
                say(f"registered {done}/{total} node(s)")

        await asyncio.gather(*(one(k) for k in self.kubelets.values()))

    async def stop(self) -> None:
        """Stop watching and writing; containers are left to the runtime (a restart re-adopts them)."""
        for kubelet in self.kubelets.values():
            await kubelet.stop()
        for informer in (self._pods, self._nodes):
            if informer is not None:
                await informer.stop()
        await self.spawner.stop()
        await self.status_writer.stop()
        await self.timers.stop()
        if self.broadcaster is not None:
            await self.broadcaster.shutdown(drain=False)

    def counts(self) -> dict[str, int]:
        totals: dict[str, int] = {"nodes": len(self.kubelets), "jobs": len(self.spawner), "timers": len(self.timers),
                                  "status_backlog": self.status_writer.backlog}
        for kubelet in self.kubelets.values():
            for k, v in kubelet.counts().items():
                totals[k] = totals.get(k, 0) + v
        return totals
