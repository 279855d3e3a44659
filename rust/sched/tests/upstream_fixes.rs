//! Fixes found while holding the kernels to upstream's sources, one test (or a few) per rule:
//!
//! 1. PodTopologySpread's PreFilter counts and PreScore domains walk every live node, not the
//!    cycle's visiting order (`snap.order`, rebuilt only when a cycle starts): preemption's calls
//!    (`filter_node`, dry runs, reprieve) may come after nodes were added or removed.
//! 2. PodTopologySpread's nodeAffinityPolicy Honor reads only the pod's own nodeSelector and
//!    required node affinity (upstream's `GetRequiredNodeAffinity(pod)`), never a profile's
//!    NodeAffinityArgs.addedAffinity.
//! 3. `GetZoneKey` (component-helpers node/topology): the beta
//!    `failure-domain.beta.kubernetes.io/{zone,region}` labels win over the GA ones.
//! 4. Nominated pods (upstream's `addGENominatedPods`): see the module `nominated` below.

mod common;

use common::{bytes, node, profile, snapshot, with_labels};
use kubecore_sched::intern::Interner;
use kubecore_sched::nodeaffinity::{AddedAffinity, Compiled};
use kubecore_sched::node::zone_key;
use kubecore_sched::pod::ParsedPod;
use kubecore_sched::query::Query;
use kubecore_sched::{spread, DryRun, Profile, Snapshot};
use serde_json::{json, Value};

const ZONE: &str = "topology.kubernetes.io/zone";
const REGION: &str = "topology.kubernetes.io/region";
const BETA_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
const BETA_REGION: &str = "failure-domain.beta.kubernetes.io/region";

/// A node of 8 cpu with these labels besides its hostname.
fn n(name: &str, labels: &[(&str, &str)]) -> Value {
    with_labels(node(name, "8", "16Gi", 110), labels)
}

/// A node in `zone` with label `node: <name>`.
fn zn(name: &str, zone: &str) -> Value {
    n(name, &[("zone", zone), ("node", name)])
}

/// A pod in `default` with these labels, requesting `cpu`.
fn cpu_pod(name: &str, labels: &[(&str, &str)], cpu: &str) -> Value {
    let mut p = common::pod(name, cpu, "0");
    p["metadata"]["labels"] = labels.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    p
}

fn pod(name: &str, labels: &[(&str, &str)]) -> Value {
    cpu_pod(name, labels, "0")
}

/// The incoming pod labelled foo="" with one constraint on `key` (maxSkew 1, foo Exists).
fn foo_pod(key: &str, when: &str) -> Value {
    let mut p = pod("p", &[("foo", "")]);
    p["spec"]["topologySpreadConstraints"] = json!([{
        "maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": when,
        "labelSelector": {"matchExpressions": [{"key": "foo", "operator": "Exists"}]},
    }]);
    p
}

fn add_foo(s: &mut Snapshot, name: &str, node: &str) {
    s.add_pod_json(&format!("default/{name}"), &bytes(&pod(name, &[("foo", "")])), node).unwrap();
}

/// PodTopologySpread alone, as upstream's plugin tests run it.
fn spread_only() -> Profile {
    plugins(&["PodTopologySpread"], &["PodTopologySpread"])
}

/// A profile of these filters and scores (weight 1).
fn plugins(filters: &[&str], scores: &[&str]) -> Profile {
    let names = |l: &[&str]| l.iter().map(|f| f.to_string()).collect::<Vec<_>>();
    profile(|c| {
        c.filters = names(filters);
        c.scores = names(scores).into_iter().map(|n| (n, 1)).collect();
    })
}

/// `nodes` after a cycle for `p` (which settles the visiting order), then `joining` added.
fn joined_after_a_cycle(nodes: &[Value], p: &Value, joining: &Value) -> Snapshot {
    let mut s = snapshot(nodes);
    s.schedule(&spread_only(), &bytes(p), false).unwrap();
    s.set_node_json(&bytes(joining)).unwrap();
    s
}

type Counts = Vec<Vec<(String, i64)>>;

fn prefilter(s: &Snapshot, p: &Value) -> Counts {
    let parsed = ParsedPod::from_json(&bytes(p)).unwrap();
    let q = Query::new(s, &spread_only(), &parsed);
    q.spread.as_ref().map(|f| f.domain_counts(s)).unwrap_or_default()
}

fn counts(want: &[&[(&str, i64)]]) -> Counts {
    want.iter().map(|d| d.iter().map(|(v, n)| (v.to_string(), *n)).collect()).collect()
}

// ---- 1. spread counts independent of the cycle's node order ---------------------------------

/// A node joins after the last cycle, with two matching pods in a new zone: preemption's
/// `filter_node` on it must count them (zone2 = 2 against zone1 = 0: skew 3 > 1).
#[test]
fn spread_prefilter_counts_a_node_added_after_the_cycle() {
    let p = foo_pod("zone", "DoNotSchedule");
    let mut s = joined_after_a_cycle(&[zn("node-a", "zone1")], &p, &zn("node-x", "zone2"));
    add_foo(&mut s, "x1", "node-x");
    add_foo(&mut s, "x2", "node-x");
    assert_eq!(prefilter(&s, &p), counts(&[&[("zone1", 0), ("zone2", 2)]]));
    assert_eq!(s.filter_node(&spread_only(), &bytes(&p), "node-x", &[]).unwrap(), vec![spread::ERR_CONSTRAINTS_NOT_MATCH]);
    assert_eq!(s.filter_node(&spread_only(), &bytes(&p), "node-a", &[]).unwrap(), Vec::<String>::new());
}

/// A node leaves after the last cycle: its (now empty) zone is no domain any more, so it cannot
/// hold the minimum at 0 (zone2 = 1 alone: skew 1 + 1 - 1 = 1 passes).
#[test]
fn spread_prefilter_forgets_a_node_removed_after_the_cycle() {
    let mut s = snapshot(&[zn("node-a", "zone1"), zn("node-x", "zone2")]);
    add_foo(&mut s, "x1", "node-x");
    let p = foo_pod("zone", "DoNotSchedule");
    s.schedule(&spread_only(), &bytes(&p), false).unwrap();
    assert!(s.remove_node("node-a"));
    assert_eq!(prefilter(&s, &p), counts(&[&[("zone2", 1)]]));
    assert_eq!(s.filter_node(&spread_only(), &bytes(&p), "node-x", &[]).unwrap(), Vec::<String>::new());
}

/// A preemption dry run after an empty node joined a new zone: that zone's 0 is the minimum.
/// node-a keeps its foo pod (priority 100) and loses only a non-matching one, so zone1 stays at
/// 1: skew 1 + 1 - 0 = 2 > 1 (against zone1 and zone2 alone it would be 1, a fit).
#[test]
fn spread_dry_run_counts_a_node_added_after_the_cycle() {
    let p = foo_pod("zone", "DoNotSchedule");
    let mut s = joined_after_a_cycle(&[zn("node-a", "zone1"), zn("node-b", "zone2")], &p, &zn("node-x", "zone3"));
    let prio = |mut v: Value, n: i64| {
        v["spec"]["priority"] = json!(n);
        bytes(&v)
    };
    s.add_pod_json("default/a1", &prio(pod("a1", &[("foo", "")]), 100), "node-a").unwrap();
    s.add_pod_json("default/a2", &prio(pod("a2", &[("bar", "")]), 0), "node-a").unwrap();
    s.add_pod_json("default/b1", &prio(pod("b1", &[("foo", "")]), 100), "node-b").unwrap();
    let preemptor = ParsedPod::from_json(&prio(p, 10)).unwrap();
    let runs = s.dry_run_lower(&spread_only(), &preemptor, &["node-a"]).unwrap();
    assert!(matches!(&runs[0], DryRun::Rejected(f) if f.reasons[0].as_str() == spread::ERR_CONSTRAINTS_NOT_MATCH), "{runs:?}");
}

/// PreScore's domains and counts after a node joined without a cycle: scores read the same
/// domains as a fresh cycle would.
#[test]
fn spread_scores_count_a_node_added_after_the_cycle() {
    let p = foo_pod("zone", "ScheduleAnyway");
    let mut s = joined_after_a_cycle(&[zn("node-a", "zone1"), zn("node-b", "zone1")], &p, &zn("node-x", "zone2"));
    add_foo(&mut s, "x1", "node-x");
    add_foo(&mut s, "x2", "node-x");
    let parsed = ParsedPod::from_json(&bytes(&p)).unwrap();
    let q = Query::new(&s, &spread_only(), &parsed);
    let slots: Vec<u32> = ["node-a", "node-x"].iter().map(|n| s.slot(n).unwrap() as u32).collect();
    let mut stale = vec![0; 2];
    spread::scores(&s, &q, &q.spread_soft, q.namespace, &slots, &mut stale);
    // the same through a fresh cycle (its order rebuilt)
    let r = s.schedule(&spread_only(), &bytes(&p), false).unwrap();
    let fresh: Vec<i64> = ["node-a", "node-x"]
        .iter()
        .map(|name| r.scores[r.feasible_names().position(|f| f == *name).unwrap()])
        .collect();
    assert_eq!(stale, fresh);
    assert_eq!(fresh, vec![100, 0], "zone2's two pods: node-x scores lowest");
}

// ---- 2. nodeAffinityPolicy Honor ignores addedAffinity ---------------------------------------

/// A profile's addedAffinity that no node satisfies (a value no node has: its `In` matches
/// nothing) must not change which nodes PodTopologySpread counts: the pod's own selection (none
/// here) takes every node.
#[test]
fn spread_honor_policy_ignores_added_affinity() {
    let mut s = snapshot(&[zn("node-a", "zone1"), zn("node-x", "zone2")]);
    add_foo(&mut s, "x1", "node-x");
    let p = foo_pod("zone", "DoNotSchedule");
    let parsed = ParsedPod::from_json(&bytes(&p)).unwrap();
    let added = AddedAffinity::from_json(
        br#"{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[
            {"matchExpressions":[{"key":"zone","operator":"In","values":["nowhere"]}]}]}}"#,
    )
    .unwrap();
    let mut q = Query::new(&s, &spread_only(), &parsed);
    // every string of the added term and of the pod's (empty) selection is unknown to a fresh
    // interner, as "nowhere" is to the snapshot's: the compiled selection is the same
    q.affinity = Compiled::with_added(&parsed.selector, Some(&added), &Interner::default());
    let hard = q.spread.as_ref().unwrap().constraints().to_vec();
    let f = spread::Filter::new(&s, &q, hard, q.namespace);
    assert_eq!(f.domain_counts(&s), counts(&[&[("zone1", 0), ("zone2", 1)]]));
}

// ---- 3. GetZoneKey: beta labels first --------------------------------------------------------

fn key(labels: &[(&str, &str)]) -> String {
    let mut owned: Vec<(String, String)> = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    owned.sort();
    zone_key(&owned)
}

#[test]
fn zone_key_reads_beta_labels_first() {
    assert_eq!(key(&[(ZONE, "z1"), (REGION, "r1"), (BETA_ZONE, "z2"), (BETA_REGION, "r2")]), "r2:\0:z2");
    // per part: the beta zone with the GA region, and the reverse
    assert_eq!(key(&[(ZONE, "z1"), (REGION, "r1"), (BETA_ZONE, "z2")]), "r1:\0:z2");
    assert_eq!(key(&[(ZONE, "z1"), (BETA_REGION, "r2")]), "r2:\0:z1");
    // a beta label present with an empty value still wins (Go's `labels[k]` with `ok`)
    assert_eq!(key(&[(ZONE, "z1"), (BETA_ZONE, "")]), "");
    assert_eq!(key(&[(ZONE, "z1"), (REGION, "r1"), (BETA_ZONE, ""), (BETA_REGION, "")]), "");
    assert_eq!(key(&[]), "");
}

/// The node tree groups nodes by that key: n1 (GA z1, beta zb) joins zb, beside n3.
#[test]
fn node_tree_groups_by_the_beta_zone() {
    let mut s = snapshot(&[
        n("n1", &[(ZONE, "z1"), (BETA_ZONE, "zb")]),
        n("n2", &[(ZONE, "z1")]),
        n("n3", &[(BETA_ZONE, "zb")]),
    ]);
    assert_eq!(s.node_names(), vec!["n1", "n2", "n3"]);
}

// ---- 4. nominated pods ------------------------------------------------------------------------

/// Upstream's `RunFilterPluginsWithNominatedPods` / `addGENominatedPods`: when filtering node N,
/// only the pods nominated to N (priority >= the pod's, not the pod itself) are added, to a copy
/// of N's NodeInfo and, through the PreFilter extensions' AddPod, to a copy of the cycle state,
/// which holds PodTopologySpread's and InterPodAffinity's topology counts. A pod nominated to
/// node A therefore counts in A's domain while A is filtered, and not at all while B (even B in
/// A's zone) is. With any such pod the filters run twice, with and without them, and the node
/// must pass both. Scoring never sees nominated pods.
///
/// kubecore does the same (see `overlay` and `filter::run`): nominated pods are not counted in
/// the snapshot; the filters of a node with nominated pods (priority >= the pod's, itself
/// excluded) add them to the node's usage and, through `spread::Filter::add` and
/// `interpod::Filter::add`, to a copy of the query's counts, then run again without them.
mod nominated {
    use super::*;

    /// Nodes (name, zone) labelled with their hostname and `zone`.
    fn hostnames(names: &[(&str, &str)]) -> Vec<Value> {
        names.iter().map(|(name, zone)| n(name, &[("zone", zone)])).collect()
    }

    /// The feasible nodes of a cycle for `p` with `nominated` (key, pod, node) counted.
    fn feasible(s: &mut Snapshot, prof: &Profile, p: &Value, nominated: &[(&str, Value, &str)]) -> Vec<String> {
        let jsons: Vec<Vec<u8>> = nominated.iter().map(|(_, v, _)| bytes(v)).collect();
        let list: Vec<(&str, &[u8], &str)> =
            nominated.iter().zip(&jsons).map(|((k, _, node), j)| (*k, j.as_slice(), *node)).collect();
        s.nominate(&list);
        let r = s.schedule(prof, &bytes(p), false).unwrap();
        s.end_nominated();
        let mut names: Vec<String> = r.feasible_names().map(str::to_string).collect();
        names.sort();
        names
    }

    /// Already upstream's: a nominated pod's requests count on its own node only.
    #[test]
    fn a_nominated_pods_requests_count_on_its_node_only() {
        let mut s = snapshot(&hostnames(&[("node-a", "zone1"), ("node-b", "zone1")]));
        let big = cpu_pod("big", &[], "7");
        let p = cpu_pod("p", &[], "2");
        let prof = plugins(&["NodeResourcesFit"], &[]);
        assert_eq!(feasible(&mut s, &prof, &p, &[("default/big", big, "node-a")]), vec!["node-b"]);
        assert_eq!(feasible(&mut s, &prof, &p, &[]), vec!["node-a", "node-b"], "gone after the cycle");
    }

    /// The PodTopologySpread part of the per-node evaluation: `Filter::add` (AddPod) on a copy
    /// of the PreFilter state counts the pod in its node's domain, as counting it in the snapshot
    /// would, and leaves the state it was copied from as it was.
    #[test]
    fn spread_add_pod_counts_in_the_nodes_domain() {
        let mut s = snapshot(&[zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-x", "zone2")]);
        // (the pods' strings are interned before the pod is compiled, as nominated pods' are)
        add_foo(&mut s, "x1", "node-x");
        let p = foo_pod("zone", "DoNotSchedule");
        let parsed = ParsedPod::from_json(&bytes(&p)).unwrap();
        let q = Query::new(&s, &spread_only(), &parsed);
        let state = q.spread.clone().unwrap();
        add_foo(&mut s, "n1", "node-a");
        let mut with = state.clone();
        with.add(&s, &q, s.slot("node-a").unwrap(), &[s.pod("default/n1").unwrap()], q.namespace);
        assert_eq!(with.domain_counts(&s), counts(&[&[("zone1", 1), ("zone2", 1)]]));
        assert_eq!(with.domain_counts(&s), prefilter(&s, &p), "as if counted");
        assert_eq!(state.domain_counts(&s), counts(&[&[("zone1", 0), ("zone2", 1)]]), "the copy only");
    }

    /// A foo pod nominated to node-a: filtering node-a, zone1 = 1 (skew 1 + 1 - 0 = 2 > 1, fails);
    /// filtering node-b (zone1 too), it is not added: zone1 = 0, node-b fits.
    #[test]
    fn spread_counts_a_nominated_pod_only_while_filtering_its_node() {
        let mut s = snapshot(&[zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-x", "zone2")]);
        let p = foo_pod("zone", "DoNotSchedule");
        let nominated = [("default/n1", pod("n1", &[("foo", "")]), "node-a")];
        assert_eq!(feasible(&mut s, &spread_only(), &p, &nominated), vec!["node-b", "node-x"]);
    }

    /// Anti-affinity to app=db per zone with a db pod nominated to node-a: node-a fails (the pass
    /// with it), node-b in the same zone does not see it.
    #[test]
    fn anti_affinity_counts_a_nominated_pod_only_while_filtering_its_node() {
        let mut s = snapshot(&hostnames(&[("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2")]));
        let mut p = pod("p", &[]);
        p["spec"]["affinity"] = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}]}});
        let nominated = [("default/db", pod("db", &[("app", "db")]), "node-a")];
        assert_eq!(feasible(&mut s, &plugins(&["InterPodAffinity"], &[]), &p, &nominated), vec!["node-b", "node-x"]);
    }

    /// Required affinity to app=db with the only db pod nominated to node-a: the pass with it
    /// succeeds on node-a, the pass without it fails, so node-a fails (upstream's second pass).
    #[test]
    fn a_nominated_pod_alone_does_not_satisfy_required_affinity() {
        let mut s = snapshot(&hostnames(&[("node-a", "zone1"), ("node-b", "zone1")]));
        let mut p = pod("p", &[]);
        p["spec"]["affinity"] = json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}]}});
        let nominated = [("default/db", pod("db", &[("app", "db")]), "node-a")];
        assert_eq!(feasible(&mut s, &plugins(&["InterPodAffinity"], &[]), &p, &nominated), Vec::<String>::new());
    }

    /// Scoring reads the snapshot without nominated pods: a pod nominated to node-a leaves the
    /// two identical nodes with the same NodeResourcesFit score.
    #[test]
    fn scores_do_not_see_nominated_pods() {
        let mut s = snapshot(&hostnames(&[("node-a", "zone1"), ("node-b", "zone1")]));
        let big = cpu_pod("big", &[], "4");
        let p = cpu_pod("p", &[], "1");
        let prof = plugins(&["NodeResourcesFit"], &["NodeResourcesFit"]);
        s.nominate(&[("default/big", &bytes(&big), "node-a")]);
        let r = s.schedule(&prof, &bytes(&p), false).unwrap();
        s.end_nominated();
        assert_eq!(r.scores.len(), 2);
        assert_eq!(r.scores[0], r.scores[1], "{:?}", r.feasible_names().zip(&r.scores).collect::<Vec<_>>());
    }
}
