"""Rate-limited NoExecute tainting per zone, with a fake clock: the queue's token bucket (burst 1),
add-once semantics, retries, and how zone states switch the eviction rate."""

from __future__ import annotations

from typing import Any

from kubecore.client.clock import FakeClock
from kubecore.controllers.nodelifecycle_health import (
    STATE_FULL_DISRUPTION, STATE_INITIAL, STATE_NORMAL, STATE_PARTIAL_DISRUPTION,
)
from kubecore.controllers.nodelifecycle_zones import (
    ENTER_FULL_DISRUPTION, EXIT_FULL_DISRUPTION, RateLimitedTimedQueue, TimedValue, ZoneTracker,
)

Obj = dict[str, Any]


class Recorder:
    def __init__(self, clock: FakeClock, *, fail: set[str] | None = None) -> None:
        self.clock, self.fail = clock, fail or set()
        self.done: list[tuple[str, float]] = []

    async def __call__(self, value: TimedValue) -> tuple[bool, float]:
        if value.value in self.fail:
            self.fail.discard(value.value)
            return False, 5.0
        self.done.append((value.value, self.clock.now()))
        return True, 0.0


async def test_queue_processes_one_node_per_token() -> None:
    clock = FakeClock()
    q = RateLimitedTimedQueue(0.1, clock=clock)
    t0 = clock.now()
    for name in ("a", "b", "c"):
        assert q.add(name, f"uid-{name}")
    assert not q.add("a", "uid-a")  # already queued
    fn = Recorder(clock)
    await q.try_(fn)
    assert fn.done == [("a", t0)]  # the bucket starts with one token
    clock.advance(9.9)
    await q.try_(fn)
    assert [n for n, _ in fn.done] == ["a"]
    clock.advance(0.1)
    await q.try_(fn)
    clock.advance(10.0)
    await q.try_(fn)
    assert fn.done == [("a", t0), ("b", t0 + 10.0), ("c", t0 + 20.0)]
    assert not q.add("a", "uid-a")  # processed but not removed: not tainted twice
    assert q.remove("a") and q.add("a", "uid-a")  # healthy again, then failing again


async def test_queue_retries_a_failed_value_after_its_wait() -> None:
    clock = FakeClock()
    q = RateLimitedTimedQueue(100.0, clock=clock)
    q.add("a", "u")
    fn = Recorder(clock, fail={"a"})
    await q.try_(fn)
    assert fn.done == [] and "a" in q
    clock.advance(4.0)
    await q.try_(fn)
    assert fn.done == []
    clock.advance(1.1)
    await q.try_(fn)
    assert [n for n, _ in fn.done] == ["a"] and "a" not in q


async def test_zero_qps_stops_and_a_new_rate_resumes() -> None:
    clock = FakeClock()
    q = RateLimitedTimedQueue(1.0, clock=clock)
    q.swap_limiter(0.0)
    q.add("a", "u")
    fn = Recorder(clock)
    clock.advance(100.0)
    await q.try_(fn)
    assert fn.done == []
    q.swap_limiter(1.0)  # the old limiter had no token: the new one starts drained
    await q.try_(fn)
    assert fn.done == []
    clock.advance(1.0)
    await q.try_(fn)
    assert [n for n, _ in fn.done] == ["a"]


def ready(*statuses: str) -> list[Obj | None]:
    return [{"type": "Ready", "status": s} for s in statuses]


def tracker(**kw: Any) -> ZoneTracker:
    args = {"eviction_qps": 0.1, "secondary_eviction_qps": 0.01, "large_cluster_threshold": 50,
            "unhealthy_zone_threshold": 0.55, **kw}
    return ZoneTracker(clock=FakeClock(), **args)


def test_zone_states_set_the_eviction_rate() -> None:
    z = tracker()
    assert z.ensure_zone("a") and z.zone_states["a"] == STATE_INITIAL
    z.ensure_zone("b")
    assert z.handle_disruption({"a": ready("True", "True"), "b": ready("True")}) is None
    assert z.zone_states == {"a": STATE_NORMAL, "b": STATE_NORMAL} and z.tainters["a"].qps == 0.1
    # zone a mostly down, small: evictions there stop; zone b untouched
    assert z.handle_disruption({"a": ready("True", "False", "False", "Unknown"), "b": ready("True")}) is None
    assert z.zone_states["a"] == STATE_PARTIAL_DISRUPTION and z.tainters["a"].qps == 0.0
    assert z.tainters["b"].qps == 0.1
    # zone a entirely down while b is up: back to the normal rate for a
    z.handle_disruption({"a": ready("False", "False", "False", "Unknown"), "b": ready("True")})
    assert z.zone_states["a"] == STATE_FULL_DISRUPTION and z.tainters["a"].qps == 0.1


def test_large_partially_disrupted_zone_uses_the_secondary_rate() -> None:
    z = tracker(large_cluster_threshold=5)
    z.ensure_zone("")
    z.handle_disruption({"": ready("True", "True", "True", "True")})
    z.handle_disruption({"": ready("True", "True", "False", "False", "False", "False", "False")})
    assert z.zone_states[""] == STATE_PARTIAL_DISRUPTION and z.tainters[""].qps == 0.01


def test_every_zone_down_stops_all_tainting_until_one_recovers() -> None:
    z = tracker()
    for zone in ("a", "b"):
        z.ensure_zone(zone)
    z.handle_disruption({"a": ready("True"), "b": ready("True")})
    assert z.handle_disruption({"a": ready("Unknown"), "b": ready("False")}) == ENTER_FULL_DISRUPTION
    assert z.tainters["a"].qps == 0.0 and z.tainters["b"].qps == 0.0
    assert z.handle_disruption({"a": ready("Unknown"), "b": ready("False")}) is None  # still all down
    assert z.handle_disruption({"a": ready("True"), "b": ready("False")}) == EXIT_FULL_DISRUPTION
    assert z.zone_states == {"a": STATE_NORMAL, "b": STATE_FULL_DISRUPTION}
    assert z.tainters["a"].qps == 0.1 and z.tainters["b"].qps == 0.1


def test_an_unseen_zone_starts_initial_then_gets_its_state() -> None:
    z = tracker()
    assert z.handle_disruption({"a": ready("True")}) is None
    assert z.zone_states == {"a": STATE_NORMAL} and z.tainters["a"].qps == 0.1


def test_a_vanished_zone_is_forgotten() -> None:
    z = tracker()
    z.ensure_zone("a")
    z.ensure_zone("b")
    z.handle_disruption({"a": ready("True"), "b": ready("True")})
    z.handle_disruption({"a": ready("True")})
    assert "b" not in z.zone_states
