"""A real container runtime for the kubelet: containerd's CRI v1 service over gRPC.

Public entry points (everything else is internal):

    handle = start_containerd(state_dir)              # daemon.py: config + process; handle.socket, handle.stop()
    write_cni_config(state_dir, pod_cidr)             # daemon.py: the node's bridge network for its pod CIDR
    ensure_local_images(handle.socket)                # images.py: busybox + pause images, built locally, imported
    runtime = ContainerdRuntime(handle.socket)        # client.py: implements cri.Runtime; `await runtime.close()`

Modules, bottom up:

    messages.py   CRI request/response messages that cri.py does not model (msgspec Structs)
    codec.py      protobuf encode/decode of every CRI message used, one field table per message
    client.py     ContainerdRuntime: cri.Runtime over grpc.aio, gRPC codes -> cri errors
    daemon.py     containerd config (its own root/state/socket), start/stop, CNI conflist
    images.py     OCI image tarballs from the machine's static busybox, `ctr images import`

Needs root and Debian's containerd, runc, containernetworking-plugins and busybox-static;
`daemon.missing_binaries()` names what is absent.
"""

from kubecore.kubelet.containerd.client import ContainerdRuntime
from kubecore.kubelet.containerd.daemon import (
    ContainerdError,
    ContainerdHandle,
    start_containerd,
    write_cni_config,
)
from kubecore.kubelet.containerd.images import ensure_local_images

__all__ = [
    "ContainerdError",
    "ContainerdHandle",
    "ContainerdRuntime",
    "ensure_local_images",
    "start_containerd",
    "write_cni_config",
]
