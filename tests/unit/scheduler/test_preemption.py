"""DefaultPreemption picks valid victims, respects PDBs and priorities, and says why it cannot help.

Every scenario runs twice: with a pure-Python profile (CpuFit filter) and with the default
profile over the native kernels (NodeResourcesFit filter).
"""

from __future__ import annotations

from typing import Any

import pytest

from kubecore.scheduler import default_config
from kubecore.scheduler.plugins.example import NodeLabelPreference
from kubecore.scheduler.plugins.preemption import Candidate, pick_one_node, pods_with_pdb_violation
from kubecore.scheduler.podinfo import Obj
from kubecore.scheduler.registry import SchedulerCore
from kubecore.client.clock import FakeClock
from kubecore.scheduler.schedule_one import Assumed, Failed, schedule_one
from tests.unit.scheduler.helpers import Recorder, build, config, native_available, node, pod, python_profile

MODES = ["python", pytest.param("native", marks=pytest.mark.skipif(not native_available(), reason="no kernels"))]


def setup(mode: str, nodes: list[Obj], pods: list[Obj]) -> tuple[SchedulerCore, Recorder]:
    if mode == "native":
        cfg = default_config()
    else:
        cfg = config([python_profile("NodeLabelPreference", "CpuFit", "DefaultPreemption")])
    core, rec, _ = build(cfg, native=mode == "native",
                         out_of_tree={"NodeLabelPreference": NodeLabelPreference.new})
    for n in nodes:
        core.cache.add_node(n)
    for p in pods:
        core.cache.add_pod(p)
    return core, rec


def started(p: Obj, t: str) -> Obj:
    p["status"] = {"startTime": t}
    return p


def attempt(core: SchedulerCore, p: Obj) -> Failed:
    core.queue.add(p)
    pinfo = core.queue.pop()
    assert pinfo is not None
    out = schedule_one(core.frameworks["default-scheduler"], pinfo)
    assert isinstance(out, Failed), out
    return out


@pytest.mark.parametrize("mode", MODES)
def test_lowest_priority_node_and_fewest_victims(mode: str) -> None:
    core, rec = setup(mode, [node("n0", cpu="2"), node("n1", cpu="2")], [
        started(pod("low-a", cpu="500m", priority=0, node_name="n0"), "2024-01-01T00:00:00Z"),
        started(pod("low-b", cpu="500m", priority=0, node_name="n0"), "2024-01-01T00:00:02Z"),
        started(pod("low-c", cpu="500m", priority=0, node_name="n0"), "2024-01-01T00:00:01Z"),
        pod("mid-a", cpu="1", priority=5, node_name="n1"), pod("mid-b", cpu="1", priority=5, node_name="n1"),
    ])
    out = attempt(core, pod("high", cpu="1", priority=10))
    assert out.nominating is not None and out.nominating.node == "n0"
    # 500m free + one 500m victim: the least important one (latest start) goes
    assert rec.evicted == [("low-b", "high", "n0")]
    assert out.message.startswith("0/2 nodes are available: 2 Insufficient cpu.")


@pytest.mark.parametrize("mode", MODES)
def test_pdb_violations_are_avoided(mode: str) -> None:
    core, rec = setup(mode, [node("n0", cpu="1"), node("n1", cpu="1")], [
        pod("guarded", cpu="1", priority=0, node_name="n0", labels={"app": "db"}),
        pod("free", cpu="1", priority=3, node_name="n1"),
    ])
    rec.pdbs = [{"metadata": {"name": "db", "namespace": "default"},
                 "spec": {"selector": {"matchLabels": {"app": "db"}}}, "status": {"disruptionsAllowed": 0}}]
    out = attempt(core, pod("high", cpu="1", priority=10))
    # n0's victim has the lower priority, but evicting it violates the PDB: n1 wins
    assert out.nominating is not None and out.nominating.node == "n1"
    assert rec.evicted == [("free", "high", "n1")]


@pytest.mark.parametrize("mode", MODES)
def test_equal_or_higher_priority_pods_are_never_victims(mode: str) -> None:
    core, rec = setup(mode, [node("n0", cpu="1")], [pod("peer", cpu="1", priority=10, node_name="n0")])
    out = attempt(core, pod("high", cpu="1", priority=10))
    assert rec.evicted == []
    assert out.nominating is not None and out.nominating.node == ""
    assert out.message == ("0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: "
                           "1 No preemption victims found for incoming pod.")


@pytest.mark.parametrize("mode", MODES)
def test_victims_that_do_not_make_room_are_not_taken(mode: str) -> None:
    core, rec = setup(mode, [node("n0", cpu="2")], [
        pod("low", cpu="500m", priority=0, node_name="n0"), pod("peer", cpu="1500m", priority=20, node_name="n0")])
    out = attempt(core, pod("high", cpu="1", priority=10))
    assert rec.evicted == []
    assert out.message == ("0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: "
                           "1 Insufficient cpu.")


def test_unresolvable_nodes_are_not_candidates() -> None:
    core, rec = setup("python", [node("n0", cpu="1", labels={"example.com/maintenance": "true"}), node("n1", cpu="1")],
                      [pod("low0", cpu="1", priority=0, node_name="n0"), pod("peer", cpu="1", priority=50, node_name="n1")])
    out = attempt(core, pod("high", cpu="1", priority=10))
    assert rec.evicted == []
    assert out.message == ("0/2 nodes are available: 1 Insufficient cpu, 1 node(s) were under maintenance. "
                           "preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, "
                           "1 Preemption is not helpful for scheduling.")


@pytest.mark.skipif(not native_available(), reason="no kernels")
def test_untolerated_taint_is_unresolvable_for_preemption() -> None:
    taint = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    core, rec = setup("native", [node("n0", cpu="1", taints=[taint]), node("n1", cpu="1")],
                      [pod("low0", cpu="1", priority=0, node_name="n0"), pod("low1", cpu="1", priority=0, node_name="n1")])
    out = attempt(core, pod("high", cpu="1", priority=10))
    assert out.nominating is not None and out.nominating.node == "n1"
    assert rec.evicted == [("low1", "high", "n1")]
    assert out.message.startswith("0/2 nodes are available: 1 Insufficient cpu, "
                                  "1 node(s) had untolerated taint(s).")


@pytest.mark.parametrize("mode", MODES)
def test_preemption_policy_never(mode: str) -> None:
    core, rec = setup(mode, [node("n0", cpu="1")], [pod("low", cpu="1", priority=0, node_name="n0")])
    out = attempt(core, pod("high", cpu="1", priority=10, preemptionPolicy="Never"))
    assert rec.evicted == [] and out.nominating is None
    assert out.message.endswith("preemption: not eligible due to preemptionPolicy=Never.")


@pytest.mark.parametrize("mode", MODES)
def test_nominated_pod_gets_its_room_and_lower_ones_do_not_take_it(mode: str) -> None:
    core, rec = setup(mode, [node("n0", cpu="1")], [pod("low", cpu="1", priority=0, node_name="n0")])
    out = attempt(core, pod("high", cpu="1", priority=10))
    assert rec.evicted == [("low", "high", "n0")]
    from kubecore.scheduler.binding import record_failure
    record_failure(core.queue, out)
    assert core.queue.nominator.node_of("default/high") == "n0"
    core.cache.remove_pod(pod("low", node_name="n0"))  # the victim is gone
    # a lower-priority pod must not take the room the preemption made
    lower = attempt(core, pod("other", cpu="1", priority=5))
    assert "Insufficient cpu" in lower.message
    # the victim's deletion requeues the nominated pod, which then fits on its node
    core.queue.assigned_pod_deleted(pod("low", node_name="n0"))
    assert isinstance(core.clock, FakeClock)
    core.clock.advance(1)
    pinfo = core.queue.pop()
    assert pinfo is not None and pinfo.key == "default/high"
    placed = schedule_one(core.frameworks["default-scheduler"], pinfo)
    assert isinstance(placed, Assumed) and placed.node == "n0"
    assert core.queue.nominator.node_of("default/high") is None


def test_pick_one_node_criteria_in_order() -> None:
    def v(name: str, prio: int, start: str = "2024-01-01T00:00:00Z") -> Obj:
        return started(pod(name, priority=prio), start)

    a = Candidate("a", [v("a1", 5)], 1)
    b = Candidate("b", [v("b1", 9), v("b2", 1)], 0)
    c = Candidate("c", [v("c1", 5), v("c2", 5)], 0)
    d = Candidate("d", [v("d1", 5)], 0)
    e = Candidate("e", [v("e1", 5, "2024-01-02T00:00:00Z")], 0)
    assert pick_one_node([a, b], now=0).node == "b"          # fewer PDB violations
    assert pick_one_node([b, c], now=0).node == "c"          # lower highest priority
    assert pick_one_node([c, d], now=0).node == "d"          # smaller sum of priorities
    assert pick_one_node([d, e], now=0).node == "e"          # later start of the top victims
    assert pick_one_node([d, Candidate("f", [v("f1", 5)], 0)], now=0).node == "d"  # first one


def test_pdb_budget_is_spent_in_order() -> None:
    pdb: dict[str, Any] = {"metadata": {"namespace": "default"}, "spec": {"selector": {"matchLabels": {"a": "b"}}},
                           "status": {"disruptionsAllowed": 1, "disruptedPods": {"p0": "2024-01-01T00:00:00Z"}}}
    ps = [pod(f"p{i}", labels={"a": "b"}) for i in range(3)] + [pod("x")]
    bad, fine = pods_with_pdb_violation(ps, [pdb])
    assert [p["metadata"]["name"] for p in fine] == ["p0", "p1", "x"]  # p0 already disrupted
    assert [p["metadata"]["name"] for p in bad] == ["p2"]


def test_nominated_pods_count_for_lower_or_equal_priority_python_filters() -> None:
    from kubecore.scheduler.interface import NominatingInfo
    core, _ = setup("python", [node("n0", cpu="1")], [])
    core.queue.add_nominated_pod(pod("nominee", cpu="1", priority=10), NominatingInfo("n0"))
    assert "Insufficient cpu" in attempt(core, pod("lower", cpu="1", priority=0)).message
    assert "Insufficient cpu" in attempt(core, pod("equal", cpu="1", priority=10)).message
    core.queue.add(pod("higher", cpu="1", priority=20))
    pinfo = core.queue.pop()
    assert pinfo is not None
    assert isinstance(schedule_one(core.frameworks["default-scheduler"], pinfo), Assumed)


def test_prefilter_extensions_follow_the_dry_run() -> None:
    from kubecore.scheduler.interface import CycleState, PreFilterResult
    from kubecore.scheduler.podinfo import NodeInfo
    from kubecore.scheduler.status import Code, Status

    class OneLowPodPerNode:
        """Rejects nodes with any pod of priority 0 (kept in PreFilter state, updated by RemovePod)."""

        name = "OneLow"
        removed: list[str] = []

        def pre_filter(self, state: CycleState, p: Obj) -> tuple[PreFilterResult | None, Status | None]:
            state.write("low", {k for k, x in core.cache.node_info("n0").pods.items()  # type: ignore[union-attr]
                                if x["spec"]["priority"] == 0})
            return None, None

        def remove_pod(self, state: CycleState, p: Obj, victim: Obj, ni: NodeInfo) -> Status | None:
            self.removed.append(victim["metadata"]["name"])
            state.write("low", state.read("low") - {f"default/{victim['metadata']['name']}"})
            return None

        def add_pod(self, state: CycleState, p: Obj, other: Obj, ni: NodeInfo) -> Status | None:
            return None

        def filter(self, state: CycleState, p: Obj, ni: NodeInfo) -> Status | None:
            return Status(Code.UNSCHEDULABLE, "low pods here") if state.read("low") else None

    plugin = OneLowPodPerNode()
    cfg = config([python_profile("OneLow", "DefaultPreemption")])
    core, rec, _ = build(cfg, out_of_tree={"OneLow": lambda a, h: plugin})
    core.cache.add_node(node("n0"))
    core.cache.add_pod(pod("low", priority=0, node_name="n0"))
    out = attempt(core, pod("high", priority=5))
    assert plugin.removed and set(plugin.removed) == {"low"}
    assert rec.evicted == [("low", "high", "n0")] and out.nominating is not None


class AsyncRecorder(Recorder):
    """Services with `evict_victims` (asynchronous preemption): the test plays the API calls."""

    def __init__(self) -> None:
        super().__init__()
        self.preemptions: list[tuple[list[str], Any]] = []
        self.activated: list[str] = []

    def evict_victims(self, victims: list[Obj], preemptor: Obj, node_name: str, *, failed: Any) -> None:
        self.preemptions.append(([v["metadata"]["name"] for v in victims], failed))

    def services(self) -> Any:
        s = super().services()
        s.evict_victims = self.evict_victims
        s.activate = lambda pods: self.activated.extend(p["metadata"]["name"] for p in pods)
        return s


@pytest.mark.parametrize("mode", MODES)
def test_a_preemptor_waits_until_its_victims_are_gone_and_moves_on_the_last_deletion(mode: str) -> None:
    """Asynchronous preemption: PreEnqueue holds the preemptor while any victim it evicts is still
    in the cache, however long its backoff has run; the deletion of the last one moves it, and it
    fits."""
    from kubecore.scheduler.binding import record_failure

    rec = AsyncRecorder()
    cfg = default_config() if mode == "native" else config([python_profile("CpuFit", "DefaultPreemption")])
    core, rec2, clock = build(cfg, rec=rec, native=mode == "native")
    assert rec2 is rec
    core.cache.add_node(node("n0", cpu="3"))
    low = {f"low-{i}": pod(f"low-{i}", cpu="1", priority=0, node_name="n0") for i in range(3)}
    for p in low.values():
        p["metadata"]["uid"] = "uid-" + p["metadata"]["name"]
        core.cache.add_pod(p)
    out = attempt(core, pod("high", cpu="3", priority=10))
    assert rec.evicted == [] and len(rec.preemptions) == 1
    names, _ = rec.preemptions[0]
    assert sorted(names) == sorted(low)
    record_failure(core.queue, out)
    for name in names[:-1]:
        core.cache.remove_pod(low[name])
        core.queue.assigned_pod_deleted(low[name])
    clock.advance(5)  # far past its backoff: still held, one victim is left
    assert core.queue.pop() is None
    assert core.queue.counts()["gated"] == 1
    # a new pod of the last victim's name is not that victim
    core.cache.remove_pod(low[names[-1]])
    again = pod(names[-1], cpu="1", priority=0, node_name="n1")
    again["metadata"]["uid"] = "another"
    core.cache.add_pod(again)
    core.queue.assigned_pod_deleted(low[names[-1]])
    pinfo = core.queue.pop()
    assert pinfo is not None and pinfo.key == "default/high"
    placed = schedule_one(core.frameworks["default-scheduler"], pinfo)
    assert isinstance(placed, Assumed) and placed.node == "n0"
    assert rec.activated == []


def test_a_failed_eviction_activates_the_preemptor() -> None:
    rec = AsyncRecorder()
    core, _, _ = build(config([python_profile("CpuFit", "DefaultPreemption")]), rec=rec)
    core.cache.add_node(node("n0", cpu="1"))
    core.cache.add_pod(pod("low", cpu="1", priority=0, node_name="n0"))
    attempt(core, pod("high", cpu="1", priority=10))
    fw = core.frameworks["default-scheduler"]
    gate = next(pl for pl in fw.plugins.pre_enqueue if pl.name == "DefaultPreemption")
    status = gate.pre_enqueue(pod("high", priority=10))
    assert status is not None and status.message() == "waiting for the preemption for this pod to be finished"
    _, failed = rec.preemptions[0]
    failed()
    assert rec.activated == ["high"] and gate.pre_enqueue(pod("high", priority=10)) is None


def test_held_preemptors_that_are_never_asked_again_are_pruned(monkeypatch: pytest.MonkeyPatch) -> None:
    from kubecore.scheduler.plugins import preemption

    monkeypatch.setattr(preemption, "PRUNE_AT", 1)
    rec = AsyncRecorder()
    core, _, _ = build(config([python_profile("CpuFit", "DefaultPreemption")]), rec=rec)
    core.cache.add_node(node("n0", cpu="1"))
    core.cache.add_node(node("n1", cpu="1"))
    core.cache.add_pod(pod("low-0", cpu="1", priority=0, node_name="n0"))
    core.cache.add_pod(pod("low-1", cpu="1", priority=0, node_name="n1"))
    attempt(core, pod("first", cpu="1", priority=10))
    gate = next(pl for pl in core.frameworks["default-scheduler"].plugins.pre_enqueue if pl.name == "DefaultPreemption")
    assert list(gate.preempting) == ["uid-default-first"]
    (victim,), _ = rec.preemptions[0]
    core.cache.remove_pod(pod(victim, node_name="n0" if victim == "low-0" else "n1"))  # gone; `first` was deleted meanwhile
    attempt(core, pod("second", cpu="1", priority=10))
    assert list(gate.preempting) == ["uid-default-second"]
