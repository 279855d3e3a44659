"""Status counts and the Available / Progressing / ReplicaFailure conditions with time passed in
(upstream sync_test.go calculateStatus, progress_test.go syncRolloutStatus / requeueStuckDeployment,
deployment_util_test.go DeploymentComplete / DeploymentProgressing / DeploymentTimedOut)."""

from __future__ import annotations

from typing import Any

from kubecore.client.clock import FakeClock
from kubecore.controllers.controller_utils import format_time
from kubecore.controllers.deployment_progress import (
    AVAILABLE, PROGRESSING, REPLICA_FAILURE, calculate_status, deployment_complete, deployment_progressing,
    deployment_timed_out, get_condition, new_condition, paused_condition_changed, requeue_after, rollout_status,
    set_condition, status_equal,
)

Obj = dict[str, Any]
T0 = 1_700_000_000.0


def dep(replicas: int = 3, *, status: Obj | None = None, generation: int = 1, deadline: int | None = 600,
        paused: bool = False) -> Obj:
    spec: Obj = {"replicas": replicas, "paused": paused,
                 "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}}}
    if deadline is not None:
        spec["progressDeadlineSeconds"] = deadline
    return {"metadata": {"name": "web", "generation": generation}, "spec": spec, "status": status or {}}


def rs(name: str, replicas: int, *, actual: int | None = None, ready: int | None = None,
       available: int | None = None, conditions: list[Obj] | None = None) -> Obj:
    actual = replicas if actual is None else actual
    status: Obj = {"replicas": actual, "readyReplicas": actual if ready is None else ready,
                   "availableReplicas": actual if available is None else available}
    if conditions:
        status["conditions"] = conditions
    return {"metadata": {"name": name}, "spec": {"replicas": replicas}, "status": status}


def progressing(reason: str, at: float, status: str = "True") -> Obj:
    return new_condition(PROGRESSING, status, reason=reason, message="m", now=at)


def test_calculate_status_counts_and_available_condition() -> None:
    clock = FakeClock(T0)
    new, old = rs("new", 2, available=1), rs("old", 2, actual=3, ready=2, available=2)
    s = calculate_status([old, new], new, dep(3, generation=4), now=clock.now())
    assert {k: v for k, v in s.items() if k != "conditions"} == {
        "observedGeneration": 4, "replicas": 5, "updatedReplicas": 2, "readyReplicas": 4, "availableReplicas": 3,
        "unavailableReplicas": 1}
    assert s["conditions"] == [{"type": AVAILABLE, "status": "True", "lastUpdateTime": format_time(T0),
                                "lastTransitionTime": format_time(T0), "reason": "MinimumReplicasAvailable",
                                "message": "Deployment has minimum availability."}]
    # 3 replicas - maxUnavailable 1 = 2 needed; 1 available is not enough
    s = calculate_status([rs("new", 3, available=1)], None, dep(3), now=clock.now())
    cond = get_condition(s, AVAILABLE)
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "MinimumReplicasUnavailable")
    assert cond["message"] == "Deployment does not have minimum availability."
    assert "updatedReplicas" not in s  # zero counts are omitted, as the API stores them


def test_set_condition_keeps_transition_time_for_the_same_status() -> None:
    status: Obj = {}
    set_condition(status, progressing("NewReplicaSetCreated", T0))
    set_condition(status, progressing("ReplicaSetUpdated", T0 + 60))
    cond = get_condition(status, PROGRESSING)
    assert cond is not None and cond["reason"] == "ReplicaSetUpdated"
    assert cond["lastTransitionTime"] == format_time(T0) and cond["lastUpdateTime"] == format_time(T0 + 60)
    set_condition(status, progressing("ReplicaSetUpdated", T0 + 120))  # same status and reason: no change
    assert get_condition(status, PROGRESSING) == cond
    set_condition(status, progressing("ProgressDeadlineExceeded", T0 + 180, "False"))
    cond = get_condition(status, PROGRESSING)
    assert cond is not None and cond["lastTransitionTime"] == format_time(T0 + 180)


def test_complete_and_progressing() -> None:
    d = dep(3, generation=2, status={"replicas": 4, "updatedReplicas": 1, "readyReplicas": 3, "availableReplicas": 3})
    done = {"replicas": 3, "updatedReplicas": 3, "availableReplicas": 3, "observedGeneration": 2}
    assert deployment_complete(d, done)
    assert not deployment_complete(d, {**done, "observedGeneration": 1})
    assert not deployment_complete(d, {**done, "replicas": 4})
    assert deployment_progressing(d, {"replicas": 4, "updatedReplicas": 2, "readyReplicas": 3, "availableReplicas": 3})
    assert deployment_progressing(d, {"replicas": 3, "updatedReplicas": 1, "readyReplicas": 3, "availableReplicas": 3})
    assert not deployment_progressing(d, dict(d["status"]))


def test_timed_out_after_the_deadline() -> None:
    clock = FakeClock(T0)
    d = dep(deadline=600)
    status = {"conditions": [progressing("ReplicaSetUpdated", clock.now())]}
    clock.advance(600)
    assert not deployment_timed_out(d, status, now=clock.now())  # not before lastUpdate + deadline
    clock.advance(1)
    assert deployment_timed_out(d, status, now=clock.now())
    assert not deployment_timed_out(dep(deadline=None), status, now=clock.now())
    assert not deployment_timed_out(d, {"conditions": [progressing("NewReplicaSetAvailable", T0)]}, now=clock.now())
    assert deployment_timed_out(d, {"conditions": [progressing("ProgressDeadlineExceeded", T0, "False")]},
                                now=T0)


def test_rollout_status_progress_then_timeout_then_complete() -> None:
    clock = FakeClock(T0)
    new, old = rs("web-new", 1, available=0), rs("web-old", 3)
    d = dep(3, status={"replicas": 3, "availableReplicas": 3, "readyReplicas": 3,
                       "conditions": [progressing("NewReplicaSetCreated", T0)]})
    # the new pod exists now: updatedReplicas grew, that is progress
    clock.advance(30)
    s = rollout_status([old, new], new, d, now=clock.now())
    cond = get_condition(s, PROGRESSING)
    assert cond is not None and cond["reason"] == "ReplicaSetUpdated"
    assert cond["message"] == 'ReplicaSet "web-new" is progressing.'
    assert cond["lastUpdateTime"] == format_time(T0 + 30) and cond["lastTransitionTime"] == format_time(T0)
    d["status"] = s
    # nothing moves: the status stays, and the next look is due when the deadline passes
    clock.advance(100)
    again = rollout_status([old, new], new, d, now=clock.now())
    assert status_equal(again, s)
    assert requeue_after(d, again, now=clock.now()) == 600 - 100 + 1
    clock.advance(501)
    timed_out = rollout_status([old, new], new, d, now=clock.now())
    cond = get_condition(timed_out, PROGRESSING)
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "ProgressDeadlineExceeded")
    assert cond["message"] == 'ReplicaSet "web-new" has timed out progressing.'
    d["status"] = timed_out
    assert requeue_after(d, timed_out, now=clock.now()) is None
    # the rollout finishes after all
    done_new = rs("web-new", 3)
    complete = rollout_status([rs("web-old", 0, actual=0), done_new], done_new, d, now=clock.now())
    cond = get_condition(complete, PROGRESSING)
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", "NewReplicaSetAvailable")
    assert cond["message"] == 'ReplicaSet "web-new" has successfully progressed.'


def test_requeue_now_when_less_than_a_second_is_left() -> None:
    d = dep(deadline=10, status={"replicas": 3, "conditions": [progressing("ReplicaSetUpdated", T0)]})
    assert requeue_after(d, {"replicas": 4}, now=T0 + 9.5) == 0.0
    assert requeue_after(dep(deadline=None), {}, now=T0) is None


def test_no_deadline_removes_progressing_and_replica_failures_are_copied() -> None:
    failure = {"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": "quota",
               "lastTransitionTime": format_time(T0)}
    new = rs("web-new", 2, actual=0, conditions=[failure])
    d = dep(2, deadline=None, status={"conditions": [progressing("ReplicaSetUpdated", T0)]})
    s = rollout_status([new], new, d, now=T0 + 5)
    assert get_condition(s, PROGRESSING) is None
    copied = get_condition(s, REPLICA_FAILURE)
    assert copied is not None and copied["reason"] == "FailedCreate" and copied["lastUpdateTime"] == format_time(T0)
    d["status"] = s
    healed = rs("web-new", 2)
    assert get_condition(rollout_status([healed], healed, d, now=T0 + 9), REPLICA_FAILURE) is None


def test_paused_and_resumed_conditions() -> None:
    d = dep(paused=True)
    assert paused_condition_changed(d, now=T0)
    cond = get_condition(d["status"], PROGRESSING)
    assert cond is not None and (cond["status"], cond["reason"], cond["message"]) == \
        ("Unknown", "DeploymentPaused", "Deployment is paused")
    assert not paused_condition_changed(d, now=T0 + 1)
    d["spec"]["paused"] = False
    assert paused_condition_changed(d, now=T0 + 2)
    cond = get_condition(d["status"], PROGRESSING)
    assert cond is not None and (cond["reason"], cond["message"]) == ("DeploymentResumed", "Deployment is resumed")
    timed_out = dep(paused=True, status={"conditions": [progressing("ProgressDeadlineExceeded", T0, "False")]})
    assert not paused_condition_changed(timed_out, now=T0)
    assert not paused_condition_changed(dep(paused=True, deadline=None), now=T0)
