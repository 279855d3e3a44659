"""Simulated resource usage for the simulated runtime's CRI stats calls (ContainerStats,
ListContainerStats, PodSandboxStats, ListPodSandboxStats, ImageFsInfo).

No process runs, so a pod says what its containers use, with annotations read like the other
`sim.kubecore.io/` keys (pod-wide, or per container with `.<name>` after the key):

| annotation | meaning | default |
| --- | --- | --- |
| `memory-usage` | working set (= usage = RSS) of a running container, a quantity | `1Mi` |
| `cpu-usage` | CPU a running container burns, in cores (a quantity: `250m`) | `1m` |
| `disk-usage` | bytes in the container's writable layer (also kept once it exited) | `0` |

A running container reports `usage_nano_cores` = its cpu-usage and a cumulative
`usage_core_nano_seconds` = cpu-usage x seconds since it started; an exited one reports no CPU
and no memory (as a real runtime whose cgroup is gone). Inodes: one per 4 KiB of writable layer.
The image file system (`ImageFsInfo`) is the images' sizes plus the writable layers, under the
mountpoint `IMAGE_FS_MOUNTPOINT`. A value that is not a quantity counts as the default, so a
typo never fails a call.
"""

from __future__ import annotations

from collections.abc import Mapping

from kubecore.api import quantity
from kubecore.kubelet import cri
from kubecore.kubelet.sim.behaviour import lookup

MEMORY_USAGE, CPU_USAGE, DISK_USAGE = "memory-usage", "cpu-usage", "disk-usage"
DEFAULT_MEMORY, DEFAULT_CPU, DEFAULT_DISK = 1 << 20, 1_000_000, 0
IMAGE_FS_MOUNTPOINT = "/var/lib/kubecore-sim/images"
INODE_BYTES = 4096


def _nanos(annotations: Mapping[str, str], key: str, container: str) -> int | None:
    value = lookup(annotations, key, container)
    if value is None:
        return None
    try:
        return quantity.parse(value.strip()).nanos
    except quantity.QuantityError:
        return None


def memory_bytes(annotations: Mapping[str, str], container: str) -> int:
    nanos = _nanos(annotations, MEMORY_USAGE, container)
    return DEFAULT_MEMORY if nanos is None else max(0, nanos // quantity.NANO)


def cpu_nano_cores(annotations: Mapping[str, str], container: str) -> int:
    nanos = _nanos(annotations, CPU_USAGE, container)
    return DEFAULT_CPU if nanos is None else max(0, nanos)


def disk_bytes(annotations: Mapping[str, str], container: str) -> int:
    nanos = _nanos(annotations, DISK_USAGE, container)
    return DEFAULT_DISK if nanos is None else max(0, nanos // quantity.NANO)


def container_stats(attributes: cri.ContainerAttributes, *, pod_annotations: Mapping[str, str], running: bool,
                    started_at: int, now: int) -> cri.ContainerStats:
    """One container's stats at `now` (ns), from its pod's annotations."""
    name = attributes.metadata.name
    disk = disk_bytes(pod_annotations, name)
    layer = cri.FilesystemUsage(timestamp=now, fs_id=cri.FilesystemIdentifier(mountpoint=IMAGE_FS_MOUNTPOINT),
                                used_bytes=disk, inodes_used=-(-disk // INODE_BYTES))
    if not running:
        return cri.ContainerStats(attributes=attributes, writable_layer=layer)
    rate = cpu_nano_cores(pod_annotations, name)
    cumulative = rate * max(0, now - started_at) // 1_000_000_000
    mem = memory_bytes(pod_annotations, name)
    return cri.ContainerStats(
        attributes=attributes, writable_layer=layer,
        cpu=cri.CpuUsage(timestamp=now, usage_core_nano_seconds=cumulative, usage_nano_cores=rate),
        memory=cri.MemoryUsage(timestamp=now, working_set_bytes=mem, usage_bytes=mem, rss_bytes=mem,
                               page_faults=0, major_page_faults=0))


def _sum(values: list[int | None]) -> int:
    return sum(v or 0 for v in values)


def sandbox_stats(attributes: cri.PodSandboxAttributes, containers: list[cri.ContainerStats], *,
                  now: int) -> cri.PodSandboxStats:
    """The pod's stats: the sums of its running containers' CPU and memory."""
    cpus = [c.cpu for c in containers if c.cpu is not None]
    mems = [c.memory for c in containers if c.memory is not None]
    working = _sum([m.working_set_bytes for m in mems])
    linux = cri.LinuxPodSandboxStats(
        cpu=cri.CpuUsage(timestamp=now, usage_core_nano_seconds=_sum([c.usage_core_nano_seconds for c in cpus]),
                         usage_nano_cores=_sum([c.usage_nano_cores for c in cpus])),
        memory=cri.MemoryUsage(timestamp=now, working_set_bytes=working, usage_bytes=working, rss_bytes=working,
                               page_faults=0, major_page_faults=0),
        process=cri.ProcessUsage(timestamp=now, process_count=len(mems)),
        containers=containers)
    return cri.PodSandboxStats(attributes=attributes, linux=linux)


def image_fs(images: list[cri.Image], layers: list[cri.ContainerStats], *, now: int) -> cri.ImageFsInfoResponse:
    used = sum(i.size for i in images) + _sum([c.writable_layer.used_bytes for c in layers
                                               if c.writable_layer is not None])
    usage = cri.FilesystemUsage(timestamp=now, fs_id=cri.FilesystemIdentifier(mountpoint=IMAGE_FS_MOUNTPOINT),
                                used_bytes=used, inodes_used=-(-used // INODE_BYTES))
    return cri.ImageFsInfoResponse(image_filesystems=[usage])
