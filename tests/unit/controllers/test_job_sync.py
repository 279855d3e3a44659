"""The Job controller's sync against in-memory caches, a fake pod control and a FakeClock:
creation with the tracking finalizer and no over-creation, the counting protocol (uncounted UIDs,
finalizer removal, counters), the two-step Complete/Failed conditions, the failure backoff,
activeDeadlineSeconds, suspend/resume, podFailurePolicy and Indexed Jobs."""

from __future__ import annotations

from typing import Any

from kubecore.controllers.job_pods import JOB_TRACKING_FINALIZER, REMOVE_FINALIZER_PATCH
from tests.unit.controllers.test_job_fixtures import (
    JOB_UID, KEY, NOW, apply_written_status, condition, last_status, make_controller, make_job, make_pod,
    strip_finalizers,
)

Obj = dict[str, Any]


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def event(self, obj: Obj, event_type: str, *, reason: str, message: str,
              annotations: dict[str, str] | None = None, field_path: str = "") -> None:
        self.events.append((event_type, reason, message))


async def test_creates_parallelism_pods_with_finalizer_and_never_more() -> None:
    c, control, jobs, _ = make_controller()
    c.job_indexer.put(make_job(completions=5, parallelism=2))
    await c.sync_job(KEY)
    assert len(control.created) == 2
    template, generate_name = control.created[0]
    assert generate_name == ""  # the pod control's default "<job>-"
    assert template["metadata"]["finalizers"] == [JOB_TRACKING_FINALIZER]
    assert template["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "pi"
    status = last_status(jobs)
    assert status["active"] == 2 and status["ready"] == 0 and status["terminating"] == 0
    assert status["startTime"] and status["uncountedTerminatedPods"] == {}
    # the cache has not seen the new pods: expectations hold further creates back
    await c.sync_job(KEY)
    assert len(control.created) == 2


async def test_completion_counts_through_the_finalizer_then_completes() -> None:
    c, control, jobs, _ = make_controller()
    rec = Recorder()
    c.recorder = rec
    c.job_indexer.put(make_job(completions=1))
    c.pod_indexer.put(make_pod("pi-a", phase="Succeeded", exit_code=0))
    await c.sync_job(KEY)
    # step 1: the UID is uncounted and SuccessCriteriaMet is written before the finalizer goes
    first = jobs.status_writes[0]["status"]
    assert first["uncountedTerminatedPods"] == {"succeeded": ["uid-pi-a"]}
    assert condition(first, "SuccessCriteriaMet") is not None and condition(first, "Complete") is None
    assert control.patched == [("pi-a", REMOVE_FINALIZER_PATCH)]
    # step 3 in the same sync: the patch succeeded, so the UID moved into the counter; the
    # terminal condition waits for nothing else
    status = last_status(jobs)
    assert status["succeeded"] == 1 and status["uncountedTerminatedPods"] == {}
    complete = condition(status, "Complete")
    assert complete is not None and complete["status"] == "True"
    assert status["completionTime"] == complete["lastTransitionTime"]
    assert ("Normal", "Completed", "Job completed") in rec.events
    assert control.created == []


async def test_counted_pod_is_not_counted_twice_on_a_stale_cache() -> None:
    c, control, jobs, _ = make_controller()
    c.job_indexer.put(make_job(completions=2, parallelism=1))
    c.pod_indexer.put(make_pod("pi-a", phase="Succeeded", exit_code=0))
    await c.sync_job(KEY)
    assert last_status(jobs)["succeeded"] == 1
    apply_written_status(c, jobs)
    control.patched.clear()
    # the cache still shows the pod with its finalizer: the expectation stops a recount
    await c.sync_job(KEY)
    assert last_status(jobs)["succeeded"] == 1
    assert control.patched == []


async def test_backoff_limit_exceeded_fails_the_job_in_two_steps() -> None:
    c, control, jobs, _ = make_controller()
    rec = Recorder()
    c.recorder = rec
    c.job_indexer.put(make_job(completions=2, parallelism=2, backoff_limit=0))
    c.pod_indexer.put(make_pod("pi-a", phase="Failed", exit_code=1))
    c.pod_indexer.put(make_pod("pi-b", phase="Running", ready=True))
    await c.sync_job(KEY)
    assert control.deleted == ["pi-b"]  # the active pod is deleted, keeping its finalizer
    status = last_status(jobs)
    target = condition(status, "FailureTarget")
    assert target is not None and target["reason"] == "BackoffLimitExceeded"
    assert target["message"] == "Job has reached the specified backoff limit"
    assert condition(status, "Failed") is None  # a pod is still terminating
    # once the Job is finishing, every unfinished pod with the finalizer counts as failed
    assert status["terminating"] == 1 and status["failed"] == 2
    # the deleted pod terminates and is gone; the next sync writes the terminal condition
    apply_written_status(c, jobs)
    c.pod_indexer.delete_key("default/pi-b")
    c.expectations.delete_expectations(KEY)
    await c.sync_job(KEY)
    failed = condition(last_status(jobs), "Failed")
    assert failed is not None and failed["reason"] == "BackoffLimitExceeded"
    assert ("Warning", "BackoffLimitExceeded", "Job has reached the specified backoff limit") in rec.events
    assert "completionTime" not in last_status(jobs)


async def test_failed_pod_is_replaced_only_after_the_backoff() -> None:
    c, control, jobs, clock = make_controller()
    c.job_indexer.put(make_job(completions=1, backoff_limit=3))
    c.pod_indexer.put(make_pod("pi-a", phase="Failed", exit_code=1, finished_at=NOW - 4))
    await c.sync_job(KEY)
    assert control.created == []  # 10 s base backoff, 4 s elapsed
    assert last_status(jobs)["failed"] == 1
    assert c.queue.waiting == 1
    apply_written_status(c, jobs)
    strip_finalizers(c, control)
    clock.advance(6)
    await c.sync_job(KEY)
    assert len(control.created) == 1


async def test_active_deadline_exceeded() -> None:
    c, control, jobs, clock = make_controller()
    c.job_indexer.put(make_job(active_deadline=30, status={"startTime": "2024-01-02T03:03:05Z"}))  # NOW - 60
    c.pod_indexer.put(make_pod("pi-a", phase="Running"))
    await c.sync_job(KEY)
    target = condition(last_status(jobs), "FailureTarget")
    assert target is not None and target["reason"] == "DeadlineExceeded"
    assert target["message"] == "Job was active longer than specified deadline"
    assert control.deleted == ["pi-a"]


async def test_active_deadline_requeues_at_the_deadline() -> None:
    c, control, jobs, clock = make_controller()
    c.job_indexer.put(make_job(active_deadline=100))
    await c.sync_job(KEY)
    assert len(control.created) == 1 and c.queue.waiting == 1
    assert condition(last_status(jobs), "FailureTarget") is None


async def test_suspend_deletes_pods_and_resume_resets_start_time() -> None:
    c, control, jobs, clock = make_controller()
    rec = Recorder()
    c.recorder = rec
    c.job_indexer.put(make_job(completions=2, parallelism=2, suspend=True, status={"startTime": "2024-01-01T00:00:00Z"}))
    c.pod_indexer.put(make_pod("pi-a", phase="Running", ready=True))
    await c.sync_job(KEY)
    assert control.deleted == ["pi-a"] and control.patched[0] == ("pi-a", REMOVE_FINALIZER_PATCH)
    status = last_status(jobs)
    suspended = condition(status, "Suspended")
    assert suspended is not None and suspended["status"] == "True" and suspended["reason"] == "JobSuspended"
    assert status.get("active", 0) == 0 and status["ready"] == 0 and status["terminating"] == 1
    assert ("Normal", "Suspended", "Job suspended") in rec.events
    assert control.created == []
    # resume
    job = apply_written_status(c, jobs)
    job["spec"]["suspend"] = False
    c.job_indexer.put(job)
    c.pod_indexer.delete_key("default/pi-a")
    c.expectations.delete_expectations(KEY)
    clock.advance(50)
    await c.sync_job(KEY)
    status = last_status(jobs)
    resumed = condition(status, "Suspended")
    assert resumed is not None and resumed["status"] == "False" and resumed["reason"] == "JobResumed"
    assert status["startTime"] == "2024-01-02T03:04:55Z"
    assert ("Normal", "Resumed", "Job resumed") in rec.events
    assert len(control.created) == 2


async def test_suspended_job_created_suspended_has_no_start_time() -> None:
    c, control, jobs, _ = make_controller()
    c.job_indexer.put(make_job(suspend=True))
    await c.sync_job(KEY)
    status = last_status(jobs)
    assert "startTime" not in status and control.created == []


async def test_pod_failure_policy_fail_job_on_exit_code() -> None:
    policy = {"rules": [{"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In",
                                                               "values": [42]}}]}
    c, control, jobs, _ = make_controller()
    c.job_indexer.put(make_job(completions=1, pod_failure_policy=policy))
    c.pod_indexer.put(make_pod("pi-a", phase="Failed", exit_code=42))
    await c.sync_job(KEY)
    status = last_status(jobs)
    target = condition(status, "FailureTarget")
    assert target is not None and target["reason"] == "PodFailurePolicy"
    assert target["message"] == "Container main for pod default/pi-a failed with exit code 42 matching FailJob rule at index 0"
    failed = condition(status, "Failed")
    assert failed is not None and failed["message"] == target["message"]


async def test_pod_failure_policy_ignore_does_not_count_and_replaces() -> None:
    policy = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}
    c, control, jobs, _ = make_controller()
    c.job_indexer.put(make_job(completions=1, backoff_limit=0, pod_failure_policy=policy))
    c.pod_indexer.put(make_pod("pi-a", phase="Failed", exit_code=137, finished_at=NOW - 100,
                               conditions=[{"type": "DisruptionTarget", "status": "True"}]))
    await c.sync_job(KEY)
    status = last_status(jobs)
    assert condition(status, "FailureTarget") is None
    assert status.get("failed", 0) == 0
    assert control.patched == [("pi-a", REMOVE_FINALIZER_PATCH)]  # released without being counted
    assert len(control.created) == 1


async def test_indexed_job_creates_lowest_pending_indexes() -> None:
    c, control, jobs, _ = make_controller()
    c.job_indexer.put(make_job(completions=4, parallelism=2, indexed=True))
    c.pod_indexer.put(make_pod("pi-0-x", phase="Succeeded", index=0, exit_code=0))
    c.pod_indexer.put(make_pod("pi-2-x", phase="Running", index=2))
    await c.sync_job(KEY)
    assert [g for _, g in control.created] == ["pi-1-"]
    template = control.created[0][0]
    assert template["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == "1"
    assert template["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == "1"
    assert template["spec"]["hostname"] == "pi-1"
    env = template["spec"]["containers"][0]["env"]
    assert env == [{"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
        "fieldPath": "metadata.labels['batch.kubernetes.io/job-completion-index']"}}}]
    status = last_status(jobs)
    assert status["completedIndexes"] == "0" and status["succeeded"] == 1


async def test_indexed_job_completes_with_compressed_indexes() -> None:
    c, control, jobs, _ = make_controller()
    c.job_indexer.put(make_job(completions=3, parallelism=3, indexed=True,
                               status={"completedIndexes": "1", "succeeded": 1, "uncountedTerminatedPods": {}}))
    c.pod_indexer.put(make_pod("pi-0-x", phase="Succeeded", index=0, exit_code=0))
    c.pod_indexer.put(make_pod("pi-2-x", phase="Succeeded", index=2, exit_code=0))
    await c.sync_job(KEY)
    status = last_status(jobs)
    assert status["completedIndexes"] == "0-2" and status["succeeded"] == 3
    assert condition(status, "Complete") is not None


async def test_indexed_duplicate_index_is_deleted() -> None:
    c, control, jobs, _ = make_controller()
    c.job_indexer.put(make_job(completions=2, parallelism=2, indexed=True))
    c.pod_indexer.put(make_pod("pi-0-a", phase="Running", index=0, ready=True))
    c.pod_indexer.put(make_pod("pi-0-b", phase="Pending", index=0))
    c.pod_indexer.put(make_pod("pi-1-a", phase="Running", index=1))
    await c.sync_job(KEY)
    assert control.deleted == ["pi-0-b"] and control.created == []


async def test_orphan_with_finalizer_is_adopted_with_it() -> None:
    c, control, jobs, _ = make_controller()
    c.job_indexer.put(make_job(completions=1))
    c.pod_indexer.put(make_pod("stray", phase="Running", owner=False, finalizer=False))
    await c.sync_job(KEY)
    name, patch = control.patched[0]
    assert name == "stray"
    assert patch["metadata"]["finalizers"] == [JOB_TRACKING_FINALIZER]
    assert patch["metadata"]["ownerReferences"][0]["uid"] == JOB_UID
    assert control.created == []  # the adopted pod is the one active pod


async def test_orphan_pod_of_finished_job_loses_its_finalizer() -> None:
    c, control, jobs, _ = make_controller()
    c.job_indexer.put(make_job(status={"conditions": [{"type": "Complete", "status": "True"}]}))
    c.pod_indexer.put(make_pod("pi-a", phase="Succeeded"))
    await c.sync_orphan_pod("default/pi-a")
    assert control.patched == [("pi-a", REMOVE_FINALIZER_PATCH)]
