"""The kubelet's `/stats/summary`: upstream's Summary (k8s.io/kubelet/pkg/apis/stats/v1alpha1)
built from CRI stats and the node's own figures (upstream's CRI stats provider, without cAdvisor).

    provider = StatsProvider(runtime, node_name="n1", source=HostSource(root_dir="/var/lib/kubecore"),
                             clock=clock, root_dir="/var/lib/kubecore", log_root="/var/log/pods")
    summary = await provider.summary()          # a dict, ready for msgspec.json.encode

The HTTP handler (`GET /stats/summary`) is
`msgspec.json.encode(await node_resources.stats_provider(kubelet).summary())`: the kubelet's own
provider when it manages its resources (`kubelet.resources.stats`), else a fresh one (hollow nodes).

What it reports (JSON names as upstream; times RFC 3339; absent figures are left out):
- `node`: nodeName, startTime, cpu {usageNanoCores, usageCoreNanoSeconds}, memory {availableBytes,
  usageBytes, workingSetBytes, rssBytes, pageFaults, majorPageFaults}, fs (the file system of the
  kubelet's root dir), runtime.imageFs (capacity/available of the runtime's image file system,
  usedBytes as the runtime reports it), rlimit {maxpid, curproc}, and a `pods` system container
  (the sum of all pods, what allocatable-based decisions look at).
- `pods[]`: podRef {name, namespace, uid}, startTime (the sandbox's creation), containers[]
  {name, startTime, cpu, memory, rootfs (writable layer on the image fs), logs (log file sizes)},
  cpu and memory (sums of the containers), volume[] (emptyDir sizes, by walking the directory,
  only on a node with a root dir), ephemeral-storage (rootfs + logs + emptyDirs), process_stats.

Sources: the pods' figures come from ListPodSandbox + ListContainers + ListContainerStats. Pod
figures are the sums of their containers' rather than PodSandboxStats: containerd 1.6 answers that
call only for sandboxes with a cgroup parent, which this kubelet does not set. Only the newest
instance of each container name counts (an exited older attempt is history, as upstream
`removeTerminatedContainers`), and only the newest sandbox of each pod. The node's figures come from a
`NodeSource`: `HostSource` reads /proc (meminfo, stat, vmstat, loadavg) and statvfs(2);
`SimSource` derives a simulated node from its configured capacity and what its pods use, so
hollow and simulated nodes report consistent numbers. Node CPU usageNanoCores is the rate
between two calls (absent on the first).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kubecore.api import quantity
from kubecore.client.clock import Clock
from kubecore.kubelet import cri
from kubecore.kubelet.podutil import rfc3339

Obj = dict[str, Any]
EMPTY_DIR = "kubernetes.io~empty-dir"
NANOS_PER_S = 1_000_000_000


@dataclass(frozen=True)
class FsInfo:
    capacity: int
    available: int
    used: int
    inodes: int | None = None
    inodes_free: int | None = None


@dataclass(frozen=True)
class NodeSample:
    memory_capacity: int
    memory_usage: int
    memory_working_set: int
    fs: FsInfo
    memory_rss: int | None = None
    page_faults: int | None = None
    major_page_faults: int | None = None
    cpu_core_ns: int | None = None
    cpu_nano_cores: int | None = None
    max_pid: int | None = None
    cur_proc: int | None = None
    start_time: float | None = None


@dataclass
class PodTotals:
    """What all pods use together (a simulated node derives its own figures from it)."""

    working_set: int = 0
    nano_cores: int = 0
    core_ns: int = 0
    writable: int = 0
    image_bytes: int = 0


class NodeSource(Protocol):
    def sample(self, pods: PodTotals) -> NodeSample: ...

    def fs_of(self, path: str) -> FsInfo | None:
        """The file system holding `path` (the runtime's image fs), or None when unknown."""
        ...


def statvfs(path: str) -> FsInfo | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    capacity, free = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
    return FsInfo(capacity=capacity, available=free, used=(st.f_blocks - st.f_bfree) * st.f_frsize,
                  inodes=st.f_files, inodes_free=st.f_ffree)


def _kv(path: str) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        text = Path(path).read_text()
    except OSError:
        return out
    for line in text.splitlines():
        parts = line.replace(":", " ").split()
        if len(parts) >= 2 and parts[1].isdigit():
            out[parts[0]] = int(parts[1]) * (1024 if parts[-1] == "kB" else 1)
    return out


class HostSource:
    """This machine's figures (a real node). Working set as cAdvisor's root cgroup: usage minus
    inactive file pages, usage = MemTotal - MemFree."""

    def __init__(self, *, root_dir: str | None = None) -> None:
        self.root_dir = root_dir or "/"
        self._ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    def sample(self, pods: PodTotals) -> NodeSample:
        mem, vm = _kv("/proc/meminfo"), _kv("/proc/vmstat")
        total = mem.get("MemTotal", 0)
        usage = total - mem.get("MemFree", 0)
        working = max(0, usage - mem.get("Inactive(file)", 0))
        stat = _kv("/proc/stat")
        return NodeSample(memory_capacity=total, memory_usage=usage, memory_working_set=working,
                          memory_rss=mem.get("AnonPages"), page_faults=vm.get("pgfault"),
                          major_page_faults=vm.get("pgmajfault"), cpu_core_ns=self._cpu_ns(),
                          fs=statvfs(self.root_dir) or FsInfo(0, 0, 0), max_pid=_int_file("/proc/sys/kernel/pid_max"),
                          cur_proc=_procs(), start_time=float(stat["btime"]) if "btime" in stat else None)

    def _cpu_ns(self) -> int | None:
        try:
            first = Path("/proc/stat").read_text().split("\n", 1)[0].split()
        except OSError:
            return None
        # user nice system idle iowait irq softirq steal: busy = all but idle and iowait
        busy = [int(v) for i, v in enumerate(first[1:9]) if i not in (3, 4)]
        return sum(busy) * NANOS_PER_S // self._ticks

    def fs_of(self, path: str) -> FsInfo | None:
        return statvfs(path)


def _int_file(path: str) -> int | None:
    try:
        return int(Path(path).read_text().strip())
    except (OSError, ValueError):
        return None


def _procs() -> int | None:
    try:
        return int(Path("/proc/loadavg").read_text().split()[3].split("/")[1])
    except (OSError, ValueError, IndexError):
        return None


class SimSource:
    """A simulated node: capacity from its configuration, usage = what its pods use (plus the
    images on the disk). One inode per 32 KiB of disk."""

    def __init__(self, *, memory: str, ephemeral_storage: str, max_pods: int, clock: Clock) -> None:
        self.memory = quantity.parse(memory).value()
        self.disk = quantity.parse(ephemeral_storage).value()
        self.max_pods = max_pods
        self.started = clock.now()

    def _fs(self, used: int) -> FsInfo:
        inodes = max(1, self.disk // 32768)
        return FsInfo(capacity=self.disk, available=max(0, self.disk - used), used=used, inodes=inodes,
                      inodes_free=max(0, inodes - used // 32768))

    def sample(self, pods: PodTotals) -> NodeSample:
        return NodeSample(memory_capacity=self.memory, memory_usage=pods.working_set,
                          memory_working_set=pods.working_set, memory_rss=pods.working_set, cpu_core_ns=pods.core_ns,
                          cpu_nano_cores=pods.nano_cores, fs=self._fs(pods.writable + pods.image_bytes),
                          max_pid=32768, cur_proc=0, start_time=self.started)

    def fs_of(self, path: str) -> FsInfo | None:
        return None


# -- JSON pieces ----------------------------------------------------------------------------------

def _drop_none(d: Obj) -> Obj:
    return {k: v for k, v in d.items() if v is not None}


def cpu_json(cpu: cri.CpuUsage | None) -> Obj | None:
    if cpu is None:
        return None
    return _drop_none({"time": rfc3339(cri.epoch_from_ns(cpu.timestamp)), "usageNanoCores": cpu.usage_nano_cores,
                       "usageCoreNanoSeconds": cpu.usage_core_nano_seconds})


def memory_json(mem: cri.MemoryUsage | None, *, limit: int | None = None) -> Obj | None:
    if mem is None:
        return None
    available = None
    if limit and mem.working_set_bytes is not None:
        available = max(0, limit - mem.working_set_bytes)
    return _drop_none({"time": rfc3339(cri.epoch_from_ns(mem.timestamp)), "availableBytes": available,
                       "usageBytes": mem.usage_bytes, "workingSetBytes": mem.working_set_bytes,
                       "rssBytes": mem.rss_bytes, "pageFaults": mem.page_faults,
                       "majorPageFaults": mem.major_page_faults})


def fs_json(now: str, fs: FsInfo | None, *, used: int | None = None, inodes_used: int | None = None) -> Obj:
    out: Obj = {"time": now}
    if fs is not None:
        out.update(availableBytes=fs.available, capacityBytes=fs.capacity, inodesFree=fs.inodes_free,
                   inodes=fs.inodes)
    out["usedBytes"] = fs.used if used is None and fs is not None else used
    out["inodesUsed"] = inodes_used
    return _drop_none(out)


def dir_usage(path: str) -> tuple[int, int]:
    """(bytes, inodes) under `path` (du -s --apparent-size, roughly); (0, 0) when absent."""
    total = inodes = 0
    stack = [path]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for e in entries:
            inodes += 1
            try:
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
                else:
                    total += e.stat(follow_symlinks=False).st_size
            except OSError:
                continue
    return total, inodes


@dataclass
class _Pod:
    sandbox: cri.PodSandbox
    containers: dict[str, tuple[cri.Container, cri.ContainerStats | None]] = field(default_factory=dict)


class StatsProvider:
    """Builds the Summary (see the module docstring)."""

    def __init__(self, runtime: cri.Runtime, *, node_name: str, source: NodeSource, clock: Clock,
                 root_dir: str | None = None, log_root: str | None = None) -> None:
        self.runtime = runtime
        self.node_name = node_name
        self.source = source
        self.clock = clock
        self.root_dir = root_dir
        self.log_root = log_root
        self._last_cpu: tuple[float, int] | None = None

    async def _pods(self) -> list[_Pod]:
        sandboxes = await self.runtime.list_pod_sandbox()
        newest: dict[str, cri.PodSandbox] = {}
        for s in sandboxes:
            have = newest.get(s.metadata.uid)
            if have is None or (s.state, -s.created_at) < (have.state, -have.created_at):
                newest[s.metadata.uid] = s  # a ready sandbox wins, then the newest
        pods = {s.id: _Pod(s) for s in newest.values()}
        stats = {st.attributes.id: st for st in await self.runtime.list_container_stats()}
        for c in await self.runtime.list_containers():
            pod = pods.get(c.pod_sandbox_id)
            if pod is None:
                continue
            have_c = pod.containers.get(c.metadata.name)
            if have_c is None or c.created_at > have_c[0].created_at:
                pod.containers[c.metadata.name] = (c, stats.get(c.id))
        return list(pods.values())

    def _log_bytes(self, sandbox: cri.PodSandbox, name: str) -> tuple[int, int] | None:
        if not self.log_root:
            return None
        m = sandbox.metadata
        return dir_usage(os.path.join(self.log_root, f"{m.namespace}_{m.name}_{m.uid}", name))

    def _volumes(self, uid: str, now: str) -> list[Obj]:
        if not self.root_dir:
            return []
        base = os.path.join(self.root_dir, "pods", uid, "volumes", EMPTY_DIR)
        try:
            names = sorted(os.listdir(base))
        except OSError:
            return []
        out = []
        for name in names:
            used, inodes = dir_usage(os.path.join(base, name))
            out.append({"time": now, "usedBytes": used, "inodesUsed": inodes, "name": name})
        return out

    def _container_json(self, pod: _Pod, c: cri.Container, st: cri.ContainerStats | None, now: str,
                        image_fs: FsInfo | None) -> Obj:
        out: Obj = {"name": c.metadata.name, "startTime": rfc3339(cri.epoch_from_ns(c.created_at))}
        if st is not None:
            out["cpu"], out["memory"] = cpu_json(st.cpu), memory_json(st.memory)
            layer = st.writable_layer
            if layer is not None:
                out["rootfs"] = fs_json(now, image_fs, used=layer.used_bytes or 0, inodes_used=layer.inodes_used or 0)
        logs = self._log_bytes(pod.sandbox, c.metadata.name)
        if logs is not None:
            out["logs"] = fs_json(now, None, used=logs[0], inodes_used=logs[1])
        return _drop_none(out)

    def _pod_json(self, pod: _Pod, now: str, image_fs: FsInfo | None, totals: PodTotals) -> Obj:
        m = pod.sandbox.metadata
        containers = [self._container_json(pod, c, st, now, image_fs) for c, st in pod.containers.values()]
        stats = [st for _, st in pod.containers.values() if st is not None]
        cpus = [s.cpu for s in stats if s.cpu is not None]
        mems = [s.memory for s in stats if s.memory is not None]
        ts = cri.ns_from_epoch(self.clock.now())
        cpu = cri.CpuUsage(timestamp=ts, usage_nano_cores=sum(c.usage_nano_cores or 0 for c in cpus),
                           usage_core_nano_seconds=sum(c.usage_core_nano_seconds or 0 for c in cpus))
        mem = cri.MemoryUsage(timestamp=ts, working_set_bytes=sum(x.working_set_bytes or 0 for x in mems),
                              usage_bytes=sum(x.usage_bytes or 0 for x in mems),
                              rss_bytes=sum(x.rss_bytes or 0 for x in mems),
                              page_faults=sum(x.page_faults or 0 for x in mems),
                              major_page_faults=sum(x.major_page_faults or 0 for x in mems))
        volumes = self._volumes(m.uid, now)
        ephemeral = sum(int(c.get("rootfs", {}).get("usedBytes", 0)) + int(c.get("logs", {}).get("usedBytes", 0))
                        for c in containers) + sum(int(v["usedBytes"]) for v in volumes)
        ephemeral_inodes = sum(int(c.get("rootfs", {}).get("inodesUsed", 0)) + int(c.get("logs", {}).get("inodesUsed", 0))
                               for c in containers) + sum(int(v["inodesUsed"]) for v in volumes)
        totals.working_set += mem.working_set_bytes or 0
        totals.nano_cores += cpu.usage_nano_cores or 0
        totals.core_ns += cpu.usage_core_nano_seconds or 0
        totals.writable += sum((s.writable_layer.used_bytes or 0) for s in stats if s.writable_layer is not None)
        out: Obj = {"podRef": {"name": m.name, "namespace": m.namespace, "uid": m.uid},
                    "startTime": rfc3339(cri.epoch_from_ns(pod.sandbox.created_at)), "containers": containers,
                    "cpu": cpu_json(cpu), "memory": memory_json(mem),
                    "ephemeral-storage": fs_json(now, image_fs, used=ephemeral, inodes_used=ephemeral_inodes),
                    "process_stats": {"process_count": len(mems)}}
        if volumes:
            out["volume"] = volumes
        return out

    async def image_fs(self) -> tuple[FsInfo | None, int, int | None]:
        """(the image file system, bytes the runtime says images use, inodes used)."""
        info = await self.runtime.image_fs_info()
        used, inodes, fs = 0, None, None
        for u in info.image_filesystems:
            used += u.used_bytes or 0
            if u.inodes_used is not None:
                inodes = (inodes or 0) + u.inodes_used
            if fs is None and u.fs_id is not None and u.fs_id.mountpoint:
                fs = self.source.fs_of(u.fs_id.mountpoint)
        return fs, used, inodes

    def _node_cpu(self, sample: NodeSample, ts: int) -> Obj:
        rate = sample.cpu_nano_cores
        now = self.clock.now()
        if rate is None and sample.cpu_core_ns is not None:
            if self._last_cpu is not None and now > self._last_cpu[0]:
                rate = int((sample.cpu_core_ns - self._last_cpu[1]) / (now - self._last_cpu[0]))
            self._last_cpu = (now, sample.cpu_core_ns)
        return cpu_json(cri.CpuUsage(timestamp=ts, usage_core_nano_seconds=sample.cpu_core_ns,
                                     usage_nano_cores=rate)) or {}

    async def summary(self) -> Obj:
        """The Summary as a JSON-ready dict."""
        ts = cri.ns_from_epoch(self.clock.now())
        now = rfc3339(self.clock.now())
        pods = await self._pods()
        image_fs, image_used, image_inodes = await self.image_fs()
        images = await self.runtime.list_images()
        totals = PodTotals(image_bytes=sum(i.size for i in images))
        pod_json = [self._pod_json(p, now, image_fs, totals) for p in pods]
        sample = self.source.sample(totals)
        if image_fs is None:  # images live on the node's file system (a simulated node)
            image_fs = sample.fs
            image_used = image_used or totals.image_bytes
        mem = cri.MemoryUsage(timestamp=ts, working_set_bytes=sample.memory_working_set, usage_bytes=sample.memory_usage,
                              rss_bytes=sample.memory_rss, page_faults=sample.page_faults,
                              major_page_faults=sample.major_page_faults)
        pods_mem = cri.MemoryUsage(timestamp=ts, working_set_bytes=totals.working_set, usage_bytes=totals.working_set)
        node: Obj = {
            "nodeName": self.node_name,
            "systemContainers": [{"name": "pods", "startTime": now,
                                  "cpu": cpu_json(cri.CpuUsage(timestamp=ts, usage_nano_cores=totals.nano_cores,
                                                               usage_core_nano_seconds=totals.core_ns)),
                                  "memory": memory_json(pods_mem, limit=sample.memory_capacity)}],
            "cpu": self._node_cpu(sample, ts),
            "memory": memory_json(mem, limit=sample.memory_capacity),
            "fs": fs_json(now, sample.fs),
            "runtime": {"imageFs": fs_json(now, image_fs, used=image_used, inodes_used=image_inodes)},
            "rlimit": _drop_none({"time": now, "maxpid": sample.max_pid, "curproc": sample.cur_proc}),
        }
        if sample.start_time is not None:
            node["startTime"] = rfc3339(sample.start_time)
        return {"node": node, "pods": pod_json}

