"""Crash-loop back-off (the module docstring's worked example) and the shared timer heap."""

from __future__ import annotations

import asyncio

from kubecore.client.clock import FAKE_EPOCH, FakeClock, settle
from kubecore.kubelet.backoff import Backoff, ReasonCache
from kubecore.kubelet.timers import Spawner, Timers


def test_crash_loop_backoff_doubles_to_five_minutes() -> None:
    clock = FakeClock()
    b = Backoff(clock=clock)
    delays = []
    for _ in range(8):
        exit_time = clock.now()
        assert not b.is_in_backoff_since("k", exit_time) or delays
        while b.is_in_backoff_since("k", exit_time):
            clock.advance(1.0)
        delays.append(clock.now() - exit_time)
        b.next("k", exit_time)
    # first restart at once, then 10, 20, 40, 80, 160, 300, 300
    assert delays == [0, 10, 20, 40, 80, 160, 300, 300]


def test_backoff_resets_after_ten_minutes_of_running() -> None:
    clock = FakeClock()
    b = Backoff(clock=clock)
    b.next("k", clock.now())
    b.next("k", clock.now())
    assert b.get("k") == 20
    clock.advance(601)  # ran for more than 2 * 300 s since the last restart
    assert not b.is_in_backoff_since("k", clock.now())
    assert b.next("k", clock.now()) == 10


def test_image_backoff_counts_from_the_failed_pull() -> None:
    clock = FakeClock()
    b = Backoff(clock=clock)
    b.next("img", clock.now())
    assert b.is_in_backoff_since_update("img", clock.now())
    assert b.remaining_since_update("img") == 10
    clock.advance(10)
    assert not b.is_in_backoff_since_update("img", clock.now())
    b.forget_prefix("im")
    assert len(b) == 0


def test_reason_cache_is_an_lru() -> None:
    cache = ReasonCache(size=2)
    cache.add("u1", "a", "ErrImagePull", "x")
    cache.add("u1", "b", "CrashLoopBackOff", "y")
    cache.add("u2", "a", "ErrImagePull", "z")
    assert cache.get("u1", "a") is None and cache.get("u1", "b") is not None
    cache.forget_pod("u1")
    assert cache.get("u1", "b") is None and cache.get("u2", "a") is not None


async def test_timers_fire_in_deadline_order_and_cancel() -> None:
    clock = FakeClock()
    timers = Timers(clock)
    timers.start()
    fired: list[str] = []
    timers.call_later(3, lambda: fired.append("c"))
    timers.call_later(1, lambda: fired.append("a"))
    cancelled = timers.call_later(2, lambda: fired.append("b"))
    timers.call_later(1, lambda: fired.append("a2"))
    cancelled.cancel()
    await clock.run_for(5)
    assert fired == ["a", "a2", "c"]
    await timers.stop()


async def test_periodic_keeps_its_phase_and_skips_missed_runs() -> None:
    clock = FakeClock()
    timers = Timers(clock)
    timers.start()
    at: list[float] = []
    p = timers.every(10, lambda: at.append(clock.now() - FAKE_EPOCH), first=2)
    await clock.run_for(25)
    assert at == [2, 12, 22]
    clock.advance(35)            # a stalled loop: 32, 42, 52 were missed
    await settle()
    assert at == [2, 12, 22, 60]
    await clock.run_for(1.5)
    assert at[-1] == 60          # the next one keeps the phase: 62
    await clock.run_for(0.5)
    assert at[-1] == 62
    p.cancel()
    await clock.run_for(30)
    assert at[-1] == 62
    await timers.stop()


async def test_an_earlier_timer_wakes_the_sleeping_heap() -> None:
    clock = FakeClock()
    timers = Timers(clock)
    timers.start()
    fired: list[float] = []
    timers.call_later(100, lambda: fired.append(clock.now()))
    await settle()
    timers.call_later(1, lambda: fired.append(clock.now()))
    await clock.run_for(1)
    assert fired == [FAKE_EPOCH + 1]
    await timers.stop()


async def test_spawner_logs_failures_and_stops_what_runs() -> None:
    spawner = Spawner(limit=1)

    async def boom() -> None:
        raise ValueError("x")

    forever = asyncio.Event()
    spawner.spawn(boom())
    spawner.spawn(forever.wait())
    await settle()
    assert spawner.failures == 1 and len(spawner) == 1
    await spawner.stop()
    assert len(spawner) == 0
