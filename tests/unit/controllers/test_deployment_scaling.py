"""maxSurge/maxUnavailable resolution, the rolling step sizes and proportional scaling (upstream
deployment_util_test.go TestResolveFenceposts / TestGetReplicaSetFraction / NewRSNewReplicas and
the worked example in rolling.go)."""

from __future__ import annotations

from typing import Any

import pytest

from kubecore.controllers.controller_utils import format_time
from kubecore.controllers.deployment_scaling import (
    IntOrPercentError, cleanup_unhealthy_plan, get_proportion, is_saturated, max_scaled_down, max_surge,
    max_unavailable, min_available, new_rs_new_replicas, proportional_plan, resolve_fenceposts, round_half_away,
    scale_down_old_plan, scaled_value,
)
from kubecore.controllers.deployment_util import DESIRED_REPLICAS_ANNOTATION, MAX_REPLICAS_ANNOTATION

Obj = dict[str, Any]
T0 = 1_700_000_000.0


def dep(replicas: int, *, surge: Any = 1, unavailable: Any = 0, kind: str = "RollingUpdate",
        status_replicas: int = 0) -> Obj:
    strategy: Obj = {"type": kind}
    if kind == "RollingUpdate":
        strategy["rollingUpdate"] = {"maxSurge": surge, "maxUnavailable": unavailable}
    return {"metadata": {"name": "web"}, "spec": {"replicas": replicas, "strategy": strategy},
            "status": {"replicas": status_replicas}}


def rs(name: str, replicas: int, *, available: int | None = None, created: float = 0.0,
       max_replicas: int | None = None, desired: int | None = None) -> Obj:
    annotations = {}
    if max_replicas is not None:
        annotations[MAX_REPLICAS_ANNOTATION] = str(max_replicas)
    if desired is not None:
        annotations[DESIRED_REPLICAS_ANNOTATION] = str(desired)
    return {"metadata": {"name": name, "uid": name, "creationTimestamp": format_time(T0 + created),
                         "annotations": annotations},
            "spec": {"replicas": replicas},
            "status": {"replicas": replicas, "availableReplicas": replicas if available is None else available}}


@pytest.mark.parametrize(("value", "total", "round_up", "expected"), [
    (3, 10, True, 3), ("25%", 10, True, 3), ("25%", 10, False, 2), ("1%", 2, True, 1), ("1%", 2, False, 0),
    ("0%", 5, True, 0), ("100%", 7, False, 7), ("39%", 10, True, 4), ("39%", 10, False, 3),
])
def test_scaled_value(value: Any, total: int, round_up: bool, expected: int) -> None:
    assert scaled_value(value, total, round_up=round_up) == expected


@pytest.mark.parametrize("bad", ["25", "oops", "x%", None, True, 2.5])
def test_scaled_value_rejects_non_percentages(bad: Any) -> None:
    with pytest.raises(IntOrPercentError):
        scaled_value(bad, 10, round_up=True)


@pytest.mark.parametrize(("surge", "unavailable", "desired", "expected"), [
    ("0%", "1%", 2, (0, 1)),     # both round to 0: unavailable becomes 1 (old -1, then new +1)
    ("1%", "25%", 2, (1, 0)),    # new +1, then old -1
    ("1%", "0%", 1, (1, 0)),
    ("25%", "25%", 10, (3, 2)),  # the defaults
    ("39%", "39%", 10, (4, 3)),
    (5, "50%", 10, (5, 5)),
    (None, None, 3, (0, 1)),
])
def test_resolve_fenceposts(surge: Any, unavailable: Any, desired: int, expected: tuple[int, int]) -> None:
    assert resolve_fenceposts(surge, unavailable, desired) == expected


def test_max_surge_and_unavailable_of_a_deployment() -> None:
    d = dep(10, surge="25%", unavailable="25%")
    assert (max_surge(d), max_unavailable(d), min_available(d)) == (3, 2, 8)
    assert max_unavailable(dep(2, surge=0, unavailable=5)) == 2  # never more than replicas
    assert max_unavailable(dep(0, surge="25%", unavailable="25%")) == 0
    recreate = dep(4, kind="Recreate")
    assert (max_surge(recreate), max_unavailable(recreate), min_available(recreate)) == (0, 0, 0)


def test_round_half_away_from_zero() -> None:
    assert [round_half_away(x) for x in (2.5, 3.5, -2.5, 2.4999, 0.49999999999999994, -0.5)] == [3, 4, -3, 2, 0, -1]


def test_new_rs_new_replicas() -> None:
    d = dep(3, surge=1, unavailable=0)
    new = rs("new", 0)
    assert new_rs_new_replicas(d, [rs("old", 3), new], new) == 1
    assert new_rs_new_replicas(d, [rs("old", 2), rs("new", 1)], rs("new", 1)) == 2
    assert new_rs_new_replicas(d, [rs("old", 3), rs("new", 1)], rs("new", 1)) == 1  # at 4 = 3 + surge
    big_surge = dep(3, surge=5, unavailable=0)
    assert new_rs_new_replicas(big_surge, [rs("old", 3), new], new) == 3  # never above replicas
    assert new_rs_new_replicas(dep(3, kind="Recreate"), [new], new) == 3
    with pytest.raises(ValueError):
        new_rs_new_replicas(dep(3, kind="Blue"), [new], new)


def test_is_saturated() -> None:
    d = dep(3)
    assert is_saturated(d, rs("new", 3, desired=3))
    assert not is_saturated(d, rs("new", 3, desired=2))
    assert not is_saturated(d, rs("new", 3, available=2, desired=3))
    assert not is_saturated(d, rs("new", 3))
    assert not is_saturated(d, None)


def test_proportional_scale_up_during_a_rollout() -> None:
    # 10 -> 15 replicas (maxSurge 3): both ReplicaSets were sized for 13 pods, 18 are allowed now
    d = dep(15, surge=3, unavailable=2)
    old, new = rs("old", 8, created=1, max_replicas=13), rs("new", 5, created=2, max_replicas=13)
    plan, op = proportional_plan(d, [old, new])
    assert op == "up"
    assert [(r["metadata"]["name"], n) for r, n in plan] == [("old", 11), ("new", 7)]


def test_proportional_scale_down_during_a_rollout() -> None:
    d = dep(5, surge=3, unavailable=2)
    old, new = rs("old", 8, created=1, max_replicas=13), rs("new", 5, created=2, max_replicas=13)
    plan, op = proportional_plan(d, [old, new, None])
    assert op == "down"
    assert [(r["metadata"]["name"], n) for r, n in plan] == [("old", 5), ("new", 3)]


def test_proportional_leftovers_go_to_the_largest() -> None:
    # three equal ReplicaSets sized for 3 pods; 4 more allowed: round(1 * 7 / 3) - 1 = 1 each by
    # proportion, the 1 left over to the first (the newest, as scaling up orders equals)
    d = dep(6, surge=1, unavailable=0)
    rses = [rs(n, 1, created=i, max_replicas=3) for i, n in enumerate(("a", "b", "c"))]
    plan, op = proportional_plan(d, rses)
    assert op == "up" and sum(n for _, n in plan) == 7
    assert [(r["metadata"]["name"], n) for r, n in plan] == [("c", 3), ("b", 2), ("a", 2)]


def test_proportional_scale_to_zero_and_nothing_to_do() -> None:
    rses = [rs("a", 2, created=1, max_replicas=4), rs("b", 2, created=2, max_replicas=4)]
    plan, op = proportional_plan(dep(0), rses)
    assert op == "down" and [n for _, n in plan] == [0, 0]
    plan, op = proportional_plan(dep(3, surge=1), rses)  # 4 pods allowed, 4 there
    assert op == "" and [n for _, n in plan] == [2, 2]


def test_get_proportion_without_annotation_uses_status_replicas() -> None:
    d = dep(20, surge=0, unavailable=1, status_replicas=10)
    assert get_proportion(rs("a", 5), d, 10, 0) == 5
    assert get_proportion(rs("a", 5), d, 10, 10) == 0
    assert get_proportion(rs("a", 0), d, 10, 0) == 0


def test_rolling_scale_down_budget_counts_unavailable_new_pods() -> None:
    # rolling.go's example: 10 replicas, maxUnavailable 2, maxSurge 3, new RS crashlooping
    d = dep(10, surge=3, unavailable=2)
    new = rs("new", 5, available=0, created=2)
    assert max_scaled_down(d, [rs("old", 8, created=1), new], new) == 0
    rolled_back = rs("new", 5, available=4, created=2)
    assert max_scaled_down(d, [rs("old", 8, created=1), rolled_back], rolled_back) == 4


def test_cleanup_unhealthy_plan_takes_unavailable_pods_oldest_first() -> None:
    a, b, c = rs("a", 3, available=1, created=1), rs("b", 2, available=2, created=2), rs("c", 4, available=0, created=3)
    plan = cleanup_unhealthy_plan([c, b, a], 5)
    assert [(r["metadata"]["name"], n) for r, n in plan] == [("a", 1), ("c", 1)]
    assert cleanup_unhealthy_plan([a], 0) == []


def test_scale_down_old_plan_keeps_min_available() -> None:
    d = dep(3, surge=1, unavailable=0)
    old, new = rs("old", 3, created=1), rs("new", 1, created=2)
    plan = scale_down_old_plan(d, [old, new], [old])
    assert [(r["metadata"]["name"], n) for r, n in plan] == [("old", 2)]
    not_ready = rs("new", 1, available=0, created=2)
    assert scale_down_old_plan(d, [old, not_ready], [old]) == []
    older, newer = rs("o1", 1, created=0), rs("o2", 2, created=1)
    plan = scale_down_old_plan(dep(3, surge=0, unavailable=2), [older, newer, rs("n", 1, created=3)], [newer, older])
    assert [(r["metadata"]["name"], n) for r, n in plan] == [("o1", 0), ("o2", 0)]
