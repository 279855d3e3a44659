"""Gang scheduling: a pod group is placed whole or not at all, and a partial gang frees what it held."""

from __future__ import annotations

import asyncio

import pytest

from kubecore.client.clock import settle
from kubecore.scheduler.driver import Driver
from kubecore.scheduler.plugins.coscheduling import MIN_MEMBER_KEY, POD_GROUP_LABEL, pod_group
from kubecore.scheduler.podinfo import Obj
from kubecore.scheduler.registry import SchedulerCore
from kubecore.scheduler.schedule_one import Failed
from tests.unit.scheduler.helpers import Recorder, build, config, native_available, node, pod, python_profile

MODES = ["python", pytest.param("native", marks=pytest.mark.skipif(not native_available(), reason="no kernels"))]
GANG_ARGS = [{"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": 10}}]


def member(name: str, group: str, size: int, *, cpu: str = "1") -> Obj:
    return pod(name, cpu=cpu, labels={POD_GROUP_LABEL: group}, annotations={MIN_MEMBER_KEY: str(size)})


def setup(mode: str, nodes: int = 3, rec: Recorder | None = None, *, args: list[Obj] | None = None,
          pop_from_backoff: bool = False) -> tuple[SchedulerCore, Recorder, Driver, list[Failed]]:
    args = args or GANG_ARGS
    if mode == "native":
        prof = {"plugins": {"multiPoint": {"enabled": [{"name": "Coscheduling"}]}}, "pluginConfig": args}
    else:
        prof = python_profile("CpuFit", "DefaultPreemption", "Coscheduling", plugin_config=args)
    core, rec, _ = build(config([prof]), native=mode == "native", rec=rec, pop_from_backoff=pop_from_backoff)
    for i in range(nodes):
        core.cache.add_node(node(f"n{i}", cpu="1"))
    failed: list[Failed] = []
    return core, rec, Driver(core, on_failed=failed.append), failed


def add(core: SchedulerCore, rec: Recorder, p: Obj) -> None:
    """A new pod as the informers would see it: listed, and queued."""
    rec.pods.append(p)
    core.queue.add(p)


def test_group_convention() -> None:
    assert pod_group(member("a", "g", 3)) == ("default", "g", 3)
    assert pod_group(pod("loner")) is None
    assert pod_group(pod("x", labels={POD_GROUP_LABEL: "g"}, annotations={MIN_MEMBER_KEY: "zero?"})) == ("default", "g", 1)


async def run_gang(mode: str, size: int) -> tuple[SchedulerCore, Recorder, Driver, list[Failed]]:
    """A gang of `size` one-cpu members on three one-cpu nodes, scheduled until nothing is left."""
    core, rec, driver, failed = setup(mode)
    for i in range(size):
        add(core, rec, member(f"m{i}", "g", size))
    await driver.drain()
    return core, rec, driver, failed


@pytest.mark.parametrize("mode", MODES)
async def test_a_gang_that_fits_is_placed_whole(mode: str) -> None:
    core, rec, driver, failed = await run_gang(mode, 3)
    assert failed == []
    assert sorted(n for _, n in rec.bound) == ["n0", "n1", "n2"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_gang_that_does_not_fit_holds_nothing(mode: str) -> None:
    core, rec, driver, failed = await run_gang(mode, 4)
    assert rec.bound == []
    assert len(core.cache) == 0  # every reservation was undone
    assert core.frameworks["default-scheduler"].waiting_pods.get("default/m0") is None
    assert len(failed) == 4
    assert any("Insufficient cpu" in f.message for f in failed)
    assert any("rejection in Unreserve" in f.message or "gets rejected" in f.message for f in failed)
    # with the gang gone, the room is there for others
    for i in range(4):
        core.queue.delete(member(f"m{i}", "g", 4))
    core.queue.add(pod("solo", cpu="1"))
    await driver.drain()
    assert [name for name, _ in rec.bound] == ["solo"]


@pytest.mark.parametrize("mode", MODES)
async def test_incomplete_gang_times_out_and_releases(mode: str) -> None:
    core, rec, driver, failed = setup(mode)
    add(core, rec, member("m0", "g", 3))
    add(core, rec, member("m1", "g", 3))
    rec.pods.append(member("m2", "g", 3))  # exists, but never gets scheduled (say, another scheduler's)
    run = asyncio.ensure_future(driver.drain())
    await settle(50)
    assert not run.done() and len(core.cache) == 2 and rec.bound == []
    clock = core.clock
    await clock.step(9.9)  # type: ignore[attr-defined]
    assert not run.done()
    await clock.step(0.2)  # type: ignore[attr-defined]
    await settle(50)
    await asyncio.wait_for(run, 1)
    assert rec.bound == [] and len(core.cache) == 0
    messages = sorted(f.message for f in failed)
    assert any("rejected due to timeout after waiting 10s at plugin Coscheduling" in m for m in messages)


async def test_prefilter_checks_the_group_size_when_pods_can_be_listed() -> None:
    rec = Recorder()
    rec.pods = [member("m0", "g", 3), member("m1", "g", 3)]
    core, rec, driver, failed = setup("python", rec=rec)
    core.queue.add(rec.pods[0])
    await driver.drain()
    assert [f.message for f in failed] == [
        "0/3 nodes are available: pre-filter pod m0 cannot find enough sibling pods, current pods number: 2, "
        "minMember of group: 3. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling., "
        "PodGroup default/g gets rejected due to Pod m0 is unschedulable even after PostFilter"]
    # a sibling's creation requeues the pod (Coscheduling registered Pod/Add with a same-group hint)
    add(core, rec, member("m2", "g", 3))
    assert core.queue.where("default/m0") == "Backoff"


@pytest.mark.parametrize("mode", MODES)
async def test_pod_group_backoff_ends_the_retry_loop_of_a_gang_that_cannot_fit(mode: str) -> None:
    """With SchedulerPopFromBackoffQ a gang of 4 on 3 one-cpu nodes would be retried without pause
    (its members activate each other at Permit); podGroupBackoffSeconds refuses the group at
    PreFilter after its PostFilter rejection, so the queue goes quiet. A node added after the
    backoff wakes the members and the gang is placed whole."""
    args = [{"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": 10, "podGroupBackoffSeconds": 5}}]
    core, rec, driver, failed = setup(mode, args=args, pop_from_backoff=True)
    for i in range(4):
        add(core, rec, member(f"m{i}", "g", 4))
    await asyncio.wait_for(driver.drain(), 5)  # ends: no member is retried while the group is refused
    assert rec.bound == [] and len(core.cache) == 0
    assert any("podGroup default/g failed recently" in f.message for f in failed)
    assert sum(core.queue.counts().values()) == 4 and core.queue.counts()["unschedulable"] == 4
    await core.clock.step(5.0)  # type: ignore[attr-defined]
    core.cache.add_node(node("n3", cpu="1"))
    core.queue.node_added(node("n3", cpu="1"))
    await asyncio.wait_for(driver.drain(), 5)
    assert sorted(n for _, n in rec.bound) == ["n0", "n1", "n2", "n3"]


def test_pod_group_backoff_seconds_must_not_be_negative() -> None:
    from kubecore.scheduler.configerrors import ConfigError

    with pytest.raises(ConfigError, match=r"podGroupBackoffSeconds: Invalid value: -1: must be greater than or equal to 0"):
        build(config([python_profile("Coscheduling", plugin_config=[
            {"name": "Coscheduling", "args": {"podGroupBackoffSeconds": -1}}])]))
