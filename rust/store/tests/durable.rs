//! Durability through `Db` on a real directory: whatever was acknowledged before `close` is
//! observably identical after `open` — every readable revision, the event history, the leases —
//! whether it comes back from a snapshot, from the WAL tail after one, or from both.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kubecore_store::db::{Db, LeaseInfo, Options};
use kubecore_store::error::StoreError;
use kubecore_store::kv::{Event, KeyRange, RangeResult};
use kubecore_store::mvcc::Applied;
use kubecore_store::request::*;

fn open(dir: &Path) -> Db {
    Db::open(Options { dir: Some(dir.to_path_buf()), fsync: false, snapshot_every: 50, ..Default::default() }).unwrap()
}

fn put_op(key: &[u8], value: &[u8], lease: i64) -> RequestOp {
    RequestOp::Put(PutRequest { key: key.to_vec(), value: value.to_vec(), lease, prev_kv: false })
}

fn write(db: &Db, ops: Vec<RequestOp>) -> i64 {
    db.txn(TxnRequest { compare: vec![], success: ops, failure: vec![] }).unwrap().revision
}

fn grant(db: &Db, id: i64, ttl: i64) -> i64 {
    match db.execute(Command::LeaseGrant { id, ttl }).unwrap() {
        Applied::LeaseGranted { id, .. } => id,
        other => panic!("{other:?}"),
    }
}

fn full(revision: i64) -> RangeRequest {
    RangeRequest { key: Vec::new(), end: Some(vec![0].into()), revision, ..Default::default() }
}

/// Everything a client can observe, except lease deadlines (each open restarts them).
#[derive(Debug, PartialEq)]
struct Observed {
    revision: i64,
    compact_revision: i64,
    keys: usize,
    ranges: Vec<(i64, RangeResult)>,
    events: Vec<Event>,
    leases: Vec<LeaseInfo>,
}

fn observe(db: &Db) -> Observed {
    let revision = db.revision();
    let compact_revision = db.compact_revision();
    let ranges = (compact_revision.max(1)..=revision).map(|rev| (rev, db.range(&full(rev)).unwrap())).collect();
    // the whole retained history, replayed through a watch
    let w = db.watch(KeyRange::new(Vec::new(), Some(vec![0])), compact_revision.max(1), None).unwrap();
    let mut events = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert!(Instant::now() < deadline, "replay did not finish");
        let b = db.poll(&w, 1000, Duration::ZERO).unwrap();
        if b.is_empty() {
            break;
        }
        events.extend(b.iter().map(|e| Event::clone(e)));
    }
    db.cancel_watch(&w);
    let leases = db
        .leases()
        .unwrap()
        .into_iter()
        .map(|id| {
            let mut info = db.lease_info(id, true).unwrap();
            assert!(info.ttl <= info.granted_ttl);
            info.ttl = 0;
            info
        })
        .collect();
    Observed { revision, compact_revision, keys: db.stats().keys, ranges, events, leases }
}

/// A deterministic mixed workload: puts, updates, deletes, delete-ranges, multi-op txns,
/// compare-failed txns, leases attached, moved and revoked, and compactions along the way.
/// Returns the highest lease id it granted (0: none).
fn workload(db: &Db, seed: u64, rounds: usize) -> i64 {
    let mut max_granted = 0;
    let mut x = seed;
    let mut next = move |n: u64| {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (x >> 33) % n
    };
    let mut leases: Vec<i64> = Vec::new(); // only leases of this run are used and revoked
    for i in 0..rounds {
        let key = format!("/k/{}", next(20)).into_bytes();
        let value = format!("v{seed}.{i}").into_bytes();
        match next(20) {
            0..=8 => {
                write(db, vec![put_op(&key, &value, 0)]);
            }
            9..=10 => {
                write(db, vec![RequestOp::Delete(DeleteRequest { key, end: None, prev_kv: false })]);
            }
            11 => {
                let end = format!("/k/{}", next(20)).into_bytes();
                write(db, vec![RequestOp::Delete(DeleteRequest { key, end: Some(end.into()), prev_kv: true })]);
            }
            12..=13 => {
                let other = format!("/m/{}", next(5)).into_bytes();
                let t = TxnRequest {
                    compare: vec![Compare { key: key.clone(), op: CompareOp::Greater, target: CompareTarget::Version(1) }],
                    success: vec![put_op(&key, &value, 0), put_op(&other, &value, 0)],
                    failure: vec![put_op(&other, b"failed", 0)],
                };
                db.txn(t).unwrap();
            }
            14 => {
                leases.push(grant(db, 0, 600));
                max_granted = max_granted.max(*leases.last().unwrap());
            }
            15..=16 if !leases.is_empty() => {
                let lease = leases[next(leases.len() as u64) as usize];
                write(db, vec![put_op(&key, &value, lease)]);
            }
            17 if leases.len() > 1 => {
                let lease = leases.remove(next(leases.len() as u64) as usize);
                db.execute(Command::LeaseRevoke(lease)).unwrap();
            }
            18 => {
                let (head, compacted) = (db.revision(), db.compact_revision());
                if head - compacted > 10 {
                    db.execute(Command::Compact(head - 1 - next(8) as i64)).unwrap();
                }
            }
            _ => {
                // a read-only txn and a failed write: neither moves the revision
                let before = db.revision();
                db.txn(TxnRequest::single(RequestOp::Range(full(0)))).unwrap();
                assert!(db.execute(Command::Compact(before + 5)).is_err());
                assert_eq!(db.revision(), before);
            }
        }
    }
    max_granted
}

#[test]
fn everything_survives_close_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let fixed = grant(&db, 7, 600);
    write(&db, vec![put_op(b"/leased/a", b"1", fixed), put_op(b"/leased/b", b"1", fixed)]);
    let max_granted = workload(&db, 1, 400);
    // the newest lease is revoked: its id must still not be handed out again after reopen
    assert!(max_granted > fixed, "the workload granted no lease");
    match db.execute(Command::LeaseRevoke(max_granted)) {
        Ok(_) | Err(StoreError::LeaseNotFound(_)) => {} // the workload may have revoked it already
        Err(e) => panic!("{e}"),
    }
    let stats = db.stats();
    assert!(stats.snapshot_index > 0, "no snapshot was taken: {stats:?}");
    assert!(stats.compact_revision > 0, "the workload never compacted");
    let before = observe(&db);
    assert!(before.leases.iter().any(|l| l.id == fixed && l.keys.len() == 2));
    db.close().unwrap();
    drop(db);

    let db = open(dir.path());
    let after = observe(&db);
    assert_eq!(after.revision, before.revision);
    assert_eq!(after.compact_revision, before.compact_revision);
    assert_eq!(after.leases, before.leases);
    assert_eq!(after.ranges.len(), before.ranges.len());
    for (a, b) in after.ranges.iter().zip(&before.ranges) {
        assert_eq!(a, b, "range at revision {} differs after reopen", b.0);
    }
    assert_eq!(after.events.len(), before.events.len());
    for (a, b) in after.events.iter().zip(&before.events) {
        assert_eq!(a, b, "replayed event differs after reopen");
    }
    assert_eq!(after, before);
    // below the compaction point stays unreadable
    if before.compact_revision > 1 {
        assert_eq!(
            db.range(&full(before.compact_revision - 1)),
            Err(StoreError::Compacted { compact_revision: before.compact_revision })
        );
    }

    // the store goes on where it stopped: revisions, lease ids, leases that still work
    let ids = db.leases().unwrap();
    let fresh = grant(&db, 0, 600);
    assert!(ids.iter().all(|id| *id < fresh), "lease id {fresh} reused after reopen (had {ids:?})");
    assert_eq!(fresh, max_granted + 1, "ids continue after the highest ever granted (revoked or not)");
    let rev = write(&db, vec![put_op(b"/after", b"1", fixed)]);
    assert_eq!(rev, before.revision + 1);
    db.lease_keepalive(fixed).unwrap();
    db.execute(Command::LeaseRevoke(fixed)).unwrap();
    for k in [&b"/leased/a"[..], b"/leased/b", b"/after"] {
        assert_eq!(db.get(k, 0).unwrap(), None, "{k:?} outlived its revoked lease");
    }

    // a second round: more writes on top of the reopened state, then reopen again
    workload(&db, 2, 150);
    let before = observe(&db);
    db.close().unwrap();
    drop(db);
    let db = open(dir.path());
    assert_eq!(observe(&db), before);
    db.close().unwrap();
}

#[test]
fn the_last_writes_before_close_survive_without_a_snapshot_after_them() {
    // 50 per snapshot: stop at a count that leaves a WAL tail after the newest snapshot
    for writes in [1usize, 49, 50, 51, 120] {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        let mut last = 0;
        for i in 0..writes {
            last = write(&db, vec![put_op(format!("/t/{}", i % 7).as_bytes(), format!("{i}").as_bytes(), 0)]);
        }
        let before = observe(&db);
        drop(db); // Drop closes
        let db = open(dir.path());
        assert_eq!(db.revision(), last, "after {writes} writes");
        assert_eq!(observe(&db), before, "after {writes} writes");
    }
}

#[test]
fn a_second_open_of_an_open_directory_is_locked() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    write(&db, vec![put_op(b"k", b"v", 0)]);
    match Db::open(Options { dir: Some(dir.path().to_path_buf()), fsync: false, ..Default::default() }) {
        Err(StoreError::Locked(msg)) => assert!(msg.contains(&dir.path().display().to_string()), "{msg}"),
        Err(e) => panic!("expected Locked, got {e}"),
        Ok(_) => panic!("two stores opened the same directory"),
    }
    // the refused open did not disturb the one that holds the directory
    assert_eq!(db.get(b"k", 0).unwrap().unwrap().value.as_ref(), b"v");
    write(&db, vec![put_op(b"k", b"w", 0)]);
    db.close().unwrap();
    assert_eq!(db.range(&full(0)), Err(StoreError::Closed));
    // once closed, the directory can be opened again
    let again = open(dir.path());
    assert_eq!(again.get(b"k", 0).unwrap().unwrap().value.as_ref(), b"w");
}

#[test]
fn an_expired_lease_is_revoked_and_stays_revoked_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(open(dir.path()));
    let short = grant(&db, 0, 1); // raised to lease::MIN_TTL (2 s)
    let long = grant(&db, 0, 600);
    write(&db, vec![put_op(b"/short", b"1", short), put_op(b"/long", b"1", long)]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while db.get(b"/short", 0).unwrap().is_some() {
        assert!(Instant::now() < deadline, "a 2 s lease was not revoked within 10 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(db.leases().unwrap(), vec![long]);
    let before = observe(&db);
    db.close().unwrap();
    drop(db);
    let db = open(dir.path());
    assert_eq!(observe(&db), before);
    assert!(db.get(b"/long", 0).unwrap().is_some());
    assert!(matches!(db.lease_info(short, false), Err(StoreError::LeaseNotFound(_))));
}
