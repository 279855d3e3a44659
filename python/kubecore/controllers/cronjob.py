"""The CronJob controller: create a Job at every activation of a CronJob's schedule (upstream
pkg/controller/cronjob/cronjob_controllerv2.go).

A sync reads one CronJob and its Jobs (every Job in its namespace whose controller reference
names it) from the informer caches and, on a working copy of the CronJob:

1. prunes finished Jobs beyond successfulJobsHistoryLimit / failedJobsHistoryLimit (defaults 3
   and 1), oldest start time first, deleting them with background propagation;
2. reconciles status.active: a finished Job leaves it (event SawCompletedJob), a Job gone from
   the server leaves it (MissingJob, checked with a live GET so a slow watch does not fool it),
   an unfinished Job it does not list is reported (UnexpectedJob); lastSuccessfulTime follows the
   latest completionTime of a succeeded Job;
3. unless the CronJob is being deleted, suspended, or has an unusable schedule or time zone,
   finds the most recent activation it has not handled (`cronjob_schedule`): none -> requeue at
   the next one; older than startingDeadlineSeconds -> MissSchedule, skip; already handled (a Job
   of that name is active, or it equals lastScheduleTime) -> requeue; Forbid with an active Job ->
   JobAlreadyActive, skip; Replace -> delete the active Jobs first; then creates the Job
   "<cronjob>-<minutes since epoch>" (an AlreadyExists of our own Job is adopted into the status),
   adds it to status.active and sets lastScheduleTime;
4. writes the status once if anything changed, and requeues the key at the next activation
   (+100 ms) on the injected clock, so a FakeClock drives firing in tests.

More than 100 missed activations since the last one (a controller down for long, or clock skew)
records TooManyMissedTimes and still starts only the most recent one. The schedule's time zone is
spec.timeZone, else a TZ=/CRON_TZ= prefix in the schedule (accepted with an UnsupportedSchedule
warning, as upstream; the API server refuses it on new objects), else the controller's local zone
(option "cronjob_time_zone" overrides it).
"""

from __future__ import annotations

import logging
import zoneinfo
from datetime import datetime, timezone, tzinfo
from typing import Any

from kubecore.api.kinds.cron import CronError
from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.client.errors import AlreadyExists, NotFound
from kubecore.client.factory import SharedInformerFactory
from kubecore.client.indexer import NAMESPACE_INDEX, DeletedFinalStateUnknown, Indexer
from kubecore.client.informer import EventHandlerFuncs
from kubecore.client.resource import ResourceClient
from kubecore.client.rest import RestClient
from kubecore.controllers.base import ControllerContext, QueueController, process_queue, register
from kubecore.controllers.controller_utils import (
    NAMESPACE_TERMINATING_CAUSE, format_time, get_controller_of, has_status_cause, meta, object_key, parse_time,
    resolve_controller_ref,
)
from kubecore.controllers.cronjob_jobs import (
    CRONJOB_API_VERSION, CRONJOB_KIND, active_refs, delete_from_active_list, finished_status, in_active_list,
    in_active_list_by_name, is_controlled_by, is_job_finished, is_job_succeeded, job_from_template, job_reference,
    jobs_to_prune,
)
from kubecore.controllers.cronjob_schedule import (
    InvalidSchedule, Missed, Schedule, load_location, local_zone, most_recent_schedule_time, next_schedule_delay,
    parse_schedule,
)
from kubecore.controllers.podcontrol import NORMAL, WARNING, EventRecorderLike

log = logging.getLogger(__name__)

Obj = dict[str, Any]
COMPONENT = "cronjob-controller"
UNSUPPORTED_TZ = ("CRON_TZ or TZ used in schedule {} is not officially supported, see "
                  "https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details")


def _quote(s: str) -> str:
    """Go's %q for plain strings."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


class _Outcome:
    """What one sync did to the working copy's status (written once, at the end)."""

    changed = False


def _rfc1123z(t: float) -> str:
    return datetime.fromtimestamp(int(t), timezone.utc).strftime("%a, %d %b %Y %H:%M:%S +0000")


class CronJobController(QueueController):
    """Runs until cancelled: `await CronJobController(rest=..., informers=...).run(workers=5)`."""

    name = "cronjob"
    description = "cronjob controller v2"

    def __init__(self, *, rest: RestClient, informers: SharedInformerFactory,
                 recorder: EventRecorderLike | None = None, clock: Clock = REAL_CLOCK,
                 time_zone: tzinfo | None = None) -> None:
        super().__init__(rest=rest, informers=informers, recorder=recorder, clock=clock)
        self.default_tz = time_zone if time_zone is not None else local_zone()
        self.jobs: ResourceClient
        self.cronjobs: ResourceClient
        self.job_indexer: Indexer
        self.cj_indexer: Indexer

    # -- wiring -----------------------------------------------------------------------------------
    async def wire(self) -> None:
        self.jobs = await self.rest.resource("batch/v1", "jobs")
        self.cronjobs = await self.rest.resource("batch/v1", "cronjobs")
        job_informer = await self.informers.informer_for("batch/v1", "jobs")
        cj_informer = await self.informers.informer_for("batch/v1", "cronjobs")
        self.job_indexer, self.cj_indexer = job_informer.indexer, cj_informer.indexer
        self.wiring.add(job_informer, EventHandlerFuncs(
            on_add_func=self._add_job, on_update_func=self._update_job, on_delete_func=self._delete_job))
        self.wiring.add(cj_informer, EventHandlerFuncs(
            on_add_func=lambda obj, _initial: self.enqueue(obj), on_update_func=self._update_cronjob,
            on_delete_func=lambda obj: self.enqueue(obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj)))

    async def worker(self) -> None:
        await process_queue(self.queue, self.sync, name=self.name, on_error=self.on_sync_error,
                            on_success=self._requeue)

    def _requeue(self, key: str, requeue_after: float | None) -> None:
        """A sync that asks to look again later starts its backoff over (others keep theirs, as upstream)."""
        if requeue_after is not None:
            self.queue.forget(key)
            self.queue.add_after(key, requeue_after)

    # -- event handlers ---------------------------------------------------------------------------
    def resolve_controller_ref(self, namespace: str, ref: Obj) -> Obj | None:
        return resolve_controller_ref(self.cj_indexer, namespace, ref, kind=CRONJOB_KIND)

    def _enqueue_owner(self, job: Obj, ref: Obj | None) -> None:
        if ref is None:
            return
        cj = self.resolve_controller_ref(str(meta(job).get("namespace") or ""), ref)
        if cj is not None:
            self.enqueue(cj)

    def _add_job(self, job: Obj, _initial: bool) -> None:
        if meta(job).get("deletionTimestamp"):
            self._delete_job(job)
            return
        self._enqueue_owner(job, get_controller_of(job))

    def _update_job(self, old: Obj, cur: Obj) -> None:
        if meta(old).get("resourceVersion") == meta(cur).get("resourceVersion"):
            return
        cur_ref, old_ref = get_controller_of(cur), get_controller_of(old)
        if cur_ref != old_ref and old_ref is not None:
            self._enqueue_owner(old, old_ref)
        self._enqueue_owner(cur, cur_ref)

    def _delete_job(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        job = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        self._enqueue_owner(job, get_controller_of(job))

    def _update_cronjob(self, old: Obj, cur: Obj) -> None:
        """A new schedule or time zone requeues at its next activation; anything else now."""
        os_, cs = old.get("spec") or {}, cur.get("spec") or {}
        if os_.get("schedule") == cs.get("schedule") and os_.get("timeZone") == cs.get("timeZone"):
            self.enqueue(cur)
            return
        try:
            schedule = self.schedule_of(cur, warn=False)
        except (CronError, InvalidSchedule):
            self.recorder.event(self._typed(cur), WARNING, reason="UnParseableCronJobSchedule",
                                message=f"unparseable schedule for cronjob: {cs.get('schedule')}")
            return
        delay = next_schedule_delay(schedule, created=self._created(cur),
                                    last_scheduled=self._last_scheduled(cur), now=self.clock.now())
        if delay is not None:
            self.queue.add_after(object_key(cur), delay)

    # -- helpers ----------------------------------------------------------------------------------
    @staticmethod
    def _typed(cj: Obj) -> Obj:
        return {**cj, "apiVersion": CRONJOB_API_VERSION, "kind": CRONJOB_KIND}

    @staticmethod
    def _created(cj: Obj) -> float:
        return parse_time(meta(cj).get("creationTimestamp")) or 0.0

    @staticmethod
    def _last_scheduled(cj: Obj) -> float | None:
        return parse_time((cj.get("status") or {}).get("lastScheduleTime"))

    def time_zone_of(self, cj: Obj) -> tzinfo:
        """spec.timeZone when set and known, else the default (formatSchedule's choice)."""
        tz = (cj.get("spec") or {}).get("timeZone")
        if tz is None:
            return self.default_tz
        try:
            return load_location(str(tz))
        except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
            return self.default_tz

    def schedule_of(self, cj: Obj, *, warn: bool) -> Schedule:
        """The parsed schedule in its time zone (formatSchedule + cron.ParseStandard)."""
        schedule = str((cj.get("spec") or {}).get("schedule") or "")
        if "TZ" in schedule:
            if warn:
                self.recorder.event(cj, WARNING, reason="UnsupportedSchedule",
                                    message=UNSUPPORTED_TZ.format(_quote(schedule)))
            return parse_schedule(schedule, default_tz=self.default_tz)
        return parse_schedule(schedule, default_tz=self.time_zone_of(cj))

    def jobs_of(self, cj: Obj) -> list[Obj]:
        """Jobs of cj's namespace whose controller reference names it (getJobsToBeReconciled)."""
        m = meta(cj)
        out = []
        for job in self.job_indexer.by_index(NAMESPACE_INDEX, str(m.get("namespace") or "")):
            ref = get_controller_of(job)
            if ref is not None and ref.get("name") == m.get("name"):
                out.append(job)
        return out

    # -- sync -------------------------------------------------------------------------------------
    async def sync(self, key: str) -> float | None:
        """Reconcile one CronJob; returns when to look at it again (None: only on events)."""
        cached = self.cj_indexer.get_by_key(key)
        if cached is None:
            return None
        jobs = self.jobs_of(cached)
        cj = self._typed(cached)
        cj["status"] = dict(cj.get("status") or {})
        out = _Outcome()
        out.changed = await self.cleanup_finished_jobs(cj, jobs)
        requeue, sync_error = None, None
        try:
            requeue = await self.sync_cronjob(cj, jobs, out)
        except Exception as e:
            sync_error = e
            log.info("error reconciling cronjob %s: %s", key, e)
        if out.changed:
            await self.cronjobs.update_status(cj)
        if requeue is not None:
            return requeue
        if sync_error is not None:
            raise sync_error
        return None

    async def cleanup_finished_jobs(self, cj: Obj, jobs: list[Obj]) -> bool:
        """Delete finished Jobs beyond the history limits; True when the status changed."""
        spec = cj.get("spec") or {}
        successful, failed = spec.get("successfulJobsHistoryLimit"), spec.get("failedJobsHistoryLimit")
        if successful is None and failed is None:
            return False
        changed = False
        for job in jobs_to_prune(jobs, successful_limit=None if successful is None else int(successful),
                                 failed_limit=None if failed is None else int(failed)):
            if await self.delete_job(cj, job):
                changed = True
        return changed

    async def delete_job(self, cj: Obj, job: Obj) -> bool:
        """Delete a Job (background propagation) and its active-list entry, with an event."""
        m = meta(job)
        try:
            await self.jobs.delete(str(m.get("name")), namespace=str(m.get("namespace")),
                                   propagation_policy="Background")
        except Exception as e:
            self.recorder.event(cj, WARNING, reason="FailedDelete", message=f"Deleted job: {e}")
            log.error("error deleting job %s from cronjob %s: %s", object_key(job), object_key(cj), e)
            return False
        delete_from_active_list(cj, str(m.get("uid")))
        self.recorder.event(cj, NORMAL, reason="SuccessfulDelete", message=f"Deleted job {m.get('name')}")
        return True

    async def reconcile_active(self, cj: Obj, jobs: list[Obj], out: _Outcome) -> None:
        """Step 2 of the module docstring, on the working copy `cj` (which a live GET may refresh)."""
        children = set()
        for job in jobs:
            uid = str(meta(job).get("uid"))
            children.add(uid)
            found = in_active_list(cj, uid)
            if not found and not is_job_finished(job):
                fresh = await self.cronjobs.get(str(meta(cj).get("name")), namespace=str(meta(cj).get("namespace")))
                if in_active_list(fresh, uid):
                    cj.clear()
                    cj.update(self._typed(fresh))
                    cj["status"] = dict(cj.get("status") or {})
                    continue
                self.recorder.event(cj, WARNING, reason="UnexpectedJob",
                                    message=f"Saw a job that the controller did not create or forgot: "
                                            f"{meta(job).get('name')}")
            elif found and is_job_finished(job):
                delete_from_active_list(cj, uid)
                self.recorder.event(cj, NORMAL, reason="SawCompletedJob",
                                    message=f"Saw completed job: {meta(job).get('name')}, "
                                            f"status: {finished_status(job)}")
                out.changed = True
            elif is_job_succeeded(job):
                out.changed = self._note_success(cj, job) or out.changed
        for ref in active_refs(cj):
            if ref.get("uid") in children:
                continue
            try:
                await self.jobs.get(str(ref.get("name")), namespace=str(ref.get("namespace")))
            except NotFound:
                self.recorder.event(cj, NORMAL, reason="MissingJob", message=f"Active job went missing: {ref.get('name')}")
                delete_from_active_list(cj, str(ref.get("uid")))
                out.changed = True

    @staticmethod
    def _note_success(cj: Obj, job: Obj) -> bool:
        completion = (job.get("status") or {}).get("completionTime")
        status = cj["status"]
        last = status.get("lastSuccessfulTime")
        if last is None:
            status["lastSuccessfulTime"] = completion
            return True
        done, known = parse_time(completion), parse_time(last)
        if done is not None and (known is None or done > known):
            status["lastSuccessfulTime"] = completion
            return True
        return False

    async def sync_cronjob(self, cj: Obj, jobs: list[Obj], out: _Outcome) -> float | None:
        """Steps 2-3 of the module docstring on the working copy: the requeue delay (None: wait
        for events). `out.changed` tells the caller to write the status, even after an error."""
        await self.reconcile_active(cj, jobs, out)
        if meta(cj).get("deletionTimestamp"):
            return None
        schedule = self._usable_schedule(cj)
        if schedule is None:
            return None
        return await self._start_due_job(cj, schedule, out)

    def _usable_schedule(self, cj: Obj) -> Schedule | None:
        spec = cj.get("spec") or {}
        tz = spec.get("timeZone")
        if tz is not None:
            try:
                load_location(str(tz))
            except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
                self.recorder.event(cj, WARNING, reason="UnknownTimeZone",
                                    message=f"invalid timeZone: {_quote(str(tz))}: unknown time zone {tz}")
                return None
        if spec.get("suspend") is True:
            return None
        try:
            return self.schedule_of(cj, warn=True)
        except CronError as e:
            self.recorder.event(cj, WARNING, reason="UnparseableSchedule",
                                message=f"unparseable schedule: {_quote(str(spec.get('schedule')))} : {e}")
            return None

    async def _start_due_job(self, cj: Obj, schedule: Schedule, out: _Outcome) -> float | None:
        """Start the Job of the most recent unhandled activation if policy allows; the delay
        until the next activation."""
        spec, now = cj.get("spec") or {}, self.clock.now()
        created, last = self._created(cj), self._last_scheduled(cj)
        deadline = spec.get("startingDeadlineSeconds")

        def requeue(last_scheduled: float | None) -> float | None:
            return next_schedule_delay(schedule, created=created, last_scheduled=last_scheduled, now=now)

        try:
            recent = most_recent_schedule_time(schedule, created=created, last_scheduled=last, now=now,
                                               starting_deadline=None if deadline is None else int(deadline))
        except InvalidSchedule as e:
            self.recorder.event(cj, WARNING, reason="InvalidSchedule",
                                message=f"invalid schedule: {spec.get('schedule')} : {e}")
            return None
        scheduled = recent.most_recent
        if scheduled is None or scheduled > now:
            return requeue(last)
        if recent.missed is Missed.MANY:
            self.recorder.event(cj, WARNING, reason="TooManyMissedTimes",
                                message="too many missed start times. Set or decrease .spec.startingDeadlineSeconds "
                                        "or check clock skew")
            log.info("too many missed times for cronjob %s", object_key(cj))
        if deadline is not None and scheduled + int(deadline) < now:
            self.recorder.event(cj, WARNING, reason="MissSchedule",
                                message=f"Missed scheduled time to start a job: {_rfc1123z(scheduled)}")
            return requeue(last)
        job = job_from_template(cj, scheduled, tz=load_location(str(spec.get("timeZone") or "")))
        ns = str(meta(cj).get("namespace") or "")
        if in_active_list_by_name(cj, namespace=ns, name=job["metadata"]["name"]) or last == scheduled:
            return requeue(last)
        policy = spec.get("concurrencyPolicy")
        if policy == "Forbid" and active_refs(cj):
            self.recorder.event(cj, NORMAL, reason="JobAlreadyActive",
                                message="Not starting job because prior execution is running and concurrency "
                                        "policy is Forbid")
            return requeue(last)
        if policy == "Replace":
            await self._replace_active(cj, out)
        created_job = await self._create_job(cj, job)
        if created_job is None:
            return None
        cj["status"]["active"] = active_refs(cj) + [job_reference(created_job)]
        cj["status"]["lastScheduleTime"] = format_time(scheduled)
        out.changed = True
        return requeue(float(scheduled))

    async def _replace_active(self, cj: Obj, out: _Outcome) -> None:
        for ref in active_refs(cj):
            try:
                job = await self.jobs.get(str(ref.get("name")), namespace=str(ref.get("namespace")))
            except Exception as e:
                self.recorder.event(cj, WARNING, reason="FailedGet", message=f"Get job: {e}")
                raise
            if not await self.delete_job(cj, job):
                m = meta(job)
                raise RuntimeError(f"could not replace job {m.get('namespace')}/{m.get('name')}")
            out.changed = True

    async def _create_job(self, cj: Obj, job: Obj) -> Obj | None:
        """Create `job`; None when there is nothing more to do for this activation."""
        ns, name = str(meta(cj).get("namespace") or ""), str(job["metadata"]["name"])
        try:
            created = await self.jobs.create(job, namespace=ns)
        except AlreadyExists:
            existing = await self.jobs.get(name, namespace=ns)
            if not is_controlled_by(existing, cj) or in_active_list(cj, str(meta(existing).get("uid"))):
                return None
            log.info("job %s/%s of cronjob %s already exists", ns, name, object_key(cj))
            return existing
        except Exception as e:
            if not has_status_cause(e, NAMESPACE_TERMINATING_CAUSE):
                self.recorder.event(cj, WARNING, reason="FailedCreate", message=f"Error creating job: {e}")
            raise
        self.recorder.event(cj, NORMAL, reason="SuccessfulCreate", message=f"Created job {meta(created).get('name')}")
        return created


@register("cronjob", workers=5, aliases=("cronjob-controller",))
def new_cronjob_controller(ctx: ControllerContext) -> CronJobController:
    """The controller manager's constructor for the CronJob controller."""
    tz_name = ctx.options.get("cronjob_time_zone")
    tz = load_location(str(tz_name)) if tz_name is not None else None
    return CronJobController(rest=ctx.rest, informers=ctx.informers, recorder=ctx.recorder(COMPONENT),
                             clock=ctx.clock, time_zone=tz)

