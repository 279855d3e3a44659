//! Score plugins' values against hand-computed upstream formulas.

mod common;

use common::*;
use kubecore_sched::Snapshot;
use serde_json::json;

/// Node "a" (4 cpu, 8Gi) holds a 1 cpu / 2Gi pod; node "b" (same size) is empty.
fn two_nodes() -> Snapshot {
    let mut s = snapshot(&[node("a", "4", "8Gi", 110), node("b", "4", "8Gi", 110)]);
    s.add_pod_json("default/x", &bytes(&pod("x", "1", "2Gi")), "a").unwrap();
    s
}

fn scores(s: &mut Snapshot, prof: &kubecore_sched::Profile, p: &serde_json::Value) -> Vec<(String, i64)> {
    let r = s.schedule(prof, &bytes(p), false).unwrap();
    let mut out: Vec<(String, i64)> = r.feasible_names().map(str::to_string).zip(r.scores.iter().copied()).collect();
    out.sort();
    out
}

fn only(plugin: &str, f: impl FnOnce(&mut kubecore_sched::ProfileConfig)) -> kubecore_sched::Profile {
    profile(|c| {
        c.scores = vec![(plugin.to_string(), 1)];
        f(c);
    })
}

fn pair(a: i64, b: i64) -> Vec<(String, i64)> {
    vec![("a".into(), a), ("b".into(), b)]
}

#[test]
fn least_most_and_ratio() {
    let mut s = two_nodes();
    let p = pod("p", "1", "2Gi");
    assert_eq!(scores(&mut s, &only("NodeResourcesFit", |_| {}), &p), pair(50, 75));
    assert_eq!(scores(&mut s, &only("NodeResourcesFit", |c| c.fit_strategy = "MostAllocated".into()), &p), pair(50, 25));
    let rtc = |shape: Vec<(i64, i64)>| {
        only("NodeResourcesFit", |c| {
            c.fit_strategy = "RequestedToCapacityRatio".into();
            c.rtc_shape = shape;
        })
    };
    assert_eq!(scores(&mut s, &rtc(vec![(0, 0), (100, 10)]), &p), pair(50, 25));
    assert_eq!(scores(&mut s, &rtc(vec![(0, 10), (100, 0)]), &p), pair(50, 75));
    // Weights: cpu 3, memory 1 with a pod of 1 cpu / 4Gi on b: cpu 75, memory 50 -> (225+50)/4 = 68.
    let weighted = only("NodeResourcesFit", |c| c.fit_resources = vec![("cpu".into(), 3), ("memory".into(), 1)]);
    assert_eq!(scores(&mut s, &weighted, &pod("p", "1", "4Gi"))[1], ("b".to_string(), 68));
}

#[test]
fn non_zero_requests_for_scoring() {
    // A pod without requests counts as 100m / 200Mi for Fit's score: on b 3900/4000 -> 97,
    // memory (8192-200)/8192 -> 97.
    let mut s = two_nodes();
    let p = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}});
    assert_eq!(scores(&mut s, &only("NodeResourcesFit", |_| {}), &p)[1], ("b".to_string(), 97));
}

#[test]
fn balanced_allocation() {
    let mut s = two_nodes();
    let prof = only("NodeResourcesBalancedAllocation", |_| {});
    // b: cpu 1000/4000 = .25, memory 1Gi/8Gi = .125: std .0625 -> 93; a: .5 and .375 -> 93.
    assert_eq!(scores(&mut s, &prof, &pod("p", "1", "1Gi")), pair(93, 93));
    assert_eq!(scores(&mut s, &prof, &pod("p", "1", "2Gi")), pair(100, 100));
    // Best-effort pods are skipped: no score at all.
    let be = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}});
    assert_eq!(scores(&mut s, &prof, &be), pair(0, 0));
}

#[test]
fn image_locality() {
    let mut a = node("a", "4", "8Gi", 110);
    a["status"]["images"] = json!([{"names": ["big:1"], "sizeBytes": 500 * 1024 * 1024}]);
    let mut s = snapshot(&[a, node("b", "4", "8Gi", 110)]);
    let mut p = pod("p", "100m", "1Mi");
    p["spec"]["containers"][0]["image"] = json!("big:1");
    // 500Mi seen on 1 of 2 nodes: 250Mi; 100 * (250 - 23) / (1000 - 23) = 23.
    assert_eq!(scores(&mut s, &only("ImageLocality", |_| {}), &p), pair(23, 0));
    p["spec"]["containers"][0]["image"] = json!("big");
    assert_eq!(scores(&mut s, &only("ImageLocality", |_| {}), &p), pair(0, 0), "big means big:latest");
}

#[test]
fn default_weights_add_up() {
    let mut s = two_nodes();
    // Fit 50/75, Balanced 100/100, TaintToleration 100 x 3, ImageLocality 0, NodeAffinity skipped.
    assert_eq!(scores(&mut s, &default_profile(), &pod("p", "1", "2Gi")), pair(50 + 100 + 300, 75 + 100 + 300));
    let no_scores = profile(|c| c.scores.clear());
    assert_eq!(scores(&mut s, &no_scores, &pod("p", "1", "2Gi")), pair(1, 1));
}
