"""Node-pressure eviction, the pure part (upstream pkg/kubelet/eviction: api/types.go,
helpers.go): thresholds, the signals observed in a stats Summary, which pod to evict first, the
eviction message, and pod admission under pressure. `eviction_manager.py` runs it.

Signals and upstream's default hard thresholds (`DEFAULT_EVICTION_HARD`):

| signal | observed in the Summary as available / capacity | default | condition | resource |
| --- | --- | --- | --- | --- |
| memory.available | node.memory.availableBytes / availableBytes + workingSetBytes | <100Mi | MemoryPressure | memory |
| nodefs.available | node.fs.availableBytes / capacityBytes | <10% | DiskPressure | ephemeral-storage |
| nodefs.inodesFree | node.fs.inodesFree / inodes | <5% | DiskPressure | inodes |
| imagefs.available | node.runtime.imageFs.availableBytes / capacityBytes | <15% | DiskPressure | ephemeral-storage |
| imagefs.inodesFree | node.runtime.imageFs.inodesFree / inodes | <5% | DiskPressure | inodes |

A percentage threshold is `capacity x percentage` with the percentage held as a float32, as
upstream's does (10% of 1000 bytes is 100, of 10^12 bytes 100000001490).

Ranking (`rank`), upstream's orderedBy chains; a pod without stats sorts first at every step:
- memory: pods whose working set exceeds their memory request first, then lower
  `spec.priority` first, then the larger working set above the request first.
- disk (ephemeral-storage or inodes): the same with the pod's disk usage, which counts rootfs
  (writable layers), logs and emptyDir volumes when images share the node's file system; with
  a dedicated image fs, nodefs signals count logs + volumes and imagefs signals rootfs only.
  Usage is compared against the ephemeral-storage request (also for inodes, as upstream).

Message (`eviction_message`), exactly upstream's: "The node was low on resource: memory.
Threshold quantity: 100Mi, available: 51200Ki. Container app was using 200Mi, request is 0, has
larger consumption of memory. " (each container over its request adds its sentence).

Local storage limits (`local_storage_violation`, checked on every pass before the thresholds, as
upstream's LocalStorageCapacityIsolation): an emptyDir over its sizeLimit ("Usage of EmptyDir
volume "cache" exceeds the limit "1Mi". "), a pod over the sum of its containers'
ephemeral-storage limits ("Pod ephemeral local storage usage exceeds the total limit of
containers 2Mi. "), a container whose logs (and writable layer, without a dedicated image fs)
exceed its own limit ("Container app exceeded its local ephemeral storage limit "1Mi". ").

Admission (`admit`): without pressure every pod is admitted, critical pods always are; under
MemoryPressure alone, pods that are not BestEffort, and BestEffort pods tolerating the
node.kubernetes.io/memory-pressure:NoSchedule taint; anything else is rejected with reason
"Evicted" and "The node had condition: [MemoryPressure]. ".
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from kubecore.api import quantity
from kubecore.kubelet import podutil

Obj = dict[str, Any]

MEMORY_AVAILABLE = "memory.available"
NODEFS_AVAILABLE = "nodefs.available"
NODEFS_INODES_FREE = "nodefs.inodesFree"
IMAGEFS_AVAILABLE = "imagefs.available"
IMAGEFS_INODES_FREE = "imagefs.inodesFree"
SIGNALS = (MEMORY_AVAILABLE, NODEFS_AVAILABLE, NODEFS_INODES_FREE, IMAGEFS_AVAILABLE, IMAGEFS_INODES_FREE)

DEFAULT_EVICTION_HARD: Mapping[str, str] = MappingProxyType({
    MEMORY_AVAILABLE: "100Mi", NODEFS_AVAILABLE: "10%", NODEFS_INODES_FREE: "5%", IMAGEFS_AVAILABLE: "15%",
    IMAGEFS_INODES_FREE: "5%"})

MEMORY, EPHEMERAL_STORAGE, INODES = "memory", "ephemeral-storage", "inodes"
SIGNAL_RESOURCE = {MEMORY_AVAILABLE: MEMORY, NODEFS_AVAILABLE: EPHEMERAL_STORAGE, NODEFS_INODES_FREE: INODES,
                   IMAGEFS_AVAILABLE: EPHEMERAL_STORAGE, IMAGEFS_INODES_FREE: INODES}
MEMORY_PRESSURE, DISK_PRESSURE = "MemoryPressure", "DiskPressure"
SIGNAL_CONDITION = {s: MEMORY_PRESSURE if s == MEMORY_AVAILABLE else DISK_PRESSURE for s in SIGNALS}

REASON = "Evicted"
DISRUPTION_TARGET = "DisruptionTarget"
TERMINATION_BY_KUBELET = "TerminationByKubelet"
TAINT_MEMORY_PRESSURE = "node.kubernetes.io/memory-pressure"
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
IMMEDIATE_GRACE_SECONDS = 1
"""Hard thresholds kill at once (upstream's immediateEvictionGracePeriodSeconds)."""


class ThresholdError(ValueError):
    """An eviction threshold that cannot be understood."""


@dataclass(frozen=True)
class Threshold:
    signal: str
    amount: quantity.Quantity | None = None
    percentage: float = 0.0
    """A float32 value in (0, 1], when the threshold is a percentage."""

    def value(self, capacity: int) -> quantity.Quantity:
        """GetThresholdQuantity: the threshold in bytes (or inodes) for this capacity."""
        if self.amount is not None:
            return self.amount
        return quantity.Quantity(int(capacity * self.percentage) * quantity.NANO, quantity.BINARY_SI)


def _float32(x: float) -> float:
    return float(struct.unpack("f", struct.pack("f", x))[0])


def parse_thresholds(spec: Mapping[str, str]) -> list[Threshold]:
    """--eviction-hard (signal -> "100Mi" or "10%"), in SIGNALS order; "0%" disables a signal."""
    out = []
    for signal, raw in spec.items():
        if signal not in SIGNALS:
            raise ThresholdError(f"unsupported eviction signal {signal!r} (known: {', '.join(SIGNALS)})")
        text = str(raw).strip()
        if text.endswith("%"):
            try:
                pct = float(text[:-1])
            except ValueError:
                raise ThresholdError(f"invalid percentage {text!r} for {signal}") from None
            if not 0 <= pct <= 100:
                raise ThresholdError(f"eviction percentage threshold {signal} must be >= 0% and <= 100%: {text}")
            if pct == 0:
                continue
            out.append(Threshold(signal, percentage=_float32(pct / 100)))
            continue
        try:
            q = quantity.parse(text)
        except quantity.QuantityError as e:
            raise ThresholdError(f"invalid quantity {text!r} for {signal}: {e}") from None
        if q.nanos < 0:
            raise ThresholdError(f"eviction threshold {signal} must be positive: {text}")
        out.append(Threshold(signal, amount=q))
    return sorted(out, key=lambda t: SIGNALS.index(t.signal))


def parse_flag(text: str) -> dict[str, str]:
    """The kubelet's --eviction-hard: "memory.available<100Mi,nodefs.available<10%" -> signal ->
    threshold, each signal checked. As upstream, the flag replaces the defaults: a signal it does
    not name has no threshold (so "" turns hard eviction off)."""
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        signal, sep, value = part.partition("<")
        if not sep or not signal.strip() or not value.strip():
            raise ThresholdError(f"malformed eviction threshold {part!r}: expected signal<quantity, "
                                 "e.g. memory.available<100Mi or nodefs.available<10%")
        out[signal.strip()] = value.strip()
    parse_thresholds(out)
    return out


def eviction_flag(spec: Mapping[str, str]) -> str:
    """The --eviction-hard text of a threshold map (`parse_flag`'s inverse)."""
    return ",".join(f"{signal}<{value}" for signal, value in spec.items())


# -- observations ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Observation:
    available: int
    capacity: int


def _int(section: Obj | None, key: str) -> int | None:
    v = (section or {}).get(key)
    return int(v) if v is not None else None


def observe(summary: Obj) -> dict[str, Observation]:
    """makeSignalObservations: what the Summary says about each signal (absent figures: no signal)."""
    node = summary.get("node") or {}
    out: dict[str, Observation] = {}
    mem = node.get("memory")
    available, working = _int(mem, "availableBytes"), _int(mem, "workingSetBytes")
    if available is not None and working is not None:
        out[MEMORY_AVAILABLE] = Observation(available, available + working)
    for prefix, fs in (("nodefs", node.get("fs")), ("imagefs", (node.get("runtime") or {}).get("imageFs"))):
        avail, cap = _int(fs, "availableBytes"), _int(fs, "capacityBytes")
        if avail is not None and cap is not None:
            out[f"{prefix}.available"] = Observation(avail, cap)
        free, inodes = _int(fs, "inodesFree"), _int(fs, "inodes")
        if free is not None and inodes is not None:
            out[f"{prefix}.inodesFree"] = Observation(free, inodes)
    return out


def thresholds_met(thresholds: list[Threshold], observations: dict[str, Observation]) -> list[Threshold]:
    """The thresholds whose signal's availability is below them."""
    met = []
    for t in thresholds:
        obs = observations.get(t.signal)
        if obs is not None and obs.available * quantity.NANO < t.value(obs.capacity).nanos:
            met.append(t)
    return met


def describe(met: list[Threshold], observations: dict[str, Observation]) -> str:
    """What crossed which threshold, for the log: "imagefs.available is 14.2% (35.8Gi of 252.0Gi),
    below 15% (37.8Gi)"; several joined by "; "."""
    parts = []
    for t in met:
        obs = observations.get(t.signal)
        if obs is None:
            continue
        unit = _count if SIGNAL_RESOURCE[t.signal] == INODES else _gib
        share = f"{obs.available * 100 / obs.capacity:.1f}% " if obs.capacity else ""
        limit = unit(t.value(obs.capacity).nanos // quantity.NANO)
        wanted = f"{t.percentage * 100:.6g}% ({limit})" if t.amount is None else limit
        parts.append(f"{t.signal} is {share}({unit(obs.available)} of {unit(obs.capacity)}), below {wanted}")
    return "; ".join(parts)


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f}Gi" if n >= 2**30 else f"{n / 2**20:.1f}Mi"


def _count(n: int) -> str:
    return f"{n:,}"


def by_eviction_priority(thresholds: list[Threshold]) -> list[Threshold]:
    """Memory first (reclaiming memory is the most urgent), others in their order."""
    return sorted(thresholds, key=lambda t: t.signal != MEMORY_AVAILABLE)


def node_conditions(thresholds: list[Threshold]) -> list[str]:
    out: list[str] = []
    for t in thresholds:
        c = SIGNAL_CONDITION[t.signal]
        if c not in out:
            out.append(c)
    return out


def dedicated_image_fs(summary: Obj) -> bool:
    """Whether images live on a file system of their own (capacity or inodes differ from nodefs)."""
    node = summary.get("node") or {}
    fs, image = node.get("fs") or {}, (node.get("runtime") or {}).get("imageFs") or {}
    if not image.get("capacityBytes"):
        return False
    return bool(fs.get("capacityBytes") != image.get("capacityBytes") or fs.get("inodes") != image.get("inodes"))


# -- pods -----------------------------------------------------------------------------------------

def pod_priority(pod: Obj) -> int:
    p = podutil.spec(pod).get("priority")
    return int(p) if p is not None else 0


def is_critical(pod: Obj) -> bool:
    """IsCriticalPod: static or mirror pods, or system-critical priority."""
    ann = podutil.pod_annotations(pod)
    if ann.get("kubernetes.io/config.source", "api") != "api" or "kubernetes.io/config.mirror" in ann:
        return True
    return pod_priority(pod) >= SYSTEM_CRITICAL_PRIORITY


def _request_q(container: Obj, resource: str) -> quantity.Quantity:
    raw = ((container.get("resources") or {}).get("requests") or {}).get(resource)
    if raw is None:
        return quantity.Quantity(0, quantity.BINARY_SI)
    try:
        return quantity.parse(str(raw))
    except quantity.QuantityError:
        return quantity.Quantity(0, quantity.BINARY_SI)


def pod_request(pod: Obj, resource: str) -> int:
    """podRequest in bytes: the containers' sum, or the largest init container's if larger."""
    total = sum(_request_q(c, resource).nanos for c in podutil.containers(pod))
    init = max((_request_q(c, resource).nanos for c in podutil.init_containers(pod)), default=0)
    return max(total, init) // quantity.NANO


ROOTFS, LOGS, VOLUMES = "rootfs", "logs", "volumes"


def disk_usage(stats: Obj, measure: tuple[str, ...], resource: str) -> int:
    """podDiskUsage: bytes (ephemeral-storage) or inodes used in the measured places."""
    key = "usedBytes" if resource == EPHEMERAL_STORAGE else "inodesUsed"
    total = 0
    for c in stats.get("containers") or []:
        for part in (p for p in (ROOTFS, LOGS) if p in measure):
            total += int((c.get(part) or {}).get(key) or 0)
    if VOLUMES in measure:
        total += sum(int(v.get(key) or 0) for v in stats.get("volume") or [])
    return total


def _working_set(stats: Obj) -> int:
    return int((stats.get("memory") or {}).get("workingSetBytes") or 0)


def _cmp(a: int, b: int) -> int:
    return (a > b) - (a < b)


def _cmp_bool(a: bool, b: bool) -> int:
    """cmpBool: true first."""
    return 0 if a == b else (-1 if a else 1)


StatsOf = Callable[[Obj], Obj | None]
Usage = Callable[[Obj], int]
Cmp = Callable[[Obj, Obj], int]


def _exceeds(stats_of: StatsOf, usage: Usage, request: Callable[[Obj], int]) -> Cmp:
    def cmp(p1: Obj, p2: Obj) -> int:
        s1, s2 = stats_of(p1), stats_of(p2)
        if s1 is None or s2 is None:
            return _cmp_bool(s1 is None, s2 is None)
        return _cmp_bool(usage(s1) > request(p1), usage(s2) > request(p2))
    return cmp


def _priority(p1: Obj, p2: Obj) -> int:
    return _cmp(pod_priority(p1), pod_priority(p2))


def _above_request(stats_of: StatsOf, usage: Usage, request: Callable[[Obj], int]) -> Cmp:
    def cmp(p1: Obj, p2: Obj) -> int:
        s1, s2 = stats_of(p1), stats_of(p2)
        if s1 is None or s2 is None:
            return _cmp_bool(s1 is None, s2 is None)
        return _cmp(usage(s2) - request(p2), usage(s1) - request(p1))
    return cmp


def _ordered(pods: list[Obj], cmps: list[Cmp]) -> list[Obj]:
    def chain(p1: Obj, p2: Obj) -> int:
        for c in cmps:
            r = c(p1, p2)
            if r:
                return r
        return 0
    return sorted(pods, key=functools.cmp_to_key(chain))


def rank(signal: str, pods: list[Obj], stats_of: StatsOf, *, dedicated_imagefs: bool = False) -> list[Obj]:
    """The pods in eviction order for `signal` (see the module docstring)."""
    if signal == MEMORY_AVAILABLE:
        usage: Usage = _working_set
        request: Callable[[Obj], int] = functools.partial(pod_request, resource=MEMORY)
        return _ordered(pods, [_exceeds(stats_of, usage, request), _priority,
                               _above_request(stats_of, usage, request)])
    resource = SIGNAL_RESOURCE[signal]
    if not dedicated_imagefs:
        measure: tuple[str, ...] = (ROOTFS, LOGS, VOLUMES)
    else:
        measure = (ROOTFS,) if signal.startswith("imagefs") else (LOGS, VOLUMES)
    disk = functools.partial(disk_usage, measure=measure, resource=resource)
    ephemeral = functools.partial(pod_request, resource=EPHEMERAL_STORAGE)
    exceed_req = ephemeral if resource == EPHEMERAL_STORAGE else (lambda _p: 0)
    return _ordered(pods, [_exceeds(stats_of, disk, exceed_req), _priority, _above_request(stats_of, disk, ephemeral)])


# -- messages and admission -----------------------------------------------------------------------

def _q(n: int) -> str:
    return quantity.Quantity(n * quantity.NANO, quantity.BINARY_SI).canonical()


def eviction_message(resource: str, pod: Obj, stats: Obj | None, *, met: list[Threshold],
                     observations: dict[str, Observation]) -> tuple[str, dict[str, str]]:
    """evictionMessage: the message and the event's annotations."""
    message = f"The node was low on resource: {resource}. "
    for t in met:
        obs = observations.get(t.signal)
        if SIGNAL_RESOURCE[t.signal] == resource and obs is not None:
            message += f"Threshold quantity: {t.value(obs.capacity).canonical()}, available: {_q(obs.available)}. "
            break
    if stats is None:
        return message, {}
    offending, usages = [], []
    specs = {str(c.get("name")): c for c in podutil.containers(pod)}
    for cs in stats.get("containers") or []:
        spec = specs.get(str(cs.get("name")))
        if spec is None:
            continue
        request = _request_q(spec, resource)
        if resource == EPHEMERAL_STORAGE:
            root, logs = cs.get("rootfs") or {}, cs.get("logs") or {}
            if root.get("usedBytes") is None or logs.get("usedBytes") is None:
                continue
            used = int(root["usedBytes"]) + int(logs["usedBytes"])
        elif resource == MEMORY:
            ws = (cs.get("memory") or {}).get("workingSetBytes")
            if ws is None:
                continue
            used = int(ws)
        else:
            continue
        if used * quantity.NANO > request.nanos:
            message += (f"Container {spec.get('name')} was using {_q(used)}, request is {request.canonical()}, "
                        f"has larger consumption of {resource}. ")
            offending.append(str(spec.get("name")))
            usages.append(_q(used))
    return message, {"offending_containers": ",".join(offending), "offending_containers_usage": ",".join(usages),
                     "starved_resource": resource}


# -- local storage limits (LocalStorageCapacityIsolation) ------------------------------------------

def _limit_q(container: Obj, resource: str) -> quantity.Quantity | None:
    raw = ((container.get("resources") or {}).get("limits") or {}).get(resource)
    if raw is None:
        return None
    try:
        return quantity.parse(str(raw))
    except quantity.QuantityError:
        return None


def pod_ephemeral_limit(pod: Obj) -> quantity.Quantity | None:
    """PodLimits' ephemeral-storage: regular and sidecar containers summed, at least the largest
    other init container's; None when no container sets one."""
    total = init = 0
    found = False
    for c in podutil.containers(pod):
        q = _limit_q(c, EPHEMERAL_STORAGE)
        if q is not None:
            total, found = total + q.nanos, True
    for c in podutil.init_containers(pod):
        q = _limit_q(c, EPHEMERAL_STORAGE)
        if q is None:
            continue
        found = True
        if podutil.is_restartable_init_container(c):
            total += q.nanos
        else:
            init = max(init, q.nanos)
    return quantity.Quantity(max(total, init), quantity.BINARY_SI) if found else None


def local_storage_violation(pod: Obj, stats: Obj, *, dedicated_imagefs: bool) -> str | None:
    """localStorageEviction for one pod: the message when an emptyDir is over its sizeLimit, the
    pod over its ephemeral-storage limit, or a container over its own (logs, plus its writable
    layer when images share the node's file system); else None."""
    used_by_volume = {str(v.get("name")): int(v.get("usedBytes") or 0) for v in stats.get("volume") or []}
    for vol in podutil.spec(pod).get("volumes") or []:
        empty = vol.get("emptyDir")
        limit = (empty or {}).get("sizeLimit") if isinstance(empty, dict) else None
        used = used_by_volume.get(str(vol.get("name")))
        if limit is None or used is None:
            continue
        try:
            size = quantity.parse(str(limit))
        except quantity.QuantityError:
            continue
        if size.nanos > 0 and used * quantity.NANO > size.nanos:
            return f'Usage of EmptyDir volume "{vol.get("name")}" exceeds the limit "{size.canonical()}". '
    pod_limit = pod_ephemeral_limit(pod)
    used_total = int((stats.get("ephemeral-storage") or {}).get("usedBytes") or 0)
    if pod_limit is not None and used_total * quantity.NANO > pod_limit.nanos:
        return f"Pod ephemeral local storage usage exceeds the total limit of containers {pod_limit.canonical()}. "
    limits = {str(c.get("name")): q for c in podutil.containers(pod)
              if (q := _limit_q(c, EPHEMERAL_STORAGE)) is not None and q.nanos > 0}
    for cs in stats.get("containers") or []:
        q = limits.get(str(cs.get("name")))
        if q is None:
            continue
        used = int((cs.get("logs") or {}).get("usedBytes") or 0)
        if not dedicated_imagefs:
            used += int((cs.get("rootfs") or {}).get("usedBytes") or 0)
        if used * quantity.NANO > q.nanos:
            return f'Container {cs.get("name")} exceeded its local ephemeral storage limit "{q.canonical()}". '
    return None


def _tolerates_memory_pressure(pod: Obj) -> bool:
    for t in podutil.spec(pod).get("tolerations") or []:
        if t.get("effect") not in (None, "", "NoSchedule"):
            continue
        key, op = t.get("key") or "", t.get("operator") or "Equal"
        if not key and op == "Exists":
            return True
        if key == TAINT_MEMORY_PRESSURE and (op == "Exists" or (op == "Equal" and not t.get("value"))):
            return True
    return False


@dataclass(frozen=True)
class AdmitResult:
    admit: bool
    reason: str = ""
    message: str = ""


def admit(pod: Obj, conditions: list[str]) -> AdmitResult:
    """The eviction manager's admit handler (see the module docstring)."""
    if not conditions or is_critical(pod):
        return AdmitResult(True)
    if conditions == [MEMORY_PRESSURE]:
        if podutil.qos_class(pod) != "BestEffort" or _tolerates_memory_pressure(pod):
            return AdmitResult(True)
    return AdmitResult(False, REASON, f"The node had condition: [{' '.join(conditions)}]. ")
