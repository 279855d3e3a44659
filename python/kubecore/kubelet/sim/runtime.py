"""A simulated container runtime behind the CRI interface (kwok/kubemark's role): sandboxes get IPs,
containers change state on a timer, no process runs.

    runtime = SimRuntime(clock=clock, timers=timers, pod_cidr="10.128.0.0/24")
    sandbox_id = await runtime.run_pod_sandbox(config)           # READY, an IP from the CIDR
    cid = await runtime.create_container(sandbox_id, cconfig, config)
    await runtime.start_container(cid)                          # RUNNING; exits later per the pod's annotations

Every call answers at once (nothing awaits unless a stop has to wait for `stop-duration`), and its
effect is immediately visible to the next call. How long a container runs, its exit code, failed
image pulls and probe answers come from the pod's annotations (`behaviour.py`); a container type
(init/sidecar/container) and the pod's restart policy arrive as the kubelet's CRI annotations.

State lives in this object, not in the kubelet: a kubelet restarted over the same `SimRuntime`
finds its sandboxes and containers again (re-adoption). Runtime events follow CRI's
GetContainerEvents: created/started/stopped/deleted for containers and for sandboxes (with the
sandbox id as container id, as containerd sends them), each carrying the pod's sandbox status and
all its container statuses.

Pod IPs (`Ipam`): host-local style allocation from the node's pod CIDR. The CIDR is the node's `spec.podCIDR` when the control plane set one (the kubelet passes it with
CRI UpdateRuntimeConfig), else a deterministic one per node (`default_pod_cidr`): the hollow-node
host numbers its nodes and gives node i the /24 `10.{128 + i // 256}.{i % 256}.0/24` (32,768
nodes before it wraps); a single kubelet without a number hashes its name into the same range.
Node addresses of hollow nodes come from 172.16.0.0/12 the same way (`hollow_node_ip`).

Allocation follows CNI host-local: the gateway (the first address) is never handed out, nor the
network and broadcast addresses; each allocation continues after the last one handed out and
wraps, so an address just released is not reused at once.

Logs and streaming: a container's ContainerStatus.log_path is the full path (the sandbox's log
directory, under `log_root` when given, joined with the config's log_path), and the file exists
only when the pod asks for log lines (`logs.py`). Exec, Attach and PortForward raise
Unimplemented: nothing runs to exec into.

Images: a pull of any name succeeds (unless the pod's `pull-fail` names it) and the image stays
"present" on this node; its id and digest are sha256 of the normalised name, its size a
deterministic 1-100 MB.

Stats (ContainerStats, ListContainerStats, PodSandboxStats, ListPodSandboxStats, ImageFsInfo)
report simulated usage from the pod's annotations (`sim/stats.py`: memory-usage, cpu-usage,
disk-usage; defaults 1Mi, 1m, 0).
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import logging
import secrets
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from kubecore.client.clock import Clock
from kubecore.kubelet import cri, podutil
from kubecore.kubelet.cri import ContainerEventType as Ev
from kubecore.kubelet.cri import ContainerState, PodSandboxState
from kubecore.kubelet.sim import behaviour
from kubecore.kubelet.sim.logs import SimLogs
from kubecore.kubelet.sim import stats as simstats
from kubecore.kubelet.timers import Timer, Timers

log = logging.getLogger(__name__)

POD_CIDR_BLOCKS = 32768


class IpamError(Exception):
    """No address left, or a CIDR that cannot hold pods."""


def default_pod_cidr(*, index: int | None = None, node_name: str = "") -> str:
    """The /24 a node without spec.podCIDR uses (see the module docstring)."""
    n = index if index is not None else zlib.crc32(node_name.encode()) % POD_CIDR_BLOCKS
    n %= POD_CIDR_BLOCKS
    return f"10.{128 + n // 256}.{n % 256}.0/24"


def hollow_node_ip(index: int) -> str:
    """InternalIP of hollow node `index` (172.16.0.1 upwards, 2^20 - 2 nodes)."""
    net = ipaddress.ip_network("172.16.0.0/12")
    return str(net.network_address + 1 + index % (net.num_addresses - 2))


class Ipam:
    """Addresses of one node's pod CIDR. Invariant: `_used` holds exactly the addresses handed out
    and not yet released."""

    def __init__(self, cidr: str) -> None:
        self._used: set[int] = set()
        self._set_cidr(cidr)

    def _set_cidr(self, cidr: str) -> None:
        try:
            net = ipaddress.ip_network(cidr, strict=False)
        except ValueError as e:
            raise IpamError(f"invalid pod CIDR {cidr!r}: {e}") from None
        if net.num_addresses < 4:
            raise IpamError(f"pod CIDR {cidr} is too small")
        self.cidr = str(net)
        self._net = net
        self._first = int(net.network_address) + 2   # .0 network, .1 gateway
        self._last = int(net.broadcast_address) - 1 if net.version == 4 else int(net.broadcast_address)
        self._next = self._first

    def set_cidr(self, cidr: str) -> None:
        """Allocate from `cidr` from now on (addresses already handed out stay valid until released)."""
        if cidr != self.cidr:
            self._set_cidr(cidr)

    @property
    def capacity(self) -> int:
        return self._last - self._first + 1

    def allocate(self) -> str:
        span = self.capacity
        for _ in range(span):
            candidate = self._next
            self._next = self._first if self._next >= self._last else self._next + 1
            if candidate not in self._used:
                self._used.add(candidate)
                return str(ipaddress.ip_address(candidate))
        raise IpamError(f"no free address in {self.cidr} ({len(self._used)} in use)")

    def release(self, ip: str) -> None:
        if ip:
            self._used.discard(int(ipaddress.ip_address(ip)))

    def __len__(self) -> int:
        return len(self._used)


RUNTIME_NAME = "sim"
RUNTIME_VERSION = "0.1.0"
EXIT_SIGTERM, EXIT_SIGKILL = 143, 137
NO_STREAMING = ("the simulated runtime (sim) runs no processes: exec, attach and port-forward need a real "
                "runtime such as containerd")


@dataclass(slots=True)
class _Sandbox:
    id: str
    metadata: cri.PodSandboxMetadata
    labels: dict[str, str]
    annotations: dict[str, str]
    created_at: int
    ip: str
    network: cri.NamespaceMode
    state: PodSandboxState = PodSandboxState.SANDBOX_READY
    containers: list[str] = field(default_factory=list)
    log_directory: str = ""


@dataclass(slots=True)
class _Container:
    id: str
    sandbox_id: str
    metadata: cri.ContainerMetadata
    image: str
    image_ref: str
    image_id: str
    labels: dict[str, str]
    annotations: dict[str, str]
    log_path: str
    """The full path (the sandbox's log directory joined with the config's log_path), as CRI reports it."""
    created_at: int
    state: ContainerState = ContainerState.CONTAINER_CREATED
    started_at: int = 0
    finished_at: int = 0
    exit_code: int = 0
    reason: str = ""
    timer: Timer | None = None


def _digest(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


def _label_match(labels: dict[str, str], selector: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


class SimRuntime:
    """The simulated runtime of one node (see the module docstring). Implements `cri.Runtime`."""

    def __init__(self, *, clock: Clock, timers: Timers, pod_cidr: str, log_root: str | None = None) -> None:
        self.clock = clock
        self.timers = timers
        self.logs = SimLogs(clock=clock, timers=timers, log_root=log_root)
        self.ipam = Ipam(pod_cidr)
        self._sandboxes: dict[str, _Sandbox] = {}
        self._containers: dict[str, _Container] = {}
        self._by_uid: dict[str, list[str]] = {}
        self._images: dict[str, cri.Image] = {}
        self._subscribers: list[asyncio.Queue[cri.ContainerEventResponse]] = []

    def _now(self) -> int:
        return cri.ns_from_epoch(self.clock.now())

    # -- runtime -----------------------------------------------------------------------------------
    async def version(self, api_version: str = "v1") -> cri.VersionResponse:
        return cri.VersionResponse(version="0.1.0", runtime_name=RUNTIME_NAME, runtime_version=RUNTIME_VERSION,
                                   runtime_api_version="v1")

    async def status(self, verbose: bool = False) -> cri.StatusResponse:
        return cri.StatusResponse(status=cri.RuntimeStatus(conditions=[
            cri.RuntimeCondition(type=cri.RUNTIME_READY, status=True),
            cri.RuntimeCondition(type=cri.NETWORK_READY, status=True)]))

    async def update_runtime_config(self, runtime_config: cri.RuntimeConfig) -> None:
        cidr = runtime_config.network_config.pod_cidr
        if cidr:
            self.ipam.set_cidr(cidr)

    # -- sandboxes ---------------------------------------------------------------------------------
    async def run_pod_sandbox(self, config: cri.PodSandboxConfig, runtime_handler: str = "") -> str:
        sid = secrets.token_hex(32)
        network = cri.NamespaceMode.POD
        if config.linux is not None:
            network = config.linux.security_context.namespace_options.network
        try:
            ip = self.ipam.allocate() if network == cri.NamespaceMode.POD else ""
        except IpamError as e:
            raise cri.CriError(f'failed to setup network for sandbox "{sid}": {e}') from e
        sandbox = _Sandbox(sid, config.metadata, config.labels, config.annotations, self._now(), ip, network,
                           log_directory=self.logs.directory(config.log_directory))
        self._sandboxes[sid] = sandbox
        self._by_uid.setdefault(config.metadata.uid, []).append(sid)
        self._emit(sid, Ev.CONTAINER_CREATED_EVENT, sandbox)
        self._emit(sid, Ev.CONTAINER_STARTED_EVENT, sandbox)
        return sid

    async def stop_pod_sandbox(self, pod_sandbox_id: str) -> None:
        sandbox = self._sandboxes.get(pod_sandbox_id)
        if sandbox is None or sandbox.state == PodSandboxState.SANDBOX_NOTREADY:
            return
        for cid in sandbox.containers:
            c = self._containers.get(cid)
            if c is not None and c.state == ContainerState.CONTAINER_RUNNING:
                self._exit(c, EXIT_SIGKILL, emit=False)
        sandbox.state = PodSandboxState.SANDBOX_NOTREADY
        self.ipam.release(sandbox.ip)
        self._emit(pod_sandbox_id, Ev.CONTAINER_STOPPED_EVENT, sandbox)

    async def remove_pod_sandbox(self, pod_sandbox_id: str) -> None:
        sandbox = self._sandboxes.get(pod_sandbox_id)
        if sandbox is None:
            return
        await self.stop_pod_sandbox(pod_sandbox_id)
        for cid in list(sandbox.containers):
            self._drop_container(cid)
        del self._sandboxes[pod_sandbox_id]
        uid = sandbox.metadata.uid
        ids = self._by_uid.get(uid)
        if ids is not None:
            ids.remove(pod_sandbox_id)
            if not ids:
                del self._by_uid[uid]
        self._emit(pod_sandbox_id, Ev.CONTAINER_DELETED_EVENT, sandbox)

    def _sandbox_status(self, s: _Sandbox) -> cri.PodSandboxStatus:
        return cri.PodSandboxStatus(
            id=s.id, metadata=s.metadata, state=s.state, created_at=s.created_at,
            network=cri.PodSandboxNetworkStatus(ip=s.ip if s.state == PodSandboxState.SANDBOX_READY else ""),
            linux=cri.LinuxPodSandboxStatus(namespaces=cri.Namespace(options=cri.NamespaceOption(network=s.network))),
            labels=s.labels, annotations=s.annotations)

    def _sandbox(self, pod_sandbox_id: str) -> _Sandbox:
        s = self._sandboxes.get(pod_sandbox_id)
        if s is None:
            raise cri.NotFound(f"an error occurred when try to find sandbox {pod_sandbox_id!r}: not found")
        return s

    async def pod_sandbox_status(self, pod_sandbox_id: str, verbose: bool = False) -> cri.PodSandboxStatusResponse:
        s = self._sandbox(pod_sandbox_id)
        return cri.PodSandboxStatusResponse(status=self._sandbox_status(s), timestamp=self._now())

    def _candidate_sandboxes(self, selector: dict[str, str]) -> list[_Sandbox]:
        uid = selector.get(cri.POD_UID_LABEL)
        if uid is not None:
            return [self._sandboxes[i] for i in self._by_uid.get(uid, ())]
        return list(self._sandboxes.values())

    async def list_pod_sandbox(self, filter: cri.PodSandboxFilter | None = None) -> list[cri.PodSandbox]:
        f = filter or cri.PodSandboxFilter()
        candidates = [self._sandboxes[f.id]] if f.id and f.id in self._sandboxes else (
            [] if f.id else self._candidate_sandboxes(f.label_selector))
        return [cri.PodSandbox(id=s.id, metadata=s.metadata, state=s.state, created_at=s.created_at,
                               labels=s.labels, annotations=s.annotations)
                for s in candidates
                if (f.state is None or s.state == f.state) and _label_match(s.labels, f.label_selector)]

    # -- containers ------------------------------------------------------------------------------
    async def create_container(self, pod_sandbox_id: str, config: cri.ContainerConfig,
                               sandbox_config: cri.PodSandboxConfig) -> str:
        sandbox = self._sandbox(pod_sandbox_id)
        if sandbox.state != PodSandboxState.SANDBOX_READY:
            raise cri.FailedPrecondition(f"sandbox {pod_sandbox_id} is not ready")
        image = self._find_image(config.image.image)
        if image is None:
            raise cri.NotFound(f'failed to get image "{config.image.image}": not found')
        cid = secrets.token_hex(32)
        name = podutil.normalize_image(config.image.user_specified_image or image.repo_tags[0])
        c = _Container(cid, pod_sandbox_id, config.metadata, name, image.repo_digests[0], image.id, config.labels,
                       config.annotations, SimLogs.path(sandbox.log_directory, config.log_path), self._now())
        self._containers[cid] = c
        sandbox.containers.append(cid)
        self._emit(cid, Ev.CONTAINER_CREATED_EVENT, sandbox)
        return cid

    def _container(self, container_id: str) -> _Container:
        c = self._containers.get(container_id)
        if c is None:
            raise cri.NotFound(f"an error occurred when try to find container {container_id!r}: not found")
        return c

    async def start_container(self, container_id: str) -> None:
        c = self._container(container_id)
        if c.state != ContainerState.CONTAINER_CREATED:
            raise cri.FailedPrecondition(f"container {container_id} is in {c.state.name} state, not created")
        sandbox = self._sandboxes[c.sandbox_id]
        c.state, c.started_at = ContainerState.CONTAINER_RUNNING, self._now()
        name = c.metadata.name
        ann = sandbox.annotations
        try:
            duration = behaviour.run_duration(
                ann, name, container_type=c.annotations.get(cri.CONTAINER_TYPE_ANNOTATION, cri.CONTAINER_TYPE_CONTAINER),
                restart_policy=ann.get(cri.POD_RESTART_POLICY_ANNOTATION, podutil.RESTART_ALWAYS))
            code = behaviour.exit_code(ann, name)
        except behaviour.BehaviourError as e:
            log.warning("pod %s/%s: %s", sandbox.metadata.namespace, sandbox.metadata.name, e)
            duration, code = None, 0
        if duration is not None:
            c.timer = self.timers.call_later(duration, lambda: self._exit(c, code))
        self.logs.started(container_id, path=c.log_path, annotations=ann, container=name,
                          attempt=c.metadata.attempt,
                          pod=f"{sandbox.metadata.namespace}/{sandbox.metadata.name}")
        self._emit(container_id, Ev.CONTAINER_STARTED_EVENT, sandbox)

    def _exit(self, c: _Container, code: int, *, emit: bool = True) -> None:
        if c.state != ContainerState.CONTAINER_RUNNING or c.id not in self._containers:
            return
        if c.timer is not None:
            c.timer.cancel()
            c.timer = None
        c.state, c.finished_at, c.exit_code = ContainerState.CONTAINER_EXITED, self._now(), code
        self.logs.stopped(c.id)
        c.reason = "Completed" if code == 0 else "Error"
        if emit:
            self._emit(c.id, Ev.CONTAINER_STOPPED_EVENT, self._sandboxes.get(c.sandbox_id))

    async def stop_container(self, container_id: str, timeout: int) -> None:
        c = self._containers.get(container_id)
        if c is None or c.state != ContainerState.CONTAINER_RUNNING:
            if c is not None and c.state == ContainerState.CONTAINER_CREATED:
                c.state, c.finished_at, c.exit_code, c.reason = ContainerState.CONTAINER_EXITED, self._now(), 0, ""
            return
        sandbox = self._sandboxes[c.sandbox_id]
        try:
            takes = behaviour.stop_duration(sandbox.annotations, c.metadata.name)
        except behaviour.BehaviourError:
            takes = 0.0
        if takes > timeout:
            if timeout > 0:
                await self.clock.sleep(timeout)
            self._exit(c, EXIT_SIGKILL)
            return
        if takes > 0:
            await self.clock.sleep(takes)
        self._exit(c, EXIT_SIGTERM)

    async def remove_container(self, container_id: str) -> None:
        c = self._containers.get(container_id)
        if c is None:
            return
        sandbox = self._sandboxes.get(c.sandbox_id)
        self._drop_container(container_id)
        if sandbox is not None and container_id in sandbox.containers:
            sandbox.containers.remove(container_id)
        self._emit(container_id, Ev.CONTAINER_DELETED_EVENT, sandbox)

    def _drop_container(self, container_id: str) -> None:
        self.logs.removed(container_id)
        c = self._containers.pop(container_id, None)
        if c is not None and c.timer is not None:
            c.timer.cancel()

    def _candidate_containers(self, f: cri.ContainerFilter) -> list[_Container]:
        if f.id:
            c = self._containers.get(f.id)
            return [c] if c is not None else []
        if f.pod_sandbox_id:
            s = self._sandboxes.get(f.pod_sandbox_id)
            return [self._containers[i] for i in s.containers] if s is not None else []
        uid = f.label_selector.get(cri.POD_UID_LABEL)
        if uid is not None:
            return [self._containers[i] for sid in self._by_uid.get(uid, ()) for i in self._sandboxes[sid].containers]
        return list(self._containers.values())

    async def list_containers(self, filter: cri.ContainerFilter | None = None) -> list[cri.Container]:
        f = filter or cri.ContainerFilter()
        return [cri.Container(id=c.id, pod_sandbox_id=c.sandbox_id, metadata=c.metadata,
                              image=cri.ImageSpec(image=c.image), image_ref=c.image_ref, state=c.state,
                              created_at=c.created_at, labels=c.labels, annotations=c.annotations, image_id=c.image_id)
                for c in self._candidate_containers(f)
                if (f.state is None or c.state == f.state) and _label_match(c.labels, f.label_selector)]

    def _container_status(self, c: _Container) -> cri.ContainerStatus:
        return cri.ContainerStatus(
            id=c.id, metadata=c.metadata, state=c.state, created_at=c.created_at, started_at=c.started_at,
            finished_at=c.finished_at, exit_code=c.exit_code, image=cri.ImageSpec(image=c.image),
            image_ref=c.image_ref, reason=c.reason, labels=c.labels, annotations=c.annotations,
            log_path=c.log_path, image_id=c.image_id)

    async def container_status(self, container_id: str, verbose: bool = False) -> cri.ContainerStatusResponse:
        return cri.ContainerStatusResponse(status=self._container_status(self._container(container_id)))

    async def exec_sync(self, container_id: str, cmd: list[str], timeout: int) -> cri.ExecSyncResponse:
        c = self._container(container_id)
        if c.state != ContainerState.CONTAINER_RUNNING:
            raise cri.FailedPrecondition(f"container {container_id} is not running")
        return cri.ExecSyncResponse(exit_code=0)

    # -- streaming ---------------------------------------------------------------------------------
    async def exec(self, container_id: str, cmd: list[str], *, tty: bool = False, stdin: bool = False,
                   stdout: bool = True, stderr: bool = True) -> str:
        raise cri.Unimplemented(NO_STREAMING)

    async def attach(self, container_id: str, *, stdin: bool = False, tty: bool = False, stdout: bool = True,
                     stderr: bool = True) -> str:
        raise cri.Unimplemented(NO_STREAMING)

    async def port_forward(self, pod_sandbox_id: str, port: list[int]) -> str:
        raise cri.Unimplemented(NO_STREAMING)

    # -- events ------------------------------------------------------------------------------------
    async def get_container_events(self) -> AsyncIterator[cri.ContainerEventResponse]:
        queue: asyncio.Queue[cri.ContainerEventResponse] = asyncio.Queue()
        self._subscribers.append(queue)
        try:
            while True:
                yield await queue.get()
        finally:
            self._subscribers.remove(queue)

    def _emit(self, container_id: str, kind: Ev, sandbox: _Sandbox | None) -> None:
        if not self._subscribers or sandbox is None:
            return
        statuses = [self._container_status(self._containers[i]) for i in sandbox.containers if i in self._containers]
        event = cri.ContainerEventResponse(container_id=container_id, container_event_type=kind,
                                           created_at=self._now(), pod_sandbox_status=self._sandbox_status(sandbox),
                                           containers_statuses=statuses)
        for q in self._subscribers:
            q.put_nowait(event)

    # -- stats (simulated numbers: sim/stats.py) -------------------------------------------------------
    def _stats(self, c: _Container) -> cri.ContainerStats:
        sandbox = self._sandboxes.get(c.sandbox_id)
        attrs = cri.ContainerAttributes(id=c.id, metadata=c.metadata, labels=c.labels, annotations=c.annotations)
        return simstats.container_stats(attrs, pod_annotations=sandbox.annotations if sandbox is not None else {},
                                        running=c.state == ContainerState.CONTAINER_RUNNING, started_at=c.started_at,
                                        now=self._now())

    async def container_stats(self, container_id: str) -> cri.ContainerStats:
        return self._stats(self._container(container_id))

    async def list_container_stats(self, filter: cri.ContainerStatsFilter | None = None) -> list[cri.ContainerStats]:
        f = filter or cri.ContainerStatsFilter()
        wanted = cri.ContainerFilter(id=f.id, pod_sandbox_id=f.pod_sandbox_id, label_selector=f.label_selector)
        return [self._stats(c) for c in self._candidate_containers(wanted) if _label_match(c.labels, f.label_selector)]

    def _pod_stats(self, s: _Sandbox) -> cri.PodSandboxStats:
        attrs = cri.PodSandboxAttributes(id=s.id, metadata=s.metadata, labels=s.labels, annotations=s.annotations)
        containers = [self._stats(self._containers[i]) for i in s.containers if i in self._containers]
        return simstats.sandbox_stats(attrs, containers, now=self._now())

    async def pod_sandbox_stats(self, pod_sandbox_id: str) -> cri.PodSandboxStats:
        return self._pod_stats(self._sandbox(pod_sandbox_id))

    async def list_pod_sandbox_stats(self, filter: cri.PodSandboxStatsFilter | None = None,
                                     ) -> list[cri.PodSandboxStats]:
        f = filter or cri.PodSandboxStatsFilter()
        sandboxes = await self.list_pod_sandbox(cri.PodSandboxFilter(id=f.id, label_selector=f.label_selector))
        return [self._pod_stats(self._sandboxes[s.id]) for s in sandboxes]

    async def image_fs_info(self) -> cri.ImageFsInfoResponse:
        layers = [self._stats(c) for c in self._containers.values()]
        return simstats.image_fs(list(self._images.values()), layers, now=self._now())

    # -- images ------------------------------------------------------------------------------------
    def _find_image(self, ref: str) -> cri.Image | None:
        if ref.startswith("sha256:"):
            return next((i for i in self._images.values() if i.id == ref), None)
        return self._images.get(podutil.normalize_image(ref))

    async def list_images(self, filter: cri.ImageSpec | None = None) -> list[cri.Image]:
        if filter is not None and filter.image:
            image = self._find_image(filter.image)
            return [image] if image is not None else []
        return list(self._images.values())

    async def image_status(self, image: cri.ImageSpec, verbose: bool = False) -> cri.ImageStatusResponse:
        return cri.ImageStatusResponse(image=self._find_image(image.image))

    async def pull_image(self, image: cri.ImageSpec, auth: cri.AuthConfig | None = None,
                         sandbox_config: cri.PodSandboxConfig | None = None) -> str:
        name = podutil.normalize_image(image.image)
        annotations = sandbox_config.annotations if sandbox_config is not None else {}
        if behaviour.pull_fails(annotations, image.user_specified_image or image.image):
            raise cri.CriError(f'failed to pull and unpack image "{name}": simulated failure '
                               f"(annotation {behaviour.PREFIX}{behaviour.PULL_FAIL})")
        existing = self._images.get(name)
        if existing is not None:
            return existing.id
        digest = _digest(name)
        repo = name.rsplit(":", 1)[0] if "@" not in name else name.split("@", 1)[0]
        pulled = cri.Image(id=f"sha256:{digest}", repo_tags=[name], repo_digests=[f"{repo}@sha256:{digest}"],
                           size=1_000_000 + int(digest[:8], 16) % 99_000_000, spec=cri.ImageSpec(image=name))
        self._images[name] = pulled
        return pulled.id

    async def remove_image(self, image: cri.ImageSpec) -> None:
        found = self._find_image(image.image)
        if found is not None:
            for tag in found.repo_tags:
                self._images.pop(tag, None)

    # -- for tests and the host --------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        running = sum(1 for c in self._containers.values() if c.state == ContainerState.CONTAINER_RUNNING)
        return {"sandboxes": len(self._sandboxes), "containers": len(self._containers), "running": running,
                "images": len(self._images), "ips": len(self.ipam)}
