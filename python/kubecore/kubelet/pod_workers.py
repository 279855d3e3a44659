"""One serial worker per pod (upstream pkg/kubelet/pod_workers.go).

Every change to a pod — a watch event, a runtime event, a probe result, a back-off ending —
becomes `update_pod(uid, key)`. The pod's work then moves through upstream's states:

    SYNCING --(sync says terminal, or kill asked)--> TERMINATING --> TERMINATED --> FINISHED

- SYNCING: `syncer.sync_pod` makes the runtime match the spec and reports the status. It returns
  whether the pod reached a terminal phase (then termination follows), whether it changed the
  runtime (then the pod is synced once more at once, to report what it just did without waiting
  for the runtime event), and when to come back (a back-off ending).
- TERMINATING: `syncer.sync_terminating_pod(grace)` stops everything, within the effective
  grace period: the smallest of the pod's deletion grace period and any kill's override (at
  least 1 s), as upstream's calculateEffectiveGracePeriod.
- TERMINATED: `syncer.sync_terminated_pod` releases what is left and lets the status manager
  finish (write the terminal status, delete the pod from the API if it is being deleted).
- FINISHED: further updates are ignored until the pod is removed (`update_pod(removed=True)`),
  when the work is forgotten (`syncer.forget`).

Guarantees (the point of the design):
- Serial: at most one of the syncer's calls runs for a pod at any time, on one task that exists
  only while there is work (an idle pod costs a small record, not a task).
- Coalescing: updates that arrive while a call runs are folded into one more pass afterwards.
- A kill is never lost: once termination is requested the pod does not go back to syncing.
- A sync that raises is logged and the pod is tried again after `backoff_period` (10 s).
- Re-queues (`requeue(uid, delay)`) go on the shared `Timers`, not on sleeping tasks.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Protocol

from kubecore.kubelet.timers import Spawner, Timer, Timers

log = logging.getLogger(__name__)
Obj = dict[str, Any]

BACKOFF_PERIOD = 10.0


class WorkState(IntEnum):
    SYNCING = 0
    TERMINATING = 1
    TERMINATED = 2
    FINISHED = 3


@dataclass(slots=True)
class SyncOutcome:
    terminal: bool = False
    again: bool = False
    retry_after: float | None = None


@dataclass(slots=True)
class PodWork:
    """One pod's work record. Invariant: `running` is True exactly while a task serves it."""

    uid: str
    key: str
    state: WorkState = WorkState.SYNCING
    pending: bool = False
    running: bool = False
    kill_requested: bool = False
    grace: int | None = None
    removed: bool = False
    removed_pod: Obj | None = None
    """The last known pod once it is gone from the API (what termination works from)."""
    requeue_timer: Timer | None = None
    syncs: int = 0
    last_sync: float = 0.0
    """When the last sync pass started (a cached runtime status older than this is re-read)."""


class PodSyncer(Protocol):
    async def sync_pod(self, work: PodWork) -> SyncOutcome: ...

    async def sync_terminating_pod(self, work: PodWork, grace: int | None) -> None: ...

    async def sync_terminated_pod(self, work: PodWork) -> None: ...

    async def forget(self, work: PodWork) -> None: ...


class PodWorkers:
    """The pod workers of one kubelet (see the module docstring)."""

    def __init__(self, syncer: PodSyncer, *, timers: Timers, spawner: Spawner,
                 backoff_period: float = BACKOFF_PERIOD) -> None:
        self.syncer = syncer
        self.timers = timers
        self.spawner = spawner
        self.backoff_period = backoff_period
        self.pods: dict[str, PodWork] = {}

    def __len__(self) -> int:
        return len(self.pods)

    def get(self, uid: str) -> PodWork | None:
        return self.pods.get(uid)

    def update_pod(self, uid: str, key: str, *, kill: bool = False, grace: int | None = None,
                   removed_pod: Obj | None = None, start_terminated: bool = False) -> None:
        """Something about the pod changed; `kill` asks for termination (with `grace` seconds as an
        upper bound), `removed_pod` says the pod is gone from the API (implies kill)."""
        work = self.pods.get(uid)
        if work is None:
            if removed_pod is not None and start_terminated:
                return  # never seen, already gone, nothing running: nothing to do
            work = self.pods[uid] = PodWork(uid, key)
            if start_terminated:
                work.state = WorkState.TERMINATED
        if removed_pod is not None:
            work.removed, work.removed_pod = True, removed_pod
            kill = True
        if kill:
            work.kill_requested = True
            if grace is not None:
                work.grace = grace if work.grace is None else min(work.grace, grace)
        if work.state == WorkState.FINISHED:
            if work.removed and not work.running:
                self._start(work)  # only to forget it
            return
        work.pending = True
        if not work.running:
            self._start(work)

    def requeue(self, uid: str, delay: float) -> None:
        """Sync the pod again after `delay` seconds (an earlier pending requeue wins)."""
        work = self.pods.get(uid)
        if work is None or work.state == WorkState.FINISHED:
            return
        when = self.timers.clock.now() + delay
        if work.requeue_timer is not None and not work.requeue_timer.cancelled and work.requeue_timer.when <= when:
            return
        if work.requeue_timer is not None:
            work.requeue_timer.cancel()
        work.requeue_timer = self.timers.call_at(when, lambda: self.update_pod(uid, work.key))

    def _start(self, work: PodWork) -> None:
        work.running = True
        self.spawner.spawn(self._run(work), name=f"pod-worker {work.key}")

    async def _run(self, work: PodWork) -> None:
        again_used = False
        try:
            while work.pending or (work.state == WorkState.FINISHED and work.removed):
                if work.state == WorkState.FINISHED:
                    # only a removed pod is forgotten: an update that came while it finished is
                    # ignored (forgetting it would drop its status before the final delete)
                    work.pending = False
                    if work.removed:
                        await self._forget(work)
                    return
                work.pending = False
                if work.state == WorkState.SYNCING and work.kill_requested:
                    work.state = WorkState.TERMINATING
                try:
                    again_used = await self._step(work, again_used)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("pod %s: sync failed; retrying in %.0fs", work.key, self.backoff_period)
                    self.requeue(work.uid, self.backoff_period)
        finally:
            work.running = False

    async def _step(self, work: PodWork, again_used: bool) -> bool:
        """One call of the syncer for the pod's current state; returns whether an immediate
        re-sync was used up."""
        if work.state == WorkState.SYNCING:
            work.syncs += 1
            outcome = await self.syncer.sync_pod(work)
            if outcome.retry_after is not None:
                self.requeue(work.uid, outcome.retry_after)
            if outcome.terminal or work.kill_requested:
                work.state = WorkState.TERMINATING
                work.pending = True
            elif outcome.again and not again_used:
                work.pending = True
                return True
            return False
        if work.state == WorkState.TERMINATING:
            await self.syncer.sync_terminating_pod(work, work.grace)
            work.state = WorkState.TERMINATED
            work.pending = True
            return again_used
        if work.state == WorkState.TERMINATED:
            await self.syncer.sync_terminated_pod(work)
            work.state = WorkState.FINISHED
            if work.requeue_timer is not None:
                work.requeue_timer.cancel()
        return again_used

    async def _forget(self, work: PodWork) -> None:
        if self.pods.get(work.uid) is work:
            del self.pods[work.uid]
        if work.requeue_timer is not None:
            work.requeue_timer.cancel()
        await self.syncer.forget(work)

    def is_terminated(self, uid: str) -> bool:
        """The pod's containers are stopped for good (TERMINATED or FINISHED)."""
        work = self.pods.get(uid)
        return work is not None and work.state >= WorkState.TERMINATED

    def could_have_running_containers(self, uid: str) -> bool:
        """upstream's PodCouldHaveRunningContainers: not yet through termination."""
        work = self.pods.get(uid)
        return work is None or work.state < WorkState.TERMINATED

    def counts(self) -> dict[str, int]:
        out = {s.name.lower(): 0 for s in WorkState}
        for w in self.pods.values():
            out[w.state.name.lower()] += 1
        return out
