"""A node's resource management, wired to its kubelet: the stats Summary, container and image
garbage collection, and node-pressure eviction (`stats.py`, `gc.py`, `eviction.py`,
`eviction_manager.py`).

    resources = NodeResources(kubelet)          # the kubelet does this when config.manage_resources
    periodic = resources.start(phase=0.3)       # on the host's timers
    summary = await stats_provider(kubelet).summary()   # GET /stats/summary (hollow nodes too)

Periods (upstream's): container GC every 1 min, image GC every 5 min, the eviction manager every
10 s; `phase` staggers them like the kubelet's other timers. What the kubelet asks of it:
- `pressure()`: the MemoryPressure/DiskPressure flags its node status reports; a change of
  conditions triggers a node status sync at once.
- `admit(pod)`: the eviction admit handler for a pod seen for the first time; `reject(pod, ...)`
  makes such a pod Failed ("Pod was rejected: ...") without running anything.
- `adjust_status(uid, status)`: the eviction's or rejection's fields merged into every status
  generated for that pod afterwards (phase Failed, reason Evicted, message, DisruptionTarget).
- `forget(uid)`: the pod is gone.

The node's own figures come from the machine (`HostSource`, under the kubelet's root dir) or,
over the simulated runtime, from the configured capacity (`SimSource`). Disk reclaim before
evicting is DeleteAllUnusedContainers + DeleteUnusedImages. The sandbox image is never removed
(containerd's is `daemon.SANDBOX_IMAGE`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kubecore.kubelet import admission, eviction, podutil, runtime_config
from kubecore.kubelet.eviction_manager import (
    MONITORING_PERIOD,
    EvictionManager,
    apply_status,
    rejected_status,
)
from kubecore.kubelet.gc import CONTAINER_GC_PERIOD, IMAGE_GC_PERIOD, ContainerGC, ImageGC
from kubecore.kubelet.node_status import Pressure
from kubecore.kubelet.sim.runtime import SimRuntime
from kubecore.kubelet.stats import HostSource, NodeSource, SimSource, StatsProvider
from kubecore.kubelet.timers import Periodic

if TYPE_CHECKING:
    from kubecore.kubelet.kubelet import Kubelet

log = logging.getLogger(__name__)
Obj = dict[str, Any]
SANDBOX_IMAGE = "kubecore.local/pause:1.0"
"""containerd's sandbox image as kubecore configures it (containerd/daemon.py SANDBOX_IMAGE)."""


def new_stats_provider(kubelet: Kubelet, *, source: NodeSource | None = None) -> StatsProvider:
    """A Summary provider for the kubelet's node: simulated figures over the simulated runtime,
    the machine's otherwise."""
    cfg = kubelet.config
    if source is None:
        if isinstance(kubelet.runtime, SimRuntime):
            source = SimSource(memory=cfg.memory, ephemeral_storage=cfg.ephemeral_storage, max_pods=cfg.pods,
                               clock=kubelet.clock)
        else:
            source = HostSource(root_dir=cfg.root_dir)
    return StatsProvider(kubelet.runtime, node_name=kubelet.name, source=source, clock=kubelet.clock,
                         root_dir=cfg.root_dir, log_root=runtime_config.LOG_ROOT if cfg.root_dir else None)


def stats_provider(kubelet: Kubelet) -> StatsProvider:
    """What serves GET /stats/summary: the kubelet's own provider when it manages its resources,
    else (hollow nodes) one made for the call (stateless over the simulated runtime)."""
    resources = kubelet.resources
    return resources.stats if resources is not None else new_stats_provider(kubelet)


class NodeResources:
    """Stats, GC and eviction for one kubelet (see the module docstring)."""

    def __init__(self, kubelet: Kubelet, *, source: NodeSource | None = None) -> None:
        self.kubelet = kubelet
        policy = kubelet.config.resource_policy
        self.stats = new_stats_provider(kubelet, source=source)
        self.container_gc = ContainerGC(kubelet.runtime, clock=kubelet.clock, content_removable=self._content_removable,
                                        sources_ready=kubelet.host.pods_synced,
                                        runtime_removable=kubelet.workers.is_terminated)
        self.image_gc = ImageGC(kubelet.runtime, clock=kubelet.clock, fs_usage=self._image_fs_usage,
                                sandbox_image=SANDBOX_IMAGE, policy=policy.image_gc_policy())
        self.eviction = EvictionManager(
            summary=self.stats.summary, clock=kubelet.clock, thresholds=eviction.parse_thresholds(policy.eviction_hard),
            active_pods=self._active_pods, evict=self._evict, reclaim=self._reclaim,
            pressure_transition_period=policy.eviction_pressure_transition_period, record=kubelet.record,
            on_conditions_changed=self._conditions_changed,
            node_ref={"kind": "Node", "name": kubelet.name, "uid": kubelet.name})
        self.overrides: dict[str, Obj] = {}
        """uid -> status fields of an evicted or rejected pod."""

    # -- periodic work -------------------------------------------------------------------------------
    def start(self, *, phase: float = 0.0) -> list[Periodic]:
        timers, spawn = self.kubelet.host.timers, self.kubelet.host.spawner.spawn
        return [
            timers.every(CONTAINER_GC_PERIOD, lambda: spawn(self._guard("container GC", self.container_gc.collect())),
                         first=phase * CONTAINER_GC_PERIOD),
            timers.every(IMAGE_GC_PERIOD, lambda: spawn(self._guard("image GC", self._image_gc())),
                         first=phase * IMAGE_GC_PERIOD),
            timers.every(MONITORING_PERIOD, lambda: spawn(self._guard("eviction", self.eviction.synchronize())),
                         first=phase * MONITORING_PERIOD),
        ]

    async def _guard(self, what: str, work: Any) -> None:
        try:
            await work
        except Exception as e:  # a runtime hiccup must not stop the loop; the next tick retries
            log.warning("node %s: %s failed: %s", self.kubelet.name, what, e)

    async def _image_gc(self) -> None:
        result = await self.image_gc.collect()
        if result.shortfall:
            self.kubelet.record({"kind": "Node", "name": self.kubelet.name, "uid": self.kubelet.name}, "Warning",
                                "FreeDiskSpaceFailed", result.shortfall)

    async def _image_fs_usage(self) -> tuple[int, int]:
        summary = await self.stats.summary()
        fs = ((summary.get("node") or {}).get("runtime") or {}).get("imageFs") or {}
        return int(fs.get("capacityBytes") or 0), int(fs.get("availableBytes") or 0)

    async def _reclaim(self, signal: str) -> None:
        await self.container_gc.collect(all_unused=True)
        await self.image_gc.delete_unused()

    # -- what the GC and the eviction manager ask of the kubelet -----------------------------------
    def _content_removable(self, uid: str) -> bool:
        """ShouldPodContentBeRemoved: unknown to the kubelet, or evicted, or deleted and terminated."""
        k = self.kubelet
        if uid not in k.pods and k.workers.get(uid) is None:
            return True
        if not k.workers.is_terminated(uid):
            return False
        pod = k.pod_for(uid)
        evicted = self.overrides.get(uid, {}).get("reason") == eviction.REASON
        return evicted or (pod is not None and podutil.deletion_timestamp(pod) is not None)

    def _active_pods(self) -> list[Obj]:
        k = self.kubelet
        out = []
        for uid in list(k.pods):
            work = k.workers.get(uid)
            pod = k.pod_for(uid)
            if pod is None or work is None or work.kill_requested or k.workers.is_terminated(uid):
                continue
            if podutil.is_terminal(podutil.phase_of(pod)):
                continue
            out.append(pod)
        return out

    def _evict(self, pod: Obj, grace: int, status: Obj) -> bool:
        uid = podutil.uid_of(pod)
        if uid in self.overrides:
            return False
        self.overrides[uid] = status
        self.kubelet.workers.update_pod(uid, podutil.key_of(pod), kill=True, grace=grace)
        return True

    def _conditions_changed(self) -> None:
        k = self.kubelet
        if k.started:
            k.host.spawner.spawn(k.node.sync_status(), name=f"node-status {k.name}")

    # -- what the kubelet asks ---------------------------------------------------------------------
    def pressure(self) -> Pressure:
        return self.eviction.pressure()

    def admit(self, pod: Obj) -> eviction.AdmitResult:
        """Upstream's admit handlers in their order: eviction (pressure), then predicates."""
        result = self.eviction.admit(pod)
        if not result.admit:
            return result
        k = self.kubelet
        uid = podutil.uid_of(pod)
        others = [p for p in self._active_pods() if podutil.uid_of(p) != uid]
        node = k.host.node(k.name)
        if node is None:  # not registered yet: what can be checked without the Node object
            node = {"metadata": {"name": k.name, "labels": {}}, "spec": {}}
            if podutil.spec(pod).get("nodeSelector") or podutil.spec(pod).get("affinity"):
                return eviction.AdmitResult(True)
        return admission.predicate_admit(pod, node=node, other_pods=others, allocatable=k.config.allocatable())

    def reject(self, pod: Obj, result: eviction.AdmitResult) -> None:
        self.overrides[podutil.uid_of(pod)] = rejected_status(result)
        self.kubelet.record(podutil.pod_ref(pod), "Warning", result.reason, result.message)

    def adjust_status(self, uid: str, status: Obj) -> None:
        fields = self.overrides.get(uid)
        if fields is not None:
            apply_status(status, fields)

    def forget(self, uid: str) -> None:
        self.overrides.pop(uid, None)
