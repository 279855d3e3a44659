"""The Deployment and ReplicaSet controllers, as `kubecore controller-manager` runs them, against a
freshly started API server; one JSON document on stdout (issue 4).

    python -m bench.controller_deployment                        # 10,000 replicas; 1,000 x 10
    python -m bench.controller_deployment --replicas 2000 --deployments 200
    python -m bench.controller_deployment --cached-pods 150000   # + controller-manager memory

Three phases, each timed from the write that asks for the pods:
1. `scale`: one Deployment patched from 0 to `--replicas`. Clock stops when every pod exists
   (`seconds_to_all_pods`), then when the Deployment's status is correct
   (`seconds_to_status`: observedGeneration current, replicas == updatedReplicas == N, and its
   ReplicaSet's status.replicas == N).
2. `many`: `--deployments` Deployments of `--per-deployment` replicas, created 64 at a time. Same
   two clocks; every Deployment's status must be correct.
3. `memory` (only with `--cached-pods`): pods are POSTed straight at the server (no owner) until
   the cluster holds that many; once the controller manager's CPU settles (its informers have
   seen every pod), its resident memory is read (`running`). Then, unless it already runs every
   controller, it is stopped and a controller manager with `--controllers '*'` (all defaults, as
   `kubecore up` runs it) is started; once its pod informer and garbage-collector graph hold every
   pod and its CPU settled, its memory is read (`all_controllers`; `controller_manager_rss_mb` is
   this figure). Each figure comes with `caches`: a report the process writes on SIGUSR1 (see
   `cache_report`): which informers hold pods, their handlers and indexes, the decoded-object LRU,
   the workload controllers' pod views, the garbage collector's graph size.

There is no kubelet here, so no pod becomes Ready: "status correct" is about replica counts, not
availability. The controller manager runs without leader election and with only the two
controllers (every default controller with `--all-controllers`), as a separate process (its own cores' worth of Python, like upstream), with its
default client limits. Progress is polled cheaply: a `limit=1` LIST whose remainingItemCount
counts the namespace's pods, and LISTs of Deployments/ReplicaSets for status.

Figures per phase: seconds, `pods_per_s`, the CPU seconds of the API server and of the
controller manager, and `other_cpu_s` (load from other processes on this 2-core machine in the
same window). The peer figure `direct_pods_per_s` is the same number of pods POSTed straight at
the server, 128 at a time: what the API server alone sustains at that moment.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

if __package__ in (None, ""):  # run as a file: make `bench` importable from the repo root
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.apiserver_load import (ROOT, Profiler, Server, host_speed, log, machine_busy_seconds, pod,
                                  process_cpu_seconds, request_counts, top_functions)
from kubecore.client.config import ClientConfig
from kubecore.client.rest import RestClient

SCALE_NS = "bench-scale"
MANY_NS = "bench-many"
FILL_NS = "bench-fill"
POLL = 0.25


class ControllerManager:
    """`kubecore controller-manager --controllers C --no-leader-elect` as a child process, started
    through `controller_manager_main` (the same CLI, plus a SIGUSR1 handler that writes a JSON report
    of its caches to a file: `cache_report()`)."""

    def __init__(self, server: Server, *, controllers: str = "deployment,replicaset",
                 tag: str = "controller-manager", extra: tuple[str, ...] = ()) -> None:
        kubeconfig = server.dir / "data" / "kubeconfig"
        self.controllers = controllers
        self.report_path = server.dir / f"{tag}.report.json"
        self.errlog = open(server.dir / f"{tag}.stderr", "w+b")  # noqa: SIM115 - closed in stop()
        cmd = [sys.executable, "-c", "from bench.controller_deployment import controller_manager_main as m; m()",
               "controller-manager", "--kubeconfig", str(kubeconfig), "--controllers", controllers,
               "--no-leader-elect", *extra]
        self.extra = list(extra)
        env = {**os.environ, REPORT_ENV: str(self.report_path)}
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.errlog, cwd=ROOT, env=env)

    def cpu_seconds(self) -> float:
        return process_cpu_seconds(self.proc.pid)

    def _status_mb(self, key: str) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
        return 0.0

    def rss_mb(self) -> float:
        return self._status_mb("VmRSS")

    def _catches(self, sig: int) -> bool:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
        return False

    def peak_rss_mb(self) -> float:
        return self._status_mb("VmHWM")

    async def cache_report(self, timeout: float = 60.0) -> dict[str, Any]:
        """What the process caches (see `cache_report` below), read through SIGUSR1."""
        deadline = time.perf_counter() + timeout
        while not self._catches(signal.SIGUSR1):  # still starting: the signal would kill it
            self.check()
            if time.perf_counter() > deadline:
                raise TimeoutError("the controller manager does not handle SIGUSR1")
            await asyncio.sleep(0.1)
        self.report_path.unlink(missing_ok=True)
        self.proc.send_signal(signal.SIGUSR1)
        while not self.report_path.exists():
            self.check()
            if time.perf_counter() > deadline:
                raise TimeoutError("the controller manager wrote no cache report")
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.1)  # written with one write() + rename: complete once it exists
        report: dict[str, Any] = json.loads(self.report_path.read_text())
        return report

    async def wait_for_pods(self, count: int, *, timeout: float) -> None:
        """Until its pod informer and the garbage collector's graph hold `count` pods."""
        deadline = time.perf_counter() + timeout
        while True:
            r = await self.cache_report()
            pods = r.get("pods") or {"informer_items": 0}
            graph = r.get("gc_graph_nodes")
            if pods["informer_items"] >= count and (graph or 0) >= (count if self.controllers == "*" else 0):
                return
            if time.perf_counter() > deadline:
                raise TimeoutError(f"the controller manager holds {pods} after {timeout:.0f} s, not {count} pods")
            await asyncio.sleep(2.0)

    def memory(self) -> dict[str, Any]:
        return {"controllers": self.controllers, "rss_mb": round(self.rss_mb(), 1),
                "peak_rss_mb": round(self.peak_rss_mb(), 1)}

    def check(self) -> None:
        if self.proc.poll() is not None:
            self.errlog.seek(0)
            tail = self.errlog.read()[-2000:].decode(errors="replace")
            raise RuntimeError(f"controller manager exited with {self.proc.returncode}: {tail}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.errlog.close()


# -- inside the controller-manager process --------------------------------------------------------
REPORT_ENV = "KUBECORE_BENCH_CACHE_REPORT"


def controller_manager_main() -> None:
    """`kubecore controller-manager ARGS` (argv after `-c`), reporting its caches on SIGUSR1."""
    from kubecore.cli.main import main as cli_main

    path = os.environ.get(REPORT_ENV)
    if path:
        signal.signal(signal.SIGUSR1, lambda _sig, _frame: _write_report(Path(path)))
    sys.exit(cli_main(sys.argv[1:]))


def _write_report(path: Path) -> None:
    try:
        report = cache_report()
    except Exception as e:  # noqa: BLE001 - a bench probe must never take the process down
        report = {"error": repr(e)}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(report))
    tmp.rename(path)


_FOUND: dict[type, list[Any]] = {}


def _live(module: str, name: str) -> list[Any]:
    """Live instances of `module.name`, none while that module is not imported yet (the signal
    may come in the middle of an import). One scan of the heap per class, remembered once it
    found something: the bench's controller manager has a single term."""
    import gc

    kind = getattr(sys.modules.get(module), name, None)
    if not isinstance(kind, type):
        return []
    found = _FOUND.get(kind)
    if not found:
        found = _FOUND[kind] = [o for o in gc.get_objects() if isinstance(o, kind)]
    return found


def cache_report() -> dict[str, Any]:
    """Which caches of this process hold pods: the informers (full objects and metadata-only),
    their handlers, the garbage collector's graph and the workload controllers' pod views."""
    factories = _live("kubecore.client.factory", "SharedInformerFactory")
    informers = [i for f in factories for i in f.informers]
    informers += [i for f in factories for i in getattr(f, "metadata_informers", [])]
    pod_informers = [i for i in informers if i.name.startswith("pods.core")]
    graphs = _live("kubecore.controllers.graph", "GraphBuilder")
    podview = sys.modules.get("kubecore.controllers.podview")
    views = getattr(podview, "_VIEWS", {})
    return {
        "informers": len(informers),
        "pods": {"informers": [i.name for i in pod_informers],
                 "informer_items": max((len(i.indexer) for i in pod_informers), default=0),
                 "handlers": sum(len(i._listeners) for i in pod_informers),
                 "indexes": sorted({n for i in pod_informers for n in i.indexer.get_indexers()}),
                 "decoded_lru": sum(len(i.indexer._lru) for i in pod_informers),
                 "podview_views": sum(len(v) for v in list(views.values()))},
        "gc_graph_nodes": len(graphs[0].nodes) if graphs else None,
        "objects_by_informer": {i.name: len(i.indexer) for i in informers if len(i.indexer)},
    }


def deployment(name: str, namespace: str, replicas: int) -> dict[str, Any]:
    template = pod(name, 0)
    labels = {"app": name, "tier": "backend"}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": template["spec"]}}}


async def count_pods(rest: RestClient, namespace: str) -> int:
    doc = (await rest.request("GET", f"/api/v1/namespaces/{namespace}/pods", params={"limit": "1"})).json()
    meta = doc.get("metadata") or {}
    return len(doc.get("items") or []) + int(meta.get("remainingItemCount") or 0)


async def list_items(rest: RestClient, path: str) -> list[dict[str, Any]]:
    doc = (await rest.request("GET", path)).json()
    return list(doc.get("items") or [])


async def statuses_correct(rest: RestClient, namespace: str, replicas: int) -> tuple[int, int]:
    """(Deployments whose status is correct, Deployments) in `namespace`."""
    deploys = await list_items(rest, f"/apis/apps/v1/namespaces/{namespace}/deployments")
    rs_replicas: dict[str, int] = {}
    for rs in await list_items(rest, f"/apis/apps/v1/namespaces/{namespace}/replicasets"):
        for ref in rs["metadata"].get("ownerReferences") or []:
            if ref.get("controller"):
                rs_replicas[ref["uid"]] = rs_replicas.get(ref["uid"], 0) + int((rs.get("status") or {}).get("replicas") or 0)
    good = 0
    for d in deploys:
        st = d.get("status") or {}
        if (st.get("observedGeneration") == d["metadata"].get("generation")
                and int(st.get("replicas") or 0) == replicas and int(st.get("updatedReplicas") or 0) == replicas
                and rs_replicas.get(d["metadata"]["uid"]) == replicas):  # counts are omitted when 0
            good += 1
    return good, len(deploys)


async def until(what: str, check: Any, *, timeout: float, cm: ControllerManager) -> float:
    """Poll the async `check()` (returns (done, progress text)) until done; perf_counter time then."""
    deadline = time.perf_counter() + timeout
    last_note = 0.0
    while True:
        done, note = await check()
        now = time.perf_counter()
        if done:
            return now
        cm.check()
        if now > deadline:
            raise TimeoutError(f"{what}: not reached after {timeout:.0f} s ({note})")
        if now - last_note > 5:
            log(f"  {what}: {note}")
            last_note = now
        await asyncio.sleep(POLL)


class Window:
    """CPU of the server, the controller manager and everything else over one phase."""

    def __init__(self, server: Server, cm: ControllerManager) -> None:
        self.server, self.cm = server, cm
        self.s0, self.c0, self.b0 = server.cpu_seconds(), cm.cpu_seconds(), machine_busy_seconds()
        self.own0 = time.process_time()

    def figures(self, elapsed: float) -> dict[str, float]:
        s = self.server.cpu_seconds() - self.s0
        c = self.cm.cpu_seconds() - self.c0
        other = machine_busy_seconds() - self.b0 - s - c - (time.process_time() - self.own0)
        return {"apiserver_cpu_s": round(s, 2), "apiserver_cores": round(s / elapsed, 2),
                "controller_manager_cpu_s": round(c, 2), "controller_manager_cores": round(c / elapsed, 2),
                "other_cpu_s": round(other, 2)}


async def create_namespace(rest: RestClient, name: str) -> None:
    namespaces = await rest.resource("v1", "namespaces")
    await namespaces.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


async def phase_scale(rest: RestClient, server: Server, cm: ControllerManager, *, replicas: int,
                      timeout: float) -> dict[str, Any]:
    await create_namespace(rest, SCALE_NS)
    deploys = await rest.resource("apps/v1", "deployments")
    await deploys.create(deployment("big", SCALE_NS, 0))
    await until("scale: deployment synced", lambda: _synced(rest, SCALE_NS, 0, 1), timeout=60, cm=cm)
    window = Window(server, cm)
    t0 = time.perf_counter()
    await deploys.patch("big", {"spec": {"replicas": replicas}}, namespace=SCALE_NS)
    t_pods = await until("scale: pods", lambda: _pods_at(rest, SCALE_NS, replicas), timeout=timeout, cm=cm)
    cpu = window.figures(t_pods - t0)
    t_status = await until("scale: status", lambda: _synced(rest, SCALE_NS, replicas, 1), timeout=timeout, cm=cm)
    return {"replicas": replicas, "seconds_to_all_pods": round(t_pods - t0, 2),
            "pods_per_s": round(replicas / (t_pods - t0), 1), "seconds_to_status": round(t_status - t0, 2), **cpu}


async def phase_many(rest: RestClient, server: Server, cm: ControllerManager, *, count: int, per: int,
                     timeout: float, profile_dir: str | None = None) -> dict[str, Any]:
    await create_namespace(rest, MANY_NS)
    deploys = await rest.resource("apps/v1", "deployments")
    gate = asyncio.Semaphore(64)

    async def one(i: int) -> None:
        async with gate:
            await deploys.create(deployment(f"d{i:04d}", MANY_NS, per))

    profilers = _start_profilers(server, cm, profile_dir)
    requests0 = await request_counts(rest)
    window = Window(server, cm)
    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(count)))
    t_created = time.perf_counter()
    total = count * per
    t_pods = await until("many: pods", lambda: _pods_at(rest, MANY_NS, total), timeout=timeout, cm=cm)
    cpu: dict[str, Any] = dict(window.figures(t_pods - t0))
    requests1 = await request_counts(rest)
    cpu["requests_per_pod"] = {k: round((n - requests0.get(k, 0)) / (count * per), 2)
                               for k, n in sorted(requests1.items()) if n - requests0.get(k, 0) >= count // 10}
    if profilers:
        cpu["profile"] = {name: await _stop_profiler(p) for name, p in profilers.items()}
    t_status = await until("many: status", lambda: _synced(rest, MANY_NS, per, count), timeout=timeout, cm=cm)
    return {"deployments": count, "replicas_each": per, "pods": total,
            "seconds_to_create_deployments": round(t_created - t0, 2),
            "seconds_to_all_pods": round(t_pods - t0, 2), "pods_per_s": round(total / (t_pods - t0), 1),
            "seconds_to_status": round(t_status - t0, 2), **cpu}


def _start_profilers(server: Server, cm: ControllerManager, profile_dir: str | None) -> dict[str, Profiler]:
    if not profile_dir:
        return {}
    Path(profile_dir).mkdir(parents=True, exist_ok=True)
    return {name: Profiler(pid, Path(profile_dir) / f"{name}_many.txt", 100)
            for name, pid in (("apiserver", server.pid), ("controller_manager", cm.proc.pid))}


async def _stop_profiler(profiler: Profiler) -> dict[str, Any]:
    err = await asyncio.to_thread(profiler.stop)
    if not profiler.path.exists():
        return {"error": f"py-spy wrote nothing: {err}"}
    return {"raw": str(profiler.path), **top_functions(profiler.path, 15)}


async def _pods_at(rest: RestClient, namespace: str, want: int) -> tuple[bool, str]:
    n = await count_pods(rest, namespace)
    if n > want:
        raise AssertionError(f"{namespace}: {n} pods, more than the {want} asked for")
    return n == want, f"{n}/{want} pods"


async def _synced(rest: RestClient, namespace: str, replicas: int, count: int) -> tuple[bool, str]:
    good, total = await statuses_correct(rest, namespace, replicas)
    return good == count == total, f"{good}/{count} statuses correct"


async def direct_creates(rest: RestClient, *, count: int, concurrency: int = 128) -> dict[str, Any]:
    """POST `count` pods straight at the server, `concurrency` at a time; pods/s."""
    path = f"/api/v1/namespaces/{FILL_NS}/pods"
    spec = pod("fill", 0)["spec"]
    body = msgspec.json.encode({"apiVersion": "v1", "kind": "Pod", "spec": spec,
                                "metadata": {"generateName": "fill-", "labels": {"app": "fill"}}})
    gate = asyncio.Semaphore(concurrency)
    done = 0

    async def one() -> None:
        nonlocal done
        async with gate:
            await rest.request("POST", path, body=body, content_type="application/json")
            done += 1
            if done % 10000 == 0:
                log(f"  direct: {done}/{count} pods")

    t0 = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(count)))
    return {"direct_pods": count, "direct_pods_per_s": round(count / (time.perf_counter() - t0), 1)}


async def settle(cm: ControllerManager, *, idle_cores: float = 0.05, window: float = 2.0, limit: float = 300) -> None:
    began = time.perf_counter()
    while time.perf_counter() - began < limit:
        c0 = cm.cpu_seconds()
        await asyncio.sleep(window)
        if (cm.cpu_seconds() - c0) / window < idle_cores:
            return


async def phase_memory(rest: RestClient, server: Server, cm: ControllerManager, *, cached_pods: int, have: int,
                       timeout: float) -> dict[str, Any]:
    """Fill the cluster to `cached_pods`; the running controller manager's memory once it settled,
    then (unless it already runs every controller) that of a fresh one with `--controllers '*'`,
    which LISTs every pod at start instead of watching them arrive."""
    fill = max(0, cached_pods - have)
    log(f"phase memory: {fill} more pods, up to {cached_pods}")
    await direct_creates(rest, count=fill)
    total = have + fill
    out: dict[str, Any] = {"pods_in_cluster": total}
    await settle(cm)
    out["running"] = {**cm.memory(), "caches": await cm.cache_report()}
    if cm.controllers != "*":
        cm.stop()
        log("phase memory: a controller manager with every controller, listing them all")
        fresh = ControllerManager(server, controllers="*", tag="controller-manager-all", extra=cm.extra)
        try:
            await fresh.wait_for_pods(total, timeout=timeout)
            await settle(fresh)
            out["all_controllers"] = {**fresh.memory(), "caches": await fresh.cache_report()}
        finally:
            fresh.stop()
    else:
        out["all_controllers"] = out["running"]
    out["controller_manager_rss_mb"] = out["all_controllers"]["rss_mb"]
    out["apiserver_rss_mb"] = round(server.rss_mb(), 1)
    return out


async def run(server: Server, args: argparse.Namespace) -> dict[str, Any]:
    rest = RestClient(ClientConfig(server=server.url, qps=0))
    cm = ControllerManager(server, controllers="*" if args.all_controllers else "deployment,replicaset",
                           extra=_worker_flags(args.workers))
    try:
        await create_namespace(rest, FILL_NS)
        result: dict[str, Any] = {"benchmark": "controller_deployment", "target_pods_per_s": 1000,
                                  "host": host_speed(),
                                  "controllers": cm.controllers, "controller_manager_flags": cm.extra}
        log(f"phase scale: one Deployment 0 -> {args.replicas}")
        result["scale"] = await phase_scale(rest, server, cm, replicas=args.replicas, timeout=args.timeout)
        log(f"phase many: {args.deployments} Deployments x {args.per_deployment}")
        result["many"] = await phase_many(rest, server, cm, count=args.deployments, per=args.per_deployment,
                                          timeout=args.timeout, profile_dir=args.profile_dir)
        log("peer: the same number of pods POSTed directly")
        peer = await direct_creates(rest, count=args.replicas)
        result["peer"] = peer
        for phase in ("scale", "many"):
            result[phase]["ratio_to_direct"] = round(result[phase]["pods_per_s"] / peer["direct_pods_per_s"], 2)
        cm.check()
        if args.cached_pods:
            have = args.replicas * 2 + args.deployments * args.per_deployment
            result["memory"] = await phase_memory(rest, server, cm, cached_pods=args.cached_pods, have=have,
                                                  timeout=args.timeout)
        return result
    finally:
        cm.stop()
        await rest.close()


def _worker_flags(workers: int) -> tuple[str, ...]:
    if workers <= 0:
        return ()
    return ("--concurrent-deployment-syncs", str(workers), "--concurrent-replicaset-syncs", str(workers))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicas", type=int, default=10000)
    ap.add_argument("--deployments", type=int, default=1000)
    ap.add_argument("--per-deployment", type=int, default=10)
    ap.add_argument("--cached-pods", type=int, default=0, help="then fill the cluster to this many pods and "
                    "read the controller manager's memory (150000 for the issue's figure)")
    ap.add_argument("--all-controllers", action="store_true", help="run every default controller "
                    "(--controllers '*', as `kubecore up` does) in all phases, not only deployment,replicaset")
    ap.add_argument("--workers", type=int, default=0, help="--concurrent-deployment-syncs and "
                    "--concurrent-replicaset-syncs for the controller manager (default: upstream's 5)")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--profile-dir", default=None, help="record the API server and the controller manager "
                    "with py-spy during the many-Deployments phase")
    args = ap.parse_args()
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass
    server = Server()
    try:
        server.wait_ready()
        result = asyncio.run(run(server, args))
    finally:
        server.stop()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
