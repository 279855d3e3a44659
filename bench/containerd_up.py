"""`kubecore up --runtime containerd` as a child process, for the containerd benchmark and the
containerd e2e tests: one real cluster whose only node is this machine.

    up = ContainerdUp(pod_cidr="10.246.7.0/24")   # in a fresh temp dir, removed by stop()
    up.wait_node_ready()                      # the API server answers and the Node is Ready
    up.components()                           # {"apiserver": [pid], "kubelet": [pid], "containerd": [...], ...}
    up.memory()                               # RSS and PSS of the tree, per component
    up.delete_pods(); up.stop()               # pods (containers) first, then the cluster

Guarantees:
- the cluster listens on a free loopback port, its kubelet server on another free port, and its
  pods get `pod_cidr` (give each cluster on one machine its own): it collides with nothing else;
- `components()` finds every process of the tree: the `up` process (the API server) and its
  descendants (controller manager, scheduler, kubelet, the kubelet's containerd), plus the
  containerd shims serving this cluster's containerd (they run outside the tree, reparented to
  init); the containers' own processes are never counted;
- everything lives in a fresh temp dir (`workdir`; `up.log` there), removed by `stop()`;
- `stop()` ends `up` with SIGTERM (it stops its children; containers outlive their containerd),
  then, if pods were left running (not deleted first), starts the node's containerd once more to
  stop and remove them through CRI, and removes the node's bridge: the machine is left as it
  was. It is idempotent.

Needs root and Debian's containerd, runc, containernetworking-plugins and busybox-static
(`kubecore.kubelet.containerd_node.unusable()` says what is missing). Standard library plus kubecore.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from kubecore.kubelet.containerd import ContainerdRuntime, daemon

ROOT = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
STOP_TIMEOUT = 60.0
WORKLOADS = ("/apis/batch/v1/cronjobs", "/apis/apps/v1/deployments", "/apis/apps/v1/statefulsets",
             "/apis/apps/v1/daemonsets", "/apis/apps/v1/replicasets", "/apis/batch/v1/jobs",
             "/api/v1/replicationcontrollers")
"""Lists of the objects whose controllers create pods, owners before what they own."""


class UpError(RuntimeError):
    """The cluster did not start, or stopped, as expected (the message quotes its log)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return raw.decode(errors="replace").split("\0")[:-1]


def _stat(pid: int) -> list[str]:
    """/proc/<pid>/stat fields after the command name (field 3, state, is index 0)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return []
    return text[text.rindex(")") + 2:].split()


def cpu_seconds(pid: int) -> float:
    """CPU seconds of every thread of `pid` and of the children it has waited for (runc under a
    shim, CNI plugins under containerd); 0 once it is gone."""
    fields = _stat(pid)
    return sum(int(f) for f in fields[11:15]) / CLK_TCK if fields else 0.0


def memory_kb(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of `pid` in KiB; PSS shares each shared page among the processes mapping it."""
    rss = pss = 0
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            key, _, value = line.partition(":")
            if key == "Rss":
                rss = int(value.split()[0])
            elif key == "Pss":
                pss = int(value.split()[0])
    except OSError:
        pass
    return rss, pss


def _all_pids() -> list[int]:
    return [int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit()]


def descendants(root: int) -> dict[int, list[str]]:
    """`root` and every process below it, with their command lines."""
    children: dict[int, list[int]] = {}
    for pid in _all_pids():
        fields = _stat(pid)
        if fields:
            children.setdefault(int(fields[1]), []).append(pid)
    found: dict[int, list[str]] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        found[pid] = _cmdline(pid)
        todo.extend(children.get(pid, []))
    return found


class ContainerdUp:
    """One `kubecore up --runtime containerd` (see the module docstring)."""

    def __init__(self, *, pod_cidr: str, extra: tuple[str, ...] = ()) -> None:
        # a private directory, not pytest's tmp_path: other pytest runs on the machine prune old
        # basetemps, and the node's containerd must not lose its root under a running cluster
        self.workdir = Path(tempfile.mkdtemp(prefix="kubecore-ctrd-"))
        workdir = self.workdir
        self.data_dir = workdir / "data"
        self.kubeconfig = self.data_dir / "kubeconfig"
        self.kubelet_root = (self.data_dir / "kubelet").absolute()
        self.socket = str(daemon.Paths(self.kubelet_root).socket)
        self.pod_cidr = pod_cidr
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / "up.log"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "python"), env.get("PYTHONPATH")]))
        cmd = [sys.executable, "-m", "kubecore.cli.main", "up", "--data-dir", str(self.data_dir),
               "--listen", f"127.0.0.1:{self.port}", "--runtime", "containerd", "--pod-cidr", pod_cidr,
               "--kubelet-port", str(free_port()), "--scheduler-metrics-port", "0", *extra]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=env, cwd=str(workdir))

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def http(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """One plain HTTP request to the API server; (status, decoded JSON), (0, None) when unreachable."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")
        except (urllib.error.URLError, OSError, ValueError):
            return 0, None

    def node(self) -> dict[str, Any] | None:
        status, body = self.http("GET", "/api/v1/nodes")
        items = (body or {}).get("items") or [] if status == 200 else []
        return items[0] if items else None

    def wait_node_ready(self, timeout: float = 120.0) -> dict[str, Any]:
        """Wait until the API server answers and the node is Ready; returns the Node."""
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise UpError(f"`kubecore up` exited with {self.proc.returncode}:\n{self.log_tail()}")
            node = self.node()
            conditions = ((node or {}).get("status") or {}).get("conditions") or []
            if node and any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
                return node
            if time.monotonic() > deadline:
                raise UpError(f"no Ready node within {timeout:.0f} s:\n{self.log_tail()}")
            time.sleep(0.2)

    def _descendants(self) -> dict[int, list[str]]:
        return descendants(self.proc.pid) if self.proc.poll() is None else {}

    def shims(self) -> list[int]:
        """The containerd shims of this cluster's containerd (each holds its pod's containers)."""
        return [pid for pid in _all_pids()
                if (argv := _cmdline(pid)) and os.path.basename(argv[0]).startswith("containerd-shim")
                and self.socket in argv]

    def components(self) -> dict[str, list[int]]:
        """Pids of the cluster's processes by component (see the module docstring)."""
        out: dict[str, list[int]] = {}
        for pid, argv in self._descendants().items():
            if pid == self.proc.pid:
                name = "apiserver"
            elif argv[:1] == ["containerd"]:
                name = "containerd"
            elif "kubecore.cli.main" in argv:
                name = argv[argv.index("kubecore.cli.main") + 1]
            else:
                name = os.path.basename(argv[0]) if argv else "?"
            out.setdefault(name, []).append(pid)
        out["shims"] = self.shims()
        return out

    def kubelet_pid(self) -> int | None:
        pids = self.components().get("kubelet") or []
        return pids[0] if pids else None

    def memory(self) -> dict[str, Any]:
        """RSS and PSS (MiB) of the whole tree and per component (containers excluded)."""
        per: dict[str, dict[str, float]] = {}
        for name, pids in self.components().items():
            rss, pss = (sum(x) for x in zip(*(memory_kb(p) for p in pids))) if pids else (0, 0)
            per[name] = {"processes": len(pids), "rss_mb": round(rss / 1024, 1), "pss_mb": round(pss / 1024, 1)}
        return {"rss_mb": round(sum(c["rss_mb"] for c in per.values()), 1),
                "pss_mb": round(sum(c["pss_mb"] for c in per.values()), 1), "components": per}

    def delete_pods(self, timeout: float = 120.0) -> int:
        """Delete every workload and pod (all namespaces) and wait until the pods are gone, i.e. the
        kubelet has stopped and removed their containers; returns how many pods are left (0 unless
        it timed out). Workloads go first, else their controllers would replace the pods."""
        for path in WORKLOADS:
            status, body = self.http("GET", path)
            for obj in (body or {}).get("items") or [] if status == 200 else []:
                meta = obj["metadata"]
                prefix, _, resource = path.rpartition("/")
                self.http("DELETE", f"{prefix}/namespaces/{meta['namespace']}/{resource}/{meta['name']}",
                          {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"})
        deadline = time.monotonic() + timeout
        while True:
            status, body = self.http("GET", "/api/v1/pods")
            pods = (body or {}).get("items") or [] if status == 200 else []
            if not pods or time.monotonic() > deadline or self.proc.poll() is not None:
                return len(pods)
            for pod in pods:
                if not pod["metadata"].get("deletionTimestamp"):
                    meta = pod["metadata"]
                    self.http("DELETE", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}")
            time.sleep(0.5)

    def stop(self) -> None:
        """Stop `up`, then whatever of this cluster outlived it (see the module docstring)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.shims():
            self._remove_left_pods()
        subprocess.run(["ip", "link", "del", daemon.bridge_name(self.kubelet_root)], capture_output=True, check=False)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def _remove_left_pods(self) -> None:
        """Pods still running after `up` stopped: a containerd over the same state adopts their
        shims, and every sandbox (with its containers) is stopped and removed through CRI."""
        handle = daemon.start_containerd(self.kubelet_root)
        try:
            asyncio.run(_remove_sandboxes(handle.socket))
        finally:
            handle.stop()


async def _remove_sandboxes(sock: str) -> None:
    async with ContainerdRuntime(sock) as rt:
        for sandbox in await rt.list_pod_sandbox():
            await rt.stop_pod_sandbox(sandbox.id)
            await rt.remove_pod_sandbox(sandbox.id)
