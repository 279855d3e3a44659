"""A Deployment's status and conditions, computed from its ReplicaSets with the time passed in
(upstream sync.go calculateStatus, progress.go syncRolloutStatus / requeueStuckDeployment, the
condition helpers of deployment_util.go and checkPausedConditions). Pure: the callers write.

Status fields, summed over the Deployment's ReplicaSets:

    replicas             status.replicas (pods that exist)     updatedReplicas   the new RS's status.replicas
    readyReplicas        status.readyReplicas                  availableReplicas status.availableReplicas
    unavailableReplicas  max(0, sum of spec.replicas - availableReplicas)
    observedGeneration   the Deployment's metadata.generation  collisionCount    kept as is

Zero counts are left out, as the API's `omitempty` does, so a status read back compares equal.

Conditions (type / status / reason, upstream's messages):

    Available    True  MinimumReplicasAvailable     "Deployment has minimum availability."
                 False MinimumReplicasUnavailable   "Deployment does not have minimum availability."
    Progressing  True  NewReplicaSetCreated         "Created new replica set \"<rs>\""
                 True  FoundNewReplicaSet           "Found new replica set \"<rs>\""
                 True  ReplicaSetUpdated            "ReplicaSet \"<rs>\" is progressing."
                 True  NewReplicaSetAvailable       "ReplicaSet \"<rs>\" has successfully progressed."
                 False ProgressDeadlineExceeded     "ReplicaSet \"<rs>\" has timed out progressing."
                 False ReplicaSetCreateError        "Failed to create new replica set \"<rs>\": <error>"
                 Unknown DeploymentPaused / DeploymentResumed  "Deployment is paused" / "... resumed"
    ReplicaFailure  copied from a ReplicaSet's ReplicaFailure condition (the new RS's first)

Progress: a rollout is Progressing while, compared with the status last written, more pods were
updated, fewer old pods remain, or more are ready or available; each such sync refreshes the
condition's lastUpdateTime. When lastUpdateTime + progressDeadlineSeconds passes without
progress (and the rollout is neither complete nor paused) the condition turns to
ProgressDeadlineExceeded; `requeue_after` says when to look again so that happens on time.
Worked example: deadline 600 s, last progress at 00:00, a sync at 00:03 without progress
requeues after 7 min + 1 s; the sync then sees 00:10:01 > 00:10:00 and reports the timeout.
"""

from __future__ import annotations

from typing import Any

from kubecore.controllers.controller_utils import format_time, meta, parse_time
from kubecore.controllers.deployment_scaling import max_unavailable
from kubecore.controllers.deployment_util import (
    actual_replica_count, available_replica_count, has_progress_deadline, ready_replica_count, replica_count,
    replicas_of,
)

Obj = dict[str, Any]

PROGRESSING, AVAILABLE, REPLICA_FAILURE = "Progressing", "Available", "ReplicaFailure"
TRUE, FALSE, UNKNOWN = "True", "False", "Unknown"

REPLICA_SET_UPDATED_REASON = "ReplicaSetUpdated"
FAILED_RS_CREATE_REASON = "ReplicaSetCreateError"
NEW_REPLICA_SET_REASON = "NewReplicaSetCreated"
FOUND_NEW_RS_REASON = "FoundNewReplicaSet"
NEW_RS_AVAILABLE_REASON = "NewReplicaSetAvailable"
TIMED_OUT_REASON = "ProgressDeadlineExceeded"
PAUSED_DEPLOY_REASON = "DeploymentPaused"
RESUMED_DEPLOY_REASON = "DeploymentResumed"
MINIMUM_REPLICAS_AVAILABLE = "MinimumReplicasAvailable"
MINIMUM_REPLICAS_UNAVAILABLE = "MinimumReplicasUnavailable"

_COUNTS = ("observedGeneration", "replicas", "updatedReplicas", "readyReplicas", "availableReplicas",
           "unavailableReplicas")


# -- conditions -----------------------------------------------------------------------------------
def new_condition(cond_type: str, status: str, *, reason: str, message: str, now: float) -> Obj:
    t = format_time(now)
    return {"type": cond_type, "status": status, "lastUpdateTime": t, "lastTransitionTime": t,
            "reason": reason, "message": message}


def get_condition(status: Obj, cond_type: str) -> Obj | None:
    for c in status.get("conditions") or ():
        if isinstance(c, dict) and c.get("type") == cond_type:
            return c
    return None


def set_condition(status: Obj, condition: Obj) -> None:
    """Add `condition`, replacing one of its type unless that has the same status and reason;
    a replaced condition of the same status keeps its lastTransitionTime."""
    current = get_condition(status, condition["type"])
    if current is not None and current.get("status") == condition["status"] and \
            current.get("reason") == condition.get("reason"):
        return
    if current is not None and current.get("status") == condition["status"]:
        condition = {**condition, "lastTransitionTime": current.get("lastTransitionTime")}
    status["conditions"] = [*_without(status, condition["type"]), condition]


def remove_condition(status: Obj, cond_type: str) -> None:
    remaining = _without(status, cond_type)
    if remaining:
        status["conditions"] = remaining
    else:
        status.pop("conditions", None)


def _without(status: Obj, cond_type: str) -> list[Obj]:
    return [c for c in status.get("conditions") or () if isinstance(c, dict) and c.get("type") != cond_type]


def status_of(d: Obj) -> Obj:
    s = d.get("status")
    return s if isinstance(s, dict) else {}


def compact_status(status: Obj) -> Obj:
    """`status` as the API stores it: zero counts and empty conditions left out."""
    out = {k: v for k, v in status.items() if not (k in _COUNTS and not v)}
    if not out.get("conditions"):
        out.pop("conditions", None)
    if out.get("collisionCount") is None:
        out.pop("collisionCount", None)
    return out


def status_equal(a: Obj, b: Obj) -> bool:
    return compact_status(a) == compact_status(b)


# -- status ---------------------------------------------------------------------------------------
def calculate_status(all_rses: list[Obj | None], new_rs: Obj | None, d: Obj, *, now: float) -> Obj:
    """The status `d` should report (calculateStatus): counts plus the Available condition."""
    available = available_replica_count(all_rses)
    old = status_of(d)
    status: Obj = {
        "observedGeneration": int(meta(d).get("generation") or 0),
        "replicas": actual_replica_count(all_rses),
        "updatedReplicas": actual_replica_count([new_rs]),
        "readyReplicas": ready_replica_count(all_rses),
        "availableReplicas": available,
        "unavailableReplicas": max(0, replica_count(all_rses) - available),
    }
    if old.get("collisionCount") is not None:
        status["collisionCount"] = old["collisionCount"]
    status["conditions"] = [dict(c) for c in old.get("conditions") or () if isinstance(c, dict)]
    if available >= replicas_of(d) - max_unavailable(d):
        set_condition(status, new_condition(AVAILABLE, TRUE, reason=MINIMUM_REPLICAS_AVAILABLE,
                                            message="Deployment has minimum availability.", now=now))
    else:
        set_condition(status, new_condition(AVAILABLE, FALSE, reason=MINIMUM_REPLICAS_UNAVAILABLE,
                                            message="Deployment does not have minimum availability.", now=now))
    return compact_status(status)


def _count(status: Obj, field: str) -> int:
    return int(status.get(field) or 0)


def deployment_complete(d: Obj, status: Obj) -> bool:
    """Every desired replica is updated and available, no old pod runs, and the spec is observed."""
    replicas = replicas_of(d)
    return _count(status, "updatedReplicas") == replicas and _count(status, "replicas") == replicas and \
        _count(status, "availableReplicas") == replicas and \
        _count(status, "observedGeneration") >= int(meta(d).get("generation") or 0)


def deployment_progressing(d: Obj, new_status: Obj) -> bool:
    """More updated, fewer old, more ready or more available pods than the status last written."""
    old = status_of(d)
    old_old = _count(old, "replicas") - _count(old, "updatedReplicas")
    new_old = _count(new_status, "replicas") - _count(new_status, "updatedReplicas")
    return _count(new_status, "updatedReplicas") > _count(old, "updatedReplicas") or new_old < old_old or \
        _count(new_status, "readyReplicas") > _count(old, "readyReplicas") or \
        _count(new_status, "availableReplicas") > _count(old, "availableReplicas")


def progress_deadline(d: Obj) -> int:
    return int((d.get("spec") or {}).get("progressDeadlineSeconds") or 0)


def deployment_timed_out(d: Obj, new_status: Obj, *, now: float) -> bool:
    """No progress reported for progressDeadlineSeconds (or the timeout was reported already)."""
    if not has_progress_deadline(d):
        return False
    cond = get_condition(new_status, PROGRESSING)
    if cond is None or cond.get("reason") == NEW_RS_AVAILABLE_REASON:
        return False
    if cond.get("reason") == TIMED_OUT_REASON:
        return True
    since = parse_time(cond.get("lastUpdateTime"))
    return since is not None and since + progress_deadline(d) < now


def _rs_name(new_rs: Obj | None) -> str | None:
    return str(meta(new_rs).get("name")) if new_rs is not None else None


def _progress_message(d: Obj, new_rs: Obj | None, what: str) -> str:
    name = _rs_name(new_rs)
    return f'ReplicaSet "{name}" {what}' if name is not None else f'Deployment "{meta(d).get("name")}" {what}'


def replica_failures(all_rses: list[Obj | None], new_rs: Obj | None) -> list[Obj]:
    """ReplicaFailure conditions of the new ReplicaSet, else of any ReplicaSet, as Deployment conditions."""
    def failures(rs: Obj) -> list[Obj]:
        out = []
        for c in (rs.get("status") or {}).get("conditions") or ():
            if isinstance(c, dict) and c.get("type") == REPLICA_FAILURE:
                out.append({"type": REPLICA_FAILURE, "status": c.get("status"),
                            "lastUpdateTime": c.get("lastTransitionTime"),
                            "lastTransitionTime": c.get("lastTransitionTime"),
                            "reason": c.get("reason"), "message": c.get("message")})
        return out

    if new_rs is not None and (found := failures(new_rs)):
        return found
    return [c for rs in all_rses if rs is not None for c in failures(rs)]


def rollout_status(all_rses: list[Obj | None], new_rs: Obj | None, d: Obj, *, now: float) -> Obj:
    """The status a sync during a rollout writes (syncRolloutStatus): calculate_status plus the
    Progressing and ReplicaFailure conditions."""
    status = calculate_status(all_rses, new_rs, d, now=now)
    if not has_progress_deadline(d):
        remove_condition(status, PROGRESSING)
    current = get_condition(status_of(d), PROGRESSING)
    complete_before = _count(status, "replicas") == _count(status, "updatedReplicas") and \
        current is not None and current.get("reason") == NEW_RS_AVAILABLE_REASON
    if has_progress_deadline(d) and not complete_before:
        if deployment_complete(d, status):
            set_condition(status, new_condition(PROGRESSING, TRUE, reason=NEW_RS_AVAILABLE_REASON,
                                                message=_progress_message(d, new_rs, "has successfully progressed."),
                                                now=now))
        elif deployment_progressing(d, status):
            cond = new_condition(PROGRESSING, TRUE, reason=REPLICA_SET_UPDATED_REASON,
                                 message=_progress_message(d, new_rs, "is progressing."), now=now)
            if current is not None:  # refresh lastUpdateTime even with the same reason
                if current.get("status") == TRUE:
                    cond["lastTransitionTime"] = current.get("lastTransitionTime")
                remove_condition(status, PROGRESSING)
            set_condition(status, cond)
        elif deployment_timed_out(d, status, now=now):
            set_condition(status, new_condition(PROGRESSING, FALSE, reason=TIMED_OUT_REASON,
                                                message=_progress_message(d, new_rs, "has timed out progressing."),
                                                now=now))
    failures = replica_failures(all_rses, new_rs)
    if failures:
        set_condition(status, failures[0])
    else:
        remove_condition(status, REPLICA_FAILURE)
    return compact_status(status)


def requeue_after(d: Obj, new_status: Obj, *, now: float) -> float | None:
    """When to look at a rollout that made no progress again (requeueStuckDeployment): None for
    never, 0 for now (rate limited), else seconds (one more than the time left, against skew)."""
    current = get_condition(status_of(d), PROGRESSING)
    if not has_progress_deadline(d) or current is None:
        return None
    if deployment_complete(d, new_status) or current.get("reason") == TIMED_OUT_REASON:
        return None
    since = parse_time(current.get("lastUpdateTime"))
    if since is None:
        return None
    after = since + progress_deadline(d) - now
    if after < 1.0:
        return 0.0
    return after + 1.0


def paused_condition_changed(d: Obj, *, now: float) -> bool:
    """Set Progressing=Unknown DeploymentPaused/DeploymentResumed on `d`'s status when the pause
    state changed (checkPausedConditions); True if the status must be written."""
    if not has_progress_deadline(d):
        return False
    status = d.setdefault("status", {})
    cond = get_condition(status, PROGRESSING)
    if cond is not None and cond.get("reason") == TIMED_OUT_REASON:
        return False  # a reported lack of progress is not overwritten
    paused_exists = cond is not None and cond.get("reason") == PAUSED_DEPLOY_REASON
    paused = bool((d.get("spec") or {}).get("paused"))
    if paused and not paused_exists:
        set_condition(status, new_condition(PROGRESSING, UNKNOWN, reason=PAUSED_DEPLOY_REASON,
                                            message="Deployment is paused", now=now))
        return True
    if not paused and paused_exists:
        set_condition(status, new_condition(PROGRESSING, UNKNOWN, reason=RESUMED_DEPLOY_REASON,
                                            message="Deployment is resumed", now=now))
        return True
    return False
