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
   seen every pod), its resident memory is read.

There is no kubelet here, so no pod becomes Ready: "status correct" is about replica counts, not
availability. The controller manager runs without leader election and with only the two
controllers, as a separate process (its own cores' worth of Python, like upstream), with its
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
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

if __package__ in (None, ""):  # run as a file: make `bench` importable from the repo root
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.apiserver_load import CLK_TCK, ROOT, Server, log, machine_busy_seconds, pod
from kubecore.client.config import ClientConfig
from kubecore.client.rest import RestClient

SCALE_NS = "bench-scale"
MANY_NS = "bench-many"
FILL_NS = "bench-fill"
POLL = 0.25


class ControllerManager:
    """`kubecore controller-manager --controllers deployment,replicaset --no-leader-elect`."""

    def __init__(self, server: Server) -> None:
        kubeconfig = server.dir / "data" / "kubeconfig"
        self.errlog = open(server.dir / "controller-manager.stderr", "w+b")  # noqa: SIM115 - closed in stop()
        cmd = [sys.executable, "-m", "kubecore.cli.main", "controller-manager", "--kubeconfig", str(kubeconfig),
               "--controllers", "deployment,replicaset", "--no-leader-elect"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.errlog, cwd=ROOT)

    def cpu_seconds(self) -> float:
        stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

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
                     timeout: float) -> dict[str, Any]:
    await create_namespace(rest, MANY_NS)
    deploys = await rest.resource("apps/v1", "deployments")
    gate = asyncio.Semaphore(64)

    async def one(i: int) -> None:
        async with gate:
            await deploys.create(deployment(f"d{i:04d}", MANY_NS, per))

    window = Window(server, cm)
    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(count)))
    t_created = time.perf_counter()
    total = count * per
    t_pods = await until("many: pods", lambda: _pods_at(rest, MANY_NS, total), timeout=timeout, cm=cm)
    cpu = window.figures(t_pods - t0)
    t_status = await until("many: status", lambda: _synced(rest, MANY_NS, per, count), timeout=timeout, cm=cm)
    return {"deployments": count, "replicas_each": per, "pods": total,
            "seconds_to_create_deployments": round(t_created - t0, 2),
            "seconds_to_all_pods": round(t_pods - t0, 2), "pods_per_s": round(total / (t_pods - t0), 1),
            "seconds_to_status": round(t_status - t0, 2), **cpu}


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


async def run(server: Server, args: argparse.Namespace) -> dict[str, Any]:
    rest = RestClient(ClientConfig(server=server.url, qps=0))
    cm = ControllerManager(server)
    try:
        await create_namespace(rest, FILL_NS)
        result: dict[str, Any] = {"benchmark": "controller_deployment", "target_pods_per_s": 1000}
        log(f"phase scale: one Deployment 0 -> {args.replicas}")
        result["scale"] = await phase_scale(rest, server, cm, replicas=args.replicas, timeout=args.timeout)
        log(f"phase many: {args.deployments} Deployments x {args.per_deployment}")
        result["many"] = await phase_many(rest, server, cm, count=args.deployments, per=args.per_deployment,
                                          timeout=args.timeout)
        log("peer: the same number of pods POSTed directly")
        peer = await direct_creates(rest, count=args.replicas)
        result["peer"] = peer
        for phase in ("scale", "many"):
            result[phase]["ratio_to_direct"] = round(result[phase]["pods_per_s"] / peer["direct_pods_per_s"], 2)
        if args.cached_pods:
            have = args.replicas * 2 + args.deployments * args.per_deployment
            fill = max(0, args.cached_pods - have)
            log(f"phase memory: {fill} more pods, up to {args.cached_pods}")
            await direct_creates(rest, count=fill)
            await settle(cm)
            result["memory"] = {"pods_in_cluster": have + fill, "controller_manager_rss_mb": round(cm.rss_mb(), 1),
                                "apiserver_rss_mb": round(server.rss_mb(), 1)}
        cm.check()
        return result
    finally:
        cm.stop()
        await rest.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicas", type=int, default=10000)
    ap.add_argument("--deployments", type=int, default=1000)
    ap.add_argument("--per-deployment", type=int, default=10)
    ap.add_argument("--cached-pods", type=int, default=0, help="then fill the cluster to this many pods and "
                    "read the controller manager's memory (150000 for the issue's figure)")
    ap.add_argument("--timeout", type=float, default=900.0)
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
