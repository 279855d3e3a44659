//! Watch hub behaviour, black-box through `Db` (in memory, through the Raft loop).
//!
//! Every test bounds its waits: a hang becomes a failure with a message, never a stuck run.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use kubecore_store::db::{Db, Options};
use kubecore_store::kv::{prefix_end, Event, EventType, KeyRange};
use kubecore_store::request::*;
use kubecore_store::watch::{WatchEnd, Watcher};

const WAIT: Duration = Duration::from_secs(20);

fn open(watch_buffer: usize) -> Arc<Db> {
    Arc::new(Db::open(Options { dir: None, fsync: false, watch_buffer, ..Default::default() }).unwrap())
}

fn put_op(key: &[u8], value: &[u8]) -> RequestOp {
    RequestOp::Put(PutRequest { key: key.to_vec(), value: value.to_vec(), lease: 0, prev_kv: false })
}

/// Writes `kvs` in one transaction; returns its revision.
fn put_all(db: &Db, kvs: &[(&[u8], &[u8])]) -> i64 {
    let ops = kvs.iter().map(|(k, v)| put_op(k, v)).collect();
    db.txn(TxnRequest { compare: vec![], success: ops, failure: vec![] }).unwrap().revision
}

fn put(db: &Db, key: &[u8], value: &[u8]) -> i64 {
    put_all(db, &[(key, value)])
}

fn delete(db: &Db, key: &[u8], end: Option<&[u8]>) -> i64 {
    let op = RequestOp::Delete(DeleteRequest { key: key.to_vec(), end: end.map(|e| e.to_vec().into()), prev_kv: false });
    db.txn(TxnRequest::single(op)).unwrap().revision
}

fn all_keys() -> KeyRange {
    KeyRange::new(Vec::new(), Some(vec![0]))
}

fn prefix(p: &[u8]) -> KeyRange {
    KeyRange::new(p.to_vec(), Some(prefix_end(p)))
}

/// Polls until an event at revision >= `until` arrived; returns the batches as delivered.
fn poll_until(db: &Db, w: &Arc<Watcher>, until: i64, max: usize) -> Vec<Vec<Arc<Event>>> {
    let deadline = Instant::now() + WAIT;
    let mut batches = Vec::new();
    let mut last = i64::MIN;
    while last < until {
        assert!(Instant::now() < deadline, "watch stalled at revision {last}, waiting for {until}");
        match db.poll(w, max, Duration::from_millis(100)) {
            Ok(b) if b.is_empty() => {}
            Ok(b) => {
                last = b.last().unwrap().kv.mod_revision;
                batches.push(b);
            }
            Err(end) => panic!("watch ended with {end:?} at revision {last}, waiting for {until}"),
        }
    }
    batches
}

/// Polls until the watch ends; returns the events delivered before that and how it ended.
fn poll_to_end(db: &Db, w: &Arc<Watcher>) -> (Vec<Arc<Event>>, WatchEnd) {
    let deadline = Instant::now() + WAIT;
    let mut got = Vec::new();
    loop {
        assert!(Instant::now() < deadline, "watch did not end");
        match db.poll(w, 1024, Duration::from_millis(50)) {
            Ok(b) => got.extend(b),
            Err(end) => return (got, end),
        }
    }
}

/// Nothing arrives within `wait`.
fn assert_quiet(db: &Db, w: &Arc<Watcher>, wait: Duration) {
    let got = db.poll(w, 1024, wait).unwrap();
    assert!(got.is_empty(), "unexpected events {got:?}");
}

/// (revision, key) of each event, checked to be strictly increasing: exactly once, in order.
fn ids(events: &[Arc<Event>]) -> Vec<(i64, Vec<u8>)> {
    let ids: Vec<(i64, Vec<u8>)> = events.iter().map(|e| (e.kv.mod_revision, e.kv.key.to_vec())).collect();
    for w in ids.windows(2) {
        assert!(w[0].0 <= w[1].0, "revision order broken: {:?} then {:?}", w[0], w[1]);
        assert!(w[0] != w[1], "duplicate event {:?}", w[0]);
    }
    ids
}

/// No revision is split across two poll batches.
fn assert_whole_revisions(batches: &[Vec<Arc<Event>>]) {
    for pair in batches.windows(2) {
        let (a, b) = (pair[0].last().unwrap(), pair[1].first().unwrap());
        assert_ne!(a.kv.mod_revision, b.kv.mod_revision, "revision {} split across two polls", a.kv.mod_revision);
    }
}

fn flat(batches: Vec<Vec<Arc<Event>>>) -> Vec<Arc<Event>> {
    batches.into_iter().flatten().collect()
}

/// Every write of `writers` threads: (revision -> keys) as the writers saw them acknowledged.
fn concurrent_writes(db: &Arc<Db>, writers: usize, per_writer: usize) -> BTreeMap<i64, BTreeSet<Vec<u8>>> {
    let handles: Vec<_> = (0..writers)
        .map(|t| {
            let db = db.clone();
            thread::spawn(move || {
                let mut mine = Vec::new();
                for i in 0..per_writer {
                    let keys: Vec<Vec<u8>> = if i % 7 == 3 {
                        (0..3).map(|j| format!("w{t}/{i}/{j}").into_bytes()).collect()
                    } else {
                        vec![format!("w{t}/{}", i % 5).into_bytes()]
                    };
                    let value = format!("{t}:{i}").into_bytes();
                    let kvs: Vec<(&[u8], &[u8])> = keys.iter().map(|k| (&k[..], &value[..])).collect();
                    mine.push((put_all(&db, &kvs), keys));
                }
                mine
            })
        })
        .collect();
    let mut all = BTreeMap::new();
    for h in handles {
        for (rev, keys) in h.join().unwrap() {
            assert!(all.insert(rev, keys.into_iter().collect::<BTreeSet<_>>()).is_none(), "two writes got revision {rev}");
        }
    }
    all
}

fn group(events: &[Arc<Event>]) -> BTreeMap<i64, BTreeSet<Vec<u8>>> {
    let mut m: BTreeMap<i64, BTreeSet<Vec<u8>>> = BTreeMap::new();
    for e in events {
        m.entry(e.kv.mod_revision).or_default().insert(e.kv.key.to_vec());
    }
    m
}

#[test]
fn synced_watcher_sees_every_event_once_in_order_under_concurrent_writers() {
    let db = open(8192);
    let start = db.revision();
    let w = db.watch(all_keys(), 0, None).unwrap();
    let consumer = {
        let (db, w) = (db.clone(), w.clone());
        // 4 writers x 150 writes, one revision each
        thread::spawn(move || flat(poll_until(&db, &w, start + 600, 100)))
    };
    let written = concurrent_writes(&db, 4, 150);
    let got = consumer.join().unwrap();
    ids(&got);
    assert_eq!(written.keys().copied().collect::<Vec<_>>(), (start + 1..=start + 600).collect::<Vec<_>>());
    assert_eq!(group(&got), written);
    // every event is the state the store reports for that key at that revision
    for e in &got {
        assert_eq!(db.get(&e.kv.key, e.kv.mod_revision).unwrap().as_ref(), Some(&e.kv));
    }
    assert_quiet(&db, &w, Duration::from_millis(20));
}

#[test]
fn a_slow_watcher_never_blocks_writers_and_still_gets_everything_once() {
    let db = open(4);
    let start = db.revision();
    let w = db.watch(all_keys(), 0, None).unwrap();
    let other = db.watch(prefix(b"k/"), 0, None).unwrap();
    // writers run while nobody reads either watcher
    let (tx, rx) = mpsc::channel();
    let writer = {
        let db = db.clone();
        thread::spawn(move || {
            let mut triples = Vec::new();
            for i in 0..5000u32 {
                let k = format!("k/{:02}", i % 50).into_bytes();
                let v = i.to_le_bytes();
                if i % 10 == 9 {
                    let (a, b) = (format!("t/{i}/a").into_bytes(), format!("t/{i}/b").into_bytes());
                    triples.push(put_all(&db, &[(&k, &v), (&a, &v), (&b, &v)]));
                } else {
                    put(&db, &k, &v);
                }
            }
            tx.send(triples).unwrap();
        })
    };
    let triples = rx.recv_timeout(WAIT).expect("writers blocked by a watcher that is not reading");
    writer.join().unwrap();
    let end = db.revision();
    assert_eq!(end, start + 5000);

    let batches = poll_until(&db, &w, end, 64);
    assert_whole_revisions(&batches);
    for b in &batches {
        for t in &triples {
            let n = b.iter().filter(|e| e.kv.mod_revision == *t).count();
            assert!(n == 0 || n == 3, "txn at {t} delivered {n} of its 3 events in one poll");
        }
    }
    let got = flat(batches);
    let got_ids = ids(&got);
    assert_eq!(got.len(), 5000 + 2 * triples.len());
    let revs: BTreeSet<i64> = got_ids.iter().map(|(r, _)| *r).collect();
    assert_eq!(revs, (start + 1..=end).collect());
    for (i, e) in got.iter().filter(|e| e.kv.key.starts_with(b"k/")).enumerate() {
        assert_eq!(e.kv.value.as_ref(), &(i as u32).to_le_bytes(), "k/ events out of write order");
    }
    // the second watcher, polled with a different batch size, sees its range exactly once too
    let other_events = flat(poll_until(&db, &other, end, 7));
    ids(&other_events);
    assert_eq!(other_events.len(), 5000);
    assert!(other_events.iter().all(|e| e.kv.key.starts_with(b"k/")));
    // both are live again: new writes arrive through the synced path
    let rev = put(&db, b"k/new", b"1");
    assert_eq!(ids(&flat(poll_until(&db, &w, rev, 64))), vec![(rev, b"k/new".to_vec())]);
    assert!(w.is_synced());
}

#[test]
fn a_buffer_that_overflows_inside_a_revision_takes_that_revision_back() {
    let db = open(4);
    let w = db.watch(all_keys(), 0, None).unwrap();
    let r1 = put(&db, b"a", b"1");
    let r2 = put(&db, b"b", b"1");
    // events 3 and 4 fit, the fifth does not: the two buffered events of r3 must be taken back
    let r3 = put_all(&db, &[(b"c", b"1"), (b"d", b"1"), (b"e", b"1")]);
    assert!(!w.is_synced());
    let got = flat(poll_until(&db, &w, r3, 100));
    let want: Vec<(i64, Vec<u8>)> =
        vec![(r1, b"a".to_vec()), (r2, b"b".to_vec()), (r3, b"c".to_vec()), (r3, b"d".to_vec()), (r3, b"e".to_vec())];
    assert_eq!(ids(&got), want);
    assert_quiet(&db, &w, Duration::from_millis(20));
}

#[test]
fn a_slow_reader_falls_behind_and_resyncs_many_times_without_loss() {
    // The consumer reads, but slower than the writers write: the watcher keeps overflowing its
    // buffer at arbitrary points (also inside multi-key revisions) and catching up again.
    let db = open(5);
    let start = db.revision();
    let w = db.watch(all_keys(), 0, None).unwrap();
    let consumer = {
        let (db, w) = (db.clone(), w.clone());
        thread::spawn(move || {
            let deadline = Instant::now() + WAIT;
            let (mut batches, mut n, mut behind) = (Vec::new(), 0, 0);
            while n < 600 + 2 * 4 * 21 {
                assert!(Instant::now() < deadline, "stalled after {n} events");
                behind += usize::from(!w.is_synced());
                // max = the buffer size: a buffered batch is always taken whole
                let b = db.poll(&w, 5, Duration::from_millis(100)).unwrap();
                n += b.len();
                if !b.is_empty() {
                    batches.push(b);
                }
                thread::sleep(Duration::from_millis(1));
            }
            (batches, behind)
        })
    };
    let written = concurrent_writes(&db, 4, 150);
    let (batches, behind) = consumer.join().unwrap();
    assert!(behind > 0, "the reader never fell behind; the test did not test anything");
    assert_whole_revisions(&batches);
    let got = flat(batches);
    ids(&got);
    assert_eq!(group(&got), written);
    assert_eq!(written.len(), 600);
    assert_eq!(*written.keys().next().unwrap(), start + 1);
}

#[test]
fn catching_up_never_splits_a_revision_even_past_max() {
    let db = open(8192);
    let rev = put_all(&db, &[(b"a", b"1"), (b"b", b"1"), (b"c", b"1")]);
    let replay = db.watch(all_keys(), rev, None).unwrap();
    let b = db.poll(&replay, 1, WAIT).unwrap();
    assert_eq!(b.len(), 3, "catch-up delivered {b:?}");
}

/// BUG: `Watcher::poll` drains the synced buffer with `min(len, max)` and so splits a revision
/// across two polls, while the catch-up path (`events_from`) always completes the revision. A
/// consumer that records "caught up to revision N" after each batch (a watch cache does) then
/// briefly believes it has all of N with only part of it. Fix in watch.rs `poll`: after
/// `let mut n = st.buf.len().min(max);` extend `n` while `st.buf[n].kv.mod_revision ==
/// st.buf[n - 1].kv.mod_revision`.
#[test]
fn a_synced_watcher_never_splits_a_revision_even_with_a_small_max() {
    let db = open(8192);
    let live = db.watch(all_keys(), 0, None).unwrap();
    let rev = put_all(&db, &[(b"a", b"2"), (b"b", b"2"), (b"c", b"2")]);
    let b = db.poll(&live, 1, WAIT).unwrap();
    assert!(b.iter().all(|e| e.kv.mod_revision == rev));
    assert_eq!(b.len(), 3, "a synced watcher split revision {rev}: first poll gave {} of 3 events", b.len());
}

#[test]
fn a_watch_from_the_past_replays_then_goes_live_without_gap_or_duplicate() {
    let db = open(16);
    let first = put(&db, b"p/0", &0u32.to_le_bytes());
    for i in 1..200u32 {
        put(&db, format!("p/{}", i % 9).as_bytes(), &i.to_le_bytes());
    }
    let w = db.watch(prefix(b"p/"), first, None).unwrap();
    assert!(!w.is_synced());
    // more writes race with the replay
    let writer = {
        let db = db.clone();
        thread::spawn(move || {
            let mut last = 0;
            for i in 200..800u32 {
                last = put(&db, format!("p/{}", i % 9).as_bytes(), &i.to_le_bytes());
                if i % 100 == 0 {
                    put(&db, b"q/outside", b"x");
                }
            }
            last
        })
    };
    let mut got = Vec::new();
    let deadline = Instant::now() + WAIT;
    while got.len() < 800 {
        assert!(Instant::now() < deadline, "stalled after {} events", got.len());
        got.extend(db.poll(&w, 50, Duration::from_millis(100)).unwrap());
    }
    let last = writer.join().unwrap();
    ids(&got);
    let values: Vec<u32> = got.iter().map(|e| u32::from_le_bytes(e.kv.value[..].try_into().unwrap())).collect();
    assert_eq!(values, (0..800).collect::<Vec<_>>());
    assert_eq!(got.last().unwrap().kv.mod_revision, last);
    assert_quiet(&db, &w, Duration::from_millis(20));
    assert!(w.is_synced());
}

#[test]
fn a_watch_from_the_future_skips_revisions_before_its_start() {
    let db = open(16);
    let now = db.revision();
    let w = db.watch(all_keys(), now + 3, None).unwrap();
    let revs: Vec<i64> = (0..5).map(|i| put(&db, b"f", &[i])).collect();
    let got = flat(poll_until(&db, &w, revs[4], 100));
    assert_eq!(ids(&got).iter().map(|(r, _)| *r).collect::<Vec<_>>(), vec![now + 3, now + 4, now + 5]);
}

#[test]
fn compaction_past_a_lagging_watcher_ends_it_with_compacted() {
    let db = open(4);
    let first = put(&db, b"c", b"0");
    for i in 1..20u8 {
        put(&db, b"c", &[i]);
    }
    // unsynced from the start
    let replay = db.watch(all_keys(), first, None).unwrap();
    // synced, then overflows its buffer of 4 and falls behind
    let lagging = db.watch(all_keys(), 0, None).unwrap();
    let from = db.revision() + 1;
    for i in 0..20u8 {
        put(&db, b"c", &[i]);
    }
    assert!(!lagging.is_synced());
    // a watcher that is up to date is not affected
    let fresh = db.watch(all_keys(), 0, None).unwrap();
    let head = db.revision();
    db.execute(Command::Compact(head)).unwrap();
    assert_eq!(db.compact_revision(), head);

    assert_eq!(poll_to_end(&db, &replay), (vec![], WatchEnd::Compacted(head)));
    let (buffered, end) = poll_to_end(&db, &lagging);
    assert_eq!(end, WatchEnd::Compacted(head));
    // what was already buffered before falling behind is still delivered, in order, before the end
    assert!(buffered.len() <= 4);
    assert_eq!(ids(&buffered).iter().map(|(r, _)| *r).collect::<Vec<_>>(), (from..from + buffered.len() as i64).collect::<Vec<_>>());
    // an ended watch stays ended
    assert_eq!(db.poll(&lagging, 10, Duration::ZERO), Err(WatchEnd::Compacted(head)));

    let rev = put(&db, b"c", b"after");
    assert_eq!(ids(&flat(poll_until(&db, &fresh, rev, 10))), vec![(rev, b"c".to_vec())]);

    // a start revision below the compaction point is accepted; the first poll ends it
    let late = db.watch(all_keys(), head - 1, None).unwrap();
    assert_eq!(db.poll(&late, 10, Duration::ZERO), Err(WatchEnd::Compacted(head)));
    // the compaction point itself is still watchable
    let at = db.watch(all_keys(), head, None).unwrap();
    let got = flat(poll_until(&db, &at, rev, 10));
    assert_eq!(ids(&got).iter().map(|(r, _)| *r).collect::<Vec<_>>(), vec![head, rev]);
}

#[test]
fn cancel_ends_synced_and_unsynced_watchers() {
    let db = open(16);
    let first = put(&db, b"x", b"1");
    let synced = db.watch(all_keys(), 0, None).unwrap();
    let unsynced = db.watch(all_keys(), first, None).unwrap();
    // a consumer blocked in poll is woken by the cancel
    let blocked = {
        let (db, w) = (db.clone(), synced.clone());
        thread::spawn(move || {
            let t = Instant::now();
            (db.poll(&w, 10, WAIT), t.elapsed())
        })
    };
    thread::sleep(Duration::from_millis(50));
    db.cancel_watch(&synced);
    let (res, took) = blocked.join().unwrap();
    assert_eq!(res, Err(WatchEnd::Cancelled));
    assert!(took < WAIT / 2, "cancel did not wake the consumer");
    db.cancel_watch(&unsynced);
    assert_eq!(db.poll(&unsynced, 10, Duration::ZERO), Err(WatchEnd::Cancelled));
    // writes go on; the cancelled watchers get nothing and stay ended
    put(&db, b"x", b"2");
    assert_eq!(db.poll(&synced, 10, Duration::ZERO), Err(WatchEnd::Cancelled));
    assert_eq!(db.poll(&unsynced, 10, Duration::ZERO), Err(WatchEnd::Cancelled));
}

#[test]
fn close_ends_every_watcher_with_closed() {
    let db = open(2);
    let first = put(&db, b"x", b"1");
    let synced = db.watch(all_keys(), 0, None).unwrap();
    let unsynced = db.watch(all_keys(), first, None).unwrap();
    let overflowed = db.watch(all_keys(), 0, None).unwrap();
    let mut head = 0;
    for i in 0..5u8 {
        head = put(&db, b"y", &[i]);
    }
    // `synced` catches up (its buffer of 2 overflowed) and is synced again; `overflowed` is not
    poll_until(&db, &synced, head, 1024);
    assert!(synced.is_synced() && !overflowed.is_synced());
    let blocked = {
        let (db, w) = (db.clone(), synced.clone());
        thread::spawn(move || {
            let t = Instant::now();
            let r = loop {
                match db.poll(&w, 10, Duration::from_millis(200)) {
                    Ok(b) if b.is_empty() && t.elapsed() < WAIT => continue,
                    other => break other,
                }
            };
            (r, t.elapsed())
        })
    };
    thread::sleep(Duration::from_millis(50));
    db.close().unwrap();
    let (res, took) = blocked.join().unwrap();
    assert_eq!(res, Err(WatchEnd::Closed));
    assert!(took < WAIT / 2);
    assert_eq!(db.poll(&unsynced, 10, Duration::ZERO), Err(WatchEnd::Closed));
    assert_eq!(db.poll(&overflowed, 10, Duration::ZERO), Err(WatchEnd::Closed));
    assert!(db.watch(all_keys(), 0, None).is_err());
    db.close().unwrap();
}

#[test]
fn prefix_and_single_key_watchers_see_only_their_range() {
    let db = open(64);
    let pods = db.watch(prefix(b"/registry/pods/"), 0, None).unwrap();
    let one = db.watch(KeyRange::new(b"/registry/pods/default/a".to_vec(), None), 0, None).unwrap();
    let span = db.watch(KeyRange::new(b"b".to_vec(), Some(b"d".to_vec())), 0, None).unwrap();
    let keys: &[&[u8]] = &[
        b"/registry/pods/default/a",
        b"/registry/pods/default/ab",
        b"/registry/pods",
        b"/registry/pods0",
        b"/registry/services/default/a",
        b"/registry/pods/kube-system/x",
        b"a",
        b"b",
        b"c\xff",
        b"d",
    ];
    for k in keys {
        put(&db, k, b"v");
    }
    delete(&db, b"/registry/pods/", Some(&prefix_end(b"/registry/pods/")));
    put(&db, b"zz", b"last");
    // every write is acknowledged, so every synced watcher already holds its events
    let got = |w: &Arc<Watcher>| -> Vec<(EventType, Vec<u8>)> {
        let mut events = Vec::new();
        loop {
            let b = db.poll(w, 100, Duration::ZERO).unwrap();
            if b.is_empty() {
                break;
            }
            events.extend(b);
        }
        ids(&events);
        events.iter().map(|e| (e.kind, e.kv.key.to_vec())).collect()
    };
    use EventType::*;
    assert_eq!(got(&pods), vec![
        (Put, b"/registry/pods/default/a".to_vec()),
        (Put, b"/registry/pods/default/ab".to_vec()),
        (Put, b"/registry/pods/kube-system/x".to_vec()),
        (Delete, b"/registry/pods/default/a".to_vec()),
        (Delete, b"/registry/pods/default/ab".to_vec()),
        (Delete, b"/registry/pods/kube-system/x".to_vec()),
    ]);
    assert_eq!(got(&one), vec![(Put, b"/registry/pods/default/a".to_vec()), (Delete, b"/registry/pods/default/a".to_vec())]);
    assert_eq!(got(&span), vec![(Put, b"b".to_vec()), (Put, b"c\xff".to_vec())]);
    for w in [&pods, &one, &span] {
        assert_quiet(&db, w, Duration::from_millis(20));
    }
}

#[test]
fn events_carry_prev_kv_for_updates_and_deletes() {
    let db = open(64);
    let w = db.watch(all_keys(), 0, None).unwrap();
    let r1 = put(&db, b"k", b"one");
    let r2 = put(&db, b"k", b"two");
    let r3 = delete(&db, b"k", None);
    let r4 = put(&db, b"k", b"three");
    let got = flat(poll_until(&db, &w, r4, 100));
    let shape: Vec<_> = got
        .iter()
        .map(|e| {
            let prev = e.prev_kv.as_ref().map(|p| (p.value.to_vec(), p.mod_revision, p.version));
            (e.kind, e.kv.value.to_vec(), e.kv.mod_revision, e.kv.create_revision, e.kv.version, prev)
        })
        .collect();
    use EventType::*;
    assert_eq!(shape, vec![
        (Put, b"one".to_vec(), r1, r1, 1, None),
        (Put, b"two".to_vec(), r2, r1, 2, Some((b"one".to_vec(), r1, 1))),
        (Delete, vec![], r3, 0, 0, Some((b"two".to_vec(), r2, 2))),
        (Put, b"three".to_vec(), r4, r4, 1, None),
    ]);
    // the replay path (catch-up from history) produces the same events
    let replay = db.watch(all_keys(), r1, None).unwrap();
    let again = flat(poll_until(&db, &replay, r4, 100));
    assert_eq!(again, got);
}

#[test]
fn notify_is_called_when_events_arrive_and_when_the_watch_ends() {
    let db = open(64);
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let w = db.watch(all_keys(), 0, Some(Arc::new(move |_id| {
        c.fetch_add(1, Ordering::SeqCst);
    })))
    .unwrap();
    let rev = put(&db, b"n", b"1");
    assert!(calls.load(Ordering::SeqCst) >= 1, "notify not called for a new event");
    flat(poll_until(&db, &w, rev, 10));
    let before = calls.load(Ordering::SeqCst);
    db.cancel_watch(&w);
    assert!(calls.load(Ordering::SeqCst) > before, "notify not called when the watch ended");
}

/// A watcher and the revision it was opened at.
type Opened = (i64, Arc<Watcher>);

#[test]
fn watchers_that_catch_up_while_batches_are_applied_and_dispatched_see_each_event_once() {
    // A stress test of catching up against batched, concurrent writes: every watcher, opened at
    // a past revision while writes go on, sees each later event exactly once. Small buffers make
    // watchers fall back to catching up again and again. (The exact interleaving of a late
    // dispatch after a catch-up is reproduced deterministically by the unit test in watch.rs.)
    let db = open(8);
    let base = put(&db, b"seed", b"0");
    let watchers: Arc<std::sync::Mutex<Vec<Opened>>> = Arc::default();
    let opener = {
        let (db, watchers) = (db.clone(), watchers.clone());
        thread::spawn(move || {
            for i in 0..40i64 {
                let now = db.revision();
                let start = (now - i % 7).max(base);
                watchers.lock().unwrap().push((start, db.watch(all_keys(), start, None).unwrap()));
                thread::sleep(Duration::from_micros(300));
            }
        })
    };
    let written = concurrent_writes(&db, 4, 200);
    opener.join().unwrap();
    let last = *written.keys().last().unwrap();
    for (start, w) in watchers.lock().unwrap().iter() {
        let got = flat(poll_until(&db, w, last, 5));
        ids(&got);
        let want: BTreeMap<i64, BTreeSet<Vec<u8>>> = written.range(*start..).map(|(r, k)| (*r, k.clone())).collect();
        let mut got = group(&got);
        got.remove(&base);
        assert_eq!(got, want, "watcher from revision {start}");
        assert_quiet(&db, w, Duration::from_millis(5));
    }
}
