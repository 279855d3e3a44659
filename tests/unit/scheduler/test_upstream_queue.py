"""Upstream's scheduling-queue tests, re-stated as data for kubecore's queue.

Source: kubernetes/kubernetes pkg/scheduler/backend/queue/scheduling_queue_test.go (upstream test
and case names are given in each test's docstring or case id). kubecore models upstream with
SchedulerQueueingHints on and SchedulerPopFromBackoffQ off (see queue.py's docstring); cases for
the latter, for metrics kubecore does not record and for features it lacks are left out (listed
in the parity report). Upstream's plugin names, hint maps, pods and expected queues carry over;
where upstream sets queue internals directly (a pod put straight into a sub-queue), these tests
do the same through the queue's private tables.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

import pytest

from kubecore.client.clock import FakeClock, settle
from kubecore.scheduler import events as ev
from kubecore.scheduler.events import ActionType, ClusterEvent, QueueingHint, QueueingHintFn
from kubecore.scheduler.interface import NominatingInfo, NominatingMode
from kubecore.scheduler.plugins.gates import SchedulingGates
from kubecore.scheduler.podinfo import Obj, QueuedPodInfo, pod_key
from kubecore.scheduler.queue import (ACTIVE, BACKOFF, UNSCHEDULABLE, QueueClosed, QueueProfile, SchedulingQueue,
                                      Strategy)
from kubecore.scheduler.status import Code, Status
from tests.unit.scheduler.helpers import pod

# ---- upstream's fixtures ----------------------------------------------------------------------

NODE_ADD = ev.EVENT_NODE_ADD
PV_ADD = ClusterEvent(ev.PERSISTENT_VOLUME, ActionType.ADD)
PV_UPDATE = ClusterEvent(ev.PERSISTENT_VOLUME, ActionType.UPDATE)
PVC_ADD = ClusterEvent(ev.PERSISTENT_VOLUME_CLAIM, ActionType.ADD)
CSI_NODE_UPDATE = ClusterEvent(ev.CSI_NODE, ActionType.UPDATE)
ASSIGNED_POD_ADD = ev.EVENT_ASSIGNED_POD_ADD
UNSCHED_POD_UPDATE = ev.EVENT_UNSCHEDULED_POD_UPDATE
TIMEOUT = ev.EVENT_UNSCHEDULABLE_TIMEOUT

LOW, MID, HIGH = 0, 100, 1000
MEDIUM = (LOW + HIGH) // 2
INITIAL_BACKOFF, MAX_BACKOFF, MAX_IN_UNSCHEDULABLE = 1.0, 10.0, 300.0

Hints = list[tuple[ClusterEvent, str, QueueingHintFn | None]]


def queue_hint(p: Obj, old: object, new: object) -> QueueingHint:
    return QueueingHint.QUEUE


def skip_hint(p: Obj, old: object, new: object) -> QueueingHint:
    return QueueingHint.SKIP


def mk(name: str, namespace: str = "default", *, priority: int = 0, nominated: str = "",
       annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None, **kw: Any) -> Obj:
    p = pod(name, namespace=namespace, priority=priority, annotations=annotations, labels=labels, **kw)
    if nominated:
        p["status"] = {"nominatedNodeName": nominated}
    return p


def hpp() -> Obj:  # highPriorityPodInfo
    return mk("hpp", "ns1", priority=HIGH)


def hpp_nominated() -> Obj:  # highPriNominatedPodInfo
    return mk("hpp", "ns1", priority=HIGH, nominated="node1")


def mpp() -> Obj:  # medPriorityPodInfo
    return mk("mpp", "ns2", priority=MEDIUM, nominated="node1", annotations={"annot2": "val2"})


def up() -> Obj:  # unschedulablePodInfo
    return mk("up", "ns1", priority=LOW, nominated="node1", annotations={"annot2": "val2"})


def clone(p: Obj, name: str) -> Obj:  # upstream clonePod
    out = copy.deepcopy(p)
    out["metadata"]["name"] = name
    out["metadata"]["uid"] = name + out["metadata"]["namespace"]
    return out


class Allowlist:
    """Upstream's test preEnqueuePlugin: admits a pod carrying a label named in `allowlists`."""

    name = "preEnqueuePlugin"

    def __init__(self, allowlists: list[str] | None = None, name: str = "preEnqueuePlugin") -> None:
        self.allowlists = list(allowlists or [])
        self.name = name

    def pre_enqueue(self, p: Obj) -> Status | None:
        labels = (p.get("metadata") or {}).get("labels") or {}
        if any(label in self.allowlists for label in labels):
            return None
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "pod name not in allowlists")


def make_queue(clock: FakeClock | None = None, hints: Hints | None = None, pre_enqueue: list[Any] | None = None,
               **kw: Any) -> SchedulingQueue:
    profile = QueueProfile(pre_enqueue=list(pre_enqueue or []), hints=list(hints or []))
    return SchedulingQueue(profiles={"default-scheduler": profile}, clock=clock or FakeClock(), **kw)


def key(p: Obj) -> str:
    return pod_key(p)


def pop(q: SchedulingQueue, expected: Obj) -> QueuedPodInfo:
    p = q.pop()
    assert p is not None and p.key == key(expected), f"popped {p}, want {key(expected)}"
    return p


def requeue(q: SchedulingQueue, p: QueuedPodInfo, *plugins: str, pending: tuple[str, ...] = (),
            latest: Obj | None = None) -> str:
    """The failure path: the cycle's rejecting plugins, then AddUnschedulableIfNotPresent."""
    p.unschedulable_plugins = set(plugins)
    p.pending_plugins = set(pending)
    return q.add_unschedulable_if_not_present(p, latest=latest)


def fail_fresh(q: SchedulingQueue, p: Obj, *plugins: str) -> QueuedPodInfo:
    """Add, pop and requeue `p` with `plugins` (upstream: Add, Pop, AddUnschedulableIfNotPresent)."""
    q.add(p)
    popped = pop(q, p)
    requeue(q, popped, *plugins)
    return popped


def in_pool(q: SchedulingQueue, p: QueuedPodInfo) -> None:
    """Upstream unschedulablePods.addOrUpdate: straight into the pool."""
    q._unschedulable[p.key] = p  # noqa: SLF001


def in_active(q: SchedulingQueue, p: QueuedPodInfo) -> None:
    """Upstream activeQ.add: straight into activeQ."""
    q._push_active(p)  # noqa: SLF001


def in_backoff(q: SchedulingQueue, p: QueuedPodInfo) -> None:
    """Upstream backoffQ.add: straight into backoffQ."""
    q._move_to_backoff(p)  # noqa: SLF001


def gated(p: QueuedPodInfo, plugin: str, events: list[ClusterEvent]) -> QueuedPodInfo:
    """Upstream setQueuedPodInfoGated."""
    p.gating_plugin = plugin
    p.unschedulable_plugins = {plugin}
    p.gating_plugin_events = events
    return p


def active_keys(q: SchedulingQueue) -> set[str]:
    return set(q._active)  # noqa: SLF001


def backoff_keys(q: SchedulingQueue) -> set[str]:
    return set(q._backoff)  # noqa: SLF001


def pool_keys(q: SchedulingQueue) -> set[str]:
    return set(q._unschedulable)  # noqa: SLF001


def timeline(q: SchedulingQueue) -> list[str | ClusterEvent]:
    return q._inflight.timeline()  # noqa: SLF001


def nominations(q: SchedulingQueue) -> dict[str, list[str]]:
    """Upstream nominator.nominatedPods as node -> pod keys."""
    out: dict[str, list[str]] = {}
    for k in q.nominator._node_of:  # noqa: SLF001
        out.setdefault(q.nominator.node_of(k) or "", []).append(k)
    return out


# ---- adding and popping -------------------------------------------------------------------------

def test_priority_queue_add() -> None:
    """TestPriorityQueue_Add: nominated pods are recorded on Add; pops go by priority."""
    q = make_queue()
    for p in (mpp(), up(), hpp()):
        q.add(p)
    assert nominations(q) == {"node1": ["ns2/mpp", "ns1/up"]}
    pop(q, hpp())
    pop(q, mpp())
    pop(q, up())
    assert len(q.nominator.pods_for_node("node1")) == 2, "popped pods stay nominated"


def test_priority_queue_add_with_reverse_priority_less_func() -> None:
    """TestPriorityQueue_AddWithReversePriorityLessFunc."""
    q = make_queue()
    q.add(mpp())
    q.add(hpp())
    pop(q, hpp())
    pop(q, mpp())


# ---- Test_InFlightPods ----------------------------------------------------------------------------

POD1, POD2, POD3 = mk("targetpod"), mk("targetpod2"), mk("targetpod3")
PODS = {"pod1": POD1, "pod2": POD2, "pod3": POD3}
Q_FOO1 = ("fooPlugin1", queue_hint)

Action = tuple[Any, ...]


def _hints(table: dict[ClusterEvent, list[tuple[str, QueueingHintFn]]]) -> Hints:
    return [(e, plugin, fn) for e, fns in table.items() for plugin, fn in fns]


IN_FLIGHT_CASES: list[tuple[str, Hints, list[str], list[Action], dict[str, Any]]] = [
    ("Pod and interested events are registered in inFlightPods/inFlightEvents",
     _hints({PV_ADD: [Q_FOO1]}), ["pod1"],
     [("event", PVC_ADD), ("pop", "pod1"), ("event", PV_ADD), ("event", PV_UPDATE)],
     {"in_flight": ["pod1"], "timeline": ["pod1", PV_ADD]}),
    ("Pod, registered in inFlightPods, is enqueued back to backoffQ",
     _hints({PV_ADD: [Q_FOO1], NODE_ADD: [Q_FOO1], PVC_ADD: [Q_FOO1]}), ["pod1", "pod2"],
     [("event", PVC_ADD), ("pop", "pod1"), ("event", PV_ADD), ("pop", "pod2"), ("event", NODE_ADD),
      ("enqueue", "pod1", (), ())],
     {"backoff": ["pod1"], "in_flight": ["pod2"], "timeline": ["pod2", NODE_ADD]}),
    ("All Pods registered in inFlightPods are enqueued back to activeQ",
     _hints({PV_ADD: [Q_FOO1], NODE_ADD: [Q_FOO1], PVC_ADD: [Q_FOO1], CSI_NODE_UPDATE: [Q_FOO1]}), ["pod1", "pod2"],
     [("event", PVC_ADD), ("pop", "pod1"), ("event", PV_ADD), ("pop", "pod2"), ("event", NODE_ADD),
      ("enqueue", "pod1", (), ()), ("event", CSI_NODE_UPDATE), ("enqueue", "pod2", (), ())],
     {"backoff": ["pod1", "pod2"], "in_flight": [], "timeline": []}),
    ("One intermediate Pod registered in inFlightPods is enqueued back to activeQ",
     _hints({PV_ADD: [Q_FOO1], NODE_ADD: [Q_FOO1], ASSIGNED_POD_ADD: [Q_FOO1]}), ["pod1", "pod2", "pod3"],
     [("event", PVC_ADD), ("pop", "pod1"), ("event", PV_ADD), ("pop", "pod2"), ("event", NODE_ADD),
      ("pop", "pod3"), ("event", ASSIGNED_POD_ADD), ("enqueue", "pod2", (), ())],
     {"backoff": ["pod2"], "in_flight": ["pod1", "pod3"],
      "timeline": ["pod1", PV_ADD, NODE_ADD, "pod3", ASSIGNED_POD_ADD]}),
    ("events before popping Pod are ignored when Pod is enqueued back to queue",
     _hints({ASSIGNED_POD_ADD: [("fooPlugin1", skip_hint)]}), ["pod1"],
     [("event", TIMEOUT), ("pop", "pod1"), ("event", ASSIGNED_POD_ADD), ("enqueue", "pod1", ("fooPlugin1",), ())],
     {"unschedulable": ["pod1"], "in_flight": [], "timeline": []}),
    ("pod is enqueued to backoff if no failed plugin",
     _hints({ASSIGNED_POD_ADD: [Q_FOO1]}), ["pod1"],
     [("pop", "pod1"), ("event", ASSIGNED_POD_ADD), ("enqueue", "pod1", (), ())],
     {"backoff": ["pod1"], "in_flight": [], "timeline": []}),
    ("pod is enqueued to unschedulable pod pool if no events that can make the pod schedulable",
     _hints({ASSIGNED_POD_ADD: [Q_FOO1]}), ["pod1"],
     [("pop", "pod1"), ("event", NODE_ADD), ("enqueue", "pod1", ("fooPlugin1",), ())],
     {"unschedulable": ["pod1"], "in_flight": [], "timeline": []}),
    ("pod is enqueued to unschedulable pod pool because the failed plugin has a hint fn but it returns Skip",
     _hints({ASSIGNED_POD_ADD: [("fooPlugin1", skip_hint)]}), ["pod1"],
     [("pop", "pod1"), ("event", ASSIGNED_POD_ADD), ("enqueue", "pod1", ("fooPlugin1",), ())],
     {"unschedulable": ["pod1"], "in_flight": [], "timeline": []}),
    ("pod is enqueued to activeQ because the Pending plugins has a hint fn and it returns Queue",
     _hints({ASSIGNED_POD_ADD: [("fooPlugin3", skip_hint), ("fooPlugin2", queue_hint), ("fooPlugin1", queue_hint)]}),
     ["pod1"],
     [("pop", "pod1"), ("event", ASSIGNED_POD_ADD), ("enqueue", "pod1", ("fooPlugin2", "fooPlugin3"), ("fooPlugin1",))],
     {"active": ["pod1"], "in_flight": [], "timeline": []}),
    ("pod is enqueued to backoffQ because the failed plugin has a hint fn and it returns Queue",
     _hints({ASSIGNED_POD_ADD: [("fooPlugin2", skip_hint), ("fooPlugin1", queue_hint)]}), ["pod1"],
     [("pop", "pod1"), ("event", ASSIGNED_POD_ADD), ("enqueue", "pod1", ("fooPlugin1", "fooPlugin2"), ())],
     {"backoff": ["pod1"], "in_flight": [], "timeline": []}),
    ("pod is enqueued to activeQ because the pending plugin has a hint fn and it returns Queue for a concurrent "
     "event that was received while some other pod was in flight",
     _hints({ASSIGNED_POD_ADD: [("fooPlugin3", skip_hint), ("fooPlugin2", queue_hint), ("fooPlugin1", queue_hint)]}),
     ["pod1", "pod2"],
     [("pop", "pod1"), ("event", NODE_ADD), ("pop", "pod2"), ("event", ASSIGNED_POD_ADD), ("enqueue", "pod1", (), ()),
      ("enqueue", "pod2", ("fooPlugin2", "fooPlugin3"), ("fooPlugin1",))],
     {"active": ["pod2"], "backoff": ["pod1"], "in_flight": [], "timeline": []}),
    # The bug simulated: pod1 pushed into activeQ while it is being scheduled; Pop drops it.
    ("Pop is made twice for the same Pod, but the cleanup still happen correctly",
     _hints({PV_ADD: [Q_FOO1], NODE_ADD: [Q_FOO1], PVC_ADD: [Q_FOO1], CSI_NODE_UPDATE: [Q_FOO1]}), ["pod1", "pod2"],
     [("event", PVC_ADD), ("pop", "pod1"), ("event", PV_ADD), ("pop", "pod2"), ("bug_push", "pod1"),
      ("create", "pod3"), ("pop", "pod3"), ("active_is_empty",), ("event", NODE_ADD), ("enqueue", "pod1", (), ()),
      ("event", CSI_NODE_UPDATE), ("enqueue", "pod2", (), ()), ("enqueue", "pod3", (), ())],
     {"backoff": ["pod1", "pod2", "pod3"], "in_flight": []}),
]


@pytest.mark.parametrize("name, hints, initial, actions, want", IN_FLIGHT_CASES, ids=[c[0] for c in IN_FLIGHT_CASES])
def test_in_flight_pods(name: str, hints: Hints, initial: list[str], actions: list[Action],
                        want: dict[str, Any]) -> None:
    """Test_InFlightPods (the cases with queueing hints on)."""
    clock = FakeClock()
    q = make_queue(clock, hints)
    for n in initial:
        q.add(PODS[n])
        clock.advance(1)
    popped: dict[str, QueuedPodInfo] = {}
    for action in actions:
        kind = action[0]
        if kind == "event":
            q.move_all_to_active_or_backoff(action[1])
        elif kind == "pop":
            popped[action[1]] = pop(q, PODS[action[1]])
        elif kind == "create":
            q.add(PODS[action[1]])
        elif kind == "bug_push":
            in_active(q, QueuedPodInfo(PODS[action[1]], timestamp=clock.now()))
        elif kind == "active_is_empty":
            assert not active_keys(q)
        else:
            requeue(q, popped[action[1]], *action[2], pending=action[3])
    names = {k: key(p) for k, p in PODS.items()}
    assert sorted(q.in_flight()) == sorted(names[n] for n in want["in_flight"])
    if "timeline" in want:
        assert timeline(q) == [names[e] if isinstance(e, str) else e for e in want["timeline"]]
    for queue_name, found in (("active", active_keys(q)), ("backoff", backoff_keys(q))):
        if queue_name in want:
            assert found == {names[n] for n in want[queue_name]}, queue_name
    for n in want.get("unschedulable", []):
        assert q.where(names[n]) == UNSCHEDULABLE


def test_popped_pod_preserves_unschedulable_and_pending_plugins() -> None:
    """Test_InFlightPods "popped pod preserves UnschedulablePlugins and PendingPlugins", and TestPop."""
    q = make_queue(hints=[(PV_ADD, "fooPlugin1", queue_hint)])
    q.add(POD1)
    p = pop(q, POD1)
    assert requeue(q, p, "fooPlugin2", pending=("fooPlugin1",)) == UNSCHEDULABLE
    q.move_all_to_active_or_backoff(PV_ADD)  # active again: a Pending plugin's Queue skips the backoff
    p = pop(q, POD1)
    assert set(p.unschedulable_plugins) == {"fooPlugin2"}
    assert set(p.pending_plugins) == {"fooPlugin1"}
    assert requeue(q, p) == BACKOFF  # failed with an error (no plugin): backoffQ


# ---- AddUnschedulableIfNotPresent -----------------------------------------------------------

def test_add_unschedulable_if_not_present() -> None:
    """TestPriorityQueue_AddUnschedulableIfNotPresent."""
    q = make_queue()
    q.add(up())
    p = pop(q, up())
    q.add(hpp_nominated())
    requeue(q, p, "plugin")
    pop(q, hpp_nominated())
    assert list(nominations(q)) == ["node1"]
    # No event happened during its cycle: the unschedulable pool.
    assert q.where(key(up())) == UNSCHEDULABLE and q.get(key(up())) is p


def test_add_unschedulable_if_not_present_backoff() -> None:
    """TestPriorityQueue_AddUnschedulableIfNotPresent_Backoff: pods in flight when a move request
    (here UnschedulableTimeout) arrives go to backoffQ when they come back unschedulable."""
    q = make_queue()
    pods = [mk(f"pod{i}", f"ns{i}", priority=i) for i in range(10)]
    for p in pods:
        q.add(p)
    popped = [pop(q, pods[i]) for i in range(9, 0, -1)]
    q.move_all_to_active_or_backoff(TIMEOUT)
    pop(q, pods[0])
    for pinfo in popped:
        requeue(q, pinfo, "plugin")
    for p in pods[1:]:
        assert q.where(key(p)) == BACKOFF, key(p)


def test_pop_only_from_active_q() -> None:
    """TestPriorityQueue_Pop "Pop pod only from activeQ when PopFromBackoffQ is disabled"."""
    q = make_queue()
    now = q.clock.now()
    q.add(mpp())
    backing_off = QueuedPodInfo(hpp(), timestamp=now)  # failed once, by "plugin"
    backing_off.unschedulable_plugins, backing_off.unschedulable_count = {"plugin"}, 1
    in_backoff(q, backing_off)
    erred = QueuedPodInfo(mk("hpp2", "ns1", priority=HIGH), timestamp=now)  # failed once, by an error
    erred.consecutive_errors_count = 1
    in_backoff(q, erred)
    rejected = QueuedPodInfo(up(), timestamp=now)
    rejected.unschedulable_plugins = {"plugin"}
    in_pool(q, rejected)
    got = []
    while (p := q.pop()) is not None:
        got.append(p.key)
    assert got == [key(mpp())]


# ---- Update -------------------------------------------------------------------------------------

QUEUE_PLUGIN, SKIP_PLUGIN = "queuePlugin", "skipPlugin"
UPDATE_HINTS: Hints = [(UNSCHED_POD_UPDATE, QUEUE_PLUGIN, queue_hint), (UNSCHED_POD_UPDATE, SKIP_PLUGIN, skip_hint)]


def annotated(p: Obj, value: str) -> Obj:
    out = copy.deepcopy(p)
    out["metadata"]["annotations"]["foo"] = value
    return out


def _update_not_in_queue(q: SchedulingQueue, clock: FakeClock) -> tuple[Obj, Obj]:
    return mpp(), annotated(mpp(), "test")


def _update_nominated(q: SchedulingQueue, clock: FakeClock) -> tuple[Obj, Obj]:
    return hpp(), hpp_nominated()


def _update_in_active(q: SchedulingQueue, clock: FakeClock) -> tuple[Obj, Obj]:
    q.add(hpp())
    return hpp(), hpp()


def _update_in_backoff(q: SchedulingQueue, clock: FakeClock) -> tuple[Obj, Obj]:
    q.add(mpp())
    requeue(q, pop(q, mpp()))
    return mpp(), mpp()


def _update_unschedulable(plugin: str, step: float) -> Callable[[SchedulingQueue, FakeClock], tuple[Obj, Obj]]:
    def prepare(q: SchedulingQueue, clock: FakeClock) -> tuple[Obj, Obj]:
        fail_fresh(q, mpp(), plugin)
        clock.advance(step)
        return mpp(), annotated(mpp(), "test1")
    return prepare


def _update_in_flight(q: SchedulingQueue, clock: FakeClock) -> tuple[Obj, Obj]:
    q.add(mpp())
    pop(q, mpp())
    return mpp(), annotated(mpp(), "bar")


UPDATE_CASES = [
    ("Update pod that didn't exist in the queue", _update_not_in_queue, ACTIVE, False),
    ("Update highPriorityPodInfo and add a nominatedNodeName to it", _update_nominated, ACTIVE, True),
    ("When updating a pod that is already in activeQ, the pod should remain in activeQ after Update()",
     _update_in_active, ACTIVE, False),
    ("When updating a pod that is in backoff queue and is still backing off, it will be updated in backoff queue",
     _update_in_backoff, BACKOFF, False),
    ("when updating a pod in unschedulablePods, if its backoff timer has not yet expired, it moves to backoffQ",
     _update_unschedulable(QUEUE_PLUGIN, 0), BACKOFF, False),
    ("when updating a pod in unschedulablePods, if its backoff timer has expired, it moves to activeQ",
     _update_unschedulable(QUEUE_PLUGIN, MAX_BACKOFF), ACTIVE, False),
    ("when updating a pod in unschedulablePods, if the scheduling hint returns QueueSkip, it remains in "
     "unschedulablePods", _update_unschedulable(SKIP_PLUGIN, 0), UNSCHEDULABLE, False),
    ("when updating a pod which is in flightPods, the pod will not be added to any queue", _update_in_flight, None,
     False),
]


@pytest.mark.parametrize("name, prepare, want, nominated", UPDATE_CASES, ids=[c[0] for c in UPDATE_CASES])
def test_update(name: str, prepare: Callable[[SchedulingQueue, FakeClock], tuple[Obj, Obj]], want: str | None,
                nominated: bool) -> None:
    """TestPriorityQueue_Update (with queueing hints)."""
    clock = FakeClock()
    q = make_queue(clock, UPDATE_HINTS)
    old, new = prepare(q, clock)
    q.update(old, new)
    assert q.where(key(new)) == want
    if want is not None:
        got = q.get(key(new))
        assert got is not None and got.pod == new
    if nominated:
        assert len(nominations(q)) == 1


def test_update_when_in_flight() -> None:
    """TestPriorityQueue_UpdateWhenInflight: an update during the cycle requeues the rejected pod."""
    q = make_queue(hints=[(UNSCHED_POD_UPDATE, "fakePlugin", queue_hint)])
    test_pod = mk("test-pod", "test-ns")
    q.add(test_pod)
    p = pop(q, test_pod)
    updated = mk("test-pod", "test-ns", tolerations=[{"key": "foo", "effect": "NoSchedule"}])
    q.update(test_pod, updated)
    requeue(q, p, "fakePlugin", latest=updated)
    assert q.where(key(updated)) == BACKOFF
    got = q.get(key(updated))
    assert got is not None and got.pod == updated


def test_delete() -> None:
    """TestPriorityQueue_Delete."""
    q = make_queue()
    q.update(hpp(), hpp_nominated())
    q.add(up())
    q.delete(hpp_nominated())
    assert q.where(key(up())) == ACTIVE
    assert q.where(key(hpp())) is None
    assert nominations(q) == {"node1": [key(up())]}
    q.delete(up())
    assert nominations(q) == {}


# ---- Activate -----------------------------------------------------------------------------------

def _activate_setup(where: str) -> Callable[[SchedulingQueue], None]:
    def setup(q: SchedulingQueue) -> None:
        if where == "active":
            q.add(hpp_nominated())
        elif where == "in-flight":
            q.add(hpp_nominated())
            pop(q, hpp_nominated())
        elif where == "other-in-flight":
            q.add(mpp())
            pop(q, mpp())
        elif where == "unschedulable":
            fail_fresh(q, hpp_nominated(), "plugin")
        elif where == "backoff":
            fail_fresh(q, hpp_nominated())
            assert q.where(key(hpp_nominated())) == BACKOFF
    return setup


ACTIVATE_CASES = [
    ("pod already in activeQ", "active", 1, False),
    ("pod not in unschedulablePods/backoffQ", "nowhere", 0, False),
    ("[QHint] pod not in unschedulablePods/backoffQ but in-flight", "in-flight", 0, True),
    ("[QHint] pod not in unschedulablePods/backoffQ and not in-flight", "other-in-flight", 0, False),
    ("pod in unschedulablePods", "unschedulable", 1, False),
    ("pod in backoffQ", "backoff", 1, False),
]


@pytest.mark.parametrize("name, where, active, event", ACTIVATE_CASES, ids=[c[0] for c in ACTIVATE_CASES])
def test_activate(name: str, where: str, active: int, event: bool) -> None:
    """TestPriorityQueue_Activate."""
    q = make_queue()
    _activate_setup(where)(q)
    recorded_before = list(timeline(q))
    q.activate([hpp_nominated()])
    assert len(active_keys(q)) == active
    if active:
        assert q.where(key(hpp_nominated())) == ACTIVE
    if event:  # the activation waits as an in-flight event (old None, new the pod)
        assert timeline(q) == [key(hpp_nominated()), ev.EVENT_FORCE_ACTIVATE]
        [(_, e, old, new)] = q._inflight.events_for(key(hpp_nominated()))  # noqa: SLF001
        assert (e, old, new) == (ev.EVENT_FORCE_ACTIVATE, None, hpp_nominated())
    else:
        assert timeline(q) == recorded_before


# ---- PreEnqueue: moveToActiveQ / moveToBackoffQ ---------------------------------------------------

# Upstream keys PreEnqueue plugins by name, and every test plugin is named "preEnqueuePlugin": of
# each case's plugin list only the last one is registered. These cases list that one.
MOVE_TO_ACTIVE_CASES = [
    ("no plugins registered", None, mk("p", labels={"p": ""}), ev.EVENT_UNSCHEDULED_POD_ADD.describe(), 0, True),
    ("preEnqueue plugin registered, pod name not in allowlists", [], mk("p", labels={"p": ""}),
     ev.EVENT_UNSCHEDULED_POD_ADD.describe(), 1, False),
    ("preEnqueue plugin registered, pod failed one preEnqueue plugin", ["foo"], mk("bar", labels={"bar": ""}),
     ev.EVENT_UNSCHEDULED_POD_ADD.describe(), 1, False),
    ("preEnqueue plugin registered, preEnqueue rejects the pod, even if it is after backoff", ["foo"],
     mk("bar", labels={"bar": ""}), ev.BACKOFF_COMPLETE, 1, False),
    ("preEnqueue plugin registered, pod failed one preEnqueue plugin when activated from unschedulablePods", ["foo"],
     mk("bar", labels={"bar": ""}), ev.FORCE_ACTIVATE, 1, False),
    ("preEnqueue plugin registered, pod passed all preEnqueue plugins", ["bar"], mk("bar", labels={"bar": ""}),
     ev.EVENT_UNSCHEDULED_POD_ADD.describe(), 0, True),
]


@pytest.mark.parametrize("name, allow, p, event, want_unschedulable, want_success", MOVE_TO_ACTIVE_CASES,
                         ids=[c[0] for c in MOVE_TO_ACTIVE_CASES])
def test_move_to_active_q(name: str, allow: list[str] | None, p: Obj, event: str, want_unschedulable: int,
                          want_success: bool) -> None:
    """TestPriorityQueue_moveToActiveQ (popFromBackoffQ disabled, or not moving from backoffQ)."""
    plugins = [] if allow is None else [Allowlist(allow)]
    q = make_queue(pre_enqueue=plugins, initial_backoff=30, max_backoff=60)
    pinfo = QueuedPodInfo(p, timestamp=q.clock.now())
    assert q._move_to_active(pinfo, event) is want_success  # noqa: SLF001
    assert len(pool_keys(q)) == want_unschedulable
    clone_ = copy.deepcopy(p)
    clone_["metadata"]["annotations"]["foo"] = ""
    q.update(p, clone_)  # an update event: a gated pod stays in the pool
    assert len(pool_keys(q)) == want_unschedulable


MOVE_TO_BACKOFF_CASES = [
    ("no plugins registered", None, mk("p", labels={"p": ""})),
    ("preEnqueue plugin registered, pod name would not be in allowlists", [], mk("p", labels={"p": ""})),
    ("preEnqueue plugin registered, preEnqueue plugin would reject the pod, but isn't run", ["foo"],
     mk("bar", labels={"bar": ""})),
    ("preEnqueue plugin registered, pod passed all preEnqueue plugins", ["bar"], mk("bar", labels={"bar": ""})),
]


@pytest.mark.parametrize("name, allow, p", MOVE_TO_BACKOFF_CASES, ids=[c[0] for c in MOVE_TO_BACKOFF_CASES])
def test_move_to_backoff_q(name: str, allow: list[str] | None, p: Obj) -> None:
    """TestPriorityQueue_moveToBackoffQ (popFromBackoffQ disabled: PreEnqueue does not run)."""
    q = make_queue(pre_enqueue=[] if allow is None else [Allowlist(allow)], initial_backoff=30, max_backoff=60)
    in_backoff(q, QueuedPodInfo(p, timestamp=q.clock.now()))
    assert q.where(key(p)) == BACKOFF and not pool_keys(q)


# ---- MoveAllToActiveOrBackoffQueue ----------------------------------------------------------------

def _with_hint_cases() -> list[tuple[str, Callable[[QueuedPodInfo], None], str, float, str]]:
    def pending(p: QueuedPodInfo) -> None:
        p.pending_plugins = {"foo"}

    def unschedulable(p: QueuedPodInfo) -> None:
        p.unschedulable_plugins = {"foo"}

    def gated_by_gates(p: QueuedPodInfo) -> None:
        gated(p, "SchedulingGates", [UNSCHED_POD_UPDATE])

    def gated_by_foo(p: QueuedPodInfo) -> None:
        gated(p, "foo", [NODE_ADD])

    return [
        ("Queue queues pod to activeQ", pending, "queue", 0, ACTIVE),
        ("Queue queues pod to backoffQ if Pod is backing off", unschedulable, "queue", 0, BACKOFF),
        ("Queue queues pod to activeQ if Pod is not backing off", unschedulable, "queue", INITIAL_BACKOFF + 1, ACTIVE),
        ("Skip queues pod to unschedulablePods", unschedulable, "skip", 0, UNSCHEDULABLE),
        ("QueueHintFunction is not called when Pod is gated by the plugin that isn't interested in the event",
         gated_by_gates, "must-not-run", 0, UNSCHEDULABLE),
        ("QueueHintFunction is called when Pod is gated by the plugin that is interested in the event",
         gated_by_foo, "queue", 0, BACKOFF),
    ]


WITH_HINT_CASES = _with_hint_cases()


@pytest.mark.parametrize("name, prepare, hint, duration, want", WITH_HINT_CASES, ids=[c[0] for c in WITH_HINT_CASES])
def test_move_all_with_queueing_hint(name: str, prepare: Callable[[QueuedPodInfo], None], hint: str,
                                     duration: float, want: str) -> None:
    """TestPriorityQueue_MoveAllToActiveOrBackoffQueueWithQueueingHint."""
    calls: list[str] = []

    def hint_fn(p: Obj, old: object, new: object) -> QueueingHint:
        calls.append(hint)
        return QueueingHint.SKIP if hint == "skip" else QueueingHint.QUEUE

    clock = FakeClock()
    q = make_queue(clock, [(NODE_ADD, "foo", hint_fn), (UNSCHED_POD_UPDATE, "SchedulingGates", queue_hint)],
                   pre_enqueue=[SchedulingGates(), Allowlist(["foo"], name="foo")])
    p1 = mk("pod1", "ns1", labels={"foo": "bar"})
    q.add(p1)
    p = pop(q, p1)
    p.unschedulable_plugins, p.pending_plugins = set(), set()
    prepare(p)
    q.add_unschedulable_if_not_present(p)
    clock.advance(duration)
    q.move_all_to_active_or_backoff(NODE_ADD)
    assert q.where(key(p1)) == want
    if hint == "must-not-run":
        assert calls == []


def test_move_all_to_active_or_backoff_queue() -> None:
    """TestPriorityQueue_MoveAllToActiveOrBackoffQueue."""
    clock = FakeClock()
    q = make_queue(clock, [(NODE_ADD, "fooPlugin", queue_hint)])
    u, h = up(), hpp()
    hpp1, hpp2 = clone(h, "hpp1"), clone(h, "hpp2")
    q.add(u)
    pu = pop(q, u)
    assert q.in_flight() == [key(u)]
    q.add(h)
    ph = pop(q, h)
    assert sorted(q.in_flight()) == sorted([key(u), key(h)])
    requeue(q, pu, "fooPlugin")
    requeue(q, ph, "fooPlugin")
    assert q.in_flight() == [] and timeline(q) == []
    q.add(hpp1)
    p1 = pop(q, hpp1)
    assert requeue(q, p1) == BACKOFF  # no plugin is associated with its failure
    q.add(hpp2)
    assert requeue(q, pop(q, hpp2), "barPlugin") == UNSCHEDULABLE
    q.move_all_to_active_or_backoff(NODE_ADD)  # moves up and hpp (fooPlugin) to backoffQ
    q.add(mpp())
    assert len(active_keys(q)) == 1
    pop(q, mpp())
    assert q.in_flight() == [key(mpp())]
    assert len(backoff_keys(q)) == 3  # hpp2 is not moved
    clock.advance(MAX_BACKOFF)
    for k in list(backoff_keys(q)):  # upstream popAllBackoffCompleted: taken out, not in flight
        q._drop(q._backoff, k)  # noqa: SLF001
    assert q.in_flight() == [key(mpp())]
    pods = {}
    for p in (u, h, hpp1):
        q.add(p)
        pods[key(p)] = pop(q, p)
    assert sorted(q.in_flight()) == sorted([key(mpp()), key(u), key(h), key(hpp1)])
    requeue(q, pods[key(u)], "fooPlugin")
    requeue(q, pods[key(h)], "fooPlugin")
    requeue(q, pods[key(hpp1)])
    assert q.in_flight() == [key(mpp())]
    # Upstream's Add queues mpp again although it is in flight (Pop would drop the duplicate while
    # it is, and scheduleOne skips an assumed pod). kubecore's add ignores a pod in flight (it has
    # no skipPodSchedule): mpp is missing from the active counts below (upstream: 1, then 4).
    q.add(mpp())
    for p in (u, h, hpp2):
        assert q.where(key(p)) == UNSCHEDULABLE
    assert q.where(key(hpp1)) == BACKOFF
    assert len(active_keys(q)) == 1 - 1
    clock.advance(MAX_BACKOFF)
    q.flush_backoff_completed()
    q.move_all_to_active_or_backoff(NODE_ADD)
    assert len(active_keys(q)) == 4 - 1
    assert backoff_keys(q) == set()
    assert q.in_flight() == [key(mpp())]
    assert pool_keys(q) == {key(hpp2)}  # hpp2 is not moved regardless of its backoff timer


ASSIGNED_POD_HINT_PLUGINS = ("fakePlugin", "InterPodAffinity", "PodTopologySpread")
AFFINITY = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchExpressions": [{"key": "service", "operator": "Exists"}]}, "topologyKey": "region"}]}}
SPREAD = [{"maxSkew": 1, "topologyKey": "node", "whenUnsatisfiable": "DoNotSchedule"}]


def afp() -> Obj:
    return mk("afp", "ns1", annotations={"annot2": "val2"}, affinity=AFFINITY)


def tsp() -> Obj:
    return mk("tsp", "ns1", topologySpreadConstraints=SPREAD)


def lbp(namespace: str, labels: dict[str, str]) -> Obj:
    return mk("lbp", namespace, labels=labels, node_name="node1")


SECURITYSCAN = {"service": "securityscan"}
UNRELATED = {"unrelated": "unrelated"}
ASSIGNED_POD_ADDED_CASES = [
    ("Pod rejected by pod affinity is requeued with matching Pod's update", afp, "InterPodAffinity",
     lbp("ns1", SECURITYSCAN), True),
    ("Pod rejected by pod affinity isn't requeued with unrelated Pod's update", afp, "InterPodAffinity",
     lbp("unrelated", UNRELATED), False),
    ("Pod rejected by pod topology spread is requeued with Pod's update in the same namespace", tsp,
     "PodTopologySpread", lbp("ns1", SECURITYSCAN), True),
    ("Pod rejected by pod topology spread isn't requeued with unrelated Pod's update", afp, "PodTopologySpread",
     lbp("unrelated", UNRELATED), False),
    ("Pod rejected by other plugins isn't requeued with any Pod's update", lambda: mk("afp", "ns1"), "fakePlugin",
     lbp("unrelated", UNRELATED), False),
]


@pytest.mark.parametrize("name, unsched, plugin, assigned, requeued", ASSIGNED_POD_ADDED_CASES,
                         ids=[c[0] for c in ASSIGNED_POD_ADDED_CASES])
def test_assigned_pod_added(name: str, unsched: Callable[[], Obj], plugin: str, assigned: Obj,
                            requeued: bool) -> None:
    """TestPriorityQueue_AssignedPodAdded_."""
    clock = FakeClock()
    q = make_queue(clock, [(ASSIGNED_POD_ADD, pl, queue_hint) for pl in ASSIGNED_POD_HINT_PLUGINS])
    fail_fresh(q, unsched(), plugin)
    clock.advance(INITIAL_BACKOFF + 1)
    q.assigned_pod_added(assigned)
    assert (q.where(key(unsched())) == ACTIVE) is requeued


def rp() -> Obj:
    return mk("rp", "ns1", annotations={"annot2": "val2"}, cpu="1")


UPDATE_LABEL = str(ActionType.UPDATE_POD_LABEL.name)
SCALE_DOWN = str(ActionType.UPDATE_POD_SCALE_DOWN.name)
ASSIGNED_POD_UPDATED_CASES = [
    ("Pod rejected by pod affinity is requeued with matching Pod's update", afp, "InterPodAffinity", UPDATE_LABEL,
     lbp("ns1", SECURITYSCAN), True),
    ("Pod rejected by pod affinity isn't requeued with unrelated Pod's update", afp, "InterPodAffinity",
     UPDATE_LABEL, lbp("unrelated", UNRELATED), False),
    ("Pod rejected by pod topology spread is requeued with Pod's update in the same namespace", tsp,
     "PodTopologySpread", UPDATE_LABEL, lbp("ns1", SECURITYSCAN), True),
    ("Pod rejected by pod topology spread isn't requeued with unrelated Pod's update", afp, "PodTopologySpread",
     UPDATE_LABEL, lbp("unrelated", UNRELATED), False),
    ("Pod rejected by resource fit is requeued with assigned Pod's scale down", rp, "NodeResourcesFit", SCALE_DOWN,
     mk("lbp", "ns2", node_name="node1"), True),
    ("Pod rejected by other plugins isn't requeued with any Pod's update", lambda: mk("afp", "ns1"), "fakePlugin",
     UPDATE_LABEL, lbp("unrelated", UNRELATED), False),
]


@pytest.mark.parametrize("name, unsched, plugin, event, assigned, requeued", ASSIGNED_POD_UPDATED_CASES,
                         ids=[c[0] for c in ASSIGNED_POD_UPDATED_CASES])
def test_assigned_pod_updated(name: str, unsched: Callable[[], Obj], plugin: str, event: str, assigned: Obj,
                              requeued: bool) -> None:
    """TestPriorityQueue_AssignedPodUpdated. Upstream passes the event; kubecore derives it from
    the old and new objects, so `old` is built to differ from `assigned` by exactly that event."""
    clock = FakeClock()
    hints: Hints = [(ClusterEvent(ev.POD, ActionType.UPDATE_POD_LABEL), pl, queue_hint)
                    for pl in ASSIGNED_POD_HINT_PLUGINS]
    hints.append((ClusterEvent(ev.POD, ActionType.UPDATE_POD_SCALE_DOWN), "NodeResourcesFit", queue_hint))
    q = make_queue(clock, hints)
    fail_fresh(q, unsched(), plugin)
    clock.advance(INITIAL_BACKOFF + 1)
    old = copy.deepcopy(assigned)
    if event == UPDATE_LABEL:
        old["metadata"]["labels"] = {"before": "update"}
    else:
        old["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    assert [e.action.name for e in ev.pod_scheduling_properties_change(assigned, old)] == [event]
    q.assigned_pod_updated(old, assigned)
    assert (q.where(key(unsched())) == ACTIVE) is requeued


# ---- nominated pods ------------------------------------------------------------------------------

def test_nominated_pods_for_node() -> None:
    """TestPriorityQueue_NominatedPodsForNode."""
    q = make_queue()
    for p in (mpp(), up(), hpp()):
        q.add(p)
    pop(q, hpp())
    assert [pod_key(p) for p in q.nominator.pods_for_node("node1")] == [key(mpp()), key(up())]
    assert q.nominator.pods_for_node("node2") == []


@pytest.mark.parametrize("name, p, want", [
    ("alive pod gets added into PodNominator", mpp(), 1),
    ("pod without .status.nominatedPodName specified shouldn't be added into PodNominator", hpp(), 0),
])
def test_nominated_pod_added(name: str, p: Obj, want: int) -> None:
    """TestPriorityQueue_NominatedPodDeleted (the cases without a pod lister)."""
    q = make_queue()
    q.add_nominated_pod(p, None)
    node = (p.get("status") or {}).get("nominatedNodeName") or ""
    assert len(q.nominator.pods_for_node(node)) == want


def test_update_nominated_pod_for_node() -> None:
    """TestPriorityQueue_UpdateNominatedPodForNode (without the pod-lister checks)."""
    q = make_queue()
    q.add(mpp())
    q.add_nominated_pod(up(), NominatingInfo("node5", NominatingMode.OVERRIDE))
    q.add_nominated_pod(hpp(), NominatingInfo("node2", NominatingMode.OVERRIDE))
    want = {"node1": [key(mpp())], "node2": [key(hpp())], "node5": [key(up())]}
    assert nominations(q) == want
    pop(q, mpp())
    assert nominations(q) == want, "popping does not change the nominations"
    q.add_nominated_pod(hpp(), NominatingInfo("node4", NominatingMode.OVERRIDE))
    assert nominations(q) == {"node1": [key(mpp())], "node4": [key(hpp())], "node5": [key(up())]}
    q.delete_nominated_pod_if_exists(key(hpp()))
    assert nominations(q) == {"node1": [key(mpp())], "node5": [key(up())]}


# ---- pending pods, options, close ----------------------------------------------------------------

def test_pending_pods() -> None:
    """TestPriorityQueue_PendingPods: activeQ:1 backoffQ:0 unschedulablePods:2, then 1/2/0."""
    q = make_queue()
    q.add(up())
    pu = pop(q, up())
    q.add(hpp())
    ph = pop(q, hpp())
    q.add(mpp())
    requeue(q, pu, "plugin")
    requeue(q, ph, "plugin")
    assert q.counts() == {"active": 1, "backoff": 0, "unschedulable": 2, "gated": 0}
    assert len(q) == 3
    q.move_all_to_active_or_backoff(TIMEOUT)
    assert q.counts() == {"active": 1, "backoff": 2, "unschedulable": 0, "gated": 0}
    assert len(q) == 3


def test_new_with_options() -> None:
    """TestPriorityQueue_NewWithOptions."""
    q = make_queue(initial_backoff=2, max_backoff=20)
    assert (q.initial_backoff, q.max_backoff) == (2, 20)


async def test_scheduling_queue_close() -> None:
    """TestSchedulingQueue_Close: a Pop waiting on an empty queue returns once it is closed."""
    q = make_queue()
    waiter = asyncio.ensure_future(q.pop_wait())
    await settle()
    q.close()
    await settle()
    assert waiter.done()
    with pytest.raises(QueueClosed):
        waiter.result()


# ---- ordering after failures ---------------------------------------------------------------------

def test_recently_tried_pods_go_back() -> None:
    """TestRecentlyTriedPodsGoBack."""
    clock = FakeClock()
    q = make_queue(clock)
    for i in range(5):
        q.add(mk(f"test-pod-{i}", "ns1", priority=HIGH, nominated="node1", node_name="node1"))
    clock.advance(1e-6)
    p1 = q.pop()
    assert p1 is not None
    requeue(q, p1, "plugin")
    clock.advance(MAX_BACKOFF)
    q.move_all_to_active_or_backoff(TIMEOUT)
    order = [p.key for p in q.pop_batch(5)]
    assert len(order) == 5 and order[-1] == p1.key


def test_pod_failed_scheduling_multiple_times_does_not_block_newer_pod() -> None:
    """TestPodFailedSchedulingMultipleTimesDoesNotBlockNewerPod."""
    clock = FakeClock()
    q = make_queue(clock)
    unsched = mk("test-pod-unscheduled", "ns1", priority=HIGH, nominated="node1")
    q.add(unsched)
    p = pop(q, unsched)
    requeue(q, p, "plugin")
    clock.advance(INITIAL_BACKOFF + 1)
    q.move_all_to_active_or_backoff(TIMEOUT)
    p = pop(q, unsched)
    newer = mk("test-newer-pod", "ns1", priority=HIGH, nominated="node1")
    q.add(newer)
    requeue(q, p, "plugin")
    clock.advance(INITIAL_BACKOFF + 1)
    q.move_all_to_active_or_backoff(TIMEOUT)
    pop(q, newer)


def test_high_priority_backoff() -> None:
    """TestHighPriorityBackoff: an unschedulable high-priority pod backs off behind others."""
    q = make_queue()
    mid = mk("test-midpod", "ns1", priority=MID, nominated="node1")
    high = mk("test-highpod", "ns1", priority=HIGH, nominated="node1")
    q.add(mid)
    q.add(high)
    p = pop(q, high)
    requeue(q, p, "fooPlugin")
    q.move_all_to_active_or_backoff(TIMEOUT)
    pop(q, mid)


def test_high_priority_flush_unschedulable_pods_leftover() -> None:
    """TestHighPriorityFlushUnschedulablePodsLeftover."""
    clock = FakeClock()
    q = make_queue(clock, [(NODE_ADD, "fakePlugin", queue_hint)])
    mid = mk("test-midpod", "ns1", priority=MID, nominated="node1")
    high = mk("test-highpod", "ns1", priority=HIGH, nominated="node1")
    q.add(high)
    ph = pop(q, high)
    q.add(mid)
    pm = pop(q, mid)
    requeue(q, ph, "fakePlugin")
    requeue(q, pm, "fakePlugin")
    clock.advance(MAX_IN_UNSCHEDULABLE + 1)
    q.flush_unschedulable_leftover()
    pop(q, high)
    pop(q, mid)


@pytest.mark.parametrize("name, max_in_unschedulable", [
    ("New priority queue by the default value of podMaxInUnschedulablePodsDuration", None),
    ("New priority queue by user-defined value of podMaxInUnschedulablePodsDuration", 30.0),
])
def test_init_pod_max_in_unschedulable_pods_duration(name: str, max_in_unschedulable: float | None) -> None:
    """TestPriorityQueue_initPodMaxInUnschedulablePodsDuration: pods older than the limit are
    flushed, the older one first."""
    clock = FakeClock()
    kw: dict[str, Any] = {} if max_in_unschedulable is None else {"max_in_unschedulable": max_in_unschedulable}
    q = make_queue(clock, **kw)
    now = clock.now()
    p1 = QueuedPodInfo(mk("test-pod-1", "ns1", nominated="node1"), timestamp=now - 1)
    p2 = QueuedPodInfo(mk("test-pod-2", "ns2", nominated="node2"), timestamp=now - 2)
    for p in (p1, p2):
        p.unschedulable_count += 1
        in_pool(q, p)
    clock.advance(q.max_in_unschedulable)
    q.flush_unschedulable_leftover()
    assert len(active_keys(q)) == 2
    assert [p.key for p in q.pop_batch(2)] == [p2.key, p1.key]


def _timestamp_case(ops: str) -> list[str]:
    clock = FakeClock()
    q = make_queue(clock)
    now = clock.now()
    p1 = QueuedPodInfo(mk("test-pod-1", "ns1", nominated="node1"), timestamp=now)
    p2 = QueuedPodInfo(mk("test-pod-2", "ns2", nominated="node2"), timestamp=now + 1)
    if ops == "active":
        in_active(q, p2)
        in_active(q, p1)
    elif ops == "unschedulable":
        for p in (p2, p1):
            p.unschedulable_count += 1
            in_pool(q, p)
        clock.advance(3)
        q.move_all_to_active_or_backoff(TIMEOUT)
    else:
        in_active(q, p2)
        in_backoff(q, p1)
        clock.advance(3)
        q.flush_backoff_completed()
        q.move_all_to_active_or_backoff(TIMEOUT)
    assert len(active_keys(q)) == 2
    return [p.key for p in q.pop_batch(2)]


@pytest.mark.parametrize("name, ops", [
    ("add two pod to activeQ and sort them by the timestamp", "active"),
    ("add two pod to unschedulablePods then move them to activeQ and sort them by the timestamp", "unschedulable"),
    ("add one pod to BackoffQ and move it to activeQ", "backoff"),
])
def test_pod_timestamp(name: str, ops: str) -> None:
    """TestPodTimestamp."""
    assert _timestamp_case(ops) == ["ns1/test-pod-1", "ns2/test-pod-2"]


# ---- pending pods metric (scheduler_pending_pods) --------------------------------------------------

class _MetricQueue:
    """TestPendingPodsMetric's setup: 50 queueable pods, 10 gated ones, 20 queueable ones 2 s later."""

    def __init__(self, **kw: Any) -> None:
        self.clock = FakeClock()
        now = self.clock.now()
        self.plugin = Allowlist(["queueable"])
        self.q = make_queue(self.clock, [(UNSCHED_POD_UPDATE, "preEnqueuePlugin", queue_hint)],
                            pre_enqueue=[self.plugin], **kw)

        def infos(n: int, prefix: str, label: str, ts: float) -> list[QueuedPodInfo]:
            return [QueuedPodInfo(mk(f"{prefix}-{i}", f"ns{i}", labels={label: ""}), timestamp=ts)
                    for i in range(1, n + 1)]

        self.p = infos(50, "x", "queueable", now)
        for g in infos(10, "y", "failme", now):
            self.p.append(gated(g, "preEnqueuePlugin", [UNSCHED_POD_UPDATE]))
        self.delayed = infos(20, "z", "queueable", now + 2)

    def add(self, ps: list[QueuedPodInfo]) -> None:
        for p in ps:
            self.q.add(p.pod)

    def add_unschedulable(self, ps: list[QueuedPodInfo]) -> None:
        for p in ps:
            if not p.gated:
                p.unschedulable_count += 1
            in_pool(self.q, p)

    def add_backoff(self, ps: list[QueuedPodInfo]) -> None:
        for p in ps:
            in_backoff(self.q, p)

    def delete(self, ps: list[QueuedPodInfo]) -> None:
        for p in ps:
            self.q.delete(p.pod)

    def update_queueable(self, ps: list[QueuedPodInfo]) -> None:
        for p in ps:
            new = copy.deepcopy(p.pod)
            new["metadata"]["labels"] = {"queueable": ""}
            self.q.update(p.pod, new)

    def move_all(self) -> None:
        self.q.move_all_to_active_or_backoff(TIMEOUT)

    def flush_backoff(self) -> None:
        self.clock.advance(3)
        self.q.flush_backoff_completed()

    def forward(self) -> None:
        self.clock.advance(3)

    def gate_all(self) -> None:
        self.plugin.allowlists = [""]

    def ungate_all(self) -> None:
        self.plugin.allowlists = ["queueable"]


def _pending(active: int, backoff: int, gated_: int, unschedulable: int) -> dict[str, int]:
    return {"active": active, "backoff": backoff, "unschedulable": unschedulable, "gated": gated_}


def _metric_cases() -> list[tuple[str, Callable[[_MetricQueue], None], dict[str, int]]]:
    def c1(m: _MetricQueue) -> None:
        m.add(m.p[:30])
        m.add_unschedulable(m.p[30:])

    def c2(m: _MetricQueue) -> None:
        m.add(m.p[:15])
        m.add_backoff(m.p[15:40])
        m.add_unschedulable(m.p[40:])

    def c3(m: _MetricQueue) -> None:
        m.add_unschedulable(m.p[:60])
        m.forward()
        m.move_all()

    def c5(m: _MetricQueue) -> None:
        m.add_unschedulable(m.p[:40])
        m.add(m.p[40:50])
        m.move_all()
        m.flush_backoff()

    def c6(m: _MetricQueue) -> None:
        m.add(m.p[:30])
        m.add_unschedulable(m.p[30:])
        m.delete(m.p[:2])
        m.delete(m.p[30:33])
        m.delete(m.p[50:54])

    def c7(m: _MetricQueue) -> None:
        m.add(m.p[:30])
        m.add_unschedulable(m.p[30:])
        m.update_queueable(m.p[50:55])

    def gate_into_active(m: _MetricQueue) -> None:
        m.add_unschedulable(m.p[:1])
        m.forward()
        m.gate_all()
        m.update_queueable(m.p[:1])

    def gate_ungate_active(m: _MetricQueue) -> None:
        gate_into_active(m)
        m.ungate_all()
        m.update_queueable(m.p[:1])

    def gate_ungate_backoff(m: _MetricQueue) -> None:
        m.add_unschedulable(m.p[:1])
        m.gate_all()
        m.update_queueable(m.p[:1])
        m.ungate_all()
        m.update_queueable(m.p[:1])

    return [
        ("add pods to activeQ and unschedulablePods", c1, _pending(30, 0, 10, 20)),
        ("add pods to all kinds of queues", c2, _pending(15, 25, 10, 10)),
        ("add pods to unschedulablePods and then move all to activeQ", c3, _pending(50, 0, 10, 0)),
        ("make some pods subject to backoff, add pods to unschedulablePods/activeQ, move all to activeQ, and "
         "finally flush backoffQ", c5, _pending(50, 0, 0, 0)),
        ("add pods to activeQ/unschedulablePods and then delete some Pods", c6, _pending(28, 0, 6, 17)),
        ("add pods to activeQ/unschedulablePods and then update some Pods as queueable", c7, _pending(35, 0, 5, 20)),
        ("Gated metric should be 1 when Ungated to Gated transition into moveToActiveQ", gate_into_active,
         _pending(0, 0, 1, 0)),
        ("Gated metric should be 1 when Ungated to Gated transition when popFromBackoffQ is disabled",
         gate_into_active, _pending(0, 0, 1, 0)),
        ("Gated metric should be 0 when Ungated -> Gated -> Ungated (ActiveQ) transition", gate_ungate_active,
         _pending(1, 0, 0, 0)),
        # kubecore gets there without the intermediate gating (no PreEnqueue on the way to backoffQ).
        ("Gated metric should be 0 when Ungated -> Gated -> Ungated (BackoffQ) transition", gate_ungate_backoff,
         _pending(0, 1, 0, 0)),
        ("Gated metric should be 0 when Ungated -> Gated -> Ungated transition, when popFromBackoffQ is disabled",
         gate_ungate_active, _pending(1, 0, 0, 0)),
    ]


METRIC_CASES = _metric_cases()


@pytest.mark.parametrize("name, ops, want", METRIC_CASES, ids=[c[0] for c in METRIC_CASES])
def test_pending_pods_metric(name: str, ops: Callable[[_MetricQueue], None], want: dict[str, int]) -> None:
    """TestPendingPodsMetric (scheduler_pending_pods{queue}, read from `counts`)."""
    m = _MetricQueue()
    ops(m)
    assert m.q.counts() == want


def test_pending_pods_metric_backoff_ends_now() -> None:
    """TestPendingPodsMetric "make some pods subject to backoff, add pods to unschedulablePods, and
    then move all to activeQ": the delayed pods' backoff ends exactly at the move, so with
    SchedulerPopFromBackoffQ's ordering windows (upstream's default) they still back off."""
    m = _MetricQueue(pop_from_backoff=True)
    m.add_unschedulable(m.p[20:60])
    m.forward()
    m.add_unschedulable(m.delayed[:20])
    m.move_all()
    assert m.q.counts() == _pending(30, 20, 10, 0)


# ---- per-pod attempts and backoff ----------------------------------------------------------------

def _per_pod_metrics(case: str) -> tuple[QueuedPodInfo, float]:
    clock = FakeClock()
    t0 = clock.now()
    test_pod = mk("test-pod", "test-ns")
    if case == "gated":
        # Upstream's preEnqueuePlugin has no EventsToRegister: it hears every event (as upstream
        # registers such a plugin for all of them).
        hints: Hints = [(e.event, "preEnqueuePlugin", e.hint) for e in ev.unrolled_wildcard()]
        q = make_queue(clock, hints, pre_enqueue=[Allowlist(["foo"])])
        q.add(test_pod)
        assert q.where(key(test_pod)) == UNSCHEDULABLE
        clock.advance(60)
        q.update(test_pod, mk("test-pod", "test-ns", labels={"foo": ""}))
    else:
        q = make_queue(clock)
        q.add(test_pod)
        if case != "one":
            requeue(q, pop(q, test_pod), "plugin")
            clock.set(t0 + MAX_IN_UNSCHEDULABLE + 1e-3)  # upstream: + 1 ns (below a float clock's grain)
            q.flush_unschedulable_leftover()
            if case == "update":
                new = copy.deepcopy(test_pod)
                new["metadata"]["generation"] = 1
                q.update(test_pod, new)
    p = q.pop()
    assert p is not None and p.initial_attempt_timestamp is not None
    return p, p.initial_attempt_timestamp - t0


@pytest.mark.parametrize("name, case, attempts, initial", [
    ("pod is created and scheduled after 1 attempt", "one", 1, 0),
    ("pod is created and scheduled after 2 attempts", "two", 2, 0),
    ("pod is created and scheduled after 2 attempts but before the second pop, call update", "update", 2, 0),
    ("A gated pod is created and scheduled after lifting gate", "gated", 1, 60),
])
def test_per_pod_scheduling_metrics(name: str, case: str, attempts: int, initial: float) -> None:
    """TestPerPodSchedulingMetrics: attempts count pops; the initial attempt timestamp is the
    first time the pod entered activeQ."""
    p, since_start = _per_pod_metrics(case)
    assert p.attempts == attempts
    assert since_start == pytest.approx(initial)


BACKOFF_STEPS = [1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0]


def test_backoff_flow() -> None:
    """TestBackOffFlow (popFromBackoffQ disabled): 1, 2, 4, 8, 10, 10, 10 s, each counted from the
    pod's return; an early flush leaves it in backoffQ, one after the backoff moves it out."""
    clock = FakeClock()
    q = make_queue(clock)
    test_pod = mk("test-pod", "test-ns")
    q.add(test_pod)
    for i, want in enumerate(BACKOFF_STEPS):
        timestamp = clock.now()
        p = pop(q, test_pod)
        assert p.attempts == i + 1
        requeue(q, p, "unsched-plugin")
        q.move_all_to_active_or_backoff(TIMEOUT)
        assert q.where(p.key) == BACKOFF
        assert p.backoff_expiration is not None and p.backoff_expiration - timestamp == want
        clock.advance(0.5)  # (upstream steps one ordering window, 1 s: see the skipped test below)
        q.flush_backoff_completed()
        assert q.where(p.key) == BACKOFF, "still in the backoff queue after an early flush"
        clock.advance(want)
        q.flush_backoff_completed()
        assert q.where(p.key) == ACTIVE


def test_backoff_flow_flush_at_the_expiry() -> None:
    """TestBackOffFlow (SchedulerPopFromBackoffQ on), step 0: a flush exactly 1 s after the first
    failure keeps the pod in backoffQ: its window is the current one."""
    clock = FakeClock()
    q = make_queue(clock, pop_from_backoff=True)
    q.add(mk("test-pod", "test-ns"))
    p = q.pop()
    assert p is not None
    requeue(q, p, "unsched-plugin")
    q.move_all_to_active_or_backoff(TIMEOUT)
    clock.advance(1)
    q.flush_backoff_completed()
    assert q.where(p.key) == BACKOFF


@pytest.mark.parametrize("failures, errors, want", [
    (0, 0, 0.0), (1, 0, 1.0), (3, 0, 4.0), (6, 0, 10.0), (5, 1, 1.0), (5, 2, 2.0),
])
def test_backoff_counts_the_last_kind_of_failure(failures: int, errors: int, want: float) -> None:
    """Upstream getBackoffTime: the backoff follows the consecutive errors when the last failures
    were errors, else the unschedulable results (not the attempts)."""
    q = make_queue()
    p = QueuedPodInfo(mk("p"), timestamp=q.clock.now())
    p.attempts = failures + errors
    p.unschedulable_count, p.consecutive_errors_count = failures, errors
    assert q._backoff_expiry(p) - p.timestamp == want  # noqa: SLF001


def test_backoff_disabled_by_a_zero_maximum() -> None:
    """Upstream getBackoffTime: podMaxBackoffSeconds 0 means no backoff."""
    q = make_queue(max_backoff=0)
    q.add(mk("p"))
    p = q.pop()
    assert p is not None
    assert requeue(q, p) == ACTIVE


# ---- PreEnqueueCheck and isPodWorthRequeuing ----------------------------------------------------

def _prio(p: Obj) -> int:
    return int(p["spec"]["priority"])


def _panic(p: Obj) -> bool:
    raise AssertionError("preCheck shouldn't be called")


PRE_CHECK_CASES: list[tuple[str, ClusterEvent, Callable[[Obj], bool] | None, set[str]]] = [
    ("nil PreEnqueueCheck", TIMEOUT, None, {"p0", "p1", "p2", "p3", "p4"}),
    ("move Pods with priority greater than 2", TIMEOUT, lambda p: _prio(p) >= 2, {"p2", "p3", "p4"}),
    ("move Pods with even priority and greater than 2", TIMEOUT, lambda p: _prio(p) % 2 == 0 and _prio(p) >= 2,
     {"p2", "p4"}),
    ("move Pods with even and negative priority", TIMEOUT, lambda p: _prio(p) % 2 == 0 and _prio(p) < 0, set()),
    ("preCheck isn't called if the event is not interested by any plugins", PV_ADD, _panic, set()),
]


@pytest.mark.parametrize("name, event, check, want", PRE_CHECK_CASES, ids=[c[0] for c in PRE_CHECK_CASES])
def test_move_all_pre_enqueue_checks(name: str, event: ClusterEvent, check: Callable[[Obj], bool] | None,
                                     want: set[str]) -> None:
    """TestMoveAllToActiveOrBackoffQueue_PreEnqueueChecks."""
    clock = FakeClock()
    q = SchedulingQueue(clock=clock)  # no profile: only wildcard events interest it
    pods = [mk(f"p{i}", priority=i) for i in range(5)]
    for p in pods:
        q.add(p)
        requeue(q, pop(q, p), "plugin")
    q.move_all_to_active_or_backoff(event, pre_check=check)
    assert {p["metadata"]["name"] for p in pods if q.where(key(p)) == BACKOFF} == want


def _counting(hint: str, counter: list[str]) -> QueueingHintFn:
    def fn(p: Obj, old: object, new: object) -> QueueingHint:
        counter.append(hint)
        if hint == "error":
            raise RuntimeError("unexpected error")
        return QueueingHint.QUEUE if hint == "queue" else QueueingHint.SKIP
    return fn


NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": ""}}
POD_1 = mk("pod1", "ns1")
WORTH_CASES: list[tuple[str, set[str], set[str], ClusterEvent, Any, list[tuple[ClusterEvent, str, str]], Strategy,
                        int]] = [
    ("return Queue when no queueing hint function is registered for the event", {"fooPlugin1"}, set(), NODE_ADD, NODE,
     [(ASSIGNED_POD_ADD, "fooPlugin1", "queue")], Strategy.SKIP, 0),
    ("Treat the event as Queue when QueueHintFn returns error", {"fooPlugin1"}, set(), NODE_ADD, NODE,
     [(NODE_ADD, "fooPlugin1", "error")], Strategy.AFTER_BACKOFF, 1),
    ("return Queue when the event is wildcard", {"fooPlugin1"}, set(), TIMEOUT, None, [], Strategy.AFTER_BACKOFF, 0),
    ("return Queue when the event is wildcard and the wildcard targets the pod to be requeued right now",
     {"fooPlugin1"}, set(), ev.EVENT_FORCE_ACTIVATE, mk("pod1", "ns1"), [], Strategy.AFTER_BACKOFF, 0),
    ("return Skip when the event is wildcard, but the wildcard targets a different pod", {"fooPlugin1"}, set(),
     ev.EVENT_FORCE_ACTIVATE, mk("pod-different", "ns2"), [], Strategy.SKIP, 0),
    ("interprets Queue from the Pending plugin as queueImmediately", {"fooPlugin1", "fooPlugin3"}, {"fooPlugin2"},
     NODE_ADD, NODE, [(NODE_ADD, "fooPlugin1", "queue"), (NODE_ADD, "fooPlugin2", "queue"),
                      (NODE_ADD, "fooPlugin3", "queue"), (NODE_ADD, "fooPlugin4", "error")],
     Strategy.IMMEDIATELY, 2),
    ("interprets Queue from the Unschedulable plugin as queueAfterBackoff", {"fooPlugin1", "fooPlugin2"}, set(),
     NODE_ADD, NODE, [(NODE_ADD, "fooPlugin1", "skip"), (NODE_ADD, "fooPlugin2", "queue")],
     Strategy.AFTER_BACKOFF, 2),
    ("Queueing hint function that isn't from the plugin in UnschedulablePlugins/PendingPlugins is ignored",
     {"fooPlugin1", "fooPlugin2"}, set(), NODE_ADD, NODE,
     [(NODE_ADD, "fooPlugin1", "skip"), (NODE_ADD, "fooPlugin2", "skip"), (NODE_ADD, "fooPlugin3", "queue")],
     Strategy.SKIP, 2),
    ("If event is specific Node update event, queueing hint function for NodeUpdate/UpdateNodeLabel is also "
     "executed", {"fooPlugin1", "fooPlugin2"}, set(), ClusterEvent(ev.NODE, ActionType.UPDATE_NODE_LABEL), NODE,
     [(ClusterEvent(ev.NODE, ActionType.UPDATE_NODE_LABEL), "fooPlugin1", "queue"),
      (ClusterEvent(ev.NODE, ActionType.UPDATE_NODE_LABEL), "fooPlugin2", "queue"),
      (ClusterEvent(ev.NODE, ActionType.UPDATE), "fooPlugin1", "queue"), (NODE_ADD, "fooPlugin1", "queue")],
     Strategy.AFTER_BACKOFF, 1),
    ("If event with '*' Resource, queueing hint function for specified Resource is also executed", {"fooPlugin1"},
     set(), NODE_ADD, NODE, [(ClusterEvent(ev.WILDCARD, ActionType.ADD), "fooPlugin1", "queue")],
     Strategy.AFTER_BACKOFF, 1),
    ("If event is a wildcard one, queueing hint function for all kinds of events is executed", {"fooPlugin1"}, set(),
     ClusterEvent(ev.NODE, ActionType.UPDATE_NODE_LABEL | ActionType.UPDATE_NODE_TAINT), NODE,
     [(ClusterEvent(ev.WILDCARD, ActionType.ALL), "fooPlugin1", "queue")], Strategy.AFTER_BACKOFF, 1),
]


@pytest.mark.parametrize("name, unsched, pending, event, new, table, want, calls", WORTH_CASES,
                         ids=[c[0] for c in WORTH_CASES])
def test_is_pod_worth_requeuing(name: str, unsched: set[str], pending: set[str], event: ClusterEvent, new: Any,
                                table: list[tuple[ClusterEvent, str, str]], want: Strategy, calls: int) -> None:
    """Test_isPodWorthRequeuing: the strategy and how many hint functions ran."""
    counter: list[str] = []
    q = make_queue(hints=[(e, plugin, _counting(hint, counter)) for e, plugin, hint in table])
    p = QueuedPodInfo(POD_1, timestamp=q.clock.now())
    p.unschedulable_plugins, p.pending_plugins = unsched, pending
    assert q._worth_requeuing(p, event, None, new) is want  # noqa: SLF001
    assert len(counter) == calls


def test_gated_set_upon_creation_and_unset_upon_update() -> None:
    """Test_queuedPodInfo_gatedSetUponCreationAndUnsetUponUpdate (SchedulingGates registered with
    its own event, as a profile does)."""
    gates = SchedulingGates()
    q = make_queue(hints=[(e.event, gates.name, e.hint) for e in gates.events_to_register()], pre_enqueue=[gates])
    gated_pod = mk("p", schedulingGates=[{"name": "hello world"}])
    q.add(gated_pod)
    p = q.get(key(gated_pod))
    assert p is not None and p.gated and q.where(key(gated_pod)) == UNSCHEDULABLE
    q.update(gated_pod, mk("p"))
    popped = q.pop()
    assert popped is not None and not popped.gated


def test_get_pod() -> None:
    """TestPriorityQueue_GetPod."""
    q = make_queue()
    pods = {name: mk(name) for name in ("pod1", "pod2", "pod3")}
    in_active(q, QueuedPodInfo(pods["pod1"], timestamp=q.clock.now()))
    in_backoff(q, QueuedPodInfo(pods["pod2"], timestamp=q.clock.now()))
    in_pool(q, QueuedPodInfo(pods["pod3"], timestamp=q.clock.now()))
    for name in ("pod1", "pod2", "pod3"):
        got = q.get(f"default/{name}")
        assert got is not None and got.pod is pods[name], name
    assert q.get("default/pod4") is None


# ---- active_queue_test.go, backoff_queue_test.go, unschedulable_pods_test.go -----------------------

def test_close_drops_in_flight_pods_and_events() -> None:
    """active_queue_test.go TestClose."""
    q = make_queue(hints=[(NODE_ADD, "fooPlugin", None),
                          (ClusterEvent(ev.NODE, ActionType.UPDATE_NODE_CONDITION), "fooPlugin", None)])
    q.add(mk("p1", "foo"))
    q.add(mk("p2", "bar"))
    assert len(q.pop_batch(2)) == 2
    q.move_all_to_active_or_backoff(NODE_ADD)
    q.move_all_to_active_or_backoff(ClusterEvent(ev.NODE, ActionType.UPDATE_NODE_CONDITION))
    assert len(timeline(q)) == 4 and len(q.in_flight()) == 2
    q.close()
    assert timeline(q) == [] and q.in_flight() == []


@pytest.mark.parametrize("name, initial, maximum, failures, want", [
    ("no backoff", 1, 32, 0, 0),
    ("normal", 1, 32, 16, 32),
    ("overflow_32bit", 1, 2**31 - 1, 32, 2**31 - 1),
    ("overflow_64bit", 1, 2**63 - 1, 64, 2**63 - 1),
])
def test_calculate_backoff_duration(name: str, initial: int, maximum: int, failures: int, want: int) -> None:
    """backoff_queue_test.go TestBackoffQueue_calculateBackoffDuration (durations in ns as plain
    numbers: the doubling never overflows past the maximum)."""
    q = make_queue(initial_backoff=initial, max_backoff=maximum)
    assert q.backoff_duration(failures) == want


@pytest.mark.parametrize("name, in_backoff_q, moved", [
    ("Both queues empty, no pods moved to activeQ", [], []),
    ("Pods only in backoffQ, some pods moved to activeQ", ["pod0", "pod1"], ["pod0"]),
    ("Pods only in errorBackoffQ, some pods moved to activeQ", ["pod2", "pod3"], ["pod2"]),
    ("Pods in both queues, some pods moved to activeQ", ["pod0", "pod1", "pod2", "pod3"], ["pod0", "pod2"]),
    ("Pods in both queues, all pods moved to activeQ", ["pod0", "pod2"], ["pod0", "pod2"]),
    ("Pods in both queues, no pods moved to activeQ", ["pod1", "pod3"], []),
])
def test_pop_each_backoff_completed(name: str, in_backoff_q: list[str], moved: list[str]) -> None:
    """backoff_queue_test.go TestBackoffQueue_popEachBackoffCompleted (commit 5885f15, whose
    backoff ends at expiry == now): one failure each, 1 s ago or 1 s ahead; pod0/pod1 were
    rejected by a plugin, pod2/pod3 failed with an error."""
    q = make_queue()
    now = q.clock.now()
    infos = {}
    for name_, offset, plugin in (("pod0", -1, "plugin"), ("pod1", 1, "plugin"), ("pod2", -1, ""), ("pod3", 1, "")):
        p = QueuedPodInfo(mk(name_), timestamp=now + offset)
        p.attempts = 1
        if plugin:
            p.unschedulable_plugins, p.unschedulable_count = {plugin}, 1
        else:
            p.consecutive_errors_count = 1
        infos[name_] = p
    for n in in_backoff_q:
        in_backoff(q, infos[n])
    q.flush_backoff_completed()
    assert active_keys(q) == {f"default/{n}" for n in moved}
    assert len(backoff_keys(q)) == len(in_backoff_q) - len(moved)


UNSCHED_PODS = [
    mk("p0", "ns1", annotations={"annot1": "val1"}, nominated="node1"),
    mk("p1", "ns1", annotations={"annot": "val"}),
    mk("p2", "ns2", annotations={"annot2": "val2", "annot3": "val3"}, nominated="node3"),
    mk("p3", "ns4", annotations={"annot2": "val2", "annot3": "val3"}, nominated="node1"),
]


@pytest.mark.parametrize("name, add, update, delete, after_delete", [
    ("create, update, delete subset of pods", [0, 1, 2, 3], [0], [0, 1], [2, 3]),
    ("create, update, delete all", [0, 3], [3], [0, 3], []),
    ("delete non-existing and existing pods", [1, 2], [1], [2, 3], [1]),
])
def test_unschedulable_pods(name: str, add: list[int], update: list[int], delete: list[int],
                            after_delete: list[int]) -> None:
    """unschedulable_pods_test.go TestUnschedulablePods, on kubecore's pool."""
    from kubecore.scheduler.pool import Pool

    pool = Pool(lambda p: False)
    now = 0.0
    for i in add:
        pool[key(UNSCHED_PODS[i])] = QueuedPodInfo(UNSCHED_PODS[i], timestamp=now)
    assert {k: p.pod for k, p in pool.items()} == {key(UNSCHED_PODS[i]): UNSCHED_PODS[i] for i in add}
    updated = {}
    for i in update:
        updated[i] = copy.deepcopy(UNSCHED_PODS[i])
        pool[key(updated[i])] = QueuedPodInfo(updated[i], timestamp=now)
    assert {k: p.pod for k, p in pool.items()} == {key(UNSCHED_PODS[i]): updated.get(i, UNSCHED_PODS[i]) for i in add}
    for i in delete:
        pool.pop(key(UNSCHED_PODS[i]))
    assert set(pool) == {key(UNSCHED_PODS[i]) for i in after_delete}
    for k in list(pool):
        pool.pop(k)
    assert len(pool) == 0


def test_update_of_a_gated_pod_runs_every_rejecting_plugins_hints() -> None:
    """From upstream PriorityQueue.Update (no case in its tests): an unschedulable pod's update is
    offered to the hints of all its rejecting plugins, also when it is gated and its gating plugin
    did not register the event; a Queue runs PreEnqueue again, which lets it pass now."""
    hold = Allowlist(["ready"], name="Hold")
    q = make_queue(hints=[(NODE_ADD, "Hold", None), (UNSCHED_POD_UPDATE, "Fit", queue_hint)], pre_enqueue=[hold])
    waiting = mk("p")
    pinfo = gated(QueuedPodInfo(waiting, timestamp=q.clock.now()), "Hold", [NODE_ADD])
    pinfo.unschedulable_plugins = {"Fit", "Hold"}
    in_pool(q, pinfo)
    assert q.counts()["gated"] == 1
    ready = mk("p", labels={"ready": ""})
    q.update(waiting, ready)
    assert q.where(key(ready)) == ACTIVE
