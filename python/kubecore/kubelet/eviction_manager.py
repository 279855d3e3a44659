"""The eviction manager's loop (upstream pkg/kubelet/eviction/eviction_manager.go synchronize),
over the pure pieces of `eviction.py`.

    manager = EvictionManager(summary=provider.summary, clock=clock, thresholds=parse_thresholds(hard),
                              active_pods=..., evict=..., reclaim=...)
    await manager.synchronize()          # every MONITORING_PERIOD (10 s); evicts at most one pod

One pass, in upstream's order:
1. Read the Summary and observe the signals; find the hard thresholds that are met.
2. Node conditions: each condition of a met threshold is observed now; a condition stays on
   until `pressure_transition_period` (5 min) has passed since it was last observed, so a node
   does not flap. A change calls `on_conditions_changed` (the kubelet then reports its status).
3. Local storage limits: every active pod over an emptyDir sizeLimit or an ephemeral-storage
   limit is evicted (grace 1 s, no DisruptionTarget condition, as upstream); if any was, done.
4. Nothing met: done. Else a Warning event EvictionThresholdMet "Attempting to reclaim <resource>"
   on the node, and the threshold to reclaim is the first by eviction priority (memory
   first). For a disk signal, node-level resources are reclaimed first (`reclaim(signal)`: dead
   containers and unused images); if afterwards the Summary shows no threshold met, done.
5. Rank the active pods for the signal and evict the first that may be evicted (never a
   critical pod): `evict(pod, grace, status)` with grace 1 s (hard thresholds) and the status
   upstream sets (phase Failed, reason Evicted, the message, a DisruptionTarget condition with
   reason TerminationByKubelet and the pod's generation as observedGeneration); a Warning event
   "Evicted" with the message is recorded. One pod per pass, as upstream: the next pass sees the
   effect first.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kubecore.client.clock import Clock
from kubecore.kubelet import eviction, podutil
from kubecore.kubelet.eviction import AdmitResult, Observation, Threshold
from kubecore.kubelet.node_status import Pressure

log = logging.getLogger(__name__)
Obj = dict[str, Any]

MONITORING_PERIOD = 10.0
PRESSURE_TRANSITION_PERIOD = 300.0

EvictFn = Callable[[Obj, int, Obj], bool]
"""(pod, grace seconds, status fields to report) -> whether the kill was started."""
RecordFn = Callable[[Obj, str, str, str], None]


class EvictionManager:
    """One node's eviction loop and its pressure state (see the module docstring)."""

    def __init__(self, *, summary: Callable[[], Awaitable[Obj]], clock: Clock, thresholds: list[Threshold],
                 active_pods: Callable[[], list[Obj]], evict: EvictFn,
                 reclaim: Callable[[str], Awaitable[None]] | None = None,
                 pressure_transition_period: float = PRESSURE_TRANSITION_PERIOD,
                 record: RecordFn | None = None, on_conditions_changed: Callable[[], None] | None = None,
                 node_ref: Obj | None = None, local_storage: bool = True) -> None:
        self.summary = summary
        self.clock = clock
        self.thresholds = thresholds
        self.active_pods = active_pods
        self.evict = evict
        self.reclaim = reclaim
        self.transition_period = pressure_transition_period
        self.record = record
        self.on_conditions_changed = on_conditions_changed
        self.node_ref = node_ref or {"kind": "Node", "name": "", "uid": ""}
        self.local_storage = local_storage
        self.conditions: list[str] = []
        """The node conditions in force (MemoryPressure before DiskPressure)."""
        self.last_observed: dict[str, float] = {}
        self.evictions = 0

    def pressure(self) -> Pressure:
        return Pressure(memory=eviction.MEMORY_PRESSURE in self.conditions,
                        disk=eviction.DISK_PRESSURE in self.conditions)

    def admit(self, pod: Obj) -> AdmitResult:
        return eviction.admit(pod, self.conditions)

    def _update_conditions(self, met: list[Threshold], observations: dict[str, Observation]) -> None:
        now = self.clock.now()
        for c in eviction.node_conditions(met):
            self.last_observed[c] = now
        fresh = [c for c in (eviction.MEMORY_PRESSURE, eviction.DISK_PRESSURE)
                 if c in self.last_observed and now - self.last_observed[c] < self.transition_period]
        if fresh != self.conditions:
            log.info("eviction manager: node conditions %s -> %s", self.conditions, fresh)
            raised = [c for c in fresh if c not in self.conditions]
            if raised and met:
                what = " and ".join(sorted({"memory" if t.signal == eviction.MEMORY_AVAILABLE else "disk space"
                                            for t in met}))
                log.warning("eviction manager: %s: the node reports %s, so pods may be evicted and new ones go "
                            "elsewhere; free %s on the node, or change the thresholds (kubelet --eviction-hard)",
                            eviction.describe(met, observations), " and ".join(raised), what)
            self.conditions = fresh
            if self.on_conditions_changed is not None:
                self.on_conditions_changed()

    async def _observe(self) -> tuple[Obj, dict[str, Observation], list[Threshold]]:
        summary = await self.summary()
        observations = eviction.observe(summary)
        return summary, observations, eviction.thresholds_met(self.thresholds, observations)

    async def synchronize(self) -> list[Obj]:
        """One pass; returns the pods evicted (at most one for a threshold)."""
        summary, observations, met = await self._observe()
        self._update_conditions(met, observations)
        if self.local_storage:
            evicted = self._local_storage_eviction(summary)
            if evicted:
                return evicted
        if not met:
            return []
        target = eviction.by_eviction_priority(met)[0]
        resource = eviction.SIGNAL_RESOURCE[target.signal]
        self._record(self.node_ref, "EvictionThresholdMet", f"Attempting to reclaim {resource}")
        if target.signal != eviction.MEMORY_AVAILABLE and self.reclaim is not None:
            await self.reclaim(target.signal)
            summary, observations, still = await self._observe()
            if not still:
                log.info("eviction manager: node-level reclaim relieved %s; no pod evicted", target.signal)
                return []
        pod = self._evict_one(target, met, summary, observations)
        return [pod] if pod is not None else []

    def _record(self, ref: Obj, reason: str, message: str) -> None:
        if self.record is not None:
            self.record(ref, "Warning", reason, message)

    def _kill(self, pod: Obj, message: str, *, condition: bool) -> bool:
        """evictPod: never a critical pod; the event, then the kill with the eviction's status."""
        if eviction.is_critical(pod):
            log.error("eviction manager: cannot evict the critical pod %s", podutil.format_pod(pod))
            return False
        self._record(podutil.pod_ref(pod), eviction.REASON, message)
        status = evicted_status(message, pod=pod, now=self.clock.now(), condition=condition)
        if self.evict(pod, eviction.IMMEDIATE_GRACE_SECONDS, status):
            self.evictions += 1
            log.info("eviction manager: evicting %s (%s)", podutil.format_pod(pod), message.strip())
        return True

    def _local_storage_eviction(self, summary: Obj) -> list[Obj]:
        by_uid = _stats_by_uid(summary)
        dedicated = eviction.dedicated_image_fs(summary)
        evicted = []
        for pod in self.active_pods():
            stats = by_uid.get(podutil.uid_of(pod))
            message = eviction.local_storage_violation(pod, stats, dedicated_imagefs=dedicated) if stats else None
            if message is not None and self._kill(pod, message, condition=False):
                evicted.append(pod)
        return evicted

    def _evict_one(self, target: Threshold, met: list[Threshold], summary: Obj,
                   observations: dict[str, Observation]) -> Obj | None:
        by_uid = _stats_by_uid(summary)

        def stats_of(pod: Obj) -> Obj | None:
            return by_uid.get(podutil.uid_of(pod))

        resource = eviction.SIGNAL_RESOURCE[target.signal]
        ranked = eviction.rank(target.signal, self.active_pods(), stats_of,
                               dedicated_imagefs=eviction.dedicated_image_fs(summary))
        for pod in ranked:
            message, _annotations = eviction.eviction_message(resource, pod, stats_of(pod), met=met,
                                                              observations=observations)
            if self._kill(pod, message, condition=True):
                return pod
        return None


def _stats_by_uid(summary: Obj) -> dict[str, Obj]:
    return {str((p.get("podRef") or {}).get("uid")): p for p in summary.get("pods") or []}


def evicted_status(message: str, *, pod: Obj, now: float, condition: bool = True) -> Obj:
    """The status fields an evicted pod reports (merged over the generated status); node-pressure
    evictions add the DisruptionTarget condition, local-storage ones do not."""
    out: Obj = {"phase": podutil.FAILED, "reason": eviction.REASON, "message": message}
    if condition:
        c: Obj = {"type": eviction.DISRUPTION_TARGET, "status": "True", "reason": eviction.TERMINATION_BY_KUBELET,
                  "message": message, "lastTransitionTime": podutil.rfc3339(now)}
        gen = podutil.meta(pod).get("generation")
        if isinstance(gen, int):
            c["observedGeneration"] = gen
        out["conditions"] = [c]
    return out


def rejected_status(result: AdmitResult) -> Obj:
    """rejectPod: what a pod the node does not admit reports."""
    return {"phase": podutil.FAILED, "reason": result.reason, "message": "Pod was rejected: " + result.message}


def apply_status(status: Obj, fields: Obj) -> None:
    """Merge `fields` (from `evicted_status`/`rejected_status`) into a generated status, in place;
    conditions are replaced by type."""
    for key, value in fields.items():
        if key != "conditions":
            status[key] = value
    extra = fields.get("conditions") or []
    if extra:
        types = {c["type"] for c in extra}
        status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") not in types] + \
            [dict(c) for c in extra]
