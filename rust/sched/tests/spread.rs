//! PodTopologySpread: hard constraints never let the skew exceed maxSkew; soft ones score.

mod common;

use common::*;
use kubecore_sched::Snapshot;
use serde_json::{json, Value};

fn zoned(name: &str, zone: &str) -> Value {
    with_labels(node(name, "8", "16Gi", 110), &[("zone", zone)])
}

fn six_nodes() -> Snapshot {
    snapshot(&[zoned("a1", "a"), zoned("a2", "a"), zoned("b1", "b"), zoned("b2", "b"), zoned("c1", "c"), zoned("c2", "c")])
}

fn web(name: &str, constraint: Value) -> Value {
    let mut p = pod(name, "100m", "10Mi");
    p["metadata"]["labels"] = json!({"app": "web", "version": "1"});
    p["spec"]["topologySpreadConstraints"] = json!([constraint]);
    p
}

fn zone_rule(when: &str) -> Value {
    json!({"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": when, "labelSelector": {"matchLabels": {"app": "web"}}})
}

fn place(s: &mut Snapshot, key: &str, p: &Value, node: &str) {
    s.add_pod_json(key, &bytes(p), node).unwrap();
}

#[test]
fn hard_constraint_filters_by_skew() {
    let mut s = six_nodes();
    let rule = zone_rule("DoNotSchedule");
    place(&mut s, "default/w1", &web("w1", rule.clone()), "a1");
    place(&mut s, "default/w2", &web("w2", rule.clone()), "a1");
    place(&mut s, "default/w3", &web("w3", rule.clone()), "b1");
    // Other namespaces, other labels and terminating pods do not count.
    let mut other_ns = web("x", rule.clone());
    other_ns["metadata"]["namespace"] = json!("other");
    place(&mut s, "other/x", &other_ns, "c1");
    place(&mut s, "default/plain", &pod("plain", "100m", "10Mi"), "c1");
    let mut leaving = web("l", rule.clone());
    leaving["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    place(&mut s, "default/l", &leaving, "c2");
    let p = web("p", rule.clone());
    assert_eq!(feasible(&mut s, &p), vec!["c1", "c2"]);
    let r = s.schedule(&default_profile(), &bytes(&p), true).unwrap();
    assert_eq!(r.reasons, vec![("node(s) didn't match pod topology spread constraints".to_string(), 4)]);
    assert_eq!(r.unresolvable, 0);
    // A preemption dry run without a1's pods lets a1 through (a: 0, b: 1, c: 0); pods of other
    // nodes are not the node's victims.
    let fits = s.filter_node(&default_profile(), &bytes(&p), "a1", &["default/w1", "default/w2"]).unwrap();
    assert_eq!(fits, Vec::<String>::new());
    let still = s.filter_node(&default_profile(), &bytes(&p), "a2", &["default/w1", "default/w2"]).unwrap();
    assert_eq!(still, vec!["node(s) didn't match pod topology spread constraints"]);
}

#[test]
fn batches_keep_the_skew() {
    let mut s = six_nodes();
    let pods: Vec<(String, Vec<u8>)> =
        (0..31).map(|i| (format!("default/w{i}"), bytes(&web(&format!("w{i}"), zone_rule("DoNotSchedule"))))).collect();
    let refs: Vec<(&str, &[u8])> = pods.iter().map(|(k, b)| (k.as_str(), b.as_slice())).collect();
    let results = s.schedule_batch(&default_profile(), &refs).unwrap();
    let mut per_zone = [0i64; 3];
    for r in &results {
        let node = r.node_name().expect("always a zone within the skew");
        per_zone[(node.as_bytes()[0] - b'a') as usize] += 1;
        let (lo, hi) = (per_zone.iter().min().unwrap(), per_zone.iter().max().unwrap());
        assert!(hi - lo <= 1, "skew above maxSkew after {node}: {per_zone:?}");
    }
    assert_eq!(per_zone.iter().sum::<i64>(), 31);
}

#[test]
fn missing_label_min_domains_and_policies() {
    let mut s = snapshot(&[zoned("a1", "a"), zoned("b1", "b"), node("bare", "8", "16Gi", 110)]);
    let rule = zone_rule("DoNotSchedule");
    let r = s.schedule(&default_profile(), &bytes(&web("p", rule.clone())), true).unwrap();
    assert_eq!(r.reasons, vec![("node(s) didn't match pod topology spread constraints (missing required label)".to_string(), 1)]);
    assert_eq!(r.unresolvable, 1);
    place(&mut s, "default/w1", &web("w1", rule.clone()), "a1");
    place(&mut s, "default/w2", &web("w2", rule.clone()), "b1");
    assert_eq!(feasible(&mut s, &web("p", rule.clone())), vec!["a1", "b1"]);
    // Fewer domains (2) than minDomains (3): the global minimum counts as 0, skew 2 > 1.
    let mut min3 = rule.clone();
    min3["minDomains"] = json!(3);
    assert_eq!(feasible(&mut s, &web("p", min3)), Vec::<String>::new());
    // nodeAffinityPolicy Honor (default): a zone the pod cannot go to does not count.
    let mut s = six_nodes();
    place(&mut s, "default/w1", &web("w1", rule.clone()), "a1");
    place(&mut s, "default/w2", &web("w2", rule.clone()), "b1");
    let mut p = web("p", rule.clone());
    p["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms":
        [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}]}}});
    assert_eq!(feasible(&mut s, &p), vec!["a1", "a2", "b1", "b2"]);
    let mut ignore = rule.clone();
    ignore["nodeAffinityPolicy"] = json!("Ignore");
    p["spec"]["topologySpreadConstraints"] = json!([ignore]);
    assert_eq!(feasible(&mut s, &p), Vec::<String>::new(), "zone c (0 pods) is the minimum again");
    // nodeTaintsPolicy Honor: a zone whose nodes all have untolerated taints does not count.
    let mut s = snapshot(&[zoned("a1", "a"), zoned("b1", "b"), with_taint(zoned("c1", "c"), "k", "v", "NoSchedule")]);
    place(&mut s, "default/w1", &web("w1", rule.clone()), "a1");
    place(&mut s, "default/w2", &web("w2", rule.clone()), "b1");
    assert_eq!(feasible(&mut s, &web("p", rule.clone())), Vec::<String>::new(), "Ignore: zone c counts with 0");
    let mut honor = rule.clone();
    honor["nodeTaintsPolicy"] = json!("Honor");
    assert_eq!(feasible(&mut s, &web("p", honor)), vec!["a1", "b1"]);
}

#[test]
fn match_label_keys_narrow_the_selector() {
    let mut s = snapshot(&[zoned("a1", "a"), zoned("b1", "b")]);
    let rule = zone_rule("DoNotSchedule");
    place(&mut s, "default/w1", &web("w1", rule.clone()), "a1");
    place(&mut s, "default/w2", &web("w2", rule.clone()), "a1");
    let mut v2 = web("p", rule.clone());
    v2["metadata"]["labels"]["version"] = json!("2");
    assert_eq!(feasible(&mut s, &v2), vec!["b1"]);
    let mut keyed = rule.clone();
    keyed["matchLabelKeys"] = json!(["version"]);
    v2["spec"]["topologySpreadConstraints"] = json!([keyed]);
    assert_eq!(feasible(&mut s, &v2), vec!["a1", "b1"], "no pod of version 2 anywhere yet");
}

#[test]
fn soft_constraints_score_emptier_domains_higher() {
    let mut s = snapshot(&[zoned("a1", "a"), zoned("b1", "b")]);
    let rule = zone_rule("ScheduleAnyway");
    place(&mut s, "default/w1", &web("w1", rule.clone()), "a1");
    place(&mut s, "default/w2", &web("w2", rule.clone()), "a1");
    let only = profile(|c| c.scores = vec![("PodTopologySpread".into(), 2)]);
    let r = s.schedule(&only, &bytes(&web("p", rule.clone())), true).unwrap();
    let mut by_name: Vec<(String, i64)> = r.feasible_names().map(str::to_string).zip(r.scores.iter().copied()).collect();
    by_name.sort();
    // a: round(2 * ln 4) = 3, b: 0 -> normalized 0 and 100, weight 2.
    assert_eq!(by_name, vec![("a1".into(), 0), ("b1".into(), 200)]);
    assert_eq!(r.node_name(), Some("b1"));
    // Hostname spreading counts each node's own pods; nodes without the key score 0.
    let mut s = snapshot(&[zoned("a1", "a"), zoned("a2", "a")]);
    let host = json!({"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
                      "labelSelector": {"matchLabels": {"app": "web"}}});
    place(&mut s, "default/w1", &web("w1", host.clone()), "a1");
    let r = s.schedule(&only, &bytes(&web("p", host)), true).unwrap();
    assert_eq!(r.node_name(), Some("a2"));
}

/// The scheduler passes a pod's resolved cluster default constraints beside it; with
/// `defaultingType: System` a node without the zone label still scores by hostname (upstream's
/// requireAllTopologies false), with `List` it is ignored. Expected figures worked by hand from
/// upstream's formula: `count·ln(domains+2) + maxSkew-1` per constraint, then normalized.
#[test]
fn default_constraints_system_vs_list() {
    let nodes = [zoned("a1", "a"), zoned("a2", "a"), node("bare", "8", "16Gi", 110)];
    let defaults = json!([
        {"maxSkew": 3, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
         "labelSelector": {"matchLabels": {"app": "web"}}},
        {"maxSkew": 5, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway",
         "labelSelector": {"matchLabels": {"app": "web"}}},
    ]);
    let only = profile(|c| c.scores = vec![("PodTopologySpread".into(), 2)]);
    let score = |system: bool| {
        let mut s = snapshot(&nodes);
        let mut w = pod("w", "100m", "10Mi");
        w["metadata"]["labels"] = json!({"app": "web"});
        place(&mut s, "default/w1", &w, "a1");
        place(&mut s, "default/w2", &w, "a1");
        let mut p = w.clone();
        p["kubecoreDefaultSpread"] = json!({"system": system, "constraints": defaults.clone()});
        let r = s.schedule(&only, &bytes(&p), false).unwrap();
        let mut by_name: Vec<(String, i64)> = r.feasible_names().map(str::to_string).zip(r.scores.iter().copied()).collect();
        by_name.sort();
        by_name
    };
    // System: a1 = 2·ln5+2 + 2·ln4+4 ≈ 12, a2 = 2 + 2·ln4+4 ≈ 9, bare = 2 (hostname only).
    assert_eq!(score(true), vec![("a1".into(), 32), ("a2".into(), 82), ("bare".into(), 200)]);
    // List: bare ignored; a1 = 2·ln4+2 + 2·ln3+4 ≈ 11, a2 = 2 + 2·ln3+4 ≈ 8.
    assert_eq!(score(false), vec![("a1".into(), 144), ("a2".into(), 200), ("bare".into(), 0)]);
    // A pod's own constraints win over the defaults.
    let mut s = snapshot(&nodes);
    let mut p = web("p", zone_rule("DoNotSchedule"));
    p["kubecoreDefaultSpread"] = json!({"system": true, "constraints": defaults.clone()});
    assert_eq!(feasible(&mut s, &p), vec!["a1", "a2"]); // the pod's own hard rule: bare lacks the key
}
