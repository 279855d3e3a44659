"""The runtime's view of one pod (kubecontainer.PodStatus) and the cache the PLEG keeps of it.

`PodRuntimeStatus` is what the sync, the status generator and the probes read: the pod's sandboxes
and every container instance the runtime still has (newest first; a container restarted three
times may appear as its current instance plus the previous one), each as a `ContainerView` — the
CRI ContainerStatus reduced to what the kubelet uses, with the restart count and definition hash
read back from the annotations the kubelet wrote when it created the container.

`PodCache` maps pod uid -> the newest `PodRuntimeStatus` and the (clock) time it was read. The
PLEG writes it after every relist or runtime event; a sync that needs something newer than the
cache has (it just changed the pod itself) reads the runtime again (`RuntimeManager.get_pod_status`)
and stores the result.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kubecore.kubelet import cri
from kubecore.kubelet.cri import ContainerState, PodSandboxState


@dataclass(slots=True)
class ContainerView:
    """One container instance (kubecontainer.Status). Times are epoch seconds, 0 = unset."""

    id: str
    name: str
    state: ContainerState
    created_at: float = 0.0
    started_at: float = 0.0
    finished_at: float = 0.0
    exit_code: int = 0
    image: str = ""
    image_ref: str = ""
    reason: str = ""
    message: str = ""
    restart_count: int = 0
    hash: str = ""
    sandbox_id: str = ""

    @classmethod
    def from_cri(cls, s: cri.ContainerStatus, *, sandbox_id: str = "") -> ContainerView:
        ann = s.annotations
        try:
            restarts = int(ann.get(cri.CONTAINER_RESTART_COUNT_ANNOTATION, "0"))
        except ValueError:
            restarts = 0
        return cls(
            id=s.id, name=s.labels.get(cri.CONTAINER_NAME_LABEL) or s.metadata.name, state=s.state,
            created_at=cri.epoch_from_ns(s.created_at), started_at=cri.epoch_from_ns(s.started_at),
            finished_at=cri.epoch_from_ns(s.finished_at), exit_code=s.exit_code, image=s.image.image,
            image_ref=s.image_ref or s.image_id, reason=s.reason, message=s.message, restart_count=restarts,
            hash=ann.get(cri.CONTAINER_HASH_ANNOTATION, ""), sandbox_id=sandbox_id)

    @property
    def running(self) -> bool:
        return self.state == ContainerState.CONTAINER_RUNNING

    @property
    def exited(self) -> bool:
        return self.state == ContainerState.CONTAINER_EXITED


@dataclass(slots=True)
class PodRuntimeStatus:
    """A pod as the runtime has it. `sandboxes` and `containers` are newest first."""

    uid: str
    name: str = ""
    namespace: str = ""
    sandboxes: list[cri.PodSandboxStatus] = field(default_factory=list)
    containers: list[ContainerView] = field(default_factory=list)
    timestamp: float = 0.0

    @classmethod
    def build(cls, uid: str, *, name: str, namespace: str, sandboxes: list[cri.PodSandboxStatus],
              containers: list[ContainerView], timestamp: float) -> PodRuntimeStatus:
        # Newest first; the attempt breaks ties of equal creation times (a coarse or fake clock).
        sandboxes = sorted(sandboxes, key=lambda s: (s.created_at, s.metadata.attempt), reverse=True)
        containers = sorted(containers, key=lambda c: (c.created_at, c.restart_count), reverse=True)
        return cls(uid, name, namespace, sandboxes, containers, timestamp)

    @property
    def ips(self) -> list[str]:
        """The newest sandbox's IPs, when it is ready (upstream reads IPs only from that one)."""
        if not self.sandboxes:
            return []
        s = self.sandboxes[0]
        if s.state != PodSandboxState.SANDBOX_READY or s.network is None or not s.network.ip:
            return []
        return [s.network.ip, *(p.ip for p in s.network.additional_ips if p.ip)]

    def find(self, name: str) -> ContainerView | None:
        """The newest instance of container `name` (FindContainerStatusByName)."""
        for c in self.containers:
            if c.name == name:
                return c
        return None

    def find_exited(self, name: str) -> ContainerView | None:
        for c in self.containers:
            if c.name == name and c.exited:
                return c
        return None

    def running_containers(self) -> list[ContainerView]:
        return [c for c in self.containers if c.state in (ContainerState.CONTAINER_RUNNING,
                                                          ContainerState.CONTAINER_UNKNOWN)]

    def ready_sandboxes(self) -> list[cri.PodSandboxStatus]:
        return [s for s in self.sandboxes if s.state == PodSandboxState.SANDBOX_READY]

    def is_empty(self) -> bool:
        return not self.sandboxes and not self.containers

    def signature(self) -> tuple[tuple[str, int], ...]:
        """What the PLEG compares between relists: every sandbox's and container's id and state."""
        return (*((s.id, int(s.state) + 10) for s in self.sandboxes), *((c.id, int(c.state)) for c in self.containers))


class PodCache:
    """uid -> the newest PodRuntimeStatus read (see the module docstring)."""

    def __init__(self) -> None:
        self._pods: dict[str, PodRuntimeStatus] = {}

    def __len__(self) -> int:
        return len(self._pods)

    def __contains__(self, uid: object) -> bool:
        return uid in self._pods

    def get(self, uid: str) -> PodRuntimeStatus | None:
        return self._pods.get(uid)

    def set(self, status: PodRuntimeStatus) -> None:
        current = self._pods.get(status.uid)
        if current is not None and current.timestamp > status.timestamp:
            return  # never replace a newer read by an older one
        self._pods[status.uid] = status

    def delete(self, uid: str) -> None:
        self._pods.pop(uid, None)

    def uids(self) -> list[str]:
        return list(self._pods)
