"""Crash safety: kill -9 a writer at random moments; every acknowledged write survives.

A child process opens Store.open(dir) and writes unique keys in a loop (plain puts in some
rounds, batches of concurrent aput in others), printing each acknowledged revision. The parent
SIGKILLs it at a random moment (sometimes before it even finished opening/recovering), reopens
the store and checks:

- every acknowledged write is present with the acknowledged revision and value;
- revisions are contiguous: each revision after the new store's initial one (1, as in etcd) up to
  the current revision is exactly one put (no holes, no duplicates), since every write is a put
  of a fresh key.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time

from kubecore.store import Store, prefix_end

PREFIX = b"/crash/"

CHILD = textwrap.dedent(
    r"""
    import asyncio, os, sys
    from kubecore.store import Store

    path, rnd, mode, ack_path = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]

    def key(i):
        return b"/crash/%03d/%07d" % (rnd, i)

    def value(i):
        return (b"r%d:i%d;" % (rnd, i)) * (1 + (i * 7919 + rnd) % 300)

    ack = open(ack_path, "w", buffering=1)
    s = Store.open(path)
    ack.write("open %d\n" % s.revision)
    ack.flush()

    if mode == "sync":
        i = 0
        while True:
            r = s.put(key(i), value(i))
            ack.write("%d %d %d\n" % (r.revision, rnd, i))
            ack.flush()
            i += 1
    else:
        async def one(i):
            r = await s.aput(key(i), value(i))
            ack.write("%d %d %d\n" % (r.revision, rnd, i))
            ack.flush()

        async def main():
            i = 0
            while True:
                await asyncio.gather(*(one(j) for j in range(i, i + 16)))
                i += 16

        asyncio.run(main())
    """
)


def _key(rnd: int, i: int) -> bytes:
    return b"/crash/%03d/%07d" % (rnd, i)


def _value(rnd: int, i: int) -> bytes:
    return (b"r%d:i%d;" % (rnd, i)) * (1 + (i * 7919 + rnd) % 300)


def _read_acks(ack_path: str) -> tuple[bool, list[tuple[int, int, int]]]:
    opened = False
    acks = []
    if not os.path.exists(ack_path):
        return opened, acks
    with open(ack_path) as f:
        data = f.read()
    for line in data.split("\n")[:-1]:  # the last element is "" or a torn line
        if line.startswith("open "):
            opened = True
            continue
        rev, rnd, i = (int(x) for x in line.split())
        acks.append((rev, rnd, i))
    return opened, acks


def _verify(path: str, acked: dict[tuple[int, int], int], seed: int, rnd: int, base: int) -> int:
    ctx = f"(seed={seed}, after round {rnd})"
    with Store.open(path) as s:
        current = s.revision
        r = s.range(PREFIX, prefix_end(PREFIX))
        assert r.count == current - base, f"{r.count} keys but revision {current} {ctx}"
        mods = sorted(kv.mod_revision for kv in r.kvs)
        assert mods == list(range(base + 1, current + 1)), f"revisions are not contiguous {ctx}"
        for kv in r.kvs:
            assert kv.create_revision == kv.mod_revision and kv.version == 1, kv
        # spot-check the point-read path too
        for kv in r.kvs[:: max(1, len(r.kvs) // 20)]:
            assert s.get(kv.key) == kv
        by_key = {kv.key: kv for kv in r.kvs}
        for (a_rnd, i), rev in acked.items():
            kv = by_key.get(_key(a_rnd, i))
            assert kv is not None, f"acknowledged write {a_rnd}/{i} at revision {rev} lost {ctx}"
            assert kv.mod_revision == rev, f"{a_rnd}/{i}: acked at {rev}, stored at {kv.mod_revision} {ctx}"
            assert kv.value == _value(a_rnd, i), f"{a_rnd}/{i}: wrong value {ctx}"
        # any write that survived but was not acked must still be a well-formed write of ours
        for kv in r.kvs:
            parts = kv.key[len(PREFIX):].split(b"/")
            assert kv.value == _value(int(parts[0]), int(parts[1])), kv.key
        return current


def test_kill9_at_random_moments(tmp_path) -> None:
    seed = int(os.environ.get("KUBECORE_CRASH_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    path = str(tmp_path / "data")
    acked: dict[tuple[int, int], int] = {}
    with Store.open(path) as s:
        base = s.revision  # etcd: 1 on a new store
    assert base == 1
    rounds = 24
    rounds_with_acks = 0
    last_rev = 0
    for rnd in range(rounds):
        ack_path = str(tmp_path / f"acks-{rnd}.txt")
        mode = "async" if rnd % 2 else "sync"
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, path, str(rnd), mode, ack_path],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            if rnd % 3 == 0:
                # anywhere from "still importing" through "recovering" to "writing"
                time.sleep(rng.uniform(0.0, 0.8))
            else:
                # once it is writing, at a random moment
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline and child.poll() is None:
                    if _read_acks(ack_path)[1]:
                        break
                    time.sleep(0.01)
                time.sleep(rng.uniform(0.0, 0.4))
            exited_early = child.poll()
            os.kill(child.pid, signal.SIGKILL)
        finally:
            child.kill()
            _, err = child.communicate(timeout=30)
        assert exited_early is None, f"writer died by itself (rc={exited_early}): {err.decode()[-2000:]}"
        opened, acks = _read_acks(ack_path)
        if acks:
            rounds_with_acks += 1
        for rev, a_rnd, i in acks:
            assert (a_rnd, i) not in acked
            acked[(a_rnd, i)] = rev
        assert len(set(acked.values())) == len(acked), f"two acked writes share a revision (seed={seed})"
        current = _verify(path, acked, seed, rnd, base)
        assert current >= last_rev, f"revision went backwards: {last_rev} -> {current} (seed={seed})"
        last_rev = current
    assert rounds_with_acks >= rounds // 2, f"only {rounds_with_acks} rounds acknowledged writes: test too weak"
    assert len(acked) > 100
