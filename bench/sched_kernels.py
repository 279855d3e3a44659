"""In-process micro benchmark of the scheduler's native kernels (kubecore._native.NativeSchedSnapshot).

    python -m bench.sched_kernels [--nodes 5000] [--pods 10000] [--init-pods 1000] [--runs 5]

SchedulingBasic-like: nodes of 4 cpu / 32Gi / 110 pods with a hostname, a zone (3 zones) and a
rack label, 5 % tainted NoSchedule and 5 % PreferNoSchedule; `--init-pods` pods counted first,
then `--pods` pods of 100m / 500Mi scheduled with upstream's default native plugins and weights.

Prints one JSON document:
- batch: pods/s through `schedule_batch` (one call for all pods; each placed pod is counted
  before the next), median and spread over `--runs` fresh snapshots;
- single: µs per `schedule()` call (one pod, GIL released inside), median and p99 over
  `--single` calls, each followed by an untimed `add_pod` as the framework's assume does.
Pods are encoded before timing; snapshot building is reported separately. No API server, no
Python plugins: this is the kernels' ceiling, not the scheduler's end-to-end throughput.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from typing import Any

import msgspec

from kubecore._native import NATIVE_FILTER_PLUGINS, NATIVE_SCORE_PLUGINS, NativeSchedProfile, NativeSchedSnapshot
from kubecore.scheduler.config import DEFAULT_PLUGINS

# Upstream's default score weights, for the plugins the kernels run.
DEFAULT_SCORES = [(name, weight) for name, weight in DEFAULT_PLUGINS if name in NATIVE_SCORE_PLUGINS and weight]


def node_json(i: int) -> bytes:
    taints: list[dict[str, str]] = []
    if i % 20 == 0:
        taints.append({"key": "dedicated", "value": "infra", "effect": "NoSchedule"})
    elif i % 20 == 1:
        taints.append({"key": "spot", "value": "true", "effect": "PreferNoSchedule"})
    node: dict[str, Any] = {
        "metadata": {
            "name": f"node-{i:05d}",
            "labels": {
                "kubernetes.io/hostname": f"node-{i:05d}",
                "topology.kubernetes.io/zone": f"zone-{i % 3}",
                "rack": f"rack-{i % 50}",
            },
        },
        "spec": {"taints": taints},
        "status": {
            "allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"},
            "images": [{"names": ["registry.k8s.io/pause:3.9"], "sizeBytes": 700_000}],
        },
    }
    return msgspec.json.encode(node)


def pod_json(name: str) -> bytes:
    container = {
        "name": "pause",
        "image": "registry.k8s.io/pause:3.9",
        "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}, "limits": {"cpu": "100m", "memory": "500Mi"}},
    }
    pod = {"metadata": {"name": name, "namespace": "sched-0", "labels": {"app": "basic"}}, "spec": {"containers": [container]}}
    return msgspec.json.encode(pod)


def build(nodes: list[bytes], init_pods: int) -> tuple[NativeSchedSnapshot, float]:
    t0 = time.perf_counter()
    snap = NativeSchedSnapshot(seed=1)
    for n in nodes:
        snap.set_node(n)
    names = snap.node_names()
    for i in range(init_pods):
        snap.add_pod(f"sched-0/init-{i}", pod_json(f"init-{i}"), names[i % len(names)])
    return snap, time.perf_counter() - t0


def run_batch(args: argparse.Namespace, profile: NativeSchedProfile, nodes: list[bytes]) -> dict[str, Any]:
    pods = [(f"sched-0/pod-{i}", pod_json(f"pod-{i}")) for i in range(args.pods)]
    rates: list[float] = []
    builds: list[float] = []
    placed = 0
    for run in range(args.runs):
        snap, built = build(nodes, args.init_pods)
        builds.append(built)
        t0 = time.perf_counter()
        results = snap.schedule_batch(profile, pods)
        elapsed = time.perf_counter() - t0
        placed = sum(1 for r in results if r.node is not None)
        rates.append(args.pods / elapsed)
        print(f"batch run {run + 1}/{args.runs}: {args.pods / elapsed:,.0f} pods/s", file=sys.stderr)
    return {
        "pods_per_second_median": round(statistics.median(rates)),
        "pods_per_second_min": round(min(rates)),
        "pods_per_second_max": round(max(rates)),
        "runs": args.runs,
        "pods": args.pods,
        "placed_last_run": placed,
        "snapshot_build_seconds_median": round(statistics.median(builds), 3),
    }


def run_single(args: argparse.Namespace, profile: NativeSchedProfile, nodes: list[bytes]) -> dict[str, Any]:
    snap, _ = build(nodes, args.init_pods)
    pods = [(f"sched-0/single-{i}", pod_json(f"single-{i}")) for i in range(args.single)]
    times: list[float] = []
    evaluated = 0
    for key, body in pods:
        t0 = time.perf_counter_ns()
        r = snap.schedule(profile, body)
        times.append((time.perf_counter_ns() - t0) / 1000)
        evaluated = r.evaluated
        if r.node is not None:
            snap.add_pod(key, body, r.node)
    times.sort()
    return {
        "us_per_pod_median": round(statistics.median(times), 1),
        "us_per_pod_p99": round(times[int(len(times) * 0.99) - 1], 1),
        "calls": len(times),
        "nodes_evaluated_per_cycle": evaluated,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=10_000)
    ap.add_argument("--init-pods", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--single", type=int, default=3000, help="schedule() calls timed one by one")
    args = ap.parse_args()
    profile = NativeSchedProfile(filters=list(NATIVE_FILTER_PLUGINS), scores=DEFAULT_SCORES)
    nodes = [node_json(i) for i in range(args.nodes)]
    out = {
        "benchmark": "sched_kernels",
        "workload": "SchedulingBasic-like (100m/500Mi pods; 4 cpu/32Gi/110-pod nodes; 5% NoSchedule, 5% PreferNoSchedule)",
        "nodes": args.nodes,
        "init_pods": args.init_pods,
        "batch": run_batch(args, profile, nodes),
        "single": run_single(args, profile, nodes),
        "meta": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "rayon_threads": os.environ.get("RAYON_NUM_THREADS", "default (one per cpu)"),
            "loadavg_at_end": os.getloadavg(),
        },
    }
    print(msgspec.json.encode(out).decode())


if __name__ == "__main__":
    main()
