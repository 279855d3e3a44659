"""The pod lifecycle event generator (upstream pkg/kubelet/pleg: generic relisting + evented).

The PLEG keeps the `PodCache` equal to the runtime and tells the kubelet which pods changed, so
their workers sync them. Two sources feed it:

- Relisting (GenericPLEG): every `relist_period` (1 s upstream) list all sandboxes and containers
  (CRI ListPodSandbox + ListContainers, two calls for the whole node), group them by the pod uid
  label, and compare each pod's (id, state) pairs with the cache. A pod that differs, appeared
  or vanished is read again (`RuntimeManager.get_pod_status`), stored, and reported.
- Runtime events (EventedPLEG): when the runtime has GetContainerEvents, each event marks its pod
  dirty; dirty pods are read again together once the burst of events has been taken in (one
  read per pod however many of its containers changed) and reported if their state differs from
  the cache. With events, relisting stays as the safety net at a lower frequency (upstream's
  evented PLEG relists every 300 s; the kubelet chooses).

A pod is reported only when the cache changed, so the kubelet's own reads (a sync stores what it
just did) do not come back as events. `healthy()` is upstream's PLEG health check: a relist
finished within the last 3 minutes (else the node is not Ready: "PLEG is not healthy").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kubecore.client.clock import Clock
from kubecore.kubelet import cri
from kubecore.kubelet.runtime_manager import RuntimeManager
from kubecore.kubelet.runtime_status import PodCache, PodRuntimeStatus
from kubecore.kubelet.timers import Periodic, Spawner, Timers

log = logging.getLogger(__name__)

RELIST_PERIOD = 1.0
EVENTED_RELIST_PERIOD = 300.0
RELIST_THRESHOLD = 180.0
Signature = tuple[tuple[str, int], ...]


class Pleg:
    """One node's PLEG (see the module docstring). `on_pod_changed(uid)` is called for each pod
    whose runtime state changed."""

    def __init__(self, runtime: cri.RuntimeService, manager: RuntimeManager, cache: PodCache, *, clock: Clock,
                 timers: Timers, spawner: Spawner, on_pod_changed: Callable[[str], None],
                 relist_period: float = RELIST_PERIOD) -> None:
        self.runtime = runtime
        self.manager = manager
        self.cache = cache
        self.clock = clock
        self.timers = timers
        self.spawner = spawner
        self.on_pod_changed = on_pod_changed
        self.relist_period = relist_period
        self.last_relist: float | None = None
        self.relists = 0
        self.events = 0
        self._relisting = False
        self._periodic: Periodic | None = None
        self._dirty: set[str] = set()
        self._flush_scheduled = False
        self._events_task: asyncio.Task[None] | None = None
        self.evented = False

    def start(self, *, with_events: bool = True) -> None:
        """Relist every `relist_period` and, when asked and the runtime has them, follow its events."""
        self._periodic = self.timers.every(self.relist_period, self._relist_soon)
        if with_events:
            self._events_task = self.spawner.spawn(self._follow_events(), name="pleg-events")

    async def stop(self) -> None:
        if self._periodic is not None:
            self._periodic.cancel()
        if self._events_task is not None:
            self._events_task.cancel()
            await asyncio.gather(self._events_task, return_exceptions=True)

    def healthy(self) -> tuple[bool, str]:
        if self.last_relist is None:
            return False, "PLEG has not relisted yet"
        elapsed = self.clock.now() - self.last_relist
        if elapsed > RELIST_THRESHOLD:
            return False, (f"PLEG is not healthy: pleg was last seen active {elapsed:.0f}s ago; "
                           f"threshold is {RELIST_THRESHOLD:.0f}s")
        return True, ""

    # -- relisting ---------------------------------------------------------------------------------
    def _relist_soon(self) -> None:
        if not self._relisting:
            self.spawner.spawn(self.relist(), name="pleg-relist")

    async def relist(self) -> list[str]:
        """One relist; returns the uids reported as changed."""
        if self._relisting:
            return []
        self._relisting = True
        try:
            seen = await self._list()
            changed = [uid for uid, sig in seen.items() if self._differs(uid, sig)]
            changed += [uid for uid in self.cache.uids() if uid not in seen and not self._empty(uid)]
            for uid in changed:
                await self._refresh(uid)
            self.last_relist = self.clock.now()
            self.relists += 1
            return changed
        finally:
            self._relisting = False

    async def _list(self) -> dict[str, Signature]:
        sandboxes = await self.runtime.list_pod_sandbox()
        containers = await self.runtime.list_containers()
        sandbox_pairs: dict[str, list[tuple[int, int, str, int]]] = {}
        for s in sandboxes:
            uid = s.labels.get(cri.POD_UID_LABEL) or s.metadata.uid
            sandbox_pairs.setdefault(uid, []).append((s.created_at, s.metadata.attempt, s.id, int(s.state) + 10))
        container_pairs: dict[str, list[tuple[int, int, str, int]]] = {}
        for c in containers:
            uid = c.labels.get(cri.POD_UID_LABEL, "")
            if uid:
                container_pairs.setdefault(uid, []).append((c.created_at, c.metadata.attempt, c.id, int(c.state)))
        out: dict[str, Signature] = {}
        for uid in {*sandbox_pairs, *container_pairs}:
            sb = sorted(sandbox_pairs.get(uid, ()), reverse=True)
            cs = sorted(container_pairs.get(uid, ()), reverse=True)
            out[uid] = (*((i, st) for _, _, i, st in sb), *((i, st) for _, _, i, st in cs))
        return out

    def _differs(self, uid: str, sig: Signature) -> bool:
        cached = self.cache.get(uid)
        return cached is None or cached.signature() != sig

    def _empty(self, uid: str) -> bool:
        cached = self.cache.get(uid)
        return cached is None or cached.is_empty()

    async def _refresh(self, uid: str) -> None:
        cached = self.cache.get(uid)
        before = cached.signature() if cached is not None else None
        name, namespace = (cached.name, cached.namespace) if cached is not None else ("", "")
        try:
            status = await self.manager.get_pod_status(uid, name=name, namespace=namespace)
        except cri.CriError as e:
            log.warning("PLEG: reading pod %s failed: %s", uid, e)
            return
        self.cache.set(status)
        if status.signature() != before:
            self.on_pod_changed(uid)

    # -- runtime events ----------------------------------------------------------------------------
    async def _follow_events(self) -> None:
        try:
            async for event in self.runtime.get_container_events():
                self.evented = True
                self.events += 1
                sandbox = event.pod_sandbox_status
                if sandbox is None:
                    continue
                self._dirty.add(sandbox.metadata.uid)
                if not self._flush_scheduled:
                    self._flush_scheduled = True
                    asyncio.get_running_loop().call_soon(self._flush_soon)
        except cri.Unimplemented:
            log.info("the runtime has no container events; relisting only")

    def _flush_soon(self) -> None:
        self.spawner.spawn(self._flush(), name="pleg-flush")

    async def _flush(self) -> None:
        self._flush_scheduled = False
        dirty, self._dirty = self._dirty, set()
        for uid in dirty:
            await self._refresh(uid)

    def store(self, status: PodRuntimeStatus) -> None:
        """A sync's own read of the runtime (not reported: the syncing worker knows)."""
        self.cache.set(status)
