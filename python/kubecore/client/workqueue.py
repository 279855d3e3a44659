"""Work queues for controllers (asyncio), with client-go's util/workqueue guarantees.

Three layers, each adding one ability to the one before:

- `WorkQueue`: the basic queue. Guarantees:
  * Fair: items are processed in the order in which they are added.
  * Stingy: a single item is not processed multiple times concurrently, and if an item is added
    multiple times before it can be processed, it is only processed once.
  * Coalescing while busy: an item added again while it is being processed (between `get` and
    `done`) is processed again, once, after `done`; never by a second worker meanwhile.
  * Multiple consumers and producers: workers may `get` concurrently; `add` never blocks.
  * Shutdown: after `shut_down()` new adds are ignored; workers keep receiving what is already
    queued, then `get` raises `QueueShutDown`. `shut_down_with_drain()` also waits until every
    queued item has been handed out and every handed-out item is `done`.
- `DelayingQueue`: `add_after(item, seconds)` adds an item once the delay has passed on the
  injected clock. Several pending delays for one item collapse into the earliest one. Pending
  items sit in one heap served by one timer task that sleeps until the earliest deadline.
- `RateLimitingQueue`: `add_rate_limited(item)` adds after the delay its `RateLimiter` chooses
  (per-item backoff, overall bucket); `forget(item)` ends the backoff; `num_requeues(item)`.
  Remember to `forget` items that succeed, or their backoff grows forever.

The canonical worker:

    async for key in queue:            # or: key = await queue.get()
        try:
            await reconcile(key)
            queue.forget(key)
        except Exception:
            queue.add_rate_limited(key)
        finally:
            queue.done(key)

All methods are called from the event loop that owns the queue; none is thread-safe.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque
from collections.abc import AsyncIterator, Hashable
from typing import Generic, TypeVar

from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.client.ratelimit import RateLimiter, default_controller_rate_limiter

T = TypeVar("T", bound=Hashable)


class QueueShutDown(Exception):
    """Raised by `get` once the queue is shut down and holds nothing more to hand out."""


class WorkQueue(Generic[T]):
    """A fair, stingy work queue (see the module docstring for the guarantees)."""

    def __init__(self) -> None:
        # The order to work in. Every element is in `_dirty` and not in `_processing`.
        self._queue: deque[T] = deque()
        # Everything that needs processing (queued, or re-added while being processed).
        self._dirty: set[T] = set()
        # Everything handed out by `get` and not yet `done`. May also be in `_dirty`: then it is
        # queued again by `done`.
        self._processing: set[T] = set()
        # Workers blocked in `get`, woken one per queued item (FIFO).
        self._getters: deque[asyncio.Future[None]] = deque()
        # Woken whenever the queue or the processing set shrinks; `shut_down_with_drain` waits on it.
        self._progress = asyncio.Event()
        self._shutting_down = False
        self._drain = False

    def add(self, item: T) -> None:
        """Mark `item` as needing processing. Ignored once the queue is shutting down."""
        if self._shutting_down or item in self._dirty:
            return
        self._dirty.add(item)
        if item in self._processing:
            return  # `done` will queue it again
        self._queue.append(item)
        self._wake_one()

    def __len__(self) -> int:
        """Items waiting to be handed out (not those being processed). Informational only."""
        return len(self._queue)

    async def get(self) -> T:
        """Wait for an item and mark it as being processed; call `done(item)` afterwards.

        Raises `QueueShutDown` when the queue is shut down and empty."""
        while not self._queue:
            if self._shutting_down:
                raise QueueShutDown()
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(fut)
            try:
                await fut
            except asyncio.CancelledError:
                if fut.done() and not fut.cancelled():
                    self._wake_one()  # we were woken for an item we will not take: pass it on
                else:
                    self._discard_getter(fut)
                raise
        item = self._queue.popleft()
        self._processing.add(item)
        self._dirty.discard(item)
        self._progress.set()
        return item

    def done(self, item: T) -> None:
        """Mark `item` as processed; if it was added again meanwhile, queue it again."""
        self._processing.discard(item)
        if item in self._dirty:
            self._queue.append(item)
            self._wake_one()
        self._progress.set()

    def shut_down(self) -> None:
        """Ignore new adds; workers get what is queued, then `QueueShutDown`. Stops a drain wait."""
        self._drain = False
        self._begin_shutdown()

    async def shut_down_with_drain(self) -> None:
        """As `shut_down`, then wait until everything queued was handed out and is `done`.

        Workers must call `done` for every item, or this waits forever; calling `shut_down()`
        meanwhile ends the wait early."""
        self._drain = True
        self._begin_shutdown()
        while self._drain and (self._queue or self._processing):
            self._progress.clear()
            await self._progress.wait()

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    async def __aiter__(self) -> AsyncIterator[T]:
        """Yield items until shutdown; the loop body must still call `done(item)`."""
        while True:
            try:
                item = await self.get()
            except QueueShutDown:
                return
            yield item

    def _begin_shutdown(self) -> None:
        self._shutting_down = True
        while self._getters:
            fut = self._getters.popleft()
            if not fut.done():
                fut.set_result(None)
        self._progress.set()

    def _wake_one(self) -> None:
        while self._getters:
            fut = self._getters.popleft()
            if not fut.done():
                fut.set_result(None)
                return

    def _discard_getter(self, fut: asyncio.Future[None]) -> None:
        try:
            self._getters.remove(fut)
        except ValueError:
            pass


class DelayingQueue(WorkQueue[T]):
    """A `WorkQueue` that can also add an item after a delay measured on `clock`.

    Invariants: `_ready_at[item]` is the earliest pending deadline of `item`; `_heap` holds
    (deadline, seq, item) entries, of which those whose deadline differs from `_ready_at[item]` are
    stale and skipped. `_timer` sleeps until `_timer_at`, which is the heap's earliest deadline or
    earlier (a timer that fires early just finds nothing ready and re-arms).
    """

    def __init__(self, *, clock: Clock = REAL_CLOCK) -> None:
        super().__init__()
        self._clock = clock
        self._heap: list[tuple[float, int, T]] = []
        self._ready_at: dict[T, float] = {}
        self._seq = itertools.count()
        self._timer: asyncio.Task[None] | None = None
        self._timer_at: float | None = None

    def add_after(self, item: T, delay: float) -> None:
        """Add `item` once `delay` seconds have passed; now if `delay <= 0`. Ignored when shutting
        down. If `item` is already waiting, the earlier of the two deadlines wins."""
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(item)
            return
        ready_at = self._clock.now() + delay
        known = self._ready_at.get(item)
        if known is not None and known <= ready_at:
            return
        self._ready_at[item] = ready_at
        heapq.heappush(self._heap, (ready_at, next(self._seq), item))
        if self._timer_at is None or ready_at < self._timer_at:
            self._arm(ready_at)

    @property
    def waiting(self) -> int:
        """Items waiting for their delay to pass (informational)."""
        return len(self._ready_at)

    def _begin_shutdown(self) -> None:
        super()._begin_shutdown()
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._timer_at = None, None
        self._heap.clear()
        self._ready_at.clear()

    def _arm(self, at: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = at
        self._timer = asyncio.get_running_loop().create_task(self._fire(at), name="workqueue-delay-timer")

    async def _fire(self, at: float) -> None:
        await self._clock.sleep(at - self._clock.now())
        self._timer, self._timer_at = None, None
        self._add_ready()
        if self._heap:
            self._arm(self._heap[0][0])

    def _add_ready(self) -> None:
        now = self._clock.now()
        while self._heap and self._heap[0][0] <= now:
            ready_at, _, item = heapq.heappop(self._heap)
            if self._ready_at.get(item) != ready_at:
                continue  # stale: superseded by an earlier deadline, already added
            del self._ready_at[item]
            self.add(item)
        while self._heap and self._ready_at.get(self._heap[0][2]) != self._heap[0][0]:
            heapq.heappop(self._heap)  # drop stale heads so the next timer aims at a live deadline


class RateLimitingQueue(DelayingQueue[T]):
    """A `DelayingQueue` whose `add_rate_limited` waits as long as its rate limiter says.

    The default limiter is `default_controller_rate_limiter()` on the same clock."""

    def __init__(self, rate_limiter: RateLimiter[T] | None = None, *, clock: Clock = REAL_CLOCK) -> None:
        super().__init__(clock=clock)
        self._limiter: RateLimiter[T] = (
            rate_limiter if rate_limiter is not None else default_controller_rate_limiter(clock=clock)
        )

    def add_rate_limited(self, item: T) -> None:
        """Add `item` after the limiter's delay for it (and count one more requeue)."""
        self.add_after(item, self._limiter.when(item))

    def forget(self, item: T) -> None:
        """Stop the limiter tracking `item`; it does not remove `item` from the queue (call `done`)."""
        self._limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        return self._limiter.num_requeues(item)
