"""The inflight stage's limiter (kubecore.apiserver.inflight): bounded holders, bounded queue,
arrival order, 429 after the wait, no slot lost to a cancelled waiter."""

from __future__ import annotations

import asyncio

import pytest

from kubecore.api import errors
from kubecore.apiserver.inflight import InflightLimiter


def run(coro: object) -> None:
    asyncio.run(coro)  # type: ignore[arg-type]


def test_waiters_get_slots_in_arrival_order_and_never_exceed_the_limit() -> None:
    async def main() -> None:
        lim = InflightLimiter(2, queue=10, wait=30.0)
        order: list[int] = []
        peak = 0

        async def one(i: int) -> None:
            nonlocal peak
            await lim.acquire()
            peak = max(peak, lim.running)
            order.append(i)
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            lim.release()

        await asyncio.gather(*(one(i) for i in range(8)))
        assert order == list(range(8)) and peak == 2 and lim.running == 0

    run(main())


def test_a_full_queue_refuses_at_once_with_retry_after() -> None:
    async def main() -> None:
        lim = InflightLimiter(1, queue=1, wait=30.0, retry_after=3)
        await lim.acquire()
        waiter = asyncio.ensure_future(lim.acquire())
        await asyncio.sleep(0)
        with pytest.raises(errors.StatusError) as e:
            await lim.acquire()
        assert e.value.code == 429 and e.value.details == {"retryAfterSeconds": 3}
        lim.release()
        await waiter  # the queued one got the slot
        assert lim.running == 1
        lim.release()
        assert lim.running == 0

    run(main())


def test_a_waiter_gives_up_after_the_wait_with_429() -> None:
    async def main() -> None:
        lim = InflightLimiter(1, queue=5, wait=0.01)
        await lim.acquire()
        with pytest.raises(errors.StatusError) as e:
            await lim.acquire()
        assert e.value.code == 429 and lim.running == 1
        lim.release()
        assert lim.running == 0
        await lim.acquire()  # nothing stale left in the queue
        assert lim.running == 1

    run(main())


def test_a_slot_handed_to_a_cancelled_waiter_is_passed_on() -> None:
    async def main() -> None:
        lim = InflightLimiter(1, queue=5, wait=30.0)
        await lim.acquire()
        first = asyncio.ensure_future(lim.acquire())
        second = asyncio.ensure_future(lim.acquire())
        await asyncio.sleep(0)
        lim.release()  # the slot goes to `first` ...
        first.cancel()  # ... which is cancelled before it runs again
        try:
            await first
        except asyncio.CancelledError:
            pass  # it gave the slot on to `second`
        else:
            lim.release()  # the cancellation came too late: `first` held the slot; now `second` gets it
        await second
        assert lim.running == 1
        lim.release()
        assert lim.running == 0

    run(main())
