"""Counting finished pods into a Job's status with the tracking finalizer (upstream
job_controller.go: trackJobStatusAndRemoveFinalizers, flushUncountedAndRemoveFinalizers,
enactJobFinished).

Every pod of a Job is created with the finalizer batch.kubernetes.io/job-tracking, so it cannot
disappear before the Job has counted it. Counting is a three-step protocol that survives a crash
at any point without counting a pod twice or losing it:

1. a finished pod's UID is added to status.uncountedTerminatedPods.succeeded / .failed (Indexed
   Jobs record a success as its index in status.completedIndexes instead) and the status is
   written;
2. the finalizer is removed from those pods (a pod already gone counts as removed);
3. UIDs whose pod no longer has the finalizer move from the uncounted lists into
   status.succeeded / status.failed, and the status is written again.

Between 2 and 3 the controller remembers the UIDs whose finalizer removal it has not seen yet
(`FinalizerExpectations`), so a sync running on a stale cache does not count them again. At most
500 uncounted pods are handled per sync; the rest wait for the next one.

Finishing. When the sync decided the Job is finished, the interim condition (FailureTarget or
SuccessCriteriaMet) is written with step 1; the terminal condition (Failed or Complete, plus
completionTime) only once no pod is uncounted or terminating. Then the events: Completed "Job
completed" (and TooManySucceededPods when more pods succeeded than completions), or a Warning with
the failure's reason and message.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kubecore.client.errors import NotFound
from kubecore.controllers.controller_utils import meta, pod_phase
from kubecore.controllers.job_failures import has_backoff_limit_per_index
from kubecore.controllers.job_indexes import by_completion_index, has, to_string, valid_index, with_indexes
from kubecore.controllers.job_pods import REMOVE_FINALIZER_PATCH, has_tracking_finalizer, is_pod_failed, uid_of
from kubecore.controllers.job_policy import match_pod_failure_policy
from kubecore.controllers.job_state import (
    COMPLETE, FAILED, FAILURE_TARGET, JobDeps, SyncJobCtx, condition_true, ensure_condition, is_success_criteria_met,
    new_condition, SUCCESS_CRITERIA_MET,
)
from kubecore.controllers.podcontrol import NORMAL, WARNING

log = logging.getLogger(__name__)

Obj = dict[str, Any]


def uncounted_of(status: Obj) -> Obj:
    """status.uncountedTerminatedPods, created empty when missing (as upstream always does)."""
    u = status.get("uncountedTerminatedPods")
    if not isinstance(u, dict):
        u = status["uncountedTerminatedPods"] = {}
    return u


def clean_uncounted_pods_without_finalizers(status: Obj, uids_with_finalizer: set[str]) -> bool:
    """Move uncounted UIDs whose pods lost the finalizer into the counters; True if changed."""
    u = uncounted_of(status)
    changed = False
    for field, counter in (("succeeded", "succeeded"), ("failed", "failed")):
        listed = list(u.get(field) or ())
        kept = [uid for uid in listed if uid in uids_with_finalizer]
        if len(kept) != len(listed):
            changed = True
            status[counter] = int(status.get(counter) or 0) + len(listed) - len(kept)
            if kept:
                u[field] = kept
            else:
                u.pop(field, None)
    return changed


def can_remove_finalizer(jctx: SyncJobCtx, pod: Obj, consider_failed: bool) -> bool:
    if meta(jctx.job).get("deletionTimestamp") or jctx.finished_condition is not None or pod_phase(pod) == "Succeeded":
        return True
    if not consider_failed:
        return False
    if has_backoff_limit_per_index(jctx.job):
        ix = valid_index(pod, jctx.completions or 0)
        delayed = jctx.delayed_deletion.get(ix) if ix is not None else None
        if delayed is not None and uid_of(delayed) == uid_of(pod):
            return False
    return True


def _count_pod(jctx: SyncJobCtx, pod: Obj, consider_failed: bool, new_indexes: list[int]) -> bool:
    """Record one finished pod in the uncounted lists (or completed indexes); True if recorded."""
    uid, u = uid_of(pod), uncounted_of(jctx.status)
    if pod_phase(pod) == "Succeeded" and uid not in jctx.uncounted_failed:
        if jctx.indexed:
            ix = valid_index(pod, jctx.completions or 0)
            if ix is not None and not has(jctx.prev_succeeded_indexes, ix):
                new_indexes.append(ix)
                return True
        elif uid not in jctx.uncounted_succeeded:
            u["succeeded"] = list(u.get("succeeded") or ()) + [uid]
            return True
        return False
    finishing = jctx.finished_condition is not None and not is_success_criteria_met(jctx.finished_condition)
    if not (consider_failed or finishing) or uid in jctx.uncounted_failed:
        return False
    if jctx.indexed and valid_index(pod, jctx.completions or 0) is None:
        return False
    policy = jctx.spec.get("podFailurePolicy")
    if policy is not None and not match_pod_failure_policy(policy, pod).count_failed:
        return False
    u["failed"] = list(u.get("failed") or ()) + [uid]
    return True


async def track_job_status_and_remove_finalizers(deps: JobDeps, jctx: SyncJobCtx, needs_flush: bool) -> None:
    """Steps 1-3 of the module docstring, then the terminal condition if due."""
    pods = by_completion_index(jctx.pods) if jctx.indexed else jctx.pods
    uids_with_finalizer = {uid_of(p) for p in pods
                           if has_tracking_finalizer(p) and uid_of(p) not in jctx.expected_rm_finalizers}
    needs_flush = clean_uncounted_pods_without_finalizers(jctx.status, uids_with_finalizer) or needs_flush
    to_remove: list[Obj] = []
    new_indexes: list[int] = []
    reached_max = False
    for pod in pods:
        if not has_tracking_finalizer(pod) or uid_of(pod) in jctx.expected_rm_finalizers:
            continue  # counted by an earlier sync
        consider_failed = is_pod_failed(pod, jctx.job)
        if not can_remove_finalizer(jctx, pod, consider_failed):
            continue
        to_remove.append(pod)
        needs_flush = _count_pod(jctx, pod, consider_failed, new_indexes) or needs_flush
        u = uncounted_of(jctx.status)
        if len(new_indexes) + len(u.get("succeeded") or ()) + len(u.get("failed") or ()) >= deps.max_uncounted_pods:
            reached_max = True
            break
    if jctx.indexed:
        needs_flush = _update_indexes(jctx, new_indexes) or needs_flush
    needs_flush = _interim_condition(deps, jctx) or needs_flush
    needs_flush = await flush_uncounted_and_remove_finalizers(deps, jctx, to_remove, uids_with_finalizer, needs_flush)
    finished = not reached_max and enact_job_finished(deps, jctx)
    if finished or needs_flush:
        jctx.job = await deps.update_status(jctx.job)
        if finished and jctx.finished_condition is not None:
            record_job_finished(deps, jctx.job, jctx.finished_condition)


def _update_indexes(jctx: SyncJobCtx, new_indexes: list[int]) -> bool:
    changed = False
    jctx.succeeded_indexes = with_indexes(jctx.succeeded_indexes, new_indexes)
    text = to_string(jctx.succeeded_indexes)
    status = jctx.status
    if text != (status.get("completedIndexes") or ""):
        changed = True
    status["succeeded"] = sum(last - first + 1 for first, last in jctx.succeeded_indexes)
    if text:
        status["completedIndexes"] = text
    else:
        status.pop("completedIndexes", None)
    failed_text = to_string(jctx.failed_indexes) if jctx.failed_indexes is not None else None
    if status.get("failedIndexes") != failed_text:
        changed = True
        if failed_text is None:
            status.pop("failedIndexes", None)
        else:
            status["failedIndexes"] = failed_text
    return changed


def _interim_condition(deps: JobDeps, jctx: SyncJobCtx) -> bool:
    """Write FailureTarget / SuccessCriteriaMet now; keep the terminal condition for later."""
    cond, now = jctx.finished_condition, deps.clock.now()
    if cond is None:
        return False
    changed = False
    if cond.get("type") == FAILURE_TARGET:
        jctx.status["conditions"] = list(jctx.status.get("conditions") or []) + [cond]
        changed = True
        jctx.finished_condition = new_condition(FAILED, "True", cond.get("reason", ""), cond.get("message", ""), now)
    if is_success_criteria_met(jctx.finished_condition):
        if not condition_true(jctx.job, SUCCESS_CRITERIA_MET):
            jctx.status["conditions"] = list(jctx.status.get("conditions") or []) + [cond]
            changed = True
        jctx.finished_condition = new_condition(COMPLETE, "True", cond.get("reason", ""), cond.get("message", ""), now)
    return changed


async def flush_uncounted_and_remove_finalizers(deps: JobDeps, jctx: SyncJobCtx, to_remove: list[Obj],
                                                uids_with_finalizer: set[str], needs_flush: bool) -> bool:
    """Write step 1, do step 2, account step 3 (written by the caller, or here after a partial
    failure). Returns whether status changes are still unwritten; raises the first removal error."""
    if needs_flush:
        jctx.job = await deps.update_status(jctx.job)
        if jctx.new_backoff_record is not None:
            deps.backoff.update(jctx.new_backoff_record)
        needs_flush = False
    rm_error: Exception | None = None
    if to_remove:
        removed, rm_error = await remove_tracking_finalizers(deps, jctx.key, to_remove)
        for pod, ok in zip(to_remove, removed):
            if ok:
                uids_with_finalizer.discard(uid_of(pod))
    if clean_uncounted_pods_without_finalizers(jctx.status, uids_with_finalizer):
        needs_flush = True
    if rm_error is not None:
        if needs_flush:
            await deps.update_status(jctx.job)
        raise rm_error
    return needs_flush


async def remove_tracking_finalizers(deps: JobDeps, key: str, pods: list[Obj]) -> tuple[list[bool], Exception | None]:
    """Patch the finalizer away from each pod; per pod whether it is gone (NotFound counts)."""
    deps.finalizer_expectations.expect_removals(key, [uid_of(p) for p in pods])

    async def one(pod: Obj) -> Exception | None:
        m = meta(pod)
        try:
            await deps.pod_control.patch_pod(str(m.get("namespace")), str(m.get("name")), REMOVE_FINALIZER_PATCH)
        except Exception as e:
            deps.finalizer_expectations.removal_observed(key, uid_of(pod))  # no update will come
            return None if isinstance(e, NotFound) else e
        return None

    results = await asyncio.gather(*(one(p) for p in pods))
    errors = [e for e in results if e is not None]
    return [e is None for e in results], errors[0] if errors else None


def enact_job_finished(deps: JobDeps, jctx: SyncJobCtx) -> bool:
    """Add the terminal condition once nothing is uncounted or terminating; True if added."""
    cond = jctx.finished_condition
    if cond is None:
        return False
    u = uncounted_of(jctx.status)
    if len(u.get("succeeded") or ()) + len(u.get("failed") or ()) > 0:
        return False
    if jctx.terminating > 0:
        return False
    ensure_condition(jctx.job, str(cond["type"]), str(cond["status"]), str(cond.get("reason", "")),
                     str(cond.get("message", "")), deps.clock.now())
    if cond["type"] == COMPLETE:
        jctx.status["completionTime"] = cond["lastTransitionTime"]
    return True


def record_job_finished(deps: JobDeps, job: Obj, cond: Obj) -> None:
    typed = {**job, "apiVersion": "batch/v1", "kind": "Job"}
    if cond.get("type") == COMPLETE:
        completions = (job.get("spec") or {}).get("completions")
        if completions is not None and int((job.get("status") or {}).get("succeeded") or 0) > int(completions):
            deps.recorder.event(typed, WARNING, reason="TooManySucceededPods",
                                message="Too many succeeded pods running after completion count reached")
        deps.recorder.event(typed, NORMAL, reason="Completed", message="Job completed")
    else:
        deps.recorder.event(typed, WARNING, reason=str(cond.get("reason", "")), message=str(cond.get("message", "")))
