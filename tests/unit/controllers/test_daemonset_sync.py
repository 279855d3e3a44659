"""The DaemonSet sync's decisions as pure functions: per-node create/delete (failed pods with
backoff, duplicates, surge pairs, nodes that stopped matching), unscheduled pods of deleted nodes,
rolling updates within maxUnavailable and maxSurge, and the status counts."""

from __future__ import annotations

from typing import Any

from kubecore.controllers.controller_utils import format_time
from kubecore.controllers.daemonset_sync import (
    FailedPodsBackoff, Plan, compute_status, pods_should_be_on_node, rolling_update_plan,
    unscheduled_pods_without_node, updated_desired_node_counts,
)

Obj = dict[str, Any]
NOW = 1_700_000_000.0


def node(name: str, **labels: str) -> Obj:
    return {"metadata": {"name": name, "labels": labels}, "spec": {}}


def ds(*, surge: Any = None, unavailable: Any = 1, selector: Obj | None = None) -> Obj:
    rolling: Obj = {"maxUnavailable": unavailable}
    if surge is not None:
        rolling["maxSurge"] = surge
    pod_spec: Obj = {"containers": [{"name": "c", "image": "a"}]}
    if selector:
        pod_spec["nodeSelector"] = selector
    return {"metadata": {"name": "agent", "namespace": "ns", "uid": "ds-uid", "generation": 1},
            "spec": {"selector": {"matchLabels": {"app": "agent"}},
                     "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": rolling},
                     "template": {"metadata": {"labels": {"app": "agent"}}, "spec": pod_spec}},
            "status": {"observedGeneration": 1}}


def pod(name: str, node_name: str | None = "n1", *, hash_: str = "new", phase: str = "Running", ready: bool = True,
        age: float = 100.0, deleting: bool = False) -> Obj:
    m: Obj = {"name": name, "namespace": "ns", "labels": {"app": "agent", "controller-revision-hash": hash_},
              "creationTimestamp": format_time(NOW - age)}
    if deleting:
        m["deletionTimestamp"] = format_time(NOW)
    conditions = [{"type": "Ready", "status": "True" if ready else "False",
                   "lastTransitionTime": format_time(NOW - 60)}]
    return {"metadata": m, "spec": {"nodeName": node_name} if node_name else {},
            "status": {"phase": phase, "conditions": conditions}}


def plan_for(d: Obj, nodes: list[Obj], node_to_pods: dict[str, list[Obj]],
             backoff: FailedPodsBackoff | None = None, now: float = NOW) -> Plan:
    plan = Plan()
    for n in nodes:
        pods_should_be_on_node(n, node_to_pods, d, "new", now=now, backoff=backoff or FailedPodsBackoff(), plan=plan)
    return plan


def test_creates_where_missing_and_deletes_where_not_wanted() -> None:
    d = ds(selector={"role": "web"})
    nodes = [node("n1", role="web"), node("n2", role="web"), node("n3", role="db")]
    plan = plan_for(d, nodes, {"n1": [pod("a", "n1")], "n3": [pod("c", "n3"), pod("d", "n3", deleting=True)]})
    assert plan.create_on == ["n2"] and plan.delete == ["c"]


def test_duplicates_keep_the_oldest_scheduled_pod() -> None:
    plan = plan_for(ds(), [node("n1")], {"n1": [pod("young", age=10), pod("old", age=500),
                                                pod("unbound", None, age=900)]})
    assert sorted(plan.delete) == ["unbound", "young"]


def test_failed_pods_are_deleted_with_backoff_and_succeeded_ones_at_once() -> None:
    backoff = FailedPodsBackoff()
    d = ds()
    first = plan_for(d, [node("n1")], {"n1": [pod("f", phase="Failed", ready=False)]}, backoff)
    assert first.delete == ["f"] and first.events[0][:2] == ("Warning", "FailedDaemonPod")
    again = plan_for(d, [node("n1")], {"n1": [pod("f2", phase="Failed", ready=False)]}, backoff, now=NOW + 0.5)
    assert again.delete == [] and again.requeue_after == 1.0  # inside the first second of backoff
    later = plan_for(d, [node("n1")], {"n1": [pod("f2", phase="Failed", ready=False)]}, backoff, now=NOW + 1.5)
    assert later.delete == ["f2"] and backoff.get("ds-uid/1/n1") == 2.0  # the delay doubles
    done = plan_for(d, [node("n1")], {"n1": [pod("s", phase="Succeeded")]})
    assert done.delete == ["s"] and done.events[0][:2] == ("Normal", "SucceededDaemonPod")


def test_surge_keeps_an_old_and_a_new_pod_until_the_new_one_is_available() -> None:
    d = ds(surge=1, unavailable=0)
    waiting = plan_for(d, [node("n1")], {"n1": [pod("old", hash_="old"), pod("new", ready=False, age=5)]})
    assert waiting.delete == []
    swapped = plan_for(d, [node("n1")], {"n1": [pod("old", hash_="old"), pod("new", age=5)]})
    assert swapped.delete == ["old"]
    gone = plan_for(d, [node("n1")], {"n1": [pod("old", deleting=True)]})
    assert gone.create_on == ["n1"]  # surging: a node whose only pod is going away gets a new one


def test_unscheduled_pods_of_missing_nodes() -> None:
    got = unscheduled_pods_without_node([node("n1")], {"n1": [pod("a", None)], "gone": [pod("b", None),
                                                                                        pod("c", "gone")]})
    assert got == ["b"]  # bound pods of a deleted node are the pod GC's


def test_rolling_update_within_max_unavailable() -> None:
    d = ds(unavailable=1)
    nodes = [node(f"n{i}") for i in range(1, 5)]
    node_to_pods = {f"n{i}": [pod(f"p{i}", f"n{i}", hash_="old")] for i in range(1, 4)}  # n4 has none yet
    max_surge, max_unavailable, desired = updated_desired_node_counts(d, nodes, node_to_pods)
    assert (max_surge, max_unavailable, desired) == (0, 1, 4) and node_to_pods["n4"] == []
    delete, create = rolling_update_plan(d, node_to_pods, "new", max_surge=0, max_unavailable=1, desired=4, now=NOW,
                                         should_run=lambda n: True)
    assert (delete, create) == ([], [])  # n4 (no pod) already uses the one unavailable slot
    node_to_pods["n4"] = [pod("p4", "n4")]
    delete, _ = rolling_update_plan(d, node_to_pods, "new", max_surge=0, max_unavailable=1, desired=4, now=NOW,
                                    should_run=lambda n: True)
    assert delete == ["p1"]
    node_to_pods["n2"] = [pod("p2", "n2", hash_="old", ready=False)]
    delete, _ = rolling_update_plan(d, node_to_pods, "new", max_surge=0, max_unavailable=1, desired=4, now=NOW,
                                    should_run=lambda n: True)
    assert delete == ["p2"]  # an unavailable old pod is replaced at once and uses up the budget


def test_rolling_update_with_surge() -> None:
    d = ds(surge=1, unavailable=0)
    node_to_pods = {"n1": [pod("p1", "n1", hash_="old")], "n2": [pod("p2", "n2", hash_="old")],
                    "n3": [pod("p3", "n3", hash_="old", ready=False)]}
    delete, create = rolling_update_plan(d, node_to_pods, "new", max_surge=1, max_unavailable=0, desired=3, now=NOW,
                                         should_run=lambda n: True)
    assert delete == [] and create == ["n3", "n1"]  # n3's old pod is unavailable: replace it beside the surge
    node_to_pods["n1"].append(pod("q1", "n1", age=5))
    delete, create = rolling_update_plan(d, node_to_pods, "new", max_surge=1, max_unavailable=0, desired=3, now=NOW,
                                         should_run=lambda n: True)
    assert delete == ["p1"] and create == ["n3", "n2"]


def test_status_counts_the_oldest_pod_per_node() -> None:
    d = ds(selector={"role": "web"})
    nodes = [node("n1", role="web"), node("n2", role="web"), node("n3", role="web"), node("n4")]
    node_to_pods = {"n1": [pod("a", "n1"), pod("a2", "n1", hash_="old", ready=False, age=10)],
                    "n2": [pod("b", "n2", hash_="old", ready=False)], "n4": [pod("d", "n4")]}
    assert compute_status(d, nodes, node_to_pods, "new", now=NOW) == {
        "desiredNumberScheduled": 3, "currentNumberScheduled": 2, "numberMisscheduled": 1, "numberReady": 1,
        "updatedNumberScheduled": 1, "numberAvailable": 1, "numberUnavailable": 2}
