"""One pod's scheduling cycle (upstream schedule_one.go: schedulingCycle, schedulePod).

`schedule_one(fw, pinfo)` runs PreFilter, Filter, PostFilter on failure, PreScore, Score, picks
the node, assumes the pod in the cache, runs Reserve and Permit, and returns either `Assumed`
(go on with the binding cycle, `kubecore.scheduler.binding`) or `Failed` (hand it back to the
queue with `record_failure`; `Failed.message` is what the FailedScheduling event and the
PodScheduled condition say). It does no I/O.

Finding feasible nodes picks one of four ways, all with upstream's results:

    PreFilter narrowed the nodes     per named node: native filter_node, then Python filters
    native plugins, no Python Filter one native call: Filter + Score (+ selection when no Python
                                     Score plugin) over all nodes, numFeasibleNodesToFind inside
    native + Python Filter plugins   one native call listing every natively feasible node, then
                                     the Python filters on those, until numFeasibleNodesToFind pass
    no native plugins                the Python filters over the cache's nodes from a rotating start

A profile without Score plugins stops at the first feasible node (upstream
findNodesThatPassFilters; `nodes_to_find`). Python Score plugins then add their weighted,
normalized scores to the native totals and the host is a random one among the best. A pod with
status.nominatedNodeName tries that node first, before any PreFilter result applies (only the
filters decide, as upstream's evaluateNominatedNode). Nominated pods of equal or higher priority
count on their nodes while a pod is filtered.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from contextlib import nullcontext


from kubecore.scheduler.cache import CacheError
from kubecore.scheduler.fiterror import Diagnosis, FitError, NoNodesAvailable, go_list
from kubecore.scheduler.framework import Framework
from kubecore.scheduler.interface import CLEAR_NOMINATED_NODE, CycleState, NominatingInfo
from kubecore.scheduler.native import NativeResult, rejection_status
from kubecore.scheduler.nominator import status_nominated_node
from kubecore.scheduler.podinfo import NodeInfo, Obj, QueuedPodInfo, with_node_name
from kubecore.scheduler.status import Code, Status, as_status

__all__ = ["Assumed", "Failed", "schedule_one", "num_feasible_nodes_to_find", "nodes_to_find", "select_host",
           "assume_and_reserve", "fail_with_post_filter", "rejection_failure", "record_native", "CycleError"]

MIN_FEASIBLE_NODES = 100
MIN_FEASIBLE_PERCENTAGE = 5
_UU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE


class CycleError(Exception):
    """Ends a cycle with `status` (an Error, or a rejection that is not a FitError)."""

    def __init__(self, status: Status) -> None:
        super().__init__(status.message())
        self.status = status


class Assumed:
    """The scheduling cycle placed the pod: it is assumed on `node`, reserved and permitted (or
    waiting at Permit when `waiting`)."""

    __slots__ = ("pinfo", "pod", "node", "state", "framework", "waiting", "evaluated", "feasible")

    def __init__(self, pinfo: QueuedPodInfo, pod: Obj, node: str, state: CycleState, framework: Framework,
                 *, waiting: bool, evaluated: int = 0, feasible: int = 0) -> None:
        self.pinfo, self.pod, self.node, self.state, self.framework = pinfo, pod, node, state, framework
        self.waiting, self.evaluated, self.feasible = waiting, evaluated, feasible

    def __repr__(self) -> str:
        return f"Assumed({self.pinfo.key} -> {self.node}{', waiting' if self.waiting else ''})"


class Failed:
    """The cycle failed; what the queue and the pod's status need to know."""

    __slots__ = ("pinfo", "status", "fit_error", "nominating")

    def __init__(self, pinfo: QueuedPodInfo, status: Status, *, fit_error: FitError | None = None,
                 nominating: NominatingInfo | None = None) -> None:
        self.pinfo, self.status, self.fit_error, self.nominating = pinfo, status, fit_error, nominating

    @property
    def reason(self) -> str:
        """The PodScheduled condition's reason: Unschedulable or SchedulerError."""
        return "Unschedulable" if self.status.is_rejected() else "SchedulerError"

    @property
    def message(self) -> str:
        return str(self.fit_error) if self.fit_error is not None else self.status.message()

    @property
    def unschedulable_plugins(self) -> frozenset[str]:
        return frozenset(self.fit_error.diagnosis.unschedulable_plugins) if self.fit_error else frozenset()

    @property
    def pending_plugins(self) -> frozenset[str]:
        return frozenset(self.fit_error.diagnosis.pending_plugins) if self.fit_error else frozenset()

    def __repr__(self) -> str:
        return f"Failed({self.pinfo.key}: {self.reason}: {self.message})"


def num_feasible_nodes_to_find(percentage: int, num_all: int) -> int:
    """Upstream numFeasibleNodesToFind: all below 100 nodes, else the percentage (adaptive
    50 - n/125 %, at least 5 %, when 0) of the nodes, at least 100."""
    if num_all < MIN_FEASIBLE_NODES:
        return num_all
    if percentage == 0:
        percentage = max(50 - num_all // 125, MIN_FEASIBLE_PERCENTAGE)
    n = num_all * percentage // 100
    return max(n, MIN_FEASIBLE_NODES)


def nodes_to_find(fw: Framework, num_all: int) -> int:
    """How many feasible nodes end the search (upstream findNodesThatPassFilters): one when the
    profile scores nothing (any feasible node is as good as another; kubecore has no extenders),
    else numFeasibleNodesToFind."""
    if not fw.has_scores:
        return 1
    return num_feasible_nodes_to_find(fw.percentage_of_nodes_to_score, num_all)


def select_host(names: Sequence[str], totals: Sequence[int], rng: random.Random) -> str:
    """A node with the highest total, uniformly among ties (upstream's reservoir sampling)."""
    best = max(totals)
    top = [i for i, t in enumerate(totals) if t == best]
    return names[top[0] if len(top) == 1 else rng.choice(top)]


class _Feasible:
    __slots__ = ("names", "native_scores", "selected", "evaluated", "diagnosis")

    def __init__(self, diagnosis: Diagnosis) -> None:
        self.names: list[str] = []
        self.native_scores: list[int] = []
        self.selected: str | None = None
        self.evaluated = 0
        self.diagnosis = diagnosis


def record_native(fw: Framework, diag: Diagnosis, res: NativeResult, raw: bytes, *, feasible: int) -> None:
    """Count the nodes the kernels rejected into the diagnosis (`feasible`: how many passed).

    Every attribute read of a native result builds a fresh Python object, so callers read each
    one once. A native PreFilter that rejected the pod (NodeAffinity's conflicting terms,
    InterPodAffinity's selector that does not parse) is recorded as upstream's PreFilter failure:
    the message alone, every node's status."""
    failed = res.evaluated - feasible
    if failed <= 0:
        return
    rejected = res.rejected
    if rejected is not None:
        st = rejection_status([rejected], unresolvable=True)
        diag.node_to_status.set_absent(st)
        diag.pre_filter_msg = rejected
        diag.add_plugin_status(st)
        return
    nts = diag.node_to_status
    reasons = res.reasons
    nts.add_native(reasons, failed=failed, unresolvable=res.unresolvable)
    native = fw.native
    if native is not None:
        diag.unschedulable_plugins |= native.plugins_for(reasons)
        cache = fw.handle.cache

        def resolve(node: str) -> Status | None:
            ni = cache.node_info(node)
            return native.node_status(raw, node, everyone=list(ni.pods) if ni is not None else ())

        nts.resolver = resolve


def _nominated_for(fw: Framework, pinfo: QueuedPodInfo) -> list[tuple[str, bytes, str]]:
    nom = fw.handle.nominator
    if not nom:
        return []
    pods: list[tuple[str, bytes, str]] = nom.higher_or_equal_raw(pinfo.priority, exclude=pinfo.key)
    return pods


def _python_filter(fw: Framework, state: CycleState, pod: Obj, ni: NodeInfo) -> Status | None:
    nom = fw.handle.nominator
    if nom:
        return fw.run_filter_with_nominated(state, pod, ni, nom.pods_for_node(ni.name))
    return fw.run_filter(state, pod, ni)


def _reject(f: _Feasible, node: str, st: Status) -> None:
    if st.code is Code.ERROR:
        raise CycleError(st)
    f.diagnosis.node_to_status.set(node, st)
    f.diagnosis.add_plugin_status(st)


def _native_pass(fw: Framework, state: CycleState, pinfo: QueuedPodInfo, f: _Feasible) -> None:
    native = fw.native
    assert native is not None
    raw = pinfo.raw
    with native.nominated(_nominated_for(fw, pinfo)):
        if not fw.filters_left(state):
            res = native.schedule(raw, select=not fw.has_python_scores)
            f.evaluated, f.selected = res.evaluated, res.node
            if f.selected is not None:  # the kernels chose: the feasible list is not needed
                f.names = [f.selected]
                return
            f.names, f.native_scores = res.feasible, res.scores
            record_native(fw, f.diagnosis, res, raw, feasible=len(f.names))
            return
        res = native.schedule_exhaustive(raw)
    feasible, scores = res.feasible, res.scores
    f.evaluated = res.evaluated
    record_native(fw, f.diagnosis, res, raw, feasible=len(feasible))
    cache, pod = fw.handle.cache, pinfo.pod
    want = nodes_to_find(fw, cache.num_nodes)
    for i, name in enumerate(feasible):
        ni = cache.node_info(name)
        if ni is None:
            continue
        st = _python_filter(fw, state, pod, ni)
        if st is not None:
            _reject(f, name, st)
            continue
        f.names.append(name)
        f.native_scores.append(scores[i] if scores else 0)
        if len(f.names) >= want:
            break


def _python_pass(fw: Framework, state: CycleState, pinfo: QueuedPodInfo, f: _Feasible,
                 nodes: list[NodeInfo], *, rotate: bool) -> None:
    cache, pod = fw.handle.cache, pinfo.pod
    n = len(nodes)
    want = nodes_to_find(fw, n)
    start = cache.next_start_index % n if rotate and n else 0
    processed = 0
    native = fw.native if fw.native is not None and fw.native.has_filters else None
    python_filters = fw.filters_left(state)
    with native.nominated(_nominated_for(fw, pinfo)) if native is not None else nullcontext():
        for i in range(n):
            ni = nodes[(start + i) % n]
            processed += 1
            st = native.node_status(pinfo.raw, ni.name, everyone=list(ni.pods)) if native is not None else None
            if st is None and python_filters:
                st = _python_filter(fw, state, pod, ni)
            if st is not None:
                _reject(f, ni.name, st)
                continue
            f.names.append(ni.name)
            if len(f.names) >= want:
                break
    f.evaluated = processed
    if rotate and n:  # upstream: nextStartNodeIndex moves by the nodes processed, modulo all nodes
        cache.next_start_index = (cache.next_start_index + processed) % max(cache.num_nodes, 1)
    if fw.native is not None and fw.native.has_scores and len(f.names) > 1:
        res = fw.native.schedule_exhaustive(pinfo.raw)
        feasible, native_scores = res.feasible, res.scores
        by_node = dict(zip(feasible, native_scores)) if native_scores else {}
        f.native_scores = [by_node.get(name, 0) for name in f.names]


def find_feasible(fw: Framework, state: CycleState, pinfo: QueuedPodInfo) -> _Feasible:
    """PreFilter and Filter (upstream findNodesThatFitPod)."""
    f = _Feasible(Diagnosis())
    pod, cache = pinfo.pod, fw.handle.cache
    pre, s, with_nodes = fw.run_pre_filter(state, pod)
    if with_nodes:  # upstream: the diagnosis starts with the plugins whose PreFilterResult narrowed
        f.diagnosis.unschedulable_plugins.update(with_nodes)
    if s is not None:
        if not s.is_rejected():
            raise CycleError(s)
        f.diagnosis.node_to_status.set_absent(s)
        f.diagnosis.pre_filter_msg = s.message()
        f.diagnosis.add_plugin_status(s)
        return f
    nominated = status_nominated_node(pod)
    allowed = pre.node_names if pre is not None else None
    if nominated:  # tried before the PreFilter result applies, as upstream's evaluateNominatedNode
        ni = cache.node_info(nominated)
        if ni is not None:
            probe = _Feasible(Diagnosis())
            _python_pass(fw, state, pinfo, probe, [ni], rotate=False)
            if probe.names:
                f.names, f.evaluated = probe.names, 1
                return f
    if allowed is not None:
        f.diagnosis.node_to_status.set_absent(
            Status(_UU, f"node(s) didn't satisfy plugin(s) {go_list(sorted(with_nodes))}"))
        _python_pass(fw, state, pinfo, f, [ni for ni in cache.node_infos() if ni.name in allowed], rotate=True)
    elif fw.native is not None:
        _native_pass(fw, state, pinfo, f)
    else:
        _python_pass(fw, state, pinfo, f, cache.node_infos(), rotate=True)
    return f


def _select(fw: Framework, state: CycleState, pinfo: QueuedPodInfo, f: _Feasible) -> str:
    if len(f.names) == 1:
        return f.names[0]
    if f.selected is not None and not fw.has_python_scores:
        return f.selected
    totals = f.native_scores if len(f.native_scores) == len(f.names) else [0] * len(f.names)
    if fw.has_python_scores:
        cache = fw.handle.cache
        nodes = [ni for ni in (cache.node_info(n) for n in f.names) if ni is not None]
        st = fw.run_pre_score(state, pinfo.pod, nodes)
        if st is not None:
            raise CycleError(st)
        python, st = fw.run_score(state, pinfo.pod, nodes)
        if st is not None:
            raise CycleError(st)
        totals = [a + b for a, b in zip(totals, python)]
    return select_host(f.names, totals, fw.handle.rng)


def rejection_failure(pinfo: QueuedPodInfo, status: Status, node: str) -> Failed:
    """A Reserve, Permit or WaitOnPermit rejection as upstream reports it: a FitError over the one
    node, the rejecting plugin recorded as AddPluginStatus does (Pending too)."""
    if not status.is_rejected():
        return Failed(pinfo, status, nominating=CLEAR_NOMINATED_NODE)
    diag = Diagnosis()
    diag.node_to_status.set(node, status)
    diag.add_plugin_status(status)
    fe = FitError(pinfo.pod, 1, diag)
    return Failed(pinfo, Status(status.code).with_error(fe), fit_error=fe, nominating=CLEAR_NOMINATED_NODE)


def fail_with_post_filter(fw: Framework, state: CycleState, pinfo: QueuedPodInfo, fe: FitError) -> Failed:
    """Run PostFilter (preemption) for a pod that fits nowhere."""
    if not fw.plugins.post_filter:
        return Failed(pinfo, Status(Code.UNSCHEDULABLE).with_error(fe), fit_error=fe)
    result, st = fw.run_post_filter(state, pinfo.pod, fe.diagnosis.node_to_status)
    fe.diagnosis.post_filter_msg = st.message()
    nominating = result.nominating_info if result is not None else None
    if nominating is not None and nominating.node:
        # Nominate now, not when the caller records the failure: the later pods of the same
        # batch must see this pod on its node, or their preemption picks the same victims.
        fw.handle.nominator.add(pinfo.pod, nominating)
    return Failed(pinfo, Status(Code.UNSCHEDULABLE).with_error(fe), fit_error=fe, nominating=nominating)


def assume_and_reserve(fw: Framework, state: CycleState, pinfo: QueuedPodInfo, node: str, *,
                       native_added: bool = False, evaluated: int = 0, feasible: int = 0) -> Assumed | Failed:
    """Assume the pod on `node`, then Reserve and Permit (undoing all on a failure)."""
    handle = fw.handle
    assumed = with_node_name(pinfo.pod, node)
    try:
        handle.cache.assume_pod(assumed, node, raw=pinfo.raw, native_added=native_added, key=pinfo.key)
    except CacheError as e:
        if native_added:
            handle.cache.resync_native(pinfo.key)
        return Failed(pinfo, as_status(e), nominating=CLEAR_NOMINATED_NODE)
    handle.nominator.delete(pinfo.key)
    plugins = fw.plugins
    st = fw.run_reserve(state, assumed, node) if plugins.reserve else None
    if st is None:
        st = fw.run_permit(state, assumed, node) if plugins.permit else None
        if st is None or st.code is Code.WAIT:
            return Assumed(pinfo, assumed, node, state, fw, waiting=st is not None, evaluated=evaluated,
                           feasible=feasible)
    fw.run_unreserve(state, assumed, node)
    handle.cache.forget_pod(pinfo.key)
    return rejection_failure(pinfo, st, node)


def resolve_default_spread(fw: Framework, pinfo: QueuedPodInfo) -> None:
    """PodTopologySpread's cluster default constraints for this cycle (they follow the pod's
    Services and controller, which can change between cycles), carried by `pinfo.raw`."""
    if fw.default_spread is not None:
        pinfo.set_default_spread(fw.default_spread.for_pod(pinfo.pod))


def schedule_one(fw: Framework, pinfo: QueuedPodInfo) -> Assumed | Failed:
    """The scheduling cycle of one popped pod (see the module docstring)."""
    state = CycleState()
    resolve_default_spread(fw, pinfo)
    num_nodes = fw.handle.cache.num_nodes
    try:
        if num_nodes == 0:
            raise NoNodesAvailable()
        f = find_feasible(fw, state, pinfo)
        if not f.names:
            return fail_with_post_filter(fw, state, pinfo, FitError(pinfo.pod, num_nodes, f.diagnosis))
        node = _select(fw, state, pinfo, f)
    except NoNodesAvailable as e:
        return Failed(pinfo, Status(_UU).with_error(e), nominating=CLEAR_NOMINATED_NODE)
    except CycleError as e:
        return Failed(pinfo, e.status, nominating=CLEAR_NOMINATED_NODE)
    return assume_and_reserve(fw, state, pinfo, node, evaluated=f.evaluated, feasible=len(f.names))
