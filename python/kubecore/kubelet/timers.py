"""One timer task for many deadlines, and a tracked home for the short jobs they start.

A hollow-node host runs a thousand kubelets; each renews a Lease every 10 s, checks its node
status every 10 s, relists its runtime, runs probes and restarts containers after back-offs. As
asyncio tasks sleeping in loops that would be thousands of sleepers; here it is one heap served by
one task (`Timers`), on the injected clock, so a FakeClock drives every kubelet's time at once.

    timers = Timers(clock)
    timers.start()
    h = timers.call_later(10.0, renew)          # plain callable, run on the timer task
    p = timers.every(10.0, tick, first=3.2)     # periodic; p.cancel() stops it
    h.cancel()

Guarantees:
- A callback runs no earlier than its deadline on the clock, in deadline order (ties: the order
  they were scheduled), on the timer task; it must not block. Work that awaits goes to a
  `Spawner` (`spawner.spawn(coro)`), which keeps the task alive, logs its failure and cancels
  what is left on `stop()`.
- A cancelled timer never runs; cancelling one that already ran is harmless.
- `every(period, fn)` schedules the next run `period` after the previous *deadline* (no drift),
  skipping runs that were missed entirely (a stalled loop does not fire a burst).
- An exception in a callback is logged; the timer task keeps going.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from kubecore.client.clock import Clock

log = logging.getLogger(__name__)


class Timer:
    """A scheduled call; `cancel()` prevents it."""

    __slots__ = ("when", "fn", "cancelled")

    def __init__(self, when: float, fn: Callable[[], object]) -> None:
        self.when = when
        self.fn = fn
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Periodic:
    """A repeating call made by `Timers.every`; `cancel()` stops it for good."""

    __slots__ = ("_timers", "period", "fn", "_current", "cancelled")

    def __init__(self, timers: Timers, period: float, fn: Callable[[], object]) -> None:
        self._timers, self.period, self.fn = timers, period, fn
        self._current: Timer | None = None
        self.cancelled = False

    def _arm(self, when: float) -> None:
        self._current = self._timers.call_at(when, lambda: self._fire(when))

    def _fire(self, when: float) -> None:
        if self.cancelled:
            return
        nxt = when + self.period
        now = self._timers.clock.now()
        if nxt <= now:  # missed whole periods: do not fire a burst
            nxt = now + self.period - ((now - when) % self.period)
        self._arm(nxt)
        self.fn()

    def cancel(self) -> None:
        self.cancelled = True
        if self._current is not None:
            self._current.cancel()


class Timers:
    """A heap of deadlines served by one task. Invariant: `_heap` holds (when, seq, Timer) with
    cancelled timers left in place until they reach the top."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._heap: list[tuple[float, int, Timer]] = []
        self._seq = itertools.count()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.fired = 0

    def __len__(self) -> int:
        return sum(1 for _, _, t in self._heap if not t.cancelled)

    def call_at(self, when: float, fn: Callable[[], object]) -> Timer:
        timer = Timer(when, fn)
        head = self._heap[0][0] if self._heap else None
        heapq.heappush(self._heap, (when, next(self._seq), timer))
        if head is None or when < head:
            self._wake.set()
        return timer

    def call_later(self, delay: float, fn: Callable[[], object]) -> Timer:
        return self.call_at(self.clock.now() + max(0.0, delay), fn)

    def every(self, period: float, fn: Callable[[], object], *, first: float | None = None) -> Periodic:
        """Call `fn` every `period` seconds, the first time after `first` seconds (default: one period)."""
        if period <= 0:
            raise ValueError(f"a period must be positive, not {period}")
        p = Periodic(self, period, fn)
        p._arm(self.clock.now() + (period if first is None else max(0.0, first)))
        return p

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="kubelet-timers")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def _fire_due(self) -> None:
        now = self.clock.now()
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, _, timer = heapq.heappop(heap)
            if timer.cancelled:
                continue
            timer.cancelled = True  # ran: a later cancel() is a no-op
            self.fired += 1
            try:
                timer.fn()
            except Exception:
                log.exception("timer callback %r failed", timer.fn)

    async def _run(self) -> None:
        while True:
            self._fire_due()
            while self._heap and self._heap[0][2].cancelled:
                heapq.heappop(self._heap)
            self._wake.clear()
            if not self._heap:
                await self._wake.wait()
                continue
            delay = self._heap[0][0] - self.clock.now()
            if delay <= 0:
                await asyncio.sleep(0)
                continue
            sleeper = asyncio.ensure_future(self.clock.sleep(delay))
            waker = asyncio.ensure_future(self._wake.wait())
            try:
                await asyncio.wait((sleeper, waker), return_when=asyncio.FIRST_COMPLETED)
            finally:
                sleeper.cancel()
                waker.cancel()


class Spawner:
    """Runs coroutines as tracked tasks: failures are logged, `stop()` cancels and awaits them.

    `limit` bounds how many run at once (the rest wait for a slot, in order)."""

    def __init__(self, *, name: str = "kubelet", limit: int | None = None) -> None:
        self.name = name
        self._tasks: set[asyncio.Task[Any]] = set()
        self._sem = asyncio.Semaphore(limit) if limit else None
        self.failures = 0

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str | None = None) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(self._guarded(coro), name=name or self.name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(lambda _t: coro.close())  # cancelled before it ran: never awaited
        return task

    async def _guarded(self, coro: Coroutine[Any, Any, Any]) -> None:
        try:
            if self._sem is None:
                await coro
            else:
                async with self._sem:
                    await coro
        except asyncio.CancelledError:
            raise
        except Exception:
            self.failures += 1
            log.exception("%s: background job failed", self.name)

    async def stop(self) -> None:
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def drain(self) -> None:
        """Wait until every job spawned so far (and any they spawn) has finished."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
