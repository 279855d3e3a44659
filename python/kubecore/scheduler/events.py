"""Cluster events and queueing hints (upstream kube-scheduler framework events).

A plugin that can reject pods says which cluster events might make those pods schedulable again
(`events_to_register`), each with an optional hint function that looks at the event's objects
and answers QUEUE or SKIP for one pod. The scheduling queue calls only the hints of the plugins
that rejected the pod (its unschedulable and pending plugins).

A registered event matches an incoming one when it is the wildcard (`*`, All), or its resource
matches (equal, or `Pod` registered and the incoming event is about an assigned or unscheduled
pod) and the action bits overlap:

    registered Node/Add|UpdateNodeLabel  matches  incoming Node/UpdateNodeLabel
    registered Pod/Delete                matches  incoming AssignedPod/Delete
    registered Node/UpdateNodeTaint      does not match incoming Node/UpdateNodeAllocatable

`pod_scheduling_properties_change` and `node_scheduling_properties_change` turn an update into
the specific update actions (label, taint, allocatable, ... changes) as upstream does.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kubecore.api import quantity

Obj = dict[str, Any]

__all__ = [
    "ActionType", "ClusterEvent", "ClusterEventWithHint", "QueueingHint", "QueueingHintFn",
    "POD", "ASSIGNED_POD", "UNSCHEDULED_POD", "NODE", "PERSISTENT_VOLUME", "PERSISTENT_VOLUME_CLAIM",
    "STORAGE_CLASS", "WILDCARD", "EVENT_ASSIGNED_POD_ADD", "EVENT_ASSIGNED_POD_UPDATE",
    "EVENT_ASSIGNED_POD_DELETE", "EVENT_UNSCHEDULED_POD_ADD", "EVENT_UNSCHEDULED_POD_UPDATE",
    "EVENT_UNSCHEDULED_POD_DELETE", "EVENT_UNSCHEDULABLE_TIMEOUT", "EVENT_FORCE_ACTIVATE",
    "EVENT_NODE_ADD", "EVENT_NODE_DELETE", "unrolled_wildcard", "pod_scheduling_properties_change",
    "node_scheduling_properties_change", "match_any",
]


class ActionType(enum.IntFlag):
    """What happened to an object (bits as upstream's ActionType)."""

    ADD = 1 << 0
    DELETE = 1 << 1
    UPDATE_NODE_ALLOCATABLE = 1 << 2
    UPDATE_NODE_LABEL = 1 << 3
    UPDATE_NODE_TAINT = 1 << 4
    UPDATE_NODE_CONDITION = 1 << 5
    UPDATE_NODE_ANNOTATION = 1 << 6
    UPDATE_POD_LABEL = 1 << 7
    UPDATE_POD_SCALE_DOWN = 1 << 8
    UPDATE_POD_TOLERATIONS = 1 << 9
    UPDATE_POD_SCHEDULING_GATES_ELIMINATED = 1 << 10
    UPDATE_POD_GENERATED_RESOURCE_CLAIM = 1 << 11
    UPDATE_POD_OTHER = 1 << 12
    UPDATE = (UPDATE_NODE_ALLOCATABLE | UPDATE_NODE_LABEL | UPDATE_NODE_TAINT | UPDATE_NODE_CONDITION
              | UPDATE_NODE_ANNOTATION | UPDATE_POD_LABEL | UPDATE_POD_SCALE_DOWN | UPDATE_POD_TOLERATIONS
              | UPDATE_POD_SCHEDULING_GATES_ELIMINATED | UPDATE_POD_GENERATED_RESOURCE_CLAIM
              | UPDATE_POD_OTHER)
    ALL = (1 << 13) - 1


# Resources. Plugins register POD; incoming pod events are about ASSIGNED_POD or UNSCHEDULED_POD.
POD = "Pod"
ASSIGNED_POD = "AssignedPod"
UNSCHEDULED_POD = "UnschedulablePod"
NODE = "Node"
PERSISTENT_VOLUME = "PersistentVolume"
PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"
STORAGE_CLASS = "storage.k8s.io/StorageClass"
CSI_NODE = "storage.k8s.io/CSINode"
POD_DISRUPTION_BUDGET = "policy/PodDisruptionBudget"
WILDCARD = "*"
_REGISTRABLE = (POD, NODE, PERSISTENT_VOLUME, PERSISTENT_VOLUME_CLAIM, STORAGE_CLASS, CSI_NODE)


class QueueingHint(enum.Enum):
    """A hint function's answer for one pod and one event."""

    SKIP = 0
    QUEUE = 1


QueueingHintFn = Callable[[Obj, Any, Any], QueueingHint]
"""(pod, old_obj, new_obj) -> hint. An exception counts as QUEUE (upstream treats errors so)."""


@dataclass(frozen=True)
class ClusterEvent:
    """A resource and the actions on it; `label` names special events (timeouts, activation)."""

    resource: str
    action: ActionType
    label: str = ""

    def is_wildcard(self) -> bool:
        return self.resource == WILDCARD and self.action == ActionType.ALL

    def matches(self, incoming: ClusterEvent) -> bool:
        """Whether this (registered) event covers `incoming`."""
        if self.is_wildcard():
            return True
        r = self.resource
        resource_ok = (r == WILDCARD or r == incoming.resource
                       or (r == POD and incoming.resource in (ASSIGNED_POD, UNSCHEDULED_POD)))
        return resource_ok and bool(self.action & incoming.action)

    def describe(self) -> str:
        if self.label:
            return self.label
        return f"{self.resource}{self.action.name or int(self.action)}"


@dataclass(frozen=True)
class ClusterEventWithHint:
    """A registered event and its hint function (None: always QUEUE)."""

    event: ClusterEvent
    hint: QueueingHintFn | None = None


EVENT_ASSIGNED_POD_ADD = ClusterEvent(ASSIGNED_POD, ActionType.ADD)
EVENT_ASSIGNED_POD_UPDATE = ClusterEvent(ASSIGNED_POD, ActionType.UPDATE)
EVENT_ASSIGNED_POD_DELETE = ClusterEvent(ASSIGNED_POD, ActionType.DELETE)
EVENT_UNSCHEDULED_POD_ADD = ClusterEvent(UNSCHEDULED_POD, ActionType.ADD)
EVENT_UNSCHEDULED_POD_UPDATE = ClusterEvent(UNSCHEDULED_POD, ActionType.UPDATE)
EVENT_UNSCHEDULED_POD_DELETE = ClusterEvent(UNSCHEDULED_POD, ActionType.DELETE)
EVENT_UNSCHEDULABLE_TIMEOUT = ClusterEvent(WILDCARD, ActionType.ALL, "UnschedulableTimeout")
EVENT_FORCE_ACTIVATE = ClusterEvent(WILDCARD, ActionType.ALL, "ForceActivate")
EVENT_NODE_ADD = ClusterEvent(NODE, ActionType.ADD)
EVENT_NODE_DELETE = ClusterEvent(NODE, ActionType.DELETE)

# Labels of the queue's own moves (upstream's special event labels).
SCHEDULE_ATTEMPT_FAILURE = "ScheduleAttemptFailure"
BACKOFF_COMPLETE = "BackoffComplete"
FORCE_ACTIVATE = "ForceActivate"


def unrolled_wildcard() -> list[ClusterEventWithHint]:
    """Every resource with All actions: what a plugin without `events_to_register` gets."""
    return [ClusterEventWithHint(ClusterEvent(r, ActionType.ALL)) for r in _REGISTRABLE]


def match_any(incoming: ClusterEvent, registered: Iterable[ClusterEvent]) -> bool:
    return any(r.matches(incoming) for r in registered)


# ---- what changed in an update ------------------------------------------------------------

def _spec(obj: Obj) -> Obj:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def _labels(obj: Obj) -> Obj:
    return (obj.get("metadata") or {}).get("labels") or {}


def _pod_requests(pod: Obj) -> dict[str, int]:
    """Container requests summed per resource, in milli units (enough to see a scale-down)."""
    out: dict[str, int] = {}
    for c in _spec(pod).get("containers") or ():
        for name, q in ((c.get("resources") or {}).get("requests") or {}).items():
            try:
                out[name] = out.get(name, 0) + quantity.parse_json(q).milli_value()
            except ValueError:
                continue
    return out


def pod_scheduling_properties_change(new: Obj, old: Obj) -> list[ClusterEvent]:
    """The specific update events a pod update amounts to (upstream PodSchedulingPropertiesChange)."""
    resource = ASSIGNED_POD if _spec(new).get("nodeName") else UNSCHEDULED_POD
    actions: list[ActionType] = []
    if _labels(new) != _labels(old):
        actions.append(ActionType.UPDATE_POD_LABEL)
    old_req, new_req = _pod_requests(old), _pod_requests(new)
    if any(name not in new_req or new_req[name] < v for name, v in old_req.items()):
        actions.append(ActionType.UPDATE_POD_SCALE_DOWN)
    if not _spec(new).get("schedulingGates") and _spec(old).get("schedulingGates"):
        actions.append(ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED)
    if len(_spec(new).get("tolerations") or ()) != len(_spec(old).get("tolerations") or ()):
        actions.append(ActionType.UPDATE_POD_TOLERATIONS)
    if not actions:
        actions.append(ActionType.UPDATE_POD_OTHER)
    return [ClusterEvent(resource, a) for a in actions]


def _condition_statuses(node: Obj) -> dict[str, Any]:
    return {c.get("type"): c.get("status") for c in (node.get("status") or {}).get("conditions") or ()}


def node_scheduling_properties_change(new: Obj, old: Obj) -> list[ClusterEvent]:
    """The specific update events a node update amounts to (upstream NodeSchedulingPropertiesChange)."""
    actions: list[ActionType] = []
    if bool(_spec(new).get("unschedulable")) != bool(_spec(old).get("unschedulable")) \
            and not _spec(new).get("unschedulable"):
        actions.append(ActionType.UPDATE_NODE_TAINT)
    if (new.get("status") or {}).get("allocatable") != (old.get("status") or {}).get("allocatable"):
        actions.append(ActionType.UPDATE_NODE_ALLOCATABLE)
    if _labels(new) != _labels(old):
        actions.append(ActionType.UPDATE_NODE_LABEL)
    if (_spec(new).get("taints") or []) != (_spec(old).get("taints") or []):
        actions.append(ActionType.UPDATE_NODE_TAINT)
    if _condition_statuses(new) != _condition_statuses(old):
        actions.append(ActionType.UPDATE_NODE_CONDITION)
    if (new.get("metadata") or {}).get("annotations") != (old.get("metadata") or {}).get("annotations"):
        actions.append(ActionType.UPDATE_NODE_ANNOTATION)
    return [ClusterEvent(NODE, a) for a in actions]
