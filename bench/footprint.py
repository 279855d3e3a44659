"""Memory per key and reopen time with many keys, for kubecore and for etcd.

Both figures come from a dedicated, fresh instance so nothing else shares the memory counted:

- kubecore: a child Python process (``python -m bench.footprint kubecore-child ...``) opens a store,
  reads its own RSS, puts N keys, reads RSS again, closes, then times ``Store.open`` + one ``get``.
- etcd: a fresh server; its RSS (from /proc/<pid>/status) before and after loading N keys through
  gRPC transactions, then the time of a restart until ``/health`` is true.

RSS growth / N minus (key + value length) is the overhead per key the store adds. RSS counts
file-backed pages the process touched (etcd's bbolt mmap) as well as anonymous memory; both parts
are reported.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
MEM_PREFIX = b"/bench/mem/"


def mem_key(i: int) -> bytes:
    return MEM_PREFIX + b"%08d" % i


def rss(pid: int | str = "self") -> dict[str, int]:
    """Resident memory of a process in bytes: total, anonymous and file-backed (Linux)."""
    fields = {"VmRSS": "rss", "RssAnon": "anon", "RssFile": "file", "RssShmem": "shmem"}
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            name, _, rest = line.partition(":")
            if name in fields:
                out[fields[name]] = int(rest.split()[0]) * 1024
    return out


def per_key(before: dict[str, int], after: dict[str, int], *, keys: int, payload: int) -> dict[str, Any]:
    growth = after["rss"] - before["rss"]
    return {
        "keys": keys,
        "key_plus_value_bytes": payload,
        "rss_before": before["rss"],
        "rss_after": after["rss"],
        "rss_growth_bytes": growth,
        "bytes_per_key": round(growth / keys, 1),
        "bytes_per_key_overhead": round(growth / keys - payload, 1),
        "anon_bytes_per_key": round((after["anon"] - before["anon"]) / keys, 1),
        "file_bytes_per_key": round((after["file"] - before["file"]) / keys, 1),
    }


def _progress(message: str) -> None:
    print(f"[footprint] {message}", file=sys.stderr, flush=True)


# -- kubecore: runs in a child process -------------------------------------------------------------
def kubecore_child(*, path: str, keys: int, value_size: int, reps: int, fill_fsync: bool) -> dict[str, Any]:
    from kubecore.store import Store

    value = b"m" * value_size
    empty_open = _timed_open(Store, path)  # creates the store; also the empty-reopen baseline
    store = Store.open(path, fsync=fill_fsync)
    gc.collect()
    before = rss()
    began = time.perf_counter()
    for i in range(keys):
        store.put(mem_key(i), value)
        if i and i % 200_000 == 0:
            _progress(f"kubecore: {i:,} keys loaded")
    fill_seconds = time.perf_counter() - began
    gc.collect()
    after = rss()
    store.close()
    reopen = [_timed_open(Store, path, expect_last=mem_key(keys - 1)) for _ in range(reps)]
    _check_count(Store, path, keys)
    memory = per_key(before, after, keys=keys, payload=len(mem_key(0)) + value_size)
    memory["fill_seconds"] = round(fill_seconds, 3)
    memory["fill_fsync"] = fill_fsync
    return {"memory": memory, "reopen": _reopen_summary(reopen, keys=keys, empty=empty_open)}


def _timed_open(store_cls: Any, path: str, *, expect_last: bytes | None = None) -> float:
    began = time.perf_counter()
    store = store_cls.open(path)
    if expect_last is not None and store.get(expect_last) is None:
        raise RuntimeError(f"reopened store lacks {expect_last!r}")
    seconds = time.perf_counter() - began
    store.close()
    return seconds


def _check_count(store_cls: Any, path: str, keys: int) -> None:
    from kubecore.store import prefix_end

    with store_cls.open(path) as store:
        count = store.range(MEM_PREFIX, prefix_end(MEM_PREFIX), count_only=True).count
    if count != keys:
        raise RuntimeError(f"kubecore holds {count} keys under {MEM_PREFIX!r}, expected {keys}")


def _reopen_summary(samples: list[float], *, keys: int, empty: float) -> dict[str, Any]:
    return {
        "keys": keys,
        "reopen_s": round(statistics.median(samples), 4),
        "reopen_s_runs": [round(s, 4) for s in samples],
        "reopen_empty_s": round(empty, 4),
    }


def run_kubecore(*, keys: int, value_size: int, reps: int, fill_fsync: bool) -> dict[str, Any]:
    """Run ``kubecore_child`` in a fresh interpreter and return its JSON."""
    with tempfile.TemporaryDirectory(prefix="kubecore-footprint-") as tmp:
        command = [sys.executable, "-m", "bench.footprint", "kubecore-child", "--path", f"{tmp}/store",
                   "--keys", str(keys), "--value-size", str(value_size), "--reps", str(reps)]
        if fill_fsync:
            command.append("--fill-fsync")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
        done = subprocess.run(command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"kubecore footprint child failed with exit code {done.returncode}")
        return json.loads(done.stdout)


# -- etcd ------------------------------------------------------------------------------------------
ETCD_FILL_ARGS = [
    # Only for the loading step: let one Txn carry a batch of puts, and keep etcd's in-memory raft log
    # (SnapshotCount + 5000 catch-up entries) about as big in bytes as with default settings and
    # single puts (100k entries of one put), so batching does not inflate the RSS we measure.
    "--max-txn-ops", "1024",
    "--snapshot-count", "10000",
    "--quota-backend-bytes", str(8 << 30),
]


async def _etcd_fill(host: str, port: int, *, keys: int, value_size: int, batch: int, writers: int) -> None:
    import aetcd
    from aetcd import rpc
    from aetcd.utils import prefix_range_end

    value = b"m" * value_size
    async with aetcd.Client(host=host, port=port, options={"grpc.max_receive_message_length": 64 << 20}) as client:
        starts = iter(range(0, keys, batch))

        async def writer() -> None:
            for start in starts:
                ops = [client.transactions.put(mem_key(i), value) for i in range(start, min(keys, start + batch))]
                await client.transaction(compare=[], success=ops, failure=[])
                if start and start % 200_000 == 0:
                    _progress(f"etcd: {start:,} keys loaded")

        await asyncio.gather(*(writer() for _ in range(writers)))
        request = rpc.RangeRequest(key=MEM_PREFIX, range_end=prefix_range_end(MEM_PREFIX), count_only=True)
        count = (await client.kvstub.Range(request)).count
        if count != keys:
            raise RuntimeError(f"etcd holds {count} keys under {MEM_PREFIX!r}, expected {keys}")


def _settled_rss(pid: int, seconds: float = 3.0) -> dict[str, int]:
    """Lowest RSS sampled over ``seconds`` (lets the Go runtime return freed heap to the OS)."""
    samples = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        samples.append(rss(pid))
        time.sleep(0.25)
    return min(samples, key=lambda sample: sample["rss"])


def run_etcd(*, keys: int, value_size: int, reps: int, batch: int = 10, writers: int = 32) -> dict[str, Any]:
    from bench.etcd_peer import EtcdPeer

    with EtcdPeer(extra_args=ETCD_FILL_ARGS) as peer:
        empty_restart = peer.restart()
        asyncio.run(_etcd_fill(peer.host, peer.client_port, keys=0, value_size=value_size, batch=1, writers=1))
        before = _settled_rss(peer.pid)
        began = time.perf_counter()
        asyncio.run(_etcd_fill(peer.host, peer.client_port, keys=keys, value_size=value_size,
                               batch=batch, writers=writers))
        fill_seconds = time.perf_counter() - began
        after = _settled_rss(peer.pid)
        reopen = [peer.restart() for _ in range(reps)]
    memory = per_key(before, after, keys=keys, payload=len(mem_key(0)) + value_size)
    memory.update(fill_seconds=round(fill_seconds, 3), fill_txn_batch=batch, fill_args=ETCD_FILL_ARGS)
    return {"memory": memory, "reopen": _reopen_summary(reopen, keys=keys, empty=empty_restart)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("system", choices=["kubecore", "etcd", "kubecore-child"])
    parser.add_argument("--path", help="store directory (kubecore-child)")
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--value-size", type=int, default=256)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--fill-fsync", action="store_true", help="kubecore: fsync while loading")
    args = parser.parse_args(argv)
    common = {"keys": args.keys, "value_size": args.value_size, "reps": args.reps}
    if args.system == "kubecore-child":
        result = kubecore_child(path=args.path, fill_fsync=args.fill_fsync, **common)
    elif args.system == "kubecore":
        result = run_kubecore(fill_fsync=args.fill_fsync, **common)
    else:
        result = run_etcd(**common)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
