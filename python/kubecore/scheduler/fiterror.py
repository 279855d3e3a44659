"""Why a pod fits nowhere: per-node statuses, the diagnosis and upstream's FitError message.

`NodeToStatus` holds the status of every node a cycle rejected. Nodes rejected by Python plugins
are stored one by one (`explicit`); nodes rejected inside the native kernels are only counted
(`native_reasons`: reason -> nodes, `native_failed` nodes in all), because the kernels answer
once per pod, not once per node. `resolver` (when set) recomputes one native-rejected node's
status on demand, which preemption needs. Nodes neither explicit nor native-counted have the
`absent` status (UnschedulableAndUnresolvable with no reason unless set: nodes that a PreFilter
result excluded, or that preemption did not try).

The message, as upstream FitError.Error():

    0/<all> nodes are available: [<PreFilterMsg>.] [<histogram>.] [<PostFilterMsg>]

where the histogram counts each reason once per node, formats "<count> <reason>", sorts those
strings (so "10 ..." sorts before "3 ...", as upstream's sort.Strings does) and is left out
when PreFilter rejected the pod. Example:

    0/5000 nodes are available: 2000 node(s) had untolerated taint(s), 3000 Insufficient cpu.
    preemption: 0/5000 nodes are available: 5000 Preemption is not helpful for scheduling.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from kubecore.scheduler.status import Code, Status

__all__ = ["NodeToStatus", "Diagnosis", "FitError", "NoNodesAvailable", "fit_error_message", "go_list",
           "NO_NODE_AVAILABLE_MSG"]

NO_NODE_AVAILABLE_MSG = "0/{} nodes are available"


def go_list(items: Iterable[str]) -> str:
    """A string slice as Go's %v prints it: [a b c]."""
    return "[" + " ".join(items) + "]"


class NodeToStatus:
    """The status of each rejected node (see the module docstring for the three kinds)."""

    __slots__ = ("explicit", "absent", "native_reasons", "native_failed", "native_unresolvable",
                 "resolver")

    def __init__(self, absent: Status | None = None) -> None:
        self.explicit: dict[str, Status] = {}
        self.absent = absent if absent is not None else Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
        self.native_reasons: dict[str, int] = {}
        self.native_failed = 0
        self.native_unresolvable = 0
        self.resolver: Callable[[str], Status | None] | None = None

    def set(self, node: str, status: Status) -> None:
        self.explicit[node] = status

    def set_absent(self, status: Status) -> None:
        self.absent = status

    def add_native(self, reasons: dict[str, int], *, failed: int, unresolvable: int) -> None:
        for r, n in reasons.items():
            self.native_reasons[r] = self.native_reasons.get(r, 0) + n
        self.native_failed += failed
        self.native_unresolvable += unresolvable

    def get(self, node: str) -> Status:
        """The node's status: explicit, else resolved through the kernels, else the absent one."""
        st = self.explicit.get(node)
        if st is not None:
            return st
        if self.resolver is not None and self.native_failed:
            resolved = self.resolver(node)
            if resolved is not None:
                return resolved
        return self.absent

    def __len__(self) -> int:
        return len(self.explicit) + self.native_failed

    def reason_counts(self, num_all_nodes: int) -> dict[str, int]:
        """How many nodes gave each reason (absent nodes counted with the absent reasons)."""
        counts: dict[str, int] = dict(self.native_reasons)
        for st in self.explicit.values():
            for r in st.reasons:
                counts[r] = counts.get(r, 0) + 1
        absent_n = num_all_nodes - len(self.explicit) - self.native_failed
        if absent_n > 0:
            for r in self.absent.reasons:
                counts[r] = counts.get(r, 0) + absent_n
        return counts


class Diagnosis:
    """What a failed cycle learned: statuses, the rejecting plugins, PreFilter/PostFilter messages."""

    __slots__ = ("node_to_status", "unschedulable_plugins", "pending_plugins", "pre_filter_msg",
                 "post_filter_msg")

    def __init__(self, node_to_status: NodeToStatus | None = None) -> None:
        self.node_to_status = node_to_status if node_to_status is not None else NodeToStatus()
        self.unschedulable_plugins: set[str] = set()
        self.pending_plugins: set[str] = set()
        self.pre_filter_msg = ""
        self.post_filter_msg = ""

    def add_plugin_status(self, status: Status) -> None:
        """Record the plugin of a rejection (upstream Diagnosis.AddPluginStatus)."""
        if not status.plugin:
            return
        if status.is_rejected():
            self.unschedulable_plugins.add(status.plugin)
        if status.code is Code.PENDING:
            self.pending_plugins.add(status.plugin)


def fit_error_message(num_all_nodes: int, diagnosis: Diagnosis) -> str:
    msg = NO_NODE_AVAILABLE_MSG.format(num_all_nodes) + ":"
    if diagnosis.pre_filter_msg:
        msg += f" {diagnosis.pre_filter_msg}."
    else:
        counts = diagnosis.node_to_status.reason_counts(num_all_nodes)
        histogram = sorted(f"{n} {reason}" for reason, n in counts.items())
        if histogram:
            msg += " " + ", ".join(histogram) + "."
    if diagnosis.post_filter_msg:
        msg += f" {diagnosis.post_filter_msg}"
    return msg


class FitError(Exception):
    """The pod fits on no node; str() is upstream's FitError message."""

    def __init__(self, pod: dict[str, Any], num_all_nodes: int, diagnosis: Diagnosis) -> None:
        super().__init__()
        self.pod = pod
        self.num_all_nodes = num_all_nodes
        self.diagnosis = diagnosis

    def __str__(self) -> str:
        return fit_error_message(self.num_all_nodes, self.diagnosis)


class NoNodesAvailable(Exception):
    """The cluster has no nodes at all (upstream ErrNoNodesAvailable)."""

    def __init__(self) -> None:
        super().__init__("no nodes available to schedule pods")
