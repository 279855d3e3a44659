"""How fast the client may talk and how long it waits after failures.

- `TokenBucket`: client-go's `flowcontrol.NewTokenBucketRateLimiter(qps, burst)` (golang.org/x/time/rate
  underneath). The bucket starts full with `burst` tokens and refills at `qps` per second; `wait()`
  takes one token, sleeping on the injected clock until it is there. Reservations are first come,
  first served: a caller that has to wait has already taken its token (the bucket goes into debt),
  so later callers queue behind it instead of overtaking. `qps <= 0` means unlimited: `wait()`
  never sleeps. There is no hidden default: the REST client passes its config's qps/burst.
- `Backoff`: apimachinery's `wait.Backoff` (`duration`, `factor`, `jitter`, `steps`, `cap`) with
  its exact `step()` rule: each step returns the current duration (jittered by up to
  `jitter * duration`) and multiplies the next by `factor`; reaching `cap` pins the duration there.
- `BackoffManager`: `wait.NewExponentialBackoffManager`: a `Backoff` that starts over at
  `initial` when no backoff was asked for during `reset_after` seconds. The reflector's is
  `BackoffManager.reflector_default()`: 800 ms initial, 30 s cap, x2, jitter 1.0, reset after 2 min.

Nothing here reads the wall clock or calls `random` directly: both are injected (tests pass a
FakeClock and a fixed `rand`).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from kubecore.client.clock import REAL_CLOCK, Clock


class TokenBucket:
    """A token bucket shared by every request of one client.

    Invariant: `_tokens` is the token count at time `_last` (negative while callers wait);
    `_tokens <= burst` always.
    """

    def __init__(self, qps: float, burst: int, *, clock: Clock = REAL_CLOCK) -> None:
        if qps > 0 and burst < 1:
            raise ValueError(f"burst must be at least 1 when qps > 0 (got {burst})")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock.now()

    @property
    def unlimited(self) -> bool:
        return self.qps <= 0

    def _advance(self) -> float:
        now = self._clock.now()
        if now > self._last:
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
            self._last = now
        return now

    def reserve(self) -> float:
        """Take one token now; return how many seconds the caller must wait before using it."""
        if self.unlimited:
            return 0.0
        self._advance()
        self._tokens -= 1.0
        if self._tokens >= 0:
            return 0.0
        return -self._tokens / self.qps

    def try_accept(self) -> bool:
        """Take a token only if one is there right now (client-go's TryAccept)."""
        if self.unlimited:
            return True
        self._advance()
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    async def wait(self) -> None:
        """Block until this caller's token is available."""
        delay = self.reserve()
        if delay > 0:
            await self._clock.sleep(delay)


@dataclass
class Backoff:
    """wait.Backoff: call `step()` for each successive delay (seconds)."""

    duration: float
    factor: float = 1.0
    jitter: float = 0.0
    steps: int = 2**31 - 1
    cap: float = 0.0
    rand: Callable[[], float] = field(default=random.random, repr=False)

    def step(self) -> float:
        if self.steps < 1:
            return self._jittered(self.duration)
        self.steps -= 1
        current = self.duration
        if self.factor != 0:
            self.duration *= self.factor
            if self.cap > 0 and self.duration > self.cap:
                self.duration = self.cap
                self.steps = 0
        return self._jittered(current)

    def _jittered(self, d: float) -> float:
        return d + self.rand() * self.jitter * d if self.jitter > 0 else d


class BackoffManager:
    """Exponential backoff that resets after `reset_after` quiet seconds (ExponentialBackoffManager)."""

    def __init__(self, *, initial: float, cap: float, reset_after: float, factor: float = 2.0,
                 jitter: float = 1.0, clock: Clock = REAL_CLOCK,
                 rand: Callable[[], float] = random.random) -> None:
        self.initial, self.cap, self.reset_after = initial, cap, reset_after
        self.factor, self.jitter = factor, jitter
        self._clock = clock
        self._rand = rand
        self._backoff = self._fresh()
        self._last_start: float | None = None

    @classmethod
    def reflector_default(cls, *, clock: Clock = REAL_CLOCK,
                          rand: Callable[[], float] = random.random) -> BackoffManager:
        """client-go's reflector: 800 ms, x2, 30 s cap, jitter 1.0, reset after 2 minutes."""
        return cls(initial=0.8, cap=30.0, reset_after=120.0, clock=clock, rand=rand)

    def _fresh(self) -> Backoff:
        return Backoff(duration=self.initial, factor=self.factor, jitter=self.jitter, cap=self.cap,
                       rand=self._rand)

    def next_delay(self) -> float:
        """The next delay in seconds (and remember that a backoff started now)."""
        now = self._clock.now()
        if self._last_start is not None and now - self._last_start > self.reset_after:
            self._backoff = self._fresh()
        self._last_start = now
        return self._backoff.step()

    def reset(self) -> None:
        self._backoff = self._fresh()
        self._last_start = None

    async def sleep(self) -> float:
        """Sleep for `next_delay()` on the clock; returns the delay slept."""
        delay = self.next_delay()
        await self._clock.sleep(delay)
        return delay
