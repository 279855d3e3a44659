"""Upstream's message formats (FitError, durations) and the small value types."""

from __future__ import annotations

import pytest

from kubecore.scheduler import events as ev
from kubecore.scheduler.events import ActionType, ClusterEvent
from kubecore.scheduler.fiterror import Diagnosis, FitError, NodeToStatus
from kubecore.scheduler.native import classify
from kubecore.scheduler.status import Code, Status
from kubecore.api.gotime import format_seconds as go_duration
from tests.unit.scheduler.helpers import node, pod

U, UU = Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_fit_error_histogram_is_sorted_as_strings() -> None:
    nts = NodeToStatus()
    nts.add_native({"Insufficient cpu": 3000, "node(s) had untolerated taint(s)": 2000}, failed=5000,
                   unresolvable=2000)
    diag = Diagnosis(nts)
    diag.post_filter_msg = "preemption: 0/5000 nodes are available: 5000 Preemption is not helpful for scheduling."
    assert str(FitError(pod("p"), 5000, diag)) == (
        "0/5000 nodes are available: 2000 node(s) had untolerated taint(s), 3000 Insufficient cpu. "
        "preemption: 0/5000 nodes are available: 5000 Preemption is not helpful for scheduling.")


def test_fit_error_counts_each_reason_once_per_node_and_sorts_like_go() -> None:
    nts = NodeToStatus()
    for i in range(10):
        nts.set(f"a{i}", Status(U, "Insufficient cpu", "Insufficient memory"))
    for i in range(3):
        nts.set(f"b{i}", Status(UU, "node(s) didn't match Pod's node affinity/selector"))
    msg = str(FitError(pod("p"), 13, Diagnosis(nts)))
    # "10 ..." sorts before "3 ..." as Go's sort.Strings does
    assert msg == ("0/13 nodes are available: 10 Insufficient cpu, 10 Insufficient memory, "
                   "3 node(s) didn't match Pod's node affinity/selector.")


def test_fit_error_absent_nodes_and_prefilter_message() -> None:
    nts = NodeToStatus(Status(UU, "node(s) didn't satisfy plugin(s) [NodeAffinity]"))
    nts.set("n1", Status(U, "Insufficient cpu"))
    assert str(FitError(pod("p"), 4, Diagnosis(nts))) == (
        "0/4 nodes are available: 1 Insufficient cpu, 3 node(s) didn't satisfy plugin(s) [NodeAffinity].")
    d = Diagnosis(NodeToStatus(Status(U, "pod group not complete")))
    d.pre_filter_msg = "pod group not complete"
    assert str(FitError(pod("p"), 4, d)) == "0/4 nodes are available: pod group not complete."


@pytest.mark.parametrize("seconds, text", [(10, "10s"), (0.5, "500ms"), (90, "1m30s"), (3600, "1h0m0s"),
                                           (1.5, "1.5s"), (0, "0s"), (900, "15m0s")])
def test_go_durations(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text


def test_native_reasons_map_to_plugins_and_codes() -> None:
    st = classify(["Insufficient cpu", "Insufficient memory"])
    assert st is not None and st.code is U and st.plugin == "NodeResourcesFit"
    st = classify(["node(s) had untolerated taint(s)"])
    assert st is not None and st.code is UU and st.plugin == "TaintToleration"
    st = classify(["node(s) didn't match pod topology spread constraints (missing required label)"])
    assert st is not None and st.code is UU and st.plugin == "PodTopologySpread"
    st = classify(["something new"])
    assert st is not None and st.code is U
    assert classify([]) is None


def test_status_basics() -> None:
    s = Status(U, "a", "b")
    assert s.message() == "a, b" and s.is_rejected() and not s.is_success()
    assert Status(Code.PENDING).is_rejected() and not Status(Code.ERROR).is_rejected()
    assert Code.UNSCHEDULABLE_AND_UNRESOLVABLE.label == "UnschedulableAndUnresolvable"
    e = Status(Code.ERROR).with_error(RuntimeError("boom"))
    assert e.message() == "boom" and isinstance(e.as_error(), RuntimeError)


@pytest.mark.parametrize("registered, incoming, matches", [
    (ClusterEvent(ev.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL), ClusterEvent(ev.NODE, ActionType.UPDATE_NODE_LABEL), True),
    (ClusterEvent(ev.NODE, ActionType.UPDATE_NODE_TAINT), ClusterEvent(ev.NODE, ActionType.UPDATE_NODE_ALLOCATABLE), False),
    (ClusterEvent(ev.POD, ActionType.DELETE), ev.EVENT_ASSIGNED_POD_DELETE, True),
    (ClusterEvent(ev.POD, ActionType.DELETE), ClusterEvent(ev.NODE, ActionType.DELETE), False),
    (ClusterEvent(ev.WILDCARD, ActionType.ALL), ClusterEvent(ev.NODE, ActionType.ADD), True),
    (ClusterEvent(ev.NODE, ActionType.ALL), ev.EVENT_UNSCHEDULABLE_TIMEOUT, False),
])
def test_event_matching(registered: ClusterEvent, incoming: ClusterEvent, matches: bool) -> None:
    assert registered.matches(incoming) is matches


def test_what_changed_in_updates() -> None:
    old, new = node("n"), node("n", cpu="8", labels={"zone": "a"})
    actions = {e.action for e in ev.node_scheduling_properties_change(new, old)}
    assert actions == {ActionType.UPDATE_NODE_ALLOCATABLE, ActionType.UPDATE_NODE_LABEL}
    cordoned, uncordoned = node("n", unschedulable=True), node("n")
    assert [e.action for e in ev.node_scheduling_properties_change(uncordoned, cordoned)] == [ActionType.UPDATE_NODE_TAINT]
    p_old, p_new = pod("p", cpu="1", schedulingGates=[{"name": "g"}]), pod("p", cpu="500m")
    got = ev.pod_scheduling_properties_change(p_new, p_old)
    assert {e.action for e in got} == {ActionType.UPDATE_POD_SCALE_DOWN, ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED}
    assert all(e.resource == ev.UNSCHEDULED_POD for e in got)
    assert [e.action for e in ev.pod_scheduling_properties_change(pod("p"), pod("p"))] == [ActionType.UPDATE_POD_OTHER]
