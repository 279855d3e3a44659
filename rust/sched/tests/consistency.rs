//! Cross-checks: the filter mask (hot path) agrees with the per-node reasons, and the parallel
//! paths (large chunks) agree with the sequential ones.

mod common;

use common::*;
use kubecore_sched::rng::Rng;
use kubecore_sched::Snapshot;
use serde_json::{json, Value};

fn random_node(r: &mut Rng, i: usize) -> Value {
    let cpu = ["500m", "1", "2", "4"][r.below(4) as usize];
    let mem = ["512Mi", "1Gi", "4Gi"][r.below(3) as usize];
    let mut n = with_labels(node(&format!("n{i}"), cpu, mem, 1 + r.below(4) as i64), &[("zone", ["a", "b", "c"][r.below(3) as usize])]);
    if r.below(4) == 0 {
        n = with_taint(n, "k", ["x", "y"][r.below(2) as usize], ["NoSchedule", "NoExecute", "PreferNoSchedule"][r.below(3) as usize]);
    }
    if r.below(6) == 0 {
        n["spec"]["unschedulable"] = json!(true);
    }
    if r.below(3) == 0 {
        n["status"]["allocatable"]["example.com/dev"] = json!(r.below(3).to_string());
    }
    n
}

fn random_pod(r: &mut Rng, i: usize) -> Value {
    let mut p = pod(&format!("p{i}"), ["0", "100m", "700m", "3"][r.below(4) as usize], ["0", "100Mi", "2Gi"][r.below(3) as usize]);
    if r.below(3) == 0 {
        p["spec"]["containers"][0]["ports"] = json!([{"containerPort": 80, "hostPort": 8000 + r.below(3) as i64}]);
    }
    if r.below(4) == 0 {
        let zone = ["a", "b"][r.below(2) as usize];
        p["spec"]["nodeSelector"] = json!({ "zone": zone });
    }
    if r.below(4) == 0 {
        p["spec"]["tolerations"] = json!([{"key": "k", "operator": "Equal", "value": "x"}]);
    }
    if r.below(5) == 0 {
        p["spec"]["containers"][0]["resources"]["requests"]["example.com/dev"] = json!("1");
    }
    if r.below(10) == 0 {
        p["spec"]["nodeName"] = json!(format!("n{}", r.below(20)));
    }
    let app = ["web", "db"][r.below(2) as usize];
    p["metadata"]["labels"] = json!({ "app": app });
    let sel = json!({"matchLabels": {"app": app}});
    match r.below(6) {
        0 => p["spec"]["topologySpreadConstraints"] = json!([{"maxSkew": 1, "topologyKey": "zone", "labelSelector": sel}]),
        1 => {
            p["spec"]["affinity"] = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                [{"labelSelector": sel, "topologyKey": "kubernetes.io/hostname"}]}})
        }
        2 => {
            p["spec"]["affinity"] = json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                [{"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}]}})
        }
        _ => {}
    }
    p
}

#[test]
fn mask_agrees_with_reasons() {
    let mut r = Rng::new(11);
    let nodes: Vec<Value> = (0..60).map(|i| random_node(&mut r, i)).collect();
    let mut s = snapshot(&nodes);
    let prof = default_profile();
    for i in 0..300 {
        let p = bytes(&random_pod(&mut r, i));
        let result = s.schedule(&prof, &p, true).unwrap();
        let feasible: Vec<String> = result.feasible_names().map(str::to_string).collect();
        let mut failed = 0;
        for name in s.node_names() {
            let reasons = s.filter_node(&prof, &p, &name, &[]).unwrap();
            assert_eq!(reasons.is_empty(), feasible.contains(&name), "pod {i} on {name}: {reasons:?}");
            failed += usize::from(!reasons.is_empty());
        }
        assert_eq!(failed, result.evaluated - feasible.len());
        if let Some(node) = result.node_name().map(str::to_string) {
            s.add_pod_json(&format!("default/p{i}"), &p, &node).unwrap();
        }
    }
    assert!(s.pod_count() > 30, "some pods were placed: {}", s.pod_count());
}

#[test]
fn parallel_filter_and_score_match_small_runs() {
    // percentage 100 on 6,000 nodes: one chunk of 6,000 (parallel masks), 4,000 feasible
    // (parallel scoring).
    let nodes: Vec<Value> = (0..6000)
        .map(|i| node(&format!("n{i:05}"), if i % 3 == 0 { "50m" } else { "4" }, "32Gi", 110))
        .collect();
    let mut s = snapshot(&nodes);
    let all = profile(|c| c.percentage_of_nodes_to_score = 100);
    let p = bytes(&pod("p", "100m", "1Gi"));
    let r = s.schedule(&all, &p, false).unwrap();
    assert_eq!((r.feasible.len(), r.evaluated), (4000, 6000));
    let want: Vec<String> = (0..6000).filter(|i| i % 3 != 0).map(|i| format!("n{i:05}")).collect();
    assert_eq!(r.feasible_names().collect::<Vec<_>>(), want);
    assert_eq!(r.reasons, vec![("Insufficient cpu".to_string(), 2000)]);
    let mut small: Snapshot = snapshot(&[node("a", "4", "32Gi", 110), node("b", "4", "32Gi", 110)]);
    let expected = small.schedule(&all, &p, false).unwrap().scores[0];
    assert!(r.scores.iter().all(|&x| x == expected), "identical nodes score alike: {expected}");
}
