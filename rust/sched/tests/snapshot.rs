//! Snapshot bookkeeping: pods subtract exactly what they added; nodes come, change and go.

mod common;

use common::*;
use kubecore_sched::Snapshot;
use serde_json::json;

#[test]
fn add_and_remove_are_exact() {
    let mut s = snapshot(&[node("n", "4", "8Gi", 110)]);
    let p = json!({"metadata": {"name": "p"}, "spec": {
        "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "3", "example.com/dev": "2"}}}],
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "0.3333", "memory": "1.5Gi", "ephemeral-storage": "1G"}}},
                       {"name": "d"}]}});
    s.add_pod_json("default/p", &bytes(&p), "n").unwrap();
    let req = s.requested("n").unwrap();
    assert_eq!((res(&req, "cpu"), res(&req, "memory"), res(&req, "example.com/dev")), (3000, 3 << 29, 2));
    assert_eq!((res(&req, "ephemeral-storage"), res(&req, "pods")), (1_000_000_000, 1));
    // Re-adding the same key replaces it.
    s.add_pod_json("default/p", &bytes(&pod("p", "250m", "1Gi")), "n").unwrap();
    assert_eq!(res(&s.requested("n").unwrap(), "cpu"), 250);
    assert_eq!(s.pod_count(), 1);
    assert!(s.remove_pod("default/p"));
    assert!(!s.remove_pod("default/p"));
    assert!(s.requested("n").unwrap().iter().all(|(_, v)| *v == 0));
}

#[test]
fn orphans_wait_for_their_node() {
    let mut s = snapshot(&[]);
    s.add_pod_json("default/p", &bytes(&pod("p", "1", "1Gi")), "later").unwrap();
    assert_eq!(s.pod_count(), 1);
    assert!(s.requested("later").is_err());
    s.set_node_json(&bytes(&node("later", "4", "8Gi", 110))).unwrap();
    assert_eq!(res(&s.requested("later").unwrap(), "cpu"), 1000);
    // Removing the node keeps the pod; a node of that name counts it again.
    assert!(s.remove_node("later"));
    assert!(!s.remove_node("later"));
    assert_eq!((s.node_count(), s.pod_count()), (0, 1));
    s.set_node_json(&bytes(&node("other", "4", "8Gi", 110))).unwrap();
    assert_eq!(res(&s.requested("other").unwrap(), "cpu"), 0, "a reused slot starts empty");
    s.set_node_json(&bytes(&node("later", "4", "8Gi", 110))).unwrap();
    assert_eq!(res(&s.requested("later").unwrap(), "cpu"), 1000);
    assert!(s.remove_pod("default/p"));
    assert_eq!(res(&s.requested("later").unwrap(), "cpu"), 0);
}

#[test]
fn replacing_a_node_keeps_its_pods() {
    let mut s = snapshot(&[node("n", "4", "8Gi", 110)]);
    s.add_pod_json("default/p", &bytes(&pod("p", "1", "1Gi")), "n").unwrap();
    s.set_node_json(&bytes(&with_taint(node("n", "8", "16Gi", 110), "k", "v", "NoSchedule"))).unwrap();
    assert_eq!(s.node_count(), 1);
    assert_eq!(res(&s.allocatable("n").unwrap(), "cpu"), 8000);
    assert_eq!(res(&s.requested("n").unwrap(), "cpu"), 1000);
    let r = s.schedule(&default_profile(), &bytes(&pod("q", "1", "1Gi")), true).unwrap();
    assert_eq!(r.node, None, "the new taint counts");
}

#[test]
fn bad_nodes_are_errors() {
    let mut s = snapshot(&[]);
    assert!(s.set_node_json(b"not json").is_err());
    assert!(s.set_node_json(&bytes(&json!({"metadata": {}}))).is_err());
    assert!(s.set_node_json(&bytes(&node("n", "four", "8Gi", 110))).is_err());
    assert_eq!(s.node_count(), 0);
    assert!(s.add_pod_json("default/p", b"{", "n").is_err());
    assert_eq!(s.pod_count(), 0);
}

/// The batch path the scheduler uses for nominated pods: the same bytes again reuse the parse,
/// changed bytes under the same key are parsed again, bad JSON is skipped.
#[test]
fn add_pods_cached_reparses_changed_bytes() {
    let mut s = snapshot(&[node("n1", "4", "8Gi", 110)]);
    let small = bytes(&pod("p", "500m", "1Gi"));
    let big = bytes(&pod("p", "2", "1Gi"));
    let cpu = |s: &Snapshot| res(&s.requested("n1").unwrap(), "cpu");
    assert_eq!(s.add_pods_cached(&[("default/p", &small, "n1"), ("default/bad", b"{", "n1")]), vec!["default/p"]);
    assert_eq!(cpu(&s), 500);
    assert!(s.remove_pod("default/p"));
    assert_eq!(cpu(&s), 0);
    assert_eq!(s.add_pods_cached(&[("default/p", &small, "n1")]), vec!["default/p"]);
    assert_eq!(cpu(&s), 500);
    s.remove_pod("default/p");
    s.add_pods_cached(&[("default/p", &big, "n1")]);
    assert_eq!(cpu(&s), 2000, "changed bytes under the same key are parsed again");
}
