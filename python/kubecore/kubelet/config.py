"""A kubelet's configuration (the subset of KubeletConfiguration and kubelet flags this kubelet
has), with upstream's defaults, and what it reads from the machine for a real node.

Times (seconds) and their upstream names:

| field | upstream | default |
| --- | --- | --- |
| `node_status_update_frequency` | nodeStatusUpdateFrequency: how often status is computed | 10 |
| `node_status_report_frequency` | nodeStatusReportFrequency: status is written at least this often | 300 |
| `node_lease_duration` | nodeLeaseDurationSeconds; the Lease is renewed every quarter of it | 40 |
| `resync_interval` | syncFrequency: every pod is synced at least this often | 60 |
| `relist_period` | the PLEG relist period (1 s; with runtime events 300 s upstream) | 1 |
| `housekeeping_period` | housekeepingPeriod: orphaned runtime pods are cleaned up | 2 |
| `max_images` | nodeStatusMaxImages | 50 |
| `resource_policy.eviction_pressure_transition_period` | evictionPressureTransitionPeriod | 300 |
| `resource_policy.image_gc_high/low_threshold_percent` | imageGCHigh/LowThresholdPercent | 85 / 80 |
| `resource_policy.image_minimum_gc_age` | imageMinimumGCAge | 120 |

Capacity comes from flags (`cpu`, `memory`, `pods`, `ephemeral_storage`; hollow and simulated
nodes) or, for a real node, from the machine (`machine_capacity`: CPUs, MemTotal, the root
file system). Allocatable equals capacity minus `reserved` (kube-reserved + system-reserved),
with pods never reduced.
"""

from __future__ import annotations

import os
import platform
import shutil
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kubecore import __version__
from kubecore.api import quantity
from kubecore.kubelet.eviction import DEFAULT_EVICTION_HARD, parse_thresholds
from kubecore.kubelet.gc import ImageGCPolicy

KUBE_VERSION = "1.36"
"""The Kubernetes minor this kubelet reports (the same as kubecore's API server)."""
KUBELET_VERSION = f"v{KUBE_VERSION}.0+kubecore.{__version__}"
KUBELET_PORT = 10250
DEFAULT_MAX_PODS = 110

LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_OS = "kubernetes.io/os"
LABEL_ARCH = "kubernetes.io/arch"
LABEL_INSTANCE_TYPE = "node.kubernetes.io/instance-type"
BETA_LABEL_OS = "beta.kubernetes.io/os"
BETA_LABEL_ARCH = "beta.kubernetes.io/arch"
BETA_LABEL_INSTANCE_TYPE = "beta.kubernetes.io/instance-type"
DEFAULT_LABELS = (LABEL_HOSTNAME, LABEL_OS, LABEL_ARCH, LABEL_INSTANCE_TYPE, BETA_LABEL_OS, BETA_LABEL_ARCH,
                  BETA_LABEL_INSTANCE_TYPE)
"""The labels the kubelet owns and reconciles on re-registration (updateDefaultLabels)."""


def go_arch() -> str:
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "i686": "386", "i386": "386"}.get(machine, machine)


def validate_quantity(value: str, what: str) -> str:
    """The canonical form of a resource quantity flag, or ValueError naming the flag."""
    try:
        return quantity.parse(str(value)).canonical()
    except quantity.QuantityError as e:
        raise ValueError(f"{what}: {value!r} is not a quantity ({e})") from None


@dataclass(frozen=True)
class ResourcePolicy:
    """Garbage collection and eviction settings (KubeletConfiguration's evictionHard,
    evictionPressureTransitionPeriod, imageGCHigh/LowThresholdPercent, imageMinimumGCAge), checked
    when made. Kept apart from KubeletConfig and shared by default: a config with more than 30
    attributes loses CPython's key-sharing instance dict and costs a thousand hollow nodes ~1.3 MB."""

    eviction_hard: Mapping[str, str] = field(default_factory=lambda: DEFAULT_EVICTION_HARD)
    """signal -> threshold ("100Mi", "10%"; "0%" disables a signal)."""
    eviction_pressure_transition_period: float = 300.0
    image_gc_high_threshold_percent: int = 85
    image_gc_low_threshold_percent: int = 80
    image_minimum_gc_age: float = 120.0

    def __post_init__(self) -> None:
        parse_thresholds(self.eviction_hard)  # ThresholdError (a ValueError) names the bad one
        self.image_gc_policy()

    def image_gc_policy(self) -> ImageGCPolicy:
        return ImageGCPolicy(self.image_gc_high_threshold_percent, self.image_gc_low_threshold_percent,
                             self.image_minimum_gc_age)


DEFAULT_RESOURCE_POLICY = ResourcePolicy()


@dataclass
class KubeletConfig:
    node_name: str
    cpu: str = "4"
    memory: str = "32Gi"
    pods: int = DEFAULT_MAX_PODS
    ephemeral_storage: str = "100Gi"
    reserved: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    """--node-labels: extra labels set at registration."""
    taints: list[dict[str, str]] = field(default_factory=list)
    """--register-with-taints."""
    instance_type: str | None = None
    node_ip: str | None = None
    hostname: str | None = None
    pod_cidr: str | None = None
    """The pod CIDR the runtime uses when the node's spec.podCIDR is empty."""
    root_dir: str | None = None
    """--root-dir: where pod volumes are written (<root>/pods/<uid>/volumes/...); None (hollow
    nodes) writes nothing (see volumes.py)."""
    operating_system: str = "linux"
    architecture: str = field(default_factory=go_arch)
    register_node: bool = True
    node_status_update_frequency: float = 10.0
    node_status_report_frequency: float = 300.0
    node_lease_duration: int = 40
    resync_interval: float = 60.0
    relist_period: float = 1.0
    housekeeping_period: float = 2.0
    max_images: int = 50
    record_events: bool = True
    kubelet_port: int = KUBELET_PORT
    manage_resources: bool = True
    """Container/image GC and node-pressure eviction (`node_resources.py`); hollow nodes turn it off."""
    resource_policy: ResourcePolicy = field(default_factory=lambda: DEFAULT_RESOURCE_POLICY)
    """Their settings: one shared default object (see `ResourcePolicy`)."""

    def __post_init__(self) -> None:
        if not self.node_name:
            raise ValueError("a node name is required")
        self.cpu = validate_quantity(self.cpu, "cpu")
        self.memory = validate_quantity(self.memory, "memory")
        self.ephemeral_storage = validate_quantity(self.ephemeral_storage, "ephemeral-storage")
        if self.pods < 1:
            raise ValueError(f"pods must be at least 1, not {self.pods}")
        self.reserved = {k: validate_quantity(v, f"reserved {k}") for k, v in self.reserved.items()}

    @property
    def lease_renew_interval(self) -> float:
        """upstream: renewInterval = 0.25 * leaseDuration."""
        return 0.25 * self.node_lease_duration

    def capacity(self) -> dict[str, str]:
        return {"cpu": self.cpu, "ephemeral-storage": self.ephemeral_storage, "memory": self.memory,
                "pods": str(self.pods)}

    def allocatable(self) -> dict[str, str]:
        out = {}
        for name, value in self.capacity().items():
            reserved = self.reserved.get(name)
            if reserved is None or name == "pods":
                out[name] = value
                continue
            left = quantity.parse(value).nanos - quantity.parse(reserved).nanos
            fmt = quantity.parse(value).format
            out[name] = quantity.Quantity(max(0, left), fmt).canonical()
        return out


def machine_capacity() -> dict[str, str]:
    """cpu, memory and ephemeral-storage of this machine (cAdvisor's MachineInfo, roughly)."""
    cpu = str(os.cpu_count() or 1)
    memory = "0"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = f"{int(line.split()[1])}Ki"
                break
    except OSError:
        pass
    disk = shutil.disk_usage("/")
    return {"cpu": cpu, "memory": memory, "ephemeral-storage": f"{disk.total // 1024}Ki"}


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def _os_image() -> str:
    for line in _read("/etc/os-release").splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip('"')
    return platform.system()


@dataclass(frozen=True)
class MachineInfo:
    """What nodeInfo reports about the host (hollow nodes share the host's)."""

    machine_id: str
    system_uuid: str
    boot_id: str
    kernel_version: str
    os_image: str

    @classmethod
    def read(cls) -> MachineInfo:
        return cls(machine_id=_read("/etc/machine-id"), system_uuid=_read("/sys/class/dmi/id/product_uuid"),
                   boot_id=_read("/proc/sys/kernel/random/boot_id"), kernel_version=platform.release(),
                   os_image=_os_image())


def default_node_ip() -> str:
    """The address this machine uses to reach the outside (no packet is sent), else loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))
            return str(s.getsockname()[0])
        except OSError:
            return "127.0.0.1"
