"""The DaemonSet controller against a real kubecore API server, run in-process: pods only for
nodes that match (nodeSelector, taints and tolerations), placed through a required node affinity
and never bound by the controller, a new node getting its pod, unscheduled pods of a deleted node
removed, and a rolling update within maxUnavailable, checked with real kubectl (rollout
status/history).

There is no scheduler or kubelet: tests create Node objects, bind pods through pods/binding, write
pod status, and finish graceful deletions, as upstream's integration tests do. Waits poll with a
deadline; no assertion is about elapsed time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kubecore.client.errors import Conflict, NotFound
from kubecore.client.resource import ResourceClient
from kubecore.client.rest import RestClient
from kubecore.controllers.controller_utils import format_time
from tests.integration.inprocess import WAIT, eventually, kubectl, run_controllers, write_kubeconfig

Obj = dict[str, Any]
DEFAULT_TOLERATION_KEYS = {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable",
                           "node.kubernetes.io/disk-pressure", "node.kubernetes.io/memory-pressure",
                           "node.kubernetes.io/pid-pressure", "node.kubernetes.io/unschedulable"}


@dataclass
class Env:
    ns: str
    prefix: str
    rest: RestClient
    pods: ResourceClient
    nodes: ResourceClient
    dss: ResourceClient
    revisions: ResourceClient
    kubeconfig: Path

    def node(self, short: str) -> str:
        return f"{self.prefix}-{short}"

    async def add_node(self, short: str, *, labels: Obj | None = None, taints: list[Obj] | None = None) -> Obj:
        body: Obj = {"apiVersion": "v1", "kind": "Node",
                     "metadata": {"name": self.node(short), "labels": labels or {}}, "spec": {}}
        if taints:
            body["spec"]["taints"] = taints
        return await self.nodes.create(body)

    async def ds_pods(self, ds: str) -> list[Obj]:
        items, _ = await self.pods.list_all(namespace=self.ns, label_selector=f"app={ds}")
        return [p for p in items if not p["metadata"].get("deletionTimestamp")]

    async def targets(self, ds: str) -> list[str]:
        return sorted(target_of(p) for p in await self.ds_pods(ds))

    async def kubectl(self, *args: str) -> str:
        return await kubectl(self.kubeconfig, self.ns, *args)


def target_of(pod: Obj) -> str:
    """The node a daemon pod is pinned to by its required node affinity."""
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [terms[0]["matchFields"][0]
                                                                                         ["values"][0]]}]}]
    return str(terms[0]["matchFields"][0]["values"][0])


@pytest.fixture
async def env(server_url: str, tmp_path: Path) -> AsyncIterator[Env]:
    """A fresh namespace and node-name prefix; the DaemonSet controller runs in-process."""
    async with run_controllers(server_url, ("daemonset",), ns_prefix="ds") as running:
        e = Env(ns=running.ns, prefix=running.ns, rest=running.rest, pods=await running.resource("v1", "pods"),
                nodes=await running.resource("v1", "nodes"), dss=await running.resource("apps/v1", "daemonsets"),
                revisions=await running.resource("apps/v1", "controllerrevisions"),
                kubeconfig=write_kubeconfig(tmp_path, server_url))
        try:
            yield e
        finally:
            items, _ = await e.nodes.list_all()
            for node in items:
                if node["metadata"]["name"].startswith(e.prefix):
                    await e.nodes.delete(node["metadata"]["name"])


def ds_body(name: str, *, node_selector: Obj | None = None, tolerations: list[Obj] | None = None,
            image: str = "agent:1", max_unavailable: int | None = None) -> Obj:
    pod_spec: Obj = {"containers": [{"name": "c", "image": image}]}
    if node_selector:
        pod_spec["nodeSelector"] = node_selector
    if tolerations:
        pod_spec["tolerations"] = tolerations
    spec: Obj = {"selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec}}
    if max_unavailable is not None:
        spec["updateStrategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": max_unavailable}}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name}, "spec": spec}


async def fake_node_agents(env: Env, ds: str) -> None:
    """Scheduler and kubelets for one DaemonSet's pods: bind each pod to the node its affinity
    names, report bound pods Running and Ready, finish graceful deletions."""
    while True:
        items, _ = await env.pods.list_all(namespace=env.ns, label_selector=f"app={ds}")
        for pod in items:
            name = pod["metadata"]["name"]
            try:
                if pod["metadata"].get("deletionTimestamp"):
                    await env.pods.delete(name, namespace=env.ns, grace_period_seconds=0)
                elif not pod["spec"].get("nodeName"):
                    await env.pods.create({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                                           "target": {"kind": "Node", "name": target_of(pod)}},
                                          namespace=env.ns, subresource="binding")
                elif (pod.get("status") or {}).get("phase") != "Running":
                    pod["status"] = {"phase": "Running", "conditions": [
                        {"type": "Ready", "status": "True", "lastTransitionTime": format_time(time.time() - 60)}]}
                    await env.pods.update_status(pod, namespace=env.ns)
            except (Conflict, NotFound):
                pass
        await asyncio.sleep(0.05)


async def test_pods_on_matching_nodes_and_a_new_node(env: Env) -> None:
    await env.add_node("a", labels={"role": "web"})
    await env.add_node("b", labels={"role": "web"})
    await env.add_node("c", labels={"role": "db"})
    ds = await env.dss.create(ds_body("web", node_selector={"role": "web"}), namespace=env.ns)

    async def on_web_nodes() -> bool:
        return await env.targets("web") == [env.node("a"), env.node("b")]

    await eventually(on_web_nodes, "one pod for each role=web node")
    pods = await env.ds_pods("web")
    for pod in pods:
        assert not pod["spec"].get("nodeName")  # placement is the scheduler's job
        keys = {t["key"] for t in pod["spec"]["tolerations"]}
        assert keys == DEFAULT_TOLERATION_KEYS
        ref, = pod["metadata"]["ownerReferences"]
        assert (ref["kind"], ref["uid"], ref["controller"]) == ("DaemonSet", ds["metadata"]["uid"], True)
    hashes = {p["metadata"]["labels"]["controller-revision-hash"] for p in pods}
    rev = await env.revisions.get(f"web-{hashes.pop()}", namespace=env.ns)
    assert rev["revision"] == 1 and not hashes

    agents = asyncio.create_task(fake_node_agents(env, "web"))
    try:
        async def status_is(desired: int, available: int) -> bool:
            got = await env.dss.get("web", namespace=env.ns)
            st = got.get("status") or {}
            return (st.get("desiredNumberScheduled"), st.get("currentNumberScheduled"), st.get("numberReady"),
                    st.get("numberAvailable", 0), st.get("updatedNumberScheduled"), st.get("numberMisscheduled"),
                    st.get("observedGeneration")) == (desired, desired, available, available, desired, 0,
                                                      got["metadata"]["generation"])

        await eventually(lambda: status_is(2, 2), "status: 2 desired, 2 ready")
        await env.add_node("d", labels={"role": "web"})

        async def on_new_node() -> bool:
            return await env.targets("web") == [env.node("a"), env.node("b"), env.node("d")]

        await eventually(on_new_node, "a pod for the new node")
        await eventually(lambda: status_is(3, 3), "status: 3 desired, 3 ready")
        bound = sorted(p["spec"].get("nodeName", "") for p in await env.ds_pods("web"))
        assert bound == [env.node("a"), env.node("b"), env.node("d")]
    finally:
        agents.cancel()
        await asyncio.gather(agents, return_exceptions=True)


async def test_tainted_node_excluded_unless_tolerated(env: Env) -> None:
    await env.add_node("plain")
    await env.add_node("gpu", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
    await env.add_node("cordoned", taints=[{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}])
    await env.dss.create(ds_body("plain"), namespace=env.ns)
    await env.dss.create(ds_body("tol", tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu",
                                                      "effect": "NoSchedule"}]), namespace=env.ns)

    async def placed() -> bool:
        return (await env.targets("plain") == [env.node("cordoned"), env.node("plain")]
                and await env.targets("tol") == [env.node("cordoned"), env.node("gpu"), env.node("plain")])

    await eventually(placed, "the tainted node only for the tolerating DaemonSet (cordoned: default toleration)")
    node = await env.nodes.get(env.node("plain"))
    node["spec"]["taints"] = [{"key": "evict", "effect": "NoExecute"}]
    await env.nodes.update(node)

    async def evicted() -> bool:
        return env.node("plain") not in await env.targets("plain") + await env.targets("tol")

    await eventually(evicted, "pods removed from a node with an untolerated NoExecute taint")


async def test_unscheduled_pod_of_deleted_node_removed(env: Env) -> None:
    await env.add_node("x")
    await env.add_node("y")
    await env.dss.create(ds_body("gone"), namespace=env.ns)

    async def two() -> bool:
        return await env.targets("gone") == [env.node("x"), env.node("y")]

    await eventually(two, "pods for x and y")
    await env.nodes.delete(env.node("y"))

    async def one() -> bool:
        return await env.targets("gone") == [env.node("x")]

    await eventually(one, "the pod waiting for the deleted node removed")

    async def status_follows() -> bool:  # the status write comes after the pod's deletion
        st = (await env.dss.get("gone", namespace=env.ns)).get("status") or {}
        return bool(st.get("desiredNumberScheduled") == 1)

    await eventually(status_follows, "desiredNumberScheduled 1 once the node is gone")


async def test_rolling_update_within_max_unavailable(env: Env) -> None:
    for short in ("r1", "r2", "r3"):
        await env.add_node(short)
    await env.dss.create(ds_body("roll", max_unavailable=1), namespace=env.ns)
    agents = asyncio.create_task(fake_node_agents(env, "roll"))
    missing_peak = 0
    done = asyncio.Event()

    def is_ready(pod: Obj) -> bool:
        return any(c.get("type") == "Ready" and c.get("status") == "True"
                   for c in (pod.get("status") or {}).get("conditions") or ())

    async def watch_availability(initial: list[Obj], rv: str) -> None:
        nonlocal missing_peak
        ready = {p["metadata"]["name"]: p for p in initial
                 if is_ready(p) and not p["metadata"].get("deletionTimestamp")}
        async with await env.pods.watch(namespace=env.ns, resource_version=rv) as stream:
            async for ev in stream:
                m = ev.object["metadata"]
                if ev.type == "DELETED" or m.get("deletionTimestamp"):
                    ready.pop(m["name"], None)
                elif is_ready(ev.object):
                    ready[m["name"]] = ev.object
                nodes_ready = {p["spec"].get("nodeName") for p in ready.values()}
                missing_peak = max(missing_peak, 3 - len(nodes_ready))
                images = {p["spec"]["containers"][0]["image"] for p in ready.values()}
                if len(nodes_ready) == 3 and images == {"agent:2"}:
                    done.set()

    try:
        async def all_available() -> bool:
            st = (await env.dss.get("roll", namespace=env.ns)).get("status") or {}
            return st.get("numberAvailable") == 3 and st.get("updatedNumberScheduled") == 3

        await eventually(all_available, "3 available pods")
        out = await env.kubectl("rollout", "status", "daemonset/roll", "--timeout=60s")
        assert 'daemon set "roll" successfully rolled out' in out
        initial, rv = await env.pods.list_all(namespace=env.ns)
        assert len(initial) == 3
        watcher = asyncio.create_task(watch_availability(initial, rv))
        new_template = {"spec": {"containers": [{"name": "c", "image": "agent:2"}]}}
        await env.dss.patch("roll", {"spec": {"template": new_template}}, namespace=env.ns)
        await asyncio.wait_for(done.wait(), WAIT)
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
        assert missing_peak == 1  # one node at a time (maxUnavailable 1)
        await eventually(all_available, "3 updated, available pods")
        out = await env.kubectl("rollout", "status", "daemonset/roll", "--timeout=60s")
        assert 'daemon set "roll" successfully rolled out' in out
        history = await env.kubectl("rollout", "history", "daemonset/roll")
        assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"]
        first = await env.kubectl("rollout", "history", "daemonset/roll", "--revision=1")
        assert "agent:1" in first and "agent:2" not in first
        table = (await env.kubectl("get", "daemonset", "roll")).splitlines()
        assert table[0].split()[:6] == ["NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE"]
        assert table[1].split()[:7] == ["roll", "3", "3", "3", "3", "3", "<none>"]
    finally:
        agents.cancel()
        await asyncio.gather(agents, return_exceptions=True)
