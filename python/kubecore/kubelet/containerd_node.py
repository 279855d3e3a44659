"""A kubelet for this machine over a private containerd (`kubecore kubelet --runtime containerd`,
and `kubecore up` with the containerd runtime), the counterpart of `hollow.sim_kubelet`.

    node = await containerd_kubelet(host, config, node_ip=ip, state_dir=root_dir)
    await host.start() ... await host.stop()
    await node.stop()

What it does, in order (each step is the other package's, `kubecore.kubelet.containerd`):
1. start containerd with everything under `<state_dir>/containerd/` (in a thread: it blocks for
   a few seconds until CRI answers);
2. import the locally built busybox and sandbox images (no registry is reachable);
3. build the kubelet over `CniRuntime`: the containerd CRI client whose `update_runtime_config`
   also (re)writes the node's CNI bridge network for the pod CIDR, since containerd 1.6 only
   templates one when configured to. The kubelet passes the CIDR at start (`config.pod_cidr`)
   and again whenever the Node's spec.podCIDR appears or changes;
4. probes and hooks run for real (`RealHandlers`: exec over CRI, HTTP and TCP to the pod IP).

`stop()` closes the client and stops containerd; containers keep running in their shims (as with
any containerd restart) and a kubelet started again over the same state dir adopts them.

`unusable()` says why this machine cannot run such a node (not root, packages missing), or None:
what `kubecore up --runtime auto` asks before choosing containerd over the simulated runtime.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from kubecore.client import errors
from kubecore.client.rest import RestClient
from kubecore.kubelet import cri
from kubecore.kubelet.config import KubeletConfig
from kubecore.kubelet.containerd import ContainerdHandle, ContainerdRuntime, ensure_local_images, start_containerd
from kubecore.kubelet.containerd import daemon, images
from kubecore.kubelet.handlers import RealHandlers
from kubecore.kubelet.host import KubeletHost
from kubecore.kubelet.kubelet import Kubelet

log = logging.getLogger(__name__)
DEFAULT_POD_CIDR = "10.244.0.0/24"
"""The pod CIDR of a node that has none from a flag or its Node object."""


def unusable() -> str | None:
    """Why a containerd node cannot run here (None: it can)."""
    if os.geteuid() != 0:
        return "not running as root"
    missing = daemon.missing_binaries()
    if missing:
        return f"missing {', '.join(missing)} (apt-get install containerd runc containernetworking-plugins)"
    try:
        images.find_busybox()
    except daemon.ContainerdError as e:
        return str(e)
    return None


class CniRuntime(ContainerdRuntime):
    """The containerd CRI client, writing the node's CNI network when told the pod CIDR."""

    def __init__(self, socket: str, *, state_dir: str) -> None:
        super().__init__(socket)
        self.state_dir = state_dir
        self.pod_cidr = ""

    async def update_runtime_config(self, runtime_config: cri.RuntimeConfig) -> None:
        cidr = runtime_config.network_config.pod_cidr
        if cidr and cidr != self.pod_cidr:
            await asyncio.to_thread(daemon.write_cni_config, self.state_dir, cidr)
            self.pod_cidr = cidr
            log.info("pod network %s written for containerd in %s", cidr, self.state_dir)
        await super().update_runtime_config(runtime_config)


@dataclass
class ContainerdNode:
    handle: ContainerdHandle
    runtime: CniRuntime
    handlers: RealHandlers
    kubelet: Kubelet

    async def stop(self) -> None:
        await self.handlers.close()
        await self.runtime.close()
        await asyncio.to_thread(self.handle.stop)


async def node_pod_cidr(rest: RestClient, node_name: str) -> str:
    """The Node's spec.podCIDR, "" when it has none or does not exist yet."""
    try:
        node = await rest.get_json(f"/api/v1/nodes/{node_name}")
    except errors.NotFound:
        return ""
    return str(((node or {}).get("spec") or {}).get("podCIDR") or "")


async def containerd_kubelet(host: KubeletHost, config: KubeletConfig, *, node_ip: str,
                             state_dir: str | Path) -> ContainerdNode:
    """Start containerd under `state_dir` and add a kubelet over it to `host` (see the module
    docstring); `config.pod_cidr` must be set. Raises `daemon.ContainerdError` when containerd
    cannot start."""
    if not config.pod_cidr:
        raise ValueError("a containerd node needs a pod CIDR")
    state = str(Path(state_dir).absolute())
    handle = await asyncio.to_thread(start_containerd, state)
    try:
        await asyncio.to_thread(ensure_local_images, handle.socket)
        runtime = CniRuntime(handle.socket, state_dir=state)
        handlers = RealHandlers(runtime, clock=host.clock)
        kubelet = Kubelet(config, runtime=runtime, handlers=handlers, host=host, node_ip=node_ip)
        host.add(kubelet)
    except BaseException:
        await asyncio.to_thread(handle.stop)
        raise
    return ContainerdNode(handle=handle, runtime=runtime, handlers=handlers, kubelet=kubelet)
