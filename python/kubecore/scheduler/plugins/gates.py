"""SchedulingGates: a pod with spec.schedulingGates waits in the queue (upstream plugins/schedulinggates).

PreEnqueue rejects a pod whose gates are not all removed ("waiting for scheduling gates: [a b]",
UnschedulableAndUnresolvable), so it sits in the unschedulable pool marked gated and never
reaches a scheduling cycle. The update that removes its last gate (Pod/UpdatePodSchedulingGates-
Eliminated on that same pod) moves it to activeQ.
"""

from __future__ import annotations

from typing import Any

from kubecore.scheduler.events import ActionType, ClusterEvent, ClusterEventWithHint, POD, QueueingHint
from kubecore.scheduler.fiterror import go_list
from kubecore.scheduler.podinfo import Obj, pod_key
from kubecore.scheduler.status import Code, Status

__all__ = ["SchedulingGates"]


class SchedulingGates:
    name = "SchedulingGates"

    def pre_enqueue(self, pod: Obj) -> Status | None:
        gates = (pod.get("spec") or {}).get("schedulingGates") or []
        if not gates:
            return None
        names = [str(g.get("name", "")) for g in gates if isinstance(g, dict)]
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"waiting for scheduling gates: {go_list(names)}")

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [ClusterEventWithHint(ClusterEvent(POD, ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED),
                                     self._gates_eliminated)]

    @staticmethod
    def _gates_eliminated(pod: Obj, old: Any, new: Any) -> QueueingHint:
        if isinstance(new, dict) and pod_key(new) == pod_key(pod):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP


def new(args: Any, handle: Any) -> SchedulingGates:
    return SchedulingGates()
