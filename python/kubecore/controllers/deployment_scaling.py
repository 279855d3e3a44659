"""The arithmetic of a Deployment's rollouts, as pure functions of the Deployment and its
ReplicaSets (upstream deployment_util.go's MaxSurge/MaxUnavailable/ResolveFenceposts,
NewRSNewReplicas, GetProportion, IsSaturated, and the counting parts of rolling.go and sync.go's
`scale`). Nothing here writes; each function answers "to what size" and the callers in
`deployment_sync` / `deployment_rollout` do the writing.

maxSurge / maxUnavailable are ints or percentages of spec.replicas ("25%"); a percentage of
maxSurge rounds up and one of maxUnavailable rounds down, and when both come out 0 maxUnavailable
becomes 1 so a rollout can always move (ResolveFenceposts). Worked example, 10 replicas with the
defaults 25%/25%: surge ceil(2.5) = 3, unavailable floor(2.5) = 2, so at most 13 pods exist and
at least 8 are available throughout.

A rolling step (rolling.go):
- scale up the new ReplicaSet to min(replicas + surge - sum(all spec.replicas),
  replicas - new.spec.replicas) more (`new_rs_new_replicas`);
- scale down old ReplicaSets by at most all - minAvailable - unavailable(new)
  (`max_scaled_down`): first their unhealthy pods (`cleanup_unhealthy_plan`), then, while more
  than minAvailable pods are available, healthy ones oldest ReplicaSet first
  (`scale_down_old_plan`).

Proportional scaling (`proportional_plan`): when spec.replicas changes while several ReplicaSets
are active, the difference to replicas + surge is shared out in proportion to each ReplicaSet's
size relative to the max-replicas annotation it was last scaled for, largest first, and whatever
rounding leaves over goes to the first one.
"""

from __future__ import annotations

import math
from typing import Any

from kubecore.controllers.controller_utils import meta
from kubecore.controllers.deployment_util import (
    available_replica_count, desired_replicas_annotation, filter_active_replica_sets, max_replicas_annotation,
    replica_count, replicas_of, sorted_by_creation, sorted_by_size_newer, sorted_by_size_older, status_int,
)

Obj = dict[str, Any]

ROLLING_UPDATE = "RollingUpdate"
RECREATE = "Recreate"


class IntOrPercentError(ValueError):
    """An int-or-string value that is neither an int nor "<int>%"."""


def scaled_value(value: Any, total: int, *, round_up: bool) -> int:
    """intstr.GetScaledValueFromIntOrPercent: an int as is, "N%" as N% of `total` rounded
    up or down (computed in floating point, as upstream)."""
    if value is None:
        raise IntOrPercentError("nil value for IntOrString")
    if isinstance(value, bool):
        raise IntOrPercentError(f"invalid value for IntOrString: invalid type: {value!r}")
    if isinstance(value, int):
        return value
    if not isinstance(value, str):
        raise IntOrPercentError(f"invalid value for IntOrString: invalid type: {type(value).__name__}")
    if not value.endswith("%"):
        raise IntOrPercentError("invalid value for IntOrString: invalid type: string is not a percentage")
    try:
        percent = int(value[:-1])
    except ValueError:
        raise IntOrPercentError(f"invalid value for IntOrString: invalid value {value!r}") from None
    scaled = float(percent) * float(total) / 100
    return int(math.ceil(scaled) if round_up else math.floor(scaled))


def resolve_fenceposts(max_surge: Any, max_unavailable: Any, desired: int) -> tuple[int, int]:
    """(surge, unavailable) for `desired` replicas; never both 0 (unavailable becomes 1)."""
    surge = scaled_value(0 if max_surge is None else max_surge, desired, round_up=True)
    unavailable = scaled_value(0 if max_unavailable is None else max_unavailable, desired, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def strategy_type(d: Obj) -> str:
    return str(((d.get("spec") or {}).get("strategy") or {}).get("type") or "")


def is_rolling_update(d: Obj) -> bool:
    return strategy_type(d) == ROLLING_UPDATE


def _fenceposts(d: Obj) -> tuple[int, int]:
    ru = ((d.get("spec") or {}).get("strategy") or {}).get("rollingUpdate") or {}
    return resolve_fenceposts(ru.get("maxSurge"), ru.get("maxUnavailable"), replicas_of(d))


def max_surge(d: Obj) -> int:
    """How many pods over spec.replicas a rolling Deployment may have (0 for Recreate)."""
    return _fenceposts(d)[0] if is_rolling_update(d) else 0


def max_unavailable(d: Obj) -> int:
    """How many of spec.replicas may be unavailable (0 for Recreate or 0 replicas)."""
    replicas = replicas_of(d)
    if not is_rolling_update(d) or replicas == 0:
        return 0
    return min(_fenceposts(d)[1], replicas)


def min_available(d: Obj) -> int:
    return replicas_of(d) - max_unavailable(d) if is_rolling_update(d) else 0


def round_half_away(x: float) -> int:
    """Go's math.Round: halves round away from zero."""
    t = math.trunc(x)
    if abs(x - t) >= 0.5:
        t += 1 if x > 0 else -1
    return int(t)


# -- scaling the new ReplicaSet -------------------------------------------------------------------
def new_rs_new_replicas(d: Obj, all_rses: list[Obj], new_rs: Obj) -> int:
    """The size the new ReplicaSet should have now (NewRSNewReplicas)."""
    kind = strategy_type(d)
    replicas = replicas_of(d)
    if kind == ROLLING_UPDATE:
        max_total = replicas + max_surge(d)
        current = replica_count(all_rses)
        if current >= max_total:
            return replicas_of(new_rs)
        scale_up = min(max_total - current, replicas - replicas_of(new_rs))
        return replicas_of(new_rs) + scale_up
    if kind == RECREATE:
        return replicas
    raise ValueError(f"deployment type {kind} isn't supported")


def is_saturated(d: Obj, rs: Obj | None) -> bool:
    """The ReplicaSet runs all of spec.replicas, knows it should, and all are available."""
    if rs is None:
        return False
    desired = desired_replicas_annotation(rs)
    replicas = replicas_of(d)
    return desired is not None and replicas_of(rs) == replicas and desired == replicas and \
        status_int(rs, "availableReplicas") == replicas


# -- proportional scaling -------------------------------------------------------------------------
def replica_set_fraction(rs: Obj, d: Obj) -> int:
    """How many replicas `rs` gains (or loses, negative) in a scaling event (getReplicaSetFraction)."""
    replicas = replicas_of(d)
    if replicas == 0:
        return -replicas_of(rs)
    deployment_replicas = replicas + max_surge(d)
    annotated = max_replicas_annotation(rs)
    if annotated is None:
        annotated = status_int(d, "replicas")
    if annotated == 0:
        return 0  # upstream divides by zero here (+Inf); never reached for an active ReplicaSet
    new_size = float(replicas_of(rs) * deployment_replicas) / float(annotated)
    return round_half_away(new_size) - replicas_of(rs)


def get_proportion(rs: Obj | None, d: Obj, to_add: int, added: int) -> int:
    """The share of `to_add` replicas for `rs`, given `added` were handed out already."""
    if rs is None or replicas_of(rs) == 0 or to_add == 0 or to_add == added:
        return 0
    fraction = replica_set_fraction(rs, d)
    allowed = to_add - added
    return min(fraction, allowed) if to_add > 0 else max(fraction, allowed)


def proportional_plan(d: Obj, all_rses: list[Obj | None]) -> tuple[list[tuple[Obj, int]], str]:
    """New sizes for every active ReplicaSet in a scaling event of a rolling Deployment, in the
    order they are written, and the direction ("up", "down" or "")."""
    active = filter_active_replica_sets(all_rses)
    allowed = replicas_of(d) + max_surge(d) if replicas_of(d) > 0 else 0
    to_add = allowed - replica_count(active)
    operation = ""
    if to_add > 0:
        active, operation = sorted_by_size_newer(active), "up"
    elif to_add < 0:
        active, operation = sorted_by_size_older(active), "down"
    added = 0
    sizes: dict[str, int] = {}
    for rs in active:
        name = str(meta(rs).get("name"))
        if to_add != 0:
            proportion = get_proportion(rs, d, to_add, added)
            sizes[name] = replicas_of(rs) + proportion
            added += proportion
        else:
            sizes[name] = replicas_of(rs)
    plan: list[tuple[Obj, int]] = []
    for i, rs in enumerate(active):
        name = str(meta(rs).get("name"))
        if i == 0 and to_add != 0:
            sizes[name] = max(0, sizes[name] + to_add - added)  # leftovers to the largest
        plan.append((rs, sizes[name]))
    return plan, operation


# -- scaling old ReplicaSets down -----------------------------------------------------------------
def max_scaled_down(d: Obj, all_rses: list[Obj], new_rs: Obj) -> int:
    """How many old pods may go now: all - minAvailable - unavailable pods of the new ReplicaSet."""
    new_unavailable = replicas_of(new_rs) - status_int(new_rs, "availableReplicas")
    return replica_count(all_rses) - (replicas_of(d) - max_unavailable(d)) - new_unavailable


def cleanup_unhealthy_plan(old_rses: list[Obj], max_cleanup: int) -> list[tuple[Obj, int]]:
    """Old ReplicaSets (oldest first) shrunk by their unavailable pods, at most `max_cleanup` in
    total: these pods are not serving, so removing them costs no availability."""
    plan: list[tuple[Obj, int]] = []
    total = 0
    for rs in sorted_by_creation(old_rses):
        if total >= max_cleanup:
            break
        replicas, available = replicas_of(rs), status_int(rs, "availableReplicas")
        if replicas == 0 or replicas == available:
            continue
        count = min(max_cleanup - total, replicas - available)
        plan.append((rs, replicas - count))
        total += count
    return plan


def scale_down_old_plan(d: Obj, all_rses: list[Obj], old_rses: list[Obj]) -> list[tuple[Obj, int]]:
    """Old ReplicaSets (oldest first) shrunk while more than minAvailable pods are available."""
    min_avail = replicas_of(d) - max_unavailable(d)
    available = available_replica_count(all_rses)
    if available <= min_avail:
        return []
    budget = available - min_avail
    plan: list[tuple[Obj, int]] = []
    total = 0
    for rs in sorted_by_creation(old_rses):
        if total >= budget:
            break
        replicas = replicas_of(rs)
        if replicas == 0:
            continue
        count = min(replicas, budget - total)
        plan.append((rs, replicas - count))
        total += count
    return plan
