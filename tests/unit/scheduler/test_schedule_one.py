"""The scheduling cycle's own rules: how many nodes to look at, where to start, how to pick."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kubecore.scheduler import default_config
from kubecore.scheduler.batch import schedule_batch
from kubecore.scheduler.interface import CycleState
from kubecore.scheduler.native import NativeKernels
from kubecore.scheduler.podinfo import NodeInfo, Obj
from kubecore.scheduler.schedule_one import Assumed, Failed, num_feasible_nodes_to_find, schedule_one, select_host
from kubecore.scheduler.status import Status
from tests.unit.scheduler.helpers import build, config, needs_native, node, pod, python_profile


@pytest.mark.parametrize("nodes, percentage, expected", [
    (50, 0, 50), (99, 0, 99), (100, 0, 100), (1000, 0, 420), (5000, 0, 500), (6250, 0, 312), (20000, 0, 1000),
    (5000, 30, 1500), (1000, 5, 100), (5000, 100, 5000),
])
def test_num_feasible_nodes_to_find(nodes: int, percentage: int, expected: int) -> None:
    assert num_feasible_nodes_to_find(percentage, nodes) == expected


def test_select_host_picks_uniformly_among_the_best() -> None:
    rng = random.Random(1)
    picks = {select_host(["a", "b", "c", "d"], [5, 9, 9, 1], rng) for _ in range(50)}
    assert picks == {"b", "c"}


class Counting:
    name = "Counting"

    def __init__(self) -> None:
        self.seen: list[str] = []

    def filter(self, state: CycleState, p: Obj, ni: NodeInfo) -> Status | None:
        self.seen.append(ni.name)
        return None

    def score(self, state: CycleState, p: Obj, ni: NodeInfo) -> tuple[int, Status | None]:
        return 0, None  # a Score plugin: without one, the cycle stops at the first feasible node


def test_python_filters_stop_at_enough_nodes_and_rotate_the_start() -> None:
    counting = Counting()
    core, _, _ = build(config([python_profile("Counting")]), out_of_tree={"Counting": lambda a, h: counting})
    for i in range(200):
        core.cache.add_node(node(f"n{i:03}"))
    fw = core.frameworks["default-scheduler"]
    for name in ("a", "b"):
        core.queue.add(pod(name))
        pinfo = core.queue.pop()
        assert pinfo is not None
        assert isinstance(schedule_one(fw, pinfo), Assumed)
    # 200 nodes: 50 - 200/125 = 49 % -> 98, but at least 100 nodes are looked at
    assert counting.seen[:100] == [f"n{i:03}" for i in range(100)]
    assert counting.seen[100:] == [f"n{i:03}" for i in range(100, 200)]


def test_nominated_node_is_tried_first() -> None:
    counting = Counting()
    core, _, _ = build(config([python_profile("Counting")]), out_of_tree={"Counting": lambda a, h: counting})
    for i in range(5):
        core.cache.add_node(node(f"n{i}"))
    p = pod("p")
    p["status"] = {"nominatedNodeName": "n3"}
    core.queue.add(p)
    pinfo = core.queue.pop()
    assert pinfo is not None
    out = schedule_one(core.frameworks["default-scheduler"], pinfo)
    assert isinstance(out, Assumed) and out.node == "n3" and counting.seen == ["n3"]


def test_no_nodes() -> None:
    core, _, _ = build(config([python_profile("CpuFit")]))
    core.queue.add(pod("p"))
    pinfo = core.queue.pop()
    assert pinfo is not None
    out = schedule_one(core.frameworks["default-scheduler"], pinfo)
    assert isinstance(out, Failed) and out.message == "no nodes available to schedule pods"


@needs_native
def test_default_profile_pods_go_through_one_native_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: dict[str, int] = {"batch": 0, "one": 0}
    real_batch, real_one = NativeKernels.schedule_batch, NativeKernels.schedule

    def batch(self: NativeKernels, pods: Any) -> Any:
        calls["batch"] += 1
        return real_batch(self, pods)

    def one(self: NativeKernels, raw: bytes, *, select: bool) -> Any:
        calls["one"] += 1
        return real_one(self, raw, select=select)

    monkeypatch.setattr(NativeKernels, "schedule_batch", batch)
    monkeypatch.setattr(NativeKernels, "schedule", one)
    core, _, _ = build(default_config(), native=True)
    for i in range(20):
        core.cache.add_node(node(f"n{i}", cpu="1"))
    for i in range(30):
        core.queue.add(pod(f"p{i}", cpu="1"))
        if i == 14:  # its PreFilter does not Skip: it takes the one-pod path between two batches
            core.queue.add(pod("with-claim", volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}]))
    outs = schedule_batch(core.frameworks["default-scheduler"], core.queue.pop_batch(100))
    assert sum(isinstance(o, Assumed) for o in outs) == 20
    failed = [o for o in outs if isinstance(o, Failed)]
    assert len(failed) == 11
    assert any('persistentvolumeclaim "c" not found' in f.message for f in failed)
    assert calls == {"batch": 2, "one": 0}  # two runs around the pod with a claim
    assert core.cache.snapshot is not None
    assert all(core.cache.snapshot.requested(f"n{i}")["cpu"] == 1000 for i in range(20))


async def test_driver_runs_until_the_queue_closes() -> None:
    import asyncio

    from kubecore.client.clock import settle
    from kubecore.scheduler.driver import Driver

    core, rec, clock = build(config([python_profile("CpuFit")]))
    core.cache.add_node(node("n0", cpu="1"))
    failed: list[Failed] = []
    driver = Driver(core, on_failed=failed.append)
    task = asyncio.create_task(driver.run())
    core.queue.add(pod("a", cpu="600m"))
    core.queue.add(pod("b", cpu="600m"))
    await settle(30)
    assert rec.bound == [("a", "n0")] and [f.pinfo.key for f in failed] == ["default/b"]
    core.cache.add_node(node("n1", cpu="1"))
    core.queue.node_added(node("n1", cpu="1"))  # CpuFit has no events: any event may help it
    await clock.run_for(1.0)  # b's backoff
    await settle(30)
    assert sorted(rec.bound) == [("a", "n0"), ("b", "n1")]
    core.queue.close()
    await asyncio.wait_for(task, 1)
