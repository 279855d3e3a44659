"""Memory of the whole `kubecore up` process tree with simulated nodes: per 1,000 hollow nodes and
per 10,000 pods (issue 6's benchmark); one JSON document on stdout, progress on stderr.

    python -m bench.up_footprint                       # 1,000 nodes, 10,000 pods (~2 min)
    python -m bench.up_footprint --nodes 100 --pods 1000

Runs `kubecore up --runtime sim --nodes 0` in a fresh directory and reads the tree's RSS and PSS
(API server, controller manager, scheduler) once it is ready; then the same with `--nodes N`
(adding the hollow-nodes process) once every node is Ready; then creates Deployments of 1,000
replicas until `--pods` pods exist and waits until all of them are Running (the real scheduler
binds them, the hollow kubelets run them), settles, and reads the tree again. Figures:
`mb_per_1000_nodes` = (tree with N nodes - tree without nodes) / N * 1,000; `mb_per_10k_pods` =
growth with the pods / pods * 10,000. Every process of the tree is counted: the API server's watch
cache and store, both controllers' and the scheduler's informers, the hollow kubelets.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.containerd_up import descendants, free_port, memory_kb

ROOT = Path(__file__).resolve().parent.parent


def log(msg: str) -> None:
    print(f"[up-footprint {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Up:
    """`kubecore up --runtime sim --nodes N` in its own directory."""

    def __init__(self, nodes: int) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="kubecore-footprint-"))
        self.port = free_port()
        self.log = open(self.dir / "up.log", "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kubecore.cli.main", "up", "--data-dir", str(self.dir / "data"), "--listen",
             f"127.0.0.1:{self.port}", "--runtime", "sim", "--nodes", str(nodes), "--scheduler-metrics-port", "0"],
            cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def kubectl(self, *args: str) -> str:
        cmd = ["kubectl", "--kubeconfig", str(self.dir / "data" / "kubeconfig"), *args]
        return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout

    def wait(self, what: str, ok: Any, timeout: float = 600.0) -> None:
        deadline = time.monotonic() + timeout
        while not ok():
            if self.proc.poll() is not None:
                raise RuntimeError(f"up exited: {(self.dir / 'up.log').read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what}: not within {timeout:g} s")
            time.sleep(1.0)

    def tree(self) -> dict[str, float]:
        pids = list(descendants(self.proc.pid))
        rss, pss = (sum(x) for x in zip(*(memory_kb(p) for p in pids)))
        return {"processes": len(pids), "rss_mb": round(rss / 1024, 1), "pss_mb": round(pss / 1024, 1)}

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def _count(text: str, word: str) -> int:
    return sum(1 for line in text.splitlines() if word in line.split())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--pods", type=int, default=10000)
    p.add_argument("--settle", type=float, default=5.0)
    args = p.parse_args()
    out: dict[str, Any] = {"benchmark": "up_footprint", "nodes": args.nodes, "pods": args.pods}
    empty = Up(0)
    try:
        empty.wait("API server ready", lambda: empty.kubectl("get", "--raw", "/readyz").strip() == "ok")
        empty.wait("controller manager and scheduler started", lambda: len(descendants(empty.proc.pid)) >= 3)
        time.sleep(args.settle)
        out["no_nodes"] = empty.tree()
        log(f"no nodes: {out['no_nodes']}")
    finally:
        empty.stop()
    up = Up(args.nodes)
    try:
        up.wait("nodes Ready", lambda: _count(up.kubectl("get", "nodes", "--no-headers"), "Ready") >= args.nodes)
        up.wait("every component started", lambda: len(descendants(up.proc.pid)) >= 4)
        time.sleep(args.settle)
        out["with_nodes"] = up.tree()
        out["mb_per_1000_nodes"] = {k: round((out["with_nodes"][k] - out["no_nodes"][k]) / args.nodes * 1000, 1)
                                    for k in ("rss_mb", "pss_mb")}
        log(f"{args.nodes} nodes: {out['with_nodes']}")
        for i in range(0, args.pods, 1000):
            up.kubectl("create", "deployment", f"load-{i // 1000}", "--image=busybox",
                       f"--replicas={min(1000, args.pods - i)}", "--", "sleep", "3600")
        began = time.monotonic()
        up.wait("pods Running", lambda: _count(up.kubectl("get", "pods", "-A", "--no-headers"), "Running") >= args.pods)
        out["seconds_to_all_running"] = round(time.monotonic() - began, 1)
        time.sleep(args.settle)
        out["with_pods"] = up.tree()
        out["mb_per_10k_pods"] = {k: round((out["with_pods"][k] - out["with_nodes"][k]) / args.pods * 10_000, 1)
                                  for k in ("rss_mb", "pss_mb")}
        log(f"{args.pods} pods: {out['with_pods']}")
    finally:
        up.stop()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
