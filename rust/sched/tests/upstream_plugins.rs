//! Upstream kube-scheduler's unit-test tables for TaintToleration, NodeAffinity, NodePorts,
//! ImageLocality, NodeName and NodeUnschedulable, re-stated as data.
//!
//! Sources (kubernetes/kubernetes): pkg/scheduler/framework/plugins/{tainttoleration,
//! nodeaffinity, nodeports, imagelocality, nodename, nodeunschedulable}/*_test.go, the
//! HostPortInfo tables of the framework's types_test.go, and component-helpers'
//! scheduling/corev1/nodeaffinity/nodeaffinity_test.go. Each case carries upstream's name.
//!
//! Filter cases run one plugin on a one-node snapshot and compare (fits, reason, code); score
//! cases run one score plugin of weight 1 with no filters, so the final score is the plugin's
//! score after its NormalizeScore, in the nodes' order.

mod common;

use common::*;
use kubecore_sched::api;
use kubecore_sched::cycle::ERR_PRE_FILTER_NODE_AFFINITY;
use kubecore_sched::query::ERR_NODE_AFFINITY_CONFLICT;
use kubecore_sched::intern::Interner;
use kubecore_sched::nodeaffinity::{self, AddedAffinity, Compiled, Op, ERR_REASON_ENFORCED, ERR_REASON_POD};
use kubecore_sched::pod::normalized_image_name;
use kubecore_sched::ports::{HostPort, UsedPorts};
use kubecore_sched::score::default_normalize;
use kubecore_sched::taints::{Taint, Toleration, Tolerations};
use serde_json::{json, Value};

const MB: i64 = 1024 * 1024;
/// Upstream's status codes: UnschedulableAndUnresolvable (true) or Unschedulable (false).
const UU: bool = true;
const U: bool = false;

/// A Filter's answer for one node: None when it fits, else (reason, unresolvable).
type Verdict = Option<(String, bool)>;
/// (name, pod, nodes, final scores in the nodes' order).
type ScoreCase = (&'static str, Value, Vec<Value>, Vec<(&'static str, i64)>);
/// (protocol, ip, port) as upstream's hostPortInfoParam.
type Param = (&'static str, &'static str, i32);
type Params = Vec<Param>;
type Labels = Vec<(&'static str, &'static str)>;
/// A taint's (key, value, effect).
type TaintParts = (&'static str, &'static str, &'static str);
/// (name, pod spec, addedAffinity, (node, labels) list, final scores).
type AddedScoreCase = (&'static str, Value, AddedAffinity, Vec<(&'static str, &'static [(&'static str, &'static str)])>, Vec<i64>);

const TAINT_PREFIX: &str = "node(s) had untolerated taint";
/// The reason of upstream's TaintToleration Filter since kubernetes#134740 (1.35; cherry-picked
/// to 1.34 as #135023): no taint key or value in pod statuses.
const TAINT_REASON: &str = "node(s) had untolerated taint(s)";
const UNSCHEDULABLE_REASON: &str = "node(s) were unschedulable";
const NODE_NAME_REASON: &str = "node(s) didn't match the requested node name";
const PORTS_REASON: &str = "node(s) didn't have free ports for the requested pod ports";

// ---- builders ---------------------------------------------------------------------------------

/// A node with only a name and exactly the given labels: no allocatable, as upstream's test nodes.
fn bare(name: &str, labels: &[(&str, &str)]) -> Value {
    let mut n = node(name, "0", "0", 0);
    n["metadata"]["labels"] = json!({});
    n["status"] = json!({});
    with_labels(n, labels)
}

fn tainted(name: &str, taints: Value) -> Value {
    let mut n = bare(name, &[]);
    n["spec"]["taints"] = taints;
    n
}

fn with_images(name: &str, images: &[(&[&str], i64)]) -> Value {
    let mut n = bare(name, &[]);
    n["status"]["images"] = images.iter().map(|(names, size)| json!({"names": names, "sizeBytes": size})).collect();
    n
}

fn pod_spec(spec: Value) -> Value {
    json!({"metadata": {"name": "p", "namespace": "default"}, "spec": spec})
}

fn tolerating(tols: Value) -> Value {
    pod_spec(json!({"tolerations": tols}))
}

fn one_filter(plugin: &str) -> kubecore_sched::Profile {
    profile(|c| {
        c.filters = vec![plugin.to_string()];
        c.scores.clear();
    })
}

/// What one Filter plugin says of `pod` on `node` (holding `existing`): None when it fits, else
/// (reason, unresolvable).
fn filter(plugin: &str, node: &Value, existing: &[Value], pod: &Value) -> Verdict {
    let mut s = snapshot(std::slice::from_ref(node));
    let name = node["metadata"]["name"].as_str().unwrap();
    for (i, p) in existing.iter().enumerate() {
        s.add_pod_json(&format!("default/e{i}"), &bytes(p), name).unwrap();
    }
    let r = s.schedule(&one_filter(plugin), &bytes(pod), false).unwrap();
    if r.feasible_names().count() == 1 {
        return None;
    }
    assert_eq!(r.reasons.len(), 1, "{:?}", r.reasons);
    Some((r.reasons[0].0.clone(), r.unresolvable == 1))
}

/// One score plugin's final scores in the order of `nodes`.
fn scores(plugin: &str, nodes: &[Value], pod: &Value) -> Vec<(String, i64)> {
    let mut s = snapshot(nodes);
    let prof = profile(|c| {
        c.filters.clear();
        c.scores = vec![(plugin.to_string(), 1)];
    });
    let r = s.schedule(&prof, &bytes(pod), false).unwrap();
    let got: Vec<(String, i64)> = r.feasible_names().map(str::to_string).zip(r.scores.iter().copied()).collect();
    nodes
        .iter()
        .map(|n| {
            let name = n["metadata"]["name"].as_str().unwrap();
            got.iter().find(|(g, _)| g == name).cloned().unwrap_or_else(|| panic!("{name} not scored: {got:?}"))
        })
        .collect()
}

fn named(list: &[(&str, i64)]) -> Vec<(String, i64)> {
    list.iter().map(|(n, s)| (n.to_string(), *s)).collect()
}

// ---- TaintToleration ----------------------------------------------------------------------------

/// TestTaintTolerationFilter and TestTaintTolerationFilterWithFeatureGate (the cases that hold
/// with TaintTolerationComparisonOperators off, kubecore's only behaviour): Some(UU) = rejected.
#[test]
fn taint_toleration_filter() {
    let ns = |k: &str, v: &str| json!({"key": k, "value": v, "effect": "NoSchedule"});
    let eq = |k: &str, v: &str, e: &str| json!({"key": k, "operator": "Equal", "value": v, "effect": e});
    let exists = |k: &str| json!({"key": k, "operator": "Exists", "effect": "NoSchedule"});
    let cmp = |op: &str, v: &str| json!({"key": "node.kubernetes.io/sla", "operator": op, "value": v, "effect": "NoSchedule"});
    let soft = json!([{"key": "dedicated", "value": "user1", "effect": "PreferNoSchedule"}]);
    let cases: Vec<(&str, Value, Value, bool)> = vec![
        ("A pod having no tolerations can't be scheduled onto a node with nonempty taints",
            json!([]), json!([ns("dedicated", "user1")]), false),
        ("A pod which can be scheduled on a dedicated node assigned to user1 with effect NoSchedule",
            json!([{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}]), json!([ns("dedicated", "user1")]), true),
        ("A pod which can't be scheduled on a dedicated node assigned to user2 with effect NoSchedule",
            json!([eq("dedicated", "user2", "NoSchedule")]), json!([ns("dedicated", "user1")]), false),
        ("A pod can be scheduled onto the node, with a toleration uses operator Exists that tolerates the taints on the node",
            json!([exists("foo")]), json!([ns("foo", "bar")]), true),
        ("A pod has multiple tolerations, node has multiple taints, all the taints are tolerated, pod can be scheduled onto the node",
            json!([eq("dedicated", "user2", "NoSchedule"), exists("foo")]), json!([ns("dedicated", "user2"), ns("foo", "bar")]), true),
        ("A pod has a toleration that keys and values match the taint on the node, but (non-empty) effect doesn't match, can't be scheduled onto the node",
            json!([eq("foo", "bar", "PreferNoSchedule")]), json!([ns("foo", "bar")]), false),
        ("The pod has a toleration that keys and values match the taint on the node, the effect of toleration is empty, and the effect of taint is NoSchedule. Pod can be scheduled onto the node",
            json!([{"key": "foo", "operator": "Equal", "value": "bar"}]), json!([ns("foo", "bar")]), true),
        ("The pod has a toleration that key and value don't match the taint on the node, but the effect of taint on node is PreferNoSchedule. Pod can be scheduled onto the node",
            json!([eq("dedicated", "user2", "NoSchedule")]), soft.clone(), true),
        ("The pod has no toleration, but the effect of taint on node is PreferNoSchedule. Pod can be scheduled onto the node",
            json!([]), soft, true),
        ("Pod with Gt toleration cannot be scheduled when feature gate is disabled",
            json!([cmp("Gt", "750")]), json!([ns("node.kubernetes.io/sla", "950")]), false),
        ("Pod with Lt toleration cannot be scheduled when feature gate is disabled",
            json!([cmp("Lt", "950")]), json!([ns("node.kubernetes.io/sla", "800")]), false),
        ("Pod with mixed tolerations (Equal and Gt) when feature gate is disabled - only Equal is honored",
            json!([eq("dedicated", "user1", "NoSchedule"), cmp("Gt", "750")]), json!([ns("dedicated", "user1")]), true),
        ("Pod with mixed tolerations, Gt toleration needed but filtered out when feature gate is disabled",
            json!([eq("dedicated", "user1", "NoSchedule"), cmp("Gt", "750")]),
            json!([ns("dedicated", "user1"), ns("node.kubernetes.io/sla", "950")]), false),
    ];
    for (name, tols, taints, fits) in cases {
        let got = filter("TaintToleration", &tainted("nodeA", taints), &[], &tolerating(tols));
        match got {
            None => assert!(fits, "{name}: fits, upstream rejects"),
            Some((reason, code)) => {
                assert!(!fits, "{name}: rejected ({reason}), upstream fits");
                assert!(reason.starts_with(TAINT_PREFIX) && code == UU, "{name}: {reason} {code}");
            }
        }
    }
}

/// The reason string of the first case above, as upstream has it since kubernetes#134740.
#[test]
fn taint_toleration_filter_reason() {
    let node = tainted("nodeA", json!([{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}]));
    let got = filter("TaintToleration", &node, &[], &tolerating(json!([])));
    assert_eq!(got, Some((TAINT_REASON.to_string(), UU)));
}

/// TestTaintTolerationScore.
#[test]
fn taint_toleration_score() {
    let prefer = |k: &str, v: &str| json!({"key": k, "value": v, "effect": "PreferNoSchedule"});
    let tol = |k: &str, v: &str, e: &str| json!({"key": k, "operator": "Equal", "value": v, "effect": e});
    let cases: Vec<ScoreCase> = vec![
        ("node with taints tolerated by the pod, gets a higher score than those node with intolerable taints",
            json!([tol("foo", "bar", "PreferNoSchedule")]),
            vec![tainted("nodeA", json!([prefer("foo", "bar")])), tainted("nodeB", json!([prefer("foo", "blah")]))],
            vec![("nodeA", 100), ("nodeB", 0)]),
        ("the nodes that all of their taints are tolerated by the pod, get the same score, no matter how many tolerable taints a node has",
            json!([tol("cpu-type", "arm64", "PreferNoSchedule"), tol("disk-type", "ssd", "PreferNoSchedule")]),
            vec![tainted("nodeA", json!([])), tainted("nodeB", json!([prefer("cpu-type", "arm64")])),
                 tainted("nodeC", json!([prefer("cpu-type", "arm64"), prefer("disk-type", "ssd")]))],
            vec![("nodeA", 100), ("nodeB", 100), ("nodeC", 100)]),
        ("the more intolerable taints a node has, the lower score it gets.",
            json!([tol("foo", "bar", "PreferNoSchedule")]),
            vec![tainted("nodeA", json!([])), tainted("nodeB", json!([prefer("cpu-type", "arm64")])),
                 tainted("nodeC", json!([prefer("cpu-type", "arm64"), prefer("disk-type", "ssd")]))],
            vec![("nodeA", 100), ("nodeB", 50), ("nodeC", 0)]),
        ("only taints and tolerations that have effect PreferNoSchedule are checked by taints-tolerations priority function",
            json!([tol("cpu-type", "arm64", "NoSchedule"), tol("disk-type", "ssd", "NoSchedule")]),
            vec![tainted("nodeA", json!([])),
                 tainted("nodeB", json!([{"key": "cpu-type", "value": "arm64", "effect": "NoSchedule"}])),
                 tainted("nodeC", json!([prefer("cpu-type", "arm64"), prefer("disk-type", "ssd")]))],
            vec![("nodeA", 100), ("nodeB", 100), ("nodeC", 0)]),
        ("Default behaviour No taints and tolerations, lands on node with no taints",
            json!([]),
            vec![tainted("nodeA", json!([])), tainted("nodeB", json!([prefer("cpu-type", "arm64")]))],
            vec![("nodeA", 100), ("nodeB", 0)]),
        // Upstream runs this one with the comparison operators on; with them off (kubecore) the Gt
        // toleration tolerates nothing, and the expected scores are the same.
        ("Score ignores parse errors from numeric PreferNoSchedule taint value",
            json!([{"key": "node.kubernetes.io/sla", "operator": "Gt", "value": "950", "effect": "PreferNoSchedule"}]),
            vec![tainted("nodeA", Value::Null), tainted("nodeB", json!([prefer("node.kubernetes.io/sla", "high")]))],
            vec![("nodeA", 100), ("nodeB", 0)]),
    ];
    for (name, tols, nodes, want) in cases {
        assert_eq!(scores("TaintToleration", &nodes, &tolerating(tols)), named(&want), "{name}");
    }
}

fn api_toleration(v: Value) -> api::Toleration {
    serde_json::from_value(v).unwrap()
}

/// TestTolerationToleratesTaint (k8s.io/api core/v1), the cases without the Gt/Lt operators:
/// (description, toleration, taint (key, value, effect), tolerated).
#[test]
fn toleration_tolerates_taint() {
    let cases: Vec<(&str, Value, TaintParts, bool)> = vec![
        ("toleration and taint have the same key and effect, and operator is Exists, and taint has no value, expect tolerated",
            json!({"key": "foo", "operator": "Exists", "effect": "NoSchedule"}), ("foo", "", "NoSchedule"), true),
        ("toleration and taint have the same key and effect, and operator is Exists, and taint has some value, expect tolerated",
            json!({"key": "foo", "operator": "Exists", "effect": "NoSchedule"}), ("foo", "bar", "NoSchedule"), true),
        ("toleration and taint have the same effect, toleration has empty key and operator is Exists, means match all taints, expect tolerated",
            json!({"key": "", "operator": "Exists", "effect": "NoSchedule"}), ("foo", "bar", "NoSchedule"), true),
        ("toleration and taint have the same key, effect and value, and operator is Equal, expect tolerated",
            json!({"key": "foo", "operator": "Equal", "value": "bar", "effect": "NoSchedule"}), ("foo", "bar", "NoSchedule"), true),
        ("toleration and taint have the same key and effect, but different values, and operator is Equal, expect not tolerated",
            json!({"key": "foo", "operator": "Equal", "value": "value1", "effect": "NoSchedule"}), ("foo", "value2", "NoSchedule"), false),
        ("toleration and taint have the same key and value, but different effects, and operator is Equal, expect not tolerated",
            json!({"key": "foo", "operator": "Equal", "value": "bar", "effect": "NoSchedule"}), ("foo", "bar", "NoExecute"), false),
    ];
    for (name, tol, (key, value, effect), want) in cases {
        assert_eq!(Toleration::from_api(&api_toleration(tol)).tolerates(key, value, effect), want, "{name}");
    }
}

/// TestFindMatchingUntoleratedTaint (component-helpers) with the TaintToleration Filter's taint
/// filter (NoSchedule and NoExecute): (description, tolerations, taints, tolerated). Left out:
/// the cases with another filter function, and those that need the comparison operators.
#[test]
fn find_matching_untolerated_taint() {
    let exists = |k: &str| json!({"key": k, "operator": "Exists", "effect": "NoSchedule"});
    let cases: Vec<(&str, Vec<Value>, Vec<Taint>, bool)> = vec![
        ("empty tolerations tolerate empty taints", vec![], vec![], true),
        ("non-empty tolerations tolerate empty taints", vec![exists("foo")], vec![], true),
        ("tolerations match all taints, expect tolerated", vec![exists("foo")], vec![Taint::new("foo", "", "NoSchedule")], true),
        ("no filterFunc indicated, means all taints apply to the filter, tolerations don't match taints, expect untolerated",
            vec![exists("foo")], vec![Taint::new("bar", "", "NoSchedule")], false),
        // With the comparison operators off the Gt toleration tolerates nothing; the Exists one
        // still does, as upstream expects with them on.
        ("numeric Gt parse error is ignored when a later toleration matches the taint",
            vec![json!({"key": "node.kubernetes.io/sla", "operator": "Gt", "value": "950", "effect": "NoSchedule"}),
                 exists("node.kubernetes.io/sla")],
            vec![Taint::new("node.kubernetes.io/sla", "high", "NoSchedule")], true),
    ];
    for (name, tols, taints, want) in cases {
        let tols: Vec<api::Toleration> = tols.into_iter().map(api_toleration).collect();
        assert_eq!(Tolerations::new(&tols).first_untolerated(&taints).is_none(), want, "{name}");
    }
}

// ---- NodeUnschedulable and NodeName -------------------------------------------------------------

/// TestNodeUnschedulable.
#[test]
fn node_unschedulable_filter() {
    let node = |unschedulable: bool| {
        let mut n = bare("node", &[]);
        n["spec"]["unschedulable"] = json!(unschedulable);
        n
    };
    let toleration = json!([{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]);
    let cases: Vec<(&str, Value, Value, Verdict)> = vec![
        ("Does not schedule pod to unschedulable node (node.Spec.Unschedulable==true)",
            pod_spec(json!({})), node(true), Some((UNSCHEDULABLE_REASON.into(), UU))),
        ("Schedule pod to normal node", pod_spec(json!({})), node(false), None),
        ("Schedule pod with toleration to unschedulable node (node.Spec.Unschedulable==true)",
            tolerating(toleration), node(true), None),
    ];
    for (name, pod, node, want) in cases {
        assert_eq!(filter("NodeUnschedulable", &node, &[], &pod), want, "{name}");
    }
}

/// TestNodeName.
#[test]
fn node_name_filter() {
    let cases: Vec<(&str, Value, Verdict)> = vec![
        ("no host specified", pod_spec(json!({})), None),
        ("host matches", pod_spec(json!({"nodeName": "foo"})), None),
        ("host doesn't match", pod_spec(json!({"nodeName": "bar"})), Some((NODE_NAME_REASON.into(), UU))),
    ];
    for (name, pod, want) in cases {
        assert_eq!(filter("NodeName", &bare("foo", &[]), &[], &pod), want, "{name}");
    }
}

// ---- NodePorts -----------------------------------------------------------------------------------

/// A pod with host ports given as "PROTOCOL/hostIP/hostPort" (upstream's newPod).
fn port_pod(ports: &[&str]) -> Value {
    let ports: Vec<Value> = ports
        .iter()
        .map(|p| {
            let parts: Vec<&str> = p.split('/').collect();
            json!({"containerPort": 1, "protocol": parts[0], "hostIP": parts[1], "hostPort": parts[2].parse::<i64>().unwrap()})
        })
        .collect();
    pod_spec(json!({"containers": [{"name": "c", "ports": ports}]}))
}

fn init_port_pod(sidecar: bool) -> Value {
    let mut c = json!({"name": "i", "ports": [{"containerPort": 8001, "hostPort": 8001, "protocol": "TCP"}]});
    if sidecar {
        c["restartPolicy"] = json!("Always");
    }
    pod_spec(json!({"initContainers": [c], "containers": [{"name": "c"}]}))
}

/// TestNodePorts and TestFits: (name, pod, existing pod's ports, conflicts).
#[test]
fn node_ports_filter() {
    let cases: Vec<(&str, Value, Vec<&str>, bool)> = vec![
        ("skip filter", pod_spec(json!({})), vec![], false),
        ("other port", port_pod(&["UDP/127.0.0.1/8080"]), vec!["UDP/127.0.0.1/9090"], false),
        ("same udp port", port_pod(&["UDP/127.0.0.1/8080"]), vec!["UDP/127.0.0.1/8080"], true),
        ("same tcp port", port_pod(&["TCP/127.0.0.1/8080"]), vec!["TCP/127.0.0.1/8080"], true),
        ("different host ip", port_pod(&["TCP/127.0.0.1/8080"]), vec!["TCP/127.0.0.2/8080"], false),
        ("different protocol", port_pod(&["UDP/127.0.0.1/8080"]), vec!["TCP/127.0.0.1/8080"], false),
        ("second udp port conflict", port_pod(&["UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"]), vec!["UDP/127.0.0.1/8080"], true),
        ("first tcp port conflict", port_pod(&["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"]),
            vec!["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081"], true),
        ("first tcp port conflict due to 0.0.0.0 hostIP", port_pod(&["TCP/0.0.0.0/8001"]), vec!["TCP/127.0.0.1/8001"], true),
        ("TCP hostPort conflict due to 0.0.0.0 hostIP", port_pod(&["TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"]),
            vec!["TCP/127.0.0.1/8001"], true),
        ("second tcp port conflict to 0.0.0.0 hostIP", port_pod(&["TCP/127.0.0.1/8001"]), vec!["TCP/0.0.0.0/8001"], true),
        ("second different protocol", port_pod(&["UDP/127.0.0.1/8001"]), vec!["TCP/0.0.0.0/8001"], false),
        ("UDP hostPort conflict due to 0.0.0.0 hostIP", port_pod(&["UDP/127.0.0.1/8001"]),
            vec!["TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001"], true),
        ("non-sidecar initContainer using hostPort", init_port_pod(false), vec!["TCP/0.0.0.0/8001"], false),
        ("TCP hostPort conflict from sidecar initContainer", init_port_pod(true), vec!["TCP/0.0.0.0/8001"], true),
        // TestFits.
        ("non-conflicting ports", port_pod(&["TCP/127.0.0.1/80"]), vec!["TCP/127.0.0.1/9090"], false),
        ("multiple non-conflicting ports",
            port_pod(&["TCP/127.0.0.1/80", "TCP/127.0.1.1/80", "TCP/127.0.1.1/90", "TCP/127.0.1.1/100"]),
            vec!["TCP/127.0.0.1/9090", "TCP/127.0.0.1/9191", "TCP/127.0.1.1/8080"], false),
        ("same ports on different protocols", port_pod(&["TCP/127.0.0.1/80"]), vec!["UDP/127.0.0.1/80"], false),
        ("conflicting ports", port_pod(&["TCP/127.0.0.1/80"]), vec!["TCP/127.0.0.1/80"], true),
        ("multiple ports, some conflicting",
            port_pod(&["TCP/127.0.0.1/80", "TCP/127.0.1.1/80", "TCP/127.0.1.1/90", "TCP/127.0.1.1/100"]),
            vec!["TCP/127.0.0.1/9090", "TCP/127.0.1.1/90", "TCP/127.0.1.1/8080"], true),
    ];
    for (name, pod, existing, conflict) in cases {
        let existing = if existing.is_empty() { vec![] } else { vec![port_pod(&existing)] };
        let want = conflict.then(|| (PORTS_REASON.to_string(), U));
        assert_eq!(filter("NodePorts", &bare("node", &[]), &existing, &pod), want, "{name}");
    }
}

fn host_ports(params: &[Param]) -> Vec<HostPort> {
    params.iter().map(|&(protocol, ip, port)| HostPort::new(ip, protocol, port)).collect()
}

/// TestHostPortInfo_AddRemove.
#[test]
fn host_port_info_add_remove() {
    let specific = [("TCP", "127.0.0.1", 79), ("UDP", "127.0.0.1", 80), ("TCP", "127.0.0.1", 81), ("TCP", "127.0.0.1", 82)];
    let wildcard = [("TCP", "0.0.0.0", 79), ("UDP", "0.0.0.0", 80), ("TCP", "0.0.0.0", 81), ("TCP", "0.0.0.0", 82)];
    let all: Params = specific.iter().chain(&wildcard).copied().collect();
    let cases: Vec<(&str, Params, Params, usize)> = vec![
        ("normal add case", [all.clone(), vec![("TCP", "0.0.0.0", 0), ("TCP", "0.0.0.0", -1)]].concat(), vec![], 8),
        ("empty ip and protocol add should work",
            vec![("", "127.0.0.1", 79), ("UDP", "127.0.0.1", 80), ("", "127.0.0.1", 81), ("", "127.0.0.1", 82),
                 ("", "", 79), ("UDP", "", 80), ("", "", 81), ("", "", 82), ("", "", 0), ("", "", -1)],
            vec![], 8),
        ("normal remove case", all.clone(), all.clone(), 0),
        ("empty ip and protocol remove should work", all.clone(),
            vec![("", "127.0.0.1", 79), ("", "127.0.0.1", 81), ("", "127.0.0.1", 82), ("UDP", "127.0.0.1", 80),
                 ("", "", 79), ("", "", 81), ("", "", 82), ("UDP", "", 80)],
            0),
    ];
    for (name, added, removed, len) in cases {
        let mut u = UsedPorts::default();
        u.add(&host_ports(&added));
        u.remove(&host_ports(&removed));
        assert_eq!(u.len(), len, "{name}");
    }
}

/// TestHostPortInfo_Check.
#[test]
fn host_port_info_check() {
    let cases: Vec<(&str, Params, Param, bool)> = vec![
        ("empty check should check 0.0.0.0 and TCP", vec![("TCP", "127.0.0.1", 80)], ("", "", 81), false),
        ("empty check should check 0.0.0.0 and TCP (conflicted)", vec![("TCP", "127.0.0.1", 80)], ("", "", 80), true),
        ("empty port check should pass", vec![("TCP", "127.0.0.1", 80)], ("", "", 0), false),
        ("0.0.0.0 should check all registered IPs", vec![("TCP", "127.0.0.1", 80)], ("TCP", "0.0.0.0", 80), true),
        ("0.0.0.0 with different protocol should be allowed", vec![("UDP", "127.0.0.1", 80)], ("TCP", "0.0.0.0", 80), false),
        ("0.0.0.0 with different port should be allowed",
            vec![("TCP", "127.0.0.1", 79), ("TCP", "127.0.0.1", 81), ("TCP", "127.0.0.1", 82)], ("TCP", "0.0.0.0", 80), false),
        ("normal ip should check all registered 0.0.0.0", vec![("TCP", "0.0.0.0", 80)], ("TCP", "127.0.0.1", 80), true),
        ("normal ip with different port/protocol should be allowed (0.0.0.0)",
            vec![("TCP", "0.0.0.0", 79), ("UDP", "0.0.0.0", 80), ("TCP", "0.0.0.0", 81), ("TCP", "0.0.0.0", 82)],
            ("TCP", "127.0.0.1", 80), false),
        ("normal ip with different port/protocol should be allowed",
            vec![("TCP", "127.0.0.1", 79), ("UDP", "127.0.0.1", 80), ("TCP", "127.0.0.1", 81), ("TCP", "127.0.0.1", 82)],
            ("TCP", "127.0.0.1", 80), false),
    ];
    for (name, added, check, want) in cases {
        let mut u = UsedPorts::default();
        u.add(&host_ports(&added));
        assert_eq!(u.conflicts(&host_ports(&[check]), &[]), want, "{name}");
    }
}

// ---- NodeAffinity --------------------------------------------------------------------------------

fn req(key: &str, op: &str, values: &[&str]) -> Value {
    json!({"key": key, "operator": op, "values": values})
}

fn exprs(reqs: &[Value]) -> Value {
    json!({"matchExpressions": reqs})
}

fn name_in(names: &[&str]) -> Value {
    req("metadata.name", "In", names)
}

/// A pod spec with required terms.
fn required(terms: Value) -> Value {
    json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}})
}

fn with_selector(mut spec: Value, sel: &[(&str, &str)]) -> Value {
    spec["nodeSelector"] = sel.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>().into();
    spec
}

/// TestNodeAffinity (the plugin's Filter), and component-helpers' TestPodMatchesNodeSelectorAndAffinityTerms,
/// TestNodeSelectorMatch and TestMatchNodeSelectorTerms through a pod's required terms, without addedAffinity: (name, pod spec, node name, labels, fits).
/// Upstream's nameless nodes are named "node" (they have no matchFields).
#[test]
fn node_affinity_filter() {
    let gpu_exists = req("GPU", "Exists", &[]);
    // One term with label_1 In (label_1_val) and metadata.name In (host_1); or two terms, one each.
    let label_and_name = || {
        required(json!([{"matchExpressions": [req("label_1", "In", &["label_1_val"])], "matchFields": [name_in(&["host_1"])]}]))
    };
    let label_or_name =
        || required(json!([exprs(&[req("label_1", "In", &["label_1_val"])]), {"matchFields": [name_in(&["host_1"])]}]));
    let cases: Vec<(&str, Value, &str, Labels, bool)> = vec![
        ("no selector", json!({}), "node", vec![], true),
        ("missing labels", with_selector(json!({}), &[("foo", "bar")]), "node", vec![], false),
        ("same labels", with_selector(json!({}), &[("foo", "bar")]), "node", vec![("foo", "bar")], true),
        ("node labels are superset", with_selector(json!({}), &[("foo", "bar")]), "node", vec![("foo", "bar"), ("baz", "blah")], true),
        ("node labels are subset", with_selector(json!({}), &[("foo", "bar"), ("baz", "blah")]), "node", vec![("foo", "bar")], false),
        ("Pod with matchExpressions using In operator that matches the existing node",
            required(json!([exprs(&[req("foo", "In", &["bar", "value2"])])])), "node", vec![("foo", "bar")], true),
        ("Pod with matchExpressions using Gt operator that matches the existing node",
            required(json!([exprs(&[req("kernel-version", "Gt", &["0204"])])])), "node", vec![("kernel-version", "0206")], true),
        ("Pod with matchExpressions using NotIn operator that matches the existing node",
            required(json!([exprs(&[req("mem-type", "NotIn", &["DDR", "DDR2"])])])), "node", vec![("mem-type", "DDR3")], true),
        ("Pod with matchExpressions using Exists operator that matches the existing node",
            required(json!([exprs(std::slice::from_ref(&gpu_exists))])), "node", vec![("GPU", "NVIDIA-GRID-K1")], true),
        ("Pod with affinity that don't match node's labels won't schedule onto the node",
            required(json!([exprs(&[req("foo", "In", &["value1", "value2"])])])), "node", vec![("foo", "bar")], false),
        ("Pod with a nil []NodeSelectorTerm in affinity, can't match the node's labels and won't schedule onto the node",
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}}),
            "node", vec![("foo", "bar")], false),
        ("Pod with an empty []NodeSelectorTerm in affinity, can't match the node's labels and won't schedule onto the node",
            required(json!([])), "node", vec![("foo", "bar")], false),
        ("Pod with empty MatchExpressions is not a valid value will match no objects and won't schedule onto the node",
            required(json!([{"matchExpressions": []}])), "node", vec![("foo", "bar")], false),
        ("Pod with no Affinity will schedule onto a node", json!({}), "node", vec![("foo", "bar")], true),
        ("Pod with Affinity but nil NodeSelector will schedule onto a node",
            json!({"affinity": {"nodeAffinity": {}}}), "node", vec![("foo", "bar")], true),
        ("Pod with multiple matchExpressions ANDed that matches the existing node",
            required(json!([exprs(&[gpu_exists.clone(), req("GPU", "NotIn", &["AMD", "INTER"])])])),
            "node", vec![("GPU", "NVIDIA-GRID-K1")], true),
        ("Pod with multiple matchExpressions ANDed that doesn't match the existing node",
            required(json!([exprs(&[gpu_exists.clone(), req("GPU", "In", &["AMD", "INTER"])])])),
            "node", vec![("GPU", "NVIDIA-GRID-K1")], false),
        ("Pod with multiple NodeSelectorTerms ORed in affinity, matches the node's labels and will schedule onto the node",
            required(json!([exprs(&[req("foo", "In", &["bar", "value2"])]), exprs(&[req("diffkey", "In", &["wrong", "value2"])])])),
            "node", vec![("foo", "bar")], true),
        ("Pod with an Affinity and a PodSpec.NodeSelector(the old thing that we are deprecating) both are satisfied, will schedule onto the node",
            with_selector(required(json!([exprs(&[req("foo", "Exists", &[])])])), &[("foo", "bar")]),
            "node", vec![("foo", "bar")], true),
        ("Pod with an Affinity matches node's labels but the PodSpec.NodeSelector(the old thing that we are deprecating) is not satisfied, won't schedule onto the node",
            with_selector(required(json!([exprs(&[req("foo", "Exists", &[])])])), &[("foo", "bar")]),
            "node", vec![("foo", "barrrrrr")], false),
        ("Pod with an invalid value in Affinity term won't be scheduled onto the node",
            required(json!([exprs(&[req("foo", "NotIn", &["invalid value: ___@#$%^"])])])), "node", vec![("foo", "bar")], false),
        ("Pod with matchFields using In operator that matches the existing node",
            required(json!([{"matchFields": [name_in(&["node1"])]}])), "node1", vec![], true),
        ("Pod with matchFields using In operator that does not match the existing node",
            required(json!([{"matchFields": [name_in(&["node1"])]}])), "node2", vec![], false),
        ("Pod with two terms: matchFields does not match, but matchExpressions matches",
            required(json!([{"matchFields": [name_in(&["node1"]), name_in(&["node2"])]},
                             exprs(&[req("foo", "In", &["bar"])])])),
            "node2", vec![("foo", "bar")], true),
        ("Pod with one term: matchFields does not match, but matchExpressions matches",
            required(json!([{"matchFields": [name_in(&["node1"])], "matchExpressions": [req("foo", "In", &["bar"])]}])),
            "node2", vec![("foo", "bar")], false),
        ("Pod with one term: both matchFields and matchExpressions match",
            required(json!([{"matchFields": [name_in(&["node1"])], "matchExpressions": [req("foo", "In", &["bar"])]}])),
            "node1", vec![("foo", "bar")], true),
        ("Pod with two terms: both matchFields and matchExpressions do not match",
            required(json!([{"matchFields": [name_in(&["node1"])]}, exprs(&[req("foo", "In", &["not-match-to-bar"])])])),
            "node2", vec![("foo", "bar")], false),
        ("Pod with two terms of node.Name affinity",
            required(json!([{"matchFields": [name_in(&["node1"])]}, {"matchFields": [name_in(&["node2"])]}])),
            "node2", vec![], true),
        // Upstream's PreFilter answers "pod affinity terms conflict" (not modelled: a PreFilter
        // status); its Filter, checked here, rejects the node.
        ("Pod with two conflicting mach field requirements",
            required(json!([{"matchFields": [name_in(&["node1"]), name_in(&["node2"])]}])), "node2", vec![("foo", "bar")], false),
        ("Matches node selector correctly even if PreFilter is not called",
            with_selector(json!({}), &[("foo", "bar")]), "node", vec![("foo", "bar"), ("baz", "blah")], true),
        ("Matches node affinity correctly even if PreFilter is not called",
            required(json!([exprs(&[gpu_exists.clone(), req("GPU", "NotIn", &["AMD", "INTER"])])])),
            "node", vec![("GPU", "NVIDIA-GRID-K1")], true),
        // TestNodeSelectorMatch and TestMatchNodeSelectorTerms (component-helpers; where the two
        // tables hold the same case, both names are given).
        ("node matches field selector, but not labels | labelSelectorTerm and fieldSelectorTerm was set, but only node fields",
            label_and_name(), "host_1", vec![], false),
        ("node matches field selector and label selector | labelSelectorTerm and fieldSelectorTerm was set, both node fields and labels (both matched)",
            label_and_name(), "host_1", vec![("label_1", "label_1_val")], true),
        ("labelSelectorTerm and fieldSelectorTerm was set, both node fields and labels (one mismatched)",
            label_and_name(), "host_1", vec![("label_1", "label_1_val-failed")], false),
        ("second term matches", label_or_name(), "host_1", vec![], true),
        ("multi-selector was set, both node fields and labels (one mismatched)",
            label_or_name(), "host_1", vec![("label_1", "label_1_val-failed")], true),
        ("node label matches matchExpressions terms",
            required(json!([exprs(&[req("label_1", "In", &["label_1_val"])])])), "node", vec![("label_1", "label_1_val")], true),
        ("node field matches matchFields terms", required(json!([{"matchFields": [name_in(&["host_1"])]}])), "host_1", vec![], true),
        ("invalid node field requirement",
            required(json!([{"matchFields": [name_in(&["host_1", "host_2"])]}])), "host_1", vec![], false),
        ("fieldSelectorTerm with node labels",
            required(json!([{"matchFields": [name_in(&["host_1"])]}])), "not_host_1", vec![("metadata.name", "host_1")], false),
        ("labelSelectorTerm with node fields",
            required(json!([exprs(&[req("metadata.name", "In", &["host_1"])])])), "host_1", vec![], false),
    ];
    for (name, spec, node, labels, fits) in cases {
        let want = (!fits).then(|| (ERR_REASON_POD.to_string(), UU));
        let (n, pod) = (bare(node, &labels), pod_spec(spec));
        let got = filter("NodeAffinity", &n, &[], &pod);
        if got == Some((ERR_PRE_FILTER_NODE_AFFINITY.to_string(), UU)) {
            // The PreFilterResult (metadata.name In) leaves the node out of the cycle; its Filter
            // (what upstream's table checks) still answers.
            let s = snapshot(std::slice::from_ref(&n));
            assert_eq!(s.filter_node(&one_filter("NodeAffinity"), &bytes(&pod), node, &[]).unwrap(), vec![ERR_REASON_POD], "{name}");
            assert!(!fits, "{name}");
            continue;
        }
        if got == Some((ERR_NODE_AFFINITY_CONFLICT.to_string(), UU)) {
            // Upstream's wantPreFilterStatus: the terms' node names exclude each other.
            assert!(!fits && name.contains("conflicting"), "{name}");
            continue;
        }
        assert_eq!(got, want, "{name}");
    }
}

/// The preferred terms of upstream's TestNodeAffinityPriority.
fn affinity1() -> Value {
    json!({"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 2, "preference": exprs(&[req("foo", "In", &["bar"])])}]})
}

fn affinity2() -> Value {
    json!({"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 2, "preference": exprs(&[req("foo", "In", &["bar"])])},
        {"weight": 4, "preference": exprs(&[req("key", "In", &["value"])])},
        {"weight": 5, "preference": exprs(&[req("foo", "In", &["bar"]), req("key", "In", &["value"]), req("az", "In", &["az1"])])}]})
}

const LABEL1: &[(&str, &str)] = &[("foo", "bar")];
const LABEL2: &[(&str, &str)] = &[("key", "value")];
const LABEL3: &[(&str, &str)] = &[("az", "az1")];
const LABEL4: &[(&str, &str)] = &[("abc", "az11"), ("def", "az22")];
const LABEL5: &[(&str, &str)] = &[("foo", "bar"), ("key", "value"), ("az", "az1")];

/// TestNodeAffinityPriority, without addedAffinity.
#[test]
fn node_affinity_score() {
    let with = |na: Value| pod_spec(json!({"affinity": {"nodeAffinity": na}}));
    let different = |name| -> ScoreCase {
        (name, with(affinity2()), vec![bare("node1", LABEL1), bare("node5", LABEL5), bare("node2", LABEL2)],
            vec![("node1", 18), ("node5", 100), ("node2", 36)])
    };
    let cases: Vec<ScoreCase> = vec![
        ("all nodes are same priority as NodeAffinity is nil", pod_spec(json!({})),
            vec![bare("node1", LABEL1), bare("node2", LABEL2), bare("node3", LABEL3)],
            vec![("node1", 0), ("node2", 0), ("node3", 0)]),
        ("no node matches preferred scheduling requirements in NodeAffinity of pod so all nodes' priority is zero",
            with(affinity1()), vec![bare("node1", LABEL4), bare("node2", LABEL2), bare("node3", LABEL3)],
            vec![("node1", 0), ("node2", 0), ("node3", 0)]),
        ("only node1 matches the preferred scheduling requirements of pod",
            with(affinity1()), vec![bare("node1", LABEL1), bare("node2", LABEL2), bare("node3", LABEL3)],
            vec![("node1", 100), ("node2", 0), ("node3", 0)]),
        different("all nodes matches the preferred scheduling requirements of pod but with different priorities "),
        // Upstream runs this one without PreScore; the kernels have no such path, same data.
        different("calculate the priorities correctly even if PreScore is not called"),
    ];
    for (name, pod, nodes, want) in cases {
        assert_eq!(scores("NodeAffinity", &nodes, &pod), named(&want), "{name}");
    }
}

/// A pod's node selection compiled with an addedAffinity against one node, as the kernels do.
struct AffinityAt {
    compiled: Compiled,
    labels: Vec<(u32, u32)>,
    strings: Interner,
    name: String,
}

fn affinity_at(spec: &Value, added: Option<&AddedAffinity>, name: &str, labels: &[(&str, &str)]) -> AffinityAt {
    let mut strings = Interner::default();
    let mut ids: Vec<(u32, u32)> = labels.iter().map(|(k, v)| (strings.intern(k), strings.intern(v))).collect();
    ids.sort_unstable();
    let spec: api::PodSpec = serde_json::from_value(spec.clone()).unwrap();
    let compiled = Compiled::with_added(&nodeaffinity::parse(&spec), added, &strings);
    AffinityAt { compiled, labels: ids, strings, name: name.to_string() }
}

impl AffinityAt {
    fn failure(&self) -> Option<&'static str> {
        self.compiled.failure(&self.labels, &self.name, &self.strings)
    }

    fn raw_score(&self) -> i64 {
        self.compiled.preferred_score(&self.labels, &self.name, &self.strings)
    }
}

fn added(v: Value) -> AddedAffinity {
    AddedAffinity::from_json(&bytes(&v)).unwrap()
}

/// TestNodeAffinity's addedAffinity cases, at the level of the compiled selection (through a
/// profile: `node_affinity_added_affinity_through_the_profile`).
#[test]
fn node_affinity_added_affinity_filter() {
    let name_is_node2 = added(json!({"requiredDuringSchedulingIgnoredDuringExecution":
        {"nodeSelectorTerms": [{"matchFields": [name_in(&["node2"])]}]}}));
    let zone_bar = added(json!({"requiredDuringSchedulingIgnoredDuringExecution":
        {"nodeSelectorTerms": [exprs(&[req("zone", "In", &["bar"])])]}}));
    let cases: Vec<(&str, Value, &AddedAffinity, Option<&str>)> = vec![
        ("Matches added affinity and Pod's node affinity",
            required(json!([exprs(&[req("zone", "In", &["foo"])])])), &name_is_node2, None),
        ("Matches added affinity but not Pod's node affinity",
            required(json!([exprs(&[req("zone", "In", &["bar"])])])), &name_is_node2, Some(ERR_REASON_POD)),
        ("Doesn't match added affinity", json!({}), &zone_bar, Some(ERR_REASON_ENFORCED)),
    ];
    for (name, spec, add, want) in cases {
        let at = affinity_at(&spec, Some(add), "node2", &[("zone", "foo")]);
        assert_eq!(at.failure(), want, "{name}");
        assert!(at.compiled.filters, "{name}: the Filter has something to check");
    }
}

/// TestNodeAffinityPriority's addedAffinity cases, at the level of the compiled selection.
#[test]
fn node_affinity_added_affinity_score() {
    let with = |na: Value| json!({"affinity": {"nodeAffinity": na}});
    let add_key = added(json!({"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 3, "preference": exprs(&[req("key", "In", &["value"])])}]}));
    let cases: Vec<AddedScoreCase> = vec![
        ("added affinity", json!({}), added(affinity1()), vec![("node1", LABEL1), ("node2", LABEL2)], vec![100, 0]),
        ("added affinity and pod has default affinity", with(affinity1()), add_key,
            vec![("node1", LABEL1), ("node2", LABEL2), ("node3", LABEL5)], vec![40, 60, 100]),
    ];
    for (name, spec, add, nodes, want) in cases {
        let mut got: Vec<i64> = nodes.iter().map(|(n, l)| affinity_at(&spec, Some(&add), n, l).raw_score()).collect();
        default_normalize(&mut got, false);
        assert_eq!(got, want, "{name}");
    }
}

/// Upstream's TestNodeAffinity "Doesn't match added affinity" through a profile
/// (NodeAffinityArgs.addedAffinity): the node fails with the scheduler-enforced reason.
#[test]
fn node_affinity_added_affinity_through_the_profile() {
    let added = json!({"requiredDuringSchedulingIgnoredDuringExecution":
        {"nodeSelectorTerms": [exprs(&[req("zone", "In", &["bar"])])]}});
    let node = bare("node2", &[("zone", "foo")]);
    let mut s = snapshot(std::slice::from_ref(&node));
    let prof = profile(|c| {
        c.filters = vec!["NodeAffinity".to_string()];
        c.added_affinity = Some(AddedAffinity::from_json(&bytes(&added)).unwrap());
    });
    let r = s.schedule(&prof, &bytes(&pod_spec(json!({}))), false).unwrap();
    assert_eq!(r.feasible_names().count(), 0);
    assert_eq!((r.reasons, r.unresolvable), (vec![(ERR_REASON_ENFORCED.to_string(), 1)], 1));
}

/// TestNodeSelectorMatch and TestPreferredSchedulingTermsScore (component-helpers): a selector
/// of the profile's (NewNodeSelector / NewPreferredSchedulingTerms) with a term that does not
/// parse is an error; weight 0 terms are not parsed; scores add the matching weights.
#[test]
fn node_affinity_strict_terms_and_preferred_weights() {
    let bad_terms = json!([
        {"matchFields": [name_in(&["host_1", "host_2"])]},
        {"matchExpressions": [req("label_1", "In", &["label_1_val"])], "matchFields": [name_in(&["host_1"])]},
        exprs(&[req("invalid key", "In", &["label_value"])])]);
    let required_err = json!({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": bad_terms.clone()}});
    assert!(AddedAffinity::from_json(&bytes(&required_err)).is_err(), "invalid field selector and label selector");
    let weighted = |w: i64| {
        bad_terms.as_array().unwrap().iter().map(|t| json!({"weight": w, "preference": t})).collect::<Vec<_>>()
    };
    let preferred_err = json!({"preferredDuringSchedulingIgnoredDuringExecution": weighted(1)});
    assert!(AddedAffinity::from_json(&bytes(&preferred_err)).is_err(), "invalid field selector and label selector");
    let zero = json!({"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 0, "preference": {"matchFields": [name_in(&["host_1", "host_2"])]}}]});
    assert_eq!(added(zero).preferred.len(), 0, "invalid field selector but no weight, error not reported");
    // first and third term match: 5 + 11.
    let three = added(json!({"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 5, "preference": {"matchFields": [name_in(&["host_1"])]}},
        {"weight": 7, "preference": exprs(&[req("unknown_label", "In", &["unknown_label_val"])])},
        {"weight": 11, "preference": exprs(&[req("label_1", "In", &["label_1_val"])])}]}));
    let at = affinity_at(&json!({}), Some(&three), "host_1", &[("label_1", "label_1_val")]);
    assert_eq!(at.raw_score(), 16, "first and third term match");
}

/// TestNodeSelectorRequirementsAsSelector (component-helpers).
#[test]
fn node_selector_requirements_as_selector() {
    let term = |reqs: Value| {
        let t: api::NodeSelectorTerm = serde_json::from_value(json!({"matchExpressions": reqs})).unwrap();
        nodeaffinity::parse_term(&t)
    };
    assert!(term(Value::Null).is_none(), "nil: labels.Nothing");
    assert!(term(json!([])).is_none(), "empty: labels.Nothing");
    let r = term(json!([req("foo", "In", &["bar", "baz"])])).unwrap();
    assert_eq!((r.labels[0].key.as_str(), r.labels[0].op, r.labels[0].values.len()), ("foo", Op::In, 2));
    assert!(term(json!([req("foo", "Exists", &["bar", "baz"])])).is_none(), "values set must be empty for exists");
    let gt = term(json!([req("foo", "Gt", &["1"])])).unwrap();
    assert_eq!((gt.labels[0].op, gt.labels[0].bound), (Op::Gt, 1));
    let lt = term(json!([req("bar", "Lt", &["7"])])).unwrap();
    assert_eq!((lt.labels[0].op, lt.labels[0].bound), (Op::Lt, 7));
    // labels.NewRequirement also validates the key and every value.
    assert!(term(json!([req("invalid key", "In", &["v"])])).is_none());
    assert!(term(json!([req("example.com/k", "In", &["v"])])).is_some());
    assert!(term(json!([req("Example.com/k", "In", &["v"])])).is_none(), "prefix must be lowercase");
    assert!(term(json!([req("k", "In", &["-v"])])).is_none());
    assert!(term(json!([req("k", "Gt", &["-1"])])).is_none(), "-1 is not a label value");
    assert!(term(json!([req("k", "In", &[""])])).is_some(), "the empty value is valid");
}

// ---- ImageLocality ---------------------------------------------------------------------------------

fn image_pod(containers: &[&str], init: &[&str]) -> Value {
    let c = |images: &[&str]| images.iter().map(|i| json!({"name": "c", "image": i})).collect::<Vec<_>>();
    pod_spec(json!({"containers": c(containers), "initContainers": c(init)}))
}

/// TestImageLocalityPriority.
#[test]
fn image_locality_score() {
    let node403002000 = |n: &str| {
        with_images(n, &[
            (&["gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"], 40 * MB),
            (&["gcr.io/300:latest", "gcr.io/300:v1"], 300 * MB),
            (&["gcr.io/2000:latest"], 2000 * MB),
        ])
    };
    let node25010 = |n: &str| with_images(n, &[(&["gcr.io/250:latest"], 250 * MB), (&["gcr.io/10:latest", "gcr.io/10:v1"], 10 * MB)]);
    let node60040900 = |n: &str| {
        with_images(n, &[(&["gcr.io/600:latest"], 600 * MB), (&["gcr.io/40:latest"], 40 * MB), (&["gcr.io/900:latest"], 900 * MB)])
    };
    let node300600900 = |n: &str| {
        with_images(n, &[(&["gcr.io/300:latest"], 300 * MB), (&["gcr.io/600:latest"], 600 * MB), (&["gcr.io/900:latest"], 900 * MB)])
    };
    let node400030 = |n: &str| with_images(n, &[(&["gcr.io/4000:latest"], 4000 * MB), (&["gcr.io/30:latest"], 30 * MB)]);
    let node203040 = |n: &str| {
        with_images(n, &[(&["gcr.io/20:latest"], 20 * MB), (&["gcr.io/30:latest"], 30 * MB), (&["gcr.io/40:latest"], 40 * MB)])
    };
    let cases: Vec<ScoreCase> = vec![
        // node2: 100 * (250M/2 - 23M) / (1000M * 2 - 23M) = 5.
        ("two images spread on two nodes, prefer the larger image one", image_pod(&["gcr.io/40", "gcr.io/250"], &[]),
            vec![node403002000("node1"), node25010("node2")], vec![("node1", 0), ("node2", 5)]),
        ("two images on one node, prefer this node", image_pod(&["gcr.io/40", "gcr.io/300"], &[]),
            vec![node403002000("node1"), node25010("node2")], vec![("node1", 7), ("node2", 0)]),
        ("if exceed limit, use limit", image_pod(&["gcr.io/10", "gcr.io/4000"], &[]),
            vec![node400030("node1"), node25010("node2")], vec![("node1", 100), ("node2", 0)]),
        ("if exceed limit, use limit (with node which has no images present)", image_pod(&["gcr.io/10", "gcr.io/4000"], &[]),
            vec![node400030("node1"), node25010("node2"), bare("node3", &[])], vec![("node1", 66), ("node2", 0), ("node3", 0)]),
        ("pod with multiple large images, node2 is preferred", image_pod(&["gcr.io/300", "gcr.io/600", "gcr.io/900"], &[]),
            vec![node60040900("node1"), node300600900("node2"), bare("node3", &[])],
            vec![("node1", 32), ("node2", 36), ("node3", 0)]),
        ("pod with multiple small images", image_pod(&["gcr.io/30", "gcr.io/40"], &[]),
            vec![node203040("node1"), node400030("node2")], vec![("node1", 1), ("node2", 0)]),
        ("include InitContainers: two images spread on two nodes, prefer the larger image one",
            image_pod(&["gcr.io/30"], &["gcr.io/300"]),
            vec![node403002000("node1"), node203040("node2")], vec![("node1", 6), ("node2", 0)]),
    ];
    for (name, pod, nodes, want) in cases {
        assert_eq!(scores("ImageLocality", &nodes, &pod), named(&want), "{name}");
    }
}

/// TestNormalizedImageName.
#[test]
fn normalized_image_names() {
    let digest = "sha256:4813494d137e1631bba301d5acab6e7bb7aa74ce1185d456565ef51d737677b2";
    let root_digest = format!("root@{digest}");
    let cases: Vec<(&str, &str, String)> = vec![
        ("add :latest postfix 1", "root", "root:latest".into()),
        ("add :latest postfix 2", "gcr.io:5000/root", "gcr.io:5000/root:latest".into()),
        ("keep it as is 1", "root:tag", "root:tag".into()),
        ("keep it as is 2", &root_digest, root_digest.clone()),
    ];
    for (name, input, want) in cases {
        assert_eq!(normalized_image_name(input), want, "{name}");
    }
}
