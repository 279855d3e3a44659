//! Nominated pods per cycle: counted while active, gone before any later read, and only the
//! differences applied from one cycle to the next.

mod common;

use common::*;

fn cpu(s: &kubecore_sched::Snapshot, node: &str) -> i64 {
    res(&s.requested(node).unwrap(), "cpu")
}

#[test]
fn nominated_pods_count_only_during_the_cycle() {
    let mut s = snapshot(&[node("n0", "4", "8Gi", 110), node("n1", "4", "8Gi", 110)]);
    let a = bytes(&pod("a", "1", "1Mi"));
    let b = bytes(&pod("b", "2", "1Mi"));
    assert_eq!(s.nominate(&[("default/a", &a, "n0"), ("default/b", &b, "n1")]), 2);
    assert_eq!((cpu(&s, "n0"), cpu(&s, "n1"), s.pod_count()), (1000, 2000, 2));
    s.end_nominated();
    assert_eq!(s.nominated_count(), 2, "still counted until something reads the snapshot");
    s.settle();
    assert_eq!((cpu(&s, "n0"), cpu(&s, "n1"), s.pod_count(), s.nominated_count()), (0, 0, 0, 0));
}

#[test]
fn the_next_cycle_applies_only_the_differences() {
    let mut s = snapshot(&[node("n0", "4", "8Gi", 110), node("n1", "4", "8Gi", 110)]);
    let a = bytes(&pod("a", "1", "1Mi"));
    let b = bytes(&pod("b", "2", "1Mi"));
    let b2 = bytes(&pod("b", "3", "1Mi"));
    s.nominate(&[("default/a", &a, "n0"), ("default/b", &b, "n1")]);
    s.end_nominated();
    // a moves to n1, b's JSON changes, c is new
    let c = bytes(&pod("c", "500m", "1Mi"));
    assert_eq!(s.nominate(&[("default/a", &a, "n1"), ("default/b", &b2, "n1"), ("default/c", &c, "n0")]), 3);
    assert_eq!((cpu(&s, "n0"), cpu(&s, "n1")), (500, 4000));
    s.end_nominated();
    assert_eq!(s.nominate(&[("default/c", &c, "n0")]), 1);
    assert_eq!((cpu(&s, "n0"), cpu(&s, "n1"), s.pod_count()), (500, 0, 1));
}

#[test]
fn real_pods_win_over_nominated_ones() {
    let mut s = snapshot(&[node("n0", "4", "8Gi", 110)]);
    let a = bytes(&pod("a", "1", "1Mi"));
    s.add_pod_json("default/a", &bytes(&pod("a", "2", "1Mi")), "n0").unwrap();
    assert_eq!(s.nominate(&[("default/a", &a, "n0")]), 0, "a key counted as a real pod is not added");
    s.end_nominated();
    s.settle();
    assert_eq!(cpu(&s, "n0"), 2000, "the real pod is still counted");
    // the cache counts the nominated pod for real (it was assumed): the overlay's copy goes
    s.remove_pod("default/a");
    s.nominate(&[("default/a", &a, "n0")]);
    s.end_nominated();
    s.forget_nominated("default/a");
    s.add_pod_json("default/a", &a, "n0").unwrap();
    s.settle();
    assert_eq!((cpu(&s, "n0"), s.pod_count()), (1000, 1));
}

#[test]
fn a_pod_assumed_while_nominated_stays_counted() {
    let mut s = snapshot(&[node("n0", "4", "8Gi", 110)]);
    let a = bytes(&pod("a", "1", "1Mi"));
    s.nominate(&[("default/a", &a, "n0")]);
    // a cycle places the nominated pod for real (schedule_batch counts it with add_pod)
    s.add_pod_json("default/a", &a, "n0").unwrap();
    s.end_nominated();
    s.settle();
    assert_eq!((cpu(&s, "n0"), s.pod_count(), s.nominated_count()), (1000, 1, 0));
}
