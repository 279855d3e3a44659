"""asyncio counterparts: same arguments and results; concurrent writers share group commits."""

from __future__ import annotations

import asyncio

import pytest

from kubecore.store import (
    CompactedError,
    Compare,
    DeleteResult,
    KeyValue,
    LeaseNotFoundError,
    LeaseTTL,
    Op,
    PutResult,
    RangeResult,
    Store,
    StoreClosedError,
    TxnResult,
    prefix_end,
)


async def test_async_kv_roundtrip(store: Store) -> None:
    b = store.revision  # etcd: 1 on a new store
    r = await store.aput(b"a", b"1")
    assert isinstance(r, PutResult) and r.revision == b + 1
    r = await store.aput(b"a", b"2", prev_kv=True)
    assert r.revision == b + 2 and r.prev_kv is not None and r.prev_kv.value == b"1"
    kv = await store.aget(b"a")
    assert isinstance(kv, KeyValue)
    assert (kv.value, kv.create_revision, kv.mod_revision, kv.version) == (b"2", b + 1, b + 2, 2)
    old = await store.aget(b"a", revision=b + 1)
    assert old is not None and old.value == b"1"
    assert await store.aget(b"missing") is None
    await store.aput(b"b", b"3")
    rr = await store.arange(b"\0", b"\0", limit=1)
    assert isinstance(rr, RangeResult)
    assert [k.key for k in rr.kvs] == [b"a"] and rr.count == 2 and rr.more is True and rr.revision == b + 3
    rr = await store.arange(b"a", b"c", count_only=True)
    assert rr.count == 2 and rr.kvs == []
    rr = await store.arange(b"a", b"c", keys_only=True)
    assert [k.value for k in rr.kvs] == [b"", b""]
    d = await store.adelete(b"a", b"c", prev_kv=True)
    assert isinstance(d, DeleteResult)
    assert d.deleted == 2 and d.revision == b + 4 and [k.key for k in d.prev_kvs] == [b"a", b"b"]
    d = await store.adelete(b"a")
    assert d.deleted == 0 and d.revision == b + 4
    assert store.revision == b + 4


async def test_async_txn(store: Store) -> None:
    b = (await store.aput(b"k", b"1")).revision
    res = await store.atxn(
        compare=[Compare.value(b"k", "=", b"1")],
        success=[Op.put(b"k", b"2"), Op.put(b"j", b"2"), Op.get(b"k")],
        failure=[],
    )
    assert isinstance(res, TxnResult)
    assert res.succeeded and res.revision == b + 1
    assert res.responses[2].kvs[0].value == b"2"
    res = await store.atxn(compare=[Compare.value(b"k", "=", b"1")], success=[], failure=[Op.delete(b"j")])
    assert not res.succeeded and res.revision == b + 2 and res.responses[0].deleted == 1


async def test_async_compact(store: Store) -> None:
    revs = [(await store.aput(b"k", b"%d" % i)).revision for i in range(5)]
    await store.acompact(revs[2])
    with pytest.raises(CompactedError):
        await store.aget(b"k", revision=revs[1])
    with pytest.raises(CompactedError):
        await store.arange(b"k", revision=revs[0])
    assert (await store.aget(b"k", revision=revs[2])).value == b"2"  # type: ignore[union-attr]
    with pytest.raises(CompactedError):
        await store.acompact(revs[2])


async def test_async_leases(store: Store) -> None:
    lease = await store.alease_grant(600)
    assert isinstance(lease, int) and lease > 0
    await store.aput(b"l1", b"v", lease=lease)
    await store.aput(b"l2", b"v", lease=lease)
    assert await store.alease_keepalive(lease) == 600
    info = await store.alease_time_to_live(lease, keys=True)
    assert isinstance(info, LeaseTTL)
    assert info.id == lease and info.granted_ttl == 600 and 0 < info.ttl <= 600
    assert sorted(info.keys) == [b"l1", b"l2"]
    rev = store.revision
    await store.alease_revoke(lease)
    assert store.revision == rev + 1
    assert (await store.arange(b"l", b"m")).count == 0
    with pytest.raises(LeaseNotFoundError):
        await store.alease_keepalive(lease)
    with pytest.raises(LeaseNotFoundError):
        await store.alease_time_to_live(lease)
    with pytest.raises(LeaseNotFoundError):
        await store.alease_revoke(lease)
    with pytest.raises(LeaseNotFoundError):
        await store.aput(b"x", b"v", lease=lease)


async def test_many_concurrent_writers_share_fsyncs(disk_store: Store) -> None:
    s = disk_store
    await s.aput(b"warmup", b"0")
    before = s.stats()
    rev0 = s.revision
    n = 500
    results = await asyncio.wait_for(
        asyncio.gather(*(s.aput(b"c/%04d" % i, b"v%d" % i) for i in range(n))), timeout=120
    )
    revs = [r.revision for r in results]
    assert sorted(revs) == list(range(rev0 + 1, rev0 + n + 1)), "each write gets its own revision, no holes"
    after = s.stats()
    assert after["revision"] == rev0 + n
    fsyncs = after["fsyncs"] - before["fsyncs"]
    assert 0 < fsyncs < n, f"{n} concurrent durable writes took {fsyncs} fsyncs: no group commit"
    rr = s.range(b"c/", prefix_end(b"c/"))
    assert rr.count == n
    for kv in rr.kvs:
        i = int(kv.key[2:])
        assert kv.value == b"v%d" % i
        assert kv.mod_revision == revs[i]


async def test_concurrent_cas_increments_are_linearizable(store: Store) -> None:
    await store.aput(b"counter", b"0")

    async def incr() -> int:
        attempts = 0
        while True:
            attempts += 1
            kv = await store.aget(b"counter")
            assert kv is not None
            res = await store.atxn(
                compare=[Compare.mod_revision(b"counter", "=", kv.mod_revision)],
                success=[Op.put(b"counter", b"%d" % (int(kv.value) + 1))],
                failure=[],
            )
            if res.succeeded:
                return attempts
            assert attempts < 1000

    await asyncio.wait_for(asyncio.gather(*(incr() for _ in range(50))), timeout=60)
    kv = store.get(b"counter")
    assert kv is not None and kv.value == b"50" and kv.version == 51


async def test_async_mixed_with_sync_reads(store: Store) -> None:
    b = store.revision
    tasks = [asyncio.create_task(store.aput(b"m/%d" % i, b"%d" % i)) for i in range(100)]
    await asyncio.gather(*tasks)
    assert store.range(b"m/", prefix_end(b"m/")).count == 100
    assert store.revision == b + 100


async def test_async_errors_are_raised_on_await(store: Store) -> None:
    b = store.revision
    with pytest.raises(TypeError):
        await store.aput("str-key", b"v")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        await store.aput(b"", b"v")
    assert store.revision == b


async def test_async_after_close(tmp_path) -> None:
    s = Store.open(str(tmp_path / "d"))
    await s.aput(b"k", b"v")
    s.close()
    with pytest.raises(StoreClosedError):
        await s.aput(b"k", b"v")
    with pytest.raises(StoreClosedError):
        await s.aget(b"k")


async def test_writes_of_one_loop_iteration_are_proposed_as_one_batch(store: Store) -> None:
    """The bridge flushes the native outbox once per event-loop iteration: 200 writers started
    together reach the Raft thread in one flush, in the order they were submitted."""
    native = store._native
    flushed: list[int] = []
    real_flush = native.flush

    class Spy:
        def __getattr__(self, name: str) -> object:
            return getattr(native, name)

        def flush(self) -> int:
            n = real_flush()
            flushed.append(n)
            return n

    store._bridge._native = Spy()  # type: ignore[assignment]
    n = 200
    results = await asyncio.gather(*(store.aput(b"o/%03d" % i, b"v") for i in range(n)))
    assert [r.revision for r in results] == sorted(r.revision for r in results), "submission order kept"
    assert sum(flushed) == n and max(flushed) == n, f"flushes of {flushed}: the burst was not batched"


def test_native_outbox_waits_for_flush_and_blocking_writes_go_after_it(store: Store) -> None:
    native = store._native
    rev0 = native.revision
    native.submit_put(1, b"q/a", b"1")
    native.submit_put(2, b"q/b", b"2")
    assert native.revision == rev0, "a submitted write is not proposed before flush()"
    r = native.put(b"q/c", b"3")  # a blocking write proposes the outbox first
    assert r.revision == rev0 + 3
    assert native.get(b"q/a").mod_revision == rev0 + 1 and native.get(b"q/b").mod_revision == rev0 + 2
    assert native.flush() == 0


def test_close_proposes_the_outbox_so_no_write_is_left_waiting(tmp_path) -> None:
    s = Store.open(str(tmp_path / "d"))
    s._native.submit_put(7, b"k", b"v")
    s.close()
    s2 = Store.open(str(tmp_path / "d"))
    try:
        kv = s2.get(b"k")
        assert kv is not None and kv.value == b"v"
    finally:
        s2.close()
