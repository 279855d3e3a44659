"""CRI stats from a real containerd 1.6 (ContainerStats, ListContainerStats, ImageFsInfo, and
PodSandboxStats where the runtime answers it), the /stats/summary built from them, and the
container garbage collector over the real runtime. The `node` and `rt` fixtures are
test_containerd_runtime.py's (this module gets its own containerd, CNI bridge and local images, as
root); missing root or packages fail the module, never skip it."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from kubecore.client.clock import REAL_CLOCK
from kubecore.kubelet import cri
from kubecore.kubelet.containerd import ContainerdRuntime
from kubecore.kubelet.gc import ContainerGC
from kubecore.kubelet.stats import HostSource, StatsProvider
from tests.integration.test_containerd_runtime import (  # noqa: F401 (node, rt: its fixtures, for this module)
    WAIT_S,
    Node,
    container_config,
    node,
    rt,
    run_container,
    sandbox_config,
    wait_exited,
)


async def cpu_ns(rt: ContainerdRuntime, cid: str) -> int:
    stats = await rt.container_stats(cid)
    assert stats.cpu is not None and stats.cpu.usage_core_nano_seconds is not None
    return stats.cpu.usage_core_nano_seconds


async def test_a_busy_container_has_a_working_set_and_growing_cpu(node: Node, rt: ContainerdRuntime) -> None:
    sandbox = sandbox_config(node, "burner")
    sid = await rt.run_pod_sandbox(sandbox)
    cid = await run_container(rt, sid, sandbox, container_config("burn", "while :; do :; done"))
    deadline = time.monotonic() + WAIT_S
    first = await cpu_ns(rt, cid)
    while (later := await cpu_ns(rt, cid)) <= first:
        assert time.monotonic() < deadline, f"CPU usage stayed at {first} ns for {WAIT_S}s"
        await asyncio.sleep(0.2)
    assert later > first
    stats = await rt.container_stats(cid)
    assert stats.attributes.id == cid and stats.attributes.metadata.name == "burn"
    assert stats.memory is not None and (stats.memory.working_set_bytes or 0) > 0
    assert stats.writable_layer is not None and stats.writable_layer.fs_id is not None
    listed = await rt.list_container_stats(cri.ContainerStatsFilter(pod_sandbox_id=sid))
    assert [s.attributes.id for s in listed] == [cid]
    await rt.stop_pod_sandbox(sid)
    await rt.remove_pod_sandbox(sid)


async def test_image_fs_info_names_the_snapshotter_file_system(rt: ContainerdRuntime) -> None:
    info = await rt.image_fs_info()
    assert len(info.image_filesystems) == 1
    fs = info.image_filesystems[0]
    assert fs.fs_id is not None and Path(fs.fs_id.mountpoint).is_dir() and fs.timestamp > 0


async def test_sandbox_stats_answer_or_fail_typed(node: Node, rt: ContainerdRuntime) -> None:
    """containerd 1.6 answers PodSandboxStats only for sandboxes with a cgroup parent (the kubelet
    sets none; the summary sums containers instead): either an answer or a typed CRI error."""
    sandbox = sandbox_config(node, "sbstats")
    sid = await rt.run_pod_sandbox(sandbox)
    try:
        stats = await rt.pod_sandbox_stats(sid)
        assert stats.attributes.id == sid
    except cri.CriError as e:
        assert "PodSandboxStats" in str(e)
    await rt.stop_pod_sandbox(sid)
    await rt.remove_pod_sandbox(sid)


async def test_summary_over_containerd(node: Node, rt: ContainerdRuntime) -> None:
    sandbox = sandbox_config(node, "summed")
    sid = await rt.run_pod_sandbox(sandbox)
    await run_container(rt, sid, sandbox, container_config("sleeper", "sleep 600"))
    provider = StatsProvider(rt, node_name="n1", source=HostSource(root_dir=str(node.state_dir)), clock=REAL_CLOCK)
    summary = await provider.summary()
    pods = {p["podRef"]["name"]: p for p in summary["pods"]}
    pod = pods["summed"]
    assert pod["podRef"]["uid"] == "uid-summed"
    (c,) = pod["containers"]
    assert c["name"] == "sleeper" and c["memory"]["workingSetBytes"] > 0
    assert pod["memory"]["workingSetBytes"] == c["memory"]["workingSetBytes"]
    assert c["rootfs"]["capacityBytes"] > 0  # statvfs of the snapshotter's mountpoint
    node_stats = summary["node"]
    assert node_stats["memory"]["availableBytes"] > 0 and node_stats["fs"]["capacityBytes"] > 0
    assert node_stats["runtime"]["imageFs"]["capacityBytes"] > 0
    await rt.stop_pod_sandbox(sid)
    await rt.remove_pod_sandbox(sid)


async def test_container_gc_keeps_the_newest_dead_instance(node: Node, rt: ContainerdRuntime) -> None:
    sandbox = sandbox_config(node, "gcpod")
    sid = await rt.run_pod_sandbox(sandbox)
    ids = []
    for attempt in range(3):
        config = container_config("quick", "exit 0")
        config.metadata.attempt = attempt
        ids.append(await run_container(rt, sid, sandbox, config))
        await wait_exited(rt, ids[-1])
    gc = ContainerGC(rt, clock=REAL_CLOCK, content_removable=lambda uid: uid != "uid-gcpod", sources_ready=lambda: True)
    result = await gc.collect()
    assert sorted(result.containers) == sorted(ids[:2])
    left = [c.id for c in await rt.list_containers(cri.ContainerFilter(pod_sandbox_id=sid))]
    assert left == [ids[2]]
    await rt.stop_pod_sandbox(sid)
    await rt.remove_pod_sandbox(sid)
