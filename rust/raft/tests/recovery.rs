#![allow(clippy::field_reassign_with_default)]
//! Torn tails, corruption, snapshots and log compaction.

mod common;

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;

use common::*;
use kubecore_raft::wal::record::encode_entry;
use kubecore_raft::{Config, RaftError, RaftHandle};
use raft::eraftpb::Entry;

fn write_n(cfg: Config, n: usize) -> u64 {
    let (h, _) = open(cfg);
    let mut last = 0;
    for i in 0..n {
        last = put(&h, &item(i)).unwrap();
    }
    h.close().unwrap();
    last
}

#[test]
fn torn_final_record_is_truncated() {
    let tmp = tempfile::tempdir().unwrap();
    let last = write_n(cfg(tmp.path()), 10);
    // Simulate a crash mid-write of an 11th (never acknowledged) entry: half a record.
    let seg = segments(tmp.path()).pop().unwrap();
    let end = data_end(&seg);
    let mut e = Entry::default();
    e.term = 99;
    e.index = last + 1;
    e.data = b"unacknowledged".to_vec().into();
    let mut rec = Vec::new();
    encode_entry(&mut rec, &e);
    let f = OpenOptions::new().write(true).open(&seg).unwrap();
    f.write_all_at(&rec[..rec.len() - 3], end as u64).unwrap();
    f.set_len((end + rec.len() - 3) as u64).unwrap(); // short file: record runs past EOF
    drop(f);

    let (h, sm) = open(cfg(tmp.path()));
    assert_eq!(sm.items(), (0..10).map(item).collect::<Vec<_>>());
    // The log continues cleanly after the repaired tail, and reopens again.
    put(&h, b"next").unwrap();
    h.close().unwrap();
    let (_h, sm) = open(cfg(tmp.path()));
    assert_eq!(sm.items().len(), 11);
    assert_eq!(sm.items().last().unwrap(), b"next");
}

#[test]
fn garbage_after_tail_is_truncated() {
    let tmp = tempfile::tempdir().unwrap();
    write_n(cfg(tmp.path()), 10);
    let seg = segments(tmp.path()).pop().unwrap();
    let end = data_end(&seg);
    let f = OpenOptions::new().write(true).open(&seg).unwrap();
    f.write_all_at(&[0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 0x55, 0xaa], end as u64).unwrap();
    drop(f);
    let (h, sm) = open(cfg(tmp.path()));
    assert_eq!(sm.items().len(), 10);
    put(&h, b"next").unwrap();
    h.close().unwrap();
    let (_h, sm) = open(cfg(tmp.path()));
    assert_eq!(sm.items().len(), 11);
}

#[test]
fn truncated_last_bytes_of_last_record_open() {
    let tmp = tempfile::tempdir().unwrap();
    write_n(cfg(tmp.path()), 10);
    let seg = segments(tmp.path()).pop().unwrap();
    let end = data_end(&seg);
    OpenOptions::new().write(true).open(&seg).unwrap().set_len(end as u64 - 3).unwrap();
    let (_h, sm) = open(cfg(tmp.path()));
    // The torn record is the final hard state; every entry survived.
    assert_eq!(sm.items().len(), 10);
}

#[test]
fn corrupted_middle_record_refuses_to_open() {
    let tmp = tempfile::tempdir().unwrap();
    write_n(cfg(tmp.path()), 50);
    let seg = segments(tmp.path()).pop().unwrap();
    let f = OpenOptions::new().read(true).write(true).open(&seg).unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, 200).unwrap();
    f.write_all_at(&[b[0] ^ 0x40], 200).unwrap();
    drop(f);
    match RaftHandle::open(cfg(tmp.path()), VecSm::default()) {
        Err(RaftError::Corruption { path, offset, detail }) => {
            assert_eq!(path, seg);
            assert!(offset <= 200, "offset {offset} names the damaged record");
            assert!(detail.contains("valid record follows"), "{detail}");
        }
        other => panic!("expected Corruption, got {:?}", other.err()),
    }
}

fn snap_cfg(dir: &std::path::Path) -> Config {
    Config { snapshot_every: 50, segment_bytes: 4096, ..cfg(dir) }
}

#[test]
fn snapshot_compacts_log_and_reopens() {
    let tmp = tempfile::tempdir().unwrap();
    let (h, sm) = open(snap_cfg(tmp.path()));
    for i in 0..300 {
        put(&h, &[item(i), vec![b'x'; 100]].concat()).unwrap();
    }
    let st = h.stats();
    assert!(st.snapshot_index >= 250, "{st:?}");
    let snaps: Vec<_> = std::fs::read_dir(tmp.path().join("snap")).unwrap().collect();
    assert_eq!(snaps.len(), 2, "keeps the newest two");
    let segs = segments(tmp.path());
    let first = segs[0].file_name().unwrap().to_str().unwrap().to_string();
    assert!(!first.starts_with("0000000000000000-"), "oldest segment deleted: {first}");
    assert!(segs.len() <= 4, "old segments deleted: {segs:?}");
    h.close().unwrap();
    drop(sm);

    let (h, sm) = open(snap_cfg(tmp.path()));
    let want: Vec<Vec<u8>> = (0..300).map(|i| [item(i), vec![b'x'; 100]].concat()).collect();
    assert_eq!(sm.items(), want);
    h.close().unwrap();
}

#[test]
fn corrupt_newest_snapshot_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    write_n(snap_cfg(tmp.path()), 120);
    let mut snaps: Vec<_> =
        std::fs::read_dir(tmp.path().join("snap")).unwrap().map(|e| e.unwrap().path()).collect();
    snaps.sort();
    let newest = snaps.pop().unwrap();
    let f = OpenOptions::new().read(true).write(true).open(&newest).unwrap();
    f.write_all_at(&[0xff, 0xff], 60).unwrap();
    drop(f);
    match RaftHandle::open(snap_cfg(tmp.path()), VecSm::default()) {
        Err(e @ RaftError::Corruption { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("snapshot checksum mismatch"), "{msg}");
            assert!(msg.contains(newest.to_str().unwrap()), "{msg}");
        }
        other => panic!("expected Corruption, got {:?}", other.err()),
    }
}

#[test]
fn bad_record_in_non_last_segment_is_corruption() {
    let tmp = tempfile::tempdir().unwrap();
    // Small segments, no snapshots: many segments.
    let c = Config { segment_bytes: 1024, ..cfg(tmp.path()) };
    write_n(c.clone(), 100);
    let segs = segments(tmp.path());
    assert!(segs.len() > 2);
    // Tear the tail of a middle segment: it would look torn if it were the last one.
    let victim = &segs[1];
    let end = data_end(victim);
    OpenOptions::new().write(true).open(victim).unwrap().write_all_at(&[0, 0, 0], end as u64 - 3).unwrap();
    match RaftHandle::open(c, VecSm::default()) {
        Err(RaftError::Corruption { path, detail, .. }) => {
            assert_eq!(&path, victim);
            assert!(detail.contains("non-final"), "{detail}");
        }
        other => panic!("expected Corruption, got {:?}", other.err()),
    }
}

#[test]
fn memory_holds_a_bounded_window_and_reopen_replays_the_rest_from_the_wal() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = || Config { mem_log_entries: 16, snapshot_every: 1_000_000, ..cfg(tmp.path()) };
    let (h, _) = open(cfg());
    for i in 0..500 {
        put(&h, &item(i)).unwrap();
    }
    let st = h.stats();
    assert!(st.mem_entries <= 3 * 16, "applied entries are dropped from memory: {st:?}");
    assert_eq!(st.snapshot_index, 0, "no snapshot was taken");
    h.close().unwrap();
    let (h, sm) = open(cfg());
    assert_eq!(sm.items(), (0..500).map(item).collect::<Vec<_>>());
    h.close().unwrap();
}
