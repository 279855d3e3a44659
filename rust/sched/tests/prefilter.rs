//! The cycle's search as upstream's findNodesThatFitPod / findNodesThatPassFilters shape it:
//! one feasible node without Score plugins, NodeAffinity's PreFilterResult (`metadata.name In`
//! terms: only those nodes are filtered, the others have the status "node(s) didn't satisfy
//! plugin(s) [NodeAffinity]"), the rotating start index after such cycles, native PreFilter
//! rejections (NodeAffinity's conflicting terms, InterPodAffinity's terms whose selectors do not
//! convert) and InterPodAffinity's PreScore error.

mod common;

use common::*;
use kubecore_sched::cycle::ERR_PRE_FILTER_NODE_AFFINITY;
use kubecore_sched::query::ERR_NODE_AFFINITY_CONFLICT;
use kubecore_sched::{Error, Profile, Snapshot};
use serde_json::{json, Value};

fn nodes(n: usize) -> Vec<Value> {
    (1..=n).map(|i| node(&format!("node{i}"), "4", "8Gi", 110)).collect()
}

fn fit_only() -> Profile {
    profile(|c| {
        c.filters = vec!["NodeResourcesFit".into()];
        c.scores.clear();
    })
}

/// `p` with required node affinity terms, each a list of matchFields requirements
/// `metadata.name In (names)`.
fn pinned(mut p: Value, terms: &[&[&[&str]]]) -> Value {
    let terms: Vec<Value> = terms
        .iter()
        .map(|reqs| {
            let fields: Vec<Value> =
                reqs.iter().map(|names| json!({"key": "metadata.name", "operator": "In", "values": names})).collect();
            json!({"matchFields": fields})
        })
        .collect();
    p["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}});
    p
}

fn reasons(r: &kubecore_sched::ScheduleResult) -> Vec<(&str, usize)> {
    r.reasons.iter().map(|(t, n)| (t.as_str(), *n)).collect()
}

/// Upstream "test without score plugin no extra nodes are evaluated": one node is filtered per
/// cycle and the next cycle starts after it, through `schedule` and `schedule_batch` alike.
#[test]
fn without_score_plugins_one_node_is_evaluated() {
    let mut s = snapshot(&nodes(3));
    for i in 0..3 {
        let r = s.schedule(&fit_only(), &bytes(&pod(&format!("p{i}"), "100m", "100Mi")), true).unwrap();
        assert_eq!((r.evaluated, r.feasible.len()), (1, 1));
        assert_eq!(r.node_name(), Some(format!("node{}", i + 1).as_str()));
    }
    let mut s = snapshot(&nodes(3));
    let pods: Vec<(String, Vec<u8>)> =
        (0..3).map(|i| (format!("default/p{i}"), bytes(&pod(&format!("p{i}"), "100m", "100Mi")))).collect();
    let batch: Vec<(&str, &[u8])> = pods.iter().map(|(k, b)| (k.as_str(), b.as_slice())).collect();
    let out = s.schedule_batch(&fit_only(), &batch).unwrap();
    let placed: Vec<(&str, usize)> = out.iter().map(|r| (r.node_name().unwrap(), r.evaluated)).collect();
    assert_eq!(placed, vec![("node1", 1), ("node2", 1), ("node3", 1)]);
    // Without selection the caller scores (Python Score plugins): numFeasibleNodesToFind.
    let r = s.schedule(&fit_only(), &bytes(&pod("q", "100m", "100Mi")), false).unwrap();
    assert_eq!((r.evaluated, r.feasible.len()), (3, 3));
    // A failing node before the first fit counts as processed, and the search stops at the fit.
    let mut s = snapshot(&[node("small", "100m", "8Gi", 110), node("big1", "4", "8Gi", 110), node("big2", "4", "8Gi", 110)]);
    let r = s.schedule(&fit_only(), &bytes(&pod("p", "1", "100Mi")), true).unwrap();
    assert_eq!((r.node_name(), r.evaluated, reasons(&r)), (Some("big1"), 2, vec![("Insufficient cpu", 1)]));
    let r = s.schedule(&fit_only(), &bytes(&pod("p", "1", "100Mi")), true).unwrap();
    assert_eq!((r.node_name(), r.evaluated), (Some("big2"), 1), "starts after the two processed");
}

/// Without any filter either, the first node in visiting order is taken and the start moves on.
#[test]
fn without_filters_and_scores_the_start_moves_on() {
    let bare = profile(|c| {
        c.filters.clear();
        c.scores.clear();
    });
    let mut s = snapshot(&nodes(3));
    let got: Vec<(String, usize)> = (0..4)
        .map(|_| {
            let r = s.schedule(&bare, &bytes(&pod("p", "100m", "100Mi")), true).unwrap();
            (r.node_name().unwrap().to_string(), r.evaluated)
        })
        .collect();
    let want: Vec<(String, usize)> = ["node1", "node2", "node3", "node1"].iter().map(|n| (n.to_string(), 1)).collect();
    assert_eq!(got, want);
}

/// A DaemonSet-style pod (`metadata.name In [node-x]`) is filtered on node-x only; the other
/// nodes carry NodeAffinity's PreFilter status, not among the evaluated ones; the start index
/// moves by the nodes processed.
#[test]
fn node_name_terms_narrow_the_search() {
    let mut s = snapshot(&nodes(5));
    let ds = pinned(pod("ds", "100m", "100Mi"), &[&[&["node4"]]]);
    let r = s.schedule(&default_profile(), &bytes(&ds), true).unwrap();
    assert_eq!((r.node_name(), r.evaluated), (Some("node4"), 1));
    assert_eq!(reasons(&r), vec![(ERR_PRE_FILTER_NODE_AFFINITY, 4)]);
    assert_eq!(r.unresolvable, 0, "the left-out nodes are not among the evaluated ones");
    // nextStartNodeIndex moved by one (of all five nodes): a plain pod without scores starts at node2.
    let r = s.schedule(&fit_only(), &bytes(&pod("p", "100m", "100Mi")), true).unwrap();
    assert_eq!(r.node_name(), Some("node2"));

    // The named node does not fit: its reason, plus the others' PreFilter status.
    let big = pinned(pod("big", "8", "100Mi"), &[&[&["node2"]]]);
    let r = s.schedule(&default_profile(), &bytes(&big), true).unwrap();
    assert_eq!((r.node_name(), r.evaluated), (None, 1));
    assert_eq!(reasons(&r), vec![("Insufficient cpu", 1), (ERR_PRE_FILTER_NODE_AFFINITY, 4)]);
    assert_eq!(r.unresolvable, 1, "the request exceeds node2's allocatable");

    // Terms are ORed (names united), requirements in a term ANDed (names intersected); unknown
    // names are dropped. (A field requirement takes one value: Filter rejects others.)
    let two = pinned(pod("two", "100m", "100Mi"), &[&[&["node3"], &["node3"]], &[&["node5"]], &[&["gone"]]]);
    let r = s.schedule(&default_profile(), &bytes(&two), false).unwrap();
    let mut feasible: Vec<&str> = r.feasible_names().collect();
    feasible.sort();
    assert_eq!((feasible, r.evaluated), (vec!["node3", "node5"], 2));
    assert_eq!(reasons(&r), vec![(ERR_PRE_FILTER_NODE_AFFINITY, 3)]);

    // A term without a metadata.name requirement allows every node: no narrowing.
    let mut open = pinned(pod("open", "100m", "100Mi"), &[&[&["node1"]]]);
    open["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        .as_array_mut()
        .unwrap()
        .push(json!({"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["node2"]}]}));
    let r = s.schedule(&default_profile(), &bytes(&open), false).unwrap();
    let mut feasible: Vec<&str> = r.feasible_names().collect();
    feasible.sort();
    assert_eq!((feasible, r.evaluated), (vec!["node1", "node2"], 5));
    assert_eq!(reasons(&r), vec![("node(s) didn't match Pod's node affinity/selector", 3)]);

    // Without the NodeAffinity filter there is no PreFilterResult either.
    let r = s.schedule(&fit_only(), &bytes(&ds), false).unwrap();
    assert_eq!(r.feasible.len(), 5);
}

/// Narrowing with several named nodes rotates through them: the start index modulo their count.
#[test]
fn narrowed_nodes_rotate() {
    let mut s = snapshot(&nodes(4));
    let p = pinned(pod("p", "100m", "100Mi"), &[&[&["node2"]], &[&["node3"]]]);
    let mut got = Vec::new();
    for _ in 0..3 {
        let r = s.schedule(&fit_only_with_affinity(), &bytes(&p), true).unwrap();
        got.push(r.node_name().unwrap().to_string());
    }
    // Start 0 -> node2 (processed 1), start 1 -> node3, start 2 % 2 = 0 -> node2.
    assert_eq!(got, vec!["node2", "node3", "node2"]);
}

fn fit_only_with_affinity() -> Profile {
    profile(|c| {
        c.filters = vec!["NodeAffinity".into(), "NodeResourcesFit".into()];
        c.scores.clear();
    })
}

/// Only unknown nodes named: every node has NodeAffinity's PreFilter status; conflicting
/// terms: NodeAffinity's PreFilter fails ("pod affinity terms conflict") on every node.
#[test]
fn node_name_terms_that_allow_nothing() {
    let mut s = snapshot(&nodes(3));
    let gone = pinned(pod("gone", "100m", "100Mi"), &[&[&["node9"]]]);
    let r = s.schedule(&default_profile(), &bytes(&gone), true).unwrap();
    assert_eq!((r.node_name(), r.evaluated, r.unresolvable), (None, 3, 3));
    assert_eq!(reasons(&r), vec![(ERR_PRE_FILTER_NODE_AFFINITY, 3)]);
    assert_eq!(r.rejected, None, "no PreFilter failed: the nodes are absent from the result");
    let conflict = pinned(pod("c", "100m", "100Mi"), &[&[&["node1"], &["node2"]]]);
    let r = s.schedule(&default_profile(), &bytes(&conflict), true).unwrap();
    assert_eq!((r.node_name(), r.unresolvable), (None, 3));
    assert_eq!(reasons(&r), vec![(ERR_NODE_AFFINITY_CONFLICT, 3)]);
    assert_eq!(r.rejected.as_deref(), Some(ERR_NODE_AFFINITY_CONFLICT), "upstream's PreFilterMsg");
    assert_eq!(s.filter_node(&default_profile(), &bytes(&conflict), "node1", &[]).unwrap(), vec![ERR_NODE_AFFINITY_CONFLICT]);
    // A plain pod still starts at node1: neither cycle moved the start.
    let r = s.schedule(&fit_only(), &bytes(&pod("p", "100m", "100Mi")), true).unwrap();
    assert_eq!(r.node_name(), Some("node1"));
}

fn with_pod_affinity(mut p: Value, kind: &str, field: &str, term: Value) -> Value {
    p["spec"]["affinity"] = json!({kind: {field: [term]}});
    p
}

fn selector_term(exprs: Value) -> Value {
    json!({"labelSelector": {"matchExpressions": exprs}, "topologyKey": "kubernetes.io/hostname"})
}

/// The exact messages of InterPodAffinity's PreFilter for selectors that do not convert.
#[test]
fn invalid_selectors_fail_pre_filter_with_upstreams_message() {
    let s = snapshot(&nodes(2));
    let prof = default_profile();
    let check = |term: Value, want: &str| {
        let p = with_pod_affinity(pod("p", "100m", "100Mi"), "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution", term);
        assert_eq!(s.filter_node(&prof, &bytes(&p), "node1", &[]).unwrap(), vec![want.to_string()]);
    };
    let value_msg = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', \
                     and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', \
                     regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
    check(
        selector_term(json!([{"key": "app", "operator": "In", "values": ["ok", "a b"]}])),
        &format!("parsing pod: requiredAntiAffinityTerms: values[1][app]: Invalid value: \"a b\": {value_msg}"),
    );
    check(
        selector_term(json!([{"key": "app", "operator": "In", "values": ["-x", "y-"]}])),
        &format!(
            "parsing pod: requiredAntiAffinityTerms: [values[0][app]: Invalid value: \"-x\": {value_msg}, \
             values[1][app]: Invalid value: \"y-\": {value_msg}]"
        ),
    );
    check(
        selector_term(json!([{"key": "app", "operator": "Gt", "values": ["1"]}])),
        "parsing pod: requiredAntiAffinityTerms: \"Gt\" is not a valid label selector operator",
    );
    check(
        selector_term(json!([{"key": "app", "operator": "In"}])),
        "parsing pod: requiredAntiAffinityTerms: values: Invalid value: []string(nil): for 'in', 'notin' operators, \
         values set can't be empty",
    );
    check(
        selector_term(json!([{"key": "app", "operator": "Exists", "values": ["a"]}])),
        "parsing pod: requiredAntiAffinityTerms: values: Invalid value: []string{\"a\"}: values set must be empty for \
         exists and does not exist",
    );
    check(
        json!({"labelSelector": {"matchLabels": {"bad key": "v"}}, "topologyKey": "zone"}),
        "parsing pod: requiredAntiAffinityTerms: key: Invalid value: \"bad key\": name part must consist of alphanumeric \
         characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or \
         'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
    );
    // A bad namespaceSelector counts too; a bad preferred term fails PreFilter as well (NewPodInfo
    // parses every kind), the kinds aggregated.
    let mut p = with_pod_affinity(
        pod("p", "100m", "100Mi"),
        "podAffinity",
        "requiredDuringSchedulingIgnoredDuringExecution",
        json!({"labelSelector": {}, "namespaceSelector": {"matchLabels": {"team": "$"}}, "topologyKey": "zone"}),
    );
    p["spec"]["affinity"]["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] =
        json!([{"weight": 0, "podAffinityTerm": selector_term(json!([{"key": "k", "operator": "Nope"}]))}]);
    let got = s.filter_node(&prof, &bytes(&p), "node1", &[]).unwrap();
    assert_eq!(
        got,
        vec![format!(
            "parsing pod: [requiredAffinityTerms: values[0][team]: Invalid value: \"$\": {value_msg}, \
             preferredAffinityTerms: \"Nope\" is not a valid label selector operator]"
        )]
    );
}

/// Through a cycle: every node fails with PreFilter's reason (UnschedulableAndUnresolvable), the
/// start index stays; without the InterPodAffinity filter nothing is checked at PreFilter.
#[test]
fn invalid_selectors_through_a_cycle() {
    let mut s = snapshot(&nodes(3));
    let bad = with_pod_affinity(
        pod("p", "100m", "100Mi"),
        "podAffinity",
        "requiredDuringSchedulingIgnoredDuringExecution",
        selector_term(json!([{"key": "app", "operator": "In", "values": ["{{.bad-value.}}"]}])),
    );
    let r = s.schedule(&default_profile(), &bytes(&bad), true).unwrap();
    assert_eq!((r.node_name(), r.evaluated, r.unresolvable, r.reasons.len()), (None, 3, 3, 1));
    assert!(r.reasons[0].0.starts_with("parsing pod: requiredAffinityTerms: values[0][app]: Invalid value: \"{{.bad-value.}}\""));
    let r = s.schedule(&fit_only(), &bytes(&bad), true).unwrap();
    assert_eq!(r.node_name(), Some("node1"), "the start did not move; no InterPodAffinity, no PreFilter failure");
    // A counted pod with a bad term: that kind of its terms is ignored (upstream's NodeInfo.AddPod).
    let anti = with_pod_affinity(
        pod("e", "100m", "100Mi"),
        "podAntiAffinity",
        "requiredDuringSchedulingIgnoredDuringExecution",
        json!({"labelSelector": {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["x", "!"]}]},
               "topologyKey": "kubernetes.io/hostname"}),
    );
    let mut s = snapshot(&nodes(1));
    s.add_pod_json("default/e", &bytes(&anti), "node1").unwrap();
    assert!(s.filter_node(&default_profile(), &bytes(&pod("q", "100m", "100Mi")), "node1", &[]).unwrap().is_empty());
}

/// InterPodAffinity's PreScore error ends the cycle (scoring needs two feasible nodes), unless
/// it skips first (ignorePreferredTermsOfExistingPods and no preferred terms).
#[test]
fn invalid_selectors_fail_pre_score() {
    let score_only = |ignore: bool| {
        profile(|c| {
            c.filters.clear();
            c.scores = vec![("InterPodAffinity".into(), 1)];
            c.interpod.ignore_preferred_terms_of_existing_pods = ignore;
        })
    };
    let bad_value = json!([{"key": "app", "operator": "In", "values": ["{{.bad-value.}}"]}]);
    let preferred = with_pod_affinity(
        pod("p", "100m", "100Mi"),
        "podAffinity",
        "preferredDuringSchedulingIgnoredDuringExecution",
        json!({"weight": 5, "podAffinityTerm": selector_term(bad_value.clone())}),
    );
    let mut s = snapshot(&nodes(2));
    match s.schedule(&score_only(false), &bytes(&preferred), true) {
        Err(Error::Plugin(m)) => assert!(
            m.starts_with("running PreScore plugin \"InterPodAffinity\": failed to parse pod: preferredAffinityTerms: values[0][app]"),
            "{m}"
        ),
        other => panic!("{other:?}"),
    }
    assert!(s.schedule(&score_only(true), &bytes(&preferred), true).is_err(), "it has preferred terms: no skip");
    let required =
        with_pod_affinity(pod("p", "100m", "100Mi"), "podAffinity", "requiredDuringSchedulingIgnoredDuringExecution", selector_term(bad_value));
    assert!(s.schedule(&score_only(false), &bytes(&required), true).is_err());
    assert!(s.schedule(&score_only(true), &bytes(&required), true).is_ok(), "PreScore skips first");
    // One node: no scoring, no error. In a batch the pod's result carries the error.
    let mut one = snapshot(&nodes(1));
    assert!(one.schedule(&score_only(false), &bytes(&preferred), true).is_ok());
    let b = bytes(&preferred);
    let out = s.schedule_batch(&score_only(false), &[("default/p", b.as_slice())]).unwrap();
    assert!(out[0].node.is_none() && out[0].error.is_some());
    let _: &Snapshot = &s;
}
