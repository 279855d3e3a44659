"""PodDisruptionBudget status arithmetic (upstream pkg/controller/disruption/disruption.go's pure
parts and k8s.io/component-helpers/apps/poddisruptionbudget).

- `scaled_value`: an IntOrString against a total (intstr.GetScaledValueFromIntOrPercent, rounding
  up): 2 -> 2; "50%" of 5 -> 3; "x" -> InvalidIntOrPercent.
- `desired_healthy`: from maxUnavailable (expected - scaled(maxUnavailable), at least 0) or
  minAvailable (an int needs no controller scale: expected = number of selected pods; a
  percentage is of the controllers' total scale). `needs_scale` says when the controllers' scale
  must be looked up.
- `build_disrupted_pods`: keeps entries of status.disruptedPods for pods that still exist, are not
  being deleted yet and were disrupted less than DELETION_TIMEOUT (2 min) ago; returns the time
  the next entry expires (to look again then) and the pods whose entry expired (a NotDeleted
  event each).
- `count_healthy`: Ready pods that are neither being deleted nor recently disrupted.
- `new_status` / `status_up_to_date`: the status upstream writes, with the DisruptionAllowed
  condition (True/SufficientPods when disruptionsAllowed > 0, else False/InsufficientPods;
  False/SyncFailed from `fail_safe_status`), lastTransitionTime kept while the status stays.

Times are seconds since the epoch (`kubecore.client.clock`).
"""

from __future__ import annotations

import math
from typing import Any

from kubecore.controllers.controller_utils import format_time, is_pod_ready, meta, parse_time

Obj = dict[str, Any]
DELETION_TIMEOUT = 120.0
DISRUPTION_ALLOWED = "DisruptionAllowed"
SUFFICIENT_PODS = "SufficientPods"
INSUFFICIENT_PODS = "InsufficientPods"
SYNC_FAILED = "SyncFailed"


class InvalidIntOrPercent(ValueError):
    pass


def scaled_value(value: Any, total: int) -> int:
    """An int as is; "N%" of `total`, rounded up."""
    if isinstance(value, bool):
        raise InvalidIntOrPercent(f"invalid value for IntOrString: invalid type: {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        if not value.endswith("%"):
            raise InvalidIntOrPercent("invalid value for IntOrString: invalid type: string is not a percentage")
        try:
            percent = int(value[:-1])
        except ValueError:
            raise InvalidIntOrPercent(f"invalid value {value!r}: strconv.Atoi: parsing {value[:-1]!r}: "
                                      f"invalid syntax") from None
        return math.ceil(percent * total / 100)
    raise InvalidIntOrPercent(f"invalid value for IntOrString: invalid type: {type(value).__name__}")


def needs_scale(pdb: Obj) -> bool:
    """Whether the budget is relative to its pods' controllers' scale."""
    spec = pdb.get("spec") or {}
    if spec.get("maxUnavailable") is not None:
        return True
    return isinstance(spec.get("minAvailable"), str)


def desired_healthy(pdb: Obj, *, pod_count: int, scale: int | None) -> tuple[int, int]:
    """(expectedPods, desiredHealthy); `scale` is the controllers' total when `needs_scale`."""
    spec = pdb.get("spec") or {}
    if spec.get("maxUnavailable") is not None:
        expected = scale or 0
        return expected, max(0, expected - scaled_value(spec["maxUnavailable"], expected))
    min_available = spec.get("minAvailable")
    if min_available is None:
        return 0, 0
    if isinstance(min_available, int) and not isinstance(min_available, bool):
        return pod_count, min_available
    expected = scale or 0
    return expected, scaled_value(min_available, expected)


def build_disrupted_pods(pods: list[Obj], pdb: Obj, now: float) -> tuple[dict[str, str], float | None, list[Obj]]:
    """(disruptedPods to keep, when to look again, pods whose deletion never came)."""
    recorded = (pdb.get("status") or {}).get("disruptedPods") or {}
    kept: dict[str, str] = {}
    recheck: float | None = None
    expired: list[Obj] = []
    if not recorded:
        return kept, None, expired
    for pod in pods:
        m = meta(pod)
        if m.get("deletionTimestamp"):
            continue
        stamp = recorded.get(m.get("name"))
        if stamp is None:
            continue
        at = parse_time(stamp)
        expected_deletion = (at or 0.0) + DELETION_TIMEOUT
        if expected_deletion < now:
            expired.append(pod)
            continue
        if recheck is None or expected_deletion < recheck:
            recheck = expected_deletion
        kept[str(m.get("name"))] = stamp
    return kept, recheck, expired


def count_healthy(pods: list[Obj], disrupted: dict[str, str], now: float) -> int:
    healthy = 0
    for pod in pods:
        m = meta(pod)
        if m.get("deletionTimestamp"):
            continue
        stamp = disrupted.get(str(m.get("name")))
        if stamp is not None and (parse_time(stamp) or 0.0) + DELETION_TIMEOUT > now:
            continue
        if is_pod_ready(pod):
            healthy += 1
    return healthy


def set_condition(conditions: list[Obj], condition: Obj, *, now: float) -> list[Obj]:
    """apimeta.SetStatusCondition: add, or update in place; lastTransitionTime moves only when the
    status changes."""
    out = [dict(c) for c in conditions]
    for c in out:
        if c.get("type") == condition["type"]:
            if c.get("status") != condition["status"]:
                c["status"] = condition["status"]
                c["lastTransitionTime"] = format_time(now)
            c["reason"], c["message"] = condition["reason"], condition.get("message", "")
            c["observedGeneration"] = condition.get("observedGeneration", 0)
            if not c["observedGeneration"]:
                del c["observedGeneration"]  # omitempty
            return out
    new = {"type": condition["type"], "status": condition["status"],
           "observedGeneration": condition.get("observedGeneration", 0),
           "lastTransitionTime": format_time(now), "reason": condition["reason"],
           "message": condition.get("message", "")}
    if not new["observedGeneration"]:
        del new["observedGeneration"]
    out.append(new)
    return out


def _find(conditions: list[Obj], ctype: str) -> Obj | None:
    return next((c for c in conditions if isinstance(c, dict) and c.get("type") == ctype), None)


def _allowed_condition(allowed: int, observed_generation: int) -> Obj:
    if allowed > 0:
        return {"type": DISRUPTION_ALLOWED, "status": "True", "reason": SUFFICIENT_PODS, "message": "",
                "observedGeneration": observed_generation}
    return {"type": DISRUPTION_ALLOWED, "status": "False", "reason": INSUFFICIENT_PODS, "message": "",
            "observedGeneration": observed_generation}


def conditions_up_to_date(pdb: Obj) -> bool:
    """pdbhelper.ConditionsAreUpToDate."""
    status = pdb.get("status") or {}
    cond = _find(status.get("conditions") or [], DISRUPTION_ALLOWED)
    if cond is None or int(status.get("observedGeneration") or 0) != int(meta(pdb).get("generation") or 0):
        return False
    if int(status.get("disruptionsAllowed") or 0) > 0:
        return cond.get("status") == "True" and cond.get("reason") == SUFFICIENT_PODS
    return cond.get("status") == "False" and cond.get("reason") == INSUFFICIENT_PODS


def new_status(pdb: Obj, *, current_healthy: int, desired: int, expected: int, disrupted: dict[str, str],
               now: float) -> Obj | None:
    """The status to write, or None when the current one is already right (updatePdbStatus)."""
    allowed = current_healthy - desired
    if expected <= 0 or allowed <= 0:
        allowed = 0
    status = pdb.get("status") or {}
    generation = int(meta(pdb).get("generation") or 0)
    if (int(status.get("currentHealthy") or 0) == current_healthy
            and int(status.get("desiredHealthy") or 0) == desired
            and int(status.get("expectedPods") or 0) == expected
            and int(status.get("disruptionsAllowed") or 0) == allowed
            and (status.get("disruptedPods") or {}) == disrupted
            and int(status.get("observedGeneration") or 0) == generation
            and conditions_up_to_date(pdb)):
        return None
    out: Obj = {"currentHealthy": current_healthy, "desiredHealthy": desired, "expectedPods": expected,
                "disruptionsAllowed": allowed, "observedGeneration": generation}
    if disrupted:
        out["disruptedPods"] = disrupted
    out["conditions"] = set_condition(list(status.get("conditions") or []),
                                      _allowed_condition(allowed, generation), now=now)
    return out


def fail_safe_status(pdb: Obj, error: str, *, now: float) -> Obj:
    """The status written when a sync fails: no disruptions allowed, condition SyncFailed."""
    status = dict(pdb.get("status") or {})
    status["disruptionsAllowed"] = 0
    observed = int(status.get("observedGeneration") or 0)
    status["conditions"] = set_condition(list(status.get("conditions") or []),
                                         {"type": DISRUPTION_ALLOWED, "status": "False", "reason": SYNC_FAILED,
                                          "message": error, "observedGeneration": observed}, now=now)
    return status
