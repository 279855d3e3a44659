"""events.k8s.io/v1 <-> core/v1 Event conversion, the shared storage of the two resources, and
the validation of events written through either group."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubecore.api import eventconv, kinds
from kubecore.api.fieldsets import convert_field_label, object_fields
from kubecore.api.registry import builtin_registry
from kubecore.apiserver import crstore

R = builtin_registry()
CORE_RT = R.get("", "v1", "events")
EVENTS_RT = R.get("events.k8s.io", "v1", "events")

META = {"name": "e", "namespace": "default", "uid": "u-1", "resourceVersion": "7"}
SERIES = {"count": 2, "lastObservedTime": "2026-01-02T03:05:05.000000Z"}
# Written out by hand for each view (the expected values are not derived from the mapping under test).
EVENTS: dict[str, Any] = {
    "kind": "Event", "apiVersion": "events.k8s.io/v1", "metadata": META, "eventTime": "2026-01-02T03:04:05.000000Z",
    "series": SERIES, "reportingController": "default-scheduler", "reportingInstance": "sched-1",
    "action": "Scheduling", "reason": "Scheduled", "regarding": {"kind": "Pod", "name": "p"},
    "related": {"kind": "Node", "name": "n1"}, "note": "assigned", "type": "Normal",
    "deprecatedSource": {"component": "c", "host": "h"}, "deprecatedFirstTimestamp": "2026-01-02T03:04:05Z",
    "deprecatedLastTimestamp": "2026-01-02T03:04:06Z", "deprecatedCount": 4,
}
CORE: dict[str, Any] = {
    "kind": "Event", "apiVersion": "v1", "metadata": META, "eventTime": "2026-01-02T03:04:05.000000Z",
    "series": SERIES, "reportingComponent": "default-scheduler", "reportingInstance": "sched-1",
    "action": "Scheduling", "reason": "Scheduled", "involvedObject": {"kind": "Pod", "name": "p"},
    "related": {"kind": "Node", "name": "n1"}, "message": "assigned", "type": "Normal", "source": {"component": "c", "host": "h"},
    "firstTimestamp": "2026-01-02T03:04:05Z", "lastTimestamp": "2026-01-02T03:04:06Z", "count": 4,
}


def test_to_core_renames_every_field_and_keeps_the_rest() -> None:
    obj = copy.deepcopy(EVENTS)
    out = eventconv.to_core(obj)
    assert out is obj and out == CORE
    assert list(out)[:3] == ["kind", "apiVersion", "metadata"]  # members not renamed keep their place


def test_to_events_renames_every_field_and_keeps_the_rest() -> None:
    obj = copy.deepcopy(CORE)
    assert eventconv.to_events(obj) == EVENTS


def test_round_trips_and_idempotence() -> None:
    obj = copy.deepcopy(EVENTS)
    assert eventconv.to_events(eventconv.to_core(obj)) == EVENTS
    assert eventconv.to_events(copy.deepcopy(EVENTS)) == EVENTS  # already in the view: nothing renamed
    assert eventconv.to_core(eventconv.to_core(copy.deepcopy(EVENTS))) == CORE


def test_minimal_objects_and_missing_api_version() -> None:
    assert eventconv.to_core({"metadata": {"name": "x"}}) == {"metadata": {"name": "x"}, "apiVersion": "v1", "kind": "Event"}
    assert eventconv.to_events({"metadata": {}, "message": "m"}) == {
        "metadata": {}, "note": "m", "apiVersion": "events.k8s.io/v1", "kind": "Event"}


def test_mapping_is_a_bijection() -> None:
    assert len(set(eventconv.TO_CORE.values())) == len(eventconv.TO_CORE)
    assert {v: k for k, v in eventconv.TO_EVENTS.items()} == eventconv.TO_CORE


def test_the_two_resources_share_one_key_space() -> None:
    assert CORE_RT is not None and EVENTS_RT is not None
    assert EVENTS_RT.storage_prefix == CORE_RT.storage_prefix == "/registry/events/"
    assert EVENTS_RT.key("ns", "e") == CORE_RT.key("ns", "e") == b"/registry/events/ns/e"
    assert EVENTS_RT.converts and EVENTS_RT.shares_storage and EVENTS_RT.api_version == "events.k8s.io/v1"
    assert not CORE_RT.converts and not CORE_RT.shares_storage  # the core path is untouched
    other = [rt for rt in R.all() if rt.shares_storage]
    assert other == [EVENTS_RT]


def test_served_view_and_selectors_through_crstore() -> None:
    assert EVENTS_RT is not None and CORE_RT is not None
    assert crstore.to_served(EVENTS_RT, copy.deepcopy(CORE)) == EVENTS
    assert crstore.to_served(CORE_RT, copy.deepcopy(CORE)) == CORE
    seen: list[dict[str, Any]] = []
    match = crstore.reading(EVENTS_RT, lambda o: seen.append(o) is None and "regarding" in o)
    assert match(copy.deepcopy(CORE)) and seen[0] == EVENTS
    assert crstore.reading(EVENTS_RT, match) is match  # never rewritten twice
    plain = lambda o: True  # noqa: E731
    assert crstore.reading(CORE_RT, plain) is plain


def test_one_stored_event_selects_alike_through_both_groups() -> None:
    assert EVENTS_RT is not None and CORE_RT is not None
    assert object_fields(EVENTS_RT, EVENTS) == object_fields(CORE_RT, CORE)
    for label in ("regarding.uid", "reportingController", "source", "type", "reason", "metadata.name"):
        canonical = convert_field_label(EVENTS_RT, label)
        assert canonical in object_fields(CORE_RT, CORE)
    with pytest.raises(ValueError, match="field label not supported: involvedObject.uid"):
        convert_field_label(EVENTS_RT, "involvedObject.uid")


def _codes(errs: list[Any]) -> list[tuple[str, str]]:
    return [(e.field, e.error()) for e in errs]


def test_events_create_validation() -> None:
    assert EVENTS_RT is not None and CORE_RT is not None
    ok = {k: v for k, v in copy.deepcopy(EVENTS).items() if not k.startswith("deprecated")}
    assert kinds.validate_create(EVENTS_RT, ok) == []
    assert "regarding" in ok  # validated on a copy: the request's object is untouched
    bad = copy.deepcopy(EVENTS)
    del bad["eventTime"]
    got = _codes(kinds.validate_create(EVENTS_RT, bad))
    assert got == [
        ("eventTime", "eventTime: Required value"),
        ("firstTimestamp", 'firstTimestamp: Invalid value: "": needs to be unset'),
        ("lastTimestamp", 'lastTimestamp: Invalid value: "": needs to be unset'),
        ("count", 'count: Invalid value: "": needs to be unset'),
        ("source", 'source: Invalid value: "": needs to be unset'),
    ]
    long = {**ok, "reportingInstance": "i" * 129, "action": "a" * 129, "reason": "é" * 65, "note": "n" * 1025,
            "series": {"count": 1}, "type": "Info", "reportingController": ""}
    got = _codes(kinds.validate_create(EVENTS_RT, long))
    assert [f for f, _ in got] == ["reportingController", "reportingController", "reportingController",
                                   "reportingInstance", "action", "reason", "message", "series.count",
                                   "series.lastObservedTime", "type"]
    assert got[3] == ("reportingInstance", 'reportingInstance: Invalid value: "": can have at most 128 characters')
    assert got[6] == ("message", 'message: Invalid value: "": can have at most 1024 characters')
    assert got[9] == ("type", 'type: Invalid value: "": has invalid value: Info')


def test_event_time_rules_for_core_events() -> None:
    assert CORE_RT is not None
    legacy = {"metadata": {"name": "e", "namespace": "ns"}, "involvedObject": {"kind": "Node", "name": "n"}}
    assert _codes(kinds.validate_create(CORE_RT, legacy)) == [
        ("involvedObject.namespace", 'involvedObject.namespace: Invalid value: "": does not match event.namespace')]
    in_system = {**legacy, "metadata": {"name": "e", "namespace": "kube-system"}, "eventTime": "2026-01-02T03:04:05Z",
                 "reportingComponent": "c", "reportingInstance": "i", "action": "a", "reason": "r"}
    assert kinds.validate_create(CORE_RT, in_system) == []  # with eventTime: kube-system may hold it
    assert [e.field for e in kinds.validate_create(CORE_RT, {**in_system, "reason": ""})] == ["reason"]
    # core/v1 requests never get the strict rules (deprecated fields set, type free)
    assert kinds.validate_create(CORE_RT, {**in_system, "count": 3, "type": "Info"}) == []


def test_events_update_validation() -> None:
    assert EVENTS_RT is not None
    old = {k: v for k, v in copy.deepcopy(EVENTS).items() if not k.startswith("deprecated")}
    new = copy.deepcopy(old)
    new["series"] = {"count": 5, "lastObservedTime": "2026-01-02T03:09:05.000000Z"}
    new["metadata"] = {**new["metadata"], "labels": {"a": "b"}}
    assert kinds.validate_update(EVENTS_RT, new, old) == []
    new.update(note="changed", reportingController="other", regarding={"kind": "Pod", "name": "q", "namespace": "default"})
    new["series"] = {"count": 1, "lastObservedTime": "2026-01-02T03:09:05.000000Z"}
    assert [e.field for e in kinds.validate_update(EVENTS_RT, new, old)] == [
        "series.count", "involvedObject", "message", "reportingController"]
    reason = {**old, "reason": "Other"}
    assert [e.field for e in kinds.validate_update(EVENTS_RT, reason, old)] == ["reason", "reason"]


@pytest.mark.parametrize("field", ["deprecatedCount", "deprecatedSource"])
def test_deprecated_fields_zero_values_are_unset(field: str) -> None:
    assert EVENTS_RT is not None
    ok = {k: v for k, v in copy.deepcopy(EVENTS).items() if not k.startswith("deprecated")}
    ok[field] = 0 if field == "deprecatedCount" else {}
    assert kinds.validate_create(EVENTS_RT, ok) == []


def test_event_time_changes_below_a_microsecond_are_not_changes() -> None:
    assert EVENTS_RT is not None
    old = {k: v for k, v in copy.deepcopy(EVENTS).items() if not k.startswith("deprecated")}
    same = {**old, "eventTime": "2026-01-02T03:04:05.000000400Z"}
    assert kinds.validate_update(EVENTS_RT, same, old) == []
    offset = {**old, "eventTime": "2026-01-02T05:04:05.000000+02:00"}
    assert kinds.validate_update(EVENTS_RT, offset, old) == []
    moved = {**old, "eventTime": "2026-01-02T03:04:05.000001Z"}
    assert [e.field for e in kinds.validate_update(EVENTS_RT, moved, old)] == ["eventTime"]


def test_core_requests_name_the_reporting_component() -> None:
    assert CORE_RT is not None
    obj = {"metadata": {"name": "e", "namespace": "default"}, "eventTime": "2026-01-02T03:04:05Z",
           "involvedObject": {"kind": "Node", "name": "n"}, "reportingInstance": "i", "action": "a", "reason": "r"}
    assert [e.field for e in kinds.validate_create(CORE_RT, obj)] == ["reportingComponent"] * 3
