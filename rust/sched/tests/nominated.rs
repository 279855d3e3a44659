//! Nominated pods in preemption's dry runs and in batches (upstream's SelectVictimsOnNode runs
//! RunFilterPluginsWithNominatedPods; each pod of a batch sees the nominated pods of priority >=
//! its own, not itself).

mod common;

use common::*;
use kubecore_sched::pod::ParsedPod;
use kubecore_sched::{interpod, DryRun, Snapshot};
use serde_json::{json, Value};

fn prio_pod(name: &str, cpu: &str, priority: i32) -> Value {
    let mut p = pod(name, cpu, "1Mi");
    p["spec"]["priority"] = json!(priority);
    p
}

fn place(s: &mut Snapshot, p: &Value, node: &str) {
    let key = format!("default/{}", p["metadata"]["name"].as_str().unwrap());
    s.add_pod_json(&key, &bytes(p), node).unwrap();
}

fn parsed(p: &Value) -> ParsedPod {
    ParsedPod::from_json(&bytes(p)).unwrap()
}

/// Nominates `pods` (pod, node), keyed default/<name>, for the cycle.
fn nominate(s: &mut Snapshot, pods: &[(&Value, &str)]) {
    let jsons: Vec<(String, Vec<u8>, &str)> = pods
        .iter()
        .map(|(p, n)| (format!("default/{}", p["metadata"]["name"].as_str().unwrap()), bytes(p), *n))
        .collect();
    let list: Vec<(&str, &[u8], &str)> = jsons.iter().map(|(k, b, n)| (k.as_str(), b.as_slice(), *n)).collect();
    s.nominate(&list);
}

/// n0 and n1 of 8 cpu, each with a 4-cpu pod of priority 0.
fn cluster() -> Snapshot {
    let mut s = snapshot(&[node("n0", "8", "8Gi", 110), node("n1", "8", "8Gi", 110)]);
    place(&mut s, &prio_pod("low0", "4", 0), "n0");
    place(&mut s, &prio_pod("low1", "4", 0), "n1");
    s
}

fn fits(runs: &[DryRun]) -> Vec<bool> {
    runs.iter().map(|r| *r == DryRun::Fits).collect()
}

#[test]
fn dry_runs_add_the_nodes_nominated_pods() {
    let mut s = cluster();
    let preemptor = parsed(&prio_pod("p", "6", 10));
    assert_eq!(fits(&s.dry_run_lower(&default_profile(), &preemptor, &["n0", "n1"]).unwrap()), [true, true]);
    // a 4-cpu pod of priority 10 nominated to n0: 8 - 4 < 6 there, n1 unaffected
    nominate(&mut s, &[(&prio_pod("nom", "4", 10), "n0")]);
    let runs = s.dry_run_lower(&default_profile(), &preemptor, &["n0", "n1"]).unwrap();
    assert!(matches!(&runs[0], DryRun::Rejected(f) if f.reasons[0].as_str() == "Insufficient cpu"), "{runs:?}");
    assert_eq!(runs[1], DryRun::Fits);
    // filter_node is the same dry run
    assert_eq!(s.filter_node(&default_profile(), &bytes(&prio_pod("p", "6", 10)), "n0", &["default/low0"]).unwrap(), vec!["Insufficient cpu"]);
    s.end_nominated();
    assert_eq!(fits(&s.dry_run_lower(&default_profile(), &preemptor, &["n0"]).unwrap()), [true], "gone after the cycle");
}

#[test]
fn dry_runs_skip_nominated_pods_of_lower_priority() {
    let mut s = cluster();
    nominate(&mut s, &[(&prio_pod("nom", "4", 5), "n0")]);
    let preemptor = parsed(&prio_pod("p", "6", 10));
    assert_eq!(fits(&s.dry_run_lower(&default_profile(), &preemptor, &["n0"]).unwrap()), [true]);
}

/// n0 (8 cpu) with two 2-cpu pods of priority 0 and a 3-cpu pod of priority 10 nominated to it:
/// the preemptor (3 cpu) keeps the first back (8 - 2 - 3 = 3), not the second.
#[test]
fn reprieve_adds_the_nodes_nominated_pods() {
    let mut s = snapshot(&[node("n0", "8", "8Gi", 110)]);
    place(&mut s, &prio_pod("l1", "2", 0), "n0");
    place(&mut s, &prio_pod("l2", "2", 0), "n0");
    let preemptor = parsed(&prio_pod("p", "3", 10));
    let order = vec!["default/l1", "default/l2"];
    assert_eq!(s.reprieve(&default_profile(), &preemptor, &[("n0", order.clone())]).unwrap(), vec![Vec::<usize>::new()]);
    nominate(&mut s, &[(&prio_pod("nom", "3", 10), "n0")]);
    assert_eq!(s.reprieve(&default_profile(), &preemptor, &[("n0", order)]).unwrap(), vec![vec![1]]);
}

/// Required affinity to app=db whose only pod is nominated to n0: a dry run on n0 fails (the pass
/// without the nominated pod), as the cycle's filter does.
#[test]
fn a_dry_run_needs_both_passes() {
    let mut s = cluster();
    let mut db = prio_pod("db", "1", 10);
    db["metadata"]["labels"] = json!({"app": "db"});
    nominate(&mut s, &[(&db, "n0")]);
    let mut p = prio_pod("p", "1", 10);
    p["spec"]["affinity"] = json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}]}});
    let runs = s.dry_run_lower(&default_profile(), &parsed(&p), &["n0"]).unwrap();
    assert!(matches!(&runs[0], DryRun::Rejected(f) if f.reasons[0].as_str() == interpod::ERR_AFFINITY), "{runs:?}");
}

fn batch(s: &mut Snapshot, pods: &[&Value]) -> Vec<Option<String>> {
    let jsons: Vec<(String, Vec<u8>)> =
        pods.iter().map(|p| (format!("default/{}", p["metadata"]["name"].as_str().unwrap()), bytes(p))).collect();
    let list: Vec<(&str, &[u8])> = jsons.iter().map(|(k, b)| (k.as_str(), b.as_slice())).collect();
    let out = s.schedule_batch(&default_profile(), &list).unwrap();
    out.iter().map(|r| r.node_name().map(str::to_string)).collect()
}

/// Two 4-cpu nodes, a 3-cpu pod nominated to n0: 2-cpu pods of the batch go to n1 (n0 has 1
/// free with it); a pod of higher priority than the nominated one does not see it.
#[test]
fn a_batch_sees_the_nominated_pods_of_its_priority() {
    let mut s = snapshot(&[node("n0", "4", "8Gi", 110), node("n1", "4", "8Gi", 110)]);
    nominate(&mut s, &[(&prio_pod("big", "3", 0), "n0")]);
    let got = batch(&mut s, &[&prio_pod("a", "2", 0), &prio_pod("b", "2", 0), &prio_pod("c", "4", 1)]);
    assert_eq!(got, [Some("n1".to_string()), Some("n1".to_string()), Some("n0".to_string())]);
    assert_eq!(s.nominated_count(), 1);
}

/// The nominated pod itself in a batch ignores its own nomination and, once placed, counts once.
#[test]
fn a_batch_places_a_nominated_pod_once() {
    let mut s = snapshot(&[node("n0", "4", "8Gi", 110)]);
    let big = prio_pod("big", "3", 0);
    nominate(&mut s, &[(&big, "n0")]);
    let got = batch(&mut s, &[&big, &prio_pod("a", "1", 0), &prio_pod("b", "1", 0)]);
    assert_eq!(got, [Some("n0".to_string()), Some("n0".to_string()), None]);
    assert_eq!((s.nominated_count(), s.pod_count()), (0, 2));
}

/// A cycle over more nodes than the sequential scan takes (the masks computed in parallel):
/// 3-cpu pods nominated to every node but one leave a 2-cpu pod that one node.
#[test]
fn a_parallel_scan_adds_each_nodes_nominated_pods() {
    let names: Vec<String> = (0..2100).map(|i| format!("node-{i:04}")).collect();
    let mut s = snapshot(&names.iter().map(|n| node(n, "4", "8Gi", 110)).collect::<Vec<_>>());
    let pods: Vec<(Value, &str)> =
        names.iter().enumerate().filter(|(i, _)| *i != 1234).map(|(i, n)| (prio_pod(&format!("nom{i}"), "3", 0), n.as_str())).collect();
    let refs: Vec<(&Value, &str)> = pods.iter().map(|(p, n)| (p, *n)).collect();
    nominate(&mut s, &refs);
    let all = profile(|c| c.percentage_of_nodes_to_score = 100);
    let r = s.schedule(&all, &bytes(&prio_pod("p", "2", 0)), true).unwrap();
    assert_eq!((r.node_name(), r.evaluated), (Some("node-1234"), 2100));
    assert_eq!(r.reasons, vec![("Insufficient cpu".to_string(), 2099)]);
}
