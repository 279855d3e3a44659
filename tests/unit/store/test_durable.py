"""Durability: a disk store reopens with everything (state, history, leases, compaction)."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import textwrap

import pytest

from kubecore.store import (
    CompactedError,
    Compare,
    LockedError,
    Op,
    Store,
    prefix_end,
)


BASE = 1  # etcd: a new store is at revision 1; rv(n) is the revision of the n-th write


def rv(n: int) -> int:
    return BASE + n


def _dump(s: Store, revision: int = 0) -> list[tuple]:
    r = s.range(b"\0", b"\0", revision=revision)
    return [(kv.key, kv.value, kv.create_revision, kv.mod_revision, kv.version, kv.lease) for kv in r.kvs]


def _workload(s: Store) -> int:
    lease = s.lease_grant(3600)
    for i in range(30):
        s.put(b"w/%02d" % (i % 12), b"v%d" % i)  # rv(1)..rv(30)
    s.delete(b"w/03")  # rv(31)
    s.delete(b"w/05", b"w/08")  # rv(32)
    s.txn(
        compare=[Compare.version(b"w/00", ">", 0)],
        success=[Op.put(b"t/1", b"x"), Op.put(b"t/2", b"y", lease=lease), Op.delete(b"w/11")],
        failure=[],
    )  # rv(33)
    s.put(b"leased", b"z", lease=lease)  # rv(34)
    return lease


def test_data_dir_layout(data_dir: str) -> None:
    with Store.open(data_dir) as s:
        s.put(b"k", b"v")
    assert os.path.isdir(os.path.join(data_dir, "wal"))
    assert glob.glob(os.path.join(data_dir, "wal", "*.wal")), "no WAL segment written"


def test_reopen_sees_everything(data_dir: str) -> None:
    with Store.open(data_dir) as s:
        lease = _workload(s)
        want_now = _dump(s)
        want_past = {rev: _dump(s, rev) for rev in (BASE, rv(1), rv(12), rv(30), rv(31), rv(32), rv(33))}
        assert s.revision == rv(34)
    with Store.open(data_dir) as s:
        assert s.revision == rv(34)
        assert _dump(s) == want_now
        for rev, want in want_past.items():
            assert _dump(s, rev) == want, f"history at revision {rev} after reopen"
        assert lease in s.leases()
        assert sorted(s.lease_time_to_live(lease, keys=True).keys) == [b"leased", b"t/2"]
        # writing continues at the next revision
        assert s.put(b"after", b"1").revision == rv(35)
        # leases still work after reopen: revoke deletes the keys in one revision
        s.lease_revoke(lease)
        assert s.revision == rv(36)
        assert s.get(b"leased") is None and s.get(b"t/2") is None
    with Store.open(data_dir) as s:
        assert s.revision == rv(36)
        assert lease not in s.leases()
        assert s.get(b"after") is not None and s.get(b"leased") is None


def test_watch_history_after_reopen(data_dir: str) -> None:
    with Store.open(data_dir) as s:
        for i in range(20):
            s.put(b"h/%d" % (i % 4), b"%d" % i)
        s.delete(b"h/0")
    with Store.open(data_dir) as s:
        with s.watch(b"h/", prefix_end(b"h/"), start_revision=BASE) as w:
            evs = []
            for _ in range(50):
                evs.extend(w.poll(timeout=1))
                if len(evs) >= 21:
                    break
        assert [e.kv.mod_revision for e in evs] == [rv(n) for n in range(1, 22)]
        assert evs[-1].type == "DELETE" and evs[-1].kv.key == b"h/0"


def test_compaction_survives_reopen(data_dir: str) -> None:
    with Store.open(data_dir) as s:
        for i in range(10):
            s.put(b"c", b"%d" % i)
        s.compact(rv(7))
    with Store.open(data_dir) as s:
        assert s.stats()["compact_revision"] == rv(7)
        with pytest.raises(CompactedError):
            s.get(b"c", revision=rv(6))
        assert s.get(b"c", revision=rv(7)).value == b"6"  # type: ignore[union-attr]
        with pytest.raises(CompactedError):
            s.compact(rv(7))
        s.compact(rv(9))


def test_snapshots_are_taken_and_reopen_after_snapshot(data_dir: str) -> None:
    with Store.open(data_dir, snapshot_every=10) as s:
        lease = s.lease_grant(3600)
        for i in range(105):
            s.put(b"s/%03d" % (i % 40), b"%d" % i, lease=lease if i % 10 == 0 else 0)
        s.delete(b"s/001")
        s.compact(rv(50))
        want = _dump(s)
        want_past = {rev: _dump(s, rev) for rev in (rv(50), rv(80), rv(105), rv(106))}
        assert s.stats()["applied_index"] > 0
    snaps = glob.glob(os.path.join(data_dir, "snap", "*.snap"))
    assert snaps, "snapshot_every=10 with 100+ writes made no snapshot"
    with Store.open(data_dir, snapshot_every=10) as s:
        assert s.revision == rv(106)
        assert _dump(s) == want
        for rev, w in want_past.items():
            assert _dump(s, rev) == w, f"history at {rev} after reopen from snapshot"
        with pytest.raises(CompactedError):
            s.get(b"s/000", revision=rv(49))
        assert lease in s.leases()
        leased = sorted(s.lease_time_to_live(lease, keys=True).keys)
        assert leased == sorted({kv[0] for kv in want if kv[5] == lease})
        for i in range(105, 130):
            s.put(b"s/%03d" % (i % 40), b"%d" % i)
        want2 = _dump(s)
        rev2 = s.revision
    with Store.open(data_dir) as s:
        assert s.revision == rev2 == rv(131)
        assert _dump(s) == want2


def test_reopen_without_fsync_after_clean_close(data_dir: str) -> None:
    with Store.open(data_dir, fsync=False) as s:
        for i in range(100):
            s.put(b"n/%d" % i, b"%d" % i)
    with Store.open(data_dir, fsync=False) as s:
        assert s.revision == rv(100)
        assert s.range(b"n/", prefix_end(b"n/")).count == 100


def test_memory_store_is_not_persistent(tmp_path) -> None:
    with Store.memory() as s:
        s.put(b"k", b"v")
    with Store.memory() as s:
        assert s.revision == BASE and s.get(b"k") is None


_TRY_OPEN = textwrap.dedent(
    """
    import sys
    from kubecore.store import Store, LockedError
    try:
        s = Store.open(sys.argv[1])
    except LockedError as e:
        print("LockedError", e)
        sys.exit(0)
    print("OPENED", s.revision)
    s.close()
    """
)


def _try_open_in_child(path: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", _TRY_OPEN, path], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_second_process_gets_locked_error(data_dir: str) -> None:
    with Store.open(data_dir) as s:
        s.put(b"k", b"v")
        assert _try_open_in_child(data_dir).startswith("LockedError")
        # the holder is unaffected
        assert s.put(b"k2", b"v").revision == rv(2)
    # released on close: another process can open it and sees the data
    assert _try_open_in_child(data_dir) == f"OPENED {rv(2)}"


def test_lock_released_when_holder_process_dies(data_dir: str) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from kubecore.store import Store; s = Store.open(sys.argv[1]); "
            "s.put(b'k', b'v'); print('ready', flush=True); time.sleep(60)",
            data_dir,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(LockedError):
            Store.open(data_dir)
    finally:
        holder.kill()
        holder.wait()
    with Store.open(data_dir) as s:
        assert s.get(b"k").value == b"v"  # type: ignore[union-attr]


def test_each_sequential_durable_put_is_fsynced(data_dir: str) -> None:
    """With fsync=True a put returns only once it is on disk: n sequential puts (nothing to
    group them with) need at least n fsyncs."""
    with Store.open(data_dir) as s:
        before = s.stats()["fsyncs"]
        for i in range(20):
            s.put(b"seq/%d" % i, b"v")
        assert s.stats()["fsyncs"] - before >= 20
