//! Round trip, group commit, locking, close semantics, memory mode.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};

use common::*;
use kubecore_raft::{Config, RaftError, RaftHandle};

#[test]
fn round_trip_and_reopen_sees_everything() {
    let tmp = tempfile::tempdir().unwrap();
    let (h, sm) = open(cfg(tmp.path()));
    let mut last = 0;
    for i in 0..100 {
        let idx = put(&h, &item(i)).unwrap();
        assert!(idx > last, "indexes increase");
        last = idx;
    }
    assert_eq!(sm.items().len(), 100);
    let st = h.stats();
    assert_eq!(st.applied_index, last);
    assert!(st.fsyncs >= 100, "each sequential put is synced: {st:?}");
    h.close().unwrap();
    h.close().unwrap(); // idempotent

    let (h2, sm2) = open(cfg(tmp.path()));
    assert_eq!(sm2.items(), (0..100).map(item).collect::<Vec<_>>());
    assert!(h2.stats().applied_index > last, "new leader's no-op was applied");
    assert!(put(&h2, b"after").unwrap() > last);
    h2.close().unwrap();
    let (_h3, sm3) = open(cfg(tmp.path()));
    assert_eq!(sm3.items().len(), 101);
}

#[test]
fn group_commit_shares_fsyncs() {
    let tmp = tempfile::tempdir().unwrap();
    let (h, sm) = open(cfg(tmp.path()));
    let threads: Vec<_> = (0..16)
        .map(|t| {
            let h = h.clone();
            std::thread::spawn(move || {
                for i in 0..200 {
                    put(&h, format!("{t}-{i}").as_bytes()).unwrap();
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    let st = h.stats();
    assert_eq!(sm.items().len(), 3200);
    assert_eq!(st.proposals, 3200);
    assert!(st.fsyncs < 3200 / 2, "group commit: {st:?}");
    h.close().unwrap();
}

#[test]
fn second_open_is_locked() {
    let tmp = tempfile::tempdir().unwrap();
    let (h, _) = open(cfg(tmp.path()));
    match RaftHandle::open(cfg(tmp.path()), VecSm::default()) {
        Err(RaftError::Locked(p)) => assert_eq!(p, tmp.path()),
        other => panic!("expected Locked, got {:?}", other.err()),
    }
    h.close().unwrap();
    let (h2, _) = open(cfg(tmp.path()));
    h2.close().unwrap();
}

#[test]
fn close_completes_in_flight_proposals() {
    let tmp = tempfile::tempdir().unwrap();
    let (h, sm) = open(cfg(tmp.path()));
    let ok = Arc::new(AtomicU64::new(0));
    let (tx, rx) = mpsc::channel();
    for i in 0..1000 {
        let (ok, tx) = (ok.clone(), tx.clone());
        h.propose(
            item(i),
            Box::new(move |r| {
                if r.is_ok() {
                    ok.fetch_add(1, Ordering::SeqCst);
                }
                tx.send(()).unwrap();
            }),
        );
    }
    let batch = (0..10).map(|i| (item(2000 + i), Box::new(|_| {}) as kubecore_raft::Completion<u64>)).collect();
    h.propose_batch(batch);
    h.close().unwrap();
    assert_eq!(ok.load(Ordering::SeqCst), 1000);
    assert_eq!(rx.try_iter().count(), 1000);
    assert_eq!(sm.items().len(), 1010);
    assert!(matches!(put(&h, b"late"), Err(RaftError::Closed)));
    let clone = h.clone();
    assert!(matches!(put(&clone, b"late"), Err(RaftError::Closed)));
}

#[test]
fn empty_proposal_is_refused() {
    let (h, _) = open(Config::default());
    assert!(matches!(put(&h, b""), Err(RaftError::Raft(_))));
    h.close().unwrap();
}

#[test]
fn memory_mode_has_no_files_and_compacts() {
    let tmp = tempfile::tempdir().unwrap();
    let before = std::fs::read_dir(tmp.path()).unwrap().count();
    let (h, sm) = open(Config { tick_interval: std::time::Duration::from_millis(10), ..Config::default() });
    for i in 0..500 {
        put(&h, &item(i)).unwrap();
    }
    assert_eq!(sm.items().len(), 500);
    // on_tick commands are proposed and applied.
    sm.tick_cmds.lock().unwrap().push(b"from-tick".to_vec());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while sm.items().len() < 501 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(sm.items().last().unwrap(), b"from-tick");
    h.close().unwrap();
    let st = h.stats(); // final counters are published by close
    assert_eq!((st.fsyncs, st.wal_bytes, st.proposals), (0, 0, 501));
    assert_eq!(st.snapshot_index, st.applied_index, "log compacted to applied: {st:?}");
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), before);
}
