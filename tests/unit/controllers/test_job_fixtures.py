"""Builders shared by the Job controller's unit tests: Jobs, pods, a fake pod control that keeps
what it creates in the controller's pod cache, and a fake Job client that stores status writes.

Times are fixed offsets from FAKE_EPOCH; nothing here reads the wall clock."""

from __future__ import annotations

import copy
import itertools
from typing import Any, cast

from kubecore.client.clock import FAKE_EPOCH, FakeClock
from kubecore.client.errors import NotFound
from kubecore.client.factory import SharedInformerFactory
from kubecore.client.indexer import Indexer
from kubecore.client.rest import RestClient
from kubecore.controllers.controller_utils import format_time
from kubecore.controllers.job import JobController
from kubecore.controllers.job_pods import JOB_TRACKING_FINALIZER

Obj = dict[str, Any]
NOW = FAKE_EPOCH
JOB_UID = "job-uid-1"
KEY = "default/pi"
SELECTOR_LABEL = "batch.kubernetes.io/controller-uid"


def make_job(*, completions: int | None = 1, parallelism: int = 1, backoff_limit: int = 6, indexed: bool = False,
             suspend: bool = False, active_deadline: int | None = None, status: Obj | None = None,
             pod_failure_policy: Obj | None = None, restart_policy: str = "Never", generation: int = 1,
             extra_spec: Obj | None = None) -> Obj:
    labels = {SELECTOR_LABEL: JOB_UID, "batch.kubernetes.io/job-name": "pi", "controller-uid": JOB_UID,
              "job-name": "pi"}
    spec: Obj = {"parallelism": parallelism, "backoffLimit": backoff_limit, "suspend": suspend,
                 "completionMode": "Indexed" if indexed else "NonIndexed",
                 "podReplacementPolicy": "Failed" if pod_failure_policy else "TerminatingOrFailed",
                 "selector": {"matchLabels": {SELECTOR_LABEL: JOB_UID}},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"restartPolicy": restart_policy,
                                       "containers": [{"name": "main", "image": "busybox"}]}}}
    if completions is not None:
        spec["completions"] = completions
    if active_deadline is not None:
        spec["activeDeadlineSeconds"] = active_deadline
    if pod_failure_policy is not None:
        spec["podFailurePolicy"] = pod_failure_policy
    spec.update(extra_spec or {})
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "pi", "namespace": "default", "uid": JOB_UID, "resourceVersion": "5",
                         "generation": generation, "creationTimestamp": format_time(NOW - 60)},
            "spec": spec, "status": status if status is not None else {}}


_uids = itertools.count()


def make_pod(name: str, *, phase: str = "Pending", index: int | None = None, finalizer: bool = True,
             owner: bool = True, ready: bool = False, exit_code: int | None = None, finished_at: float | None = None,
             deleting: bool = False, restarts: int = 0, conditions: list[Obj] | None = None, uid: str | None = None,
             rv: str = "1") -> Obj:
    meta: Obj = {"name": name, "namespace": "default", "uid": uid or f"uid-{name}", "resourceVersion": rv,
                 "labels": {SELECTOR_LABEL: JOB_UID}, "creationTimestamp": format_time(NOW - 30)}
    if finalizer:
        meta["finalizers"] = [JOB_TRACKING_FINALIZER]
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "pi", "uid": JOB_UID,
                                    "controller": True, "blockOwnerDeletion": True}]
    if index is not None:
        meta["annotations"] = {"batch.kubernetes.io/job-completion-index": str(index)}
    if deleting:
        meta["deletionTimestamp"] = format_time(NOW)
    status: Obj = {"phase": phase, "conditions": list(conditions or [])}
    if ready:
        status["conditions"].append({"type": "Ready", "status": "True", "lastTransitionTime": format_time(NOW - 20)})
    cs: Obj = {"name": "main", "restartCount": restarts}
    if exit_code is not None:
        cs["state"] = {"terminated": {"exitCode": exit_code,
                                      "finishedAt": format_time(finished_at if finished_at is not None else NOW - 5)}}
    status["containerStatuses"] = [cs]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"nodeName": "n1"}, "status": status}


class FakePodControl:
    """Records writes; created pods are put into the controller's pod cache right away when
    `observe` is True (as if the informer had seen them)."""

    def __init__(self) -> None:
        self.controller: JobController | None = None
        self.created: list[tuple[Obj, str]] = []
        self.deleted: list[str] = []
        self.patched: list[tuple[str, Obj]] = []
        self.fail_creates = 0
        self.observe = False

    async def create_pods(self, namespace: str, template: Obj, owner: Obj, controller_ref: Obj) -> None:
        await self.create_pod_with_generate_name(namespace, template, owner, controller_ref, "")

    async def create_pod_with_generate_name(self, namespace: str, template: Obj, owner: Obj, controller_ref: Obj,
                                            generate_name: str) -> None:
        if self.fail_creates > 0:
            self.fail_creates -= 1
            raise RuntimeError("quota exceeded")
        self.created.append((copy.deepcopy(template), generate_name))
        if self.observe and self.controller is not None:
            n = next(_uids)
            tmeta = template.get("metadata") or {}
            pod = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": f"{generate_name or 'pi-'}{n}", "namespace": namespace, "uid": f"new-{n}",
                                "resourceVersion": "1", "labels": dict(tmeta.get("labels") or {}),
                                "annotations": dict(tmeta.get("annotations") or {}),
                                "finalizers": list(tmeta.get("finalizers") or []),
                                "ownerReferences": [controller_ref], "creationTimestamp": format_time(NOW)},
                   "spec": {}, "status": {"phase": "Pending"}}
            self.controller.pod_indexer.put(pod)
            self.controller._add_pod(pod, False)

    async def delete_pod(self, namespace: str, name: str, owner: Obj) -> None:
        self.deleted.append(name)

    async def patch_pod(self, namespace: str, name: str, patch: Obj) -> None:
        self.patched.append((name, patch))


class FakeJobs:
    """The Job client: update_status stores the status into the controller's cache."""

    def __init__(self, controller: JobController) -> None:
        self.controller = controller
        self.status_writes: list[Obj] = []

    async def update_status(self, obj: Obj) -> Obj:
        self.status_writes.append(copy.deepcopy(obj))
        return copy.deepcopy(obj)

    async def get(self, name: str, *, namespace: str) -> Obj:
        got = self.controller.job_indexer.get_by_key(f"{namespace}/{name}")
        if got is None:
            raise NotFound({"reason": "NotFound"}, code=404)
        return got


def make_controller(clock: FakeClock | None = None) -> tuple[JobController, FakePodControl, FakeJobs, FakeClock]:
    clock = clock or FakeClock(NOW)
    control = FakePodControl()
    c = JobController(rest=cast(RestClient, None), informers=cast(SharedInformerFactory, None), clock=clock,
                      pod_control=control)
    control.controller = c
    c.job_indexer, c.pod_indexer = Indexer(), Indexer()
    jobs = FakeJobs(c)
    c.jobs = jobs  # type: ignore[assignment]
    return c, control, jobs, clock


def last_status(jobs: FakeJobs) -> Obj:
    assert jobs.status_writes, "no status was written"
    status: Obj = jobs.status_writes[-1]["status"]
    return status


def condition(status: Obj, ctype: str) -> Obj | None:
    for c in status.get("conditions") or ():
        if c["type"] == ctype:
            return cast(Obj, c)
    return None


def apply_written_status(c: JobController, jobs: FakeJobs) -> Obj:
    """Put the last written Job back into the cache (as the watch would)."""
    job = copy.deepcopy(jobs.status_writes[-1])
    c.job_indexer.put(job)
    return job


def strip_finalizers(c: JobController, control: FakePodControl) -> None:
    """Apply the finalizer-removal patches to the cached pods (as the watch would)."""
    for name, _patch in control.patched:
        pod = c.pod_indexer.get_by_key(f"default/{name}")
        if pod is not None:
            old = copy.deepcopy(pod)
            pod["metadata"]["finalizers"] = [f for f in pod["metadata"].get("finalizers") or []
                                             if f != JOB_TRACKING_FINALIZER]
            pod["metadata"]["resourceVersion"] = str(int(pod["metadata"]["resourceVersion"]) + 1)
            c.pod_indexer.put(pod)
            c._update_pod(old, pod)
    control.patched.clear()
