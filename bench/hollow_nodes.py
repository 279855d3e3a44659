"""Hollow nodes at scale: registration, memory, and pod startup latency (issue 6's sim targets);
one JSON document on stdout, progress on stderr.

    python -m bench.hollow_nodes --quick          # 100 nodes x 10 pods: a smoke run, NOT a measurement
    python -m bench.hollow_nodes                  # 1,000 nodes x 30 pods at 100 pods/s (~7 min)
    python -m bench.hollow_nodes --nodes 500 --pods-per-node 30 --rate 100 --output /tmp/run.json

Processes: the API server alone (`kubecore up --controllers ""`, `bench.apiserver_load.Server`),
`kubecore hollow-nodes --count N` (one process for every node: what is measured), and this
process (the load generator; it also binds the pods, round-robin over the nodes, through
`pods/binding` as a scheduler would: there is no scheduler yet).

Phases:
1. `baseline`: `hollow-nodes --count 1` alone, its RSS once registered (the fixed cost of the
   process), then stopped.
2. `registration`: spawn `hollow-nodes --count N`; seconds until every node is listed with
   Ready=True; RSS of the process a few seconds later. `rss_mb_per_1000_nodes` =
   (RSS - baseline RSS) / N * 1000.
3. `pods`: N * pods-per-node pods created open-loop at `--rate`/s, each bound right after its
   create. Latency of a pod = from just before its create request is sent to the moment this
   process's pod watch shows it Running (upstream's pod startup SLI, measured through watch;
   it includes the create and the bind). p50/p90/p99/max over all pods; the rate actually
   reached; CPU cores used by the server and by the hollow-node process over the phase.
   `rss_mb_per_10k_pods` = growth of the hollow process's RSS over the phase per 10,000 pods;
   the `tree_` figures add the API server's growth (the whole cluster's process tree here:
   `up` runs the API server, and the hollow nodes are its other process).
4. `after`: nodes still Ready, leases held, and pods Running at the end.

The machine has 2 cores shared by the three processes (and anyone else: `other_cpu_cores`);
compare medians of several runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

if __package__ in (None, ""):  # run as a file: make `bench` importable from the repo root
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.apiserver_load import NS, ROOT, Server, machine_busy_seconds, pod, process_cpu_seconds
from bench.loadgen import percentile
from kubecore.client.config import ClientConfig
from kubecore.client.rest import RestClient

PREFIX = "hollow-node-"
POD_PREFIX = "hollow-bench-"
KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{{name: k, cluster: {{server: "{url}"}}}}]
users: [{{name: u, user: {{}}}}]
contexts: [{{name: k, context: {{cluster: k, user: u}}}}]
current-context: k
"""


def log(message: str) -> None:
    print(f"[hollow-bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Hollow:
    """A `kubecore hollow-nodes` child process."""

    def __init__(self, kubeconfig: Path, *, count: int, prefix: str, logdir: Path, extra: list[str]) -> None:
        self.log = open(logdir / f"{prefix}stderr", "w+b")  # noqa: SIM115 - closed in stop()
        cmd = [sys.executable, "-m", "kubecore.cli.main", "hollow-nodes", "--kubeconfig", str(kubeconfig),
               "--count", str(count), "--prefix", prefix, *extra]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.log, cwd=ROOT)
        self.pid = self.proc.pid

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def cpu_seconds(self) -> float:
        return process_cpu_seconds(self.pid)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-1500:].decode(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class _Cond(msgspec.Struct):
    type: str = ""
    status: str = ""


class _Status(msgspec.Struct):
    """What this benchmark reads of a node's or a pod's status."""

    phase: str = ""
    conditions: list[_Cond] = []


class _Meta(msgspec.Struct):
    name: str = ""


class _Obj(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    status: _Status = msgspec.field(default_factory=_Status)


class _List(msgspec.Struct):
    items: list[_Obj] = []


_nodes = msgspec.json.Decoder(_List)
_pod = msgspec.json.Decoder(_Obj)


async def ready_nodes(rest: RestClient, prefix: str) -> int:
    resp = await rest.request("GET", "/api/v1/nodes")
    return sum(1 for n in _nodes.decode(resp.body).items if n.metadata.name.startswith(prefix)
               and any(c.type == "Ready" and c.status == "True" for c in n.status.conditions))


async def until_ready(rest: RestClient, hollow: Hollow, prefix: str, count: int, *, timeout: float) -> float:
    began = time.perf_counter()
    while await ready_nodes(rest, prefix) < count:
        if not hollow.alive():
            raise RuntimeError(f"hollow-nodes exited {hollow.proc.returncode}: {hollow.tail()}")
        if time.perf_counter() - began > timeout:
            raise RuntimeError(f"nodes not Ready within {timeout:.0f}s: {hollow.tail()}")
        await asyncio.sleep(0.25)
    return time.perf_counter() - began


def _stats(latencies: list[float]) -> dict[str, Any]:
    xs = sorted(latencies)
    if not xs:
        return {"count": 0}
    return {"count": len(xs), "p50_s": round(percentile(xs, 0.5), 3), "p90_s": round(percentile(xs, 0.9), 3),
            "p99_s": round(percentile(xs, 0.99), 3), "max_s": round(xs[-1], 3)}


class PodLoad:
    """Creates and binds pods open-loop at a rate; a watch records when each is Running."""

    def __init__(self, rest: RestClient, *, nodes: int, total: int, rate: float) -> None:
        self.rest, self.nodes, self.total, self.rate = rest, nodes, total, rate
        self.sent: dict[str, float] = {}
        self.latency: dict[str, float] = {}
        self.errors = 0
        self._done = asyncio.Event()

    async def _one(self, i: int, sem: asyncio.Semaphore) -> None:
        name = f"{POD_PREFIX}{i}"
        body = pod(name, i)
        body["spec"].pop("nodeSelector", None)
        async with sem:
            self.sent[name] = time.perf_counter()
            try:
                await self.rest.send_json("POST", f"/api/v1/namespaces/{NS}/pods", body)
                await self.rest.send_json("POST", f"/api/v1/namespaces/{NS}/pods/{name}/binding", {
                    "apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                    "target": {"kind": "Node", "name": f"{PREFIX}{i % self.nodes}"}})
            except Exception as e:  # counted, reported; the run goes on
                self.errors += 1
                log(f"pod {name}: {e}")

    async def create(self) -> float:
        sem = asyncio.Semaphore(512)
        tasks = []
        began = time.perf_counter()
        for i in range(self.total):
            due = began + i / self.rate
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.ensure_future(self._one(i, sem)))
            if i and i % max(1, self.total // 10) == 0:
                log(f"created {i}/{self.total} pods, {len(self.latency)} Running")
        await asyncio.gather(*tasks)
        return time.perf_counter() - began

    async def run(self, *, timeout: float) -> float:
        """Watch the pods from now on, create them all at the rate, and wait up to `timeout` s for
        every one to be Running; returns the seconds the creates took."""
        listed = (await self.rest.get_json(f"/api/v1/namespaces/{NS}/pods", params={"limit": 1}))["metadata"]
        watcher = asyncio.ensure_future(self.watch(listed["resourceVersion"]))
        create_s = await self.create()
        try:
            await asyncio.wait_for(asyncio.shield(watcher), timeout=timeout)
        except asyncio.TimeoutError:
            log(f"only {len(self.latency)}/{self.total} pods Running after {timeout:.0f}s")
        watcher.cancel()
        return create_s

    async def watch(self, resource_version: str) -> None:
        path = f"/api/v1/namespaces/{NS}/pods"
        rv = resource_version
        while len(self.latency) < self.total:
            resp = await self.rest.stream("GET", path, params={"watch": True, "resourceVersion": rv,
                                                               "allowWatchBookmarks": True})
            from kubecore.client.watch import WatchStream
            async with WatchStream(resp) as stream:
                async for ev in stream:
                    rv = ev.resource_version() or rv
                    if ev.type not in ("ADDED", "MODIFIED"):
                        continue
                    p = _pod.decode(ev.raw)
                    name = p.metadata.name
                    if p.status.phase == "Running" and name in self.sent and name not in self.latency:
                        self.latency[name] = time.perf_counter() - self.sent[name]
                        if len(self.latency) >= self.total:
                            break
        self._done.set()


async def run(args: argparse.Namespace, server: Server, workdir: Path) -> dict[str, Any]:
    kubeconfig = workdir / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG.format(url=server.url))
    rest = RestClient(ClientConfig(server=server.url, qps=0))
    extra = ["--status-workers", str(args.status_workers)]
    doc: dict[str, Any] = {"nodes": args.nodes, "pods_per_node": args.pods_per_node, "rate": args.rate}
    try:
        base = Hollow(kubeconfig, count=1, prefix="baseline-", logdir=workdir, extra=extra)
        await until_ready(rest, base, "baseline-", 1, timeout=60)
        await asyncio.sleep(2)
        doc["baseline"] = {"rss_mb": round(base.rss_mb(), 1)}
        base.stop()
        log(f"baseline: one hollow node {doc['baseline']['rss_mb']} MB")

        server_rss0 = server.rss_mb()
        hollow = Hollow(kubeconfig, count=args.nodes, prefix=PREFIX, logdir=workdir, extra=extra)
        cpu0, srv0 = hollow.cpu_seconds(), server.cpu_seconds()
        seconds = await until_ready(rest, hollow, PREFIX, args.nodes, timeout=args.timeout)
        log(f"{args.nodes} nodes Ready after {seconds:.1f}s")
        await asyncio.sleep(args.settle)
        rss_nodes, server_rss_nodes = hollow.rss_mb(), server.rss_mb()
        tree_growth = (rss_nodes - doc["baseline"]["rss_mb"]) + (server_rss_nodes - server_rss0)
        doc["registration"] = {
            "seconds_to_all_ready": round(seconds, 2), "rss_mb": round(rss_nodes, 1),
            "rss_mb_per_1000_nodes": round((rss_nodes - doc["baseline"]["rss_mb"]) / args.nodes * 1000, 1),
            "server_rss_mb": round(server_rss_nodes, 1),
            "tree_rss_mb_per_1000_nodes": round(tree_growth / args.nodes * 1000, 1),
            "hollow_cpu_s": round(hollow.cpu_seconds() - cpu0, 1), "server_cpu_s": round(server.cpu_seconds() - srv0, 1)}
        log(f"registration: {doc['registration']}")

        total = args.nodes * args.pods_per_node
        load = PodLoad(rest, nodes=args.nodes, total=total, rate=args.rate)
        cpu0, srv0, busy0, me0 = hollow.cpu_seconds(), server.cpu_seconds(), machine_busy_seconds(), time.process_time()
        began = time.perf_counter()
        create_s = await load.run(timeout=args.timeout)
        wall = time.perf_counter() - began
        hollow_cpu, server_cpu = hollow.cpu_seconds() - cpu0, server.cpu_seconds() - srv0
        mine = time.process_time() - me0
        other = machine_busy_seconds() - busy0 - hollow_cpu - server_cpu - mine
        rss_pods, server_rss_pods = hollow.rss_mb(), server.rss_mb()
        doc["pods"] = {
            "total": total, "create_seconds": round(create_s, 1), "rate_reached": round(total / create_s, 1),
            "running": len(load.latency), "errors": load.errors, "startup_latency": _stats(list(load.latency.values())),
            "wall_s": round(wall, 1), "hollow_cpu_cores": round(hollow_cpu / wall, 2),
            "server_cpu_cores": round(server_cpu / wall, 2), "bench_cpu_cores": round(mine / wall, 2),
            "other_cpu_cores": round(max(0.0, other) / wall, 2), "rss_mb": round(rss_pods, 1),
            "rss_mb_per_10k_pods": round((rss_pods - rss_nodes) / max(1, total) * 10_000, 1),
            "server_rss_mb": round(server_rss_pods, 1),
            "tree_rss_mb_per_10k_pods": round((rss_pods - rss_nodes + server_rss_pods - server_rss_nodes)
                                              / max(1, total) * 10_000, 1)}
        log(f"pods: {doc['pods']}")
        doc["after"] = {"nodes_ready": await ready_nodes(rest, PREFIX), "hollow_alive": hollow.alive()}
        hollow.stop()
    finally:
        await rest.close()
    slo = doc.get("pods", {}).get("startup_latency", {}).get("p99_s")
    doc["targets"] = [
        {"name": "nodes registered and Ready", "value": doc.get("after", {}).get("nodes_ready"),
         "threshold": args.nodes, "pass": doc.get("after", {}).get("nodes_ready") == args.nodes},
        {"name": "pod startup p99 (s), sim", "value": slo, "threshold": 1.0, "pass": slo is not None and slo <= 1.0},
    ]
    return doc


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--pods-per-node", type=int, default=30)
    p.add_argument("--rate", type=float, default=100.0, help="pods created per second")
    p.add_argument("--status-workers", type=int, default=32)
    p.add_argument("--settle", type=float, default=5.0, help="seconds between registration and the RSS reading")
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--quick", action="store_true", help="100 nodes x 10 pods (smoke run)")
    p.add_argument("--output", type=Path, default=None)
    args = p.parse_args(argv)
    if args.quick:
        args.nodes, args.pods_per_node, args.settle = 100, 10, 2.0
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    server = Server()
    workdir = Path(tempfile.mkdtemp(prefix="kubecore-hollow-"))
    try:
        server.wait_ready()
        log(f"API server at {server.url}")
        doc = asyncio.run(run(args, server, workdir))
        doc["meta"] = {"loadavg_at_start": os.getloadavg()[0], "cpus": os.cpu_count(), "quick": args.quick,
                       "when": time.strftime("%Y-%m-%d %H:%M")}
    finally:
        server.stop()
    text = json.dumps(doc, indent=2)
    print(text)
    if args.output:
        args.output.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
