"""The events.k8s.io/v1 recorder against a real kubecore API server: the Event it writes through
`EventsV1Sink` (POST), the series PATCH after a repeat, a re-create after the Event was deleted,
and a burst written concurrently."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

from kubecore.client.config import ClientConfig
from kubecore.client.errors import NotFound
from kubecore.client.events_v1 import EventBroadcaster
from kubecore.client.rest import RestClient
from kubecore.client.sinks import EventsV1Sink
from tests.integration.test_client_events import _http, configmap  # noqa: F401  (configmap: a fixture)

MICRO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"


def _events_about(server_url: str, name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = _http("GET", server_url + EVENTS)["items"]
    return [e for e in items if e["regarding"].get("name") == name]


async def test_event_written_and_read_back_at_events_k8s_io(server_url: str, configmap: dict[str, Any]) -> None:
    async with RestClient(ClientConfig(server=server_url, qps=0)) as rest:
        b = EventBroadcaster(EventsV1Sink(rest))
        rec = b.new_recorder("test-controller", reporting_instance="test-controller-host-1")
        rec.eventf(configmap, None, "Warning", "SyncFailed", "Syncing", "cannot sync: backend unavailable")
        await b.flush()
        await b.shutdown()
    name = configmap["metadata"]["name"]
    (ev,) = _events_about(server_url, name)
    assert re.fullmatch(re.escape(name) + r"\.[0-9a-f]{16}", ev["metadata"]["name"])
    assert (ev["apiVersion"], ev["kind"]) == ("events.k8s.io/v1", "Event")
    assert (ev["type"], ev["reason"], ev["action"]) == ("Warning", "SyncFailed", "Syncing")
    assert ev["note"] == "cannot sync: backend unavailable"
    assert ev["reportingController"] == "test-controller"
    assert ev["reportingInstance"] == "test-controller-host-1"
    assert MICRO.match(ev["eventTime"])
    reg = ev["regarding"]
    assert (reg["kind"], reg["namespace"], reg["name"], reg["apiVersion"]) == ("ConfigMap", "default", name, "v1")
    assert reg["uid"] == configmap["metadata"]["uid"]
    assert "series" not in ev or ev["series"] is None
    direct = _http("GET", f"{server_url}{EVENTS}/{ev['metadata']['name']}")
    assert direct["note"] == ev["note"]


async def test_repeat_is_a_series_patch_and_deleted_event_is_recreated(server_url: str,
                                                                       configmap: dict[str, Any]) -> None:
    name = configmap["metadata"]["name"]
    async with RestClient(ClientConfig(server=server_url, qps=0)) as rest:
        sink = EventsV1Sink(rest)
        b = EventBroadcaster(sink)
        rec = b.new_recorder("test-controller", reporting_instance="i-1")
        rec.eventf(configmap, None, "Normal", "Progress", "Syncing", "step 1")
        await b.flush()
        rec.eventf(configmap, None, "Normal", "Progress", "Syncing", "step 2")
        await b.flush()
        (ev,) = _events_about(server_url, name)
        assert ev["series"]["count"] == 2 and MICRO.match(ev["series"]["lastObservedTime"])
        assert ev["note"] == "step 1"  # the note is not part of the key, nor of the patch
        for _ in range(3):
            rec.eventf(configmap, None, "Normal", "Progress", "Syncing", "step n")
        await b.flush()
        assert _events_about(server_url, name)[0]["series"]["count"] == 2  # counted in the cache only
        await b.refresh_existing_series()
        assert _events_about(server_url, name)[0]["series"]["count"] == 5
        # the Event is deleted (it expired): the next write creates it again under its name
        _http("DELETE", f"{server_url}{EVENTS}/{ev['metadata']['name']}")
        with pytest.raises(NotFound):
            await sink.patch(ev, {"series": {"count": 9, "lastObservedTime": ev["series"]["lastObservedTime"]}})
        await b.refresh_existing_series()
        (again,) = _events_about(server_url, name)
        assert again["metadata"]["name"] == ev["metadata"]["name"] and again["series"]["count"] == 5
        await b.shutdown()


async def test_a_burst_is_written_concurrently(server_url: str) -> None:
    n = 300
    run = uuid.uuid4().hex[:6]
    pods: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": f"burst-{run}-{i}", "namespace": "default", "uid": f"u-{i}"}}
        for i in range(n)]
    async with RestClient(ClientConfig(server=server_url, qps=0)) as rest:
        b = EventBroadcaster(EventsV1Sink(rest))
        rec = b.new_recorder("default-scheduler", reporting_instance="default-scheduler-1")
        for p in pods:
            note = f"Successfully assigned default/{p['metadata']['name']} to node-a"
            rec.eventf(p, None, "Normal", "Scheduled", "Binding", note)
        assert b.in_flight == n
        await b.flush()
        await b.shutdown()
    names = {p["metadata"]["name"] for p in pods}
    written = [e for e in _http("GET", server_url + EVENTS)["items"] if e["regarding"].get("name") in names]
    assert len(written) == n
