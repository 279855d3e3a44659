"""The plugin protocol, one small interface per extension point (upstream framework/interface.go).

A plugin is any object with a `name` and the methods of the extension points it implements; the
framework finds them by shape (these protocols are runtime-checkable). Methods take the pod as
the API object (a dict) and return a `Status` or None (= Success). The scheduling cycle is
synchronous; the binding cycle (PreBind, Bind) is async because it may do I/O.

    QueueSort      less(a, b) -> bool                 (or sort_key(pinfo) -> comparable, faster)
    PreEnqueue     pre_enqueue(pod) -> Status | None
    PreFilter      pre_filter(state, pod) -> (PreFilterResult | None, Status | None)
                   + optional add_pod / remove_pod (PreFilterExtensions, used by preemption)
    Filter         filter(state, pod, node_info) -> Status | None
    PostFilter     post_filter(state, pod, statuses) -> (PostFilterResult | None, Status | None)
    PreScore       pre_score(state, pod, nodes) -> Status | None
    Score          score(state, pod, node_info) -> (int, Status | None)
                   + optional normalize_score(state, pod, scores) -> Status | None
    Reserve        reserve(state, pod, node) -> Status | None;  unreserve(state, pod, node)
    Permit         permit(state, pod, node) -> (Status | None, timeout_seconds)
    PreBind        async pre_bind(state, pod, node) -> Status | None
    Bind           async bind(state, pod, node) -> Status | None   (Skip: not mine)
    PostBind       post_bind(state, pod, node)
    (events)       events_to_register() -> list[ClusterEventWithHint]

Scores are 0..100 after normalization (MIN_NODE_SCORE..MAX_NODE_SCORE); the framework then
multiplies them by the plugin's weight.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Set as AbstractSet
from typing import Any, Protocol, runtime_checkable

from kubecore.scheduler.events import ClusterEventWithHint
from kubecore.scheduler.fiterror import NodeToStatus
from kubecore.scheduler.podinfo import NodeInfo, Obj, QueuedPodInfo
from kubecore.scheduler.status import Status

__all__ = [
    "MIN_NODE_SCORE", "MAX_NODE_SCORE", "MAX_TOTAL_SCORE", "CycleState", "PreFilterResult",
    "NominatingMode", "NominatingInfo", "PostFilterResult", "NodeScore", "Plugin", "QueueSortPlugin",
    "SortKeyPlugin", "PreEnqueuePlugin", "PreFilterPlugin", "PreFilterExtensions", "FilterPlugin",
    "PostFilterPlugin", "PreScorePlugin", "ScorePlugin", "ScoreExtensions", "ReservePlugin",
    "PermitPlugin", "PreBindPlugin", "BindPlugin", "PostBindPlugin", "EnqueueExtensions",
]

MIN_NODE_SCORE = 0
MAX_NODE_SCORE = 100
MAX_TOTAL_SCORE = (1 << 63) - 1
_NONE: frozenset[str] = frozenset()


class CycleState:
    """Data plugins share during one pod's scheduling (and binding) cycle.

    Values that have a `clone()` method are cloned by `clone()` (upstream StateData.Clone);
    others are shared. `pods_to_activate` collects pods a plugin wants moved to activeQ at the
    end of a successful scheduling cycle (upstream PodsToActivate). Containers are created on
    first use: most cycles of the default profile write nothing.
    """

    __slots__ = ("_data", "skip_filter_plugins", "skip_score_plugins", "_activate")

    def __init__(self) -> None:
        self._data: dict[str, Any] | None = None
        self.skip_filter_plugins: AbstractSet[str] = _NONE
        self.skip_score_plugins: AbstractSet[str] = _NONE
        self._activate: dict[str, Obj] | None = None

    def read(self, key: str) -> Any:
        """The value written under `key`; KeyError when absent (upstream ErrNotFound)."""
        if self._data is None:
            raise KeyError(key)
        return self._data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return default if self._data is None else self._data.get(key, default)

    def write(self, key: str, value: Any) -> None:
        if self._data is None:
            self._data = {}
        self._data[key] = value

    def delete(self, key: str) -> None:
        if self._data is not None:
            self._data.pop(key, None)

    @property
    def pods_to_activate(self) -> dict[str, Obj]:
        if self._activate is None:
            self._activate = {}
        return self._activate

    def has_pods_to_activate(self) -> bool:
        return bool(self._activate)

    def clone(self) -> CycleState:
        out = CycleState()
        if self._data:
            data: dict[str, Any] = {}
            for k, v in self._data.items():
                clone = getattr(v, "clone", None)
                data[k] = clone() if callable(clone) else v
            out._data = data
        out.skip_filter_plugins = self.skip_filter_plugins
        out.skip_score_plugins = self.skip_score_plugins
        return out


class PreFilterResult:
    """Nodes a PreFilter plugin narrows the search to; `node_names is None` means all nodes."""

    __slots__ = ("node_names",)

    def __init__(self, node_names: Iterable[str] | None = None) -> None:
        self.node_names: set[str] | None = None if node_names is None else set(node_names)

    def all_nodes(self) -> bool:
        return self.node_names is None

    def merge(self, other: PreFilterResult | None) -> PreFilterResult:
        """The intersection of two results (None and all-nodes are neutral)."""
        if other is None or other.node_names is None:
            return self
        if self.node_names is None:
            return PreFilterResult(other.node_names)
        return PreFilterResult(self.node_names & other.node_names)


class NominatingMode(enum.Enum):
    NOOP = 0
    OVERRIDE = 1


class NominatingInfo:
    """What to do with the pod's nominated node after a failed cycle."""

    __slots__ = ("node", "mode")

    def __init__(self, node: str, mode: NominatingMode = NominatingMode.OVERRIDE) -> None:
        self.node = node
        self.mode = mode

    def __repr__(self) -> str:
        return f"NominatingInfo({self.node!r}, {self.mode.name})"


CLEAR_NOMINATED_NODE = NominatingInfo("", NominatingMode.OVERRIDE)


class PostFilterResult:
    """A PostFilter plugin's suggestion (preemption: the node the pod is nominated to)."""

    __slots__ = ("nominating_info",)

    def __init__(self, nominating_info: NominatingInfo | None) -> None:
        self.nominating_info = nominating_info

    @classmethod
    def nominate(cls, node: str) -> PostFilterResult:
        return cls(NominatingInfo(node, NominatingMode.OVERRIDE))

    def mode(self) -> NominatingMode:
        return self.nominating_info.mode if self.nominating_info else NominatingMode.NOOP


class NodeScore:
    """One node's score from one plugin; NormalizeScore rewrites `score` in place."""

    __slots__ = ("name", "score")

    def __init__(self, name: str, score: int) -> None:
        self.name = name
        self.score = score

    def __repr__(self) -> str:
        return f"NodeScore({self.name}, {self.score})"


# ---- extension points -----------------------------------------------------------------------

@runtime_checkable
class Plugin(Protocol):
    name: str


@runtime_checkable
class QueueSortPlugin(Protocol):
    name: str

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool: ...


@runtime_checkable
class SortKeyPlugin(Protocol):
    """A QueueSort plugin that can express its order as a key (a ascending sort of keys)."""

    name: str

    def sort_key(self, pinfo: QueuedPodInfo) -> Any: ...


@runtime_checkable
class PreEnqueuePlugin(Protocol):
    name: str

    def pre_enqueue(self, pod: Obj) -> Status | None: ...


@runtime_checkable
class PreFilterPlugin(Protocol):
    name: str

    def pre_filter(self, state: CycleState, pod: Obj) -> tuple[PreFilterResult | None, Status | None]: ...


@runtime_checkable
class PreFilterExtensions(Protocol):
    """Keep PreFilter state right when a dry run adds or removes pods on a node."""

    name: str

    def add_pod(self, state: CycleState, pod: Obj, pod_to_add: Obj, node_info: NodeInfo) -> Status | None: ...

    def remove_pod(self, state: CycleState, pod: Obj, pod_to_remove: Obj,
                   node_info: NodeInfo) -> Status | None: ...


@runtime_checkable
class FilterPlugin(Protocol):
    name: str

    def filter(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> Status | None: ...


@runtime_checkable
class PostFilterPlugin(Protocol):
    name: str

    def post_filter(self, state: CycleState, pod: Obj,
                    statuses: NodeToStatus) -> tuple[PostFilterResult | None, Status | None]: ...


@runtime_checkable
class PreScorePlugin(Protocol):
    name: str

    def pre_score(self, state: CycleState, pod: Obj, nodes: list[NodeInfo]) -> Status | None: ...


@runtime_checkable
class ScorePlugin(Protocol):
    name: str

    def score(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> tuple[int, Status | None]: ...


@runtime_checkable
class ScoreExtensions(Protocol):
    name: str

    def normalize_score(self, state: CycleState, pod: Obj, scores: list[NodeScore]) -> Status | None: ...


@runtime_checkable
class ReservePlugin(Protocol):
    name: str

    def reserve(self, state: CycleState, pod: Obj, node: str) -> Status | None: ...

    def unreserve(self, state: CycleState, pod: Obj, node: str) -> None: ...


@runtime_checkable
class PermitPlugin(Protocol):
    name: str

    def permit(self, state: CycleState, pod: Obj, node: str) -> tuple[Status | None, float]: ...


@runtime_checkable
class PreBindPlugin(Protocol):
    name: str

    async def pre_bind(self, state: CycleState, pod: Obj, node: str) -> Status | None: ...


@runtime_checkable
class BindPlugin(Protocol):
    name: str

    async def bind(self, state: CycleState, pod: Obj, node: str) -> Status | None: ...


@runtime_checkable
class PostBindPlugin(Protocol):
    name: str

    def post_bind(self, state: CycleState, pod: Obj, node: str) -> None: ...


@runtime_checkable
class EnqueueExtensions(Protocol):
    name: str

    def events_to_register(self) -> list[ClusterEventWithHint]: ...
