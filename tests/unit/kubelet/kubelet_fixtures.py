"""Builders for the kubelet's unit tests: pods as the API serves them, runtime views of a pod, a
simulated node wired without an API server. Times are offsets from FAKE_EPOCH."""

from __future__ import annotations

import itertools
from typing import Any

from kubecore.client.clock import FAKE_EPOCH, FakeClock
from kubecore.kubelet import cri
from kubecore.kubelet.cri import ContainerState, PodSandboxState
from kubecore.kubelet.objects import ObjectNotFound
from kubecore.kubelet.runtime_manager import RuntimeManager
from kubecore.kubelet.runtime_status import ContainerView, PodRuntimeStatus
from kubecore.kubelet.sim.behaviour import SimHandlers
from kubecore.kubelet.sim.runtime import SimRuntime
from kubecore.kubelet.timers import Timers

Obj = dict[str, Any]
NOW = FAKE_EPOCH
UID = "pod-uid-1"
_ids = itertools.count(1)


def container(name: str = "app", image: str = "busybox:1.36", **extra: Any) -> Obj:
    return {"name": name, "image": image, **extra}


def make_pod(name: str = "web", *, containers: list[Obj] | None = None, init: list[Obj] | None = None,
             restart_policy: str = "Always", annotations: dict[str, str] | None = None, uid: str = UID,
             deleting: bool = False, grace: int = 30, status: Obj | None = None, generation: int = 1) -> Obj:
    meta: Obj = {"name": name, "namespace": "default", "uid": uid, "generation": generation,
                 "resourceVersion": "7", "annotations": dict(annotations or {})}
    if deleting:
        meta["deletionTimestamp"] = "2024-01-02T03:05:05Z"
        meta["deletionGracePeriodSeconds"] = grace
    spec: Obj = {"nodeName": "node-1", "restartPolicy": restart_policy, "terminationGracePeriodSeconds": grace,
                 "containers": containers if containers is not None else [container()]}
    if init:
        spec["initContainers"] = init
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status or {}}


def view(name: str, state: ContainerState, *, exit_code: int = 0, created: float = 0.0, started: float = 0.0,
         finished: float = 0.0, restarts: int = 0, cid: str | None = None, reason: str = "",
         hash_: str = "") -> ContainerView:
    return ContainerView(id=cid or f"c{next(_ids)}", name=name, state=state, created_at=NOW + created,
                         started_at=NOW + started if started or state != ContainerState.CONTAINER_CREATED else 0.0,
                         finished_at=NOW + finished if state == ContainerState.CONTAINER_EXITED else 0.0,
                         exit_code=exit_code, image="docker.io/library/busybox:1.36",
                         image_ref="docker.io/library/busybox@sha256:abc", reason=reason, restart_count=restarts,
                         hash=hash_)


def running(name: str = "app", **kw: Any) -> ContainerView:
    return view(name, ContainerState.CONTAINER_RUNNING, **kw)


def exited(name: str = "app", code: int = 0, **kw: Any) -> ContainerView:
    return view(name, ContainerState.CONTAINER_EXITED, exit_code=code,
                reason=kw.pop("reason", "Completed" if code == 0 else "Error"), **kw)


def sandbox(*, ready: bool = True, ip: str = "10.128.0.2", attempt: int = 0, created: float = 0.0,
            sid: str = "s1") -> cri.PodSandboxStatus:
    return cri.PodSandboxStatus(
        id=sid, metadata=cri.PodSandboxMetadata(name="web", uid=UID, namespace="default", attempt=attempt),
        state=PodSandboxState.SANDBOX_READY if ready else PodSandboxState.SANDBOX_NOTREADY,
        created_at=cri.ns_from_epoch(NOW + created), network=cri.PodSandboxNetworkStatus(ip=ip if ready else ""),
        linux=cri.LinuxPodSandboxStatus())


def runtime_status(*containers: ContainerView, sandboxes: list[cri.PodSandboxStatus] | None = None) -> PodRuntimeStatus:
    return PodRuntimeStatus.build(UID, name="web", namespace="default",
                                  sandboxes=[sandbox()] if sandboxes is None else sandboxes,
                                  containers=list(containers), timestamp=NOW)


class Events:
    """A record function that keeps (type, reason, message) for assertions."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str, str]] = []

    def __call__(self, ref: Obj, event_type: str, reason: str, message: str) -> None:
        self.items.append((event_type, reason, message))

    def reasons(self) -> list[str]:
        return [r for _, r, _ in self.items]


class SimNode:
    """A SimRuntime and a RuntimeManager on a FakeClock, without an API server."""

    def __init__(self) -> None:
        self.clock = FakeClock()
        self.timers = Timers(self.clock)
        self.runtime = SimRuntime(clock=self.clock, timers=self.timers, pod_cidr="10.128.0.0/24")
        self.events = Events()
        self.manager = RuntimeManager(self.runtime, clock=self.clock, record=self.events,
                                      handlers=SimHandlers(self.runtime, clock=self.clock), runtime_name="sim",
                                      node_name="node-1", host_ips=["172.16.0.1"])

    async def status(self, uid: str = UID) -> PodRuntimeStatus:
        return await self.manager.get_pod_status(uid)


class FakeObjects:
    """ConfigMaps and Secrets by (kind, namespace, name); counts reads."""

    def __init__(self, objects: dict[tuple[str, str], Obj] | None = None) -> None:
        self.objects = objects or {}
        self.reads: list[tuple[str, str, str]] = []

    async def get(self, kind: str, namespace: str, name: str) -> Obj:
        self.reads.append((kind, namespace, name))
        obj = self.objects.get((kind, name))
        if obj is None:
            raise ObjectNotFound(kind, name)
        return obj
