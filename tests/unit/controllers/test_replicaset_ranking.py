"""The deletion order of podranking (upstream's ActivePodsWithRanks.Less), rule by rule, with the
module docstring's worked example; and getPodsToDelete with related-pod ranks."""

from __future__ import annotations

import pytest

from kubecore.controllers.podranking import get_pods_to_delete, rank_pods_for_deletion, related_pod_ranks
from tests.unit.controllers.test_replicaset_fixtures import NOW, make_pod


def names(pods: list[dict]) -> list[str]:  # type: ignore[type-arg]
    return [p["metadata"]["name"] for p in pods]


def order(*pods: dict, ranks: list[int] | None = None, now: float | None = NOW) -> list[str]:  # type: ignore[type-arg]
    ps = list(pods)
    return names(rank_pods_for_deletion(ps, ranks if ranks is not None else [0] * len(ps), now=now))


def test_worked_example_from_the_docstring() -> None:
    a = make_pod("a", phase="Pending")
    b = make_pod("b", node="n1", phase="Pending")
    c = make_pod("c", node="n1", not_ready=True)
    d = make_pod("d", node="n2", ready_since=NOW - 10)
    e = make_pod("e", node="n2", ready_since=NOW - 3600)
    for shuffled in ([e, d, c, b, a], [c, a, e, b, d], [a, b, c, d, e]):
        assert order(*shuffled) == ["a", "b", "c", "d", "e"]


def test_unassigned_before_assigned_even_when_running_and_ready() -> None:
    assigned = make_pod("assigned", node="n1", phase="Pending")
    unassigned = make_pod("unassigned", phase="Running", ready_since=NOW - 5)
    assert order(assigned, unassigned) == ["unassigned", "assigned"]


@pytest.mark.parametrize("first,second", [("Pending", "Unknown"), ("Unknown", "Running"), ("Pending", "Running")])
def test_phase_order(first: str, second: str) -> None:
    p1 = make_pod("p1", node="n1", phase=second)
    p2 = make_pod("p2", node="n1", phase=first)
    assert order(p1, p2) == ["p2", "p1"]


def test_not_ready_before_ready() -> None:
    ready = make_pod("ready", node="n1", ready_since=NOW - 1)
    not_ready = make_pod("not-ready", node="n1", not_ready=True, created=NOW - 99999)
    assert order(ready, not_ready) == ["not-ready", "ready"]


def test_lower_deletion_cost_first_before_rank() -> None:
    cheap = make_pod("cheap", node="n1", ready_since=NOW - 100, cost=-5)
    dear = make_pod("dear", node="n1", ready_since=NOW - 100, cost=10)
    assert order(dear, cheap, ranks=[5, 1]) == ["cheap", "dear"]


def test_higher_related_rank_first() -> None:
    crowded = make_pod("crowded", node="n1", ready_since=NOW - 100)
    alone = make_pod("alone", node="n2", ready_since=NOW - 100)
    assert order(alone, crowded, ranks=[1, 3]) == ["crowded", "alone"]


def test_shorter_ready_time_first_on_log_scale() -> None:
    young = make_pod("young", node="n1", ready_since=NOW - 10)
    old = make_pod("old", node="n1", ready_since=NOW - 10000)
    assert order(old, young) == ["young", "old"]


def test_similar_ready_times_tie_break_by_uid() -> None:
    # 100 s and 101 s ago have the same floor(log2(ns)) rank: ordered by UID, not by time
    p1 = make_pod("p1", node="n1", ready_since=NOW - 100, uid="b-uid")
    p2 = make_pod("p2", node="n1", ready_since=NOW - 101, uid="a-uid")
    assert order(p1, p2) == ["p2", "p1"]
    # without a reference time the comparison is exact: the more recently ready one first
    assert order(p2, p1, now=None) == ["p1", "p2"]


def test_more_restarts_first() -> None:
    calm = make_pod("calm", node="n1", restarts=0)
    crashy = make_pod("crashy", node="n1", restarts=7)
    assert order(calm, crashy) == ["crashy", "calm"]


def test_newer_first_and_unknown_creation_first() -> None:
    old = make_pod("old", node="n1", created=NOW - 100000)
    new = make_pod("new", node="n1", created=NOW - 10)
    unknown = make_pod("unknown", node="n1", created=None)
    assert order(old, new, unknown) == ["unknown", "new", "old"]


def test_related_ranks_count_active_pods_per_node() -> None:
    mine = [make_pod("m1", node="n1"), make_pod("m2", node="n2"), make_pod("m3")]
    related = [*mine, make_pod("r1", node="n1"), make_pod("r2", node="n1", deleting=True),
               make_pod("r3", node="n1", phase="Succeeded")]
    assert related_pod_ranks(mine, related) == [2, 1, 1]


def test_get_pods_to_delete_uses_related_ranks() -> None:
    a = make_pod("a", node="n1", ready_since=NOW - 100)
    b = make_pod("b", node="n2", ready_since=NOW - 100)
    other = make_pod("other", node="n2", ready_since=NOW - 100)  # another ReplicaSet of the same Deployment
    assert names(get_pods_to_delete([a, b], [a, b, other], 1, now=NOW)) == ["b"]
    # without related pods (an RS with no controller) all ranks are 0: UID decides here
    assert names(get_pods_to_delete([a, b], [], 1, now=NOW)) == ["a"]


def test_get_pods_to_delete_all_keeps_input() -> None:
    pods = [make_pod("x", node="n1"), make_pod("y")]
    assert names(get_pods_to_delete(pods, [], 2, now=NOW)) == ["x", "y"]
    assert names(get_pods_to_delete(pods, [], 5, now=NOW)) == ["x", "y"]


def test_ranks_must_match_pods() -> None:
    with pytest.raises(ValueError):
        rank_pods_for_deletion([make_pod("x")], [], now=NOW)
