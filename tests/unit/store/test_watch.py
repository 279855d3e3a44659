"""Watch (etcd watchable_store.go semantics).

- start_revision=0: events after the current revision only.
- start_revision=r: every event with revision >= r from history, then live, exactly once, in
  (revision, order-within-the-txn) order.
- start_revision < compact revision: the watch fails with CompactedError(compact_revision).
- a watcher that does not read never blocks writers, and loses nothing.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from kubecore.store import CompactedError, Compare, Event, Op, Store, Watch, prefix_end

BASE = 1  # etcd: a new store is at revision 1


def rv(n: int) -> int:
    """Revision of the n-th write on a new store."""
    return BASE + n


def collect(w: Watch, n: int, *, timeout: float = 10.0) -> list[Event]:
    """Poll until exactly n events arrived (fail on timeout); then check nothing extra is pending."""
    got: list[Event] = []
    deadline = time.monotonic() + timeout
    while len(got) < n:
        left = deadline - time.monotonic()
        assert left > 0, f"timed out: got {len(got)} of {n} events: {[_ev(e) for e in got][-5:]}"
        got.extend(w.poll(max_events=1024, timeout=min(left, 1.0)))
    assert len(got) == n, f"got {len(got)} events, expected {n}: {[_ev(e) for e in got]}"
    return got


def assert_no_more(w: Watch, wait: float = 0.2) -> None:
    extra = w.poll(timeout=wait)
    assert extra == [], f"unexpected extra events: {[_ev(e) for e in extra]}"


def _ev(e: Event) -> tuple:
    return (e.type, e.kv.key, e.kv.value, e.kv.mod_revision)


# ---------------------------------------------------------------- basics


def test_single_key_live_events(store: Store) -> None:
    store.put(b"other", b"0")  # rv(1)
    w = store.watch(b"k")
    assert isinstance(w, Watch)
    store.put(b"k", b"1")  # rv(2)
    store.put(b"kk", b"x")  # rv(3) (not watched: end=None is a single key)
    store.put(b"k", b"2")  # rv(4)
    store.delete(b"k")  # rv(5)
    evs = collect(w, 3)
    assert [e.type for e in evs] == ["PUT", "PUT", "DELETE"]
    p1, p2, d = evs
    assert (p1.kv.key, p1.kv.value, p1.kv.create_revision, p1.kv.mod_revision, p1.kv.version) == (b"k", b"1", rv(2), rv(2), 1)
    assert (p2.kv.key, p2.kv.value, p2.kv.create_revision, p2.kv.mod_revision, p2.kv.version) == (b"k", b"2", rv(2), rv(4), 2)
    assert d.kv.key == b"k" and d.kv.mod_revision == rv(5) and d.kv.value == b""
    assert all(e.prev_kv is None for e in evs)  # not asked for
    assert_no_more(w)
    w.cancel()


def test_start_revision_zero_means_future_only(store: Store) -> None:
    for i in range(5):
        store.put(b"p/%d" % i, b"old")
    w = store.watch(b"p/", prefix_end(b"p/"))
    assert_no_more(w)
    store.put(b"p/9", b"new")
    evs = collect(w, 1)
    assert evs[0].kv.key == b"p/9" and evs[0].kv.mod_revision == rv(6)
    w.cancel()


def test_prefix_watch_filters_keys(store: Store) -> None:
    w = store.watch(b"/registry/pods/", prefix_end(b"/registry/pods/"))
    store.put(b"/registry/pods/ns/a", b"1")
    store.put(b"/registry/podsx", b"no")
    store.put(b"/registry/pod", b"no")
    store.put(b"/registry/services/ns/a", b"no")
    store.put(b"/registry/pods/ns/b", b"2")
    store.delete(b"/registry/", prefix_end(b"/registry/"))
    evs = collect(w, 4)
    assert [_ev(e)[:2] for e in evs] == [
        ("PUT", b"/registry/pods/ns/a"),
        ("PUT", b"/registry/pods/ns/b"),
        ("DELETE", b"/registry/pods/ns/a"),
        ("DELETE", b"/registry/pods/ns/b"),
    ]
    assert evs[2].kv.mod_revision == evs[3].kv.mod_revision == rv(6)
    assert_no_more(w)
    w.cancel()


def test_watch_from_key_to_end(store: Store) -> None:
    w = store.watch(b"m", b"\0")
    for k in [b"a", b"m", b"z", b"\xff"]:
        store.put(k, b"v")
    assert [e.kv.key for e in collect(w, 3)] == [b"m", b"z", b"\xff"]
    w.cancel()


def test_history_replay_then_live(store: Store) -> None:
    for i in range(1, 11):
        store.put(b"h/%d" % (i % 3), b"%d" % i)  # write i at rv(i)
    store.delete(b"h/0")  # rv(11)
    w = store.watch(b"h/", prefix_end(b"h/"), start_revision=rv(4))
    hist = collect(w, 8)
    assert [e.kv.mod_revision for e in hist] == [rv(n) for n in range(4, 12)]
    assert [e.type for e in hist] == ["PUT"] * 7 + ["DELETE"]
    for e in hist[:-1]:
        i = e.kv.mod_revision - BASE
        assert e.kv.key == b"h/%d" % (i % 3) and e.kv.value == b"%d" % i
    # versions in replayed events are the versions at that revision
    assert [e.kv.version for e in hist if e.kv.key == b"h/1"] == [2, 3, 4]  # writes 4, 7 and 10
    store.put(b"h/0", b"live")  # rv(12): new generation
    store.put(b"zzz", b"not watched")
    live = collect(w, 1)
    assert live[0].kv.mod_revision == rv(12)
    assert (live[0].kv.create_revision, live[0].kv.version) == (rv(12), 1)
    assert_no_more(w)
    w.cancel()


def test_future_start_revision(store: Store) -> None:
    store.put(b"f", b"0")  # rv(1)
    w = store.watch(b"f", start_revision=rv(4))
    for i in range(1, 6):
        store.put(b"f", b"%d" % i)  # rv(2)..rv(6)
    assert [e.kv.mod_revision for e in collect(w, 3)] == [rv(4), rv(5), rv(6)]
    assert_no_more(w)
    w.cancel()


def test_replay_concurrent_with_writes_is_exactly_once(store: Store) -> None:
    """Writes racing with the history->live handover must be neither lost nor duplicated."""
    for i in range(2000):
        store.put(b"r/%d" % (i % 10), b"%d" % i)
    stop = threading.Event()

    def writer() -> None:
        i = 0
        while not stop.is_set() and i < 3000:
            store.put(b"r/%d" % (i % 10), b"live%d" % i)
            i += 1

    t = threading.Thread(target=writer)
    t.start()
    try:
        w = store.watch(b"r/", prefix_end(b"r/"), start_revision=rv(1))
        time.sleep(0.2)
    finally:
        stop.set()
        t.join()
    total = store.revision - BASE
    evs = collect(w, total, timeout=30)
    assert [e.kv.mod_revision for e in evs] == [rv(n) for n in range(1, total + 1)]
    assert_no_more(w)
    w.cancel()


# ---------------------------------------------------------------- prev_kv


def test_prev_kv_live(store: Store) -> None:
    w = store.watch(b"k", prev_kv=True)
    store.put(b"k", b"1")
    store.put(b"k", b"2")
    store.delete(b"k")
    c, u, d = collect(w, 3)
    assert c.prev_kv is None
    assert u.prev_kv is not None
    assert (u.prev_kv.value, u.prev_kv.mod_revision, u.prev_kv.version) == (b"1", rv(1), 1)
    assert d.type == "DELETE"
    assert d.prev_kv is not None
    assert (d.prev_kv.key, d.prev_kv.value, d.prev_kv.mod_revision, d.prev_kv.version) == (b"k", b"2", rv(2), 2)
    w.cancel()


def test_prev_kv_in_history_replay(store: Store) -> None:
    store.put(b"k", b"1")
    store.put(b"k", b"2")
    store.delete(b"k")
    store.put(b"k", b"3")
    w = store.watch(b"k", start_revision=rv(2), prev_kv=True)
    u, d, c = collect(w, 3)
    assert u.prev_kv is not None and u.prev_kv.value == b"1"
    assert d.prev_kv is not None and d.prev_kv.value == b"2"
    assert c.prev_kv is None
    w.cancel()


# ---------------------------------------------------------------- txns


def test_txn_events_exactly_once_in_order(store: Store) -> None:
    store.put(b"t/old", b"0")  # rv(1)
    w = store.watch(b"t/", prefix_end(b"t/"), prev_kv=True)
    store.txn(
        compare=[Compare.version(b"t/old", "=", 1)],
        success=[
            Op.put(b"t/c", b"1"),
            Op.put(b"t/a", b"1"),
            Op.delete(b"t/old"),
            Op.put(b"x/unwatched", b"1"),
            Op.put(b"t/b", b"1"),
        ],
        failure=[],
    )  # rv(2)
    store.put(b"t/a", b"2")  # rv(3)
    evs = collect(w, 5)
    assert [(e.type, e.kv.key, e.kv.mod_revision) for e in evs] == [
        # within one revision, the order of the ops in the txn (etcd sub-revisions)
        ("PUT", b"t/c", rv(2)),
        ("PUT", b"t/a", rv(2)),
        ("DELETE", b"t/old", rv(2)),
        ("PUT", b"t/b", rv(2)),
        ("PUT", b"t/a", rv(3)),
    ]
    assert evs[2].prev_kv is not None and evs[2].prev_kv.value == b"0"
    assert_no_more(w)
    # the same from history
    w2 = store.watch(b"t/", prefix_end(b"t/"), start_revision=rv(2))
    evs2 = collect(w2, 5)
    assert [(e.type, e.kv.key, e.kv.mod_revision) for e in evs2] == [(e.type, e.kv.key, e.kv.mod_revision) for e in evs]
    assert_no_more(w2)
    w.cancel()
    w2.cancel()


def test_failed_txn_and_noop_delete_produce_no_events(store: Store) -> None:
    w = store.watch(b"\0", b"\0")
    store.txn(compare=[Compare.value(b"nope", "=", b"x")], success=[Op.put(b"a", b"1")], failure=[])
    store.delete(b"missing")
    store.put(b"b", b"1")
    evs = collect(w, 1)
    assert evs[0].kv.key == b"b" and evs[0].kv.mod_revision == rv(1)
    assert_no_more(w)
    w.cancel()


# ---------------------------------------------------------------- iteration, poll, cancel


def test_poll_max_events_and_timeout(store: Store) -> None:
    w = store.watch(b"\0", b"\0")
    t0 = time.monotonic()
    assert w.poll(timeout=0.2) == []
    assert time.monotonic() - t0 >= 0.15
    for i in range(10):
        store.put(b"k%d" % i, b"v")
    got: list[Event] = []
    deadline = time.monotonic() + 10
    while len(got) < 10 and time.monotonic() < deadline:
        batch = w.poll(max_events=3, timeout=1)
        assert len(batch) <= 3
        got.extend(batch)
    assert [e.kv.mod_revision for e in got] == [rv(n) for n in range(1, 11)]
    w.cancel()


def test_sync_iteration(store: Store, bounded) -> None:
    w = store.watch(b"it/", prefix_end(b"it/"))
    for i in range(5):
        store.put(b"it/%d" % i, b"v")
    got = []

    def consume() -> None:
        for ev in w:
            got.append(ev.kv.key)
            if len(got) == 5:
                break

    bounded(consume, what="iterating 5 available events")
    assert got == [b"it/%d" % i for i in range(5)]
    w.cancel()


def test_cancel_before_iteration_stops(store: Store, bounded) -> None:
    w = store.watch(b"k")
    w.cancel()
    with pytest.raises(StopIteration):
        bounded(lambda: next(w), what="next() on a cancelled watch")
    w.cancel()  # idempotent


def test_cancel_wakes_blocked_iterator(store: Store) -> None:
    w = store.watch(b"k")
    out: dict[str, object] = {}

    def consume() -> None:
        got = []
        for ev in w:  # blocks: nothing is written
            got.append(ev)
        out["events"] = got

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    time.sleep(0.3)
    assert t.is_alive()
    w.cancel()
    t.join(timeout=5)
    assert not t.is_alive(), "cancel() did not end a blocked iteration"
    assert out["events"] == []


def test_context_manager_cancels(store: Store, bounded) -> None:
    with store.watch(b"k") as w:
        store.put(b"k", b"1")
        assert len(collect(w, 1)) == 1
    store.put(b"k", b"2")
    with pytest.raises(StopIteration):
        bounded(lambda: next(w), what="next() after the with block")


def test_cancelled_watch_gets_no_more_events(store: Store) -> None:
    w1 = store.watch(b"k")
    w2 = store.watch(b"k")
    store.put(b"k", b"1")
    w1.cancel()
    store.put(b"k", b"2")
    assert [e.kv.value for e in collect(w2, 2)] == [b"1", b"2"]
    w2.cancel()


def test_many_watchers_see_same_stream(store: Store) -> None:
    ws = [store.watch(b"s/", prefix_end(b"s/")) for _ in range(20)]
    for i in range(50):
        store.put(b"s/%d" % (i % 5), b"%d" % i)
    for w in ws:
        assert [e.kv.mod_revision for e in collect(w, 50)] == [rv(n) for n in range(1, 51)]
        w.cancel()


# ---------------------------------------------------------------- compaction


def test_watch_from_compacted_revision_fails(store: Store, bounded) -> None:
    for i in range(10):
        store.put(b"c", b"%d" % i)
    store.compact(rv(6))
    w = store.watch(b"c", start_revision=rv(3))
    with pytest.raises(CompactedError) as exc:
        w.poll(timeout=5)
    assert exc.value.compact_revision == rv(6)
    w2 = store.watch(b"c", start_revision=rv(5))
    with pytest.raises(CompactedError) as exc:
        bounded(lambda: next(w2), what="next() on a compacted watch")
    assert exc.value.compact_revision == rv(6)


def test_watch_from_compact_revision_itself_works(store: Store) -> None:
    for i in range(10):
        store.put(b"c", b"%d" % i)  # rv(1)..rv(10)
    store.compact(rv(6))
    w = store.watch(b"c", start_revision=rv(6))
    assert [e.kv.mod_revision for e in collect(w, 5)] == [rv(n) for n in (6, 7, 8, 9, 10)]
    w.cancel()


def test_compaction_and_lagging_watcher(store: Store) -> None:
    """A watcher that has not caught up when history below it is compacted is cancelled with
    CompactedError (etcd). Whatever it was delivered before is a gap-free prefix of history; an
    implementation that had already queued everything may deliver it all instead."""
    w = store.watch(b"lag/", prefix_end(b"lag/"), start_revision=rv(1))
    n = 20000
    for i in range(n):
        store.put(b"lag/%d" % (i % 100), b"%d" % i)
    store.compact(rv(n))
    got: list[int] = []
    err: CompactedError | None = None
    try:
        while True:
            batch = w.poll(timeout=1)
            if not batch:
                break
            got.extend(e.kv.mod_revision for e in batch)
    except CompactedError as e:
        err = e
    assert got == [rv(i) for i in range(1, len(got) + 1)], "delivered events must be a gap-free prefix"
    if err is not None:
        assert err.compact_revision == rv(n)
        assert len(got) < n
    else:
        assert len(got) == n
    w.cancel()


# ---------------------------------------------------------------- slow watchers


def test_slow_watcher_does_not_block_writers_and_loses_nothing(store: Store) -> None:
    n = 50_000
    slow = store.watch(b"slow/", prefix_end(b"slow/"), prev_kv=True)
    done = threading.Event()
    failure: list[BaseException] = []

    def writer() -> None:
        try:
            for i in range(n):
                store.put(b"slow/%d" % (i % 1000), b"%d" % i)
        except BaseException as e:  # pragma: no cover - reported below
            failure.append(e)
        finally:
            done.set()

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    assert done.wait(timeout=240), "writers are blocked by a watcher that does not read"
    assert not failure, failure
    assert store.revision == rv(n)
    revs: list[int] = []
    deadline = time.monotonic() + 120
    while len(revs) < n:
        assert time.monotonic() < deadline, f"only {len(revs)} of {n} events delivered"
        batch = slow.poll(max_events=4096, timeout=1)
        for e in batch:
            i = e.kv.mod_revision - rv(1)
            assert e.kv.key == b"slow/%d" % (i % 1000)
            assert e.kv.value == b"%d" % i
            if i >= 1000:
                assert e.prev_kv is not None and e.prev_kv.value == b"%d" % (i - 1000)
            revs.append(e.kv.mod_revision)
    assert revs == [rv(i + 1) for i in range(n)]
    assert_no_more(slow)
    slow.cancel()


# ---------------------------------------------------------------- asyncio


async def test_async_iteration(store: Store) -> None:
    w = store.watch(b"a/", prefix_end(b"a/"))

    async def writer() -> None:
        for i in range(10):
            await store.aput(b"a/%d" % i, b"%d" % i)

    task = asyncio.create_task(writer())
    got = []

    async def consume() -> None:
        async for ev in w:
            got.append(ev.kv.key)
            if len(got) == 10:
                break

    await asyncio.wait_for(consume(), timeout=10)
    await task
    assert got == [b"a/%d" % i for i in range(10)]
    w.cancel()


async def test_async_iteration_does_not_block_event_loop(store: Store) -> None:
    w = store.watch(b"k")
    ticks = 0
    stop = False

    async def ticker() -> None:
        nonlocal ticks
        while not stop:
            ticks += 1
            await asyncio.sleep(0.01)

    tick_task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    # the event arrives from another thread 0.5 s from now
    timer = threading.Timer(0.5, lambda: store.put(b"k", b"v"))
    timer.start()
    try:
        ev = await asyncio.wait_for(w.__anext__(), timeout=10)
    finally:
        timer.join()
        stop = True
        await tick_task
    assert ev.kv.key == b"k"
    assert ticks >= 10, f"event loop was blocked while awaiting the watch (ticks={ticks})"
    w.cancel()


async def test_cancel_ends_async_iteration(store: Store) -> None:
    w = store.watch(b"k")
    got = []

    async def consume() -> None:
        async for ev in w:
            got.append(ev)

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.2)
    assert not task.done()
    w.cancel()
    await asyncio.wait_for(task, timeout=5)  # ends normally (StopAsyncIteration)
    assert got == []
    with pytest.raises(StopAsyncIteration):
        await w.__anext__()


async def test_async_compacted_error(store: Store) -> None:
    for i in range(5):
        store.put(b"c", b"%d" % i)
    store.compact(rv(4))
    w = store.watch(b"c", start_revision=rv(2))
    with pytest.raises(CompactedError) as exc:
        await asyncio.wait_for(w.__anext__(), timeout=5)
    assert exc.value.compact_revision == rv(4)
