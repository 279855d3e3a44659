"""The pod and node records the scheduler passes around.

Pods and nodes stay the API objects (decoded JSON dicts); these wrappers add what the scheduler
reads again and again. Keys are "namespace/name" everywhere (queue, cache, native snapshot,
waiting pods), as upstream's queue keys and the native snapshot's pod keys.

- `QueuedPodInfo`: a pending pod and its queue bookkeeping (attempts, timestamps, the plugins
  that rejected it, the gating PreEnqueue plugin). `raw` is the pod's JSON, encoded once per
  pod version for the native kernels.
- `NodeInfo`: a node and the pods counted on it (bound and assumed), for Python plugins.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set as AbstractSet
from typing import Any

import msgspec

from kubecore.scheduler.events import ClusterEvent

Obj = dict[str, Any]

__all__ = ["Obj", "QueuedPodInfo", "NodeInfo", "pod_key", "pod_priority", "pod_uid", "scheduler_name",
           "with_node_name", "DEFAULT_SCHEDULER_NAME", "node_labels"]

DEFAULT_SCHEDULER_NAME = "default-scheduler"
_NONE: frozenset[str] = frozenset()
_encode = msgspec.json.encode


def pod_key(pod: Obj) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}"


def pod_uid(pod: Obj) -> str:
    return str((pod.get("metadata") or {}).get("uid") or "")


def pod_priority(pod: Obj) -> int:
    """spec.priority, 0 when unset (upstream corev1helpers.PodPriority)."""
    p = (pod.get("spec") or {}).get("priority")
    return p if isinstance(p, int) else 0


def scheduler_name(pod: Obj) -> str:
    return (pod.get("spec") or {}).get("schedulerName") or DEFAULT_SCHEDULER_NAME


def node_labels(node: Obj) -> dict[str, str]:
    return (node.get("metadata") or {}).get("labels") or {}


def with_node_name(pod: Obj, node: str) -> Obj:
    """A shallow copy of `pod` with spec.nodeName set (what the cache assumes)."""
    out = dict(pod)
    out["spec"] = {**(pod.get("spec") or {}), "nodeName": node}
    return out


class QueuedPodInfo:
    """A pod waiting to be scheduled and the queue's record of it.

    Invariants: `key` and `priority` always describe `pod`; `raw` is None or the JSON of `pod`
    (plus its default spread constraints);
    `attempts` counts pops; `timestamp` is the last time the pod was (re)added to the queue;
    `gating_plugin` is the PreEnqueue plugin that last rejected it ("" = not gated).
    """

    __slots__ = ("pod", "key", "priority", "timestamp", "initial_attempt_timestamp", "attempts",
                 "unschedulable_count", "consecutive_errors_count", "unschedulable_plugins",
                 "pending_plugins", "gating_plugin", "gating_plugin_events", "backoff_expiration",
                 "cycle", "_raw", "_default_spread")

    def __init__(self, pod: Obj, *, timestamp: float, raw: bytes | None = None, key: str | None = None) -> None:
        """`raw`: the JSON bytes of `pod` if the caller has them (the informer cache's), else
        encoded on first use; `key`: `pod_key(pod)` if the caller has it."""
        self.pod = pod
        self.key = pod_key(pod) if key is None else key
        self.priority = pod_priority(pod)
        self.timestamp = timestamp
        self.initial_attempt_timestamp: float | None = None
        self.attempts = 0
        self.unschedulable_count = 0
        self.consecutive_errors_count = 0
        self.unschedulable_plugins: AbstractSet[str] = _NONE
        self.pending_plugins: AbstractSet[str] = _NONE
        self.gating_plugin = ""
        self.gating_plugin_events: Sequence[ClusterEvent] = ()
        self.backoff_expiration: float | None = None
        self.cycle = 0
        self._raw: bytes | None = raw
        self._default_spread: Obj | None = None

    @property
    def raw(self) -> bytes:
        """The pod as JSON bytes for the native kernels (encoded on first use, kept until `update`
        or new default spread constraints), with its resolved default spread constraints."""
        raw = self._raw
        if raw is None:
            extra = self._default_spread
            raw = self._raw = _encode(self.pod if extra is None else {**self.pod, "kubecoreDefaultSpread": extra})
        return raw

    def set_default_spread(self, extra: Obj | None) -> None:
        """The pod's cluster default spread constraints for this cycle (see
        `kubecore.scheduler.defaultspread`); `raw` carries them."""
        if extra != self._default_spread:
            self._default_spread = extra
            self._raw = None

    @property
    def uid(self) -> str:
        return pod_uid(self.pod)

    @property
    def gated(self) -> bool:
        return self.gating_plugin != ""

    def update(self, pod: Obj) -> None:
        """Replace the pod object (same key) after an update event."""
        self.pod = pod
        self.priority = pod_priority(pod)
        self._raw = None

    def __repr__(self) -> str:
        return f"QueuedPodInfo({self.key}, attempts={self.attempts})"


class NodeInfo:
    """A node and the pods counted on it (bound or assumed), keyed by pod key.

    `node` is None for a node the cache knows only through pods bound to it (upstream keeps such
    "imaginary" NodeInfos until the node arrives or its pods go).
    """

    __slots__ = ("name", "node", "pods")

    def __init__(self, name: str, node: Obj | None = None, pods: Mapping[str, Obj] | None = None) -> None:
        self.name = name
        self.node = node
        self.pods: dict[str, Obj] = dict(pods) if pods else {}

    @property
    def labels(self) -> dict[str, str]:
        return node_labels(self.node) if self.node is not None else {}

    def without(self, keys: Iterable[str]) -> NodeInfo:
        """A copy without the pods `keys` (preemption's dry runs)."""
        drop = set(keys)
        return NodeInfo(self.name, self.node, {k: p for k, p in self.pods.items() if k not in drop})

    def with_pods(self, pods: Iterable[Obj]) -> NodeInfo:
        """A copy with `pods` added (nominated pods taken as running)."""
        out = NodeInfo(self.name, self.node, self.pods)
        for p in pods:
            out.pods[pod_key(p)] = p
        return out

    def __repr__(self) -> str:
        return f"NodeInfo({self.name}, pods={len(self.pods)})"
