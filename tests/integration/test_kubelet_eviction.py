"""Node-pressure eviction through a whole simulated kubelet against a real API server: a pod whose
annotated memory use starves a 1Gi node is evicted with upstream's status and message, the node
reports MemoryPressure, and a BestEffort pod arriving meanwhile is rejected. The eviction pass is
driven directly (its 10 s period is not waited for); the rest is the kubelet's own work."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from kubecore.kubelet.hollow import HollowOptions, add_hollow_nodes, sim_kubelet
from kubecore.kubelet.host import KubeletHost
from kubecore.kubelet.node_resources import stats_provider
from tests.integration.inprocess import eventually, new_client
from tests.integration.test_kubelet_sim import Node, condition, fast_config, get_pod, pod_when, run_pod

Obj = dict[str, Any]


@asynccontextmanager
async def small_node(server_url: str) -> AsyncIterator[Node]:
    rest = new_client(server_url)
    name, ns = f"evict-{uuid.uuid4().hex[:6]}", f"ev-{uuid.uuid4().hex[:8]}"
    await rest.send_json("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                        "metadata": {"name": ns}})
    host = KubeletHost(rest)
    kubelet = sim_kubelet(host, fast_config(name, memory="1Gi"), node_ip="10.9.8.6")
    await host.start()
    try:
        yield Node(rest=rest, host=host, kubelet=kubelet, ns=ns)
    finally:
        await host.stop()
        await rest.close()


async def test_memory_hog_is_evicted_node_reports_pressure_and_best_effort_is_rejected(server_url: str) -> None:
    async with small_node(server_url) as node:
        resources = node.kubelet.resources
        assert resources is not None, "a single simulated kubelet manages its resources"
        await run_pod(node, "hog", annotations={"sim.kubecore.io/memory-usage": "950Mi"})
        await pod_when(node, "hog", "Running")
        (evicted,) = await resources.eviction.synchronize()
        assert evicted["metadata"]["name"] == "hog"

        pod = await pod_when(node, "hog", "Failed")
        message = ("The node was low on resource: memory. Threshold quantity: 100Mi, available: 74Mi. "
                   "Container app was using 950Mi, request is 0, has larger consumption of memory. ")
        assert (pod["status"]["reason"], pod["status"]["message"]) == ("Evicted", message)
        target = condition(pod, "DisruptionTarget")
        assert (target["status"], target["reason"], target["message"]) == ("True", "TerminationByKubelet", message)
        assert "terminated" in pod["status"]["containerStatuses"][0]["state"]

        async def pressure() -> Obj | None:
            n: Obj = await node.rest.get_json(f"/api/v1/nodes/{node.name}")
            c = condition(n, "MemoryPressure")
            return c if c.get("status") == "True" else None

        c = await eventually(pressure, "MemoryPressure=True on the node")
        assert c["reason"] == "KubeletHasInsufficientMemory"

        await run_pod(node, "late")
        late = await pod_when(node, "late", "Failed")
        assert (late["status"]["reason"], late["status"]["message"]) == (
            "Evicted", "Pod was rejected: The node had condition: [MemoryPressure]. ")
        assert not any("running" in (cs.get("state") or {})
                       for cs in (await get_pod(node, "late"))["status"].get("containerStatuses") or [])
        sandboxes = {s.metadata.name for s in await node.kubelet.runtime.list_pod_sandbox()}
        assert sandboxes == {"hog"}  # nothing was started for the rejected pod


async def test_hollow_nodes_run_no_resource_management_but_still_serve_a_summary(server_url: str) -> None:
    rest = new_client(server_url)
    host = KubeletHost(rest, record_events=False)
    (kubelet,) = add_hollow_nodes(host, HollowOptions(count=1, prefix=f"hollow-ev-{uuid.uuid4().hex[:4]}-"))
    try:
        await host.start()
        assert kubelet.resources is None and not kubelet.config.manage_resources
        summary = await stats_provider(kubelet).summary()
        assert summary["node"]["nodeName"] == kubelet.name
        assert summary["node"]["memory"]["availableBytes"] == 32 << 30  # nothing runs: all of the 32Gi
        n: Obj = await rest.get_json(f"/api/v1/nodes/{kubelet.name}")
        assert condition(n, "MemoryPressure")["status"] == "False"
    finally:
        await host.stop()
        await rest.close()
