"""Pod startup latency with real containers: issue 6's containerd benchmark; one JSON document on
stdout, progress on stderr.

    python -m bench.containerd_startup --pods 3          # smoke run (~15 s), NOT a measurement
    python -m bench.containerd_startup                   # 30 pods (the issue's density per node) at 100 pods/s
    python -m bench.containerd_startup --pods 60 --rate 20 --output /tmp/run.json

Needs root and Debian's containerd, runc, containernetworking-plugins and busybox-static (what
`kubecore up --runtime containerd` needs). It runs the whole cluster as `kubecore up --runtime
containerd` (`bench.containerd_up.ContainerdUp`: temp dir, free ports, its own pod CIDR), this
machine being its one node, and drives it from this process:

1. `before`: once the node is Ready and the cluster has settled, the memory of `up`'s process
   tree: the API server, controller manager, scheduler, kubelet, the kubelet's containerd and the
   containerd shims (the containers' own processes are not counted): RSS summed over the
   processes, and PSS (shared pages split among the processes sharing them), per component too.
2. `pods`: `--pods` busybox pods (`sleep 3600`, requests 10m CPU / 10M memory, image present:
   `imagePullPolicy: IfNotPresent`, upstream's SLI excludes image pulls) created open loop at
   `--rate`/s in `default`; the scheduler in `up` binds them. Latency of a pod = from just before
   its create request to the moment this process's pod watch shows it Running (upstream's pod
   startup SLI, observed through watch; `bench.hollow_nodes.PodLoad` does the create/watch
   bookkeeping). p50/p90/p99/max; the CPU cores each component used over the phase (kubelet,
   containerd with the CNI plugins it ran, shims with their runc calls, API server, scheduler,
   controller manager), this process, and the rest of the machine (`other_cpu_cores`: the
   containers themselves and anyone else).
3. `after`: the tree's memory again once every pod runs (and per pod: (after - before) / pods).
4. `cleanup`: every pod deleted (seconds until the kubelet has removed them all), then `up`
   stopped; pods still there after DELETE_TIMEOUT_S, or shims left over, are reported (both 0
   on a clean run; `up`'s own teardown removes what pods were left).

`targets` carries upstream's SLO (p99 <= 5 s). The machine has 2 cores, shared by the whole
cluster, the containers, this process and anyone else (`other_cpu_cores`): compare several runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make `bench` importable from the repo root
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.apiserver_load import NS, machine_busy_seconds
from bench.containerd_up import ContainerdUp, UpError, cpu_seconds
from bench.hollow_nodes import PodLoad, _stats
from kubecore.client.config import ClientConfig
from kubecore.client.rest import RestClient
from kubecore.kubelet.containerd_node import unusable

POD_PREFIX = "startup-"
SLO_P99_S = 5.0
DELETE_TIMEOUT_S = 60.0
"""How long the cleanup waits for the pods to go (deleting 30 takes a few seconds)."""


def log(message: str) -> None:
    print(f"[containerd-startup {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def density_pod(name: str) -> dict[str, Any]:
    """A small long-running pod, as clusterloader2's density test creates (busybox here: the
    image this node has; no registry is reachable)."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"group": "startup"}},
            "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
                "name": "c", "image": "busybox", "imagePullPolicy": "IfNotPresent", "command": ["sleep", "3600"],
                "resources": {"requests": {"cpu": "10m", "memory": "10M"},
                              "limits": {"cpu": "10m", "memory": "10M"}}}]}}


class ContainerPodLoad(PodLoad):
    """`PodLoad` whose pods the cluster's own scheduler binds (no binding from here)."""

    async def _one(self, i: int, sem: asyncio.Semaphore) -> None:
        name = f"{POD_PREFIX}{i}"
        async with sem:
            self.sent[name] = time.perf_counter()
            try:
                await self.rest.send_json("POST", f"/api/v1/namespaces/{NS}/pods", density_pod(name))
            except Exception as e:  # counted, reported; the run goes on
                self.errors += 1
                log(f"pod {name}: {e}")


def component_cpu(up: ContainerdUp) -> dict[str, float]:
    """CPU seconds so far of each component's processes (see `ContainerdUp.components`)."""
    return {name: sum(cpu_seconds(p) for p in pids) for name, pids in up.components().items()}


async def pods_phase(up: ContainerdUp, args: argparse.Namespace) -> dict[str, Any]:
    rest = RestClient(ClientConfig(server=up.url, qps=0))
    try:
        load = ContainerPodLoad(rest, nodes=1, total=args.pods, rate=args.rate)
        cpu0, busy0, me0 = component_cpu(up), machine_busy_seconds(), time.process_time()
        began = time.perf_counter()
        create_s = await load.run(timeout=args.timeout)
        wall = time.perf_counter() - began
        cpu1, busy1, mine = component_cpu(up), machine_busy_seconds(), time.process_time() - me0
    finally:
        await rest.close()
    used = {name: max(0.0, cpu1.get(name, 0.0) - cpu0.get(name, 0.0)) for name in cpu1}
    other = busy1 - busy0 - sum(used.values()) - mine
    return {
        "total": args.pods, "rate": args.rate, "create_seconds": round(create_s, 2),
        "rate_reached": round(args.pods / create_s, 1) if create_s > 0 else None,
        "running": len(load.latency), "errors": load.errors, "startup_latency": _stats(list(load.latency.values())),
        "wall_s": round(wall, 2),
        "cpu_cores": {name: round(sec / wall, 2) for name, sec in sorted(used.items())},
        "bench_cpu_cores": round(mine / wall, 2), "other_cpu_cores": round(max(0.0, other) / wall, 2)}


async def run(up: ContainerdUp, args: argparse.Namespace) -> dict[str, Any]:
    node = await asyncio.to_thread(up.wait_node_ready)
    log(f"node {node['metadata']['name']} Ready; cluster at {up.url}")
    await asyncio.sleep(args.settle)  # quiet: startup work and status writes done
    doc: dict[str, Any] = {"pods_requested": args.pods, "rate": args.rate, "before": {"memory": up.memory()}}
    log(f"before: tree RSS {doc['before']['memory']['rss_mb']} MB, PSS {doc['before']['memory']['pss_mb']} MB")
    doc["pods"] = await pods_phase(up, args)
    log(f"pods: {doc['pods']['startup_latency']}")
    await asyncio.sleep(args.settle)
    after = up.memory()
    doc["after"] = {"memory": after}
    pods = max(1, doc["pods"]["running"])
    doc["after"]["memory_per_pod_mb"] = {
        "rss": round((after["rss_mb"] - doc["before"]["memory"]["rss_mb"]) / pods, 2),
        "pss": round((after["pss_mb"] - doc["before"]["memory"]["pss_mb"]) / pods, 2)}
    log(f"after: tree RSS {after['rss_mb']} MB, PSS {after['pss_mb']} MB")
    began = time.perf_counter()
    left = await asyncio.to_thread(up.delete_pods, DELETE_TIMEOUT_S)
    doc["cleanup"] = {"delete_all_s": round(time.perf_counter() - began, 2), "pods_left": left}
    p99 = doc["pods"]["startup_latency"].get("p99_s")
    doc["targets"] = [{"name": "pod startup p99 (s), containerd (upstream SLO)", "value": p99,
                       "threshold": SLO_P99_S, "pass": p99 is not None and doc["pods"]["running"] == args.pods
                       and p99 <= SLO_P99_S}]
    return doc


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pods", type=int, default=30, help="pods to start (default 30: the issue's density per node)")
    p.add_argument("--rate", type=float, default=100.0, help="pods created per second (default 100)")
    p.add_argument("--settle", type=float, default=5.0, help="seconds of quiet before each memory reading")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the pods to run (and go)")
    p.add_argument("--pod-cidr", default=f"10.248.{os.getpid() % 250}.0/24")
    p.add_argument("--output", type=Path, default=None)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    why = unusable()
    if why:
        print(f"containerd_startup: this machine cannot run a containerd node: {why}", file=sys.stderr)
        return 2
    meta = {"loadavg_at_start": os.getloadavg()[0], "cpus": os.cpu_count(), "when": time.strftime("%Y-%m-%d %H:%M")}
    up = ContainerdUp(pod_cidr=args.pod_cidr)
    try:
        doc = asyncio.run(run(up, args))
    except UpError as e:
        print(f"containerd_startup: {e}", file=sys.stderr)
        return 1
    finally:
        up.stop()
    doc["cleanup"]["shims_left"] = len(up.shims())
    text = json.dumps({**doc, "meta": meta}, indent=2)
    if args.output:
        args.output.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
