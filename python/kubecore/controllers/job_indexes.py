"""Completion indexes of Indexed Jobs (upstream pkg/controller/job/indexed_job_utils.go).

An Indexed Job with `completions: n` runs one successful pod per index 0..n-1. Each pod carries
its index in the annotation and label batch.kubernetes.io/job-completion-index, the env var
JOB_COMPLETION_INDEX (from that label), hostname "<job>-<index>" and generateName
"<job>-<index>-".

Sets of indexes are `Intervals`: sorted, disjoint, non-adjacent (first, last) pairs, written in
status.completedIndexes / status.failedIndexes in upstream's compressed form, where a run of two
is written as a pair and longer runs as a range:

    {1, 3, 4, 5, 7, 8}  ->  [(1, 1), (3, 5), (7, 8)]  ->  "1,3-5,7,8"

Parsing tolerates what a user may have written: out-of-range intervals are cut at completions,
corrupt ones skipped, adjacent ones merged ("1,2-3" -> [(1, 3)]).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from typing import Any

from kubecore.controllers.controller_utils import meta
from kubecore.controllers.podranking import rank_pods_for_deletion

Obj = dict[str, Any]
Intervals = list[tuple[int, int]]

COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
"""Also the name of the label with the same value (PodIndexLabel)."""
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"
UNKNOWN_INDEX = -1
MAX_GENERATED_NAME_LENGTH = 63 - 5
"""names.MaxGeneratedNameLength: the apiserver appends 5 random characters."""


# -- interval arithmetic ---------------------------------------------------------------------------
def merge(a: Intervals, b: Intervals) -> Intervals:
    """The union of two interval lists (orderedIntervals.merge)."""
    out: Intervals = []
    for first, last in sorted(a + b):
        if out and first <= out[-1][1] + 1:
            if last > out[-1][1]:
                out[-1] = (out[-1][0], last)
        else:
            out.append((first, last))
    return out


def with_indexes(intervals: Intervals, indexes: Iterable[int]) -> Intervals:
    """`intervals` plus the given indexes (withOrderedIndexes)."""
    return merge(intervals, [(i, i) for i in sorted(set(indexes))])


def total(intervals: Intervals) -> int:
    return sum(last - first + 1 for first, last in intervals)


def has(intervals: Intervals | None, ix: int) -> bool:
    if not intervals:
        return False
    pos = bisect.bisect_left([last for _, last in intervals], ix)
    return pos < len(intervals) and intervals[pos][0] <= ix


def to_string(intervals: Intervals) -> str:
    parts = []
    for first, last in intervals:
        if last == first:
            parts.append(str(first))
        elif last == first + 1:
            parts.append(f"{first},{last}")
        else:
            parts.append(f"{first}-{last}")
    return ",".join(parts)


_INT = re.compile(r"[+-]?[0-9]+")


def _atoi(s: str) -> int | None:
    """strconv.Atoi: an optional sign and decimal digits, nothing else."""
    return int(s) if _INT.fullmatch(s) else None


def parse_indexes(text: str, completions: int) -> Intervals:
    """Intervals from status text like "1,3-5" (parseIndexesFromString)."""
    out: Intervals = []
    if not text:
        return out
    for part in text.split(","):
        limits = part.split("-")
        first = _atoi(limits[0])
        if first is None:
            continue
        if first >= completions:
            break
        last = first
        if len(limits) > 1:
            parsed = _atoi(limits[1])
            if parsed is None:
                continue
            last = min(parsed, completions - 1)
        if out and out[-1][1] == first - 1:
            out[-1] = (out[-1][0], last)
        else:
            out.append((first, last))
    return out


# -- pods and their indexes ------------------------------------------------------------------------
def completion_index(pod: Obj) -> int:
    """The pod's completion index annotation, UNKNOWN_INDEX when absent or invalid."""
    annotations = meta(pod).get("annotations") or {}
    value = annotations.get(COMPLETION_INDEX_ANNOTATION) if isinstance(annotations, dict) else None
    if not isinstance(value, str):
        return UNKNOWN_INDEX
    ix = _atoi(value)
    return ix if ix is not None and ix >= 0 else UNKNOWN_INDEX


def valid_index(pod: Obj, completions: int) -> int | None:
    """The pod's index when it is known and below `completions`."""
    ix = completion_index(pod)
    return ix if ix != UNKNOWN_INDEX and ix < completions else None


def indexes_of(pods: Iterable[Obj]) -> set[int]:
    return {ix for ix in (completion_index(p) for p in pods) if ix != UNKNOWN_INDEX}


def by_completion_index(pods: list[Obj]) -> list[Obj]:
    return sorted(pods, key=completion_index)


def first_pending_indexes(*, count: int, completions: int, succeeded: Intervals, active: Iterable[Obj],
                          terminating: Iterable[Obj] = (), failed: Intervals | None = None) -> list[int]:
    """The `count` lowest indexes below `completions` that no active (or, when only failed pods
    are replaced, terminating) pod holds and that neither succeeded nor failed."""
    if count == 0:
        return []
    taken = with_indexes(succeeded, indexes_of(active))
    taken = with_indexes(taken, indexes_of(terminating))
    if failed:
        taken = merge(taken, failed)
    out: list[int] = []
    candidate = 0
    for first, last in taken:
        while candidate < completions and len(out) < count and candidate < first:
            out.append(candidate)
            candidate += 1
        candidate = max(candidate, last + 1)
    while candidate < completions and len(out) < count:
        out.append(candidate)
        candidate += 1
    return out


def duplicated_index_pods(pods: list[Obj], completions: int) -> tuple[list[Obj], list[Obj]]:
    """(to remove, to keep) among active pods: every pod without a valid index, and all but one
    pod of every repeated index (the one kept is the last in ActivePods order, i.e. the most
    advanced). appendDuplicatedIndexPodsForRemoval."""
    remove: list[Obj] = []
    keep: list[Obj] = []
    groups: dict[int, list[Obj]] = {}
    for pod in by_completion_index(pods):
        ix = completion_index(pod)
        if ix == UNKNOWN_INDEX or ix >= completions:
            remove.append(pod)
        else:
            groups.setdefault(ix, []).append(pod)
    for group in groups.values():
        if len(group) == 1:
            keep.append(group[0])
            continue
        ranked = rank_pods_for_deletion(group, [0] * len(group), now=None)
        remove.extend(ranked[:-1])
        keep.append(ranked[-1])
    return remove, keep


# -- the pod template of one index -------------------------------------------------------------------
def generate_name_with_index(job_name: str, index: int) -> str:
    """"<job>-<index>-", the job name cut so the apiserver's random suffix still fits."""
    suffix = f"-{index}-"
    prefix = job_name + suffix
    if len(prefix) > MAX_GENERATED_NAME_LENGTH:
        prefix = prefix[:MAX_GENERATED_NAME_LENGTH - len(suffix)] + suffix
    return prefix


def add_completion_index_env(template: Obj) -> None:
    """Give every (init) container JOB_COMPLETION_INDEX from the index label, unless set."""
    spec = template.get("spec") or {}
    field_path = f"metadata.labels['{COMPLETION_INDEX_ANNOTATION}']"
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or ():
            env = container.setdefault("env", [])
            if not any(isinstance(e, dict) and e.get("name") == COMPLETION_INDEX_ENV for e in env):
                env.append({"name": COMPLETION_INDEX_ENV, "valueFrom": {"fieldRef": {"fieldPath": field_path}}})


def index_template(template: Obj, *, job_name: str, index: int) -> Obj:
    """A copy of `template` for one index: annotation, label and hostname (a shallow copy: the
    caller must not mutate nested structures it shares)."""
    tmeta = dict(template.get("metadata") or {})
    tmeta["annotations"] = {**(tmeta.get("annotations") or {}), COMPLETION_INDEX_ANNOTATION: str(index)}
    tmeta["labels"] = {**(tmeta.get("labels") or {}), COMPLETION_INDEX_ANNOTATION: str(index)}
    spec = {**(template.get("spec") or {}), "hostname": f"{job_name}-{index}"}
    return {**template, "metadata": tmeta, "spec": spec}
