"""Model-based test: the store against a pure-Python model of etcd MVCC.

The model keeps one full snapshot per revision (the key space is tiny), so reads at any past
revision, compaction errors and version/create/mod revisions can be checked exactly.
The disk variant also closes and reopens the store (with frequent snapshots) between steps.
"""

from __future__ import annotations

import shutil
import tempfile

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kubecore.store import CompactedError, Compare, FutureRevisionError, Op, Store

KEYS = [b"a", b"b", b"c", b"d", b"d\0", b"e"]
keys = st.sampled_from(KEYS)
values = st.binary(max_size=8)
ops = st.sampled_from(["=", "!=", "<", ">"])
# a range end: None (single key), a key (half-open interval) or b"\0" (to the end)
ends = st.one_of(st.none(), st.just(b"\0"), st.sampled_from(KEYS + [b"z"]))

KV = tuple[bytes, int, int, int]  # value, create_revision, mod_revision, version


def _in_range(k: bytes, start: bytes, end: bytes | None) -> bool:
    if end is None:
        return k == start
    if end == b"\0":
        return k >= start
    return start <= k < end


def _cmp(a, op: str, b) -> bool:
    return {"=": a == b, "!=": a != b, "<": a < b, ">": a > b}[op]


class MVCCModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.store = self.open_store()
        # etcd: a new store is at revision 1 (nothing at revisions 0 and 1)
        assert self.store.revision == 1
        self.snaps: list[dict[bytes, KV]] = [{}, {}]  # snaps[r] = state at revision r
        self.compact_rev = 0

    def open_store(self) -> Store:
        return Store.memory()

    def teardown(self) -> None:
        self.store.close()

    # ------------------------------------------------------------ model helpers

    @property
    def rev(self) -> int:
        return len(self.snaps) - 1

    def _apply(self, writes: list[tuple[str, bytes, bytes | None, bytes | None]]) -> tuple[bool, list]:
        """Apply puts/deletes as one revision; return (changed, per-op expected results)."""
        cur = dict(self.snaps[-1])
        r = self.rev + 1
        changed = False
        results = []
        for kind, key, arg, _ in writes:
            if kind == "put":
                prev = cur.get(key)
                cur[key] = (arg, prev[1] if prev else r, r, prev[3] + 1 if prev else 1)  # type: ignore[assignment]
                results.append(prev)
                changed = True
            else:
                gone = sorted(k for k in cur if _in_range(k, key, arg))
                results.append([(k, cur[k]) for k in gone])
                for k in gone:
                    del cur[k]
                changed = changed or bool(gone)
        if changed:
            self.snaps.append(cur)
        return changed, results

    @staticmethod
    def _kv_tuple(kv) -> tuple[bytes, KV]:
        return kv.key, (kv.value, kv.create_revision, kv.mod_revision, kv.version)

    # ------------------------------------------------------------ rules

    @rule(key=keys, value=values, want_prev=st.booleans())
    def put(self, key: bytes, value: bytes, want_prev: bool) -> None:
        _, (prev,) = self._apply([("put", key, value, None)])
        res = self.store.put(key, value, prev_kv=want_prev)
        assert res.revision == self.rev
        if want_prev and prev is not None:
            assert res.prev_kv is not None and self._kv_tuple(res.prev_kv) == (key, prev)
        else:
            assert res.prev_kv is None

    @rule(key=keys, end=ends, want_prev=st.booleans())
    def delete(self, key: bytes, end: bytes | None, want_prev: bool) -> None:
        _, (gone,) = self._apply([("delete", key, end, None)])
        res = self.store.delete(key, end, prev_kv=want_prev)
        assert res.deleted == len(gone)
        assert res.revision == self.rev
        if want_prev:
            assert [self._kv_tuple(kv) for kv in res.prev_kvs] == gone
        else:
            assert res.prev_kvs == []

    @rule(
        ckey=keys,
        target_kind=st.sampled_from(["version", "create_revision", "mod_revision", "value"]),
        op=ops,
        int_target=st.integers(min_value=0, max_value=6),
        value_target=values,
        success=st.lists(st.tuples(st.booleans(), keys, values, ends), max_size=3),
        failure=st.lists(st.tuples(st.booleans(), keys, values, ends), max_size=3),
    )
    def txn(self, ckey, target_kind, op, int_target, value_target, success, failure) -> None:
        cur = self.snaps[-1].get(ckey)
        if target_kind == "value":
            cmp = Compare.value(ckey, op, value_target)
            holds = cur is not None and _cmp(cur[0], op, value_target)
        else:
            idx = {"create_revision": 1, "mod_revision": 2, "version": 3}[target_kind]
            actual = cur[idx] if cur is not None else 0
            # aim near the real number so that every operator outcome is exercised
            target = max(0, actual + int_target - 3) if int_target < 6 else int_target
            cmp = getattr(Compare, target_kind)(ckey, op, target)
            holds = _cmp(actual, op, target)

        def build(branch):
            writes, store_ops, used = [], [], set()
            for is_put, key, value, end in branch:
                if key in used:  # etcd rejects modifying a key twice in one txn
                    continue
                if is_put:
                    used.add(key)
                    writes.append(("put", key, value, None))
                    store_ops.append(Op.put(key, value, prev_kv=True))
                else:
                    if end is not None:  # keep delete ranges disjoint from everything else
                        continue
                    used.add(key)
                    writes.append(("delete", key, None, None))
                    store_ops.append(Op.delete(key, prev_kv=True))
            return writes, store_ops

        s_writes, s_ops = build(success)
        f_writes, f_ops = build(failure)
        before = self.rev
        _, expected = self._apply(s_writes if holds else f_writes)
        res = self.store.txn(compare=[cmp], success=s_ops, failure=f_ops)
        assert res.succeeded is holds
        assert res.revision == self.rev
        assert self.rev in (before, before + 1)
        assert len(res.responses) == len(expected)
        for got, (want, (kind, key, _, _)) in zip(res.responses, zip(expected, s_writes if holds else f_writes)):
            if kind == "put":
                assert got.revision == self.rev
                if want is None:
                    assert got.prev_kv is None
                else:
                    assert self._kv_tuple(got.prev_kv) == (key, want)
            else:
                assert got.deleted == len(want)
                assert [self._kv_tuple(kv) for kv in got.prev_kvs] == want

    @rule(data=st.data(), start=keys, end=ends, limit=st.integers(min_value=0, max_value=4))
    def read(self, data, start: bytes, end: bytes | None, limit: int) -> None:
        at = data.draw(st.integers(min_value=0, max_value=self.rev + 2), label="revision")
        if at > self.rev:
            try:
                self.store.range(start, end, revision=at, limit=limit)
            except FutureRevisionError:
                return
            raise AssertionError(f"read at future revision {at} (current {self.rev}) did not fail")
        if 0 < at < self.compact_rev:
            try:
                self.store.range(start, end, revision=at, limit=limit)
            except CompactedError:
                return
            raise AssertionError(f"read at {at} below compact revision {self.compact_rev} did not fail")
        snap = self.snaps[at or self.rev]
        want = sorted((k, v) for k, v in snap.items() if _in_range(k, start, end))
        r = self.store.range(start, end, revision=at, limit=limit)
        shown = want[:limit] if limit else want
        assert [self._kv_tuple(kv) for kv in r.kvs] == shown, f"range({start!r}, {end!r}) at {at}"
        assert r.count == len(want)
        assert r.more is (len(want) > len(shown))
        assert r.revision == self.rev
        if end is None:
            kv = self.store.get(start, revision=at)
            assert (self._kv_tuple(kv) if kv is not None else None) == (want[0] if want else None)

    @precondition(lambda self: self.rev > 0)
    @rule(data=st.data())
    def compact(self, data) -> None:
        at = data.draw(st.integers(min_value=1, max_value=self.rev + 1), label="compact_to")
        if at <= self.compact_rev:
            try:
                self.store.compact(at)
            except CompactedError:
                return
            raise AssertionError(f"compact({at}) after compact({self.compact_rev}) did not fail")
        if at > self.rev:
            try:
                self.store.compact(at)
            except FutureRevisionError:
                return
            raise AssertionError(f"compact({at}) beyond revision {self.rev} did not fail")
        self.store.compact(at)
        self.compact_rev = at

    # ------------------------------------------------------------ invariants

    @invariant()
    def revision_matches(self) -> None:
        assert self.store.revision == self.rev

    @invariant()
    def current_state_matches(self) -> None:
        r = self.store.range(b"\0", b"\0")
        assert [self._kv_tuple(kv) for kv in r.kvs] == sorted(self.snaps[-1].items())


class DiskMVCCModel(MVCCModel):
    """Same model on a disk store that is closed and reopened (snapshots every few entries)."""

    def open_store(self) -> Store:
        if not hasattr(self, "dir"):
            self.dir = tempfile.mkdtemp(prefix="kubecore-model-")
        return Store.open(self.dir, fsync=False, snapshot_every=5)

    def teardown(self) -> None:
        try:
            self.store.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    @rule()
    def reopen(self) -> None:
        self.store.close()
        self.store = self.open_store()
        st_ = self.store.stats()
        assert st_["revision"] == self.rev
        if self.compact_rev:
            assert st_["compact_revision"] == self.compact_rev


TestMVCCModel = MVCCModel.TestCase
TestMVCCModel.settings = settings(
    max_examples=75, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

TestDiskMVCCModel = DiskMVCCModel.TestCase
TestDiskMVCCModel.settings = settings(
    max_examples=25, stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
