"""The ReplicaSet controller scaling one ReplicaSet 0 -> N against a freshly started API server;
one JSON document on stdout (issue 4: at least 1,000 pods/s created through the API).

    python -m bench.controller_replicaset                 # N = 2,000
    python -m bench.controller_replicaset --replicas 5000 --workers 5

The API server alone (`kubecore up --controllers ""`, started by bench.apiserver_load.Server) runs
in a temporary directory; the controller runs in this process
(uvloop, unlimited client QPS: upstream's 20 QPS default would cap it at 20 pods/s) with its own
shared informers. The ReplicaSet's template is the clusterloader2-style pod of
`bench.apiserver_load.pod()`. The clock starts when `spec.replicas` is patched to N and stops
when the controller's pod cache holds N pods of that ReplicaSet (every pod created and seen back
through the watch), then again when its status reports N replicas.

After the scale-up, the same number of pods is POSTed directly (128 at a time, no controller)
as the peer figure: `direct_pods_per_s` is what the API server alone sustains on the machine at
that moment, and `ratio_to_direct` is the controller's rate divided by it.

Figures: `seconds_to_all_pods`, `pods_per_s`, `seconds_to_status`, the CPU seconds of the API
server and of this process (controller + informers) over the scale-up, and the load of the
machine from other processes in the same window (`other_cpu_s`: the machine has 2 cores and is
shared, so read the figure next to it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from typing import Any

import msgspec

if __package__ in (None, ""):  # run as a file: make `bench` importable from the repo root
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.apiserver_load import Server, machine_busy_seconds, pod
from kubecore.client.config import ClientConfig
from kubecore.client.factory import SharedInformerFactory
from kubecore.client.rest import RestClient
from kubecore.controllers.replicaset import ReplicaSetController

NAMESPACE = "bench-rs"


def replica_set(replicas: int) -> dict[str, Any]:
    template = pod("bench", 0)
    meta = template["metadata"]
    labels = {"app": "bench", "tier": "backend"}
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "bench", "namespace": NAMESPACE},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels, "annotations": meta.get("annotations", {})},
                                  "spec": template["spec"]}}}


async def wait_for(pred: Any, *, timeout: float, poll: float = 0.02) -> float:
    """Poll `pred()` until true; returns the perf_counter time it became true."""
    deadline = time.perf_counter() + timeout
    while not pred():
        if time.perf_counter() > deadline:
            raise TimeoutError("condition not reached")
        await asyncio.sleep(poll)
    return time.perf_counter()


async def direct_creates(rest: RestClient, *, count: int, concurrency: int) -> dict[str, Any]:
    """The peer figure: the same pods POSTed straight at the server (no controller, no informer),
    `concurrency` at a time, into another namespace: what the API server alone sustains right now."""
    namespaces = await rest.resource("v1", "namespaces")
    await namespaces.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench-direct"}})
    pods = await rest.resource("v1", "pods")
    template = replica_set(0)["spec"]["template"]
    body = msgspec.json.encode({"apiVersion": "v1", "kind": "Pod", "spec": template["spec"],
                                "metadata": {**template["metadata"], "generateName": "direct-"}})
    path = pods.info.path(namespace="bench-direct")
    gate = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with gate:
            await rest.request("POST", path, body=body, content_type="application/json")

    t0 = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(count)))
    elapsed = time.perf_counter() - t0
    return {"direct_creates": count, "direct_concurrency": concurrency,
            "direct_pods_per_s": round(count / elapsed, 1)}


async def run(server: Server, *, replicas: int, workers: int, timeout: float) -> dict[str, Any]:
    rest = RestClient(ClientConfig(server=server.url, qps=0))
    namespaces = await rest.resource("v1", "namespaces")
    await namespaces.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    rss = await rest.resource("apps/v1", "replicasets")
    rs = await rss.create(replica_set(0))
    uid = rs["metadata"]["uid"]
    factory = SharedInformerFactory(rest, namespace=NAMESPACE)
    controller = ReplicaSetController(rest=rest, informers=factory)
    task = asyncio.create_task(controller.run(workers))
    try:
        await controller.setup()
        await wait_for(lambda: controller.rs_indexer.get_by_key(f"{NAMESPACE}/bench") is not None, timeout=30)

        def owned() -> int:
            return len(controller.pod_indexer.index_keys("namespace", NAMESPACE))

        def status_done() -> bool:
            cur = controller.rs_indexer.get_by_key(f"{NAMESPACE}/bench") or {}
            return int((cur.get("status") or {}).get("replicas") or 0) == replicas

        server_cpu0, own_cpu0, busy0 = server.cpu_seconds(), time.process_time(), machine_busy_seconds()
        t0 = time.perf_counter()
        await rss.patch("bench", {"spec": {"replicas": replicas}}, namespace=NAMESPACE)
        t_pods = await wait_for(lambda: owned() >= replicas, timeout=timeout)
        server_cpu, own_cpu = server.cpu_seconds() - server_cpu0, time.process_time() - own_cpu0
        other = machine_busy_seconds() - busy0 - server_cpu - own_cpu
        t_status = await wait_for(status_done, timeout=timeout)
        pods = controller.pod_indexer.by_index("namespace", NAMESPACE)
        wrong_owner = sum(1 for p in pods if (p["metadata"].get("ownerReferences") or [{}])[0].get("uid") != uid)
        elapsed = t_pods - t0
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        peer = await direct_creates(rest, count=replicas, concurrency=128)
        return {
            "benchmark": "controller_replicaset", "replicas": replicas, "workers": workers,
            "seconds_to_all_pods": round(elapsed, 3), "pods_per_s": round(replicas / elapsed, 1),
            "seconds_to_status": round(t_status - t0, 3), "pods_seen": len(pods), "pods_wrong_owner": wrong_owner,
            "apiserver_cpu_s": round(server_cpu, 2), "apiserver_cores": round(server_cpu / elapsed, 2),
            "controller_cpu_s": round(own_cpu, 2), "controller_cores": round(own_cpu / elapsed, 2),
            "other_cpu_s": round(other, 2), "target_pods_per_s": 1000, **peer,
            "ratio_to_direct": round(replicas / elapsed / peer["direct_pods_per_s"], 2),
        }
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await factory.shutdown()
        await rest.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicas", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=600.0)
    args = ap.parse_args()
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass
    server = Server()
    try:
        server.wait_ready()
        result = asyncio.run(run(server, replicas=args.replicas, workers=args.workers, timeout=args.timeout))
    finally:
        server.stop()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
