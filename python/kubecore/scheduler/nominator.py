"""Nominated pods: pods that preempted others and wait for the room they made (upstream nominator).

A pod is nominated to at most one node. Scheduling cycles of other pods treat nominated pods
of equal or higher priority as already running on their node, so the room preemption made is not
taken by someone else; the nominated pod's own cycle tries its nominated node first.

`add(pod, info)`: the node is `info.node` when the mode is OVERRIDE, else the pod's
status.nominatedNodeName; an empty node removes the nomination.
"""

from __future__ import annotations

import msgspec

from kubecore.scheduler.interface import NominatingInfo, NominatingMode
from kubecore.scheduler.podinfo import Obj, pod_key, pod_priority

__all__ = ["Nominator"]

_encode = msgspec.json.encode
_MAX_LISTS = 64


def status_nominated_node(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("nominatedNodeName") or "")


class Nominator:
    """Pods by nominated node. Invariant: `_node_of[key] == n` iff the pod is in `_by_node[n]`."""

    def __init__(self) -> None:
        self._by_node: dict[str, dict[str, Obj]] = {}
        self._node_of: dict[str, str] = {}
        self._raw: dict[str, bytes] = {}
        """key -> the nominated pod's JSON for the kernels, encoded once per pod version."""
        self._priority: dict[str, int] = {}
        self._lists: dict[tuple[int, str], list[tuple[str, bytes, str]]] = {}
        """`higher_or_equal_raw` answers by (priority, exclude), until the nominations change: a
        cycle asks twice (its filters, then preemption's dry runs)."""

    def add(self, pod: Obj, info: NominatingInfo | None = None) -> None:
        key = pod_key(pod)
        self.delete(key)
        if info is not None and info.mode is NominatingMode.OVERRIDE:
            node = info.node
        else:
            node = status_nominated_node(pod)
        if not node:
            return
        self._lists.clear()
        self._by_node.setdefault(node, {})[key] = pod
        self._node_of[key] = node
        self._raw.pop(key, None)
        self._priority[key] = pod_priority(pod)

    def update(self, old: Obj, new: Obj) -> None:
        """Keep a nomination across a pod update unless the update carries one itself."""
        key = pod_key(new)
        node = self._node_of.get(key)
        if status_nominated_node(new) or node is None:
            self.add(new)
            return
        self._lists.clear()
        self._by_node[node][key] = new
        self._raw.pop(key, None)
        self._priority[key] = pod_priority(new)

    def delete(self, key: str) -> None:
        node = self._node_of.pop(key, None)
        if node is not None:
            self._lists.clear()
        self._raw.pop(key, None)
        self._priority.pop(key, None)
        if node is None:
            return
        pods = self._by_node[node]
        pods.pop(key, None)
        if not pods:
            del self._by_node[node]

    def node_of(self, key: str) -> str | None:
        return self._node_of.get(key)

    def pods_for_node(self, node: str) -> list[Obj]:
        return list((self._by_node.get(node) or {}).values())

    def higher_or_equal(self, priority: int, *, exclude: str) -> list[tuple[str, Obj, str]]:
        """(key, pod, node) of nominated pods with priority >= `priority`, except `exclude`."""
        prio = self._priority
        return [(k, p, n) for n, pods in self._by_node.items() for k, p in pods.items()
                if k != exclude and prio[k] >= priority]

    def higher_or_equal_raw(self, priority: int, *, exclude: str) -> list[tuple[str, bytes, str]]:
        """`higher_or_equal` with each pod as JSON bytes (each encoded once per pod version).
        The list is shared until the nominations change: callers must not modify it."""
        ck = (priority, exclude)
        out = self._lists.get(ck)
        if out is not None:
            return out
        out = []
        raw = self._raw
        for k, p, n in self.higher_or_equal(priority, exclude=exclude):
            b = raw.get(k)
            if b is None:
                b = raw[k] = _encode(p)
            out.append((k, b, n))
        if len(self._lists) >= _MAX_LISTS:
            self._lists.clear()
        self._lists[ck] = out
        return out

    def __len__(self) -> int:
        return len(self._node_of)

    def __bool__(self) -> bool:
        return bool(self._node_of)
