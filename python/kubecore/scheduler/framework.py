"""One profile's plugins and upstream's rules for running each extension point (runtime/framework.go).

The rules, per point:

- PreFilter: in order; Skip records the plugin so its Filter (and PreFilter extensions) are
  skipped this cycle; UnschedulableAndUnresolvable stops at once; Unschedulable is remembered
  while the others still run (preemption may use their state); any other failure is an Error.
  Results narrow the nodes (intersection); an empty intersection rejects the pod with
  "node(s) didn't satisfy plugin(s) [A B] simultaneously".
- Filter: per node, in order, stopping at the first plugin that does not succeed.
- PostFilter: until the first Success or UnschedulableAndUnresolvable; otherwise the reasons of
  all are joined, the first rejecting plugin is named and the last non-noop result is kept.
- PreScore: Skip drops that plugin's Score this cycle. Score: every node, then NormalizeScore,
  then each score must be within 0..100 and is multiplied by the plugin's weight.
- Reserve: in order until a failure; Unreserve runs every Reserve plugin in reverse order.
- Permit: a rejection stops at once; Wait (timeout capped at 15 min) parks the pod among the
  waiting pods; the binding cycle then awaits the decision (`wait_on_permit`).
- PreBind: in order until a failure. Bind: until the first plugin that does not Skip.
  PostBind: all, informational.

Native Filter/Score plugins are not in the Python lists: the scheduling cycle runs them in one
native call (`native`) before the Python ones (see `kubecore.scheduler.schedule_one`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kubecore.scheduler.fiterror import NodeToStatus, go_list
from kubecore.scheduler.interface import (
    MAX_NODE_SCORE, MIN_NODE_SCORE, BindPlugin, CycleState, FilterPlugin, NodeScore, NominatingMode, PermitPlugin,
    PostBindPlugin, PostFilterPlugin, PostFilterResult, PreBindPlugin, PreEnqueuePlugin, PreFilterExtensions,
    PreFilterPlugin, PreFilterResult, PreScorePlugin, ReservePlugin, ScoreExtensions, ScorePlugin,
)
from kubecore.scheduler.events import ClusterEvent, QueueingHintFn
from kubecore.scheduler.defaultspread import DefaultSpread
from kubecore.scheduler.native import NativeKernels
from kubecore.scheduler.podinfo import NodeInfo, Obj, pod_key, pod_priority, pod_uid
from kubecore.scheduler.status import Code, Status, as_status
from kubecore.scheduler.waiting import MAX_PERMIT_TIMEOUT, WaitingPod, WaitingPods

__all__ = ["Framework", "PluginLists"]

_U, _UU = Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def _wrap(status: Status, what: str) -> Status:
    """An Error status for an unexpected status, upstream's fmt.Errorf("running ...: %w")."""
    err = status.as_error()
    return as_status(RuntimeError(f"{what}: {err}"), plugin=status.plugin)


@dataclass
class PluginLists:
    """The Python plugins of each extension point, in order (native ones are not listed)."""

    queue_sort: Any = None
    pre_enqueue: list[PreEnqueuePlugin] = field(default_factory=list)
    pre_filter: list[PreFilterPlugin] = field(default_factory=list)
    filter: list[FilterPlugin] = field(default_factory=list)
    post_filter: list[PostFilterPlugin] = field(default_factory=list)
    pre_score: list[PreScorePlugin] = field(default_factory=list)
    score: list[ScorePlugin] = field(default_factory=list)
    reserve: list[ReservePlugin] = field(default_factory=list)
    permit: list[PermitPlugin] = field(default_factory=list)
    pre_bind: list[PreBindPlugin] = field(default_factory=list)
    bind: list[BindPlugin] = field(default_factory=list)
    post_bind: list[PostBindPlugin] = field(default_factory=list)


class Framework:
    """A profile: its plugins per extension point, score weights and the native kernels."""

    def __init__(self, *, name: str, plugins: PluginLists, weights: dict[str, int], native: NativeKernels | None,
                 hints: list[tuple[ClusterEvent, str, QueueingHintFn | None]], percentage_of_nodes_to_score: int,
                 handle: Any, filter_order: Sequence[str] = (), score_order: Sequence[str] = ()) -> None:
        self.name = name
        self.plugins = plugins
        self.weights = weights
        self.native = native
        self.hints = hints
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self.handle = handle
        self.filter_order = list(filter_order)  # every Filter plugin, native and Python, in order
        self.score_order = list(score_order)
        self.waiting_pods = WaitingPods()
        self.unavailable: list[str] = []  # default plugins this build cannot run (dropped)
        self.default_spread: DefaultSpread | None = None  # PodTopologySpread's cluster defaults
        self._pre_filter_ext = [p for p in plugins.pre_filter if isinstance(p, PreFilterExtensions)]
        self._score_ext = {p.name for p in plugins.score if isinstance(p, ScoreExtensions)}

    # ---- properties the cycle looks at -------------------------------------------------------

    @property
    def has_python_filters(self) -> bool:
        return bool(self.plugins.filter)

    def filters_left(self, state: CycleState) -> bool:
        """Whether any Python Filter plugin runs this cycle (PreFilter Skip removes them)."""
        skip = state.skip_filter_plugins
        for pl in self.plugins.filter:
            if pl.name not in skip:
                return True
        return False

    @property
    def has_python_scores(self) -> bool:
        return bool(self.plugins.score)

    @property
    def has_filters(self) -> bool:
        return bool(self.plugins.filter) or (self.native is not None and self.native.has_filters)

    @property
    def has_scores(self) -> bool:
        return bool(self.plugins.score) or (self.native is not None and self.native.has_scores)

    # ---- PreFilter / Filter ------------------------------------------------------------------

    def run_pre_filter(self, state: CycleState, pod: Obj) -> tuple[PreFilterResult | None, Status | None, list[str]]:
        """(narrowing result, status, plugins that narrowed); see the module docstring."""
        skip: set[str] | None = None
        result: PreFilterResult | None = None
        with_nodes: list[str] = []
        rejected: Status | None = None
        try:
            for pl in self.plugins.pre_filter:
                r, s = pl.pre_filter(state, pod)
                if s is not None and s.code is not Code.SUCCESS:
                    if s.code is Code.SKIP:
                        skip = {pl.name} if skip is None else skip | {pl.name}
                        continue
                    s.plugin = pl.name
                    if s.code is _UU:
                        return None, s, []
                    if s.code is _U:
                        rejected = s
                        continue
                    return None, _wrap(s, f'running PreFilter plugin "{pl.name}"'), []
                if r is not None and not r.all_nodes():
                    with_nodes.append(pl.name)
                result = r if result is None else result.merge(r)
                if result is not None and result.node_names is not None and not result.node_names:
                    names = sorted(with_nodes)
                    msg = (f"node(s) didn't satisfy plugin {names[0]}" if len(names) == 1
                           else f"node(s) didn't satisfy plugin(s) {go_list(names)} simultaneously")
                    return result, Status(_UU, msg), with_nodes
            return result, rejected, with_nodes
        finally:
            if skip is not None:
                state.skip_filter_plugins = skip

    def run_filter(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> Status | None:
        """The Python Filter plugins on one node; the first non-success status, named."""
        skip = state.skip_filter_plugins
        for pl in self.plugins.filter:
            if skip and pl.name in skip:
                continue
            s = pl.filter(state, pod, node_info)
            if s is not None and s.code is not Code.SUCCESS:
                if not s.is_rejected():
                    s = _wrap(s, f'running "{pl.name}" filter plugin')
                s.plugin = pl.name
                return s
        return None

    def run_filter_with_nominated(self, state: CycleState, pod: Obj, node_info: NodeInfo,
                                  nominated: Sequence[Obj]) -> Status | None:
        """Filters with equal-or-higher priority nominated pods taken as running, then (when
        that passed and some were added) without them (upstream RunFilterPluginsWithNominatedPods)."""
        prio, uid = pod_priority(pod), pod_uid(pod)
        extra = [p for p in nominated if pod_priority(p) >= prio and (pod_uid(p) != uid or not uid)
                 and pod_key(p) != pod_key(pod)]
        if not extra:
            return self.run_filter(state, pod, node_info)
        state2, ni2 = state.clone(), node_info.with_pods(extra)
        for p in extra:
            s = self.run_pre_filter_add_pod(state2, pod, p, ni2)
            if s is not None:
                return s
        s = self.run_filter(state2, pod, ni2)
        if s is not None:
            return s
        return self.run_filter(state, pod, node_info)

    def run_pre_filter_add_pod(self, state: CycleState, pod: Obj, added: Obj, node_info: NodeInfo) -> Status | None:
        return self._pre_filter_ext_op(state, pod, added, node_info, add=True)

    def run_pre_filter_remove_pod(self, state: CycleState, pod: Obj, removed: Obj,
                                  node_info: NodeInfo) -> Status | None:
        return self._pre_filter_ext_op(state, pod, removed, node_info, add=False)

    def _pre_filter_ext_op(self, state: CycleState, pod: Obj, other: Obj, node_info: NodeInfo, *,
                           add: bool) -> Status | None:
        """PreFilterExtensions AddPod/RemovePod of every PreFilter plugin not skipped this cycle."""
        for pl in self._pre_filter_ext:
            if pl.name in state.skip_filter_plugins:
                continue
            op = pl.add_pod if add else pl.remove_pod
            s = op(state, pod, other, node_info)
            if s is not None and s.code is not Code.SUCCESS:
                return _wrap(s, f'running {"AddPod" if add else "RemovePod"} on PreFilter plugin "{pl.name}"')
        return None

    def dry_run_node(self, state: CycleState, pod: Obj, raw: bytes, node_info: NodeInfo,
                     victims: Sequence[Obj]) -> Status | None:
        """Would `pod` fit on the node if `victims` were gone? Preemption's dry run, in upstream's
        order (SelectVictimsOnNode): the PreFilter plugins' RemovePod for each victim on a copy of
        the state and node (an error there is the answer), then the native filters (one call),
        then the Python filters on that copy."""
        keys = [pod_key(v) for v in victims]
        state2: CycleState | None = None
        ni = node_info
        skip = state.skip_filter_plugins
        if any(pl.name not in skip for pl in self._pre_filter_ext):  # a RemovePod will run
            state2, ni = state.clone(), node_info.without(keys)
            for v in victims:
                s = self.run_pre_filter_remove_pod(state2, pod, v, ni)
                if s is not None:
                    return s
        if self.native is not None and self.native.has_filters:
            st = self.native.node_status(raw, node_info.name, keys, everyone=list(node_info.pods))
            if st is not None:
                return st
        if not self.plugins.filter:
            return None
        if state2 is None:  # no RemovePod ran: copy only for a node the native filters passed
            state2, ni = state.clone(), node_info.without(keys)
        return self.run_filter(state2, pod, ni)

    # ---- PostFilter --------------------------------------------------------------------------

    def run_post_filter(self, state: CycleState, pod: Obj,
                        statuses: NodeToStatus) -> tuple[PostFilterResult | None, Status]:
        result: PostFilterResult | None = None
        reasons: list[str] = []
        rejector = ""
        for pl in self.plugins.post_filter:
            r, s = pl.post_filter(state, pod, statuses)
            if s is None or s.code is Code.SUCCESS:
                return r, s if s is not None else Status()
            if s.code is _UU:
                return r, s.with_plugin(pl.name)
            if not s.is_rejected():
                return None, as_status(s.as_error() or RuntimeError(s.message()), plugin=pl.name)
            if r is not None and r.mode() is not NominatingMode.NOOP:
                result = r  # the last meaningful (non-noop) result
            reasons.extend(s.reasons)
            rejector = rejector or pl.name
        return result, Status(_U, *reasons, plugin=rejector)

    # ---- PreScore / Score --------------------------------------------------------------------

    def run_pre_score(self, state: CycleState, pod: Obj, nodes: list[NodeInfo]) -> Status | None:
        skip: set[str] = set()
        try:
            for pl in self.plugins.pre_score:
                s = pl.pre_score(state, pod, nodes)
                if s is None or s.code is Code.SUCCESS:
                    continue
                if s.code is Code.SKIP:
                    skip.add(pl.name)
                    continue
                return _wrap(s, f'running PreScore plugin "{pl.name}"')
            return None
        finally:
            state.skip_score_plugins = skip

    def run_score(self, state: CycleState, pod: Obj, nodes: list[NodeInfo]) -> tuple[list[int], Status | None]:
        """Weighted, normalized Python scores summed per node (aligned with `nodes`)."""
        totals = [0] * len(nodes)
        for pl in self.plugins.score:
            if pl.name in state.skip_score_plugins:
                continue
            scores: list[NodeScore] = []
            for ni in nodes:
                value, s = pl.score(state, pod, ni)
                if s is not None and s.code is not Code.SUCCESS:
                    return [], as_status(RuntimeError(f'running Score plugins: plugin "{pl.name}" failed with: '
                                                      f'{s.as_error()}'), plugin=pl.name)
                scores.append(NodeScore(ni.name, value))
            if pl.name in self._score_ext:
                assert isinstance(pl, ScoreExtensions)
                s = pl.normalize_score(state, pod, scores)
                if s is not None and s.code is not Code.SUCCESS:
                    return [], as_status(RuntimeError(f'running Normalize on Score plugins: plugin "{pl.name}" '
                                                      f'failed with: {s.as_error()}'), plugin=pl.name)
            weight = self.weights.get(pl.name, 1)
            for i, ns in enumerate(scores):
                if not MIN_NODE_SCORE <= ns.score <= MAX_NODE_SCORE:
                    return [], as_status(RuntimeError(
                        f'applying score defaultWeights on Score plugins: plugin "{pl.name}" returns an invalid '
                        f"score {ns.score}, it should in the range of [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] "
                        "after normalizing"), plugin=pl.name)
                totals[i] += ns.score * weight
        return totals, None

    # ---- Reserve / Permit --------------------------------------------------------------------

    def run_reserve(self, state: CycleState, pod: Obj, node: str) -> Status | None:
        for pl in self.plugins.reserve:
            s = pl.reserve(state, pod, node)
            if s is not None and s.code is not Code.SUCCESS:
                if s.is_rejected():
                    return s.with_plugin(pl.name)
                return _wrap(s.with_plugin(pl.name), f'running Reserve plugin "{pl.name}"')
        return None

    def run_unreserve(self, state: CycleState, pod: Obj, node: str) -> None:
        for pl in reversed(self.plugins.reserve):
            pl.unreserve(state, pod, node)

    def run_permit(self, state: CycleState, pod: Obj, node: str) -> Status | None:
        """None (allowed), a rejection/error, or Wait after parking the pod among the waiting pods."""
        waits: dict[str, float] = {}
        for pl in self.plugins.permit:
            s, timeout = pl.permit(state, pod, node)
            if s is None or s.code is Code.SUCCESS:
                continue
            if s.is_rejected():
                return s.with_plugin(pl.name)
            if s.code is Code.WAIT:
                waits[pl.name] = min(timeout, MAX_PERMIT_TIMEOUT)
                continue
            return _wrap(s.with_plugin(pl.name), f'running Permit plugin "{pl.name}"')
        if not waits:
            return None
        self.waiting_pods.add(WaitingPod(pod, waits, clock=self.handle.clock))
        name = (pod.get("metadata") or {}).get("name", "")
        return Status(Code.WAIT, f'one or more plugins asked to wait and no plugin rejected pod "{name}"')

    async def wait_on_permit(self, pod: Obj) -> Status | None:
        key = pod_key(pod)
        wp = self.waiting_pods.get(key)
        if wp is None:
            return None
        try:
            s = await wp.wait()
        finally:
            self.waiting_pods.remove(key)
        if s.code is Code.SUCCESS:
            return None
        if s.is_rejected():
            return s
        return _wrap(s, "waiting on permit for pod")

    # ---- the binding cycle -------------------------------------------------------------------

    async def run_pre_bind(self, state: CycleState, pod: Obj, node: str) -> Status | None:
        for pl in self.plugins.pre_bind:
            s = await pl.pre_bind(state, pod, node)
            if s is not None and s.code is not Code.SUCCESS:
                if s.is_rejected():
                    return s.with_plugin(pl.name)
                return _wrap(s.with_plugin(pl.name), f'running PreBind plugin "{pl.name}"')
        return None

    async def run_bind(self, state: CycleState, pod: Obj, node: str) -> Status | None:
        status: Status | None = None
        for pl in self.plugins.bind:
            status = await pl.bind(state, pod, node)
            if status is not None and status.code is Code.SKIP:
                continue
            if status is not None and status.code is not Code.SUCCESS:
                if status.is_rejected():
                    return status.with_plugin(pl.name)
                return _wrap(status.with_plugin(pl.name), f'running Bind plugin "{pl.name}"')
            return None
        return status if status is not None else Status(Code.SKIP)  # every plugin skipped, or none ran

    def run_post_bind(self, state: CycleState, pod: Obj, node: str) -> None:
        for pl in self.plugins.post_bind:
            pl.post_bind(state, pod, node)
