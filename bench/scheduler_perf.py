"""scheduler_perf's workloads through the real API server: SchedulingThroughput of `kubecore
scheduler` as a separate process (issue 5). One JSON document on stdout, progress on stderr.

    python -m bench.scheduler_perf                              # every workload at upstream's size
    python -m bench.scheduler_perf --workload SchedulingBasic   # one (repeat the flag for more)
    python -m bench.scheduler_perf --scale 0.1                  # every count × 0.1
    python -m bench.scheduler_perf --workload PodAntiAffinity --nodes 500 --init-pods 100 --measured-pods 400
    python -m bench.scheduler_perf --profile-dir /tmp/sp        # py-spy on the scheduler and API server while measuring

Per workload, on a fresh cluster (upstream runs each case on its own, too):
1. the API server alone (`kubecore up --controllers "" --no-scheduler`, `bench.apiserver_load.Server`);
2. the workload's namespaces (and the PriorityClass of value 10 upstream's templates ask for);
3. the nodes as API objects, POSTed `--concurrency` (30, as upstream's pod creator) at a time;
4. `kubecore scheduler --no-leader-elect` as a child process (Coscheduling enabled for Gang);
5. the init pods, created concurrently, then waited for until every one is bound; Unschedulable
   then adds its pile of pods that fit no node (not waited for);
6. measuring: the throughput collector starts, the measured pods are POSTed `--concurrency` at a
   time (bodies encoded beforehand; `bench.httppost`, a lean keep-alive client, so that creating
   takes little of the machine the API server and the scheduler share), Unschedulable's
   high-priority 9-cpu pods at 5/s alongside, until every measured pod is bound. Bound pods are seen through one pod watch
   (`fieldSelector=spec.nodeName!=`), sampled every second (`bench.scheduler_perf_collect`);
7. checks: a LIST of every pod (placement: no node over its 4 cpu, no two anti-affinity pods on
   one node, zone skew of the spread pods, whole gangs only), preemption victims deleted, the
   Unschedulable pile still pending and marked `PodScheduled=False`; and the number of `Scheduled`
   Events written for the measured pods (one each: the scheduler writes every event, as
   kube-scheduler's events.k8s.io recorder does and upstream's scheduler_perf measures).

Figures per workload: SchedulingThroughput (Average, Perc50/90/95/99 of the 1-s samples, as
upstream's DataItem), upstream's threshold, the target (5 × threshold) and pass (Average ≥ target),
`pods_per_s_overall` (measured pods / time from the first create to the last binding), the
creation rate of the measured pods, and CPU seconds of the API server, the scheduler, this
process and the rest of the machine while measuring. All three processes share this machine's
cores: the creating client and the API server compete with the scheduler.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import msgspec

if __package__ in (None, ""):  # run as a file: make `bench` importable from the repo root
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.apiserver_load import Profiler, Server, host_speed, machine_busy_seconds, request_counts, top_functions
from bench.httppost import post_all
from bench.scheduler_perf_collect import BoundPods, SchedulerProcess, ThroughputCollector, cancel, summarize
from bench.scheduler_perf_collect import _log as log
from bench.scheduler_perf_workloads import (GANG_SIZE, HIGH_PRIORITY_CLASS, POD_GROUP_LABEL, ZONE, PodSet, Workload,
                                            node, resized, workloads)
from kubecore.client.config import ClientConfig
from kubecore.client.errors import ApiError
from kubecore.client.rest import RestClient
from kubecore.heap import settle_heap

_encode = msgspec.json.encode
NODE_MILLICPU = 4000
CREATE_WORKERS = 30
"""Upstream's pod creator (test/utils CreatePod) runs 30 workers (ParallelizeUntil(ctx, 30, ...))."""


# -- creating objects --------------------------------------------------------------------------------
def pod_bodies(pods: PodSet, start: int = 0, count: int | None = None) -> list[tuple[str, bytes]]:
    path = f"/api/v1/namespaces/{pods.namespace}/pods"
    end = start + (pods.count if count is None else count)
    return [(path, _encode(pods.body(i))) for i in range(start, end)]


async def setup_cluster(rest: RestClient, url: str, w: Workload, *, concurrency: int) -> dict[str, Any]:
    for ns in w.namespaces():
        await rest.send_json("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                            "metadata": {"name": ns}})
    await rest.send_json("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": HIGH_PRIORITY_CLASS}, "value": 10})
    bodies = [("/api/v1/nodes", _encode(node(f"node-{i}", w.node_labels(i)))) for i in range(w.nodes)]
    seconds = await post_all(url, bodies, concurrency=concurrency)
    return {"nodes_created_per_s": round(w.nodes / seconds, 1)}


async def churn(rest: RestClient, pods: PodSet, rate: float, created: list[int]) -> None:
    """Create `pods` at `rate` per second (open loop, one at a time) until cancelled."""
    path = f"/api/v1/namespaces/{pods.namespace}/pods"
    t0 = time.perf_counter()
    for i in range(pods.count):
        await asyncio.sleep(max(0.0, t0 + i / rate - time.perf_counter()))
        await rest.request("POST", path, body=_encode(pods.body(i)), content_type="application/json")
        created[0] += 1


# -- one workload ----------------------------------------------------------------------------------
class Window:
    """CPU seconds of the API server, the scheduler, this process and everything else."""

    def __init__(self, server: Server, sched: SchedulerProcess) -> None:
        self.server, self.sched = server, sched
        self.s0, self.c0 = server.cpu_seconds(), sched.cpu_seconds()
        self.b0, self.own0 = machine_busy_seconds(), time.process_time()

    def figures(self, elapsed: float) -> dict[str, float]:
        s, c = self.server.cpu_seconds() - self.s0, self.sched.cpu_seconds() - self.c0
        own = time.process_time() - self.own0
        other = machine_busy_seconds() - self.b0 - s - c - own
        return {"apiserver_cpu_s": round(s, 2), "apiserver_cores": round(s / elapsed, 2),
                "scheduler_cpu_s": round(c, 2), "scheduler_cores": round(c / elapsed, 2),
                "bench_client_cpu_s": round(own, 2), "other_cpu_s": round(other, 2)}


async def run_workload(w: Workload, args: argparse.Namespace) -> dict[str, Any]:
    log(f"{w.name}: {w.nodes} nodes, {w.init.count} init pods, {w.measured.count} measured pods")
    server = Server()
    server.wait_ready()
    rest = RestClient(ClientConfig(server=server.url, qps=0))
    bound = BoundPods(rest)
    sched: SchedulerProcess | None = None
    try:
        await bound.start()
        out: dict[str, Any] = {"workload": w.name, "upstream": w.upstream, "nodes": w.nodes, "init": w.init.count,
                               "measured": w.measured.count}
        out.update(await setup_cluster(rest, server.url, w, concurrency=args.concurrency))
        sched = SchedulerProcess(server.dir / "data" / "kubeconfig", server.dir, config=w.scheduler_config,
                                 verbose=2 if args.log_dir else 0, feature_gates=args.feature_gates)
        t0 = time.perf_counter()
        await post_all(server.url, pod_bodies(w.init), concurrency=args.concurrency)
        await bound.wait_for(w.init.namespace, w.init.count, timeout=args.timeout, what=f"{w.name} init",
                             check=sched.check)
        out["init_seconds"] = round(time.perf_counter() - t0, 2)
        if w.pending is not None:
            await post_all(server.url, pod_bodies(w.pending), concurrency=args.concurrency)
            out["pending"] = w.pending.count
        await server.settle(limit=10.0)
        out.update(await measure(w, args, rest=rest, server=server, sched=sched, bound=bound))
        out["checks"] = await checks(w, rest, bound)
        out["notes"] = list(w.notes)
        return out
    finally:
        await bound.stop()
        await rest.close()
        if sched is not None:
            sched.stop()
            if args.log_dir:
                Path(args.log_dir).mkdir(parents=True, exist_ok=True)
                shutil.copy(sched.log_path, Path(args.log_dir) / f"scheduler_{w.name}.log")
        server.stop()


async def measure(w: Workload, args: argparse.Namespace, *, rest: RestClient, server: Server,
                  sched: SchedulerProcess, bound: BoundPods) -> dict[str, Any]:
    bodies = pod_bodies(w.measured)
    # The load generator shares the machine with what it measures: its own collector must not
    # re-walk the pre-encoded bodies and the bound-pod records during the measured phase.
    settle_heap()
    profiler = _start_profiler(sched.pid, args, f"scheduler_{w.name}")
    server_profiler = _start_profiler(server.pid, args, f"apiserver_{w.name}")
    churned = [0]
    churn_task = asyncio.ensure_future(churn(rest, w.churn, w.churn_per_s, churned)) if w.churn else None
    requests0 = await request_counts(rest)
    window = Window(server, sched)
    collector = ThroughputCollector(bound, w.measured.namespace)
    collector.start()
    t0 = time.perf_counter()
    created_s = await post_all(server.url, bodies, concurrency=args.concurrency)
    t_bound = await bound.wait_for(w.measured.namespace, w.measured.count, timeout=args.timeout,
                                   what=f"{w.name} measured", check=sched.check)
    await collector.stop()
    elapsed = t_bound - t0
    cpu = window.figures(elapsed)
    await cancel(churn_task)
    requests1 = await request_counts(rest)
    per_pod = {k: round((n - requests0.get(k, 0)) / w.measured.count, 2) for k, n in sorted(requests1.items())
               if n - requests0.get(k, 0) >= w.measured.count // 100}
    summary = summarize(collector.samples)
    avg = summary["Average"]
    log(f"{w.name}: {w.measured.count} pods bound in {elapsed:.2f} s; SchedulingThroughput average {avg} pods/s "
        f"(target {w.target}); created at {w.measured.count / created_s:.0f}/s")
    out: dict[str, Any] = {
        "SchedulingThroughput": summary, "tail_sample_used": collector.tail_sample_used,
        "threshold": w.threshold, "target": w.target,
        "pass": None if w.target is None or avg is None else avg >= w.target,
        "pods_per_s_overall": round(w.measured.count / elapsed, 1), "seconds_to_all_bound": round(elapsed, 2),
        "create": {"pods_per_s": round(w.measured.count / created_s, 1), "seconds": round(created_s, 2),
                   "concurrency": args.concurrency},
        "cpu": cpu, "requests_per_pod": per_pod,
    }
    if churn_task is not None:
        out["churn_created"] = churned[0]
    if profiler is not None and server_profiler is not None:
        out["profile"] = {"scheduler": await _stop_profiler(profiler, args),
                          "apiserver": await _stop_profiler(server_profiler, args)}
    return out


def _start_profiler(pid: int, args: argparse.Namespace, name: str) -> Profiler | None:
    if not args.profile_dir:
        return None
    Path(args.profile_dir).mkdir(parents=True, exist_ok=True)
    return Profiler(pid, Path(args.profile_dir) / f"{name}.txt", args.profile_rate)


async def _stop_profiler(profiler: Profiler, args: argparse.Namespace) -> dict[str, Any]:
    err = await asyncio.to_thread(profiler.stop)
    if not profiler.path.exists():
        return {"error": f"py-spy wrote nothing: {err}"}
    return {"raw": str(profiler.path), "rate": args.profile_rate, **top_functions(profiler.path, 15)}


# -- checks ----------------------------------------------------------------------------------------
def _millicpu(q: str) -> int:
    return int(q[:-1]) if q.endswith("m") else int(float(q) * 1000)


def _pod_cpu(p: dict[str, Any]) -> int:
    return sum(_millicpu(str(((c.get("resources") or {}).get("requests") or {}).get("cpu", "0")))
               for c in p["spec"].get("containers") or [])


def _unschedulable(p: dict[str, Any]) -> bool:
    conds = (p.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False" for c in conds)


async def checks(w: Workload, rest: RestClient, bound: BoundPods) -> dict[str, Any]:
    """Placement and outcome checks from a LIST of every pod (see the module docstring)."""
    if w.pending is not None:
        await _wait_marked(rest, w.pending.namespace, timeout=60.0)
    pods = (await rest.get_json("/api/v1/pods")).get("items") or []
    nodes = (await rest.get_json("/api/v1/nodes")).get("items") or []
    zone_of = {n["metadata"]["name"]: (n["metadata"].get("labels") or {}).get(ZONE, "") for n in nodes}
    cpu: Counter[str] = Counter()
    green: Counter[str] = Counter()
    blue_zones: Counter[str] = Counter({z: 0 for z in set(zone_of.values())})
    gangs: defaultdict[str, list[bool]] = defaultdict(list)
    by_ns: Counter[str] = Counter()
    for p in pods:
        where = p["spec"].get("nodeName") or ""
        labels = p["metadata"].get("labels") or {}
        by_ns[p["metadata"]["namespace"]] += 1
        if POD_GROUP_LABEL in labels:
            gangs[labels[POD_GROUP_LABEL]].append(bool(where))
        if not where:
            continue
        cpu[where] += _pod_cpu(p)
        if labels.get("color") == "green":
            green[where] += 1
        if labels.get("color") == "blue":
            blue_zones[zone_of.get(where, "")] += 1
    out: dict[str, Any] = {
        "measured_bound": bound.count(w.measured.namespace) == w.measured.count,
        "overcommitted_nodes": sum(1 for m in cpu.values() if m > NODE_MILLICPU),
        "nodes_with_two_anti_affinity_pods": sum(1 for k in green.values() if k > 1),
    }
    events = (await rest.get_json(f"/api/v1/namespaces/{w.measured.namespace}/events")).get("items") or []
    out["scheduled_events"] = sum(1 for e in events if e.get("reason") == "Scheduled")
    if any(blue_zones.values()):
        out["spread_zone_skew"] = max(blue_zones.values()) - min(blue_zones.values())
    if gangs:
        out["gangs"] = len(gangs)
        out["partial_gangs"] = sum(1 for g in gangs.values() if any(g) and not (all(g) and len(g) >= GANG_SIZE))
    if w.name == "PreemptionBasic":
        out["init_pods_left"] = by_ns[w.init.namespace]
        out["victims_deleted"] = w.init.count - by_ns[w.init.namespace]
    if w.pending is not None:
        pending = [p for p in pods if p["metadata"]["namespace"] == w.pending.namespace]
        out["pending_pods"] = len(pending)
        out["pending_pods_bound"] = sum(1 for p in pending if p["spec"].get("nodeName"))
        out["pending_pods_marked_unschedulable"] = sum(1 for p in pending if _unschedulable(p))
    return out


async def _wait_marked(rest: RestClient, namespace: str, *, timeout: float) -> None:
    """Until every pod of `namespace` carries PodScheduled=False (or `timeout`: the check reports it)."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        pods = (await rest.get_json(f"/api/v1/namespaces/{namespace}/pods")).get("items") or []
        if all(_unschedulable(p) for p in pods):
            return
        await asyncio.sleep(0.5)


# -- the document ----------------------------------------------------------------------------------
def select(args: argparse.Namespace) -> list[Workload]:
    every = workloads(args.scale)
    names = {w.name.lower(): w for w in every}
    chosen = every
    if args.workload:
        unknown = [n for n in args.workload if n.lower() not in names]
        if unknown:
            raise SystemExit(f"unknown workload(s) {unknown}; choose from {[w.name for w in every]}")
        chosen = [names[n.lower()] for n in args.workload]
    return [resized(w, nodes=args.nodes, init=args.init_pods, measured=args.measured_pods) for w in chosen]


def targets(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"target": f"{r['workload']} SchedulingThroughput average >= 5 x upstream threshold",
             "value": (r.get("SchedulingThroughput") or {}).get("Average"), "threshold": r["target"], "pass": r["pass"],
             "at_upstream_size": r.get("at_upstream_size", False)}
            for r in results if r.get("target") is not None]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    chosen = select(args)
    full = {w.name: w for w in workloads(1.0)}
    doc: dict[str, Any] = {
        "benchmark": "scheduler_perf", "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "scale": args.scale, "cpus": os.cpu_count(), "loadavg_at_start": os.getloadavg(), "host": host_speed(),
        "scheduler": "kubecore scheduler --no-leader-elect (separate process)"
                     + (f" --feature-gates {args.feature_gates}" if args.feature_gates else ""),
        "apiserver": "kubecore up --controllers '' --no-scheduler (separate process)",
        "workloads": [],
    }
    for w in chosen:
        try:
            result = await run_workload(w, args)
        except (ApiError, TimeoutError, RuntimeError) as e:  # the other workloads still run
            log(f"{w.name}: failed: {e}")
            doc["workloads"].append({"workload": w.name, "nodes": w.nodes, "init": w.init.count,
                                     "measured": w.measured.count, "threshold": w.threshold, "target": w.target,
                                     "pass": False if w.target is not None else None, "error": str(e)[-2000:]})
            continue
        ref = full[w.name]
        result["at_upstream_size"] = (w.nodes, w.init.count, w.measured.count) == (
            ref.nodes, ref.init.count, ref.measured.count)
        doc["workloads"].append(result)
    doc["targets"] = targets(doc["workloads"])
    return doc


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", action="append", default=[],
                    help="run only this workload (repeatable): " + ", ".join(w.name for w in workloads()))
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every node and pod count (default 1)")
    ap.add_argument("--nodes", type=int, default=None, help="override the node count of the chosen workloads")
    ap.add_argument("--init-pods", type=int, default=None, help="override the init pod count")
    ap.add_argument("--measured-pods", type=int, default=None, help="override the measured pod count")
    ap.add_argument("--concurrency", type=int, default=CREATE_WORKERS,
                    help=f"concurrent POSTs when creating objects (default {CREATE_WORKERS}, upstream's)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for pods to be bound")
    ap.add_argument("--profile-dir", default=None,
                    help="record the scheduler and the API server with py-spy while measuring")
    ap.add_argument("--profile-rate", type=int, default=100)
    ap.add_argument("--log-dir", default=None, help="keep the scheduler's log (run with -vv) in this directory")
    ap.add_argument("--feature-gates", default="", metavar="KEY=BOOL[,...]",
                    help="passed to `kubecore scheduler --feature-gates` (e.g. SchedulerPopFromBackoffQ=true)")
    ap.add_argument("--output", default=None, help="also write the JSON document to this file")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with contextlib.suppress(ImportError):
        import uvloop
        uvloop.install()
    try:
        doc = asyncio.run(run(args))
    except (ApiError, TimeoutError, RuntimeError) as e:
        log(f"failed: {e}")
        return 1
    text = json.dumps(doc, indent=2)
    if args.output:
        Path(args.output).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
