"""Creating and deleting a Job's pods (upstream job_controller.go: manageJob, deleteJobPods,
deleteActivePods, activePodsForRemoval).

`manage_job` brings the number of active pods to what the Job wants:

- suspended: delete every active pod;
- otherwise want = parallelism, capped by the completions still missing (completions - succeeded,
  never below 0); with no completions set, once any pod succeeded the running pods are left to
  finish and nothing new starts;
- too many active (or, Indexed, pods with a repeated, missing or out-of-range index): delete the
  least advanced first (ActivePods order), at most 500 per sync, and create nothing this sync;
- too few: unless the failure backoff (`job_backoff`) still runs, create the difference (minus
  pods still terminating when only failed pods are replaced), at most 500, in slow-start batches
  1, 2, 4, ... that stop after a batch with an error. Indexed Jobs create the lowest pending
  indexes. Every pod gets the tracking finalizer.

Expectations are raised before writing and lowered for every write that failed or was skipped,
so a sync whose earlier writes are still unseen never adds more. Pods deleted by `delete_job_pods`
lose the tracking finalizer first (they are not counted: the Job no longer wants them);
`delete_active_pods`, used when the Job is finishing, keeps it, so they are counted as failed.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from typing import Any

from kubecore.client.errors import NotFound
from kubecore.controllers.controller_utils import (
    NAMESPACE_TERMINATING_CAUSE, SLOW_START_INITIAL_BATCH_SIZE, has_status_cause, is_pod_ready, meta,
    new_controller_ref,
)
from kubecore.controllers.job_failures import (
    absolute_failure_count, add_index_failure_count_annotations, has_backoff_limit_per_index, remaining_time,
    remaining_time_per_index,
)
from kubecore.controllers.job_indexes import (
    add_completion_index_env, duplicated_index_pods, first_pending_indexes, generate_name_with_index, index_template,
)
from kubecore.controllers.job_pods import (
    JOB_TRACKING_FINALIZER, REMOVE_FINALIZER_PATCH, has_tracking_finalizer, is_pod_terminating,
    only_replace_failed_pods,
)
from kubecore.controllers.job_state import JobDeps, SyncJobCtx
from kubecore.controllers.podranking import rank_pods_for_deletion

log = logging.getLogger(__name__)

Obj = dict[str, Any]
SYNC_JOB_BATCH_PERIOD = 1.0
"""Pod events sync a Job after this delay, batching them (upstream's syncJobBatchPeriod)."""


def active_pods_for_removal(job: Obj, pods: list[Obj], rm_at_least: int) -> list[Obj]:
    """Pods to delete: for Indexed Jobs every pod with a bad or repeated index, then the least
    advanced ones until there are `rm_at_least`."""
    if (job.get("spec") or {}).get("completionMode") == "Indexed":
        rm, left = duplicated_index_pods(pods, int(job["spec"].get("completions") or 0))
    else:
        rm, left = [], list(pods)
    if len(rm) < rm_at_least:
        ranked = rank_pods_for_deletion(left, [0] * len(left), now=None)
        rm = rm + ranked[:rm_at_least - len(rm)]
    return rm


async def delete_job_pods(deps: JobDeps, jctx: SyncJobCtx, pods: list[Obj]) -> tuple[int, int, Exception | None]:
    """Remove the tracking finalizer, then delete; (deleted ready, deleted, first error)."""
    ns = str(meta(jctx.job).get("namespace") or "")
    errors: list[Exception] = []
    outcomes = await asyncio.gather(*(_remove_and_delete(deps, jctx, ns, p, errors) for p in pods))
    deleted = sum(1 for ok, _ in outcomes if ok)
    ready = sum(1 for _, r in outcomes if r)
    return ready, deleted, errors[0] if errors else None


async def _remove_and_delete(deps: JobDeps, jctx: SyncJobCtx, ns: str, pod: Obj,
                             errors: list[Exception]) -> tuple[bool, bool]:
    name = str(meta(pod).get("name"))

    def failed(e: Exception) -> bool:
        deps.expectations.deletion_observed(jctx.key)  # no watch event will come for it
        if isinstance(e, NotFound):
            return True
        errors.append(e)
        return False

    if has_tracking_finalizer(pod):
        try:
            await deps.pod_control.patch_pod(ns, name, REMOVE_FINALIZER_PATCH)
        except Exception as e:
            failed(RuntimeError(f"removing completion finalizer: {e}") if not isinstance(e, NotFound) else e)
            return False, False
    ok = True
    try:
        await deps.pod_control.delete_pod(ns, name, jctx.job)
    except Exception as e:
        ok = failed(e)
    return ok, is_pod_ready(pod)


async def delete_active_pods(deps: JobDeps, jctx: SyncJobCtx, pods: list[Obj]) -> tuple[int, int, Exception | None]:
    """Delete (keeping finalizers); (deleted ready, deleted, first error)."""
    ns = str(meta(jctx.job).get("namespace") or "")

    async def one(pod: Obj) -> Exception | None:
        try:
            await deps.pod_control.delete_pod(ns, str(meta(pod).get("name")), jctx.job)
        except NotFound:
            return None
        except Exception as e:
            return e
        return None

    results = await asyncio.gather(*(one(p) for p in pods))
    errors = [e for e in results if e is not None]
    return sum(1 for p in pods if is_pod_ready(p)), len(pods) - len(errors), errors[0] if errors else None


def want_active(jctx: SyncJobCtx, active: int) -> int:
    parallelism = int(jctx.spec.get("parallelism") or 0)
    completions = jctx.completions
    if completions is None:
        return active if jctx.succeeded > 0 else parallelism
    return max(0, min(completions - jctx.succeeded, parallelism))


async def manage_job(deps: JobDeps, jctx: SyncJobCtx) -> tuple[int, Exception | None]:
    """Create or delete pods (module docstring); (active pods afterwards, first error)."""
    active = len(jctx.active_pods)
    if jctx.spec.get("suspend") is True:
        return await _delete_for_manage(deps, jctx, active_pods_for_removal(jctx.job, jctx.active_pods, active),
                                        active)
    want = want_active(jctx, active)
    to_delete = active_pods_for_removal(jctx.job, jctx.active_pods, max(0, active - want))
    if to_delete:
        return await _delete_for_manage(deps, jctx, to_delete[:deps.max_pods_per_sync], active)
    terminating = jctx.terminating if only_replace_failed_pods(jctx.job) else 0
    diff = want - terminating - active
    if diff <= 0:
        return active, None
    now = deps.clock.now()
    if not has_backoff_limit_per_index(jctx.job) and jctx.new_backoff_record is not None:
        wait = remaining_time(jctx.new_backoff_record, now)
        if wait > 0:
            deps.enqueue_after(jctx.key, max(wait, SYNC_JOB_BATCH_PERIOD))
            return 0, None  # as upstream: active reads 0 while creation waits for the backoff
    diff = min(diff, deps.max_pods_per_sync)
    indexes: list[int | None] = [None] * diff
    if jctx.indexed:
        pending = first_pending_indexes(
            count=diff, completions=jctx.completions or 0, succeeded=jctx.succeeded_indexes,
            active=jctx.active_pods, failed=jctx.failed_indexes,
            terminating=[p for p in jctx.pods if is_pod_terminating(p)] if only_replace_failed_pods(jctx.job) else ())
        if has_backoff_limit_per_index(jctx.job):
            pending, wait = _indexes_ready_now(jctx, pending, now)
            if wait > 0:
                deps.enqueue_after(jctx.key, max(wait, SYNC_JOB_BATCH_PERIOD))
                return 0, None
        indexes = list(pending)
    return await _create_pods(deps, jctx, indexes, active)


def _indexes_ready_now(jctx: SyncJobCtx, pending: list[int], now: float) -> tuple[list[int], float]:
    """getPodCreationInfoForIndependentIndexes: the indexes whose backoff is over, else the
    shortest remaining backoff."""
    ready, shortest = [], None
    for ix in pending:
        failed = jctx.delayed_deletion.get(ix)
        wait = remaining_time_per_index(failed, now, absolute_failures=absolute_failure_count(failed) if failed
                                        else 0)
        if wait == 0:
            ready.append(ix)
        elif shortest is None or wait < shortest:
            shortest = wait
    return (ready, 0.0) if ready else (ready, shortest or 0.0)


async def _delete_for_manage(deps: JobDeps, jctx: SyncJobCtx, pods: list[Obj],
                             active: int) -> tuple[int, Exception | None]:
    deps.expectations.expect_deletions(jctx.key, len(pods))
    ready, deleted, err = await delete_job_pods(deps, jctx, pods)
    jctx.terminating += deleted
    jctx.ready -= ready
    return active - deleted, err


def _pod_template(jctx: SyncJobCtx) -> Obj:
    template: Obj = copy.deepcopy(jctx.spec.get("template") or {})
    if jctx.indexed:
        add_completion_index_env(template)
    tmeta = template.setdefault("metadata", {})
    finalizers = list(tmeta.get("finalizers") or [])
    if JOB_TRACKING_FINALIZER not in finalizers:
        finalizers.append(JOB_TRACKING_FINALIZER)
    tmeta["finalizers"] = finalizers
    return template


async def _create_pods(deps: JobDeps, jctx: SyncJobCtx, indexes: list[int | None],
                       active: int) -> tuple[int, Exception | None]:
    diff = len(indexes)
    if diff == 0:
        return active, None
    deps.expectations.expect_creations(jctx.key, diff)
    log.debug("too few pods running for job %s: creating %d", jctx.key, diff)
    active += diff
    template = _pod_template(jctx)
    job_name, ns = str(meta(jctx.job).get("name")), str(meta(jctx.job).get("namespace") or "")
    ref = new_controller_ref(jctx.job, api_version="batch/v1", kind="Job")
    errors: list[Exception] = []

    async def create(index: int | None) -> None:
        nonlocal active
        pod_template, generate_name = template, ""
        if index is not None:
            pod_template = copy.deepcopy(index_template(template, job_name=job_name, index=index))
            generate_name = generate_name_with_index(job_name, index)
            if has_backoff_limit_per_index(jctx.job):
                add_index_failure_count_annotations(pod_template, jctx.job, jctx.delayed_deletion.get(index))
        try:
            await deps.pod_control.create_pod_with_generate_name(ns, pod_template, jctx.job, ref, generate_name)
        except Exception as e:
            if has_status_cause(e, NAMESPACE_TERMINATING_CAUSE):
                return  # every later create fails the same way: not worth an error
            deps.expectations.creation_observed(jctx.key)
            active -= 1
            errors.append(e)

    batch, start = min(diff, SLOW_START_INITIAL_BATCH_SIZE), 0
    while start < diff:
        before = len(errors)
        await asyncio.gather(*(create(ix) for ix in indexes[start:start + batch]))
        start += batch
        skipped = diff - start
        if len(errors) > before and skipped > 0:
            active -= skipped
            deps.expectations.lower_expectations(jctx.key, add=skipped)
            break
        batch = min(2 * batch, skipped)
    return active, errors[0] if errors else None
