"""Put / get / range / delete with etcd v3 MVCC semantics.

As in etcd (mvcc NewStore: currentRev = 1), a new store is at revision BASE = 1 and the n-th
changing write gets revision BASE + n; rv(n) below is "the revision of the n-th write".

Worked example used throughout (etcd key_index.go style), on an empty store:

    rv(1)  put a=1      a: create=rv(1) mod=rv(1) version=1
    rv(2)  put a=2      a: create=rv(1) mod=rv(2) version=2
    rv(3)  put b=1      b: create=rv(3) mod=rv(3) version=1
    rv(4)  delete a     a: tombstone (gone at rev >= rv(4))
    rv(5)  put a=3      a: create=rv(5) mod=rv(5) version=1   (a new generation)
"""

from __future__ import annotations

import pytest

from kubecore.store import (
    DeleteResult,
    FutureRevisionError,
    KeyValue,
    PutResult,
    RangeResult,
    Store,
    prefix_end,
)


BASE = 1


def rv(n: int) -> int:
    return BASE + n


def worked_example(s: Store) -> None:
    assert s.put(b"a", b"1").revision == rv(1)
    assert s.put(b"a", b"2").revision == rv(2)
    assert s.put(b"b", b"1").revision == rv(3)
    assert s.delete(b"a").revision == rv(4)
    assert s.put(b"a", b"3").revision == rv(5)


# ---------------------------------------------------------------- revisions


def test_empty_store_is_at_revision_one(store: Store) -> None:
    # etcd: a new store is at revision 1 and its first write gets revision 2
    assert store.revision == BASE == 1
    assert store.get(b"nope") is None
    r = store.range(b"\0", b"\0")
    assert r.kvs == [] and r.count == 0 and r.more is False and r.revision == 1
    assert store.put(b"first", b"1").revision == 2


def test_each_put_bumps_revision_by_one(store: Store) -> None:
    for i in range(1, 21):
        res = store.put(b"k%d" % (i % 3), b"v%d" % i)
        assert isinstance(res, PutResult)
        assert res.revision == rv(i)
        assert store.revision == rv(i)


def test_put_of_same_value_still_bumps_revision_and_version(store: Store) -> None:
    store.put(b"k", b"same")
    store.put(b"k", b"same")
    kv = store.get(b"k")
    assert kv is not None
    assert store.revision == rv(2)
    assert (kv.create_revision, kv.mod_revision, kv.version) == (rv(1), rv(2), 2)


def test_delete_of_missing_key_does_not_bump_revision(store: Store) -> None:
    store.put(b"a", b"1")
    res = store.delete(b"missing")
    assert isinstance(res, DeleteResult)
    assert res.deleted == 0
    assert res.prev_kvs == []
    assert res.revision == rv(1)
    assert store.revision == rv(1)
    # an empty range delete is also a no-op
    res = store.delete(b"x", b"z")
    assert res.deleted == 0 and res.revision == rv(1) and store.revision == rv(1)
    # the next write gets the next revision: no hole
    assert store.put(b"b", b"1").revision == rv(2)


def test_reads_do_not_bump_revision(store: Store) -> None:
    store.put(b"a", b"1")
    store.get(b"a")
    store.range(b"\0", b"\0")
    store.range(b"a", revision=rv(1))
    assert store.revision == rv(1)


def test_create_mod_revision_and_version(store: Store) -> None:
    worked_example(store)
    a = store.get(b"a")
    b = store.get(b"b")
    assert a is not None and b is not None
    assert (a.key, a.value, a.create_revision, a.mod_revision, a.version, a.lease) == (b"a", b"3", rv(5), rv(5), 1, 0)
    assert (b.key, b.value, b.create_revision, b.mod_revision, b.version, b.lease) == (b"b", b"1", rv(3), rv(3), 1, 0)


def test_keyvalue_equality_compares_all_fields(store: Store) -> None:
    store.put(b"a", b"1")
    store.put(b"b", b"1")
    a1 = store.get(b"a")
    assert isinstance(a1, KeyValue)
    a1_again = store.get(b"a")
    b1 = store.get(b"b")
    assert a1 == a1_again
    assert a1 != b1  # same value, different key/revisions
    store.put(b"a", b"1")
    a2 = store.get(b"a")
    assert a2 != a1  # same key and value, different mod_revision/version


def test_version_counts_puts_and_is_reset_by_delete(store: Store) -> None:
    for i in range(5):
        store.put(b"k", b"v%d" % i)
    kv = store.get(b"k")
    assert kv is not None and kv.version == 5 and kv.create_revision == rv(1)
    store.delete(b"k")
    assert store.get(b"k") is None
    store.put(b"k", b"again")
    kv = store.get(b"k")
    assert kv is not None
    assert kv.version == 1
    assert kv.create_revision == rv(7)
    assert kv.mod_revision == rv(7)


def test_put_prev_kv(store: Store) -> None:
    r = store.put(b"k", b"1", prev_kv=True)
    assert r.prev_kv is None
    r = store.put(b"k", b"2", prev_kv=True)
    assert r.prev_kv is not None
    assert (r.prev_kv.key, r.prev_kv.value, r.prev_kv.create_revision, r.prev_kv.mod_revision, r.prev_kv.version) == (
        b"k",
        b"1",
        rv(1),
        rv(1),
        1,
    )
    # without prev_kv=True it is not returned
    assert store.put(b"k", b"3").prev_kv is None
    # after a delete there is no previous kv
    store.delete(b"k")
    assert store.put(b"k", b"4", prev_kv=True).prev_kv is None


def test_binary_keys_and_values_round_trip(store: Store) -> None:
    key = bytes(range(1, 256))
    value = bytes(range(256)) * 4 + b"\0\0\0"
    store.put(key, value)
    kv = store.get(key)
    assert kv is not None and kv.key == key and kv.value == value
    store.put(b"empty", b"")
    kv = store.get(b"empty")
    assert kv is not None and kv.value == b"" and kv.version == 1


# ---------------------------------------------------------------- range


def _fill(s: Store, n: int = 10) -> None:
    for i in range(n):
        s.put(b"key/%02d" % i, b"val%d" % i)


def test_range_single_key_when_end_is_none(store: Store) -> None:
    _fill(store)
    r = store.range(b"key/03")
    assert isinstance(r, RangeResult)
    assert [kv.key for kv in r.kvs] == [b"key/03"]
    assert r.count == 1 and r.more is False
    r = store.range(b"key/0")  # no prefix semantics without an end
    assert r.kvs == [] and r.count == 0


def test_range_half_open_interval_sorted(store: Store) -> None:
    # insert out of order: results must be sorted by key regardless
    for k in [b"c", b"a", b"e", b"b", b"d"]:
        store.put(k, k.upper())
    r = store.range(b"b", b"d")
    assert [kv.key for kv in r.kvs] == [b"b", b"c"]
    assert r.count == 2
    r = store.range(b"a", b"f")
    assert [kv.key for kv in r.kvs] == [b"a", b"b", b"c", b"d", b"e"]
    assert [kv.value for kv in r.kvs] == [b"A", b"B", b"C", b"D", b"E"]


def test_range_from_key_with_end_nul(store: Store) -> None:
    for k in [b"a", b"b", b"c", b"\xff\xff"]:
        store.put(k, b"x")
    r = store.range(b"b", b"\0")
    assert [kv.key for kv in r.kvs] == [b"b", b"c", b"\xff\xff"]
    r = store.range(b"\0", b"\0")
    assert r.count == 4


def test_range_prefix(store: Store) -> None:
    store.put(b"/registry/pods/a", b"1")
    store.put(b"/registry/pods/b", b"2")
    store.put(b"/registry/podsx", b"3")
    store.put(b"/registry/services/a", b"4")
    r = store.range(b"/registry/pods/", prefix_end(b"/registry/pods/"))
    assert [kv.key for kv in r.kvs] == [b"/registry/pods/a", b"/registry/pods/b"]


def test_prefix_end() -> None:
    assert prefix_end(b"abc") == b"abd"
    assert prefix_end(b"/registry/pods/") == b"/registry/pods0"
    assert prefix_end(b"a\xff") == b"b"
    assert prefix_end(b"a\xff\xff") == b"b"
    # all 0xff: no upper bound -> b"\0" means "to the end of the keyspace" (etcd GetPrefixRangeEnd)
    assert prefix_end(b"\xff\xff") == b"\0"
    assert Store.prefix_end(b"abc") == b"abd"


def test_range_limit_count_more(store: Store) -> None:
    _fill(store, 10)
    r = store.range(b"key/", prefix_end(b"key/"), limit=3)
    assert [kv.key for kv in r.kvs] == [b"key/00", b"key/01", b"key/02"]
    assert r.count == 10
    assert r.more is True
    assert r.revision == rv(10)
    r = store.range(b"key/", prefix_end(b"key/"), limit=10)
    assert len(r.kvs) == 10 and r.count == 10 and r.more is False
    r = store.range(b"key/", prefix_end(b"key/"), limit=100)
    assert len(r.kvs) == 10 and r.more is False
    r = store.range(b"key/", prefix_end(b"key/"), limit=0)  # 0 = unlimited
    assert len(r.kvs) == 10 and r.more is False
    # pagination like the apiserver does it: continue from last key + \0
    seen = []
    start = b"key/"
    while True:
        page = store.range(start, prefix_end(b"key/"), limit=4)
        seen.extend(kv.key for kv in page.kvs)
        if not page.more:
            break
        start = page.kvs[-1].key + b"\0"
    assert seen == [b"key/%02d" % i for i in range(10)]


def test_range_keys_only(store: Store) -> None:
    _fill(store, 3)
    store.put(b"key/01", b"changed")
    r = store.range(b"key/", prefix_end(b"key/"), keys_only=True)
    assert [kv.key for kv in r.kvs] == [b"key/00", b"key/01", b"key/02"]
    assert all(kv.value == b"" for kv in r.kvs)
    k1 = r.kvs[1]
    assert (k1.create_revision, k1.mod_revision, k1.version) == (rv(2), rv(4), 2)
    assert r.count == 3


def test_range_count_only(store: Store) -> None:
    _fill(store, 7)
    r = store.range(b"key/", prefix_end(b"key/"), count_only=True)
    assert r.kvs == []
    assert r.count == 7
    assert r.revision == rv(7)
    r = store.range(b"key/", prefix_end(b"key/"), count_only=True, limit=2)
    assert r.kvs == [] and r.count == 7


def test_range_revision_is_current_store_revision(store: Store) -> None:
    _fill(store, 5)
    r = store.range(b"key/00", revision=rv(2))
    assert r.revision == rv(5)  # header revision, not the read revision
    r = store.range(b"nothing-here")
    assert r.revision == rv(5)


def test_range_at_past_revisions(store: Store) -> None:
    worked_example(store)
    expect = {
        BASE: {},
        rv(1): {b"a": (b"1", rv(1), rv(1), 1)},
        rv(2): {b"a": (b"2", rv(1), rv(2), 2)},
        rv(3): {b"a": (b"2", rv(1), rv(2), 2), b"b": (b"1", rv(3), rv(3), 1)},
        rv(4): {b"b": (b"1", rv(3), rv(3), 1)},
        rv(5): {b"a": (b"3", rv(5), rv(5), 1), b"b": (b"1", rv(3), rv(3), 1)},
    }
    for rev, want in expect.items():
        r = store.range(b"\0", b"\0", revision=rev)
        got = {kv.key: (kv.value, kv.create_revision, kv.mod_revision, kv.version) for kv in r.kvs}
        assert got == want, f"at revision {rev}"
        assert r.count == len(want)
        for key in (b"a", b"b"):
            kv = store.get(key, revision=rev)
            if key in want:
                assert kv is not None
                assert (kv.value, kv.create_revision, kv.mod_revision, kv.version) == want[key]
            else:
                assert kv is None, f"{key!r} at {rev}"
    # revision=0 means "current"
    assert store.get(b"a", revision=0).value == b"3"  # type: ignore[union-attr]


def test_range_at_past_revision_with_limit_and_count(store: Store) -> None:
    _fill(store, 10)  # key/00..key/09 at revisions rv(1)..rv(10)
    store.delete(b"key/", prefix_end(b"key/"))  # rv(11)
    assert store.range(b"key/", prefix_end(b"key/")).count == 0
    r = store.range(b"key/", prefix_end(b"key/"), revision=rv(6), limit=2)
    assert [kv.key for kv in r.kvs] == [b"key/00", b"key/01"]
    assert r.count == 6 and r.more is True


def test_read_at_future_revision_fails(store: Store) -> None:
    store.put(b"a", b"1")
    with pytest.raises(FutureRevisionError):
        store.range(b"a", revision=rv(2))
    with pytest.raises(FutureRevisionError):
        store.get(b"a", revision=100)
    store.range(b"a", revision=rv(1))  # current revision itself is fine


# ---------------------------------------------------------------- delete


def test_delete_single_key(store: Store) -> None:
    store.put(b"a", b"1")
    store.put(b"b", b"1")
    res = store.delete(b"a")
    assert res.deleted == 1
    assert res.revision == rv(3)
    assert res.prev_kvs == []  # not asked for
    assert store.get(b"a") is None
    assert store.get(b"b") is not None
    # deleting the same key again changes nothing
    res = store.delete(b"a")
    assert res.deleted == 0 and res.revision == rv(3) and store.revision == rv(3)


def test_delete_range_is_one_revision_with_prev_kvs(store: Store) -> None:
    _fill(store, 5)  # rv(1)..rv(5)
    store.put(b"key/02", b"new")  # rv(6), version 2
    store.put(b"other", b"o")  # rv(7)
    res = store.delete(b"key/01", b"key/04", prev_kv=True)
    assert res.deleted == 3
    assert res.revision == rv(8)
    assert store.revision == rv(8)
    got = [(kv.key, kv.value, kv.create_revision, kv.mod_revision, kv.version) for kv in res.prev_kvs]
    assert got == [
        (b"key/01", b"val1", rv(2), rv(2), 1),
        (b"key/02", b"new", rv(3), rv(6), 2),
        (b"key/03", b"val3", rv(4), rv(4), 1),
    ]
    left = [kv.key for kv in store.range(b"\0", b"\0").kvs]
    assert left == [b"key/00", b"key/04", b"other"]
    # the deleted keys are still visible at the revision before the delete
    assert store.range(b"key/01", b"key/04", revision=rv(7)).count == 3
    assert store.range(b"key/01", b"key/04", revision=rv(8)).count == 0


def test_delete_everything_from_key(store: Store) -> None:
    _fill(store, 4)
    res = store.delete(b"key/01", b"\0", prev_kv=True)
    assert res.deleted == 3
    assert [kv.key for kv in res.prev_kvs] == [b"key/01", b"key/02", b"key/03"]
    assert [kv.key for kv in store.range(b"\0", b"\0").kvs] == [b"key/00"]


def test_delete_then_recreate_gets_new_generation(store: Store) -> None:
    store.put(b"k", b"1")  # rv(1)
    store.put(b"k", b"2")  # rv(2)
    store.delete(b"k")  # rv(3)
    store.put(b"k", b"3")  # rv(4)
    store.put(b"k", b"4")  # rv(5)
    kv = store.get(b"k")
    assert kv is not None
    assert (kv.create_revision, kv.mod_revision, kv.version) == (rv(4), rv(5), 2)
    old = store.get(b"k", revision=rv(2))
    assert old is not None and (old.create_revision, old.version, old.value) == (rv(1), 2, b"2")
    assert store.get(b"k", revision=rv(3)) is None


def test_stats_reports_revision_and_live_keys(store: Store) -> None:
    _fill(store, 4)
    store.delete(b"key/00")
    st = store.stats()
    assert isinstance(st, dict)
    for field in ("revision", "compact_revision", "keys", "fsyncs", "applied_index"):
        assert field in st, field
    assert st["revision"] == rv(5)
    assert st["keys"] == 3
    assert st["compact_revision"] <= 0  # nothing compacted yet


def test_mod_revision_and_signature_read_the_index_as_range_would(store: Store) -> None:
    worked_example(store)  # a: rv(5), b: rv(3); a was deleted at rv(4) and re-created
    assert store.mod_revision(b"a") == rv(5)
    assert store.mod_revision(b"b") == rv(3)
    assert store.mod_revision(b"missing") is None
    store.delete(b"b")
    assert store.mod_revision(b"b") is None  # a tombstone is no key
    assert store.signature(b"a", b"z") == (1, rv(5))
    store.put(b"c", b"1")
    store.put(b"d", b"1")
    whole = store.range(b"a", b"z", keys_only=True)
    assert store.signature(b"a", b"z") == (whole.count, max(kv.mod_revision for kv in whole.kvs)) == (3, rv(8))
    store.put(b"c", b"2")  # same count, a newer version
    assert store.signature(b"a", b"z") == (3, rv(9))
    store.delete(b"d")  # one fewer
    assert store.signature(b"a", b"z") == (2, rv(9))
    assert store.signature(b"x", b"z") == (0, 0)
    assert store.signature(b"c") == (1, rv(9))  # no end: the single key
    assert store.signature(b"a", prefix_end(b"a")) == (1, rv(5))
