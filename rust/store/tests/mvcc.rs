//! Engine invariants, table-driven. The first test replays the worked example of key_index.rs
//! through the whole engine.

use std::time::Instant;

use kubecore_store::kv::{EventType, KeyRange, OpResult};
use kubecore_store::mvcc::{Applied, Mvcc};
use kubecore_store::request::*;
use kubecore_store::error::StoreError;

fn put_req(key: &[u8], value: &[u8]) -> RequestOp {
    RequestOp::Put(PutRequest { key: key.to_vec(), value: value.to_vec(), lease: 0, prev_kv: true })
}

fn del_req(key: &[u8], end: Option<&[u8]>) -> RequestOp {
    RequestOp::Delete(DeleteRequest { key: key.to_vec(), end: end.map(|e| e.to_vec().into()), prev_kv: true })
}

fn range_req(key: &[u8], end: Option<&[u8]>, revision: i64) -> RangeRequest {
    RangeRequest { key: key.to_vec(), end: end.map(|e| e.to_vec().into()), revision, ..Default::default() }
}

fn run(m: &mut Mvcc, ops: Vec<RequestOp>) -> kubecore_store::error::Result<Applied> {
    m.apply(&Command::Txn(TxnRequest { compare: vec![], success: ops, failure: vec![] }), Instant::now(), None)
}

fn value_at(m: &Mvcc, key: &[u8], rev: i64) -> Option<Vec<u8>> {
    m.get(key, rev).unwrap().map(|kv| kv.value.to_vec())
}

/// put(a)=x @2, put(a)=y @3, delete(a) @4, put(b) @5, put(a)=z @6 — the key_index.rs example.
fn example() -> Mvcc {
    let mut m = Mvcc::new();
    assert_eq!(m.revision(), 1);
    run(&mut m, vec![put_req(b"a", b"x")]).unwrap();
    run(&mut m, vec![put_req(b"a", b"y")]).unwrap();
    run(&mut m, vec![del_req(b"a", None)]).unwrap();
    run(&mut m, vec![put_req(b"b", b"other")]).unwrap();
    run(&mut m, vec![put_req(b"a", b"z")]).unwrap();
    assert_eq!(m.revision(), 6);
    m
}

#[test]
fn worked_example_reads() {
    let m = example();
    let table: &[(i64, Option<&[u8]>)] = &[(1, None), (2, Some(b"x")), (3, Some(b"y")), (4, None), (5, None), (6, Some(b"z"))];
    for (rev, want) in table {
        assert_eq!(value_at(&m, b"a", *rev).as_deref(), *want, "a at {rev}");
    }
    let kv = m.get(b"a", 0).unwrap().unwrap();
    assert_eq!((kv.create_revision, kv.mod_revision, kv.version), (6, 6, 1));
    let kv = m.get(b"a", 3).unwrap().unwrap();
    assert_eq!((kv.create_revision, kv.mod_revision, kv.version), (2, 3, 2));
}

#[test]
fn worked_example_compaction() {
    for at in 2..=6 {
        let mut m = example();
        m.compact(at).unwrap();
        assert!(matches!(m.get(b"a", at - 1), Err(StoreError::Compacted { compact_revision }) if compact_revision == at));
        for rev in at..=6 {
            assert_eq!(value_at(&m, b"a", rev), value_at(&example(), b"a", rev), "compact({at}) at({rev})");
        }
        assert!(matches!(m.compact(at), Err(StoreError::Compacted { .. })));
    }
    let mut m = example();
    assert!(matches!(m.compact(7), Err(StoreError::FutureRevision { current_revision: 6 })));
    assert!(matches!(m.get(b"a", 7), Err(StoreError::FutureRevision { .. })));
}

#[test]
fn revision_moves_only_when_something_changes() {
    let mut m = example();
    run(&mut m, vec![del_req(b"nothing", None)]).unwrap();
    assert_eq!(m.revision(), 6);
    let t = TxnRequest {
        compare: vec![Compare { key: b"a".to_vec(), op: CompareOp::Equal, target: CompareTarget::Value(b"nope".to_vec()) }],
        success: vec![put_req(b"c", b"1")],
        failure: vec![RequestOp::Range(range_req(b"a", None, 0))],
    };
    let Applied::Txn(res) = m.apply(&Command::Txn(t), Instant::now(), None).unwrap() else { panic!() };
    assert!(!res.succeeded);
    assert_eq!(m.revision(), 6);
    // several puts in one txn share one revision
    run(&mut m, vec![put_req(b"c", b"1"), put_req(b"d", b"2"), del_req(b"b", None)]).unwrap();
    assert_eq!(m.revision(), 7);
    for k in [&b"c"[..], b"d"] {
        assert_eq!(m.get(k, 0).unwrap().unwrap().mod_revision, 7);
    }
    assert!(m.get(b"b", 0).unwrap().is_none());
}

#[test]
fn compares_on_missing_keys_use_zero_and_value_fails() {
    let mut m = example();
    let cases: &[(CompareTarget, CompareOp, bool)] = &[
        (CompareTarget::Version(0), CompareOp::Equal, true),
        (CompareTarget::CreateRevision(0), CompareOp::Equal, true),
        (CompareTarget::ModRevision(1), CompareOp::Less, true),
        (CompareTarget::Lease(0), CompareOp::Equal, true),
        (CompareTarget::Value(vec![]), CompareOp::Equal, false),
        (CompareTarget::Value(vec![]), CompareOp::NotEqual, false),
    ];
    for (target, op, want) in cases {
        let t = TxnRequest { compare: vec![Compare { key: b"missing".to_vec(), op: *op, target: target.clone() }], ..Default::default() };
        let Applied::Txn(r) = m.apply(&Command::Txn(t), Instant::now(), None).unwrap() else { panic!() };
        assert_eq!(r.succeeded, *want, "{target:?} {op:?}");
    }
}

#[test]
fn bad_transactions_change_nothing() {
    let mut m = example();
    let before = m.revision();
    let dup = run(&mut m, vec![put_req(b"k", b"1"), put_req(b"k", b"2")]);
    assert!(matches!(dup, Err(StoreError::InvalidArgument(_))));
    let overlap = run(&mut m, vec![put_req(b"k", b"1"), del_req(b"a", Some(b"z"))]);
    assert!(matches!(overlap, Err(StoreError::InvalidArgument(_))));
    let lease = run(&mut m, vec![put_req(b"k", b"1"), RequestOp::Put(PutRequest { key: b"l".to_vec(), value: vec![], lease: 99, prev_kv: false })]);
    assert!(matches!(lease, Err(StoreError::LeaseNotFound(99))));
    assert_eq!(m.revision(), before);
    assert!(m.get(b"k", 0).unwrap().is_none());
}

#[test]
fn ranges_limit_count_and_more() {
    let mut m = Mvcc::new();
    for i in 0..10u8 {
        run(&mut m, vec![put_req(&[b'k', b'0' + i], &[i])]).unwrap();
    }
    let mut req = range_req(b"k", Some(&prefix_end(b"k")), 0);
    req.limit = 3;
    let r = m.range(&req).unwrap();
    assert_eq!((r.kvs.len(), r.count, r.more, r.revision), (3, 10, true, 11));
    req.limit = 0;
    req.count_only = true;
    let r = m.range(&req).unwrap();
    assert_eq!((r.kvs.len(), r.count, r.more), (0, 10, false));
    let all = m.range(&range_req(b"\0", Some(b"\0"), 0)).unwrap();
    assert_eq!(all.count, 10);
    let backwards = m.range(&range_req(b"z", Some(b"a"), 0)).unwrap();
    assert_eq!(backwards.count, 0);
    let at5 = m.range(&range_req(b"k", Some(b"l"), 5)).unwrap();
    assert_eq!(at5.count, 4);
}

fn prefix_end(p: &[u8]) -> Vec<u8> {
    kubecore_store::kv::prefix_end(p)
}

#[test]
fn txn_reads_see_its_own_writes_and_results_carry_final_revision() {
    let mut m = example();
    let Applied::Txn(r) = run(&mut m, vec![put_req(b"n", b"1"), RequestOp::Range(range_req(b"n", None, 0))]).unwrap() else { panic!() };
    let OpResult::Range(rr) = &r.responses[1] else { panic!() };
    assert_eq!(rr.kvs[0].value.as_ref(), b"1");
    assert_eq!(rr.revision, 7);
    assert!(matches!(r.responses[0], OpResult::Put { revision: 7, .. }));
}

#[test]
fn leases_attach_and_revoke_in_one_revision() {
    let mut m = Mvcc::new();
    let Applied::LeaseGranted { id, .. } = m.apply(&Command::LeaseGrant { id: 0, ttl: 10 }, Instant::now(), None).unwrap() else { panic!() };
    for k in [b"x", b"y", b"z"] {
        run(&mut m, vec![RequestOp::Put(PutRequest { key: k.to_vec(), value: b"v".to_vec(), lease: id, prev_kv: false })]).unwrap();
    }
    // re-putting y without the lease detaches it
    run(&mut m, vec![put_req(b"y", b"w")]).unwrap();
    let mut events = Vec::new();
    m.apply(&Command::LeaseRevoke(id), Instant::now(), Some(&mut events)).unwrap();
    assert_eq!(m.revision(), 6);
    assert_eq!(events.len(), 2);
    assert!(events.iter().all(|e| e.kind == EventType::Delete && e.kv.mod_revision == 6));
    assert!(m.get(b"y", 0).unwrap().is_some());
    assert!(matches!(m.apply(&Command::LeaseRevoke(id), Instant::now(), None), Err(StoreError::LeaseNotFound(_))));
}

#[test]
fn events_replay_in_revision_order_and_stop_at_revision_boundaries() {
    let mut m = Mvcc::new();
    run(&mut m, vec![put_req(b"p/1", b"a"), put_req(b"p/2", b"b")]).unwrap(); // rev 2
    run(&mut m, vec![put_req(b"q", b"c")]).unwrap(); // rev 3
    run(&mut m, vec![put_req(b"p/1", b"d")]).unwrap(); // rev 4
    run(&mut m, vec![del_req(b"p/", Some(b"p0"))]).unwrap(); // rev 5
    let range = KeyRange::new(b"p/".to_vec(), Some(b"p0".to_vec()));
    let mut out = Vec::new();
    let next = m.events_from(0, &range, 1, &mut out).unwrap();
    assert_eq!(next, 3, "both events of revision 2 come together");
    assert_eq!(out.len(), 2);
    let next = m.events_from(next, &range, 100, &mut out).unwrap();
    assert_eq!(next, 6);
    let got: Vec<(i64, EventType, Vec<u8>)> = out.iter().map(|e| (e.kv.mod_revision, e.kind, e.kv.key.to_vec())).collect();
    assert_eq!(got, vec![
        (2, EventType::Put, b"p/1".to_vec()),
        (2, EventType::Put, b"p/2".to_vec()),
        (4, EventType::Put, b"p/1".to_vec()),
        (5, EventType::Delete, b"p/1".to_vec()),
        (5, EventType::Delete, b"p/2".to_vec()),
    ]);
    assert_eq!(out[2].prev_kv.as_ref().unwrap().value.as_ref(), b"a");
    m.compact(4).unwrap();
    assert!(matches!(m.events_from(3, &range, 10, &mut Vec::new()), Err(StoreError::Compacted { compact_revision: 4 })));
}

#[test]
fn snapshot_round_trips_everything() {
    let mut m = example();
    let Applied::LeaseGranted { id, .. } = m.apply(&Command::LeaseGrant { id: 0, ttl: 5 }, Instant::now(), None).unwrap() else { panic!() };
    run(&mut m, vec![RequestOp::Put(PutRequest { key: b"l".to_vec(), value: b"v".to_vec(), lease: id, prev_kv: false })]).unwrap();
    m.compact(3).unwrap();
    let mut buf = Vec::new();
    kubecore_store::snapshot::write(&m, &mut buf).unwrap();
    let r = kubecore_store::snapshot::read(&mut buf.as_slice()).unwrap();
    assert_eq!(r.revision(), m.revision());
    assert_eq!(r.compact_revision(), 3);
    assert_eq!(r.len(), m.len());
    for rev in 3..=m.revision() {
        let q = range_req(b"\0", Some(b"\0"), rev);
        assert_eq!(r.range(&q).unwrap(), m.range(&q).unwrap());
    }
    let range = KeyRange::new(b"\0".to_vec(), Some(vec![0]));
    let (mut a, mut b) = (Vec::new(), Vec::new());
    m.events_from(3, &range, 100, &mut a).unwrap();
    r.events_from(3, &range, 100, &mut b).unwrap();
    assert_eq!(a, b);
    assert_eq!(r.leases.ids(), vec![id]);
    assert_eq!(r.leases.get(id).unwrap().keys.len(), 1);
    assert!(kubecore_store::snapshot::read(&mut &buf[..buf.len() / 2]).is_err());
}
