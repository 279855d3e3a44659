"""events.k8s.io/v1 Event <-> core/v1 Event: one stored resource, two views.

Upstream keeps a single events resource (etcd key ``/registry/events/<ns>/<name>``, stored as
core/v1 Event); events.k8s.io/v1 is a converted view of it (pkg/apis/events/v1/conversion.go).
Only these fields are named differently; everything else (metadata, ``eventTime``, ``series``,
``related``, ``action``, ``reason``, ``type``, ``reportingInstance``) is the same in both:

    events.k8s.io/v1           core/v1
    regarding                  involvedObject
    note                       message
    deprecatedSource           source
    deprecatedFirstTimestamp   firstTimestamp
    deprecatedLastTimestamp    lastTimestamp
    deprecatedCount            count
    reportingController        reportingComponent

Both functions rewrite a decoded JSON object in place (a renamed key moves to the end: JSON
member order carries no meaning) and set ``apiVersion``/``kind`` of the target view. Renaming is idempotent: converting an object that is
already in the target view changes nothing but ``apiVersion``/``kind``. Fields unknown to both
versions are never stored (the request's field validation drops or refuses them), so a round
trip is lossless.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CORE_API_VERSION", "EVENTS_API_VERSION", "TO_CORE", "TO_EVENTS", "to_core", "to_events"]

Obj = dict[str, Any]

CORE_API_VERSION = "v1"
EVENTS_API_VERSION = "events.k8s.io/v1"

# events.k8s.io/v1 field -> core/v1 field (the only fields named differently).
TO_CORE: dict[str, str] = {
    "regarding": "involvedObject",
    "note": "message",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
    "reportingController": "reportingComponent",
}
TO_EVENTS: dict[str, str] = {core: events for events, core in TO_CORE.items()}


def _rename(obj: Obj, names: dict[str, str], api_version: str) -> Obj:
    for old, new in names.items():
        if old in obj:
            obj[new] = obj.pop(old)
    obj["apiVersion"] = api_version
    obj["kind"] = "Event"
    return obj


def to_core(obj: Obj) -> Obj:
    """An events.k8s.io/v1 Event as core/v1 shows it (Convert_v1_Event_To_core_Event, then core/v1
    out); the object is rewritten in place and returned."""
    return _rename(obj, TO_CORE, CORE_API_VERSION)


def to_events(obj: Obj) -> Obj:
    """A core/v1 Event as events.k8s.io/v1 shows it (Convert_core_Event_To_v1_Event); the object
    is rewritten in place and returned."""
    return _rename(obj, TO_EVENTS, EVENTS_API_VERSION)
