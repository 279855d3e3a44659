"""The CronJob controller against a real kubecore API server, in-process with an injected
FakeClock: a CronJob fires at its schedule (and once per activation), Forbid skips while a Job
runs, and the history limit prunes finished Jobs.

No Job controller runs here: the tests finish Jobs by writing their status (a Complete condition),
as upstream's integration tests do. Time only moves when a test moves the FakeClock; while
polling, the clock creeps forward by a few milliseconds so a retry the controller scheduled on it
(after a write conflict) still happens. Nothing asserts on elapsed wall time."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from kubecore.client.clock import FakeClock
from kubecore.client.resource import ResourceClient
from kubecore.client.rest import RestClient
from kubecore.controllers.controller_utils import format_time, parse_time
from tests.integration.inprocess import eventually, run_controllers

Obj = dict[str, Any]


@dataclass
class Env:
    ns: str
    rest: RestClient
    clock: FakeClock
    jobs: ResourceClient
    cronjobs: ResourceClient
    events: ResourceClient

    async def owned_jobs(self, cj: Obj) -> list[Obj]:
        items, _ = await self.jobs.list_all(namespace=self.ns)
        uid = cj["metadata"]["uid"]
        return sorted((j for j in items if any(r.get("uid") == uid for r in j["metadata"].get("ownerReferences") or ())),
                      key=lambda j: str(j["metadata"]["name"]))

    async def eventually(self, check: Callable[[], Awaitable[bool]], what: str) -> None:
        """Poll `check`, creeping the fake clock forward a little after each miss."""

        async def ticking() -> bool:
            if await check():
                return True
            self.clock.advance(0.005)
            return False

        await eventually(ticking, what)

    async def create(self, body: Obj) -> Obj:
        """Create the CronJob and move the fake clock to 1 s past its creation, just after the
        minute boundary before its first activation."""
        cj = await self.cronjobs.create(body, namespace=self.ns)
        created = parse_time(cj["metadata"]["creationTimestamp"])
        assert created is not None
        self.clock.set(max(self.clock.now(), created + 1))
        return cj

    def to_minute(self, k: int) -> float:
        """Move the clock to 1 s past the k-th minute boundary from now; returns that boundary."""
        boundary = math.floor(self.clock.now() / 60) * 60 + 60 * k
        self.clock.set(boundary + 1)
        return float(boundary)


@pytest.fixture
async def env(server_url: str) -> AsyncIterator[Env]:
    clock = FakeClock(math.floor(time.time()) - 5)
    async with run_controllers(server_url, ("cronjob",), ns_prefix="cj", clock=clock,
                               options={"cronjob_time_zone": "UTC"}) as running:
        yield Env(ns=running.ns, rest=running.rest, clock=clock, jobs=await running.resource("batch/v1", "jobs"),
                  cronjobs=await running.resource("batch/v1", "cronjobs"),
                  events=await running.resource("v1", "events"))


def cronjob_body(name: str, *, policy: str = "Allow", successful_limit: int = 3) -> Obj:
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
            "spec": {"schedule": "* * * * *", "concurrencyPolicy": policy,
                     "successfulJobsHistoryLimit": successful_limit,
                     "jobTemplate": {"metadata": {"labels": {"app": name}},
                                     "spec": {"template": {"spec": {
                                         "restartPolicy": "Never",
                                         "containers": [{"name": "main", "image": "busybox"}]}}}}}}


async def complete(env: Env, job: Obj, *, at: float) -> None:
    fresh = await env.jobs.get(job["metadata"]["name"], namespace=env.ns)
    stamp = format_time(at)
    fresh["status"] = {"startTime": stamp, "completionTime": stamp, "succeeded": 1,
                       "conditions": [{"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": stamp},
                                      {"type": "Complete", "status": "True", "lastTransitionTime": stamp}]}
    await env.jobs.update_status(fresh, namespace=env.ns)


async def wait_jobs(env: Env, cj: Obj, n: int) -> list[Obj]:
    jobs: list[Obj] = []

    async def have() -> bool:
        nonlocal jobs
        jobs = await env.owned_jobs(cj)
        return len(jobs) == n

    await env.eventually(have, f"{n} jobs of {cj['metadata']['name']}")
    return jobs


async def test_cronjob_fires_at_its_schedule(env: Env) -> None:
    cj = await env.create(cronjob_body("tick"))
    boundary = env.to_minute(1)
    [job] = await wait_jobs(env, cj, 1)
    m = job["metadata"]
    assert m["name"] == f"tick-{int(boundary) // 60}"
    assert m["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"] == format_time(boundary)
    assert m["labels"]["app"] == "tick"
    assert m["ownerReferences"] == [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "tick",
                                     "uid": cj["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]

    async def status_written() -> bool:
        status = (await env.cronjobs.get("tick", namespace=env.ns)).get("status") or {}
        return status.get("lastScheduleTime") == format_time(boundary) and \
            [r["name"] for r in status.get("active") or ()] == [m["name"]]

    await env.eventually(status_written, "status.active and lastScheduleTime")
    # nothing more until the next activation; then exactly one more Job
    await asyncio.sleep(0.5)
    assert len(await env.owned_jobs(cj)) == 1
    env.to_minute(1)
    jobs = await wait_jobs(env, cj, 2)
    assert jobs[1]["metadata"]["name"] == f"tick-{int(boundary) // 60 + 1}"


async def test_forbid_skips_while_a_job_runs(env: Env) -> None:
    cj = await env.create(cronjob_body("solo", policy="Forbid"))
    env.to_minute(1)
    [first] = await wait_jobs(env, cj, 1)

    async def active_listed() -> bool:
        status = (await env.cronjobs.get("solo", namespace=env.ns)).get("status") or {}
        return len(status.get("active") or ()) == 1

    await env.eventually(active_listed, "the first job in status.active")
    skipped_boundary = env.to_minute(1)

    async def skipped() -> bool:
        items, _ = await env.events.list_all(namespace=env.ns)
        return any(e.get("reason") == "JobAlreadyActive" for e in items)

    await env.eventually(skipped, "the JobAlreadyActive event")
    assert len(await env.owned_jobs(cj)) == 1
    # once the running Job finishes, the skipped activation starts (late: no startingDeadlineSeconds)
    await complete(env, first, at=env.clock.now())
    jobs = await wait_jobs(env, cj, 2)
    second = next(j for j in jobs if j["metadata"]["uid"] != first["metadata"]["uid"])
    assert second["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"] == \
        format_time(skipped_boundary)

    async def success_seen() -> bool:
        status = (await env.cronjobs.get("solo", namespace=env.ns)).get("status") or {}
        return [r["uid"] for r in status.get("active") or ()] == [second["metadata"]["uid"]] and \
            status.get("lastSuccessfulTime") is not None

    await env.eventually(success_seen, "the finished job replaced in status.active")


async def test_history_limit_prunes_finished_jobs(env: Env) -> None:
    cj = await env.create(cronjob_body("hist", successful_limit=1))
    env.to_minute(1)
    [first] = await wait_jobs(env, cj, 1)
    await complete(env, first, at=env.clock.now())
    env.to_minute(1)
    jobs = await wait_jobs(env, cj, 2)
    second = next(j for j in jobs if j["metadata"]["name"] != first["metadata"]["name"])
    await complete(env, second, at=env.clock.now())

    async def pruned() -> bool:
        names = [j["metadata"]["name"] for j in await env.owned_jobs(cj)
                 if not j["metadata"].get("deletionTimestamp")]
        return names == [second["metadata"]["name"]]

    await env.eventually(pruned, "the oldest finished job deleted")

    async def delete_event() -> bool:  # events are written in the background, after the delete
        items, _ = await env.events.list_all(namespace=env.ns)
        return any(e.get("reason") == "SuccessfulDelete" and e.get("message") == f"Deleted job {first['metadata']['name']}"
                   for e in items)

    await env.eventually(delete_event, "the SuccessfulDelete event")
