"""Running a private containerd for one kubecore node: its config, its CNI network, its process.

    handle = start_containerd(state_dir)        # writes the config, starts containerd, waits for CRI
    write_cni_config(state_dir, "10.88.0.0/24")  # the pod network (containerd reloads it by itself)
    ... ContainerdRuntime(handle.socket) ...
    handle.stop()

Everything lives under `<state_dir>/containerd/`: root, state, socket, config, CNI config and the
host-local IPAM leases. Only paths containerd 1.6 cannot move are shared with a system containerd:
shim sockets in /run/containerd/s (named by a hash of our socket path, so they never collide) and
libcni's result cache in /var/lib/cni (keyed by container id).

The config (containerd 1.6 keys, `containerd config default`): the CRI plugin with runc through
the v2 shim and the cgroupfs driver (`SystemdCgroup = false`: kubecore's nodes have no systemd),
the overlayfs snapshotter, CNI plugins from /usr/lib/cni (Debian's containernetworking-plugins),
the sandbox image kubecore builds itself (`images.PAUSE_IMAGE`), runc's state under our state dir,
unprivileged ICMP in pods (so `ping` works without CAP_NET_RAW), the streaming server on a free
loopback port, and no metrics or debug listeners. Where this process lacks CAP_SYS_RESOURCE (a
node inside a container or a restricted VM), `restrict_oom_score_adj` keeps pods' oom_score_adj
at or above containerd's own instead of failing every sandbox. Snapshotters that cannot work here (aufs, btrfs, zfs, devmapper) are disabled.

The pod network (`write_cni_config`) is one bridge per node with the node's pod CIDR: the bridge
is the pods' gateway and masquerades their traffic leaving the CIDR (`isGateway`, `ipMasq`),
host-local IPAM hands out addresses, portmap serves `hostPort`. The loopback interface of each pod
is brought up by containerd itself (it adds CNI's loopback plugin to every sandbox).

`start_containerd` is synchronous (it blocks until the CRI service answers Version, a few seconds);
asyncio callers run it with `asyncio.to_thread`.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import grpc
import msgspec

from kubecore.kubelet import cri
from kubecore.kubelet.containerd import codec
from kubecore.kubelet.containerd import messages as m

CNI_BIN_DIR = "/usr/lib/cni"
NETWORK_NAME = "kubecore"
BINARIES = ("containerd", "containerd-shim-runc-v2", "runc", "ctr")
CNI_PLUGINS = ("bridge", "host-local", "portmap", "loopback")
SANDBOX_IMAGE = "kubecore.local/pause:1.0"
"""The sandbox image: built locally (`images.py`), under a registry name that never resolves, so it
is never pulled from, or mistaken for, upstream's pause image."""
CAP_SYS_RESOURCE = 24
START_TIMEOUT = 60.0
STOP_TIMEOUT = 20.0


class ContainerdError(Exception):
    """containerd is missing, did not start, or its config cannot be written."""


class Paths:
    """Where one node's containerd keeps everything (all under `<state_dir>/containerd`)."""

    def __init__(self, state_dir: str | os.PathLike[str]) -> None:
        self.base = Path(state_dir).absolute() / "containerd"
        self.root = self.base / "root"
        self.state = self.base / "state"
        self.socket = self.base / "containerd.sock"
        self.config = self.base / "config.toml"
        self.log = self.base / "containerd.log"
        self.cni_conf_dir = self.base / "cni" / "net.d"
        self.cni_data_dir = self.base / "cni" / "networks"
        self.opt = self.base / "opt"


def missing_binaries() -> list[str]:
    """The executables and CNI plugins a node needs that this machine lacks (empty: all there)."""
    missing = [b for b in BINARIES if shutil.which(b) is None]
    missing += [f"{CNI_BIN_DIR}/{p}" for p in CNI_PLUGINS if not os.access(f"{CNI_BIN_DIR}/{p}", os.X_OK)]
    return missing


def require_binaries() -> None:
    missing = missing_binaries()
    if missing:
        raise ContainerdError(
            f"containerd is not usable here: missing {', '.join(missing)} (Debian: apt-get install "
            "containerd runc containernetworking-plugins)")


def _toml_str(value: str | Path) -> str:
    return msgspec.json.encode(str(value)).decode()  # a JSON string is a valid TOML basic string


def containerd_config(paths: Paths, *, sandbox_image: str = SANDBOX_IMAGE) -> str:
    """The config.toml text for `paths` (see the module docstring for what it sets)."""
    cri_plugin = '[plugins."io.containerd.grpc.v1.cri"'
    lines = [
        "version = 2",
        f"root = {_toml_str(paths.root)}",
        f"state = {_toml_str(paths.state)}",
        'disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", '
        '"io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]',
        "[grpc]",
        f"  address = {_toml_str(paths.socket)}",
        "[ttrpc]",
        f"  address = {_toml_str(str(paths.socket) + '.ttrpc')}",
        "[debug]",
        '  address = ""',
        "[metrics]",
        '  address = ""',
        '[plugins."io.containerd.internal.v1.opt"]',
        f"  path = {_toml_str(paths.opt)}",
        cri_plugin + "]",
        f"  sandbox_image = {_toml_str(sandbox_image)}",
        '  stream_server_address = "127.0.0.1"',
        '  stream_server_port = "0"',
        "  enable_unprivileged_icmp = true",
        f"  restrict_oom_score_adj = {'false' if can_lower_oom_score() else 'true'}",
        cri_plugin + ".cni]",
        f"  bin_dir = {_toml_str(CNI_BIN_DIR)}",
        f"  conf_dir = {_toml_str(paths.cni_conf_dir)}",
        "  max_conf_num = 1",
        cri_plugin + ".containerd]",
        '  snapshotter = "overlayfs"',
        '  default_runtime_name = "runc"',
        cri_plugin + ".containerd.runtimes.runc]",
        '  runtime_type = "io.containerd.runc.v2"',
        cri_plugin + ".containerd.runtimes.runc.options]",
        "  SystemdCgroup = false",
        f"  Root = {_toml_str(paths.state / 'runc')}",
    ]
    return "\n".join(lines) + "\n"


def can_lower_oom_score() -> bool:
    """Whether this process holds CAP_SYS_RESOURCE (needed to give a pod a negative oom_score_adj)."""
    try:
        with open("/proc/self/status") as f:
            eff = next((line.split()[1] for line in f if line.startswith("CapEff:")), "0")
    except OSError:
        return False
    return bool(int(eff, 16) >> CAP_SYS_RESOURCE & 1)


def bridge_name(state_dir: str | os.PathLike[str]) -> str:
    """A bridge name unique to `state_dir` (for several nodes, or tests, on one machine)."""
    digest = hashlib.sha256(str(Path(state_dir).absolute()).encode()).hexdigest()
    return "kc" + digest[:10]


def write_cni_config(state_dir: str | os.PathLike[str], pod_cidr: str, *, bridge: str | None = None) -> Path:
    """Write the node's pod network for `pod_cidr` (see the module docstring); returns the file.

    The bridge is `bridge_name(state_dir)` unless given. Rewriting the file with another CIDR
    replaces the network for sandboxes created from then on."""
    bridge = bridge or bridge_name(state_dir)
    try:
        net = ipaddress.ip_network(pod_cidr, strict=False)
    except ValueError as e:
        raise ContainerdError(f"invalid pod CIDR {pod_cidr!r}: {e}") from None
    if len(bridge) > 15:
        raise ContainerdError(f"bridge name {bridge!r} is longer than 15 characters")
    paths = Paths(state_dir)
    default_route = "0.0.0.0/0" if net.version == 4 else "::/0"
    conflist = {
        "cniVersion": "0.4.0",
        "name": NETWORK_NAME,
        "plugins": [
            {"type": "bridge", "bridge": bridge, "isGateway": True, "ipMasq": True, "hairpinMode": True,
             "ipam": {"type": "host-local", "ranges": [[{"subnet": str(net)}]],
                      "routes": [{"dst": default_route}], "dataDir": str(paths.cni_data_dir)}},
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }
    paths.cni_conf_dir.mkdir(parents=True, exist_ok=True)
    target = paths.cni_conf_dir / "10-kubecore.conflist"
    tmp = target.with_suffix(".tmp")
    tmp.write_bytes(msgspec.json.format(msgspec.json.encode(conflist), indent=2))
    tmp.rename(target)  # containerd watches the directory: never let it read half a file
    return target


def ping_version(socket: str | os.PathLike[str], *, timeout: float = 2.0) -> cri.VersionResponse:
    """One blocking CRI Version call; raises `grpc.RpcError` when nothing answers."""
    with grpc.insecure_channel(f"unix://{socket}") as channel:
        call = channel.unary_unary("/runtime.v1.RuntimeService/Version", request_serializer=codec.encode,
                                   response_deserializer=lambda b: codec.decode(cri.VersionResponse, b))
        result: cri.VersionResponse = call(m.VersionRequest(version="v1"), timeout=timeout)
        return result


class ContainerdHandle:
    """A containerd started by `start_containerd`; `stop()` ends it (containers keep running in
    their shims, as with any containerd restart: remove the pods first to end them)."""

    def __init__(self, process: subprocess.Popen[bytes], paths: Paths) -> None:
        self.process = process
        self.paths = paths
        self.socket = str(paths.socket)

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float = STOP_TIMEOUT) -> int:
        """SIGTERM, then SIGKILL after `timeout` seconds; returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def start_containerd(state_dir: str | os.PathLike[str], *, sandbox_image: str = SANDBOX_IMAGE,
                     timeout: float = START_TIMEOUT) -> ContainerdHandle:
    """Write the config and start containerd for `state_dir`; returns once CRI answers Version.

    A containerd still serving the socket because the node process that started it was killed
    (SIGKILL, OOM: it runs in its own session and outlives it) is stopped first; its containers
    keep running and the new containerd adopts them. Raises `ContainerdError` when the binaries
    are missing, the socket is taken by another live containerd, or it exits or stays silent
    for `timeout` seconds (the message quotes its log)."""
    require_binaries()
    paths = Paths(state_dir)
    for d in (paths.root, paths.state, paths.cni_conf_dir, paths.cni_data_dir, paths.opt):
        d.mkdir(parents=True, exist_ok=True)
    if paths.socket.exists():
        try:
            ping_version(paths.socket, timeout=1.0)
        except grpc.RpcError:
            paths.socket.unlink()  # left by a containerd that died
        else:
            if not _stop_orphan(paths, timeout=STOP_TIMEOUT):
                raise ContainerdError(f"a containerd already serves {paths.socket}")
            paths.socket.unlink(missing_ok=True)
    paths.config.write_text(containerd_config(paths, sandbox_image=sandbox_image))
    with open(paths.log, "ab") as log:
        process = subprocess.Popen(["containerd", "--config", str(paths.config)], stdin=subprocess.DEVNULL,
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    handle = ContainerdHandle(process, paths)
    try:
        _wait_ready(handle, timeout)
    except BaseException:
        handle.stop()
        raise
    return handle


def _orphans(paths: Paths) -> list[int]:
    """Processes running `containerd --config <paths.config>`: ours, left by a node process that
    was killed before it could stop them (containerd runs in its own session, so it outlives it)."""
    argv = ["containerd", "--config", str(paths.config)]
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if cmdline.split(b"\0")[:-1] == [a.encode() for a in argv]:
            found.append(int(entry.name))
    return found


def _stop_orphan(paths: Paths, *, timeout: float) -> bool:
    """Stop the containerd a killed node process left serving `paths.socket` (SIGTERM, SIGKILL
    after `timeout`); its containers keep running in their shims and the next containerd adopts
    them. False when no such process exists (the socket is served by someone else's containerd)."""
    pids = _orphans(paths)
    if not pids:
        return False
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while (pids := [pid for pid in pids if _alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in pids:
        _signal(pid, signal.SIGKILL)
    while (pids := [pid for pid in pids if _alive(pid)]):
        time.sleep(0.05)
    return True


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"  # a zombie (its parent, init, has not reaped it yet) is gone for us


def _wait_ready(handle: ContainerdHandle, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if not handle.running:
            raise ContainerdError(f"containerd exited with {handle.process.returncode}: {_log_tail(handle.paths)}")
        if handle.paths.socket.exists():
            try:
                ping_version(handle.paths.socket)
                return
            except grpc.RpcError:
                pass
        if time.monotonic() > deadline:
            raise ContainerdError(f"containerd did not answer CRI Version within {timeout:.0f}s: "
                                  f"{_log_tail(handle.paths)}")
        time.sleep(0.1)


def _log_tail(paths: Paths, lines: int = 15) -> str:
    try:
        text = paths.log.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])
