//! Nominated pods per cycle: never counted in the snapshot, added by the filters of their own
//! node while the cycle is active, gone after it, and each cycle takes exactly the pods passed.

mod common;

use common::*;
use kubecore_sched::Snapshot;

fn cpu(s: &Snapshot, node: &str) -> i64 {
    res(&s.requested(node).unwrap(), "cpu")
}

/// The nodes where a pod of `cpu` fits now.
fn fits(s: &mut Snapshot, cpu: &str) -> Vec<String> {
    feasible(s, &pod("p", cpu, "1Mi"))
}

#[test]
fn nominated_pods_count_only_during_the_cycle() {
    let mut s = snapshot(&[node("n0", "4", "8Gi", 110), node("n1", "4", "8Gi", 110)]);
    let a = bytes(&pod("a", "1", "1Mi"));
    let b = bytes(&pod("b", "2", "1Mi"));
    assert_eq!(s.nominate(&[("default/a", &a, "n0"), ("default/b", &b, "n1")]), 2);
    assert_eq!((cpu(&s, "n0"), cpu(&s, "n1"), s.pod_count()), (0, 0, 0), "not counted in the snapshot");
    assert_eq!(fits(&mut s, "3"), vec!["n0"], "but added while their node is filtered");
    assert_eq!(fits(&mut s, "3500m"), Vec::<String>::new());
    s.end_nominated();
    assert_eq!(s.nominated_count(), 2, "kept until the snapshot settles");
    assert_eq!(fits(&mut s, "3500m"), vec!["n0", "n1"], "no longer added");
    s.settle();
    assert_eq!(s.nominated_count(), 0);
}

#[test]
fn each_cycle_takes_exactly_the_pods_passed() {
    let mut s = snapshot(&[node("n0", "4", "8Gi", 110), node("n1", "4", "8Gi", 110)]);
    let a = bytes(&pod("a", "1", "1Mi"));
    let b = bytes(&pod("b", "2", "1Mi"));
    let b2 = bytes(&pod("b", "3", "1Mi"));
    s.nominate(&[("default/a", &a, "n0"), ("default/b", &b, "n1")]);
    s.end_nominated();
    // a moves to n1, b's JSON changes, c is new: n0 has 3500m free, n1 none
    let c = bytes(&pod("c", "500m", "1Mi"));
    assert_eq!(s.nominate(&[("default/a", &a, "n1"), ("default/b", &b2, "n1"), ("default/c", &c, "n0")]), 3);
    assert_eq!(fits(&mut s, "3500m"), vec!["n0"]);
    assert_eq!(fits(&mut s, "3600m"), Vec::<String>::new());
    s.end_nominated();
    assert_eq!(s.nominate(&[("default/c", &c, "n0")]), 1);
    assert_eq!(fits(&mut s, "3600m"), vec!["n1"]);
    assert_eq!(s.pod_count(), 0);
}

#[test]
fn real_pods_win_over_nominated_ones() {
    let mut s = snapshot(&[node("n0", "4", "8Gi", 110)]);
    let a = bytes(&pod("a", "1", "1Mi"));
    s.add_pod_json("default/a", &bytes(&pod("a", "2", "1Mi")), "n0").unwrap();
    assert_eq!(s.nominate(&[("default/a", &a, "n0")]), 0, "a key counted as a real pod is not added");
    assert_eq!(fits(&mut s, "2"), vec!["n0"], "only the real pod counts");
    s.end_nominated();
    s.settle();
    assert_eq!(cpu(&s, "n0"), 2000, "the real pod is still counted");
    // the cache counts the nominated pod for real (it was assumed): the overlay's copy goes
    s.remove_pod("default/a");
    s.nominate(&[("default/a", &a, "n0")]);
    s.end_nominated();
    s.forget_nominated("default/a");
    assert_eq!(s.nominated_count(), 0);
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
    assert_eq!(s.nominated_count(), 0, "the real pod replaces the nominated one");
    assert_eq!(fits(&mut s, "3"), vec!["n0"], "counted once");
    s.end_nominated();
    s.settle();
    assert_eq!((cpu(&s, "n0"), s.pod_count(), s.nominated_count()), (1000, 1, 0));
}
