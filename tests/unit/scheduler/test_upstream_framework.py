"""Upstream's framework runtime and scheduling-cycle tables, re-stated for kubecore.

Sources (kubernetes/kubernetes): pkg/scheduler/framework/runtime/framework_test.go (TestRunXPlugins,
TestFilterPluginsWithNominatedPods, TestWaitOnPermit, ...) and pkg/scheduler/schedule_one_test.go
(TestSchedulerScheduleOne, TestSchedulerSchedulePod, TestFindFit*, TestNumFeasibleNodesToFind,
TestPreferNominatedNodeFilterCallCounts, ...). Each case carries upstream's case name. The fake
plugins are small Python plugins with upstream's names, reasons and injected codes; only the
extension points a case configures are enabled for them.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubecore.client.clock import FakeClock, settle
from kubecore.scheduler.binding import Bound, bind_one, record_binding_failure, record_failure
from kubecore.scheduler.configerrors import ConfigError
from kubecore.scheduler.fiterror import NodeToStatus
from kubecore.scheduler.framework import Framework
from kubecore.scheduler.interface import (
    CLEAR_NOMINATED_NODE, CycleState, NodeScore, NominatingInfo, PostFilterResult, PreFilterResult,
)
from kubecore.scheduler.podinfo import NodeInfo, Obj
from kubecore.scheduler.registry import SchedulerCore
from kubecore.scheduler.schedule_one import Assumed, Failed, find_feasible, num_feasible_nodes_to_find, schedule_one
from kubecore.scheduler.status import Code, Status
from tests.unit.scheduler.helpers import Recorder, build, config, needs_native, node, pod, python_profile

S, E, U, UU, W, SKIP = (Code.SUCCESS, Code.ERROR, Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                        Code.WAIT, Code.SKIP)
INJECT = "injected status"
INJECT_FILTER = "injected filter status"
ERR_REASON_FAKE = "Nodes failed the fake plugin"  # upstream tf.ErrReasonFake
PROFILE = "default-scheduler"


# ---- upstream's fake plugins ------------------------------------------------------------------

def _st(code: Code, reason: str) -> Status | None:
    return None if code is S else Status(code, reason)


class TestPlugin:
    """framework_test.go's TestPlugin: each extension point answers its injected code with
    "injected status" ("injected filter status" for Filter)."""

    __test__ = False

    def __init__(self, name: str, *, result: PreFilterResult | None = None, **inj: Code) -> None:
        self.name, self.result, self.inj = name, result, inj

    def _ans(self, point: str, reason: str = INJECT) -> Status | None:
        return _st(self.inj.get(point, S), reason)

    def pre_filter(self, state: CycleState, p: Obj) -> tuple[PreFilterResult | None, Status | None]:
        return self.result, self._ans("pre_filter")

    def add_pod(self, state: CycleState, p: Obj, other: Obj, ni: NodeInfo) -> Status | None:
        return self._ans("add_pod")

    def remove_pod(self, state: CycleState, p: Obj, other: Obj, ni: NodeInfo) -> Status | None:
        return self._ans("remove_pod")

    def filter(self, state: CycleState, p: Obj, ni: NodeInfo) -> Status | None:
        return self._ans("filter", INJECT_FILTER)

    def post_filter(self, state: CycleState, p: Obj,
                    statuses: NodeToStatus) -> tuple[PostFilterResult | None, Status | None]:
        return None, self._ans("post_filter")

    def pre_score(self, state: CycleState, p: Obj, nodes: list[NodeInfo]) -> Status | None:
        return self._ans("pre_score")

    def score(self, state: CycleState, p: Obj, ni: NodeInfo) -> tuple[int, Status | None]:
        return 0, self._ans("score")

    def reserve(self, state: CycleState, p: Obj, node_name: str) -> Status | None:
        return self._ans("reserve")

    def unreserve(self, state: CycleState, p: Obj, node_name: str) -> None:
        pass

    def permit(self, state: CycleState, p: Obj, node_name: str) -> tuple[Status | None, float]:
        return self._ans("permit"), 0.0

    async def pre_bind(self, state: CycleState, p: Obj, node_name: str) -> Status | None:
        return self._ans("pre_bind")

    async def bind(self, state: CycleState, p: Obj, node_name: str) -> Status | None:
        return self._ans("bind")

    def post_bind(self, state: CycleState, p: Obj, node_name: str) -> None:
        pass


def _factory(p: Any) -> Any:
    return lambda args, handle: p


def framework_at(point: str, *plugins: Any, weights: dict[str, int] | None = None,
                 only: bool = False, nodes: int = 2, **profile: Any) -> tuple[Framework, SchedulerCore]:
    """A profile whose `point` runs `plugins` in order (PrioritySort and DefaultBinder besides;
    `only`: the point runs nothing else)."""
    enabled = [{"name": p.name, **({"weight": weights[p.name]} if weights and p.name in weights else {})}
               for p in plugins]
    ps: dict[str, Any] = {"enabled": enabled}
    if only:
        ps["disabled"] = [{"name": "*"}]
    points: dict[str, Any] = {point: ps, **profile}
    prof = python_profile(**points)
    core, _, _ = build(config([prof]), out_of_tree={p.name: _factory(p) for p in plugins})
    for i in range(nodes):
        core.cache.add_node(node(f"node{i + 1}"))
    return core.frameworks[PROFILE], core


def same(got: Status | None, want: Status | None) -> None:
    """upstream's statusCmpOpts: Error statuses compare by error text, others by code, plugin, message."""
    if want is None or want.code is S:
        assert got is None or got.code is S, got
        return
    assert got is not None, f"want {want!r}, got success"
    if want.code is E:
        assert got.code is E and got.message() == want.message(), got
    else:
        assert (got.code, got.plugin, got.message()) == (want.code, want.plugin, want.message()), got


def ni(core: SchedulerCore, name: str = "node1") -> NodeInfo:
    info = core.cache.node_info(name)
    assert info is not None
    return info


# ---- framework_test.go: TestRunPreFilterPlugins ------------------------------------------------

@pytest.mark.parametrize("name, plugins, want_result, want_skipped, want_code", [
    ("all PreFilter returned success", [TestPlugin("success1"), TestPlugin("success2")], None, set(), S),
    ("one PreFilter plugin returned success, but another PreFilter plugin returned non-success",
     [TestPlugin("success"), TestPlugin("error", pre_filter=E)], None, set(), E),
    ("one PreFilter plugin returned skip, but another PreFilter plugin returned non-success",
     [TestPlugin("skip", pre_filter=SKIP), TestPlugin("error", pre_filter=E)], None, {"skip"}, E),
    ("all PreFilter plugins returned skip",
     [TestPlugin("skip1", pre_filter=SKIP), TestPlugin("skip2", pre_filter=SKIP), TestPlugin("skip3", pre_filter=SKIP)],
     None, {"skip1", "skip2", "skip3"}, S),
    ("some PreFilter plugins returned skip",
     [TestPlugin("skip1", pre_filter=SKIP), TestPlugin("success1"), TestPlugin("skip2", pre_filter=SKIP),
      TestPlugin("success2")], None, {"skip1", "skip2"}, S),
    ("one PreFilter plugin returned Unschedulable, but another PreFilter plugin should be executed",
     [TestPlugin("unschedulable", pre_filter=U), TestPlugin("skip", pre_filter=SKIP)], None, {"skip"}, U),
    ("one PreFilter plugin returned UnschedulableAndUnresolvable, and all other plugins aren't executed",
     [TestPlugin("unresolvable", pre_filter=UU), TestPlugin("skip", pre_filter=SKIP)], None, set(), UU),
    ("all nodes are filtered out by prefilter result, but other plugins aren't executed because we consider "
     "all nodes are filtered out by UnschedulableAndUnresolvable",
     [TestPlugin("reject-all-nodes", result=PreFilterResult([])), TestPlugin("skip", pre_filter=SKIP)],
     set(), set(), UU),
])
def test_run_pre_filter_plugins(name: str, plugins: list[TestPlugin], want_result: set[str] | None,
                                want_skipped: set[str], want_code: Code) -> None:
    fw, _ = framework_at("preFilter", *plugins)
    state = CycleState()
    result, status, _ = fw.run_pre_filter(state, pod("p"))
    assert (result.node_names if result is not None else None) == want_result
    assert (status.code if status is not None else S) is want_code
    assert set(state.skip_filter_plugins) == want_skipped


def test_pre_filter_plugins_and_their_extensions_run_once() -> None:
    # TestPreFilterPlugins
    class Counting:
        def __init__(self, name: str) -> None:
            self.name, self.pre_filter_called = name, 0

        def pre_filter(self, state: CycleState, p: Obj) -> tuple[PreFilterResult | None, Status | None]:
            self.pre_filter_called += 1
            return None, None

    class WithExtensions(Counting):
        add_called = remove_called = 0

        def add_pod(self, state: CycleState, p: Obj, other: Obj, info: NodeInfo) -> Status | None:
            self.add_called += 1
            return None

        def remove_pod(self, state: CycleState, p: Obj, other: Obj, info: NodeInfo) -> Status | None:
            self.remove_called += 1
            return None

    pf1, pf2 = Counting("prefilter-plugin"), WithExtensions("prefilter-with-extensions-plugin")
    fw, core = framework_at("preFilter", pf2, pf1)
    state = CycleState()
    fw.run_pre_filter(state, pod("p"))
    fw.run_pre_filter_add_pod(state, pod("p"), pod("o"), ni(core))
    fw.run_pre_filter_remove_pod(state, pod("p"), pod("o"), ni(core))
    assert (pf1.pre_filter_called, pf2.pre_filter_called, pf2.add_called, pf2.remove_called) == (1, 1, 1, 1)


@pytest.mark.parametrize("op", ["remove_pod", "add_pod"])
@pytest.mark.parametrize("name, plugins, skipped, want_code", [
    ("no plugins are skipped and all {op}() returned success", [("success1", S), ("success2", S)], set(), S),
    ("one {op}() returned error", [("success1", S), ("error1", E)], set(), E),
    ("one {op}() is skipped", [("success1", S), ("skipped", E)], {"skipped"}, S),
])
def test_run_pre_filter_extension(op: str, name: str, plugins: list[tuple[str, Code]], skipped: set[str],
                                  want_code: Code) -> None:
    # TestRunPreFilterExtensionRemovePod / TestRunPreFilterExtensionAddPod
    inj: dict[str, Any] = {}
    fw, core = framework_at("preFilter", *[TestPlugin(n, **{**inj, op: c}) for n, c in plugins])
    state = CycleState()
    state.skip_filter_plugins = skipped
    run = fw.run_pre_filter_remove_pod if op == "remove_pod" else fw.run_pre_filter_add_pod
    st = run(state, pod("p"), pod("o"), ni(core))
    assert (st.code if st is not None else S) is want_code


# ---- TestFilterPlugins ------------------------------------------------------------------------

def _filter_err(plugin: str) -> Status:
    return Status(E, f'running "{plugin}" filter plugin: {INJECT_FILTER}', plugin=plugin)


@pytest.mark.parametrize("name, plugins, skipped, want", [
    ("SuccessFilter", [("TestPlugin", S)], set(), None),
    ("ErrorFilter", [("TestPlugin", E)], set(), _filter_err("TestPlugin")),
    ("UnschedulableFilter", [("TestPlugin", U)], set(), Status(U, INJECT_FILTER, plugin="TestPlugin")),
    ("UnschedulableAndUnresolvableFilter", [("TestPlugin", UU)], set(),
     Status(UU, INJECT_FILTER, plugin="TestPlugin")),
    ("ErrorAndErrorFilters", [("TestPlugin1", E), ("TestPlugin2", E)], set(), _filter_err("TestPlugin1")),
    ("UnschedulableAndUnschedulableFilters", [("TestPlugin1", U), ("TestPlugin2", U)], set(),
     Status(U, INJECT_FILTER, plugin="TestPlugin1")),
    ("UnschedulableAndUnschedulableAndUnresolvableFilters", [("TestPlugin1", UU), ("TestPlugin2", U)], set(),
     Status(UU, INJECT_FILTER, plugin="TestPlugin1")),
    ("SuccessAndSuccessFilters", [("TestPlugin1", S), ("TestPlugin2", S)], set(), None),
    ("SuccessAndSkipFilters", [("TestPlugin1", S), ("TestPlugin2", E)], {"TestPlugin2"}, None),
    ("ErrorAndSuccessFilters", [("TestPlugin1", E), ("TestPlugin2", S)], set(), _filter_err("TestPlugin1")),
    ("SuccessAndErrorFilters", [("TestPlugin1", S), ("TestPlugin2", E)], set(), _filter_err("TestPlugin2")),
    ("SuccessAndUnschedulableFilters", [("TestPlugin1", S), ("TestPlugin2", U)], set(),
     Status(U, INJECT_FILTER, plugin="TestPlugin2")),
])
def test_filter_plugins(name: str, plugins: list[tuple[str, Code]], skipped: set[str], want: Status | None) -> None:
    fw, core = framework_at("filter", *[TestPlugin(n, filter=c) for n, c in plugins])
    state = CycleState()
    state.skip_filter_plugins = skipped
    got = fw.run_filter(state, pod("p"), ni(core))
    same(got, want)
    if got is not None and want is not None:
        assert got.plugin == want.plugin


# ---- TestPostFilterPlugins --------------------------------------------------------------------

@pytest.mark.parametrize("name, plugins, want", [
    ("a single plugin makes a Pod schedulable", [("TestPlugin", S)], Status(S, INJECT)),
    ("plugin1 failed to make a Pod schedulable, followed by plugin2 which makes the Pod schedulable",
     [("TestPlugin1", U), ("TestPlugin2", S)], Status(S, INJECT)),
    ("plugin1 makes a Pod schedulable, followed by plugin2 which cannot make the Pod schedulable",
     [("TestPlugin1", S), ("TestPlugin2", U)], Status(S, INJECT)),
    ("plugin1 failed to make a Pod schedulable, followed by plugin2 which makes the Pod schedulable (error)",
     [("TestPlugin1", E), ("TestPlugin2", S)], Status(E, INJECT, plugin="TestPlugin1")),
    ("plugin1 failed to make a Pod schedulable, followed by plugin2 which makes the Pod unresolvable",
     [("TestPlugin1", U), ("TestPlugin2", UU)], Status(UU, INJECT, plugin="TestPlugin2")),
    ("both plugins failed to make a Pod schedulable", [("TestPlugin1", U), ("TestPlugin2", U)],
     Status(U, INJECT, INJECT, plugin="TestPlugin1")),
])
def test_post_filter_plugins(name: str, plugins: list[tuple[str, Code]], want: Status) -> None:
    fw, _ = framework_at("postFilter", *[TestPlugin(n, post_filter=c) for n, c in plugins])
    _, got = fw.run_post_filter(CycleState(), pod("p"), NodeToStatus())
    same(got, want)
    if want.code is E:
        assert got.plugin == want.plugin


def test_post_filter_keeps_the_last_non_noop_result() -> None:
    # RunPostFilterPlugins: `result` records the last meaningful (non-noop) PostFilterResult.
    from kubecore.scheduler.interface import NominatingMode

    class PF:
        def __init__(self, name: str, result: PostFilterResult | None) -> None:
            self.name, self.result = name, result

        def post_filter(self, state: CycleState, p: Obj,
                        statuses: NodeToStatus) -> tuple[PostFilterResult | None, Status | None]:
            return self.result, Status(U, self.name)

    real = PostFilterResult.nominate("n1")
    noop = PostFilterResult(NominatingInfo("", NominatingMode.NOOP))
    fw, _ = framework_at("postFilter", PF("a", real), PF("b", noop), PF("c", None))
    result, st = fw.run_post_filter(CycleState(), pod("p"), NodeToStatus())
    assert result is real and st.code is U and st.reasons == ["a", "b", "c"] and st.plugin == "a"


# ---- TestFilterPluginsWithNominatedPods -------------------------------------------------------

LOW, HIGH = pod("low", priority=0), pod("high", priority=1000)


@pytest.mark.parametrize("name, pre_filter, filter_, p, nominated, want", [
    ("node has no nominated pod", None, None, LOW, None, None),
    ("node has a high-priority nominated pod and all filters succeed", TestPlugin("TestPlugin1", add_pod=S),
     TestPlugin("TestPlugin2", filter=S), LOW, HIGH, None),
    ("node has a high-priority nominated pod and pre filters fail", TestPlugin("TestPlugin1", add_pod=E), None,
     LOW, HIGH, Status(E, f'running AddPod on PreFilter plugin "TestPlugin1": {INJECT}')),
    ("node has a high-priority nominated pod and filters fail", TestPlugin("TestPlugin1", add_pod=S),
     TestPlugin("TestPlugin2", filter=E), LOW, HIGH,
     Status(E, f'running "TestPlugin2" filter plugin: {INJECT_FILTER}', plugin="TestPlugin2")),
    ("node has a low-priority nominated pod and pre filters return unschedulable",
     TestPlugin("TestPlugin1", add_pod=U), TestPlugin("TestPlugin2", filter=S), HIGH, LOW, None),
])
def test_filter_plugins_with_nominated_pods(name: str, pre_filter: TestPlugin | None, filter_: TestPlugin | None,
                                            p: Obj, nominated: Obj | None, want: Status | None) -> None:
    plugins = [x for x in (pre_filter, filter_) if x is not None]
    points: dict[str, Any] = {}
    if pre_filter is not None:
        points["preFilter"] = {"enabled": [{"name": pre_filter.name}]}
    if filter_ is not None:
        points["filter"] = {"enabled": [{"name": filter_.name}]}
    core, _, _ = build(config([python_profile(**points)]), out_of_tree={x.name: _factory(x) for x in plugins})
    core.cache.add_node(node("testNode"))
    fw = core.frameworks[PROFILE]
    got = fw.run_filter_with_nominated(CycleState(), p, ni(core, "testNode"), [nominated] if nominated else [])
    same(got, want)


# ---- TestPreBindPlugins / TestReservePlugins / TestPermitPlugins --------------------------------

_CHAIN_CASES = [
    ("No{X}Plugin", [], None),
    ("Success{X}Plugins", [("TestPlugin", S)], None),
    ("Unschedulable{X}Plugin", [("TestPlugin", U)], Status(U, INJECT, plugin="TestPlugin")),
    ("Error{X}Plugin", [("TestPlugin", E)], "err:TestPlugin"),
    ("UnschedulableAndUnresolvable{X}Plugin", [("TestPlugin", UU)], Status(UU, INJECT, plugin="TestPlugin")),
    ("SuccessError{X}Plugins", [("TestPlugin", S), ("TestPlugin 1", E)], "err:TestPlugin 1"),
    ("ErrorSuccess{X}Plugin", [("TestPlugin", E), ("TestPlugin 1", S)], "err:TestPlugin"),
    ("SuccessSuccess{X}Plugin", [("TestPlugin", S), ("TestPlugin 1", S)], None),
    ("ErrorAndErrorPlugins", [("TestPlugin", E), ("TestPlugin 1", E)], "err:TestPlugin"),
    ("UnschedulableAndSuccess{X}Plugin", [("TestPlugin", U), ("TestPlugin 1", S)],
     Status(U, INJECT, plugin="TestPlugin")),
]


def _want_chain(want: Any, what: str) -> Status | None:
    if isinstance(want, str):
        plugin = want.removeprefix("err:")
        return Status(E, f'running {what} plugin "{plugin}": {INJECT}')
    assert want is None or isinstance(want, Status)
    return want


@pytest.mark.parametrize("name, plugins, want", _CHAIN_CASES)
async def test_pre_bind_plugins(name: str, plugins: list[tuple[str, Code]], want: Any) -> None:
    fw, _ = framework_at("preBind", *[TestPlugin(n, pre_bind=c) for n, c in plugins])
    same(await fw.run_pre_bind(CycleState(), pod("p"), ""), _want_chain(want, "PreBind"))


@pytest.mark.parametrize("name, plugins, want", _CHAIN_CASES)
def test_reserve_plugins(name: str, plugins: list[tuple[str, Code]], want: Any) -> None:
    fw, _ = framework_at("reserve", *[TestPlugin(n, reserve=c) for n, c in plugins])
    same(fw.run_reserve(CycleState(), pod("p"), ""), _want_chain(want, "Reserve"))


@pytest.mark.parametrize("name, plugins, want", [
    ("NilPermitPlugin", [], None),
    ("SuccessPermitPlugin", [("TestPlugin", S)], None),
    ("UnschedulablePermitPlugin", [("TestPlugin", U)], Status(U, INJECT, plugin="TestPlugin")),
    ("ErrorPermitPlugin", [("TestPlugin", E)], "err:TestPlugin"),
    ("UnschedulableAndUnresolvablePermitPlugin", [("TestPlugin", UU)], Status(UU, INJECT, plugin="TestPlugin")),
    ("WaitPermitPlugin", [("TestPlugin", W)],
     Status(W, 'one or more plugins asked to wait and no plugin rejected pod ""')),
    ("SuccessSuccessPermitPlugin", [("TestPlugin", S), ("TestPlugin 1", S)], None),
    ("ErrorAndErrorPlugins", [("TestPlugin", E), ("TestPlugin 1", E)], "err:TestPlugin"),
])
def test_permit_plugins(name: str, plugins: list[tuple[str, Code]], want: Any) -> None:
    fw, _ = framework_at("permit", *[TestPlugin(n, permit=c) for n, c in plugins])
    got = fw.run_permit(CycleState(), pod(""), "")
    same(got, _want_chain(want, "Permit"))
    if isinstance(want, str):  # upstream: AsStatus(...).WithPlugin(plugin)
        assert got is not None and got.plugin == want.removeprefix("err:")


# ---- TestRunBindPlugins -----------------------------------------------------------------------

@pytest.mark.parametrize("name, injects, want", [
    ("simple success", [S], S),
    ("error on second", [SKIP, E, S], E),
    ("all skip", [SKIP, SKIP, SKIP], SKIP),
    ("error on third, but not reached", [SKIP, S, E], S),
    ("no bind plugin, returns default binder", [], S),
    ("invalid status", [U], U),
    ("simple error", [E], E),
    ("success on second, returns success", [SKIP, S], S),
    ("invalid status, returns error", [SKIP, UU], UU),
    ("error after success status, returns success", [S, E], S),
    ("success before invalid status, returns success", [S, E], S),
    ("success after error status, returns error", [E, S], E),
])
async def test_run_bind_plugins(name: str, injects: list[Code], want: Code) -> None:
    plugins = [TestPlugin(f"bind-{i}", bind=c) for i, c in enumerate(injects)]
    fw, _ = framework_at("bind", *plugins, only=bool(plugins))
    st = await fw.run_bind(CycleState(), pod("p"), "node1")
    assert (st.code if st is not None else S) is want
    if want is E:
        assert st is not None and st.message() == f'running Bind plugin "bind-{injects.index(E)}": {INJECT}'


# ---- TestWaitOnPermit -------------------------------------------------------------------------

class WaitingPermit:
    """TestPermitPlugin: always Wait for 10s."""

    name = "permit-plugin"

    def permit(self, state: CycleState, p: Obj, node_name: str) -> tuple[Status | None, float]:
        return Status(W), 10.0


@pytest.mark.parametrize("name, allow, want", [
    ("Reject Waiting Pod", False, Status(U, "reject message", plugin="permit-plugin")),
    ("Allow Waiting Pod", True, None),
])
async def test_wait_on_permit(name: str, allow: bool, want: Status | None) -> None:
    fw, _ = framework_at("permit", WaitingPermit())
    p = pod("pod")
    st = fw.run_permit(CycleState(), p, "")
    assert st is not None and st.code is W
    waiter = asyncio.ensure_future(fw.wait_on_permit(p))
    await settle()
    wp = fw.waiting_pods.get("default/pod")
    assert wp is not None
    if allow:
        wp.allow("permit-plugin")
    else:
        wp.reject("permit-plugin", "reject message")
    same(await waiter, want)
    assert fw.waiting_pods.get("default/pod") is None


async def test_wait_on_permit_timeout_is_capped_at_fifteen_minutes() -> None:
    # RunPermitPlugins: "Not allowed to be greater than maxTimeout" (15m).
    class Long:
        name = "long"

        def permit(self, state: CycleState, p: Obj, node_name: str) -> tuple[Status | None, float]:
            return Status(W), 3600.0

    fw, core = framework_at("permit", Long())
    p = pod("p")
    fw.run_permit(CycleState(), p, "n")
    waiter = asyncio.ensure_future(fw.wait_on_permit(p))
    clock = core.clock
    assert isinstance(clock, FakeClock)
    await settle()
    await clock.step(15 * 60 + 0.1)
    st = await asyncio.wait_for(waiter, 1)
    assert st is not None and st.code is U and st.plugin == "long"
    assert st.message() == "rejected due to timeout after waiting 15m0s at plugin long"


# ---- TestRunPreScorePlugins / TestRunScorePlugins ---------------------------------------------

@pytest.mark.parametrize("name, plugins, want_skipped, want_code", [
    ("all PreScorePlugins returned success", [TestPlugin("success1"), TestPlugin("success2")], set(), S),
    ("one PreScore plugin returned success, but another PreScore plugin returned non-success",
     [TestPlugin("success"), TestPlugin("error", pre_score=E)], set(), E),
    ("one PreScore plugin returned skip, but another PreScore plugin returned non-success",
     [TestPlugin("skip", pre_score=SKIP), TestPlugin("error", pre_score=E)], {"skip"}, E),
    ("all PreScore plugins returned skip",
     [TestPlugin("skip1", pre_score=SKIP), TestPlugin("skip2", pre_score=SKIP), TestPlugin("skip3", pre_score=SKIP)],
     {"skip1", "skip2", "skip3"}, S),
    ("some PreScore plugins returned skip",
     [TestPlugin("skip1", pre_score=SKIP), TestPlugin("success1"), TestPlugin("skip2", pre_score=SKIP),
      TestPlugin("success2")], {"skip1", "skip2"}, S),
])
def test_run_pre_score_plugins(name: str, plugins: list[TestPlugin], want_skipped: set[str], want_code: Code) -> None:
    fw, core = framework_at("preScore", *plugins)
    state = CycleState()
    st = fw.run_pre_score(state, pod("p"), core.cache.node_infos())
    assert (st.code if st is not None else S) is want_code
    assert set(state.skip_score_plugins) == want_skipped


class ScorePlugin1:
    """framework_test.go's TestScorePlugin (PreScore + Score, no NormalizeScore)."""

    def __init__(self, name: str, score_res: int = 0, score_status: Code = S) -> None:
        self.name, self.score_res, self.score_status = name, score_res, score_status

    def pre_score(self, state: CycleState, p: Obj, nodes: list[NodeInfo]) -> Status | None:
        return None

    def score(self, state: CycleState, p: Obj, info: NodeInfo) -> tuple[int, Status | None]:
        if self.score_status is not S:
            return 0, Status(self.score_status, "injecting failure.")
        return self.score_res, None


class ScoreWithNormalize:
    """framework_test.go's TestScoreWithNormalizePlugin: NormalizeScore overrides every score."""

    def __init__(self, name: str, score_res: int = 0, normalize_res: int = 0, score_status: Code = S,
                 normalize_status: Code = S) -> None:
        self.name, self.score_res, self.normalize_res = name, score_res, normalize_res
        self.score_status, self.normalize_status = score_status, normalize_status

    def score(self, state: CycleState, p: Obj, info: NodeInfo) -> tuple[int, Status | None]:
        if self.score_status is not S:
            return 0, Status(self.score_status, "injecting failure.")
        return self.score_res, None

    def normalize_score(self, state: CycleState, p: Obj, scores: list[NodeScore]) -> Status | None:
        if self.normalize_status is not S:
            return Status(self.normalize_status, "injecting failure.")
        for s in scores:
            s.score = self.normalize_res
        return None


SP1, SN1, SN2 = "score-plugin-1", "score-with-normalize-plugin-1", "score-with-normalize-plugin-2"
DEFAULT_WEIGHTS = {SN1: 1, SN2: 2, SP1: 1}


@pytest.mark.parametrize("name, plugins, skipped, want", [
    ("no Score plugins", [], set(), [0, 0]),
    ("single Score plugin", [ScorePlugin1(SP1, 1)], set(), [1, 1]),
    ("single ScoreWithNormalize plugin", [ScoreWithNormalize(SN1, 10, 5)], set(), [5, 5]),
    ("3 Score plugins, 2 NormalizeScore plugins",
     [ScorePlugin1(SP1, 1), ScoreWithNormalize(SN1, 3, 4), ScoreWithNormalize(SN2, 4, 5)], set(), [15, 15]),
    ("score fails", [ScorePlugin1(SP1), ScoreWithNormalize(SN1, score_status=E)], set(),
     f'running Score plugins: plugin "{SN1}" failed with: injecting failure.'),
    ("normalize fails", [ScorePlugin1(SP1), ScoreWithNormalize(SN1, normalize_status=E)], set(),
     f'running Normalize on Score plugins: plugin "{SN1}" failed with: injecting failure.'),
    ("Score plugin return score greater than MaxNodeScore", [ScorePlugin1(SP1, 101)], set(),
     f'applying score defaultWeights on Score plugins: plugin "{SP1}" returns an invalid score 101, '
     "it should in the range of [0, 100] after normalizing"),
    ("Score plugin return score less than MinNodeScore", [ScorePlugin1(SP1, -1)], set(),
     f'applying score defaultWeights on Score plugins: plugin "{SP1}" returns an invalid score -1, '
     "it should in the range of [0, 100] after normalizing"),
    ("ScoreWithNormalize plugin return score greater than MaxNodeScore", [ScoreWithNormalize(SN1, 0, 101)], set(),
     f'applying score defaultWeights on Score plugins: plugin "{SN1}" returns an invalid score 101, '
     "it should in the range of [0, 100] after normalizing"),
    ("ScoreWithNormalize plugin return score less than MinNodeScore", [ScoreWithNormalize(SN1, 0, -1)], set(),
     f'applying score defaultWeights on Score plugins: plugin "{SN1}" returns an invalid score -1, '
     "it should in the range of [0, 100] after normalizing"),
    ("one success plugin, one skip plugin", [ScorePlugin1(SP1, 1), ScoreWithNormalize(SN1, score_status=E)],
     {SN1}, [1, 1]),
    ("all plugins are skipped in prescore", [ScorePlugin1(SP1, score_status=E)], {SP1}, [0, 0]),
    ("skipped prescore plugin number greater than the number of score plugins", [ScorePlugin1(SP1)],
     {SP1, "score-plugin-unknown"}, [0, 0]),
])
def test_run_score_plugins(name: str, plugins: list[Any], skipped: set[str], want: list[int] | str) -> None:
    fw, core = framework_at("score", *plugins, weights=DEFAULT_WEIGHTS)
    state = CycleState()
    state.skip_score_plugins = skipped
    totals, st = fw.run_score(state, pod("p"), core.cache.node_infos())
    if isinstance(want, str):
        assert st is not None and st.code is E and st.message() == want
    else:
        assert st is None and totals == want


def test_run_score_plugins_single_score_plugin_with_multi_point_expansion() -> None:
    # "single Score plugin with MultiPointExpansion": multiPoint enables it, Score sets weight 3.
    p = ScorePlugin1(SP1, 1)
    prof = python_profile(SP1, score={"enabled": [{"name": SP1, "weight": 3}]})
    core, _, _ = build(config([prof]), out_of_tree={SP1: _factory(p)})
    for i in (1, 2):
        core.cache.add_node(node(f"node{i}"))
    totals, st = core.frameworks[PROFILE].run_score(CycleState(), pod("p"), core.cache.node_infos())
    assert st is None and totals == [3, 3]


# ---- TestInitFrameworkWithScorePlugins / TestNewFrameworkMultiPointExpansion -------------------

class NotScore:
    name = "plugin-not-implementing-score"


@pytest.mark.parametrize("name, enabled, init_err", [
    ("enabled Score plugin doesn't exist in registry", ["notExist"], True),
    ("enabled Score plugin doesn't extend the ScorePlugin interface", ["plugin-not-implementing-score"], True),
    ("enabled Score plugin list is empty", [], False),
    ("enabled plugin only implements ScorePlugin interface", [SP1], False),
    ("enabled plugin implements ScoreWithNormalizePlugin interface", [SN1], False),
])
def test_init_framework_with_score_plugins(name: str, enabled: list[str], init_err: bool) -> None:
    registry = {SP1: _factory(ScorePlugin1(SP1)), SN1: _factory(ScoreWithNormalize(SN1)),
                NotScore.name: _factory(NotScore())}
    prof = python_profile(score={"enabled": [{"name": n} for n in enabled]})
    if init_err:
        with pytest.raises(ConfigError):
            build(config([prof]), out_of_tree=registry)
    else:
        build(config([prof]), out_of_tree=registry)


# ---- schedule_one_test.go: fake plugins -------------------------------------------------------

class FalseFilter:
    name = "FalseFilter"

    def filter(self, state: CycleState, p: Obj, info: NodeInfo) -> Status | None:
        return Status(U, ERR_REASON_FAKE)


class TrueFilter:
    name = "TrueFilter"

    def filter(self, state: CycleState, p: Obj, info: NodeInfo) -> Status | None:
        return None


class MatchFilter:
    name = "MatchFilter"

    def filter(self, state: CycleState, p: Obj, info: NodeInfo) -> Status | None:
        return None if p["metadata"]["name"] == info.name else Status(U, ERR_REASON_FAKE)


class NoPodsFilter:
    name = "NoPodsFilter"

    def filter(self, state: CycleState, p: Obj, info: NodeInfo) -> Status | None:
        return None if not info.pods else Status(U, ERR_REASON_FAKE)


class FakeFilter:
    """tf.FakeFilterPlugin: counts calls; nodes in `codes` fail with "injecting failure for pod <name>"."""

    def __init__(self, codes: dict[str, Code] | None = None, name: str = "FakeFilter") -> None:
        self.name, self.codes, self.num_filter_called = name, codes or {}, 0

    def filter(self, state: CycleState, p: Obj, info: NodeInfo) -> Status | None:
        self.num_filter_called += 1
        code = self.codes.get(info.name)
        return None if code is None else Status(code, f"injecting failure for pod {p['metadata']['name']}")


class FakePreFilter:
    def __init__(self, name: str, result: PreFilterResult | None, status: Status | None) -> None:
        self.name, self.result, self.status = name, result, status

    def pre_filter(self, state: CycleState, p: Obj) -> tuple[PreFilterResult | None, Status | None]:
        return self.result, self.status


class FakePreFilterAndFilter:
    """tf.FakePreFilterAndFilterPlugin: PreFilter answers Skip; Filter would fail every node with Error."""

    name = "FakeFilter2"

    def pre_filter(self, state: CycleState, p: Obj) -> tuple[PreFilterResult | None, Status | None]:
        return None, Status(SKIP)

    def filter(self, state: CycleState, p: Obj, info: NodeInfo) -> Status | None:
        return Status(E, f"injecting failure for pod {p['metadata']['name']}")


class FakePreScoreAndScore:
    def __init__(self, name: str, score: int, pre_score_status: Status | None, score_status: Status | None) -> None:
        self.name, self._score = name, score
        self.pre_score_status, self.score_status = pre_score_status, score_status

    def pre_score(self, state: CycleState, p: Obj, nodes: list[NodeInfo]) -> Status | None:
        return self.pre_score_status

    def score(self, state: CycleState, p: Obj, info: NodeInfo) -> tuple[int, Status | None]:
        return self._score, self.score_status


def EqualPrioritizer() -> FakePreScoreAndScore:  # noqa: N802 - upstream's constructor name
    return FakePreScoreAndScore("EqualPrioritizerPlugin", 1, None, None)


class NumericMap:
    name = "NumericMap"

    def score(self, state: CycleState, p: Obj, info: NodeInfo) -> tuple[int, Status | None]:
        return int(info.name), None


class ReverseNumericMap:
    name = "ReverseNumericMap"

    def score(self, state: CycleState, p: Obj, info: NodeInfo) -> tuple[int, Status | None]:
        return int(info.name), None

    def normalize_score(self, state: CycleState, p: Obj, scores: list[NodeScore]) -> Status | None:
        hi, lo = max(s.score for s in scores), min(s.score for s in scores)
        for s in scores:
            s.score = hi + lo - s.score
        return None


class FalseMap:
    name = "FalseMap"

    def score(self, state: CycleState, p: Obj, info: NodeInfo) -> tuple[int, Status | None]:
        return 0, Status(E, "priority map encounters an error")


class TrueMap:
    name = "TrueMap"

    def score(self, state: CycleState, p: Obj, info: NodeInfo) -> tuple[int, Status | None]:
        return 1, None

    def normalize_score(self, state: CycleState, p: Obj, scores: list[NodeScore]) -> Status | None:
        return Status(E, "unexpected empty host name") if any(not s.name for s in scores) else None


class Node2Prioritizer:
    name = "Node2Prioritizer"

    def score(self, state: CycleState, p: Obj, info: NodeInfo) -> tuple[int, Status | None]:
        return (100 if info.name == "node2" else 10), None


def sched(plugins: list[Any], nodes: list[str], *, weights: dict[str, int] | None = None,
          pods: list[Obj] | None = None, **top: Any) -> SchedulerCore:
    """tf.NewFramework with `plugins` (each at every point it implements) over `nodes`."""
    points: dict[str, Any] = {}
    if weights:
        points["score"] = {"enabled": [{"name": n, "weight": w} for n, w in weights.items()]}
    prof = python_profile(*[p.name for p in plugins], **points)
    core, _, _ = build(config([prof], **top), out_of_tree={p.name: _factory(p) for p in plugins})
    for n in nodes:
        core.cache.add_node(node(n))
    for p in pods or ():
        core.cache.add_pod(p)
    return core


def cycle(core: SchedulerCore, p: Obj) -> Assumed | Failed:
    core.queue.add(p)
    pinfo = core.queue.pop()
    assert pinfo is not None
    return schedule_one(core.frameworks[PROFILE], pinfo)


def feasible(core: SchedulerCore, p: Obj) -> Any:
    """upstream findNodesThatFitPod for `p` (PreFilter, the nominated node, Filter)."""
    core.queue.add(p)
    pinfo = core.queue.pop()
    assert pinfo is not None
    return find_feasible(core.frameworks[PROFILE], CycleState(), pinfo)


# ---- TestSchedulerSchedulePod -----------------------------------------------------------------

def _fit(num: int, reasons: str, plugins: set[str]) -> tuple[str, set[str]]:
    return f"0/{num} nodes are available: {reasons}.", plugins


SCHEDULE_POD_CASES: list[tuple[str, Any, list[str], dict[str, int] | None, str, list[Obj], Any, int | None]] = [
    # (name, plugins factory, nodes, score weights, pod name, existing pods, want nodes | FitError | error, evaluated)
    ("test 1", lambda: [FalseFilter()], ["node1", "node2"], None, "2", [],
     _fit(2, f"2 {ERR_REASON_FAKE}", {"FalseFilter"}), None),
    ("test 2", lambda: [TrueFilter(), EqualPrioritizer()], ["node1", "node2"], None, "ignore", [],
     {"node1", "node2"}, None),
    ("test 3", lambda: [MatchFilter()], ["node1", "node2"], None, "node2", [], {"node2"}, None),
    ("test 4", lambda: [TrueFilter(), NumericMap()], ["3", "2", "1"], None, "ignore", [], {"3"}, None),
    ("test 5", lambda: [MatchFilter(), NumericMap()], ["3", "2", "1"], None, "2", [], {"2"}, None),
    ("test 6", lambda: [TrueFilter(), NumericMap(), ReverseNumericMap()], ["3", "2", "1"],
     {"NumericMap": 1, "ReverseNumericMap": 2}, "2", [], {"1"}, None),
    ("test 7", lambda: [TrueFilter(), FalseFilter(), NumericMap()], ["3", "2", "1"], None, "2", [],
     _fit(3, f"3 {ERR_REASON_FAKE}", {"FalseFilter"}), None),
    ("test 8", lambda: [NoPodsFilter(), MatchFilter(), NumericMap()], ["1", "2"], None, "2",
     [pod("2", node_name="2", namespace="other")], _fit(2, f"2 {ERR_REASON_FAKE}", {"MatchFilter", "NoPodsFilter"}),
     None),
    ("test error with priority map", lambda: [TrueFilter(), FalseMap(), TrueMap()], ["2", "1"],
     {"FalseMap": 1, "TrueMap": 2}, "2", [],
     'running Score plugins: plugin "FalseMap" failed with: priority map encounters an error', None),
    ("test with filter plugin returning Unschedulable status", lambda: [FakeFilter({"3": U}), NumericMap()], ["3"],
     None, "test-filter", [], _fit(1, "1 injecting failure for pod test-filter", {"FakeFilter"}), None),
    ("test with filter plugin returning UnschedulableAndUnresolvable status",
     lambda: [FakeFilter({"3": UU}), NumericMap()], ["3"], None, "test-filter", [],
     _fit(1, "1 injecting failure for pod test-filter", {"FakeFilter"}), None),
    ("test with partial failed filter plugin", lambda: [FakeFilter({"1": U}), NumericMap()], ["1", "2"], None,
     "test-filter", [], {"2"}, None),
    ("test prefilter plugin returning Unschedulable status",
     lambda: [FakePreFilter("FakePreFilter", None, Status(UU, "injected unschedulable status"))], ["1", "2"], None,
     "test-prefilter", [], _fit(2, "injected unschedulable status", {"FakePreFilter"}), None),
    ("test prefilter plugin returning error status",
     lambda: [FakePreFilter("FakePreFilter", None, Status(E, "injected error status"))], ["1", "2"], None,
     "test-prefilter", [], 'running PreFilter plugin "FakePreFilter": injected error status', None),
    ("test prefilter plugin returning node",
     lambda: [FakePreFilter("FakePreFilter1", None, None),
              FakePreFilter("FakePreFilter2", PreFilterResult(["node2"]), None),
              FakePreFilter("FakePreFilter3", PreFilterResult(["node1", "node2"]), None)],
     ["node1", "node2", "node3"], None, "test-prefilter", [], {"node2"}, 1),
    ("test prefilter plugin returning non-intersecting nodes",
     lambda: [FakePreFilter("FakePreFilter1", None, None),
              FakePreFilter("FakePreFilter2", PreFilterResult(["node2"]), None),
              FakePreFilter("FakePreFilter3", PreFilterResult(["node1"]), None)],
     ["node1", "node2", "node3"], None, "test-prefilter", [],
     _fit(3, "node(s) didn't satisfy plugin(s) [FakePreFilter2 FakePreFilter3] simultaneously",
          {"FakePreFilter2", "FakePreFilter3"}), None),
    ("test prefilter plugin returning empty node set",
     lambda: [FakePreFilter("FakePreFilter1", None, None), FakePreFilter("FakePreFilter2", PreFilterResult([]), None)],
     ["node1"], None, "test-prefilter", [],
     _fit(1, "node(s) didn't satisfy plugin FakePreFilter2", {"FakePreFilter2"}), None),
    ("test some nodes are filtered out by prefilter plugin and other are filtered out by filter plugin",
     lambda: [FakePreFilter("FakePreFilter", PreFilterResult(["node2"]), None), FakeFilter({"node2": U})],
     ["node1", "node2"], None, "test-prefilter", [],
     _fit(2, "1 injecting failure for pod test-prefilter, 1 node(s) didn't satisfy plugin(s) [FakePreFilter]",
          {"FakePreFilter", "FakeFilter"}), None),
    ("test prefilter plugin returning skip",
     lambda: [FakePreFilter("FakePreFilter1", None, None), FakeFilter({"node1": U}, name="FakeFilter1"),
              FakePreFilterAndFilter(), EqualPrioritizer()],
     ["node1", "node2", "node3"], None, "test-prefilter", [], {"node2", "node3"}, 3),
    ("test all prescore plugins return skip",
     lambda: [TrueFilter(), FakePreScoreAndScore(
         "FakePreScoreAndScorePlugin", 0, Status(SKIP, "fake skip"),
         Status(E, "this score function shouldn't be executed because this plugin returned Skip in the PreScore"))],
     ["node1", "node2"], None, "ignore", [], {"node1", "node2"}, None),
    ("test without score plugin no extra nodes are evaluated", lambda: [TrueFilter()], ["node1", "node2", "node3"],
     None, "pod1", [], {"node1", "node2", "node3"}, 1),
    ("test no score plugin, prefilter plugin returning 2 nodes",
     lambda: [FakePreFilter("FakePreFilter", PreFilterResult(["node1", "node2"]), None)],
     ["node1", "node2", "node3"], None, "test-prefilter", [], {"node1", "node2"}, 1),
    ("test prefilter plugin returned an invalid node",
     lambda: [FakePreFilter("FakePreFilter", PreFilterResult(["invalid-node"]), None), TrueFilter()], ["1", "2"], None,
     "test-prefilter", [], _fit(2, "2 node(s) didn't satisfy plugin(s) [FakePreFilter]", {"FakePreFilter"}), None),
]


@pytest.mark.parametrize("name, plugins, nodes, weights, pod_name, pods, want, evaluated", SCHEDULE_POD_CASES)
def test_scheduler_schedule_pod(name: str, plugins: Any, nodes: list[str], weights: dict[str, int] | None,
                                pod_name: str, pods: list[Obj], want: Any, evaluated: int | None) -> None:
    core = sched(plugins(), nodes, weights=weights, pods=pods)
    out = cycle(core, pod(pod_name))
    if isinstance(want, set):
        assert isinstance(out, Assumed), out
        assert out.node in want
        assert out.evaluated == (evaluated if evaluated is not None else len(nodes))
    elif isinstance(want, tuple):
        assert isinstance(out, Failed) and out.fit_error is not None, out
        assert (out.message, set(out.unschedulable_plugins)) == want
        assert out.reason == "Unschedulable"
    else:
        assert isinstance(out, Failed) and out.fit_error is None, out
        assert out.message == want and out.reason == "SchedulerError"


def test_find_fit_all_error() -> None:
    # TestFindFitAllError (the pod's name matches no node)
    core = sched([TrueFilter(), MatchFilter()], ["3", "2", "1"])
    f = feasible(core, pod("x"))
    assert not f.names
    nts = f.diagnosis.node_to_status.explicit
    assert {n: (s.code, s.reasons, s.plugin) for n, s in nts.items()} == {
        n: (U, [ERR_REASON_FAKE], "MatchFilter") for n in ("1", "2", "3")}
    assert f.diagnosis.unschedulable_plugins == {"MatchFilter"}


def test_find_fit_some_error() -> None:
    # TestFindFitSomeError
    core = sched([TrueFilter(), MatchFilter()], ["3", "2", "1"])
    f = feasible(core, pod("1"))
    assert f.names == ["1"] and len(f.diagnosis.node_to_status) == 2
    assert f.diagnosis.unschedulable_plugins == {"MatchFilter"}
    assert all(s.reasons == [ERR_REASON_FAKE] for s in f.diagnosis.node_to_status.explicit.values())


@pytest.mark.parametrize("name, priority, expected", [
    ("nominated pods have lower priority, predicate is called once", 1000, 1),
    ("nominated pods have higher priority, predicate is called twice", 0, 2),
])
def test_find_fit_predicate_call_counts(name: str, priority: int, expected: int) -> None:
    fake = FakeFilter()
    core = sched([fake], ["1"])
    nominated = pod("nominated", priority=100)
    core.queue.nominator.add(nominated, NominatingInfo("1"))
    feasible(core, pod("1", priority=priority))
    assert fake.num_filter_called == expected


@pytest.mark.parametrize("name, profile_pct, global_pct, num_all, want", [
    ("not set percentageOfNodesToScore and nodes number not more than 50", None, 0, 10, 10),
    ("set profile percentageOfNodesToScore and nodes number not more than 50", 40, 0, 10, 10),
    ("not set percentageOfNodesToScore and nodes number more than 50", None, 0, 1000, 420),
    ("set profile percentageOfNodesToScore and nodes number more than 50", 40, 0, 1000, 400),
    ("set global and profile percentageOfNodesToScore and nodes number more than 50", 40, 100, 1000, 400),
    ("set global percentageOfNodesToScore and nodes number more than 50", None, 40, 1000, 400),
    ("not set profile percentageOfNodesToScore and nodes number more than 50*125", None, 0, 6000, 300),
    ("set profile percentageOfNodesToScore and nodes number more than 50*125", 40, 0, 6000, 2400),
])
def test_num_feasible_nodes_to_find(name: str, profile_pct: int | None, global_pct: int, num_all: int,
                                    want: int) -> None:
    prof = python_profile("TrueFilter")
    if profile_pct is not None:
        prof["percentageOfNodesToScore"] = profile_pct
    core, _, _ = build(config([prof], percentageOfNodesToScore=global_pct),
                       out_of_tree={"TrueFilter": _factory(TrueFilter())})
    fw = core.frameworks[PROFILE]
    assert num_feasible_nodes_to_find(fw.percentage_of_nodes_to_score, num_all) == want


def test_fair_evaluation_for_nodes() -> None:
    # TestFairEvaluationForNodes: 500 nodes, percentageOfNodesToScore 30 -> 150 nodes a cycle, the
    # next cycle starting where the last one stopped.
    num_all = 500
    core = sched([TrueFilter(), EqualPrioritizer()], [str(i) for i in range(num_all)], percentageOfNodesToScore=30)
    fw = core.frameworks[PROFILE]
    to_find = num_feasible_nodes_to_find(fw.percentage_of_nodes_to_score, num_all)
    assert to_find == 150
    for i in range(2 * (num_all // to_find + 1)):
        f = feasible(core, pod(f"p{i}"))
        assert len(f.names) == to_find
        assert core.cache.next_start_index == (i + 1) * to_find % num_all


@pytest.mark.parametrize("name, nominated, codes, expected", [
    ("pod has the nominated node set, filter is called only once", "node1", {}, 1),
    ("pod without the nominated pod, filter is called for each node", "", {}, 3),
    ("nominated pod cannot pass the filter, filter is called for each node", "node1", {"node1": U}, 4),
])
def test_prefer_nominated_node_filter_call_counts(name: str, nominated: str, codes: dict[str, Code],
                                                  expected: int) -> None:
    fake = FakeFilter(codes)
    core = sched([fake, EqualPrioritizer()], ["node1", "node2", "node3"])
    p = pod("p_with_nominated_node" if nominated else "p_without_nominated_node", priority=1000)
    if nominated:
        p["status"] = {"nominatedNodeName": nominated}
    feasible(core, p)
    assert fake.num_filter_called == expected


@pytest.mark.parametrize("name, nominated, want", [
    ("When NNN is present in both snapshot and placement, returns node", "n1", "n1"),
    ("When NNN is not present in snapshot, returns error", "n3", None),  # the error is logged; all nodes are tried
])
def test_evaluate_nominated_node(name: str, nominated: str, want: str | None) -> None:
    fake = FakeFilter()
    core = sched([fake, EqualPrioritizer()], ["n1", "n2"])
    p = pod("p")
    p["status"] = {"nominatedNodeName": nominated}
    f = feasible(core, p)
    if want is not None:
        assert f.names == [want] and fake.num_filter_called == 1
    else:
        assert sorted(f.names) == ["n1", "n2"] and fake.num_filter_called == 2


def test_nominated_node_is_evaluated_even_outside_the_prefilter_result() -> None:
    # findNodesThatFitPod evaluates status.nominatedNodeName before applying the PreFilterResult:
    # only the Filter plugins decide whether the nominated node fits.
    fake = FakeFilter()
    core = sched([FakePreFilter("FakePreFilter", PreFilterResult(["n2"]), None), fake, EqualPrioritizer()],
                 ["n1", "n2"])
    p = pod("p")
    p["status"] = {"nominatedNodeName": "n1"}
    out = cycle(core, p)
    assert isinstance(out, Assumed) and out.node == "n1" and fake.num_filter_called == 1


def test_prioritize_nodes_skips_plugins_that_skipped_in_pre_score() -> None:
    # Test_prioritizeNodes "plugin which returned skip in preScore shouldn't be executed in the score
    # phase" and "all score plugins are skipped" (without the native NodeResourcesBalancedAllocation, 0 here).
    skipper = FakePreScoreAndScore(
        "FakePreScoreAndScorePlugin", 0, Status(SKIP, "fake skip"),
        Status(E, "this score function shouldn't be executed because this plugin returned Skip in the PreScore"))
    for plugins, want in (([Node2Prioritizer(), skipper], [10, 100]), ([skipper], [0, 0])):
        core = sched(plugins, ["node1", "node2"])
        fw = core.frameworks[PROFILE]
        nodes = core.cache.node_infos()
        state = CycleState()
        assert fw.run_pre_score(state, pod("p"), nodes) is None
        totals, st = fw.run_score(state, pod("p"), nodes)
        assert st is None and totals == want


def test_scheduler_multiple_profiles_scheduling() -> None:
    # TestSchedulerMultipleProfilesScheduling: FakeNodeSelector allows the one node of its args.
    class FakeNodeSelector:
        name = "FakeNodeSelector"

        def __init__(self, args: Any) -> None:
            self.node_name = (args or {}).get("nodeName", "")

        def filter(self, state: CycleState, p: Obj, info: NodeInfo) -> Status | None:
            return None if info.name == self.node_name else Status(UU)

    profiles = [python_profile("FakeNodeSelector", name=n, plugin_config=[
        {"name": "FakeNodeSelector", "args": {"nodeName": target}}]) for n, target in
        (("match-node2", "node2"), ("match-node3", "node3"))]
    core, _, _ = build(config(profiles), out_of_tree={"FakeNodeSelector": lambda a, h: FakeNodeSelector(a)})
    for i in (1, 2, 3):
        core.cache.add_node(node(f"node{i}"))
    got = {}
    for name, prof in (("pod1", "match-node3"), ("pod2", "match-node2"), ("pod3", "match-node2"),
                       ("pod4", "match-node3")):
        core.queue.add(pod(name, scheduler=prof))
        pinfo = core.queue.pop()
        assert pinfo is not None
        fw = core.framework_for(pinfo.pod)
        assert fw is not None and fw.name == prof
        out = schedule_one(fw, pinfo)
        assert isinstance(out, Assumed)
        got[name] = out.node
    assert got == {"pod1": "node3", "pod2": "node2", "pod3": "node2", "pod4": "node3"}


# ---- TestSchedulerScheduleOne / TestScheduleOneMarksPodAsProcessedBeforePreBind ---------------

class FakeReserve:
    name = "FakeReserve"

    def __init__(self, status: Status | None) -> None:
        self.status = status

    def reserve(self, state: CycleState, p: Obj, node_name: str) -> Status | None:
        return self.status

    def unreserve(self, state: CycleState, p: Obj, node_name: str) -> None:
        pass


class FakePermit:
    name = "FakePermit"

    def __init__(self, status: Status | None, timeout: float = 60.0) -> None:
        self.status, self.timeout = status, timeout

    def permit(self, state: CycleState, p: Obj, node_name: str) -> tuple[Status | None, float]:
        return self.status, self.timeout


class FakePreBind:
    name = "FakePreBind"

    def __init__(self, status: Status | None) -> None:
        self.status = status

    async def pre_bind(self, state: CycleState, p: Obj, node_name: str) -> Status | None:
        return self.status


class BinderRecorder(Recorder):
    def __init__(self, error: str | None = None) -> None:
        super().__init__()
        self.error = error

    async def bind(self, p: Obj, node_name: str) -> None:
        if self.error is not None:
            raise RuntimeError(self.error)
        await super().bind(p, node_name)


async def _schedule_one(plugins: list[Any], *, bind_error: str | None = None, allow: str = "",
                        p: Obj | None = None) -> tuple[SchedulerCore, Recorder, Any]:
    """ScheduleOne over node1: the scheduling cycle, then the binding cycle, then the failure
    handling; the outcome (Bound or Failed)."""
    rec = BinderRecorder(bind_error)
    core, _, _ = build(config([python_profile(*[x.name for x in plugins])]), rec=rec,
                       out_of_tree={x.name: _factory(x) for x in plugins})
    core.cache.add_node(node("node1"))
    p = p or pod("foo")
    core.queue.add(p)
    pinfo = core.queue.pop()
    assert pinfo is not None
    fw = core.frameworks[PROFILE]
    out: Any = schedule_one(fw, pinfo)
    if isinstance(out, Failed):
        record_failure(core.queue, out)
        return core, rec, out
    if allow:
        wp = fw.waiting_pods.get(pinfo.key)
        assert wp is not None
        wp.allow(allow)
    res = await bind_one(out)
    if isinstance(res, Failed):
        record_binding_failure(core.queue, res)
    return core, rec, res


@pytest.mark.parametrize("name, plugins, bind_error, allow, want_error, want_queue", [
    ("reserve failed with status code error", lambda: [FakeReserve(Status(E, "reserve error"))], None, "",
     'running Reserve plugin "FakeReserve": reserve error', "Backoff"),
    ("reserve failed with status code rejected", lambda: [FakeReserve(Status(UU, "rejected on reserve"))], None, "",
     "0/1 nodes are available: 1 rejected on reserve.", "Unschedulable"),
    ("permit failed with status code error", lambda: [FakePermit(Status(E, "permit error"))], None, "",
     'running Permit plugin "FakePermit": permit error', "Backoff"),
    ("permit failed with status code rejected", lambda: [FakePermit(Status(U, "rejected on permit"))], None, "",
     "0/1 nodes are available: 1 rejected on permit.", "Unschedulable"),
    ("nominated node name is not set, permit plugin is working, but the feature gate "
     "NominatedNodeNameForExpectation is disabled", lambda: [FakePermit(Status(W, "rejected on permit"))], None,
     "FakePermit", None, None),
    ("prebind failed with status code error", lambda: [FakePreBind(Status(E, "on PreBind"))], None, "",
     'running PreBind plugin "FakePreBind": on PreBind', "Backoff"),
    ("binding failed", lambda: [], "binder", "", 'running Bind plugin "DefaultBinder": binder', "Backoff"),
    ("bind assumed pod scheduled", lambda: [], None, "", None, None),
    # TestScheduleOneMarksPodAsProcessedBeforePreBind
    ("error prebind pod", lambda: [FakePreBind(Status(U, "on PreBind"))], None, "", "on PreBind", None),
])
async def test_scheduler_schedule_one(name: str, plugins: Any, bind_error: str | None, allow: str,
                                      want_error: str | None, want_queue: str | None) -> None:
    core, rec, res = await _schedule_one(plugins(), bind_error=bind_error, allow=allow)
    if want_error is None:
        assert isinstance(res, Bound) and rec.bound == [("foo", "node1")]
        assert not core.cache.is_assumed("default/foo") or core.cache.pod_node("default/foo") == "node1"
        return
    assert isinstance(res, Failed)
    assert res.message == want_error
    assert res.reason == ("Unschedulable" if res.status.is_rejected() else "SchedulerError")
    assert res.nominating is CLEAR_NOMINATED_NODE or (res.nominating is not None and res.nominating.node == "")
    assert core.cache.get_pod("default/foo") is None  # forgotten (or never assumed)
    if want_queue is not None:
        assert core.queue.where("default/foo") == want_queue


async def test_rejected_while_waiting_on_permit_is_a_fit_error() -> None:
    # "pod rejected while wait on permit": "0/1 nodes are available: 1 wait on permit."
    plugins = [FakePermit(Status(W))]
    core, _, _ = build(config([python_profile("FakePermit")]), out_of_tree={"FakePermit": _factory(plugins[0])})
    core.cache.add_node(node("node1"))
    out = cycle(core, pod("foo"))
    assert isinstance(out, Assumed) and out.waiting
    wp = core.frameworks[PROFILE].waiting_pods.get("default/foo")
    assert wp is not None
    wp.reject("FakePermit", "wait on permit")
    res = await bind_one(out)
    assert isinstance(res, Failed) and res.message == "0/1 nodes are available: 1 wait on permit."
    assert res.unschedulable_plugins == {"FakePermit"} and res.reason == "Unschedulable"
    assert core.cache.get_pod("default/foo") is None


def test_scheduling_error_clears_the_nomination() -> None:
    # "pod with existing nominated node name on scheduling error clears nomination" (the error: a
    # PreFilter Error, standing for upstream's injected SchedulePod error)
    core = sched([FakePreFilter("FakePreFilter", None, Status(E, "scheduler"))], ["node1"])
    p = pod("foo")
    p["status"] = {"nominatedNodeName": "existing-node"}
    out = cycle(core, p)
    assert isinstance(out, Failed) and out.reason == "SchedulerError"
    assert out.message == 'running PreFilter plugin "FakePreFilter": scheduler'
    assert out.nominating is not None and out.nominating.node == ""
    record_failure(core.queue, out)
    assert core.queue.where("default/foo") == "Backoff"


async def test_deleting_pod_is_not_scheduled() -> None:
    # TestSchedulerScheduleOne "deleting pod": skipPodSchedule reports it (FailedScheduling "skip
    # schedule deleting pod: ns/name"), binds nothing, does not requeue it and writes no status.
    from kubecore.scheduler.driver import Driver

    core = sched([TrueFilter()], ["node1"])
    p = pod("foo")
    p["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    core.queue.add(p)
    core.queue.add(pod("bar"))
    skipped: list[Obj] = []
    failed: list[Failed] = []
    bound: list[Bound] = []
    driver = Driver(core, on_skipped=skipped.append, on_failed=failed.append, on_bound=bound.append)
    await driver.drain()
    assert [s["metadata"]["name"] for s in skipped] == ["foo"] and driver.skipped == 1
    assert not failed and [b.assumed.pinfo.key for b in bound] == ["default/bar"]
    assert core.queue.where("default/foo") is None  # not requeued, not in flight
    assert core.queue.counts() == {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 0}


# ---- TestSchedulerNoPhantomPodAfterDelete / TestSchedulerFailedSchedulingReasons ---------------

@needs_native
async def test_scheduler_no_phantom_pod_after_delete() -> None:
    def port_pod(name: str) -> Obj:
        p = pod(name)
        p["spec"]["containers"][0]["ports"] = [{"containerPort": 8080, "hostPort": 8080}]
        return p

    prof = python_profile("NodePorts")
    core, rec, _ = build(config([prof]), native=True)
    core.cache.add_node(node("node1"))
    first = cycle(core, port_pod("foo"))
    assert isinstance(first, Assumed) and isinstance(await bind_one(first), Bound)
    second = cycle(core, port_pod("bar"))
    assert isinstance(second, Failed)
    assert second.message == "0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports."
    assert second.unschedulable_plugins == {"NodePorts"}
    bound = port_pod("foo")
    bound["spec"]["nodeName"] = "node1"
    core.cache.add_pod(bound)
    core.cache.remove_pod(bound)
    core.queue.done("default/bar")
    third = cycle(core, port_pod("bar"))
    assert isinstance(third, Assumed) and third.node == "node1"
    assert isinstance(await bind_one(third), Bound) and rec.bound == [("foo", "node1"), ("bar", "node1")]


async def test_scheduler_no_phantom_pod_after_expire() -> None:
    # (upstream's older TestSchedulerNoPhantomPodAfterExpire) an assumed pod whose binding finished
    # expires after the TTL and frees its room.
    prof_core, _, clock = build(config([python_profile("CpuFit")]))
    prof_core.cache.assumed_ttl = 30.0
    prof_core.cache.add_node(node("node1", cpu="1"))
    first = cycle(prof_core, pod("foo", cpu="600m"))
    assert isinstance(first, Assumed) and isinstance(await bind_one(first), Bound)
    second = cycle(prof_core, pod("bar", cpu="600m"))
    assert isinstance(second, Failed) and second.message == "0/1 nodes are available: 1 Insufficient cpu."
    prof_core.queue.done("default/bar")
    await clock.step(31.0)
    assert prof_core.cache.cleanup_assumed_pods() == ["default/foo"]
    third = cycle(prof_core, pod("bar", cpu="600m"))
    assert isinstance(third, Assumed) and third.node == "node1"


@needs_native
def test_scheduler_failed_scheduling_reasons() -> None:
    prof = python_profile("NodeResourcesFit")
    core, _, _ = build(config([prof]), native=True)
    for i in range(100):
        core.cache.add_node(node(f"node{i}", cpu="2", memory="100", pods="10"))
    out = cycle(core, pod("bar", cpu="4", memory="500"))
    assert isinstance(out, Failed)
    assert out.message == "0/100 nodes are available: 100 Insufficient cpu, 100 Insufficient memory."
    assert len(out.message) <= 150 and out.unschedulable_plugins == {"NodeResourcesFit"}


# ---- TestNewFrameworkMultiPointExpansion / TestNewFrameworkErrors / TestPreEnqueuePlugins --------

class FullPlugin(TestPlugin):
    """TestPlugin, which upstream also makes a QueueSort plugin."""

    def less(self, a: Any, b: Any) -> bool:
        return False


class QueueSortP:
    name = "no-op-queue-sort-plugin"

    def less(self, a: Any, b: Any) -> bool:
        return False


class BindP:
    name = "bind-plugin"

    async def bind(self, state: CycleState, p: Obj, node_name: str) -> Status | None:
        return None


TP_ALL = {"queue_sort": ["test-plugin"], "pre_filter": ["test-plugin"], "filter": ["test-plugin"],
          "post_filter": ["test-plugin"], "reserve": ["test-plugin"], "permit": ["test-plugin"],
          "pre_bind": ["test-plugin"], "bind": ["test-plugin"], "post_bind": ["test-plugin"]}


def _expansion_registry() -> dict[str, Any]:
    return {"test-plugin": _factory(FullPlugin("test-plugin")), SP1: _factory(ScorePlugin1(SP1)),
            "score-plugin-2": _factory(ScorePlugin1("score-plugin-2")), SN1: _factory(ScoreWithNormalize(SN1)),
            QueueSortP.name: _factory(QueueSortP()), BindP.name: _factory(BindP())}


@pytest.mark.parametrize("name, plugins, want", [
    ("plugin expansion", {"multiPoint": {"enabled": [{"name": "test-plugin", "weight": 5}]}},
     {**TP_ALL, "pre_score": ["test-plugin"], "score": [("test-plugin", 5)]}),
    ("disable MultiPoint plugin at some extension points",
     {"multiPoint": {"enabled": [{"name": "test-plugin"}]}, "preScore": {"disabled": [{"name": "test-plugin"}]},
      "score": {"disabled": [{"name": "test-plugin"}]}},
     {**TP_ALL, "pre_score": [], "score": []}),
    ("Multiple MultiPoint plugins", {"multiPoint": {"enabled": [{"name": "test-plugin"}, {"name": SP1}]}},
     {**TP_ALL, "pre_score": ["test-plugin", SP1], "score": [("test-plugin", 1), (SP1, 1)]}),
    ("disable MultiPoint extension",
     {"multiPoint": {"enabled": [{"name": "test-plugin"}, {"name": SP1}]}, "preScore": {"disabled": [{"name": "*"}]}},
     {**TP_ALL, "pre_score": [], "score": [("test-plugin", 1), (SP1, 1)]}),
    ("Reorder MultiPoint plugins (specified extension takes precedence)",
     {"multiPoint": {"enabled": [{"name": SN1}, {"name": "test-plugin"}, {"name": SP1}]},
      "score": {"enabled": [{"name": SP1}, {"name": "test-plugin"}]}},
     {**TP_ALL, "pre_score": ["test-plugin", SP1], "score": [(SP1, 1), ("test-plugin", 1), (SN1, 1)]}),
    ("Reorder MultiPoint plugins (specified extension only takes precedence when it exists in MultiPoint)",
     {"multiPoint": {"enabled": [{"name": "test-plugin"}, {"name": SP1}]},
      "score": {"enabled": [{"name": SN1}, {"name": SP1}, {"name": "test-plugin"}]}},
     {**TP_ALL, "pre_score": ["test-plugin", SP1], "score": [(SP1, 1), ("test-plugin", 1), (SN1, 1)]}),
    ("Override MultiPoint plugins weights",
     {"multiPoint": {"enabled": [{"name": "test-plugin"}, {"name": SP1}]},
      "score": {"enabled": [{"name": SP1, "weight": 5}, {"name": "test-plugin", "weight": 3}]}},
     {**TP_ALL, "pre_score": ["test-plugin", SP1], "score": [(SP1, 5), ("test-plugin", 3)]}),
    ("disable and enable MultiPoint plugins with '*'",
     {"multiPoint": {"enabled": [{"name": QueueSortP.name}, {"name": BindP.name}, {"name": SP1}]}},
     {"queue_sort": [QueueSortP.name], "pre_score": [SP1], "score": [(SP1, 1)], "bind": [BindP.name]}),
    ("Override MultiPoint plugins weights and avoid a plugin being loaded multiple times",
     {"multiPoint": {"enabled": [{"name": "test-plugin"}, {"name": SP1}]},
      "score": {"enabled": [{"name": SP1, "weight": 5}, {"name": "score-plugin-2", "weight": 5},
                            {"name": "test-plugin", "weight": 3}]}},
     {**TP_ALL, "pre_score": ["test-plugin", SP1],
      "score": [(SP1, 5), ("test-plugin", 3), ("score-plugin-2", 5)]}),
    # TestListPlugins (upstream's helper adds the no-op QueueSort and Bind plugins)
    ("Add empty plugin", {"multiPoint": {"enabled": [{"name": QueueSortP.name}, {"name": BindP.name}]}},
     {"queue_sort": [QueueSortP.name], "bind": [BindP.name]}),
    ("Add multiple plugins", {"multiPoint": {"enabled": [{"name": QueueSortP.name}, {"name": BindP.name}]},
                              "score": {"enabled": [{"name": SP1, "weight": 3}, {"name": SN1}]}},
     {"queue_sort": [QueueSortP.name], "bind": [BindP.name], "score": [(SP1, 3), (SN1, 1)]}),
])
def test_new_framework_multi_point_expansion(name: str, plugins: dict[str, Any], want: dict[str, Any]) -> None:
    plugins["multiPoint"].setdefault("disabled", []).append({"name": "*"})  # no default plugins
    core, _, _ = build(config([{"schedulerName": PROFILE, "plugins": plugins}]), out_of_tree=_expansion_registry())
    fw = core.frameworks[PROFILE]
    got: dict[str, Any] = {"queue_sort": [fw.plugins.queue_sort.name]}
    for point in ("pre_filter", "filter", "post_filter", "pre_score", "reserve", "permit", "pre_bind", "bind",
                  "post_bind"):
        got[point] = [p.name for p in getattr(fw.plugins, point)]
    got["score"] = [(p.name, fw.weights[p.name]) for p in fw.plugins.score]
    assert {k: v for k, v in got.items() if v} == {k: v for k, v in want.items() if v}


@pytest.mark.parametrize("name, plugins, plugin_config, want_err", [
    ("Expect 'already registered' error", {"multiPoint": {"enabled": [{"name": "test-plugin"},
                                                                      {"name": "test-plugin"}]}}, None,
     "already registered"),
    # TestNewFrameworkErrors
    ("duplicate plugin name", {"preFilter": {"enabled": [{"name": "test-plugin", "weight": 1},
                                                         {"name": "test-plugin", "weight": 1}]}},
     [{"name": "test-plugin"}], "already registered"),
    ("duplicate plugin config", {"preFilter": {"enabled": [{"name": "test-plugin", "weight": 1}]}},
     # upstream's NewFramework says "repeated config for plugin"; kube-scheduler's config validation,
     # which runs first, says 'Duplicate value: "test-plugin"' (kubecore validates the same way)
     [{"name": "test-plugin"}, {"name": "test-plugin"}], 'Duplicate value: "test-plugin"'),
])
def test_new_framework_errors(name: str, plugins: dict[str, Any], plugin_config: list[Any] | None,
                              want_err: str) -> None:
    prof: dict[str, Any] = {"schedulerName": PROFILE, "plugins": {
        "multiPoint": {"enabled": [{"name": QueueSortP.name}, {"name": BindP.name}]}, **plugins}}
    prof["plugins"]["multiPoint"]["disabled"] = [{"name": "*"}]
    if plugin_config is not None:
        prof["pluginConfig"] = plugin_config
    with pytest.raises(ConfigError) as info:
        build(config([prof]), out_of_tree=_expansion_registry())
    assert want_err in str(info.value)


@pytest.mark.parametrize("name, enabled, want", [
    ("no PreEnqueuePlugin registered", False, []),
    ("one PreEnqueuePlugin registered", True, ["preEnqueue-plugin"]),
])
def test_pre_enqueue_plugins(name: str, enabled: bool, want: list[str]) -> None:
    class PreEnqueueP:
        name = "preEnqueue-plugin"

        def pre_enqueue(self, p: Obj) -> Status | None:
            return None

    points: dict[str, Any] = {"preEnqueue": {"enabled": [{"name": PreEnqueueP.name}]}} if enabled else {}
    core, _, _ = build(config([python_profile(**points)]), out_of_tree={PreEnqueueP.name: _factory(PreEnqueueP())})
    assert [p.name for p in core.frameworks[PROFILE].plugins.pre_enqueue] == want


# ---- waiting_pods_map_test.go -----------------------------------------------------------------

def _waiting(*plugins: str) -> Any:
    from kubecore.scheduler.waiting import WaitingPod
    return WaitingPod(pod("test-pod"), {p: 10.0 for p in plugins}, clock=FakeClock())


async def test_waiting_pod_reject_returns_false_on_allowed() -> None:
    # TestWaitingPodReturnFalseOnAllowed "Reject returns false on allowed pod" (Preempt: kubecore has none)
    wp = _waiting("plugin1")
    wp.allow("plugin1")
    assert wp.reject("reject-plugin", "rejected") is False
    st = await wp.wait()
    assert st.is_success()


async def test_waiting_pod_multiple_actions() -> None:
    # TestWaitingPodMultipleActions: the Allow consumed by WaitOnPermit wins; a later Reject fails.
    wp = _waiting("plugin1")
    waiter = asyncio.ensure_future(wp.wait())
    await settle()
    wp.allow("plugin1")
    assert (await waiter).is_success()
    assert wp.reject("plugin2", "rejected") is False


async def test_waiting_pod_needs_every_plugin_to_allow() -> None:
    # waitingPod.Allow: success only once no plugin is pending; Reject stops every timer.
    wp = _waiting("a", "b")
    wp.allow("a")
    wp.allow("x")  # not pending: nothing changes
    assert not wp.decided and wp.pending_plugins() == ["b"]
    assert wp.reject("b", "no") is True
    st = await wp.wait()
    assert (st.code, st.plugin, st.message()) == (U, "b", "no")


# ---- TestSchedulerSchedulePod: cases with in-tree plugins --------------------------------------

def _pvc(name: str, volume: str = "", deleting: bool = False) -> Obj:
    meta: Obj = {"name": name, "namespace": "default", "uid": name,
                 "annotations": {"pv.kubernetes.io/bind-completed": "true"}}
    if deleting:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta,
            "spec": {"volumeName": volume} if volume else {}}


def _with_claim(name: str, claim: str) -> Obj:
    return pod(name, volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": claim}}])


@pytest.mark.parametrize("name, pvcs, pvs, claim, want", [
    ("existing PVC", [_pvc("existingPVC", "existingPV")], [{"metadata": {"name": "existingPV"}, "spec": {}}],
     "existingPVC", {"node1", "node2"}),
    ("unknown PVC", [], [], "unknownPVC", 'persistentvolumeclaim "unknownPVC" not found'),
    ("deleted PVC", [_pvc("existingPVC", deleting=True)], [], "existingPVC",
     'persistentvolumeclaim "existingPVC" is being deleted'),
])
def test_scheduler_schedule_pod_volume_binding(name: str, pvcs: list[Obj], pvs: list[Obj], claim: str,
                                               want: Any) -> None:
    # VolumeBinding registered as a PreFilter plugin only, with TrueFilter and EqualPrioritizer.
    rec = Recorder()
    for c in pvcs:
        rec.pvcs[("default", c["metadata"]["name"])] = c
    for v in pvs:
        rec.pvs[v["metadata"]["name"]] = v
    plugins = [TrueFilter(), EqualPrioritizer()]
    prof = python_profile(*[p.name for p in plugins], preFilter={"enabled": [{"name": "VolumeBinding"}]})
    core, _, _ = build(config([prof]), rec=rec, out_of_tree={p.name: _factory(p) for p in plugins})
    for n in ("node1", "node2"):
        core.cache.add_node(node(n))
    out = cycle(core, _with_claim("ignore", claim))
    if isinstance(want, set):
        assert isinstance(out, Assumed) and out.node in want
    else:
        assert isinstance(out, Failed) and out.message == f"0/2 nodes are available: {want}."
        assert out.unschedulable_plugins == {"VolumeBinding"}


def _spread_pod(name: str, max_skew: int, node_name: str = "") -> Obj:
    p = pod(name, labels={"foo": ""}, node_name=node_name, topologySpreadConstraints=[{
        "maxSkew": max_skew, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}}])
    if node_name:
        del p["spec"]["topologySpreadConstraints"]
    return p


@needs_native
@pytest.mark.parametrize("name, nodes, existing, max_skew, want", [
    ("test podtopologyspread plugin - 2 nodes with maxskew=1", ["node1", "node2"], [("pod1", "node1")], 1,
     {"node2"}),
    ("test podtopologyspread plugin - 3 nodes with maxskew=2", ["node1", "node2", "node3"],
     [("pod1a", "node1"), ("pod1b", "node1"), ("pod2", "node2")], 2, {"node2", "node3"}),
])
def test_scheduler_schedule_pod_topology_spread(name: str, nodes: list[str], existing: list[tuple[str, str]],
                                                max_skew: int, want: set[str]) -> None:
    # PodTopologySpread as PreFilter and Filter only (no Score plugin but EqualPrioritizer in the second case)
    prof = python_profile(filter={"enabled": [{"name": "PodTopologySpread"}]})
    core, _, _ = build(config([prof]), native=True)
    for n in nodes:
        core.cache.add_node(node(n))
    for pname, n in existing:
        core.cache.add_pod(_spread_pod(pname, max_skew, node_name=n))
    out = cycle(core, _spread_pod("p", max_skew))
    assert isinstance(out, Assumed) and out.node in want


@needs_native
def test_without_score_plugin_no_extra_nodes_are_evaluated_native() -> None:
    # "test without score plugin no extra nodes are evaluated", with a native Filter plugin: one node
    # is evaluated per cycle and the next cycle starts after it.
    prof = python_profile(filter={"enabled": [{"name": "NodeResourcesFit"}]})
    core, _, _ = build(config([prof]), native=True)
    for n in ("node1", "node2", "node3"):
        core.cache.add_node(node(n))
    outs = [cycle(core, pod(f"p{i}")) for i in range(3)]
    assert all(isinstance(o, Assumed) and o.evaluated == 1 for o in outs)
    assert sorted(o.node for o in outs if isinstance(o, Assumed)) == ["node1", "node2", "node3"]
