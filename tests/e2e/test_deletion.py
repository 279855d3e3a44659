"""Deletion semantics, the namespace lifecycle, and the scale and eviction subresources, against a
real server (plain HTTP, kubectl and the official client)."""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest

from tests.e2e.conftest import Server


def cm(name: str, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **meta}, "data": {"a": "b"}}


def pod(name: str, *, node: str = "", labels: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox:1.36"}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}}, "spec": spec}


def deployment(name: str, replicas: int = 1) -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}}}


def created(server: Server, path: str, body: dict[str, Any]) -> dict[str, Any]:
    status, obj = server.http("POST", path, body)
    assert status == 201, obj
    return obj


def delete(server: Server, path: str, options: dict[str, Any] | None = None) -> tuple[int, Any]:
    return server.http("DELETE", path, options)


# ---- what a DELETE answers -------------------------------------------------------------------


def test_delete_answers_status_for_most_kinds_and_the_object_for_pods(server: Server, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}"
    obj = created(server, f"{base}/configmaps", cm("gone"))
    status, body = delete(server, f"{base}/configmaps/gone")
    assert status == 200
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                    "details": {"name": "gone", "kind": "configmaps", "uid": obj["metadata"]["uid"]}}
    created(server, f"{base}/pods", pod("unscheduled"))
    status, body = delete(server, f"{base}/pods/unscheduled")
    assert status == 200 and body["kind"] == "Pod" and body["metadata"]["name"] == "unscheduled"
    assert server.http("GET", f"{base}/pods/unscheduled")[0] == 404


def test_concurrent_deletes_one_wins_the_others_get_not_found(server: Server, namespace: str) -> None:
    """Upstream's conditionalDelete: a delete that loses the race reads again and finds nothing
    (404), whatever preconditions it carries; never a 409."""
    from concurrent.futures import ThreadPoolExecutor

    base = f"/api/v1/namespaces/{namespace}"
    for round_ in range(5):
        uid = created(server, f"{base}/configmaps", cm(f"race{round_}"))["metadata"]["uid"]
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda _: delete(server, f"{base}/configmaps/race{round_}",
                                                     {"preconditions": {"uid": uid}}), range(8)))
        codes = sorted(status for status, _ in answers)
        assert codes.count(200) == 1 and set(codes) <= {200, 404}, answers


def test_group_is_named_in_the_status_of_a_deleted_object(server: Server, namespace: str) -> None:
    base = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    created(server, base, deployment("web"))
    status, body = delete(server, f"{base}/web")
    assert status == 200 and body["details"]["group"] == "apps" and body["details"]["kind"] == "deployments"


def test_a_bound_pod_is_deleted_gracefully(server: Server, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/pods"
    created(server, base, pod("running", node="node-1"))
    status, body = delete(server, f"{base}/running")
    assert status == 200 and body["metadata"]["deletionGracePeriodSeconds"] == 30
    assert body["metadata"]["deletionTimestamp"]
    # still there (its kubelet finishes the deletion); a longer grace period changes nothing
    _, again = delete(server, f"{base}/running", {"gracePeriodSeconds": 60})
    assert again["metadata"]["deletionGracePeriodSeconds"] == 30
    _, shorter = delete(server, f"{base}/running", {"gracePeriodSeconds": 5})
    assert shorter["metadata"]["deletionGracePeriodSeconds"] == 5
    assert server.http("GET", f"{base}/running")[0] == 200
    status, _ = delete(server, f"{base}/running", {"gracePeriodSeconds": 0})
    assert status == 200 and server.http("GET", f"{base}/running")[0] == 404


def test_orphan_and_foreground_policies_leave_the_garbage_collector_a_finalizer(server: Server, namespace: str) -> None:
    base = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    created(server, base, deployment("orphaned"))
    status, body = delete(server, f"{base}/orphaned", {"propagationPolicy": "Orphan"})
    assert status == 200 and body["metadata"]["finalizers"] == ["orphan"]
    assert body["metadata"]["deletionTimestamp"] and body["metadata"]["deletionGracePeriodSeconds"] == 0
    assert body["metadata"]["generation"] == 2  # marking for deletion bumps it once
    created(server, base, deployment("fg"))
    status, body = delete(server, f"{base}/fg", {"propagationPolicy": "Foreground"})
    assert body["metadata"]["finalizers"] == ["foregroundDeletion"]
    # the garbage collector's last step: removing the finalizer deletes the object
    status, _ = server.http("PATCH", f"{base}/fg", {"metadata": {"finalizers": None}},
                            content_type="application/merge-patch+json")
    assert status == 200 and server.http("GET", f"{base}/fg")[0] == 404


def test_orphan_dependents_false_is_accepted_with_202(server: Server, namespace: str) -> None:
    base = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    created(server, base, deployment("legacy", 0))
    status, body = delete(server, f"{base}/legacy", {"orphanDependents": False, "gracePeriodSeconds": 0})
    # nothing keeps it (background deletion), so it is gone at once: 200 with a Status
    assert status == 200 and body["status"] == "Success"


def test_batch_v1_jobs_orphan_their_pods_by_default(server: Server, namespace: str) -> None:
    base = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
           "spec": {"template": {"spec": {"restartPolicy": "Never",
                                          "containers": [{"name": "c", "image": "busybox:1.36"}]}}}}
    created(server, base, job)
    _, body = delete(server, f"{base}/j")
    assert body["metadata"]["finalizers"] == ["orphan"]
    created(server, base, {**job, "metadata": {"name": "k"}})
    _, body = delete(server, f"{base}/k", {"propagationPolicy": "Background"})
    assert body["status"] == "Success"


def test_bad_delete_options_are_invalid(server: Server, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    created(server, base, cm("kept"))
    status, body = delete(server, f"{base}/kept", {"propagationPolicy": "Sideways"})
    assert status == 422
    assert body["message"] == ('DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: '
                               '"Sideways": supported values: "Foreground", "Background", "Orphan", "nil"')
    status, body = delete(server, f"{base}/kept", {"propagationPolicy": "Orphan", "orphanDependents": True})
    assert status == 422 and "cannot be both set" in body["message"]
    status, body = delete(server, f"{base}/kept", {"preconditions": {"uid": "nope"}})
    assert status == 409 and "the UID in the precondition (nope) does not match" in body["message"]
    assert server.http("GET", f"{base}/kept")[0] == 200


def test_delete_by_query_parameters(server: Server, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    created(server, base, cm("q"))
    status, body = delete(server, f"{base}/q?propagationPolicy=Orphan")
    assert status == 200 and body["metadata"]["finalizers"] == ["orphan"]


def test_deletecollection_answers_the_listed_items(server: Server, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    for n in ("c1", "c2"):
        created(server, base, cm(n, labels={"grp": "dc"}))
    status, body = delete(server, f"{base}?labelSelector=grp%3Ddc")
    assert status == 200 and body["kind"] == "ConfigMapList"
    assert sorted(i["metadata"]["name"] for i in body["items"]) == ["c1", "c2"]
    assert server.http("GET", f"{base}?labelSelector=grp%3Ddc")[1]["items"] == []


# ---- namespaces ------------------------------------------------------------------------------


def test_namespace_lifecycle(server: Server, unique: Callable[[str], str]) -> None:
    name = unique("life")
    ns = created(server, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    assert ns["spec"]["finalizers"] == ["kubernetes"] and ns["status"]["phase"] == "Active"
    # updates cannot remove the kubernetes finalizer
    status, upd = server.http("PATCH", f"/api/v1/namespaces/{name}", {"spec": {"finalizers": []}},
                              content_type="application/merge-patch+json")
    assert status == 200 and upd["spec"]["finalizers"] == ["kubernetes"]
    status, body = delete(server, f"/api/v1/namespaces/{name}")
    assert status == 200 and body["status"]["phase"] == "Terminating" and body["metadata"]["deletionTimestamp"]
    status, body = server.http("POST", f"/api/v1/namespaces/{name}/configmaps", cm("late"))
    assert status == 403
    assert body["message"].endswith(f"unable to create new content in namespace {name} because it is being terminated")
    status, body = delete(server, f"/api/v1/namespaces/{name}")
    assert status == 409 and "The system is ensuring all content is removed from this namespace." in body["message"]
    # the namespace controller's last step: finalize, which removes a namespace being deleted
    fin = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}, "spec": {"finalizers": []}}
    status, body = server.http("PUT", f"/api/v1/namespaces/{name}/finalize", fin)
    assert status == 200, body
    assert server.http("GET", f"/api/v1/namespaces/{name}")[0] == 404


def test_finalize_validates_finalizer_names(server: Server, unique: Callable[[str], str]) -> None:
    name = unique("fin")
    created(server, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    bad = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}, "spec": {"finalizers": ["bogus"]}}
    status, body = server.http("PUT", f"/api/v1/namespaces/{name}/finalize", bad)
    assert status == 422 and "name is neither a standard finalizer name nor is it fully qualified" in body["message"]
    ok = {**bad, "spec": {"finalizers": ["kubernetes", "example.com/mine"]}}
    status, body = server.http("PUT", f"/api/v1/namespaces/{name}/finalize", ok)
    assert status == 200 and body["spec"]["finalizers"] == ["kubernetes", "example.com/mine"]


# ---- scale -----------------------------------------------------------------------------------


def test_scale_subresource(server: Server, namespace: str) -> None:
    base = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    d = created(server, base, deployment("sc", 2))
    status, s = server.http("GET", f"{base}/sc/scale")
    assert status == 200 and s["kind"] == "Scale" and s["apiVersion"] == "autoscaling/v1"
    assert s["spec"] == {"replicas": 2} and s["status"] == {"replicas": 0, "selector": "app=sc"}
    assert s["metadata"]["uid"] == d["metadata"]["uid"]
    s["spec"]["replicas"] = 5
    status, s2 = server.http("PUT", f"{base}/sc/scale", s)
    assert status == 200 and s2["spec"]["replicas"] == 5
    _, after = server.http("GET", f"{base}/sc")
    assert after["spec"]["replicas"] == 5 and after["metadata"]["generation"] == 2
    status, _ = server.http("PUT", f"{base}/sc/scale", s)  # stale resourceVersion
    assert status == 409
    status, body = server.http("PATCH", f"{base}/sc/scale", {"spec": {"replicas": -1}},
                               content_type="application/merge-patch+json")
    assert status == 422 and body["message"] == (
        'Scale.autoscaling "sc" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0')
    assert server.http("GET", f"/apis/apps/v1/namespaces/{namespace}/daemonsets/x/scale")[0] == 404


def test_kubectl_scale(kubectl, server: Server, namespace: str) -> None:
    created(server, f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment("ks", 1))
    out = kubectl.ok("scale", "-n", namespace, "deployment/ks", "--replicas=3")
    assert out.strip() == "deployment.apps/ks scaled"
    got = json.loads(kubectl.ok("get", "-n", namespace, "deployment", "ks", "-o", "json"))
    assert got["spec"]["replicas"] == 3
    rc = {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "rc"},
          "spec": {"replicas": 1, "selector": {"b": "2", "a": "1"},
                   "template": {"metadata": {"labels": {"a": "1", "b": "2"}},
                                "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}}}
    created(server, f"/api/v1/namespaces/{namespace}/replicationcontrollers", rc)
    _, s = server.http("GET", f"/api/v1/namespaces/{namespace}/replicationcontrollers/rc/scale")
    assert s["status"]["selector"] == "a=1,b=2"
    kubectl.ok("scale", "-n", namespace, "rc/rc", "--replicas=0", "--current-replicas=1")


# ---- eviction --------------------------------------------------------------------------------


def _ready(server: Server, namespace: str, name: str) -> None:
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    _, p = server.http("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
    p["status"] = status
    code, body = server.http("PUT", f"/api/v1/namespaces/{namespace}/pods/{name}/status", p)
    assert code == 200, body


def _pdb(server: Server, namespace: str, name: str, *, allowed: int) -> None:
    base = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"
    body = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}}}
    obj = created(server, base, body)
    obj["status"] = {"observedGeneration": obj["metadata"].get("generation", 1), "disruptionsAllowed": allowed,
                     "currentHealthy": 1 + allowed, "desiredHealthy": 1, "expectedPods": 1 + allowed}
    code, resp = server.http("PUT", f"{base}/{name}/status", obj)
    assert code == 200, resp


def _evict(server: Server, namespace: str, name: str) -> tuple[int, Any]:
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
    return server.http("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/eviction", body)


def test_eviction_respects_the_disruption_budget(server: Server, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/pods"
    for n in ("g1", "g2"):
        created(server, base, pod(n, node="node-1", labels={"app": "guarded"}))
        _ready(server, namespace, n)
    _pdb(server, namespace, "budget", allowed=1)
    status, body = _evict(server, namespace, "g1")
    assert status == 201 and body["status"] == "Success", body
    _, gone = server.http("GET", f"{base}/g1")
    assert gone["metadata"]["deletionTimestamp"]  # graceful: its kubelet finishes it
    _, pdb = server.http("GET", f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/budget")
    assert pdb["status"]["disruptionsAllowed"] == 0 and "g1" in pdb["status"]["disruptedPods"]
    status, body = _evict(server, namespace, "g2")
    assert status == 429 and body["reason"] == "TooManyRequests"
    assert body["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    # (no PDB controller recounts the budget's status yet: it still says 2 are healthy)
    assert body["details"]["causes"] == [{"reason": "DisruptionBudget",
                                          "message": "The disruption budget budget needs 1 healthy pods and has 2 currently"}]
    assert not server.http("GET", f"{base}/g2")[1]["metadata"].get("deletionTimestamp")


def test_pending_pods_are_evicted_without_a_budget_check(server: Server, namespace: str) -> None:
    from kubernetes import client, config

    created(server, f"/api/v1/namespaces/{namespace}/pods", pod("waiting", labels={"app": "guarded"}))
    _pdb(server, namespace, "strict", allowed=0)
    config.load_kube_config(str(server.kubeconfig))
    api = client.CoreV1Api()
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name="waiting", namespace=namespace))
    api.create_namespaced_pod_eviction("waiting", namespace, body)
    with pytest.raises(client.ApiException) as exc:
        api.read_namespaced_pod("waiting", namespace)
    assert exc.value.status == 404
    status, body = _evict(server, namespace, "waiting")
    assert status == 404
