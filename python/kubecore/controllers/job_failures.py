"""What a failed pod costs a Job: the delay before it is replaced and, with backoffLimitPerIndex,
its index's failure budget (upstream pkg/controller/job/backoff_utils.go and the
JobBackoffLimitPerIndex parts of indexed_job_utils.go).

Backoff. Per Job the controller remembers how many pods failed since the last success and when
the last of them finished (`BackoffRecord`, in memory, like upstream: a restarted controller
forgets it).
With n such failures, new pods wait until

    last failure + min(DEFAULT_POD_FAILURE_BACKOFF * 2**(n-1), MAX_POD_FAILURE_BACKOFF)

so 10 s, 20 s, 40 s ... capped at 10 minutes (upstream's DefaultJobPodFailureBackOff and
MaxJobPodFailureBackOff since 1.28; the documentation's "six minutes" is the older cap). A
success resets the count; failures that finished after the newest success still count.

Worked example: failures finishing at t=100 and t=130, nothing since: n=2, delay 20 s after 130,
so at t=140 the remaining time is 10 s. With backoffLimitPerIndex the same rule applies per
index, n being the failed pod's failure-count annotations plus one.

Per-index failures. Each pod of a Job with backoffLimitPerIndex carries
batch.kubernetes.io/job-index-failure-count: how many earlier pods of its index failed (and
job-index-ignored-failure-count for failures an Ignore rule excused).
The replacement of a failed pod inherits the counts plus one. An index fails for good when a
counted failure happens with the count already at backoffLimitPerIndex, or when a FailIndex rule
matches; failed indexes are listed in status.failedIndexes and never retried.

To carry the counts forward, the finalizer of the last failed pod of an index is kept until its
replacement exists ("delayed deletion"): without it, the pod could disappear before the
controller read its annotation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubecore.controllers.controller_utils import meta
from kubecore.controllers.job_indexes import Intervals, has, indexes_of, parse_indexes, valid_index, with_indexes
from kubecore.controllers.job_pods import finished_time, has_tracking_finalizer, is_pod_failed, uid_of
from kubecore.controllers.job_policy import FAIL_INDEX, match_pod_failure_policy

Obj = dict[str, Any]

DEFAULT_POD_FAILURE_BACKOFF = 10.0
MAX_POD_FAILURE_BACKOFF = 600.0


@dataclass(frozen=True)
class BackoffRecord:
    key: str
    failures_after_last_success: int = 0
    last_failure_time: float | None = None


class BackoffStore:
    """Job key -> its `BackoffRecord` (only the Job's own sync reads or writes its record)."""

    def __init__(self) -> None:
        self._records: dict[str, BackoffRecord] = {}

    def get(self, key: str) -> BackoffRecord | None:
        return self._records.get(key)

    def update(self, record: BackoffRecord) -> None:
        self._records[record.key] = record

    def remove(self, key: str) -> None:
        self._records.pop(key, None)

    def new_record(self, key: str, new_succeeded: list[Obj], new_failed: list[Obj]) -> BackoffRecord:
        """The record after counting the pods that finished since the last sync."""
        old = self._records.get(key) or BackoffRecord(key)
        failed_times = sorted(finished_time(p) for p in new_failed)
        if not new_succeeded:
            if not failed_times:
                return old
            return BackoffRecord(key, old.failures_after_last_success + len(failed_times), failed_times[-1])
        last_success = max(finished_time(p) for p in new_succeeded)
        after = [t for t in failed_times if t > last_success]
        return BackoffRecord(key, len(after), after[-1] if after else None)


def remaining_for_failures(now: float, failures: int, last_failure: float | None, *,
                           base: float = DEFAULT_POD_FAILURE_BACKOFF, cap: float = MAX_POD_FAILURE_BACKOFF) -> float:
    """Seconds still to wait after `failures` consecutive failures, the last at `last_failure`."""
    if failures == 0 or last_failure is None:
        return 0.0
    delay = base
    for _ in range(1, failures):
        delay *= 2
        if delay >= cap:
            delay = cap
            break
    elapsed = now - last_failure
    return 0.0 if delay < elapsed else delay - elapsed


def remaining_time(record: BackoffRecord, now: float, *, base: float = DEFAULT_POD_FAILURE_BACKOFF,
                   cap: float = MAX_POD_FAILURE_BACKOFF) -> float:
    return remaining_for_failures(now, record.failures_after_last_success, record.last_failure_time,
                                  base=base, cap=cap)


def remaining_time_per_index(last_failed: Obj | None, now: float, *, absolute_failures: int,
                             base: float = DEFAULT_POD_FAILURE_BACKOFF, cap: float = MAX_POD_FAILURE_BACKOFF) -> float:
    """getRemainingTimePerIndex: `absolute_failures` is the failed pod's failure counts."""
    if last_failed is None:
        return 0.0
    return remaining_for_failures(now, absolute_failures + 1, finished_time(last_failed), base=base, cap=cap)


# -- backoffLimitPerIndex --------------------------------------------------------------------------
INDEX_FAILURE_COUNT_ANNOTATION = "batch.kubernetes.io/job-index-failure-count"
INDEX_IGNORED_FAILURE_COUNT_ANNOTATION = "batch.kubernetes.io/job-index-ignored-failure-count"
_MAX_INT32 = 2**31 - 1


def has_backoff_limit_per_index(job: Obj) -> bool:
    return (job.get("spec") or {}).get("backoffLimitPerIndex") is not None


def _int32_annotation(pod: Obj, key: str) -> int:
    value = (meta(pod).get("annotations") or {}).get(key)
    try:
        n = int(str(value)) if value is not None else 0
    except ValueError:
        return 0
    return n if 0 <= n <= _MAX_INT32 else 0


def index_failure_count(pod: Obj) -> int:
    return _int32_annotation(pod, INDEX_FAILURE_COUNT_ANNOTATION)


def index_ignored_failure_count(pod: Obj) -> int:
    return _int32_annotation(pod, INDEX_IGNORED_FAILURE_COUNT_ANNOTATION)


def absolute_failure_count(pod: Obj) -> int:
    return index_failure_count(pod) + index_ignored_failure_count(pod)


def is_index_failed(job: Obj, pod: Obj) -> bool:
    """Whether this pod's failure fails its index for good."""
    counted = False
    if is_pod_failed(pod, job):
        policy = (job.get("spec") or {}).get("podFailurePolicy")
        if policy is not None:
            match = match_pod_failure_policy(policy, pod)
            if match.action == FAIL_INDEX:
                return True
            counted = match.count_failed
        else:
            counted = True
    limit = int((job.get("spec") or {}).get("backoffLimitPerIndex") or 0)
    return counted and index_failure_count(pod) >= limit


def calculate_failed_indexes(job: Obj, pods: list[Obj]) -> Intervals:
    """status.failedIndexes plus the indexes of uncounted pods that failed them."""
    completions = int((job.get("spec") or {}).get("completions") or 0)
    prev_text = (job.get("status") or {}).get("failedIndexes")
    prev = parse_indexes(str(prev_text), completions) if prev_text is not None else []
    new = {ix for p in pods if (ix := valid_index(p, completions)) is not None
           and has_tracking_finalizer(p) and is_index_failed(job, p)}
    return with_indexes(prev, new)


def pods_with_delayed_deletion(job: Obj, pods: list[Obj], *, active_pods: list[Obj], succeeded: Intervals,
                               failed: Intervals | None, expected_rm_finalizers: set[str]) -> dict[int, Obj]:
    """Per index waiting for a replacement: the failed pod whose finalizer stays until the
    replacement exists (the one with the highest failure count, latest to finish)."""
    completions = int((job.get("spec") or {}).get("completions") or 0)
    active = indexes_of(active_pods)
    out: dict[int, Obj] = {}
    for p in pods:
        if not has_tracking_finalizer(p) or uid_of(p) in expected_rm_finalizers or not is_pod_failed(p, job):
            continue
        ix = valid_index(p, completions)
        if ix is None or has(succeeded, ix) or has(failed, ix) or ix in active:
            continue
        last = out.get(ix)
        if last is None or (absolute_failure_count(last) <= absolute_failure_count(p)
                            and not finished_time(p) < finished_time(last)):
            out[ix] = p
    return out


def new_index_failure_counts(job: Obj, replaced: Obj | None) -> tuple[int, int]:
    """(failure count, ignored failure count) for the pod replacing `replaced`."""
    if replaced is None:
        return 0, 0
    count, ignored = index_failure_count(replaced), index_ignored_failure_count(replaced)
    policy = (job.get("spec") or {}).get("podFailurePolicy")
    if policy is not None and not match_pod_failure_policy(policy, replaced).count_failed:
        return count, ignored + 1
    return count + 1, ignored


def add_index_failure_count_annotations(template: Obj, job: Obj, replaced: Obj | None) -> None:
    """Write the counts into the template's annotations (which the caller owns)."""
    count, ignored = new_index_failure_counts(job, replaced)
    annotations = template.setdefault("metadata", {}).setdefault("annotations", {})
    annotations[INDEX_FAILURE_COUNT_ANNOTATION] = str(count)
    if ignored > 0:
        annotations[INDEX_IGNORED_FAILURE_COUNT_ANNOTATION] = str(ignored)

