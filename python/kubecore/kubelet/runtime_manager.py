"""The kubelet's side of the runtime (upstream kuberuntime_manager.go and kuberuntime_container.go):
read a pod's state from CRI, and make it match the spec — SyncPod, KillPod, killContainer.

`sync_pod(pod, runtime_status, probes)` performs `compute_pod_actions` in upstream's order:
1. kill the pod when its sandbox must be replaced (then forget its init containers), else kill
   the containers the actions name ("Killing" events with upstream's messages);
2. create the sandbox if needed ("SandboxChanged" event when one is replaced; a failure is
   "FailedCreatePodSandBox");
3. start init containers, then containers. Starting one: crash-loop back-off first (a container
   whose last instance exited may restart only `Backoff` seconds after that exit: else it fails
   with "CrashLoopBackOff", "back-off 20s restarting failed container=web pod=web_ns(uid)"), then
   pruning (only the newest dead instance stays: what the container garbage collector keeps with
   maxPerPodContainer 1, so status can show it as lastState and a crash loop does not grow the
   runtime), then the image (`ImageManager`), CreateContainer ("Created"), StartContainer
   ("Started"), and the postStart hook (on failure the container is killed: "PostStartHookError").
The outcome (`SyncResult`) lists each failure with the reason the status shows, records it in
the reason cache (a start that succeeds clears it), and says when a back-off ends so the pod
worker can come back exactly then.

Images (`ImageManager`, upstream kuberuntime/images imageManager.EnsureImageExists), honouring
imagePullPolicy:
- The image is looked up with CRI ImageStatus; present -> its id is the image ref.
- Policy: Always pulls every time, IfNotPresent pulls when absent, Never never pulls (absent ->
  `ErrImageNeverPull`, event "Container image \"x\" is not present with pull policy of Never").
  An empty policy is the API default (Always for ":latest" or no tag, else IfNotPresent).
- A failed pull steps a per (pod uid, image) back-off (10 s doubling to 5 min, the kubelet's
  image back-off) and fails the start with `ErrImagePull`; until the back-off has passed, further
  attempts fail at once with `ImagePullBackOff` ("Back-off pulling image \"x\"") without pulling.
- Events as upstream: Pulling, Pulled ("Successfully pulled image ... in 12ms (12ms including
  waiting). Image size: N bytes." or "Container image ... already present on machine"), Failed,
  BackOff, ErrImageNeverPull.

`kill_pod` stops every running container in parallel (preStop hook first, within the grace
period; then CRI StopContainer with the remaining time, at least 2 s unless a grace override is
given, as upstream), then stops every sandbox. `remove_pod` deletes what the runtime still has
of a pod that is gone from the API (the garbage collector's job upstream).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubecore.api.gotime import format_seconds
from kubecore.client.clock import Clock
from kubecore.kubelet import cri, downward, podutil, runtime_config
from kubecore.kubelet.actions import KillInfo, PodActions, ProbeResults, compute_pod_actions
from kubecore.kubelet.backoff import Backoff, ReasonCache
from kubecore.kubelet.envvars import EnvContext, EnvError, make_env
from kubecore.kubelet.securitycontext import SecurityContextError
from kubecore.kubelet.handlers import Handlers, Target
from kubecore.kubelet.objects import NoObjects
from kubecore.kubelet.runtime_status import ContainerView, PodRuntimeStatus
from kubecore.kubelet.volumes import MountError, VolumeManager

log = logging.getLogger(__name__)
Obj = dict[str, Any]
Record = Callable[[Obj, str, str, str], None]
"""record(involved object reference, "Normal"|"Warning", reason, message): how events are written."""

CRASH_LOOP_BACKOFF = "CrashLoopBackOff"
CREATE_CONTAINER_ERROR = "CreateContainerError"
CREATE_CONTAINER_CONFIG_ERROR = "CreateContainerConfigError"
RUN_CONTAINER_ERROR = "RunContainerError"
POST_START_HOOK_ERROR = "PostStartHookError"
CREATE_SANDBOX_ERROR = "CreatePodSandboxError"
WORKER_BACKOFF_PERIOD = 10.0
"""How soon a pod whose sync failed for another reason is tried again (podWorkers' backOffPeriod)."""


@dataclass(slots=True)
class SyncFailure:
    container: str
    reason: str
    message: str


@dataclass(slots=True)
class SyncResult:
    failures: list[SyncFailure] = field(default_factory=list)
    changed: bool = False
    """The sync created, started or stopped something (the runtime state moved)."""
    retry_after: float | None = None
    """Seconds until a back-off ends and the pod should be synced again (None: no need)."""

    def fail(self, container: str, reason: str, message: str, *, retry_after: float | None = None) -> None:
        self.failures.append(SyncFailure(container, reason, message))
        if retry_after is not None:
            self.retry_after = retry_after if self.retry_after is None else min(self.retry_after, retry_after)


ERR_IMAGE_PULL = "ErrImagePull"
IMAGE_PULL_BACKOFF = "ImagePullBackOff"
ERR_IMAGE_NEVER_PULL = "ErrImageNeverPull"
INVALID_IMAGE_NAME = "InvalidImageName"


class ImagePullError(Exception):
    """The image is not available; `reason` is the container's waiting reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class ImageManager:
    """EnsureImageExists over a CRI ImageService (see the module docstring)."""

    def __init__(self, images: cri.ImageService, *, clock: Clock, record: Record,
                 backoff: Backoff | None = None) -> None:
        self.images = images
        self.clock = clock
        self.record = record
        self.backoff = backoff or Backoff(clock=clock)
        self.pulls = 0

    async def ensure_image_exists(self, pod: Obj, container: Obj, *, sandbox_config: cri.PodSandboxConfig | None,
                                  init: bool = False) -> str:
        """The image ref to create the container from, or ImagePullError."""
        image = str(container.get("image") or "")
        ref = podutil.container_ref(pod, str(container.get("name")), init=init)
        if not image:
            raise ImagePullError(INVALID_IMAGE_NAME, "Failed to apply default image tag \"\": couldn't parse image "
                                                     "name \"\": invalid reference format")
        spec = cri.ImageSpec(image=image, annotations={}, user_specified_image=image)
        present = (await self.images.image_status(spec)).image
        policy = podutil.image_pull_policy(container)
        should_pull = policy == podutil.PULL_ALWAYS or (policy == podutil.PULL_IF_NOT_PRESENT and present is None)
        if not should_pull:
            if present is not None:
                self.record(ref, "Normal", "Pulled", f'Container image "{image}" already present on machine')
                return present.id
            msg = f'Container image "{image}" is not present with pull policy of Never'
            self.record(ref, "Warning", ERR_IMAGE_NEVER_PULL, msg)
            raise ImagePullError(ERR_IMAGE_NEVER_PULL, msg)
        key = f"{podutil.uid_of(pod)}_{image}"
        now = self.clock.now()
        if self.backoff.is_in_backoff_since_update(key, now):
            msg = f'Back-off pulling image "{image}"'
            self.record(ref, "Normal", "BackOff", msg)
            raise ImagePullError(IMAGE_PULL_BACKOFF, msg)
        self.record(ref, "Normal", "Pulling", f'Pulling image "{image}"')
        self.pulls += 1
        try:
            image_ref = await self.images.pull_image(spec, None, sandbox_config)
        except cri.CriError as e:
            self.record(ref, "Warning", "Failed", f'Failed to pull image "{image}": {e}')
            self.backoff.next(key, self.clock.now())
            raise ImagePullError(ERR_IMAGE_PULL, str(e)) from e
        took = format_seconds(self.clock.now() - now, truncate_to=1e-3)
        status = await self.images.image_status(spec)
        size = status.image.size if status.image is not None else 0
        self.record(ref, "Normal", "Pulled",
                    f'Successfully pulled image "{image}" in {took} ({took} including waiting). Image size: {size} bytes.')
        return image_ref

    def retry_after(self, pod: Obj, image: str) -> float:
        """Seconds until a pull of `image` for `pod` may be tried again (0: now)."""
        return self.backoff.remaining_since_update(f"{podutil.uid_of(pod)}_{image}")

    def forget_pod(self, uid: str) -> None:
        self.backoff.forget_prefix(f"{uid}_")


class RuntimeManager:
    """One node's runtime operations (see the module docstring)."""

    def __init__(self, runtime: cri.Runtime, *, clock: Clock, record: Record, handlers: Handlers,
                 runtime_name: str, node_name: str, host_ips: list[str], reasons: ReasonCache | None = None,
                 backoff: Backoff | None = None, images: ImageManager | None = None,
                 env: EnvContext | None = None, volumes: VolumeManager | None = None) -> None:
        self.runtime = runtime
        self.clock = clock
        self.record = record
        self.handlers = handlers
        self.runtime_name = runtime_name
        self.node_name = node_name
        self.host_ips = host_ips
        self.reasons = reasons or ReasonCache()
        self.backoff = backoff or Backoff(clock=clock)
        self.images = images or ImageManager(runtime, clock=clock, record=record)
        self.env = env or EnvContext(objects=NoObjects(), node_name=node_name, host_ips=host_ips, allocatable={},
                                     record=record)
        self.volumes = volumes

    # -- reading ---------------------------------------------------------------------------------
    async def get_pod_status(self, uid: str, *, name: str = "", namespace: str = "") -> PodRuntimeStatus:
        """GetPodStatus: the pod's sandboxes and containers as the runtime has them now."""
        t = self.clock.now()
        selector = {cri.POD_UID_LABEL: uid}
        sandboxes = await self.runtime.list_pod_sandbox(cri.PodSandboxFilter(label_selector=selector))
        sandbox_statuses: list[cri.PodSandboxStatus] = []
        for s in sandboxes:
            try:
                sandbox_statuses.append((await self.runtime.pod_sandbox_status(s.id)).status)
            except cri.NotFound:
                continue
        views: list[ContainerView] = []
        for c in await self.runtime.list_containers(cri.ContainerFilter(label_selector=selector)):
            try:
                status = (await self.runtime.container_status(c.id)).status
            except cri.NotFound:
                continue
            views.append(ContainerView.from_cri(status, sandbox_id=c.pod_sandbox_id))
        if sandbox_statuses and not name:
            name, namespace = sandbox_statuses[0].metadata.name, sandbox_statuses[0].metadata.namespace
        return PodRuntimeStatus.build(uid, name=name, namespace=namespace, sandboxes=sandbox_statuses,
                                      containers=views, timestamp=t)

    # -- SyncPod -----------------------------------------------------------------------------------
    async def sync_pod(self, pod: Obj, rs: PodRuntimeStatus, probes: ProbeResults | None = None) -> SyncResult:
        actions = compute_pod_actions(pod, rs, probes)
        result = SyncResult(changed=not actions.is_noop())
        if actions.is_noop():
            return result
        if actions.create_sandbox and actions.sandbox_id:
            self.record(podutil.pod_ref(pod), "Normal", "SandboxChanged",
                        "Pod sandbox changed, it will be killed and re-created.")
        if actions.kill_pod:
            await self.kill_pod(pod, rs)
            if actions.create_sandbox:
                await self._purge_init_containers(pod, rs)
        else:
            await asyncio.gather(*(self._kill(pod, cid, info) for cid, info in actions.containers_to_kill.items()))
        sandbox_id = actions.sandbox_id
        sandbox = self._sandbox_config(pod, actions)
        if actions.create_sandbox:
            try:
                sandbox_id = await self.runtime.run_pod_sandbox(sandbox)
            except cri.CriError as e:
                message = f"Failed to create pod sandbox: {e}"
                self.record(podutil.pod_ref(pod), "Warning", "FailedCreatePodSandBox", message)
                result.fail("", CREATE_SANDBOX_ERROR, message, retry_after=WORKER_BACKOFF_PERIOD)
                return result
        needs_ips = _wants_pod_ip(pod) or (self.volumes is not None and self.volumes.writes_files)
        pod_ips = await self._sandbox_ips(sandbox_id) if actions.create_sandbox and needs_ips else rs.ips
        inits = podutil.init_containers(pod)
        for idx in actions.init_containers_to_start:
            container = inits[idx]
            ok = await self._start(pod, container, rs, sandbox_id, sandbox, result, init=True, pod_ips=pod_ips)
            if not ok and not podutil.is_restartable_init_container(container):
                return result
        regular = podutil.containers(pod)
        for idx in actions.containers_to_start:
            await self._start(pod, regular[idx], rs, sandbox_id, sandbox, result, init=False, pod_ips=pod_ips)
        return result

    async def _sandbox_ips(self, sandbox_id: str) -> list[str]:
        """The IPs of a sandbox just created (what status.podIP env vars resolve to at first start)."""
        try:
            status = (await self.runtime.pod_sandbox_status(sandbox_id)).status
        except cri.CriError:
            return []
        net = status.network
        return [net.ip, *(p.ip for p in net.additional_ips if p.ip)] if net is not None and net.ip else []

    def _sandbox_config(self, pod: Obj, actions: PodActions) -> cri.PodSandboxConfig:
        return runtime_config.sandbox_config(pod, actions.attempt)

    def backoff_key(self, pod: Obj, container: Obj) -> str:
        return f"{podutil.uid_of(pod)}_{container.get('name')}_{podutil.container_hash(container)}"

    def _crash_loop(self, pod: Obj, container: Obj, rs: PodRuntimeStatus, result: SyncResult, *, init: bool) -> bool:
        """doBackOff: True (and a CrashLoopBackOff failure) while the container may not restart yet."""
        name = str(container.get("name"))
        last = rs.find_exited(name)
        if last is None:
            return False
        key = self.backoff_key(pod, container)
        if self.backoff.is_in_backoff_since(key, last.finished_at):
            delay = self.backoff.get(key)
            self.record(podutil.container_ref(pod, name, init=init), "Warning", "BackOff",
                        f"Back-off restarting failed container {name} in pod {podutil.format_pod(pod)}")
            message = f"back-off {_go_seconds(delay)} restarting failed container={name} pod={podutil.format_pod(pod)}"
            self.reasons.add(podutil.uid_of(pod), name, CRASH_LOOP_BACKOFF, message)
            result.fail(name, CRASH_LOOP_BACKOFF, message, retry_after=self.backoff.remaining(key, last.finished_at))
            return True
        self.backoff.next(key, last.finished_at)
        return False

    async def _start(self, pod: Obj, container: Obj, rs: PodRuntimeStatus, sandbox_id: str,
                     sandbox: cri.PodSandboxConfig, result: SyncResult, *, init: bool, pod_ips: list[str]) -> bool:
        name = str(container.get("name"))
        uid = podutil.uid_of(pod)
        if self._crash_loop(pod, container, rs, result, init=init):
            return False
        await self._prune_dead(rs, name)
        failure = await self.start_container(pod, container, rs, sandbox_id, sandbox, init=init, pod_ips=pod_ips)
        result.changed = True
        if failure is None:
            self.reasons.remove(uid, name)
            return True
        reason, message, retry = failure
        self.reasons.add(uid, name, reason, message)
        result.fail(name, reason, message, retry_after=retry)
        return False

    async def start_container(self, pod: Obj, container: Obj, rs: PodRuntimeStatus, sandbox_id: str,
                              sandbox: cri.PodSandboxConfig, *, init: bool,
                              pod_ips: list[str] | None = None) -> tuple[str, str, float] | None:
        """startContainer: None on success, else (reason, message, retry after seconds)."""
        name = str(container.get("name"))
        ref = podutil.container_ref(pod, name, init=init)
        try:
            image_ref = await self.images.ensure_image_exists(pod, container, sandbox_config=sandbox, init=init)
        except ImagePullError as e:
            retry = self.images.retry_after(pod, str(container.get("image") or "")) or WORKER_BACKOFF_PERIOD
            return e.reason, e.message, retry
        previous = rs.find(name)
        restart_count = previous.restart_count + 1 if previous is not None else 0
        try:
            config = await self.container_config(pod, container, restart_count=restart_count, image_ref=image_ref,
                                                  pod_ips=pod_ips if pod_ips is not None else rs.ips)
        except (EnvError, MountError, SecurityContextError) as e:
            self.record(ref, "Warning", "Failed", f"Error: {e}")
            return CREATE_CONTAINER_CONFIG_ERROR, str(e), WORKER_BACKOFF_PERIOD
        try:
            cid = await self.runtime.create_container(sandbox_id, config, sandbox)
        except cri.CriError as e:
            self.record(ref, "Warning", "Failed", f"Error: {e}")
            return CREATE_CONTAINER_ERROR, str(e), WORKER_BACKOFF_PERIOD
        self.record(ref, "Normal", "Created", f"Created container: {name}")
        try:
            await self.runtime.start_container(cid)
        except cri.CriError as e:
            self.record(ref, "Warning", "Failed", f"Error: {e}")
            return RUN_CONTAINER_ERROR, str(e), WORKER_BACKOFF_PERIOD
        self.record(ref, "Normal", "Started", f"Started container {name}")
        post_start = (container.get("lifecycle") or {}).get("postStart")
        if post_start:
            error = await self.handlers.hook("PostStart", self._target(pod, container, cid, rs), post_start,
                                             timeout=float(podutil.termination_grace(pod)))
            if error is not None:
                self.record(ref, "Warning", "FailedPostStartHook", error)
                await self.kill_container(pod, cid, name, container, message="FailedPostStartHook")
                return POST_START_HOOK_ERROR, "PostStartHook failed", WORKER_BACKOFF_PERIOD
        return None

    async def container_config(self, pod: Obj, container: Obj, *, restart_count: int, image_ref: str,
                               pod_ips: list[str]) -> cri.ContainerConfig:
        """generateContainerConfig: env (API reads), mounts (the volume manager), then the config;
        EnvError / MountError / SecurityContextError when the container cannot be configured."""
        env = await make_env(pod, container, self.env, pod_ips=pod_ips)
        ips = self.host_ips if podutil.is_host_network(pod) else pod_ips
        mounts = self.volumes.container_mounts(pod, container, env, pod_ips=ips) if self.volumes is not None else []
        memory = downward.amount(self.env.allocatable, "memory")  # upstream: machine capacity
        return runtime_config.container_config(pod, container, restart_count=restart_count, image_ref=image_ref,
                                               env=env, mounts=mounts, memory_capacity=memory.value() if memory else 0)

    def _target(self, pod: Obj, container: Obj, cid: str, rs: PodRuntimeStatus | None) -> Target:
        ips = rs.ips if rs is not None else []
        pod_ip = ips[0] if ips else str((pod.get("status") or {}).get("podIP") or "")
        return Target(pod=pod, container=container, container_id=cid, pod_ip=pod_ip)

    # -- pruning -------------------------------------------------------------------------------------
    async def _purge_init_containers(self, pod: Obj, rs: PodRuntimeStatus) -> None:
        names = {str(c.get("name")) for c in podutil.init_containers(pod)}
        for c in rs.containers:
            if c.name in names:
                await self._remove_container(c.id)

    async def _prune_dead(self, rs: PodRuntimeStatus, name: str) -> None:
        """Before starting container `name` again, keep only its newest dead instance."""
        seen = False
        for c in rs.containers:  # newest first
            if c.name != name or c.running:
                continue
            if seen:
                await self._remove_container(c.id)
            seen = True

    async def _remove_container(self, cid: str) -> None:
        try:
            await self.runtime.remove_container(cid)
        except cri.CriError as e:
            log.warning("removing container %s failed: %s", cid, e)

    # -- killing -------------------------------------------------------------------------------------
    async def _kill(self, pod: Obj, cid: str, info: KillInfo) -> None:
        await self.kill_container(pod, cid, info.name, info.container, message=info.message, reason=info.reason)

    async def kill_container(self, pod: Obj, cid: str, name: str, container: Obj | None, *, message: str = "",
                             reason: str = "", grace_override: int | None = None) -> None:
        """killContainer: "Killing" event, preStop hook within the grace period, then StopContainer."""
        grace = podutil.termination_grace(pod)
        probe = (container or {}).get({"LivenessProbe": "livenessProbe", "StartupProbe": "startupProbe"}.get(reason, ""))
        if isinstance(probe, dict) and probe.get("terminationGracePeriodSeconds") is not None \
                and not podutil.deletion_timestamp(pod):
            grace = int(probe["terminationGracePeriodSeconds"])
        init = podutil.is_init_container_name(pod, name)
        self.record(podutil.container_ref(pod, name, init=init), "Normal", "Killing",
                    message or f"Stopping container {name}")
        pre_stop = ((container or {}).get("lifecycle") or {}).get("preStop")
        if pre_stop and grace > 0:
            started = self.clock.now()
            target = Target(pod=pod, container=container or {}, container_id=cid,
                            pod_ip=str((pod.get("status") or {}).get("podIP") or ""))
            try:
                error = await asyncio.wait_for(self.handlers.hook("PreStop", target, pre_stop, timeout=float(grace)),
                                               timeout=float(grace))
            except asyncio.TimeoutError:
                error = f"PreStop hook did not finish within {grace}s"
            if error is not None:
                self.record(podutil.container_ref(pod, name, init=init), "Warning", "FailedPreStopHook",
                            f"PreStopHook failed: {error}")
            grace -= int(self.clock.now() - started)
        if grace_override is not None:
            grace = grace_override
        elif grace < podutil.MIN_GRACE_PERIOD:
            grace = podutil.MIN_GRACE_PERIOD
        try:
            await self.runtime.stop_container(cid, grace)
        except cri.CriError as e:
            log.warning("stopping container %s of %s failed: %s", name, podutil.format_pod(pod), e)

    async def kill_pod(self, pod: Obj, rs: PodRuntimeStatus, *, grace_override: int | None = None) -> None:
        """KillPod: stop every running container (in parallel), then every sandbox."""
        specs = {str(c.get("name")): c for c in [*podutil.init_containers(pod), *podutil.containers(pod)]}
        await asyncio.gather(*(self.kill_container(pod, c.id, c.name, specs.get(c.name), grace_override=grace_override)
                               for c in rs.running_containers()))
        for s in rs.sandboxes:
            try:
                await self.runtime.stop_pod_sandbox(s.id)
            except cri.CriError as e:
                log.warning("stopping the sandbox of %s failed: %s", podutil.format_pod(pod), e)

    async def remove_pod(self, rs: PodRuntimeStatus) -> None:
        """Remove every container and sandbox of a pod that is gone (stopping what still runs)."""
        for c in rs.containers:
            await self._remove_container(c.id)
        for s in rs.sandboxes:
            try:
                await self.runtime.stop_pod_sandbox(s.id)
                await self.runtime.remove_pod_sandbox(s.id)
            except cri.CriError as e:
                log.warning("removing sandbox %s failed: %s", s.id, e)
        self.reasons.forget_pod(rs.uid)
        self.backoff.forget_prefix(f"{rs.uid}_")
        self.images.forget_pod(rs.uid)


def _wants_pod_ip(pod: Obj) -> bool:
    """Whether an env var of the pod reads status.podIP(s) (then a new sandbox's IPs are read first)."""
    return any(str(((e.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath") or "").startswith("status.podIP")
               for c in [*podutil.init_containers(pod), *podutil.containers(pod)] for e in c.get("env") or [])


def _go_seconds(seconds: float) -> str:
    """Go's Duration.String() for whole-second back-offs ("10s", "5m0s", "2m40s")."""
    total = int(seconds)
    minutes, secs = divmod(total, 60)
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"
