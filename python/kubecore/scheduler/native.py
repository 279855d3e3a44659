"""The one door to the native Filter/Score kernels (kubecore._native's scheduler classes).

Everything the scheduler asks of rust/sched goes through this module, so the rest of the package
never touches the compiled classes and can run (with Python plugins only) where they are absent.

- `new_snapshot()`: the columnar node snapshot (`NativeSchedSnapshot`) the cache keeps in step.
- `NativeKernels`: one profile's native Filter/Score plugins (a `NativeSchedProfile`) over the
  shared snapshot. `schedule` runs every native filter and score for one pod in one call (GIL
  released, parallel, upstream's numFeasibleNodesToFind and rotating start); `schedule_batch`
  does it for many pods, each assumed at once so the next sees it; `filter_node` answers "does
  the pod fit on this node, without these pods" for preemption's dry runs; `dry_run_lower` and
  `reprieve` do preemption's dry runs for many nodes in one call (pod parsed once, results in
  input order), and `preempt_select` does all of preemption's search when no PDB exists.
- Cycles follow upstream's search: without any Score plugin (native or Python: `select=True`
  and no native score) one feasible node ends it; a pod whose required node affinity terms all
  name nodes (`metadata.name In`, NodeAffinity's PreFilterResult) is filtered on those nodes
  only, the others counted under "node(s) didn't satisfy plugin(s) [NodeAffinity]" (not among
  `evaluated`); a native PreFilter rejection (NodeAffinity's "pod affinity terms conflict",
  InterPodAffinity's "parsing pod: ..." for a selector that does not convert) is every node's
  reason; InterPodAffinity's PreScore error ends the cycle (`schedule` raises `CycleError`).
- Native results report rejected nodes as reason counts. `classify` maps upstream's reason
  strings back to the plugin that gives them and to its code (Unschedulable, or
  UnschedulableAndUnresolvable for NodeName, NodeUnschedulable, NodeAffinity, TaintToleration,
  the missing-label PodTopologySpread case and pod affinity), which is what queueing hints and
  preemption need.

The native classes are looked up by name at call time, so a module built before the scheduler
kernels existed simply reports `native_available() == False`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from contextlib import contextmanager
from collections.abc import Iterator
from typing import Any, Protocol

from kubecore.scheduler.config_args import (
    InterPodAffinityArgs, NodeAffinityArgs, NodeResourcesBalancedAllocationArgs, NodeResourcesFitArgs,
)
from kubecore.scheduler.status import Code, Status, as_status

__all__ = ["NativeUnavailable", "NativeSnapshot", "NativeResult", "NativeKernels", "native_available",
           "new_snapshot", "native_filter_plugins", "native_score_plugins", "classify", "plugin_for_reason",
           "rejection_status", "NATIVE_UNRESOLVABLE_PLUGINS"]


class NativeUnavailable(RuntimeError):
    """The compiled module has no scheduler kernels (built without rust/sched?)."""


class NativeResult(Protocol):
    """One pod's native Filter/Score outcome (NativeScheduleResult)."""

    node: str | None
    feasible: list[str]
    scores: list[int]
    evaluated: int
    reasons: dict[str, int]
    unresolvable: int
    rejected: str | None
    error: str | None


class NativeSnapshot(Protocol):
    """The node snapshot the kernels read (NativeSchedSnapshot); the cache keeps it in step."""

    def set_node(self, node_json: bytes) -> None: ...
    def remove_node(self, name: str) -> bool: ...
    def add_pod(self, key: str, pod_json: bytes, node: str) -> None: ...
    def remove_pod(self, key: str) -> bool: ...
    def nominate(self, pods: list[tuple[str, bytes, str]]) -> int: ...
    def end_nominated(self) -> None: ...
    def node_count(self) -> int: ...
    def pod_count(self) -> int: ...
    def node_names(self) -> list[str]: ...
    def schedule(self, profile: Any, pod_json: bytes, *, select: bool = True) -> NativeResult: ...
    def schedule_batch(self, profile: Any, pods: list[tuple[str, bytes]]) -> list[NativeResult]: ...
    def filter_node(self, profile: Any, pod_json: bytes, node: str, *,
                    without: list[str] = ...) -> list[str]: ...
    def dry_run_lower(self, profile: Any, pod_json: bytes,
                      nodes: list[str]) -> tuple[bytes, list[tuple[list[str], bool]]]: ...
    def reprieve(self, profile: Any, pod_json: bytes, nodes: list[tuple[str, list[str]]]) -> list[list[int]]: ...
    def preempt_select(self, profile: Any, pod_json: bytes, nodes: list[tuple[str, bool]], wanted: int,
                       now: float) -> tuple[tuple[str, list[str]] | None, int, int,
                                            list[tuple[str, list[str], bool]]]: ...


def _module() -> Any:
    try:
        from kubecore import _native
    except ImportError:  # pragma: no cover - the wheel always has it
        return None
    return _native


def native_available() -> bool:
    mod = _module()
    return mod is not None and hasattr(mod, "NativeSchedSnapshot") and hasattr(mod, "NativeSchedProfile")


def _require() -> Any:
    if not native_available():
        raise NativeUnavailable("kubecore._native has no scheduler kernels (NativeSchedSnapshot)")
    return _module()


def new_snapshot() -> NativeSnapshot:
    snap: NativeSnapshot = _require().NativeSchedSnapshot()
    return snap


def native_filter_plugins() -> tuple[str, ...]:
    mod = _module()
    return tuple(getattr(mod, "NATIVE_FILTER_PLUGINS", ())) if native_available() else ()


def native_score_plugins() -> tuple[str, ...]:
    mod = _module()
    return tuple(getattr(mod, "NATIVE_SCORE_PLUGINS", ())) if native_available() else ()


# ---- reasons -> plugin and code ----------------------------------------------------------------

U, UU = Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE
# Checked in order with startswith; the longer PodTopologySpread reason comes first.
_REASONS: list[tuple[str, str, Code]] = [
    ("node(s) didn't match the requested node name", "NodeName", UU),
    ("node(s) were unschedulable", "NodeUnschedulable", UU),
    ("node(s) had untolerated taint", "TaintToleration", UU),
    ("node(s) didn't match Pod's node affinity/selector", "NodeAffinity", UU),
    ("node(s) didn't match scheduler-enforced node affinity", "NodeAffinity", UU),
    ("node(s) didn't have free ports for the requested pod ports", "NodePorts", U),
    ("Insufficient ", "NodeResourcesFit", U),
    ("Too many pods", "NodeResourcesFit", U),
    ("node(s) didn't match pod topology spread constraints (missing required label)", "PodTopologySpread", UU),
    ("node(s) didn't match pod topology spread constraints", "PodTopologySpread", U),
    ("node(s) didn't match pod affinity rules", "InterPodAffinity", UU),
    ("node(s) didn't match pod anti-affinity rules", "InterPodAffinity", U),
    ("node(s) didn't satisfy existing pods anti-affinity rules", "InterPodAffinity", U),
    # Native PreFilter statuses: nodes a PreFilterResult left out, and rejections of every node.
    ("node(s) didn't satisfy plugin(s) [NodeAffinity]", "NodeAffinity", UU),
    ("pod affinity terms conflict", "NodeAffinity", UU),
    ("parsing pod: ", "InterPodAffinity", UU),
]
NATIVE_UNRESOLVABLE_PLUGINS = frozenset({"NodeName", "NodeUnschedulable", "NodeAffinity", "TaintToleration"})


def _is_resource(reason: str) -> bool:
    return reason.startswith("Insufficient ") or reason == "Too many pods"


def plugin_for_reason(reason: str) -> tuple[str, Code] | None:
    for prefix, plugin, code in _REASONS:
        if reason.startswith(prefix):
            return plugin, code
    return None


def classify(reasons: Sequence[str], *, default_plugin: str = "") -> Status | None:
    """The status one node's native rejection amounts to (None when `reasons` is empty).

    The code is UnschedulableAndUnresolvable when any reason comes from such a plugin; unknown
    reasons count as Unschedulable (preemption may still try the node)."""
    if not reasons:
        return None
    code, plugin = U, default_plugin
    for r in reasons:
        known = plugin_for_reason(r)
        if known is not None:
            plugin = plugin or known[0]
            if known[1] is UU:
                code = UU
    return Status(code, *reasons, plugin=plugin)


def rejection_status(reasons: Sequence[str], *, unresolvable: bool) -> Status:
    """The status of a node a native dry run rejected: the failing filter's reasons, named after
    their plugin, UnschedulableAndUnresolvable when that filter said so."""
    st = classify(reasons) or Status(U)
    st.code = UU if unresolvable else U
    return st


# ---- one profile's kernels ---------------------------------------------------------------------

def _cycle_error(e: RuntimeError) -> Exception:
    """The scheduler's CycleError for the RuntimeError the kernels raise when a plugin's Error
    status ends the cycle (as upstream, the cycle fails with that error)."""
    from kubecore.scheduler.schedule_one import CycleError  # schedule_one imports this module
    return CycleError(as_status(e))


def _accepts(cls: Any, kwarg: str) -> bool:
    sig = getattr(cls, "__text_signature__", None) or ""
    return kwarg in sig


class NativeKernels:
    """One profile's native Filter/Score plugins over the scheduler's shared snapshot.

    `filters` and `scores` are the native plugins of the profile, in the profile's order;
    `args` are the typed plugin args: NodeResourcesFit, NodeResourcesBalancedAllocation,
    InterPodAffinity (hardPodAffinityWeight, ignorePreferredTermsOfExistingPods) and NodeAffinity
    (addedAffinity, handed over as JSON).
    """

    def __init__(self, snapshot: NativeSnapshot, *, filters: Sequence[str], scores: Sequence[tuple[str, int]],
                 args: Mapping[str, Any], percentage_of_nodes_to_score: int) -> None:
        self.snapshot = snapshot
        self.filters = list(filters)
        self.scores = list(scores)
        self._kwargs = self._profile_kwargs(args)
        self._percentage = percentage_of_nodes_to_score
        self.profile = self._new_profile(percentage_of_nodes_to_score)
        self._exhaustive: Any = None

    @staticmethod
    def _profile_kwargs(args: Mapping[str, Any]) -> dict[str, Any]:
        fit = args.get("NodeResourcesFit")
        fit = fit if isinstance(fit, NodeResourcesFitArgs) else NodeResourcesFitArgs()
        bal = args.get("NodeResourcesBalancedAllocation")
        bal = bal if isinstance(bal, NodeResourcesBalancedAllocationArgs) else NodeResourcesBalancedAllocationArgs()
        ipa = args.get("InterPodAffinity")
        ipa = ipa if isinstance(ipa, InterPodAffinityArgs) else InterPodAffinityArgs()
        na = args.get("NodeAffinity")
        added = na.added_affinity if isinstance(na, NodeAffinityArgs) else None
        return {
            "fit_strategy": fit.strategy, "fit_resources": list(fit.resources), "rtc_shape": list(fit.shape),
            "ignored_resources": list(fit.ignored_resources),
            "ignored_resource_groups": list(fit.ignored_resource_groups),
            "balanced_resources": list(bal.resources),
            "hard_pod_affinity_weight": ipa.hard_pod_affinity_weight,
            "ignore_preferred_terms_of_existing_pods": ipa.ignore_preferred_terms_of_existing_pods,
            "added_affinity": None if added is None else json.dumps(added).encode(),
        }

    def _new_profile(self, percentage: int) -> Any:
        cls = _require().NativeSchedProfile
        try:
            return cls(filters=self.filters, scores=self.scores, percentage_of_nodes_to_score=percentage,
                       **self._kwargs)
        except (TypeError, ValueError) as e:
            raise NativeUnavailable(f"the native kernels refused the profile: {e}") from e

    @property
    def has_filters(self) -> bool:
        return bool(self.filters)

    @property
    def has_scores(self) -> bool:
        return bool(self.scores)

    def schedule(self, raw: bytes, *, select: bool) -> NativeResult:
        """All native filters (stopping at numFeasibleNodesToFind, or at the first feasible node
        when `select` and the profile scores nothing) and scores for one pod. `select=False`
        means the caller scores too (Python Score plugins). A native plugin's Error status
        (InterPodAffinity's PreScore) raises `CycleError`."""
        try:  # (free in Python 3.11 until something is raised)
            return self.snapshot.schedule(self.profile, raw, select=select)
        except RuntimeError as e:
            raise _cycle_error(e) from e

    def schedule_exhaustive(self, raw: bytes) -> NativeResult:
        """Every feasible node in evaluation order with native scores, no selection: what the
        framework needs when Python filters run after the native ones."""
        if self._exhaustive is None:
            self._exhaustive = self._new_profile(100)
        try:
            return self.snapshot.schedule(self._exhaustive, raw, select=False)
        except RuntimeError as e:
            raise _cycle_error(e) from e

    def schedule_batch(self, pods: list[tuple[str, bytes]]) -> list[NativeResult]:
        return self.snapshot.schedule_batch(self.profile, pods)

    def filter_node(self, raw: bytes, node: str, without: Iterable[str] = ()) -> list[str]:
        """The reasons the pod does not fit on `node` once `without` are gone ([] = fits)."""
        return self.snapshot.filter_node(self.profile, raw, node, without=list(without))

    def dry_run_lower(self, raw: bytes, nodes: list[str]) -> tuple[bytes, list[tuple[list[str], bool]]]:
        """Per node, the pod's fit once every pod of lower priority is gone: one byte per node
        (0 no such pod, 1 fits, 2 rejected) and, per rejected node in order, (reasons,
        unresolvable)."""
        return self.snapshot.dry_run_lower(self.profile, raw, nodes)

    def reprieve(self, raw: bytes, nodes: list[tuple[str, list[str]]]) -> list[list[int]]:
        """Per (node, lower-priority pod keys in reprieve order): the indices of the pods that must
        go for the pod to fit, putting the others back in order (upstream's reprievePod)."""
        return self.snapshot.reprieve(self.profile, raw, nodes)

    def preempt_select(self, raw: bytes, nodes: list[tuple[str, bool]], *, wanted: int,
                       now: float) -> tuple[tuple[str, list[str]] | None, int, int, list[tuple[str, list[str], bool]]]:
        """Preemption without PDBs in one call: nodes (name, cycle status implicit) in visiting
        order; ((chosen node, victim keys most important first) or None, candidates, classified
        potential nodes, [(node, reasons, unresolvable)] of the rejected ones when no candidate)."""
        return self.snapshot.preempt_select(self.profile, raw, nodes, wanted, now)

    def node_status(self, raw: bytes, node: str, without: Iterable[str] = (), *,
                    everyone: Iterable[str] | None = None) -> Status | None:
        """The node's status as upstream's filters give it. A resource shortage is
        UnschedulableAndUnresolvable when the pod would not fit even on the node emptied of
        `everyone` (its pods): the request exceeds the allocatable (upstream NodeResourcesFit)."""
        reasons = self.filter_node(raw, node, without)
        st = classify(reasons)
        if st is not None and st.code is U and everyone is not None and all(_is_resource(r) for r in reasons):
            if self.filter_node(raw, node, everyone):
                st.code = UU
        return st

    def plugins_for(self, reasons: Iterable[str]) -> set[str]:
        """The native filter plugins that gave `reasons` (all of them for an unknown reason)."""
        out: set[str] = set()
        for r in reasons:
            known = plugin_for_reason(r)
            if known is None or known[0] not in self.filters:
                return set(self.filters)
            out.add(known[0])
        return out

    @contextmanager
    def nominated(self, pods: Sequence[tuple[str, bytes, str]]) -> Iterator[None]:
        """Nominated pods (key, json, node) while the block runs: as upstream's
        RunFilterPluginsWithNominatedPods, a node is filtered twice, with its own nominated pods of
        priority >= the pod's added and without them, and must pass both; counts of other nodes
        and scores never see them.

        The snapshot keeps them past the block and, at the next cycle, only adds and removes
        what changed; any other use of the snapshot takes them off first (`nominate`)."""
        if not pods:
            yield
            return
        self.snapshot.nominate(list(pods))
        try:
            yield
        finally:
            self.snapshot.end_nominated()
