"""Transactions: compare targets and operators, branches, atomicity (etcd v3 Txn).

As in etcd, a new store is at revision BASE = 1; rv(n) is the revision of the n-th write.
"""

from __future__ import annotations

import pytest

from kubecore.store import (
    Compare,
    DeleteResult,
    Op,
    PutResult,
    RangeResult,
    Store,
    TxnResult,
    prefix_end,
)


BASE = 1


def rv(n: int) -> int:
    return BASE + n


def _setup(store: Store) -> None:
    store.put(b"a", b"mmm")  # rv(1)
    store.put(b"a", b"mmm")  # rv(2): a create=rv(1) mod=rv(2) version=2
    store.put(b"b", b"x")  # rv(3): b create=rv(3) mod=rv(3) version=1


def _check(store: Store, cmp: Compare) -> bool:
    """Run a read-only txn; return which branch was taken (and that nothing was written)."""
    before = store.revision
    res = store.txn(compare=[cmp], success=[Op.get(b"a")], failure=[Op.get(b"b")])
    assert isinstance(res, TxnResult)
    assert store.revision == before
    assert res.revision == before
    assert len(res.responses) == 1
    got = res.responses[0]
    assert isinstance(got, RangeResult)
    key = got.kvs[0].key
    assert key == (b"a" if res.succeeded else b"b")
    return res.succeeded


@pytest.mark.parametrize(
    ("op", "target", "expected"),
    [
        ("=", b"mmm", True),
        ("=", b"mm", False),
        ("!=", b"mmm", False),
        ("!=", b"zzz", True),
        ("<", b"mmn", True),
        ("<", b"mmm", False),
        ("<", b"mm", False),
        (">", b"mm", True),
        (">", b"mmm", False),
        (">", b"n", False),
    ],
)
def test_compare_value(store: Store, op: str, target: bytes, expected: bool) -> None:
    _setup(store)
    assert _check(store, Compare.value(b"a", op, target)) is expected


@pytest.mark.parametrize(
    ("factory", "actual"),
    [
        (Compare.version, 2),
        (Compare.create_revision, rv(1)),
        (Compare.mod_revision, rv(2)),
    ],
    ids=["version", "create_revision", "mod_revision"],
)
@pytest.mark.parametrize(
    ("op", "delta", "expected"),
    [
        ("=", 0, True),
        ("=", 1, False),
        ("!=", 0, False),
        ("!=", 1, True),
        ("<", 1, True),
        ("<", 0, False),
        ("<", -1, False),
        (">", -1, True),
        (">", 0, False),
        (">", 1, False),
    ],
)
def test_compare_integer_targets(store: Store, factory, actual: int, op: str, delta: int, expected: bool) -> None:
    _setup(store)
    assert _check(store, factory(b"a", op, actual + delta)) is expected


def test_compare_lease(store: Store) -> None:
    _setup(store)
    lease = store.lease_grant(3600)
    store.put(b"a", b"mmm", lease=lease)
    assert _check(store, Compare.lease(b"a", "=", lease)) is True
    assert _check(store, Compare.lease(b"a", "!=", lease)) is False
    assert _check(store, Compare.lease(b"a", "=", 0)) is False
    assert _check(store, Compare.lease(b"b", "=", 0)) is True
    assert _check(store, Compare.lease(b"a", ">", 0)) is True


@pytest.mark.parametrize(
    ("cmp", "expected"),
    [
        (Compare.version(b"missing", "=", 0), True),
        (Compare.version(b"missing", ">", 0), False),
        (Compare.create_revision(b"missing", "=", 0), True),
        (Compare.create_revision(b"missing", "<", 1), True),
        (Compare.mod_revision(b"missing", "=", 0), True),
        (Compare.mod_revision(b"missing", "!=", 0), False),
        (Compare.lease(b"missing", "=", 0), True),
        # etcd: a value compare against a missing key is always false, whatever the operator
        (Compare.value(b"missing", "=", b""), False),
        (Compare.value(b"missing", "!=", b"x"), False),
        (Compare.value(b"missing", ">", b""), False),
        (Compare.value(b"missing", "<", b"zzz"), False),
    ],
)
def test_compare_missing_key(store: Store, cmp: Compare, expected: bool) -> None:
    _setup(store)
    assert _check(store, cmp) is expected


def test_compare_deleted_key_is_missing(store: Store) -> None:
    _setup(store)
    store.delete(b"b")
    store.put(b"c", b"c")
    res = store.txn(compare=[Compare.version(b"b", "=", 0)], success=[Op.put(b"b", b"new")], failure=[])
    assert res.succeeded
    kv = store.get(b"b")
    assert kv is not None and kv.version == 1 and kv.create_revision == res.revision


def test_all_compares_must_hold(store: Store) -> None:
    _setup(store)
    ok = Compare.value(b"a", "=", b"mmm")
    bad = Compare.version(b"b", "=", 5)
    assert store.txn(compare=[ok, Compare.version(b"b", "=", 1)], success=[], failure=[]).succeeded
    assert not store.txn(compare=[ok, bad], success=[], failure=[]).succeeded
    assert not store.txn(compare=[bad, ok], success=[], failure=[]).succeeded


def test_empty_compare_takes_success_branch(store: Store) -> None:
    res = store.txn(compare=[], success=[Op.put(b"k", b"v")], failure=[Op.put(b"other", b"v")])
    assert res.succeeded
    assert store.get(b"k") is not None and store.get(b"other") is None


def test_several_puts_share_one_revision(store: Store) -> None:
    store.put(b"pre", b"0")  # rv(1)
    res = store.txn(
        compare=[],
        success=[Op.put(b"x", b"1"), Op.put(b"y", b"2"), Op.put(b"pre", b"3", prev_kv=True)],
        failure=[],
    )
    assert res.succeeded
    assert res.revision == rv(2)
    assert store.revision == rv(2)
    assert [type(r) for r in res.responses] == [PutResult, PutResult, PutResult]
    assert [r.revision for r in res.responses] == [rv(2)] * 3
    assert res.responses[0].prev_kv is None
    pk = res.responses[2].prev_kv
    assert pk is not None and pk.value == b"0" and pk.mod_revision == rv(1)
    for key, version, create in [(b"x", 1, rv(2)), (b"y", 1, rv(2)), (b"pre", 2, rv(1))]:
        kv = store.get(key)
        assert kv is not None
        assert kv.mod_revision == rv(2), key
        assert kv.version == version, key
        assert kv.create_revision == create, key
    # the state before the txn is wholly visible at rv(1), the whole txn at rv(2): no half state
    assert [kv.key for kv in store.range(b"\0", b"\0", revision=rv(1)).kvs] == [b"pre"]
    assert [kv.key for kv in store.range(b"\0", b"\0", revision=rv(2)).kvs] == [b"pre", b"x", b"y"]
    assert store.put(b"z", b"z").revision == rv(3)


def test_failed_txn_without_writes_does_not_bump_revision(store: Store) -> None:
    _setup(store)
    res = store.txn(compare=[Compare.value(b"a", "=", b"nope")], success=[Op.put(b"c", b"1")], failure=[])
    assert res.succeeded is False
    assert res.responses == []
    assert res.revision == rv(3)
    assert store.revision == rv(3)
    assert store.get(b"c") is None


def test_read_only_txn_does_not_bump_revision(store: Store) -> None:
    _setup(store)
    res = store.txn(compare=[], success=[Op.get(b"a"), Op.range(b"a", b"z")], failure=[])
    assert res.succeeded and store.revision == rv(3) and res.revision == rv(3)
    assert [kv.key for kv in res.responses[1].kvs] == [b"a", b"b"]


def test_txn_deleting_nothing_does_not_bump_revision(store: Store) -> None:
    _setup(store)
    res = store.txn(compare=[], success=[Op.delete(b"nothing"), Op.delete(b"q", b"r")], failure=[])
    assert res.succeeded
    assert [r.deleted for r in res.responses] == [0, 0]
    assert store.revision == rv(3) and res.revision == rv(3)


def test_failure_branch_runs_and_bumps(store: Store) -> None:
    _setup(store)
    res = store.txn(
        compare=[Compare.mod_revision(b"a", "=", rv(1))],
        success=[Op.put(b"a", b"won")],
        failure=[Op.get(b"a"), Op.put(b"lost", b"1")],
    )
    assert res.succeeded is False
    assert res.revision == rv(4)
    assert isinstance(res.responses[0], RangeResult)
    assert res.responses[0].kvs[0].mod_revision == rv(2)
    assert isinstance(res.responses[1], PutResult) and res.responses[1].revision == rv(4)
    assert store.get(b"a").value == b"mmm"  # type: ignore[union-attr]
    assert store.get(b"lost") is not None


def test_optimistic_update_pattern(store: Store) -> None:
    """The apiserver's GuaranteedUpdate: compare mod_revision, put on success, get on failure."""
    store.put(b"/registry/pods/ns/p", b"v1")  # rv(1)
    seen = store.get(b"/registry/pods/ns/p")
    assert seen is not None
    store.put(b"/registry/pods/ns/p", b"v2-by-someone-else")  # rv(2)
    key = b"/registry/pods/ns/p"
    res = store.txn(
        compare=[Compare.mod_revision(key, "=", seen.mod_revision)],
        success=[Op.put(key, b"v2-mine")],
        failure=[Op.get(key)],
    )
    assert not res.succeeded
    current = res.responses[0].kvs[0]
    assert current.value == b"v2-by-someone-else" and current.mod_revision == rv(2)
    res = store.txn(
        compare=[Compare.mod_revision(key, "=", current.mod_revision)],
        success=[Op.put(key, b"v3-mine")],
        failure=[Op.get(key)],
    )
    assert res.succeeded and res.revision == rv(3)
    assert store.get(key).value == b"v3-mine"  # type: ignore[union-attr]


def test_create_if_absent_pattern(store: Store) -> None:
    key = b"/registry/ns/default"
    for attempt in range(3):
        res = store.txn(compare=[Compare.create_revision(key, "=", 0)], success=[Op.put(key, b"%d" % attempt)], failure=[])
        assert res.succeeded is (attempt == 0)
    assert store.get(key).value == b"0"  # type: ignore[union-attr]
    assert store.revision == rv(1)


def test_txn_delete_ops_and_prev_kv(store: Store) -> None:
    for i in range(4):
        store.put(b"p/%d" % i, b"v%d" % i)  # rv(1)..rv(4)
    res = store.txn(
        compare=[],
        success=[Op.delete(b"p/0", prev_kv=True), Op.delete(b"p/1", b"p/3", prev_kv=True), Op.put(b"q", b"1")],
        failure=[],
    )
    assert res.revision == rv(5)
    d0, d1, p = res.responses
    assert isinstance(d0, DeleteResult) and isinstance(d1, DeleteResult) and isinstance(p, PutResult)
    assert d0.deleted == 1 and [kv.key for kv in d0.prev_kvs] == [b"p/0"]
    assert d1.deleted == 2 and [kv.value for kv in d1.prev_kvs] == [b"v1", b"v2"]
    assert [kv.key for kv in store.range(b"\0", b"\0").kvs] == [b"p/3", b"q"]
    assert store.range(b"p/", prefix_end(b"p/"), revision=rv(4)).count == 4


def test_reads_in_txn_see_earlier_ops_of_same_txn(store: Store) -> None:
    """etcd: a range inside a write txn reads at beginRev+1 once the txn has changes.

    (Each key is written at most once: etcd rejects a txn that modifies a key twice.)
    """
    store.put(b"a", b"old")  # rv(1)
    store.put(b"b", b"old")  # rv(2)
    res = store.txn(compare=[], success=[Op.put(b"a", b"new"), Op.get(b"a"), Op.delete(b"b"), Op.get(b"b")], failure=[])
    assert res.revision == rv(3)
    got = res.responses[1].kvs
    assert len(got) == 1 and got[0].value == b"new" and got[0].mod_revision == rv(3) and got[0].version == 2
    assert res.responses[3].kvs == []
    assert store.get(b"b") is None


def test_txn_range_options(store: Store) -> None:
    for i in range(5):
        store.put(b"r/%d" % i, b"value%d" % i)  # rv(1)..rv(5)
    res = store.txn(
        compare=[],
        success=[
            Op.range(b"r/", prefix_end(b"r/"), limit=2),
            Op.range(b"r/", prefix_end(b"r/"), keys_only=True),
            Op.range(b"r/", prefix_end(b"r/"), count_only=True),
            Op.range(b"r/", prefix_end(b"r/"), revision=rv(3)),
            Op.get(b"r/4", revision=rv(4)),
        ],
        failure=[],
    )
    lim, keys, cnt, past, get4 = res.responses
    assert [kv.key for kv in lim.kvs] == [b"r/0", b"r/1"] and lim.more is True and lim.count == 5
    assert len(keys.kvs) == 5 and all(kv.value == b"" for kv in keys.kvs)
    assert cnt.kvs == [] and cnt.count == 5
    assert [kv.key for kv in past.kvs] == [b"r/0", b"r/1", b"r/2"]
    assert get4.kvs == []


def test_txn_put_with_lease(store: Store) -> None:
    lease = store.lease_grant(3600)
    res = store.txn(compare=[], success=[Op.put(b"l", b"1", lease=lease)], failure=[])
    assert res.succeeded
    assert store.get(b"l").lease == lease  # type: ignore[union-attr]
    ttl = store.lease_time_to_live(lease, keys=True)
    assert list(ttl.keys) == [b"l"]
