"""Work queue guarantees, tested black-box: fair, stingy, coalescing, shutdown/drain, delays, rate limits."""

from __future__ import annotations

import asyncio
import random

import pytest

from kubecore.client.clock import FakeClock, settle
from kubecore.client.ratelimit import ItemExponentialFailureRateLimiter
from kubecore.client.workqueue import DelayingQueue, QueueShutDown, RateLimitingQueue, WorkQueue

# Generous real-time bound for awaiting something that should happen promptly; never asserted on.
PROMPTLY = 5.0


async def test_fifo_and_dedup_before_processing() -> None:
    q: WorkQueue[str] = WorkQueue()
    for item in ["a", "b", "a", "c", "b"]:
        q.add(item)
    assert len(q) == 3
    got = [await q.get() for _ in range(3)]
    assert got == ["a", "b", "c"]
    assert len(q) == 0


async def test_readd_while_processing_is_held_until_done_then_processed_once() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("x")
    item = await q.get()
    q.add("x")
    q.add("x")
    assert len(q) == 0  # not handed to a second worker while the first holds it
    second = asyncio.create_task(q.get())
    await settle()
    assert not second.done()
    q.done(item)
    assert await asyncio.wait_for(second, PROMPTLY) == "x"
    q.done("x")
    assert len(q) == 0  # the two re-adds were coalesced into one


async def test_done_without_readd_does_not_requeue() -> None:
    q: WorkQueue[int] = WorkQueue()
    q.add(1)
    q.done(await q.get())
    assert len(q) == 0


async def test_get_blocks_until_add() -> None:
    q: WorkQueue[str] = WorkQueue()
    waiter = asyncio.create_task(q.get())
    await settle()
    assert not waiter.done()
    q.add("late")
    assert await asyncio.wait_for(waiter, PROMPTLY) == "late"


async def test_cancelled_getter_does_not_swallow_an_item() -> None:
    q: WorkQueue[str] = WorkQueue()
    first = asyncio.create_task(q.get())
    second = asyncio.create_task(q.get())
    await settle()
    q.add("only")  # wakes `first`...
    first.cancel()  # ...which is cancelled before it runs: `second` must get the item
    assert await asyncio.wait_for(second, PROMPTLY) == "only"
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_shutdown_hands_out_queued_items_then_raises_and_ignores_adds() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add("b")
    q.shut_down()
    assert q.shutting_down
    q.add("c")
    assert [await q.get(), await q.get()] == ["a", "b"]
    with pytest.raises(QueueShutDown):
        await q.get()


async def test_shutdown_wakes_blocked_getters() -> None:
    q: WorkQueue[str] = WorkQueue()
    waiters = [asyncio.create_task(q.get()) for _ in range(3)]
    await settle()
    q.shut_down()
    for w in waiters:
        with pytest.raises(QueueShutDown):
            await asyncio.wait_for(w, PROMPTLY)


async def test_async_iteration_ends_at_shutdown() -> None:
    q: WorkQueue[int] = WorkQueue()
    for i in range(3):
        q.add(i)
    q.shut_down()
    seen = []
    async for item in q:
        seen.append(item)
        q.done(item)
    assert seen == [0, 1, 2]


async def test_shutdown_with_drain_waits_for_queued_and_processing_items() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add("b")
    held = await q.get()  # "a" is being processed, "b" still queued
    drain = asyncio.create_task(q.shut_down_with_drain())
    await settle()
    assert not drain.done()
    q.add("a")  # ignored: shutting down
    q.done(held)
    await settle()
    assert not drain.done()  # "b" has not been processed yet
    b = await q.get()
    assert b == "b"
    await settle()
    assert not drain.done()
    q.done(b)
    await asyncio.wait_for(drain, PROMPTLY)
    with pytest.raises(QueueShutDown):
        await q.get()


async def test_drained_item_readded_while_processing_is_still_processed() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    held = await q.get()
    q.add("a")  # dirty while processing, before the shutdown
    drain = asyncio.create_task(q.shut_down_with_drain())
    q.done(held)  # re-queued by done even though we are shutting down
    assert await q.get() == "a"
    q.done("a")
    await asyncio.wait_for(drain, PROMPTLY)


async def test_shut_down_stops_a_drain_wait() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("stuck")
    await q.get()  # never done
    drain = asyncio.create_task(q.shut_down_with_drain())
    await settle()
    assert not drain.done()
    q.shut_down()
    await asyncio.wait_for(drain, PROMPTLY)


async def test_many_workers_never_share_an_item_and_every_readd_after_get_is_processed() -> None:
    """The stingy + coalescing guarantees under load: 8 workers, 20 keys, producers re-adding keys
    at random moments, including while those keys are being processed."""
    rng = random.Random(7)
    q: WorkQueue[int] = WorkQueue()
    keys = range(20)
    active: set[int] = set()
    overlaps: list[int] = []
    # For each key: how many adds happened after the most recent get of it. An add after a get must
    # be followed by another get of the key, so at the end every counter must be 0.
    adds_since_get = {k: 0 for k in keys}
    processed = {k: 0 for k in keys}
    adds_while_active = 0

    def add(k: int) -> None:
        nonlocal adds_while_active
        adds_while_active += k in active
        if not q.shutting_down:  # adds after shutdown are ignored by design
            adds_since_get[k] += 1
        q.add(k)

    async def worker() -> None:
        async for k in q:
            adds_since_get[k] = 0
            if k in active:
                overlaps.append(k)
            active.add(k)
            for _ in range(rng.randint(0, 3)):
                await asyncio.sleep(0)
            if rng.random() < 0.3:
                add(k)  # re-add our own item while holding it
            active.discard(k)
            processed[k] += 1
            q.done(k)

    async def producer() -> None:
        for _ in range(500):
            add(rng.choice(keys))
            if rng.random() < 0.5:
                await asyncio.sleep(0)

    workers = [asyncio.create_task(worker()) for _ in range(8)]
    await asyncio.gather(*(producer() for _ in range(3)))
    await asyncio.wait_for(q.shut_down_with_drain(), PROMPTLY * 4)
    await asyncio.wait_for(asyncio.gather(*workers), PROMPTLY)
    assert adds_while_active > 50  # the scenario really exercised re-adds during processing
    assert overlaps == []
    assert adds_since_get == {k: 0 for k in keys}
    assert all(n > 0 for n in processed.values())
    assert sum(processed.values()) < 1500 + 1  # coalesced: never more gets than adds


async def test_add_after_waits_for_the_clock() -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add_after("x", 5.0)
    await settle()
    assert len(q) == 0 and q.waiting == 1
    await clock.step(4.9)
    assert len(q) == 0
    await clock.step(0.1)
    assert len(q) == 1 and q.waiting == 0
    assert await q.get() == "x"


async def test_add_after_orders_by_deadline_and_nonpositive_adds_now() -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add_after("late", 3.0)
    q.add_after("early", 1.0)
    q.add_after("mid", 2.0)
    q.add_after("now", 0.0)
    assert len(q) == 1
    await clock.run_for(3.0)
    assert [await q.get() for _ in range(4)] == ["now", "early", "mid", "late"]


async def test_add_after_twice_keeps_the_earlier_deadline() -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add_after("x", 10.0)
    q.add_after("x", 2.0)  # sooner: wins
    q.add_after("x", 5.0)  # later than the pending one: ignored
    await clock.step(2.0)
    assert len(q) == 1
    q.done(await q.get())
    await clock.run_for(20.0)
    assert len(q) == 0  # not added a second time by the superseded deadlines


async def test_add_after_item_already_queued_is_coalesced() -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add("x")
    q.add_after("x", 1.0)
    await clock.step(1.0)
    assert len(q) == 1


async def test_shutdown_drops_pending_delays() -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add_after("x", 1.0)
    q.shut_down()
    q.add_after("y", 1.0)
    await clock.step(5.0)
    assert len(q) == 0 and q.waiting == 0
    assert clock.sleepers == 0  # the timer task is gone
    with pytest.raises(QueueShutDown):
        await q.get()


async def test_rate_limited_adds_back_off_per_item_until_forgotten() -> None:
    clock = FakeClock()
    q: RateLimitingQueue[str] = RateLimitingQueue(ItemExponentialFailureRateLimiter(1.0, 60.0), clock=clock)
    delays = []
    for _ in range(4):
        start = clock.now()
        q.add_rate_limited("x")
        await clock.run_for(0.0)
        while len(q) == 0:
            nxt = clock.next_deadline()
            assert nxt is not None
            await clock.run_for(nxt - clock.now())
        delays.append(clock.now() - start)
        q.done(await q.get())
    assert delays == [1.0, 2.0, 4.0, 8.0]
    assert q.num_requeues("x") == 4
    q.forget("x")
    assert q.num_requeues("x") == 0
    q.add_rate_limited("x")
    await clock.step(1.0)
    assert len(q) == 1


async def test_default_rate_limiting_queue_uses_5ms_backoff() -> None:
    clock = FakeClock()
    q: RateLimitingQueue[str] = RateLimitingQueue(clock=clock)
    q.add_rate_limited("x")
    await clock.step(0.004)
    assert len(q) == 0
    await clock.step(0.002)
    assert len(q) == 1
