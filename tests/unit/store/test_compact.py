"""Compaction (etcd kvstore.go compact / key_index.go compact).

As in etcd, a new store is at revision BASE = 1; rv(n) is the revision of the n-th write:

    rv(1) put a=1 ; rv(2) put a=2 ; rv(3) put b=1 ; rv(4) delete b ; rv(5) put c=1 ; rv(6) put a=3

compact(rv(5)): reads at revision < rv(5) fail with CompactedError; at rv(5) the state is
{a=2 (create rv(1), mod rv(2), version 2), c=1}; b's tombstone (rv(4) <= rv(5)) is gone for good.
"""

from __future__ import annotations

import pytest

from kubecore.store import (
    CompactedError,
    FutureRevisionError,
    Op,
    Store,
    StoreError,
)

BASE = 1


def rv(n: int) -> int:
    return BASE + n


def _history(s: Store) -> None:
    s.put(b"a", b"1")
    s.put(b"a", b"2")
    s.put(b"b", b"1")
    s.delete(b"b")
    s.put(b"c", b"1")
    s.put(b"a", b"3")
    assert s.revision == rv(6)


def test_reads_below_compact_revision_fail(store: Store) -> None:
    _history(store)
    store.compact(rv(5))
    for rev in (rv(1), rv(2), rv(3), rv(4)):
        with pytest.raises(CompactedError):
            store.get(b"a", revision=rev)
        with pytest.raises(CompactedError):
            store.range(b"\0", b"\0", revision=rev)
    assert issubclass(CompactedError, StoreError)


def test_state_at_and_after_compact_revision_is_intact(store: Store) -> None:
    _history(store)
    store.compact(rv(5))
    r = store.range(b"\0", b"\0", revision=rv(5))
    got = {kv.key: (kv.value, kv.create_revision, kv.mod_revision, kv.version) for kv in r.kvs}
    assert got == {b"a": (b"2", rv(1), rv(2), 2), b"c": (b"1", rv(5), rv(5), 1)}
    assert store.get(b"b", revision=rv(5)) is None
    r = store.range(b"\0", b"\0", revision=rv(6))
    got = {kv.key: (kv.value, kv.create_revision, kv.mod_revision, kv.version) for kv in r.kvs}
    assert got == {b"a": (b"3", rv(1), rv(6), 3), b"c": (b"1", rv(5), rv(5), 1)}
    assert store.range(b"\0", b"\0").count == 2


def test_compaction_keeps_versions_and_create_revisions(store: Store) -> None:
    _history(store)
    store.compact(rv(6))
    store.put(b"a", b"4")  # rv(7)
    store.put(b"b", b"again")  # rv(8): b was deleted and compacted away, new generation
    a = store.get(b"a")
    b = store.get(b"b")
    assert a is not None and (a.create_revision, a.mod_revision, a.version) == (rv(1), rv(7), 4)
    assert b is not None and (b.create_revision, b.mod_revision, b.version) == (rv(8), rv(8), 1)


def test_compaction_does_not_bump_revision(store: Store) -> None:
    _history(store)
    store.compact(rv(3))
    assert store.revision == rv(6)
    assert store.put(b"z", b"z").revision == rv(7)


def test_compact_future_revision_fails(store: Store) -> None:
    _history(store)
    with pytest.raises(FutureRevisionError):
        store.compact(rv(7))
    with pytest.raises(FutureRevisionError):
        store.compact(1000)
    # nothing happened: history still fully readable
    assert store.get(b"a", revision=rv(1)).value == b"1"  # type: ignore[union-attr]
    assert issubclass(FutureRevisionError, StoreError)


def test_compact_to_current_revision(store: Store) -> None:
    _history(store)
    store.compact(rv(6))
    assert store.get(b"a").value == b"3"  # type: ignore[union-attr]
    assert store.range(b"\0", b"\0", revision=rv(6)).count == 2
    with pytest.raises(CompactedError):
        store.get(b"a", revision=rv(5))


def test_compact_again_to_same_or_lower_revision_fails(store: Store) -> None:
    _history(store)
    store.compact(rv(4))
    with pytest.raises(CompactedError):
        store.compact(rv(4))
    with pytest.raises(CompactedError):
        store.compact(rv(2))
    store.compact(rv(5))  # moving forward is fine
    with pytest.raises(CompactedError):
        store.get(b"a", revision=rv(4))
    with pytest.raises(FutureRevisionError):
        store.compact(99)


def test_stats_compact_revision(store: Store) -> None:
    _history(store)
    store.compact(rv(4))
    st = store.stats()
    assert st["compact_revision"] == rv(4)
    assert st["revision"] == rv(6)


def test_txn_reading_compacted_revision_fails_whole(store: Store) -> None:
    """etcd checks a txn's ranges before applying it: a CompactedError writes nothing."""
    _history(store)
    store.compact(rv(5))
    with pytest.raises(CompactedError):
        store.txn(compare=[], success=[Op.put(b"x", b"1"), Op.get(b"a", revision=rv(2))], failure=[])
    assert store.get(b"x") is None
    assert store.revision == rv(6)
    with pytest.raises(FutureRevisionError):
        store.txn(compare=[], success=[Op.put(b"x", b"1"), Op.get(b"a", revision=rv(9))], failure=[])
    assert store.get(b"x") is None
    assert store.revision == rv(6)


def test_many_versions_compacted(store: Store) -> None:
    for i in range(1, 501):
        store.put(b"k%d" % (i % 7), b"%d" % i)  # write i is at rv(i)
    store.delete(b"k0")  # rv(501)
    store.compact(rv(400))
    for n_at in (400, 450, 500, 501):
        r = store.range(b"\0", b"\0", revision=rv(n_at))
        for kv in r.kvs:
            # the last put at or before write n_at to key k(i%7)
            n = int(kv.value)
            j = int(kv.key[1:])
            assert n <= n_at and n % 7 == j
            assert n + 7 > min(n_at, 500)
            assert kv.mod_revision == rv(n)
            assert kv.version == (n - j) // 7 + (0 if j == 0 else 1)
    assert store.get(b"k0") is None
    assert store.get(b"k0", revision=rv(500)) is not None
    with pytest.raises(CompactedError):
        store.get(b"k1", revision=rv(399))
