"""events.k8s.io/v1 and core/v1 Events against a real kubecore API server: one stored resource,
two views. Writes through either group are read, listed, watched, selected, patched and deleted
through the other; events.k8s.io writes are validated as upstream validates them."""

from __future__ import annotations

import json
import queue
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any

import pytest

CORE = "/api/v1/namespaces/default/events"
EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"
NOW = "2026-01-02T03:04:05.000000Z"


def _http(method: str, url: str, body: Any = None, *, ct: str = "application/json") -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": ct})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _ok(method: str, url: str, body: Any = None, *, ct: str = "application/json") -> Any:
    code, obj = _http(method, url, body, ct=ct)
    assert code in (200, 201), (code, obj)
    return obj


def _name(prefix: str = "ev") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def _new_event(name: str, *, uid: str = "", **extra: Any) -> dict[str, Any]:
    """A valid events.k8s.io/v1 Event (what kube-scheduler writes)."""
    obj: dict[str, Any] = {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": name},
        "eventTime": NOW, "reportingController": "default-scheduler", "reportingInstance": "sched-1",
        "action": "Scheduling", "reason": "Scheduled", "type": "Normal", "note": "assigned to node-1",
        "regarding": {"kind": "Pod", "namespace": "default", "name": f"pod-{name}", "uid": uid or str(uuid.uuid4()),
                      "apiVersion": "v1"},
    }
    obj.update(extra)
    return obj


def _core_event(name: str, *, uid: str = "") -> dict[str, Any]:
    """A core/v1 Event as the legacy recorder writes it."""
    return {
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": name},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": f"pod-{name}", "uid": uid or str(uuid.uuid4())},
        "reason": "Pulled", "message": "image pulled", "type": "Normal", "count": 3,
        "source": {"component": "kubelet", "host": "node-1"},
        "firstTimestamp": "2026-01-02T03:04:05Z", "lastTimestamp": "2026-01-02T03:04:09Z",
        "reportingComponent": "kubelet", "reportingInstance": "node-1",
    }


def test_create_via_events_read_via_core(server_url: str) -> None:
    name = _name()
    created = _ok("POST", server_url + EVENTS, _new_event(name))
    assert created["apiVersion"] == "events.k8s.io/v1" and created["note"] == "assigned to node-1"
    core = _ok("GET", f"{server_url}{CORE}/{name}")
    assert (core["apiVersion"], core["kind"]) == ("v1", "Event")
    assert core["involvedObject"]["name"] == f"pod-{name}" and core["message"] == "assigned to node-1"
    assert core["reportingComponent"] == "default-scheduler" and core["reportingInstance"] == "sched-1"
    assert core["eventTime"] == NOW and core["action"] == "Scheduling"
    assert "regarding" not in core and "note" not in core and "reportingController" not in core
    assert core["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert core["metadata"]["uid"] == created["metadata"]["uid"]
    again = _ok("GET", f"{server_url}{EVENTS}/{name}")
    assert again["regarding"] == created["regarding"] and "involvedObject" not in again


def test_create_via_core_read_via_events(server_url: str) -> None:
    name = _name()
    created = _ok("POST", server_url + CORE, _core_event(name))
    ev = _ok("GET", f"{server_url}{EVENTS}/{name}")
    assert (ev["apiVersion"], ev["kind"]) == ("events.k8s.io/v1", "Event")
    assert ev["regarding"] == created["involvedObject"] and ev["note"] == "image pulled"
    assert ev["deprecatedSource"] == {"component": "kubelet", "host": "node-1"}
    assert ev["deprecatedCount"] == 3 and ev["deprecatedFirstTimestamp"] == "2026-01-02T03:04:05Z"
    assert ev["deprecatedLastTimestamp"] == "2026-01-02T03:04:09Z" and ev["reportingController"] == "kubelet"
    for core_only in ("involvedObject", "message", "source", "count", "firstTimestamp", "lastTimestamp",
                      "reportingComponent"):
        assert core_only not in ev
    assert ev["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_lists_see_both_groups_with_one_resource_version(server_url: str) -> None:
    a, b = _name("la"), _name("lb")
    _ok("POST", server_url + EVENTS, _new_event(a))
    _ok("POST", server_url + CORE, _core_event(b))
    core = _ok("GET", server_url + CORE)
    events = _ok("GET", server_url + EVENTS)
    assert events["kind"] == "EventList" and events["apiVersion"] == "events.k8s.io/v1"
    assert {a, b} <= {e["metadata"]["name"] for e in core["items"]}
    assert {a, b} <= {e["metadata"]["name"] for e in events["items"]}
    assert all("regarding" in e for e in events["items"]) and all("involvedObject" in e for e in core["items"])
    # all namespaces, and the list's resourceVersion is the one sequence
    all_ns = _ok("GET", server_url + "/apis/events.k8s.io/v1/events")
    assert {a, b} <= {e["metadata"]["name"] for e in all_ns["items"]}
    assert int(events["metadata"]["resourceVersion"]) >= max(int(e["metadata"]["resourceVersion"])
                                                             for e in core["items"])
    page = _ok("GET", server_url + EVENTS + "?limit=1")
    assert len(page["items"]) == 1 and page["metadata"].get("continue")
    rest = _ok("GET", server_url + EVENTS + "?limit=500&continue=" + urllib.parse.quote(page["metadata"]["continue"]))
    names = [e["metadata"]["name"] for e in page["items"] + rest["items"]]
    assert names == [e["metadata"]["name"] for e in events["items"]] and all("regarding" in e for e in rest["items"])
    assert page["kind"] == rest["kind"] == "EventList" and rest["apiVersion"] == "events.k8s.io/v1"
    stale = _ok("GET", server_url + EVENTS + "?resourceVersion=0&labelSelector=absent%3Dx")
    assert stale["items"] == [] and stale["apiVersion"] == "events.k8s.io/v1"


def test_field_selectors_both_ways(server_url: str) -> None:
    uid_a, uid_b = str(uuid.uuid4()), str(uuid.uuid4())
    a, b = _name("fa"), _name("fb")
    _ok("POST", server_url + EVENTS, _new_event(a, uid=uid_a))
    _ok("POST", server_url + CORE, _core_event(b, uid=uid_b))
    q = urllib.parse.quote
    # kubectl describe pod: core/v1 involvedObject.uid finds the events.k8s.io event
    got = _ok("GET", f"{server_url}{CORE}?fieldSelector={q('involvedObject.uid=' + uid_a)}")
    assert [e["metadata"]["name"] for e in got["items"]] == [a]
    got = _ok("GET", f"{server_url}{CORE}?fieldSelector={q('reportingComponent=default-scheduler,involvedObject.name=pod-' + a)}")
    assert [e["metadata"]["name"] for e in got["items"]] == [a]
    # events.k8s.io field labels find the core/v1 event
    got = _ok("GET", f"{server_url}{EVENTS}?fieldSelector={q('regarding.uid=' + uid_b)}")
    assert [e["metadata"]["name"] for e in got["items"]] == [b] and got["items"][0]["regarding"]["uid"] == uid_b
    got = _ok("GET", f"{server_url}{EVENTS}?fieldSelector={q('reportingController=kubelet,regarding.name=pod-' + b)}")
    assert [e["metadata"]["name"] for e in got["items"]] == [b]
    got = _ok("GET", f"{server_url}{EVENTS}?fieldSelector={q('source=kubelet,regarding.name=pod-' + b)}")
    assert [e["metadata"]["name"] for e in got["items"]] == [b]  # upstream keeps the legacy "source" label
    got = _ok("GET", f"{server_url}{EVENTS}?fieldSelector={q('metadata.name=' + a)}")
    assert [e["metadata"]["name"] for e in got["items"]] == [a]
    code, status = _http("GET", f"{server_url}{EVENTS}?fieldSelector={q('involvedObject.uid=' + uid_b)}")
    assert (code, status["message"]) == (400, "field label not supported: involvedObject.uid")


def test_source_falls_back_to_the_reporting_controller(server_url: str) -> None:
    """upstream's ToSelectableFields: `source` is source.component, or reportingController when
    that is empty, in both groups (kube-scheduler's events set no deprecatedSource)."""
    a, b = _name("sa"), _name("sb")
    _ok("POST", server_url + EVENTS, _new_event(a, reportingController="example.com/fallback"))
    legacy = _core_event(b)
    legacy["source"] = {"component": "example.com/legacy"}
    legacy["reportingComponent"] = "example.com/fallback"  # not used: source.component is set
    _ok("POST", server_url + CORE, legacy)
    q = urllib.parse.quote
    for path in (CORE, EVENTS):
        for source, want in (("example.com/fallback", [a]), ("example.com/legacy", [b])):
            got = _ok("GET", f"{server_url}{path}?fieldSelector={q('source=' + source)}")
            assert [e["metadata"]["name"] for e in got["items"]] == want, (path, source)
    watch = _watch(server_url, EVENTS, "&fieldSelector=" + q("source=example.com/fallback"))
    try:
        c = _name("sc")
        _ok("POST", server_url + CORE, dict(_core_event(c), source={}, reportingComponent="example.com/fallback"))
        assert watch.next_about(c)["type"] == "ADDED"
    finally:
        watch.close()


class _Watch:
    """A WATCH read on a thread; events arrive on a queue."""

    def __init__(self, url: str) -> None:
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self._resp = urllib.request.urlopen(url, timeout=30)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for line in self._resp:
                if line.strip():
                    self.events.put(json.loads(line))
        except (OSError, ValueError, AttributeError):  # AttributeError: closed while reading
            pass

    def next_about(self, name: str) -> dict[str, Any]:
        while True:
            ev = self.events.get(timeout=10)
            if ev["object"].get("metadata", {}).get("name") == name:
                return ev

    def close(self) -> None:
        sock = getattr(getattr(self._resp.fp, "raw", None), "_sock", None)
        if sock is not None:  # end the stream now (closing the response would wait for the server)
            sock.shutdown(socket.SHUT_RDWR)
        self._resp.close()


def _watch(server_url: str, path: str, query: str = "") -> _Watch:
    rv = _ok("GET", server_url + path + "?limit=1")["metadata"]["resourceVersion"]
    return _Watch(f"{server_url}{path}?watch=1&resourceVersion={rv}&timeoutSeconds=20{query}")


# (watched path, written path, the watcher's apiVersion, its names of: regarding, note)
CROSS = [(EVENTS, CORE, "events.k8s.io/v1", "regarding", "note"), (CORE, EVENTS, "v1", "involvedObject", "message")]


@pytest.mark.parametrize("watched,written,api_version,regarding,note", CROSS, ids=["events-sees-core", "core-sees-events"])
def test_watch_sees_the_other_groups_writes_and_deletes(server_url: str, watched: str, written: str, api_version: str,
                                                         regarding: str, note: str) -> None:
    name = _name("w")
    w = _watch(server_url, watched)
    try:
        created = _ok("POST", server_url + written, _new_event(name) if written == EVENTS else _core_event(name))
        added = w.next_about(name)
        assert added["type"] == "ADDED" and added["object"]["apiVersion"] == api_version
        assert added["object"][regarding]["name"] == f"pod-{name}"
        assert added["object"]["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
        if watched == EVENTS:
            assert added["object"]["deprecatedCount"] == 3
        _ok("DELETE", f"{server_url}{written}/{name}")
        deleted = w.next_about(name)
        assert deleted["type"] == "DELETED"
        assert deleted["object"][note] == created.get("note", created.get("message"))
    finally:
        w.close()


def test_watch_with_field_selector_on_events(server_url: str) -> None:
    uid = str(uuid.uuid4())
    name = _name("w3")
    w = _watch(server_url, EVENTS, "&fieldSelector=" + urllib.parse.quote("regarding.uid=" + uid))
    try:
        _ok("POST", server_url + CORE, _core_event(_name("other")))
        _ok("POST", server_url + CORE, _core_event(name, uid=uid))
        ev = w.events.get(timeout=10)
        assert ev["type"] == "ADDED" and ev["object"]["metadata"]["name"] == name
    finally:
        w.close()


def test_patches_through_events_apply_to_its_view(server_url: str) -> None:
    name = _name("p")
    _ok("POST", server_url + EVENTS, _new_event(name))
    series = {"count": 2, "lastObservedTime": "2026-01-02T03:05:05.000000Z"}
    merged = _ok("PATCH", f"{server_url}{EVENTS}/{name}", {"series": series}, ct="application/merge-patch+json")
    assert merged["series"] == series and merged["note"] == "assigned to node-1"
    series["count"] = 3
    smp = _ok("PATCH", f"{server_url}{EVENTS}/{name}", {"series": series, "metadata": {"labels": {"a": "b"}}},
              ct="application/strategic-merge-patch+json")
    assert smp["series"]["count"] == 3 and smp["metadata"]["labels"] == {"a": "b"}
    core = _ok("GET", f"{server_url}{CORE}/{name}")
    assert core["series"]["count"] == 3 and core["metadata"]["labels"] == {"a": "b"}
    assert core["metadata"]["resourceVersion"] == smp["metadata"]["resourceVersion"]
    # the note is immutable through events.k8s.io (reported under the internal field name)
    code, status = _http("PATCH", f"{server_url}{EVENTS}/{name}", {"note": "changed"},
                         ct="application/merge-patch+json")
    assert code == 422 and status["details"]["causes"][0]["field"] == "message", status
    # a core/v1 update of the same event is validated as core/v1 (legacy rules only)
    core["message"] = "changed through core"
    updated = _ok("PUT", f"{server_url}{CORE}/{name}", core)
    assert updated["message"] == "changed through core"
    assert _ok("GET", f"{server_url}{EVENTS}/{name}")["note"] == "changed through core"


def _causes(status: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(c["reason"], c["field"], c["message"]) for c in status["details"]["causes"]]


def test_validation_through_events(server_url: str) -> None:
    name = _name("v")
    code, status = _http("POST", server_url + EVENTS, {"apiVersion": "events.k8s.io/v1", "kind": "Event",
                                                       "metadata": {"name": name},
                                                       "regarding": {"kind": "Pod", "namespace": "default"}})
    assert (code, status["reason"]) == (422, "Invalid")
    # without eventTime the legacy rules are the old-event ones (namespace only), as upstream
    assert _causes(status) == [("FieldValueRequired", "eventTime", "Required value"),
                               ("FieldValueInvalid", "type", 'Invalid value: "": has invalid value: ')]
    assert status["message"] == (f'Event.events.k8s.io "{name}" is invalid: [eventTime: Required value, '
                                 'type: Invalid value: "": has invalid value: ]')
    code, status = _http("POST", server_url + EVENTS, {"apiVersion": "events.k8s.io/v1", "kind": "Event",
                                                       "metadata": {"name": name}, "eventTime": NOW, "type": "Bad",
                                                       "regarding": {"kind": "Node", "name": "n"}})
    assert code == 422
    causes = _causes(status)
    required = {("FieldValueRequired", f, "Required value") for f in
                ("reportingController", "reportingInstance", "action", "reason")}
    assert required | {("FieldValueInvalid", "type", 'Invalid value: "": has invalid value: Bad')} <= set(causes)
    assert "involvedObject.namespace" not in {c[1] for c in causes}  # "default" may hold cluster-scoped objects' events
    code, status = _http("POST", server_url + EVENTS, _new_event(
        name, reason="r" * 129, note="n" * 1025, series={"count": 1}, deprecatedCount=2,
        deprecatedSource={"component": "x"}, deprecatedFirstTimestamp="2026-01-02T03:04:05Z"))
    assert code == 422
    # upstream's order: legacy rules, series, then the strict ones; internal field names (message, count, ...)
    assert _causes(status) == [("FieldValueInvalid", f, f'Invalid value: "": {m}') for f, m in [
        ("reason", "can have at most 128 characters"), ("message", "can have at most 1024 characters"),
        ("series.count", "should be at least 2")]] + [("FieldValueRequired", "series.lastObservedTime", "Required value")] + [
        ("FieldValueInvalid", f, 'Invalid value: "": needs to be unset') for f in ("firstTimestamp", "count", "source")]
    code, status = _http("POST", server_url + EVENTS, _new_event(name, reportingController="not a name!"))
    assert code == 422 and [c[1] for c in _causes(status)] == ["reportingController"]
    # nothing was stored
    assert _http("GET", f"{server_url}{CORE}/{name}")[0] == 404


def test_core_validation_of_events_with_event_time(server_url: str) -> None:
    name = _name("cv")
    code, status = _http("POST", server_url + CORE, {
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": name}, "eventTime": NOW,
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p"}})
    assert code == 422
    # the reporting controller is named as core/v1 names it (reportingComponent), as upstream
    assert {c[1] for c in _causes(status)} == {"reportingComponent", "reportingInstance", "action", "reason"}
    # an old-style core/v1 event is checked only for its namespace
    code, status = _http("POST", server_url + CORE, {
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": name},
        "involvedObject": {"kind": "Pod", "namespace": "other", "name": "p"}})
    assert code == 422 and _causes(status) == [
        ("FieldValueInvalid", "involvedObject.namespace", 'Invalid value: "other": does not match event.namespace')]


@pytest.mark.parametrize("create_path,read_path", [(EVENTS, CORE), (CORE, EVENTS)])
def test_delete_via_one_group_is_gone_from_the_other(server_url: str, create_path: str, read_path: str) -> None:
    name = _name("d")
    body = _new_event(name) if create_path == EVENTS else _core_event(name)
    _ok("POST", server_url + create_path, body)
    deleted = _ok("DELETE", f"{server_url}{read_path}/{name}")
    assert deleted["kind"] == "Status" or deleted["metadata"]["name"] == name
    assert _http("GET", f"{server_url}{create_path}/{name}")[0] == 404
    assert _http("GET", f"{server_url}{read_path}/{name}")[0] == 404
