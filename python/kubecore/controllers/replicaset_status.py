"""The status a ReplicaSet (or ReplicationController) reports, computed from the pods it owns
(upstream's replica_set_utils.go: calculateStatus, updateReplicaSetStatus, the condition helpers).

    replicas              owned active pods
    fullyLabeledReplicas  of those, pods carrying every label of the pod template
    readyReplicas         of those, pods with Ready=True
    availableReplicas     of those, pods Ready for more than spec.minReadySeconds
    observedGeneration    metadata.generation of the object the status was computed from
    conditions            ReplicaFailure=True (reason FailedCreate/FailedDelete, the error as the
                          message) after a create/delete error; removed after a clean sync

A new status is written (through the status subresource) only when one of these differs from what
the object already reports, so a steady-state sync costs no write. An existing ReplicaFailure
condition keeps its first transition time and message while the failure lasts, as upstream.
"""

from __future__ import annotations

from typing import Any

from kubecore.controllers.controller_utils import format_time, is_pod_available, is_pod_ready, labels_of

Obj = dict[str, Any]

REPLICA_FAILURE = "ReplicaFailure"
STATUS_FIELDS = ("replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas")


def spec_replicas(obj: Obj) -> int:
    """spec.replicas, defaulting to 1 as the API does."""
    spec = obj.get("spec") or {}
    value = spec.get("replicas")
    return 1 if value is None else int(value)


def min_ready_seconds(obj: Obj) -> int:
    return int((obj.get("spec") or {}).get("minReadySeconds") or 0)


def template_labels(obj: Obj) -> dict[str, str]:
    template = (obj.get("spec") or {}).get("template") or {}
    labels = (template.get("metadata") or {}).get("labels")
    return labels if isinstance(labels, dict) else {}


def get_condition(status: Obj, cond_type: str) -> Obj | None:
    for c in status.get("conditions") or ():
        if isinstance(c, dict) and c.get("type") == cond_type:
            return c
    return None


def new_condition(cond_type: str, status: str, *, reason: str, message: str, now: float) -> Obj:
    return {"type": cond_type, "status": status, "lastTransitionTime": format_time(now), "reason": reason,
            "message": message}


def set_condition(status: Obj, condition: Obj) -> None:
    """Add or replace `condition`, unless one of its type with the same status and reason is there."""
    current = get_condition(status, condition["type"])
    if current is not None and current.get("status") == condition["status"] and \
            current.get("reason") == condition.get("reason"):
        return
    status["conditions"] = [*_without(status.get("conditions"), condition["type"]), condition]


def remove_condition(status: Obj, cond_type: str) -> None:
    remaining = _without(status.get("conditions"), cond_type)
    if remaining:
        status["conditions"] = remaining
    else:
        status.pop("conditions", None)


def _without(conditions: Any, cond_type: str) -> list[Obj]:
    return [c for c in conditions or () if isinstance(c, dict) and c.get("type") != cond_type]


def calculate_status(obj: Obj, pods: list[Obj], manage_error: BaseException | None, *, now: float) -> Obj:
    """The status `obj` should report for its claimed active `pods` (a new dict; `obj` untouched)."""
    old = obj.get("status") or {}
    status: Obj = {k: v for k, v in old.items()}
    if "conditions" in status:
        status["conditions"] = [dict(c) for c in status["conditions"] or ()]
    want = template_labels(obj)
    min_ready = min_ready_seconds(obj)
    fully_labeled = ready = available = 0
    for pod in pods:
        labels = labels_of(pod)
        if all(labels.get(k) == v for k, v in want.items()):
            fully_labeled += 1
        if is_pod_ready(pod):
            ready += 1
            if is_pod_available(pod, min_ready, now):
                available += 1
    failure = get_condition(old, REPLICA_FAILURE)
    if manage_error is not None and failure is None:
        diff = len(pods) - spec_replicas(obj)
        reason = "FailedCreate" if diff < 0 else "FailedDelete" if diff > 0 else ""
        set_condition(status, new_condition(REPLICA_FAILURE, "True", reason=reason, message=str(manage_error),
                                            now=now))
    elif manage_error is None and failure is not None:
        remove_condition(status, REPLICA_FAILURE)
    status.update(replicas=len(pods), fullyLabeledReplicas=fully_labeled, readyReplicas=ready,
                  availableReplicas=available)
    return status


def status_unchanged(obj: Obj, new_status: Obj) -> bool:
    """True when writing `new_status` would change nothing that matters (updateReplicaSetStatus's test)."""
    old = obj.get("status") or {}
    if any(int(old.get(f) or 0) != int(new_status.get(f) or 0) for f in STATUS_FIELDS):
        return False
    generation = int((obj.get("metadata") or {}).get("generation") or 0)
    if generation != int(old.get("observedGeneration") or 0):
        return False
    return (old.get("conditions") or []) == (new_status.get("conditions") or [])


def with_status(obj: Obj, new_status: Obj, *, generation: int | None = None) -> Obj:
    """A shallow copy of `obj` carrying `new_status`, its observedGeneration set to `generation`
    (default: `obj`'s own; a retry on a fresher copy passes the generation the status was computed
    from, so it never claims to have seen a newer spec). `obj` is untouched."""
    status = dict(new_status)
    status["observedGeneration"] = generation if generation is not None else \
        int((obj.get("metadata") or {}).get("generation") or 0)
    return {**obj, "status": status}
