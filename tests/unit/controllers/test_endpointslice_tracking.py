"""The trigger-time tracker (the module docstring's worked example) and the slice tracker."""

from __future__ import annotations

from typing import Any

from kubecore.controllers.controller_utils import format_time
from kubecore.controllers.endpointslice_tracking import EndpointSliceTracker, TriggerTimeTracker

Obj = dict[str, Any]
T0 = 1_700_000_000.0


def service(created: float) -> Obj:
    return {"metadata": {"name": "web", "namespace": "ns", "creationTimestamp": format_time(created)}}


def pod(name: str, ready_at: float) -> Obj:
    return {"metadata": {"name": name}, "status": {"conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": format_time(ready_at)}]}}


def test_trigger_time_worked_example() -> None:
    t = TriggerTimeTracker()
    svc = service(T0)
    assert t.compute("ns", svc, [pod("a", T0 + 1)]) == T0
    assert t.compute("ns", svc, [pod("a", T0 + 1), pod("b", T0 + 3), pod("c", T0 + 2)]) == T0 + 2
    assert t.compute("ns", svc, [pod("a", T0 + 1), pod("b", T0 + 3), pod("c", T0 + 2)]) is None
    t.delete_service("ns", "web")
    assert t.compute("ns", svc, []) == T0  # known again from scratch


def es(uid: str, generation: int) -> Obj:
    return {"metadata": {"namespace": "ns", "uid": uid, "generation": generation,
                         "labels": {"kubernetes.io/service-name": "web"}}}


def test_slice_tracker_detects_stale_cache() -> None:
    tr = EndpointSliceTracker()
    svc = service(T0)
    assert not tr.stale_slices(svc, [])
    tr.update(es("a", 2))
    assert tr.stale_slices(svc, [])  # our create is not in the cache yet
    assert tr.stale_slices(svc, [es("a", 1)])  # an older generation
    assert not tr.stale_slices(svc, [es("a", 2)])
    assert not tr.should_sync(es("a", 2)) and tr.should_sync(es("a", 3)) and tr.should_sync(es("b", 1))
    tr.expect_deletion(es("a", 2))
    assert tr.stale_slices(svc, [es("a", 2)])  # deleted by us, still listed
    assert not tr.stale_slices(svc, [])
    assert tr.handle_deletion(es("a", 2)) is False  # our own deletion: no sync needed
    tr.update(es("b", 1))
    assert tr.handle_deletion(es("b", 1)) is True  # someone else deleted it
