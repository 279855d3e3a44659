"""The service account, pod GC, resource quota and disruption controllers against a real kubecore
API server, run in-process (one controller set per test; the server is this module's own).

No kubelet: tests write pod status themselves. The pod GC runs with short periods through
ControllerContext.options (as upstream's integration tests shorten its quarantine). Waits poll with
a deadline; nothing asserts on elapsed time."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from kubecore.client.errors import NotFound, TooManyRequests
from kubecore.client.rest import RestClient
from kubecore.controllers.controller_utils import format_time
from tests.integration.inprocess import eventually, new_client, run_controllers

Obj = dict[str, Any]
CONTROLLERS = ("serviceaccount", "podgc", "resourcequota", "disruption")
OPTIONS = {"podgc_check_period": 0.3, "podgc_quarantine_time": 0.3, "terminated_pod_gc_threshold": 2}


@dataclass
class Env:
    ns: str
    rest: RestClient
    no_retry: RestClient

    async def rc(self, api_version: str, resource: str) -> Any:
        return await self.rest.resource(api_version, resource)


@pytest.fixture
async def env(server_url: str) -> AsyncIterator[Env]:
    no_retry = new_client(server_url, max_retries=0)
    try:
        async with run_controllers(server_url, CONTROLLERS, ns_prefix="misc", namespaced=False,
                                   options=OPTIONS) as running:
            yield Env(ns=running.ns, rest=running.rest, no_retry=no_retry)
    finally:
        await no_retry.close()


def pod_body(name: str, *, labels: dict[str, str] | None = None, node: str = "", cpu: str | None = None,
             owner: Obj | None = None, finalizers: list[str] | None = None) -> Obj:
    container: Obj = {"name": "c", "image": "busybox"}
    if cpu is not None:
        container["resources"] = {"requests": {"cpu": cpu, "memory": "64Mi"}, "limits": {"cpu": cpu}}
    meta: Obj = {"name": name, "labels": labels or {"app": "x"}}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner["metadata"]["name"],
                                    "uid": owner["metadata"]["uid"], "controller": True}]
    if finalizers:
        meta["finalizers"] = finalizers
    spec: Obj = {"containers": [container]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


async def set_phase(env: Env, name: str, phase: str, *, ready: bool = False) -> None:
    pods = await env.rc("v1", "pods")
    fresh = await pods.get(name, namespace=env.ns)
    fresh["status"] = {"phase": phase, "conditions": [
        {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": format_time(time.time())}]}
    await pods.update_status(fresh, namespace=env.ns)


async def test_default_service_account(env: Env) -> None:
    sas = await env.rc("v1", "serviceaccounts")
    name = f"fresh-{uuid.uuid4().hex[:6]}"
    await (await env.rc("v1", "namespaces")).create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    async def has_default() -> bool:
        try:
            await sas.get("default", namespace=name)
        except NotFound:
            return False
        return True

    await eventually(has_default, "the default ServiceAccount in a new namespace")
    old_uid = (await sas.get("default", namespace=name))["metadata"]["uid"]
    await sas.delete("default", namespace=name)

    async def recreated() -> bool:
        return await has_default() and (await sas.get("default", namespace=name))["metadata"]["uid"] != old_uid

    await eventually(recreated, "the default ServiceAccount recreated after its deletion")


async def test_pod_gc(env: Env) -> None:
    pods, nodes = await env.rc("v1", "pods"), await env.rc("v1", "nodes")
    node = f"gone-{uuid.uuid4().hex[:6]}"
    await nodes.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
    await pods.create(pod_body("orphan", node=node, finalizers=["test.kubecore.io/hold"]), namespace=env.ns)
    await set_phase(env, "orphan", "Running", ready=True)
    for i in range(3):
        await pods.create(pod_body(f"done-{i}"), namespace=env.ns)
        await set_phase(env, f"done-{i}", "Succeeded")
    await nodes.delete(node)

    async def orphan_failed() -> bool:
        p = await pods.get("orphan", namespace=env.ns)
        return bool(p["metadata"].get("deletionTimestamp"))

    await eventually(orphan_failed, "the pod of the deleted node deleted")
    pod = await pods.get("orphan", namespace=env.ns)
    assert pod["status"]["phase"] == "Failed"
    cond = {c["type"]: c for c in pod["status"]["conditions"]}["DisruptionTarget"]
    assert (cond["status"], cond["reason"], cond["message"]) == ("True", "DeletionByPodGC", "PodGC: node no longer exists")
    await pods.patch("orphan", {"metadata": {"finalizers": None}}, namespace=env.ns)

    async def over_threshold_removed() -> bool:
        items, _ = await pods.list_all(namespace=env.ns)
        return {p["metadata"]["name"] for p in items if p["metadata"]["name"].startswith("done-")} == {"done-1", "done-2"}

    await eventually(over_threshold_removed, "the oldest terminated pod removed above the threshold of 2")


async def test_quota_usage(env: Env) -> None:
    quotas, pods = await env.rc("v1", "resourcequotas"), await env.rc("v1", "pods")
    cms = await env.rc("v1", "configmaps")
    await quotas.create({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"}, "spec": {"hard": {
        "pods": "10", "requests.cpu": "2", "limits.ephemeral-storage": "1Gi", "requests.memory": "1Gi",
        "configmaps": "5", "count/configmaps": "5", "services": "2"}}}, namespace=env.ns)

    async def processed() -> bool:  # until then admission neither charges nor checks (upstream's e2e waits too)
        return bool(((await quotas.get("q", namespace=env.ns)).get("status") or {}).get("hard"))

    await eventually(processed, "status.hard filled")
    await pods.create(pod_body("p1", cpu="100m"), namespace=env.ns)
    await pods.create(pod_body("p2", cpu="250m"), namespace=env.ns)
    await cms.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}, namespace=env.ns)
    existing_cms = len((await cms.list_all(namespace=env.ns))[0])

    async def used_is(expected: dict[str, str]) -> bool:
        q = await quotas.get("q", namespace=env.ns)
        return (q.get("status") or {}).get("used") == expected

    want = {"pods": "2", "requests.cpu": "350m", "requests.memory": "128Mi", "limits.ephemeral-storage": "0",
            "configmaps": str(existing_cms), "count/configmaps": str(existing_cms), "services": "0"}
    await eventually(lambda: used_is(want), f"quota used {want}")
    q = await quotas.get("q", namespace=env.ns)
    assert q["status"]["hard"] == {"configmaps": "5", "count/configmaps": "5", "limits.ephemeral-storage": "1Gi",
                                   "pods": "10", "requests.cpu": "2", "requests.memory": "1Gi", "services": "2"}
    await set_phase(env, "p2", "Succeeded")  # finished pods stop counting
    want2 = {**want, "pods": "1", "requests.cpu": "100m", "requests.memory": "64Mi"}
    await eventually(lambda: used_is(want2), f"quota used {want2} after a pod finished")


async def evict(env: Env, name: str) -> None:
    pods = await env.no_retry.resource("v1", "pods")
    await pods.create({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}},
                      namespace=env.ns, subresource="eviction")


async def test_pdb_status_and_eviction(env: Env) -> None:
    rss, pods, pdbs = (await env.rc("apps/v1", "replicasets"), await env.rc("v1", "pods"),
                       await env.rc("policy/v1", "poddisruptionbudgets"))
    labels = {"app": "db"}
    rs = await rss.create({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "db"},
                           "spec": {"replicas": 3, "selector": {"matchLabels": labels},
                                    "template": {"metadata": {"labels": labels},
                                                 "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}},
                          namespace=env.ns)
    for i in range(3):
        await pods.create(pod_body(f"db-{i}", labels=labels, owner=rs), namespace=env.ns)
        await set_phase(env, f"db-{i}", "Running", ready=True)
    await pdbs.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "db"},
                       "spec": {"minAvailable": 2, "selector": {"matchLabels": labels}}}, namespace=env.ns)

    async def status_is(**want: int) -> bool:
        st = (await pdbs.get("db", namespace=env.ns)).get("status") or {}
        return all(st.get(k) == v for k, v in want.items())

    await eventually(lambda: status_is(currentHealthy=3, desiredHealthy=2, expectedPods=3, disruptionsAllowed=1,
                                       observedGeneration=1), "PDB status allowing one disruption")
    cond = (await pdbs.get("db", namespace=env.ns))["status"]["conditions"][0]
    assert (cond["type"], cond["status"], cond["reason"]) == ("DisruptionAllowed", "True", "SufficientPods")

    await evict(env, "db-0")  # allowed: the budget had one disruption to give
    await eventually(lambda: status_is(currentHealthy=2, disruptionsAllowed=0), "PDB status after the eviction")
    with pytest.raises(TooManyRequests):
        await evict(env, "db-1")
    assert (await pods.get("db-1", namespace=env.ns))["metadata"].get("deletionTimestamp") is None
    st = (await pdbs.get("db", namespace=env.ns))["status"]
    assert (st["conditions"][0]["status"], st["conditions"][0]["reason"]) == ("False", "InsufficientPods")

    # a percentage is of the ReplicaSet's scale (3)
    await pdbs.patch("db", {"spec": {"minAvailable": None, "maxUnavailable": "50%"}}, namespace=env.ns)
    await eventually(lambda: status_is(expectedPods=3, desiredHealthy=1, disruptionsAllowed=1, observedGeneration=2),
                     "PDB status from maxUnavailable 50% of the ReplicaSet's scale")
    await evict(env, "db-1")
