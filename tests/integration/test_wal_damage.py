"""WAL damage: a torn tail is repaired (only the torn write is lost); corruption in the middle
of the log is refused with CorruptionError naming the segment file.

The writes are made by a child process that exits with os._exit() right after its last
acknowledged write (no close(), no final snapshot), like a crash. Each test gives one write a
distinctive random value so that the test can find that write's record in the segment files.
"""

from __future__ import annotations

import glob
import os
import random
import subprocess
import sys
import textwrap

import pytest

from kubecore.store import CorruptionError, Store, StoreError

BASE = 1  # etcd: a new store is at revision 1; write i of the child is at revision BASE + i

CHILD = textwrap.dedent(
    r"""
    import os, random, sys
    from kubecore.store import Store

    path, n = sys.argv[1], int(sys.argv[2])

    def value(i):
        return random.Random(i).randbytes(3000 if i % 50 == 0 else 200)

    s = Store.open(path)
    base = s.revision
    for i in range(1, n + 1):
        r = s.put(b"wal/%05d" % i, value(i))
        assert r.revision == base + i, (r.revision, base, i)
    print("done", flush=True)
    os._exit(0)
    """
)


def _value(i: int) -> bytes:
    return random.Random(i).randbytes(3000 if i % 50 == 0 else 200)


def _write(path: str, n: int) -> None:
    out = subprocess.run([sys.executable, "-c", CHILD, path, str(n)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "done", out.stderr[-3000:]


def _segments(path: str) -> list[str]:
    segs = sorted(glob.glob(os.path.join(path, "wal", "*.wal")))
    assert segs, f"no WAL segments in {path}/wal"
    return segs


def _data_end(buf: bytes) -> int:
    """Index just past the last non-zero byte."""
    return len(buf.rstrip(b"\0"))


def _find_record(path: str, marker: bytes) -> tuple[str, int]:
    """(segment, offset) of the first occurrence of `marker` in the WAL."""
    for seg in _segments(path):
        with open(seg, "rb") as f:
            buf = f.read()
        at = buf.find(marker)
        if at >= 0:
            return seg, at
    pytest.fail("the written value is not stored verbatim in any WAL segment; cannot locate its record")


def _assert_tail(path: str, seg: str) -> None:
    later = [s for s in _segments(path) if s > seg]
    for s in later:
        with open(s, "rb") as f:
            assert _data_end(f.read()) == 0, f"{s} holds data after {seg}: the test's tear would not be at the tail"


def _check_prefix_intact(s: Store, n: int) -> None:
    r = s.range(b"wal/", b"wal0")
    assert r.count == n
    for i, kv in enumerate(r.kvs, start=1):
        assert kv.key == b"wal/%05d" % i
        assert kv.value == _value(i), f"write {i} damaged"
        assert kv.mod_revision == BASE + i and kv.version == 1


def test_segments_are_preallocated_and_zero_filled(tmp_path) -> None:
    path = str(tmp_path / "d")
    _write(path, 5)
    seg, _ = _find_record(path, _value(5))
    with open(seg, "rb") as f:
        buf = f.read()
    end = _data_end(buf)
    assert 0 < end < len(buf), "segment is not preallocated past its last record"
    assert buf[end:] == b"\0" * (len(buf) - end)


@pytest.mark.parametrize("damage", ["zero", "garble"])
def test_torn_last_record_is_dropped(tmp_path, damage: str) -> None:
    n = 100  # the last write (100) has a distinctive 3000-byte value
    path = str(tmp_path / "d")
    _write(path, n)
    last = _value(n)
    seg, at = _find_record(path, last)
    _assert_tail(path, seg)
    with open(seg, "r+b") as f:
        buf = bytearray(f.read())
        end = _data_end(bytes(buf))
        assert end >= at + len(last)
        tear = at + len(last) - 100  # the write stopped 100 bytes before the end of the value
        if damage == "zero":
            buf[tear:end] = bytes(end - tear)
        else:
            rng = random.Random(7)
            junk = bytes(rng.randrange(1, 256) for _ in range(100))
            buf[tear : tear + 100] = junk
            buf[tear + 100 : end] = bytes(end - tear - 100)
        f.seek(0)
        f.write(buf)
    with Store.open(path) as s:
        assert s.revision == BASE + n - 1, "only the torn write may be lost"
        assert s.get(b"wal/%05d" % n) is None
        _check_prefix_intact(s, n - 1)
        # the log was repaired: new writes go after the last good record and survive a reopen
        assert s.put(b"after", b"repair").revision == BASE + n
    with Store.open(path) as s:
        assert s.revision == BASE + n
        assert s.get(b"after").value == b"repair"  # type: ignore[union-attr]
        _check_prefix_intact(s, n - 1)


def test_last_bytes_of_log_zeroed(tmp_path) -> None:
    """Zero the very last bytes of written data, whatever record they belong to."""
    n = 30
    path = str(tmp_path / "d")
    _write(path, n)
    segs = _segments(path)
    newest = None
    for seg in segs:
        with open(seg, "rb") as f:
            if _data_end(f.read()):
                newest = seg
    assert newest is not None
    with open(newest, "r+b") as f:
        buf = bytearray(f.read())
        end = _data_end(bytes(buf))
        buf[end - 4 : end] = bytes(4)
        f.seek(0)
        f.write(buf)
    with Store.open(path) as s:
        assert s.revision in (BASE + n - 1, BASE + n)
        _check_prefix_intact(s, s.revision - BASE)
        assert s.put(b"after", b"x").revision == s.revision
        rev = s.revision
    with Store.open(path) as s:
        assert s.revision == rev


def test_corrupted_middle_is_refused(tmp_path) -> None:
    n = 200  # write 50 has a distinctive value; 150 valid writes follow it
    path = str(tmp_path / "d")
    _write(path, n)
    marker = _value(50)
    seg, at = _find_record(path, marker)
    with open(seg, "r+b") as f:
        buf = bytearray(f.read())
        pos = at + len(marker) // 2
        buf[pos] ^= 0x5A
        f.seek(0)
        f.write(buf)
    # sanity: the later writes really are in the log after the flipped byte
    later_seg, later_at = _find_record(path, _value(150))
    assert (later_seg, later_at) > (seg, pos)
    with pytest.raises(CorruptionError) as exc:
        Store.open(path)
    assert issubclass(CorruptionError, StoreError)
    assert os.path.basename(seg) in str(exc.value), f"message does not name the file: {exc.value}"
