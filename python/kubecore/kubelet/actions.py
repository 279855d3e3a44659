"""What a sync must do to a pod: upstream kuberuntime_manager's computePodActions, as a pure
function of the pod spec, the runtime's view of the pod and the probe results.

    actions = compute_pod_actions(pod, runtime_status, probes)
    actions.create_sandbox, actions.init_containers_to_start, actions.containers_to_start,
    actions.containers_to_kill, actions.kill_pod

The rules, in upstream's order:
1. Sandbox (PodSandboxChanged): none, more than one ready, the newest not ready, the wrong network
   namespace (hostNetwork changed) or no IP -> a new sandbox (attempt = newest attempt + 1) and
   everything in the pod is killed first. A pod whose containers ran and will not be restarted
   (restartPolicy Never, or OnFailure with all containers succeeded and initialisation done) gets
   no new sandbox. With a new sandbox the first init container starts (or, without init
   containers, every container that should run).
2. Init containers (computeInitContainerActions, with restartable "sidecar" init containers):
   walk them from the last to find how far initialisation got; a failed regular init container
   restarts (or, restartPolicy Never, kills the pod: it failed); the next one starts when the one
   before it succeeded (or, for a sidecar, is running and its startup probe passed). Until all
   are done, regular containers are not looked at.
3. Containers: a container that is not running and should be restarted
   (ShouldContainerBeRestarted: never after deletion started; Never -> no; OnFailure -> only after a
   non-zero exit) is started; a running one is killed and restarted when its definition changed
   (the hash annotation), its liveness probe failed, or its startup probe failed.
4. Nothing left running and nothing to start -> kill the pod (stop the sandbox).

`should_container_be_restarted` is also what the status generator uses to decide a container is
"waiting" (with the reason cache's reason) rather than "terminated".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from kubecore.kubelet import podutil
from kubecore.kubelet.cri import ContainerState, NamespaceMode, PodSandboxState
from kubecore.kubelet.runtime_status import ContainerView, PodRuntimeStatus

Obj = dict[str, Any]

REASON_LIVENESS = "LivenessProbe"
REASON_STARTUP = "StartupProbe"
REASON_UNKNOWN = "Unknown"
SUCCESS, FAILURE = "Success", "Failure"


class ProbeResults(Protocol):
    """The probe manager's latest results by container id (None: no result yet)."""

    def liveness(self, container_id: str) -> str | None: ...

    def startup(self, container_id: str) -> str | None: ...


class NoProbes:
    """Probe results for a pod without probes (and for tests)."""

    def liveness(self, container_id: str) -> str | None:
        return None

    def startup(self, container_id: str) -> str | None:
        return None


@dataclass(slots=True)
class KillInfo:
    name: str
    container: Obj
    message: str
    reason: str = ""


@dataclass(slots=True)
class PodActions:
    kill_pod: bool = False
    create_sandbox: bool = False
    sandbox_id: str = ""
    attempt: int = 0
    init_containers_to_start: list[int] = field(default_factory=list)
    containers_to_start: list[int] = field(default_factory=list)
    containers_to_kill: dict[str, KillInfo] = field(default_factory=dict)

    def is_noop(self) -> bool:
        return not (self.kill_pod or self.create_sandbox or self.init_containers_to_start
                    or self.containers_to_start or self.containers_to_kill)


def network_namespace_for_pod(pod: Obj) -> NamespaceMode:
    return NamespaceMode.NODE if podutil.is_host_network(pod) else NamespaceMode.POD


def pod_sandbox_changed(pod: Obj, status: PodRuntimeStatus) -> tuple[bool, int, str]:
    """(a new sandbox is needed, its attempt, the current sandbox id)."""
    if not status.sandboxes:
        return True, 0, ""
    newest = status.sandboxes[0]
    ready = sum(1 for s in status.sandboxes if s.state == PodSandboxState.SANDBOX_READY)
    attempt = newest.metadata.attempt
    if ready > 1 or newest.state != PodSandboxState.SANDBOX_READY:
        return True, attempt + 1, newest.id
    network = newest.linux.namespaces.options.network if newest.linux is not None else NamespaceMode.POD
    if network != network_namespace_for_pod(pod):
        return True, attempt + 1, ""
    if not podutil.is_host_network(pod) and newest.network is not None and not newest.network.ip:
        return True, attempt + 1, newest.id
    return False, attempt, newest.id


def should_container_be_restarted(container: Obj, pod: Obj, status: PodRuntimeStatus) -> bool:
    if podutil.deletion_timestamp(pod):
        return False
    cs = status.find(str(container.get("name")))
    if cs is None:
        return True
    if cs.state == ContainerState.CONTAINER_RUNNING:
        return False
    if cs.state in (ContainerState.CONTAINER_UNKNOWN, ContainerState.CONTAINER_CREATED):
        return True
    policy = podutil.restart_policy(pod)
    if policy == podutil.RESTART_NEVER:
        return False
    if policy == podutil.RESTART_ON_FAILURE and cs.exit_code == 0:
        return False
    return True


def container_succeeded(container: Obj, status: PodRuntimeStatus) -> bool:
    cs = status.find(str(container.get("name")))
    return cs is not None and cs.exited and cs.exit_code == 0


def is_init_container_failed(cs: ContainerView) -> bool:
    if cs.reason == "OOMKilled":
        return True
    if cs.state == ContainerState.CONTAINER_EXITED and cs.exit_code != 0:
        return True
    return cs.state == ContainerState.CONTAINER_UNKNOWN


def container_changed(container: Obj, cs: ContainerView) -> bool:
    return bool(cs.hash) and cs.hash != podutil.container_hash(container)


def _has_any_regular_container_created(pod: Obj, status: PodRuntimeStatus) -> bool:
    for c in podutil.containers(pod):
        cs = status.find(str(c.get("name")))
        if cs is not None and cs.state != ContainerState.CONTAINER_UNKNOWN:
            return True  # created, running or exited
    return False


def compute_pod_actions(pod: Obj, status: PodRuntimeStatus, probes: ProbeResults | None = None) -> PodActions:
    probes = probes or NoProbes()
    create, attempt, sandbox_id = pod_sandbox_changed(pod, status)
    actions = PodActions(kill_pod=create, create_sandbox=create, sandbox_id=sandbox_id, attempt=attempt)
    if create:
        return _actions_for_new_sandbox(pod, status, actions)
    initialized = _compute_init_container_actions(pod, status, actions, probes)
    if actions.kill_pod or not initialized:
        return actions
    keep = 0
    for idx, container in enumerate(podutil.containers(pod)):
        cs = status.find(str(container.get("name")))
        if cs is None or cs.state != ContainerState.CONTAINER_RUNNING:
            if should_container_be_restarted(container, pod, status):
                actions.containers_to_start.append(idx)
                if cs is not None and cs.state == ContainerState.CONTAINER_UNKNOWN:
                    actions.containers_to_kill[cs.id] = KillInfo(
                        cs.name, container, f"Container is in {cs.state.name} state, try killing it before restart",
                        REASON_UNKNOWN)
            continue
        restart = podutil.should_restart_on_failure(pod)
        name = cs.name
        if container_changed(container, cs):
            message, reason, restart = f"Container {name} definition changed", "", True
        elif probes.liveness(cs.id) == FAILURE:
            message, reason = f"Container {name} failed liveness probe", REASON_LIVENESS
        elif probes.startup(cs.id) == FAILURE:
            message, reason = f"Container {name} failed startup probe", REASON_STARTUP
        else:
            keep += 1
            continue
        if restart:
            message += ", will be restarted"
            actions.containers_to_start.append(idx)
        actions.containers_to_kill[cs.id] = KillInfo(name, container, message, reason)
    if keep == 0 and not actions.containers_to_start:
        actions.kill_pod = True
        actions.init_containers_to_start = []
    return actions


def _actions_for_new_sandbox(pod: Obj, status: PodRuntimeStatus, actions: PodActions) -> PodActions:
    if not podutil.should_restart_on_failure(pod) and actions.attempt != 0 and status.containers:
        actions.create_sandbox = False  # ran before and will not run again: just kill what is left
        return actions
    policy = podutil.restart_policy(pod)
    to_start = [idx for idx, c in enumerate(podutil.containers(pod))
                if not (policy == podutil.RESTART_ON_FAILURE and container_succeeded(c, status))]
    if not to_start and _has_any_regular_container_created(pod, status):
        actions.create_sandbox = False
        return actions
    if podutil.init_containers(pod):
        actions.init_containers_to_start = [0]
        return actions
    actions.containers_to_start = to_start
    return actions


def _pod_has_initialized(pod: Obj, status: PodRuntimeStatus) -> bool:
    """Any regular container created or running: the init containers ran at some point."""
    for c in podutil.containers(pod):
        cs = status.find(str(c.get("name")))
        if cs is not None and cs.state in (ContainerState.CONTAINER_CREATED, ContainerState.CONTAINER_RUNNING):
            return True
    return False


def _compute_init_container_actions(pod: Obj, status: PodRuntimeStatus, actions: PodActions,
                                    probes: ProbeResults) -> bool:
    """Upstream's computeInitContainerActions (see the module docstring, rule 2); returns whether
    the pod has initialized. Walks the init containers backwards: completed ones may have been
    removed from the runtime, so the last one seen tells how far initialisation got."""
    inits = podutil.init_containers(pod)
    if not inits:
        return True
    initialized = _pod_has_initialized(pod, status)
    previously = initialized
    restart_on_failure = podutil.should_restart_on_failure(pod)
    to_start: list[int] = []
    last = len(inits) - 1
    for i in range(last, -1, -1):
        container = inits[i]
        sidecar = podutil.is_restartable_init_container(container)
        cs = status.find(str(container.get("name")))
        if cs is None:
            if previously and sidecar:
                to_start.append(i)
            continue
        if previously and not sidecar:
            continue
        if cs.state == ContainerState.CONTAINER_CREATED:
            to_start.append(i)
        elif cs.state == ContainerState.CONTAINER_RUNNING:
            if sidecar:
                done = _sidecar_running(container, cs, i, actions, probes, to_start)
                if done:
                    if i == last:
                        initialized = True
                    elif not previously:
                        to_start.append(i + 1)
        elif cs.state == ContainerState.CONTAINER_EXITED:
            if sidecar:
                to_start.append(i)
            elif is_init_container_failed(cs):
                if not restart_on_failure:
                    actions.kill_pod = True
                    actions.init_containers_to_start = []
                    return False
                to_start.append(i)
            elif i == last:
                initialized = True
            else:
                to_start.append(i + 1)
        else:  # unknown
            if not sidecar and not restart_on_failure:
                actions.kill_pod = True
                actions.init_containers_to_start = []
                return False
            actions.containers_to_kill[cs.id] = KillInfo(
                cs.name, container, f"Init container is in {cs.state.name} state, try killing it before restart",
                REASON_UNKNOWN)
            to_start.append(i)
        previously = True
    if not previously:
        to_start.append(0)
    actions.init_containers_to_start = list(reversed(to_start))
    return initialized


def _sidecar_running(container: Obj, cs: ContainerView, i: int, actions: PodActions, probes: ProbeResults,
                     to_start: list[int]) -> bool:
    """A running restartable init container: whether it counts as initialized (started). Restarts
    it when its startup or liveness probe failed or its definition changed."""
    if container.get("startupProbe"):
        result = probes.startup(cs.id)
        if result is None:
            return False
        if result == FAILURE:
            actions.containers_to_kill[cs.id] = KillInfo(
                cs.name, container, f"Init container {cs.name} failed startup probe", REASON_STARTUP)
            to_start.append(i)
            return False
    if container_changed(container, cs):
        actions.containers_to_kill[cs.id] = KillInfo(
            cs.name, container, f"Init container {cs.name} definition changed", "")
        to_start.append(i)
    elif container.get("livenessProbe") and probes.liveness(cs.id) == FAILURE:
        actions.containers_to_kill[cs.id] = KillInfo(
            cs.name, container, f"Init container {cs.name} failed liveness probe", REASON_LIVENESS)
        to_start.append(i)
    return True
