"""kubecore's store side by side with real etcd, one run, one JSON document on stdout.

    python -m bench.store_vs_etcd [--quick] [--only etcd|kubecore] [--output FILE]

Both systems are driven by the same asyncio load generator (bench/loadgen.py) through the same
tiny adapter interface (bench/adapters.py); etcd runs as a local server (bench/etcd_peer.py) and is
reached through the aetcd gRPC client, kubecore's Store runs in this process. Progress goes to
stderr. See bench/README.md for what every figure means and how it is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from importlib import metadata
from typing import Any

if __package__ in (None, ""):  # run as a file: make `bench` importable from the repo root
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import footprint, loadgen
from bench.adapters import etcd_kv, kubecore_kv
from bench.etcd_peer import EtcdPeer, etcd_version

RATIO_FIELDS = {"ops_per_s", "p50_ms", "p99_ms", "events_per_s", "bytes_per_key",
                "bytes_per_key_overhead", "reopen_s"}
QUICK = {"put_ops": 300, "min_ops_per_writer": 2, "reps": 1, "read_ops": 1000, "watchers": 100, "watch_puts": 50,
         "mem_keys": 20_000, "reopen_reps": 1}


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", choices=["etcd", "kubecore"], help="run one side only")
    p.add_argument("--quick", action="store_true", help="small sizes: a smoke test, not a measurement")
    p.add_argument("--output", help="also write the JSON document to this file")
    p.add_argument("--concurrency", default="1,16,256", help="writer counts for the put workload")
    p.add_argument("--put-ops", type=int, default=5000, help="puts per repetition per concurrency")
    p.add_argument("--min-ops-per-writer", type=int, default=40,
                   help="raise puts per repetition to this many per writer (keeps 256-writer runs long enough)")
    p.add_argument("--keyspace", type=int, default=100_000, help="put keys drawn uniformly from this many")
    p.add_argument("--value-size", type=int, default=256)
    p.add_argument("--reps", type=int, default=3, help="repetitions of each throughput figure (median)")
    p.add_argument("--read-ops", type=int, default=20_000, help="gets / ranges per repetition")
    p.add_argument("--read-concurrency", type=int, default=16)
    p.add_argument("--range-prefixes", type=int, default=10)
    p.add_argument("--range-size", type=int, default=100, help="keys under each range prefix")
    p.add_argument("--watchers", type=int, default=1000)
    p.add_argument("--watch-puts", type=int, default=1000)
    p.add_argument("--watch-writers", type=int, default=16)
    p.add_argument("--mem-keys", type=int, default=1_000_000, help="keys for memory and reopen")
    p.add_argument("--reopen-reps", type=int, default=3)
    p.add_argument("--skip", default="", help="comma list of workloads to skip: puts,reads,watch,footprint")
    args = p.parse_args(argv)
    if args.quick:
        for name, value in QUICK.items():
            if getattr(args, name) == p.get_default(name):
                setattr(args, name, value)
    args.concurrency = [int(c) for c in args.concurrency.split(",") if c]
    args.skip = {s for s in args.skip.split(",") if s}
    return args


# -- one side --------------------------------------------------------------------------------------
async def run_workloads(open_kv: Callable[[], AbstractAsyncContextManager[Any]], args: argparse.Namespace, *,
                        sweep: bool) -> dict[str, Any]:
    """Every throughput workload against one system, in a fixed order, through ``loadgen``."""
    out: dict[str, Any] = {}
    async with open_kv() as kv:
        if "puts" not in args.skip:
            out["puts"] = {}
            for c in args.concurrency:
                ops = max(args.put_ops, args.min_ops_per_writer * c)
                log(f"{kv.name}: puts, {c} writers, {ops} ops x {args.reps}")
                r = await loadgen.bench_puts(kv, concurrency=c, ops=ops, reps=args.reps,
                                             keyspace=args.keyspace, value_size=args.value_size)
                out["puts"][f"c{c}"] = r
                log(f"{kv.name}: puts c{c}: {r['ops_per_s']:,.0f}/s p50 {r['p50_ms']}ms p99 {r['p99_ms']}ms")
        if "reads" not in args.skip:
            log(f"{kv.name}: reads, {args.read_concurrency} readers, {args.read_ops} ops x {args.reps}")
            out["reads"] = await loadgen.bench_reads(
                kv, ops=args.read_ops, reps=args.reps, concurrency=args.read_concurrency,
                prefixes=args.range_prefixes, per_prefix=args.range_size, value_size=args.value_size)
            log(f"{kv.name}: reads: " + ", ".join(
                f"{name} {r['ops_per_s']:,.0f}/s" for name, r in out["reads"].items() if isinstance(r, dict)))
        if "watch" not in args.skip:
            out["watch"] = await _watch(kv, args, sweep=False)
            if sweep:
                out["watch_sweep"] = await _watch(kv, args, sweep=True)
    return out


async def _watch(kv: Any, args: argparse.Namespace, *, sweep: bool) -> dict[str, Any]:
    log(f"{kv.name}: watch fan-out, {args.watchers} watchers x {args.watch_puts} puts"
        + (" (sweep-drain)" if sweep else ""))
    r = await loadgen.bench_watch_fanout(kv, watchers=args.watchers, puts=args.watch_puts,
                                         writers=args.watch_writers, value_size=args.value_size,
                                         sweep=sweep)
    log(f"{kv.name}: watch: {r['events_per_s']:,.0f} events/s ({r['events']:,} in {r['seconds']}s)")
    return r


def _footprint(system: str, args: argparse.Namespace) -> dict[str, Any]:
    log(f"{system}: memory + reopen with {args.mem_keys:,} keys")
    run = footprint.run_etcd if system == "etcd" else footprint.run_kubecore
    extra = {} if system == "etcd" else {"fill_fsync": False}
    r = run(keys=args.mem_keys, value_size=args.value_size, reps=args.reopen_reps, **extra)
    log(f"{system}: {r['memory']['bytes_per_key_overhead']} B/key overhead, reopen {r['reopen']['reopen_s']}s")
    return r


def run_etcd(args: argparse.Namespace) -> dict[str, Any]:
    with EtcdPeer() as peer:
        log(f"etcd {etcd_version(peer.binary)} up at {peer.client_url} (data {peer.data_dir})")
        out = asyncio.run(run_workloads(lambda: etcd_kv(peer.host, peer.client_port), args, sweep=False))
    if "footprint" not in args.skip:
        out["footprint"] = _footprint("etcd", args)
    return out


def run_kubecore(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kubecore-bench-") as tmp:
        out = asyncio.run(run_workloads(lambda: kubecore_kv(f"{tmp}/store", fsync=True), args, sweep=True))
    if "footprint" not in args.skip:
        out["footprint"] = _footprint("kubecore", args)
    return out


# -- comparison ------------------------------------------------------------------------------------
def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, float]:
    flat: dict[str, float] = {}
    for name, value in tree.items():
        path = f"{prefix}{name}"
        if isinstance(value, dict):
            flat.update(_flatten(value, path + "."))
        elif name in RATIO_FIELDS and isinstance(value, (int, float)):
            flat[path] = float(value)
    return flat


def ratios(kubecore: dict[str, Any], etcd: dict[str, Any]) -> dict[str, float]:
    """kubecore / etcd for every figure both sides measured (throughput: >1 is better for kubecore;
    latency, memory, reopen: <1 is better)."""
    k, e = _flatten(kubecore), _flatten(etcd)
    if "watch.events_per_s" in e and "watch_sweep.events_per_s" in k:  # kubecore's batch path vs etcd
        e["watch_sweep.events_per_s"] = e["watch.events_per_s"]
    return {path: float(f"{k[path] / e[path]:.4g}") for path in sorted(k.keys() & e.keys()) if e[path]}


def _target(name: str, value: float | None, threshold: float | None, passed: bool | None,
            **note: Any) -> dict[str, Any]:
    return {"target": name, "value": value, "threshold": threshold, "pass": passed, **note}


def _get(tree: dict[str, Any] | None, *path: str) -> Any:
    for part in path:
        if not isinstance(tree, dict) or part not in tree:
            return None
        tree = tree[part]
    return tree


def targets(kube: dict[str, Any] | None, etcd: dict[str, Any] | None, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The store's targets, each with a pass flag (None when a needed figure was not measured)."""
    out = []
    for c in args.concurrency:
        k, e = _get(kube, "puts", f"c{c}", "ops_per_s"), _get(etcd, "puts", f"c{c}", "ops_per_s")
        ratio = round(k / e, 3) if k and e else None
        out.append(_target(f"durable puts >= 5x etcd, {c} writers", ratio, 5.0,
                           None if ratio is None else ratio >= 5.0, unit="x etcd"))
    for c in args.concurrency:
        k, e = _get(kube, "puts", f"c{c}", "p99_ms"), _get(etcd, "puts", f"c{c}", "p99_ms")
        out.append(_target(f"put p99 <= etcd, {c} writers", k, e,
                           None if k is None or e is None else k <= e, unit="ms"))
    modes = [m for m in ("watch_sweep", "watch") if _get(kube, m, "events_per_s")]
    best = max(modes, key=lambda m: kube[m]["events_per_s"]) if modes else None  # type: ignore[index]
    value = _get(kube, best, "events_per_s") if best else None
    out.append(_target("watch events delivered in-process > 1M/s", value, 1e6,
                       None if value is None else value > 1e6, unit="events/s", mode=best))
    keys = _get(kube, "footprint", "reopen", "keys")
    value = _get(kube, "footprint", "reopen", "reopen_s")
    scaled = {"note": f"measured with {keys:,} keys, not 1M"} if keys and keys < 1_000_000 else {}
    out.append(_target("reopen of 1M keys < 2 s", value, 2.0, None if value is None else value < 2.0,
                       unit="s", keys=keys, **scaled))
    value = _get(kube, "footprint", "memory", "bytes_per_key_overhead")
    out.append(_target("memory per key beyond key+value < 300 B", value, 300.0,
                       None if value is None else value < 300.0, unit="B/key", keys=keys, **scaled))
    return out


def _version(dist: str) -> str | None:
    with contextlib.suppress(metadata.PackageNotFoundError):
        return metadata.version(dist)
    return None


def meta(args: argparse.Namespace) -> dict[str, Any]:
    params = {k: (sorted(v) if isinstance(v, set) else v) for k, v in vars(args).items() if k != "output"}
    return {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "loadavg_at_start": os.getloadavg(),
        "etcd_version": etcd_version() if args.only != "kubecore" else None,
        "etcd_client": f"aetcd {_version('aetcd')} (grpcio {_version('grpcio')})",
        "kubecore_version": _version("kubecore"),
        "params": params,
    }


def kubecore_missing() -> str | None:
    """Why kubecore's store cannot be benchmarked here, or None if it can."""
    try:
        from kubecore.store import Store, prefix_end  # noqa: F401
    except ImportError as error:
        return (f"kubecore.store is not importable ({error}); build it first "
                "(`maturin develop --release` in the repo root) or run with --only etcd")
    return None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.only != "etcd" and (why := kubecore_missing()):
        print(f"error: {why}", file=sys.stderr)
        return 2
    doc: dict[str, Any] = {"meta": meta(args)}
    etcd = run_etcd(args) if args.only != "kubecore" else None
    kube = run_kubecore(args) if args.only != "etcd" else None
    doc.update(etcd=etcd, kubecore=kube)
    doc["ratios_kubecore_over_etcd"] = ratios(kube, etcd) if kube and etcd else {}
    doc["targets"] = targets(kube, etcd, args)
    text = json.dumps(doc, indent=2)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
