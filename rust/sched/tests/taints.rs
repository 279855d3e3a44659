//! TaintToleration and NodeUnschedulable: filter and score.

mod common;

use common::*;
use serde_json::json;

fn tolerating(mut p: serde_json::Value, tols: serde_json::Value) -> serde_json::Value {
    p["spec"]["tolerations"] = tols;
    p
}

#[test]
fn taints_are_honoured() {
    let nodes = vec![
        with_taint(node("ns", "4", "8Gi", 110), "dedicated", "gpu", "NoSchedule"),
        with_taint(node("ne", "4", "8Gi", 110), "dedicated", "gpu", "NoExecute"),
        with_taint(node("soft", "4", "8Gi", 110), "dedicated", "gpu", "PreferNoSchedule"),
    ];
    let mut s = snapshot(&nodes);
    let prof = default_profile();
    let r = s.schedule(&prof, &bytes(&pod("p", "100m", "1Mi")), true).unwrap();
    assert_eq!(r.node_name(), Some("soft"));
    assert_eq!(r.reasons, vec![("node(s) had untolerated taint(s)".to_string(), 2)]);
    assert_eq!(r.unresolvable, 2);
    let p = tolerating(pod("p", "100m", "1Mi"), json!([{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]));
    let r = s.schedule(&prof, &bytes(&p), true).unwrap();
    let mut feasible: Vec<&str> = r.feasible_names().collect();
    feasible.sort();
    assert_eq!(feasible, vec!["ns", "soft"]);
    // Placing many pods never uses a node whose taints they do not tolerate.
    let pods: Vec<(String, Vec<u8>)> = (0..50).map(|i| (format!("default/q{i}"), bytes(&pod(&format!("q{i}"), "10m", "1Mi")))).collect();
    let refs: Vec<(&str, &[u8])> = pods.iter().map(|(k, b)| (k.as_str(), b.as_slice())).collect();
    for r in s.schedule_batch(&prof, &refs).unwrap() {
        assert_eq!(r.node_name(), Some("soft"));
    }
}

#[test]
fn prefer_no_schedule_lowers_the_score() {
    let nodes = vec![
        with_taint(node("soft", "4", "8Gi", 110), "k", "v", "PreferNoSchedule"),
        node("clean", "4", "8Gi", 110),
    ];
    let mut s = snapshot(&nodes);
    let prof = profile(|c| c.scores = vec![("TaintToleration".into(), 3)]);
    let r = s.schedule(&prof, &bytes(&pod("p", "100m", "1Mi")), true).unwrap();
    assert_eq!(r.node_name(), Some("clean"));
    let by_name: Vec<(&str, i64)> = r.feasible_names().zip(r.scores.iter().copied()).collect();
    assert!(by_name.contains(&("clean", 300)) && by_name.contains(&("soft", 0)), "{by_name:?}");
    // Tolerating it (empty effect tolerates all effects) evens the scores.
    let p = tolerating(pod("p", "100m", "1Mi"), json!([{"key": "k", "operator": "Exists"}]));
    let r = s.schedule(&prof, &bytes(&p), true).unwrap();
    assert_eq!(r.scores, vec![300, 300]);
}

#[test]
fn unschedulable_nodes_and_their_toleration() {
    let mut cordoned = node("cordoned", "4", "8Gi", 110);
    cordoned["spec"]["unschedulable"] = json!(true);
    let mut s = snapshot(&[cordoned]);
    let prof = default_profile();
    let r = s.schedule(&prof, &bytes(&pod("p", "100m", "1Mi")), true).unwrap();
    assert_eq!(r.node, None);
    assert_eq!(r.reasons, vec![("node(s) were unschedulable".to_string(), 1)]);
    assert_eq!(r.unresolvable, 1);
    let p = tolerating(
        pod("p", "100m", "1Mi"),
        json!([{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]),
    );
    assert_eq!(s.schedule(&prof, &bytes(&p), true).unwrap().node_name(), Some("cordoned"));
}

#[test]
fn filters_stop_at_the_first_failing_plugin() {
    let mut cordoned = with_taint(node("n", "1", "1Gi", 110), "k", "v", "NoSchedule");
    cordoned["spec"]["unschedulable"] = json!(true);
    let mut s = snapshot(&[cordoned]);
    let r = s.schedule(&default_profile(), &bytes(&pod("p", "8", "1Mi")), true).unwrap();
    assert_eq!(r.reasons, vec![("node(s) were unschedulable".to_string(), 1)]);
    let taint_first = profile(|c| c.filters = vec!["TaintToleration".into(), "NodeUnschedulable".into()]);
    let r = s.schedule(&taint_first, &bytes(&pod("p", "8", "1Mi")), true).unwrap();
    assert_eq!(r.reasons, vec![("node(s) had untolerated taint(s)".to_string(), 1)]);
}
