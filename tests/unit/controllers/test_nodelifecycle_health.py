"""Node health decisions (`nodelifecycle_health.evaluate`) on the worked example of its module
docstring, with the Lease as heartbeat, a node that never posted status, and zone states."""

from __future__ import annotations

from typing import Any

import pytest

from kubecore.client.clock import FAKE_EPOCH
from kubecore.controllers.controller_utils import format_time
from kubecore.controllers.nodelifecycle_health import (
    STATE_FULL_DISRUPTION, STATE_NORMAL, STATE_PARTIAL_DISRUPTION, NodeHealth, compute_zone_state, evaluate,
)

Obj = dict[str, Any]
T0 = FAKE_EPOCH
GRACE, STARTUP = 50.0, 60.0


def node(*, heartbeat: float | None, status: str = "True", created: float = T0) -> Obj:
    out: Obj = {"metadata": {"name": "n1", "creationTimestamp": format_time(created)}, "status": {}}
    if heartbeat is not None:
        stamp = format_time(heartbeat)
        out["status"]["conditions"] = [
            {"type": "Ready", "status": status, "reason": "KubeletReady", "lastHeartbeatTime": stamp,
             "lastTransitionTime": format_time(T0)},
            {"type": "MemoryPressure", "status": "False", "lastHeartbeatTime": stamp,
             "lastTransitionTime": format_time(T0)}]
    return out


def run(n: Obj, health: NodeHealth | None, *, now: float, lease: float | None = None) -> Any:
    return evaluate(n, health, lease_renew=lease, now=now, monitor_grace=GRACE, startup_grace=STARTUP)


def conditions(n: Obj) -> dict[str, Obj]:
    return {c["type"]: c for c in n["status"]["conditions"]}


def test_worked_example_lease_renewals_then_silence() -> None:
    n = node(heartbeat=T0)
    d = run(n, None, now=T0, lease=T0)
    assert d.health.probe_timestamp == T0 and d.node_to_write is None
    d = run(n, d.health, now=T0 + 10, lease=T0 + 10)  # only the lease moved: still a heartbeat
    d = run(n, d.health, now=T0 + 20, lease=T0 + 20)
    assert d.health.probe_timestamp == T0 + 20
    d = run(n, d.health, now=T0 + 65, lease=T0 + 20)
    assert d.node_to_write is None and d.current_ready["status"] == "True"
    d = run(n, d.health, now=T0 + 75, lease=T0 + 20)
    assert d.node_to_write is not None
    assert d.observed_ready["status"] == "True"  # what the node said before this pass
    assert d.current_ready["status"] == "Unknown"
    written = conditions(d.node_to_write)
    for ctype in ("Ready", "MemoryPressure"):
        assert written[ctype]["status"] == "Unknown"
        assert written[ctype]["reason"] == "NodeStatusUnknown"
        assert written[ctype]["message"] == "Kubelet stopped posting node status."
        assert written[ctype]["lastTransitionTime"] == format_time(T0 + 75)
    for ctype in ("DiskPressure", "PIDPressure"):  # never posted: added as never updated
        assert written[ctype]["status"] == "Unknown" and written[ctype]["reason"] == "NodeStatusNeverUpdated"
        assert written[ctype]["message"] == "Kubelet never posted node status."
    assert conditions(n)["Ready"]["status"] == "True"  # the input was not modified
    assert d.health_after_write is not None and d.health_after_write.ready_transition_timestamp == T0 + 75
    # the next pass sees the written Unknown: nothing more to write, observed is Unknown now
    again = run(d.node_to_write, d.health_after_write, now=T0 + 80, lease=T0 + 20)
    assert again.node_to_write is None and again.observed_ready["status"] == "Unknown"


def test_status_heartbeats_count_without_a_lease() -> None:
    d = run(node(heartbeat=T0), None, now=T0)
    d = run(node(heartbeat=T0 + 40), d.health, now=T0 + 40)
    d = run(node(heartbeat=T0 + 40), d.health, now=T0 + 85)
    assert d.node_to_write is None  # 85 is within 40 + 50
    d = run(node(heartbeat=T0 + 40), d.health, now=T0 + 91)
    assert d.node_to_write is not None


def test_the_node_clock_is_not_trusted() -> None:
    """A heartbeat stamped far in the past still counts when it changes: local time matters."""
    d = run(node(heartbeat=T0 - 3600), None, now=T0)
    d = run(node(heartbeat=T0 - 3590), d.health, now=T0 + 30)
    assert d.health.probe_timestamp == T0 + 30 and d.node_to_write is None


def test_a_node_that_never_posted_status_gets_the_startup_grace_period() -> None:
    n = node(heartbeat=None, created=T0)
    d = run(n, None, now=T0 + 55)
    assert d.grace_period == STARTUP and d.current_ready is None and d.node_to_write is None
    d = run(n, d.health, now=T0 + 61)
    assert d.node_to_write is not None
    ready = conditions(d.node_to_write)["Ready"]
    assert (ready["status"], ready["reason"]) == ("Unknown", "NodeStatusNeverUpdated")
    assert ready["lastHeartbeatTime"] == format_time(T0)


def test_already_unknown_is_not_written_again() -> None:
    n = node(heartbeat=T0, status="Unknown")
    n["status"]["conditions"] = [c | {"status": "Unknown"} for c in n["status"]["conditions"]]
    n["status"]["conditions"] += [{"type": t, "status": "Unknown"} for t in ("DiskPressure", "PIDPressure")]
    d = run(n, None, now=T0)
    d = run(n, d.health, now=T0 + 100)
    assert d.node_to_write is None and d.current_ready["status"] == "Unknown"


@pytest.mark.parametrize(("statuses", "expected"), [
    ([], (0, STATE_NORMAL)),
    (["True", "True"], (0, STATE_NORMAL)),
    (["Unknown"], (1, STATE_FULL_DISRUPTION)),
    (["False", None], (2, STATE_FULL_DISRUPTION)),
    (["True", "False", "Unknown"], (2, STATE_NORMAL)),  # not more than 2 unhealthy
    (["True", "False", "Unknown", "Unknown"], (3, STATE_PARTIAL_DISRUPTION)),  # 3/4 >= 0.55
    (["True", "True", "True", "False", "Unknown", "Unknown"], (3, STATE_NORMAL)),  # 3/6 < 0.55
])
def test_zone_state(statuses: list[str | None], expected: tuple[int, str]) -> None:
    conds = [None if s is None else {"type": "Ready", "status": s} for s in statuses]
    assert compute_zone_state(conds, unhealthy_threshold=0.55) == expected
