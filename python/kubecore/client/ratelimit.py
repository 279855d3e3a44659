"""Rate limiters for the work queue: how long an item must wait before it is added again.

The shapes and defaults follow client-go's util/workqueue/default_rate_limiters.go. A rate limiter
answers `when(item)` with a delay in seconds and records that the item failed once more;
`forget(item)` clears that history (call it when an item succeeded or was given up on);
`num_requeues(item)` reports the history. All durations are float seconds.

- `ItemExponentialFailureRateLimiter`: base * 2**failures, capped at max_delay (per item).
- `ItemFastSlowRateLimiter`: `fast_delay` for the first `max_fast_attempts` failures, then `slow_delay`.
- `BucketRateLimiter`: one token bucket shared by all items (golang.org/x/time/rate's
  Reserve().Delay()): the bucket starts full with `burst` tokens and refills at `qps`; every call
  takes a token, going into debt if needed, and the delay is how long until the debt is repaid.
- `MaxOfRateLimiter`: the worst (longest) answer of several limiters. With a bucket inside, the
  burst can appear exceeded when particular items were separately delayed longer.
- `WithMaxWaitRateLimiter`: another limiter's answer, capped.
- `default_controller_rate_limiter()`: max of 5 ms..1000 s per-item exponential backoff and a
  10 qps / burst 100 overall bucket, as client-go's DefaultControllerRateLimiter.

Limiters are used from one event loop and need no locks.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

from kubecore.client.clock import REAL_CLOCK, Clock

T = TypeVar("T", bound=Hashable)
T_contra = TypeVar("T_contra", bound=Hashable, contravariant=True)


class RateLimiter(Protocol[T_contra]):
    def when(self, item: T_contra) -> float:
        """Seconds `item` should wait before being added again; counts one more failure."""
        ...

    def forget(self, item: T_contra) -> None:
        """Stop tracking `item` (it succeeded, or we gave up on it)."""
        ...

    def num_requeues(self, item: T_contra) -> int:
        """How many failures `item` has had since it was last forgotten."""
        ...


class ItemExponentialFailureRateLimiter(Generic[T]):
    """base_delay * 2**(failures so far), never above max_delay. Defaults: 5 ms and 1000 s."""

    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        self._failures: dict[T, int] = {}
        self._base = base_delay
        self._max = max_delay

    def when(self, item: T) -> float:
        exp = self._failures.get(item, 0)
        self._failures[item] = exp + 1
        if exp >= 1024:  # 2**1024 overflows a float; any base > 0 is past any cap long before
            return self._max
        return min(self._base * math.pow(2.0, exp), self._max)

    def forget(self, item: T) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: T) -> int:
        return self._failures.get(item, 0)


class ItemFastSlowRateLimiter(Generic[T]):
    """`fast_delay` for the first `max_fast_attempts` failures of an item, `slow_delay` after."""

    def __init__(self, fast_delay: float, slow_delay: float, *, max_fast_attempts: int) -> None:
        self._failures: dict[T, int] = {}
        self._fast = fast_delay
        self._slow = slow_delay
        self._max_fast = max_fast_attempts

    def when(self, item: T) -> float:
        n = self._failures.get(item, 0) + 1
        self._failures[item] = n
        return self._fast if n <= self._max_fast else self._slow

    def forget(self, item: T) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: T) -> int:
        return self._failures.get(item, 0)


class BucketRateLimiter(Generic[T]):
    """An overall token bucket: `burst` tokens, refilled at `qps` per second, shared by all items.

    Invariant: `_tokens` is the bucket's level at clock time `_last` (negative = reserved ahead).
    It never tracks items: num_requeues is always 0 and forget does nothing.
    """

    def __init__(self, qps: float = 10.0, burst: int = 100, *, clock: Clock = REAL_CLOCK) -> None:
        if qps <= 0:
            raise ValueError(f"qps must be positive, got {qps}")
        if burst < 1:
            raise ValueError(f"burst must be at least 1, got {burst}")
        self._qps = qps
        self._burst = float(burst)
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock.now()

    def when(self, item: T) -> float:
        now = self._clock.now()
        if now > self._last:
            self._tokens = min(self._burst, self._tokens + (now - self._last) * self._qps)
            self._last = now
        self._tokens -= 1.0
        return -self._tokens / self._qps if self._tokens < 0 else 0.0

    def forget(self, item: T) -> None:
        return None

    def num_requeues(self, item: T) -> int:
        return 0


class MaxOfRateLimiter(Generic[T]):
    """Asks every limiter (each records the failure) and answers with the longest delay."""

    def __init__(self, *limiters: RateLimiter[T]) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self._limiters = limiters

    def when(self, item: T) -> float:
        return max(limiter.when(item) for limiter in self._limiters)

    def forget(self, item: T) -> None:
        for limiter in self._limiters:
            limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        return max(limiter.num_requeues(item) for limiter in self._limiters)


class WithMaxWaitRateLimiter(Generic[T]):
    """Another limiter's delay, never more than `max_delay`."""

    def __init__(self, limiter: RateLimiter[T], max_delay: float) -> None:
        self._limiter = limiter
        self._max = max_delay

    def when(self, item: T) -> float:
        return min(self._limiter.when(item), self._max)

    def forget(self, item: T) -> None:
        self._limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        return self._limiter.num_requeues(item)


def default_controller_rate_limiter(*, clock: Clock = REAL_CLOCK) -> MaxOfRateLimiter[Hashable]:
    """Per-item exponential backoff (5 ms doubling to 1000 s) and an overall 10 qps / 100 burst
    bucket, whichever is slower: client-go's DefaultControllerRateLimiter."""
    return MaxOfRateLimiter[Hashable](
        ItemExponentialFailureRateLimiter[Hashable](0.005, 1000.0),
        BucketRateLimiter[Hashable](10.0, 100, clock=clock),
    )
