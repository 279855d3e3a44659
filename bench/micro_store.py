"""Per-operation costs of kubecore.store, with pytest-benchmark (a benchmark, not a test).

    python -m pytest bench/micro_store.py --benchmark-only [--benchmark-json out.json]

Each benchmark times one call of the Python API on an in-memory store (no fsync, so it shows the
cost of the Python/Rust boundary and the engine, not the disk), plus one durable put for scale.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Iterator

import pytest

from kubecore.store import Compare, Op, Store, prefix_end

VALUE = b"v" * 256
PREFIX = b"/bench/micro/"


@pytest.fixture(scope="module")
def store() -> Iterator[Store]:
    with Store.memory() as s:
        for i in range(10_000):
            s.put(PREFIX + b"%06d" % i, VALUE)
        yield s


def test_put_memory(benchmark: Any, store: Store) -> None:
    benchmark(store.put, PREFIX + b"000001", VALUE)


def test_put_durable(benchmark: Any, tmp_path: Path) -> None:
    with Store.open(tmp_path / "s") as s:
        benchmark(s.put, b"/durable", VALUE)


def test_get(benchmark: Any, store: Store) -> None:
    assert benchmark(store.get, PREFIX + b"005000") is not None


def test_range_100(benchmark: Any, store: Store) -> None:
    r = benchmark(store.range, PREFIX + b"0050", PREFIX + b"0051")
    assert r.count == 100


def test_count_prefix_10k(benchmark: Any, store: Store) -> None:
    r = benchmark(store.range, PREFIX, prefix_end(PREFIX), count_only=True)
    assert r.count == 10_000


def test_txn_cas(benchmark: Any, store: Store) -> None:
    key = PREFIX + b"000002"

    def cas() -> bool:
        cur = store.get(key)
        assert cur is not None
        return store.txn([Compare.mod_revision(key, "=", cur.mod_revision)], [Op.put(key, VALUE)]).succeeded

    assert benchmark(cas)


def test_aput_batch_of_256(benchmark: Any, store: Store) -> None:
    """256 concurrent aput calls on one event loop: the group-commit path, per batch."""
    keys = [PREFIX + b"a%03d" % i for i in range(256)]

    async def batch() -> None:
        await asyncio.gather(*(store.aput(k, VALUE) for k in keys))

    loop = asyncio.new_event_loop()
    try:
        benchmark(lambda: loop.run_until_complete(batch()))
    finally:
        loop.close()


def test_watch_delivery_1000_events(benchmark: Any, store: Store) -> None:
    """One watcher: 1,000 puts in one txn-free burst, then drain them in batches."""

    def round_trip() -> int:
        w = store.watch(PREFIX + b"w/", prefix_end(PREFIX + b"w/"))
        for i in range(1000):
            store.put(PREFIX + b"w/%04d" % i, VALUE)
        n = 0
        while n < 1000:
            n += len(w.poll(1024, timeout=1.0))
        w.cancel()
        return n

    assert benchmark.pedantic(round_trip, rounds=5) == 1000
