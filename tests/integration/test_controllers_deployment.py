"""The Deployment controller (with the ReplicaSet controller making the pods) against a real API
server and a real `kubecore controller-manager` process, driven by real kubectl: rollout status,
a rolling update that honours maxSurge/maxUnavailable, rollout history and undo, scale, pause and
resume, and the Recreate strategy.

There is no kubelet: a background thread stands in for it, marking every new pod Running and
Ready (as upstream's integration tests write pod status) and recording what it saw. Waits poll
with generous bounds; nothing asserts on how long anything took.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.cluster import SHORT_LEASE, Cluster, start_cluster, stop_cluster, wait_for

Obj = dict[str, Any]
HASH = "pod-template-hash"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("deploy"))
    try:
        c.start("controller-manager", "controller-manager", "--kubeconfig", str(c.kubeconfig),
                "--controllers", "deployment,replicaset", *SHORT_LEASE)
        yield c
    finally:
        stop_cluster(c)


@pytest.fixture
def ns(cluster: Cluster) -> str:
    name = f"deploy-{uuid.uuid4().hex[:8]}"
    cluster.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


class FakeKubelet(threading.Thread):
    """Marks pods Ready; remembers the most ReplicaSet replicas wanted at once and whether two
    templates ever ran together.

    maxSurge bounds the sum of the ReplicaSets' spec.replicas (upstream NewRSNewReplicas): that is
    the Deployment controller's invariant. The pods themselves can exceed it for a moment when the
    new ReplicaSet's creation lands before the old one's deletion (two ReplicaSet syncs, in any
    order), in upstream as here, so `max_active` is only informational."""

    def __init__(self, c: Cluster, namespace: str) -> None:
        super().__init__(daemon=True)
        self.c, self.namespace = c, namespace
        self.halt = threading.Event()
        self.max_active = 0
        self.max_wanted = 0
        self.mixed = False

    def run(self) -> None:
        while not self.halt.is_set():
            wanted = sum(int(rs["spec"].get("replicas") or 0) for rs in replica_sets(self.c, self.namespace))
            self.max_wanted = max(self.max_wanted, wanted)
            pods = self.c.active_pods(self.namespace)
            self.max_active = max(self.max_active, len(pods))
            if len({p["metadata"].get("labels", {}).get(HASH) for p in pods}) > 1:
                self.mixed = True
            self.c.mark_pods_ready(self.namespace)
            self.halt.wait(0.05)

    def __enter__(self) -> FakeKubelet:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.halt.set()
        self.join(timeout=10)


def deployment(name: str, *, replicas: int, image: str, strategy: Obj, change_cause: str | None = None) -> Obj:
    annotations = {"kubernetes.io/change-cause": change_cause} if change_cause else {}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "strategy": strategy,
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "app", "image": image}]}}}}


def get_deployment(c: Cluster, ns: str, name: str) -> Obj:
    d = c.get(f"/apis/apps/v1/namespaces/{ns}/deployments/{name}")
    assert isinstance(d, dict), f"deployment {ns}/{name} not found"
    return d


def replica_sets(c: Cluster, ns: str) -> list[Obj]:
    items = (c.get(f"/apis/apps/v1/namespaces/{ns}/replicasets") or {}).get("items") or []
    return sorted(items, key=lambda rs: int(rs["metadata"]["annotations"].get("deployment.kubernetes.io/revision", 0)))


def image_of(obj: Obj) -> str:
    return str(obj["spec"]["template"]["spec"]["containers"][0]["image"])


def rollout_status(c: Cluster, ns: str, name: str) -> str:
    return c.kubectl("-n", ns, "rollout", "status", f"deployment/{name}", "--timeout=120s")


def observed(c: Cluster, ns: str, name: str) -> bool:
    d = get_deployment(c, ns, name)
    return bool(d.get("status", {}).get("observedGeneration", 0) >= d["metadata"]["generation"])


def conditions(d: Obj) -> dict[str, Obj]:
    return {cond["type"]: cond for cond in d.get("status", {}).get("conditions") or []}


def test_rolling_update_history_and_undo(cluster: Cluster, ns: str) -> None:
    c = cluster
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    c.kubectl("-n", ns, "create", "-f", "-",
              input=json.dumps(deployment("web", replicas=3, image="example.com/web:1", strategy=strategy,
                                          change_cause="create web:1")))
    with FakeKubelet(c, ns) as kubelet:
        assert 'deployment "web" successfully rolled out' in rollout_status(c, ns, "web")
        d = get_deployment(c, ns, "web")
        assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
        s = d["status"]
        assert (s["replicas"], s["updatedReplicas"], s["readyReplicas"], s["availableReplicas"]) == (3, 3, 3, 3)
        assert s["observedGeneration"] == d["metadata"]["generation"]
        conds = conditions(d)
        assert (conds["Available"]["status"], conds["Available"]["reason"]) == ("True", "MinimumReplicasAvailable")
        assert (conds["Progressing"]["status"], conds["Progressing"]["reason"]) == ("True", "NewReplicaSetAvailable")
        [first] = replica_sets(c, ns)
        assert first["metadata"]["name"] == f"web-{first['metadata']['labels'][HASH]}"

        c.kubectl("-n", ns, "set", "image", "deployment/web", "app=example.com/web:2")
        wait_for("the new template to be observed", lambda: observed(c, ns, "web"), logs=c.logs)
        c.kubectl("-n", ns, "annotate", "deployment/web", "kubernetes.io/change-cause=set image web:2", "--overwrite")
        assert "successfully rolled out" in rollout_status(c, ns, "web")
        assert kubelet.max_wanted <= 3 + 1, f"saw {kubelet.max_wanted} replicas wanted with 3 + maxSurge 1"
        old, new = replica_sets(c, ns)
        assert (old["spec"]["replicas"], new["spec"]["replicas"]) == (0, 3)
        assert image_of(new) == "example.com/web:2"

        history = c.kubectl("-n", ns, "rollout", "history", "deployment/web")
        assert re.search(r"^1\s+create web:1\s*$", history, re.M), history
        assert re.search(r"^2\s+set image web:2\s*$", history, re.M), history

        undo = c.kubectl("-n", ns, "rollout", "undo", "deployment/web")
        assert "rolled back" in undo
        assert "successfully rolled out" in rollout_status(c, ns, "web")
        d = get_deployment(c, ns, "web")
        assert image_of(d) == "example.com/web:1"
        assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
        rses = {rs["metadata"]["name"]: rs for rs in replica_sets(c, ns)}
        assert len(rses) == 2  # the first ReplicaSet came back rather than a third one
        back = rses[first["metadata"]["name"]]
        assert back["spec"]["replicas"] == 3
        assert back["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
        assert back["metadata"]["annotations"]["deployment.kubernetes.io/revision-history"] == "1"
        history = c.kubectl("-n", ns, "rollout", "history", "deployment/web")
        assert re.search(r"^3\s+create web:1\s*$", history, re.M) and not re.search(r"^1\s", history, re.M), history
        assert kubelet.max_wanted <= 4

    events = (c.get(f"/api/v1/namespaces/{ns}/events") or {}).get("items") or []
    scaling = [e["message"] for e in events if e.get("reason") == "ScalingReplicaSet"]
    new_name, old_name = new["metadata"]["name"], first["metadata"]["name"]
    assert f"Scaled up replica set {old_name} to 3" in scaling
    assert f"Scaled up replica set {new_name} to 1" in scaling
    assert f"Scaled down replica set {old_name} to 2 from 3" in scaling
    assert all(e["source"]["component"] == "deployment-controller" for e in events
               if e.get("reason") == "ScalingReplicaSet")


def test_scale_pause_and_resume(cluster: Cluster, ns: str) -> None:
    c = cluster
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}
    c.kubectl("-n", ns, "create", "-f", "-",
              input=json.dumps(deployment("api", replicas=3, image="example.com/api:1", strategy=strategy)))
    with FakeKubelet(c, ns) as kubelet:
        rollout_status(c, ns, "api")
        c.kubectl("-n", ns, "scale", "deployment/api", "--replicas=5")
        assert "successfully rolled out" in rollout_status(c, ns, "api")
        wait_for("5 available replicas",
                 lambda: get_deployment(c, ns, "api")["status"].get("availableReplicas") == 5, logs=c.logs)
        assert len(c.active_pods(ns)) == 5

        c.kubectl("-n", ns, "rollout", "pause", "deployment/api")
        c.kubectl("-n", ns, "set", "image", "deployment/api", "app=example.com/api:2")
        c.kubectl("-n", ns, "scale", "deployment/api", "--replicas=4")
        wait_for("the paused deployment to be observed", lambda: observed(c, ns, "api"), logs=c.logs)
        wait_for("the scale-down while paused", lambda: len(c.active_pods(ns)) == 4, logs=c.logs)
        d = get_deployment(c, ns, "api")
        progressing = conditions(d)["Progressing"]
        assert (progressing["status"], progressing["reason"]) == ("Unknown", "DeploymentPaused")
        [only] = replica_sets(c, ns)  # paused: no rollout to the new template
        assert image_of(only) == "example.com/api:1" and only["spec"]["replicas"] == 4

        c.kubectl("-n", ns, "rollout", "resume", "deployment/api")
        assert "successfully rolled out" in rollout_status(c, ns, "api")
        old, new = replica_sets(c, ns)
        assert (old["spec"]["replicas"], new["spec"]["replicas"]) == (0, 4)
        assert image_of(new) == "example.com/api:2"
        # 4 replicas, 25%: maxSurge 1 -> at most 5 replicas wanted
        assert kubelet.max_wanted <= 5, (kubelet.max_wanted, kubelet.max_active)
    assert conditions(get_deployment(c, ns, "api"))["Progressing"]["reason"] == "NewReplicaSetAvailable"


def test_recreate_never_runs_two_templates_together(cluster: Cluster, ns: str) -> None:
    c = cluster
    c.kubectl("-n", ns, "create", "-f", "-",
              input=json.dumps(deployment("batch", replicas=3, image="example.com/batch:1",
                                          strategy={"type": "Recreate"})))
    with FakeKubelet(c, ns) as kubelet:
        rollout_status(c, ns, "batch")
        c.kubectl("-n", ns, "set", "image", "deployment/batch", "app=example.com/batch:2")
        assert "successfully rolled out" in rollout_status(c, ns, "batch")
        assert not kubelet.mixed, "pods of the old and the new template ran at the same time"
        assert kubelet.max_active <= 3
    pods = c.active_pods(ns)
    new = replica_sets(c, ns)[-1]
    assert len(pods) == 3 and {p["metadata"]["labels"][HASH] for p in pods} == {new["metadata"]["labels"][HASH]}


def test_progress_deadline_exceeded_fails_rollout_status(cluster: Cluster, ns: str) -> None:
    c = cluster  # no FakeKubelet: the pods never become ready
    d = deployment("slow", replicas=2, image="example.com/slow:1", strategy={"type": "RollingUpdate"})
    d["spec"]["progressDeadlineSeconds"] = 2
    c.kubectl("-n", ns, "create", "-f", "-", input=json.dumps(d))

    def timed_out() -> bool:
        cond = conditions(get_deployment(c, ns, "slow")).get("Progressing") or {}
        return cond.get("reason") == "ProgressDeadlineExceeded"

    wait_for("the progress deadline to pass", timed_out, logs=c.logs)
    conds = conditions(get_deployment(c, ns, "slow"))
    [rs] = replica_sets(c, ns)
    assert conds["Progressing"]["status"] == "False"
    assert conds["Progressing"]["message"] == f'ReplicaSet "{rs["metadata"]["name"]}" has timed out progressing.'
    assert (conds["Available"]["status"], conds["Available"]["reason"]) == ("False", "MinimumReplicasUnavailable")
    res = c.kubectl_run("-n", ns, "rollout", "status", "deployment/slow", "--timeout=60s")
    assert res.returncode != 0 and 'deployment "slow" exceeded its progress deadline' in res.stderr, res
