"""Leader election on a fake clock over an in-memory Lease store with resourceVersion semantics."""

from __future__ import annotations

import asyncio
import copy
import random
import re
from typing import Any

import pytest

from kubecore.client.errors import AlreadyExists, Conflict, NotFound
from kubecore.client.clock import FakeClock
from kubecore.client.leaderelection import LeaderElector, LeaseLock, micro_time

NS, NAME = "kube-system", "kubecore-controller-manager"
MICRO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


class LeaseStore:
    """Leases by (namespace, name), each write bumping a global revision, updates checked against it."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.revision = 0
        self.writes: list[tuple[str, str]] = []  # (verb, holderIdentity written)

    def _stamp(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.revision += 1
        obj["metadata"]["resourceVersion"] = str(self.revision)
        return copy.deepcopy(obj)


class StoreClient:
    """One candidate's connection to the store; `broken` makes every call fail like a dead network."""

    def __init__(self, store: LeaseStore) -> None:
        self.store = store
        self.broken = False

    def _check(self) -> None:
        if self.broken:
            raise ConnectionRefusedError("network down")

    async def get_lease(self, namespace: str, name: str) -> dict[str, Any]:
        await asyncio.sleep(0)
        self._check()
        obj = self.store.objects.get((namespace, name))
        if obj is None:
            raise NotFound({"reason": "NotFound", "message": f"leases {name!r} not found"}, code=404)
        return copy.deepcopy(obj)

    async def create_lease(self, lease: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0)
        self._check()
        key = (lease["metadata"]["namespace"], lease["metadata"]["name"])
        if key in self.store.objects:
            raise AlreadyExists({"reason": "AlreadyExists", "message": "exists"}, code=409)
        obj = copy.deepcopy(lease)
        self.store.objects[key] = obj
        self.store.writes.append(("create", obj["spec"]["holderIdentity"]))
        return self.store._stamp(obj)

    async def update_lease(self, lease: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0)
        self._check()
        key = (lease["metadata"]["namespace"], lease["metadata"]["name"])
        cur = self.store.objects.get(key)
        if cur is None:
            raise NotFound({"reason": "NotFound", "message": "gone"}, code=404)
        if lease["metadata"].get("resourceVersion") != cur["metadata"]["resourceVersion"]:
            raise Conflict({"reason": "Conflict", "message": "the object has been modified"}, code=409)
        obj = copy.deepcopy(lease)
        self.store.objects[key] = obj
        self.store.writes.append(("update", obj["spec"]["holderIdentity"]))
        return self.store._stamp(obj)


class Candidate:
    """An elector plus a record of what its callbacks saw."""

    def __init__(self, store: LeaseStore, clock: FakeClock, identity: str, **kw: Any) -> None:
        self.client = StoreClient(store)
        self.identity = identity
        self.started = 0
        self.started_at: float | None = None
        self.clock = clock
        self.stopped = 0
        self.leading_cancelled = False
        self.new_leaders: list[str] = []
        lock = LeaseLock(self.client, namespace=NS, name=NAME, identity=identity)
        self.elector = LeaderElector(lock, on_started_leading=self._lead, on_stopped_leading=self._stop,
                                     on_new_leader=self.new_leaders.append, clock=clock,
                                     rng=random.Random(identity), **kw)
        self.task: asyncio.Task[None] | None = None

    async def _lead(self) -> None:
        self.started += 1
        self.started_at = self.clock.now()
        try:
            await asyncio.Event().wait()  # "run controllers" until cancelled
        except asyncio.CancelledError:
            self.leading_cancelled = True
            raise

    def _stop(self) -> None:
        self.stopped += 1

    def start(self) -> Candidate:
        self.task = asyncio.create_task(self.elector.run())
        return self

    async def cancel(self) -> None:
        assert self.task is not None
        self.task.cancel()
        await asyncio.wait({self.task})


def spec(store: LeaseStore) -> dict[str, Any]:
    return dict(store.objects[(NS, NAME)]["spec"])


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store() -> LeaseStore:
    return LeaseStore()


async def test_first_candidate_creates_the_lease_and_leads(clock: FakeClock, store: LeaseStore) -> None:
    a = Candidate(store, clock, "a").start()
    await clock.run_for(0.0)
    assert a.elector.is_leader and a.started == 1
    s = spec(store)
    assert s["holderIdentity"] == "a"
    assert s["leaseDurationSeconds"] == 15
    assert s["leaseTransitions"] == 0
    assert MICRO.match(s["acquireTime"]) and s["acquireTime"] == s["renewTime"] == micro_time(clock.now())
    assert a.new_leaders == ["a"]
    acquired = s["acquireTime"]
    await clock.run_for(10.0)  # renews every 2 s, keeping acquireTime
    s = spec(store)
    assert s["renewTime"] != acquired and s["acquireTime"] == acquired
    assert s["leaseTransitions"] == 0
    assert store.writes.count(("update", "a")) >= 4
    await a.cancel()
    assert a.leading_cancelled and a.stopped == 1


async def test_standby_does_not_take_over_while_the_leader_renews(clock: FakeClock, store: LeaseStore) -> None:
    a = Candidate(store, clock, "a").start()
    await clock.run_for(0.0)
    b = Candidate(store, clock, "b").start()
    await clock.run_for(120.0)
    assert a.elector.is_leader and not b.elector.is_leader
    assert b.started == 0 and b.new_leaders == ["a"]
    assert spec(store)["holderIdentity"] == "a"
    await a.cancel()
    await b.cancel()
    assert b.stopped == 1  # called even though b never led


async def test_takeover_only_after_a_full_lease_duration_without_renewal(clock: FakeClock, store: LeaseStore) -> None:
    a = Candidate(store, clock, "a").start()
    await clock.run_for(0.0)
    b = Candidate(store, clock, "b").start()
    await clock.run_for(3.0)
    last_renew = spec(store)["renewTime"]
    await a.cancel()  # a dies silently: no release
    died = clock.now()
    await clock.run_for(14.0)  # b last saw the record change at most ~2 s before `died`
    assert spec(store)["holderIdentity"] == "a" and spec(store)["renewTime"] == last_renew
    assert not b.elector.is_leader
    await clock.run_for(10.0)
    assert b.elector.is_leader and b.started == 1
    s = spec(store)
    assert s["holderIdentity"] == "b" and s["leaseTransitions"] == 1
    assert s["acquireTime"] == s["renewTime"] or s["acquireTime"] < s["renewTime"]
    # a's last renewal was at most one retry period (2 s) before it died, and b needs 15 s without
    # a change after it saw that renewal
    assert b.started_at is not None and b.started_at - died >= 15.0 - 2.0
    assert b.new_leaders == ["a", "b"]
    await b.cancel()


async def test_leader_that_cannot_renew_stops_acting(clock: FakeClock, store: LeaseStore) -> None:
    a = Candidate(store, clock, "a").start()
    await clock.run_for(0.0)
    await clock.run_for(5.0)
    a.client.broken = True
    broke = clock.now()
    await clock.run_for(9.0)  # the renew deadline (10 s) has not passed since the last success
    assert a.task is not None and not a.task.done() and not a.leading_cancelled
    await clock.run_for(4.0)
    assert a.task.done() and a.task.exception() is None
    assert a.leading_cancelled and a.stopped == 1
    assert clock.now() - broke <= 13.0
    # a's run is over for good: healing the network does not make it lead again
    a.client.broken = False
    await clock.run_for(30.0)
    assert a.started == 1


async def test_lost_leader_is_replaced_and_transitions_are_counted(clock: FakeClock, store: LeaseStore) -> None:
    a = Candidate(store, clock, "a").start()
    await clock.run_for(0.0)
    b = Candidate(store, clock, "b").start()
    c = Candidate(store, clock, "c").start()
    await clock.run_for(4.0)
    a.client.broken = True  # partitioned: b or c takes over after the lease expires
    await clock.run_for(40.0)
    assert a.leading_cancelled and a.task is not None and a.task.done()
    leaders = [x for x in (b, c) if x.elector.is_leader]
    assert len(leaders) == 1
    new = leaders[0]
    assert spec(store)["holderIdentity"] == new.identity and spec(store)["leaseTransitions"] == 1
    # now the new leader fails too, and the third candidate takes over
    other = c if new is b else b
    new.client.broken = True
    await clock.run_for(40.0)
    assert other.elector.is_leader and spec(store)["leaseTransitions"] == 2
    assert new.leading_cancelled
    # never two acting leaders at once in this run: each started exactly once
    assert (a.started, b.started, c.started) == (1, 1, 1)
    await other.cancel()


async def test_release_on_cancel_lets_the_standby_take_over_at_once(clock: FakeClock, store: LeaseStore) -> None:
    a = Candidate(store, clock, "a", release_on_cancel=True).start()
    await clock.run_for(0.0)
    b = Candidate(store, clock, "b").start()
    await clock.run_for(5.0)
    await a.cancel()
    assert a.leading_cancelled and a.stopped == 1
    s = spec(store)
    assert s["holderIdentity"] == "" and s["leaseDurationSeconds"] == 1 and s["leaseTransitions"] == 0
    await clock.run_for(5.0)  # b's next retry (<= 2 s * 2.2) sees an empty holder and takes it
    assert b.elector.is_leader
    s = spec(store)
    assert s["holderIdentity"] == "b" and s["leaseTransitions"] == 1
    assert b.new_leaders == ["a", "b"]
    await b.cancel()


async def test_racing_candidates_one_wins_by_resource_version(clock: FakeClock, store: LeaseStore) -> None:
    # A stale lease from a dead holder exists; five candidates all see it expire at the same moment.
    dead = Candidate(store, clock, "dead").start()
    await clock.run_for(0.0)
    await dead.cancel()
    cands = [Candidate(store, clock, f"c{i}").start() for i in range(5)]
    await clock.run_for(60.0)
    leaders = [c for c in cands if c.elector.is_leader]
    assert len(leaders) == 1
    assert sum(c.started for c in cands) == 1
    assert spec(store)["leaseTransitions"] == 1
    for c in cands:
        await c.cancel()


def test_config_is_validated(store: LeaseStore) -> None:
    lock = LeaseLock(StoreClient(store), namespace=NS, name=NAME, identity="x")

    async def lead() -> None:
        return None

    with pytest.raises(ValueError):
        LeaderElector(lock, on_started_leading=lead, lease_duration=10, renew_deadline=10)
    with pytest.raises(ValueError):
        LeaderElector(lock, on_started_leading=lead, renew_deadline=2.0, retry_period=2.0)
    with pytest.raises(ValueError):
        LeaderElector(lock, on_started_leading=lead, lease_duration=0.5, renew_deadline=0.2, retry_period=0.1)
    with pytest.raises(ValueError):
        LeaseLock(StoreClient(store), namespace=NS, name=NAME, identity="")


def test_micro_time_format() -> None:
    assert micro_time(1704164645.25) == "2024-01-02T03:04:05.250000Z"
