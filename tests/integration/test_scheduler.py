"""The scheduler against a real API server (the `server_url` fixture): nodes created as API
objects, pods bound through pods/binding without over-committing a node's cpu; a pod that fits
nowhere gets PodScheduled=False/Unschedulable with upstream's "0/N nodes are available" message
and a FailedScheduling event, and is bound once a node that fits is added; the metrics endpoint;
and `kubecore up --nodes 3` running a Deployment on hollow nodes end to end.

Every wait polls with a deadline (inprocess.eventually); nothing asserts on elapsed time."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kubecore.client.resource import ResourceClient
from kubecore.client.rest import RestClient
from kubecore.scheduler.config import default_config
from kubecore.scheduler.metrics import MetricsServer, SchedulerMetrics
from kubecore.scheduler.server import LiveScheduler
from tests.integration.cluster import KUBECONFIG, env, free_port, stop
from tests.integration.inprocess import eventually, kubectl, new_client

Obj = dict[str, Any]


@dataclass
class Env:
    rest: RestClient
    ns: str
    pods: ResourceClient
    nodes: ResourceClient
    live: LiveScheduler | None
    prefix: str
    """Names of this test's nodes start with it."""

    async def add_node(self, suffix: str, *, cpu: str) -> str:
        name = f"{self.prefix}-{suffix}"
        alloc = {"cpu": cpu, "memory": "8Gi", "pods": "110"}
        await self.nodes.create({"apiVersion": "v1", "kind": "Node",
                                 "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                                 "status": {"capacity": alloc, "allocatable": alloc,
                                            "conditions": [{"type": "Ready", "status": "True"}]}})
        return name

    async def add_pod(self, name: str, *, cpu: str, labels: dict[str, str] | None = None, **spec: Any) -> None:
        await self.pods.create({"apiVersion": "v1", "kind": "Pod",
                                "metadata": {"name": name, "namespace": self.ns, "labels": labels or {}},
                                "spec": {"containers": [{"name": "c", "image": "busybox",
                                                         "resources": {"requests": {"cpu": cpu}}}], **spec}},
                               namespace=self.ns)

    async def bound(self) -> dict[str, str]:
        """pod name -> node, for the bound pods of the test's namespace."""
        items = (await self.pods.list(namespace=self.ns))["items"]
        return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in items if p["spec"].get("nodeName")}


@pytest.fixture
async def sched(server_url: str, request: pytest.FixtureRequest) -> AsyncIterator[Env]:
    """An in-process scheduler (default profile) and a fresh namespace; the test's nodes and
    pods are deleted afterwards so the next test's scheduler starts from a clean cluster. An
    indirect parameter True turns SchedulerPopFromBackoffQ on."""
    rest = new_client(server_url)
    ns = f"sched-{uuid.uuid4().hex[:8]}"
    await (await rest.resource("v1", "namespaces")).create(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    live = LiveScheduler(rest, config=default_config(), freeze_gc=False,
                         metrics=SchedulerMetrics(pending=dict), pop_from_backoff=getattr(request, "param", False))
    task = asyncio.create_task(live.run())
    await eventually(lambda: _done(live.synced.is_set()), "the scheduler's informers to sync")
    e = Env(rest=rest, ns=ns, pods=await rest.resource("v1", "pods"), nodes=await rest.resource("v1", "nodes"),
            live=live, prefix=ns)
    try:
        yield e
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        for p in (await e.pods.list(namespace=ns))["items"]:
            await e.pods.delete(p["metadata"]["name"], namespace=ns, grace_period_seconds=0)
        for n in (await e.nodes.list())["items"]:
            if n["metadata"]["name"].startswith(e.prefix):
                await e.nodes.delete(n["metadata"]["name"])
        await rest.close()
    if task.done() and not task.cancelled() and task.exception() is not None:
        raise task.exception()  # type: ignore[misc]


async def _done(value: bool) -> bool:
    return value


def _millicpu(q: str) -> int:
    return int(q[:-1]) if q.endswith("m") else int(float(q) * 1000)


async def test_pods_are_bound_and_never_overcommit_cpu(sched: Env) -> None:
    nodes = [await sched.add_node(str(i), cpu="2") for i in range(3)]
    for i in range(12):  # exactly the room of the three nodes
        await sched.add_pod(f"p{i}", cpu="500m")

    async def all_bound() -> dict[str, str] | None:
        b = await sched.bound()
        return b if len(b) == 12 else None

    placement = await eventually(all_bound, "12 pods bound")
    per_node: dict[str, int] = {n: 0 for n in nodes}
    for pod, node in placement.items():
        per_node[node] += 500
    assert per_node == {n: 2000 for n in nodes}
    pod = await sched.pods.get("p0", namespace=sched.ns)
    events = (await (await sched.rest.resource("v1", "events")).list(namespace=sched.ns))["items"]
    scheduled = [e for e in events if e["reason"] == "Scheduled" and e["involvedObject"]["name"] == "p0"]
    assert scheduled and scheduled[0]["message"] == f"Successfully assigned {sched.ns}/p0 to {pod['spec']['nodeName']}"
    # written through events.k8s.io/v1 as kube-scheduler does; core/v1 shows the same object
    assert scheduled[0]["type"] == "Normal" and scheduled[0]["reportingComponent"] == "default-scheduler"
    assert scheduled[0]["action"] == "Binding" and scheduled[0]["eventTime"]
    assert scheduled[0]["reportingInstance"].startswith("default-scheduler-")
    v1 = await sched.rest.get_json(f"/apis/events.k8s.io/v1/namespaces/{sched.ns}/events/{scheduled[0]['metadata']['name']}")
    assert v1["note"] == scheduled[0]["message"] and v1["reportingController"] == "default-scheduler"
    assert v1["regarding"]["name"] == "p0" and v1["regarding"]["uid"] == pod["metadata"]["uid"]
    assert sched.live is not None and sched.live.metrics is not None
    assert sched.live.metrics.attempts[("default-scheduler", "scheduled")] >= 12


@pytest.mark.parametrize("sched", [False, True], ids=["", "pop-from-backoff"], indirect=True)
async def test_unschedulable_pod_waits_for_a_node_that_fits(sched: Env) -> None:
    await sched.add_node("small", cpu="1")
    await sched.add_pod("big", cpu="2")

    async def unschedulable() -> Obj | None:
        pod = await sched.pods.get("big", namespace=sched.ns)
        conds = [c for c in (pod.get("status") or {}).get("conditions") or () if c["type"] == "PodScheduled"]
        return conds[0] if conds and conds[0]["status"] == "False" else None

    cond = await eventually(unschedulable, "PodScheduled=False on the pod that fits nowhere")
    assert cond["reason"] == "Unschedulable"
    assert cond["message"].startswith("0/1 nodes are available: 1 Insufficient cpu.")
    assert "preemption: 0/1 nodes are available" in cond["message"]

    async def failed_event() -> Obj | None:
        events = (await (await sched.rest.resource("v1", "events")).list(namespace=sched.ns))["items"]
        return next((e for e in events if e["reason"] == "FailedScheduling"), None)

    event = await eventually(failed_event, "a FailedScheduling event")
    assert event["type"] == "Warning" and event["message"] == cond["message"]
    assert event["involvedObject"]["name"] == "big" and event["involvedObject"]["kind"] == "Pod"
    assert await sched.bound() == {}

    roomy = await sched.add_node("roomy", cpu="4")  # a node add moves the pod back to activeQ

    async def bound_to_roomy() -> bool:
        return (await sched.bound()).get("big") == roomy

    await eventually(bound_to_roomy, "the pod bound once a node that fits exists")


async def test_a_pod_being_deleted_is_not_scheduled(sched: Env) -> None:
    """A pending pod held by a finalizer and then deleted keeps its deletionTimestamp; when a node
    that fits comes, the scheduler pops it, reports "skip schedule deleting pod" and binds nothing
    (upstream skipPodSchedule)."""
    await sched.add_node("small", cpu="1")
    await sched.pods.create({"apiVersion": "v1", "kind": "Pod",
                             "metadata": {"name": "doomed", "namespace": sched.ns,
                                          "finalizers": ["example.com/hold"]},
                             "spec": {"containers": [{"name": "c", "image": "busybox",
                                                      "resources": {"requests": {"cpu": "2"}}}]}},
                            namespace=sched.ns)
    events = await sched.rest.resource("v1", "events")

    async def event(message: str) -> Obj | None:
        items = (await events.list(namespace=sched.ns))["items"]
        return next((e for e in items if e["reason"] == "FailedScheduling" and message in e["message"]), None)

    await eventually(lambda: event("Insufficient cpu"), "the pod found unschedulable")
    await sched.pods.delete("doomed", namespace=sched.ns)
    pod = await sched.pods.get("doomed", namespace=sched.ns)
    assert pod["metadata"].get("deletionTimestamp")  # held by its finalizer
    await sched.add_node("roomy", cpu="4")  # wakes the pod; the driver pops and skips it
    skipped = await eventually(lambda: event("skip schedule deleting pod"), "the skip reported")
    assert skipped["message"] == f"skip schedule deleting pod: {sched.ns}/doomed" and skipped["type"] == "Warning"
    assert await sched.bound() == {}
    pod["metadata"]["finalizers"] = []
    await sched.pods.update(pod, namespace=sched.ns)


async def test_metrics_endpoint_serves_the_counts(sched: Env) -> None:
    assert sched.live is not None and sched.live.metrics is not None
    metrics = sched.live.metrics
    await sched.add_node("m", cpu="1")
    await sched.add_pod("fits", cpu="100m")
    await sched.add_pod("too-big", cpu="3")

    async def both_attempted() -> bool:
        a = metrics.attempts
        return a[("default-scheduler", "scheduled")] >= 1 and a[("default-scheduler", "unschedulable")] >= 1

    await eventually(both_attempted, "one scheduled and one unschedulable attempt")
    server = MetricsServer(metrics.render)
    port = await server.start(0)

    async def one_pending() -> str | None:  # the pod that fits nowhere, unless popped right now
        text = await asyncio.to_thread(_fetch, f"http://127.0.0.1:{port}/metrics")
        return text if sum(_pending(text).values()) == 1 else None

    try:
        text = await eventually(one_pending, "one pending pod in the metrics")
    finally:
        await server.stop()
    assert 'scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"}' in text
    assert set(_pending(text)) == {"active", "backoff", "unschedulable", "gated"}
    assert 'scheduler_pod_scheduling_sli_duration_seconds_count{attempts="1"}' in text


def _pending(text: str) -> dict[str, int]:
    return {line.split('"')[1]: int(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line.startswith("scheduler_pending_pods{")}


def _fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as r:
        return str(r.read().decode())


async def test_up_with_hollow_nodes_runs_a_deployment(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(tmp_path / "up.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubecore.cli.main", "up", "--data-dir", str(tmp_path / "data"),
         "--listen", f"127.0.0.1:{port}", "--nodes", "3", "--runtime", "sim", "--scheduler-metrics-port", "0"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env())
    kubeconfig = tmp_path / "kubeconfig.test"
    kubeconfig.write_text(KUBECONFIG.format(url=url))
    rest = new_client(url)

    def logs() -> str:
        return (tmp_path / "up.log").read_text()[-4000:]

    try:
        nodes = None

        async def three_ready_nodes() -> bool:
            nonlocal nodes
            try:
                items = (await (await rest.resource("v1", "nodes")).list())["items"]
            except Exception:  # noqa: BLE001 - the server is still starting
                return False
            nodes = items
            ready = [n for n in items if any(c["type"] == "Ready" and c["status"] == "True"
                                             for c in (n.get("status") or {}).get("conditions") or ())]
            return len(ready) == 3

        try:
            await eventually(three_ready_nodes, "three Ready hollow nodes", timeout=60)
        except BaseException:
            print(logs())
            raise
        await kubectl(kubeconfig, "default", "create", "deployment", "web", "--image=busybox", "--replicas=3")

        async def available() -> bool:
            deploy = await (await rest.resource("apps/v1", "deployments")).get("web", namespace="default")
            return int((deploy.get("status") or {}).get("availableReplicas") or 0) == 3

        try:
            await eventually(available, "3 available replicas of deployment web", timeout=60)
        except BaseException:
            print(logs())
            raise
        pods = (await (await rest.resource("v1", "pods")).list(namespace="default"))["items"]
        running = [p for p in pods if p["status"].get("phase") == "Running"]
        assert len(running) == 3
        assert {p["spec"]["nodeName"] for p in running} <= {n["metadata"]["name"] for n in nodes or []}
        out = await kubectl(kubeconfig, "default", "get", "pods", "-o", "json")
        assert all(c["type"] != "PodScheduled" or c["status"] == "True"
                   for p in json.loads(out)["items"] for c in p["status"].get("conditions") or ())
    finally:
        await rest.close()
        stop(proc)
        log.close()


async def test_preemption_evicts_a_lower_priority_pod(sched: Env) -> None:
    classes = await sched.rest.resource("scheduling.k8s.io/v1", "priorityclasses")
    high = f"{sched.prefix}-high"
    await classes.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                          "metadata": {"name": high}, "value": 1000})
    try:
        node = await sched.add_node("only", cpu="1")
        await sched.add_pod("low", cpu="800m")
        await eventually(lambda: _has(sched, "low"), "the low-priority pod bound")
        await sched.pods.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "high", "namespace": sched.ns},
                                 "spec": {"priorityClassName": high, "containers": [
                                     {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "800m"}}}]}},
                                namespace=sched.ns)

        async def victim_marked() -> Obj | None:
            low = await sched.pods.get("low", namespace=sched.ns)
            return low if low["metadata"].get("deletionTimestamp") else None

        low = await eventually(victim_marked, "the victim being deleted")
        cond = [c for c in low["status"].get("conditions") or () if c["type"] == "DisruptionTarget"]
        assert cond and cond[0]["reason"] == "PreemptionByScheduler" and cond[0]["status"] == "True"

        async def nominated() -> str | None:
            pod = await sched.pods.get("high", namespace=sched.ns)
            return str((pod.get("status") or {}).get("nominatedNodeName") or "") or None

        assert await eventually(nominated, "the preemptor's nominated node") == node
        # no kubelet here: finish the victim's graceful deletion as the kubelet would
        await sched.pods.delete("low", namespace=sched.ns, grace_period_seconds=0)

        async def high_bound() -> bool:
            return (await sched.bound()).get("high") == node

        await eventually(high_bound, "the preemptor bound to the freed node")
    finally:
        await classes.delete(high)


async def _has(sched: Env, name: str) -> bool:
    return name in await sched.bound()


async def test_scheduler_command_leads_binds_serves_metrics_and_releases_the_lease(
        server_url: str, tmp_path: Path) -> None:
    rest = new_client(server_url)
    metrics_port = free_port()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG.format(url=server_url))
    log = open(tmp_path / "scheduler.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubecore.cli.main", "scheduler", "--kubeconfig", str(kubeconfig),
         "--metrics-port", str(metrics_port), "--leader-elect-lease-duration", "3s",
         "--leader-elect-renew-deadline", "2s", "--leader-elect-retry-period", "500ms"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env())
    leases = await rest.resource("coordination.k8s.io/v1", "leases")
    ns = f"cli-{uuid.uuid4().hex[:8]}"
    e = Env(rest=rest, ns=ns, pods=await rest.resource("v1", "pods"), nodes=await rest.resource("v1", "nodes"),
            live=None, prefix=ns)
    try:
        await (await rest.resource("v1", "namespaces")).create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})

        async def holder() -> str | None:
            try:
                lease = await leases.get("kube-scheduler", namespace="kube-system")
            except Exception:  # noqa: BLE001 - not created yet
                return None
            return str((lease.get("spec") or {}).get("holderIdentity") or "") or None

        await eventually(holder, "the scheduler holding the kube-scheduler Lease")
        node = await e.add_node("n", cpu="2")
        await e.add_pod("p", cpu="1")

        async def bound() -> bool:
            return (await e.bound()).get("p") == node

        await eventually(bound, "the pod bound by the scheduler process")
        text = await asyncio.to_thread(_fetch, f"http://127.0.0.1:{metrics_port}/metrics")
        assert 'scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 1' in text
    finally:
        stop(proc)
        log.close()
        await e.pods.delete("p", namespace=ns, grace_period_seconds=0)
        await e.nodes.delete(f"{ns}-n")
    assert proc.returncode == 0, (tmp_path / "scheduler.log").read_text()[-3000:]
    assert await holder() is None  # released on SIGTERM
    await rest.close()


async def test_anti_affinity_namespace_selector_is_resolved_against_namespaces(sched: Env) -> None:
    team = sched.prefix
    await (await sched.rest.resource("v1", "namespaces")).patch(sched.ns, {"metadata": {"labels": {"team": team}}})
    for i in range(2):  # a web pod already on each node
        node = await sched.add_node(str(i), cpu="2")
        await sched.add_pod(f"web{i}", cpu="100m", labels={"app": "web"}, nodeName=node)
    term = {"labelSelector": {"matchLabels": {"app": "web"}}, "namespaceSelector": {"matchLabels": {"team": team}},
            "topologyKey": "kubernetes.io/hostname"}
    await sched.add_pod("loner", cpu="100m",
                        affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}})

    async def rejected() -> str | None:
        pod = await sched.pods.get("loner", namespace=sched.ns)
        conds = [c for c in (pod.get("status") or {}).get("conditions") or () if c["type"] == "PodScheduled"]
        return str(conds[0]["message"]) if conds and conds[0]["status"] == "False" else None

    message = await eventually(rejected, "the pod kept off both nodes by its anti-affinity")
    assert message.startswith("0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules.")
    assert "loner" not in await sched.bound()
    # The namespace loses its label: the term now selects no namespace, the pending pod is
    # resolved again and placed.
    await (await sched.rest.resource("v1", "namespaces")).patch(sched.ns, {"metadata": {"labels": {"team": None}}})

    async def placed() -> bool:
        return "loner" in await sched.bound()

    await eventually(placed, "the pod placed once its namespaceSelector selects no namespace")
