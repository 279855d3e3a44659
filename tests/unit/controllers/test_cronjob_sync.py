"""The CronJob controller's sync with in-memory caches, fake clients and a FakeClock: firing at
the schedule (name, annotation, owner, status), the requeue delay, concurrency policies, missed
starts (startingDeadlineSeconds, too many missed), suspend, time zones, history limits, the active
list and lastSuccessfulTime."""

from __future__ import annotations

import copy
from datetime import datetime, timezone
from typing import Any, cast

import pytest

from kubecore.client.clock import FakeClock
from kubecore.client.errors import AlreadyExists, NotFound
from kubecore.client.factory import SharedInformerFactory
from kubecore.client.indexer import Indexer
from kubecore.client.rest import RestClient
from kubecore.controllers.controller_utils import format_time
from kubecore.controllers.cronjob import CronJobController

Obj = dict[str, Any]
UTC = timezone.utc
T0 = datetime(2024, 1, 2, 3, 0, 30, tzinfo=UTC).timestamp()  # 30 s past a minute
CJ_UID = "cj-uid"
KEY = "default/hello"


def make_cj(*, schedule: str = "* * * * *", policy: str = "Allow", status: Obj | None = None,
            created: float = T0 - 20, **spec: Any) -> Obj:
    return {"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "hello", "namespace": "default", "uid": CJ_UID, "resourceVersion": "3",
                         "creationTimestamp": format_time(created)},
            "spec": {"schedule": schedule, "concurrencyPolicy": policy, "suspend": False,
                     "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1,
                     "jobTemplate": {"metadata": {"labels": {"team": "a"}},
                                     "spec": {"template": {"spec": {"restartPolicy": "Never",
                                                                    "containers": [{"name": "c", "image": "x"}]}}}},
                     **spec},
            "status": status or {}}


def make_job(name: str, *, finished: str | None = None, start: float = T0 - 100, completion: float | None = None,
             uid: str | None = None) -> Obj:
    status: Obj = {"startTime": format_time(start)}
    if finished is not None:
        status["conditions"] = [{"type": finished, "status": "True"}]
    if completion is not None:
        status["completionTime"] = format_time(completion)
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "default", "uid": uid or f"uid-{name}", "resourceVersion": "7",
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "hello",
                                              "uid": CJ_UID, "controller": True, "blockOwnerDeletion": True}]},
            "spec": {}, "status": status}


def ref(job: Obj) -> Obj:
    m = job["metadata"]
    return {"kind": "Job", "namespace": "default", "name": m["name"], "uid": m["uid"], "apiVersion": "batch/v1",
            "resourceVersion": "7"}


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def event(self, obj: Obj, event_type: str, *, reason: str, message: str,
              annotations: dict[str, str] | None = None, field_path: str = "") -> None:
        self.events.append((event_type, reason, message))

    def reasons(self) -> list[str]:
        return [r for _, r, _ in self.events]


class FakeJobs:
    def __init__(self, c: CronJobController) -> None:
        self.c = c
        self.created: list[Obj] = []
        self.deleted: list[tuple[str, str | None]] = []

    async def create(self, obj: Obj, *, namespace: str) -> Obj:
        name = obj["metadata"]["name"]
        if self.c.job_indexer.get_by_key(f"{namespace}/{name}") is not None:
            raise AlreadyExists({"reason": "AlreadyExists"}, code=409)
        out = copy.deepcopy(obj)
        out["metadata"].update(uid=f"uid-{name}", resourceVersion="7")
        self.created.append(out)
        self.c.job_indexer.put(out)
        return out

    async def get(self, name: str, *, namespace: str) -> Obj:
        got = self.c.job_indexer.get_by_key(f"{namespace}/{name}")
        if got is None:
            raise NotFound({"reason": "NotFound"}, code=404)
        return got

    async def delete(self, name: str, *, namespace: str, propagation_policy: str | None = None) -> Obj:
        self.deleted.append((name, propagation_policy))
        self.c.job_indexer.delete_key(f"{namespace}/{name}")
        return {}


class FakeCronJobs:
    def __init__(self, c: CronJobController) -> None:
        self.c = c
        self.writes: list[Obj] = []

    async def update_status(self, obj: Obj) -> Obj:
        self.writes.append(copy.deepcopy(obj))
        self.c.cj_indexer.put(copy.deepcopy(obj))
        return obj

    async def get(self, name: str, *, namespace: str) -> Obj:
        got = self.c.cj_indexer.get_by_key(f"{namespace}/{name}")
        assert got is not None
        return got


def make_controller(now: float = T0) -> tuple[CronJobController, FakeJobs, FakeCronJobs, Recorder, FakeClock]:
    clock, rec = FakeClock(now), Recorder()
    c = CronJobController(rest=cast(RestClient, None), informers=cast(SharedInformerFactory, None), recorder=rec,
                          clock=clock, time_zone=UTC)
    c.job_indexer, c.cj_indexer = Indexer(), Indexer()
    jobs, cjs = FakeJobs(c), FakeCronJobs(c)
    c.jobs, c.cronjobs = jobs, cjs  # type: ignore[assignment]
    return c, jobs, cjs, rec, clock


async def test_nothing_due_requeues_for_the_next_minute() -> None:
    c, jobs, cjs, rec, _ = make_controller()
    c.cj_indexer.put(make_cj())
    delay = await c.sync(KEY)
    assert jobs.created == [] and cjs.writes == []
    assert delay == pytest.approx(30 + 0.1)  # 03:01:00 + 100 ms


async def test_fires_at_the_schedule() -> None:
    c, jobs, cjs, rec, clock = make_controller()
    c.cj_indexer.put(make_cj())
    clock.advance(30)  # 03:01:00
    delay = await c.sync(KEY)
    scheduled = datetime(2024, 1, 2, 3, 1, tzinfo=UTC).timestamp()
    [job] = jobs.created
    assert job["metadata"]["name"] == f"hello-{int(scheduled) // 60}"
    assert job["metadata"]["labels"] == {"team": "a"}
    assert job["metadata"]["annotations"] == {"batch.kubernetes.io/cronjob-scheduled-timestamp": "2024-01-02T03:01:00Z"}
    assert job["metadata"]["ownerReferences"] == [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "hello",
                                                   "uid": CJ_UID, "controller": True, "blockOwnerDeletion": True}]
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    status = cjs.writes[-1]["status"]
    assert status["lastScheduleTime"] == "2024-01-02T03:01:00Z" and status["active"] == [ref(job)]
    assert delay == pytest.approx(60.1)
    assert ("Normal", "SuccessfulCreate", f"Created job {job['metadata']['name']}") in rec.events
    # the same activation is not started twice
    await c.sync(KEY)
    assert len(jobs.created) == 1


async def test_forbid_skips_while_a_job_runs() -> None:
    running = make_job("hello-1")
    c, jobs, cjs, rec, clock = make_controller()
    c.cj_indexer.put(make_cj(policy="Forbid", status={"active": [ref(running)]}))
    c.job_indexer.put(running)
    clock.advance(30)
    await c.sync(KEY)
    assert jobs.created == [] and "JobAlreadyActive" in rec.reasons()


async def test_allow_runs_concurrently() -> None:
    running = make_job("hello-1")
    c, jobs, cjs, rec, clock = make_controller()
    c.cj_indexer.put(make_cj(policy="Allow", status={"active": [ref(running)]}))
    c.job_indexer.put(running)
    clock.advance(30)
    await c.sync(KEY)
    assert len(jobs.created) == 1 and len(cjs.writes[-1]["status"]["active"]) == 2


async def test_replace_deletes_the_running_job_first() -> None:
    running = make_job("hello-1")
    c, jobs, cjs, rec, clock = make_controller()
    c.cj_indexer.put(make_cj(policy="Replace", status={"active": [ref(running)]}))
    c.job_indexer.put(running)
    clock.advance(30)
    await c.sync(KEY)
    assert jobs.deleted == [("hello-1", "Background")] and len(jobs.created) == 1
    assert [r["name"] for r in cjs.writes[-1]["status"]["active"]] == [jobs.created[0]["metadata"]["name"]]
    assert ("Normal", "SuccessfulDelete", "Deleted job hello-1") in rec.events


async def test_start_later_than_starting_deadline_is_skipped() -> None:
    c, jobs, cjs, rec, clock = make_controller()
    c.cj_indexer.put(make_cj(startingDeadlineSeconds=10))
    clock.advance(30 + 20)  # 20 s after 03:01:00: too late for that one
    delay = await c.sync(KEY)
    assert jobs.created == [] and delay == pytest.approx(40.1)  # the 03:02:00 one will run
    clock.advance(45)  # 5 s after 03:02:00: within the deadline
    await c.sync(KEY)
    assert [j["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"] for j in jobs.created] \
        == ["2024-01-02T03:02:00Z"]


async def test_too_many_missed_starts_only_the_latest() -> None:
    c, jobs, cjs, rec, clock = make_controller()
    c.cj_indexer.put(make_cj(created=T0 - 3 * 3600))
    await c.sync(KEY)
    assert "TooManyMissedTimes" in rec.reasons()
    [job] = jobs.created
    assert job["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"] == "2024-01-02T03:00:00Z"


async def test_suspended_cronjob_starts_nothing() -> None:
    c, jobs, cjs, rec, clock = make_controller()
    c.cj_indexer.put(make_cj(suspend=True))
    clock.advance(90)
    assert await c.sync(KEY) is None
    assert jobs.created == []


async def test_time_zone_schedule_and_annotation() -> None:
    c, jobs, cjs, rec, clock = make_controller()
    # 22:01 in New York is 03:01 UTC
    c.cj_indexer.put(make_cj(schedule="1 22 * * *", timeZone="America/New_York"))
    clock.advance(30)
    await c.sync(KEY)
    [job] = jobs.created
    assert job["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"] == \
        "2024-01-01T22:01:00-05:00"


async def test_unknown_time_zone_and_unparseable_schedule_are_reported() -> None:
    c, jobs, cjs, rec, clock = make_controller()
    c.cj_indexer.put(make_cj(timeZone="Mars/Base"))
    assert await c.sync(KEY) is None
    assert ("Warning", "UnknownTimeZone", 'invalid timeZone: "Mars/Base": unknown time zone Mars/Base') in rec.events
    c.cj_indexer.put(make_cj(schedule="61 * * * *"))
    assert await c.sync(KEY) is None
    assert ("Warning", "UnparseableSchedule",
            'unparseable schedule: "61 * * * *" : end of range (61) above maximum (59): 61') in rec.events


async def test_tz_in_schedule_is_warned_but_honoured() -> None:
    c, jobs, cjs, rec, clock = make_controller()
    c.cj_indexer.put(make_cj(schedule="TZ=America/New_York 1 22 * * *"))
    clock.advance(30)
    await c.sync(KEY)
    assert "UnsupportedSchedule" in rec.reasons() and len(jobs.created) == 1


async def test_history_limits_prune_oldest_finished_jobs() -> None:
    c, jobs, cjs, rec, clock = make_controller()
    c.cj_indexer.put(make_cj(successfulJobsHistoryLimit=2, failedJobsHistoryLimit=1))
    for i in range(4):
        c.job_indexer.put(make_job(f"ok-{i}", finished="Complete", start=T0 - 1000 + i, completion=T0 - 900 + i))
    for i in range(2):
        c.job_indexer.put(make_job(f"bad-{i}", finished="Failed", start=T0 - 1000 + i))
    c.job_indexer.put(make_job("running"))
    await c.sync(KEY)
    assert sorted(name for name, _ in jobs.deleted) == ["bad-0", "ok-0", "ok-1"]
    assert all(policy == "Background" for _, policy in jobs.deleted)
    assert cjs.writes[-1]["status"]["lastSuccessfulTime"] == format_time(T0 - 900 + 3)


async def test_finished_job_leaves_the_active_list() -> None:
    done = make_job("hello-1", finished="Complete", completion=T0 - 5)
    c, jobs, cjs, rec, clock = make_controller()
    c.cj_indexer.put(make_cj(status={"active": [ref(done)], "lastScheduleTime": format_time(T0 - 30)}))
    c.job_indexer.put(done)
    await c.sync(KEY)
    status = cjs.writes[-1]["status"]
    assert status["active"] == []
    assert ("Normal", "SawCompletedJob", "Saw completed job: hello-1, status: Complete") in rec.events


async def test_missing_job_leaves_the_active_list() -> None:
    gone = make_job("hello-1")
    c, jobs, cjs, rec, clock = make_controller()
    c.cj_indexer.put(make_cj(status={"active": [ref(gone)], "lastScheduleTime": format_time(T0 - 30)}))
    await c.sync(KEY)
    assert cjs.writes[-1]["status"]["active"] == []
    assert ("Normal", "MissingJob", "Active job went missing: hello-1") in rec.events


async def test_existing_job_of_the_activation_is_adopted_into_status() -> None:
    c, jobs, cjs, rec, clock = make_controller()
    c.cj_indexer.put(make_cj())
    clock.advance(30)
    scheduled = int(datetime(2024, 1, 2, 3, 1, tzinfo=UTC).timestamp())
    existing = make_job(f"hello-{scheduled // 60}")
    c.job_indexer.put(existing)  # created before a crash, status never written
    await c.sync(KEY)
    assert jobs.created == []
    assert cjs.writes[-1]["status"]["active"] == [ref(existing)]


async def test_schedule_change_requeues_at_the_new_time() -> None:
    c, jobs, cjs, rec, clock = make_controller()
    old = make_cj(schedule="0 * * * *")
    new = make_cj(schedule="*/10 * * * *")
    c.cj_indexer.put(new)
    c._update_cronjob(old, new)
    assert c.queue.waiting == 1  # at 03:10:00.1, not now
    assert len(c.queue) == 0
