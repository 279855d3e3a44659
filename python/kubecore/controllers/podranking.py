"""Which pods a ReplicaSet deletes first when it has too many (upstream's getPodsToDelete and
controller.ActivePodsWithRanks, with the PodDeletionCost and LogarithmicScaleDown features on,
as they are by default upstream).

Pod A is deleted before pod B when the first rule that tells them apart says so:

1. unassigned (no spec.nodeName) before assigned;
2. phase Pending before Unknown before Running (any other phase counts as Pending);
3. not Ready before Ready;
4. lower `controller.kubernetes.io/pod-deletion-cost` before higher;
5. higher rank before lower, where a pod's rank is the number of active *related* pods on its
   node (related: pods of every ReplicaSet with the same controller as this one, e.g. all
   ReplicaSets of one Deployment; a ReplicaSet without a controller has none, so all ranks are 0);
6. both Ready: ready for a shorter time before longer (unknown ready time first);
7. more container restarts before fewer;
8. created more recently before older (unknown creation time first).

In 6 and 8 the times are compared on a logarithmic scale against `now`: floor(log2(age in ns)),
so pods of a similar age are equivalent and ordered by UID, spreading deletions pseudo-randomly
instead of always taking the very newest (upstream's logarithmicRankDiff).

Worked example (the table test reuses it): pods a (no node), b (node n1, Pending),
c (n1, Running, not ready), d (n2, Running, ready 10 s ago), e (n2, Running, ready 1 h ago);
the order is a, b, c, d, e.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

from kubecore.controllers.controller_utils import (
    is_pod_active, is_pod_ready, max_container_restarts, meta, node_name, parse_time, pod_deletion_cost,
    pod_phase, pod_ready_time,
)

Obj = dict[str, Any]
_PHASE_ORDINAL = {"Pending": 0, "Unknown": 1, "Running": 2}


@dataclass(frozen=True)
class _Ranked:
    """What the comparison needs of one pod, computed once before sorting."""

    pod: Obj
    rank: int
    assigned: bool
    phase: int
    ready: bool
    cost: int
    ready_time: float | None
    restarts: int
    created: float | None
    uid: str


def _ranked(pod: Obj, rank: int) -> _Ranked:
    m = meta(pod)
    return _Ranked(pod=pod, rank=rank, assigned=bool(node_name(pod)), phase=_PHASE_ORDINAL.get(pod_phase(pod), 0),
                   ready=is_pod_ready(pod), cost=pod_deletion_cost(pod), ready_time=pod_ready_time(pod),
                   restarts=max_container_restarts(pod), created=parse_time(m.get("creationTimestamp")),
                   uid=str(m.get("uid") or ""))


def _log_rank(t: float, now: float) -> int:
    d = round((now - t) * 1e9)
    return int(math.log2(d)) if d > 0 else -1


def _newer_first(t1: float | None, t2: float | None, uid1: str, uid2: str, now: float | None) -> int:
    """-1 when the first time should go first (newer, or unknown), 1 otherwise; times differ."""
    if t1 is None or t2 is None or now is None:
        if t1 is None or t2 is None:
            return -1 if t1 is None else 1
        return -1 if t1 > t2 else 1
    diff = _log_rank(t1, now) - _log_rank(t2, now)
    if diff == 0:
        return -1 if uid1 < uid2 else 1
    return -1 if diff < 0 else 1


def compare_for_deletion(a: _Ranked, b: _Ranked, now: float | None) -> int:
    """Negative when `a` should be deleted before `b` (the rules of the module docstring)."""
    if a.assigned != b.assigned:
        return -1 if not a.assigned else 1
    if a.phase != b.phase:
        return -1 if a.phase < b.phase else 1
    if a.ready != b.ready:
        return -1 if not a.ready else 1
    if a.cost != b.cost:
        return -1 if a.cost < b.cost else 1
    if a.rank != b.rank:
        return -1 if a.rank > b.rank else 1
    if a.ready and b.ready and a.ready_time != b.ready_time:
        return _newer_first(a.ready_time, b.ready_time, a.uid, b.uid, now)
    if a.restarts != b.restarts:
        return -1 if a.restarts > b.restarts else 1
    if a.created != b.created:
        return _newer_first(a.created, b.created, a.uid, b.uid, now)
    return 0


def related_pod_ranks(pods: list[Obj], related: list[Obj]) -> list[int]:
    """For each pod, how many active pods of `related` share its node (getPodsRankedByRelatedPodsOnSameNode)."""
    on_node: dict[str, int] = {}
    for p in related:
        if is_pod_active(p):
            n = node_name(p)
            on_node[n] = on_node.get(n, 0) + 1
    return [on_node.get(node_name(p), 0) for p in pods]


def rank_pods_for_deletion(pods: list[Obj], ranks: list[int], *, now: float | None) -> list[Obj]:
    """`pods` sorted so the ones to delete first come first (`now` None: exact time comparison)."""
    if len(ranks) != len(pods):
        raise ValueError(f"{len(pods)} pods but {len(ranks)} ranks")
    ranked = [_ranked(p, r) for p, r in zip(pods, ranks)]
    ranked.sort(key=functools.cmp_to_key(lambda a, b: compare_for_deletion(a, b, now)))
    return [r.pod for r in ranked]


def get_pods_to_delete(pods: list[Obj], related: list[Obj], diff: int, *, now: float | None) -> list[Obj]:
    """The `diff` pods of `pods` to delete first. Deleting all of them needs no ranking."""
    if diff >= len(pods):
        return list(pods)
    return rank_pods_for_deletion(pods, related_pod_ranks(pods, related), now=now)[:diff]
