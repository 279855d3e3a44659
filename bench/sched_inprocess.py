"""The scheduler in-process: framework + native kernels, no API server (issue 5's in-process
target: 20,000 pods/s for SchedulingBasic at 5,000 nodes). One JSON document on stdout.

    python -m bench.sched_inprocess [--nodes 5000] [--init-pods 1000] [--pods 10000] [--batch 512]
                                    [--runs 5] [--gc-freeze] [--confirm]

SchedulingBasic's shape: nodes of 4 cpu / 32Gi / 110 pods in three zones, pods of 100m / 500Mi;
the default profile (`default_config()`); binding is a callback that does nothing (or, with
`--confirm`, feeds the bound pod back to the cache and queue as the pod informer would). The
`--init-pods` are scheduled first and not timed. `--gc-freeze` freezes the heap before the timed
part, as the scheduler process does once its informers have synced.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import time
from typing import Any

from kubecore.scheduler import Services, SchedulerCore, build_scheduler, default_config
from kubecore.scheduler.driver import Driver

Obj = dict[str, Any]


def node(i: int) -> Obj:
    name = f"node-{i}"
    res = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                                  "topology.kubernetes.io/zone": f"zone-{i % 3}"}},
            "spec": {}, "status": {"allocatable": res, "capacity": dict(res)}}


def pod(i: int, prefix: str) -> Obj:
    res = {"cpu": "100m", "memory": "500Mi"}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{prefix}-{i}", "namespace": "sched-0", "uid": f"{prefix}-{i}"},
            "spec": {"schedulerName": "default-scheduler",
                     "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.9",
                                     "resources": {"requests": res, "limits": dict(res)}}]}}


async def run_once(args: argparse.Namespace) -> float:
    holder: list[SchedulerCore] = []

    async def bind(p: Obj, n: str) -> None:
        if args.confirm:  # what the pod informer reports next: the bound pod
            bound = {**p, "spec": {**p["spec"], "nodeName": n}}
            holder[0].cache.add_pod(bound)
            holder[0].queue.assigned_pod_added(bound)

    core = build_scheduler(default_config(), services=Services(bind=bind, get_pvc=lambda ns, n: None,
                                                               get_pv=lambda n: None))
    holder.append(core)
    for i in range(args.nodes):
        core.cache.add_node(node(i))
    driver = Driver(core, max_batch=args.batch)
    for i in range(args.init_pods):
        core.queue.add(pod(i, "init"))
    await driver.drain()
    pods = [pod(i, "m") for i in range(args.pods)]
    if args.gc_freeze:
        gc.collect()
        gc.freeze()
    start = time.perf_counter()
    for p in pods:
        core.queue.add(p)
    await driver.drain()
    seconds = time.perf_counter() - start
    if driver.bound != args.init_pods + args.pods:
        raise SystemExit(f"only {driver.bound} of {args.init_pods + args.pods} pods were bound ({driver.failed} failed)")
    if args.gc_freeze:
        gc.unfreeze()
    holder.clear()
    gc.collect()
    return args.pods / seconds


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    runs = [await run_once(args) for _ in range(args.runs)]
    return {"benchmark": "sched_inprocess", "nodes": args.nodes, "init_pods": args.init_pods, "pods": args.pods,
            "batch": args.batch, "gc_freeze": args.gc_freeze, "informer_confirmation": args.confirm,
            "runs_pods_per_s": [round(r) for r in runs], "median_pods_per_s": round(statistics.median(runs)),
            "target_pods_per_s": 20_000}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--init-pods", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=10000)
    ap.add_argument("--batch", type=int, default=512, help="pods per native schedule_batch call")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--gc-freeze", action="store_true")
    ap.add_argument("--confirm", action="store_true", help="feed bound pods back through cache + queue")
    print(json.dumps(asyncio.run(main_async(ap.parse_args())), indent=2))


if __name__ == "__main__":
    main()
