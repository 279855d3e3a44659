"""The TTL-after-finished controller with a FakeClock: a finished Job with a TTL waits (requeued
for its expiry), then is deleted with Foreground propagation and a UID precondition after a fresh
read; unfinished Jobs, Jobs without a TTL and a TTL raised meanwhile are left alone."""

from __future__ import annotations

import copy
from typing import Any, cast

from kubecore.client.clock import FakeClock
from kubecore.client.factory import SharedInformerFactory
from kubecore.client.indexer import Indexer
from kubecore.client.rest import RestClient
from kubecore.controllers.controller_utils import format_time
from kubecore.controllers.ttlafterfinished import TTLAfterFinishedController, needs_cleanup, time_left
from tests.unit.controllers.test_job_fixtures import NOW, make_job

Obj = dict[str, Any]
KEY = "default/pi"


def finished_job(*, ttl: int | None, finished_at: float, ctype: str = "Complete") -> Obj:
    job = make_job(status={"conditions": [{"type": ctype, "status": "True",
                                           "lastTransitionTime": format_time(finished_at)}]})
    if ttl is not None:
        job["spec"]["ttlSecondsAfterFinished"] = ttl
    return job


class FakeJobs:
    def __init__(self, server_copy: Obj) -> None:
        self.server_copy = server_copy
        self.deleted: list[tuple[str, str | None, dict[str, str] | None]] = []

    async def get(self, name: str, *, namespace: str) -> Obj:
        return copy.deepcopy(self.server_copy)

    async def delete(self, name: str, *, namespace: str, propagation_policy: str | None = None,
                     preconditions: dict[str, str] | None = None) -> Obj:
        self.deleted.append((name, propagation_policy, preconditions))
        return {}


def make_controller(job: Obj, server_copy: Obj | None = None) -> tuple[TTLAfterFinishedController, FakeJobs, FakeClock]:
    clock = FakeClock(NOW)
    c = TTLAfterFinishedController(rest=cast(RestClient, None), informers=cast(SharedInformerFactory, None),
                                   clock=clock)
    c.job_indexer = Indexer()
    c.job_indexer.put(job)
    jobs = FakeJobs(server_copy if server_copy is not None else job)
    c.jobs = jobs  # type: ignore[assignment]
    return c, jobs, clock


def test_needs_cleanup_and_time_left() -> None:
    assert needs_cleanup(finished_job(ttl=10, finished_at=NOW))
    assert needs_cleanup(finished_job(ttl=0, finished_at=NOW, ctype="Failed"))
    assert not needs_cleanup(finished_job(ttl=None, finished_at=NOW))
    assert not needs_cleanup(make_job(extra_spec={"ttlSecondsAfterFinished": 5}))
    assert time_left(finished_job(ttl=100, finished_at=NOW - 30), NOW) == 70


async def test_waits_for_the_ttl_then_deletes_foreground_with_uid_precondition() -> None:
    job = finished_job(ttl=100, finished_at=NOW - 30)
    c, jobs, clock = make_controller(job)
    await c.sync(KEY)
    assert jobs.deleted == [] and c.queue.waiting == 1  # requeued for the expiry, 70 s from now
    clock.advance(70)
    await c.sync(KEY)
    assert jobs.deleted == [("pi", "Foreground", {"uid": job["metadata"]["uid"]})]


async def test_a_ttl_raised_on_the_server_wins() -> None:
    cached = finished_job(ttl=0, finished_at=NOW - 30)
    fresh = finished_job(ttl=3600, finished_at=NOW - 30)
    c, jobs, _ = make_controller(cached, fresh)
    await c.sync(KEY)
    assert jobs.deleted == [] and c.queue.waiting == 1


async def test_unfinished_or_deleting_jobs_are_left_alone() -> None:
    c, jobs, _ = make_controller(make_job(extra_spec={"ttlSecondsAfterFinished": 0}))
    await c.sync(KEY)
    deleting = finished_job(ttl=0, finished_at=NOW - 30)
    deleting["metadata"]["deletionTimestamp"] = format_time(NOW)
    c2, jobs2, _ = make_controller(deleting)
    await c2.sync(KEY)
    assert jobs.deleted == [] and jobs2.deleted == []
