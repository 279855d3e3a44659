"""The injected clock the work queue (and the rest of kubecore.client) waits on."""

from __future__ import annotations

import asyncio

import pytest

from kubecore.client.clock import FAKE_EPOCH, FakeClock, RealClock, settle


async def test_fake_sleep_wakes_exactly_at_its_deadline() -> None:
    clock = FakeClock()
    woke: list[float] = []

    async def sleeper(d: float) -> None:
        await clock.sleep(d)
        woke.append(clock.now() - FAKE_EPOCH)

    tasks = [asyncio.create_task(sleeper(d)) for d in (3.0, 1.0, 2.0)]
    await settle()
    assert clock.sleepers == 3 and clock.next_deadline() == FAKE_EPOCH + 1.0
    await clock.step(0.5)
    assert woke == []
    await clock.run_for(10.0)  # stops at each deadline on the way
    assert woke == [1.0, 2.0, 3.0]
    assert clock.now() == FAKE_EPOCH + 10.5
    await asyncio.gather(*tasks)


async def test_cancelled_sleepers_are_not_counted() -> None:
    clock = FakeClock()
    t = asyncio.create_task(clock.sleep(5.0))
    await settle()
    t.cancel()
    await settle()
    assert clock.sleepers == 0 and clock.next_deadline() is None
    clock.advance(10.0)  # resolving nothing, raising nothing


async def test_zero_sleep_yields_without_time_passing() -> None:
    clock = FakeClock()
    await asyncio.wait_for(clock.sleep(0), 5.0)
    await asyncio.wait_for(clock.sleep(-1.0), 5.0)
    assert clock.now() == FAKE_EPOCH


def test_fake_clock_never_goes_backwards() -> None:
    clock = FakeClock()
    with pytest.raises(ValueError):
        clock.advance(-1.0)
    with pytest.raises(ValueError):
        clock.set(FAKE_EPOCH - 1)


def test_real_clock_is_non_decreasing() -> None:
    clock = RealClock()
    samples = [clock.now() for _ in range(1000)]
    assert samples == sorted(samples)
