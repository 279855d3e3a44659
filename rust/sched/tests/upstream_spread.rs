//! PodTopologySpread against upstream's own unit-test tables
//! (kubernetes/kubernetes pkg/scheduler/framework/plugins/podtopologyspread/filtering_test.go
//! and scoring_test.go). Each case keeps upstream's name, nodes, existing pods, incoming pod and
//! expected outcome:
//!
//! - TestSingleConstraint / TestMultipleConstraints: the Filter verdict per node (Success,
//!   Unschedulable = "didn't match pod topology spread constraints", UnschedulableAndUnresolvable
//!   = "... (missing required label)"), with PodTopologySpread the profile's only filter, as
//!   upstream runs no other plugin;
//! - TestPreFilterState / TestPreFilterStateAddPod / TestPreFilterStateRemovePod: PreFilter's
//!   `TpValueToMatchNum` (eligible domain -> matching pods, per hard constraint). AddPod's pod is
//!   counted in the snapshot, as kubecore counts nominated pods; RemovePod goes through the
//!   preemption dry run's `Filter::remove`;
//! - TestPodTopologySpreadScore: the normalized scores of the candidate nodes (upstream's
//!   `nodes`; its `failedNodes` are in the snapshot but not scored).
//!
//! Cases of upstream's feature-gate-off variants are kept where the gate makes no difference
//! to their data (no policy set, no matchLabelKeys effect); the others are left out. A row
//! named "A | B" stands for two upstream cases with the same data and expectation.

mod common;

use common::bytes;
use kubecore_sched::pod::ParsedPod;
use kubecore_sched::query::Query;
use kubecore_sched::{spread, Profile, ProfileConfig, Snapshot};
use serde_json::{json, Value};

const DNS: &str = "DoNotSchedule";
const SA: &str = "ScheduleAnyway";
const HOST: &str = "kubernetes.io/hostname";
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

// ---- objects -------------------------------------------------------------------------------

/// A node with exactly these labels (upstream's `st.MakeNode()` adds none of its own).
fn n(name: &str, labels: &[(&str, &str)]) -> Value {
    let labels: serde_json::Map<String, Value> = labels.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {},
        "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}},
    })
}

/// Upstream's `taints`: node.kubernetes.io/unschedulable:NoSchedule.
fn tainted(mut node: Value) -> Value {
    node["spec"]["taints"] = json!([{"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}]);
    node
}

/// `node-<x>` in `zone` with label `node: node-<x>`.
fn zn(name: &str, zone: &str) -> Value {
    n(name, &[("zone", zone), ("node", name)])
}

/// node-a, node-b in zone1; node-x, node-y in zone2.
fn four() -> Vec<Value> {
    vec![zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-x", "zone2"), zn("node-y", "zone2")]
}

/// Nodes with only the label `node: <name>`.
fn by_node(names: &[&str]) -> Vec<Value> {
    names.iter().map(|name| n(name, &[("node", name)])).collect()
}

/// Nodes with only the label kubernetes.io/hostname.
fn hosts(names: &[&str]) -> Vec<Value> {
    names.iter().map(|name| n(name, &[(HOST, name)])).collect()
}

fn pod(name: &str, labels: &[(&str, &str)]) -> Value {
    let labels: serde_json::Map<String, Value> = labels.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    json!({
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    })
}

/// An existing pod on `node`.
fn ep(name: &str, node: &'static str, labels: &[(&str, &str)]) -> (Value, &'static str) {
    (pod(name, labels), node)
}

/// An existing pod labelled foo="" (the most common one upstream).
fn foo(name: &str, node: &'static str) -> (Value, &'static str) {
    ep(name, node, &[("foo", "")])
}

fn in_ns(mut p: (Value, &'static str), ns: &str) -> (Value, &'static str) {
    p.0["metadata"]["namespace"] = json!(ns);
    p
}

fn terminating(mut p: (Value, &'static str)) -> (Value, &'static str) {
    p.0["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    p
}

/// The incoming pod with its labels and spread constraints.
fn incoming(labels: &[(&str, &str)], constraints: Vec<Value>) -> Value {
    let mut p = pod("p", labels);
    if !constraints.is_empty() {
        p["spec"]["topologySpreadConstraints"] = json!(constraints);
    }
    p
}

fn node_selector(mut p: Value, pairs: &[(&str, &str)]) -> Value {
    let m: serde_json::Map<String, Value> = pairs.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    p["spec"]["nodeSelector"] = json!(m);
    p
}

/// Required node affinity with one term `key op values` (`NodeAffinityIn` / `NodeAffinityNotIn`).
fn node_affinity(mut p: Value, key: &str, op: &str, values: &[&str]) -> Value {
    p["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": op, "values": values}]}]}}});
    p
}

fn tolerate(mut p: Value, key: &str) -> Value {
    p["spec"]["tolerations"] = json!([{"key": key, "operator": "Exists"}]);
    p
}

// ---- constraints ---------------------------------------------------------------------------

/// `fooSelector`: foo Exists.
fn foo_sel() -> Option<Value> {
    Some(json!({"matchExpressions": [{"key": "foo", "operator": "Exists"}]}))
}

/// `barSelector`: bar Exists.
fn bar_sel() -> Option<Value> {
    Some(json!({"matchExpressions": [{"key": "bar", "operator": "Exists"}]}))
}

fn label_sel(k: &str, v: &str) -> Option<Value> {
    Some(json!({"matchLabels": {k: v}}))
}

/// `st.MakeLabelSelector().Obj()`: the empty selector.
fn empty_sel() -> Option<Value> {
    Some(json!({}))
}

/// `SpreadConstraint(maxSkew, key, when, selector, nil, nil, nil, nil)`.
fn sc(max_skew: i64, key: &str, when: &str, sel: Option<Value>) -> Value {
    let mut c = json!({"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when});
    if let Some(s) = sel {
        c["labelSelector"] = s;
    }
    c
}

fn min_domains(mut c: Value, m: i64) -> Value {
    c["minDomains"] = json!(m);
    c
}

fn affinity_policy(mut c: Value, p: &str) -> Value {
    c["nodeAffinityPolicy"] = json!(p);
    c
}

fn taints_policy(mut c: Value, p: &str) -> Value {
    c["nodeTaintsPolicy"] = json!(p);
    c
}

fn match_keys(mut c: Value, keys: &[&str]) -> Value {
    c["matchLabelKeys"] = json!(keys);
    c
}

// ---- shorthands shared by the tables -------------------------------------------------------

/// The incoming pod labelled foo="".
fn foo_pod(cs: Vec<Value>) -> Value {
    incoming(&[("foo", "")], cs)
}

/// The incoming pod labelled foo="" and bar="".
fn foobar_pod(cs: Vec<Value>) -> Value {
    incoming(&[("foo", ""), ("bar", "")], cs)
}

/// An existing pod labelled foo="" and bar="".
fn fb(name: &str, node: &'static str) -> (Value, &'static str) {
    ep(name, node, &[("foo", ""), ("bar", "")])
}

/// An existing pod labelled bar="".
fn b(name: &str, node: &'static str) -> (Value, &'static str) {
    ep(name, node, &[("bar", "")])
}

/// An existing pod labelled foo="" and with a zone label (upstream's AddPod/RemovePod pods).
fn zf(name: &str, node: &'static str, zone: &str) -> (Value, &'static str) {
    ep(name, node, &[("foo", ""), ("zone", zone)])
}

/// `SpreadConstraint(1, "zone", DoNotSchedule, fooSelector, ...)`.
fn zone1() -> Vec<Value> {
    vec![sc(1, "zone", DNS, foo_sel())]
}

/// `SpreadConstraint(1, "node", DoNotSchedule, fooSelector, ...)`.
fn node1() -> Vec<Value> {
    vec![sc(1, "node", DNS, foo_sel())]
}

/// zone and node, both maxSkew 1, DoNotSchedule, fooSelector.
fn zone_node() -> Vec<Value> {
    vec![sc(1, "zone", DNS, foo_sel()), sc(1, "node", DNS, foo_sel())]
}

/// `NodeAffinityNotIn("foo", ["bar"])`.
fn not_bar(p: Value) -> Value {
    node_affinity(p, "foo", "NotIn", &["bar"])
}

/// node-a, node-b in zone1; node-x in zone2.
fn abx() -> Vec<Value> {
    vec![zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-x", "zone2")]
}

/// node-a (zone1) labelled foo=bar, node-b (zone2) labelled foo="".
fn ab_foo() -> Vec<Value> {
    vec![
        n("node-a", &[("zone", "zone1"), ("node", "node-a"), ("foo", "bar")]),
        n("node-b", &[("zone", "zone2"), ("node", "node-b"), ("foo", "")]),
    ]
}

// ---- runners -------------------------------------------------------------------------------

fn world(nodes: &[Value], pods: &[(Value, &str)]) -> Snapshot {
    let mut s = Snapshot::new(7);
    for node in nodes {
        s.set_node_json(&bytes(node)).unwrap();
    }
    for (p, node) in pods {
        let key = format!("{}/{}", p["metadata"]["namespace"].as_str().unwrap(), p["metadata"]["name"].as_str().unwrap());
        s.add_pod_json(&key, &bytes(p), node).unwrap();
    }
    s.node_names(); // settles the visiting order
    s
}

fn spread_only() -> Profile {
    Profile::new(ProfileConfig {
        filters: vec!["PodTopologySpread".into()],
        scores: vec![("PodTopologySpread".into(), 1)],
        ..ProfileConfig::default()
    })
    .unwrap()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Code {
    Success,
    Unschedulable,
    UnschedulableAndUnresolvable,
}
use Code::*;

/// Failures of all cases of a table, reported together.
#[derive(Default)]
struct Report(Vec<String>);

impl Report {
    fn check<T: PartialEq + std::fmt::Debug>(&mut self, name: &str, got: T, want: T) {
        if got != want {
            self.0.push(format!("{name}:\n    got  {got:?}\n    want {want:?}"));
        }
    }

    fn done(self, table: &str, cases: usize) {
        assert!(self.0.is_empty(), "{table}: {} of {cases} cases differ from upstream:\n{}", self.0.len(), self.0.join("\n"));
    }
}

/// Filter's verdict for `p` on every node of `nodes`.
fn filter_codes(nodes: &[Value], pods: &[(Value, &str)], p: &Value) -> Vec<(String, Code)> {
    let s = world(nodes, pods);
    let prof = spread_only();
    nodes
        .iter()
        .map(|node| {
            let name = node["metadata"]["name"].as_str().unwrap();
            let reasons = s.filter_node(&prof, &bytes(p), name, &[]).unwrap();
            let code = match reasons.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
                [] => Success,
                [r] if *r == spread::ERR_CONSTRAINTS_NOT_MATCH => Unschedulable,
                [r] if *r == spread::ERR_NODE_LABEL_NOT_MATCH => UnschedulableAndUnresolvable,
                other => panic!("unexpected reasons {other:?}"),
            };
            (name.to_string(), code)
        })
        .collect()
}

struct FilterCase {
    name: &'static str,
    pod: Value,
    nodes: Vec<Value>,
    pods: Vec<(Value, &'static str)>,
    want: Vec<Code>,
}

fn run_filter_table(table: &str, cases: Vec<FilterCase>) {
    let mut r = Report::default();
    let count = cases.len();
    for c in cases {
        let got = filter_codes(&c.nodes, &c.pods, &c.pod);
        let want: Vec<(String, Code)> =
            c.nodes.iter().map(|n| n["metadata"]["name"].as_str().unwrap().to_string()).zip(c.want).collect();
        r.check(c.name, got, want);
    }
    r.done(table, count);
}

type Counts = Vec<Vec<(String, i64)>>;

fn counts(want: &[&[(&str, i64)]]) -> Counts {
    want.iter().map(|d| d.iter().map(|(v, n)| (v.to_string(), *n)).collect()).collect()
}

/// PreFilter's tally for `p` (no hard constraint: an empty list, upstream's Skip).
fn prefilter(nodes: &[Value], pods: &[(Value, &str)], p: &Value) -> Counts {
    let s = world(nodes, pods);
    let parsed = ParsedPod::from_json(&bytes(p)).unwrap();
    let q = Query::new(&s, &spread_only(), &parsed);
    q.spread.as_ref().map(|f| f.domain_counts(&s)).unwrap_or_default()
}

struct StateCase {
    name: &'static str,
    pod: Value,
    nodes: Vec<Value>,
    pods: Vec<(Value, &'static str)>,
    want: Counts,
}

fn run_state_table(table: &str, cases: Vec<StateCase>) {
    let mut r = Report::default();
    let count = cases.len();
    for c in cases {
        r.check(c.name, prefilter(&c.nodes, &c.pods, &c.pod), c.want);
    }
    r.done(table, count);
}

/// Normalized scores of `candidates` (upstream's filtered nodes) with `failed` nodes also in the
/// cluster, straight from the plugin's PreScore/Score/NormalizeScore.
fn scores(candidates: &[Value], failed: &[Value], pods: &[(Value, &str)], p: &Value) -> Vec<(String, i64)> {
    let all: Vec<Value> = candidates.iter().chain(failed).cloned().collect();
    let s = world(&all, pods);
    let parsed = ParsedPod::from_json(&bytes(p)).unwrap();
    let q = Query::new(&s, &spread_only(), &parsed);
    let names: Vec<String> = candidates.iter().map(|n| n["metadata"]["name"].as_str().unwrap().to_string()).collect();
    let slots: Vec<u32> = names.iter().map(|n| s.slot(n).unwrap() as u32).collect();
    let mut out = vec![0; slots.len()];
    spread::scores(&s, &q, &q.spread_soft, q.namespace, &slots, &mut out);
    names.into_iter().zip(out).collect()
}

/// The same scores through a whole cycle (no filters, PodTopologySpread the only score plugin).
fn cycle_scores(nodes: &[Value], pods: &[(Value, &str)], p: &Value) -> Vec<(String, i64)> {
    let mut s = world(nodes, pods);
    let prof = Profile::new(ProfileConfig {
        filters: vec![],
        scores: vec![("PodTopologySpread".into(), 1)],
        ..ProfileConfig::default()
    })
    .unwrap();
    let r = s.schedule(&prof, &bytes(p), false).unwrap();
    let mut got: Vec<(String, i64)> = r.feasible_names().map(str::to_string).zip(r.scores.iter().copied()).collect();
    got.sort();
    got
}

struct ScoreCase {
    name: &'static str,
    pod: Value,
    pods: Vec<(Value, &'static str)>,
    nodes: Vec<Value>,
    failed: Vec<Value>,
    want: Vec<i64>,
}

fn run_score_table(table: &str, cases: Vec<ScoreCase>) {
    let mut r = Report::default();
    let count = cases.len();
    for c in cases {
        let want: Vec<(String, i64)> =
            c.nodes.iter().map(|n| n["metadata"]["name"].as_str().unwrap().to_string()).zip(c.want).collect();
        r.check(c.name, scores(&c.nodes, &c.failed, &c.pods, &c.pod), want.clone());
        if c.failed.is_empty() && c.nodes.len() > 1 {
            let mut sorted = want;
            sorted.sort();
            r.check(&format!("{} (whole cycle)", c.name), cycle_scores(&c.nodes, &c.pods, &c.pod), sorted);
        }
    }
    r.done(table, count);
}

// ---- filtering_test.go: TestSingleConstraint -----------------------------------------------

/// Pods spread 2/1/0/3 over node-a, node-b, node-x, node-y.
fn spread_2103() -> Vec<(Value, &'static str)> {
    vec![
        foo("p-a1", "node-a"),
        foo("p-a2", "node-a"),
        foo("p-b1", "node-b"),
        foo("p-y1", "node-y"),
        foo("p-y2", "node-y"),
        foo("p-y3", "node-y"),
    ]
}

/// Upstream's nodes of the NodeInclusionPolicy cases: node-a, node-b, node-x labelled foo="",
/// node-y not.
fn foo_nodes_but_y() -> Vec<Value> {
    vec![
        n("node-a", &[("node", "node-a"), ("foo", "")]),
        n("node-b", &[("node", "node-b"), ("foo", "")]),
        n("node-x", &[("node", "node-x"), ("foo", "")]),
        n("node-y", &[("node", "node-y")]),
    ]
}

/// ... and the taint variant: node-y tainted instead.
fn foo_nodes_y_tainted() -> Vec<Value> {
    vec![
        n("node-a", &[("node", "node-a"), ("foo", "")]),
        n("node-b", &[("node", "node-b"), ("foo", "")]),
        n("node-x", &[("node", "node-x"), ("foo", "")]),
        tainted(n("node-y", &[("node", "node-y")])),
    ]
}

fn pods_1_1_0_1() -> Vec<(Value, &'static str)> {
    vec![foo("p-b1", "node-a"), foo("p-b2", "node-b"), foo("p-y1", "node-y")]
}

#[test]
fn single_constraint() {
    let cases = vec![
        FilterCase { name: "no existing pods", pod: foo_pod(zone1()), nodes: four(), pods: vec![], want: vec![Success; 4] },
        FilterCase {
            name: "no existing pods, incoming pod doesn't match itself",
            pod: foo_pod(vec![sc(1, "zone", DNS, bar_sel())]),
            nodes: four(),
            pods: vec![],
            want: vec![Success; 4],
        },
        FilterCase {
            name: "existing pods in a different namespace do not count",
            pod: foo_pod(zone1()),
            nodes: four(),
            pods: vec![in_ns(foo("p-a1", "node-a"), "ns1"), in_ns(foo("p-b1", "node-a"), "ns2"), foo("p-x1", "node-x"), foo("p-y1", "node-y")],
            want: vec![Success, Success, Unschedulable, Unschedulable],
        },
        FilterCase {
            name: "existing pods do not match null selector",
            pod: foo_pod(vec![sc(1, "zone", DNS, None)]),
            nodes: four(),
            pods: vec![foo("p-x1", "node-x"), foo("p-y1", "node-y")],
            want: vec![Success; 4],
        },
        FilterCase {
            name: "pods spread across zones as 3/3, all nodes fit",
            pod: foo_pod(zone1()),
            nodes: four(),
            pods: spread_2103(),
            want: vec![Success; 4],
        },
        FilterCase {
            name: "pods spread across zones as 1/2 due to absence of label 'zone' on node-b",
            pod: foo_pod(zone1()),
            nodes: vec![
                zn("node-a", "zone1"),
                n("node-b", &[("zon", "zone1"), ("node", "node-b")]),
                zn("node-x", "zone2"),
                zn("node-y", "zone2"),
            ],
            pods: vec![foo("p-a1", "node-a"), foo("p-b1", "node-b"), foo("p-x1", "node-x"), foo("p-y1", "node-y")],
            want: vec![Success, UnschedulableAndUnresolvable, Unschedulable, Unschedulable],
        },
        FilterCase {
            name: "pod cannot be scheduled as all nodes don't have label 'rack'",
            pod: foo_pod(vec![sc(1, "rack", DNS, foo_sel())]),
            nodes: vec![zn("node-a", "zone1"), zn("node-x", "zone2")],
            pods: vec![],
            want: vec![UnschedulableAndUnresolvable; 2],
        },
        FilterCase {
            name: "pods spread across nodes as 2/1/0/3, only node-x fits",
            pod: foo_pod(node1()),
            nodes: four(),
            pods: spread_2103(),
            want: vec![Unschedulable, Unschedulable, Success, Unschedulable],
        },
        FilterCase {
            name: "pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit",
            pod: foo_pod(vec![sc(2, "node", DNS, foo_sel())]),
            nodes: four(),
            pods: spread_2103(),
            want: vec![Unschedulable, Success, Success, Unschedulable],
        },
        FilterCase {
            name: "pods spread across nodes as 2/1/0/3, but pod doesn't match itself",
            pod: incoming(&[("bar", "")], node1()),
            nodes: four(),
            pods: spread_2103(),
            want: vec![Unschedulable, Success, Success, Unschedulable],
        },
        FilterCase {
            name: "incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits",
            pod: node_affinity(foo_pod(node1()), "node", "In", &["node-a", "node-y"]),
            nodes: four(),
            pods: spread_2103(),
            want: vec![Success, Success, Success, Unschedulable],
        },
        FilterCase {
            name: "terminating Pods should be excluded",
            pod: foo_pod(node1()),
            nodes: by_node(&["node-a", "node-b"]),
            pods: vec![terminating(foo("p-a", "node-a")), foo("p-b", "node-b")],
            want: vec![Success, Unschedulable],
        },
        FilterCase {
            name: "incoming pod has nodeAffinity, pods spread as 0/~2~/0/1, hence node-a fits",
            pod: node_affinity(foo_pod(zone1()), "node", "NotIn", &["node-b"]),
            nodes: four(),
            pods: vec![foo("p-b1", "node-b"), foo("p-b2", "node-b"), foo("p-y1", "node-y")],
            want: vec![Success, Success, Unschedulable, Unschedulable],
        },
        FilterCase {
            name: "pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains < minDomains, then the third node fits",
            pod: foo_pod(vec![min_domains(sc(2, "node", DNS, foo_sel()), 4)]),
            nodes: by_node(&["node-a", "node-b", "node-c"]),
            pods: vec![foo("p-a1", "node-a"), foo("p-a2", "node-a"), foo("p-b1", "node-b"), foo("p-b2", "node-b"), foo("p-c1", "node-c")],
            want: vec![Unschedulable, Unschedulable, Success],
        },
        FilterCase {
            name: "pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains > minDomains, then the all nodes fit",
            pod: foo_pod(vec![min_domains(sc(2, "node", DNS, foo_sel()), 2)]),
            nodes: by_node(&["node-a", "node-b", "node-c"]),
            pods: vec![foo("p-a1", "node-a"), foo("p-a2", "node-a"), foo("p-b1", "node-b"), foo("p-b2", "node-b"), foo("p-c1", "node-c")],
            want: vec![Success; 3],
        },
        FilterCase {
            name: "pods spread across zone as 2/1, maxSkew is 2 and the number of domains < minDomains, then the third and fourth nodes fit",
            pod: foo_pod(vec![min_domains(sc(2, "zone", DNS, foo_sel()), 3)]),
            nodes: four(),
            pods: vec![foo("p-b1", "node-a"), foo("p-b2", "node-b"), foo("p-y1", "node-y")],
            want: vec![Unschedulable, Unschedulable, Success, Success],
        },
        FilterCase {
            name: "pods spread across zone as 2/1, maxSkew is 2 and the number of domains > minDomains, then the all nodes fit",
            pod: foo_pod(vec![min_domains(sc(2, "zone", DNS, foo_sel()), 1)]),
            nodes: four(),
            pods: vec![foo("p-b1", "node-a"), foo("p-b2", "node-b"), foo("p-y1", "node-y")],
            want: vec![Success; 4],
        },
        FilterCase {
            name: "NodeAffinityPolicy honored with labelSelectors",
            pod: node_selector(foo_pod(node1()), &[("foo", "")]),
            nodes: foo_nodes_but_y(),
            pods: pods_1_1_0_1(),
            want: vec![Unschedulable, Unschedulable, Success, Success],
        },
        FilterCase {
            name: "NodeAffinityPolicy ignored with labelSelectors",
            pod: node_selector(foo_pod(vec![affinity_policy(sc(1, "node", DNS, foo_sel()), "Ignore")]), &[("foo", "")]),
            nodes: foo_nodes_but_y(),
            pods: pods_1_1_0_1(),
            want: vec![Unschedulable, Unschedulable, Success, Unschedulable],
        },
        FilterCase {
            name: "NodeAffinityPolicy honored with nodeAffinity",
            pod: node_affinity(foo_pod(node1()), "foo", "In", &[""]),
            nodes: foo_nodes_but_y(),
            pods: pods_1_1_0_1(),
            want: vec![Unschedulable, Unschedulable, Success, Success],
        },
        FilterCase {
            name: "NodeAffinityPolicy ignored with labelSelectors (the nodeAffinity one)",
            pod: node_affinity(foo_pod(vec![affinity_policy(sc(1, "node", DNS, foo_sel()), "Ignore")]), "foo", "In", &[""]),
            nodes: foo_nodes_but_y(),
            pods: pods_1_1_0_1(),
            want: vec![Unschedulable, Unschedulable, Success, Unschedulable],
        },
        FilterCase {
            name: "NodeTaintsPolicy honored",
            pod: foo_pod(vec![taints_policy(sc(1, "node", DNS, foo_sel()), "Honor")]),
            nodes: foo_nodes_y_tainted(),
            pods: pods_1_1_0_1(),
            want: vec![Unschedulable, Unschedulable, Success, Success],
        },
        FilterCase {
            name: "NodeTaintsPolicy ignored",
            pod: foo_pod(node1()),
            nodes: foo_nodes_y_tainted(),
            pods: pods_1_1_0_1(),
            want: vec![Unschedulable, Unschedulable, Success, Unschedulable],
        },
    ];
    run_filter_table("TestSingleConstraint", cases);
}

// ---- filtering_test.go: TestMultipleConstraints --------------------------------------------

#[test]
fn multiple_constraints() {
    let zone_foo_node_bar = || vec![sc(1, "zone", DNS, foo_sel()), sc(1, "node", DNS, bar_sel())];
    let mut spread_2104 = spread_2103();
    spread_2104.push(foo("p-y4", "node-y"));
    // node-a, node-b, node-x labelled foo, node-y not / node-a foo, node-b none, node-x foo,
    // node-y foo and tainted.
    let zoned_foo_but_y = || {
        vec![
            n("node-a", &[("zone", "zone1"), ("node", "node-a"), ("foo", "")]),
            n("node-b", &[("zone", "zone1"), ("node", "node-b"), ("foo", "")]),
            n("node-x", &[("zone", "zone2"), ("node", "node-x"), ("foo", "")]),
            n("node-y", &[("zone", "zone2"), ("node", "node-y")]),
        ]
    };
    let zoned_foo_y_tainted = || {
        vec![
            n("node-a", &[("zone", "zone1"), ("node", "node-a"), ("foo", "")]),
            n("node-b", &[("zone", "zone1"), ("node", "node-b"), ("foo", "")]),
            n("node-x", &[("zone", "zone2"), ("node", "node-x"), ("foo", "")]),
            tainted(n("node-y", &[("zone", "zone2"), ("node", "node-y")])),
        ]
    };
    let zoned_b_bare_y_tainted = || {
        vec![
            n("node-a", &[("zone", "zone1"), ("node", "node-a"), ("foo", "")]),
            n("node-b", &[("zone", "zone1"), ("node", "node-b")]),
            n("node-x", &[("zone", "zone2"), ("node", "node-x"), ("foo", "")]),
            tainted(n("node-y", &[("zone", "zone2"), ("node", "node-y"), ("foo", "")])),
        ]
    };
    let pods_a_b_y = || vec![foo("p-a1", "node-a"), foo("p-b1", "node-b"), foo("p-y1", "node-y")];
    let u = Unschedulable;
    let cases = vec![
        FilterCase {
            name: "two Constraints on zone and node, spreads = [3/3, 2/1/0/3]",
            pod: foo_pod(zone_node()),
            nodes: four(),
            pods: spread_2103(),
            want: vec![u, u, Success, u],
        },
        FilterCase {
            name: "two Constraints on zone and node, spreads = [3/4, 2/1/0/4]",
            pod: foo_pod(zone_node()),
            nodes: four(),
            pods: spread_2104.clone(),
            want: vec![u; 4],
        },
        FilterCase {
            name: "Constraints hold different labelSelectors, spreads = [1/0, 1/0/0/1]",
            pod: foobar_pod(zone_foo_node_bar()),
            nodes: four(),
            pods: vec![foo("p-a1", "node-a"), b("p-y1", "node-y")],
            want: vec![u, u, Success, u],
        },
        FilterCase {
            name: "Constraints hold different labelSelectors, spreads = [1/0, 0/0/1/1]",
            pod: foobar_pod(zone_foo_node_bar()),
            nodes: four(),
            pods: vec![foo("p-a1", "node-a"), b("p-x1", "node-x"), b("p-y1", "node-y")],
            want: vec![u; 4],
        },
        FilterCase {
            name: "Constraints hold different labelSelectors, spreads = [2/3, 1/0/0/1]",
            pod: foobar_pod(zone_foo_node_bar()),
            nodes: four(),
            pods: vec![
                foo("p-a1", "node-a"),
                fb("p-a2", "node-a"),
                foo("p-y1", "node-y"),
                fb("p-y2", "node-y"),
                foo("p-y3", "node-y"),
            ],
            want: vec![u, Success, u, u],
        },
        FilterCase {
            name: "Constraints hold different labelSelectors but pod doesn't match itself on 'zone' constraint",
            pod: incoming(&[("bar", "")], zone_foo_node_bar()),
            nodes: four(),
            pods: vec![foo("p-a1", "node-a"), b("p-x1", "node-x"), b("p-y1", "node-y")],
            want: vec![Success, Success, u, u],
        },
        FilterCase {
            name: "two Constraints on zone and node, absence of label 'node' on node-x, spreads = [1/1, 1/0/0/1]",
            pod: foo_pod(zone_node()),
            nodes: vec![zn("node-a", "zone1"), zn("node-b", "zone1"), n("node-x", &[("zone", "zone2")]), zn("node-y", "zone2")],
            pods: vec![foo("p-a1", "node-a"), foo("p-y3", "node-y")],
            want: vec![u, Success, UnschedulableAndUnresolvable, u],
        },
        FilterCase {
            name: "two node inclusion Constraints, zone: honor/ignore, node: ignore/ignore",
            pod: node_selector(
                foo_pod(vec![sc(1, "zone", DNS, foo_sel()), affinity_policy(sc(1, "node", DNS, foo_sel()), "Ignore")]),
                &[("foo", "")],
            ),
            nodes: zoned_foo_but_y(),
            pods: pods_a_b_y(),
            want: vec![u, u, Success, u],
        },
        FilterCase {
            name: "two node inclusion Constraints, zone: honor/honor, node: honor/ignore",
            pod: foo_pod(vec![taints_policy(sc(1, "zone", DNS, foo_sel()), "Honor"), sc(1, "node", DNS, foo_sel())]),
            nodes: zoned_foo_y_tainted(),
            pods: pods_a_b_y(),
            want: vec![u, u, Success, u],
        },
        FilterCase {
            name: "two node inclusion Constraints, zone: honor/ignore, node: honor/ignore",
            pod: node_selector(foo_pod(zone_node()), &[("foo", "")]),
            nodes: zoned_b_bare_y_tainted(),
            pods: pods_a_b_y(),
            want: vec![u, Success, Success, u],
        },
        FilterCase {
            name: "two node inclusion Constraints, zone: honor/honor, node: ignore/ignore",
            pod: node_selector(
                foo_pod(vec![
                    taints_policy(sc(1, "zone", DNS, foo_sel()), "Honor"),
                    affinity_policy(sc(1, "node", DNS, foo_sel()), "Ignore"),
                ]),
                &[("foo", "")],
            ),
            nodes: zoned_b_bare_y_tainted(),
            pods: pods_a_b_y(),
            want: vec![u, u, Success, u],
        },
        FilterCase {
            name: "two Constraints on zone, spreads = [3/3, 2/1]",
            pod: foobar_pod(vec![sc(1, "zone", DNS, bar_sel()), sc(1, "zone", DNS, foo_sel())]),
            nodes: four(),
            pods: vec![
                fb("p-a1", "node-a"),
                foo("p-a2", "node-a"),
                fb("p-b1", "node-b"),
                foo("p-y1", "node-y"),
                fb("p-y2", "node-y"),
                foo("p-y3", "node-y"),
            ],
            want: vec![u, u, Success, Success],
        },
        FilterCase {
            name: "two Constraints on zone, spreads = [3/4, 2/1]",
            pod: foobar_pod(vec![sc(1, "zone", DNS, bar_sel()), sc(1, "zone", DNS, foo_sel())]),
            nodes: four(),
            pods: vec![
                fb("p-a1", "node-a"),
                foo("p-a2", "node-a"),
                fb("p-b1", "node-b"),
                foo("p-y1", "node-y"),
                fb("p-y2", "node-y"),
                foo("p-y3", "node-y"),
                foo("p-y4", "node-y"),
            ],
            want: vec![u; 4],
        },
    ];
    run_filter_table("TestMultipleConstraints", cases);
}

// ---- filtering_test.go: TestPreFilterState -------------------------------------------------

#[test]
fn prefilter_state() {
    let fa = |name: &str, node: &'static str| ep(name, node, &[("foo", "a")]);
    let five = || {
        vec![foo("p-a1", "node-a"), foo("p-a2", "node-a"), foo("p-b1", "node-b"), foo("p-y1", "node-y"), foo("p-y2", "node-y")]
    };
    let seven = || {
        vec![
            foo("p-a1", "node-a"),
            foo("p-a2", "node-a"),
            foo("p-b1", "node-b"),
            foo("p-y1", "node-y"),
            foo("p-y2", "node-y"),
            foo("p-y3", "node-y"),
            foo("p-y4", "node-y"),
        ]
    };
    let foo_a =
        || vec![fa("p-a1", "node-a"), fa("p-a2", "node-a"), fa("p-b1", "node-b"), fa("p-y1", "node-y"), fa("p-y2", "node-y")];
    let aby = || vec![zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-y", "zone2")];
    // The policy cases: node-a, node-b labelled foo, node-c labelled bar; pods bar 1/2/0.
    let abc_foo = || {
        vec![
            n("node-a", &[("node", "node-a"), ("foo", "")]),
            n("node-b", &[("node", "node-b"), ("foo", "")]),
            n("node-c", &[("node", "node-c"), ("bar", "")]),
        ]
    };
    let abc_taint = || {
        vec![
            n("node-a", &[("node", "node-a")]),
            n("node-b", &[("node", "node-b")]),
            tainted(n("node-c", &[("node", "node-c"), ("bar", "")])),
        ]
    };
    let bar_121 = || vec![b("p-a", "node-a"), b("p-b", "node-b"), b("p-c", "node-b"), ep("p-d", "node-c", &[])];
    let node_bar = || vec![sc(1, "node", DNS, bar_sel())];
    let ab_c0 = || counts(&[&[("node-a", 1), ("node-b", 2), ("node-c", 0)]]);
    let ab = || counts(&[&[("node-a", 1), ("node-b", 2)]]);
    let defaults = |sel: Option<Value>, list: Vec<Value>| {
        let list: Vec<Value> = list
            .into_iter()
            .map(|mut c| {
                c["labelSelector"] = sel.clone().unwrap();
                c
            })
            .collect();
        json!({"system": false, "constraints": list})
    };
    let with_defaults = |mut p: Value, d: Value| {
        p["kubecoreDefaultSpread"] = d;
        p
    };
    let cases = vec![
        StateCase {
            name: "clean cluster with one spreadConstraint",
            pod: foo_pod(vec![sc(5, "zone", DNS, label_sel("foo", "bar"))]),
            nodes: four(),
            pods: vec![],
            want: counts(&[&[("zone1", 0), ("zone2", 0)]]),
        },
        StateCase {
            name: "normal case with one spreadConstraint",
            pod: foo_pod(vec![sc(1, "zone", DNS, foo_sel())]),
            nodes: four(),
            pods: five(),
            want: counts(&[&[("zone1", 3), ("zone2", 2)]]),
        },
        StateCase {
            name: "normal case with null label selector",
            pod: foo_pod(vec![sc(1, "zone", DNS, None)]),
            nodes: four(),
            pods: five(),
            want: counts(&[&[("zone1", 0), ("zone2", 0)]]),
        },
        StateCase {
            name: "normal case with one spreadConstraint, on a 3-zone cluster",
            pod: foo_pod(vec![sc(1, "zone", DNS, foo_sel())]),
            nodes: {
                let mut v = four();
                v.extend([zn("node-o", "zone3"), zn("node-p", "zone3")]);
                v
            },
            pods: five(),
            want: counts(&[&[("zone1", 3), ("zone2", 2), ("zone3", 0)]]),
        },
        StateCase {
            name: "namespace mismatch doesn't count",
            pod: foo_pod(vec![sc(1, "zone", DNS, foo_sel())]),
            nodes: four(),
            pods: vec![
                foo("p-a1", "node-a"),
                in_ns(foo("p-a2", "node-a"), "ns1"),
                foo("p-b1", "node-b"),
                in_ns(foo("p-y1", "node-y"), "ns2"),
                foo("p-y2", "node-y"),
            ],
            want: counts(&[&[("zone1", 2), ("zone2", 1)]]),
        },
        StateCase {
            name: "normal case with two spreadConstraints | TpKeyToDomainsNum is calculated when MinDomains is enabled",
            pod: foo_pod(zone_node()),
            nodes: four(),
            pods: seven(),
            want: counts(&[&[("zone1", 3), ("zone2", 4)], &[("node-a", 2), ("node-b", 1), ("node-x", 0), ("node-y", 4)]]),
        },
        StateCase {
            name: "soft spreadConstraints should be bypassed",
            pod: foo_pod(vec![
                sc(1, "zone", SA, foo_sel()),
                sc(1, "zone", DNS, foo_sel()),
                sc(1, "node", SA, foo_sel()),
                sc(1, "node", DNS, foo_sel()),
            ]),
            nodes: aby(),
            pods: seven(),
            want: counts(&[&[("zone1", 3), ("zone2", 4)], &[("node-a", 2), ("node-b", 1), ("node-y", 4)]]),
        },
        StateCase {
            name: "different labelSelectors - simple version",
            pod: foobar_pod(vec![sc(1, "zone", DNS, foo_sel()), sc(1, "node", DNS, bar_sel())]),
            nodes: aby(),
            pods: vec![foo("p-a", "node-a"), b("p-b", "node-b")],
            want: counts(&[&[("zone1", 1), ("zone2", 0)], &[("node-a", 0), ("node-b", 1), ("node-y", 0)]]),
        },
        StateCase {
            name: "different labelSelectors - complex pods",
            pod: foobar_pod(vec![sc(1, "zone", DNS, foo_sel()), sc(1, "node", DNS, bar_sel())]),
            nodes: aby(),
            pods: vec![
                foo("p-a1", "node-a"),
                fb("p-a2", "node-a"),
                foo("p-b1", "node-b"),
                foo("p-y1", "node-y"),
                fb("p-y2", "node-y"),
                foo("p-y3", "node-y"),
                fb("p-y4", "node-y"),
            ],
            want: counts(&[&[("zone1", 3), ("zone2", 4)], &[("node-a", 1), ("node-b", 0), ("node-y", 2)]]),
        },
        StateCase {
            name: "two spreadConstraints, and with podAffinity",
            pod: node_affinity(foo_pod(zone_node()), "node", "NotIn", &["node-x"]),
            nodes: four(),
            pods: seven(),
            want: counts(&[&[("zone1", 3), ("zone2", 4)], &[("node-a", 2), ("node-b", 1), ("node-y", 4)]]),
        },
        StateCase {
            // The Service's selector foo=bar, resolved by the scheduler, comes with the defaults.
            name: "default constraints and a service",
            pod: with_defaults(
                incoming(&[("foo", "bar"), ("baz", "kar")], vec![]),
                defaults(
                    label_sel("foo", "bar"),
                    vec![sc(3, "node", DNS, None), sc(2, "node", SA, None), sc(5, "rack", DNS, None)],
                ),
            ),
            nodes: vec![],
            pods: vec![],
            want: counts(&[&[], &[]]),
        },
        StateCase {
            name: "default constraints and a service, but pod has constraints",
            pod: with_defaults(
                incoming(
                    &[("foo", "bar"), ("baz", "tar")],
                    vec![sc(1, "zone", DNS, label_sel("baz", "tar")), sc(2, "planet", SA, label_sel("fot", "rok"))],
                ),
                defaults(label_sel("foo", "bar"), vec![sc(2, "node", DNS, None)]),
            ),
            nodes: vec![],
            pods: vec![],
            want: counts(&[&[]]),
        },
        StateCase {
            name: "default soft constraints and a service",
            pod: with_defaults(
                incoming(&[("foo", "bar")], vec![]),
                defaults(label_sel("foo", "bar"), vec![sc(2, "node", SA, None)]),
            ),
            nodes: vec![],
            pods: vec![],
            want: vec![],
        },
        StateCase {
            name: "feature gate disabled with NodeAffinityPolicy | NodeAffinityPolicy honored with labelSelectors",
            pod: node_selector(foo_pod(node_bar()), &[("foo", "")]),
            nodes: abc_foo(),
            pods: bar_121(),
            want: ab(),
        },
        StateCase {
            name: "NodeAffinityPolicy ignored with labelSelectors",
            pod: node_selector(foo_pod(vec![affinity_policy(sc(1, "node", DNS, bar_sel()), "Ignore")]), &[("foo", "")]),
            nodes: abc_foo(),
            pods: bar_121(),
            want: ab_c0(),
        },
        StateCase {
            name: "NodeAffinityPolicy honored with nodeAffinity",
            pod: node_affinity(foo_pod(node_bar()), "foo", "In", &[""]),
            nodes: abc_foo(),
            pods: vec![b("p-a", "node-a"), b("p-c", "node-b"), b("p-d", "node-b"), ep("p-e", "node-c", &[])],
            want: ab(),
        },
        StateCase {
            name: "NodeAffinityPolicy ignored with nodeAffinity",
            pod: node_affinity(foo_pod(vec![affinity_policy(sc(1, "node", DNS, bar_sel()), "Ignore")]), "foo", "In", &[""]),
            nodes: abc_foo(),
            pods: bar_121(),
            want: ab_c0(),
        },
        StateCase {
            name: "feature gate disabled with NodeTaintsPolicy | NodeTaintsPolicy ignored",
            pod: foo_pod(node_bar()),
            nodes: abc_taint(),
            pods: bar_121(),
            want: ab_c0(),
        },
        StateCase {
            name: "NodeTaintsPolicy honored",
            pod: foo_pod(vec![taints_policy(sc(1, "node", DNS, bar_sel()), "Honor")]),
            nodes: abc_taint(),
            pods: bar_121(),
            want: ab(),
        },
        StateCase {
            name: "NodeTaintsPolicy honored with tolerated taints",
            pod: tolerate(foo_pod(vec![taints_policy(sc(1, "node", DNS, bar_sel()), "Honor")]), UNSCHEDULABLE_TAINT),
            nodes: abc_taint(),
            pods: bar_121(),
            want: ab_c0(),
        },
        StateCase {
            name: "two node inclusion Constraints, zone: honor/ignore, node: ignore/ignore",
            pod: node_selector(
                foo_pod(vec![sc(1, "zone", DNS, foo_sel()), affinity_policy(sc(1, "node", DNS, foo_sel()), "Ignore")]),
                &[("foo", "")],
            ),
            nodes: vec![
                n("node-a", &[("zone", "zone1"), ("node", "node-a"), ("foo", "")]),
                n("node-b", &[("zone", "zone1"), ("node", "node-b")]),
                n("node-x", &[("zone", "zone2"), ("node", "node-x"), ("foo", "")]),
            ],
            pods: vec![foo("p-b1", "node-b"), foo("p-b2", "node-b"), foo("p-x1", "node-x")],
            want: counts(&[&[("zone1", 0), ("zone2", 1)], &[("node-a", 0), ("node-b", 2), ("node-x", 1)]]),
        },
        StateCase {
            name: "two node inclusion Constraints, zone: honor/honor, node: honor/ignore",
            pod: foo_pod(vec![taints_policy(sc(1, "zone", DNS, foo_sel()), "Honor"), sc(1, "node", DNS, foo_sel())]),
            nodes: vec![
                n("node-a", &[("zone", "zone1"), ("node", "node-a"), ("foo", "")]),
                tainted(n("node-b", &[("zone", "zone1"), ("node", "node-b")])),
                n("node-x", &[("zone", "zone2"), ("node", "node-x"), ("foo", "")]),
            ],
            pods: vec![foo("p-b1", "node-b"), foo("p-b2", "node-b"), foo("p-x1", "node-x")],
            want: counts(&[&[("zone1", 0), ("zone2", 1)], &[("node-a", 0), ("node-b", 2), ("node-x", 1)]]),
        },
        StateCase {
            name: "two node inclusion Constraints, zone: honor/ignore, node: honor/ignore",
            pod: node_selector(foo_pod(zone_node()), &[("foo", "")]),
            nodes: vec![
                n("node-a", &[("zone", "zone1"), ("node", "node-a")]),
                tainted(n("node-b", &[("zone", "zone1"), ("node", "node-b"), ("foo", "")])),
                n("node-x", &[("zone", "zone2"), ("node", "node-x"), ("foo", "")]),
                n("node-y", &[("zone", "zone2"), ("node", "node-y")]),
            ],
            pods: vec![foo("p-a1", "node-a"), foo("p-a2", "node-a"), foo("p-x1", "node-x"), foo("p-y1", "node-y")],
            want: counts(&[&[("zone1", 0), ("zone2", 1)], &[("node-b", 0), ("node-x", 1)]]),
        },
        StateCase {
            name: "two node inclusion Constraints, zone: ignore/ignore, node: honor/honor",
            pod: node_selector(
                foo_pod(vec![
                    affinity_policy(sc(1, "zone", DNS, foo_sel()), "Ignore"),
                    taints_policy(sc(1, "node", DNS, foo_sel()), "Honor"),
                ]),
                &[("foo", "")],
            ),
            nodes: vec![
                n("node-a", &[("zone", "zone1"), ("node", "node-a")]),
                tainted(n("node-b", &[("zone", "zone1"), ("node", "node-b"), ("foo", "")])),
                n("node-x", &[("zone", "zone2"), ("node", "node-x"), ("foo", "")]),
                n("node-y", &[("zone", "zone2"), ("node", "node-y"), ("foo", "")]),
            ],
            pods: vec![
                foo("p-a1", "node-a"),
                foo("p-a2", "node-a"),
                foo("p-x1", "node-x"),
                foo("p-x2", "node-x"),
                foo("p-y1", "node-y"),
            ],
            want: counts(&[&[("zone1", 2), ("zone2", 3)], &[("node-x", 2), ("node-y", 1)]]),
        },
        StateCase {
            name: "matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty",
            pod: incoming(&[("foo", ""), ("bar", "a")], vec![match_keys(sc(1, "zone", DNS, foo_sel()), &["bar"])]),
            nodes: four(),
            pods: vec![
                foo("p-a1", "node-a"),
                ep("p-a2", "node-a", &[("foo", ""), ("bar", "a")]),
                foo("p-b1", "node-b"),
                ep("p-y1", "node-y", &[("foo", ""), ("bar", "a")]),
                b("p-y2", "node-y"),
            ],
            want: counts(&[&[("zone1", 1), ("zone2", 1)]]),
        },
        StateCase {
            name: "matchLabelKeys ANDed with LabelSelector when LabelSelector is empty",
            pod: incoming(&[("foo", "a")], vec![match_keys(sc(1, "zone", DNS, empty_sel()), &["foo"])]),
            nodes: four(),
            pods: foo_a(),
            want: counts(&[&[("zone1", 3), ("zone2", 2)]]),
        },
        StateCase {
            name: "key in matchLabelKeys is ignored when LabelSelector is nil when feature gate enabled | no pod is matched when LabelSelector is nil when feature gate disabled",
            pod: foo_pod(vec![match_keys(sc(1, "zone", DNS, None), &["bar"])]),
            nodes: four(),
            pods: foo_a(),
            want: counts(&[&[("zone1", 0), ("zone2", 0)]]),
        },
        StateCase {
            name: "key in matchLabelKeys is ignored when it isn't exist in pod.labels",
            pod: foo_pod(vec![match_keys(sc(1, "zone", DNS, foo_sel()), &["bar"])]),
            nodes: four(),
            pods: foo_a(),
            want: counts(&[&[("zone1", 3), ("zone2", 2)]]),
        },
        StateCase {
            name: "two spreadConstraints with the same topologyKey",
            pod: foobar_pod(vec![sc(1, "zone", DNS, foo_sel()), sc(1, "zone", DNS, bar_sel())]),
            nodes: four(),
            pods: vec![
                fb("p-a1", "node-a"),
                foo("p-b1", "node-b"),
                b("p-x1", "node-x"),
                fb("p-y1", "node-y"),
                b("p-y2", "node-y"),
            ],
            want: counts(&[&[("zone1", 2), ("zone2", 1)], &[("zone1", 1), ("zone2", 3)]]),
        },
        StateCase {
            name: "skip if not specified",
            pod: foo_pod(vec![]),
            nodes: vec![zn("node-a", "zone1")],
            pods: vec![],
            want: vec![],
        },
    ];
    run_state_table("TestPreFilterState", cases);
}

// ---- filtering_test.go: TestPreFilterStateAddPod -------------------------------------------

/// Upstream adds `added` to the PreFilter state of the cluster without it; kubecore counts a
/// nominated pod as one more pod of the snapshot, so the tally is PreFilter's with it placed.
#[test]
fn prefilter_state_add_pod() {
    let zf_nb = || vec![sc(1, "zone", DNS, foo_sel()), sc(1, "node", DNS, bar_sel())];
    let ab = || vec![zn("node-a", "zone1"), zn("node-b", "zone1")];
    let ax = || vec![zn("node-a", "zone1"), zn("node-x", "zone2")];
    // node-a (zone1) labelled foo=bar, node-b (zone2) foo=""; the pods also carry a zone label.
    let ab_taint = || {
        vec![
            tainted(n("node-a", &[("zone", "zone1"), ("node", "node-a")])),
            n("node-b", &[("zone", "zone2"), ("node", "node-b")]),
        ]
    };
    // (case, preemptor, nodes, existing pods + the added one, want)
    let cases = vec![
        StateCase {
            name: "node a and b both impact current min match",
            pod: foo_pod(node1()),
            nodes: ab(),
            pods: vec![foo("p-a1", "node-a")],
            want: counts(&[&[("node-a", 1), ("node-b", 0)]]),
        },
        StateCase {
            name: "only node a impacts current min match",
            pod: foo_pod(node1()),
            nodes: ab(),
            pods: vec![foo("p-b1", "node-b"), foo("p-a1", "node-a")],
            want: counts(&[&[("node-a", 1), ("node-b", 1)]]),
        },
        StateCase {
            name: "add a pod in a different namespace doesn't change topologyKeyToMinPodsMap",
            pod: foo_pod(node1()),
            nodes: ab(),
            pods: vec![foo("p-b1", "node-b"), in_ns(foo("p-a1", "node-a"), "ns1")],
            want: counts(&[&[("node-a", 0), ("node-b", 1)]]),
        },
        StateCase {
            name: "add pod on non-critical node won't trigger re-calculation",
            pod: foo_pod(node1()),
            nodes: ab(),
            pods: vec![foo("p-b1", "node-b"), foo("p-b2", "node-b")],
            want: counts(&[&[("node-a", 0), ("node-b", 2)]]),
        },
        StateCase {
            name: "node a and x both impact topologyKeyToMinPodsMap on zone and node",
            pod: foo_pod(zone_node()),
            nodes: ax(),
            pods: vec![foo("p-a1", "node-a")],
            want: counts(&[&[("zone1", 1), ("zone2", 0)], &[("node-a", 1), ("node-x", 0)]]),
        },
        StateCase {
            name: "only node a impacts topologyKeyToMinPodsMap on zone and node",
            pod: foo_pod(zone_node()),
            nodes: ax(),
            pods: vec![foo("p-x1", "node-x"), foo("p-a1", "node-a")],
            want: counts(&[&[("zone1", 1), ("zone2", 1)], &[("node-a", 1), ("node-x", 1)]]),
        },
        StateCase {
            name: "node a impacts topologyKeyToMinPodsMap on node, node x impacts topologyKeyToMinPodsMap on zone",
            pod: foo_pod(zone_node()),
            nodes: abx(),
            pods: vec![foo("p-b1", "node-b"), foo("p-b2", "node-b"), foo("p-x1", "node-x"), foo("p-a1", "node-a")],
            want: counts(&[&[("zone1", 3), ("zone2", 1)], &[("node-a", 1), ("node-b", 2), ("node-x", 1)]]),
        },
        StateCase {
            name: "Constraints hold different labelSelectors, node a impacts topologyKeyToMinPodsMap on zone",
            pod: foobar_pod(zf_nb()),
            nodes: abx(),
            pods: vec![fb("p-b1", "node-b"), fb("p-x1", "node-x"), b("p-x2", "node-x"), foo("p-a1", "node-a")],
            want: counts(&[&[("zone1", 2), ("zone2", 1)], &[("node-a", 0), ("node-b", 1), ("node-x", 2)]]),
        },
        StateCase {
            name: "Constraints hold different labelSelectors, node a impacts topologyKeyToMinPodsMap on both zone and node",
            pod: foobar_pod(zf_nb()),
            nodes: abx(),
            pods: vec![b("p-b1", "node-b"), fb("p-x1", "node-x"), b("p-x2", "node-x"), fb("p-a1", "node-a")],
            want: counts(&[&[("zone1", 1), ("zone2", 1)], &[("node-a", 1), ("node-b", 1), ("node-x", 2)]]),
        },
        StateCase {
            name: "add a pod when scheduling node affinity unmatched pod with NodeInclusionPolicy disabled | add a pod when scheduling node affinity unmatched pod with NodeInclusionPolicy enabled",
            pod: not_bar(foo_pod(zone1())),
            nodes: ab_foo(),
            pods: vec![zf("p-a2", "node-a", "zone1"), zf("p-b1", "node-b", "zone2"), zf("p-a1", "node-a", "zone1")],
            want: counts(&[&[("zone2", 1)]]),
        },
        StateCase {
            name: "add a pod when scheduling node affinity matched pod with NodeInclusionPolicy disabled | add a pod when scheduling node affinity matched pod with NodeInclusionPolicy enabled",
            pod: foo_pod(zone1()),
            nodes: ab_foo(),
            pods: vec![zf("p-a1", "node-a", "zone1"), zf("p-b2", "node-b", "zone2"), zf("p-b1", "node-b", "zone2")],
            want: counts(&[&[("zone1", 1), ("zone2", 2)]]),
        },
        StateCase {
            name: "add a label selector not matched pod when with NodeInclusionPolicy enabled",
            pod: foo_pod(zone1()),
            nodes: ab_foo(),
            pods: vec![zf("p-a1", "node-a", "zone1"), zf("p-b2", "node-b", "zone2"), ep("p-b1", "node-b", &[("zone", "zone2")])],
            want: counts(&[&[("zone1", 1), ("zone2", 1)]]),
        },
        StateCase {
            name: "add a pod when scheduling taint untolerated pod with NodeInclusionPolicy disabled",
            pod: foo_pod(zone1()),
            nodes: ab_taint(),
            pods: vec![zf("p-a1", "node-a", "zone1"), zf("p-b2", "node-b", "zone2"), zf("p-b1", "node-b", "zone2")],
            want: counts(&[&[("zone1", 1), ("zone2", 2)]]),
        },
        StateCase {
            name: "add a pod when scheduling taint tolerated pod with NodeInclusionPolicy enabled",
            pod: tolerate(foo_pod(zone1()), UNSCHEDULABLE_TAINT),
            nodes: ab_taint(),
            pods: vec![zf("p-a1", "node-a", "zone1"), zf("p-b2", "node-b", "zone2"), zf("p-b1", "node-b", "zone2")],
            want: counts(&[&[("zone1", 1), ("zone2", 2)]]),
        },
    ];
    run_state_table("TestPreFilterStateAddPod", cases);
}

// ---- filtering_test.go: TestPreFilterStateRemovePod ----------------------------------------

struct RemoveCase {
    name: &'static str,
    pod: Value,
    nodes: Vec<Value>,
    pods: Vec<(Value, &'static str)>,
    /// The key of the existing pod removed, and the node whose tally loses it (upstream's
    /// `nodeIdx`, which need not be the pod's own node).
    removed: &'static str,
    from: &'static str,
    want: Counts,
}

#[test]
fn prefilter_state_remove_pod() {
    let cases = vec![
        RemoveCase {
            name: "one spreadConstraint on zone, topologyKeyToMinPodsMap unchanged",
            pod: foo_pod(zone1()),
            nodes: abx(),
            pods: vec![foo("p-a1", "node-a"), foo("p-b1", "node-b"), foo("p-x1", "node-x")],
            removed: "default/p-a1",
            from: "node-a",
            want: counts(&[&[("zone1", 1), ("zone2", 1)]]),
        },
        RemoveCase {
            name: "one spreadConstraint on node, topologyKeyToMinPodsMap changed",
            pod: foo_pod(zone1()),
            nodes: four(),
            pods: vec![foo("p-a1", "node-a"), foo("p-b1", "node-b"), foo("p-x1", "node-x"), foo("p-y1", "node-y")],
            removed: "default/p-a1",
            from: "node-a",
            want: counts(&[&[("zone1", 1), ("zone2", 2)]]),
        },
        RemoveCase {
            name: "delete an irrelevant pod won't help",
            pod: foo_pod(zone1()),
            nodes: four(),
            pods: vec![
                ep("p-a0", "node-a", &[("bar", "")]),
                foo("p-a1", "node-a"),
                foo("p-b1", "node-b"),
                foo("p-x1", "node-x"),
                foo("p-y1", "node-y"),
            ],
            removed: "default/p-a0",
            from: "node-a",
            want: counts(&[&[("zone1", 2), ("zone2", 2)]]),
        },
        RemoveCase {
            name: "two spreadConstraints",
            pod: foo_pod(vec![sc(1, "zone", DNS, foo_sel()), sc(1, "node", DNS, foo_sel())]),
            nodes: abx(),
            pods: vec![
                foo("p-a1", "node-a"),
                foo("p-a2", "node-a"),
                foo("p-b1", "node-b"),
                foo("p-x1", "node-x"),
                foo("p-x2", "node-x"),
            ],
            removed: "default/p-x1",
            from: "node-x",
            want: counts(&[&[("zone1", 3), ("zone2", 1)], &[("node-a", 2), ("node-b", 1), ("node-x", 1)]]),
        },
        RemoveCase {
            // upstream's deletedPodIdx defaults to 0: the pod removed is existingPods[0]
            name: "remove a pod when scheduling node affinity unmatched pod with NodeInclusionPolicy disabled | remove a pod when scheduling node affinity unmatched pod with NodeInclusionPolicy enabled",
            pod: not_bar(foo_pod(zone1())),
            nodes: ab_foo(),
            pods: vec![zf("p-a2", "node-a", "zone1"), zf("p-b1", "node-b", "zone2")],
            removed: "default/p-a2",
            from: "node-a",
            want: counts(&[&[("zone2", 1)]]),
        },
        RemoveCase {
            name: "remove a pod when scheduling node affinity matched pod with NodeInclusionPolicy disabled | remove a pod when scheduling node affinity matched pod with NodeInclusionPolicy enabled",
            pod: foo_pod(zone1()),
            nodes: ab_foo(),
            pods: vec![zf("p-a1", "node-a", "zone1"), zf("p-b2", "node-b", "zone2")],
            removed: "default/p-a1",
            from: "node-b",
            want: counts(&[&[("zone1", 1), ("zone2", 0)]]),
        },
    ];
    let mut r = Report::default();
    let count = cases.len();
    for c in cases {
        let s = world(&c.nodes, &c.pods);
        let parsed = ParsedPod::from_json(&bytes(&c.pod)).unwrap();
        let q = Query::new(&s, &spread_only(), &parsed);
        let mut f = q.spread.clone().expect("hard constraints");
        let gone = s.pod(c.removed).expect("an existing pod");
        f.remove(&s, &q, s.slot(c.from).unwrap(), &[gone], q.namespace);
        r.check(c.name, f.domain_counts(&s), c.want);
    }
    r.done("TestPreFilterStateRemovePod", count);
}

// ---- scoring_test.go: TestPreScoreSkip -----------------------------------------------------

#[test]
fn prescore_skip() {
    // "the pod doesn't have soft topology spread Constraints": nothing to score.
    let s = world(&hosts(&["node-a", "node-b"]), &[]);
    let parsed = ParsedPod::from_json(&bytes(&incoming(&[], vec![]))).unwrap();
    let q = Query::new(&s, &spread_only(), &parsed);
    assert!(q.spread_soft.is_empty());
}

// ---- scoring_test.go: TestPodTopologySpreadScore -------------------------------------------

#[test]
fn pod_topology_spread_score() {
    let host1 = || vec![sc(1, HOST, SA, foo_sel())];
    // zone + hostname labels
    let zh = |name: &str, zone: &str| n(name, &[("zone", zone), (HOST, name)]);
    let spread_2103 = || {
        vec![
            foo("p-a1", "node-a"),
            foo("p-a2", "node-a"),
            foo("p-b1", "node-b"),
            foo("p-d1", "node-d"),
            foo("p-d2", "node-d"),
            foo("p-d3", "node-d"),
        ]
    };
    let spread_4321 = || {
        vec![
            foo("p-a1", "node-a"),
            foo("p-a2", "node-a"),
            foo("p-a3", "node-a"),
            foo("p-a4", "node-a"),
            foo("p-b1", "node-b"),
            foo("p-b2", "node-b"),
            foo("p-b3", "node-b"),
            foo("p-c1", "node-c"),
            foo("p-c2", "node-c"),
            foo("p-d1", "node-d"),
        ]
    };
    let spread_421_3 = || {
        vec![
            foo("p-a1", "node-a"),
            foo("p-a2", "node-a"),
            foo("p-a3", "node-a"),
            foo("p-a4", "node-a"),
            foo("p-b1", "node-b"),
            foo("p-b2", "node-b"),
            foo("p-x1", "node-x"),
            foo("p-y1", "node-y"),
            foo("p-y2", "node-y"),
            foo("p-y3", "node-y"),
        ]
    };
    let abcd = || hosts(&["node-a", "node-b", "node-c", "node-d"]);
    let abc_foo = || {
        vec![
            n("node-a", &[("node", "node-a"), ("foo", "")]),
            n("node-b", &[("node", "node-b"), ("foo", "")]),
            n("node-c", &[("node", "node-c")]),
        ]
    };
    let abc_taint = || {
        vec![n("node-a", &[("node", "node-a")]), n("node-b", &[("node", "node-b")]), tainted(n("node-c", &[("node", "node-c")]))]
    };
    let pods_211 = || vec![foo("p-a1", "node-a"), foo("p-a2", "node-a"), foo("p-b1", "node-b"), foo("p-c1", "node-c")];
    let zones4 = || vec![zh("node-a", "zone1"), zh("node-b", "zone1"), zh("node-c", "zone2"), zh("node-d", "zone2")];
    let node_foo = || vec![sc(1, "node", SA, foo_sel())];
    let node_foo_ignore = || vec![affinity_policy(sc(1, "node", SA, foo_sel()), "Ignore")];
    // defaultingType System: hostname (maxSkew 3) and zone (maxSkew 5), with the Service's
    // selector foo="" the scheduler resolved.
    let system_defaults = |mut p: Value| {
        let c = |skew: i64, key: &str| json!({"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": SA, "labelSelector": {"matchLabels": {"foo": ""}}});
        p["kubecoreDefaultSpread"] = json!({"system": true, "constraints": [c(3, HOST), c(5, "topology.kubernetes.io/zone")]});
        p
    };
    let cases = vec![
        ScoreCase {
            name: "one constraint on node, no existing pods",
            pod: foo_pod(host1()),
            pods: vec![],
            nodes: hosts(&["node-a", "node-b"]),
            failed: vec![],
            want: vec![100, 100],
        },
        ScoreCase {
            name: "one constraint on node, only one node is candidate",
            pod: foo_pod(host1()),
            pods: vec![foo("p-a1", "node-a"), foo("p-a2", "node-a"), foo("p-b1", "node-b")],
            nodes: hosts(&["node-a"]),
            failed: hosts(&["node-b"]),
            want: vec![100],
        },
        ScoreCase {
            name: "one constraint on node, all nodes have the same number of matching pods",
            pod: foo_pod(host1()),
            pods: vec![foo("p-a1", "node-a"), foo("p-b1", "node-b")],
            nodes: hosts(&["node-a", "node-b"]),
            failed: vec![],
            want: vec![100, 100],
        },
        ScoreCase {
            name: "one constraint on node, all 4 nodes are candidates",
            pod: foo_pod(host1()),
            pods: spread_2103(),
            nodes: abcd(),
            failed: vec![],
            want: vec![20, 60, 100, 0],
        },
        ScoreCase {
            name: "one constraint on node, null selector",
            pod: foo_pod(vec![sc(1, HOST, SA, None)]),
            pods: spread_2103(),
            nodes: abcd(),
            failed: vec![],
            want: vec![100, 100, 100, 100],
        },
        ScoreCase {
            name: "one constraint on node, all 4 nodes are candidates, maxSkew=2",
            pod: foo_pod(vec![sc(2, HOST, SA, foo_sel())]),
            pods: spread_2103(),
            nodes: abcd(),
            failed: vec![],
            want: vec![33, 66, 100, 16],
        },
        ScoreCase {
            name: "one constraint on node, all 4 nodes are candidates, maxSkew=3",
            pod: foo_pod(vec![sc(3, HOST, SA, foo_sel())]),
            pods: spread_4321(),
            nodes: abcd(),
            failed: vec![],
            want: vec![44, 66, 77, 100],
        },
        ScoreCase {
            name: "system defaulting, nodes don't have zone, pods match service",
            pod: system_defaults(foo_pod(vec![])),
            pods: spread_4321(),
            nodes: abcd(),
            failed: vec![],
            want: vec![44, 66, 77, 100],
        },
        ScoreCase {
            name: "one constraint on node, 3 out of 4 nodes are candidates",
            pod: foo_pod(host1()),
            pods: spread_421_3(),
            nodes: hosts(&["node-a", "node-b", "node-x"]),
            failed: hosts(&["node-y"]),
            want: vec![33, 83, 100],
        },
        ScoreCase {
            name: "one constraint on node, 3 out of 4 nodes are candidates, one node doesn't match topology key",
            pod: foo_pod(host1()),
            pods: spread_421_3(),
            nodes: vec![n("node-a", &[(HOST, "node-a")]), n("node-b", &[("n", "node-b")]), n("node-x", &[(HOST, "node-x")])],
            failed: hosts(&["node-y"]),
            want: vec![16, 0, 100],
        },
        ScoreCase {
            name: "one constraint on zone, 3 out of 4 nodes are candidates",
            pod: foo_pod(vec![sc(1, "zone", SA, foo_sel())]),
            pods: spread_421_3(),
            nodes: vec![zh("node-a", "zone1"), zh("node-b", "zone1"), zh("node-x", "zone2")],
            failed: vec![zh("node-y", "zone2")],
            want: vec![75, 75, 100],
        },
        ScoreCase {
            name: "two Constraints on zone and node, 2 out of 4 nodes are candidates",
            pod: foo_pod(vec![sc(1, "zone", SA, foo_sel()), sc(1, HOST, SA, foo_sel())]),
            pods: vec![
                foo("p-a1", "node-a"),
                foo("p-a2", "node-a"),
                foo("p-b1", "node-b"),
                foo("p-x1", "node-x"),
                foo("p-x2", "node-x"),
                foo("p-y1", "node-y"),
                foo("p-y2", "node-y"),
                foo("p-y3", "node-y"),
                foo("p-y4", "node-y"),
            ],
            nodes: vec![zh("node-a", "zone1"), zh("node-x", "zone2")],
            failed: vec![zh("node-b", "zone1"), zh("node-y", "zone2")],
            want: vec![100, 63],
        },
        ScoreCase {
            name: "two Constraints on zone and node, with different labelSelectors",
            pod: foobar_pod(vec![sc(1, "zone", SA, foo_sel()), sc(1, HOST, SA, bar_sel())]),
            pods: vec![foo("p-a1", "node-a"), fb("p-b1", "node-b"), foo("p-y1", "node-y"), b("p-y2", "node-y")],
            nodes: vec![zh("node-a", "zone1"), zh("node-b", "zone1"), zh("node-x", "zone2"), zh("node-y", "zone2")],
            failed: vec![],
            want: vec![60, 20, 100, 60],
        },
        ScoreCase {
            name: "two Constraints on zone and node, with different labelSelectors, some nodes have 0 pods",
            pod: foobar_pod(vec![sc(1, "zone", SA, foo_sel()), sc(1, HOST, SA, bar_sel())]),
            pods: vec![b("p-b1", "node-b"), foo("p-x1", "node-x"), fb("p-y1", "node-y")],
            nodes: vec![zh("node-a", "zone1"), zh("node-b", "zone1"), zh("node-x", "zone2"), zh("node-y", "zone2")],
            failed: vec![],
            want: vec![100, 60, 40, 0],
        },
        ScoreCase {
            name: "two Constraints on zone and node, with different labelSelectors, 3 out of 4 nodes are candidates",
            pod: foobar_pod(vec![sc(1, "zone", SA, foo_sel()), sc(1, HOST, SA, bar_sel())]),
            pods: vec![foo("p-a1", "node-a"), fb("p-b1", "node-b"), foo("p-y1", "node-y"), b("p-y2", "node-y")],
            nodes: vec![zh("node-a", "zone1"), zh("node-b", "zone1"), zh("node-x", "zone2")],
            failed: vec![zh("node-y", "zone2")],
            want: vec![50, 25, 100],
        },
        ScoreCase {
            name: "existing pods in a different namespace do not count",
            pod: foo_pod(host1()),
            pods: vec![in_ns(foo("p-a1", "node-a"), "ns1"), foo("p-a2", "node-a"), foo("p-b1", "node-b"), foo("p-b2", "node-b")],
            nodes: hosts(&["node-a", "node-b"]),
            failed: vec![],
            want: vec![100, 33],
        },
        ScoreCase {
            name: "terminating Pods should be excluded",
            pod: foo_pod(host1()),
            pods: vec![terminating(foo("p-a", "node-a")), foo("p-b", "node-b")],
            nodes: hosts(&["node-a", "node-b"]),
            failed: vec![],
            want: vec![100, 0],
        },
        ScoreCase {
            name: "minDomains has no effect when ScheduleAnyway",
            pod: foo_pod(vec![min_domains(sc(2, "node", SA, foo_sel()), 10)]),
            pods: vec![
                foo("p-a1", "node-a"),
                foo("p-a2", "node-a"),
                foo("p-b1", "node-b"),
                foo("p-b2", "node-b"),
                foo("p-c1", "node-c"),
            ],
            nodes: by_node(&["node-a", "node-b", "node-c"]),
            failed: vec![],
            want: vec![75, 75, 100],
        },
        ScoreCase {
            name: "NodeAffinityPolicy honoed with labelSelectors",
            pod: node_selector(foo_pod(node_foo()), &[("foo", "")]),
            pods: pods_211(),
            nodes: abc_foo(),
            failed: vec![],
            want: vec![0, 33, 100],
        },
        ScoreCase {
            name: "NodeAffinityPolicy ignored with labelSelectors",
            pod: node_selector(foo_pod(node_foo_ignore()), &[("foo", "")]),
            pods: pods_211(),
            nodes: abc_foo(),
            failed: vec![],
            want: vec![66, 100, 100],
        },
        ScoreCase {
            name: "NodeAffinityPolicy honoed with nodeAffinity",
            pod: node_affinity(foo_pod(node_foo()), "foo", "In", &[""]),
            pods: pods_211(),
            nodes: abc_foo(),
            failed: vec![],
            want: vec![0, 33, 100],
        },
        ScoreCase {
            name: "NodeAffinityPolicy ignored with nodeAffinity",
            pod: node_affinity(foo_pod(node_foo_ignore()), "foo", "In", &[""]),
            pods: pods_211(),
            nodes: abc_foo(),
            failed: vec![],
            want: vec![66, 100, 100],
        },
        ScoreCase {
            name: "NodeTaintsPolicy honored",
            pod: foo_pod(vec![taints_policy(sc(1, "node", SA, foo_sel()), "Honor")]),
            pods: pods_211(),
            nodes: abc_taint(),
            failed: vec![],
            want: vec![0, 33, 100],
        },
        ScoreCase {
            name: "NodeTaintsPolicy ignored",
            pod: foo_pod(node_foo()),
            pods: pods_211(),
            nodes: abc_taint(),
            failed: vec![],
            want: vec![66, 100, 100],
        },
        ScoreCase {
            name: "matchLabelKeys ANDed with LabelSelector when LabelSelector is empty",
            pod: foobar_pod(vec![
                match_keys(sc(1, "zone", SA, empty_sel()), &["foo"]),
                match_keys(sc(1, HOST, SA, empty_sel()), &["bar"]),
            ]),
            pods: vec![foo("p-a1", "node-a"), fb("p-b1", "node-b"), foo("p-y1", "node-c"), b("p-y2", "node-c")],
            nodes: zones4(),
            failed: vec![],
            want: vec![60, 20, 60, 100],
        },
        ScoreCase {
            name: "matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty",
            pod: incoming(
                &[("foo", ""), ("bar", ""), ("baz", "")],
                vec![sc(1, "zone", SA, foo_sel()), match_keys(sc(1, HOST, SA, bar_sel()), &["baz"])],
            ),
            pods: vec![
                foo("p-a1", "node-a"),
                ep("p-b1", "node-b", &[("foo", ""), ("bar", ""), ("baz", "")]),
                foo("p-c1", "node-c"),
                b("p-c2", "node-c"),
                ep("p-d3", "node-c", &[("bar", ""), ("baz", "")]),
            ],
            nodes: zones4(),
            failed: vec![],
            want: vec![60, 20, 60, 100],
        },
    ];
    run_score_table("TestPodTopologySpreadScore", cases);
}

// ---- the node tree (pkg/scheduler/internal/cache/node_tree_test.go) and its zone key
// (component-helpers/node/topology/helpers_test.go): the order a cycle visits nodes, which
// decides the nodes a cycle that stops early (numFeasibleNodesToFind) sees. --------------------

mod node_tree {
    use std::collections::BTreeMap;

    use kubecore_sched::node::zone_key;
    use kubecore_sched::zones::NodeTree;

    const REGION: &str = "topology.kubernetes.io/region";
    const ZONE: &str = "topology.kubernetes.io/zone";
    const BETA_REGION: &str = "failure-domain.beta.kubernetes.io/region";
    const BETA_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";

    /// Upstream's `allNodes`: node-i's labels.
    fn all_nodes() -> Vec<Vec<(&'static str, &'static str)>> {
        vec![
            vec![],
            vec![(REGION, "region-1")],
            vec![(ZONE, "zone-2")],
            vec![(REGION, "region-1"), (ZONE, "zone-2")],
            vec![(REGION, "region-1"), (ZONE, "zone-2")],
            vec![(REGION, "region-1"), (ZONE, "zone-3")],
            vec![(REGION, "region-2"), (ZONE, "zone-2")],
            vec![(REGION, "region-2"), (ZONE, "zone-2")],
            vec![(REGION, "region-2"), (ZONE, "zone-2")],
            vec![(REGION, "region-2"), (ZONE, "zone-2"), (BETA_REGION, "region-2"), (BETA_ZONE, "zone-2")],
            vec![(BETA_REGION, "region-2"), (BETA_ZONE, "zone-3")],
        ]
    }

    fn key(labels: &[(&str, &str)]) -> String {
        let owned: Vec<(String, String)> = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        zone_key(&owned)
    }

    fn node_key(i: usize) -> String {
        key(&all_nodes()[i])
    }

    fn add(t: &mut NodeTree, i: usize) {
        t.add(&node_key(i), i as u32);
    }

    fn remove(t: &mut NodeTree, i: usize) {
        t.remove(&node_key(i), i as u32);
    }

    fn tree_of(nodes: &[usize]) -> NodeTree {
        let mut t = NodeTree::default();
        for &i in nodes {
            add(&mut t, i);
        }
        t
    }

    fn names(slots: &[u32]) -> Vec<String> {
        slots.iter().map(|s| format!("node-{s}")).collect()
    }

    /// `verifyNodeTree`: zone -> nodes, and the node count.
    fn shape(t: &NodeTree) -> (BTreeMap<String, Vec<String>>, usize) {
        (t.zones().into_iter().map(|(z, slots)| (z.to_string(), names(slots))).collect(), t.len())
    }

    fn want(zones: &[(&str, &[&str])]) -> (BTreeMap<String, Vec<String>>, usize) {
        let map: BTreeMap<String, Vec<String>> =
            zones.iter().map(|(z, ns)| (z.to_string(), ns.iter().map(|n| n.to_string()).collect())).collect();
        let count = map.values().map(Vec::len).sum();
        (map, count)
    }

    #[test]
    fn add_node() {
        let cases: Vec<(&str, Vec<usize>, _)> = vec![
            ("single node no labels", vec![0], want(&[("", &["node-0"])])),
            ("same node specified twice", vec![0, 0], want(&[("", &["node-0"])])),
            (
                "mix of nodes with and without proper labels",
                vec![0, 1, 2, 3],
                want(&[
                    ("", &["node-0"]),
                    ("region-1:\0:", &["node-1"]),
                    (":\0:zone-2", &["node-2"]),
                    ("region-1:\0:zone-2", &["node-3"]),
                ]),
            ),
            (
                "mix of nodes with and without proper labels and some zones with multiple nodes",
                (0..7).collect(),
                want(&[
                    ("", &["node-0"]),
                    ("region-1:\0:", &["node-1"]),
                    (":\0:zone-2", &["node-2"]),
                    ("region-1:\0:zone-2", &["node-3", "node-4"]),
                    ("region-1:\0:zone-3", &["node-5"]),
                    ("region-2:\0:zone-2", &["node-6"]),
                ]),
            ),
            (
                "nodes also using deprecated zone/region label",
                vec![9, 10],
                want(&[("region-2:\0:zone-2", &["node-9"]), ("region-2:\0:zone-3", &["node-10"])]),
            ),
        ];
        for (name, nodes, expected) in cases {
            assert_eq!(shape(&tree_of(&nodes)), expected, "{name}");
        }
    }

    #[test]
    fn remove_node() {
        let cases: Vec<(&str, Vec<usize>, Vec<usize>, _)> = vec![
            (
                "remove a single node with no labels",
                (0..7).collect(),
                vec![0],
                want(&[
                    ("region-1:\0:", &["node-1"]),
                    (":\0:zone-2", &["node-2"]),
                    ("region-1:\0:zone-2", &["node-3", "node-4"]),
                    ("region-1:\0:zone-3", &["node-5"]),
                    ("region-2:\0:zone-2", &["node-6"]),
                ]),
            ),
            (
                "remove a few nodes including one from a zone with multiple nodes",
                (0..7).collect(),
                vec![1, 2, 3],
                want(&[
                    ("", &["node-0"]),
                    ("region-1:\0:zone-2", &["node-4"]),
                    ("region-1:\0:zone-3", &["node-5"]),
                    ("region-2:\0:zone-2", &["node-6"]),
                ]),
            ),
            ("remove all nodes", (0..7).collect(), (0..7).collect(), want(&[])),
            ("remove non-existing node", vec![], (0..5).collect(), want(&[])),
        ];
        for (name, existing, gone, expected) in cases {
            let mut t = tree_of(&existing);
            for i in gone {
                remove(&mut t, i);
            }
            assert_eq!(shape(&t), expected, "{name}");
        }
        // upstream's error for the non-existing node: the snapshot reports it as not removed
        let mut s = kubecore_sched::Snapshot::new(1);
        assert!(!s.remove_node("node-0"), "remove non-existing node");
    }

    /// `updateNode` as the snapshot does it: a node whose zone key changed leaves its old zone
    /// and joins the new one at its end.
    #[test]
    fn update_node() {
        let new_labels = [(REGION, "region-1"), (ZONE, "zone-2")];
        let cases: Vec<(&str, Vec<usize>, u32, Option<usize>, _)> = vec![
            (
                "update a node without label",
                (0..7).collect(),
                0,
                Some(0),
                want(&[
                    ("region-1:\0:", &["node-1"]),
                    (":\0:zone-2", &["node-2"]),
                    ("region-1:\0:zone-2", &["node-3", "node-4", "node-0"]),
                    ("region-1:\0:zone-3", &["node-5"]),
                    ("region-2:\0:zone-2", &["node-6"]),
                ]),
            ),
            ("update the only existing node", vec![0], 0, Some(0), want(&[("region-1:\0:zone-2", &["node-0"])])),
            // node-new has slot 99 and no old version
            ("update non-existing node", vec![0], 99, None, want(&[("", &["node-0"]), ("region-1:\0:zone-2", &["node-99"])])),
        ];
        for (name, existing, slot, old, expected) in cases {
            let mut t = tree_of(&existing);
            let new_zone = key(&new_labels);
            let old_zone = old.map(node_key).unwrap_or_default();
            if old.is_none() || old_zone != new_zone {
                t.remove(&old_zone, slot);
                t.add(&new_zone, slot);
            }
            assert_eq!(shape(&t), expected, "{name}");
        }
        // The same through the snapshot: node-0 relabelled joins region-1/zone-2 at its end.
        let mut s = snapshot_of(&(0..7).collect::<Vec<_>>());
        s.set_node_json(&node_json(0, &new_labels)).unwrap();
        assert_eq!(s.node_names(), ["node-1", "node-2", "node-3", "node-5", "node-6", "node-4", "node-0"]);
    }

    fn node_json(i: usize, labels: &[(&str, &str)]) -> Vec<u8> {
        let labels: serde_json::Map<String, serde_json::Value> =
            labels.iter().map(|(k, v)| (k.to_string(), serde_json::json!(v))).collect();
        serde_json::to_vec(&serde_json::json!({"metadata": {"name": format!("node-{i}"), "labels": labels}, "status": {"allocatable": {"pods": "110"}}}))
            .unwrap()
    }

    fn snapshot_of(nodes: &[usize]) -> kubecore_sched::Snapshot {
        let mut s = kubecore_sched::Snapshot::new(1);
        for &i in nodes {
            s.set_node_json(&node_json(i, &all_nodes()[i])).unwrap();
        }
        s
    }

    #[test]
    fn list() {
        let cases: Vec<(&str, Vec<usize>, Vec<&str>)> = vec![
            ("empty tree", vec![], vec![]),
            ("one node", vec![0], vec!["node-0"]),
            ("four nodes", vec![0, 1, 2, 3], vec!["node-0", "node-1", "node-2", "node-3"]),
            (
                "all nodes",
                (0..9).collect(),
                vec!["node-0", "node-1", "node-2", "node-3", "node-5", "node-6", "node-4", "node-7", "node-8"],
            ),
        ];
        for (name, nodes, expected) in cases {
            assert_eq!(names(&tree_of(&nodes).list()), expected, "{name}");
            assert_eq!(snapshot_of(&nodes).node_names(), expected, "{name} (snapshot)");
        }
    }

    #[test]
    fn multi_operations() {
        // (name, nodes to add, nodes to remove, operations, expected list)
        type Case = (&'static str, Vec<usize>, Vec<usize>, &'static str, Vec<&'static str>);
        let cases: Vec<Case> = vec![
            ("add and remove all nodes", (2..9).collect(), (2..9).collect(), "aaarrr", vec![]),
            ("add and remove some nodes", (2..9).collect(), (2..9).collect(), "aaar", vec!["node-3", "node-4"]),
            ("remove three nodes", (2..9).collect(), (2..9).collect(), "aaarrra", vec!["node-5"]),
            (
                "add more nodes to an exhausted zone",
                vec![4, 5, 6, 7, 8, 3],
                vec![],
                "aaaaaa",
                vec!["node-4", "node-5", "node-6", "node-3", "node-7", "node-8"],
            ),
            ("remove zone and add new", vec![3, 4, 6, 7], vec![3, 4], "aaraar", vec!["node-6", "node-7"]),
        ];
        for (name, adds, removes, ops, expected) in cases {
            let mut t = NodeTree::default();
            let (mut ai, mut ri) = (0, 0);
            for op in ops.chars() {
                if op == 'a' {
                    add(&mut t, adds[ai]);
                    ai += 1;
                } else {
                    remove(&mut t, removes[ri]);
                    ri += 1;
                }
            }
            assert_eq!(names(&t.list()), expected, "{name}");
        }
    }

    #[test]
    fn get_zone_key() {
        type Case = (&'static str, Vec<(&'static str, &'static str)>, &'static str);
        let cases: Vec<Case> = vec![
            ("has no zone or region keys", vec![], ""),
            ("has beta zone and region keys", vec![(BETA_ZONE, "zone1"), (BETA_REGION, "region1")], "region1:\0:zone1"),
            ("has GA zone and region keys", vec![(ZONE, "zone1"), (REGION, "region1")], "region1:\0:zone1"),
            (
                "has both beta and GA zone and region keys",
                vec![(ZONE, "zone1"), (REGION, "region1"), (BETA_ZONE, "zone1"), (BETA_REGION, "region1")],
                "region1:\0:zone1",
            ),
        ];
        for (name, labels, expected) in cases {
            assert_eq!(key(&labels), expected, "{name}");
        }
    }

    #[test]
    fn get_zone_key_beta_labels_take_precedence() {
        // "has both beta and GA zone and region keys, beta labels take precedent"
        let labels = [(ZONE, "zone1"), (REGION, "region1"), (BETA_ZONE, "zone2"), (BETA_REGION, "region2")];
        assert_eq!(key(&labels), "region2:\0:zone2");
    }
}

// ---- Not upstream cases: two rules of upstream's source no table row exercises -------------

/// common.go `mergeLabelSetWithSelector`: a selector without requirements (a missing
/// labelSelector, labels.Nothing()) is returned as it is, so matchLabelKeys cannot make it
/// select anything, even when the pod has the key.
#[test]
fn match_label_keys_leave_a_missing_selector_selecting_nothing() {
    let p = incoming(&[("foo", ""), ("bar", "x")], vec![match_keys(sc(1, "zone", DNS, None), &["bar"])]);
    let pods = vec![ep("p-a1", "node-a", &[("bar", "x")]), ep("p-x1", "node-x", &[("foo", ""), ("bar", "x")])];
    assert_eq!(prefilter(&four(), &pods, &p), counts(&[&[("zone1", 0), ("zone2", 0)]]));
}

/// scoring.go reads a node's topology value as `node.Labels[key]`: under System defaulting a
/// node without the zone label falls in the same domain as one labelled zone="".
/// Hostname (maxSkew 3, 3 nodes: ln 5) and zone (maxSkew 5, domains z1 and "": ln 4):
/// a = 0 + 2 + 0 + 4 = 6; b = ln5 + 2 + 2·ln4 + 4 = 10.4; c = ln5 + 2 (no zone label) = 3.6;
/// normalized with max 10, min 4: 80, 40, 100 (with c's missing label a third domain, b would
/// be ln5 + 2 + ln5 + 4 = 9.2 and the scores 77, 44, 100).
#[test]
fn system_defaulting_missing_zone_is_the_empty_zone() {
    let nodes = vec![
        n("node-a", &[(HOST, "node-a"), ("topology.kubernetes.io/zone", "z1")]),
        n("node-b", &[(HOST, "node-b"), ("topology.kubernetes.io/zone", "")]),
        n("node-c", &[(HOST, "node-c")]),
    ];
    let mut p = incoming(&[("foo", "")], vec![]);
    let c = |skew: i64, key: &str| json!({"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": SA, "labelSelector": {"matchLabels": {"foo": ""}}});
    p["kubecoreDefaultSpread"] = json!({"system": true, "constraints": [c(3, HOST), c(5, "topology.kubernetes.io/zone")]});
    let pods = vec![foo("p-b1", "node-b"), foo("p-c1", "node-c")];
    let want: Vec<(String, i64)> = vec![("node-a".into(), 80), ("node-b".into(), 40), ("node-c".into(), 100)];
    assert_eq!(scores(&nodes, &[], &pods, &p), want);
    assert_eq!(cycle_scores(&nodes, &pods, &p), want);
}
