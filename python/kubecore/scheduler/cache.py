"""The scheduler's cache of nodes and the pods counted on them (upstream backend/cache).

A pod counts on its node from the moment the scheduler assumes it (before Reserve) until it is
bound and seen through the informer (`add_pod`), or forgotten after a failure. The life of a pod
in the cache, as upstream's state machine:

    assume_pod ──> assumed ──finish_binding──> assumed, binding finished ──add_pod──> added
        │                  │                            │ (TTL passed)
        └─ forget_pod <────┘                            └──> expired (removed)
    add_pod (never assumed) ──> added ──update_pod / remove_pod

Assumed pods expire only after their binding finished and `assumed_ttl` passed; a TTL of 0 (the
default, as upstream's durationToExpireAssumedPod) means they never expire.

The cache keeps the native snapshot in step, one call per change: nodes with `set_node` /
`remove_node`, pods with `add_pod` / `remove_pod` (skipped when the kernels already assumed the
pod themselves in `schedule_batch`). Pods bound to a node the cache has not seen yet are kept in
Python and handed to the snapshot when the node arrives. Python plugins read `NodeInfo`s (the
node and its pods); label indexes answer "which pods carry label L=v in namespace N" cheaply.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.scheduler.native import NativeSnapshot
from kubecore.scheduler.podinfo import NodeInfo, Obj, pod_key, pod_priority

__all__ = ["Cache", "CacheError"]

_encode = msgspec.json.encode


class CacheError(Exception):
    """An operation the cache's state machine does not allow (messages as upstream)."""


class _PodState:
    __slots__ = ("pod", "node", "assumed", "binding_finished", "deadline")

    def __init__(self, pod: Obj, node: str, *, assumed: bool) -> None:
        self.pod = pod
        self.node = node
        self.assumed = assumed
        self.binding_finished = False
        self.deadline: float | None = None


def _node_name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _pod_node(pod: Obj) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def _labels(pod: Obj) -> dict[str, str]:
    return (pod.get("metadata") or {}).get("labels") or {}


def _namespace(pod: Obj) -> str:
    return (pod.get("metadata") or {}).get("namespace") or "default"


class Cache:
    """Nodes, bound and assumed pods; see the module docstring for the pod states.

    Invariants: every pod in `_pods` is in `_nodes[node].pods`; a pod is in the native snapshot
    iff its node has a node object; `_order` lists the nodes with a node object, oldest first.
    """

    def __init__(self, *, clock: Clock = REAL_CLOCK, snapshot: NativeSnapshot | None = None,
                 assumed_ttl: float = 0.0) -> None:
        self.clock = clock
        self.snapshot = snapshot
        self.assumed_ttl = assumed_ttl
        self._nodes: dict[str, NodeInfo] = {}
        self._order: list[str] = []
        self._pods: dict[str, _PodState] = {}
        self._label_indexes: dict[str, dict[tuple[str, str], set[str]]] = {}
        self._priorities: dict[int, int] = {}  # spec.priority -> cached pods with it
        self.next_start_index = 0  # the Python filter loop's rotating start (upstream nextStartNodeIndex)

    # ---- nodes -------------------------------------------------------------------------------

    def add_node(self, node: Obj) -> None:
        """Add or replace a node (an informer add or update)."""
        name = _node_name(node)
        ni = self._nodes.get(name)
        if ni is None:
            ni = self._nodes[name] = NodeInfo(name)
        had_node = ni.node is not None
        ni.node = node
        if not had_node:
            self._order.append(name)
        if self.snapshot is not None:
            self.snapshot.set_node(_encode(node))
            if not had_node:
                for key, pod in ni.pods.items():
                    self.snapshot.add_pod(key, _encode(pod), name)

    update_node = add_node

    def remove_node(self, name: str) -> None:
        ni = self._nodes.get(name)
        if ni is None or ni.node is None:
            return
        ni.node = None
        self._order.remove(name)
        if self.snapshot is not None:
            for key in ni.pods:
                self.snapshot.remove_pod(key)
            self.snapshot.remove_node(name)
        if not ni.pods:
            del self._nodes[name]

    def node_info(self, name: str) -> NodeInfo | None:
        ni = self._nodes.get(name)
        return ni if ni is not None and ni.node is not None else None

    def node_infos(self) -> list[NodeInfo]:
        """The nodes with a node object, in the order they were added."""
        nodes = self._nodes
        return [nodes[n] for n in self._order]

    def node_names(self) -> list[str]:
        return list(self._order)

    @property
    def num_nodes(self) -> int:
        return len(self._order)

    # ---- pods: the scheduler's side ------------------------------------------------------------

    def assume_pod(self, pod: Obj, node: str, *, raw: bytes | None = None, native_added: bool = False,
                   key: str | None = None) -> None:
        """Count `pod` (a copy with spec.nodeName set) on `node` before it is bound."""
        if key is None:
            key = pod_key(pod)
        if key in self._pods:
            raise CacheError(f"pod {key} is in the cache, so can't be assumed")
        self._add(key, pod, node, assumed=True, raw=raw, native_added=native_added)

    def finish_binding(self, key: str) -> None:
        """The binding call returned; the assumed pod may expire from now on (after the TTL)."""
        st = self._pods.get(key)
        if st is None or not st.assumed:
            return
        st.binding_finished = True
        if self.assumed_ttl > 0:
            st.deadline = self.clock.now() + self.assumed_ttl

    def forget_pod(self, key: str, node: str | None = None) -> None:
        """Drop an assumed pod (its scheduling or binding failed)."""
        st = self._pods.get(key)
        if st is None:
            raise CacheError(f"pod {key} wasn't assumed so cannot be forgotten")
        if node is not None and st.node != node:
            raise CacheError(f"pod {key} was assumed on {node} but assigned to {st.node}")
        if not st.assumed:
            raise CacheError(f"pod {key} wasn't assumed so cannot be forgotten")
        self._remove(key)

    def is_assumed(self, key: str) -> bool:
        st = self._pods.get(key)
        return st is not None and st.assumed

    def cleanup_assumed_pods(self) -> list[str]:
        """Expire assumed pods whose binding finished more than the TTL ago; their keys."""
        if self.assumed_ttl <= 0:
            return []
        now = self.clock.now()
        expired = [k for k, st in self._pods.items()
                   if st.assumed and st.binding_finished and st.deadline is not None and now > st.deadline]
        for key in expired:
            self._remove(key)
        return expired

    def resync_native(self, key: str) -> None:
        """Make the snapshot hold the cache's version of `key` again (after the kernels assumed a
        pod the cache refused)."""
        if self.snapshot is None:
            return
        self.snapshot.remove_pod(key)
        st = self._pods.get(key)
        if st is not None and self._nodes[st.node].node is not None:
            self.snapshot.add_pod(key, _encode(st.pod), st.node)

    # ---- pods: the informer's side -------------------------------------------------------------

    def add_pod(self, pod: Obj) -> None:
        """A pod bound to a node was observed (confirms an assumed pod)."""
        key, node = pod_key(pod), _pod_node(pod)
        st = self._pods.get(key)
        if st is None:
            self._add(key, pod, node, assumed=False)
            return
        if not st.assumed:
            raise CacheError(f"pod {key} was already in added state")
        if st.node != node:  # bound somewhere else than assumed
            self._remove(key)
            self._add(key, pod, node, assumed=False)
            return
        st.assumed, st.deadline, st.pod = False, None, pod
        self._nodes[node].pods[key] = pod

    def update_pod(self, old: Obj, new: Obj) -> None:
        key = pod_key(new)
        st = self._pods.get(key)
        if st is None:
            raise CacheError(f"pod {key} is not added to scheduler cache, so cannot be updated")
        if st.assumed:
            raise CacheError(f"assumed pod {key} should not be updated")
        node = _pod_node(new)
        if node != st.node or self._scheduling_view(old) != self._scheduling_view(new):
            self._remove(key)
            self._add(key, new, node, assumed=False)
            return
        st.pod = new
        self._nodes[node].pods[key] = new

    def remove_pod(self, pod: Obj) -> None:
        key = pod_key(pod)
        if key not in self._pods:
            raise CacheError(f"pod {key} is not found in scheduler cache, so cannot be removed from it")
        self._remove(key)

    def get_pod(self, key: str) -> Obj | None:
        st = self._pods.get(key)
        return st.pod if st is not None else None

    def pod_node(self, key: str) -> str | None:
        st = self._pods.get(key)
        return st.node if st is not None else None

    def __len__(self) -> int:
        return len(self._pods)

    def min_priority(self) -> float:
        """The lowest spec.priority among cached pods (+inf when there are none)."""
        return min(self._priorities) if self._priorities else float("inf")

    # ---- label indexes -------------------------------------------------------------------------

    def add_label_index(self, label: str) -> None:
        """Index pods by (namespace, value of `label`) from now on (existing pods included)."""
        if label in self._label_indexes:
            return
        idx: dict[tuple[str, str], set[str]] = {}
        self._label_indexes[label] = idx
        for key, st in self._pods.items():
            v = _labels(st.pod).get(label)
            if v is not None:
                idx.setdefault((_namespace(st.pod), v), set()).add(key)

    def pods_with_label(self, namespace: str, label: str, value: str) -> set[str]:
        """Keys of cached pods (bound or assumed) with label=value in `namespace`."""
        return set(self._label_indexes[label].get((namespace, value), ()))

    # ---- internals -----------------------------------------------------------------------------

    @staticmethod
    def _scheduling_view(pod: Obj) -> tuple[object, object]:
        return (pod.get("spec"), _labels(pod))

    def _add(self, key: str, pod: Obj, node: str, *, assumed: bool, raw: bytes | None = None,
             native_added: bool = False) -> None:
        ni = self._nodes.get(node)
        if ni is None:
            ni = self._nodes[node] = NodeInfo(node)
        ni.pods[key] = pod
        self._pods[key] = _PodState(pod, node, assumed=assumed)
        prio = pod_priority(pod)
        self._priorities[prio] = self._priorities.get(prio, 0) + 1
        if self.snapshot is not None and not native_added and ni.node is not None:
            self.snapshot.add_pod(key, raw if raw is not None else _encode(pod), node)
        if self._label_indexes:
            self._index(key, pod, add=True)

    def _remove(self, key: str) -> None:
        st = self._pods.pop(key)
        prio = pod_priority(st.pod)
        left = self._priorities[prio] - 1
        if left:
            self._priorities[prio] = left
        else:
            del self._priorities[prio]
        ni = self._nodes.get(st.node)
        if ni is not None:
            ni.pods.pop(key, None)
            if ni.node is None and not ni.pods:
                del self._nodes[st.node]
            elif self.snapshot is not None and ni.node is not None:
                self.snapshot.remove_pod(key)
        if self._label_indexes:
            self._index(key, st.pod, add=False)

    def _index(self, key: str, pod: Obj, *, add: bool) -> None:
        labels, ns = _labels(pod), _namespace(pod)
        for label, idx in self._label_indexes.items():
            v = labels.get(label)
            if v is None:
                continue
            if add:
                idx.setdefault((ns, v), set()).add(key)
            else:
                keys = idx.get((ns, v))
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del idx[(ns, v)]

    def pods_on(self, nodes: Iterable[str]) -> dict[str, list[Obj]]:
        """The pods counted on each of `nodes` (missing nodes give empty lists)."""
        out: dict[str, list[Obj]] = {}
        for n in nodes:
            ni = self._nodes.get(n)
            out[n] = list(ni.pods.values()) if ni is not None else []
        return out
