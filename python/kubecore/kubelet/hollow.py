"""Simulated kubelets: one (`sim_kubelet`, for `kubecore kubelet --runtime sim`) or many hollow
nodes in one host (`add_hollow_nodes`, for `kubecore hollow-nodes`), like kubemark/kwok.

Each hollow node is a full kubelet (its own Node, Lease, status, pod workers, PLEG, probes)
over its own `SimRuntime`; what they share is the host's (one client, two watches, one timer
heap, one status writer). Node i of a host is named `<prefix><i>`, has InternalIP
`hollow_node_ip(i)` (172.16.0.1 upwards) and, until the control plane assigns spec.podCIDR, the
pod CIDR `default_pod_cidr(index=i)` (10.128.0.0/24 upwards).

Logs, exec and friends: one `KubeletServer` (`server.py`) serves every node of the host. Each node
reports `kubelet_port` in its daemonEndpoints; the API server dials a node's InternalIP, which
for hollow nodes is not a real address, so a host that serves sets `node_ip` to the address its
server listens on and every node reports that one (as kwok does). Simulated containers write log
files only when their pod asks (`sim/logs.py`), under `log_root` when it is set.

Defaults that differ from a single kubelet, because the runtime reports its own events and a
thousand nodes share two cores: PLEG relisting every 60 s (the safety net; runtime events do the
work), housekeeping every 30 s, no periodic pod resync (pods are synced on events, probe results
and back-off ends), and no Events written unless asked (`record_events`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kubecore.kubelet.config import KUBELET_PORT, KubeletConfig
from kubecore.kubelet.host import KubeletHost
from kubecore.kubelet.kubelet import Kubelet
from kubecore.kubelet.sim.behaviour import SimHandlers
from kubecore.kubelet.sim.runtime import RUNTIME_NAME, SimRuntime, default_pod_cidr, hollow_node_ip

HOLLOW_RELIST_PERIOD = 60.0
HOLLOW_HOUSEKEEPING_PERIOD = 30.0


def sim_kubelet(host: KubeletHost, config: KubeletConfig, *, node_ip: str, index: int | None = None,
                runtime: SimRuntime | None = None, log_root: str | None = None) -> Kubelet:
    """A kubelet over a SimRuntime (a fresh one on the host's timers unless given: a runtime that
    outlives a kubelet is how a restart is simulated), added to `host`."""
    cidr = config.pod_cidr or default_pod_cidr(index=index, node_name=config.node_name)
    runtime = runtime or SimRuntime(clock=host.clock, timers=host.timers, pod_cidr=cidr, log_root=log_root)
    kubelet = Kubelet(config, runtime=runtime, handlers=SimHandlers(runtime, clock=host.clock), host=host,
                      node_ip=node_ip, runtime_name=RUNTIME_NAME)
    host.add(kubelet)
    return kubelet


@dataclass
class HollowOptions:
    count: int
    prefix: str = "hollow-node-"
    first_index: int = 0
    cpu: str = "4"
    memory: str = "32Gi"
    pods: int = 110
    ephemeral_storage: str = "100Gi"
    instance_type: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    relist_period: float = HOLLOW_RELIST_PERIOD
    housekeeping_period: float = HOLLOW_HOUSEKEEPING_PERIOD
    resync_interval: float = 0.0
    record_events: bool = False
    node_ip: str | None = None
    """Every node's InternalIP (the kubelet server's address), instead of its own 172.16.x.y."""
    kubelet_port: int = KUBELET_PORT
    log_root: str | None = None

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ValueError(f"count must be at least 1, not {self.count}")


def add_hollow_nodes(host: KubeletHost, options: HollowOptions) -> list[Kubelet]:
    """Create `options.count` hollow kubelets in `host` (see the module docstring)."""
    out = []
    for i in range(options.first_index, options.first_index + options.count):
        name = f"{options.prefix}{i}"
        config = KubeletConfig(
            node_name=name, cpu=options.cpu, memory=options.memory, pods=options.pods,
            ephemeral_storage=options.ephemeral_storage, instance_type=options.instance_type,
            labels=dict(options.labels), relist_period=options.relist_period,
            housekeeping_period=options.housekeeping_period, resync_interval=options.resync_interval,
            record_events=options.record_events, kubelet_port=options.kubelet_port,
            manage_resources=False)  # no GC/eviction on hollow nodes (node_resources.py)
        out.append(sim_kubelet(host, config, node_ip=options.node_ip or hollow_node_ip(i), index=i,
                               log_root=options.log_root))
    return out
