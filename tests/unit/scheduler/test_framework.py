"""Extension points run in upstream's order with upstream's semantics (Python plugins only)."""

from __future__ import annotations

from typing import Any

from kubecore.scheduler.binding import Bound, bind_one
from kubecore.scheduler.interface import CycleState, NodeScore, PreFilterResult
from kubecore.scheduler.podinfo import NodeInfo, Obj
from kubecore.scheduler.registry import SchedulerCore
from kubecore.scheduler.schedule_one import Assumed, Failed, schedule_one
from kubecore.scheduler.status import Code, Status
from tests.unit.scheduler.helpers import build, config, node, pod, python_profile

S, U, UU = Code.SUCCESS, Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE


class Spy:
    """A plugin at every scheduling-cycle point; `script` says what each point answers."""

    def __init__(self, name: str, log: list[str], script: dict[str, Any] | None = None) -> None:
        self.name = name
        self.log = log
        self.script = script or {}

    def _answer(self, point: str, node_name: str = "") -> Status | None:
        self.log.append(f"{self.name}.{point}" + (f"({node_name})" if node_name else ""))
        a = self.script.get(point)
        if callable(a):
            a = a(node_name)
        return a if isinstance(a, Status) or a is None else Status(a)

    def pre_filter(self, state: CycleState, p: Obj) -> tuple[PreFilterResult | None, Status | None]:
        st = self._answer("pre_filter")
        return self.script.get("narrow"), st

    def filter(self, state: CycleState, p: Obj, ni: NodeInfo) -> Status | None:
        return self._answer("filter", ni.name)

    def pre_score(self, state: CycleState, p: Obj, nodes: list[NodeInfo]) -> Status | None:
        return self._answer("pre_score")

    def score(self, state: CycleState, p: Obj, ni: NodeInfo) -> tuple[int, Status | None]:
        self._answer("score", ni.name)
        return int(self.script.get("scores", {}).get(ni.name, 0)), None

    def normalize_score(self, state: CycleState, p: Obj, scores: list[NodeScore]) -> Status | None:
        self.log.append(f"{self.name}.normalize")
        for s in scores:
            s.score = min(100, s.score)
        return None

    def reserve(self, state: CycleState, p: Obj, node_name: str) -> Status | None:
        return self._answer("reserve", node_name)

    def unreserve(self, state: CycleState, p: Obj, node_name: str) -> None:
        self.log.append(f"{self.name}.unreserve({node_name})")

    def permit(self, state: CycleState, p: Obj, node_name: str) -> tuple[Status | None, float]:
        return self._answer("permit", node_name), float(self.script.get("timeout", 10.0))

    async def pre_bind(self, state: CycleState, p: Obj, node_name: str) -> Status | None:
        return self._answer("pre_bind", node_name)

    async def bind(self, state: CycleState, p: Obj, node_name: str) -> Status | None:
        return self._answer("bind", node_name)

    def post_bind(self, state: CycleState, p: Obj, node_name: str) -> None:
        self.log.append(f"{self.name}.post_bind({node_name})")


def setup(*spies: Spy, nodes: int = 3, profile: dict[str, Any] | None = None) -> SchedulerCore:
    prof = profile or python_profile(*[s.name for s in spies])
    core, _, _ = build(config([prof]), out_of_tree={s.name: (lambda s: lambda a, h: s)(s) for s in spies})
    for i in range(nodes):
        core.cache.add_node(node(f"n{i}"))
    return core


def cycle(core: SchedulerCore, p: Obj | None = None) -> Assumed | Failed:
    core.queue.add(p or pod("p"))
    pinfo = core.queue.pop()
    assert pinfo is not None
    return schedule_one(core.frameworks["default-scheduler"], pinfo)


def test_points_run_in_order_and_filters_stop_at_first_failure() -> None:
    log: list[str] = []
    a = Spy("A", log, {"filter": lambda n: U if n == "n0" else None})
    b = Spy("B", log)
    core = setup(a, b, nodes=2)
    out = cycle(core)
    assert isinstance(out, Assumed) and out.node == "n1"
    assert log == ["A.pre_filter", "B.pre_filter", "A.filter(n0)", "A.filter(n1)", "B.filter(n1)",
                   "A.reserve(n1)", "B.reserve(n1)", "A.permit(n1)", "B.permit(n1)"]


def test_prefilter_skip_skips_that_plugins_filter() -> None:
    log: list[str] = []
    core = setup(Spy("A", log, {"pre_filter": Code.SKIP, "filter": UU}), Spy("B", log), nodes=1)
    assert isinstance(cycle(core), Assumed)
    assert "A.filter(n0)" not in log and "B.filter(n0)" in log


def test_prefilter_unresolvable_stops_unschedulable_continues() -> None:
    log: list[str] = []
    core = setup(Spy("A", log, {"pre_filter": Status(U, "a says no")}), Spy("B", log))
    out = cycle(core)
    assert isinstance(out, Failed) and log == ["A.pre_filter", "B.pre_filter"]
    assert out.message == "0/3 nodes are available: a says no."
    assert out.unschedulable_plugins == {"A"}
    log.clear()
    core2 = setup(Spy("A", log, {"pre_filter": Status(UU, "gone")}), Spy("B", log))
    out2 = cycle(core2)
    assert isinstance(out2, Failed) and log == ["A.pre_filter"]


def test_prefilter_error_is_a_scheduler_error() -> None:
    core = setup(Spy("A", [], {"pre_filter": Status(Code.ERROR, "boom")}))
    out = cycle(core)
    assert isinstance(out, Failed) and out.reason == "SchedulerError"
    assert out.message == 'running PreFilter plugin "A": boom'


def test_prefilter_results_narrow_the_nodes() -> None:
    log: list[str] = []
    core = setup(Spy("A", log, {"narrow": PreFilterResult(["n1", "n2"])}),
                 Spy("B", log, {"narrow": PreFilterResult(["n2", "n0"])}))
    out = cycle(core)
    assert isinstance(out, Assumed) and out.node == "n2"
    assert [x for x in log if "filter(" in x] == ["A.filter(n2)", "B.filter(n2)"]


def test_disjoint_prefilter_results_reject_the_pod() -> None:
    core = setup(Spy("A", [], {"narrow": PreFilterResult(["n1"])}), Spy("B", [], {"narrow": PreFilterResult(["n2"])}))
    out = cycle(core)
    assert isinstance(out, Failed)
    assert out.message == "0/3 nodes are available: node(s) didn't satisfy plugin(s) [A B] simultaneously."


def test_narrowed_nodes_that_fail_show_in_the_message() -> None:
    core = setup(Spy("A", [], {"narrow": PreFilterResult(["n1"]), "filter": Status(U, "nope")}))
    out = cycle(core)
    assert isinstance(out, Failed)
    assert out.message == "0/3 nodes are available: 1 nope, 2 node(s) didn't satisfy plugin(s) [A]."


def test_scores_are_normalized_weighted_and_summed() -> None:
    log: list[str] = []
    a = Spy("A", log, {"scores": {"n0": 100, "n1": 0, "n2": 50}})
    b = Spy("B", log, {"scores": {"n0": 0, "n1": 90, "n2": 10}})
    prof = python_profile("A", "B", score={"enabled": [{"name": "A", "weight": 1}, {"name": "B", "weight": 2}]})
    core = setup(a, b, profile=prof)
    out = cycle(core)
    # A: 100, 0, 50; B*2: 0, 180, 20 -> n1 (180) wins
    assert isinstance(out, Assumed) and out.node == "n1"
    assert log.index("A.pre_score") < log.index("A.score(n0)") < log.index("A.normalize")


def test_score_out_of_range_is_an_error() -> None:
    class Bad(Spy):
        def normalize_score(self, state: CycleState, p: Obj, scores: list[NodeScore]) -> Status | None:
            scores[0].score = 101
            return None

    core = setup(Bad("A", []))
    out = cycle(core)
    assert isinstance(out, Failed) and out.reason == "SchedulerError"
    assert 'plugin "A" returns an invalid score 101, it should in the range of [0, 100] after normalizing' in out.message


def test_prescore_skip_skips_that_plugins_score() -> None:
    log: list[str] = []
    core = setup(Spy("A", log, {"pre_score": Code.SKIP}), Spy("B", log))
    assert isinstance(cycle(core), Assumed)
    assert not any(x.startswith("A.score") for x in log) and any(x.startswith("B.score") for x in log)


def test_reserve_failure_unreserves_all_in_reverse_and_forgets() -> None:
    log: list[str] = []
    core = setup(Spy("A", log), Spy("B", log, {"reserve": Status(U, "no room")}), Spy("C", log), nodes=1)
    out = cycle(core)
    assert isinstance(out, Failed)
    assert [x for x in log if "reserve" in x] == ["A.reserve(n0)", "B.reserve(n0)", "C.unreserve(n0)",
                                                  "B.unreserve(n0)", "A.unreserve(n0)"]
    assert len(core.cache) == 0
    assert out.message == "0/1 nodes are available: 1 no room."
    assert out.unschedulable_plugins == {"B"}


def test_permit_rejection_unreserves_and_reports() -> None:
    log: list[str] = []
    core = setup(Spy("A", log, {"permit": Status(U, "not now")}), nodes=1)
    out = cycle(core)
    assert isinstance(out, Failed) and out.unschedulable_plugins == {"A"}
    assert log[-1] == "A.unreserve(n0)" and len(core.cache) == 0


async def test_permit_wait_then_allow_binds() -> None:
    log: list[str] = []
    core = setup(Spy("A", log, {"permit": Code.WAIT}), nodes=1)
    out = cycle(core)
    assert isinstance(out, Assumed) and out.waiting
    fw = core.frameworks["default-scheduler"]
    wp = fw.waiting_pods.get("default/p")
    assert wp is not None and wp.pending_plugins() == ["A"]
    wp.allow("A")
    res = await bind_one(out)
    assert isinstance(res, Bound)
    # DefaultBinder comes before A among the Bind plugins and binds: A.bind is not asked.
    assert log[-2:] == ["A.pre_bind(n0)", "A.post_bind(n0)"]


async def test_permit_timeout_rejects_with_upstreams_message() -> None:
    log: list[str] = []
    core = setup(Spy("A", log, {"permit": Code.WAIT, "timeout": 10.0}), nodes=1)
    out = cycle(core)
    assert isinstance(out, Assumed)
    clock = core.clock
    import asyncio
    task = asyncio.ensure_future(bind_one(out))
    from kubecore.client.clock import FakeClock, settle
    assert isinstance(clock, FakeClock)
    await settle()
    await clock.step(9.9)
    assert not task.done()
    await clock.step(0.2)
    res = task.result()
    assert isinstance(res, Failed)
    assert res.message == "0/1 nodes are available: 1 rejected due to timeout after waiting 10s at plugin A."
    assert log[-1] == "A.unreserve(n0)" and len(core.cache) == 0


async def test_bind_stops_at_the_first_plugin_that_does_not_skip() -> None:
    log: list[str] = []
    prof = python_profile("A", "B", bind={"enabled": [{"name": "A"}, {"name": "B"}]})
    core = setup(Spy("A", log, {"bind": Code.SKIP}), Spy("B", log), profile=prof, nodes=1)
    out = cycle(core)
    assert isinstance(out, Assumed)
    res = await bind_one(out)
    assert isinstance(res, Bound)
    binds = [x for x in log if ".bind(" in x]
    assert binds == ["A.bind(n0)", "B.bind(n0)"]  # DefaultBinder (after them) was not needed


async def test_prebind_failure_forgets_the_pod() -> None:
    log: list[str] = []
    core = setup(Spy("A", log, {"pre_bind": Status(Code.ERROR, "disk")}), nodes=1)
    out = cycle(core)
    assert isinstance(out, Assumed) and core.cache.is_assumed("default/p")
    res = await bind_one(out)
    assert isinstance(res, Failed) and res.reason == "SchedulerError"
    assert res.message == 'running PreBind plugin "A": disk'
    assert len(core.cache) == 0 and log[-1] == "A.unreserve(n0)"


def test_postfilter_runs_until_success() -> None:
    from kubecore.scheduler.fiterror import NodeToStatus
    from kubecore.scheduler.interface import PostFilterResult

    class PF:
        def __init__(self, name: str, answer: Status, log: list[str]) -> None:
            self.name, self.answer, self.log = name, answer, log

        def post_filter(self, state: CycleState, p: Obj,
                        statuses: NodeToStatus) -> tuple[PostFilterResult | None, Status | None]:
            self.log.append(self.name)
            return PostFilterResult.nominate("n9") if self.answer.is_success() else None, self.answer

    log: list[str] = []
    pfs = [PF("X", Status(U, "x failed"), log), PF("Y", Status(U, "y failed"), log)]
    prof = python_profile("CpuFit", "X", "Y")
    core, _, _ = build(config([prof]), out_of_tree={p.name: (lambda p: lambda a, h: p)(p) for p in pfs})
    core.cache.add_node(node("n0", cpu="1"))
    out = cycle(core, pod("big", cpu="2"))
    assert isinstance(out, Failed) and log == ["X", "Y"]
    assert out.message == "0/1 nodes are available: 1 Insufficient cpu. x failed, y failed"


def test_pods_to_activate_move_up_after_a_successful_cycle() -> None:
    from kubecore.scheduler.binding import finish_scheduling_cycle, record_failure

    class Activator(Spy):
        def reserve(self, state: CycleState, p: Obj, node_name: str) -> Status | None:
            state.pods_to_activate["default/parked"] = pod("parked")
            return None

    core = setup(Activator("A", [], {"filter": lambda n: Status(U, "full") if core_full else None}), nodes=1)
    core_full = True
    parked = cycle(core, pod("parked"))
    assert isinstance(parked, Failed)
    record_failure(core.queue, parked)
    assert core.queue.where("default/parked") == "Unschedulable"
    core_full = False
    out = cycle(core, pod("p"))
    assert isinstance(out, Assumed)
    finish_scheduling_cycle(core.queue, out)
    assert core.queue.where("default/parked") == "Active"
