"""The one asyncio load generator used for every system in bench/ (see adapters.py).

Each workload takes a ``KV`` adapter and measures with ``time.perf_counter``:

- ``run_ops``: ``ops`` calls of one operation, issued by ``concurrency`` coroutines that pull the
  next op index from one shared iterator (closed loop: a worker issues its next op only when the
  previous one completed). Per-op latency is the time around one ``await``.
- ``run_watch_fanout``: ``watchers`` watches on one prefix, then ``puts`` puts under it; the clock
  runs from the first put until every watcher has received every event.

Nothing here knows which system it drives; both sides go through the same code path.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol


class WatchHandle(Protocol):
    async def receive(self) -> int:
        """Wait for the next delivery; return how many events it carried (>= 1)."""

    def drain(self) -> int:
        """Optional (in-process stores): take all events ready now without waiting; return count."""

    async def cancel(self) -> None: ...


class KV(Protocol):
    """The tiny adapter interface both systems implement."""

    name: str

    async def put(self, key: bytes, value: bytes) -> None: ...

    async def get(self, key: bytes) -> None: ...

    async def range_prefix(self, prefix: bytes) -> int:
        """Range over ``[prefix, prefix_end(prefix))``; return the number of kvs returned."""

    async def watch_prefix(self, prefix: bytes) -> WatchHandle: ...


# -- statistics ------------------------------------------------------------------------------------
def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of an already sorted sequence."""
    if not sorted_values:
        return float("nan")
    rank = max(0, min(len(sorted_values) - 1, round(fraction * len(sorted_values)) - 1))
    return sorted_values[rank]


@dataclass
class OpsResult:
    ops: int
    seconds: float
    latencies: list[float] = field(repr=False)
    cpu_seconds: float = 0.0  # CPU time of this whole process (all threads) during the run

    @property
    def ops_per_s(self) -> float:
        return self.ops / self.seconds


def _ms(seconds: float) -> float:
    return float(f"{seconds * 1e3:.4g}")  # 4 significant digits, whatever the magnitude


def summarize(runs: Sequence[OpsResult]) -> dict[str, object]:
    """Median throughput over repetitions; latency percentiles over all ops of all repetitions."""
    pooled = sorted(lat for run in runs for lat in run.latencies)
    return {
        "ops_per_s": round(statistics.median(run.ops_per_s for run in runs), 1),
        "ops_per_s_runs": [round(run.ops_per_s, 1) for run in runs],
        "p50_ms": _ms(percentile(pooled, 0.50)),
        "p99_ms": _ms(percentile(pooled, 0.99)),
        "bench_process_cpu": round(statistics.median(run.cpu_seconds / run.seconds for run in runs), 2),
        "ops_per_run": runs[0].ops if runs else 0,
        "reps": len(runs),
    }


# -- closed-loop operation driver ------------------------------------------------------------------
async def run_ops(op: Callable[[int], Awaitable[object]], *, ops: int, concurrency: int) -> OpsResult:
    """Run ``op(0..ops-1)`` from ``concurrency`` workers sharing one index iterator."""
    latencies = [0.0] * ops
    indices = iter(range(ops))  # shared: next() never yields to the loop, so no index is taken twice

    async def worker() -> None:
        clock = time.perf_counter
        for i in indices:
            began = clock()
            await op(i)
            latencies[i] = clock() - began

    cpu_began, began = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(min(concurrency, ops))))
    seconds = time.perf_counter() - began
    return OpsResult(ops=ops, seconds=seconds, latencies=latencies, cpu_seconds=time.process_time() - cpu_began)


async def repeat(make_op: Callable[[int], Callable[[int], Awaitable[object]]], *, ops: int,
                 concurrency: int, reps: int, warmup: int) -> dict[str, object]:
    """``reps`` timed runs (after ``warmup`` untimed ops); ``make_op(rep)`` builds each run's op."""
    if warmup:
        await run_ops(make_op(-1), ops=warmup, concurrency=concurrency)
    runs = [await run_ops(make_op(rep), ops=ops, concurrency=concurrency) for rep in range(reps)]
    return summarize(runs)


# -- workloads -------------------------------------------------------------------------------------
def put_keys(n: int) -> list[bytes]:
    return [b"/bench/put/%08d" % i for i in range(n)]


async def bench_puts(kv: KV, *, concurrency: int, ops: int, reps: int, keyspace: int,
                     value_size: int, seed: int = 1) -> dict[str, object]:
    """Durable puts of ``value_size``-byte values to keys drawn uniformly from ``keyspace`` keys."""
    keys = put_keys(keyspace)
    value = b"v" * value_size

    def make_op(rep: int) -> Callable[[int], Awaitable[None]]:
        rng = random.Random(seed * 1000 + rep)
        picks = [keys[rng.randrange(keyspace)] for _ in range(ops)]
        return lambda i: kv.put(picks[i], value)

    return await repeat(make_op, ops=ops, concurrency=concurrency, reps=reps,
                        warmup=min(ops, 4 * concurrency))


def range_layout(prefixes: int, per_prefix: int) -> tuple[list[bytes], list[bytes]]:
    """``prefixes`` prefixes holding ``per_prefix`` keys each; returns (prefixes, all keys)."""
    heads = [b"/bench/range/%04d/" % p for p in range(prefixes)]
    return heads, [head + b"%06d" % k for head in heads for k in range(per_prefix)]


async def load_keys(kv: KV, keys: Sequence[bytes], value: bytes, *, concurrency: int = 64) -> None:
    await run_ops(lambda i: kv.put(keys[i], value), ops=len(keys), concurrency=concurrency)


async def bench_reads(kv: KV, *, ops: int, reps: int, concurrency: int, prefixes: int,
                      per_prefix: int, value_size: int, seed: int = 2) -> dict[str, object]:
    """Single-key gets and prefix ranges (``per_prefix`` kvs each) over a preloaded layout."""
    heads, keys = range_layout(prefixes, per_prefix)
    await load_keys(kv, keys, b"r" * value_size)
    got = await kv.range_prefix(heads[0])
    if got != per_prefix:
        raise RuntimeError(f"{kv.name}: prefix range returned {got} kvs, expected {per_prefix}")

    def picker(pool: Sequence[bytes], rep: int) -> list[bytes]:
        rng = random.Random(seed * 1000 + rep)
        return [pool[rng.randrange(len(pool))] for _ in range(ops)]

    def make_get(rep: int) -> Callable[[int], Awaitable[None]]:
        picks = picker(keys, rep)
        return lambda i: kv.get(picks[i])

    def make_range(rep: int) -> Callable[[int], Awaitable[int]]:
        picks = picker(heads, rep)
        return lambda i: kv.range_prefix(picks[i])

    common = {"ops": ops, "concurrency": concurrency, "reps": reps, "warmup": min(ops, 4 * concurrency)}
    return {
        "get": await repeat(make_get, **common),
        f"range_prefix_{per_prefix}": await repeat(make_range, **common),
        "concurrency": concurrency,
    }


async def bench_watch_fanout(kv: KV, *, watchers: int, puts: int, writers: int, value_size: int,
                             sweep: bool = False) -> dict[str, object]:
    """Events delivered per second across ``watchers`` watches of one prefix for ``puts`` puts.

    ``sweep=False``: one consumer coroutine per watcher awaiting ``receive()`` (the asyncio path).
    ``sweep=True``: one coroutine drains every watcher with ``drain()`` in turn (in-process batch
    path; needs handles that implement ``drain``).
    """
    prefix = b"/bench/watch/"
    handles = [await kv.watch_prefix(prefix) for _ in range(watchers)]
    keys = [prefix + b"%08d" % i for i in range(puts)]
    value = b"w" * value_size
    cpu_began, began = time.process_time(), time.perf_counter()
    consumers = _sweep_consumer(handles, puts) if sweep else _per_watcher_consumers(handles, puts)
    consuming = asyncio.ensure_future(consumers)
    written = await run_ops(lambda i: kv.put(keys[i], value), ops=puts, concurrency=writers)
    await consuming
    seconds = time.perf_counter() - began
    cpu_seconds = time.process_time() - cpu_began
    for handle in handles:
        await handle.cancel()
    events = watchers * puts
    return {
        "events_per_s": round(events / seconds, 1),
        "events": events,
        "seconds": round(seconds, 4),
        "put_seconds": round(written.seconds, 4),
        "bench_process_cpu": round(cpu_seconds / seconds, 2),
        "watchers": watchers,
        "puts": puts,
        "writers": writers,
        "consumer": "sweep-drain" if sweep else "coroutine-per-watcher",
    }


async def _per_watcher_consumers(handles: Sequence[WatchHandle], expected: int) -> None:
    async def consume(handle: WatchHandle) -> None:
        seen = 0
        while seen < expected:
            seen += await handle.receive()

    await asyncio.gather(*(consume(handle) for handle in handles))


async def _sweep_consumer(handles: Sequence[WatchHandle], expected: int) -> None:
    seen = [0] * len(handles)
    pending = list(range(len(handles)))
    while pending:
        got_any = False
        for index in pending:
            got = handles[index].drain()
            seen[index] += got
            got_any = got_any or got > 0
        pending = [index for index in pending if seen[index] < expected]
        await asyncio.sleep(0 if got_any else 0.0002)  # let the writers run
