"""Expectations (upstream ControllerExpectations / UIDTrackingControllerExpectations) on a FakeClock,
including the module docstring's worked example, and slow-start batching."""

from __future__ import annotations

import asyncio

from kubecore.client.clock import FakeClock
from kubecore.controllers.controller_utils import slow_start_batch
from kubecore.controllers.expectations import (
    EXPECTATIONS_TIMEOUT, ControllerExpectations, UIDTrackingControllerExpectations,
)

KEY = "ns/rs"


def test_nothing_recorded_is_satisfied() -> None:
    exp = ControllerExpectations(clock=FakeClock())
    assert exp.satisfied_expectations(KEY)
    assert exp.get_expectations(KEY) is None


def test_creations_block_until_all_observed() -> None:
    exp = ControllerExpectations(clock=FakeClock())
    exp.expect_creations(KEY, 3)
    for _ in range(2):
        assert not exp.satisfied_expectations(KEY)
        exp.creation_observed(KEY)
    assert not exp.satisfied_expectations(KEY)
    exp.creation_observed(KEY)
    assert exp.satisfied_expectations(KEY)
    exp.creation_observed(KEY)  # an extra observation keeps it satisfied (counts may go negative)
    assert exp.satisfied_expectations(KEY)


def test_expire_after_timeout_on_the_injected_clock() -> None:
    clock = FakeClock()
    exp = ControllerExpectations(clock=clock)
    exp.expect_creations(KEY, 5)
    clock.advance(EXPECTATIONS_TIMEOUT)
    assert not exp.satisfied_expectations(KEY)  # exactly the timeout: not yet
    clock.advance(0.001)
    assert exp.satisfied_expectations(KEY)
    exp.expect_creations(KEY, 1)  # setting again restarts the timer
    assert not exp.satisfied_expectations(KEY)


def test_set_replaces_and_lower_raise_adjust() -> None:
    exp = ControllerExpectations(clock=FakeClock())
    exp.set_expectations(KEY, add=2, delete=2)
    exp.lower_expectations(KEY, add=2, delete=1)
    got = exp.get_expectations(KEY)
    assert got is not None and (got.add, got.delete) == (0, 1)
    exp.raise_expectations(KEY, add=1)
    assert got.add == 1
    exp.expect_deletions(KEY, 0)
    assert exp.satisfied_expectations(KEY)
    exp.delete_expectations(KEY)
    assert exp.get_expectations(KEY) is None
    exp.lower_expectations("other", add=1)  # unknown keys are ignored
    assert exp.get_expectations("other") is None


def test_uid_tracking_worked_example() -> None:
    exp = UIDTrackingControllerExpectations(clock=FakeClock())
    exp.expect_deletions(KEY, ["ns/a", "ns/b"])
    assert not exp.satisfied_expectations(KEY)
    exp.deletion_observed(KEY, "ns/a")
    exp.deletion_observed(KEY, "ns/a")  # deletionTimestamp update, then the delete: counted once
    got = exp.get_expectations(KEY)
    assert got is not None and got.delete == 1
    exp.deletion_observed(KEY, "ns/c")  # not asked for
    assert got.delete == 1 and exp.get_uids(KEY) == {"ns/b"}
    exp.deletion_observed(KEY, "ns/b")
    assert exp.satisfied_expectations(KEY)
    exp.delete_expectations(KEY)
    assert exp.get_uids(KEY) is None and exp.get_expectations(KEY) is None


def test_uid_tracking_passes_creations_through() -> None:
    exp = UIDTrackingControllerExpectations(clock=FakeClock())
    exp.expect_creations(KEY, 1)
    assert not exp.satisfied_expectations(KEY)
    exp.creation_observed(KEY)
    assert exp.satisfied_expectations(KEY)


# -- slow start -----------------------------------------------------------------------------------

class Calls:
    def __init__(self, fail_from: int | None = None) -> None:
        self.n = 0
        self.fail_from = fail_from
        self.batches: list[int] = []
        self.in_flight = 0

    async def fn(self) -> None:
        self.n += 1
        me = self.n
        if self.in_flight == 0:  # the first call of a new batch
            self.batches.append(0)
        self.in_flight += 1
        self.batches[-1] = max(self.batches[-1], self.in_flight)
        await asyncio.sleep(0)
        self.in_flight -= 1
        if self.fail_from is not None and me >= self.fail_from:
            raise RuntimeError(f"call {me} failed")


async def test_slow_start_batches_double() -> None:
    c = Calls()
    successes, err = await slow_start_batch(20, 1, c.fn)
    assert (successes, err, c.n) == (20, None, 20)
    assert c.batches == [1, 2, 4, 8, 5]


async def test_slow_start_stops_after_the_failing_batch() -> None:
    c = Calls(fail_from=6)  # calls 1..3 are batches 1 and 2; batch 3 (calls 4..7) has 2 failures
    successes, err = await slow_start_batch(100, 1, c.fn)
    assert c.n == 7 and successes == 5
    assert isinstance(err, RuntimeError) and "call 6" in str(err)


async def test_slow_start_of_nothing() -> None:
    c = Calls()
    assert await slow_start_batch(0, 1, c.fn) == (0, None)
    assert c.n == 0
