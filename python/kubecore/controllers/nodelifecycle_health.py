"""Is a node still reporting? The node lifecycle controller's health bookkeeping, as pure
functions (upstream node_lifecycle_controller.go tryUpdateNodeHealth and ComputeZoneState).

A kubelet proves it is alive in two ways: it renews its Lease `kube-node-lease/<node>`
(spec.renewTime, every 10 s upstream) and it posts node status (the Ready condition's
lastHeartbeatTime). The controller never trusts those timestamps as clocks (nodes' clocks
skew); it keeps, per node, the *local* time at which it last saw either of them change:

    NodeHealth.probe_timestamp           local time of the last observed heartbeat or renewal
    NodeHealth.ready_transition_timestamp local time the Ready condition last changed
    NodeHealth.status                    the node status as last observed
    NodeHealth.lease_renew               the Lease's renewTime as last observed (None: no lease)

`evaluate(node, health, lease_renew=..., now=..., ...)` folds one observation of a node into that
record and decides. When `now` is later than probe_timestamp + grace period (the node monitor
grace period, or the startup grace period while the node never posted a Ready condition), the
Ready, MemoryPressure, DiskPressure and PIDPressure conditions become Unknown, reason
NodeStatusUnknown, message "Kubelet stopped posting node status." (conditions never posted are
added with reason NodeStatusNeverUpdated, "Kubelet never posted node status."). The caller
writes `Decision.node_to_write` with UpdateStatus and, when that succeeds, keeps
`Decision.health_after_write`; otherwise it keeps `Decision.health`.

Worked example (grace 50 s): a node posts Ready=True at t=0 and renews its lease at t=10, 20;
the controller observes at t=0 (probe 0), t=10 (probe 10), t=20 (probe 20). The kubelet dies.
At t=65 nothing changed and 65 < 20+50: no decision. At t=75 > 70: Ready becomes Unknown, the
status is written, and the returned observed Ready condition is still the old True one (the
next pass observes Unknown and queues the node for the unreachable taint).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Any

from kubecore.controllers.controller_utils import format_time, parse_time
from kubecore.controllers.nodelifecycle_taints import (
    DISK_PRESSURE, MEMORY_PRESSURE, PID_PRESSURE, READY, TRUE, UNKNOWN, get_condition,
)

Obj = dict[str, Any]

CONDITIONS_SET_UNKNOWN = (READY, MEMORY_PRESSURE, DISK_PRESSURE, PID_PRESSURE)
"""Set to Unknown when a node stops reporting (NetworkUnavailable is the control plane's)."""
REASON_UNKNOWN, MESSAGE_UNKNOWN = "NodeStatusUnknown", "Kubelet stopped posting node status."
REASON_NEVER, MESSAGE_NEVER = "NodeStatusNeverUpdated", "Kubelet never posted node status."

STATE_INITIAL, STATE_NORMAL = "Initial", "Normal"
STATE_FULL_DISRUPTION, STATE_PARTIAL_DISRUPTION = "FullDisruption", "PartialDisruption"


@dataclass(frozen=True)
class NodeHealth:
    probe_timestamp: float
    ready_transition_timestamp: float
    status: Obj
    lease_renew: float | None = None


@dataclass(frozen=True)
class Decision:
    health: NodeHealth
    """What to remember when nothing is written, or the write fails."""
    observed_ready: Obj
    """The Ready condition as the node had it before this pass (a fake Unknown when it had none)."""
    current_ready: Obj | None
    """The Ready condition after this pass (None when the node never posted one and is in grace)."""
    grace_period: float
    node_to_write: Obj | None = None
    """The node with conditions set to Unknown, to be written with UpdateStatus."""
    health_after_write: NodeHealth | None = None


def _status(node: Obj) -> Obj:
    s = node.get("status")
    return s if isinstance(s, dict) else {}


def _created(node: Obj) -> float:
    return parse_time((node.get("metadata") or {}).get("creationTimestamp")) or 0.0


def _observe(node: Obj, health: NodeHealth | None, current: Obj | None, *, now: float) -> NodeHealth:
    """Fold the node's status into the health record (the six cases upstream lists)."""
    status = _status(node)
    if current is None:
        if health is not None:
            return replace(health, status=status)
        created = _created(node)
        return NodeHealth(probe_timestamp=created, ready_transition_timestamp=created, status=status)
    saved = get_condition(health.status, READY) if health is not None else None
    if health is None or saved is None:
        return NodeHealth(probe_timestamp=now, ready_transition_timestamp=now, status=status,
                          lease_renew=health.lease_renew if health is not None else None)
    if saved.get("lastHeartbeatTime") != current.get("lastHeartbeatTime"):
        transition = (now if saved.get("lastTransitionTime") != current.get("lastTransitionTime")
                      else health.ready_transition_timestamp)
        return NodeHealth(probe_timestamp=now, ready_transition_timestamp=transition, status=status,
                          lease_renew=health.lease_renew)
    return health


def _set_unknown(node: Obj, *, now: float) -> Obj:
    """A copy of `node` whose kubelet-owned conditions are all Unknown."""
    out = copy.deepcopy(node)
    status = out.setdefault("status", {})
    conditions = status.setdefault("conditions", [])
    stamp = format_time(now)
    for ctype in CONDITIONS_SET_UNKNOWN:
        c = get_condition(status, ctype)
        if c is None:
            conditions.append({"type": ctype, "status": UNKNOWN, "reason": REASON_NEVER, "message": MESSAGE_NEVER,
                               "lastHeartbeatTime": (out.get("metadata") or {}).get("creationTimestamp"),
                               "lastTransitionTime": stamp})
        elif c.get("status") != UNKNOWN:
            c.update(status=UNKNOWN, reason=REASON_UNKNOWN, message=MESSAGE_UNKNOWN, lastTransitionTime=stamp)
    return out


def evaluate(node: Obj, health: NodeHealth | None, *, lease_renew: float | None, now: float,
             monitor_grace: float, startup_grace: float) -> Decision:
    """One observation of `node` (and the renewTime of its Lease, None without one) at `now`."""
    current = get_condition(_status(node), READY)
    if current is None:
        created = (node.get("metadata") or {}).get("creationTimestamp")
        observed: Obj = {"type": READY, "status": UNKNOWN, "lastHeartbeatTime": created,
                         "lastTransitionTime": created}
        grace = startup_grace
    else:
        observed = dict(current)
        grace = monitor_grace
    h = _observe(node, health, current, now=now)
    saved_renew = health.lease_renew if health is not None else None
    if lease_renew is not None and (saved_renew is None or saved_renew < lease_renew):
        h = replace(h, lease_renew=lease_renew, probe_timestamp=now)
    if not now > h.probe_timestamp + grace:
        return Decision(health=h, observed_ready=observed, current_ready=current, grace_period=grace)
    updated = _set_unknown(node, now=now)
    new_ready = get_condition(_status(updated), READY)
    if new_ready == observed:
        return Decision(health=h, observed_ready=observed, current_ready=new_ready, grace_period=grace)
    after = NodeHealth(probe_timestamp=h.probe_timestamp, ready_transition_timestamp=now,
                       status=_status(updated), lease_renew=lease_renew)
    return Decision(health=h, observed_ready=observed, current_ready=new_ready, grace_period=grace,
                    node_to_write=updated, health_after_write=after)


def compute_zone_state(ready_conditions: list[Obj | None], *, unhealthy_threshold: float) -> tuple[int, str]:
    """(not-ready nodes, state) for one zone (ComputeZoneState): FullDisruption when no node is
    Ready, PartialDisruption when more than 2 and at least `unhealthy_threshold` of them are not,
    Normal otherwise."""
    ready = sum(1 for c in ready_conditions if c is not None and c.get("status") == TRUE)
    not_ready = len(ready_conditions) - ready
    if ready == 0 and not_ready > 0:
        return not_ready, STATE_FULL_DISRUPTION
    if not_ready > 2 and not_ready / (not_ready + ready) >= unhealthy_threshold:
        return not_ready, STATE_PARTIAL_DISRUPTION
    return not_ready, STATE_NORMAL


def is_ready_status(condition: Obj | None, status: str = TRUE) -> bool:
    return condition is not None and condition.get("status") == status

