"""The scheduling queue, black-box with a fake clock."""

from __future__ import annotations

import asyncio

import pytest

from kubecore.client.clock import FakeClock, settle
from kubecore.scheduler import events as ev
from kubecore.scheduler.events import ActionType, ClusterEvent, QueueingHint
from kubecore.scheduler.interface import NominatingInfo
from kubecore.scheduler.plugins.gates import SchedulingGates
from kubecore.scheduler.podinfo import Obj, QueuedPodInfo
from kubecore.scheduler.queue import ACTIVE, BACKOFF, UNSCHEDULABLE, QueueError, QueueProfile, SchedulingQueue
from tests.unit.scheduler.helpers import node, pod

NODE_ADD = ClusterEvent(ev.NODE, ActionType.ADD)


def only_big_nodes(p: Obj, old: object, new: object) -> QueueingHint:
    cpu = ((new or {}).get("status") or {}).get("allocatable", {}).get("cpu", "0") if isinstance(new, dict) else "0"
    return QueueingHint.QUEUE if int(cpu) >= 8 else QueueingHint.SKIP


def make_queue(clock: FakeClock, **kw: object) -> SchedulingQueue:
    gates = SchedulingGates()
    hints = [(e.event, "SchedulingGates", e.hint) for e in gates.events_to_register()]
    hints += [(NODE_ADD, "Fit", None), (ClusterEvent(ev.POD, ActionType.DELETE), "Ports", None),
              (ClusterEvent(ev.NODE, ActionType.UPDATE_NODE_LABEL), "Picky", only_big_nodes),
              (NODE_ADD, "Picky", only_big_nodes)]
    return SchedulingQueue(profiles={"default-scheduler": QueueProfile(pre_enqueue=[gates], hints=hints)},
                           clock=clock, **kw)  # type: ignore[arg-type]


def fail(q: SchedulingQueue, p: QueuedPodInfo, *plugins: str, pending: tuple[str, ...] = ()) -> str:
    p.unschedulable_plugins = set(plugins)
    p.pending_plugins = set(pending)
    return q.add_unschedulable_if_not_present(p)


def keys(ps: list[QueuedPodInfo]) -> list[str]:
    return [p.key for p in ps]


def test_priority_first_then_arrival() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    for name, prio in [("a", 0), ("b", 10), ("c", 0), ("d", 10)]:
        q.add(pod(name, priority=prio))
        clock.advance(0.001)
    assert keys(q.pop_batch(10)) == ["default/b", "default/d", "default/a", "default/c"]
    assert q.pop() is None and q.scheduling_cycle == 4


def test_update_of_an_active_pod_reorders_it() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    q.add(pod("a"))
    q.add(pod("b"))
    q.update(pod("b"), pod("b", priority=5))
    assert keys(q.pop_batch(2)) == ["default/b", "default/a"]


@pytest.mark.parametrize("attempts, backoff", [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 10.0), (6, 10.0)])
def test_backoff_doubles_from_one_second_to_ten(attempts: int, backoff: float) -> None:
    clock = FakeClock()
    q = make_queue(clock)
    q.add(pod("a"))
    for _ in range(attempts - 1):  # earlier attempts: fail, wait the backoff out, pop again
        p = q.pop()
        assert p is not None
        fail(q, p)
        clock.advance(q.backoff_duration(p.attempts))
    p = q.pop()
    assert p is not None and p.attempts == attempts
    assert fail(q, p) == BACKOFF  # an error (no rejecting plugin) always backs off
    clock.advance(backoff - 0.001)
    assert q.pop() is None and q.where("default/a") == BACKOFF
    clock.advance(0.001)
    again = q.pop()
    assert again is not None and again.key == "default/a"


def test_unschedulable_pods_move_only_on_events_their_plugins_registered() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    q.add(pod("fit"))
    q.add(pod("ports"))
    q.add(pod("picky"))
    p_fit, p_ports, p_picky = q.pop_batch(3)
    assert fail(q, p_fit, "Fit") == UNSCHEDULABLE
    assert fail(q, p_ports, "Ports") == UNSCHEDULABLE
    assert fail(q, p_picky, "Picky") == UNSCHEDULABLE
    q.assigned_pod_deleted(pod("gone", node_name="n1"))  # Pod/Delete: only "Ports" registered it
    assert q.where("default/ports") == BACKOFF and q.where("default/fit") == UNSCHEDULABLE
    q.node_added(node("small", cpu="2"))  # Fit: always; Picky: its hint says SKIP for a small node
    assert q.where("default/fit") == BACKOFF and q.where("default/picky") == UNSCHEDULABLE
    clock.advance(5)  # backoff over before the next event: straight to activeQ
    q.node_updated(node("big", cpu="16"), node("big", cpu="16", labels={"x": "y"}))
    assert q.where("default/picky") == ACTIVE


def test_pending_plugin_requeues_immediately() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    q.add(pod("a"))
    p = q.pop()
    assert p is not None
    assert fail(q, p, pending=("Fit",)) == UNSCHEDULABLE
    q.node_added(node("n"))
    assert q.where("default/a") == ACTIVE  # no backoff although it failed a moment ago


def test_unschedulable_pods_are_flushed_after_five_minutes() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    q.add(pod("a"))
    p = q.pop()
    assert p is not None and fail(q, p, "Fit") == UNSCHEDULABLE
    clock.advance(299)
    assert q.pop() is None
    clock.advance(31)  # > 5 min, and a 30 s flush tick has passed
    again = q.pop()
    assert again is not None and again.key == "default/a"


def test_scheduling_gates_hold_a_pod_until_the_last_gate_goes() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    gated = pod("g", schedulingGates=[{"name": "a"}, {"name": "b"}])
    q.add(gated)
    assert q.pop() is None
    assert q.counts() == {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 1}
    one_left = pod("g", schedulingGates=[{"name": "b"}])
    q.update(gated, one_left)
    assert q.counts()["gated"] == 1
    clock.advance(400)  # gated pods are not flushed
    assert q.pop() is None
    q.node_added(node("n"))  # not an event the gating plugin registered
    assert q.pop() is None
    q.update(one_left, pod("g"))
    p = q.pop()
    assert p is not None and p.key == "default/g" and q.counts()["gated"] == 0


def test_gate_message_is_upstreams() -> None:
    st = SchedulingGates().pre_enqueue(pod("g", schedulingGates=[{"name": "a"}, {"name": "b"}]))
    assert st is not None and st.message() == "waiting for scheduling gates: [a b]"


def test_event_during_a_cycle_is_not_lost() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    q.add(pod("a"))
    q.add(pod("b"))
    a = q.pop()
    assert a is not None
    q.node_added(node("n1"))  # while "a" is in flight: recorded
    b = q.pop()
    assert b is not None
    # "a" failed because of Fit: the node that arrived meanwhile may help: not parked.
    assert fail(q, a, "Fit") == BACKOFF
    # "b" was popped after the event: it has nothing to replay.
    assert fail(q, b, "Fit") == UNSCHEDULABLE


def test_in_flight_events_are_dropped_when_no_one_needs_them() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    q.add(pod("a"))
    a = q.pop()
    assert a is not None
    q.node_added(node("n1"))
    q.done(a.key)
    assert q._inflight.recorded == 0  # noqa: SLF001 - the bound the design promises
    q.node_added(node("n2"))  # nothing in flight: nothing recorded
    assert q._inflight.recorded == 0  # noqa: SLF001


def test_an_update_of_an_in_flight_pod_is_replayed() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    q.add(pod("g"))
    p = q.pop()
    assert p is not None
    q.update(pod("g", schedulingGates=[{"name": "x"}]), pod("g"))  # gates eliminated while in flight
    assert fail(q, p, "SchedulingGates") == BACKOFF


def test_activate_and_delete() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    q.add(pod("a"))
    q.add(pod("b"))
    a, b = q.pop_batch(2)
    fail(q, a, "Fit")
    q.activate([pod("a")])
    assert q.where("default/a") == ACTIVE
    q.activate([pod("b")])  # in flight: remembered as an event for it
    assert fail(q, b, "Fit") == BACKOFF
    q.delete(pod("a"))
    q.delete(pod("b"))
    assert len(q) == 0


def test_adding_back_a_queued_pod_is_an_error() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    q.add(pod("a"))
    stray = QueuedPodInfo(pod("a"), timestamp=clock.now())  # the same pod, handed back twice
    with pytest.raises(QueueError, match="already present in the active queue"):
        q.add_unschedulable_if_not_present(stray)


def test_an_add_for_a_pod_in_flight_does_not_queue_it_twice() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    q.add(pod("a"))
    p = q.pop()
    assert p is not None
    q.add(pod("a"))  # a relist while it is being scheduled
    assert q.pop() is None


def test_nominated_pods() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    p = pod("a", priority=5)
    p["status"] = {"nominatedNodeName": "n1"}
    q.add(p)
    assert [x["metadata"]["name"] for x in q.nominator.pods_for_node("n1")] == ["a"]
    q.add_nominated_pod(p, NominatingInfo("n2"))
    assert q.nominator.pods_for_node("n1") == [] and q.nominator.node_of("default/a") == "n2"
    assert [k for k, _, _ in q.nominator.higher_or_equal(5, exclude="x")] == ["default/a"]
    assert q.nominator.higher_or_equal(6, exclude="x") == []
    q.delete(p)
    assert not q.nominator


async def test_pop_wait_sleeps_until_an_add_or_a_backoff_expiry() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    got: list[str] = []

    async def consumer() -> None:
        while True:
            got.append((await q.pop_wait()).key)

    task = asyncio.create_task(consumer())
    await settle()
    q.add(pod("a"))
    await settle()
    assert got == ["default/a"]
    p = q.get("default/a")
    assert p is None  # popped
    inflight = q.in_flight()
    assert inflight == ["default/a"]
    q.add(pod("b"))
    await settle()
    assert got == ["default/a", "default/b"]
    task.cancel()


async def test_pop_wait_wakes_at_the_backoff_deadline() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    q.add(pod("a"))
    p = q.pop()
    assert p is not None and fail(q, p) == BACKOFF
    waiter = asyncio.create_task(q.pop_wait())
    await settle()
    assert not waiter.done()
    await clock.step(0.5)
    assert not waiter.done()
    await clock.step(0.5)
    assert waiter.done() and waiter.result().key == "default/a"


def test_pod_events_visit_only_the_pods_they_can_concern() -> None:
    """A new pending pod or a bound pod offers its event only to the pool's pods that event can
    move (the pool's indexes); the outcome is the same as offering it to every pod."""
    clock = FakeClock()
    adds = ClusterEvent(ev.POD, ActionType.ADD)
    hints = [(NODE_ADD, "Fit", None), (adds, "Gang", None)]
    q = SchedulingQueue(profiles={"default-scheduler": QueueProfile(pre_enqueue=[], hints=hints)}, clock=clock)
    for name in ("fit", "gang", "spread"):
        q.add(pod(name))
    popped = {p.key: p for p in q.pop_batch(3)}
    assert fail(q, popped["default/fit"], "Fit") == UNSCHEDULABLE
    assert fail(q, popped["default/gang"], "Gang") == UNSCHEDULABLE
    assert fail(q, popped["default/spread"], "PodTopologySpread") == UNSCHEDULABLE
    pool = q._unschedulable
    assert list(pool.on_pod_add) == ["default/gang"] and list(pool.on_topology) == ["default/spread"]
    q.add(pod("newcomer"))  # Pod/Add: only the gang member's plugin listens
    assert q.where("default/gang") == BACKOFF and q.where("default/fit") == UNSCHEDULABLE
    assert list(pool.on_pod_add) == [] and "default/gang" not in pool


def test_in_flight_events_stay_exact_across_compaction() -> None:
    from kubecore.scheduler.inflight import InFlight

    f = InFlight()
    f.pop("old")
    for i in range(3000):
        f.add_event(ev.EVENT_ASSIGNED_POD_DELETE, None, {"i": i})
        if i == 1999:
            f.pop("late")  # seq 2002: sees the last 1000 events
    f.done("old")  # the first 2000 events are needed by nobody: dropped (compacted)
    assert f.recorded == 1000
    assert [e[3]["i"] for e in f.events_for("late")] == list(range(2000, 3000))
    f.pop("newest")
    f.add_event(ev.EVENT_ASSIGNED_POD_DELETE, None, {"i": "x"})
    assert [e[3]["i"] for e in f.events_for("newest")] == ["x"]
    f.done("late")
    f.done("newest")
    assert f.recorded == 0 and f.events_for("late") == []


async def test_every_waiter_wakes_on_an_add_and_a_cancelled_one_leaves_nothing_behind() -> None:
    q = make_queue(FakeClock())
    waiters = [asyncio.ensure_future(q.wait_ready()) for _ in range(2)]
    gone = asyncio.ensure_future(q.wait_ready())
    await asyncio.sleep(0)
    gone.cancel()
    await asyncio.sleep(0)
    assert len(q._wakeup) == 2  # noqa: SLF001 - the cancelled waiter was dropped
    q.add(pod("a"))
    await asyncio.wait_for(asyncio.gather(*waiters), 5)
    assert q._wakeup == []  # noqa: SLF001


def test_a_pod_whose_gate_holds_is_not_offered_to_hints() -> None:
    """A gated pod that hears an event its gating plugin registered for: while the gate holds, the
    rejecting plugins' hints are not run (the pod would end gated in the pool anyway); once the
    gate opens, the next such event requeues it."""
    clock = FakeClock()
    calls: list[str] = []

    class Hold:
        name = "Hold"
        closed = True

        def pre_enqueue(self, p: Obj) -> object:
            from kubecore.scheduler.status import Code, Status
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "held") if self.closed else None

    def counting(p: Obj, old: object, new: object) -> QueueingHint:
        calls.append(p["metadata"]["name"])
        return QueueingHint.QUEUE

    hold = Hold()
    deleted = ClusterEvent(ev.POD, ActionType.DELETE)
    q = SchedulingQueue(profiles={"default-scheduler": QueueProfile(
        pre_enqueue=[hold], hints=[(deleted, "Hold", lambda p, o, n: QueueingHint.SKIP), (deleted, "Fit", counting)])},  # type: ignore[list-item]
        clock=clock)
    hold.closed = False
    q.add(pod("p"))
    p = q.pop()
    assert p is not None
    hold.closed = True
    fail(q, p, "Fit")
    clock.advance(5)
    q.move_all_to_active_or_backoff(ev.EVENT_ASSIGNED_POD_DELETE, pod("victim", node_name="n"), None)
    assert q.counts()["gated"] == 1 and calls == ["p"], "the first event finds the gate closed"
    for _ in range(3):
        q.move_all_to_active_or_backoff(ev.EVENT_ASSIGNED_POD_DELETE, pod("victim", node_name="n"), None)
    assert calls == ["p"] and q.counts()["gated"] == 1
    hold.closed = False
    q.move_all_to_active_or_backoff(ev.EVENT_ASSIGNED_POD_DELETE, pod("victim", node_name="n"), None)
    assert calls == ["p", "p"] and q.counts()["active"] == 1


# ---- SchedulerPopFromBackoffQ (pop_from_backoff=True) ---------------------------------------------

def _rejected(q: SchedulingQueue, name: str, plugin: str = "Fit", **kw: object) -> QueuedPodInfo:
    """`name` added, popped, rejected by `plugin`, then woken by a node add while backing off."""
    q.add(pod(name, **kw))  # type: ignore[arg-type]
    p = q.pop()
    assert p is not None and p.key == f"default/{name}"
    assert fail(q, p, plugin) == UNSCHEDULABLE
    q.node_added(node("n"))
    assert q.where(p.key) == BACKOFF
    return p


def test_pop_from_backoff_takes_a_backing_off_pod_when_active_is_empty() -> None:
    clock = FakeClock(1000.25)
    q = make_queue(clock, pop_from_backoff=True)
    p = _rejected(q, "a")
    q.add(pod("b"))
    assert keys(q.pop_batch(1)) == ["default/b"]  # activeQ first
    again = q.pop()  # activeQ empty: backoffQ's head, though its backoff has not ended
    assert again is p and again.attempts == 2 and sorted(q.in_flight()) == ["default/a", "default/b"]
    assert q.pop() is None


def test_pop_from_backoff_leaves_pods_that_failed_with_an_error() -> None:
    clock = FakeClock(1000.25)
    q = make_queue(clock, pop_from_backoff=True)
    q.add(pod("a"))
    p = q.pop()
    assert p is not None and fail(q, p) == BACKOFF  # an error: upstream's podErrorBackoffQ
    assert q.pop() is None and q.where("default/a") == BACKOFF
    assert q.next_wakeup() == 1002.0  # expiry window 1001 (1000.25 + 1 s, truncated), released at 1002
    clock.set(1001.999)
    assert q.pop() is None
    clock.set(1002.0)
    assert keys(q.pop_batch(5)) == ["default/a"]


def test_backoff_windows_order_a_window_by_priority() -> None:
    clock = FakeClock(1000.0)
    q = make_queue(clock, pop_from_backoff=True)
    low = _rejected(q, "low", priority=0)
    clock.advance(0.5)  # same window (1001) although it failed later
    high = _rejected(q, "high", priority=10)
    assert low.backoff_expiration == high.backoff_expiration == 1001.0
    assert keys(q.pop_batch(5)) == ["default/high", "default/low"]


def test_backoff_windows_release_at_the_next_window() -> None:
    clock = FakeClock(1000.5)
    q = make_queue(clock, pop_from_backoff=True)
    p = _rejected(q, "a")
    assert p.backoff_expiration == 1001.0
    clock.set(1001.75)  # past 1000.5 + 1 s, but still in the expiry's window
    q.flush_backoff_completed()
    assert q.where(p.key) == BACKOFF
    clock.set(1002.0)
    q.flush_backoff_completed()
    assert q.where(p.key) == ACTIVE


def test_pop_from_backoff_runs_pre_enqueue_on_the_way_in() -> None:
    clock = FakeClock(1000.0)
    q = make_queue(clock, pop_from_backoff=True)
    p = _rejected(q, "a")
    assert q.pop() is p  # (back in flight)
    gated = pod("a")
    gated["spec"]["schedulingGates"] = [{"name": "hold"}]
    p.update(gated)
    p.unschedulable_plugins = {"Fit"}
    q.activate([gated])  # a wildcard event for the pod in flight: it comes back AFTER_BACKOFF
    assert q.add_unschedulable_if_not_present(p) == UNSCHEDULABLE  # gated on the way into backoffQ
    assert q.get("default/a") is p and p.gated and q.pop() is None


async def test_pop_wait_returns_for_a_backing_off_pod_with_pop_from_backoff() -> None:
    clock = FakeClock(1000.0)
    q = make_queue(clock, pop_from_backoff=True)
    waiter = asyncio.create_task(q.pop_wait())
    await settle()
    assert not waiter.done()
    p = _rejected(q, "a")  # popped synchronously before the waiter runs, then back in backoffQ
    await settle()
    assert waiter.done() and waiter.result() is p  # taken while still backing off
