"""The Job controller: run a Job's pods to completion (upstream pkg/controller/job/job_controller.go).

Level-driven like every controller here. Job events sync the Job at once (a spec change) or after
a 1 s batching delay (status-only changes); pod events sync the pod's Job after the same delay, so
a burst of pod updates costs one sync. A sync (`sync_job`) reads the Job and the pods of its
namespace from the caches and, on a copy of the Job:

1. claims pods (adopting matching orphans with the tracking finalizer, releasing pods that stopped
   matching) and splits them into active, succeeded and failed ones (`job_pods`);
2. counts: succeeded/failed so far = status counters + uncounted UIDs + newly finished pods that
   still carry the tracking finalizer (failures an Ignore rule of podFailurePolicy excuses do not
   count); sets startTime on the first unsuspended sync;
3. decides whether the Job is done: a FailureTarget condition already written, a FailJob rule of
   podFailurePolicy, more failures than backoffLimit (or, restartPolicy OnFailure, as many
   container restarts), activeDeadlineSeconds passed since startTime (otherwise a requeue at the
   deadline), for Indexed Jobs failed indexes (backoffLimitPerIndex / maxFailedIndexes) or a met
   successPolicy;
4. finishing: deletes the remaining active pods (keeping their finalizers so they are counted);
   otherwise, once its expectations are met, creates or deletes pods (`job_manage`: parallelism,
   completions, suspend, the failure backoff) and marks it complete when enough pods succeeded and
   none is active; a suspended Job gets Suspended=True (JobSuspended) and its pods deleted,
   resuming sets Suspended=False (JobResumed) and restarts startTime;
5. counts finished pods into the status through the tracking finalizer protocol and writes the
   terminal condition when due (`job_tracking`).

Status fields kept: active, ready, terminating, succeeded, failed, startTime, completionTime,
completedIndexes, failedIndexes, uncountedTerminatedPods, conditions. Pods are labelled by the
API server from the Job's generated selector (batch.kubernetes.io/controller-uid,
batch.kubernetes.io/job-name and the legacy controller-uid/job-name).

Orphans. A pod that still has the tracking finalizer but no Job to count it (the Job is gone or
finished, or the pod was released) goes to a second queue whose worker removes the finalizer.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from typing import Any

from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.client.errors import NotFound
from kubecore.client.factory import SharedInformerFactory
from kubecore.client.indexer import NAMESPACE_INDEX, DeletedFinalStateUnknown, Indexer, split_meta_namespace_key
from kubecore.client.informer import EventHandlerFuncs
from kubecore.client.ratelimit import ItemExponentialFailureRateLimiter
from kubecore.client.resource import ResourceClient
from kubecore.client.rest import RestClient
from kubecore.client.workqueue import RateLimitingQueue
from kubecore.controllers.base import ControllerContext, QueueController, process_queue, register, run_workers
from kubecore.controllers.controller_utils import (
    InvalidSelector, Selector, filter_active_pods, format_time, get_controller_of, is_pod_ready, labels_of, meta,
    object_key, parse_time, pod_phase, resolve_controller_ref, selecting_objects, selector_from_label_selector,
)
from kubecore.controllers.expectations import ControllerExpectations
from kubecore.controllers.job_failures import (
    BackoffStore, calculate_failed_indexes, has_backoff_limit_per_index, pods_with_delayed_deletion,
)
from kubecore.controllers.job_indexes import parse_indexes, total, valid_index, with_indexes
from kubecore.controllers.job_manage import SYNC_JOB_BATCH_PERIOD, delete_active_pods, manage_job
from kubecore.controllers.job_pods import (
    JOB_TRACKING_FINALIZER, REMOVE_FINALIZER_PATCH, JobPodControl, JobPodControlLike, count_terminating,
    has_tracking_finalizer, is_pod_failed, job_pod_views, restart_count_sum, uid_of,
)
from kubecore.controllers.job_policy import match_pod_failure_policy, match_success_policy
from kubecore.controllers.job_state import (
    FAILED, FAILURE_TARGET, REASON_BACKOFF_LIMIT, REASON_DEADLINE, REASON_FAILED_INDEXES, REASON_MAX_FAILED_INDEXES,
    REASON_POD_FAILURE_POLICY, REASON_SUCCESS_POLICY, SUCCESS_CRITERIA_MET, SUSPENDED, FinalizerExpectations,
    JobDeps, SyncJobCtx, ensure_condition, find_condition, is_job_finished, managed_by_external, new_condition,
)
from kubecore.controllers.job_tracking import track_job_status_and_remove_finalizers
from kubecore.controllers.podcontrol import NORMAL, WARNING, EventRecorderLike
from kubecore.controllers.refmanager import PodControllerRefManager, recheck_deletion_timestamp

log = logging.getLogger(__name__)

Obj = dict[str, Any]
COMPONENT = "job-controller"
API_BACKOFF, MAX_API_BACKOFF = 1.0, 60.0
"""Per-Job requeue backoff after a failed sync (DefaultJobApiBackOff, MaxJobApiBackOff)."""


class JobController(QueueController):
    """Runs until cancelled: `await JobController(rest=..., informers=...).run(workers=5)`."""

    name = "job"
    description = "job controller"

    def __init__(self, *, rest: RestClient, informers: SharedInformerFactory,
                 recorder: EventRecorderLike | None = None, clock: Clock = REAL_CLOCK,
                 pod_control: JobPodControlLike | None = None, batch_period: float = SYNC_JOB_BATCH_PERIOD) -> None:
        super().__init__(rest=rest, informers=informers, recorder=recorder, clock=clock, queue=RateLimitingQueue(
            ItemExponentialFailureRateLimiter(API_BACKOFF, MAX_API_BACKOFF), clock=clock))
        self.batch_period = batch_period
        self.pod_control = pod_control
        self.expectations = ControllerExpectations(clock=clock)
        self.finalizer_expectations = FinalizerExpectations()
        self.backoff = BackoffStore()
        self.orphan_queue: RateLimitingQueue[str] = RateLimitingQueue(
            ItemExponentialFailureRateLimiter(API_BACKOFF, MAX_API_BACKOFF), clock=clock)
        self.jobs: ResourceClient
        self.job_indexer: Indexer
        self.pod_indexer: Indexer

    # -- wiring -----------------------------------------------------------------------------------
    async def wire(self) -> None:
        pods = await self.rest.resource("v1", "pods")
        self.jobs = await self.rest.resource("batch/v1", "jobs")
        if self.pod_control is None:
            self.pod_control = JobPodControl(pods, self.recorder)
        job_informer = await self.informers.informer_for("batch/v1", "jobs")
        pod_informer = await self.informers.informer_for("v1", "pods")
        self.job_indexer, self.pod_indexer = job_informer.indexer, pod_informer.indexer
        self.wiring.add(job_informer, EventHandlerFuncs(
            on_add_func=lambda job, _initial: self.enqueue(job), on_update_func=self._update_job,
            on_delete_func=self._delete_job))
        self.wiring.add(pod_informer, EventHandlerFuncs(
            on_add_func=self._add_pod, on_update_func=self._update_pod,
            on_delete_func=lambda obj: self._delete_pod(obj, final=True)))

    def queues(self) -> list[RateLimitingQueue[str]]:
        return [self.queue, self.orphan_queue]

    async def work(self, workers: int) -> None:
        """`workers` workers on Jobs (`sync_job`) and one on orphaned pods (`sync_orphan_pod`)."""
        await asyncio.gather(run_workers(workers, self.worker),
                             process_queue(self.orphan_queue, self.sync_orphan_pod, name="job (orphan pods)"))

    async def sync(self, key: str) -> None:
        """The Job queue's sync (`sync_job`)."""
        await self.sync_job(key)

    @property
    def deps(self) -> JobDeps:
        assert self.pod_control is not None
        return JobDeps(pod_control=self.pod_control, update_status=self.update_job_status, recorder=self.recorder,
                       clock=self.clock, expectations=self.expectations,
                       finalizer_expectations=self.finalizer_expectations, backoff=self.backoff,
                       enqueue_after=self._enqueue_key_after)

    # -- queueing ---------------------------------------------------------------------------------
    def enqueue(self, job: Obj, delay: float = 0.0) -> None:
        self.queue.add_after(object_key(job), delay)

    def enqueue_batched(self, job: Obj) -> None:
        self.enqueue(job, self.batch_period)

    def _enqueue_key_after(self, key: str, delay: float) -> None:
        self.queue.add_after(key, delay)

    # -- lookups ----------------------------------------------------------------------------------
    def resolve_controller_ref(self, namespace: str, ref: Obj) -> Obj | None:
        return resolve_controller_ref(self.job_indexer, namespace, ref, kind="Job")

    @staticmethod
    def selector_of(job: Obj) -> Selector:
        return selector_from_label_selector((job.get("spec") or {}).get("selector"))

    def get_pod_jobs(self, pod: Obj) -> list[Obj]:
        """Jobs of the pod's namespace whose selector matches it (for orphans)."""
        return selecting_objects(self.job_indexer, pod, selector_of=self.selector_of)

    # -- event handlers ---------------------------------------------------------------------------
    def _add_pod(self, pod: Obj, _initial: bool) -> None:
        if meta(pod).get("deletionTimestamp"):
            self._delete_pod(pod, final=False)
            return
        ref = get_controller_of(pod)
        if ref is not None:
            job = self.resolve_controller_ref(str(meta(pod).get("namespace") or ""), ref)
            if job is not None:
                self.expectations.creation_observed(object_key(job))
                self.enqueue_batched(job)
            return
        if has_tracking_finalizer(pod):
            self.orphan_queue.add(object_key(pod))
        for job in self.get_pod_jobs(pod):
            self.enqueue_batched(job)

    def _update_pod(self, old: Obj, cur: Obj) -> None:
        if meta(old).get("resourceVersion") == meta(cur).get("resourceVersion"):
            return
        if meta(cur).get("deletionTimestamp"):
            self._delete_pod(cur, final=False)
            return
        finalizer_removed = not has_tracking_finalizer(cur)
        cur_ref, old_ref = get_controller_of(cur), get_controller_of(old)
        ns = str(meta(cur).get("namespace") or "")
        if cur_ref != old_ref and old_ref is not None:
            old_job = self.resolve_controller_ref(ns, old_ref)
            if old_job is not None:
                if finalizer_removed:
                    self.finalizer_expectations.removal_observed(object_key(old_job), uid_of(cur))
                self.enqueue_batched(old_job)
        if cur_ref is not None:
            job = self.resolve_controller_ref(ns, cur_ref)
            if job is not None:
                if finalizer_removed:
                    self.finalizer_expectations.removal_observed(object_key(job), uid_of(cur))
                self.enqueue_batched(job)
            return
        if has_tracking_finalizer(cur):
            self.orphan_queue.add(object_key(cur))
        if labels_of(cur) != labels_of(old) or cur_ref != old_ref:
            for job in self.get_pod_jobs(cur):
                self.enqueue_batched(job)

    def _delete_pod(self, obj: Obj | DeletedFinalStateUnknown, *, final: bool) -> None:
        pod = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        ref = get_controller_of(pod)
        has_finalizer = has_tracking_finalizer(pod)
        if ref is None:
            if has_finalizer:
                self.orphan_queue.add(object_key(pod))
            return
        job = self.resolve_controller_ref(str(meta(pod).get("namespace") or ""), ref)
        if job is None or is_job_finished(job):
            if has_finalizer:
                self.orphan_queue.add(object_key(pod))
            return
        key = object_key(job)
        self.expectations.deletion_observed(key)
        if final or not has_finalizer:
            self.finalizer_expectations.removal_observed(key, uid_of(pod))
        self.enqueue_batched(job)

    def _update_job(self, old: Obj, cur: Obj) -> None:
        if meta(cur).get("generation") == meta(old).get("generation"):
            self.enqueue_batched(cur)
        else:
            self.enqueue(cur)
        if is_job_finished(cur):
            self.cleanup_pod_finalizers(cur)
        start = parse_time((cur.get("status") or {}).get("startTime"))
        ads = (cur.get("spec") or {}).get("activeDeadlineSeconds")
        if start is None or ads is None:
            return
        if (old.get("spec") or {}).get("activeDeadlineSeconds") != ads:
            self.queue.add_after(object_key(cur), float(ads) - (self.clock.now() - start))

    def _delete_job(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        job = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        self.enqueue(job)
        self.cleanup_pod_finalizers(job)

    def cleanup_pod_finalizers(self, job: Obj) -> None:
        """Hand the finalizer removal of a finished or deleted Job's pods to the orphan worker."""
        try:
            selector = self.selector_of(job)
        except InvalidSelector as e:
            log.error("parsing deleted job selector: %s", e)
            return
        uid = meta(job).get("uid")
        for pod in self.pod_indexer.by_index(NAMESPACE_INDEX, str(meta(job).get("namespace") or "")):
            ref = get_controller_of(pod)
            if selector.matches(labels_of(pod)) and ref is not None and ref.get("uid") == uid \
                    and has_tracking_finalizer(pod):
                self.orphan_queue.add(object_key(pod))

    # -- orphans ----------------------------------------------------------------------------------
    async def sync_orphan_pod(self, key: str) -> None:
        """Remove the tracking finalizer from a pod no unfinished Job of ours controls."""
        pod = self.pod_indexer.get_by_key(key)
        if pod is None:
            return
        ref = get_controller_of(pod)
        if ref is not None:
            if ref.get("kind") != "Job" or ref.get("apiVersion") != "batch/v1":
                return
            job = self.resolve_controller_ref(str(meta(pod).get("namespace") or ""), ref)
            if job is not None and (managed_by_external(job) is not None or not is_job_finished(job)):
                return
        if not has_tracking_finalizer(pod):
            return
        namespace, name = split_meta_namespace_key(key)
        assert self.pod_control is not None
        try:
            await self.pod_control.patch_pod(namespace, name, REMOVE_FINALIZER_PATCH)
        except NotFound:
            pass

    # -- sync -------------------------------------------------------------------------------------
    async def get_pods_for_job(self, job: Obj) -> list[Obj]:
        """Claim the namespace's pods (adopting with the tracking finalizer); adopted pods get the
        finalizer in the returned views too."""
        m = meta(job)
        selector = self.selector_of(job)
        pods = job_pod_views(self.pod_indexer, str(m.get("namespace") or ""))

        async def fresh() -> Obj:
            return await self.jobs.get(str(m.get("name")), namespace=str(m.get("namespace")))

        assert self.pod_control is not None
        manager = PodControllerRefManager(self.pod_control, job, selector, api_version="batch/v1", kind="Job",
                                          can_adopt=recheck_deletion_timestamp(fresh, uid=str(m.get("uid"))),
                                          finalizers=(JOB_TRACKING_FINALIZER,))
        claimed, error = await manager.claim_pods(pods)
        for pod in claimed:
            owned = any(r.get("uid") == m.get("uid") for r in meta(pod).get("ownerReferences") or ())
            if not owned and not has_tracking_finalizer(pod):
                pod["metadata"]["finalizers"] = list(meta(pod).get("finalizers") or []) + [JOB_TRACKING_FINALIZER]
        if error is not None:
            raise error
        return claimed

    async def update_job_status(self, job: Obj) -> Obj:
        """Write the status; zero counters are dropped as upstream's omitempty does."""
        status = job.get("status") or {}
        for field in ("active", "succeeded", "failed"):
            if status.get(field) == 0:
                status.pop(field)
        out = await self.jobs.update_status({**job, "apiVersion": "batch/v1", "kind": "Job"})
        return out

    async def sync_job(self, key: str) -> None:
        """Reconcile one Job (never concurrently for one key: the queue's promise)."""
        cached = self.job_indexer.get_by_key(key)
        if cached is None:
            self.expectations.delete_expectations(key)
            self.finalizer_expectations.delete(key)
            self.backoff.remove(key)
            return
        if managed_by_external(cached) is not None:
            return
        job: Obj = {**copy.deepcopy(cached), "apiVersion": "batch/v1", "kind": "Job"}
        if is_job_finished(job):
            self.backoff.remove(key)
            return
        mode = (job.get("spec") or {}).get("completionMode")
        if mode not in (None, "NonIndexed", "Indexed"):
            self.recorder.event(job, WARNING, reason="UnknownCompletionMode",
                                message="Skipped Job sync because completion mode is unknown")
            return
        status = job.setdefault("status", {})
        uncounted = status.setdefault("uncountedTerminatedPods", {})
        satisfied = self.expectations.satisfied_expectations(key)
        pods = await self.get_pods_for_job(job)
        active_pods = filter_active_pods(pods)
        jctx = SyncJobCtx(job=job, key=key, pods=pods, active_pods=active_pods,
                          ready=sum(1 for p in active_pods if is_pod_ready(p)), terminating=count_terminating(pods),
                          uncounted_succeeded=set(uncounted.get("succeeded") or ()),
                          uncounted_failed=set(uncounted.get("failed") or ()),
                          expected_rm_finalizers=self.finalizer_expectations.expected_uids(key))
        await self._sync(jctx, satisfied)

    def _new_finished_pods(self, jctx: SyncJobCtx) -> tuple[list[Obj], list[Obj]]:
        """getNewFinishedPods: finished pods with the finalizer not yet in the uncounted lists."""
        def valid(p: Obj, uncounted: set[str]) -> bool:
            uid = uid_of(p)
            if not has_tracking_finalizer(p) or uid in uncounted or uid in jctx.expected_rm_finalizers:
                return False
            return not jctx.indexed or valid_index(p, jctx.completions or 0) is not None

        succeeded = [p for p in jctx.pods if valid(p, jctx.uncounted_succeeded) and pod_phase(p) == "Succeeded"]
        failed = [p for p in jctx.pods if valid(p, jctx.uncounted_failed) and is_pod_failed(p, jctx.job)]
        return succeeded, failed

    def _failure_condition(self, reason: str, message: str) -> Obj:
        return new_condition(FAILURE_TARGET, "True", reason, message, self.clock.now())

    async def _sync(self, jctx: SyncJobCtx, satisfied: bool) -> None:
        job, spec, status = jctx.job, jctx.spec, jctx.status
        suspended = spec.get("suspend") is True
        active = len(jctx.active_pods)
        new_succeeded, new_failed = self._new_finished_pods(jctx)
        policy = spec.get("podFailurePolicy")
        counted_failed = sum(1 for p in new_failed if match_pod_failure_policy(policy, p).count_failed)
        jctx.succeeded = int(status.get("succeeded") or 0) + len(new_succeeded) + len(jctx.uncounted_succeeded)
        jctx.failed = int(status.get("failed") or 0) + counted_failed + len(jctx.uncounted_failed)
        if status.get("startTime") is None and not suspended:
            status["startTime"] = self._now_stamp()
        jctx.new_backoff_record = self.backoff.new_record(jctx.key, new_succeeded, new_failed)
        self._decide_finished(jctx)
        if jctx.indexed:
            self._indexed_state(jctx)
        manage_error: Exception | None = None
        suspend_changed = False
        if jctx.finished_condition is not None:
            ready, deleted, manage_error = await delete_active_pods(self.deps, jctx, jctx.active_pods)
            if deleted != active or not satisfied:
                jctx.finished_condition = None  # pods or finalizers may still be unseen
            active -= deleted
            jctx.terminating += deleted
            jctx.ready -= ready
        else:
            manage_called = False
            if satisfied and not meta(job).get("deletionTimestamp"):
                active, manage_error = await manage_job(self.deps, jctx)
                manage_called = True
            completions = jctx.completions
            done = jctx.succeeded > 0 if completions is None else jctx.succeeded >= completions
            if done and active == 0:
                jctx.finished_condition = new_condition(SUCCESS_CRITERIA_MET, "True", "", "", self.clock.now())
            elif manage_called:
                suspend_changed = self._suspend_condition(jctx, suspended)
        needs_update = (suspend_changed or active != int(status.get("active") or 0)
                        or status.get("ready") != jctx.ready or status.get("terminating") != jctx.terminating)
        status["active"], status["ready"], status["terminating"] = active, jctx.ready, jctx.terminating
        try:
            await track_job_status_and_remove_finalizers(self.deps, jctx, needs_update)
        except Exception as e:
            raise RuntimeError(f"tracking status: {e}") from e
        if manage_error is not None:
            raise manage_error

    def _now_stamp(self) -> str:
        return format_time(self.clock.now())

    def _decide_finished(self, jctx: SyncJobCtx) -> None:
        """Step 3 of the module docstring, up to the Indexed parts."""
        job, spec = jctx.job, jctx.spec
        scm = find_condition(job, SUCCESS_CRITERIA_MET)
        jctx.finished_condition = scm if scm is not None and scm.get("status") == "True" else None
        if jctx.finished_condition is None:
            target = find_condition(job, FAILURE_TARGET)
            if target is not None and target.get("status") == "True":
                jctx.finished_condition = new_condition(FAILED, "True", target.get("reason", ""),
                                                        target.get("message", ""), self.clock.now())
            elif (msg := self._fail_job_message(jctx)) is not None:
                jctx.finished_condition = self._failure_condition(REASON_POD_FAILURE_POLICY, msg)
        if jctx.finished_condition is not None:
            return
        if jctx.failed > int(spec.get("backoffLimit") or 0) or self._past_backoff_limit_on_failure(jctx):
            jctx.finished_condition = self._failure_condition(REASON_BACKOFF_LIMIT,
                                                              "Job has reached the specified backoff limit")
        elif self._past_active_deadline(job):
            jctx.finished_condition = self._failure_condition(REASON_DEADLINE,
                                                              "Job was active longer than specified deadline")
        elif spec.get("activeDeadlineSeconds") is not None and spec.get("suspend") is not True:
            start = parse_time(jctx.status.get("startTime")) or self.clock.now()
            self.queue.add_after(jctx.key, float(spec["activeDeadlineSeconds"]) - (self.clock.now() - start))

    def _indexed_state(self, jctx: SyncJobCtx) -> None:
        job, completions = jctx.job, jctx.completions or 0
        prev = parse_indexes(str(jctx.status.get("completedIndexes") or ""), completions)
        new = {ix for p in jctx.pods if pod_phase(p) == "Succeeded" and has_tracking_finalizer(p)
               and (ix := valid_index(p, completions)) is not None}
        jctx.prev_succeeded_indexes, jctx.succeeded_indexes = prev, with_indexes(prev, new)
        jctx.succeeded = total(jctx.succeeded_indexes)
        if has_backoff_limit_per_index(job):
            jctx.failed_indexes = calculate_failed_indexes(job, jctx.pods)
            failed_total = total(jctx.failed_indexes)
            max_failed = jctx.spec.get("maxFailedIndexes")
            if jctx.finished_condition is None:
                if max_failed is not None and failed_total > int(max_failed):
                    jctx.finished_condition = self._failure_condition(
                        REASON_MAX_FAILED_INDEXES, "Job has exceeded the specified maximal number of failed indexes")
                elif failed_total > 0 and failed_total + total(jctx.succeeded_indexes) >= completions:
                    jctx.finished_condition = self._failure_condition(REASON_FAILED_INDEXES, "Job has failed indexes")
            jctx.delayed_deletion = pods_with_delayed_deletion(
                job, jctx.pods, active_pods=jctx.active_pods, succeeded=jctx.succeeded_indexes,
                failed=jctx.failed_indexes, expected_rm_finalizers=jctx.expected_rm_finalizers)
        if jctx.finished_condition is None:
            msg = match_success_policy(jctx.spec.get("successPolicy"), completions, jctx.succeeded_indexes)
            if msg is not None:
                jctx.finished_condition = new_condition(SUCCESS_CRITERIA_MET, "True", REASON_SUCCESS_POLICY, msg,
                                                        self.clock.now())

    def _suspend_condition(self, jctx: SyncJobCtx, suspended: bool) -> bool:
        now = self.clock.now()
        if suspended:
            if ensure_condition(jctx.job, SUSPENDED, "True", "JobSuspended", "Job suspended", now):
                self.recorder.event(jctx.job, NORMAL, reason="Suspended", message="Job suspended")
                return True
            return False
        if ensure_condition(jctx.job, SUSPENDED, "False", "JobResumed", "Job resumed", now):
            self.recorder.event(jctx.job, NORMAL, reason="Resumed", message="Job resumed")
            jctx.status["startTime"] = self._now_stamp()  # activeDeadlineSeconds counts from the resume
            return True
        return False

    def _fail_job_message(self, jctx: SyncJobCtx) -> str | None:
        policy = jctx.spec.get("podFailurePolicy")
        if policy is None:
            return None
        for pod in jctx.pods:
            if is_pod_failed(pod, jctx.job):
                msg = match_pod_failure_policy(policy, pod).job_failure_message
                if msg is not None:
                    return msg
        return None

    @staticmethod
    def _past_backoff_limit_on_failure(jctx: SyncJobCtx) -> bool:
        """restartPolicy OnFailure: container restarts of running/pending pods count as failures."""
        template_spec = (jctx.spec.get("template") or {}).get("spec") or {}
        if template_spec.get("restartPolicy") != "OnFailure":
            return False
        restarts = sum(restart_count_sum(p) for p in jctx.pods if pod_phase(p) in ("Running", "Pending"))
        limit = int(jctx.spec.get("backoffLimit") or 0)
        return restarts > 0 if limit == 0 else restarts >= limit

    def _past_active_deadline(self, job: Obj) -> bool:
        spec = job.get("spec") or {}
        ads, start = spec.get("activeDeadlineSeconds"), parse_time((job.get("status") or {}).get("startTime"))
        if ads is None or start is None or spec.get("suspend") is True:
            return False
        return self.clock.now() - start >= float(ads)


@register("job", workers=5, aliases=("job-controller",))
def new_job_controller(ctx: ControllerContext) -> JobController:
    """The controller manager's constructor for the Job controller."""
    return JobController(rest=ctx.rest, informers=ctx.informers, recorder=ctx.recorder(COMPONENT), clock=ctx.clock,
                         batch_period=float(ctx.options.get("job_sync_batch_period", SYNC_JOB_BATCH_PERIOD)))

