"""One node's kubelet: the pieces of this package wired together above the CRI runtime.

    kubelet = Kubelet(config, runtime=SimRuntime(...), handlers=SimHandlers(...), host=host)
    host.add(kubelet); await host.start()       # `host.py`: what many kubelets share

What happens, in upstream's terms:
- `prepare()`: runtime version, the pod CIDR to the runtime, and a first PLEG relist, so pods
  the runtime still runs are known before any pod from the API is synced (re-adoption: a
  restarted kubelet finds its containers running and keeps them; restart counts, IPs and start
  times are read back from the runtime).
- `register()`: the Node (create or adopt), then `start()`: status every 10 s, the Lease every
  10 s, PLEG relisting and runtime events, housekeeping (runtime pods whose API pod is gone are
  killed and removed), all on the host's shared timers.
- Pod events from the host's watch (`pod_upserted`, `pod_removed`) become pod-worker updates; a
  change of status only (the kubelet's own writes coming back) does not sync the pod. Deletion
  (a deletionTimestamp) asks for termination with the pod's deletion grace period.
- Before a pod's sandbox and containers are created, its volumes are set up under the root dir
  (`volumes.py`; a failure keeps the pod ContainerCreating with a FailedMount event and retries
  with back-off); a forgotten pod's volume directory (and, on a real node, its logs) is removed,
  and housekeeping removes the directories of pods the kubelet no longer knows.
- Resource management (`node_resources.py`, when `config.manage_resources`; hollow nodes turn it
  off): container GC every minute, image GC every 5 minutes, the eviction manager every 10 s; the
  node's pressure conditions come from it, a new pod is admitted by it (a rejected one only gets
  its Failed status), and an evicted or rejected pod's status carries its fields.
- The worker's passes (`sync_pod`, `sync_terminating_pod`, `sync_terminated_pod`, `forget`) are
  upstream's SyncPod / SyncTerminatingPod / SyncTerminatedPod / cleanup, described in
  `pod_workers.py`; statuses go to the `StatusManager`, which writes them and makes the final
  delete.
"""

from __future__ import annotations

import logging
import shutil
from typing import TYPE_CHECKING, Any

import msgspec

from kubecore.kubelet import cri, podutil, runtime_config
from kubecore.kubelet.config import KubeletConfig, MachineInfo
from kubecore.kubelet.envvars import EnvContext
from kubecore.kubelet.handlers import Handlers
from kubecore.kubelet.node_agent import NodeAgent, NodeLease
from kubecore.kubelet.node_resources import NodeResources
from kubecore.kubelet.node_status import Pressure, node_ref
from kubecore.kubelet.objects import ApiObjects
from kubecore.kubelet.pleg import Pleg
from kubecore.kubelet.pod_workers import PodWork, PodWorkers, SyncOutcome
from kubecore.kubelet.probes import READINESS, ProbeManager
from kubecore.kubelet.runtime_manager import RuntimeManager
from kubecore.kubelet.runtime_status import PodCache, PodRuntimeStatus
from kubecore.kubelet.status_gen import generate_pod_status
from kubecore.kubelet.status_manager import StatusManager
from kubecore.kubelet.timers import Periodic
from kubecore.kubelet.volumes import VolumeManager

if TYPE_CHECKING:
    from kubecore.kubelet.host import KubeletHost

log = logging.getLogger(__name__)
Obj = dict[str, Any]
_encode = msgspec.json.encode


def _sync_relevant(pod: Obj) -> int:
    """A hash of what a sync depends on (spec, deletion, labels, annotations): an update that changes
    none of it (a status write coming back) needs no sync. A hash, not the parts: holding the
    decoded spec of every pod would cost kilobytes each."""
    m = podutil.meta(pod)
    return hash(_encode((pod.get("spec"), m.get("deletionTimestamp"), m.get("deletionGracePeriodSeconds"),
                         m.get("labels"), m.get("annotations"), m.get("uid"))))


class Kubelet:
    """One node (see the module docstring)."""

    def __init__(self, config: KubeletConfig, *, runtime: cri.Runtime, handlers: Handlers, host: KubeletHost,
                 node_ip: str, machine: MachineInfo | None = None, runtime_name: str = "") -> None:
        self.config = config
        self.name = config.node_name
        self.runtime = runtime
        self.host = host
        self.clock = host.clock
        self.node_ip = node_ip
        self.runtime_name = runtime_name
        self.host_ips = [node_ip]
        self.pods: dict[str, str] = {}
        """uid -> namespace/name of every pod bound to this node that the kubelet tracks."""
        self._seen: dict[str, int] = {}
        self.cache = PodCache()
        self.objects = ApiObjects(host.rest, clock=self.clock)
        self.volumes = VolumeManager(root_dir=config.root_dir, objects=self.objects, clock=self.clock,
                                     record=self.record, allocatable=config.allocatable)
        env = EnvContext(objects=self.objects, node_name=self.name, host_ips=self.host_ips,
                         allocatable=config.allocatable(), record=self.record)
        self.manager = RuntimeManager(runtime, clock=self.clock, record=self.record, handlers=handlers,
                                      runtime_name=runtime_name, node_name=self.name, host_ips=self.host_ips,
                                      env=env, volumes=self.volumes)
        self.pleg = Pleg(runtime, self.manager, self.cache, clock=self.clock, timers=host.timers,
                         spawner=host.spawner, on_pod_changed=self._pod_changed,
                         relist_period=config.relist_period)
        self.workers = PodWorkers(self, timers=host.timers, spawner=host.spawner)
        self.status = StatusManager(host.status_writer, pod_lookup=self.pod_for,
                                    could_have_running_containers=self.workers.could_have_running_containers)
        self.probes = ProbeManager(handlers, clock=self.clock, timers=host.timers, spawner=host.spawner,
                                   record=self.record, status_lookup=self.status.get_pod_status,
                                   pod_lookup=self.pod_for, on_result=self._probe_result)
        self.node = NodeAgent(host.rest, config=config, runtime=runtime, clock=self.clock,
                              machine=machine or host.machine, node_ip=node_ip,
                              node_lookup=lambda: host.node(self.name), ready_errors=self.ready_errors,
                              record=self._record_node_event)
        # -- resource management hook (node_resources.py: GC, eviction, stats); off on hollow nodes
        self.resources = NodeResources(self) if config.manage_resources else None
        self.node.pressure = self.resources.pressure if self.resources is not None else Pressure
        self.lease = NodeLease(host.lease_sink, node_name=self.name, clock=self.clock,
                               duration=config.node_lease_duration, node_uid=lambda: self.node.uid)
        self._periodic: list[Periodic] = []
        self._pod_cidr = ""
        self.started = False

    # -- events ------------------------------------------------------------------------------------
    def record(self, ref: Obj, event_type: str, reason: str, message: str) -> None:
        if self.host.recorder is not None and self.config.record_events:
            self.host.recorder(self.name).event(ref, event_type, reason=reason, message=message)

    def _record_node_event(self, event_type: str, reason: str) -> None:
        self.record(node_ref(self.name), event_type, reason, f"Node {self.name} status is now: {reason}")

    # -- lifecycle ---------------------------------------------------------------------------------
    async def prepare(self) -> None:
        if not self.runtime_name:
            self.runtime_name = (await self.runtime.version()).runtime_name
            self.manager.runtime_name = self.runtime_name
        if self.config.pod_cidr:
            await self._set_pod_cidr(self.config.pod_cidr)
        await self.pleg.relist()

    async def _set_pod_cidr(self, cidr: str) -> None:
        if cidr and cidr != self._pod_cidr:
            self._pod_cidr = cidr
            await self.runtime.update_runtime_config(cri.RuntimeConfig(network_config=cri.NetworkConfig(pod_cidr=cidr)))

    async def register(self) -> None:
        self.record(node_ref(self.name), "Normal", "Starting", "Starting kubelet.")
        await self.node.register()
        await self.lease.sync()

    def start(self, *, phase: float = 0.0) -> None:
        """Periodic work on the shared timers; `phase` (0..1) staggers this node against others."""
        timers, spawn = self.host.timers, self.host.spawner.spawn
        cfg = self.config
        self._periodic = [
            timers.every(cfg.node_status_update_frequency, lambda: spawn(self._sync_node_status()),
                         first=phase * cfg.node_status_update_frequency),
            timers.every(cfg.lease_renew_interval, lambda: spawn(self.lease.sync()),
                         first=phase * cfg.lease_renew_interval),
            timers.every(cfg.housekeeping_period, lambda: spawn(self.housekeeping()),
                         first=phase * cfg.housekeeping_period),
        ]
        if self.resources is not None:  # resource management hook
            self._periodic += self.resources.start(phase=phase)
        self.pleg.start(with_events=True)
        self.started = True

    async def stop(self) -> None:
        for p in self._periodic:
            p.cancel()
        await self.pleg.stop()
        for uid in list(self.pods):
            self.probes.remove_pod(uid)

    async def _sync_node_status(self) -> None:
        node = self.host.node(self.name)
        cidr = str(((node or {}).get("spec") or {}).get("podCIDR") or "")
        if cidr:
            await self._set_pod_cidr(cidr)
        await self.node.sync_status()

    async def ready_errors(self) -> list[str]:
        errors: list[str] = []
        try:
            status = await self.runtime.status()
        except cri.CriError as e:
            return [f"container runtime is down: {e}"]
        for c in status.status.conditions:
            if c.type == cri.RUNTIME_READY and not c.status:
                errors.append(f"container runtime status check may not have completed yet: {c.reason} {c.message}")
            if c.type == cri.NETWORK_READY and not c.status:
                errors.append(f"container runtime network not ready: NetworkReady=false reason:{c.reason} "
                              f"message:{c.message}")
        ok, why = self.pleg.healthy()
        if not ok:
            errors.append(why)
        return errors

    # -- pods from the API -------------------------------------------------------------------------
    def pod_for(self, uid: str) -> Obj | None:
        """The newest API pod with this uid, or the last copy of a pod that is gone."""
        key = self.pods.get(uid)
        if key is not None:
            pod = self.host.pod(key)
            if pod is not None and podutil.uid_of(pod) == uid:
                return pod
        work = self.workers.get(uid)
        return work.removed_pod if work is not None else None

    def pod_upserted(self, pod: Obj) -> None:
        uid = podutil.uid_of(pod)
        relevant = _sync_relevant(pod)
        if uid in self.pods:
            if self._seen.get(uid) == relevant:
                if podutil.deletion_timestamp(pod):
                    self.status.request_sync(uid)
                return
        else:
            self.pods[uid] = podutil.key_of(pod)
            self.probes.add_pod(pod)
        self._seen[uid] = relevant
        deleting = podutil.deletion_timestamp(pod) is not None
        rejected = self._admit_new(pod, uid) if uid not in self.workers.pods and not deleting else False
        grace = podutil.meta(pod).get("deletionGracePeriodSeconds") if deleting else None
        rs = self.cache.get(uid)
        start_terminated = rejected or (podutil.is_terminal(podutil.phase_of(pod))
                                        and (rs is None or not rs.running_containers()))
        self.workers.update_pod(uid, podutil.key_of(pod), kill=deleting,
                                grace=int(grace) if grace is not None else None, start_terminated=start_terminated)

    def _admit_new(self, pod: Obj, uid: str) -> bool:
        """Resource management hook: the eviction admit handler for a pod not yet handed to a worker;
        True when it is rejected (it then only gets its Failed status, nothing runs)."""
        if self.resources is None or podutil.is_terminal(podutil.phase_of(pod)) or self.cache.get(uid) is not None:
            return False
        result = self.resources.admit(pod)
        if not result.admit:
            self.resources.reject(pod, result)
        return not result.admit

    def pod_removed(self, pod: Obj) -> None:
        uid = podutil.uid_of(pod)
        if uid not in self.pods:
            return
        self._seen.pop(uid, None)
        rs = self.cache.get(uid)
        nothing_runs = rs is None or rs.is_empty()
        grace = podutil.meta(pod).get("deletionGracePeriodSeconds")
        self.workers.update_pod(uid, podutil.key_of(pod), removed_pod=pod,
                                grace=int(grace) if grace is not None else None,
                                start_terminated=nothing_runs and self.workers.get(uid) is None)
        if self.workers.get(uid) is None:
            self.pods.pop(uid, None)

    def _pod_changed(self, uid: str) -> None:
        key = self.pods.get(uid)
        if key is not None:
            self.workers.update_pod(uid, key)

    def _probe_result(self, uid: str, kind: str) -> None:
        self._pod_changed(uid)

    # -- the pod worker's passes ---------------------------------------------------------------------
    async def _runtime_status(self, work: PodWork, pod: Obj, *, fresh: bool = False) -> PodRuntimeStatus:
        cached = self.cache.get(work.uid)
        if not fresh and cached is not None and cached.timestamp >= work.last_sync:
            return cached
        m = podutil.meta(pod)
        rs = await self.manager.get_pod_status(work.uid, name=str(m.get("name") or ""),
                                               namespace=str(m.get("namespace") or ""))
        self.pleg.store(rs)
        return rs

    def _generate(self, pod: Obj, rs: PodRuntimeStatus, *, terminal: bool) -> Obj:
        uid = podutil.uid_of(pod)
        status = generate_pod_status(pod, rs, old=self.status.get_pod_status(uid) or pod.get("status") or {},
                                     pod_is_terminal=terminal, reasons=self.manager.reasons, probes=self.probes,
                                     host_ips=self.host_ips, runtime_name=self.runtime_name, now=self.clock.now())
        if self.resources is not None:  # resource management hook: an evicted/rejected pod's fields
            self.resources.adjust_status(uid, status)
        self.status.set_pod_status(pod, status)
        return status

    def _trigger_readiness(self, pod: Obj, status: Obj) -> None:
        uid = podutil.uid_of(pod)
        for cs in status.get("containerStatuses") or []:
            if not cs.get("ready") and "running" in (cs.get("state") or {}) \
                    and self.probes.has_probe(uid, str(cs.get("name")), READINESS):
                self.probes.trigger(uid, str(cs.get("name")))

    async def sync_pod(self, work: PodWork) -> SyncOutcome:
        pod = self.pod_for(work.uid)
        if pod is None:
            return SyncOutcome(terminal=True)
        started = self.clock.now()
        rs = await self._runtime_status(work, pod)
        work.last_sync = started
        status = self._generate(pod, rs, terminal=False)
        if podutil.is_terminal(str(status.get("phase"))):
            return SyncOutcome(terminal=True)
        self._trigger_readiness(pod, status)
        if not podutil.deletion_timestamp(pod):
            wait = await self.volumes.wait_for_mount(pod)
            if wait is not None:
                return SyncOutcome(retry_after=wait)
        result = await self.manager.sync_pod(pod, rs, self.probes)
        if result.changed:
            await self._runtime_status(work, pod, fresh=True)
        retry = result.retry_after
        if retry is None and self.config.resync_interval > 0:
            retry = self.config.resync_interval
        return SyncOutcome(again=result.changed, retry_after=retry)

    async def sync_terminating_pod(self, work: PodWork, grace: int | None) -> None:
        pod = self.pod_for(work.uid)
        if pod is None:
            return
        rs = await self._runtime_status(work, pod, fresh=True)
        self._generate(pod, rs, terminal=False)
        effective = grace
        if effective is None:
            effective = podutil.termination_grace(pod)
        await self.manager.kill_pod(pod, rs, grace_override=max(1, effective) if rs.running_containers() else None)
        rs = await self._runtime_status(work, pod, fresh=True)
        self._generate(pod, rs, terminal=True)

    async def sync_terminated_pod(self, work: PodWork) -> None:
        pod = self.pod_for(work.uid)
        self.probes.remove_pod(work.uid)
        if pod is not None:
            rs = await self._runtime_status(work, pod, fresh=True)
            self._generate(pod, rs, terminal=True)
            self.status.terminate_pod(pod)

    async def forget(self, work: PodWork) -> None:
        if self.resources is not None:  # resource management hook
            self.resources.forget(work.uid)
        self.probes.remove_pod(work.uid)
        self.status.remove(work.uid)
        self.pods.pop(work.uid, None)
        self._seen.pop(work.uid, None)
        rs = await self.manager.get_pod_status(work.uid)
        if not rs.is_empty():
            await self.manager.remove_pod(rs)
        self.cache.delete(work.uid)
        self.volumes.cleanup(work.uid)
        if self.config.root_dir and work.removed_pod is not None:  # a real node: its container logs too
            shutil.rmtree(runtime_config.pod_log_dir(work.removed_pod), ignore_errors=True)

    # -- housekeeping --------------------------------------------------------------------------------
    async def housekeeping(self) -> None:
        """HandlePodCleanups: runtime pods the API no longer has (and no worker knows) are killed
        and removed; only once the host's pod watch has synced."""
        if not self.host.pods_synced():
            return
        for uid in self.cache.uids():
            if uid in self.pods or self.workers.get(uid) is not None:
                continue
            rs = self.cache.get(uid)
            if rs is None:
                continue
            if not rs.is_empty():
                log.info("node %s: removing orphaned pod %s/%s (%s)", self.name, rs.namespace, rs.name, uid)
                await self.manager.remove_pod(rs)
            self.cache.delete(uid)
        self.volumes.cleanup_orphans([*self.pods, *self.cache.uids(), *self.workers.pods])

    def counts(self) -> dict[str, int]:
        return {"pods": len(self.pods), "workers": len(self.workers), "statuses": len(self.status),
                "status_writes": self.status.writes, "probes": len(self.probes)}
