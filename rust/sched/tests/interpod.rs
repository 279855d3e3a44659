//! InterPodAffinity: required affinity / anti-affinity (both directions), namespaces, scores.

mod common;

use common::*;
use kubecore_sched::Snapshot;
use serde_json::{json, Value};

fn zoned(name: &str, zone: &str) -> Value {
    with_labels(node(name, "8", "16Gi", 110), &[("zone", zone)])
}

fn labeled(name: &str, ns: &str, app: &str) -> Value {
    let mut p = pod(name, "100m", "10Mi");
    p["metadata"]["namespace"] = json!(ns);
    p["metadata"]["labels"] = json!({ "app": app });
    p
}

fn term(app: &str, key: &str) -> Value {
    json!({"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key})
}

fn with_affinity(mut p: Value, kind: &str, required: Vec<Value>, preferred: Vec<(i64, Value)>) -> Value {
    let preferred: Vec<Value> = preferred.into_iter().map(|(w, t)| json!({"weight": w, "podAffinityTerm": t})).collect();
    p["spec"]["affinity"] = json!({ kind: {
        "requiredDuringSchedulingIgnoredDuringExecution": required,
        "preferredDuringSchedulingIgnoredDuringExecution": preferred}});
    p
}

fn cluster() -> Snapshot {
    snapshot(&[zoned("a1", "a"), zoned("a2", "a"), zoned("b1", "b"), zoned("b2", "b")])
}

#[test]
fn required_anti_affinity_is_never_violated() {
    let mut s = cluster();
    let spread_out = |i: usize| {
        let p = labeled(&format!("w{i}"), "default", "web");
        with_affinity(p, "podAntiAffinity", vec![term("web", "kubernetes.io/hostname")], vec![])
    };
    let pods: Vec<(String, Vec<u8>)> = (0..6).map(|i| (format!("default/w{i}"), bytes(&spread_out(i)))).collect();
    let refs: Vec<(&str, &[u8])> = pods.iter().map(|(k, b)| (k.as_str(), b.as_slice())).collect();
    let results = s.schedule_batch(&default_profile(), &refs).unwrap();
    let mut placed: Vec<&str> = results.iter().filter_map(|r| r.node_name()).collect();
    placed.sort();
    assert_eq!(placed, vec!["a1", "a2", "b1", "b2"], "one per node");
    assert_eq!(results[5].reasons, vec![("node(s) didn't match pod anti-affinity rules".to_string(), 4)]);
    assert_eq!(results[5].unresolvable, 0);
    // Preemption's dry run: without the web pod on a1 the node fits again.
    let on_a1 = s.pod("default/w0").map(|p| p.node.clone()).unwrap();
    let victim = ["default/w0"];
    assert!(s.filter_node(&default_profile(), &bytes(&spread_out(9)), &on_a1, &victim).unwrap().is_empty());
}

#[test]
fn existing_pods_anti_affinity_is_symmetric() {
    let mut s = cluster();
    let loner = with_affinity(labeled("db", "default", "db"), "podAntiAffinity", vec![term("web", "zone")], vec![]);
    s.add_pod_json("default/db", &bytes(&loner), "a1").unwrap();
    let web = labeled("w", "default", "web");
    assert_eq!(feasible(&mut s, &web), vec!["b1", "b2"]);
    let r = s.schedule(&default_profile(), &bytes(&web), true).unwrap();
    assert_eq!(r.reasons, vec![("node(s) didn't satisfy existing pods anti-affinity rules".to_string(), 2)]);
    // Only pods its namespaces cover: a web pod elsewhere is not repelled.
    assert_eq!(feasible(&mut s, &labeled("w", "other", "web")).len(), 4);
    assert!(s.filter_node(&default_profile(), &bytes(&web), "a1", &["default/db"]).unwrap().is_empty());
}

#[test]
fn required_affinity_follows_its_peers() {
    let mut s = cluster();
    let follower = with_affinity(labeled("f", "default", "web"), "podAffinity", vec![term("db", "zone")], vec![]);
    // No db pod anywhere, and the pod is no db itself: nowhere.
    let r = s.schedule(&default_profile(), &bytes(&follower), true).unwrap();
    assert_eq!(r.reasons, vec![("node(s) didn't match pod affinity rules".to_string(), 4)]);
    assert_eq!(r.unresolvable, 4);
    s.add_pod_json("default/db", &bytes(&labeled("db", "default", "db")), "b2").unwrap();
    assert_eq!(feasible(&mut s, &follower), vec!["b1", "b2"]);
    // The first of a group that has affinity to itself may go anywhere.
    let first = with_affinity(labeled("g", "default", "grp"), "podAffinity", vec![term("grp", "zone")], vec![]);
    assert_eq!(feasible(&mut s, &first).len(), 4);
    // A node without the topology key never satisfies the term.
    s.set_node_json(&bytes(&node("bare", "8", "16Gi", 110))).unwrap();
    assert_eq!(feasible(&mut s, &follower), vec!["b1", "b2"]);
}

#[test]
fn namespaces_of_terms() {
    let mut s = cluster();
    s.add_pod_json("team/db", &bytes(&labeled("db", "team", "db")), "a1").unwrap();
    let t = |extra: Value| {
        let mut t = term("db", "zone");
        for (k, v) in extra.as_object().unwrap() {
            t[k] = v.clone();
        }
        with_affinity(labeled("f", "default", "web"), "podAffinity", vec![t], vec![])
    };
    assert_eq!(feasible(&mut s, &t(json!({}))), Vec::<String>::new(), "own namespace only");
    assert_eq!(feasible(&mut s, &t(json!({"namespaces": ["team"]}))), vec!["a1", "a2"]);
    assert_eq!(feasible(&mut s, &t(json!({"namespaceSelector": {}}))), vec!["a1", "a2"], "{{}} selects all");
    let resolved = json!({"namespaceSelector": {"matchLabels": {"kind": "team"}}, "resolvedNamespaces": ["team"]});
    assert_eq!(feasible(&mut s, &t(resolved)), vec!["a1", "a2"]);
    let unresolved = json!({"namespaceSelector": {"matchLabels": {"kind": "team"}}});
    assert_eq!(feasible(&mut s, &t(unresolved)), Vec::<String>::new());
}

#[test]
fn preferred_terms_score() {
    let mut s = cluster();
    s.add_pod_json("default/db", &bytes(&labeled("db", "default", "db")), "b1").unwrap();
    let only = profile(|c| c.scores = vec![("InterPodAffinity".into(), 2)]);
    let near = with_affinity(labeled("n", "default", "web"), "podAffinity", vec![], vec![(10, term("db", "zone"))]);
    let r = s.schedule(&only, &bytes(&near), true).unwrap();
    let mut by_name: Vec<(String, i64)> = r.feasible_names().map(str::to_string).zip(r.scores.iter().copied()).collect();
    by_name.sort();
    assert_eq!(by_name, vec![("a1".into(), 0), ("a2".into(), 0), ("b1".into(), 200), ("b2".into(), 200)]);
    let far = with_affinity(labeled("n", "default", "web"), "podAntiAffinity", vec![], vec![(10, term("db", "zone"))]);
    let r = s.schedule(&only, &bytes(&far), true).unwrap();
    assert!(r.node_name().unwrap().starts_with('a'));
    // An existing pod's preferred anti-affinity toward the incoming pod pushes it away, and an
    // existing pod's required affinity toward it pulls it near (hardPodAffinityWeight 1).
    let mut s = cluster();
    let shy = with_affinity(labeled("s", "default", "shy"), "podAntiAffinity", vec![], vec![(50, term("web", "zone"))]);
    s.add_pod_json("default/s", &bytes(&shy), "a1").unwrap();
    let r = s.schedule(&only, &bytes(&labeled("w", "default", "web")), true).unwrap();
    assert!(r.node_name().unwrap().starts_with('b'));
    let mut s = cluster();
    let fan = with_affinity(labeled("f", "default", "fan"), "podAffinity", vec![term("web", "zone")], vec![]);
    s.add_pod_json("default/f", &bytes(&fan), "b2").unwrap();
    let r = s.schedule(&only, &bytes(&labeled("w", "default", "web")), true).unwrap();
    assert!(r.node_name().unwrap().starts_with('b'));
}
