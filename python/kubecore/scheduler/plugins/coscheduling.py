"""Coscheduling: gang scheduling, all members of a pod group placed or none.

The convention (kubecore's, after scheduler-plugins' lightweight coscheduling; no CRD):

    metadata.labels["scheduling.x-k8s.io/pod-group"]         = "<group name>"   (per namespace)
    metadata.annotations["scheduling.x-k8s.io/min-member"]   = "<n>"  (a label of that key also works)

Pods without the group label are left alone. For a member:

- PreFilter: when the `list_pods` service is there, the group must have at least minMember live
  pods, else "pre-filter pod P cannot find enough sibling pods, current pods number: 2,
  minMember of group: 3" (UnschedulableAndUnresolvable; a sibling's creation requeues it).
- Permit: members bound or assumed (this one included) >= minMember: allow every waiting
  sibling and go. Otherwise wait, at most `permitWaitingTimeSeconds` (CoschedulingArgs, 60 s),
  holding the node's resources; pending siblings are activated in the queue meanwhile.
- Unreserve (a member timed out, was rejected, or failed to bind): reject every waiting sibling
  ("rejection in Unreserve"); each of them is unreserved and forgotten in turn, so no partial
  gang keeps resources.
- PostFilter (a member fits nowhere, even after preemption): reject the waiting siblings at once
  rather than at the timeout. With `podGroupBackoffSeconds` (CoschedulingArgs, as
  scheduler-plugins; 0 by default) and at least minMember live pods in the group, the group is
  then refused at PreFilter for that long: "podGroup ns/name failed recently"
  (UnschedulableAndUnresolvable; a node change or a pod deletion requeues its members, which are
  refused again until the time is up). This ends the retry loop of a gang that cannot fit when
  the queue pops from backoffQ (`--feature-gates SchedulerPopFromBackoffQ=true`): its members
  activate each other at Permit, so each rejection sends them straight back.
"""

from __future__ import annotations

from typing import Any

from kubecore.scheduler import events as ev
from kubecore.scheduler.config_args import CoschedulingArgs
from kubecore.scheduler.events import ActionType, ClusterEvent, ClusterEventWithHint, QueueingHint
from kubecore.scheduler.fiterror import NodeToStatus
from kubecore.scheduler.handle import Handle
from kubecore.scheduler.interface import CycleState, PostFilterResult, PreFilterResult
from kubecore.scheduler.podinfo import Obj, pod_key
from kubecore.scheduler.status import Code, Status

__all__ = ["Coscheduling", "POD_GROUP_LABEL", "MIN_MEMBER_KEY", "pod_group"]

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
MIN_MEMBER_KEY = "scheduling.x-k8s.io/min-member"
_SKIP = Status(Code.SKIP)


def pod_group(pod: Obj) -> tuple[str, str, int] | None:
    """(namespace, group, minMember) of a gang member; None for other pods."""
    meta = pod.get("metadata") or {}
    group = (meta.get("labels") or {}).get(POD_GROUP_LABEL)
    if not group:
        return None
    raw = (meta.get("annotations") or {}).get(MIN_MEMBER_KEY) or (meta.get("labels") or {}).get(MIN_MEMBER_KEY)
    try:
        minimum = max(int(str(raw)), 1) if raw is not None else 1
    except ValueError:
        minimum = 1
    return meta.get("namespace") or "default", str(group), minimum


def _live(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed") \
        and not (pod.get("metadata") or {}).get("deletionTimestamp")


class Coscheduling:
    name = "Coscheduling"

    def __init__(self, args: CoschedulingArgs, handle: Handle) -> None:
        self.timeout = float(args.permit_waiting_time_seconds)
        self.backoff = float(args.pod_group_backoff_seconds)
        self._denied: dict[tuple[str, str], float] = {}
        """(namespace, group) -> until when PreFilter refuses it."""
        self.handle = handle
        handle.cache.add_label_index(POD_GROUP_LABEL)

    def _members(self, ns: str, group: str) -> list[Obj]:
        services = self.handle.services
        if services.list_pod_group is not None:  # an index: not a scan of the namespace per cycle
            return [p for p in services.list_pod_group(ns, group) if _live(p)]
        if services.list_pods is None:
            return []
        return [p for p in services.list_pods(ns)
                if ((p.get("metadata") or {}).get("labels") or {}).get(POD_GROUP_LABEL) == group and _live(p)]

    def pre_filter(self, state: CycleState, pod: Obj) -> tuple[PreFilterResult | None, Status | None]:
        g = pod_group(pod)
        if g is None:
            return None, _SKIP
        ns, group, minimum = g
        if self._denied:
            until = self._denied.get((ns, group))
            if until is not None:
                if self.handle.clock.now() < until:
                    return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"podGroup {ns}/{group} failed recently")
                del self._denied[(ns, group)]
        if self.handle.services.list_pods is not None:
            total = len(self._members(ns, group))
            if total < minimum:
                name = (pod.get("metadata") or {}).get("name", "")
                return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                    f"pre-filter pod {name} cannot find enough sibling pods, "
                                    f"current pods number: {total}, minMember of group: {minimum}")
        return None, None

    def permit(self, state: CycleState, pod: Obj, node: str) -> tuple[Status | None, float]:
        g = pod_group(pod)
        if g is None:
            return None, 0.0
        ns, group, minimum = g
        assigned = len(self.handle.cache.pods_with_label(ns, POD_GROUP_LABEL, group))
        if assigned >= minimum:
            for wp in self.handle.framework.waiting_pods:
                if self._same_group(wp.pod, ns, group):
                    wp.allow(self.name)
            return None, 0.0
        for sibling in self._members(ns, group):
            if not (sibling.get("spec") or {}).get("nodeName") and pod_key(sibling) != pod_key(pod):
                state.pods_to_activate[pod_key(sibling)] = sibling
        return Status(Code.WAIT), self.timeout

    def reserve(self, state: CycleState, pod: Obj, node: str) -> Status | None:
        return None

    def unreserve(self, state: CycleState, pod: Obj, node: str) -> None:
        g = pod_group(pod)
        if g is not None:
            self._reject_waiting(g[0], g[1], "rejection in Unreserve", exclude=pod_key(pod))

    def post_filter(self, state: CycleState, pod: Obj,
                    statuses: NodeToStatus) -> tuple[PostFilterResult | None, Status | None]:
        g = pod_group(pod)
        if g is None:
            return None, Status(Code.UNSCHEDULABLE)
        ns, group, _ = g
        name = (pod.get("metadata") or {}).get("name", "")
        msg = f"PodGroup {ns}/{group} gets rejected due to Pod {name} is unschedulable even after PostFilter"
        self._reject_waiting(ns, group, msg, exclude=pod_key(pod))
        if self.backoff > 0 and len(self._members(ns, group)) >= g[2]:
            self._denied[(ns, group)] = self.handle.clock.now() + self.backoff
        return None, Status(Code.UNSCHEDULABLE, msg)

    def _reject_waiting(self, ns: str, group: str, msg: str, *, exclude: str) -> None:
        for wp in self.handle.framework.waiting_pods:
            if wp.key != exclude and self._same_group(wp.pod, ns, group):
                wp.reject(self.name, msg)

    @staticmethod
    def _same_group(pod: Obj, ns: str, group: str) -> bool:
        g = pod_group(pod)
        return g is not None and g[0] == ns and g[1] == group

    def events_to_register(self) -> list[ClusterEventWithHint]:
        a = ActionType
        return [ClusterEventWithHint(ClusterEvent(ev.POD, a.ADD), self._sibling_added),
                ClusterEventWithHint(ClusterEvent(ev.POD, a.DELETE)),
                ClusterEventWithHint(ClusterEvent(ev.NODE, a.ADD | a.UPDATE_NODE_ALLOCATABLE
                                                  | a.UPDATE_NODE_LABEL | a.UPDATE_NODE_TAINT))]

    @staticmethod
    def _sibling_added(pod: Obj, old: Any, new: Any) -> QueueingHint:
        g, other = pod_group(pod), pod_group(new) if isinstance(new, dict) else None
        if g is not None and other is not None and g[:2] == other[:2]:
            return QueueingHint.QUEUE
        return QueueingHint.SKIP


def new(args: Any, handle: Handle) -> Coscheduling:
    return Coscheduling(args if isinstance(args, CoschedulingArgs) else CoschedulingArgs(), handle)
