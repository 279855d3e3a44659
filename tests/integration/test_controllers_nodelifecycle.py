"""The node lifecycle and taint eviction controllers against a real kubecore API server, run
in-process with short periods (monitor 0.2 s, grace 4 s).

There is no kubelet: the test plays two kubelets itself, renewing each node's Lease in
kube-node-lease and posting node status. It stops heartbeating one node and watches the
controllers react (conditions Unknown, unreachable taints, pods not ready, pods without a
toleration deleted at once, a pod with tolerationSeconds deleted after them, tolerated pods kept),
then resumes (taints removed, the pending eviction cancelled). The other node keeps its heartbeat
so the zone is not fully disrupted (with every node down the controller stops evicting).
Waits poll with generous deadlines; nothing asserts on elapsed time."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, TypeVar

import pytest

from kubecore.client.resource import ResourceClient
from kubecore.controllers.controller_utils import format_time, parse_time
from tests.integration import inprocess
from tests.integration.inprocess import run_controllers

WAIT = 40.0
GRACE = 4.0
HEARTBEAT = 0.5
Obj = dict[str, Any]
UNREACHABLE = "node.kubernetes.io/unreachable"
OPTIONS = {"node_monitor_period": 0.2, "node_monitor_grace_period": GRACE, "node_startup_grace_period": GRACE,
           "node_eviction_rate": 1.0}


def micro_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


T = TypeVar("T")


async def eventually(check: Callable[[], Awaitable[T | None]], what: str) -> T:
    return await inprocess.eventually(check, what, timeout=WAIT, interval=0.1)


@dataclass
class Env:
    ns: str
    nodes: ResourceClient
    pods: ResourceClient
    leases: ResourceClient
    events: ResourceClient
    alive: set[str] = field(default_factory=set)

    async def heartbeat_forever(self) -> None:
        """The kubelets' Lease renewals, for every node in `alive`."""
        while True:
            for name in list(self.alive):
                await self.leases.patch(name, {"spec": {"renewTime": micro_now()}}, namespace="kube-node-lease")
            await asyncio.sleep(HEARTBEAT)

    async def post_ready(self, name: str) -> None:
        """What a kubelet posts: Ready=True and no pressure, heartbeat now."""
        node = await self.nodes.get(name)
        now = format_time(time.time())
        node["status"] = {"conditions": [
            {"type": t, "status": s, "reason": r, "message": "posted by the test",
             "lastHeartbeatTime": now, "lastTransitionTime": now}
            for t, s, r in (("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                            ("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                            ("PIDPressure", "False", "KubeletHasSufficientPID"),
                            ("Ready", "True", "KubeletReady"))]}
        await self.nodes.update_status(node)

    async def add_node(self, name: str) -> None:
        await self.nodes.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
        await self.post_ready(name)
        await self.leases.create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                  "metadata": {"name": name, "namespace": "kube-node-lease"},
                                  "spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
                                           "renewTime": micro_now()}}, namespace="kube-node-lease")
        self.alive.add(name)

    async def add_pod(self, name: str, node: str, tolerations: list[Obj]) -> None:
        await self.pods.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
            "nodeName": node, "tolerations": tolerations, "containers": [{"name": "c", "image": "busybox"}]}},
            namespace=self.ns)
        pod = await self.pods.get(name, namespace=self.ns)
        now = format_time(time.time())
        pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True",
                                                             "lastTransitionTime": now}]}
        await self.pods.update_status(pod, namespace=self.ns)

    async def pod(self, name: str) -> Obj:
        return await self.pods.get(name, namespace=self.ns)


def condition(obj: Obj, ctype: str) -> Obj:
    return next((c for c in (obj.get("status") or {}).get("conditions") or () if c.get("type") == ctype), {})


def taint(node: Obj, key: str, effect: str) -> Obj | None:
    return next((t for t in (node.get("spec") or {}).get("taints") or ()
                 if t.get("key") == key and t.get("effect") == effect), None)


@pytest.fixture
async def env(server_url: str) -> AsyncIterator[Env]:
    # cluster-wide informers: nodes, and leases in kube-node-lease
    async with run_controllers(server_url, ("nodelifecycle", "tainteviction"), ns_prefix="nl", namespaced=False,
                               options=OPTIONS) as running:
        e = Env(ns=running.ns, nodes=await running.resource("v1", "nodes"), pods=await running.resource("v1", "pods"),
                leases=await running.resource("coordination.k8s.io/v1", "leases"),
                events=await running.resource("v1", "events"))
        heartbeats = asyncio.create_task(e.heartbeat_forever())
        try:
            yield e
        finally:
            heartbeats.cancel()
            await asyncio.gather(heartbeats, return_exceptions=True)


async def test_unreachable_node_is_tainted_and_its_pods_evicted(env: Env) -> None:
    suffix = uuid.uuid4().hex[:6]
    healthy, lost = f"healthy-{suffix}", f"lost-{suffix}"
    await env.add_node(healthy)
    await env.add_node(lost)
    toleration = {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute"}
    await env.add_pod("tolerates-0s", lost, [{**toleration, "tolerationSeconds": 0}])
    await env.add_pod("tolerates-3s", lost, [{**toleration, "tolerationSeconds": 3}])
    await env.add_pod("defaulted", lost, [])  # admission (DefaultTolerationSeconds) gives it 300 s
    await env.add_pod("tolerates-forever", lost, [toleration])
    await env.add_pod("on-healthy", healthy, [])
    defaulted = (await env.pod("defaulted"))["spec"]["tolerations"]
    assert {**toleration, "tolerationSeconds": 300} in defaulted

    async def registered() -> bool:  # the controller has seen both nodes healthy at least once
        items, _ = await env.events.list_all(namespace="default")
        return sum(1 for e in items if e.get("reason") == "RegisteredNode"
                   and e["involvedObject"]["name"] in (healthy, lost)) == 2

    await eventually(registered, "RegisteredNode events")
    env.alive.discard(lost)  # the kubelet of `lost` dies

    async def unknown() -> Obj | None:
        node = await env.nodes.get(lost)
        return node if condition(node, "Ready").get("status") == "Unknown" else None

    node = await eventually(unknown, "Ready=Unknown on the lost node")
    for ctype in ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure"):
        c = condition(node, ctype)
        assert (c["status"], c["reason"], c["message"]) == \
            ("Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status."), c

    async def tainted() -> Obj | None:
        n = await env.nodes.get(lost)
        return n if taint(n, UNREACHABLE, "NoExecute") and taint(n, UNREACHABLE, "NoSchedule") else None

    node = await eventually(tainted, "unreachable NoExecute and NoSchedule taints")
    no_exec = taint(node, UNREACHABLE, "NoExecute")
    assert no_exec is not None and parse_time(no_exec.get("timeAdded")) is not None

    async def deleted(name: str) -> Obj | None:
        pod = await env.pod(name)
        return pod if pod["metadata"].get("deletionTimestamp") else None

    first = await eventually(lambda: deleted("tolerates-0s"), "the pod tolerating 0 s to be deleted")
    target = condition(first, "DisruptionTarget")
    assert (target.get("status"), target.get("reason"), target.get("message")) == \
        ("True", "DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint")
    assert condition(first, "Ready")["status"] == "False"  # MarkPodsNotReady ran first
    short = await eventually(lambda: deleted("tolerates-3s"), "the pod tolerating 3 s to be deleted")
    # not before its tolerationSeconds (timestamps written by the controller, whole seconds)
    evicted_at = parse_time(condition(short, "DisruptionTarget")["lastTransitionTime"])
    assert evicted_at is not None and evicted_at >= parse_time(no_exec["timeAdded"]) + 3 - 1  # type: ignore[operator]
    for name in ("defaulted", "tolerates-forever"):
        pod = await env.pod(name)
        assert not pod["metadata"].get("deletionTimestamp"), name
        assert condition(pod, "Ready")["status"] == "False", name
    other = await env.pod("on-healthy")
    assert condition(other, "Ready")["status"] == "True" and not other["metadata"].get("deletionTimestamp")
    healthy_node = await env.nodes.get(healthy)
    assert condition(healthy_node, "Ready")["status"] == "True" and not (healthy_node.get("spec") or {}).get("taints")

    await env.post_ready(lost)  # the kubelet comes back
    env.alive.add(lost)

    async def untainted() -> bool:
        return not ((await env.nodes.get(lost)).get("spec") or {}).get("taints")

    await eventually(untainted, "the taints to be removed after recovery")

    async def cancelled() -> bool:
        items, _ = await env.events.list_all(namespace=env.ns)
        return any(e.get("reason") == "TaintManagerEviction"
                   and e.get("message") == f"Cancelling deletion of Pod {env.ns}/defaulted" for e in items)

    await eventually(cancelled, "the pending eviction of the defaulted pod to be cancelled")
    assert not (await env.pod("defaulted"))["metadata"].get("deletionTimestamp")


async def test_unschedulable_node_gets_the_noschedule_taint(env: Env) -> None:
    name = f"cordoned-{uuid.uuid4().hex[:6]}"
    await env.add_node(name)
    await env.nodes.patch(name, {"spec": {"unschedulable": True}})

    async def has(present: bool) -> bool:
        found = taint(await env.nodes.get(name), "node.kubernetes.io/unschedulable", "NoSchedule")
        return (found is not None) == present

    await eventually(lambda: has(True), "the unschedulable taint")
    await env.nodes.patch(name, {"spec": {"unschedulable": False}})
    await eventually(lambda: has(False), "the unschedulable taint to go")


async def test_pod_not_tolerating_a_user_noexecute_taint_is_deleted_at_once(env: Env) -> None:
    name = f"maintained-{uuid.uuid4().hex[:6]}"
    await env.add_node(name)
    maintenance = {"key": "example.com/maintenance", "value": "yes", "effect": "NoExecute"}
    await env.add_pod("intolerant", name, [])
    await env.add_pod("tolerant", name, [{"key": "example.com/maintenance", "operator": "Equal", "value": "yes",
                                          "effect": "NoExecute"}])
    await env.nodes.patch(name, {"spec": {"taints": [maintenance]}})

    async def deleted() -> Obj | None:
        pod = await env.pod("intolerant")
        return pod if pod["metadata"].get("deletionTimestamp") else None

    pod = await eventually(deleted, "the pod not tolerating the taint to be deleted")
    assert condition(pod, "DisruptionTarget")["reason"] == "DeletionByTaintManager"

    async def marked() -> bool:
        items, _ = await env.events.list_all(namespace=env.ns)
        return any(e.get("reason") == "TaintManagerEviction"
                   and e.get("message") == f"Marking for deletion Pod {env.ns}/intolerant" for e in items)

    await eventually(marked, "the TaintManagerEviction event")
    assert not (await env.pod("tolerant"))["metadata"].get("deletionTimestamp")
