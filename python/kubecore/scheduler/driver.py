"""The scheduling loop without I/O: pop, schedule, bind, hand failures back.

`Driver(core, on_bound=..., on_failed=...)` is what a scheduler process runs once its informers
feed the cache and the queue. Each `run_once` pops up to `max_batch` pods, schedules them per
profile (`schedule_batch`), binds the placed ones and records the failed ones in the queue. The
callbacks are where the caller does its I/O: `on_failed(failed)` should emit FailedScheduling
and set the PodScheduled condition from `failed.reason` / `failed.message` (and the nominated
node); `on_bound(bound)` is informational (the Bind plugin already wrote the binding).

A popped pod that is being deleted (`metadata.deletionTimestamp` set, as a pending pod with
finalizers can be) is not scheduled, as upstream's skipPodSchedule: it leaves the queue without a
requeue or a status change, and `on_skipped(pod)` reports it (a FailedScheduling event "skip
schedule deleting pod: ns/name"). Its deletion event removes it for good.

Binding runs inline, one pod after another, unless `concurrent_binds`: then each binding cycle is
a task (what a Bind plugin doing network I/O wants). Pods waiting at Permit always get a task,
since they wait for each other (gangs).

A popped batch is scheduled in chunks of `CHUNK` pods; once a batch has held the event loop for
`YIELD_AFTER` seconds, the driver lets it run before the next chunk, so the bindings, evictions and
watch events of slow cycles (preemption's dry runs take milliseconds each) are not held back
until hundreds of cycles have finished.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from kubecore.scheduler.batch import schedule_batch
from kubecore.scheduler.binding import Bound, bind_one, finish_scheduling_cycle, record_binding_failure, record_failure
from kubecore.scheduler.framework import Framework
from kubecore.scheduler.podinfo import Obj, QueuedPodInfo
from kubecore.scheduler.queue import QueueClosed
from kubecore.scheduler.registry import SchedulerCore
from kubecore.scheduler.schedule_one import Assumed, Failed

__all__ = ["Driver", "CHUNK", "YIELD_AFTER"]

CHUNK = 64
"""Pods scheduled per `schedule_batch` call (enough to keep the native batch path efficient)."""
YIELD_AFTER = 0.02
"""Seconds of scheduling after which a batch lets the event loop run."""


class Driver:
    """Runs scheduling and binding cycles for a `SchedulerCore` (see the module docstring)."""

    def __init__(self, core: SchedulerCore, *, max_batch: int = 512, concurrent_binds: bool = False,
                 on_bound: Callable[[Bound], Any] | None = None,
                 on_failed: Callable[[Failed], Any] | None = None,
                 on_skipped: Callable[[Obj], Any] | None = None) -> None:
        self.core = core
        self.max_batch = max_batch
        self.concurrent_binds = concurrent_binds
        self.on_bound = on_bound
        self.on_failed = on_failed
        self.on_skipped = on_skipped
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        """The running loop, looked up once per batch (each lookup is a getpid() on Python 3.11)."""
        self.bound = 0
        self.failed = 0
        self.skipped = 0

    def _groups(self, pinfos: list[QueuedPodInfo]) -> list[tuple[Framework, list[QueuedPodInfo]]]:
        groups: list[tuple[Framework, list[QueuedPodInfo]]] = []
        for p in pinfos:
            fw = self.core.framework_for(p.pod)
            if fw is None:  # not ours: the wiring should not have queued it
                self.core.queue.done(p.key)
                continue
            if (p.pod.get("metadata") or {}).get("deletionTimestamp"):  # being deleted: skip, as upstream
                self.core.queue.done(p.key)
                self.skipped += 1
                if self.on_skipped is not None:
                    self.on_skipped(p.pod)
                continue
            if groups and groups[-1][0] is fw:
                groups[-1][1].append(p)
            else:
                groups.append((fw, [p]))
        return groups

    async def run_once(self) -> int:
        """One batch: the pods popped (0 when activeQ had none)."""
        pinfos = self.core.queue.pop_batch(self.max_batch)
        if not pinfos:
            return 0
        self._loop = asyncio.get_running_loop()
        began = time.perf_counter()
        for fw, group in self._groups(pinfos):
            for start in range(0, len(group), CHUNK):
                if time.perf_counter() - began > YIELD_AFTER:
                    await asyncio.sleep(0)
                    began = time.perf_counter()
                for outcome in schedule_batch(fw, group[start:start + CHUNK]):
                    await self._handle(outcome)
        return len(pinfos)

    async def _handle(self, outcome: Assumed | Failed) -> None:
        if isinstance(outcome, Failed):
            self._failed(outcome, binding=False)
            return
        finish_scheduling_cycle(self.core.queue, outcome)
        if outcome.waiting or self.concurrent_binds:
            loop = self._loop or asyncio.get_running_loop()
            task = loop.create_task(self._bind(outcome))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            await self._bind(outcome)

    async def _bind(self, a: Assumed) -> None:
        result = await bind_one(a)
        if isinstance(result, Failed):
            self._failed(result, binding=True)
            return
        self.core.queue.done(a.pinfo.key)
        self.bound += 1
        if self.on_bound is not None:
            self.on_bound(result)

    def _failed(self, f: Failed, *, binding: bool) -> None:
        self.failed += 1
        if binding:
            record_binding_failure(self.core.queue, f)
        else:
            record_failure(self.core.queue, f)
        if self.on_failed is not None:
            self.on_failed(f)

    async def drain(self) -> None:
        """Run until activeQ is empty and no binding cycle is in progress."""
        while True:
            if await self.run_once():
                continue
            if not self._tasks:
                return
            await asyncio.wait(set(self._tasks), return_when=asyncio.FIRST_COMPLETED)

    async def run(self) -> None:
        """Forever: wait for a pod, then run a batch (until the queue is closed)."""
        queue = self.core.queue
        while True:
            try:
                await queue.wait_ready()
            except QueueClosed:
                return
            await self.run_once()
            self.core.cache.cleanup_assumed_pods()
