"""PodDisruptionBudget status arithmetic: int-or-percent, expected/desired pods, disrupted-pod
expiry, healthy counts, the status and its DisruptionAllowed condition, the fail-safe status."""

from __future__ import annotations

from typing import Any

import pytest

from kubecore.controllers.controller_utils import format_time
from kubecore.controllers.disruption_status import (
    InvalidIntOrPercent, build_disrupted_pods, count_healthy, desired_healthy, fail_safe_status, needs_scale,
    new_status, scaled_value,
)

Obj = dict[str, Any]
NOW = 1_700_000_000.0


def pdb(spec: Obj, *, generation: int = 1, status: Obj | None = None) -> Obj:
    return {"metadata": {"name": "b", "namespace": "ns", "generation": generation}, "spec": spec,
            "status": status or {}}


def pod(name: str, *, ready: bool = True, deleting: bool = False) -> Obj:
    m: Obj = {"name": name}
    if deleting:
        m["deletionTimestamp"] = format_time(NOW)
    return {"metadata": m, "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_scaled_value() -> None:
    assert scaled_value(2, 10) == 2
    assert scaled_value("50%", 5) == 3 and scaled_value("0%", 5) == 0 and scaled_value("100%", 3) == 3
    with pytest.raises(InvalidIntOrPercent):
        scaled_value("3", 10)


def test_desired_healthy() -> None:
    assert not needs_scale(pdb({"minAvailable": 2}))
    assert desired_healthy(pdb({"minAvailable": 2}), pod_count=4, scale=None) == (4, 2)
    assert needs_scale(pdb({"minAvailable": "60%"}))
    assert desired_healthy(pdb({"minAvailable": "60%"}), pod_count=2, scale=5) == (5, 3)
    assert desired_healthy(pdb({"maxUnavailable": 1}), pod_count=2, scale=3) == (3, 2)
    assert desired_healthy(pdb({"maxUnavailable": "50%"}), pod_count=2, scale=3) == (3, 1)
    assert desired_healthy(pdb({"maxUnavailable": 5}), pod_count=2, scale=3) == (3, 0)


def test_disrupted_pods_expire_after_two_minutes() -> None:
    b = pdb({}, status={"disruptedPods": {"recent": format_time(NOW - 60), "stale": format_time(NOW - 180),
                                          "gone": format_time(NOW - 10), "going": format_time(NOW - 10)}})
    pods = [pod("recent"), pod("stale"), pod("going", deleting=True), pod("other")]
    kept, recheck, expired = build_disrupted_pods(pods, b, NOW)
    assert kept == {"recent": format_time(NOW - 60)}
    assert recheck == NOW + 60 and [p["metadata"]["name"] for p in expired] == ["stale"]
    assert count_healthy(pods, kept, NOW) == 2  # stale and other; recent is disrupted, going is deleting
    assert build_disrupted_pods(pods, pdb({}), NOW) == ({}, None, [])


def test_status_and_condition() -> None:
    b = pdb({"minAvailable": 2})
    st = new_status(b, current_healthy=3, desired=2, expected=3, disrupted={}, now=NOW)
    assert st == {"currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3, "disruptionsAllowed": 1,
                  "observedGeneration": 1, "conditions": [{
                      "type": "DisruptionAllowed", "status": "True", "observedGeneration": 1,
                      "lastTransitionTime": format_time(NOW), "reason": "SufficientPods", "message": ""}]}
    b["status"] = st
    assert new_status(b, current_healthy=3, desired=2, expected=3, disrupted={}, now=NOW + 5) is None
    st2 = new_status(b, current_healthy=2, desired=2, expected=3, disrupted={}, now=NOW + 5)
    assert st2 is not None and st2["disruptionsAllowed"] == 0
    assert st2["conditions"][0]["status"] == "False" and st2["conditions"][0]["reason"] == "InsufficientPods"
    assert st2["conditions"][0]["lastTransitionTime"] == format_time(NOW + 5)
    none_expected = new_status(pdb({"maxUnavailable": 1}), current_healthy=1, desired=0, expected=0, disrupted={},
                               now=NOW)
    assert none_expected is not None and none_expected["disruptionsAllowed"] == 0
    b2 = pdb({"minAvailable": 2}, generation=2, status=st)
    assert new_status(b2, current_healthy=3, desired=2, expected=3, disrupted={}, now=NOW) is not None


def test_fail_safe_status() -> None:
    b = pdb({"minAvailable": 2}, status={"disruptionsAllowed": 3, "observedGeneration": 1, "currentHealthy": 5})
    st = fail_safe_status(b, "found no controllers for pod \"x\"", now=NOW)
    assert st["disruptionsAllowed"] == 0 and st["currentHealthy"] == 5
    assert st["conditions"] == [{"type": "DisruptionAllowed", "status": "False", "observedGeneration": 1,
                                 "lastTransitionTime": format_time(NOW), "reason": "SyncFailed",
                                 "message": "found no controllers for pod \"x\""}]
