"""The container runtime interface the kubelet is written against: CRI's messages and services
(k8s.io/cri-api runtime/v1 api.proto), as asyncio Protocols and msgspec Structs.

Everything above this module (pod workers, PLEG, probes, status) speaks only these names, so a
runtime is anything that implements `RuntimeService` + `ImageService`: the simulated runtime of
`kubecore.kubelet.sim` today, containerd over gRPC tomorrow, without a change above this line.

Shape rules, so a gRPC client is a thin translation:
- One method per CRI RPC, named as the RPC in snake_case; its parameters are the request
  message's fields (as the Go kubelet's `internalapi.RuntimeService` takes them), its result is
  the response message, or the one field the Go interface returns (`run_pod_sandbox` -> the
  sandbox id, `pull_image` -> the image ref).
- Field names are the proto's (`pod_sandbox_id`, `created_at`, ...). Times are int64 nanoseconds
  since the epoch, as on the wire; `0` means "not set".
- Enums are IntEnums with the proto's numbers.
- Messages are trees of plain data (no cycles), so their Structs are not tracked by the cyclic
  garbage collector (`gc=False`): a node holding thirty pods' sandboxes and containers adds
  nothing for a full collection to walk.
- Failures are `CriError` subclasses named after the gRPC status code a remote runtime would
  answer with (`NotFound`, `Unimplemented`, ...). The idempotent calls (Stop*/Remove*) never
  raise NotFound, as the proto requires.

Stats (`container_stats`, `list_container_stats`, `pod_sandbox_stats`, `list_pod_sandbox_stats`,
`image_fs_info`) carry the proto's UInt64Value wrappers as `int | None` (None: not reported).

Runtime events (`get_container_events`) follow the proto's GetContainerEvents stream: each event
carries the whole pod's sandbox status and container statuses, so a consumer needs no second call.
A runtime without events raises `Unimplemented` there; the PLEG then relists only.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from enum import IntEnum
from typing import Protocol

import msgspec

# -- enums ---------------------------------------------------------------------------------------


class PodSandboxState(IntEnum):
    SANDBOX_READY = 0
    SANDBOX_NOTREADY = 1


class ContainerState(IntEnum):
    CONTAINER_CREATED = 0
    CONTAINER_RUNNING = 1
    CONTAINER_EXITED = 2
    CONTAINER_UNKNOWN = 3


class ContainerEventType(IntEnum):
    CONTAINER_CREATED_EVENT = 0
    CONTAINER_STARTED_EVENT = 1
    CONTAINER_STOPPED_EVENT = 2
    CONTAINER_DELETED_EVENT = 3


class NamespaceMode(IntEnum):
    POD = 0
    CONTAINER = 1
    NODE = 2
    TARGET = 3


class Protocol_(IntEnum):
    """CRI's `Protocol` enum (renamed: `Protocol` is typing's)."""

    TCP = 0
    UDP = 1
    SCTP = 2


# -- errors --------------------------------------------------------------------------------------


class CriError(Exception):
    """A runtime call failed; `code` is the gRPC status code name a remote runtime would send."""

    code = "Unknown"


class NotFound(CriError):
    code = "NotFound"


class AlreadyExists(CriError):
    code = "AlreadyExists"


class InvalidArgument(CriError):
    code = "InvalidArgument"


class FailedPrecondition(CriError):
    code = "FailedPrecondition"


class DeadlineExceeded(CriError):
    code = "DeadlineExceeded"


class Unimplemented(CriError):
    code = "Unimplemented"


class Unavailable(CriError):
    code = "Unavailable"


# -- messages ------------------------------------------------------------------------------------

class VersionResponse(msgspec.Struct, kw_only=True, gc=False):
    version: str = ""
    runtime_name: str = ""
    runtime_version: str = ""
    runtime_api_version: str = ""


class DNSConfig(msgspec.Struct, kw_only=True, gc=False):
    servers: list[str] = msgspec.field(default_factory=list)
    searches: list[str] = msgspec.field(default_factory=list)
    options: list[str] = msgspec.field(default_factory=list)


class PortMapping(msgspec.Struct, kw_only=True, gc=False):
    protocol: Protocol_ = Protocol_.TCP
    container_port: int = 0
    host_port: int = 0
    host_ip: str = ""


class NamespaceOption(msgspec.Struct, kw_only=True, gc=False):
    network: NamespaceMode = NamespaceMode.POD
    pid: NamespaceMode = NamespaceMode.CONTAINER
    ipc: NamespaceMode = NamespaceMode.POD
    target_id: str = ""


class LinuxSandboxSecurityContext(msgspec.Struct, kw_only=True, gc=False):
    namespace_options: NamespaceOption = msgspec.field(default_factory=NamespaceOption)
    privileged: bool = False


class LinuxPodSandboxConfig(msgspec.Struct, kw_only=True, gc=False):
    cgroup_parent: str = ""
    security_context: LinuxSandboxSecurityContext = msgspec.field(default_factory=LinuxSandboxSecurityContext)
    sysctls: dict[str, str] = msgspec.field(default_factory=dict)


class PodSandboxMetadata(msgspec.Struct, kw_only=True, gc=False):
    name: str = ""
    uid: str = ""
    namespace: str = ""
    attempt: int = 0


class PodSandboxConfig(msgspec.Struct, kw_only=True, gc=False):
    metadata: PodSandboxMetadata = msgspec.field(default_factory=PodSandboxMetadata)
    hostname: str = ""
    log_directory: str = ""
    dns_config: DNSConfig | None = None
    port_mappings: list[PortMapping] = msgspec.field(default_factory=list)
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    annotations: dict[str, str] = msgspec.field(default_factory=dict)
    linux: LinuxPodSandboxConfig | None = None


class PodIP(msgspec.Struct, kw_only=True, gc=False):
    ip: str = ""


class PodSandboxNetworkStatus(msgspec.Struct, kw_only=True, gc=False):
    ip: str = ""
    additional_ips: list[PodIP] = msgspec.field(default_factory=list)


class Namespace(msgspec.Struct, kw_only=True, gc=False):
    options: NamespaceOption = msgspec.field(default_factory=NamespaceOption)


class LinuxPodSandboxStatus(msgspec.Struct, kw_only=True, gc=False):
    namespaces: Namespace = msgspec.field(default_factory=Namespace)


class PodSandboxStatus(msgspec.Struct, kw_only=True, gc=False):
    id: str = ""
    metadata: PodSandboxMetadata = msgspec.field(default_factory=PodSandboxMetadata)
    state: PodSandboxState = PodSandboxState.SANDBOX_READY
    created_at: int = 0
    network: PodSandboxNetworkStatus | None = None
    linux: LinuxPodSandboxStatus | None = None
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    annotations: dict[str, str] = msgspec.field(default_factory=dict)
    runtime_handler: str = ""


class PodSandbox(msgspec.Struct, kw_only=True, gc=False):
    id: str = ""
    metadata: PodSandboxMetadata = msgspec.field(default_factory=PodSandboxMetadata)
    state: PodSandboxState = PodSandboxState.SANDBOX_READY
    created_at: int = 0
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    annotations: dict[str, str] = msgspec.field(default_factory=dict)
    runtime_handler: str = ""


class PodSandboxFilter(msgspec.Struct, kw_only=True, gc=False):
    """All set fields must match (AND); `state` None means any state."""

    id: str = ""
    state: PodSandboxState | None = None
    label_selector: dict[str, str] = msgspec.field(default_factory=dict)


class ContainerMetadata(msgspec.Struct, kw_only=True, gc=False):
    name: str = ""
    attempt: int = 0


class ImageSpec(msgspec.Struct, kw_only=True, gc=False):
    image: str = ""
    annotations: dict[str, str] = msgspec.field(default_factory=dict)
    user_specified_image: str = ""


class KeyValue(msgspec.Struct, kw_only=True, gc=False):
    key: str = ""
    value: str = ""


class Mount(msgspec.Struct, kw_only=True, gc=False):
    container_path: str = ""
    host_path: str = ""
    readonly: bool = False


class LinuxContainerResources(msgspec.Struct, kw_only=True, gc=False):
    cpu_period: int = 0
    cpu_quota: int = 0
    cpu_shares: int = 0
    memory_limit_in_bytes: int = 0
    oom_score_adj: int = 0


class Capability(msgspec.Struct, kw_only=True, gc=False):
    add_capabilities: list[str] = msgspec.field(default_factory=list)
    drop_capabilities: list[str] = msgspec.field(default_factory=list)


class LinuxContainerSecurityContext(msgspec.Struct, kw_only=True, gc=False):
    """The part of the proto's security context a runtime needs to place and run the process;
    `run_as_user` / `run_as_group` None mean the image's."""

    capabilities: Capability | None = None
    namespace_options: NamespaceOption = msgspec.field(default_factory=NamespaceOption)
    privileged: bool = False
    run_as_user: int | None = None
    run_as_group: int | None = None
    readonly_rootfs: bool = False
    no_new_privs: bool = False


class LinuxContainerConfig(msgspec.Struct, kw_only=True, gc=False):
    resources: LinuxContainerResources | None = None
    security_context: LinuxContainerSecurityContext | None = None


class ContainerConfig(msgspec.Struct, kw_only=True, gc=False):
    metadata: ContainerMetadata = msgspec.field(default_factory=ContainerMetadata)
    image: ImageSpec = msgspec.field(default_factory=ImageSpec)
    command: list[str] = msgspec.field(default_factory=list)
    args: list[str] = msgspec.field(default_factory=list)
    working_dir: str = ""
    envs: list[KeyValue] = msgspec.field(default_factory=list)
    mounts: list[Mount] = msgspec.field(default_factory=list)
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    annotations: dict[str, str] = msgspec.field(default_factory=dict)
    log_path: str = ""
    stdin: bool = False
    stdin_once: bool = False
    tty: bool = False
    linux: LinuxContainerConfig | None = None


class Container(msgspec.Struct, kw_only=True, gc=False):
    id: str = ""
    pod_sandbox_id: str = ""
    metadata: ContainerMetadata = msgspec.field(default_factory=ContainerMetadata)
    image: ImageSpec = msgspec.field(default_factory=ImageSpec)
    image_ref: str = ""
    state: ContainerState = ContainerState.CONTAINER_CREATED
    created_at: int = 0
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    annotations: dict[str, str] = msgspec.field(default_factory=dict)
    image_id: str = ""


class ContainerFilter(msgspec.Struct, kw_only=True, gc=False):
    id: str = ""
    state: ContainerState | None = None
    pod_sandbox_id: str = ""
    label_selector: dict[str, str] = msgspec.field(default_factory=dict)


class ContainerStatus(msgspec.Struct, kw_only=True, gc=False):
    id: str = ""
    metadata: ContainerMetadata = msgspec.field(default_factory=ContainerMetadata)
    state: ContainerState = ContainerState.CONTAINER_CREATED
    created_at: int = 0
    started_at: int = 0
    finished_at: int = 0
    exit_code: int = 0
    image: ImageSpec = msgspec.field(default_factory=ImageSpec)
    image_ref: str = ""
    reason: str = ""
    message: str = ""
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    annotations: dict[str, str] = msgspec.field(default_factory=dict)
    mounts: list[Mount] = msgspec.field(default_factory=list)
    log_path: str = ""
    image_id: str = ""


class PodSandboxStatusResponse(msgspec.Struct, kw_only=True, gc=False):
    status: PodSandboxStatus
    info: dict[str, str] = msgspec.field(default_factory=dict)
    containers_statuses: list[ContainerStatus] = msgspec.field(default_factory=list)
    timestamp: int = 0


class ContainerStatusResponse(msgspec.Struct, kw_only=True, gc=False):
    status: ContainerStatus
    info: dict[str, str] = msgspec.field(default_factory=dict)


class ExecSyncResponse(msgspec.Struct, kw_only=True, gc=False):
    stdout: bytes = b""
    stderr: bytes = b""
    exit_code: int = 0


class AuthConfig(msgspec.Struct, kw_only=True, gc=False):
    username: str = ""
    password: str = ""
    auth: str = ""
    server_address: str = ""
    identity_token: str = ""
    registry_token: str = ""


class Image(msgspec.Struct, kw_only=True, gc=False):
    id: str = ""
    repo_tags: list[str] = msgspec.field(default_factory=list)
    repo_digests: list[str] = msgspec.field(default_factory=list)
    size: int = 0
    username: str = ""
    spec: ImageSpec | None = None
    pinned: bool = False


class ImageStatusResponse(msgspec.Struct, kw_only=True, gc=False):
    image: Image | None = None
    """None when the image is not present (the proto's nil)."""
    info: dict[str, str] = msgspec.field(default_factory=dict)


class RuntimeCondition(msgspec.Struct, kw_only=True, gc=False):
    type: str = ""
    status: bool = False
    reason: str = ""
    message: str = ""


class RuntimeStatus(msgspec.Struct, kw_only=True, gc=False):
    conditions: list[RuntimeCondition] = msgspec.field(default_factory=list)


class StatusResponse(msgspec.Struct, kw_only=True, gc=False):
    status: RuntimeStatus = msgspec.field(default_factory=RuntimeStatus)
    info: dict[str, str] = msgspec.field(default_factory=dict)


class NetworkConfig(msgspec.Struct, kw_only=True, gc=False):
    pod_cidr: str = ""


class RuntimeConfig(msgspec.Struct, kw_only=True, gc=False):
    network_config: NetworkConfig = msgspec.field(default_factory=NetworkConfig)


class ContainerEventResponse(msgspec.Struct, kw_only=True, gc=False):
    container_id: str = ""
    container_event_type: ContainerEventType = ContainerEventType.CONTAINER_CREATED_EVENT
    created_at: int = 0
    pod_sandbox_status: PodSandboxStatus | None = None
    containers_statuses: list[ContainerStatus] = msgspec.field(default_factory=list)


# -- stats (ContainerStats, ListContainerStats, PodSandboxStats, ListPodSandboxStats, ImageFsInfo) --
# The proto's UInt64Value wrappers are `int | None` here: None is "not reported", as a nil wrapper.


class ContainerAttributes(msgspec.Struct, kw_only=True, gc=False):
    id: str = ""
    metadata: ContainerMetadata = msgspec.field(default_factory=ContainerMetadata)
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    annotations: dict[str, str] = msgspec.field(default_factory=dict)


class CpuUsage(msgspec.Struct, kw_only=True, gc=False):
    timestamp: int = 0
    usage_core_nano_seconds: int | None = None
    """Cumulative CPU time since the container started."""
    usage_nano_cores: int | None = None
    """The rate over the runtime's last sampling window (nano-cores: 1e9 is one core busy)."""


class MemoryUsage(msgspec.Struct, kw_only=True, gc=False):
    timestamp: int = 0
    working_set_bytes: int | None = None
    """usage minus inactive file pages: what eviction compares against."""
    available_bytes: int | None = None
    usage_bytes: int | None = None
    rss_bytes: int | None = None
    page_faults: int | None = None
    major_page_faults: int | None = None


class FilesystemIdentifier(msgspec.Struct, kw_only=True, gc=False):
    mountpoint: str = ""


class FilesystemUsage(msgspec.Struct, kw_only=True, gc=False):
    timestamp: int = 0
    fs_id: FilesystemIdentifier | None = None
    used_bytes: int | None = None
    inodes_used: int | None = None


class ContainerStats(msgspec.Struct, kw_only=True, gc=False):
    attributes: ContainerAttributes = msgspec.field(default_factory=ContainerAttributes)
    cpu: CpuUsage | None = None
    memory: MemoryUsage | None = None
    writable_layer: FilesystemUsage | None = None


class ContainerStatsFilter(msgspec.Struct, kw_only=True, gc=False):
    id: str = ""
    pod_sandbox_id: str = ""
    label_selector: dict[str, str] = msgspec.field(default_factory=dict)


class PodSandboxAttributes(msgspec.Struct, kw_only=True, gc=False):
    id: str = ""
    metadata: PodSandboxMetadata = msgspec.field(default_factory=PodSandboxMetadata)
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    annotations: dict[str, str] = msgspec.field(default_factory=dict)


class NetworkInterfaceUsage(msgspec.Struct, kw_only=True, gc=False):
    name: str = ""
    rx_bytes: int | None = None
    rx_errors: int | None = None
    tx_bytes: int | None = None
    tx_errors: int | None = None


class NetworkUsage(msgspec.Struct, kw_only=True, gc=False):
    timestamp: int = 0
    default_interface: NetworkInterfaceUsage | None = None
    interfaces: list[NetworkInterfaceUsage] = msgspec.field(default_factory=list)


class ProcessUsage(msgspec.Struct, kw_only=True, gc=False):
    timestamp: int = 0
    process_count: int | None = None


class LinuxPodSandboxStats(msgspec.Struct, kw_only=True, gc=False):
    cpu: CpuUsage | None = None
    memory: MemoryUsage | None = None
    network: NetworkUsage | None = None
    process: ProcessUsage | None = None
    containers: list[ContainerStats] = msgspec.field(default_factory=list)


class PodSandboxStats(msgspec.Struct, kw_only=True, gc=False):
    attributes: PodSandboxAttributes = msgspec.field(default_factory=PodSandboxAttributes)
    linux: LinuxPodSandboxStats | None = None


class PodSandboxStatsFilter(msgspec.Struct, kw_only=True, gc=False):
    id: str = ""
    label_selector: dict[str, str] = msgspec.field(default_factory=dict)


class ImageFsInfoResponse(msgspec.Struct, kw_only=True, gc=False):
    image_filesystems: list[FilesystemUsage] = msgspec.field(default_factory=list)
    container_filesystems: list[FilesystemUsage] = msgspec.field(default_factory=list)
    """Empty when containers' writable layers live on the image file system (no split)."""


RUNTIME_READY = "RuntimeReady"
NETWORK_READY = "NetworkReady"
"""The two required runtime conditions (RuntimeCondition.type)."""


# -- services ------------------------------------------------------------------------------------


class RuntimeService(Protocol):
    """CRI's RuntimeService (the calls the kubelet makes)."""

    async def version(self, api_version: str = "v1") -> VersionResponse: ...

    async def status(self, verbose: bool = False) -> StatusResponse: ...

    async def update_runtime_config(self, runtime_config: RuntimeConfig) -> None:
        """UpdateRuntimeConfig: the kubelet passes the node's pod CIDR once it is known."""
        ...

    async def run_pod_sandbox(self, config: PodSandboxConfig, runtime_handler: str = "") -> str: ...

    async def stop_pod_sandbox(self, pod_sandbox_id: str) -> None: ...

    async def remove_pod_sandbox(self, pod_sandbox_id: str) -> None: ...

    async def pod_sandbox_status(self, pod_sandbox_id: str, verbose: bool = False) -> PodSandboxStatusResponse: ...

    async def list_pod_sandbox(self, filter: PodSandboxFilter | None = None) -> list[PodSandbox]: ...

    async def create_container(self, pod_sandbox_id: str, config: ContainerConfig,
                               sandbox_config: PodSandboxConfig) -> str: ...

    async def start_container(self, container_id: str) -> None: ...

    async def stop_container(self, container_id: str, timeout: int) -> None:
        """Stop within `timeout` seconds (SIGTERM, then SIGKILL at the deadline); 0 kills at once."""
        ...

    async def remove_container(self, container_id: str) -> None: ...

    async def list_containers(self, filter: ContainerFilter | None = None) -> list[Container]: ...

    async def container_status(self, container_id: str, verbose: bool = False) -> ContainerStatusResponse: ...

    async def exec_sync(self, container_id: str, cmd: list[str], timeout: int) -> ExecSyncResponse:
        """Run `cmd` in the container; `timeout` seconds (0: none) -> DeadlineExceeded."""
        ...

    def get_container_events(self) -> AsyncIterator[ContainerEventResponse]:
        """The GetContainerEvents stream; raises Unimplemented when the runtime has none."""
        ...

    async def container_stats(self, container_id: str) -> ContainerStats: ...

    async def list_container_stats(self, filter: ContainerStatsFilter | None = None) -> list[ContainerStats]: ...

    async def pod_sandbox_stats(self, pod_sandbox_id: str) -> PodSandboxStats:
        """Unimplemented on runtimes without sandbox stats (containerd before 1.7 on some hosts)."""
        ...

    async def list_pod_sandbox_stats(self, filter: PodSandboxStatsFilter | None = None) -> list[PodSandboxStats]: ...

    # Streaming (Exec, Attach, PortForward): the runtime answers with the URL of its streaming
    # server, to which the kubelet passes the client's upgraded connection (SPDY or websocket).
    async def exec(self, container_id: str, cmd: list[str], *, tty: bool = False, stdin: bool = False,
                   stdout: bool = True, stderr: bool = True) -> str:
        """ExecRequest -> ExecResponse.url; runtimes without a streaming server raise Unimplemented."""
        ...

    async def attach(self, container_id: str, *, stdin: bool = False, tty: bool = False, stdout: bool = True,
                     stderr: bool = True) -> str:
        """AttachRequest -> AttachResponse.url."""
        ...

    async def port_forward(self, pod_sandbox_id: str, port: list[int]) -> str:
        """PortForwardRequest -> PortForwardResponse.url."""
        ...


class ImageService(Protocol):
    """CRI's ImageService."""

    async def list_images(self, filter: ImageSpec | None = None) -> list[Image]: ...

    async def image_status(self, image: ImageSpec, verbose: bool = False) -> ImageStatusResponse: ...

    async def pull_image(self, image: ImageSpec, auth: AuthConfig | None = None,
                         sandbox_config: PodSandboxConfig | None = None) -> str: ...

    async def remove_image(self, image: ImageSpec) -> None: ...

    async def image_fs_info(self) -> ImageFsInfoResponse:
        """ImageFsInfo: usage of the file system(s) holding images (and writable layers)."""
        ...


class Runtime(RuntimeService, ImageService, Protocol):
    """Both services from one endpoint (containerd serves both on one socket)."""


# -- the labels and annotations the kubelet puts on sandboxes and containers (kuberuntime/labels.go)

POD_NAME_LABEL = "io.kubernetes.pod.name"
POD_NAMESPACE_LABEL = "io.kubernetes.pod.namespace"
POD_UID_LABEL = "io.kubernetes.pod.uid"
CONTAINER_NAME_LABEL = "io.kubernetes.container.name"
CONTAINER_TYPE_LABEL = "io.kubernetes.container.type"
CONTAINER_HASH_ANNOTATION = "io.kubernetes.container.hash"
CONTAINER_RESTART_COUNT_ANNOTATION = "io.kubernetes.container.restartCount"
CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION = "io.kubernetes.container.terminationMessagePath"
CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION = "io.kubernetes.container.terminationMessagePolicy"
POD_TERMINATION_GRACE_PERIOD_ANNOTATION = "io.kubernetes.pod.terminationGracePeriod"
# kubecore's kubelet adds these two as well; runtimes may ignore them (CRI annotations are opaque).
# A simulated runtime needs them to decide how a container behaves without a process.
POD_RESTART_POLICY_ANNOTATION = "kubecore.io/pod-restart-policy"
CONTAINER_TYPE_ANNOTATION = "kubecore.io/container-type"
CONTAINER_TYPE_INIT, CONTAINER_TYPE_SIDECAR, CONTAINER_TYPE_CONTAINER = "init", "sidecar", "container"


def ns_from_epoch(t: float) -> int:
    """Epoch seconds -> the proto's int64 nanoseconds."""
    return int(t * 1e9)


def epoch_from_ns(ns: int) -> float:
    return ns / 1e9
