//! Table tests of one cache fed directly with changes (no store): the worked example of
//! cache.rs, LIST with selectors and pagination, WATCH replay, transitions and slow watchers.

use std::sync::{Arc, Mutex};

use kubecore_watchcache::{Cache, Change, End, FieldSpec, Fmt, ListError, ListRequest, Options, Polled, Seg, Selector, Spec, Start, WatchError};
use serde_json::Value;

const PREFIX: &[u8] = b"/registry/pods/";
const HEAD: &[u8] = br#"{"kind":"PodList","apiVersion":"v1","metadata":"#;

fn spec() -> Spec {
    let node = vec![vec![Seg::Key("spec".into()), Seg::Key("nodeName".into())]];
    let fields = vec![FieldSpec { label: "spec.nodeName".into(), fmt: Fmt::Str, paths: node }];
    Spec { prefix: PREFIX.to_vec(), kind: "Pod".into(), api_version: "v1".into(), fields }
}

fn key(name: &str) -> Arc<[u8]> {
    Arc::from(format!("/registry/pods/{name}").into_bytes())
}

fn pod(name: &str, app: &str, node: &str) -> Arc<[u8]> {
    let ns = name.split('/').next().unwrap();
    let n = name.split('/').nth(1).unwrap();
    let json = format!(r#"{{"metadata":{{"name":"{n}","namespace":"{ns}","labels":{{"app":"{app}"}}}},"spec":{{"nodeName":"{node}"}}}}"#);
    Arc::from(json.into_bytes())
}

fn put(name: &str, app: &str, node: &str, revision: i64) -> Change {
    Change { key: key(name), value: Some(pod(name, app, node)), revision }
}

fn del(name: &str, revision: i64) -> Change {
    Change { key: key(name), value: None, revision }
}

fn cache(ring: usize, buffer: usize) -> Cache {
    let opts = Options { ring_capacity: ring, watcher_buffer: buffer, max_snapshots: 4 };
    Cache::new(spec(), opts, 10, Vec::new())
}

fn sel(c: &Cache, prefix: &str, labels: &[(&str, &str, &[&str])], fields: &[(&str, &str, &str)]) -> Selector {
    let labels: Vec<(String, String, Vec<String>)> =
        labels.iter().map(|(k, op, vs)| (k.to_string(), op.to_string(), vs.iter().map(|v| v.to_string()).collect())).collect();
    let fields: Vec<(String, String, String)> = fields.iter().map(|(l, op, v)| (l.to_string(), op.to_string(), v.to_string())).collect();
    c.selector(format!("/registry/pods/{prefix}").as_bytes(), &labels, &fields).unwrap()
}

fn list(c: &Cache, s: &Selector, limit: usize, cont: Option<(i64, Vec<u8>)>) -> Value {
    let page = c.list(&ListRequest { selector: s, limit, continue_from: cont, head: HEAD }).unwrap();
    serde_json::from_slice(&page.body).unwrap()
}

fn names(list: &Value) -> Vec<String> {
    list["items"].as_array().unwrap().iter().map(|o| o["metadata"]["name"].as_str().unwrap().to_owned()).collect()
}

/// (type, name, resourceVersion) of each frame.
fn frames(p: Polled) -> Vec<(String, String, String)> {
    let Polled::Frames(bytes) = p else { return Vec::new() };
    let text = String::from_utf8(bytes).unwrap();
    text.lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            let o = &v["object"]["metadata"];
            (v["type"].as_str().unwrap().into(), o["name"].as_str().unwrap_or("").into(), o["resourceVersion"].as_str().unwrap().into())
        })
        .collect()
}

fn t(kind: &str, name: &str, rv: i64) -> (String, String, String) {
    (kind.into(), name.into(), rv.to_string())
}

#[test]
fn worked_example_of_the_ring() {
    let c = cache(2, 100);
    c.apply(vec![put("ns/a", "web", "n1", 11)]);
    c.apply(vec![put("ns/b", "web", "n1", 12)]);
    assert_eq!((c.len(), c.floor(), c.revision()), (2, 10, 12));
    c.apply(vec![del("ns/a", 13)]);
    assert_eq!((c.len(), c.floor(), c.revision()), (1, 11, 13));
    c.advance(20);
    assert_eq!(c.revision(), 20);
    let all = sel(&c, "", &[], &[]);
    let w = c.watch(1, all.clone(), Start::After(11), None).unwrap();
    assert_eq!(frames(w.poll(1 << 20)), vec![t("ADDED", "b", 12), t("DELETED", "a", 13)]);
    assert_eq!(c.watch(2, all, Start::After(10), None).err(), Some(WatchError::TooOld { floor: 11 }));
}

#[test]
fn list_with_selectors() {
    let c = cache(100, 100);
    c.apply(vec![put("ns1/a", "web", "n1", 11), put("ns1/b", "db", "n2", 12), put("ns2/c", "web", "n2", 13)]);
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str, &'a [&'a str])>, Vec<(&'a str, &'a str, &'a str)>, Vec<&'a str>);
    let table: Vec<Case> = vec![
        ("", vec![], vec![], vec!["a", "b", "c"]),
        ("ns1/", vec![], vec![], vec!["a", "b"]),
        ("", vec![("app", "=", &["web"])], vec![], vec!["a", "c"]),
        ("", vec![("app", "notin", &["web"])], vec![], vec!["b"]),
        ("", vec![], vec![("spec.nodeName", "=", "n2")], vec!["b", "c"]),
        ("", vec![("app", "==", &["web"])], vec![("spec.nodeName", "!=", "n1")], vec!["c"]),
        ("ns2/", vec![("app", "exists", &[])], vec![("metadata.name", "=", "c")], vec![]),
        ("", vec![("app", "!", &[])], vec![], vec![]),
    ];
    for (prefix, labels, fields, want) in table {
        let s = sel(&c, prefix, &labels, &fields);
        let got = list(&c, &s, 0, None);
        assert_eq!(names(&got), want, "{prefix} {labels:?} {fields:?}");
        assert_eq!(got["metadata"], serde_json::json!({"resourceVersion": "13"}));
        assert_eq!(got["kind"], "PodList");
    }
}

#[test]
fn pagination_reads_one_snapshot() {
    let c = cache(100, 100);
    c.apply((0..5).map(|i| put(&format!("ns/p{i}"), "web", "n1", 11 + i)).collect());
    let all = sel(&c, "", &[], &[]);
    let first = list(&c, &all, 2, None);
    assert_eq!(names(&first), ["p0", "p1"]);
    assert_eq!(first["metadata"]["remainingItemCount"], 3);
    assert_eq!(c.snapshot_revisions(), vec![15]);
    c.apply(vec![del("ns/p2", 16), put("ns/p9", "web", "n1", 17)]);
    let second = list(&c, &all, 2, Some((15, b"/registry/pods/ns/p1\0".to_vec())));
    assert_eq!(names(&second), ["p2", "p3"]);
    assert_eq!(second["metadata"]["resourceVersion"], "15");
    let last = list(&c, &all, 2, Some((15, b"/registry/pods/ns/p3\0".to_vec())));
    assert_eq!(names(&last), ["p4"]);
    assert!(last["metadata"].get("continue").is_none());
    let gone = c.list(&ListRequest { selector: &all, limit: 2, continue_from: Some((14, b"x".to_vec())), head: HEAD });
    assert_eq!(gone.err(), Some(ListError::SnapshotGone));
    let filtered = list(&c, &sel(&c, "", &[("app", "=", &["web"])], &[]), 1, None);
    assert!(filtered["metadata"].get("continue").is_some());
    assert!(filtered["metadata"].get("remainingItemCount").is_none());
}

#[test]
fn watch_transitions_with_a_selector() {
    let c = cache(100, 100);
    c.apply(vec![put("ns/a", "web", "n1", 11)]);
    let w = c.watch(1, sel(&c, "", &[("app", "=", &["web"])], &[]), Start::After(11), None).unwrap();
    c.apply(vec![put("ns/a", "db", "n1", 12)]); // stops matching: DELETED, last matching state, new rv
    c.apply(vec![put("ns/a", "web", "n2", 13)]); // matches again: ADDED
    c.apply(vec![put("ns/a", "web", "n3", 14)]); // MODIFIED
    c.apply(vec![put("ns/b", "db", "n1", 15), del("ns/b", 16)]); // never matched: nothing
    c.apply(vec![del("ns/a", 17)]);
    let got = frames(w.poll(1 << 20));
    assert_eq!(got, vec![t("DELETED", "a", 12), t("ADDED", "a", 13), t("MODIFIED", "a", 14), t("DELETED", "a", 17)]);
    let Polled::Frames(raw) = c.watch(2, sel(&c, "", &[], &[]), Start::After(11), None).unwrap().poll(1 << 20) else { panic!() };
    let first: Value = serde_json::from_slice(raw.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(first["object"]["metadata"]["labels"]["app"], "db", "unfiltered watchers get the new state");
    assert_eq!(first["type"], "MODIFIED");
}

#[test]
fn initial_state_then_bookmark_then_live() {
    let c = cache(100, 100);
    c.apply(vec![put("ns/a", "web", "n1", 11), put("ns/b", "db", "n1", 12)]);
    let w = c.watch(1, sel(&c, "", &[("app", "=", &["web"])], &[]), Start::Current { end_bookmark: true }, None).unwrap();
    c.apply(vec![put("ns/c", "web", "n1", 13)]);
    let Polled::Frames(raw) = w.poll(1 << 20) else { panic!() };
    let lines: Vec<Value> = raw.split(|b| *b == b'\n').filter(|l| !l.is_empty()).map(|l| serde_json::from_slice(l).unwrap()).collect();
    assert_eq!(lines.len(), 3);
    assert_eq!((lines[0]["type"].as_str(), lines[0]["object"]["metadata"]["resourceVersion"].as_str()), (Some("ADDED"), Some("11")));
    let bm = serde_json::json!({"type": "BOOKMARK", "object": {"kind": "Pod", "apiVersion": "v1",
        "metadata": {"resourceVersion": "12", "annotations": {"k8s.io/initial-events-end": "true"}}}});
    assert_eq!(lines[1], bm);
    assert_eq!(lines[2]["object"]["metadata"]["name"], "c");
    assert_eq!(w.poll(1 << 20), Polled::Empty);
    assert_eq!(c.progress(&w), Some(13));
}

#[test]
fn initial_state_in_small_polls_loses_nothing() {
    let c = cache(100, 100);
    c.apply((0..50).map(|i| put(&format!("ns/p{i:02}"), "web", "n1", 11 + i)).collect());
    let w = c.watch(1, sel(&c, "", &[], &[]), Start::Current { end_bookmark: false }, None).unwrap();
    let mut got = Vec::new();
    loop {
        let f = frames(w.poll(1));
        if f.is_empty() {
            break;
        }
        got.extend(f);
    }
    let want: Vec<_> = (0..50).map(|i| t("ADDED", &format!("p{i:02}"), 11 + i)).collect();
    assert_eq!(got, want);
}

#[test]
fn slow_watcher_is_ended_and_notified() {
    let c = cache(100, 3);
    let woken = Arc::new(Mutex::new(Vec::new()));
    let log = woken.clone();
    let notify: kubecore_watchcache::Notify = Arc::new(move |id| log.lock().unwrap().push(id));
    let w = c.watch(7, sel(&c, "", &[], &[]), Start::After(10), Some(notify)).unwrap();
    c.apply(vec![put("ns/a", "web", "n1", 11)]);
    c.apply(vec![put("ns/a", "web", "n1", 12)]);
    assert_eq!(*woken.lock().unwrap(), vec![7], "one wake-up while it has something pending");
    c.apply(vec![put("ns/a", "web", "n1", 13), put("ns/b", "web", "n1", 14)]);
    assert_eq!(w.poll(1 << 20), Polled::Ended(End::TooSlow));
    assert_eq!(*woken.lock().unwrap(), vec![7, 7]);
    assert_eq!(c.watcher_count(), 0);
}

#[test]
fn cancel_close_and_reset_end_watchers() {
    let c = cache(100, 100);
    let a = c.watch(1, sel(&c, "", &[], &[]), Start::After(10), None).unwrap();
    let b = c.watch(2, sel(&c, "", &[], &[]), Start::After(10), None).unwrap();
    c.cancel(&a);
    assert_eq!(a.poll(100), Polled::Ended(End::Cancelled));
    c.reset(30, vec![(key("ns/z"), pod("ns/z", "web", "n1"), 29)]);
    assert_eq!(b.poll(100), Polled::Ended(End::Reset));
    assert_eq!((c.floor(), c.revision(), c.len()), (30, 30, 1));
    c.close();
    assert_eq!(c.watch(3, sel(&c, "", &[], &[]), Start::After(30), None).err(), Some(WatchError::Closed));
}

#[test]
fn watch_from_the_future_skips_older_events() {
    let c = cache(100, 100);
    let w = c.watch(1, sel(&c, "", &[], &[]), Start::After(12), None).unwrap();
    c.apply(vec![put("ns/a", "web", "n1", 11), put("ns/b", "web", "n1", 12), put("ns/c", "web", "n1", 13)]);
    assert_eq!(frames(w.poll(1 << 20)), vec![t("ADDED", "c", 13)]);
}

#[test]
fn a_poll_shorter_than_its_budget_leaves_nothing_pending() {
    let c = cache(100, 1000);
    let w = c.watch(1, sel(&c, "", &[], &[]), Start::After(10), None).unwrap();
    c.apply((0..40).map(|i| put(&format!("ns/p{i:02}"), "web", "n1", 11 + i)).collect());
    let budget = 700;
    let mut seen = 0;
    while let Polled::Frames(b) = w.poll(budget) {
        seen += b.split(|c| *c == b'\n').filter(|l| !l.is_empty()).count();
        if b.len() < budget {
            assert_eq!(w.poll(budget), Polled::Empty, "a short poll took everything");
            break;
        }
    }
    assert_eq!(seen, 40);
}
