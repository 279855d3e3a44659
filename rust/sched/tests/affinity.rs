//! NodeAffinity: nodeSelector, required terms with every operator and matchFields, preferred terms.

mod common;

use common::*;
use serde_json::{json, Value};

fn cluster() -> kubecore_sched::Snapshot {
    snapshot(&[
        with_labels(node("a", "4", "8Gi", 110), &[("zone", "z1"), ("gen", "3"), ("gpu", "yes")]),
        with_labels(node("b", "4", "8Gi", 110), &[("zone", "z2"), ("gen", "5")]),
        with_labels(node("c", "4", "8Gi", 110), &[("zone", "z3"), ("gen", "x")]),
    ])
}

fn with_required(terms: Value) -> Vec<u8> {
    let mut p = pod("p", "100m", "1Mi");
    p["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}});
    bytes(&p)
}

fn feasible(s: &mut kubecore_sched::Snapshot, pod: &[u8]) -> Vec<String> {
    let r = s.schedule(&default_profile(), pod, false).unwrap();
    let mut names: Vec<String> = r.feasible_names().map(str::to_string).collect();
    names.sort();
    names
}

fn expr(key: &str, op: &str, values: &[&str]) -> Value {
    json!([{"matchExpressions": [{"key": key, "operator": op, "values": values}]}])
}

#[test]
fn operators() {
    let mut s = cluster();
    let cases: &[(Value, &[&str])] = &[
        (expr("zone", "In", &["z1", "z3", "nowhere"]), &["a", "c"]),
        (expr("zone", "NotIn", &["z1"]), &["b", "c"]),
        (expr("missing", "NotIn", &["v"]), &["a", "b", "c"]),
        (expr("gpu", "Exists", &[]), &["a"]),
        (expr("gpu", "DoesNotExist", &[]), &["b", "c"]),
        (expr("gen", "Gt", &["4"]), &["b"]),
        (expr("gen", "Lt", &["4"]), &["a"]),
        (expr("zone", "In", &["nowhere"]), &[]),
        // Terms are ORed, expressions inside one term ANDed.
        (json!([{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]},
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z2"]},
                                      {"key": "gen", "operator": "Gt", "values": ["10"]}]}]), &["a"]),
        // matchFields metadata.name, alone and with expressions.
        (json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]}]), &["b"]),
        (json!([{"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["b"]}]}]), &["a", "c"]),
        (json!([{"matchExpressions": [{"key": "gen", "operator": "Exists"}],
                 "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["c"]}]}]), &["c"]),
        // Empty terms match nothing; an empty term list matches nothing.
        (json!([{}]), &[]),
        (json!([]), &[]),
        // A term that does not parse matches nothing, the others still count.
        (json!([{"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["four"]}]},
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z2"]}]}]), &["b"]),
        (expr("zone", "In", &[]), &[]),
        (expr("zone", "Exists", &["z1"]), &[]),
        (expr("zone", "Near", &["z1"]), &[]),
        (json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]}]), &[]),
    ];
    for (terms, want) in cases {
        assert_eq!(feasible(&mut s, &with_required(terms.clone())), *want, "{terms}");
    }
}

#[test]
fn node_selector_and_reason() {
    let mut s = cluster();
    let mut p = pod("p", "100m", "1Mi");
    p["spec"]["nodeSelector"] = json!({"zone": "z2", "gen": "5"});
    let r = s.schedule(&default_profile(), &bytes(&p), true).unwrap();
    assert_eq!(r.node_name(), Some("b"));
    assert_eq!(r.reasons, vec![("node(s) didn't match Pod's node affinity/selector".to_string(), 2)]);
    assert_eq!(r.unresolvable, 2);
    // nodeSelector and required affinity must both hold.
    p["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
        {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}]}}});
    assert_eq!(feasible(&mut s, &bytes(&p)), Vec::<String>::new());
    p["spec"]["nodeSelector"] = json!({"zone": "unknown-value"});
    assert_eq!(feasible(&mut s, &bytes(&p)), Vec::<String>::new());
}

#[test]
fn preferred_terms_score() {
    let mut s = cluster();
    let mut p = pod("p", "100m", "1Mi");
    p["spec"]["affinity"] = json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z2"]}]}},
        {"weight": 5, "preference": {"matchExpressions": [{"key": "gen", "operator": "Exists"}]}},
        {"weight": 0, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}}]}});
    let prof = profile(|c| c.scores = vec![("NodeAffinity".into(), 2)]);
    let r = s.schedule(&prof, &bytes(&p), true).unwrap();
    assert_eq!(r.node_name(), Some("b"));
    let mut by_name: Vec<(String, i64)> = r.feasible_names().map(str::to_string).zip(r.scores.iter().copied()).collect();
    by_name.sort();
    // raw a=5, b=15, c=5 -> normalized 33, 100, 33 -> weight 2.
    assert_eq!(by_name, vec![("a".into(), 66), ("b".into(), 200), ("c".into(), 66)]);
}
