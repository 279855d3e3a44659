"""Quota usage: pod compute usage (containers, init containers, finished pods), scopes, services,
claims, object counts, calculate_usage's masking, and when the status needs writing."""

from __future__ import annotations

from typing import Any

from kubecore.controllers.controller_utils import format_time
from kubecore.controllers.resourcequota import new_quota_status
from kubecore.api.quota import (
    calculate_usage, group_resources_for, parse_count_name, pod_matches_scope, pod_usage, pvc_usage, service_usage,
    to_json,
)

Obj = dict[str, Any]
NOW = 1_700_000_000.0
PODS = ("", "pods")


def pod(name: str = "p", *, cpu: str | None = "100m", mem: str | None = "64Mi", limit_mem: str | None = None,
        phase: str = "Running", init_cpu: str | None = None, deadline: int | None = None,
        priority: str | None = None) -> Obj:
    res: Obj = {"requests": {}, "limits": {}}
    if cpu:
        res["requests"]["cpu"] = cpu
    if mem:
        res["requests"]["memory"] = mem
    if limit_mem:
        res["limits"]["memory"] = limit_mem
    spec: Obj = {"containers": [{"name": "a", "resources": res}, {"name": "b", "resources": res}]}
    if init_cpu:
        spec["initContainers"] = [{"name": "i", "resources": {"requests": {"cpu": init_cpu}}}]
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    if priority:
        spec["priorityClassName"] = priority
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": spec, "status": {"phase": phase}}


def test_pod_usage() -> None:
    assert to_json(pod_usage(pod(limit_mem="1Gi"), NOW)) == {
        "count/pods": "1", "cpu": "200m", "limits.memory": "2Gi", "memory": "128Mi", "pods": "1",
        "requests.cpu": "200m", "requests.memory": "128Mi"}
    assert to_json(pod_usage(pod(init_cpu="1"), NOW))["requests.cpu"] == "1"  # init containers: a maximum
    assert to_json(pod_usage(pod(phase="Succeeded"), NOW)) == {"count/pods": "1"}
    stuck = pod()
    stuck["metadata"].update(deletionTimestamp=format_time(NOW - 60), deletionGracePeriodSeconds=30)
    assert to_json(pod_usage(stuck, NOW)) == {"count/pods": "1"}


def test_pod_scopes() -> None:
    assert pod_matches_scope("Terminating", pod(deadline=30)) and not pod_matches_scope("Terminating", pod())
    assert pod_matches_scope("NotTerminating", pod())
    assert pod_matches_scope("BestEffort", pod(cpu=None, mem=None)) and not pod_matches_scope("BestEffort", pod())
    assert pod_matches_scope("NotBestEffort", pod())
    assert pod_matches_scope("PriorityClass", pod(priority="high"), operator="In", values=["high"])
    assert not pod_matches_scope("PriorityClass", pod(priority="low"), operator="In", values=["high"])
    assert pod_matches_scope("PriorityClass", pod(priority="low"), operator="NotIn", values=["high"])
    assert not pod_matches_scope("PriorityClass", pod(), operator="Exists")


def test_service_and_claim_usage() -> None:
    lb = {"spec": {"type": "LoadBalancer", "ports": [{"port": 80, "nodePort": 30001}, {"port": 81, "nodePort": 30002}]}}
    assert to_json(service_usage(lb)) == {"count/services": "1", "services": "1", "services.loadbalancers": "1",
                                          "services.nodeports": "2"}
    np = {"spec": {"type": "NodePort", "ports": [{"port": 80}]}}
    assert to_json(service_usage(np))["services.nodeports"] == "1"
    pvc = {"metadata": {}, "spec": {"storageClassName": "fast", "resources": {"requests": {"storage": "1Gi"}}},
           "status": {"allocatedResources": {"storage": "2Gi"}}}
    assert to_json(pvc_usage(pvc)) == {
        "count/persistentvolumeclaims": "1", "fast.storageclass.storage.k8s.io/persistentvolumeclaims": "1",
        "fast.storageclass.storage.k8s.io/requests.storage": "2Gi", "persistentvolumeclaims": "1",
        "requests.storage": "2Gi"}


def quota(hard: dict[str, str], *, scopes: list[str] | None = None, status: Obj | None = None,
          selector: list[Obj] | None = None) -> Obj:
    spec: Obj = {"hard": hard}
    if scopes:
        spec["scopes"] = scopes
    if selector:
        spec["scopeSelector"] = {"matchExpressions": selector}
    return {"metadata": {"name": "q", "namespace": "ns"}, "spec": spec, "status": status or {}}


def test_calculate_usage_and_group_resources() -> None:
    q = quota({"pods": "10", "requests.cpu": "4", "limits.cpu": "4", "count/deployments.apps": "3", "configmaps": "9"})
    assert group_resources_for(q["spec"]["hard"]) == {PODS, ("apps", "deployments"), ("", "configmaps")}
    assert parse_count_name("count/deployments.apps") == ("apps", "deployments")
    objects: dict[tuple[str, str], list[Obj]] = {
        PODS: [pod("a"), pod("b", phase="Failed")], ("apps", "deployments"): [{}, {}], ("", "configmaps"): [{}]}
    assert to_json(calculate_usage(q, objects, now=NOW)) == {
        "configmaps": "1", "count/deployments.apps": "2", "limits.cpu": "0", "pods": "1", "requests.cpu": "200m"}
    scoped = quota({"pods": "10"}, scopes=["BestEffort"])
    assert to_json(calculate_usage(scoped, {PODS: [pod("a"), pod("b", cpu=None, mem=None)]}, now=NOW)) == {"pods": "1"}
    by_class = quota({"pods": "10"}, selector=[{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}])
    assert to_json(calculate_usage(by_class, {PODS: [pod("a", priority="high"), pod("b")]}, now=NOW)) == {"pods": "1"}


def test_new_quota_status_dirty_rules() -> None:
    q = quota({"pods": "10", "foo.example.com/widgets": "1"})
    st = new_quota_status(q, calculate_usage(q, {PODS: [pod()]}, now=NOW))
    assert st == {"hard": {"foo.example.com/widgets": "1", "pods": "10"}, "used": {"pods": "1"}}
    q["status"] = st
    assert new_quota_status(q, calculate_usage(q, {PODS: [pod()]}, now=NOW)) is None
    q["spec"]["hard"] = {"pods": "5"}  # a changed hard limit: written, used masked to it
    assert new_quota_status(q, calculate_usage(q, {PODS: [pod()]}, now=NOW)) == {"hard": {"pods": "5"},
                                                                                 "used": {"pods": "1"}}
