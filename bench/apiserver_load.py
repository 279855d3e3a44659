"""kubecore's API server under pod load, over HTTP, one run, one JSON document on stdout.

    python -m bench.apiserver_load [--quick] [--output FILE] [--no-profile] [--no-wrk]

Starts `kubecore up` in a subprocess (temporary data dir, free loopback port) and drives it with an
asyncio + aiohttp load generator in this process (one keep-alive connection pool, N closed-loop
workers): pod creates, GETs, PUT updates (closed loop, then open loop at a fixed rate), LIST of all
pods cluster-wide, watch fan-out (event delivery latency), and server memory per 10k pods. `wrk`
(if on PATH) measures GET of one pod without Python on the client side. With py-spy on PATH, two
extra phases (creates, GETs, PUTs) run under `py-spy record` and the JSON lists the server's top functions
by self time. Progress goes to stderr. See bench/README.md for what every figure means.

The load generator and the server share the machine's cores (2 here): every phase records the
server process's CPU seconds (all threads, from /proc/<pid>/stat) and this process's, so a reader
can tell a server ceiling from a client one.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import platform
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import statistics
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Self

import aiohttp
import msgspec

if __package__ in (None, ""):  # run as a file: make `bench` importable from the repo root
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.loadgen import percentile

ROOT = Path(__file__).resolve().parent.parent
NS = "default"
WRK_NS = "bench-wrk"  # the wrk create phase's pods (generated names), apart from the tracked ones
CLK_TCK = os.sysconf("SC_CLK_TCK")
_encode = msgspec.json.encode
_decode = msgspec.json.decode

TARGETS = {  # issue 3, "Benchmark": this 2-core machine
    "creates_per_s": 5000, "gets_per_s": 20000, "mutating_p99_ms_at_1000_writes_per_s": 50,
    "list_100k_pods_s": 2.0, "watch_p99_ms_with_1000_watchers": 100,
}
FULL = {"concurrency": 64, "creates": 10_000, "gets": 50_000, "updates": 10_000, "rate": 1000, "rate_seconds": 15,
        "list_reps": 3, "watch": "200x500,200x50,1000x10", "watch_seconds": 10, "fill": 100_000, "wrk_seconds": 10,
        "profile_seconds": 10}
QUICK = {"concurrency": 64, "creates": 2000, "gets": 10_000, "updates": 2000, "rate": 1000, "rate_seconds": 3,
         "list_reps": 2, "watch": "20x500", "watch_seconds": 3, "fill": 0, "wrk_seconds": 3,
         "profile_seconds": 3}


def log(message: str) -> None:
    print(f"[apiserver-bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _ms(seconds: float) -> float:
    return float(f"{seconds * 1e3:.4g}")


def _r(x: float, nd: int = 1) -> float:
    return round(x, nd)


# -- the server under test -------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """`python -m kubecore.cli.main up --controllers ""` in a temp dir (the API server alone: no
    controller manager competing for the cores); the Popen pid is the server process itself."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="kubecore-apibench-"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.errlog = open(self.dir / "server.stderr", "w+b")  # noqa: SIM115 - closed in stop()
        cmd = [sys.executable, "-m", "kubecore.cli.main", "up", "--data-dir", str(self.dir / "data"),
               "--listen", f"127.0.0.1:{self.port}", "--controllers", "", "--no-scheduler"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.errlog, cwd=ROOT)
        self.pid = self.proc.pid

    def wait_ready(self, timeout: float = 60.0) -> float:
        began = time.perf_counter()
        assert self.proc.stdout is not None
        os.set_blocking(self.proc.stdout.fileno(), False)
        buf = b""
        while b"listening on" not in buf:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}: {self.stderr_tail()}")
            if time.perf_counter() - began > timeout:
                raise RuntimeError(f"server not ready after {timeout} s: {self.stderr_tail()}")
            buf += self.proc.stdout.read() or b""
            time.sleep(0.02)
        return time.perf_counter() - began

    def stderr_tail(self) -> str:
        self.errlog.flush()
        self.errlog.seek(0)
        return self.errlog.read()[-2000:].decode(errors="replace")

    def cpu_seconds(self) -> float:
        """utime + stime of all the server's threads."""
        return process_cpu_seconds(self.pid)

    async def settle(self, *, idle_cores: float = 0.1, window: float = 0.3, limit: float = 30.0) -> float:
        """Waits until the server's CPU use drops below `idle_cores` (backlog of an earlier phase done)."""
        began = time.perf_counter()
        while time.perf_counter() - began < limit:
            cpu0 = self.cpu_seconds()
            await asyncio.sleep(window)
            if (self.cpu_seconds() - cpu0) / window < idle_cores:
                break
        return time.perf_counter() - began

    def status(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "Threads"):
                out[key] = int(value.split()[0])
        return out

    def rss_mb(self) -> float:
        return self.status()["VmRSS"] / 1024

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.errlog.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of every thread of `pid` (/proc/<pid>/stat)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def machine_busy_seconds() -> float:
    """CPU seconds all cores spent not idle (/proc/stat), to expose load from outside this benchmark."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / CLK_TCK


_PROBE_POD = msgspec.json.encode({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "probe", "namespace": "default", "labels": {"app": "probe", "tier": "web"}},
    "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                             "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}],
             "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                              "effect": "NoExecute", "tolerationSeconds": 300}]},
    "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}})


def host_speed() -> dict[str, Any]:
    """Two fixed CPU-bound probes, µs per round, the median of 7 batches each. `probe_us` decodes
    and re-encodes one small pod (C code, as the servers do all day): the machine's speed. Shared
    VMs here vary by up to 2x within hours; compare benchmark figures taken at similar probe
    values. `interp_us` walks that pod in Python bytecode (dict and list reads, small dicts built,
    calls): the interpreter's speed, which differs between builds of one Python version by 10-30% here
    (a distribution's PGO/LTO build against a plain source build). `python` names the interpreter."""
    dec, enc = msgspec.json.decode, msgspec.json.encode
    probe = dec(_PROBE_POD)
    return {"probe_us": _median_us(lambda: enc(dec(_PROBE_POD)), 2000),
            "interp_us": _median_us(lambda: _walk(probe), 2000),
            "python": python_build()}


def _median_us(fn: Callable[[], object], n: int) -> float:
    times = []
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        times.append((time.perf_counter() - t) / n * 1e6)
    return round(statistics.median(times), 2)


def _walk(value: Any) -> Any:
    """The pod rebuilt with every string replaced by its length: plain interpreter work."""
    if type(value) is dict:
        return {k: _walk(v) for k, v in value.items()}
    if type(value) is list:
        return [_walk(v) for v in value]
    return len(value) if type(value) is str else value


def python_build() -> dict[str, Any]:
    """Which interpreter runs the benchmark (and, through `sys.executable`, the servers it starts).
    Whether it was built with PGO/LTO is not recorded anywhere reliable (Debian's build says nothing
    of it in CONFIG_ARGS); `interp_us` measures what that changes."""
    return {"version": platform.python_version(), "implementation": platform.python_implementation(),
            "executable": sys.executable, "compiler": platform.python_compiler()}


def fs_type(path: Path) -> str:
    best, kind = "", "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/mounts").read_text().splitlines():
            parts = line.split()
            if len(parts) > 2 and str(path).startswith(parts[1]) and len(parts[1]) > len(best):
                best, kind = parts[1], parts[2]
    return kind


# -- the workload pod ------------------------------------------------------------------------------
def pod(name: str, i: int) -> dict[str, Any]:
    """A ReplicaSet-owned workload pod as a hollow-node cluster gets it (clusterloader2's density
    pod plus what the controllers add before the API server sees it): ~1.5 KB of JSON."""
    rs = f"load-small-{i // 100:05d}-6f8b9c7d4"
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": NS, "generateName": f"{rs}-",
            "labels": {"app": "load-small", "group": "load", "name": f"load-small-{i // 100:05d}",
                       "pod-template-hash": "6f8b9c7d4", "tier": "backend"},
            "annotations": {"kubernetes.io/config.source": "api", "bench/seq": "0"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs,
                                 "uid": f"6b2f3a4e-{i // 100:04x}-4c1d-9e8f-0a1b2c3d4e5f",
                                 "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": {
            "containers": [{
                "name": "load-small", "image": "registry.k8s.io/pause:3.9",
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "env": [{"name": "POD_NAME", "value": name}, {"name": "GROUP", "value": "load"}],
                "resources": {"requests": {"cpu": "10m", "memory": "10M"},
                              "limits": {"cpu": "10m", "memory": "10M"}},
                "volumeMounts": [{"name": "kube-api-access", "readOnly": True,
                                  "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent",
            }],
            "volumes": [{"name": "kube-api-access", "emptyDir": {}}],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 1, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "schedulerName": "default-scheduler", "priority": 0,
            "enableServiceLinks": True, "nodeSelector": {"type": "hollow-node"},
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 300},
                {"key": "kubemark", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
            ],
        },
    }


# -- load drivers ----------------------------------------------------------------------------------
@dataclass
class Phase:
    """Wall time, server CPU and this process's CPU around one workload."""

    server: Server
    began: float = 0.0
    server_cpu0: float = 0.0
    client_cpu0: float = 0.0
    busy0: float = 0.0
    other_cpu: float = 0.0
    seconds: float = 0.0
    server_cpu: float = 0.0
    client_cpu: float = 0.0

    def __enter__(self) -> Self:
        gc.collect()  # the client holds every pod it wrote; a gen-2 pass mid-phase stalls its loop for tens of ms
        gc.disable()
        self.server_cpu0, self.client_cpu0 = self.server.cpu_seconds(), time.process_time()
        self.busy0 = machine_busy_seconds()
        self.began = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.began
        self.server_cpu = self.server.cpu_seconds() - self.server_cpu0
        self.client_cpu = time.process_time() - self.client_cpu0
        self.other_cpu = machine_busy_seconds() - self.busy0 - self.server_cpu - self.client_cpu
        gc.enable()

    def cpu(self) -> dict[str, float]:
        return {"server_cpu_cores": _r(self.server_cpu / self.seconds, 2),
                "client_cpu_cores": _r(self.client_cpu / self.seconds, 2),
                "other_cpu_cores": _r(max(0.0, self.other_cpu) / self.seconds, 2)}


@dataclass
class Outcome:
    latencies: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    ops: int = 0

    def summary(self, ph: Phase, **extra: Any) -> dict[str, Any]:
        lat = sorted(self.latencies)
        ok = sum(n for code, n in self.statuses.items() if 200 <= code < 300)
        return {"ops": self.ops, "ok": ok, "errors": {str(k): v for k, v in self.statuses.items() if not 200 <= k < 300},
                "seconds": _r(ph.seconds, 2), "ops_per_s": _r(ok / ph.seconds),
                "p50_ms": _ms(percentile(lat, 0.50)), "p99_ms": _ms(percentile(lat, 0.99)),
                "max_ms": _ms(lat[-1]) if lat else None, **ph.cpu(), **extra}


Op = Callable[[int], Awaitable[int]]  # does request i, returns the HTTP status


async def closed_loop(op: Op, *, concurrency: int, ops: int = 0, deadline: float = 0.0) -> Outcome:
    """`concurrency` workers pull the next index from one iterator until `ops` are issued (or
    `deadline`, a perf_counter time, passes); latency is the time around one request."""
    out = Outcome()
    indices: Iterator[int] = iter(range(ops)) if ops else iter(int, 1)  # 0, 0, ... when deadline-bound
    counter = iter(range(1 << 62))
    clock = time.perf_counter

    async def worker() -> None:
        for _ in indices:
            if deadline and clock() > deadline:
                return
            i = next(counter)
            began = clock()
            status = await op(i)
            out.latencies.append(clock() - began)
            out.statuses[status] += 1
            out.ops += 1

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return out


async def open_loop(op: Op, *, rate: float, seconds: float, max_inflight: int = 4000) -> tuple[Outcome, list[float], int]:
    """Request i is due at t0 + i/rate whatever the earlier ones did. Returns the outcome (latency
    from the actual send), latencies from the due time (includes any queueing behind a slow send
    loop: no coordinated omission) and how many requests were skipped at the in-flight cap."""
    out, from_due, skipped = Outcome(), [], 0
    clock = time.perf_counter
    tasks: set[asyncio.Task[None]] = set()

    async def one(i: int, due: float) -> None:
        began = clock()
        status = await op(i)
        done = clock()
        out.latencies.append(done - began)
        from_due.append(done - due)
        out.statuses[status] += 1
        out.ops += 1

    t0, i, total = clock(), 0, int(rate * seconds)
    while i < total:
        now = clock()
        due_now = min(total, int((now - t0) * rate) + 1)
        while i < due_now:
            if len(tasks) >= max_inflight:
                skipped += 1
            else:
                task = asyncio.ensure_future(one(i, t0 + i / rate))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            i += 1
        await asyncio.sleep(max(0.0, t0 + i / rate - clock()))
    if tasks:
        await asyncio.gather(*tasks)
    return out, from_due, skipped


# -- the benchmark ---------------------------------------------------------------------------------
class Bench:
    def __init__(self, args: argparse.Namespace, server: Server, session: aiohttp.ClientSession) -> None:
        self.args, self.server, self.session = args, server, session
        self.pods_url = f"{server.url}/api/v1/namespaces/{NS}/pods"
        self.latest: dict[str, dict[str, Any]] = {}  # pod name -> the object the server last returned
        self.names: list[str] = []
        self.busy: set[str] = set()
        self.seq = 0  # the last bench/seq annotation value written
        self.json_headers = {"Content-Type": "application/json"}

    # requests
    async def ensure_namespace(self, name: str) -> None:
        body = _encode({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        async with self.session.post(f"{self.server.url}/api/v1/namespaces", data=body, headers=self.json_headers) as r:
            if r.status not in (201, 409):
                raise RuntimeError(f"creating namespace {name}: HTTP {r.status} {await r.text()}")

    async def create(self, name: str, i: int) -> int:
        async with self.session.post(self.pods_url, data=_encode(pod(name, i)), headers=self.json_headers) as r:
            body = await r.read()
            if r.status == 201 or r.status == 200:
                self.latest[name] = _decode(body)
                self.names.append(name)
            return r.status

    async def get(self, name: str) -> int:
        async with self.session.get(f"{self.pods_url}/{name}") as r:
            await r.read()
            return r.status

    async def update(self, name: str, sent: dict[int, tuple[float, float]] | None = None) -> int:
        obj = self.latest[name]
        # unique across phases: an update that changes nothing is not written (no event, no new rv)
        self.seq += 1
        obj["metadata"].setdefault("annotations", {})["bench/seq"] = str(self.seq)
        began = time.perf_counter()
        async with self.session.put(f"{self.pods_url}/{name}", data=_encode(obj), headers=self.json_headers) as r:
            body = await r.read()
            done = time.perf_counter()
            if r.status == 200:
                new = _decode(body)
                self.latest[name] = new
                if sent is not None:
                    sent[int(new["metadata"]["resourceVersion"])] = (began, done)
            return r.status

    # phases
    async def create_phase(self, n: int, prefix: str, *, concurrency: int = 0, deadline: float = 0.0) -> dict[str, Any]:
        await self.server.settle()
        base = len(self.names)
        with Phase(self.server) as ph:
            out = await closed_loop(lambda i: self.create(f"{prefix}-{base + i:07d}", base + i),
                                    concurrency=concurrency or self.args.concurrency, ops=n, deadline=deadline)
        return out.summary(ph, concurrency=concurrency or self.args.concurrency)

    async def get_phase(self, n: int, *, deadline: float = 0.0) -> dict[str, Any]:
        rng = random.Random(7)
        picks = [rng.choice(self.names) for _ in range(n or 200_000)]
        await self.server.settle()
        with Phase(self.server) as ph:
            out = await closed_loop(lambda i: self.get(picks[i % len(picks)]), concurrency=self.args.concurrency,
                                    ops=n, deadline=deadline)
        return out.summary(ph, concurrency=self.args.concurrency)

    def _update_op(self, sent: dict[int, tuple[float, float]] | None = None) -> Op:
        """PUT round-robin over the pods, skipping one whose previous PUT is still in flight (so
        every PUT carries the current resourceVersion and none conflicts)."""
        cursor = iter(range(1 << 62))
        names = self.names

        async def op(i: int) -> int:
            for _ in range(len(names)):
                name = names[next(cursor) % len(names)]
                if name not in self.busy:
                    break
            else:
                return 0
            self.busy.add(name)
            try:
                return await self.update(name, sent)
            finally:
                self.busy.discard(name)
        return op

    async def update_phase(self, n: int, *, deadline: float = 0.0) -> dict[str, Any]:
        await self.server.settle()
        with Phase(self.server) as ph:
            out = await closed_loop(self._update_op(), concurrency=self.args.concurrency, ops=n, deadline=deadline)
        return out.summary(ph, concurrency=self.args.concurrency)

    async def rate_phase(self, rate: float, seconds: float) -> dict[str, Any]:
        await self.server.settle()
        with Phase(self.server) as ph:
            out, from_due, skipped = await open_loop(self._update_op(), rate=rate, seconds=seconds)
        due = sorted(from_due)
        return out.summary(ph, target_rate=rate, skipped_at_inflight_cap=skipped,
                           p50_ms_from_due=_ms(percentile(due, 0.5)), p99_ms_from_due=_ms(percentile(due, 0.99)))

    async def list_phase(self, reps: int, *, paged: bool = True) -> dict[str, Any]:
        await self.server.settle()
        url = f"{self.server.url}/api/v1/pods"
        runs, expect = [], len(self.names)
        items = size = 0
        with Phase(self.server) as ph:
            for _ in range(reps):
                began = time.perf_counter()
                async with self.session.get(url) as r:
                    headers_at = time.perf_counter()
                    body = await r.read()
                    done = time.perf_counter()
                runs.append((headers_at - began, done - began))
                size = len(body)
        items = len(_decode(body)["items"])  # outside the clock: checks the LIST really held every pod
        del body
        out: dict[str, Any] = {
            "pods_in_store": expect, "items_returned": items, "response_mb": _r(size / 1e6, 1),
            "reps": reps, "seconds_runs": [_r(t, 3) for _, t in runs],
            "seconds": _r(sorted(t for _, t in runs)[len(runs) // 2], 3),
            "time_to_headers_s": _r(sorted(h for h, _ in runs)[len(runs) // 2], 3), **ph.cpu(),
        }
        out["mb_per_s"] = _r(size / 1e6 / out["seconds"], 1)
        if paged:  # what a reflector does: limit=500 pages with continue tokens
            began, pages, got, cont = time.perf_counter(), 0, 0, ""
            while True:
                async with self.session.get(url, params={"limit": "500", **({"continue": cont} if cont else {})}) as r:
                    page = _decode(await r.read())
                pages += 1
                got += len(page["items"])
                cont = page["metadata"].get("continue", "")
                if not cont:
                    break
            out["paged_limit_500"] = {"seconds": _r(time.perf_counter() - began, 3), "pages": pages, "items": got,
                                      "note": "includes decoding each page on the client"}
        return out

    async def watch_phase(self, watchers: int, rate: float, seconds: float) -> dict[str, Any]:
        """`watchers` cluster-wide pod watches from the current resourceVersion; PUTs at `rate` for
        `seconds`; delivery latency per (event, watcher) from the PUT's response (and its send)."""
        async with self.session.get(f"{self.server.url}/api/v1/pods", params={"limit": "1"}) as r:
            rv = _decode(await r.read())["metadata"]["resourceVersion"]
        conn = aiohttp.TCPConnector(limit=0, force_close=False)
        wsession = aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=None, sock_read=None))
        arrivals: list[list[tuple[int, float]]] = [[] for _ in range(watchers)]
        last_rv = [0] * watchers
        started = [asyncio.get_running_loop().create_future() for _ in range(watchers)]
        marker = b'"resourceVersion":"'
        url = f"{self.server.url}/api/v1/pods?watch=1&resourceVersion={rv}&timeoutSeconds=3600"

        async def watcher(w: int) -> None:
            clock, got = time.perf_counter, arrivals[w]
            async with wsession.get(url) as resp:
                started[w].set_result(resp.status)
                buf = b""
                async for chunk in resp.content.iter_any():
                    t = clock()
                    buf += chunk
                    *lines, buf = buf.split(b"\n")
                    for line in lines:
                        at = line.find(marker)  # metadata.resourceVersion is the first one in a pod event
                        if at >= 0 and line.startswith(b'{"type":"MODIFIED"'):
                            at += len(marker)
                            v = int(line[at:line.index(b'"', at)])
                            got.append((v, t))
                            last_rv[w] = v

        log(f"watch: opening {watchers} watches")
        tasks = [asyncio.ensure_future(watcher(w)) for w in range(watchers)]
        statuses = Counter(await asyncio.gather(*started))
        await self.server.settle()
        sent: dict[int, tuple[float, float]] = {}
        log(f"watch: {watchers} watchers, PUTs at {rate}/s for {seconds} s")
        with Phase(self.server) as ph:
            out, _, skipped = await open_loop(self._update_op(sent), rate=rate, seconds=seconds)
            top = max(sent) if sent else 0
            drain_began, drained = time.perf_counter(), True
            while any(v < top for v in last_rv):
                if time.perf_counter() - drain_began > 30:
                    drained = False
                    break
                await asyncio.sleep(0.01)
            drain_s = time.perf_counter() - drain_began
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await wsession.close()
        from_resp, from_send, negatives = [], [], 0
        for got in arrivals:
            for v, t in got:
                if v in sent:
                    began, done = sent[v]
                    from_resp.append(t - done)
                    from_send.append(t - began)
                    negatives += t < done
        from_resp.sort()
        from_send.sort()
        expected = len(sent) * watchers
        return {
            "watchers": watchers, "watch_status": {str(k): v for k, v in statuses.items()},
            "target_write_rate": rate, "writes_ok": len(sent), "write_errors": {str(k): v for k, v in out.statuses.items() if k != 200},
            "writes_skipped_at_inflight_cap": skipped, "write_p99_ms": _ms(percentile(sorted(out.latencies), 0.99)),
            "deliveries_expected": expected, "deliveries_matched": len(from_resp), "all_delivered": drained,
            "drain_after_last_write_s": _r(drain_s, 3),
            "events_delivered_per_s": _r(len(from_resp) / ph.seconds),
            "p50_ms": _ms(percentile(from_resp, 0.5)), "p99_ms": _ms(percentile(from_resp, 0.99)),
            "max_ms": _ms(from_resp[-1]) if from_resp else None,
            "p50_ms_from_put_send": _ms(percentile(from_send, 0.5)), "p99_ms_from_put_send": _ms(percentile(from_send, 0.99)),
            "events_before_put_response": negatives, **ph.cpu(),
        }


# -- wrk and py-spy ------------------------------------------------------------------------------------
def _wrk_ms(text: str) -> float | None:
    m = re.fullmatch(r"([\d.]+)(us|ms|s)", text)
    if not m:
        return None
    return float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]


def run_wrk(server: Server, url: str, *, seconds: int, threads: int, connections: int) -> dict[str, Any]:
    if not shutil.which("wrk"):
        return {"skipped": "wrk not on PATH (apt-get install wrk)"}
    cmd = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--latency", url]
    with Phase(server) as ph:
        text = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    out: dict[str, Any] = {"command": " ".join(cmd[:-1]) + " <one pod URL>", **ph.cpu()}
    if m := re.search(r"Requests/sec:\s+([\d.]+)", text):
        out["gets_per_s"] = _r(float(m.group(1)))
    for pct in ("50", "99"):
        if m := re.search(rf"^\s+{pct}%\s+(\S+)", text, re.MULTILINE):
            out[f"p{pct}_ms"] = _wrk_ms(m.group(1))
    if m := re.search(r"Non-2xx or 3xx responses: (\d+)", text):
        out["non_2xx"] = int(m.group(1))
    out["client_cpu_cores"] = None  # wrk is a separate process: its CPU shows in other_cpu_cores
    return out


_WRK_POST = """wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = assert(io.open(os.getenv("KUBECORE_WRK_BODY"), "rb"))
wrk.body = f:read("*a")
f:close()
"""


def run_wrk_creates(server: Server, url: str, body: bytes, *, seconds: int, threads: int,
                    connections: int) -> dict[str, Any]:
    """wrk POSTing one pod body with `generateName` (every request creates a new pod): the server's
    create throughput without a Python load generator beside it."""
    if not shutil.which("wrk"):
        return {"skipped": "wrk not on PATH (apt-get install wrk)"}
    with tempfile.TemporaryDirectory(prefix="kubecore-wrk-") as tmp:
        (Path(tmp) / "post.lua").write_text(_WRK_POST)
        (Path(tmp) / "pod.json").write_bytes(body)
        cmd = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", str(Path(tmp) / "post.lua"), url]
        env = {**os.environ, "KUBECORE_WRK_BODY": str(Path(tmp) / "pod.json")}
        with Phase(server) as ph:
            text = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout
    out: dict[str, Any] = {"command": " ".join(cmd[:-3]) + " -s <POST one pod body> <pods URL>", **ph.cpu()}
    total = int(m.group(1)) if (m := re.search(r"(\d+) requests in", text)) else 0
    failed = int(m.group(1)) if (m := re.search(r"Non-2xx or 3xx responses: (\d+)", text)) else 0
    if m := re.search(r"Requests/sec:\s+([\d.]+)", text):
        rate = float(m.group(1))
        out["creates_per_s"] = _r(rate * (total - failed) / total) if total else 0.0
    for pct in ("50", "99"):
        if m := re.search(rf"^\s+{pct}%\s+(\S+)", text, re.MULTILINE):
            out[f"p{pct}_ms"] = _wrk_ms(m.group(1))
    out.update({"requests": total, "non_2xx": failed, "client_cpu_cores": None})
    return out


async def request_counts(rest: Any) -> dict[str, int]:
    """The API server's apiserver_request_total summed by "verb resource[/subresource]"."""
    text = (await rest.request("GET", "/metrics")).body.decode()
    out: dict[str, int] = {}
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels = dict(kv.split("=", 1) for kv in line[line.index("{") + 1:line.index("}")].split(","))
        sub = labels["subresource"].strip('"')
        key = f'{labels["verb"].strip(chr(34))} {labels["resource"].strip(chr(34))}' + (f"/{sub}" if sub else "")
        out[key] = out.get(key, 0) + int(float(line.rsplit(" ", 1)[1]))
    return out


class Profiler:
    """`py-spy record --format raw` on the server for one phase; SIGINT makes it write the file."""

    def __init__(self, pid: int, path: Path, rate: int) -> None:
        self.path = path
        self.proc = subprocess.Popen(["py-spy", "record", "--pid", str(pid), "--format", "raw", "--nolineno",
                                      "--rate", str(rate), "--nonblocking", "-o", str(path)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return err.decode(errors="replace")[-500:]


def top_functions(path: Path, n: int = 10) -> dict[str, Any]:
    """Self time (leaf frame) and inclusive time per function from py-spy's collapsed stacks."""
    self_t: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        k = int(count)
        frames = [f.strip() for f in stack.split(";")]
        total += k
        self_t[_short(frames[-1])] += k
        for f in set(map(_short, frames)):
            incl[f] += k
    pct = lambda c: _r(100 * c / total, 1) if total else 0.0
    return {"samples": total,
            "top_self": [{"function": f, "self_pct": pct(c)} for f, c in self_t.most_common(n)],
            "top_inclusive_kubecore": [{"function": f, "inclusive_pct": pct(c)} for f, c in incl.most_common()
                                       if "kubecore/" in f and not _entry(f)][:n]}


def _entry(frame: str) -> bool:
    """The frames every sample passes through (the CLI and the serve loop): not informative."""
    return "kubecore/cli/" in frame or frame.startswith(("serve (", "run (")) and "apiserver/server.py" in frame


def _short(frame: str) -> str:
    """`handle (/x/site-packages/aiohttp/web_protocol.py)` -> `handle (aiohttp/web_protocol.py)`."""
    m = re.match(r"(.*) \((.*)\)$", frame)
    if not m:
        return frame
    fn, path = m.groups()
    for anchor in ("site-packages/", "python/", "lib/python3"):
        if anchor in path:
            path = path.split(anchor, 1)[1]
            break
    return f"{fn} ({path})"


# -- targets and the document ----------------------------------------------------------------------------
def _target(name: str, value: Any, threshold: float, *, lower_is_better: bool, note: str,
            at_target_size: bool = True) -> dict[str, Any]:
    passed = None if value is None else (value < threshold if lower_is_better else value >= threshold)
    return {"target": name, "value": value, "threshold": threshold, "pass": passed,
            "measured_at_target_size": at_target_size, "note": note}


def targets(doc: dict[str, Any], args: argparse.Namespace) -> list[dict[str, Any]]:
    r = doc["results"]
    cw = r.get("create_wrk", {})
    out = [_target("pod creates/s through HTTP >= 5,000", max(r["create"]["ops_per_s"], cw.get("creates_per_s") or 0.0),
                   TARGETS["creates_per_s"], lower_is_better=False, at_target_size=r["create"]["ops"] >= 10_000,
                   note=f"the better of aiohttp ({r['create']['ops_per_s']}/s, {args.concurrency} workers, "
                        f"{r['create']['ops']} creates into an empty store; client {r['create']['client_cpu_cores']} "
                        f"cores, server {r['create']['server_cpu_cores']}) and wrk ({cw.get('creates_per_s')}/s, "
                        f"generateName, {args.wrk_connections} connections; server {cw.get('server_cpu_cores')} cores)")]
    wrk, aio = r.get("get_wrk", {}).get("gets_per_s"), r["get"]["ops_per_s"]
    out.append(_target("pod GETs/s through HTTP >= 20,000", max(aio, wrk or 0.0), TARGETS["gets_per_s"],
                       lower_is_better=False,
                       note=f"the better of aiohttp ({aio}/s, {args.concurrency} connections, random pods; server "
                            f"{r['get']['server_cpu_cores']} cores) and wrk ({wrk}/s, one pod URL; server "
                            f"{r.get('get_wrk', {}).get('server_cpu_cores')} cores)"))
    rate = r["update_at_fixed_rate"]
    sustained = rate["ops_per_s"] >= 0.95 * rate["target_rate"]
    out.append(_target("mutating p99 < 50 ms at 1,000 writes/s", rate["p99_ms"],
                       TARGETS["mutating_p99_ms_at_1000_writes_per_s"], lower_is_better=True,
                       at_target_size=rate["target_rate"] >= 1000 and sustained,
                       note=f"PUT with resourceVersion, open loop at {rate['target_rate']}/s for {args.rate_seconds} s, "
                            f"achieved {rate['ops_per_s']}/s; p99 from each request's send (from its due time, which adds "
                            f"the client's own scheduling lag: {rate['p99_ms_from_due']} ms)" + ("" if sustained else "; RATE NOT SUSTAINED: counts as fail")))
    if not sustained:
        out[-1]["pass"] = False
    lists = r["list"]
    big = max(lists, key=lambda x: x["pods_in_store"])
    n = big["pods_in_store"]
    measured = n >= 100_000
    value = big["seconds"] if measured else _r(big["seconds"] * 100_000 / n, 3)
    out.append(_target("LIST of 100k pods cluster-wide < 2 s", value, TARGETS["list_100k_pods_s"], lower_is_better=True,
                       at_target_size=measured,
                       note=(f"measured with {n} pods (time to the last byte of the unpaged response, "
                             f"{big['response_mb']} MB)") if measured else
                       f"EXTRAPOLATED linearly from {big['seconds']} s measured with {n} pods"))
    ws = r["watch"]
    w = max(ws, key=lambda x: x["watchers"])
    ok_w = w["all_delivered"] and w["watchers"] >= 1000
    out.append(_target("watch delivery p99 < 100 ms with 1,000 watchers", w["p99_ms"],
                       TARGETS["watch_p99_ms_with_1000_watchers"], lower_is_better=True, at_target_size=ok_w,
                       note=f"{w['watchers']} watchers (SCALED DOWN from 1,000); " * (w["watchers"] < 1000)
                            + f"PUTs at {w['target_write_rate']}/s, {w['events_delivered_per_s']} deliveries/s; "
                              f"latency from each PUT's response to the event's arrival at each watcher"
                            + ("" if w["all_delivered"] else "; NOT ALL EVENTS DELIVERED within 30 s: counts as fail")))
    if not w["all_delivered"]:
        out[-1]["pass"] = False
    return out


def _version(dist: str) -> str | None:
    with contextlib.suppress(metadata.PackageNotFoundError):
        return metadata.version(dist)
    return None


def meta(args: argparse.Namespace, server: Server) -> dict[str, Any]:
    git = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], check=False, capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                           check=False, capture_output=True, text=True)
    return {
        "benchmark": "apiserver_load", "quick": args.quick, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "git": git.stdout.strip() + ("-dirty" if dirty.stdout.strip() else ""),
        "python": platform.python_version(), "cpus": os.cpu_count(), "loadavg_at_start": os.getloadavg(),
        "host": host_speed(), "aiohttp": _version("aiohttp"), "uvloop_client": _version("uvloop") is not None,
        "server": {"command": "python -m kubecore.cli.main up", "pid": server.pid, "data_fs": fs_type(server.dir)},
        "shared_cores": (f"the load generator (this process; wrk in its phase) and the server share the machine's "
                         f"{os.cpu_count()} cores; every phase records server_cpu_cores (all server threads) and "
                         "client_cpu_cores (this process) so a client-side ceiling is visible"),
        "settings": {k: getattr(args, k) for k in ("concurrency", "creates", "gets", "updates", "rate", "rate_seconds",
                                                    "list_reps", "watch", "watch_seconds", "fill")},
    }


async def run(args: argparse.Namespace, server: Server, doc: dict[str, Any]) -> None:
    conn = aiohttp.TCPConnector(limit=args.concurrency, keepalive_timeout=120)
    async with aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=600)) as session:
        b = Bench(args, server, session)
        res: dict[str, Any] = doc["results"]
        mem: dict[str, Any] = {"baseline_rss_mb": _r(server.rss_mb())}
        res["memory"] = mem
        sample = _encode(pod("load-small-00000-6f8b9c7d4-x7k2p", 0))
        doc["meta"]["pod_body_bytes"] = len(sample)

        log(f"create: {args.creates} pods, {args.concurrency} workers")
        res["create"] = await b.create_phase(args.creates, "bench")
        stored = len(_encode(next(iter(b.latest.values()))))
        doc["meta"]["pod_bytes_as_returned"] = stored
        rss = server.rss_mb()
        mem.update({"pods": len(b.names), "rss_mb": _r(rss),
                    "rss_mb_per_10k_pods": _r((rss - mem["baseline_rss_mb"]) / len(b.names) * 10_000)})
        log(f"  {res['create']['ops_per_s']}/s p99 {res['create']['p99_ms']} ms; RSS {rss:.0f} MB")

        log(f"get: {args.gets} GETs of random pods")
        res["get"] = await b.get_phase(args.gets)
        log(f"  {res['get']['ops_per_s']}/s p99 {res['get']['p99_ms']} ms")
        if not args.no_wrk:
            log(f"get (wrk): {args.wrk_seconds} s")
            await server.settle()
            res["get_wrk"] = await asyncio.to_thread(run_wrk, server, f"{b.pods_url}/{b.names[0]}",
                                                     seconds=args.wrk_seconds, threads=args.wrk_threads,
                                                     connections=args.wrk_connections)
            log(f"  {res['get_wrk'].get('gets_per_s')}/s")

        log(f"update: {args.updates} PUTs, closed loop")
        res["update"] = await b.update_phase(args.updates)
        log(f"  {res['update']['ops_per_s']}/s p99 {res['update']['p99_ms']} ms")
        log(f"update at a fixed rate: {args.rate}/s for {args.rate_seconds} s")
        res["update_at_fixed_rate"] = await b.rate_phase(args.rate, args.rate_seconds)
        log(f"  {res['update_at_fixed_rate']['ops_per_s']}/s p99 {res['update_at_fixed_rate']['p99_ms_from_due']} ms")

        log(f"list: all {len(b.names)} pods, {args.list_reps} reps")
        res["list"] = [await b.list_phase(args.list_reps)]
        log(f"  {res['list'][0]['seconds']} s")

        res["watch"] = []
        for point in args.watch.split(","):
            w, r = (int(x) for x in point.split("x"))
            res["watch"].append(await b.watch_phase(w, r, args.watch_seconds))
            log(f"  p50 {res['watch'][-1]['p50_ms']} ms p99 {res['watch'][-1]['p99_ms']} ms, "
                f"{res['watch'][-1]['events_delivered_per_s']} deliveries/s")

        if args.profile:
            if shutil.which("py-spy"):
                res["profile"] = await profile(b, args)
            else:
                res["profile"] = {"skipped": "py-spy not on PATH (pip install py-spy)"}

        if args.fill > len(b.names):
            n = args.fill - len(b.names)
            log(f"fill: {n} more pods (to {args.fill})")
            res["create_fill"] = await b.create_phase(n, "fill")
            res["create_fill"]["pods_before"] = args.fill - n
            rss = server.rss_mb()
            mem.update({"pods_at_fill": len(b.names), "rss_mb_at_fill": _r(rss),
                        "rss_mb_per_10k_pods_at_fill": _r((rss - mem["baseline_rss_mb"]) / len(b.names) * 10_000)})
            log(f"  {res['create_fill']['ops_per_s']}/s; RSS {rss:.0f} MB")
            log(f"list: all {len(b.names)} pods")
            res["list"].append(await b.list_phase(args.list_reps))
            log(f"  {res['list'][-1]['seconds']} s")
        if not args.no_wrk:  # last of the timed phases: its pods are in no other phase's counts
            log(f"create (wrk): {args.wrk_seconds} s of POSTs with generateName into namespace {WRK_NS}")
            await b.ensure_namespace(WRK_NS)
            await server.settle()
            body = pod("", 0)
            body["metadata"].pop("name")
            body["metadata"]["namespace"] = WRK_NS
            res["create_wrk"] = await asyncio.to_thread(
                run_wrk_creates, server, f"{server.url}/api/v1/namespaces/{WRK_NS}/pods", _encode(body),
                seconds=args.wrk_seconds, threads=args.wrk_threads, connections=args.wrk_connections)
            log(f"  {res['create_wrk'].get('creates_per_s')}/s")

        st = server.status()
        mem.update({"final_rss_mb": _r(st["VmRSS"] / 1024), "peak_rss_mb": _r(st["VmHWM"] / 1024),
                    "server_threads": st["Threads"],
                    "note": "rss_mb_per_10k_pods = (RSS after the create phase - RSS at startup) / pods x 10k; "
                            "peak includes LIST response buffers"})


async def profile(b: Bench, args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"tool": f"py-spy record --format raw --nolineno --rate {args.profile_rate} --nonblocking",
                           "note": "separate phases run only for profiling (figures above are unprofiled); self % "
                                   "is of samples where a server Python thread was not idle"}
    tmp = Path(tempfile.mkdtemp(prefix="kubecore-pyspy-"))
    for name in ("create", "get", "update"):
        path = tmp / f"{name}.txt"
        prof = Profiler(b.server.pid, path, args.profile_rate)
        await asyncio.sleep(1.0)  # attach
        log(f"profile: {name} for {args.profile_seconds} s under py-spy")
        deadline = time.perf_counter() + args.profile_seconds
        if name == "create":
            phase = await b.create_phase(0, "prof", deadline=deadline)
        elif name == "update":
            phase = await b.update_phase(0, deadline=deadline)
        else:
            phase = await b.get_phase(0, deadline=deadline)
        err = await asyncio.to_thread(prof.stop)
        if path.exists():
            out[name] = {"ops_per_s_while_profiled": phase["ops_per_s"], **top_functions(path)}
            with contextlib.suppress(OSError):
                keep = Path(args.profile_dir) / f"apiserver_{name}.txt" if args.profile_dir else None
                if keep:
                    keep.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(path, keep)
                    out[name]["raw"] = str(keep)
        else:
            out[name] = {"error": f"py-spy wrote nothing: {err}"}
    shutil.rmtree(tmp, ignore_errors=True)
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="~20 s smoke run at small sizes: NOT a measurement")
    p.add_argument("--output", help="also write the JSON document to this file")
    p.add_argument("--concurrency", type=int, help="closed-loop workers = pooled keep-alive connections (64)")
    p.add_argument("--creates", type=int, help="pods created in the timed create phase (10000)")
    p.add_argument("--gets", type=int, help="GETs of random pods (50000)")
    p.add_argument("--updates", type=int, help="closed-loop PUTs (10000)")
    p.add_argument("--rate", type=int, help="open-loop PUT rate for the mutating-latency figure (1000/s)")
    p.add_argument("--rate-seconds", type=float, help="how long the fixed-rate phase runs (15)")
    p.add_argument("--list-reps", type=int, help="unpaged LISTs per pod count, median reported (3)")
    p.add_argument("--watch", help="watch points WATCHERSxWRITES_PER_S, comma-separated (200x500,200x50,1000x10)")
    p.add_argument("--watch-seconds", type=float, help="writes per watch point run this long (10)")
    p.add_argument("--fill", type=int, help="then create pods up to this total and LIST again (100000; 0: skip)")
    p.add_argument("--wrk-seconds", type=int)
    p.add_argument("--wrk-threads", type=int, default=1)
    p.add_argument("--wrk-connections", type=int, default=32)
    p.add_argument("--no-wrk", action="store_true")
    p.add_argument("--no-profile", dest="profile", action="store_false", help="skip the py-spy phases")
    p.add_argument("--profile-seconds", type=float)
    p.add_argument("--profile-rate", type=int, default=200, help="py-spy samples/s")
    p.add_argument("--profile-dir", help="keep py-spy's collapsed stacks here")
    args = p.parse_args(argv)
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    server = Server()
    try:
        ready = server.wait_ready()
        log(f"server pid {server.pid} on {server.url} ready in {ready:.2f} s (data in {server.dir})")
        doc: dict[str, Any] = {"meta": meta(args, server), "results": {}}
        doc["meta"]["server"]["startup_s"] = _r(ready, 2)
        cpu0, wall0 = server.cpu_seconds(), time.perf_counter()
        try:
            import uvloop
            uvloop.run(run(args, server, doc))
        except ImportError:
            asyncio.run(run(args, server, doc))
        doc["meta"]["server"]["cpu_seconds_total"] = _r(server.cpu_seconds() - cpu0, 1)
        doc["meta"]["wall_seconds"] = _r(time.perf_counter() - wall0, 1)
        doc["targets"] = targets(doc, args)
    finally:
        tail = server.stderr_tail()
        server.stop()
    if "Traceback" in tail:
        doc.setdefault("meta", {})["server_stderr_tail"] = tail
    text = json.dumps(doc, indent=2)
    print(text)
    if args.output:
        Path(args.output).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
