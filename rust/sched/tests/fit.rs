//! NodeResourcesFit's filter: resources are never over-committed, reasons and codes as upstream.

mod common;

use common::*;
use kubecore_sched::Snapshot;
use serde_json::json;

#[test]
fn batch_never_overcommits() {
    // 30 nodes of 4 cpu / 8Gi / 20 pods; 1,000 pods of mixed sizes.
    let nodes: Vec<_> = (0..30).map(|i| node(&format!("n{i}"), "4", "8Gi", 20)).collect();
    let mut s = snapshot(&nodes);
    let sizes = [("100m", "128Mi"), ("700m", "1Gi"), ("1500m", "300Mi"), ("250m", "2Gi")];
    let pods: Vec<(String, Vec<u8>)> = (0..1000)
        .map(|i| {
            let (c, m) = sizes[i % sizes.len()];
            (format!("default/p{i}"), bytes(&pod(&format!("p{i}"), c, m)))
        })
        .collect();
    let refs: Vec<(&str, &[u8])> = pods.iter().map(|(k, b)| (k.as_str(), b.as_slice())).collect();
    let results = s.schedule_batch(&default_profile(), &refs).unwrap();
    let placed = results.iter().filter(|r| r.node.is_some()).count();
    assert_eq!(placed, s.pod_count());
    assert!(placed > 100 && placed < 1000, "the cluster fills up: {placed}");
    for name in s.node_names() {
        let (req, alloc) = (s.requested(&name).unwrap(), s.allocatable(&name).unwrap());
        for r in ["cpu", "memory", "pods"] {
            assert!(res(&req, r) <= res(&alloc, r), "{name} over-committed on {r}: {req:?} / {alloc:?}");
        }
    }
    let failed = results.iter().find(|r| r.node.is_none()).unwrap();
    assert_eq!(failed.evaluated, 30);
    assert!(failed.feasible.is_empty());
    assert!(failed.reasons.iter().map(|(_, n)| n).sum::<usize>() >= 30, "{:?}", failed.reasons);
    assert_eq!(failed.unresolvable, 0, "full nodes can be freed by preemption");
}

#[test]
fn reasons_and_codes() {
    let mut s = snapshot(&[node("small", "1", "1Gi", 110), node("full", "4", "8Gi", 1), node("big", "8", "16Gi", 110)]);
    s.add_pod_json("default/x", &bytes(&pod("x", "100m", "1Mi")), "full").unwrap();
    let p = bytes(&pod("p", "2", "2Gi"));
    let r = s.schedule(&default_profile(), &p, true).unwrap();
    assert_eq!(r.node_name(), Some("big"));
    assert_eq!(r.evaluated, 3);
    let reasons: Vec<(&str, usize)> = r.reasons.iter().map(|(k, n)| (k.as_str(), *n)).collect();
    assert_eq!(reasons, vec![("Insufficient cpu", 1), ("Insufficient memory", 1), ("Too many pods", 1)]);
    // "small" cannot ever hold 2 cpu: unresolvable; "full" only lacks a pod slot: resolvable.
    assert_eq!(r.unresolvable, 1);
}

#[test]
fn extended_resources_and_ignored_ones() {
    let mut gpu = node("gpu", "8", "16Gi", 110);
    gpu["status"]["allocatable"]["nvidia.com/gpu"] = json!("2");
    let mut s = snapshot(&[gpu, node("plain", "8", "16Gi", 110)]);
    let mut p = pod("p", "1", "1Gi");
    p["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = json!("2");
    let pb = bytes(&p);
    let prof = default_profile();
    let r = s.schedule(&prof, &pb, true).unwrap();
    assert_eq!(r.node_name(), Some("gpu"));
    assert_eq!(r.reasons, vec![("Insufficient nvidia.com/gpu".to_string(), 1)]);
    s.add_pod_json("default/p", &pb, "gpu").unwrap();
    assert_eq!(res(&s.requested("gpu").unwrap(), "nvidia.com/gpu"), 2);
    let r = s.schedule(&prof, &pb, true).unwrap();
    assert_eq!(r.node, None);
    assert_eq!(r.reasons, vec![("Insufficient nvidia.com/gpu".to_string(), 2)]);
    assert_eq!(r.unresolvable, 1, "plain has no gpu at all");
    let ignoring = profile(|c| c.ignored_resource_groups = vec!["nvidia.com".into()]);
    assert_eq!(s.schedule(&ignoring, &pb, true).unwrap().feasible.len(), 2);
    let ignoring = profile(|c| c.ignored_resources = vec!["nvidia.com/gpu".into()]);
    assert_eq!(s.schedule(&ignoring, &pb, true).unwrap().feasible.len(), 2);
}

#[test]
fn zero_request_pods_only_need_a_pod_slot() {
    let mut s = snapshot(&[node("n", "0", "0", 1)]);
    let p = bytes(&json!({"metadata": {"name": "b"}, "spec": {"containers": [{"name": "c"}]}}));
    assert!(s.schedule(&default_profile(), &p, true).unwrap().node.is_some());
    s.add_pod_json("default/b", &p, "n").unwrap();
    assert_eq!(s.filter_node(&default_profile(), &p, "n", &[]).unwrap(), vec!["Too many pods"]);
}

#[test]
fn filter_node_without_victims() {
    let mut s = snapshot(&[node("n", "2", "4Gi", 110)]);
    s.add_pod_json("default/a", &bytes(&pod("a", "1", "1Gi")), "n").unwrap();
    s.add_pod_json("default/b", &bytes(&pod("b", "500m", "1Gi")), "n").unwrap();
    let prof = default_profile();
    let p = bytes(&pod("p", "1", "1Gi"));
    assert_eq!(s.filter_node(&prof, &p, "n", &[]).unwrap(), vec!["Insufficient cpu"]);
    assert_eq!(s.filter_node(&prof, &p, "n", &["default/b"]).unwrap(), Vec::<String>::new());
    assert_eq!(s.filter_node(&prof, &p, "n", &["default/elsewhere"]).unwrap(), vec!["Insufficient cpu"]);
    assert!(s.filter_node(&prof, &p, "nope", &[]).is_err());
    // The dry run changed nothing.
    assert_eq!(res(&s.requested("n").unwrap(), "cpu"), 1500);
}

#[test]
fn sidecars_and_overhead_count() {
    let mut s: Snapshot = snapshot(&[node("n", "2", "4Gi", 110)]);
    let p = json!({"metadata": {"name": "p"}, "spec": {
        "overhead": {"cpu": "100m"},
        "initContainers": [{"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}}],
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}});
    s.add_pod_json("default/p", &bytes(&p), "n").unwrap();
    assert_eq!(res(&s.requested("n").unwrap(), "cpu"), 1600);
    let r = s.schedule(&default_profile(), &bytes(&pod("q", "500m", "0")), true).unwrap();
    assert_eq!(r.reasons, vec![("Insufficient cpu".to_string(), 1)]);
}
