"""Upstream's DefaultPreemption unit-test tables, restated for kubecore.

Sources (kubernetes/kubernetes):
- pkg/scheduler/framework/plugins/defaultpreemption/default_preemption_test.go: TestPostFilter,
  TestDryRunPreemption, TestSelectBestCandidate, TestPodEligibleToPreemptOthers, TestPreempt,
  TestPreEnqueue;
- pkg/scheduler/framework/preemption/preemption_test.go: TestNodesWherePreemptionMightHelp.

Each case keeps upstream's name, nodes, pods, PDBs, arguments and expected outcome. The plugin
runs in kubecore's default profile over the native kernels (upstream registers NodeResourcesFit,
PodTopologySpread or InterPodAffinity as the case needs; the other default plugins never reject
these pods). PostFilter is called directly with the cycle's statuses, as upstream's tests do.

The candidate search runs three ways: node by node (`Framework.dry_run_node`), all in the
kernels with every candidate kept (`victims.native_search`), and all in the kernels with the
node picked there (`victims.native_select`, which hands back the chosen candidate only).

Upstream's start times (epochTime<n>, n ns after the epoch) become n seconds: times reach kubecore
as RFC 3339 JSON, which has whole seconds; the order is the same.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from typing import Any

import msgspec
import pytest

from kubecore.scheduler import default_config
from kubecore.scheduler.config_args import DefaultPreemptionArgs
from kubecore.scheduler.fiterror import NodeToStatus
from kubecore.scheduler.interface import CycleState, PostFilterResult, PreFilterResult
from kubecore.scheduler.native import NativeKernels
from kubecore.scheduler.plugins import preemption
from kubecore.scheduler.plugins.preemption import WAITING, Candidate, DefaultPreemption
from kubecore.scheduler.plugins.victims import NativeSearch, native_search
from kubecore.scheduler.podinfo import NodeInfo, Obj
from kubecore.scheduler.status import Code, Status, as_status
from tests.unit.scheduler.helpers import Recorder, build, config, needs_native
from tests.unit.scheduler.test_preemption import AsyncRecorder

pytestmark = needs_native

_U, _UU = Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE

NEG, LOW, MID, HIGH, VERY_HIGH = -100, 0, 100, 1000, 10000
SMALL = {"cpu": "100m", "memory": "100"}
MEDIUM = {"cpu": "200m", "memory": "200"}
LARGE = {"cpu": "300m", "memory": "300"}
VERY_LARGE = {"cpu": "500m", "memory": "500"}
ONE_POD = {"pods": "1"}
NODE_RES = {"cpu": "200m", "memory": "400"}
LABEL_KEYS = ("hostname", "zone", "region")
FOO_PDB = {"app": "foo"}
MAX_INT32 = (1 << 31) - 1


# ---- builders (upstream's st.MakeNode / st.MakePod / st.MakePDB) ---------------------------------

def mk_node(spec: str, capacity: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> Obj:
    """A node named by `spec`'s first part; "name/zone/region" labels hostname, zone and region.
    `capacity` is capacity and allocatable, with 32 pods unless it says (st Capacity)."""
    parts = spec.split("/")
    lab = dict(zip(LABEL_KEYS, parts)) | (labels or {})
    alloc = {"pods": "32", **capacity} if capacity is not None else {}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": parts[0], "labels": lab},
            "spec": {}, "status": {"allocatable": alloc, "capacity": dict(alloc)}}


def epoch(n: int) -> str:
    return f"1970-01-01T00:00:{n:02d}Z"


def mk_pod(name: str, *, node: str = "", prio: int | None = None, req: dict[str, str] | None = None,
           labels: dict[str, str] | None = None, start: int | None = None, **spec: Any) -> Obj:
    body: Obj = {"schedulerName": "default-scheduler",
                 "containers": [{"name": "con0", "image": "pause", "resources": {"requests": dict(req)}}]
                 if req else []}
    if prio is not None:
        body["priority"] = prio
    if node:
        body["nodeName"] = node
    body.update(spec)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": name, "labels": labels or {}},
            "spec": body, "status": {"startTime": epoch(start)} if start is not None else {}}


def mk_pdb(name: str, match: dict[str, str], allowed: int, disrupted: Sequence[str] = ()) -> Obj:
    status: Obj = {"disruptionsAllowed": allowed}
    if disrupted:
        status["disruptedPods"] = {p: "2024-01-01T00:00:00Z" for p in disrupted}
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"matchLabels": match}}, "status": status}


def anti_affinity_exists(key: str, topology: str) -> Obj:
    """st PodAntiAffinityExists(key, topology, required)."""
    term = {"labelSelector": {"matchExpressions": [{"key": key, "operator": "Exists"}]}, "topologyKey": topology}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def spread(max_skew: int, key: str, label: str) -> Obj:
    """st SpreadConstraint(maxSkew, key, DoNotSchedule, Exists(label))."""
    return {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchExpressions": [{"key": label, "operator": "Exists"}]}}


# ---- the harness ---------------------------------------------------------------------------------

class Offsets(random.Random):
    """The search's starting node, as upstream's tests fix it (getOffsetRand seeded with 4)."""

    def __init__(self, offsets: Sequence[int]) -> None:
        super().__init__(0)
        self.offsets = list(offsets)

    def randrange(self, *args: Any, **kwargs: Any) -> int:
        return self.offsets.pop(0)


class TestPlugin:
    """Upstream's TestPlugin: PreFilter with extensions whose AddPod/RemovePod fail on nodes
    labelled error=true."""

    name = "test-plugin"

    def pre_filter(self, state: CycleState, pod: Obj) -> tuple[PreFilterResult | None, Status | None]:
        return None, None

    def _op(self, what: str, pod: Obj, ni: NodeInfo) -> Status | None:
        if ((ni.node or {}).get("metadata") or {}).get("labels", {}).get("error") == "true":
            return as_status(RuntimeError(f"failed to {what} pod: {pod['metadata']['name']}"))
        return None

    def add_pod(self, state: CycleState, pod: Obj, other: Obj, ni: NodeInfo) -> Status | None:
        return self._op("add", pod, ni)

    def remove_pod(self, state: CycleState, pod: Obj, other: Obj, ni: NodeInfo) -> Status | None:
        return self._op("remove", pod, ni)


class Reject:
    """A Filter plugin rejecting every node: upstream's FalseFilter, and FakeFilter with
    fakeFilterRC Unschedulable."""

    name = "Reject"

    def filter(self, state: CycleState, pod: Obj, ni: NodeInfo) -> Status:
        return Status(_U, "rejected")


class Env:
    """A default-profile scheduler holding `nodes` and `pods`, and its DefaultPreemption."""

    def __init__(self, nodes: Sequence[Obj], pods: Sequence[Obj], *, pdbs: Sequence[Obj] = (),
                 args: DefaultPreemptionArgs | None = None, rec: Recorder | None = None,
                 test_plugin: bool = False, reject: bool = False, native_filters_only: bool = False) -> None:
        points: Obj = {}
        if test_plugin:
            points["preFilter"] = {"enabled": [{"name": "test-plugin"}]}
        if reject:
            points["filter"] = {"enabled": [{"name": "Reject"}]}
        if native_filters_only:  # VolumeBinding's Filter is the default profile's one Python filter
            points["filter"] = {"disabled": [{"name": "VolumeBinding"}]}
        cfg = config([{"schedulerName": "default-scheduler", "plugins": points}]) if points else default_config()
        self.core, self.rec, _ = build(cfg, native=True, rec=rec,
                                       out_of_tree={"test-plugin": lambda a, h: TestPlugin(),
                                                    "Reject": lambda a, h: Reject()})
        for n in nodes:
            self.core.cache.add_node(n)
        for p in pods:
            self.core.cache.add_pod(p)
        self.rec.pdbs = list(pdbs)
        self.fw = self.core.frameworks["default-scheduler"]
        self.plugin = next(pl for pl in self.fw.plugins.post_filter if isinstance(pl, DefaultPreemption))
        if args is not None:
            self.plugin.args = args

    def state(self, pod: Obj) -> CycleState:
        state = CycleState()
        _, status, _ = self.fw.run_pre_filter(state, pod)
        assert status is None, status
        return state

    def post_filter(self, pod: Obj, statuses: NodeToStatus) -> tuple[PostFilterResult | None, Status]:
        result, status = self.plugin.post_filter(self.state(pod), pod, statuses)
        return result, status if status is not None else Status()

    def candidates(self, pod: Obj) -> list[Candidate]:
        """Upstream DryRunPreemption over every node (all given as Unschedulable)."""
        statuses = NodeToStatus()
        for ni in self.core.cache.node_infos():
            statuses.set(ni.name, Status(_U))
        got, _ = self.plugin.find_candidates(self.state(pod), pod, statuses, self.core.cache.node_infos())
        return got

    def evicted(self) -> list[str]:
        return sorted(v for v, _, _ in self.rec.evicted)


def statuses_of(explicit: dict[str, Code], absent: Code = _UU) -> NodeToStatus:
    out = NodeToStatus(Status(absent))
    for name, code in explicit.items():
        out.set(name, Status(code))
    return out


def all_unschedulable(nodes: Sequence[Obj]) -> NodeToStatus:
    """upstream NewDefaultNodeToStatus() with every node set to Unschedulable."""
    return statuses_of({n["metadata"]["name"]: _U for n in nodes})


PATHS = ["node-by-node", "native-search", "native-select"]


@pytest.fixture(params=PATHS)
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Which candidate search runs (see the module docstring)."""
    mode = str(request.param)
    if mode == "node-by-node":
        monkeypatch.setattr(preemption, "_native_dry_runs", lambda fw, state: False)
    elif mode == "native-search":
        def every_candidate(native: NativeKernels, raw: bytes, *, to_try: Sequence[tuple[NodeInfo, bool]],
                            wanted: int, now: float) -> NativeSearch:
            prio = int((msgspec.json.decode(raw).get("spec") or {}).get("priority") or 0)
            return native_search(native, raw, to_try=to_try, prio=prio, wanted=wanted, pdbs=[], now=now)
        monkeypatch.setattr(preemption, "native_select", every_candidate)
    yield mode


# ---- TestPostFilter ------------------------------------------------------------------------------

POST_FILTER: list[Any] = [
    pytest.param(mk_pod("p", prio=HIGH), [mk_pod("p1", node="node1")], [], [mk_node("node1", ONE_POD)],
                 {"node1": _U}, "node1", Code.SUCCESS, "", False,
                 id="pod with higher priority can be made schedulable"),
    pytest.param(mk_pod("p"), [mk_pod("p1", node="node1")], [], [mk_node("node1", ONE_POD)],
                 {"node1": _U}, "", _U,
                 "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.", False,
                 id="pod with tied priority is still unschedulable"),
    pytest.param(mk_pod("p", prio=HIGH), [mk_pod("p1", node="node1")], [], [mk_node("node1", ONE_POD)],
                 {"node1": _UU}, "", _U,
                 "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.", False,
                 id="preemption should respect filteredNodesStatuses"),
    pytest.param(mk_pod("p", prio=HIGH), [mk_pod("p1", node="node1")], [], [mk_node("node1", ONE_POD)],
                 {}, "", _U, "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
                 False,
                 id="preemption should respect absent NodeToStatusReader entry meaning UnschedulableAndUnresolvable"),
    pytest.param(mk_pod("p", prio=MID),
                 [mk_pod("p1", node="node1", prio=HIGH), mk_pod("p2", node="node2", prio=LOW)], [],
                 [mk_node("node1", ONE_POD), mk_node("node2", ONE_POD)],
                 {"node1": _U, "node2": _U}, "node2", Code.SUCCESS, "", False,
                 id="pod can be made schedulable on one node"),
    pytest.param(mk_pod("p", prio=VERY_HIGH),
                 [mk_pod("p1", node="node1", prio=HIGH, labels={"test.kubernetes.io/is-violating-pdb": "non-violating"}),
                  mk_pod("p2", node="node1", prio=LOW, labels={"test.kubernetes.io/is-violating-pdb": "violating"}),
                  mk_pod("p3", node="node2", prio=MID, labels={"test.kubernetes.io/is-violating-pdb": "violating"})],
                 [mk_pdb("violating-pdb", {"test.kubernetes.io/is-violating-pdb": "violating"}, 0),
                  mk_pdb("non-violating-pdb", {"test.kubernetes.io/is-violating-pdb": "non-violating"}, MAX_INT32)],
                 [mk_node("node1", ONE_POD), mk_node("node2", ONE_POD)],
                 {"node1": _U, "node2": _U}, "node2", Code.SUCCESS, "", False,
                 id="pod can be made schedulable on minHighestPriority node"),
    pytest.param(mk_pod("p", prio=HIGH, req=LARGE), [mk_pod("p1", node="node1"), mk_pod("p2", node="node2")], [],
                 [mk_node("node1", NODE_RES), mk_node("node2", NODE_RES)],
                 {"node1": _U, "node2": _U}, "", _U, "preemption: 0/2 nodes are available: 2 Insufficient cpu.",
                 False, id="no candidate nodes found, no enough resource after removing low priority pods"),
    pytest.param(mk_pod("p", prio=HIGH, req=LARGE),
                 [mk_pod("p1", node="node1", prio=HIGH), mk_pod("p2", node="node2"),
                  mk_pod("p3", node="node3", prio=HIGH)], [],
                 [mk_node("node1", ONE_POD), mk_node("node2", NODE_RES), mk_node("node3", ONE_POD)],
                 {"node1": _U, "node2": _U, "node3": _U}, "", _U,
                 "preemption: 0/3 nodes are available: 1 Insufficient cpu, "
                 "2 No preemption victims found for incoming pod.", False,
                 id="no candidate nodes found with mixed reasons, no lower priority pod and no enough CPU resource"),
    pytest.param(mk_pod("p", prio=HIGH, req=LARGE), [mk_pod("p1", node="node1"), mk_pod("p2", node="node2")], [],
                 [mk_node(f"node{i}", NODE_RES) for i in range(1, 5)],
                 {"node1": _U, "node2": _U, "node4": _UU}, "", _U,
                 "preemption: 0/4 nodes are available: 2 Insufficient cpu, "
                 "2 Preemption is not helpful for scheduling.", False,
                 id="no candidate nodes found with mixed reason, 2 UnschedulableAndUnresolvable nodes and 2 nodes "
                    "don't have enough CPU resource"),
    pytest.param(mk_pod("p", prio=HIGH, req=LARGE), [mk_pod("p1", node="node1")], [],
                 [mk_node("node1", LARGE, labels={"error": "true"})],
                 {"node1": _U}, None, Code.ERROR,
                 'preemption: running RemovePod on PreFilter plugin "test-plugin": failed to remove pod: p', True,
                 id="only one node but failed with TestPlugin"),
    pytest.param(mk_pod("p", prio=HIGH, req=LARGE),
                 [mk_pod("p1", node="node1"), mk_pod("p2", node="node2", req=MEDIUM)], [],
                 [mk_node("node1", LARGE, labels={"error": "true"}), mk_node("node2", LARGE)],
                 {"node1": _U, "node2": _U}, "node2", Code.SUCCESS, "", True,
                 id="one failed with TestPlugin and the other pass"),
    # upstream PodGroupName("foo"); kubecore has neither feature gate, as this case turns both off
    pytest.param(mk_pod("p-with-podgroup", prio=HIGH, schedulingGroup={"podGroupName": "foo"}),
                 [mk_pod("p1", node="node1")], [], [mk_node("node1", ONE_POD)],
                 {"node1": _U}, "node1", Code.SUCCESS, "", False,
                 id="pod with SchedulingGroup with TAS and WAP disabled should preempt"),
]


@pytest.mark.parametrize("pod,pods,pdbs,nodes,explicit,want_node,want_code,want_msg,test_plugin", POST_FILTER)
def test_post_filter(path: str, pod: Obj, pods: list[Obj], pdbs: list[Obj], nodes: list[Obj],
                     explicit: dict[str, Code], want_node: str | None, want_code: Code, want_msg: str,
                     test_plugin: bool) -> None:
    env = Env(nodes, pods, pdbs=pdbs, test_plugin=test_plugin)
    result, status = env.post_filter(pod, statuses_of(explicit))
    assert (status.code, status.message()) == (want_code, want_msg)
    if want_node is None:
        assert result is None
    else:
        assert result is not None and result.nominating_info is not None
        assert result.nominating_info.node == want_node


def test_remove_pod_error_surfaces_without_python_filters(path: str) -> None:
    """Upstream's SelectVictimsOnNode runs the PreFilter extensions' RemovePod before any filter:
    its error is the node's answer also when every filter of the profile is native (not a case
    of upstream's tables: kubecore's dry run used to check the native filters first and return
    before RemovePod ran when the profile had no Python filter)."""
    env = Env([mk_node("node1", LARGE, labels={"error": "true"})], [mk_pod("p1", node="node1")],
              test_plugin=True, native_filters_only=True)
    assert not env.fw.plugins.filter
    result, status = env.post_filter(mk_pod("p", prio=HIGH, req=LARGE), statuses_of({"node1": _U}))
    assert result is None
    assert (status.code, status.message()) == (
        Code.ERROR, 'preemption: running RemovePod on PreFilter plugin "test-plugin": failed to remove pod: p')


# ---- TestDryRunPreemption ------------------------------------------------------------------------

def five_nodes(prios: Sequence[int], labelled: Sequence[int] = ()) -> list[Obj]:
    return [mk_pod(f"p{i}", node=f"node{i}", prio=p, req=LARGE, labels={"app": "foo"} if i in labelled else None)
            for i, p in enumerate(prios, start=1)]


def pdb_case(pods: int, disrupted: list[str], violations: int, name: str) -> Any:
    """The PDB cases: p1.1..p1.<pods> (mid, medium, app=foo) on node1, one disruption allowed."""
    victims = [f"p1.{j}" for j in range(1, pods + 1)]
    return pytest.param(["node1"], [mk_pod("p", prio=HIGH, req=VERY_LARGE)],
                        [mk_pod(v, node="node1", prio=MID, req=MEDIUM, labels=FOO_PDB) for v in victims],
                        [mk_pdb("pdb", FOO_PDB, 1, disrupted)], None, [0], False,
                        [{"node1": (victims, violations)}], id=name)


NODES_1_2 = ["node1", "node2"]
NODES_1_5 = [f"node{i}" for i in range(1, 6)]
DRY_RUN: list[Any] = [
    # (node names, preemptor pods (one per cycle), existing pods, pdbs, args, offsets, reject,
    #  expected per cycle: node -> (victims by name, PDB violations))
    pytest.param(NODES_1_2, [mk_pod("p", prio=HIGH)],
                 [mk_pod("p1", node="node1", prio=MID), mk_pod("p2", node="node2", prio=MID)],
                 [], None, [0], True, [{}], id="a pod that does not fit on any node"),
    pytest.param(NODES_1_2, [mk_pod("p", prio=HIGH)],
                 [mk_pod("p1", node="node1", prio=MID), mk_pod("p2", node="node2", prio=MID)],
                 [], None, [0], True, [{}], id="a pod that fits with no preemption"),
    pytest.param(NODES_1_2, [mk_pod("node1", prio=HIGH)],
                 [mk_pod("p1", node="node1", prio=MID), mk_pod("p2", node="node2", prio=MID)],
                 [], None, [0], True, [{}], id="a pod that fits on one node with no preemption"),
    pytest.param(NODES_1_2, [mk_pod("p", prio=HIGH, req=LARGE)],
                 [mk_pod("p1", node="node1", prio=MID, req=LARGE), mk_pod("p2", node="node2", prio=MID, req=LARGE)],
                 [], None, [0], False, [{"node1": (["p1"], 0), "node2": (["p2"], 0)}],
                 id="a pod that fits on both nodes when lower priority pods are preempted"),
    pytest.param(NODES_1_2, [mk_pod("p", prio=LOW, req=LARGE)],
                 [mk_pod("p1", node="node1", prio=MID, req=LARGE), mk_pod("p2", node="node2", prio=MID, req=LARGE)],
                 [], None, [0], False, [{}],
                 id="a pod that would fit on the nodes, but other pods running are higher priority, "
                    "no preemption would happen"),
    pytest.param(NODES_1_2, [mk_pod("p", prio=HIGH, req=LARGE)],
                 [mk_pod("p1.1", node="node1", prio=LOW, req=SMALL), mk_pod("p1.2", node="node1", prio=MID, req=LARGE),
                  mk_pod("p2", node="node2", prio=MID, req=LARGE)],
                 [], None, [0], False, [{"node1": (["p1.2"], 0), "node2": (["p2"], 0)}],
                 id="medium priority pod is preempted, but lower priority one stays as it is small"),
    pytest.param(NODES_1_2, [mk_pod("p", prio=HIGH, req=LARGE)],
                 [mk_pod("p1.1", node="node1", prio=MID, req=SMALL), mk_pod("p1.2", node="node1", prio=LOW, req=SMALL),
                  mk_pod("p1.3", node="node1", prio=MID, req=MEDIUM), mk_pod("p1.4", node="node1", prio=HIGH, req=SMALL),
                  mk_pod("p2", node="node2", prio=HIGH, req=LARGE)],
                 [], None, [0], False, [{"node1": (["p1.2", "p1.3"], 0)}],
                 id="mixed priority pods are preempted"),
    pytest.param(NODES_1_2, [mk_pod("p", prio=HIGH, req=LARGE)],
                 [mk_pod("p1.1", node="node1", prio=LOW, req=SMALL, start=5),
                  mk_pod("p1.2", node="node1", prio=LOW, req=SMALL, start=4),
                  mk_pod("p1.3", node="node1", prio=MID, req=MEDIUM, start=3),
                  mk_pod("p1.4", node="node1", prio=HIGH, req=SMALL, start=2),
                  mk_pod("p2", node="node2", prio=HIGH, req=LARGE, start=1)],
                 [], None, [0], False, [{"node1": (["p1.1", "p1.3"], 0)}],
                 id="mixed priority pods are preempted, pick later StartTime one when priorities are equal"),
    pytest.param(NODES_1_2, [mk_pod("p", prio=HIGH, req=SMALL, labels={"foo": ""})],
                 [mk_pod("p1.1", node="node1", prio=LOW, req=SMALL, labels={"foo": ""},
                         affinity=anti_affinity_exists("foo", "hostname")),
                  mk_pod("p1.2", node="node1", prio=MID, req=SMALL), mk_pod("p1.3", node="node1", prio=HIGH, req=SMALL),
                  mk_pod("p2", node="node2", prio=HIGH, req=SMALL)],
                 [], None, [0], False, [{"node1": (["p1.1"], 0)}],
                 id="pod with anti-affinity is preempted"),
    pytest.param(["node-a/zone1", "node-b/zone1", "node-x/zone2"],
                 [mk_pod("p", prio=HIGH, labels={"foo": ""},
                         topologySpreadConstraints=[spread(1, "zone", "foo"), spread(1, "hostname", "foo")])],
                 [mk_pod("pod-a1", node="node-a", prio=MID, labels={"foo": ""}),
                  mk_pod("pod-a2", node="node-a", prio=LOW, labels={"foo": ""}),
                  mk_pod("pod-b1", node="node-b", prio=LOW, labels={"foo": ""}),
                  mk_pod("pod-x1", node="node-x", prio=HIGH, labels={"foo": ""}),
                  mk_pod("pod-x2", node="node-x", prio=HIGH, labels={"foo": ""})],
                 [], None, [0], False, [{"node-a": (["pod-a2"], 0), "node-b": (["pod-b1"], 0)}],
                 id="preemption to resolve pod topology spread filter failure"),
    pytest.param(NODES_1_2, [mk_pod("p", prio=HIGH, req=LARGE)],
                 [mk_pod("p1", node="node1", prio=MID, req=LARGE), mk_pod("p2", node="node2", prio=MID, req=LARGE)],
                 [], None, [0], True, [{}],
                 id="get Unschedulable in the preemption phase when the filter plugins filtering the nodes"),
    pdb_case(2, [], 1, "preemption with violation of same pdb"),
    pdb_case(2, ["p2"], 1, "preemption with violation of the pdb with pod whose eviction was processed, "
                           "the victim doesn't belong to DisruptedPods"),
    pdb_case(2, ["p1.2"], 0, "preemption with violation of the pdb with pod whose eviction was processed, "
                             "the victim belongs to DisruptedPods"),
    pdb_case(3, ["p1.3"], 1, "preemption with violation of the pdb with pod whose eviction was processed, "
                             "the victim which belongs to DisruptedPods is treated as 'nonViolating'"),
    pytest.param(NODES_1_5, [mk_pod("p", prio=HIGH, req=LARGE)], five_nodes([MID] * 5), [],
                 DefaultPreemptionArgs(40, 1), [4], False, [{"node1": (["p1"], 0), "node5": (["p5"], 0)}],
                 id="all nodes are possible candidates, but DefaultPreemptionArgs limits to 2"),
    pytest.param(NODES_1_5, [mk_pod("p", prio=HIGH, req=LARGE)],
                 five_nodes([MID, VERY_HIGH, MID, MID, VERY_HIGH]), [],
                 DefaultPreemptionArgs(40, 1), [4], False, [{"node1": (["p1"], 0), "node3": (["p3"], 0)}],
                 id="some nodes are not possible candidates, DefaultPreemptionArgs limits to 2"),
    pytest.param(NODES_1_5, [mk_pod(f"tp{i}", prio=HIGH, req=LARGE) for i in (1, 2, 3)], five_nodes([MID] * 5), [],
                 DefaultPreemptionArgs(40, 1), [4, 1, 3], False,
                 [{"node1": (["p1"], 0), "node5": (["p5"], 0)}, {"node2": (["p2"], 0), "node3": (["p3"], 0)},
                  {"node4": (["p4"], 0), "node5": (["p5"], 0)}],
                 id="preemption offset across multiple scheduling cycles and wrap around"),
    pytest.param(NODES_1_5, [mk_pod("p", prio=HIGH, req=LARGE)], five_nodes([MID] * 5, labelled=(1, 2, 5)),
                 [mk_pdb("pdb", FOO_PDB, 0)], DefaultPreemptionArgs(40, 2), [4], False,
                 [{"node1": (["p1"], 1), "node3": (["p3"], 0), "node5": (["p5"], 1)}],
                 id="preemption looks past numCandidates until a non-PDB violating node is found"),
]


def by_node(cands: Sequence[Candidate]) -> dict[str, tuple[list[str], int]]:
    return {c.node: (sorted(v["metadata"]["name"] for v in c.victims), c.pdb_violations) for c in cands}


@pytest.mark.parametrize("names,preemptors,pods,pdbs,args,offsets,reject,expected", DRY_RUN)
def test_dry_run_preemption(path: str, names: list[str], preemptors: list[Obj], pods: list[Obj], pdbs: list[Obj],
                            args: DefaultPreemptionArgs | None, offsets: list[int], reject: bool,
                            expected: list[dict[str, tuple[list[str], int]]]) -> None:
    env = Env([mk_node(n, VERY_LARGE) for n in names], pods, pdbs=pdbs, args=args, reject=reject)
    env.plugin.handle.rng = Offsets(offsets)
    for pod, want in zip(preemptors, expected, strict=True):
        got = by_node(env.candidates(pod))
        if path == "native-select" and not pdbs and not reject:
            # the kernels pick the node in the search: only the chosen candidate comes back
            assert len(got) == min(len(want), 1)
            assert all(want.get(node) == victims for node, victims in got.items()), (got, want)
        else:
            assert got == want


# ---- TestSelectBestCandidate ---------------------------------------------------------------------

def n(i: int, j: int, prio: int, req: dict[str, str], start: int | None = None) -> Obj:
    """Pod p<i>.<j> on node<i>."""
    return mk_pod(f"p{i}.{j}", node=f"node{i}", prio=prio, req=req, start=start)


def e(i: int, j: int, prio: int, req: dict[str, str], start: int = 0) -> Obj:
    """Pod p<i>.<j> on node<i>, started at epochTime<start>."""
    return n(i, j, prio, req, start)


SELECT_BEST: list[Any] = [
    pytest.param(2, mk_pod("p", prio=HIGH, req=LARGE), [e(1, 1, MID, LARGE), e(2, 1, MID, LARGE)],
                 ["node1", "node2"], id="a pod that fits on both nodes when lower priority pods are preempted"),
    pytest.param(3, mk_pod("p", prio=HIGH, req=VERY_LARGE),
                 [e(1, 1, MID, MEDIUM), e(1, 2, MID, LARGE), e(2, 1, MID, MEDIUM), e(2, 2, LOW, MEDIUM),
                  e(3, 1, LOW, MEDIUM), e(3, 2, LOW, MEDIUM)],
                 ["node3"], id="node with min highest priority pod is picked"),
    pytest.param(3, mk_pod("p", prio=HIGH, req=VERY_LARGE),
                 [e(1, 1, MID, MEDIUM), e(1, 2, MID, LARGE), e(2, 1, MID, LARGE), e(2, 2, LOW, MEDIUM),
                  e(3, 1, MID, MEDIUM), e(3, 2, MID, MEDIUM)],
                 ["node2"], id="when highest priorities are the same, minimum sum of priorities is picked"),
    pytest.param(3, mk_pod("p", prio=HIGH, req=VERY_LARGE),
                 [e(1, 1, MID, SMALL), e(1, 2, NEG, SMALL), e(1, 3, MID, SMALL), e(1, 4, NEG, SMALL),
                  e(2, 1, MID, LARGE), e(2, 2, NEG, MEDIUM), e(3, 1, MID, MEDIUM), e(3, 2, NEG, SMALL),
                  e(3, 3, LOW, SMALL)],
                 ["node2"], id="when highest priority and sum are the same, minimum number of pods is picked"),
    pytest.param(3, mk_pod("p", prio=HIGH, req=VERY_LARGE),
                 [e(1, 1, MID, SMALL), e(1, 2, NEG, SMALL), e(1, 3, NEG, SMALL), e(2, 1, MID, LARGE),
                  e(2, 2, NEG, MEDIUM), e(3, 1, MID, MEDIUM), e(3, 2, NEG, SMALL), e(3, 3, LOW, SMALL)],
                 ["node2"], id="sum of adjusted priorities is considered"),
    pytest.param(4, mk_pod("p", prio=VERY_HIGH, req=VERY_LARGE),
                 [e(1, 1, MID, SMALL), e(1, 2, LOW, SMALL), e(1, 3, LOW, SMALL), e(2, 1, HIGH, LARGE),
                  e(3, 1, MID, MEDIUM), e(3, 2, LOW, SMALL), e(3, 3, LOW, SMALL), e(3, 4, LOW, MEDIUM),
                  e(4, 1, MID, MEDIUM), e(4, 2, MID, SMALL), e(4, 3, MID, SMALL), e(4, 4, NEG, SMALL)],
                 ["node1"], id="non-overlapping lowest high priority, sum priorities, and number of pods"),
    pytest.param(3, mk_pod("p", prio=HIGH, req=VERY_LARGE),
                 [e(1, 1, MID, MEDIUM, 2), e(1, 2, MID, MEDIUM, 2), e(2, 1, MID, MEDIUM, 3), e(2, 2, MID, MEDIUM, 3),
                  e(3, 1, MID, MEDIUM, 1), e(3, 2, MID, MEDIUM, 1)],
                 ["node2"], id="same priority, same number of victims, different start time for each node's pod"),
    pytest.param(3, mk_pod("p", prio=HIGH, req=VERY_LARGE),
                 [e(1, 1, MID, MEDIUM, 4), e(1, 2, MID, MEDIUM, 2), e(2, 1, MID, MEDIUM, 5), e(2, 2, MID, MEDIUM, 1),
                  e(3, 1, MID, MEDIUM, 3), e(3, 2, MID, MEDIUM, 6)],
                 ["node3"], id="same priority, same number of victims, different start time for all pods"),
    pytest.param(3, mk_pod("p", prio=HIGH, req=VERY_LARGE),
                 [e(1, 1, LOW, MEDIUM, 4), e(1, 2, MID, MEDIUM, 2), e(2, 1, MID, MEDIUM, 6), e(2, 2, LOW, MEDIUM, 1),
                  e(3, 1, LOW, MEDIUM, 3), e(3, 2, MID, MEDIUM, 5)],
                 ["node2"], id="different priority, same number of victims, different start time for all pods"),
]


@pytest.mark.parametrize("nodes,pod,pods,expected", SELECT_BEST)
def test_select_best_candidate(path: str, nodes: int, pod: Obj, pods: list[Obj], expected: list[str]) -> None:
    node_objs = [mk_node(f"node{i}", VERY_LARGE) for i in range(1, nodes + 1)]
    env = Env(node_objs, pods)
    env.plugin.handle.rng = Offsets([4 % nodes])
    result, status = env.post_filter(pod, all_unschedulable(node_objs))
    assert status.code is Code.SUCCESS, status
    assert result is not None and result.nominating_info is not None
    assert result.nominating_info.node in expected


# ---- TestPodEligibleToPreemptOthers --------------------------------------------------------------

def terminating(p: Obj, *, by_preemption: bool = False) -> Obj:
    p["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    if by_preemption:
        p["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True",
                                      "reason": "PreemptionByScheduler"}]
    return p


def nominated(p: Obj, node: str) -> Obj:
    p["status"]["nominatedNodeName"] = node
    return p


ELIGIBLE: list[Any] = [
    pytest.param(nominated(mk_pod("p_with_nominated_node", prio=HIGH), "node1"),
                 [terminating(mk_pod("p1", prio=LOW, node="node1"))], ["node1"],
                 Status(_UU, "node(s) had untolerated taint(s)"), True, id="Pod with nominated node"),
    pytest.param(mk_pod("p_without_nominated_node", prio=HIGH), [], [], None, True, id="Pod without nominated node"),
    pytest.param(mk_pod("p_with_preempt_never_policy", prio=HIGH, preemptionPolicy="Never"), [], [], None, False,
                 id="Pod with 'PreemptNever' preemption policy"),
    pytest.param(nominated(mk_pod("p_with_nominated_node", prio=HIGH), "node1"),
                 [terminating(mk_pod("p1", prio=LOW, node="node1"), by_preemption=True)], ["node1"], None, False,
                 id="preemption victim pod terminating, as indicated by the dedicated DisruptionTarget condition"),
    pytest.param(nominated(mk_pod("p_with_nominated_node", prio=HIGH), "node1"),
                 [terminating(mk_pod("p1", prio=LOW, node="node1"))], ["node1"], None, True,
                 id="non-victim Pods terminating"),
]


@pytest.mark.parametrize("pod,pods,nodes,nominated_status,expected", ELIGIBLE)
def test_pod_eligible_to_preempt_others(pod: Obj, pods: list[Obj], nodes: list[str],
                                        nominated_status: Status | None, expected: bool) -> None:
    env = Env([mk_node(name) for name in nodes], pods)
    statuses = NodeToStatus()
    node = pod["status"].get("nominatedNodeName")
    if node:  # upstream passes nil (Success) when the case gives no status
        statuses.set(node, nominated_status if nominated_status is not None else Status())
    got, _ = env.plugin.eligible(pod, statuses)
    assert got is expected


# ---- TestPreempt ---------------------------------------------------------------------------------

PREEMPT: list[Any] = [
    pytest.param(mk_pod("p", prio=HIGH, req=VERY_LARGE, preemptionPolicy="PreemptLowerPriority"),
                 [n(1, 1, LOW, SMALL), n(1, 2, LOW, SMALL), n(2, 1, HIGH, LARGE), n(3, 1, MID, MEDIUM)],
                 ["node1", "node2", "node3"], "node1", ["p1.1", "p1.2"], id="basic preemption logic"),
    pytest.param(mk_pod("p", prio=HIGH, labels={"foo": ""},
                        topologySpreadConstraints=[spread(1, "zone", "foo"), spread(1, "hostname", "foo")]),
                 [mk_pod("p-a1", node="node-a", prio=HIGH, labels={"foo": ""}),
                  mk_pod("p-a2", node="node-a", prio=HIGH, labels={"foo": ""}),
                  mk_pod("p-b1", node="node-b", prio=LOW, labels={"foo": ""}),
                  mk_pod("p-x1", node="node-x", prio=HIGH, labels={"foo": ""}),
                  mk_pod("p-x2", node="node-x", prio=HIGH, labels={"foo": ""})],
                 ["node-a/zone1", "node-b/zone1", "node-x/zone2"], "node-b", ["p-b1"],
                 id="preemption for topology spread constraints"),
    pytest.param(mk_pod("p", prio=HIGH, req=VERY_LARGE, preemptionPolicy="Never"),
                 [n(1, 1, LOW, SMALL), n(1, 2, LOW, SMALL), n(2, 1, HIGH, LARGE), n(3, 1, MID, MEDIUM)],
                 ["node1", "node2", "node3"], None, [], id="no preempting in pod"),
    pytest.param(mk_pod("p", prio=HIGH, req=VERY_LARGE),
                 [n(1, 1, LOW, SMALL), n(1, 2, LOW, SMALL), n(2, 1, HIGH, LARGE), n(3, 1, MID, MEDIUM)],
                 ["node1", "node2", "node3"], "node1", ["p1.1", "p1.2"], id="PreemptionPolicy is nil"),
]


@pytest.mark.parametrize("pod,pods,names,want_node,want_victims", PREEMPT)
def test_preempt(path: str, pod: Obj, pods: list[Obj], names: list[str], want_node: str | None,
                 want_victims: list[str]) -> None:
    nodes = [mk_node(name, VERY_LARGE) for name in names]
    env = Env(nodes, pods)
    result, status = env.post_filter(pod, all_unschedulable(nodes))
    assert status.code in (Code.SUCCESS, _U), status
    if want_node is None:
        assert result is None
    else:
        assert result is not None and result.nominating_info is not None
        assert result.nominating_info.node == want_node
    assert env.evicted() == want_victims
    # the victims now terminate and the pod is nominated: preempting again takes nobody else
    for p in pods:
        if p["metadata"]["name"] in want_victims:
            env.core.cache.update_pod(p, terminating(msgspec.json.decode(msgspec.json.encode(p))))
    if want_node:
        pod = nominated(pod, want_node)
    env.rec.evicted.clear()
    env.post_filter(pod, NodeToStatus())
    assert env.evicted() == []


# ---- TestPreEnqueue (the cases without pod groups) -----------------------------------------------

PRE_ENQUEUE: list[Any] = [
    pytest.param(False, "p", None, id="AsyncPreemption disabled, returns nil"),
    pytest.param(True, "p", WAITING, id="AsyncPreemption enabled, same pod, returns UnschedulableAndUnresolvable"),
    pytest.param(True, "p_other", None, id="AsyncPreemption enabled, different pod, returns nil"),
]


@pytest.mark.parametrize("async_preemption,check,want", PRE_ENQUEUE)
def test_pre_enqueue(async_preemption: bool, check: str, want: str | None) -> None:
    env = Env([mk_node("node1", ONE_POD)], [mk_pod("p1", node="node1")],
              rec=AsyncRecorder() if async_preemption else None)
    env.post_filter(mk_pod("p", prio=HIGH), statuses_of({"node1": _U}))
    status = env.plugin.pre_enqueue(mk_pod(check, prio=HIGH))
    if want is None:
        assert status is None
    else:
        assert status is not None and (status.code, status.message()) == (_UU, want)


# ---- TestNodesWherePreemptionMightHelp (framework/preemption) ------------------------------------

MIGHT_HELP: list[Any] = [
    pytest.param({"node1": (_UU, "node(s) didn't match Pod's node affinity/selector"),
                  "node2": (_UU, "node(s) didn't match the requested node name"),
                  "node3": (_UU, "node(s) had untolerated taint(s)"),
                  "node4": (_UU, "node(s) didn't match pod affinity rules")},
                 set(), id="No node should be attempted"),
    pytest.param({"node1": (_U, "node(s) didn't match pod anti-affinity rules"),
                  "node2": (_UU, "node(s) didn't match the requested node name"),
                  "node3": (_UU, "node(s) were unschedulable"),
                  "node4": (_U, "Unschedulable")},
                 {"node1", "node4"},
                 id="ErrReasonAntiAffinityRulesNotMatch should be tried as it indicates that the pod is "
                    "unschedulable due to inter-pod anti-affinity"),
    pytest.param({"node1": (_UU, "node(s) didn't match pod affinity rules"),
                  "node2": (_U, "node(s) didn't match pod anti-affinity rules"),
                  "node3": (_U, "Unschedulable"), "node4": (_U, "Unschedulable")},
                 {"node2", "node3", "node4"},
                 id="ErrReasonAffinityRulesNotMatch should not be tried as it indicates that the pod is "
                    "unschedulable due to inter-pod affinity, but ErrReasonAntiAffinityRulesNotMatch should be "
                    "tried as it indicates that the pod is unschedulable due to inter-pod anti-affinity"),
    pytest.param({"node1": (_UU, "node(s) had no available disk"), "node2": (_U, "Insufficient memory"),
                  "node3": (_U, "Unschedulable"), "node4": (_U, "Unschedulable")},
                 {"node2", "node3", "node4"}, id="Mix of failed predicates works fine"),
    pytest.param({"node1": (_UU, "node(s) had unknown conditions"), "node2": (_U, "Unschedulable"),
                  "node3": (_U, "Unschedulable"), "node4": (_U, "Unschedulable")},
                 {"node2", "node3", "node4"}, id="Node condition errors should be considered unresolvable"),
    pytest.param({"node1": (_UU, "node(s) had no available volume zone"),
                  "node2": (_UU, "node(s) had volume node affinity conflict"),
                  "node3": (_UU, "node(s) didn't find available persistent volumes to bind"),
                  "node4": (_U, "Unschedulable")},
                 {"node4"},
                 id="ErrVolume... errors should not be tried as it indicates that the pod is unschedulable due to "
                    "no matching volumes for pod on node"),
    pytest.param({"node1": (_U, "node(s) didn't match pod topology spread constraints"),
                  "node2": (_UU, "node(s) didn't match the requested node name"),
                  "node3": (_U, "node(s) didn't match pod topology spread constraints"),
                  "node4": (_U, "Unschedulable")},
                 {"node1", "node3", "node4"},
                 id="ErrReasonConstraintsNotMatch should be tried as it indicates that the pod is unschedulable due "
                    "to topology spread constraints"),
    pytest.param({"node1": (_U, ""), "node2": (_UU, ""), "node3": (_U, ""), "node4": (_UU, "")},
                 {"node1", "node3"},
                 id="UnschedulableAndUnresolvable status should be skipped but Unschedulable should be tried"),
    pytest.param({"node1": (_U, ""),
                  "node2": (_UU, "node(s) didn't match pod topology spread constraints (missing required label)"),
                  "node3": (_U, ""), "node4": (_UU, "")},
                 {"node1", "node3"},
                 id="ErrReasonNodeLabelNotMatch should not be tried as it indicates that the pod is unschedulable "
                    "due to node doesn't have the required label"),
]


@pytest.mark.parametrize("statuses,expected", MIGHT_HELP)
def test_nodes_where_preemption_might_help(path: str, statuses: dict[str, tuple[Code, str]],
                                           expected: set[str]) -> None:
    """Every node would be a candidate (one low-priority pod fills its one pod slot): the
    candidates are the nodes the search tried."""
    names = [f"node{i}" for i in range(1, 5)]
    env = Env([mk_node(name, ONE_POD) for name in names], [mk_pod(f"low{i}", node=name) for i, name in enumerate(names)])
    given = NodeToStatus()
    for name, (code, reason) in statuses.items():
        given.set(name, Status(code, *([reason] if reason else [])))
    pod = mk_pod("p", prio=HIGH)
    got, _ = env.plugin.find_candidates(env.state(pod), pod, given, env.core.cache.node_infos())
    if path == "native-select":
        assert len(got) == min(len(expected), 1) and {c.node for c in got} <= expected
    else:
        assert {c.node for c in got} == expected
