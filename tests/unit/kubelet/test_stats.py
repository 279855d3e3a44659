"""CRI stats of the simulated runtime, their protobuf codec, and the /stats/summary built from them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kubecore.kubelet import cri, runtime_config
from kubecore.kubelet.containerd import codec
from kubecore.kubelet.containerd import messages as m
from kubecore.kubelet.sim import stats as simstats
from kubecore.kubelet.stats import HostSource, SimSource, StatsProvider, dir_usage
from tests.unit.kubelet.kubelet_fixtures import SimNode, container, make_pod

Obj = dict[str, Any]
MI = 1 << 20


async def run_pod(node: SimNode, pod: Obj, *, attempt: int = 0) -> tuple[str, dict[str, str]]:
    """Sandbox + every container started; returns (sandbox id, name -> container id)."""
    sandbox = runtime_config.sandbox_config(pod, attempt)
    sid = await node.runtime.run_pod_sandbox(sandbox)
    ids = {}
    for spec in pod["spec"]["containers"]:
        ref = await node.runtime.pull_image(cri.ImageSpec(image=spec["image"]), None, sandbox)
        config = runtime_config.container_config(pod, spec, restart_count=0, image_ref=ref)
        ids[spec["name"]] = cid = await node.runtime.create_container(sid, config, sandbox)
        await node.runtime.start_container(cid)
    return sid, ids


def provider(node: SimNode, *, memory: str = "1Gi", disk: str = "10Gi", root_dir: str | None = None) -> StatsProvider:
    source = SimSource(memory=memory, ephemeral_storage=disk, max_pods=110, clock=node.clock)
    return StatsProvider(node.runtime, node_name="node-1", source=source, clock=node.clock, root_dir=root_dir)


def test_codec_round_trips_stats_messages_with_wrappers() -> None:
    stats = cri.ContainerStats(
        attributes=cri.ContainerAttributes(id="c1", metadata=cri.ContainerMetadata(name="app", attempt=2),
                                           labels={"a": "b"}),
        cpu=cri.CpuUsage(timestamp=5, usage_core_nano_seconds=0, usage_nano_cores=None),
        memory=cri.MemoryUsage(timestamp=6, working_set_bytes=123, usage_bytes=1 << 40),
        writable_layer=cri.FilesystemUsage(fs_id=cri.FilesystemIdentifier(mountpoint="/x"), used_bytes=7))
    back = codec.decode(m.ListContainerStatsResponse, codec.encode(m.ListContainerStatsResponse(stats=[stats])))
    assert back.stats == [stats]
    assert back.stats[0].cpu is not None and back.stats[0].cpu.usage_core_nano_seconds == 0  # present zero
    assert back.stats[0].cpu.usage_nano_cores is None  # absent wrapper
    fs = cri.ImageFsInfoResponse(image_filesystems=[cri.FilesystemUsage(timestamp=1, used_bytes=9, inodes_used=3)])
    assert codec.decode(cri.ImageFsInfoResponse, codec.encode(fs)) == fs
    pod = cri.PodSandboxStats(attributes=cri.PodSandboxAttributes(id="s"),
                              linux=cri.LinuxPodSandboxStats(containers=[stats],
                                                             process=cri.ProcessUsage(process_count=2)))
    assert codec.decode(m.PodSandboxStatsResponse, codec.encode(m.PodSandboxStatsResponse(stats=pod))).stats == pod


async def test_sim_container_stats_follow_annotations_and_time() -> None:
    node = SimNode()
    pod = make_pod(containers=[container("a"), container("b")], annotations={
        "sim.kubecore.io/memory-usage": "64Mi", "sim.kubecore.io/cpu-usage.b": "500m",
        "sim.kubecore.io/disk-usage": "8Ki"})
    _, ids = await run_pod(node, pod)
    node.clock.advance(10)
    a, b = await node.runtime.container_stats(ids["a"]), await node.runtime.container_stats(ids["b"])
    assert a.memory is not None and a.memory.working_set_bytes == 64 * MI
    assert a.cpu is not None and a.cpu.usage_nano_cores == simstats.DEFAULT_CPU
    assert b.cpu is not None and b.cpu.usage_nano_cores == 500_000_000
    assert b.cpu.usage_core_nano_seconds == 5_000_000_000  # half a core for ten seconds
    assert a.writable_layer is not None and (a.writable_layer.used_bytes, a.writable_layer.inodes_used) == (8192, 2)
    listed = await node.runtime.list_container_stats(cri.ContainerStatsFilter(id=ids["a"]))
    assert [s.attributes.id for s in listed] == [ids["a"]]
    await node.runtime.stop_container(ids["a"], 0)
    stopped = await node.runtime.container_stats(ids["a"])
    assert stopped.memory is None and stopped.cpu is None and stopped.writable_layer is not None


async def test_sim_pod_and_image_fs_stats() -> None:
    node = SimNode()
    pod = make_pod(containers=[container("a"), container("b", image="nginx")],
                   annotations={"sim.kubecore.io/memory-usage": "10Mi"})
    sid, _ = await run_pod(node, pod)
    stats = await node.runtime.pod_sandbox_stats(sid)
    assert stats.linux is not None and stats.linux.memory is not None
    assert stats.linux.memory.working_set_bytes == 20 * MI and len(stats.linux.containers) == 2
    fs = await node.runtime.image_fs_info()
    images = await node.runtime.list_images()
    assert fs.image_filesystems[0].used_bytes == sum(i.size for i in images) > 0


async def test_summary_pods_containers_and_node_memory() -> None:
    node = SimNode()
    await run_pod(node, make_pod("big", uid="u-big", annotations={"sim.kubecore.io/memory-usage": "300Mi"}))
    await run_pod(node, make_pod("small", uid="u-small", containers=[container("x"), container("y")],
                                 annotations={"sim.kubecore.io/memory-usage": "50Mi"}))
    summary = await provider(node).summary()
    pods = {p["podRef"]["name"]: p for p in summary["pods"]}
    assert set(pods) == {"big", "small"}
    assert pods["small"]["podRef"] == {"name": "small", "namespace": "default", "uid": "u-small"}
    assert sorted(c["name"] for c in pods["small"]["containers"]) == ["x", "y"]
    assert pods["small"]["memory"]["workingSetBytes"] == 100 * MI
    node_mem = summary["node"]["memory"]
    assert node_mem["workingSetBytes"] == 400 * MI
    assert node_mem["availableBytes"] == 1024 * MI - 400 * MI
    assert summary["node"]["nodeName"] == "node-1"
    image_fs = summary["node"]["runtime"]["imageFs"]
    assert image_fs["capacityBytes"] == 10 * 1024 * MI and image_fs["usedBytes"] > 0
    assert summary["node"]["rlimit"]["maxpid"] > 0


async def test_summary_node_cpu_rate_needs_two_samples_on_a_host_source() -> None:
    node = SimNode()
    p = StatsProvider(node.runtime, node_name="n", source=HostSource(root_dir="/"), clock=node.clock)
    first = await p.summary()
    assert "usageNanoCores" not in first["node"]["cpu"] and first["node"]["cpu"]["usageCoreNanoSeconds"] > 0
    node.clock.advance(1)
    second = await p.summary()
    assert second["node"]["cpu"]["usageNanoCores"] >= 0
    assert second["node"]["memory"]["workingSetBytes"] > 0 and second["node"]["fs"]["capacityBytes"] > 0


async def test_only_the_newest_instance_of_a_container_counts() -> None:
    node = SimNode()
    pod = make_pod(annotations={"sim.kubecore.io/memory-usage": "5Mi"})
    sid, ids = await run_pod(node, pod)
    await node.runtime.stop_container(ids["app"], 0)
    sandbox = runtime_config.sandbox_config(pod, 0)
    spec = pod["spec"]["containers"][0]
    config = runtime_config.container_config(pod, spec, restart_count=1, image_ref="busybox:1.36")
    node.clock.advance(1)
    newer = await node.runtime.create_container(sid, config, sandbox)
    await node.runtime.start_container(newer)
    summary = await provider(node).summary()
    (only,) = summary["pods"][0]["containers"]
    assert only["memory"]["workingSetBytes"] == 5 * MI


async def test_empty_dir_volumes_count_in_ephemeral_storage(tmp_path: Path) -> None:
    node = SimNode()
    await run_pod(node, make_pod(uid="u1", annotations={"sim.kubecore.io/disk-usage": "4Ki"}))
    vol = tmp_path / "pods" / "u1" / "volumes" / "kubernetes.io~empty-dir" / "cache"
    (vol / "sub").mkdir(parents=True)
    (vol / "a").write_bytes(b"x" * 1000)
    (vol / "sub" / "b").write_bytes(b"y" * 24)
    summary = await provider(node, root_dir=str(tmp_path)).summary()
    pod = summary["pods"][0]
    assert pod["volume"] == [{"time": pod["volume"][0]["time"], "usedBytes": 1024, "inodesUsed": 3, "name": "cache"}]
    assert pod["ephemeral-storage"]["usedBytes"] == 1024 + 4096


def test_dir_usage_of_a_missing_directory_is_zero(tmp_path: Path) -> None:
    assert dir_usage(os.fspath(tmp_path / "nope")) == (0, 0)
