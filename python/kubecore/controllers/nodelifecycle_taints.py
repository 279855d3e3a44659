"""Taints, tolerations and node conditions as the node lifecycle and taint eviction controllers
read them (upstream pkg/util/taints, core/v1 Toleration.ToleratesTaint, v1helper
GetMatchingTolerations, component-helpers node/topology GetZoneKey, and the condition -> taint
maps of pkg/controller/nodelifecycle).

Everything here is pure: it reads the plain dicts of cached objects and returns new values; it
never mutates its arguments.

Taint identity. Two taints *match* when key and effect are equal (Taint.MatchTaint); a node holds
at most one taint per (key, effect). `taint_set_diff(wanted, current)` compares by that identity,
so a taint whose value or timeAdded differs is neither added nor removed.

Which taints the controllers own:
- NoExecute `node.kubernetes.io/not-ready` (Ready=False) and `node.kubernetes.io/unreachable`
  (Ready=Unknown), added through the rate-limited per-zone queue (`NOT_READY_TAINT`,
  `UNREACHABLE_TAINT`; mutually exclusive).
- NoSchedule taints for conditions (`no_schedule_taints_for`, TaintNodeByCondition): Ready
  False/Unknown -> not-ready/unreachable, MemoryPressure/DiskPressure/PIDPressure/
  NetworkUnavailable True -> memory-pressure/disk-pressure/pid-pressure/network-unavailable, and
  `node.kubernetes.io/unschedulable` for `spec.unschedulable`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

Obj = dict[str, Any]

NO_EXECUTE, NO_SCHEDULE = "NoExecute", "NoSchedule"
TAINT_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_UNREACHABLE = "node.kubernetes.io/unreachable"
TAINT_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
TAINT_MEMORY_PRESSURE = "node.kubernetes.io/memory-pressure"
TAINT_DISK_PRESSURE = "node.kubernetes.io/disk-pressure"
TAINT_PID_PRESSURE = "node.kubernetes.io/pid-pressure"
TAINT_NETWORK_UNAVAILABLE = "node.kubernetes.io/network-unavailable"

UNREACHABLE_TAINT: Obj = {"key": TAINT_UNREACHABLE, "effect": NO_EXECUTE}
NOT_READY_TAINT: Obj = {"key": TAINT_NOT_READY, "effect": NO_EXECUTE}

READY, MEMORY_PRESSURE, DISK_PRESSURE, PID_PRESSURE = "Ready", "MemoryPressure", "DiskPressure", "PIDPressure"
NETWORK_UNAVAILABLE = "NetworkUnavailable"
TRUE, FALSE, UNKNOWN = "True", "False", "Unknown"

CONDITION_TO_TAINT_KEY: dict[str, dict[str, str]] = {
    READY: {FALSE: TAINT_NOT_READY, UNKNOWN: TAINT_UNREACHABLE},
    MEMORY_PRESSURE: {TRUE: TAINT_MEMORY_PRESSURE},
    DISK_PRESSURE: {TRUE: TAINT_DISK_PRESSURE},
    NETWORK_UNAVAILABLE: {TRUE: TAINT_NETWORK_UNAVAILABLE},
    PID_PRESSURE: {TRUE: TAINT_PID_PRESSURE},
}
"""{condition type: {condition status: taint key}} (nodeConditionToTaintKeyStatusMap)."""
TAINT_KEY_TO_CONDITION = {key: ctype for ctype, by_status in CONDITION_TO_TAINT_KEY.items()
                          for key in by_status.values()}

LABEL_ZONE, LABEL_REGION = "topology.kubernetes.io/zone", "topology.kubernetes.io/region"
LABEL_ZONE_BETA = "failure-domain.beta.kubernetes.io/zone"
LABEL_REGION_BETA = "failure-domain.beta.kubernetes.io/region"
LABEL_EXCLUDE_DISRUPTION = "node.kubernetes.io/exclude-disruption"


# -- node accessors -------------------------------------------------------------------------------
def _dict(obj: Obj, key: str) -> Obj:
    v = obj.get(key)
    return v if isinstance(v, dict) else {}


def node_taints(node: Obj) -> list[Obj]:
    return [t for t in _dict(node, "spec").get("taints") or () if isinstance(t, dict)]


def get_condition(status: Obj | None, ctype: str) -> Obj | None:
    """The condition of type `ctype` in a NodeStatus (or PodStatus), if any (GetNodeCondition)."""
    for c in (status or {}).get("conditions") or ():
        if isinstance(c, dict) and c.get("type") == ctype:
            return c
    return None


def ready_condition(node: Obj) -> Obj | None:
    return get_condition(_dict(node, "status"), READY)


def zone_key(node: Obj) -> str:
    """"<region>:\\x00:<zone>" from the deprecated failure-domain.beta labels when present, else
    the topology ones; "" without either (nodetopology.GetZoneKey, which still prefers the beta
    labels; the NUL keeps a colon in a name from making keys collide)."""
    labels = _dict(node, "metadata").get("labels") or {}
    zone = labels.get(LABEL_ZONE_BETA, labels.get(LABEL_ZONE, ""))
    region = labels.get(LABEL_REGION_BETA, labels.get(LABEL_REGION, ""))
    if not region and not zone:
        return ""
    return f"{region}:\x00:{zone}"


def excluded_from_disruption(node: Obj) -> bool:
    return LABEL_EXCLUDE_DISRUPTION in (_dict(node, "metadata").get("labels") or {})


# -- taint sets -----------------------------------------------------------------------------------
def match_taint(a: Obj, b: Obj) -> bool:
    """Same key and effect (Taint.MatchTaint)."""
    return a.get("key") == b.get("key") and a.get("effect") == b.get("effect")


def taint_exists(taints: Iterable[Obj], taint: Obj) -> bool:
    return any(match_taint(t, taint) for t in taints)


def taint_set_diff(wanted: list[Obj], current: list[Obj]) -> tuple[list[Obj], list[Obj]]:
    """(in `wanted` but not `current`, in `current` but not `wanted`), by key and effect."""
    to_add = [t for t in wanted if not taint_exists(current, t)]
    to_remove = [t for t in current if not taint_exists(wanted, t)]
    return to_add, to_remove


def add_or_update_taint(taints: list[Obj], taint: Obj) -> tuple[list[Obj], bool]:
    """`taints` with `taint` added, or replacing the one it matches unless that one is identical
    (taintutils.AddOrUpdateTaint). Returns (new list, changed)."""
    out: list[Obj] = []
    replaced = False
    for t in taints:
        if match_taint(t, taint):
            if t == taint:
                return list(taints), False
            out.append(dict(taint))
            replaced = True
        else:
            out.append(t)
    if not replaced:
        out.append(dict(taint))
    return out, True


def remove_taint(taints: list[Obj], taint: Obj) -> tuple[list[Obj], bool]:
    """`taints` without those matching `taint` (taintutils.RemoveTaint). Returns (new, changed)."""
    out = [t for t in taints if not match_taint(t, taint)]
    return out, len(out) != len(taints)


def no_execute_taints(taints: Iterable[Obj]) -> list[Obj]:
    return [t for t in taints if t.get("effect") == NO_EXECUTE]


def no_schedule_taints_for(node: Obj) -> list[Obj]:
    """The NoSchedule taints a node's conditions and spec.unschedulable call for
    (doNoScheduleTaintingPass), in condition order then unschedulable."""
    wanted: list[Obj] = []
    for c in _dict(node, "status").get("conditions") or ():
        if not isinstance(c, dict):
            continue
        key = CONDITION_TO_TAINT_KEY.get(str(c.get("type")), {}).get(str(c.get("status")))
        if key is not None:
            wanted.append({"key": key, "effect": NO_SCHEDULE})
    if _dict(node, "spec").get("unschedulable"):
        wanted.append({"key": TAINT_UNSCHEDULABLE, "effect": NO_SCHEDULE})
    return wanted


def controller_no_schedule_taints(taints: Iterable[Obj]) -> list[Obj]:
    """The node's NoSchedule taints this controller manages (condition taints and unschedulable)."""
    return [t for t in taints if t.get("effect") == NO_SCHEDULE
            and (t.get("key") == TAINT_UNSCHEDULABLE or t.get("key") in TAINT_KEY_TO_CONDITION)]


# -- tolerations ----------------------------------------------------------------------------------
def tolerates_taint(toleration: Obj, taint: Obj) -> bool:
    """core/v1 Toleration.ToleratesTaint: an empty effect or key matches any; operator Exists
    matches any value, Equal (or empty) needs the same value."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def get_matching_tolerations(taints: list[Obj], tolerations: list[Obj]) -> tuple[bool, list[Obj]]:
    """(every taint tolerated, the first toleration found for each taint) (GetMatchingTolerations)."""
    if not taints:
        return True, []
    used: list[Obj] = []
    for taint in taints:
        match = next((t for t in tolerations if tolerates_taint(t, taint)), None)
        if match is None:
            return False, []
        used.append(match)
    return True, used


def min_toleration_time(tolerations: list[Obj]) -> float:
    """Seconds until the first used toleration runs out: 0 with no tolerations or any
    tolerationSeconds <= 0, -1 when none has tolerationSeconds (forever) (getMinTolerationTime)."""
    if not tolerations:
        return 0.0
    least: int | None = None
    for t in tolerations:
        seconds = t.get("tolerationSeconds")
        if seconds is None:
            continue
        if int(seconds) <= 0:
            return 0.0
        least = int(seconds) if least is None else min(least, int(seconds))
    return -1.0 if least is None else float(least)


def pod_tolerations(pod: Obj) -> list[Obj]:
    return [t for t in _dict(pod, "spec").get("tolerations") or () if isinstance(t, dict)]
