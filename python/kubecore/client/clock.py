"""Injectable time for the client machinery: a `Clock` protocol, the real clock and a fake one.

Everything in `kubecore.client` that waits or timestamps takes a `Clock` (k8s.io/utils/clock's
role in client-go), so tests drive time by hand instead of sleeping or asserting on wall time.

`Clock.now()` is seconds since the Unix epoch as a float. It is used both for durations (backoff,
lease expiry) and for the timestamps written into objects (Lease renewTime, Event lastTimestamp).
`RealClock` anchors a monotonic counter at the wall time it was created, so durations never jump
when the system clock is stepped, while the values stay close to wall time for timestamps.

`FakeClock` only moves when a test calls `advance(seconds)` (or `set(t)`); every `sleep()` whose
deadline has been reached then completes. Sleeping for zero or a negative duration still yields to
the event loop once, as `asyncio.sleep(0)` does.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Protocol


class Clock(Protocol):
    """A source of time and a way to wait for it."""

    def now(self) -> float:
        """Seconds since the Unix epoch."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Return once `seconds` have passed on this clock."""
        ...


class RealClock:
    """Wall time at construction plus the monotonic time elapsed since then."""

    def __init__(self) -> None:
        self._wall0 = time.time()
        self._mono0 = time.monotonic()

    def now(self) -> float:
        return self._wall0 + (time.monotonic() - self._mono0)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


REAL_CLOCK = RealClock()

# A fixed, recognisable start for fake time: 2024-01-02T03:04:05Z.
FAKE_EPOCH = 1704164645.0


class FakeClock:
    """A clock that stands still until the test advances it.

    Invariants: `_sleepers` is a heap of (deadline, seq, future); a future is resolved exactly when
    `now() >= deadline` after an `advance`/`set`, or dropped when its sleeper was cancelled.
    """

    def __init__(self, start: float = FAKE_EPOCH) -> None:
        self._now = start
        self._seq = itertools.count()
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._seq), fut))
        await fut

    def advance(self, seconds: float) -> None:
        """Move time forward and wake every sleeper whose deadline has come."""
        if seconds < 0:
            raise ValueError(f"cannot move a clock backwards by {seconds}s")
        self.set(self._now + seconds)

    def set(self, t: float) -> None:
        """Jump to absolute time `t` (not earlier than now)."""
        if t < self._now:
            raise ValueError(f"cannot move a clock backwards from {self._now} to {t}")
        self._now = t
        while self._sleepers and self._sleepers[0][0] <= t:
            _, _, fut = heapq.heappop(self._sleepers)
            if not fut.done():
                fut.set_result(None)

    @property
    def sleepers(self) -> int:
        """How many sleeps are pending (cancelled ones excluded)."""
        return sum(1 for _, _, f in self._sleepers if not f.done())

    def next_deadline(self) -> float | None:
        """The earliest pending sleep's deadline, or None when nobody sleeps."""
        pending = [d for d, _, f in self._sleepers if not f.done()]
        return min(pending) if pending else None

    async def step(self, seconds: float, *, yields: int = 20) -> None:
        """advance(seconds), then let the woken tasks run (`yields` passes of the event loop)."""
        self.advance(seconds)
        await settle(yields)

    async def run_for(self, seconds: float, *, yields: int = 20) -> None:
        """Advance `seconds` in total, stopping at every sleeper's deadline on the way so each
        wake-up sees the time it asked for (as a real clock would), and letting tasks run."""
        end = self._now + seconds
        await settle(yields)
        while True:
            nxt = self.next_deadline()
            if nxt is None or nxt > end:
                break
            self.set(max(nxt, self._now))
            await settle(yields)
        self.set(end)
        await settle(yields)


async def settle(yields: int = 20) -> None:
    """Give other tasks `yields` turns of the event loop (for tests that use a FakeClock)."""
    for _ in range(yields):
        await asyncio.sleep(0)
