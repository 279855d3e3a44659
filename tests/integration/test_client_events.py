"""The event recorder against a real kubecore API server: the Event object it writes, its count
after identical repeats (strategic merge PATCH), and the aggregate of similar events."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
import uuid
from typing import Any

import pytest

from kubecore.client.config import ClientConfig
from kubecore.client.rest import RestClient
from kubecore.client.sinks import RestApiSink
from kubecore.client.events import EventBroadcaster

RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def _http(method: str, url: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


@pytest.fixture
def configmap(server_url: str) -> dict[str, Any]:
    """A fresh ConfigMap in `default`, created with plain HTTP (not the code under test)."""
    name = f"cm-{uuid.uuid4().hex[:8]}"
    obj: dict[str, Any] = _http("POST", f"{server_url}/api/v1/namespaces/default/configmaps",
                                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})
    return obj


def _events_about(server_url: str, name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = _http("GET", f"{server_url}/api/v1/namespaces/default/events")["items"]
    return [e for e in items if e["involvedObject"].get("name") == name]


async def test_event_object_and_count_after_repeats(server_url: str, configmap: dict[str, Any]) -> None:
    async with RestClient(ClientConfig(server=server_url, qps=0)) as rest:
        client = RestApiSink(rest)
        b = EventBroadcaster(client)
        rec = b.new_recorder("test-controller", host="host-1")
        for _ in range(4):
            rec.event(configmap, "Warning", reason="SyncFailed", message="cannot sync: backend unavailable")
            await b.flush()
        await b.shutdown()
    name = configmap["metadata"]["name"]
    (ev,) = _events_about(server_url, name)
    assert re.fullmatch(re.escape(name) + r"\.[0-9a-f]{16}", ev["metadata"]["name"])
    assert ev["count"] == 4
    assert ev["type"] == "Warning" and ev["reason"] == "SyncFailed"
    assert ev["message"] == "cannot sync: backend unavailable"
    io = ev["involvedObject"]
    assert (io["kind"], io["namespace"], io["name"], io["apiVersion"]) == ("ConfigMap", "default", name, "v1")
    assert io["uid"] == configmap["metadata"]["uid"]
    assert ev["source"] == {"component": "test-controller", "host": "host-1"}
    assert ev["reportingComponent"] == "test-controller" and ev["reportingInstance"] == "host-1"
    assert RFC3339.match(ev["firstTimestamp"]) and RFC3339.match(ev["lastTimestamp"])
    assert ev["firstTimestamp"] <= ev["lastTimestamp"]
    # the same object read by name agrees (the PATCHes landed on the first Event)
    direct = _http("GET", f"{server_url}/api/v1/namespaces/default/events/{ev['metadata']['name']}")
    assert direct["count"] == 4


async def test_similar_events_are_combined_on_the_server(server_url: str, configmap: dict[str, Any]) -> None:
    async with RestClient(ClientConfig(server=server_url, qps=0)) as rest:
        client = RestApiSink(rest)
        b = EventBroadcaster(client)
        rec = b.new_recorder("test-controller")
        for i in range(12):
            rec.event(configmap, "Normal", reason="Progress", message=f"step {i}")
        await b.flush()
        await b.shutdown()
    events = _events_about(server_url, configmap["metadata"]["name"])
    singles = sorted(e["message"] for e in events if not e["message"].startswith("(combined"))
    combined = [e for e in events if e["message"].startswith("(combined from similar events): ")]
    assert singles == sorted(f"step {i}" for i in range(9))
    assert len(combined) == 1
    assert combined[0]["count"] == 3 and combined[0]["message"].endswith("step 11")
