"""PrioritySort: the default QueueSort (upstream plugins/queuesort).

Higher spec.priority first; equal priorities by the earlier queue timestamp (when the pod was
last added or came back), so pods of one priority are served in arrival order.
"""

from __future__ import annotations

from typing import Any

from kubecore.scheduler.podinfo import QueuedPodInfo

__all__ = ["PrioritySort"]


class PrioritySort:
    name = "PrioritySort"

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return a.priority > b.priority or (a.priority == b.priority and a.timestamp < b.timestamp)

    def sort_key(self, pinfo: QueuedPodInfo) -> tuple[int, float]:
        """The same order as `less`, as an ascending key (what the queue's heap uses)."""
        return (-pinfo.priority, pinfo.timestamp)


def new(args: Any, handle: Any) -> PrioritySort:
    return PrioritySort()
