"""The garbage collector against a real API server and a real `kubecore controller-manager`
process, driven with real kubectl: cascading deletion in all three modes, dangling owners,
cluster-scoped owners, and leader failover between two controller-manager processes (kill -9).

Everything waits by polling with generous bounds; nothing asserts on how long anything took.
"""

from __future__ import annotations

import re
import signal
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.cluster import SHORT_LEASE, Cluster, start_cluster, stop_cluster, wait_for


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("gc"))
    try:
        c.start_controller_manager("controller-manager", *SHORT_LEASE)
        yield c
    finally:
        stop_cluster(c)


@pytest.fixture
def ns(cluster: Cluster) -> str:
    name = f"gc-{uuid.uuid4().hex[:8]}"
    cluster.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


def ref(owner: dict[str, Any], *, block: bool | None = None, controller: bool | None = None) -> dict[str, Any]:
    r = {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
         "uid": owner["metadata"]["uid"]}
    if block is not None:
        r["blockOwnerDeletion"] = block
    if controller is not None:
        r["controller"] = controller
    return r


def configmap(name: str, *owners: dict[str, Any], finalizers: list[str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if owners:
        meta["ownerReferences"] = list(owners)
    if finalizers:
        meta["finalizers"] = finalizers
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}


def owner_with_dependents(c: Cluster, ns: str, name: str, n: int = 2, *,
                          block: bool | None = None) -> tuple[dict[str, Any], list[str]]:
    base = f"/api/v1/namespaces/{ns}/configmaps"
    owner = c.create(base, configmap(name))
    owner.setdefault("apiVersion", "v1")
    owner.setdefault("kind", "ConfigMap")
    deps = [f"{name}-dep{i}" for i in range(n)]
    for d in deps:
        c.create(base, configmap(d, ref(owner, block=block)))
    return owner, deps


def gone(c: Cluster, path: str) -> Callable[[], bool]:
    return lambda: c.http("GET", path)[0] == 404


# -- the three cascade modes -----------------------------------------------------------------------

def test_background_cascade_deletes_dependents(cluster: Cluster, ns: str) -> None:
    owner, deps = owner_with_dependents(cluster, ns, "bg", 3)
    cluster.kubectl("-n", ns, "delete", "configmap", "bg", "--cascade=background")
    for d in deps:
        wait_for(f"dependent {d} to be collected", gone(cluster, f"/api/v1/namespaces/{ns}/configmaps/{d}"),
                 logs=cluster.logs)


def test_orphan_cascade_keeps_dependents_without_the_reference(cluster: Cluster, ns: str) -> None:
    owner, deps = owner_with_dependents(cluster, ns, "orph", 2, block=True)
    # an unrelated owner stays referenced
    other = cluster.create(f"/api/v1/namespaces/{ns}/configmaps", configmap("other"))
    other.update(apiVersion="v1", kind="ConfigMap")
    status, _ = cluster.http("PATCH", f"/api/v1/namespaces/{ns}/configmaps/{deps[0]}",
                             {"metadata": {"ownerReferences": [ref(owner, block=True), ref(other)]}},
                             content_type="application/merge-patch+json")
    assert status == 200
    cluster.kubectl("-n", ns, "delete", "configmap", "orph", "--cascade=orphan")
    wait_for("the owner to be gone", gone(cluster, f"/api/v1/namespaces/{ns}/configmaps/orph"), logs=cluster.logs)
    first = cluster.get(f"/api/v1/namespaces/{ns}/configmaps/{deps[0]}")
    assert [r["uid"] for r in first["metadata"]["ownerReferences"]] == [other["metadata"]["uid"]]
    second = cluster.get(f"/api/v1/namespaces/{ns}/configmaps/{deps[1]}")
    assert "ownerReferences" not in second["metadata"] and not second["metadata"].get("deletionTimestamp")


def test_foreground_cascade_waits_for_blocking_dependents(cluster: Cluster, ns: str) -> None:
    base = f"/api/v1/namespaces/{ns}/configmaps"
    owner = cluster.create(base, configmap("fg"))
    owner.update(apiVersion="v1", kind="ConfigMap")
    cluster.create(base, configmap("fg-blocker", ref(owner, block=True), finalizers=["example.com/hold"]))
    cluster.create(base, configmap("fg-plain", ref(owner, block=False)))
    cluster.kubectl("-n", ns, "delete", "configmap", "fg", "--cascade=foreground", "--wait=false")

    def blocker_deleting() -> Any:
        obj = cluster.get(f"{base}/fg-blocker")
        return obj if obj and obj["metadata"].get("deletionTimestamp") else None

    wait_for("the blocking dependent to be deleted", blocker_deleting, logs=cluster.logs)
    wait_for("the non-blocking dependent to be collected", gone(cluster, f"{base}/fg-plain"), logs=cluster.logs)
    # The blocker still exists (its finalizer holds it), so the owner must still be there, waiting.
    held = cluster.get(f"{base}/fg")
    assert held is not None and held["metadata"]["deletionTimestamp"]
    assert "foregroundDeletion" in held["metadata"]["finalizers"]
    status, _ = cluster.http("PATCH", f"{base}/fg-blocker", {"metadata": {"finalizers": None}},
                             content_type="application/merge-patch+json")
    assert status == 200
    wait_for("the blocker to go", gone(cluster, f"{base}/fg-blocker"), logs=cluster.logs)
    wait_for("the owner to be deleted after its dependents", gone(cluster, f"{base}/fg"), logs=cluster.logs)


def test_foreground_cascade_with_kubectl_wait(cluster: Cluster, ns: str) -> None:
    owner, deps = owner_with_dependents(cluster, ns, "fgw", 2, block=True)
    cluster.kubectl("-n", ns, "delete", "configmap", "fgw", "--cascade=foreground", "--timeout=90s")
    assert cluster.http("GET", f"/api/v1/namespaces/{ns}/configmaps/fgw")[0] == 404
    for d in deps:  # foreground: the dependents were gone before the owner
        assert cluster.http("GET", f"/api/v1/namespaces/{ns}/configmaps/{d}")[0] == 404


def test_replicaset_owning_pods_written_directly(cluster: Cluster, ns: str) -> None:
    rs = cluster.create(f"/apis/apps/v1/namespaces/{ns}/replicasets", {
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})
    rs.update(apiVersion="apps/v1", kind="ReplicaSet")
    for i in range(2):
        cluster.create(f"/api/v1/namespaces/{ns}/pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"web-{i}", "labels": {"app": "web"},
                         "ownerReferences": [ref(rs, block=True, controller=True)]},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    cluster.kubectl("-n", ns, "delete", "replicaset", "web")  # kubectl's default: background
    for i in range(2):
        wait_for(f"pod web-{i} to be collected", gone(cluster, f"/api/v1/namespaces/{ns}/pods/web-{i}"),
                 logs=cluster.logs)


# -- dangling and cluster-scoped owners --------------------------------------------------------------

def test_dangling_owner_reference_is_collected(cluster: Cluster, ns: str) -> None:
    base = f"/api/v1/namespaces/{ns}/configmaps"
    ghost = {"apiVersion": "v1", "kind": "ConfigMap", "name": "never-was", "uid": str(uuid.uuid4())}
    cluster.create(base, configmap("orphaned-child", ghost))
    wait_for("a dependent of a nonexistent owner to be collected", gone(cluster, f"{base}/orphaned-child"),
             logs=cluster.logs)


def test_dangling_reference_next_to_a_solid_owner_is_removed(cluster: Cluster, ns: str) -> None:
    base = f"/api/v1/namespaces/{ns}/configmaps"
    solid = cluster.create(base, configmap("solid"))
    solid.update(apiVersion="v1", kind="ConfigMap")
    ghost = {"apiVersion": "v1", "kind": "ConfigMap", "name": "gone", "uid": str(uuid.uuid4())}
    cluster.create(base, configmap("two-owners", ref(solid), ghost))

    def only_solid_left() -> bool:
        obj = cluster.get(f"{base}/two-owners")
        return bool(obj) and [r["uid"] for r in obj["metadata"].get("ownerReferences", [])] == [solid["metadata"]["uid"]]

    wait_for("the dangling reference to be removed", only_solid_left, logs=cluster.logs)


def test_cluster_scoped_owner_of_namespaced_dependent(cluster: Cluster, ns: str) -> None:
    role = cluster.create("/apis/rbac.authorization.k8s.io/v1/clusterroles", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": f"owner-{ns}"}, "rules": []})
    role.update(apiVersion="rbac.authorization.k8s.io/v1", kind="ClusterRole")
    cluster.create(f"/api/v1/namespaces/{ns}/configmaps", configmap("owned-by-cluster", ref(role)))
    cluster.kubectl("delete", "clusterrole", f"owner-{ns}")
    wait_for("the dependent of a cluster-scoped owner to be collected",
             gone(cluster, f"/api/v1/namespaces/{ns}/configmaps/owned-by-cluster"), logs=cluster.logs)


# -- leader failover -------------------------------------------------------------------------------

IDENTITY = re.compile(r"controller manager (\S+): controllers")


def _identity(c: Cluster, name: str) -> str:
    def find() -> str | None:
        m = IDENTITY.search((c.base / f"{name}.log").read_text(errors="replace"))
        return m.group(1) if m else None

    found: str = wait_for(f"{name} to log its identity", find, logs=c.logs)
    return found


def test_leader_failover_between_two_controller_managers(tmp_path: Path) -> None:
    c = start_cluster(tmp_path)
    try:
        lease_name = "kube-controller-manager"
        a = c.start_controller_manager("cm-a", *SHORT_LEASE)
        b = c.start_controller_manager("cm-b", *SHORT_LEASE)
        ids = {"cm-a": _identity(c, "cm-a"), "cm-b": _identity(c, "cm-b")}
        lease_path = f"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{lease_name}"

        def holder() -> str | None:
            lease = c.get(lease_path)
            h = (lease or {}).get("spec", {}).get("holderIdentity")
            return h if h in ids.values() else None

        first = wait_for("one controller manager to lead", holder, logs=c.logs)
        leader = "cm-a" if ids["cm-a"] == first else "cm-b"
        standby = "cm-b" if leader == "cm-a" else "cm-a"
        base = "/api/v1/namespaces/default/configmaps"
        c.create(base, configmap("before-failover", {"apiVersion": "v1", "kind": "ConfigMap", "name": "x",
                                                      "uid": str(uuid.uuid4())}))
        wait_for("the leader to collect", gone(c, f"{base}/before-failover"), logs=c.logs)

        c.procs[leader].send_signal(signal.SIGKILL)
        c.procs[leader].wait(timeout=10)
        wait_for("the standby to take the lease", lambda: holder() == ids[standby], logs=c.logs)
        c.create(base, configmap("after-failover", {"apiVersion": "v1", "kind": "ConfigMap", "name": "y",
                                                     "uid": str(uuid.uuid4())}))
        wait_for("the new leader to collect", gone(c, f"{base}/after-failover"), logs=c.logs)
        owner, deps = owner_with_dependents(c, "default", "failover-owner", 2)
        c.kubectl("delete", "configmap", "failover-owner", "--cascade=foreground", "--timeout=90s")
        for d in deps:
            assert c.http("GET", f"{base}/{d}")[0] == 404
        assert (a if standby == "cm-a" else b).poll() is None  # the new leader is alive and well
    finally:
        stop_cluster(c)


def test_controller_manager_stops_cleanly_on_sigterm(cluster: Cluster) -> None:
    proc = cluster.start_controller_manager("cm-sigterm", "--leader-elect-resource-name", "sigterm-test",
                                            *SHORT_LEASE)
    ident = _identity(cluster, "cm-sigterm")
    path = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/sigterm-test"
    wait_for("it to lead", lambda: (cluster.get(path) or {}).get("spec", {}).get("holderIdentity") == ident,
             logs=cluster.logs)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    # released on the way out: a standby would not have to wait for the lease to expire
    assert not cluster.get(path)["spec"].get("holderIdentity")
