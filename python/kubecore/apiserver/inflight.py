"""The inflight stage: at most `limit` requests of one kind (read, write) run at once; a bounded
number more wait their turn, first come first served, for a bounded time; the rest get 429
TooManyRequests with Retry-After (upstream's --max-requests-inflight with the queuing of API
Priority and Fairness, in its simplest form: one queue per kind).

Guarantees:
- never more than `limit` holders at once;
- never more than `queue` waiters (memory is bounded): the next one is refused at once;
- a waiter gets a slot in arrival order, or a 429 after `wait` seconds;
- a slot handed to a waiter that was cancelled at that moment is passed on, never lost.
"""

from __future__ import annotations

import asyncio
from collections import deque

from kubecore.api import errors

MESSAGE = "Too many requests, please try again later."


class InflightLimiter:
    def __init__(self, limit: int, *, queue: int, wait: float, retry_after: int = 1) -> None:
        self.limit, self.queue, self.wait, self.retry_after = limit, queue, wait, retry_after
        self.running = 0  # holders of a slot; <= limit
        self._waiters: deque[asyncio.Future[None]] = deque()  # pending futures, oldest first

    def _refuse(self) -> errors.StatusError:
        return errors.too_many_requests(MESSAGE, self.retry_after)

    def try_acquire(self) -> bool:
        """Takes a slot if one is free and nobody waits for one (no coroutine: the usual case)."""
        if self.running < self.limit and not self._waiters:
            self.running += 1
            return True
        return False

    async def acquire(self) -> None:
        """Takes a slot, waiting if needed; raises the 429 StatusError when it cannot."""
        if self.running < self.limit and not self._waiters:
            self.running += 1
            return
        if len(self._waiters) >= self.queue:
            raise self._refuse()
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await asyncio.wait_for(asyncio.shield(fut), self.wait)
        except (asyncio.TimeoutError, asyncio.CancelledError) as e:
            if fut.done() and not fut.cancelled():
                self.release()  # the slot arrived as we gave up: hand it on
            else:
                fut.cancel()
                self._drop(fut)
            if isinstance(e, asyncio.CancelledError):
                raise
            raise self._refuse() from None

    def _drop(self, fut: asyncio.Future[None]) -> None:
        try:
            self._waiters.remove(fut)
        except ValueError:
            pass

    def release(self) -> None:
        """Gives a slot back: to the oldest waiter still waiting, else to the pool."""
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)  # the slot moves to the waiter: running stays the same
                return
        self.running -= 1
