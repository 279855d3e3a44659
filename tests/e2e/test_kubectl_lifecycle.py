"""Real kubectl: describe, wait, and delete with each cascade mode, against a real server."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.e2e.conftest import Server

pytestmark = pytest.mark.usefixtures("kubectl_bin")


def _deployment(name: str) -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": labels},
            "spec": {"replicas": 2, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}}


def _create(server: Server, path: str, body: dict[str, Any]) -> dict[str, Any]:
    status, obj = server.http("POST", path, body)
    assert status == 201, obj
    return obj


def test_describe(kubectl, server: Server, namespace: str) -> None:
    _create(server, f"/apis/apps/v1/namespaces/{namespace}/deployments", _deployment("shown"))
    out = kubectl.ok("describe", "-n", namespace, "deployment", "shown")
    for text in ("Name:", "shown", f"Namespace:              {namespace}", "Replicas:", "Selector:",
                 "app=shown", "nginx:1.27", "StrategyType:"):
        assert text in out, out
    out = kubectl.ok("describe", "namespace", namespace)
    assert f"Name:         {namespace}" in out and "Status:       Active" in out, out


def test_describe_pod_shows_events_of_both_groups(kubectl, server: Server, namespace: str) -> None:
    """kubectl describe reads core/v1 Events; the scheduler writes events.k8s.io/v1 ones (no
    deprecatedSource, no count): both show, From the reporting controller."""
    pod = _create(server, f"/api/v1/namespaces/{namespace}/pods",
                  {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "seen"},
                   "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}})
    ref = {"kind": "Pod", "apiVersion": "v1", "namespace": namespace, "name": "seen", "uid": pod["metadata"]["uid"]}
    now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
    _create(server, f"/apis/events.k8s.io/v1/namespaces/{namespace}/events",
            {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "seen.1"}, "eventTime": now,
             "reportingController": "default-scheduler", "reportingInstance": "default-scheduler-h",
             "action": "Binding", "reason": "Scheduled", "type": "Normal", "regarding": ref,
             "note": f"Successfully assigned {namespace}/seen to node-1"})
    stamp = now[:19] + "Z"
    _create(server, f"/api/v1/namespaces/{namespace}/events",
            {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "seen.2"}, "involvedObject": ref,
             "reason": "Pulled", "message": "image pulled", "type": "Normal", "count": 1,
             "source": {"component": "kubelet", "host": "node-1"}, "firstTimestamp": stamp, "lastTimestamp": stamp})
    out = kubectl.ok("describe", "-n", namespace, "pod", "seen")
    events = out[out.index("Events:"):]
    assert "Scheduled" in events and "default-scheduler" in events, out
    assert f"Successfully assigned {namespace}/seen to node-1" in events and "kubelet" in events, out
    out = kubectl.ok("get", "events", "-n", namespace, "--field-selector", "source=default-scheduler", "-o", "name")
    assert out.split() == ["event/seen.1"], out


def test_wait_for_a_condition_and_for_deletion(kubectl, server: Server, namespace: str) -> None:
    pods = f"/api/v1/namespaces/{namespace}/pods"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "w"},
           "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}
    _create(server, pods, pod)

    def become_ready() -> None:
        time.sleep(1.0)
        _, p = server.http("GET", f"{pods}/w")
        p["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        server.http("PUT", f"{pods}/w/status", p)

    t = threading.Thread(target=become_ready)
    t.start()
    out = kubectl.ok("wait", "-n", namespace, "--for=condition=Ready", "pod/w", "--timeout=20s", timeout=30)
    t.join()
    assert out.strip() == "pod/w condition met", out
    out = kubectl.ok("wait", "-n", namespace, "--for=jsonpath={.status.phase}=Running", "pod/w", "--timeout=10s")
    assert out.strip() == "pod/w condition met", out

    def delete_later() -> None:
        time.sleep(1.0)
        server.http("DELETE", f"{pods}/w", {"gracePeriodSeconds": 0})

    t = threading.Thread(target=delete_later)
    t.start()
    out = kubectl.ok("wait", "-n", namespace, "--for=delete", "pod/w", "--timeout=20s", timeout=30)
    t.join()
    assert out.strip() == "pod/w condition met", out


@pytest.mark.parametrize(("cascade", "finalizer"), [("orphan", "orphan"), ("foreground", "foregroundDeletion")])
def test_delete_cascade_modes_leave_the_garbage_collector_its_finalizer(
    kubectl, server: Server, namespace: str, unique: Callable[[str], str], cascade: str, finalizer: str,
) -> None:
    name = unique(cascade)
    _create(server, f"/apis/apps/v1/namespaces/{namespace}/deployments", _deployment(name))
    out = kubectl.ok("delete", "-n", namespace, "deployment", name, f"--cascade={cascade}", "--wait=false")
    assert out.strip() == f'deployment.apps "{name}" deleted from {namespace} namespace', out
    got = json.loads(kubectl.ok("get", "-n", namespace, "deployment", name, "-o", "json"))
    assert got["metadata"]["finalizers"] == [finalizer] and got["metadata"]["deletionTimestamp"]


def test_delete_cascade_background_removes_at_once(kubectl, server: Server, namespace: str) -> None:
    _create(server, f"/apis/apps/v1/namespaces/{namespace}/deployments", _deployment("bg"))
    out = kubectl.ok("delete", "-n", namespace, "deployment", "bg", "--cascade=background", timeout=20)
    assert out.strip() == f'deployment.apps "bg" deleted from {namespace} namespace', out
    res = kubectl.run("get", "-n", namespace, "deployment", "bg")
    assert res.returncode == 1 and "NotFound" in res.stderr
