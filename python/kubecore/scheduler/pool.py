"""The scheduling queue's unschedulable pool (see `Pool`), apart from the queue's logic."""

from __future__ import annotations

from collections.abc import Callable

from kubecore.scheduler.podinfo import Obj, QueuedPodInfo

__all__ = ["Pool"]


class Pool(dict[str, QueuedPodInfo]):
    """The unschedulable pool: a dict of pods by key that also keeps, on every insert and removal,
    the keys (in pool order) of the pods each frequent event can concern, so those events need
    not visit the whole pool (a pile of pods that fit nowhere is walked by nothing):

    - `on_pod_add`: pods an unscheduled pod's creation may move: gated ones, ones no plugin
      rejected, and ones rejected by a plugin registered for that event (`add_listener`);
    - `on_topology`: pods a bound pod may help: rejected by PodTopologySpread, or with a required
      pod-affinity term.
    """

    def __init__(self, add_listener: Callable[[QueuedPodInfo], bool]) -> None:
        super().__init__()
        self._add_listener = add_listener
        self.on_pod_add: dict[str, None] = {}
        self.on_topology: dict[str, None] = {}

    def __setitem__(self, key: str, p: QueuedPodInfo) -> None:
        super().__setitem__(key, p)
        rejectors = p.unschedulable_plugins | p.pending_plugins
        _mark(self.on_pod_add, key, p.gated or not rejectors or self._add_listener(p))
        _mark(self.on_topology, key, "PodTopologySpread" in p.unschedulable_plugins or _required_affinity(p.pod))

    def setdefault(self, key: str, p: QueuedPodInfo) -> QueuedPodInfo:
        if key not in self:
            self[key] = p
        return self[key]

    def pop(self, key: str, default: QueuedPodInfo | None = None) -> QueuedPodInfo | None:  # type: ignore[override]
        if key not in self:  # the usual case (a new or a bound pod): the indexes only hold pool keys
            return default
        self.on_pod_add.pop(key, None)
        self.on_topology.pop(key, None)
        return super().pop(key, default)

    def __delitem__(self, key: str) -> None:
        self.pop(key)


def _mark(index: dict[str, None], key: str, member: bool) -> None:
    if member:
        index[key] = None
    else:
        index.pop(key, None)


def _required_affinity(pending: Obj) -> bool:
    affinity = (pending.get("spec") or {}).get("affinity") or {}
    return bool((affinity.get("podAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution"))
