"""The event recorder against a fake sink: Event shape, counting of repeats, aggregation of similar
events, spam filtering, and what is retried or dropped."""

from __future__ import annotations

import asyncio
import copy
import random
import re
from typing import Any

import pytest

from kubecore.client.errors import Forbidden, NotFound
from kubecore.client.clock import FakeClock
from kubecore.client.events import DROP_REPORT_INTERVAL, EventBroadcaster, object_reference
from kubecore.client.events_cache import CorrelatorOptions, rfc3339

POD: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "web-1", "namespace": "prod", "uid": "u-1", "resourceVersion": "42"}}
NAME = re.compile(r"^web-1\.([0-9a-f]{16})$")


class FakeSink:
    """Stores events by (namespace, name) like a server would; can fail on demand."""

    def __init__(self) -> None:
        self.events: dict[tuple[str, str], dict[str, Any]] = {}
        self.calls: list[tuple[str, str, dict[str, Any]]] = []  # (verb, name, body)
        self.rv = 0
        self.transport_failures = 0  # fail this many next calls with a connection error
        self.reject: Forbidden | None = None

    def _fail(self) -> None:
        if self.transport_failures > 0:
            self.transport_failures -= 1
            raise ConnectionResetError("connection reset")
        if self.reject is not None:
            raise self.reject

    def _store(self, ns: str, obj: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.events[(ns, obj["metadata"]["name"])] = obj
        return copy.deepcopy(obj)

    async def create_event(self, event: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0)
        self.calls.append(("create", event["metadata"]["name"], copy.deepcopy(event)))
        self._fail()
        assert "resourceVersion" not in event["metadata"]
        return self._store(event["metadata"]["namespace"], copy.deepcopy(event))

    async def patch_event(self, event: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0)
        namespace, name = event["metadata"]["namespace"], event["metadata"]["name"]
        self.calls.append(("patch", name, copy.deepcopy(patch)))
        self._fail()
        cur = self.events.get((namespace, name))
        if cur is None:
            raise NotFound({"reason": "NotFound", "message": f'events "{name}" not found'}, code=404)
        cur = copy.deepcopy(cur)
        cur.update(patch)
        return self._store(namespace, cur)

    def verbs(self) -> list[str]:
        return [v for v, _, _ in self.calls]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sink() -> FakeSink:
    return FakeSink()


def broadcaster(sink: FakeSink, clock: FakeClock, **kw: Any) -> EventBroadcaster:
    return EventBroadcaster(sink, clock=clock, rng=random.Random(0), **kw)


async def test_first_event_has_upstreams_shape(sink: FakeSink, clock: FakeClock) -> None:
    b = broadcaster(sink, clock)
    rec = b.new_recorder("deployment-controller", host="node-a")
    rec.event(POD, "Normal", reason="Scheduled", message="assigned prod/web-1 to node-a")
    await b.flush()
    assert sink.verbs() == ["create"]
    (ev,) = sink.events.values()
    m = NAME.match(ev["metadata"]["name"])
    assert m is not None and int(m.group(1), 16) == int(clock.now() * 1e9)
    assert ev["metadata"]["namespace"] == "prod"
    assert ev["involvedObject"] == {"kind": "Pod", "namespace": "prod", "name": "web-1", "uid": "u-1",
                                    "apiVersion": "v1", "resourceVersion": "42"}
    assert (ev["type"], ev["reason"], ev["message"]) == ("Normal", "Scheduled", "assigned prod/web-1 to node-a")
    assert ev["source"] == {"component": "deployment-controller", "host": "node-a"}
    assert ev["reportingComponent"] == "deployment-controller" and ev["reportingInstance"] == "node-a"
    assert ev["firstTimestamp"] == ev["lastTimestamp"] == "2024-01-02T03:04:05Z"
    assert ev["count"] == 1
    await b.shutdown()


async def test_identical_repeats_patch_count_and_last_timestamp(sink: FakeSink, clock: FakeClock) -> None:
    b = broadcaster(sink, clock)
    rec = b.new_recorder("kubelet")
    for _ in range(3):
        rec.event(POD, "Warning", reason="BackOff", message="Back-off restarting failed container")
        await b.flush()
        clock.advance(30.0)
    assert sink.verbs() == ["create", "patch", "patch"]
    first_name = sink.calls[0][1]
    assert [n for _, n, _ in sink.calls] == [first_name] * 3
    assert sink.calls[1][2] == {"count": 2, "lastTimestamp": rfc3339(clock.now() - 60.0),
                                "message": "Back-off restarting failed container"}
    (ev,) = sink.events.values()
    assert ev["count"] == 3
    assert ev["firstTimestamp"] == "2024-01-02T03:04:05Z"
    assert ev["lastTimestamp"] == rfc3339(clock.now() - 30.0)
    await b.shutdown()


async def test_different_objects_reasons_and_types_are_separate_events(sink: FakeSink, clock: FakeClock) -> None:
    b = broadcaster(sink, clock)
    rec = b.new_recorder("c")
    other = copy.deepcopy(POD)
    other["metadata"].update(name="web-2", uid="u-2")
    rec.event(POD, "Normal", reason="Created", message="m")
    rec.event(other, "Normal", reason="Created", message="m")
    rec.event(POD, "Normal", reason="Started", message="m")
    rec.event(POD, "Warning", reason="Created", message="m")
    await b.flush()
    assert sink.verbs() == ["create"] * 4
    assert len({n for _, n, _ in sink.calls}) == 4  # distinct names even at one instant
    await b.shutdown()


async def test_similar_events_are_combined_after_ten_distinct_messages(sink: FakeSink, clock: FakeClock) -> None:
    b = broadcaster(sink, clock)
    rec = b.new_recorder("c")
    for i in range(9):
        rec.event(POD, "Warning", reason="FailedMount", message=f"volume {i} not ready")
        clock.advance(1.0)
    await b.flush()
    assert sink.verbs() == ["create"] * 9
    rec.event(POD, "Warning", reason="FailedMount", message="volume 9 not ready")
    await b.flush()
    combined = sink.calls[-1][2]
    assert sink.calls[-1][0] == "create"
    assert combined["message"] == "(combined from similar events): volume 9 not ready"
    assert combined["count"] == 1 and combined["reason"] == "FailedMount" and combined["type"] == "Warning"
    assert combined["involvedObject"]["name"] == "web-1"
    clock.advance(1.0)
    rec.event(POD, "Warning", reason="FailedMount", message="volume 10 not ready")
    await b.flush()
    assert sink.calls[-1][0] == "patch" and sink.calls[-1][1] == combined["metadata"]["name"]
    assert sink.calls[-1][2]["count"] == 2
    assert sink.calls[-1][2]["message"] == "(combined from similar events): volume 10 not ready"
    assert len(sink.events) == 10  # nine individual events and one aggregate
    await b.shutdown()


async def test_aggregation_window_restarts_after_ten_quiet_minutes(sink: FakeSink, clock: FakeClock) -> None:
    b = broadcaster(sink, clock)
    rec = b.new_recorder("c")
    for i in range(9):
        rec.event(POD, "Warning", reason="FailedMount", message=f"m{i}")
    await b.flush()
    clock.advance(601.0)
    for i in range(9, 18):
        rec.event(POD, "Warning", reason="FailedMount", message=f"m{i}")
    await b.flush()
    assert not any("combined" in c[2].get("message", "") for c in sink.calls)
    assert sink.verbs() == ["create"] * 18
    await b.shutdown()


async def test_spam_filter_allows_a_burst_of_25_per_object_then_one_per_5_minutes(
        sink: FakeSink, clock: FakeClock) -> None:
    b = broadcaster(sink, clock, options=CorrelatorOptions(max_events=1000))
    rec = b.new_recorder("c")
    for i in range(30):
        rec.event(POD, "Normal", reason="Tick", message=f"tick {i}")
    await b.flush()
    assert len(sink.calls) == 25
    clock.advance(300.0)
    rec.event(POD, "Normal", reason="Tick", message="tick 30")
    rec.event(POD, "Normal", reason="Tick", message="tick 31")
    await b.flush()
    assert len(sink.calls) == 26 and sink.calls[-1][2]["message"] == "tick 30"
    await b.shutdown()


async def test_patch_of_deleted_event_creates_it_again(sink: FakeSink, clock: FakeClock) -> None:
    b = broadcaster(sink, clock)
    rec = b.new_recorder("c")
    rec.event(POD, "Normal", reason="Pulled", message="image pulled")
    await b.flush()
    sink.events.clear()  # e.g. the server's event TTL expired it
    rec.event(POD, "Normal", reason="Pulled", message="image pulled")
    await b.flush()
    assert sink.verbs() == ["create", "patch", "create"]
    (ev,) = sink.events.values()
    assert ev["count"] == 2
    await b.shutdown()


async def test_transport_errors_are_retried_and_api_errors_are_not(sink: FakeSink, clock: FakeClock) -> None:
    b = broadcaster(sink, clock)
    rec = b.new_recorder("c")
    sink.transport_failures = 3
    rec.event(POD, "Normal", reason="A", message="a")
    flushing = asyncio.create_task(b.flush())
    await clock.run_for(35.0)  # first retry within 10 s (randomised), then every 10 s
    await asyncio.wait_for(flushing, 5.0)
    assert sink.verbs() == ["create"] * 4 and len(sink.events) == 1

    sink.reject = Forbidden({"reason": "Forbidden", "message": "no"}, code=403)
    rec.event(POD, "Normal", reason="B", message="b")
    await b.flush()
    assert sink.verbs() == ["create"] * 5  # one try, no retry
    await b.shutdown()


async def test_retry_limit(sink: FakeSink, clock: FakeClock) -> None:
    b = broadcaster(sink, clock)
    rec = b.new_recorder("c")
    sink.transport_failures = 100
    rec.event(POD, "Normal", reason="A", message="a")
    flushing = asyncio.create_task(b.flush())
    await clock.run_for(200.0)
    await asyncio.wait_for(flushing, 5.0)
    assert len(sink.calls) == 12
    await b.shutdown()


async def test_bad_type_full_queue_and_shutdown_drop_events(sink: FakeSink, clock: FakeClock) -> None:
    b = broadcaster(sink, clock, max_queued=2)
    rec = b.new_recorder("c")
    rec.event(POD, "Info", reason="X", message="not a valid type")
    rec.event({"kind": "Pod"}, "Normal", reason="X", message="no name to refer to")
    for i in range(5):  # the writer has not run yet: only two fit
        rec.event(POD, "Normal", reason=f"R{i}", message="m")
    assert b.dropped == 3
    await b.flush()
    assert [c[2]["reason"] for c in sink.calls] == ["R0", "R1"]
    await b.shutdown()
    rec.event(POD, "Normal", reason="Late", message="after shutdown")
    assert len(sink.calls) == 2


async def test_drops_on_a_full_queue_are_logged_once_per_interval(sink: FakeSink, clock: FakeClock,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    b = broadcaster(sink, clock, max_queued=1)
    rec = b.new_recorder("c")
    with caplog.at_level("ERROR", logger="kubecore.client.events"):
        for i in range(50):
            rec.event(POD, "Normal", reason=f"R{i}", message="m")
        clock.advance(DROP_REPORT_INTERVAL)
        rec.event(POD, "Normal", reason="Late", message="m")
    lines = [r.getMessage() for r in caplog.records if "too many queued events" in r.message]
    assert b.dropped == 50
    assert lines == ["too many queued events; dropped 1 event(s) since the last report, the latest R1/m",
                     "too many queued events; dropped 49 event(s) since the last report, the latest Late/m"]
    await b.flush()
    assert [c[2]["reason"] for c in sink.calls] == ["R0"]
    await b.shutdown()


async def test_invalid_event_name_falls_back_to_a_uuid(sink: FakeSink, clock: FakeClock) -> None:
    b = broadcaster(sink, clock)
    rec = b.new_recorder("c")
    rec.event({"kind": "Thing", "name": "Not_A_DNS_Name", "namespace": "prod"}, "Normal", reason="R", message="m")
    await b.flush()
    (name,) = [n for _, n, _ in sink.calls]
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", name)
    await b.shutdown()


def test_object_reference() -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u"}}
    assert object_reference(node) == {"kind": "Node", "name": "n1", "uid": "u", "apiVersion": "v1"}
    assert object_reference(POD, field_path="spec.containers{app}")["fieldPath"] == "spec.containers{app}"
    with pytest.raises(ValueError):
        object_reference({"metadata": {"name": "x"}})
