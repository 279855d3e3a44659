"""The kubelet's predicate admission through a whole simulated kubelet and a real API server:
pods bound without the scheduler that do not fit end Failed with upstream's reason and message,
and nothing runs for them."""

from __future__ import annotations

import uuid
from typing import Any

from kubecore.kubelet.hollow import sim_kubelet
from kubecore.kubelet.host import KubeletHost
from tests.integration.inprocess import new_client
from tests.integration.test_kubelet_sim import Node, fast_config, pod_when

Obj = dict[str, Any]


async def test_pods_that_do_not_fit_are_rejected_with_upstreams_reasons(server_url: str) -> None:
    rest = new_client(server_url)
    name, ns = f"adm-{uuid.uuid4().hex[:6]}", f"adm-{uuid.uuid4().hex[:8]}"
    await rest.send_json("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                        "metadata": {"name": ns}})
    host = KubeletHost(rest)
    kubelet = sim_kubelet(host, fast_config(name, cpu="1", memory="2Gi"), node_ip="10.9.8.7")
    await host.start()
    node = Node(rest=rest, host=host, kubelet=kubelet, ns=ns)

    async def place(pod_name: str, *, cpu: str = "", **spec: Any) -> None:
        c: Obj = {"name": "app", "image": "registry.example/app:1"}
        if cpu:
            c["resources"] = {"requests": {"cpu": cpu}}
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod_name, "namespace": ns},
                "spec": {"nodeName": name, "containers": [c], **spec}}  # bound at creation: no scheduler
        await rest.send_json("POST", f"/api/v1/namespaces/{ns}/pods", body)

    try:
        assert kubelet.resources is not None
        await place("fits", cpu="600m")
        assert (await pod_when(node, "fits", "Running"))["status"]["phase"] == "Running"
        await place("greedy", cpu="500m")
        await place("picky", nodeSelector={"disk": "ssd"})
        greedy = await pod_when(node, "greedy", "Failed")
        assert (greedy["status"]["reason"], greedy["status"]["message"]) == (
            "OutOfcpu", "Pod was rejected: Node didn't have enough resource: cpu, requested: 500, used: 600, "
                        "capacity: 1000")
        picky = await pod_when(node, "picky", "Failed")
        assert (picky["status"]["reason"], picky["status"]["message"]) == (
            "NodeAffinity", "Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match Pod's node "
                            "affinity/selector")
        sandboxes = {s.metadata.name for s in await kubelet.runtime.list_pod_sandbox()}
        assert sandboxes == {"fits"}  # nothing was started for the rejected pods
    finally:
        await host.stop()
        await rest.close()
