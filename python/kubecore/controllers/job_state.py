"""What one Job sync works with: its conditions, the per-sync context, the controller's
collaborators, and the expectations of tracking-finalizer removals (upstream job_controller.go's
syncJobCtx and condition helpers, tracking_utils.go's uidTrackingExpectations).

Conditions. A Job finishes in two steps, as upstream does with JobManagedBy and
JobPodReplacementPolicy on (their defaults): first the interim condition (SuccessCriteriaMet, or
FailureTarget with the failure's reason and message) is written while pods may still be
terminating and finalizers are being removed; once nothing is uncounted or terminating, the
terminal condition (Complete, or Failed with the same reason/message) follows, with
completionTime for Complete. A Job is finished when Complete or Failed is True.

Reasons and messages (upstream's):
    BackoffLimitExceeded        "Job has reached the specified backoff limit"
    DeadlineExceeded            "Job was active longer than specified deadline"
    PodFailurePolicy            the matching FailJob rule's message
    MaxFailedIndexesExceeded    "Job has exceeded the specified maximal number of failed indexes"
    FailedIndexes               "Job has failed indexes"
    SuccessPolicy               "Matched rules at index <i>"
Suspended is True with JobSuspended/"Job suspended" and turns False with JobResumed/"Job resumed".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from kubecore.client.clock import Clock
from kubecore.controllers.controller_utils import format_time
from kubecore.controllers.expectations import ControllerExpectations
from kubecore.controllers.job_failures import BackoffRecord, BackoffStore
from kubecore.controllers.job_indexes import Intervals
from kubecore.controllers.job_pods import JobPodControlLike
from kubecore.controllers.podcontrol import EventRecorderLike

Obj = dict[str, Any]

COMPLETE, FAILED, SUSPENDED = "Complete", "Failed", "Suspended"
SUCCESS_CRITERIA_MET, FAILURE_TARGET = "SuccessCriteriaMet", "FailureTarget"
REASON_BACKOFF_LIMIT = "BackoffLimitExceeded"
REASON_DEADLINE = "DeadlineExceeded"
REASON_POD_FAILURE_POLICY = "PodFailurePolicy"
REASON_MAX_FAILED_INDEXES = "MaxFailedIndexesExceeded"
REASON_FAILED_INDEXES = "FailedIndexes"
REASON_SUCCESS_POLICY = "SuccessPolicy"
JOB_CONTROLLER_NAME = "kubernetes.io/job-controller"


# -- conditions ------------------------------------------------------------------------------------
def new_condition(ctype: str, status: str, reason: str, message: str, now: float) -> Obj:
    stamp = format_time(now)
    cond: Obj = {"type": ctype, "status": status, "lastProbeTime": stamp, "lastTransitionTime": stamp}
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def conditions_of(job: Obj) -> list[Obj]:
    conds = (job.get("status") or {}).get("conditions")
    return conds if isinstance(conds, list) else []


def find_condition(job: Obj, ctype: str) -> Obj | None:
    for c in conditions_of(job):
        if isinstance(c, dict) and c.get("type") == ctype:
            return c
    return None


def condition_true(job: Obj, ctype: str) -> bool:
    c = find_condition(job, ctype)
    return c is not None and c.get("status") == "True"


def is_job_finished(job: Obj) -> bool:
    return condition_true(job, COMPLETE) or condition_true(job, FAILED)


def ensure_condition(job: Obj, ctype: str, status: str, reason: str, message: str, now: float) -> bool:
    """Set condition `ctype` (ensureJobConditionStatus): replaced when status, reason or
    message differ; appended when missing, unless its status would be False. True if changed."""
    conds = conditions_of(job)
    for i, c in enumerate(conds):
        if isinstance(c, dict) and c.get("type") == ctype:
            if c.get("status") != status or (c.get("reason") or "") != reason or (c.get("message") or "") != message:
                conds[i] = new_condition(ctype, status, reason, message, now)
                return True
            return False
    if status == "False":
        return False
    job.setdefault("status", {})["conditions"] = conds + [new_condition(ctype, status, reason, message, now)]
    return True


def is_success_criteria_met(cond: Obj | None) -> bool:
    return cond is not None and cond.get("type") == SUCCESS_CRITERIA_MET and cond.get("status") == "True"


def managed_by_external(job: Obj) -> str | None:
    """spec.managedBy when it names another controller (the Job is then left alone)."""
    managed_by = (job.get("spec") or {}).get("managedBy")
    return str(managed_by) if managed_by is not None and managed_by != JOB_CONTROLLER_NAME else None


# -- finalizer expectations ------------------------------------------------------------------------
class FinalizerExpectations:
    """Job key -> pod UIDs whose tracking-finalizer removal the controller still waits to see.

    A pod in this set was already counted into the Job's status by a previous sync; until its
    finalizer-less version reaches the informer, it must not be counted again."""

    def __init__(self) -> None:
        self._uids: dict[str, set[str]] = {}

    def expected_uids(self, key: str) -> set[str]:
        return set(self._uids.get(key, ()))

    def expect_removals(self, key: str, uids: list[str]) -> None:
        self._uids.setdefault(key, set()).update(uids)

    def removal_observed(self, key: str, uid: str) -> None:
        uids = self._uids.get(key)
        if uids is not None:
            uids.discard(uid)

    def delete(self, key: str) -> None:
        self._uids.pop(key, None)


# -- a sync ----------------------------------------------------------------------------------------
@dataclass
class JobDeps:
    """What the sync steps need from the controller."""

    pod_control: JobPodControlLike
    update_status: Callable[[Obj], Awaitable[Obj]]
    """Write the Job's status (update_status); returns the stored Job."""
    recorder: EventRecorderLike
    clock: Clock
    expectations: ControllerExpectations
    finalizer_expectations: FinalizerExpectations
    backoff: BackoffStore
    enqueue_after: Callable[[str, float], None]
    max_pods_per_sync: int = 500
    max_uncounted_pods: int = 500


@dataclass
class SyncJobCtx:
    """One sync's view of a Job (syncJobCtx). `job` is the sync's own deep copy."""

    job: Obj
    key: str
    pods: list[Obj]
    active_pods: list[Obj]
    ready: int
    terminating: int
    uncounted_succeeded: set[str]
    uncounted_failed: set[str]
    expected_rm_finalizers: set[str]
    succeeded: int = 0
    failed: int = 0
    finished_condition: Obj | None = None
    prev_succeeded_indexes: Intervals = field(default_factory=list)
    succeeded_indexes: Intervals = field(default_factory=list)
    failed_indexes: Intervals | None = None
    new_backoff_record: BackoffRecord | None = None
    delayed_deletion: dict[int, Obj] = field(default_factory=dict)

    @property
    def spec(self) -> Obj:
        spec = self.job.get("spec")
        return spec if isinstance(spec, dict) else {}

    @property
    def status(self) -> Obj:
        status: Obj = self.job.setdefault("status", {})
        return status

    @property
    def completions(self) -> int | None:
        c = self.spec.get("completions")
        return int(c) if c is not None else None

    @property
    def indexed(self) -> bool:
        return self.spec.get("completionMode") == "Indexed"
