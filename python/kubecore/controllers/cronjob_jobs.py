"""The Jobs of a CronJob as the CronJob controller sees them (upstream pkg/controller/cronjob
utils.go and pkg/controller/job/util): finished or not, the active list in the CronJob's status,
the Job built from the jobTemplate for one scheduled time, and the oldest-first order in which
history limits delete finished Jobs.

Everything here is pure: objects in, objects or answers out; nothing is written to the server.
"""

from __future__ import annotations

import functools
from datetime import tzinfo
from typing import Any

import msgspec

from kubecore.controllers.controller_utils import format_time, meta, new_controller_ref, parse_time
from kubecore.controllers.cronjob_schedule import format_in_zone, job_name

Obj = dict[str, Any]

CRONJOB_API_VERSION, CRONJOB_KIND = "batch/v1", "CronJob"
SCHEDULED_TIMESTAMP_ANNOTATION = "batch.kubernetes.io/cronjob-scheduled-timestamp"
"""When the Job was scheduled, RFC 3339 in the CronJob's time zone (CronJobScheduledTimestampAnnotation)."""
JOB_COMPLETE, JOB_FAILED = "Complete", "Failed"


def finished_status(job: Obj) -> str | None:
    """"Complete" or "Failed" when that condition is True (getFinishedStatus), else None."""
    for c in (job.get("status") or {}).get("conditions") or ():
        if isinstance(c, dict) and c.get("type") in (JOB_COMPLETE, JOB_FAILED) and c.get("status") == "True":
            return str(c["type"])
    return None


def is_job_finished(job: Obj) -> bool:
    return finished_status(job) is not None


def is_job_succeeded(job: Obj) -> bool:
    """A Complete=True condition (IsJobSucceeded)."""
    for c in (job.get("status") or {}).get("conditions") or ():
        if isinstance(c, dict) and c.get("type") == JOB_COMPLETE and c.get("status") == "True":
            return True
    return False


# -- status.active ---------------------------------------------------------------------------------
def active_refs(cj: Obj) -> list[Obj]:
    active = (cj.get("status") or {}).get("active")
    return [r for r in active if isinstance(r, dict)] if isinstance(active, list) else []


def in_active_list(cj: Obj, uid: str) -> bool:
    return any(r.get("uid") == uid for r in active_refs(cj))


def in_active_list_by_name(cj: Obj, *, namespace: str, name: str) -> bool:
    return any(r.get("name") == name and r.get("namespace") == namespace for r in active_refs(cj))


def delete_from_active_list(cj: Obj, uid: str) -> None:
    """Drop the reference with `uid` from cj's status.active (in place on the working copy)."""
    status = cj.setdefault("status", {})
    status["active"] = [r for r in active_refs(cj) if r.get("uid") != uid]


def job_reference(job: Obj) -> Obj:
    """The ObjectReference status.active holds (reference.GetReference of a Job)."""
    m = meta(job)
    return {"kind": "Job", "namespace": m.get("namespace", ""), "name": m.get("name", ""), "uid": m.get("uid", ""),
            "apiVersion": "batch/v1", "resourceVersion": m.get("resourceVersion", "")}


# -- building a Job --------------------------------------------------------------------------------
def job_from_template(cj: Obj, scheduled: float, *, tz: tzinfo) -> Obj:
    """The Job `cj` creates for the activation at `scheduled` (getJobFromTemplate2): the
    template's labels and annotations, the scheduled-timestamp annotation, a name that is the
    same for every attempt at this activation (it is the lock against creating it twice), the
    controller reference and a copy of the template's spec."""
    template = (cj.get("spec") or {}).get("jobTemplate") or {}
    tmeta = template.get("metadata") or {}
    labels = dict(tmeta.get("labels") or {})
    annotations = dict(tmeta.get("annotations") or {})
    annotations[SCHEDULED_TIMESTAMP_ANNOTATION] = format_in_zone(scheduled, tz)
    job_meta: Obj = {"name": job_name(str(meta(cj).get("name", "")), scheduled),
                     "namespace": meta(cj).get("namespace", ""),
                     "creationTimestamp": format_time(scheduled),
                     "ownerReferences": [new_controller_ref(cj, api_version=CRONJOB_API_VERSION, kind=CRONJOB_KIND)]}
    if labels:
        job_meta["labels"] = labels
    job_meta["annotations"] = annotations
    spec = msgspec.json.decode(msgspec.json.encode(template.get("spec") or {}))
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": job_meta, "spec": spec}


def is_controlled_by(obj: Obj, owner: Obj) -> bool:
    """metav1.IsControlledBy: the controller reference's UID is the owner's."""
    for ref in meta(obj).get("ownerReferences") or ():
        if isinstance(ref, dict) and ref.get("controller") is True:
            return bool(ref.get("uid") == meta(owner).get("uid"))
    return False


# -- history ---------------------------------------------------------------------------------------
def _start_time(job: Obj) -> float | None:
    return parse_time((job.get("status") or {}).get("startTime"))


def _by_start_time(a: Obj, b: Obj) -> int:
    """byJobStartTime: started before not started, earlier first, then by name."""
    ta, tb = _start_time(a), _start_time(b)
    if ta is None and tb is not None:
        return 1
    if ta is not None and tb is None:
        return -1
    if ta == tb:
        na, nb = str(meta(a).get("name", "")), str(meta(b).get("name", ""))
        return -1 if na < nb else (1 if na > nb else 0)
    assert ta is not None and tb is not None
    return -1 if ta < tb else 1


def oldest_first(jobs: list[Obj]) -> list[Obj]:
    return sorted(jobs, key=functools.cmp_to_key(_by_start_time))


def jobs_to_prune(jobs: list[Obj], *, successful_limit: int | None, failed_limit: int | None) -> list[Obj]:
    """The finished Jobs beyond the history limits, oldest first per kind (cleanupFinishedJobs)."""
    out: list[Obj] = []
    for kind, limit in ((JOB_COMPLETE, successful_limit), (JOB_FAILED, failed_limit)):
        if limit is None:
            continue
        finished = [j for j in jobs if finished_status(j) == kind]
        excess = len(finished) - limit
        if excess > 0:
            out.extend(oldest_first(finished)[:excess])
    return out
