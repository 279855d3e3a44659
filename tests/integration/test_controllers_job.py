"""The Job and TTL-after-finished controllers against a real kubecore API server, run in-process:
the completion path, the failure path (backoffLimit), an Indexed Job, suspend/resume, and a
finished Job deleted after its TTL.

There is no kubelet yet, so the tests write pod status themselves (Succeeded / Failed with
container exit codes), as upstream's integration tests do. Waits poll with a deadline; nothing
asserts on elapsed time. Pod counts stay small."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from kubecore.client.errors import NotFound
from kubecore.client.resource import ResourceClient
from kubecore.client.rest import RestClient
from kubecore.controllers.controller_utils import format_time
from tests.integration.inprocess import eventually, run_controllers

TRACKING = "batch.kubernetes.io/job-tracking"
Obj = dict[str, Any]


@dataclass
class Env:
    ns: str
    rest: RestClient
    pods: ResourceClient
    jobs: ResourceClient
    events: ResourceClient

    async def job_pods(self, job: Obj) -> list[Obj]:
        items, _ = await self.pods.list_all(namespace=self.ns,
                                            label_selector=f"batch.kubernetes.io/controller-uid={job['metadata']['uid']}")
        return items

    async def job(self, name: str) -> Obj:
        return await self.jobs.get(name, namespace=self.ns)


@pytest.fixture
async def env(server_url: str) -> AsyncIterator[Env]:
    """A fresh namespace; the job and ttl-after-finished controllers in-process, watching it."""
    async with run_controllers(server_url, ("job", "ttl-after-finished"), ns_prefix="job") as running:
        yield Env(ns=running.ns, rest=running.rest, pods=await running.resource("v1", "pods"),
                  jobs=await running.resource("batch/v1", "jobs"), events=await running.resource("v1", "events"))


def job_body(name: str, *, completions: int = 1, parallelism: int = 1, backoff_limit: int = 6,
             indexed: bool = False, suspend: bool = False, ttl: int | None = None) -> Obj:
    spec: Obj = {"completions": completions, "parallelism": parallelism, "backoffLimit": backoff_limit,
                 "suspend": suspend,
                 "template": {"spec": {"restartPolicy": "Never",
                                       "containers": [{"name": "main", "image": "busybox"}]}}}
    if indexed:
        spec["completionMode"] = "Indexed"
    if ttl is not None:
        spec["ttlSecondsAfterFinished"] = ttl
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


async def finish_pod(env: Env, pod: Obj, *, exit_code: int) -> None:
    """Write what a kubelet would: the terminal phase and the container's exit code."""
    fresh = await env.pods.get(pod["metadata"]["name"], namespace=env.ns)
    stamp = format_time(time.time())
    fresh["status"] = {
        "phase": "Succeeded" if exit_code == 0 else "Failed",
        "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": stamp}],
        "containerStatuses": [{"name": "main", "ready": False, "restartCount": 0, "image": "busybox",
                               "imageID": "", "state": {"terminated": {"exitCode": exit_code, "finishedAt": stamp,
                                                                       "reason": "Completed" if exit_code == 0
                                                                       else "Error"}}}]}
    await env.pods.update_status(fresh, namespace=env.ns)


def cond(job: Obj, ctype: str) -> Obj | None:
    for c in (job.get("status") or {}).get("conditions") or ():
        if c.get("type") == ctype:
            return c  # type: ignore[no-any-return]
    return None


async def wait_pods(env: Env, job: Obj, n: int) -> list[Obj]:
    pods: list[Obj] = []

    async def have() -> bool:
        nonlocal pods
        pods = [p for p in await env.job_pods(job) if not p["metadata"].get("deletionTimestamp")]
        return len(pods) == n

    await eventually(have, f"{n} pods of job {job['metadata']['name']}")
    return pods


async def wait_condition(env: Env, name: str, ctype: str) -> Obj:
    job: Obj = {}

    async def has() -> bool:
        nonlocal job
        job = await env.job(name)
        c = cond(job, ctype)
        return c is not None and c.get("status") == "True"

    await eventually(has, f"job {name} condition {ctype}")
    return job


async def test_job_completes_when_its_pods_succeed(env: Env) -> None:
    job = await env.jobs.create(job_body("pi", completions=2, parallelism=2), namespace=env.ns)
    pods = await wait_pods(env, job, 2)
    uid = job["metadata"]["uid"]
    for p in pods:
        m = p["metadata"]
        assert m["generateName"] == "pi-" and TRACKING in m["finalizers"]
        assert m["labels"]["batch.kubernetes.io/controller-uid"] == uid and m["labels"]["controller-uid"] == uid
        assert m["labels"]["batch.kubernetes.io/job-name"] == "pi" and m["labels"]["job-name"] == "pi"
        assert m["ownerReferences"] == [{"apiVersion": "batch/v1", "kind": "Job", "name": "pi", "uid": uid,
                                         "controller": True, "blockOwnerDeletion": True}]

    async def active_two() -> bool:
        return bool((await env.job("pi")).get("status", {}).get("active") == 2)

    await eventually(active_two, "status.active 2")
    for p in pods:
        await finish_pod(env, p, exit_code=0)
    done = await wait_condition(env, "pi", "Complete")
    status = done["status"]
    assert status["succeeded"] == 2 and "failed" not in status and "active" not in status
    assert status["uncountedTerminatedPods"] == {} and status["ready"] == 0 and status["terminating"] == 0
    assert cond(done, "SuccessCriteriaMet") is not None
    assert status["completionTime"] >= status["startTime"]
    for p in await env.job_pods(job):  # counted: the tracking finalizer is gone
        assert TRACKING not in (p["metadata"].get("finalizers") or [])
    assert len(await env.job_pods(job)) == 2  # and no extra pod was ever made

    async def completed_event() -> bool:
        items, _ = await env.events.list_all(namespace=env.ns)
        return any(e.get("reason") == "Completed" and e["involvedObject"].get("name") == "pi" for e in items)

    await eventually(completed_event, "the Completed event")


async def test_job_fails_past_its_backoff_limit(env: Env) -> None:
    job = await env.jobs.create(job_body("flaky", completions=2, parallelism=2, backoff_limit=1), namespace=env.ns)
    pods = await wait_pods(env, job, 2)
    for p in pods:
        await finish_pod(env, p, exit_code=3)
    failed = await wait_condition(env, "flaky", "Failed")
    c = cond(failed, "Failed")
    assert c is not None and c["reason"] == "BackoffLimitExceeded"
    assert c["message"] == "Job has reached the specified backoff limit"
    target = cond(failed, "FailureTarget")
    assert target is not None and target["reason"] == "BackoffLimitExceeded"
    assert failed["status"]["failed"] == 2 and "completionTime" not in failed["status"]
    assert len(await env.job_pods(job)) == 2  # no replacement after the limit was hit


async def test_indexed_job(env: Env) -> None:
    job = await env.jobs.create(job_body("idx", completions=3, parallelism=3, indexed=True), namespace=env.ns)
    pods = await wait_pods(env, job, 3)
    by_index = {p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]: p for p in pods}
    assert sorted(by_index) == ["0", "1", "2"]
    for ix, p in by_index.items():
        assert p["metadata"]["generateName"] == f"idx-{ix}-"
        assert p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == ix
        assert p["spec"]["hostname"] == f"idx-{ix}"
        env_var = {e["name"]: e for e in p["spec"]["containers"][0]["env"]}["JOB_COMPLETION_INDEX"]
        assert env_var["valueFrom"]["fieldRef"]["fieldPath"] == \
            "metadata.labels['batch.kubernetes.io/job-completion-index']"
    await finish_pod(env, by_index["1"], exit_code=0)

    async def one_done() -> bool:
        return bool((await env.job("idx")).get("status", {}).get("completedIndexes") == "1")

    await eventually(one_done, "completedIndexes 1")
    await finish_pod(env, by_index["0"], exit_code=0)
    await finish_pod(env, by_index["2"], exit_code=0)
    done = await wait_condition(env, "idx", "Complete")
    assert done["status"]["completedIndexes"] == "0-2" and done["status"]["succeeded"] == 3


async def test_suspend_and_resume(env: Env) -> None:
    job = await env.jobs.create(job_body("lazy", completions=2, parallelism=2, suspend=True), namespace=env.ns)
    suspended = await wait_condition(env, "lazy", "Suspended")
    assert cond(suspended, "Suspended")["reason"] == "JobSuspended"  # type: ignore[index]
    assert "startTime" not in suspended["status"] and await env.job_pods(job) == []
    await env.jobs.patch("lazy", {"spec": {"suspend": False}}, namespace=env.ns)
    await wait_pods(env, job, 2)

    async def resumed() -> bool:
        c = cond(await env.job("lazy"), "Suspended")
        return c is not None and c["status"] == "False" and c["reason"] == "JobResumed"

    await eventually(resumed, "Suspended=False")
    assert (await env.job("lazy"))["status"]["startTime"]
    await env.jobs.patch("lazy", {"spec": {"suspend": True}}, namespace=env.ns)

    async def pods_gone() -> bool:
        return await env.job_pods(job) == []

    await eventually(pods_gone, "the suspended job's pods deleted")
    await wait_condition(env, "lazy", "Suspended")


async def test_finished_job_is_deleted_after_its_ttl(env: Env) -> None:
    job = await env.jobs.create(job_body("short", ttl=0), namespace=env.ns)
    pods = await wait_pods(env, job, 1)
    await finish_pod(env, pods[0], exit_code=0)

    async def deleting() -> bool:
        try:
            current = await env.job("short")
        except NotFound:
            return True  # already gone
        return bool(current["metadata"].get("deletionTimestamp")) and \
            "foregroundDeletion" in (current["metadata"].get("finalizers") or [])

    await eventually(deleting, "the TTL controller's foreground delete")
