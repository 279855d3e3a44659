//! Caches fed from a real (in-memory) store: consistent reads, and a black-box concurrency test
//! (writers and watchers at once; every watcher sees every change exactly once, in order).

use std::collections::HashMap;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use kubecore_store::db::{Db, Options as DbOptions};
use kubecore_store::request::{Command, PutRequest, RequestOp, TxnRequest};
use kubecore_watchcache::{Feeder, ListRequest, Options, Polled, Spec, Start};
use serde_json::Value;

fn db() -> Arc<Db> {
    Arc::new(Db::open(DbOptions { fsync: false, ..DbOptions::default() }).unwrap())
}

fn put(db: &Db, key: &str, value: &str) -> i64 {
    let op = RequestOp::Put(PutRequest { key: key.as_bytes().to_vec(), value: value.as_bytes().to_vec(), lease: 0, prev_kv: false });
    match db.execute(Command::Txn(TxnRequest::single(op))).unwrap() {
        kubecore_store::mvcc::Applied::Txn(t) => t.revision,
        other => panic!("{other:?}"),
    }
}

fn spec() -> Spec {
    Spec { prefix: b"/registry/pods/".to_vec(), kind: "Pod".into(), api_version: "v1".into(), fields: Vec::new() }
}

fn obj(name: &str, n: usize) -> String {
    format!(r#"{{"metadata":{{"name":"{name}","labels":{{"n":"{n}"}}}}}}"#)
}

#[test]
fn consistent_read_catches_up_without_waiting_for_the_thread() {
    let db = db();
    put(&db, "/registry/pods/ns/a", &obj("a", 0));
    let feeder = Feeder::new(db.clone());
    let feed = feeder.cache(spec(), Options::default()).unwrap();
    let other = put(&db, "/registry/nodes/n1", "{}");
    let rev = put(&db, "/registry/pods/ns/b", &obj("b", 0));
    let last = put(&db, "/registry/services/s", "{}");
    assert!(other < rev && rev < last);
    assert_eq!(feed.sync().unwrap(), last, "the cache revision reaches the store's, past writes elsewhere");
    let sel = feed.cache.selector(b"/registry/pods/", &[], &[]).unwrap();
    let page = feed.cache.list(&ListRequest { selector: &sel, limit: 0, continue_from: None, head: br#"{"metadata":"# }).unwrap();
    let v: Value = serde_json::from_slice(&page.body).unwrap();
    assert_eq!(v["items"].as_array().unwrap().len(), 2);
    assert_eq!(v["metadata"]["resourceVersion"], last.to_string());
    feeder.close();
    assert!(feed.cache.is_closed());
}

/// Polls until `want` events arrived (or a generous deadline passes).
fn drain(w: &kubecore_watchcache::Watcher, want: usize) -> Vec<Value> {
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while got.len() < want && Instant::now() < deadline {
        match w.poll(1 << 16) {
            Polled::Frames(b) => got.extend(b.split(|c| *c == b'\n').filter(|l| !l.is_empty()).map(|l| serde_json::from_slice(l).unwrap())),
            Polled::Empty => thread::sleep(Duration::from_millis(1)),
            Polled::Ended(e) => panic!("watcher ended: {e:?}"),
        }
    }
    got
}

#[test]
fn concurrent_writers_and_watchers_see_every_change_once_in_order() {
    const WRITERS: usize = 4;
    const PER_WRITER: usize = 250;
    const WATCHERS: usize = 16;
    let db = db();
    let feeder = Arc::new(Feeder::new(db.clone()));
    let feed = feeder.cache(spec(), Options { ring_capacity: 64, ..Options::default() }).unwrap();
    let start = feed.sync().unwrap();
    let watchers: Vec<_> = (0..WATCHERS)
        .map(|i| {
            let sel = feed.cache.selector(b"/registry/pods/", &[], &[]).unwrap();
            feed.cache.watch(feeder.next_id(), sel, Start::After(start), None).map(|w| (i, w)).unwrap()
        })
        .collect();
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let db = db.clone();
            thread::spawn(move || {
                for n in 0..PER_WRITER {
                    put(&db, &format!("/registry/pods/ns/w{w}-{}", n % 10), &obj("x", n));
                }
            })
        })
        .collect();
    let readers: Vec<_> = watchers
        .into_iter()
        .map(|(_, w)| thread::spawn(move || drain(&w, WRITERS * PER_WRITER)))
        .collect();
    for t in writers {
        t.join().unwrap();
    }
    for r in readers {
        let events = r.join().unwrap();
        assert_eq!(events.len(), WRITERS * PER_WRITER);
        let revs: Vec<i64> = events.iter().map(|e| e["object"]["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap()).collect();
        assert!(revs.windows(2).all(|p| p[0] < p[1]), "strictly increasing revisions");
        let mut per_key: HashMap<(String, String), usize> = HashMap::new();
        for e in &events {
            let name = e["object"]["metadata"]["labels"]["n"].as_str().unwrap().to_owned();
            *per_key.entry((e["type"].as_str().unwrap().to_owned(), name)).or_default() += 1;
        }
        assert_eq!(per_key.values().sum::<usize>(), WRITERS * PER_WRITER);
    }
    assert_eq!(feed.sync().unwrap(), db.revision());
    assert_eq!(feed.cache.len(), WRITERS * 10);
}
