"""The events.k8s.io/v1 recorder (client-go tools/events) against a fake sink and a fake clock:
the Event's shape, series aggregation, the refresh and finish loops, retries, and concurrency."""

from __future__ import annotations

import asyncio
import copy
import logging
import random
import re
from typing import Any

import pytest

from kubecore.client.clock import FakeClock, settle
from kubecore.client.errors import AlreadyExists, Forbidden, NotFound
from kubecore.client.events_v1 import (FINISH_TIME, MAX_TRIES_PER_EVENT, REFRESH_TIME, SLEEP_DURATION,
                                       EventBroadcaster, EventRecorder, micro_time)
from tests.unit.client.test_events import clock  # noqa: F401  (the FakeClock fixture)

Obj = dict[str, Any]
POD: Obj = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-1", "namespace": "prod", "uid": "u-1", "resourceVersion": "42"}}
NODE: Obj = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a", "uid": "n-1"}}
NAME = re.compile(r"^web-1\.([0-9a-f]{16})$")


class FakeSink:
    """Stores events by (namespace, name) as a server would; fails on demand; can hold writes."""

    def __init__(self) -> None:
        self.events: dict[tuple[str, str], Obj] = {}
        self.calls: list[tuple[str, str, Any]] = []  # (verb, name, body or patch)
        self.rv = 0
        self.transport_failures = 0  # fail this many next calls with a connection error
        self.reject: Exception | None = None
        self.gate: asyncio.Event | None = None  # when set: every call waits for it
        self.concurrent = 0
        self.max_concurrent = 0

    async def _enter(self, verb: str, name: str, body: Any) -> None:
        self.calls.append((verb, name, copy.deepcopy(body)))
        self.concurrent += 1
        self.max_concurrent = max(self.max_concurrent, self.concurrent)
        try:
            await asyncio.sleep(0)
            if self.gate is not None:
                await self.gate.wait()
        finally:
            self.concurrent -= 1
        if self.transport_failures > 0:
            self.transport_failures -= 1
            raise ConnectionResetError("connection reset")
        if self.reject is not None:
            raise self.reject

    def _store(self, obj: Obj) -> Obj:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.events[(obj["metadata"]["namespace"], obj["metadata"]["name"])] = obj
        return copy.deepcopy(obj)

    async def create(self, event: Obj, *, keep: bool = True) -> Obj | None:
        await self._enter("create", event["metadata"]["name"], event)
        assert "resourceVersion" not in event["metadata"]
        key = (event["metadata"]["namespace"], event["metadata"]["name"])
        if key in self.events:
            raise AlreadyExists({"reason": "AlreadyExists"}, code=409)
        return self._store(copy.deepcopy(event))

    async def patch(self, event: Obj, patch: bytes | Obj) -> Obj:
        assert isinstance(patch, dict)
        namespace, name = event["metadata"]["namespace"], event["metadata"]["name"]
        await self._enter("patch", name, patch)
        cur = self.events.get((namespace, name))
        if cur is None:
            raise NotFound({"reason": "NotFound", "message": f'events "{name}" not found'}, code=404)
        cur = copy.deepcopy(cur)
        cur.update(patch)
        return self._store(cur)

    def verbs(self) -> list[str]:
        return [v for v, _, _ in self.calls]


@pytest.fixture
def sink() -> FakeSink:
    return FakeSink()


def broadcaster(sink: FakeSink, clock: FakeClock, **kw: Any) -> EventBroadcaster:
    return EventBroadcaster(sink, clock=clock, rng=random.Random(0), **kw)


def recording(sink: FakeSink, clock: FakeClock) -> tuple[EventBroadcaster, EventRecorder]:
    b = broadcaster(sink, clock)
    return b, b.new_recorder("c", reporting_instance="c-1")


async def started_series_of_two(sink: FakeSink, clock: FakeClock) -> tuple[EventBroadcaster, EventRecorder]:
    """A started broadcaster that has written POD's event and its first repeat (a series of 2)."""
    b, rec = recording(sink, clock)
    b.start()
    rec.eventf(POD, None, "Warning", "R", "A", "n")
    rec.eventf(POD, None, "Warning", "R", "A", "n")
    await b.flush()
    assert sink.verbs() == ["create", "patch"]
    return b, rec


def test_micro_time() -> None:
    assert micro_time(1704164645.0) == "2024-01-02T03:04:05.000000Z"
    assert micro_time(1704164645.25) == "2024-01-02T03:04:05.250000Z"
    assert micro_time(1704164645.1) == "2024-01-02T03:04:05.100000Z"
    assert micro_time(1704164645.9999996) == "2024-01-02T03:04:06.000000Z"


async def test_event_has_upstreams_shape(sink: FakeSink, clock: FakeClock) -> None:
    b = broadcaster(sink, clock)
    rec = b.new_recorder("default-scheduler", reporting_instance="default-scheduler-host-1")
    rec.eventf(POD, NODE, "Normal", "Scheduled", "Binding", "Successfully assigned prod/web-1 to node-a")
    await b.flush()
    (ev,) = sink.events.values()
    assert ev["metadata"] == {"name": f"web-1.{int(clock.now() * 1e9):016x}", "namespace": "prod",
                              "resourceVersion": "1"}  # (the resourceVersion is FakeSink's)
    assert (ev["apiVersion"], ev["kind"]) == ("events.k8s.io/v1", "Event")
    assert ev["eventTime"] == "2024-01-02T03:04:05.000000Z"
    assert ev["regarding"] == {"kind": "Pod", "namespace": "prod", "name": "web-1", "uid": "u-1",
                               "apiVersion": "v1", "resourceVersion": "42"}
    assert ev["related"] == {"kind": "Node", "name": "node-a", "uid": "n-1", "apiVersion": "v1"}
    assert (ev["type"], ev["reason"], ev["action"]) == ("Normal", "Scheduled", "Binding")
    assert ev["note"] == "Successfully assigned prod/web-1 to node-a"
    assert (ev["reportingController"], ev["reportingInstance"]) == ("default-scheduler", "default-scheduler-host-1")
    assert "series" not in ev
    await b.shutdown()


async def test_names_are_unique_at_one_instant_and_namespace_defaults(sink: FakeSink, clock: FakeClock) -> None:
    b, rec = recording(sink, clock)
    for reason in ("A", "B", "C"):
        rec.eventf(POD, None, "Normal", reason, "Act", "n")
    rec.eventf(NODE, None, "Warning", "NodeNotReady", "Check", "n")
    rec.eventf({"kind": "Thing", "name": "Not_A_Valid_Name"}, None, "Normal", "X", "Act", "n")
    await b.flush()
    names = [n for _, n, _ in sink.calls]
    assert len(set(names)) == 5
    stamps = [int(NAME.match(n).group(1), 16) for n in names[:3]]  # type: ignore[union-attr]
    assert stamps == [stamps[0], stamps[0] + 1, stamps[0] + 2]
    assert ("default", names[3]) in sink.events and names[3].startswith("node-a.")
    assert re.fullmatch(r"[0-9a-f-]{36}", names[4])  # not a valid name: a UUID, as upstream
    await b.shutdown()


async def test_default_reporting_instance_is_controller_dash_hostname(sink: FakeSink, clock: FakeClock) -> None:
    import socket
    rec = broadcaster(sink, clock).new_recorder("kube-scheduler")
    assert rec.reporting_instance == f"kube-scheduler-{socket.gethostname()}"


async def test_invalid_type_and_reference_are_dropped(sink: FakeSink, clock: FakeClock,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    b, rec = recording(sink, clock)
    with caplog.at_level(logging.ERROR, logger="kubecore.client.events_v1"):
        rec.eventf(POD, None, "Fatal", "Boom", "Act", "n")
        rec.eventf({"metadata": {"name": "no-kind"}}, None, "Normal", "Boom", "Act", "n")
    await b.flush()
    assert sink.calls == [] and b.cached == 0
    assert "unsupported event type 'Fatal'" in caplog.text
    assert "could not construct reference" in caplog.text
    # an unusable related object only loses the related reference
    rec.eventf(POD, {"metadata": {}}, "Normal", "Ok", "Act", "n")
    await b.flush()
    assert sink.verbs() == ["create"] and "related" not in sink.calls[0][2]
    await b.shutdown()


async def test_first_repeat_is_a_series_patch_later_repeats_only_count(sink: FakeSink, clock: FakeClock) -> None:
    b, rec = recording(sink, clock)
    rec.eventf(POD, None, "Warning", "FailedScheduling", "Scheduling", "0/3 nodes are available")
    await b.flush()
    clock.advance(2.5)
    rec.eventf(POD, None, "Warning", "FailedScheduling", "Scheduling", "0/4 nodes are available")  # note differs
    await b.flush()
    assert sink.verbs() == ["create", "patch"]
    first = sink.calls[0][1]
    assert sink.calls[1][1] == first
    assert sink.calls[1][2] == {"series": {"count": 2, "lastObservedTime": "2024-01-02T03:04:07.500000Z"}}
    for _ in range(5):
        clock.advance(1.0)
        rec.eventf(POD, None, "Warning", "FailedScheduling", "Scheduling", "0/4 nodes are available")
    await b.flush()
    assert sink.verbs() == ["create", "patch"]  # counted in the cache only
    (ev,) = sink.events.values()
    assert ev["series"]["count"] == 2 and ev["note"] == "0/3 nodes are available"
    await b.shutdown()


async def test_key_fields_separate_events(sink: FakeSink, clock: FakeClock) -> None:
    b, rec = recording(sink, clock)
    other_instance = b.new_recorder("c", reporting_instance="c-2")
    newer = copy.deepcopy(POD)
    newer["metadata"]["resourceVersion"] = "43"
    rec.eventf(POD, None, "Normal", "R", "A", "n")
    rec.eventf(POD, None, "Warning", "R", "A", "n")
    rec.eventf(POD, None, "Normal", "R2", "A", "n")
    rec.eventf(POD, None, "Normal", "R", "A2", "n")
    rec.eventf(POD, NODE, "Normal", "R", "A", "n")
    rec.eventf(newer, None, "Normal", "R", "A", "n")
    other_instance.eventf(POD, None, "Normal", "R", "A", "n")
    await b.flush()
    assert sink.verbs() == ["create"] * 7 and b.cached == 7
    await b.shutdown()


async def test_refresh_patches_series_every_30_minutes(sink: FakeSink, clock: FakeClock) -> None:
    b, rec = recording(sink, clock)
    b.start()
    await settle()
    # keep the series open (a repeat every 5 min) so finish does not close it
    rec.eventf(POD, None, "Warning", "R", "A", "n")
    rec.eventf(POD, None, "Warning", "R", "A", "n")
    rec.eventf(NODE, None, "Normal", "Single", "A", "n")  # no series: never refreshed
    await b.flush()
    assert sink.verbs() == ["create", "patch", "create"]
    for _ in range(5):
        await clock.run_for(300.0)
        rec.eventf(POD, None, "Warning", "R", "A", "n")
    await b.flush()
    assert sink.verbs() == ["create", "patch", "create"]  # 25 min: not yet
    await clock.run_for(REFRESH_TIME - 25 * 60.0)
    assert sink.verbs() == ["create", "patch", "create", "patch"]
    assert sink.calls[-1][2]["series"]["count"] == 7
    assert sink.calls[-1][2]["series"]["lastObservedTime"] == micro_time(clock.now() - 300.0)
    await b.shutdown()


async def test_finish_writes_final_count_then_forgets(sink: FakeSink, clock: FakeClock) -> None:
    b, rec = recording(sink, clock)
    b.start()
    await settle()
    for _ in range(4):
        rec.eventf(POD, None, "Warning", "R", "A", "n")
    rec.eventf(NODE, None, "Normal", "Single", "A", "n")
    await b.flush()
    assert sink.verbs() == ["create", "patch", "create"] and b.cached == 2
    await clock.run_for(FINISH_TIME)  # exactly 6 min: not *before* now - 6 min yet
    assert sink.verbs() == ["create", "patch", "create"] and b.cached == 2
    await clock.run_for(FINISH_TIME)
    assert sink.verbs() == ["create", "patch", "create", "patch"]
    assert sink.calls[-1][2] == {"series": {"count": 4, "lastObservedTime": "2024-01-02T03:04:05.000000Z"}}
    assert b.cached == 0
    # the same event again starts afresh: a new Event, created
    rec.eventf(POD, None, "Warning", "R", "A", "n")
    await b.flush()
    assert sink.verbs()[-1] == "create" and sink.calls[-1][1] != sink.calls[0][1]
    await b.shutdown()


async def test_finish_keeps_a_series_whose_write_failed(sink: FakeSink, clock: FakeClock) -> None:
    b, _ = await started_series_of_two(sink, clock)
    sink.transport_failures = 1
    await clock.run_for(2 * FINISH_TIME)
    assert sink.verbs() == ["create", "patch", "patch"] and b.cached == 1  # one try, kept
    await clock.run_for(FINISH_TIME)
    assert sink.verbs() == ["create", "patch", "patch", "patch"] and b.cached == 0
    await b.shutdown()


async def test_events_wait_while_finish_holds_the_cache(sink: FakeSink, clock: FakeClock) -> None:
    b, rec = await started_series_of_two(sink, clock)
    sink.gate = asyncio.Event()
    clock.advance(2 * FINISH_TIME)
    await settle()
    assert sink.verbs()[-1] == "patch" and sink.concurrent == 1  # finish's write, held
    rec.eventf(POD, None, "Warning", "R", "A", "n")  # waits for finish: then a new Event
    await settle()
    assert len(sink.calls) == 3
    sink.gate.set()
    await b.flush()
    assert sink.verbs() == ["create", "patch", "patch", "create"] and b.cached == 1
    await b.shutdown()


async def test_transport_failures_are_retried_with_jittered_sleeps(sink: FakeSink, clock: FakeClock) -> None:
    b, rec = recording(sink, clock)
    sink.transport_failures = 3
    rec.eventf(POD, None, "Normal", "R", "A", "n")
    await settle()
    delays = []
    for _ in range(3):
        assert clock.sleepers >= 1
        wake = clock.next_deadline()
        assert wake is not None
        delays.append(wake - clock.now())
        await clock.step(wake - clock.now())
    await b.flush()
    assert sink.verbs() == ["create"] * 4 and len(sink.events) == 1
    assert all(SLEEP_DURATION <= d <= SLEEP_DURATION * 1.25 for d in delays), delays
    assert len(set(delays)) == 3
    await b.shutdown()


async def test_gives_up_after_max_tries(sink: FakeSink, clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    b, rec = recording(sink, clock)
    sink.transport_failures = 100
    rec.eventf(POD, None, "Normal", "R", "A", "n")
    with caplog.at_level(logging.ERROR, logger="kubecore.client.events_v1"):
        await clock.run_for(MAX_TRIES_PER_EVENT * SLEEP_DURATION * 1.25 + 1)
        await b.flush()
    assert sink.verbs() == ["create"] * MAX_TRIES_PER_EVENT
    assert "retry limit exceeded" in caplog.text
    await b.shutdown()


async def test_api_errors_are_not_retried(sink: FakeSink, clock: FakeClock) -> None:
    b, rec = recording(sink, clock)
    sink.reject = Forbidden({"reason": "Forbidden", "message": "no"}, code=403)
    rec.eventf(POD, None, "Normal", "R", "A", "n")
    await settle()
    await b.flush()
    assert sink.verbs() == ["create"] and b.in_flight == 0
    assert clock.next_deadline() == clock.now() + FINISH_TIME  # only the maintenance loops sleep
    await b.shutdown()


async def test_already_exists_on_a_single_event_is_dropped(sink: FakeSink, clock: FakeClock) -> None:
    b, rec = recording(sink, clock)
    sink.reject = AlreadyExists({"reason": "AlreadyExists"}, code=409)
    rec.eventf(POD, None, "Normal", "R", "A", "n")
    await b.flush()
    assert sink.verbs() == ["create"] and b.in_flight == 0
    await b.shutdown()


async def test_patch_not_found_creates_the_series_again(sink: FakeSink, clock: FakeClock) -> None:
    b, rec = recording(sink, clock)
    rec.eventf(POD, None, "Warning", "R", "A", "n")
    await b.flush()
    sink.events.clear()  # the Event expired on the server
    clock.advance(1.0)
    rec.eventf(POD, None, "Warning", "R", "A", "n")
    await b.flush()
    assert sink.verbs() == ["create", "patch", "create"]
    name = sink.calls[0][1]
    assert sink.calls[2][1] == name
    assert sink.calls[2][2]["series"] == {"count": 2, "lastObservedTime": "2024-01-02T03:04:06.000000Z"}
    assert "resourceVersion" not in sink.calls[2][2]["metadata"]
    await b.shutdown()


async def test_series_event_is_the_first_event_plus_its_series(sink: FakeSink, clock: FakeClock) -> None:
    """The cache keeps no copy of the first Event; the one rebuilt for a series is identical."""
    b, rec = recording(sink, clock)
    ref = {"kind": "Pod", "namespace": "prod", "name": "web-1", "fieldPath": "spec.containers{app}"}
    rec.eventf(ref, NODE, "Warning", "R", "A", "first note")
    await b.flush()
    first = sink.calls[0][2]
    sink.events.clear()
    clock.advance(0.000001)
    rec.eventf(ref, NODE, "Warning", "R", "A", "second note")
    await b.flush()
    assert sink.verbs() == ["create", "patch", "create"]
    again = sink.calls[2][2]
    assert again.pop("series") == {"count": 2, "lastObservedTime": "2024-01-02T03:04:05.000001Z"}
    assert again == first


async def test_refreshed_event_patch_not_found_clears_resource_version(sink: FakeSink, clock: FakeClock) -> None:
    b, rec = recording(sink, clock)
    rec.eventf(POD, None, "Warning", "R", "A", "n")
    rec.eventf(POD, None, "Warning", "R", "A", "n")
    await b.flush()
    await b.refresh_existing_series()  # the cache now holds the server's copy (with a resourceVersion)
    sink.events.clear()
    await b.refresh_existing_series()
    assert sink.verbs() == ["create", "patch", "patch", "patch", "create"]
    assert "resourceVersion" not in sink.calls[-1][2]["metadata"]  # (FakeSink.create asserts it too)
    await b.shutdown()


async def test_series_create_conflict_retries_until_patch_succeeds(clock: FakeClock) -> None:
    class RacySink(FakeSink):
        async def patch(self, event: Obj, patch: bytes | Obj) -> Obj:
            if self.verbs().count("patch") == 0:
                self.calls.append(("patch", event["metadata"]["name"], patch))
                raise NotFound({"reason": "NotFound"}, code=404)  # the create had not landed yet
            return await super().patch(event, patch)

    sink = RacySink()
    b, rec = recording(sink, clock)
    rec.eventf(POD, None, "Warning", "R", "A", "n")
    await b.flush()
    rec.eventf(POD, None, "Warning", "R", "A", "n")
    await settle()
    assert sink.verbs() == ["create", "patch", "create"]  # create of the series: AlreadyExists
    nxt = clock.next_deadline()  # ... so it is retried
    assert nxt is not None and nxt <= clock.now() + SLEEP_DURATION * 1.25
    await clock.run_for(SLEEP_DURATION * 1.25)
    await b.flush()
    assert sink.verbs() == ["create", "patch", "create", "patch"]
    (ev,) = sink.events.values()
    assert ev["series"]["count"] == 2
    await b.shutdown()


async def test_burst_is_written_concurrently_without_a_queue(sink: FakeSink, clock: FakeClock) -> None:
    b = broadcaster(sink, clock)
    rec = b.new_recorder("default-scheduler", reporting_instance="s-1")
    sink.gate = asyncio.Event()
    n = 5000
    pods = [{"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": f"p-{i}", "namespace": "ns", "uid": f"u-{i}", "resourceVersion": "1"}}
            for i in range(n)]
    for p in pods:
        rec.eventf(p, NODE, "Normal", "Scheduled", "Binding", "assigned")
    await settle(3)
    assert sink.concurrent == n  # all in flight at once: no serial writer, nothing dropped
    sink.gate.set()
    await b.flush()
    assert len(sink.events) == n and sink.max_concurrent == n
    await b.shutdown()


async def test_shutdown_drops_new_events_and_cancels_without_drain(sink: FakeSink, clock: FakeClock) -> None:
    b, rec = recording(sink, clock)
    b.start()
    sink.transport_failures = 100
    rec.eventf(POD, None, "Normal", "R", "A", "n")
    await settle()
    await b.shutdown(drain=False)
    assert b.in_flight == 0 and clock.sleepers == 0
    rec.eventf(POD, None, "Normal", "R2", "A", "n")
    await settle()
    assert sink.verbs() == ["create"]


async def test_max_cached_forgets_the_oldest_tenth_writing_series_counts(sink: FakeSink, clock: FakeClock) -> None:
    b = broadcaster(sink, clock, max_cached=20)
    rec = b.new_recorder("c", reporting_instance="c-1")
    pods = [{"kind": "Pod", "namespace": "ns", "name": f"p-{i}"} for i in range(21)]
    rec.eventf(pods[0], None, "Normal", "R", "A", "n")
    rec.eventf(pods[0], None, "Normal", "R", "A", "n")
    rec.eventf(pods[0], None, "Normal", "R", "A", "n")  # p-0: a series of 3, its last count unwritten
    for p in pods[1:20]:
        rec.eventf(p, None, "Normal", "R", "A", "n")
    await b.flush()
    assert b.cached == 20 and sink.verbs().count("patch") == 1
    rec.eventf(pods[20], None, "Normal", "R", "A", "n")  # 21 > 20: forget p-0, p-1, p-2
    await b.flush()
    assert b.cached == 18
    assert sink.verbs().count("patch") == 2 and sink.calls[-1][0] == "patch"
    assert sink.calls[-1][2]["series"]["count"] == 3
    rec.eventf(pods[1], None, "Normal", "R", "A", "n")  # forgotten: a new Event, not a series
    await b.flush()
    assert sink.calls[-1][0] == "create" and b.cached == 19
    await b.shutdown()
