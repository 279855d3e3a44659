//! The cycle: numFeasibleNodesToFind, the rotating start index, zone order, host selection.

mod common;

use common::*;
use kubecore_sched::{num_feasible_nodes_to_find, Snapshot};
use serde_json::json;

#[test]
fn num_feasible_nodes_to_find_values() {
    // Adaptive: 50 - n/125 percent, at least 5 %, at least 100 nodes; all nodes under 100.
    let cases = [(50, 50), (99, 99), (100, 100), (1000, 420), (5000, 500), (6000, 300), (10000, 500), (20000, 1000)];
    for (n, want) in cases {
        assert_eq!(num_feasible_nodes_to_find(0, n), want, "{n} nodes");
    }
    assert_eq!(num_feasible_nodes_to_find(30, 1000), 300);
    assert_eq!(num_feasible_nodes_to_find(5, 1000), 100);
    assert_eq!(num_feasible_nodes_to_find(100, 5000), 5000);
    assert_eq!(num_feasible_nodes_to_find(30, 50), 50);
}

fn uniform(n: usize) -> Snapshot {
    let nodes: Vec<_> = (0..n).map(|i| node(&format!("n{i:05}"), "4", "32Gi", 110)).collect();
    snapshot(&nodes)
}

#[test]
fn evaluates_only_what_it_needs_and_rotates() {
    let mut s = uniform(1000);
    let prof = default_profile();
    let p = bytes(&pod("p", "100m", "1Mi"));
    let r = s.schedule(&prof, &p, false).unwrap();
    assert_eq!((r.feasible.len(), r.evaluated), (420, 420));
    let first: Vec<String> = r.feasible_names().map(str::to_string).collect();
    assert_eq!(first[0], "n00000");
    assert_eq!(first[419], "n00419");
    let r = s.schedule(&prof, &p, false).unwrap();
    let second: Vec<&str> = r.feasible_names().collect();
    assert_eq!(second[0], "n00420");
    assert_eq!(second[419], "n00839", "continues where the last cycle stopped");
    let r = s.schedule(&prof, &p, false).unwrap();
    let third: Vec<&str> = r.feasible_names().collect();
    assert_eq!((third[0], third[159], third[160]), ("n00840", "n00999", "n00000"), "wraps around");
}

#[test]
fn failed_nodes_count_as_processed() {
    let mut nodes: Vec<_> = (0..200).map(|i| node(&format!("n{i:03}"), "4", "32Gi", 110)).collect();
    for n in nodes.iter_mut().take(50) {
        *n = with_taint(n.clone(), "k", "v", "NoSchedule");
    }
    let mut s = snapshot(&nodes);
    let prof = default_profile();
    // 200 nodes: find 100. The first 50 fail, so 150 are processed.
    let r = s.schedule(&prof, &bytes(&pod("p", "100m", "1Mi")), false).unwrap();
    assert_eq!((r.feasible.len(), r.evaluated), (100, 150));
    assert_eq!(r.reasons, vec![("node(s) had untolerated taint(s)".to_string(), 50)]);
    let r = s.schedule(&prof, &bytes(&pod("p", "100m", "1Mi")), false).unwrap();
    assert_eq!(r.feasible_names().next(), Some("n150"));
    assert_eq!((r.feasible.len(), r.evaluated), (100, 150), "n150..n199, 50 tainted, n050..n099");
}

#[test]
fn parallel_chunks_match_a_sequential_scan() {
    // 10,000 nodes where every third node is too small: find 500 in order.
    let nodes: Vec<_> = (0..10_000)
        .map(|i| node(&format!("n{i:05}"), if i % 3 == 0 { "50m" } else { "4" }, "32Gi", 110))
        .collect();
    let mut s = snapshot(&nodes);
    let r = s.schedule(&default_profile(), &bytes(&pod("p", "100m", "1Mi")), false).unwrap();
    assert_eq!(r.feasible.len(), 500);
    let names: Vec<&str> = r.feasible_names().collect();
    let want: Vec<String> = (0..10_000).filter(|i| i % 3 != 0).take(500).map(|i| format!("n{i:05}")).collect();
    assert_eq!(names, want);
    assert_eq!(r.evaluated, 750);
    assert_eq!(r.reasons, vec![("Insufficient cpu".to_string(), 250)]);
}

#[test]
fn zones_interleave() {
    let zone = |n: &str, z: &str| with_labels(node(n, "4", "8Gi", 110), &[("topology.kubernetes.io/zone", z)]);
    let mut s = snapshot(&[zone("a1", "a"), zone("a2", "a"), zone("a3", "a"), zone("b1", "b"), zone("c1", "c"), zone("b2", "b")]);
    assert_eq!(s.node_names(), vec!["a1", "b1", "c1", "a2", "b2", "a3"]);
    s.remove_node("b1");
    assert_eq!(s.node_names(), vec!["a1", "b2", "c1", "a2", "a3"]);
}

#[test]
fn host_selection_is_uniform_among_ties_and_seeded() {
    let pick = |seed: u64| {
        let mut s = Snapshot::new(seed);
        for i in 0..4 {
            s.set_node_json(&bytes(&node(&format!("n{i}"), "4", "8Gi", 110))).unwrap();
        }
        let prof = default_profile();
        (0..40).map(|_| s.schedule(&prof, &bytes(&pod("p", "100m", "1Mi")), true).unwrap().node_name().unwrap().to_string()).collect::<Vec<_>>()
    };
    assert_eq!(pick(1), pick(1));
    let picks = pick(2);
    for i in 0..4 {
        assert!(picks.contains(&format!("n{i}")), "every tied node gets picked sometimes: {picks:?}");
    }
}

#[test]
fn best_score_wins_and_single_node_is_not_scored() {
    let mut s = snapshot(&[node("busy", "4", "8Gi", 110), node("idle", "4", "8Gi", 110)]);
    s.add_pod_json("default/x", &bytes(&pod("x", "3", "6Gi")), "busy").unwrap();
    let r = s.schedule(&default_profile(), &bytes(&pod("p", "100m", "100Mi")), true).unwrap();
    assert_eq!(r.node_name(), Some("idle"));
    assert_eq!(r.scores.len(), 2);
    let mut one = snapshot(&[node("only", "4", "8Gi", 110)]);
    let r = one.schedule(&default_profile(), &bytes(&pod("p", "100m", "100Mi")), true).unwrap();
    assert_eq!((r.node_name(), r.scores.len(), r.evaluated), (Some("only"), 0, 1));
    let r = one.schedule(&default_profile(), &bytes(&pod("p", "100m", "100Mi")), false).unwrap();
    assert_eq!(r.node, None, "select=false leaves the choice to the caller");
    assert_eq!(r.feasible.len(), 1);
}

#[test]
fn node_name_filter_and_empty_snapshot() {
    let mut s = snapshot(&[node("a", "4", "8Gi", 110), node("b", "4", "8Gi", 110)]);
    let mut p = pod("p", "100m", "1Mi");
    p["spec"]["nodeName"] = json!("b");
    let r = s.schedule(&default_profile(), &bytes(&p), true).unwrap();
    assert_eq!(r.node_name(), Some("b"));
    assert_eq!(r.reasons, vec![("node(s) didn't match the requested node name".to_string(), 1)]);
    let mut empty = Snapshot::new(0);
    let r = empty.schedule(&default_profile(), &bytes(&p), true).unwrap();
    assert_eq!((r.node, r.evaluated), (None, 0));
}

#[test]
fn bad_input_is_an_error_and_a_bad_batch_counts_nothing() {
    let mut s = snapshot(&[node("a", "4", "8Gi", 110)]);
    assert!(s.schedule(&default_profile(), b"[1,2", true).is_err());
    let good = bytes(&pod("g", "100m", "1Mi"));
    let bad = bytes(&pod("b", "lots", "1Mi"));
    let err = s.schedule_batch(&default_profile(), &[("default/g", &good), ("default/b", &bad)]).unwrap_err();
    assert!(err.to_string().contains("default/b"), "{err}");
    assert_eq!(s.pod_count(), 0);
}
