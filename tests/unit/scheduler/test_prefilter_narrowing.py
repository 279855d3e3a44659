"""NodeAffinity's PreFilterResult (upstream findNodesThatFitPod): a pod whose required node
affinity terms all name nodes (`matchFields: metadata.name In [...]`, what the DaemonSet controller
writes) is filtered on those nodes only; every other node has the status UnschedulableAndUnresolvable
"node(s) didn't satisfy plugin(s) [NodeAffinity]".

Two modes give the same chosen node, diagnosis and message: `native`, the kernels' NodeAffinity
(rust/sched), and `python`, a Python plugin named NodeAffinity that returns the PreFilterResult
(the framework's own narrowing path in schedule_one.find_feasible) with a Python fit filter.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubecore.scheduler.interface import CycleState, PreFilterResult
from kubecore.scheduler.podinfo import NodeInfo, Obj
from kubecore.scheduler.registry import SchedulerCore
from kubecore.scheduler.schedule_one import Assumed, Failed, schedule_one
from kubecore.scheduler.status import Code, Status
from tests.unit.scheduler.helpers import build, config, needs_native, node, pod, python_profile

PROFILE = "default-scheduler"
LEFT_OUT = "node(s) didn't satisfy plugin(s) [NodeAffinity]"
UU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def _names(p: Obj) -> list[list[list[str]]]:
    """Per required term, the values of its `metadata.name In` requirements."""
    aff = (p.get("spec") or {}).get("affinity") or {}
    sel = (aff.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    return [[list(r.get("values") or []) for r in (t.get("matchFields") or [])
             if r.get("key") == "metadata.name" and r.get("operator") == "In"]
            for t in sel.get("nodeSelectorTerms") or []]


class NodeNameAffinity:
    """A Python stand-in for NodeAffinity's metadata.name part: upstream's PreFilter (intersection
    per term, union over terms, "pod affinity terms conflict" when empty) and a Filter on the name."""

    name = "NodeAffinity"

    def pre_filter(self, state: CycleState, p: Obj) -> tuple[PreFilterResult | None, Status | None]:
        terms = _names(p)
        if not terms or any(not reqs for reqs in terms):
            return None, None
        names: set[str] = set()
        for reqs in terms:
            names |= set.intersection(*(set(v) for v in reqs))
        if not names:
            return None, Status(UU, "pod affinity terms conflict")
        return PreFilterResult(names), None

    def filter(self, state: CycleState, p: Obj, info: NodeInfo) -> Status | None:
        terms = _names(p)
        if not terms or any(all(len(v) == 1 and v[0] == info.name for v in reqs) for reqs in terms if reqs):
            return None
        return Status(UU, "node(s) didn't match Pod's node affinity/selector")


FIT = {"native": "NodeResourcesFit", "python": "CpuFit"}
MODES = [pytest.param("native", marks=needs_native), "python"]


def _core(mode: str, nodes: list[str], *, cpu: dict[str, str] | None = None) -> SchedulerCore:
    """NodeAffinity (PreFilter and Filter) and the fit filter; no Score plugin. (The kernels'
    NodeAffinity is enabled as a filter; its PreFilter is part of it.)"""
    points: dict[str, Any] = {"filter": {"enabled": [{"name": "NodeAffinity"}, {"name": FIT[mode]}]}}
    if mode == "python":
        points["preFilter"] = {"enabled": [{"name": "NodeAffinity"}]}
    prof = python_profile(**points)
    if mode == "native":
        core, _, _ = build(config([prof]), native=True)
    else:
        core, _, _ = build(config([prof]), out_of_tree={"NodeAffinity": lambda a, h: NodeNameAffinity()})
    for n in nodes:
        core.cache.add_node(node(n, cpu=(cpu or {}).get(n, "4")))
    return core


def _pinned(name: str, *terms: list[str], cpu: str = "100m") -> Obj:
    """A DaemonSet-style pod: one required term per entry of `terms`, each a matchFields
    `metadata.name In [n]` per name (ANDed)."""
    node_terms = [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [n]} for n in t]}
                  for t in terms]
    affinity: dict[str, Any] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                                 {"nodeSelectorTerms": node_terms}}}
    return pod(name, cpu=cpu, affinity=affinity)


def _cycle(core: SchedulerCore, p: Obj) -> Assumed | Failed:
    core.queue.add(p)
    pinfo = core.queue.pop()
    assert pinfo is not None
    return schedule_one(core.frameworks[PROFILE], pinfo)


@pytest.mark.parametrize("mode", MODES)
def test_daemonset_pod_is_checked_against_its_node_only(mode: str) -> None:
    core = _core(mode, ["node-a", "node-b", "node-c"])
    out = _cycle(core, _pinned("ds-b", ["node-b"]))
    assert isinstance(out, Assumed)
    assert (out.node, out.evaluated, out.feasible) == ("node-b", 1, 1)


@pytest.mark.parametrize("mode", MODES)
def test_named_node_that_does_not_fit(mode: str) -> None:
    core = _core(mode, ["node-a", "node-b", "node-c"], cpu={"node-b": "1"})
    out = _cycle(core, _pinned("ds-b", ["node-b"], cpu="2"))
    assert isinstance(out, Failed) and out.fit_error is not None
    assert out.reason == "Unschedulable"
    assert out.message == f"0/3 nodes are available: 1 Insufficient cpu, 2 {LEFT_OUT}."
    assert out.unschedulable_plugins == {"NodeAffinity", FIT[mode]}
    nts = out.fit_error.diagnosis.node_to_status
    assert len(nts) == 1, "only node-b was evaluated (upstream NodeToStatus.Len)"
    assert nts.get("node-b").reasons == ["Insufficient cpu"]
    for other in ("node-a", "node-c"):  # preemption skips them
        assert nts.get(other).code is UU


@pytest.mark.parametrize("mode", MODES)
def test_terms_are_ored_and_requirements_anded(mode: str) -> None:
    core = _core(mode, ["node-a", "node-b", "node-c", "node-d"], cpu={"node-b": "1", "node-d": "1"})
    p = _pinned("p", ["node-b", "node-b"], ["node-d"], ["gone"], cpu="2")
    out = _cycle(core, p)
    assert isinstance(out, Failed)
    assert out.message == f"0/4 nodes are available: 2 Insufficient cpu, 2 {LEFT_OUT}."


@pytest.mark.parametrize("mode", MODES)
def test_only_unknown_nodes_named(mode: str) -> None:
    core = _core(mode, ["node-a", "node-b"])
    out = _cycle(core, _pinned("orphan", ["node-gone"]))
    assert isinstance(out, Failed) and out.fit_error is not None
    assert out.message == f"0/2 nodes are available: 2 {LEFT_OUT}."
    assert "NodeAffinity" in out.unschedulable_plugins
    nts = out.fit_error.diagnosis.node_to_status
    assert all(nts.get(n).code is UU for n in ("node-a", "node-b"))


@pytest.mark.parametrize("mode", MODES)
def test_narrowed_cycle_moves_the_start_by_the_nodes_processed(mode: str) -> None:
    # Upstream: nextStartNodeIndex += processed nodes (here 1) modulo all nodes; the next pod (no
    # Score plugin: one feasible node is enough) starts at node-b.
    core = _core(mode, ["node-a", "node-b", "node-c"])
    first = _cycle(core, _pinned("ds-c", ["node-c"]))
    assert isinstance(first, Assumed) and first.node == "node-c"
    nxt = _cycle(core, pod("plain"))
    assert isinstance(nxt, Assumed) and (nxt.node, nxt.evaluated) == ("node-b", 1)


@needs_native
def test_native_conflicting_terms_fail_every_node() -> None:
    core = _core("native", ["node-a", "node-b"])
    out = _cycle(core, _pinned("c", ["node-a", "node-b"]))
    assert isinstance(out, Failed) and out.fit_error is not None
    assert out.message.startswith("0/2 nodes are available: pod affinity terms conflict.")  # PreFilterMsg alone
    assert out.unschedulable_plugins == {"NodeAffinity"}
    assert all(out.fit_error.diagnosis.node_to_status.get(n).code is UU for n in ("node-a", "node-b"))


@needs_native
def test_native_invalid_pod_affinity_selector_fails_prefilter() -> None:
    prof = python_profile("InterPodAffinity", "NodeResourcesFit")
    core, _, _ = build(config([prof]), native=True)
    for n in ("node-a", "node-b"):
        core.cache.add_node(node(n))
    term = {"labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["{{.bad-value.}}"]}]},
            "topologyKey": "kubernetes.io/hostname"}
    out = _cycle(core, pod("bad", affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}))
    assert isinstance(out, Failed) and out.fit_error is not None
    assert out.unschedulable_plugins == {"InterPodAffinity"}
    assert out.message.startswith('0/2 nodes are available: parsing pod: requiredAffinityTerms: values[0][app]: '
                                  'Invalid value: "{{.bad-value.}}"')
    assert out.fit_error.diagnosis.node_to_status.get("node-a").code is UU
    native = core.frameworks[PROFILE].native
    assert native is not None
    res = native.schedule(json.dumps(pod("bad2", affinity={"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [term]}})).encode(), select=True)
    assert res.rejected is not None and res.rejected.startswith("parsing pod: requiredAffinityTerms: ")
    assert (res.reasons, res.unresolvable, res.error) == ({res.rejected: 2}, 2, None)


def _score_only_core() -> tuple[SchedulerCore, Obj]:
    """InterPodAffinity as a native Score plugin only (its filter off), two nodes, and a pod whose
    preferred term's selector does not parse."""
    prof = python_profile("InterPodAffinity", filter={"disabled": [{"name": "InterPodAffinity"}]})
    core, _, _ = build(config([prof]), native=True)
    for n in ("node-a", "node-b"):
        core.cache.add_node(node(n))
    term = {"weight": 3, "podAffinityTerm": {
        "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["{{.bad-value.}}"]}]},
        "topologyKey": "kubernetes.io/hostname"}}
    return core, pod("bad", affinity={"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [term]}})


@needs_native
def test_native_prescore_error_ends_the_cycle() -> None:
    core, bad = _score_only_core()
    out = _cycle(core, bad)
    assert isinstance(out, Failed)
    assert out.reason == "SchedulerError" and out.status.code is Code.ERROR
    assert out.message.startswith('running PreScore plugin "InterPodAffinity": failed to parse pod: '
                                  "preferredAffinityTerms: values[0][app]: Invalid value")


@needs_native
def test_native_prescore_error_in_a_batch_fails_that_pod_only() -> None:
    """schedule_batch: the pod whose PreScore errs fails with an Error status; the batch goes on."""
    from kubecore.scheduler.batch import schedule_batch

    core, bad_pod = _score_only_core()
    core.queue.add(pod("ok1"))
    core.queue.add(bad_pod)
    core.queue.add(pod("ok2"))
    outs = schedule_batch(core.frameworks[PROFILE], core.queue.pop_batch(3))
    assert [type(o).__name__ for o in outs] == ["Assumed", "Failed", "Assumed"]
    bad = outs[1]
    assert isinstance(bad, Failed) and bad.status.code is Code.ERROR and bad.reason == "SchedulerError"
    assert bad.message.startswith('running PreScore plugin "InterPodAffinity": failed to parse pod: ')


@pytest.mark.parametrize("mode", MODES)
def test_narrowed_cycles_start_at_the_index_modulo_the_named_nodes(mode: str) -> None:
    # Upstream: the narrowed list is visited from nextStartNodeIndex % len(list); each cycle moves
    # the index by the nodes it processed (modulo all nodes). Two pods that may go to node-b or
    # node-c (no Score plugin: the first feasible node wins) take one each.
    core = _core(mode, ["node-a", "node-b", "node-c"])
    first = _cycle(core, _pinned("one", ["node-b"], ["node-c"]))
    second = _cycle(core, _pinned("two", ["node-b"], ["node-c"]))
    assert isinstance(first, Assumed) and isinstance(second, Assumed)
    assert (first.node, first.evaluated, second.node, second.evaluated) == ("node-b", 1, "node-c", 1)
