//! Preemption's dry runs: lower-priority pods removed per node, upstream's reprieve order, and
//! pickOneNodeForPreemption's criteria, many nodes per call.

mod common;

use common::*;
use kubecore_sched::pod::ParsedPod;
use kubecore_sched::{DryRun, Snapshot};
use serde_json::{json, Value};

fn prio_pod(name: &str, cpu: &str, priority: i32) -> Value {
    let mut p = pod(name, cpu, "1Mi");
    p["spec"]["priority"] = json!(priority);
    p
}

fn started(mut p: Value, t: &str) -> Value {
    p["status"] = json!({"startTime": t});
    p
}

fn place(s: &mut Snapshot, p: &Value, node: &str) {
    let key = format!("default/{}", p["metadata"]["name"].as_str().unwrap());
    s.add_pod_json(&key, &bytes(p), node).unwrap();
}

fn parsed(p: &Value) -> ParsedPod {
    ParsedPod::from_json(&bytes(p)).unwrap()
}

/// n0: four 1-cpu pods of priority 0; n1: two 2-cpu pods of priority 20; n2: empty but 1 cpu.
fn cluster() -> Snapshot {
    let mut s = snapshot(&[node("n0", "4", "8Gi", 110), node("n1", "4", "8Gi", 110), node("n2", "1", "8Gi", 110)]);
    for i in 0..4 {
        place(&mut s, &prio_pod(&format!("low{i}"), "1", 0), "n0");
    }
    for i in 0..2 {
        place(&mut s, &prio_pod(&format!("peer{i}"), "2", 20), "n1");
    }
    s
}

#[test]
fn dry_run_lower_classifies_each_node() {
    let s = cluster();
    let high = parsed(&prio_pod("high", "3", 10));
    let runs = s.dry_run_lower(&default_profile(), &high, &["n0", "n1", "n2"]).unwrap();
    assert_eq!(runs[0], DryRun::Fits);
    assert_eq!(runs[1], DryRun::NoVictims, "equal-or-higher priority pods are never victims");
    assert_eq!(runs[2], DryRun::NoVictims);
    // a pod bigger than n0's allocatable: rejected, and unresolvable (request > allocatable)
    let huge = parsed(&prio_pod("huge", "5", 10));
    match &s.dry_run_lower(&default_profile(), &huge, &["n0"]).unwrap()[0] {
        DryRun::Rejected(f) => {
            assert!(f.unresolvable);
            assert_eq!(f.reasons[0].as_str(), "Insufficient cpu");
        }
        other => panic!("{other:?}"),
    }
    assert!(s.dry_run_lower(&default_profile(), &high, &["nope"]).is_err());
}

#[test]
fn reprieve_keeps_what_still_fits_in_order() {
    let s = cluster();
    let high = parsed(&prio_pod("high", "3", 10));
    let keys = vec!["default/low0", "default/low1", "default/low2", "default/low3"];
    // 3 cpu are needed of 4: the first pod in the order is reprieved, the other three go
    assert_eq!(s.reprieve(&default_profile(), &high, &[("n0", keys.clone())]).unwrap(), vec![vec![1, 2, 3]]);
    let small = parsed(&prio_pod("small", "1", 10));
    assert_eq!(s.reprieve(&default_profile(), &small, &[("n0", keys)]).unwrap(), vec![vec![3]]);
    // the same answers one pod at a time through filter_node
    let without = ["default/low1", "default/low2"];
    assert_eq!(s.filter_node(&default_profile(), &bytes(&prio_pod("high", "3", 10)), "n0", &without).unwrap(),
               vec!["Insufficient cpu".to_string()]);
    assert!(s.filter_node(&default_profile(), &bytes(&prio_pod("high", "3", 10)), "n0",
                          &["default/low1", "default/low2", "default/low3"]).unwrap().is_empty());
}

#[test]
fn select_prefers_lower_priority_then_fewer_victims_then_later_start() {
    let mut s = snapshot(&[node("a", "2", "8Gi", 110), node("b", "2", "8Gi", 110), node("c", "2", "8Gi", 110),
                           node("d", "2", "8Gi", 110)]);
    place(&mut s, &prio_pod("a-mid", "2", 5), "a");
    place(&mut s, &prio_pod("b-low1", "1", 1), "b");
    place(&mut s, &prio_pod("b-low2", "1", 1), "b");
    place(&mut s, &started(prio_pod("c-low", "2", 1), "2024-01-01T00:00:00Z"), "c");
    place(&mut s, &started(prio_pod("d-low", "2", 1), "2024-01-02T00:00:00Z"), "d");
    let high = parsed(&prio_pod("high", "2", 10));
    let all = [("a", true), ("b", true), ("c", true), ("d", true)];
    let sel = s.preempt_select(&default_profile(), &high, &all, 100, 0).unwrap();
    assert_eq!(sel.candidates, 4);
    assert_eq!(sel.classified, 4);
    // a: highest victim priority 5; b: sum 2 victims; c and d one victim of 1: d started later
    assert_eq!(sel.chosen, Some(("d".to_string(), vec!["default/d-low".to_string()])));
    let sel = s.preempt_select(&default_profile(), &high, &all[..3], 100, 0).unwrap();
    assert_eq!(sel.chosen.unwrap().0, "c");
    let sel = s.preempt_select(&default_profile(), &high, &all[..2], 100, 0).unwrap();
    assert_eq!(sel.chosen.unwrap().0, "b", "priority 1 victims beat one of priority 5");
    // wanted = 1: the first node that fits is the only candidate
    let sel = s.preempt_select(&default_profile(), &high, &all, 1, 0).unwrap();
    assert_eq!((sel.candidates, sel.chosen.unwrap().0.as_str()), (1, "a"));
}

#[test]
fn select_orders_victims_by_priority_then_start() {
    let mut s = snapshot(&[node("n", "3", "8Gi", 110)]);
    place(&mut s, &started(prio_pod("old", "1", 1), "2024-01-01T00:00:00Z"), "n");
    place(&mut s, &started(prio_pod("new", "1", 1), "2024-01-03T00:00:00Z"), "n");
    place(&mut s, &prio_pod("unstarted", "1", 1), "n"); // counts as starting now
    place(&mut s, &prio_pod("mid", "0", 3), "n");
    let high = parsed(&prio_pod("high", "2", 10));
    let now = 1_704_153_600_000_000_000; // 2024-01-02: between old and new
    let sel = s.preempt_select(&default_profile(), &high, &[("n", true)], 100, now).unwrap();
    // order: mid (3), then old, unstarted (now), new; mid and old are reprieved
    let (_, victims) = sel.chosen.unwrap();
    assert_eq!(victims, vec!["default/unstarted".to_string(), "default/new".to_string()]);
}

#[test]
fn no_candidate_reports_the_rejected_nodes() {
    let mut s = snapshot(&[node("small", "1", "8Gi", 110), node("full", "4", "8Gi", 110), node("peer", "4", "8Gi", 110)]);
    place(&mut s, &prio_pod("l0", "1", 0), "small");
    place(&mut s, &prio_pod("l1", "1", 0), "full");
    place(&mut s, &prio_pod("p1", "3", 50), "full");
    place(&mut s, &prio_pod("p2", "4", 50), "peer");
    let high = parsed(&prio_pod("high", "2", 10));
    let nodes = [("small", false), ("full", true), ("peer", true)];
    let sel = s.preempt_select(&default_profile(), &high, &nodes, 100, 0).unwrap();
    assert!(sel.chosen.is_none());
    assert_eq!(sel.candidates, 0);
    // small: 2 cpu never fit (unresolvable, but its cycle status was explicit: still counted);
    // full: insufficient once l1 is gone; peer: no lower-priority pod
    assert_eq!(sel.classified, 2);
    let rejected: Vec<(&str, bool)> = sel.rejected.iter().map(|(n, f)| (n.as_str(), f.unresolvable)).collect();
    assert_eq!(rejected, vec![("small", true), ("full", false)]);
    // with an implicit status the unresolvable node is no potential node at all
    let nodes = [("small", true), ("full", true), ("peer", true)];
    let sel = s.preempt_select(&default_profile(), &high, &nodes, 100, 0).unwrap();
    assert_eq!((sel.classified, sel.rejected.len()), (1, 1));
}

#[test]
fn priority_and_start_time_parse_leniently() {
    let mut p = prio_pod("p", "1", 7);
    p["status"] = json!({"startTime": "2024-01-01T00:00:00Z"});
    let parsed_pod = parsed(&p);
    assert_eq!((parsed_pod.priority, parsed_pod.start_ns), (7, Some(1_704_067_200_000_000_000)));
    p["spec"]["priority"] = json!("high");
    p["status"] = json!({"startTime": 12});
    let odd = parsed(&p);
    assert_eq!((odd.priority, odd.start_ns), (0, None));
}

#[test]
fn nominated_pods_added_from_the_cache_count_until_removed() {
    let mut s = cluster();
    let nominee = bytes(&prio_pod("nominee", "3", 10));
    for _ in 0..2 {
        let added = s.add_pods_cached(&[("default/nominee", &nominee, "n0")]);
        assert_eq!(added, vec!["default/nominee".to_string()]);
        assert_eq!(res(&s.requested("n0").unwrap(), "cpu"), 7000);
        // another pod of the same priority finds n0 taken even without its low pods
        let other = parsed(&prio_pod("other", "3", 10));
        assert!(matches!(s.dry_run_lower(&default_profile(), &other, &["n0"]).unwrap()[0], DryRun::Rejected(_)));
        s.remove_pod("default/nominee");
        assert_eq!(res(&s.requested("n0").unwrap(), "cpu"), 4000);
    }
}
