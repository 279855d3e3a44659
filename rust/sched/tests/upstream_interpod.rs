//! Upstream's InterPodAffinity unit-test tables, restated as data: kubernetes/kubernetes
//! pkg/scheduler/framework/plugins/interpodaffinity/filtering_test.go (TestRequiredAffinitySingleNode,
//! TestRequiredAffinityMultipleNodes, TestPreFilterStateAddRemovePod,
//! TestGetTPMapMatchingIncomingAffinityAntiAffinity) and scoring_test.go (TestPreferredAffinity,
//! TestPreferredAffinityWithHardPodAffinitySymmetricWeight). Each case carries upstream's name.
//!
//! Upstream's tests resolve `namespaceSelector`s against these Namespace objects; the kernels
//! read the result from the term's `resolvedNamespaces` (filled by the scheduler's
//! NamespaceResolver), so the cases below carry the lists that resolver would fill in:
//! subteam1.team1 and subteam2.team1 are labelled team=team1, subteam1.team2 and subteam2.team2
//! team=team2. Pods without a namespace are in "" as upstream's are.

use kubecore_sched::interpod::{self, Args};
use kubecore_sched::pod::ParsedPod;
use kubecore_sched::{Profile, ProfileConfig, Snapshot};
use serde_json::{json, Map, Value};

const AFF: &str = "podAffinity";
const ANTI: &str = "podAntiAffinity";
const ERR_AFFINITY: &str = "node(s) didn't match pod affinity rules";
const ERR_ANTI: &str = "node(s) didn't match pod anti-affinity rules";
const ERR_EXISTING: &str = "node(s) didn't satisfy existing pods anti-affinity rules";
const TEAM1: &[&str] = &["subteam1.team1", "subteam2.team1"];

// ---- objects -------------------------------------------------------------------------------

/// Existing pods as (node name, pod).
type Placed<'a> = Vec<(&'a str, Value)>;

/// (upstream's name, nodes, existing pods, incoming pod, normalized score per node).
type ScoreCase<'a> = (&'a str, Vec<Value>, Placed<'a>, Value, Vec<i64>);

fn labels(pairs: &[(&str, &str)]) -> Value {
    Value::Object(pairs.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<Map<_, _>>())
}

fn node(name: &str, l: &[(&str, &str)]) -> Value {
    json!({"metadata": {"name": name, "labels": labels(l)}, "spec": {},
           "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}})
}

/// A pod in namespace `ns` with labels `l` and no affinity.
fn pod(ns: &str, l: &[(&str, &str)]) -> Value {
    json!({"metadata": {"name": "p", "namespace": ns, "labels": labels(l)},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
}

fn req(key: &str, op: &str, values: &[&str]) -> Value {
    if values.is_empty() {
        json!({"key": key, "operator": op})
    } else {
        json!({"key": key, "operator": op, "values": values})
    }
}

/// A term whose labelSelector has the requirements `exprs`, ANDed.
fn term(exprs: Vec<Value>, topology_key: &str) -> Value {
    json!({"labelSelector": {"matchExpressions": exprs}, "topologyKey": topology_key})
}

fn t_in(key: &str, values: &[&str], topology_key: &str) -> Value {
    term(vec![req(key, "In", values)], topology_key)
}

fn t_not_in(key: &str, values: &[&str], topology_key: &str) -> Value {
    term(vec![req(key, "NotIn", values)], topology_key)
}

fn t_exists(key: &str, topology_key: &str) -> Value {
    term(vec![req(key, "Exists", &[])], topology_key)
}

/// The term with `namespaceSelector: team In (team)` and the namespaces it resolves to.
fn team_selector(mut t: Value, team: &str, resolved: &[&str]) -> Value {
    t["namespaceSelector"] = json!({"matchExpressions": [req("team", "In", &[team])]});
    t["resolvedNamespaces"] = json!(resolved);
    t
}

fn section<'a>(p: &'a mut Value, kind: &str, field: &str) -> &'a mut Vec<Value> {
    let spec = p["spec"].as_object_mut().unwrap();
    let aff = spec.entry("affinity").or_insert_with(|| json!({}));
    let list = aff.as_object_mut().unwrap().entry(kind).or_insert_with(|| json!({}));
    list.as_object_mut().unwrap().entry(field).or_insert_with(|| json!([])).as_array_mut().unwrap()
}

/// `p` with `terms` appended to its required terms of `kind`.
fn required(mut p: Value, kind: &str, terms: Vec<Value>) -> Value {
    section(&mut p, kind, "requiredDuringSchedulingIgnoredDuringExecution").extend(terms);
    p
}

/// `p` with (weight, term) appended to its preferred terms of `kind`.
fn preferred(mut p: Value, kind: &str, terms: Vec<(i64, Value)>) -> Value {
    let list = section(&mut p, kind, "preferredDuringSchedulingIgnoredDuringExecution");
    list.extend(terms.into_iter().map(|(w, t)| json!({"weight": w, "podAffinityTerm": t})));
    p
}

fn bytes(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap()
}

/// The nodes, and the existing pods as (node, pod) counted on them.
fn snapshot(nodes: &[Value], pods: &[(&str, Value)]) -> Snapshot {
    let mut s = Snapshot::new(7);
    for n in nodes {
        s.set_node_json(&bytes(n)).unwrap();
    }
    for (i, (on, p)) in pods.iter().enumerate() {
        let key = format!("{}/existing-{i}", p["metadata"]["namespace"].as_str().unwrap_or_default());
        s.add_pod_json(&key, &bytes(p), on).unwrap();
    }
    s
}

fn names(nodes: &[Value]) -> Vec<String> {
    nodes.iter().map(|n| n["metadata"]["name"].as_str().unwrap().to_string()).collect()
}

fn profile(f: impl FnOnce(&mut ProfileConfig)) -> Profile {
    let mut c = ProfileConfig::default();
    f(&mut c);
    Profile::new(c).unwrap()
}

fn filter_only() -> Profile {
    profile(|c| {
        c.filters = vec!["InterPodAffinity".into()];
        c.scores.clear();
    })
}

fn score_only() -> Profile {
    profile(|c| {
        c.filters.clear();
        c.scores = vec![("InterPodAffinity".into(), 1)];
    })
}

// ---- filter --------------------------------------------------------------------------------

/// What upstream's PreFilter + Filter answer per node.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Want {
    /// PreFilter returns Skip: the plugin passes every node.
    Skip,
    /// Filter's status per node, in the order of the nodes (None: success).
    Each(&'static [Option<&'static str>]),
}

fn check_filter(name: &str, nodes: &[Value], pods: &[(&str, Value)], incoming: &Value, want: Want) {
    let mut s = snapshot(nodes, pods);
    let parsed = ParsedPod::from_json(&bytes(incoming)).unwrap();
    let skipped = interpod::Filter::new(&s, &parsed).is_none();
    assert_eq!(skipped, want == Want::Skip, "{name}: PreFilter Skip");
    let prof = filter_only();
    let expected: Vec<Option<&str>> = match want {
        Want::Skip => vec![None; nodes.len()],
        Want::Each(e) => e.to_vec(),
    };
    assert_eq!(expected.len(), nodes.len(), "{name}: table");
    for (n, want) in names(nodes).iter().zip(&expected) {
        let got = s.filter_node(&prof, &bytes(incoming), n, &[]).unwrap();
        let want: Vec<String> = want.iter().map(|r| r.to_string()).collect();
        assert_eq!(got, want, "{name}: node {n}");
    }
    // The same through a whole cycle: feasible nodes, reasons and which are unresolvable.
    let r = s.schedule(&prof, &bytes(incoming), false).unwrap();
    let mut feasible: Vec<String> = r.feasible_names().map(str::to_string).collect();
    feasible.sort();
    let mut want_feasible: Vec<String> =
        names(nodes).into_iter().zip(&expected).filter(|(_, w)| w.is_none()).map(|(n, _)| n).collect();
    want_feasible.sort();
    assert_eq!(feasible, want_feasible, "{name}: feasible");
    let unresolvable = expected.iter().filter(|w| **w == Some(ERR_AFFINITY)).count();
    assert_eq!(r.unresolvable, unresolvable, "{name}: UnschedulableAndUnresolvable nodes");
}

#[test]
fn required_affinity_single_node() {
    let service = [("service", "securityscan")];
    let security = [("security", "S1")];
    let nodes = [node("node1", &[("region", "r1"), ("zone", "z11")])];
    let existing = || vec![("node1", pod("", &service))];
    let sec_in = || t_in("service", &["securityscan", "value2"], "region");
    let cases: Vec<(&str, Value, Placed, Want)> = vec![
        (
            "A pod that has no required pod affinity scheduling rules can schedule onto a node with no existing pods",
            json!({"metadata": {}, "spec": {}}),
            vec![],
            Want::Skip,
        ),
        (
            "satisfies with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using In operator that matches the existing pod",
            required(pod("", &security), AFF, vec![sec_in()]),
            existing(),
            Want::Each(&[None]),
        ),
        (
            "satisfies the pod with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using not in operator in labelSelector that matches the existing pod",
            required(pod("", &security), AFF, vec![t_not_in("service", &["securityscan3", "value3"], "region")]),
            existing(),
            Want::Each(&[None]),
        ),
        (
            "Does not satisfy the PodAffinity with labelSelector because of diff Namespace",
            required(pod("", &security), AFF, vec![{
                let mut t = t_in("service", &["securityscan", "value2"], "");
                t.as_object_mut().unwrap().remove("topologyKey");
                t["namespaces"] = json!(["DiffNameSpace"]);
                t
            }]),
            vec![("node1", pod("ns", &service))],
            Want::Each(&[Some(ERR_AFFINITY)]),
        ),
        (
            "Doesn't satisfy the PodAffinity because of unmatching labelSelector with the existing pod",
            required(pod("", &service), AFF, vec![t_in("service", &["antivirusscan", "value2"], "")]),
            existing(),
            Want::Each(&[Some(ERR_AFFINITY)]),
        ),
        (
            "satisfies the PodAffinity with different label Operators in multiple RequiredDuringSchedulingIgnoredDuringExecution ",
            required(pod("", &security), AFF, vec![
                term(vec![req("service", "Exists", &[]), req("wrongkey", "DoesNotExist", &[])], "region"),
                term(vec![req("service", "In", &["securityscan"]), req("service", "NotIn", &["WrongValue"])], "region"),
            ]),
            existing(),
            Want::Each(&[None]),
        ),
        (
            "The labelSelector requirements(items of matchExpressions) are ANDed, the pod cannot schedule onto the node because one of the matchExpression item don't match.",
            required(pod("", &security), AFF, vec![
                term(vec![req("service", "Exists", &[]), req("wrongkey", "DoesNotExist", &[])], "region"),
                term(vec![req("service", "In", &["securityscan2"]), req("service", "NotIn", &["WrongValue"])], "region"),
            ]),
            existing(),
            Want::Each(&[Some(ERR_AFFINITY)]),
        ),
        (
            "satisfies the PodAffinity and PodAntiAffinity with the existing pod",
            required(
                required(pod("", &security), AFF, vec![sec_in()]),
                ANTI,
                vec![t_in("service", &["antivirusscan", "value2"], "node")],
            ),
            existing(),
            Want::Each(&[None]),
        ),
        (
            "satisfies the PodAffinity and PodAntiAffinity and PodAntiAffinity symmetry with the existing pod",
            required(
                required(pod("", &security), AFF, vec![sec_in()]),
                ANTI,
                vec![t_in("service", &["antivirusscan", "value2"], "node")],
            ),
            vec![("node1", required(pod("", &service), ANTI, vec![t_in("service", &["antivirusscan", "value2"], "node")]))],
            Want::Each(&[None]),
        ),
        (
            "satisfies the PodAffinity but doesn't satisfy the PodAntiAffinity with the existing pod",
            required(
                required(pod("", &security), AFF, vec![sec_in()]),
                ANTI,
                vec![t_in("service", &["securityscan", "value2"], "zone")],
            ),
            existing(),
            Want::Each(&[Some(ERR_ANTI)]),
        ),
        (
            "satisfies the PodAffinity and PodAntiAffinity but doesn't satisfy PodAntiAffinity symmetry with the existing pod",
            required(
                required(pod("", &service), AFF, vec![sec_in()]),
                ANTI,
                vec![t_in("service", &["antivirusscan", "value2"], "node")],
            ),
            vec![("node1", required(pod("", &service), ANTI, vec![t_in("service", &["securityscan", "value2"], "zone")]))],
            Want::Each(&[Some(ERR_EXISTING)]),
        ),
        (
            "pod matches its own Label in PodAffinity and that matches the existing pod Labels",
            required(pod("", &service), AFF, vec![t_not_in("service", &["securityscan", "value2"], "region")]),
            vec![("node2", pod("", &service))],
            Want::Each(&[Some(ERR_AFFINITY)]),
        ),
        (
            "verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity constraints. doesn't satisfy PodAntiAffinity symmetry with the existing pod",
            pod("", &service),
            vec![("node1", required(pod("", &service), ANTI, vec![t_in("service", &["securityscan", "value2"], "zone")]))],
            Want::Each(&[Some(ERR_EXISTING)]),
        ),
        (
            "verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity constraints. satisfy PodAntiAffinity symmetry with the existing pod",
            pod("", &service),
            vec![("node1", required(pod("", &service), ANTI, vec![t_not_in("service", &["securityscan", "value2"], "zone")]))],
            Want::Skip,
        ),
        (
            "satisfies the PodAntiAffinity with existing pod but doesn't satisfy PodAntiAffinity symmetry with incoming pod",
            required(pod("", &service), ANTI, vec![t_exists("service", "region"), t_exists("security", "region")]),
            vec![("node1", required(pod("", &security), ANTI, vec![t_exists("security", "zone")]))],
            Want::Each(&[Some(ERR_ANTI)]),
        ),
        (
            "PodAntiAffinity symmetry check a1: incoming pod and existing pod partially match each other on AffinityTerms",
            required(pod("", &service), ANTI, vec![t_exists("service", "zone"), t_exists("security", "zone")]),
            vec![("node1", required(pod("", &security), ANTI, vec![t_exists("security", "zone")]))],
            Want::Each(&[Some(ERR_ANTI)]),
        ),
        (
            "PodAntiAffinity symmetry check a2: incoming pod and existing pod partially match each other on AffinityTerms",
            required(pod("", &security), ANTI, vec![t_exists("security", "zone")]),
            vec![("node1", required(pod("", &service), ANTI, vec![t_exists("service", "zone"), t_exists("security", "zone")]))],
            Want::Each(&[Some(ERR_EXISTING)]),
        ),
        (
            "PodAntiAffinity symmetry check b1: incoming pod and existing pod partially match each other on AffinityTerms",
            required(pod("", &[("abc", ""), ("xyz", "")]), ANTI, vec![t_exists("abc", "zone"), t_exists("def", "zone")]),
            vec![("node1", required(pod("", &[("def", ""), ("xyz", "")]), ANTI, vec![t_exists("abc", "zone"), t_exists("def", "zone")]))],
            Want::Each(&[Some(ERR_ANTI)]),
        ),
        (
            "PodAntiAffinity symmetry check b2: incoming pod and existing pod partially match each other on AffinityTerms",
            required(pod("", &[("def", ""), ("xyz", "")]), ANTI, vec![t_exists("abc", "zone"), t_exists("def", "zone")]),
            vec![("node1", required(pod("", &[("abc", ""), ("xyz", "")]), ANTI, vec![t_exists("abc", "zone"), t_exists("def", "zone")]))],
            Want::Each(&[Some(ERR_ANTI)]),
        ),
        (
            "affinity with NamespaceSelector",
            required(pod("", &security), AFF, vec![team_selector(sec_in(), "team1", TEAM1)]),
            vec![("node1", pod("subteam1.team1", &service))],
            Want::Each(&[None]),
        ),
        (
            "affinity with non-matching NamespaceSelector",
            required(pod("", &security), AFF, vec![team_selector(sec_in(), "team1", TEAM1)]),
            vec![("node1", pod("subteam1.team2", &service))],
            Want::Each(&[Some(ERR_AFFINITY)]),
        ),
        (
            "anti-affinity with matching NamespaceSelector",
            required(pod("subteam1.team1", &security), ANTI, vec![team_selector(
                t_in("service", &["securityscan", "value2"], "zone"),
                "team1",
                TEAM1,
            )]),
            vec![("node1", pod("subteam2.team1", &service))],
            Want::Each(&[Some(ERR_ANTI)]),
        ),
        (
            "anti-affinity with matching all NamespaceSelector",
            required(pod("subteam1.team1", &security), ANTI, vec![{
                let mut t = t_in("service", &["securityscan", "value2"], "zone");
                t["namespaceSelector"] = json!({});
                t
            }]),
            vec![("node1", pod("subteam2.team1", &service))],
            Want::Each(&[Some(ERR_ANTI)]),
        ),
        (
            "anti-affinity with non-matching NamespaceSelector",
            required(pod("subteam1.team1", &security), ANTI, vec![team_selector(
                t_in("service", &["securityscan", "value2"], "zone"),
                "team1",
                TEAM1,
            )]),
            vec![("node1", pod("subteam1.team2", &service))],
            Want::Each(&[None]),
        ),
    ];
    for (name, incoming, pods, want) in &cases {
        check_filter(name, &nodes, pods, incoming, *want);
    }
}

/// Upstream: "PodAffinity fails PreFilter with an invalid affinity label syntax" and "PodAntiAffinity
/// fails PreFilter with an invalid antiaffinity label syntax": PreFilter answers
/// UnschedulableAndUnresolvable `parsing pod: requiredAffinityTerms: values[0][service]: Invalid
/// value: "{{.bad-value.}}": ...` for every node.
#[test]
fn required_affinity_invalid_label_syntax() {
    let nodes = [node("node1", &[("region", "r1"), ("zone", "z11")])];
    let service = [("service", "securityscan")];
    let bad_affinity = required(pod("", &service), AFF, vec![
        t_in("service", &["{{.bad-value.}}"], "region"),
        t_in("service", &["antivirusscan", "value2"], "node"),
    ]);
    let bad_anti = required(pod("", &service), AFF, vec![
        t_in("service", &["foo"], "region"),
        t_in("service", &["{{.bad-value.}}"], "node"),
    ]);
    let s = snapshot(&nodes, &[]);
    for bad in [bad_affinity, bad_anti] {
        let got = s.filter_node(&filter_only(), &bytes(&bad), "node1", &[]).unwrap();
        assert!(got.len() == 1 && got[0].starts_with("parsing pod: requiredAffinityTerms: values[0][service]: Invalid value"));
    }
}

#[test]
fn required_affinity_multiple_nodes() {
    let china = [("region", "China")];
    let china_az1 = [("region", "China"), ("az", "az1")];
    let india = [("region", "India")];
    let rz = |name: &str, region: &str, zone: &str| node(name, &[("region", region), ("zone", zone), ("hostname", name)]);
    let ab_zones = || vec![rz("nodeA", "r1", "z1"), rz("nodeB", "r1", "z2")];
    let ab_same = || vec![rz("nodeA", "r1", "z1"), rz("nodeB", "r1", "z1")];
    let foo_bar = [("foo", "bar")];
    let foo_bar_service = [("foo", "bar"), ("service", "securityscan")];
    let foo_and_bar = [("foo", ""), ("bar", "")];
    let cases: Vec<(&str, Vec<Value>, Placed, Value, Want)> = vec![
        (
            "A pod can be scheduled onto all the nodes that have the same topology key & label value with one of them has an existing pod that matches the affinity rules",
            vec![node("node1", &china), node("node2", &china_az1), node("node3", &india)],
            vec![("node1", pod("", &foo_bar))],
            required(pod("", &[]), AFF, vec![t_in("foo", &["bar"], "region")]),
            Want::Each(&[None, None, Some(ERR_AFFINITY)]),
        ),
        (
            "The affinity rule is to schedule all of the pods of this collection to the same zone. The first pod of the collection should not be blocked from being scheduled onto any node, even there's no existing pod that matches the rule anywhere.",
            vec![node("nodeA", &[("zone", "az1"), ("hostname", "h1")]), node("nodeB", &[("zone", "az2"), ("hostname", "h2")])],
            vec![("nodeA", pod("", &foo_bar))],
            required(pod("", &foo_bar_service), AFF, vec![t_in("foo", &["bar"], "zone"), t_in("service", &["securityscan"], "zone")]),
            Want::Each(&[None, None]),
        ),
        (
            "The first pod of the collection can only be scheduled on nodes labelled with the requested topology keys",
            vec![node("nodeA", &[("zoneLabel", "az1"), ("hostname", "h1")]), node("nodeB", &[("zoneLabel", "az2"), ("hostname", "h2")])],
            vec![("nodeA", pod("", &foo_bar))],
            required(pod("", &foo_bar_service), AFF, vec![t_in("foo", &["bar"], "zone"), t_in("service", &["securityscan"], "zone")]),
            Want::Each(&[Some(ERR_AFFINITY), Some(ERR_AFFINITY)]),
        ),
        (
            "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod affinity rule. The pod can not be scheduled onto nodeA and nodeB.",
            vec![node("nodeA", &[("region", "r1"), ("hostname", "nodeA")]), node("nodeB", &[("region", "r1"), ("hostname", "nodeB")])],
            vec![("nodeA", pod("", &[("foo", "abc")]))],
            required(pod("", &[]), ANTI, vec![t_in("foo", &["abc"], "region")]),
            Want::Each(&[Some(ERR_ANTI), Some(ERR_ANTI)]),
        ),
        (
            "This test ensures that anti-affinity matches a pod when any term of the anti-affinity rule matches a pod.",
            ab_zones(),
            vec![("nodeA", pod("", &[("foo", "abc"), ("service", "securityscan")]))],
            required(pod("", &[]), ANTI, vec![t_in("foo", &["abc"], "region"), t_in("service", &["securityscan"], "zone")]),
            Want::Each(&[Some(ERR_ANTI), Some(ERR_ANTI)]),
        ),
        (
            "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod affinity rule. The pod can not be scheduled onto nodeA and nodeB but can be scheduled onto nodeC",
            vec![node("nodeA", &china), node("nodeB", &china_az1), node("nodeC", &india)],
            vec![("nodeA", pod("", &[("foo", "abc")]))],
            required(pod("", &[]), ANTI, vec![t_in("foo", &["abc"], "region")]),
            Want::Each(&[Some(ERR_ANTI), Some(ERR_ANTI), None]),
        ),
        (
            "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod affinity rule. The pod can not be scheduled onto nodeA, nodeB, but can be scheduled onto nodeC (NodeC has an existing pod that match the inter pod affinity rule but in different namespace)",
            vec![node("nodeA", &china), node("nodeB", &china_az1), node("nodeC", &india)],
            vec![
                ("nodeA", pod("NS1", &foo_bar)),
                ("nodeC", required(pod("NS2", &[]), ANTI, vec![t_in("foo", &["123"], "region")])),
            ],
            required(pod("NS1", &[("foo", "123")]), ANTI, vec![t_in("foo", &["bar"], "region")]),
            Want::Each(&[Some(ERR_ANTI), Some(ERR_ANTI), None]),
        ),
        (
            "Test existing pod's anti-affinity: if an existing pod has a term with invalid topologyKey, labelSelector of the term is firstly checked, and then topologyKey of the term is also checked",
            ab_same(),
            vec![("nodeA", required(pod("", &[]), ANTI, vec![t_exists("foo", "invalid-node-label")]))],
            pod("", &[("foo", "")]),
            Want::Skip,
        ),
        (
            "Test incoming pod's anti-affinity: even if labelSelector matches, we still check if topologyKey matches",
            ab_same(),
            vec![("nodeA", pod("", &[("foo", "")]))],
            {
                let mut p = required(pod("", &[]), ANTI, vec![t_exists("foo", "invalid-node-label")]);
                p["spec"]["nodeName"] = json!("nodeA");
                p
            },
            Want::Each(&[None, None]),
        ),
        (
            "Test existing pod's anti-affinity: incoming pod wouldn't considered as a fit as it violates each existingPod's terms on all nodes",
            ab_zones(),
            vec![
                ("nodeA", required(pod("", &[]), ANTI, vec![t_exists("foo", "zone")])),
                ("nodeA", required(pod("", &[]), ANTI, vec![t_exists("bar", "region")])),
            ],
            pod("", &foo_and_bar),
            Want::Each(&[Some(ERR_EXISTING), Some(ERR_EXISTING)]),
        ),
        (
            "Test incoming pod's anti-affinity: incoming pod wouldn't considered as a fit as it at least violates one anti-affinity rule of existingPod",
            ab_zones(),
            vec![("nodeA", pod("", &[("foo", "")])), ("nodeB", pod("", &[("bar", "")]))],
            required(pod("", &[]), ANTI, vec![t_exists("foo", "zone"), t_exists("bar", "region")]),
            Want::Each(&[Some(ERR_ANTI), Some(ERR_ANTI)]),
        ),
        (
            "Test existing pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a single term match - case when one term has invalid topologyKey",
            ab_zones(),
            vec![("nodeA", required(pod("", &[]), ANTI, vec![t_exists("foo", "invalid-node-label"), t_exists("bar", "zone")]))],
            pod("", &foo_and_bar),
            Want::Each(&[Some(ERR_EXISTING), None]),
        ),
        (
            "Test incoming pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a single term match - case when one term has invalid topologyKey",
            ab_zones(),
            vec![("nodeA", pod("", &foo_and_bar))],
            required(pod("", &[]), ANTI, vec![t_exists("foo", "invalid-node-label"), t_exists("bar", "zone")]),
            Want::Each(&[Some(ERR_ANTI), None]),
        ),
        (
            "Test existing pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a single term match - case when all terms have valid topologyKey",
            ab_zones(),
            vec![("nodeA", required(pod("", &[]), ANTI, vec![t_exists("foo", "region"), t_exists("bar", "zone")]))],
            pod("", &foo_and_bar),
            Want::Each(&[Some(ERR_EXISTING), Some(ERR_EXISTING)]),
        ),
        (
            "Test incoming pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a single term match - case when all terms have valid topologyKey",
            ab_zones(),
            vec![("nodeA", pod("", &foo_and_bar))],
            required(pod("", &[]), ANTI, vec![t_exists("foo", "region"), t_exists("bar", "zone")]),
            Want::Each(&[Some(ERR_ANTI), Some(ERR_ANTI)]),
        ),
        (
            "Test existing pod's anti-affinity: existingPod on nodeA and nodeB has at least one anti-affinity term matches incoming pod, so incoming pod can only be scheduled to nodeC",
            vec![rz("nodeA", "r1", "z1"), rz("nodeB", "r1", "z2"), rz("nodeC", "r1", "z3")],
            vec![
                ("nodeA", required(pod("", &[]), ANTI, vec![t_exists("foo", "zone"), t_exists("labelA", "zone")])),
                ("nodeB", required(pod("", &[]), ANTI, vec![t_exists("bar", "zone"), t_exists("labelB", "zone")])),
            ],
            pod("", &foo_and_bar),
            Want::Each(&[Some(ERR_EXISTING), Some(ERR_EXISTING), None]),
        ),
        (
            "Test incoming pod's affinity: firstly check if all affinityTerms match, and then check if all topologyKeys match",
            ab_same(),
            vec![("nodeA", pod("", &foo_and_bar))],
            required(pod("", &[]), AFF, vec![t_exists("foo", "region"), t_exists("bar", "zone")]),
            Want::Each(&[None, None]),
        ),
        (
            "Test incoming pod's affinity: firstly check if all affinityTerms match, and then check if all topologyKeys match, and the match logic should be satisfied on the same pod",
            ab_zones(),
            vec![("nodeA", pod("", &[("foo", "")])), ("nodeB", pod("", &[("bar", "")]))],
            required(pod("", &[]), AFF, vec![t_exists("foo", "region"), t_exists("bar", "zone")]),
            Want::Each(&[Some(ERR_AFFINITY), Some(ERR_AFFINITY)]),
        ),
    ];
    for (name, nodes, pods, incoming, want) in &cases {
        check_filter(name, nodes, pods, incoming, *want);
    }
}

// ---- PreFilter state -----------------------------------------------------------------------

type Tally = Vec<((String, String), i64)>;

fn tally(pairs: &[(&str, &str, i64)]) -> Tally {
    let mut v: Tally = pairs.iter().map(|(k, val, n)| ((k.to_string(), val.to_string()), *n)).collect();
    v.sort();
    v
}

/// PreFilter's (affinity, anti-affinity, existing anti-affinity) tallies for `incoming`
/// (all empty when PreFilter skips).
fn tallies(s: &Snapshot, incoming: &Value) -> [Tally; 3] {
    let parsed = ParsedPod::from_json(&bytes(incoming)).unwrap();
    interpod::Filter::new(s, &parsed).map_or_else(Default::default, |f| f.tallies(s))
}

#[test]
fn prefilter_state_add_remove_pod() {
    let nodes = [
        node("nodeA", &[("region", "r1"), ("zone", "z11")]),
        node("nodeB", &[("region", "r1"), ("zone", "z12")]),
        node("nodeC", &[("region", "r2"), ("zone", "z21")]),
    ];
    let foo_bar = [("foo", "bar")];
    let anti_foo_bar = || vec![t_in("foo", &["bar"], "region")];
    let complex = || vec![t_in("foo", &["bar", "buzz"], "region"), t_not_in("service", &["bar", "security", "test"], "zone")];
    // (name, pending pod, existing pods, added pod, expected anti-affinity and affinity tallies
    // with every pod counted)
    type Case<'a> = (&'a str, Value, Placed<'a>, (&'a str, Value), Tally, Tally);
    let cases: Vec<Case> = vec![
        (
            "preFilterState anti-affinity terms are updated correctly after adding and removing a pod",
            required(pod("", &foo_bar), ANTI, anti_foo_bar()),
            vec![("nodeA", pod("", &foo_bar)), ("nodeC", required(pod("", &[]), ANTI, anti_foo_bar()))],
            ("nodeB", required(pod("", &foo_bar), ANTI, anti_foo_bar())),
            tally(&[("region", "r1", 2)]),
            tally(&[]),
        ),
        (
            "preFilterState anti-affinity terms are updated correctly after adding and removing a pod",
            required(pod("", &foo_bar), ANTI, complex()),
            vec![("nodeA", pod("", &foo_bar)), ("nodeC", required(pod("", &[]), ANTI, anti_foo_bar()))],
            ("nodeA", required(pod("", &foo_bar), ANTI, complex())),
            tally(&[("region", "r1", 2), ("zone", "z11", 2), ("zone", "z21", 1)]),
            tally(&[]),
        ),
        (
            "preFilterState matching pod affinity and anti-affinity are updated correctly after adding and removing a pod",
            required(pod("", &foo_bar), AFF, complex()),
            vec![
                ("nodeA", pod("", &foo_bar)),
                ("nodeC", required(required(pod("", &[]), ANTI, anti_foo_bar()), AFF, complex())),
            ],
            ("nodeA", required(pod("", &foo_bar), ANTI, complex())),
            tally(&[]),
            tally(&[("region", "r1", 2), ("zone", "z11", 2)]),
        ),
    ];
    for (name, pending, existing, (added_on, added), want_anti, want_aff) in cases {
        let mut all = existing.clone();
        all.push((added_on, added));
        let with_added = snapshot(&nodes, &all);
        let [aff, anti, _] = tallies(&with_added, &pending);
        assert_eq!(anti, want_anti, "{name}: antiAffinityCounts");
        assert_eq!(aff, want_aff, "{name}: affinityCounts");
        // RemovePod of the added pod gives back the state without it.
        let added_key = format!("/existing-{}", all.len() - 1);
        let parsed = ParsedPod::from_json(&bytes(&pending)).unwrap();
        let mut f = interpod::Filter::new(&with_added, &parsed).unwrap();
        let slot = with_added.slot(added_on).unwrap();
        f.remove(&with_added, slot, &[with_added.pod(&added_key).unwrap()], &parsed);
        let without = snapshot(&nodes, &existing);
        assert_eq!(f.tallies(&with_added), tallies(&without, &pending), "{name}: after RemovePod");
    }
}

#[test]
fn get_incoming_affinity_anti_affinity_counts() {
    let nodes = [node("nodeA", &[("hostname", "nodeA")])];
    let normal = |keys: &[&str]| {
        let l: Vec<(&str, &str)> = keys.iter().map(|k| (*k, "")).collect();
        vec![("nodeA", pod("", &l))]
    };
    let with_terms = |aff: &[&str], anti: &[&str]| {
        let p = required(pod("", &[]), AFF, aff.iter().map(|k| t_exists(k, "hostname")).collect());
        required(p, ANTI, anti.iter().map(|k| t_exists(k, "hostname")).collect())
    };
    let host = |n: i64| tally(&[("hostname", "nodeA", n)]);
    let cases: Vec<(&str, Placed, Value, Tally, Tally)> = vec![
        ("nil test", vec![], pod("", &[]), tally(&[]), tally(&[])),
        ("incoming pod without affinity/anti-affinity causes a no-op", normal(&["aaa"]), pod("", &[]), tally(&[]), tally(&[])),
        (
            "no pod has label that violates incoming pod's affinity and anti-affinity",
            normal(&["bbb"]),
            with_terms(&["aaa"], &["aaa"]),
            tally(&[]),
            tally(&[]),
        ),
        (
            "existing pod matches incoming pod's affinity and anti-affinity - single term case",
            normal(&["aaa"]),
            with_terms(&["aaa"], &["aaa"]),
            host(1),
            host(1),
        ),
        (
            "existing pod matches incoming pod's affinity and anti-affinity - multiple terms case",
            normal(&["aaa", "bbb"]),
            with_terms(&["aaa", "bbb"], &["aaa"]),
            host(2),
            host(1),
        ),
        (
            "existing pod not match incoming pod's affinity but matches anti-affinity",
            normal(&["aaa"]),
            with_terms(&["aaa", "bbb"], &["aaa", "bbb"]),
            tally(&[]),
            host(1),
        ),
        (
            "incoming pod's anti-affinity has more than one term - existing pod violates partial term - case 1",
            normal(&["aaa", "bbb"]),
            with_terms(&["aaa", "ccc"], &["aaa", "ccc"]),
            tally(&[]),
            host(1),
        ),
        (
            "incoming pod's anti-affinity has more than one term - existing pod violates partial term - case 2",
            normal(&["bbb"]),
            with_terms(&["aaa", "bbb"], &["aaa", "bbb"]),
            tally(&[]),
            host(1),
        ),
    ];
    for (name, existing, incoming, want_aff, want_anti) in cases {
        let s = snapshot(&nodes, &existing);
        let [aff, anti, _] = tallies(&s, &incoming);
        assert_eq!(aff, want_aff, "{name}: affinity");
        assert_eq!(anti, want_anti, "{name}: anti-affinity");
    }
}

/// Not an upstream table: upstream's `topologyToMatchedTermCount.update` deletes a pair whose
/// count drops to 0, so after RemovePod of the only pod matching a self-affine pod's terms the
/// pod is the first of its group again and fits wherever the topology keys are.
#[test]
fn remove_pod_of_the_only_peer_makes_the_pod_first_of_its_group() {
    let nodes = [node("nodeA", &[("zone", "z1")]), node("nodeB", &[("zone", "z2")])];
    let s = snapshot(&nodes, &[("nodeA", pod("", &[("app", "db")]))]);
    let incoming = required(pod("", &[("app", "db")]), AFF, vec![t_in("app", &["db"], "zone")]);
    let prof = filter_only();
    assert_eq!(s.filter_node(&prof, &bytes(&incoming), "nodeB", &[]).unwrap(), vec![ERR_AFFINITY.to_string()]);
    assert!(s.filter_node(&prof, &bytes(&incoming), "nodeA", &["/existing-0"]).unwrap().is_empty());
}

// ---- score ---------------------------------------------------------------------------------

/// The normalized InterPodAffinity score per node, in the order of `nodes`, through a whole
/// cycle (all nodes feasible, weight 1).
fn scores(nodes: &[Value], pods: &[(&str, Value)], incoming: &Value) -> Vec<i64> {
    let mut s = snapshot(nodes, pods);
    let r = s.schedule(&score_only(), &bytes(incoming), false).unwrap();
    let by_name: Vec<(String, i64)> = r.feasible_names().map(str::to_string).zip(r.scores.iter().copied()).collect();
    if nodes.len() > 1 {
        assert_eq!(by_name.len(), nodes.len());
    }
    names(nodes).iter().map(|n| by_name.iter().find(|(m, _)| m == n).map_or(0, |(_, v)| *v)).collect()
}

/// The same straight from the kernel with non-default InterPodAffinityArgs.
fn scores_with(nodes: &[Value], pods: &[(&str, Value)], incoming: &Value, args: Args) -> Vec<i64> {
    let s = snapshot(nodes, pods);
    let parsed = ParsedPod::from_json(&bytes(incoming)).unwrap();
    let slots: Vec<u32> = names(nodes).iter().map(|n| s.slot(n).unwrap() as u32).collect();
    let mut out = vec![-1; slots.len()];
    interpod::scores_with(&s, &parsed, &slots, &mut out, &args);
    out
}

fn security(v: &str) -> [(&'static str, &str); 1] {
    [("security", v)]
}

#[test]
fn preferred_affinity() {
    let china = || vec![("region", "China")];
    let india = || vec![("region", "India")];
    let az1 = || vec![("az", "az1")];
    let az2 = || vec![("az", "az2")];
    let china_az1 = || vec![("region", "China"), ("az", "az1")];
    let nodes = |ls: Vec<Vec<(&'static str, &'static str)>>| -> Vec<Value> {
        ls.iter().enumerate().map(|(i, l)| node(&format!("node{}", i + 1), l)).collect()
    };
    let (s1, s2) = (security("S1"), security("S2"));
    let stay_s1_region = |p: Value| preferred(p, AFF, vec![(5, t_in("security", &["S1"], "region"))]);
    let stay_s2_region = |p: Value| preferred(p, AFF, vec![(6, t_in("security", &["S2"], "region"))]);
    let affinity3 = |p: Value| {
        preferred(p, AFF, vec![
            (8, term(vec![req("security", "NotIn", &["S1"]), req("security", "In", &["S2"])], "region")),
            (2, term(vec![req("security", "Exists", &[]), req("wrongkey", "DoesNotExist", &[])], "region")),
        ])
    };
    let hard_affinity = |p: Value| {
        required(p, AFF, vec![
            t_in("security", &["S1", "value2"], "region"),
            term(vec![req("security", "Exists", &[]), req("wrongkey", "DoesNotExist", &[])], "region"),
        ])
    };
    let away_s1_az = |p: Value| preferred(p, ANTI, vec![(5, t_in("security", &["S1"], "az"))]);
    let away_s2_az = |p: Value| preferred(p, ANTI, vec![(5, t_in("security", &["S2"], "az"))]);
    let stay_s1_away_s2 = |p: Value| away_s2_az(preferred(p, AFF, vec![(8, t_in("security", &["S1"], "region"))]));
    let ns_term = || {
        let mut t = team_selector(t_in("security", &["S1"], "region"), "team1", TEAM1);
        t["namespaces"] = json!(["subteam2.team2"]);
        t
    };
    let affinity_ns_selector = |p: Value| preferred(p, AFF, vec![(5, ns_term())]);
    let anti_affinity_ns_selector = |p: Value| preferred(p, ANTI, vec![(5, ns_term())]);
    let on = |n: &'static str, p: Value| (n, p);
    // Plain pods labelled security=<value> on nodes: (node, value).
    let plain = |list: &[(&'static str, &str)]| -> Placed { list.iter().map(|&(n, v)| (n, pod("", &security(v)))).collect() };
    // Two S1 pods in subteam1.team1 and one in `third` on node1, one in subteam2.team1 on node2.
    let ns_pods = |third: &str| -> Placed {
        [("node1", "subteam1.team1"), ("node1", "subteam1.team1"), ("node1", third), ("node2", "subteam2.team1")]
            .iter()
            .map(|&(n, ns)| (n, pod(ns, &s1)))
            .collect()
    };

    let cases: Vec<ScoreCase> = vec![
        (
            "all nodes are same priority as Affinity is nil",
            nodes(vec![china(), india(), az1()]),
            vec![],
            pod("", &s1),
            vec![0, 0, 0],
        ),
        (
            "Affinity: pod that matches topology key & pods in nodes will get high score comparing to otherswhich doesn't match either pods in nodes or in topology key",
            nodes(vec![china(), india(), az1()]),
            plain(&[("node1", "S1"), ("node2", "S2"), ("node3", "S1")]),
            stay_s1_region(pod("", &s1)),
            vec![100, 0, 0],
        ),
        (
            "All the nodes that have the same topology key & label value with one of them has an existing pod that match the affinity rules, have the same score",
            nodes(vec![china(), china_az1(), india()]),
            plain(&[("node1", "S1")]),
            stay_s1_region(pod("", &[])),
            vec![100, 100, 0],
        ),
        (
            "Affinity: nodes in one region has more matching pods comparing to other region, so the region which has more matches will get high score",
            nodes(vec![china(), india(), china(), china(), india()]),
            plain(&[("node1", "S2"), ("node1", "S2"), ("node2", "S2"), ("node3", "S2"), ("node4", "S2"), ("node5", "S2")]),
            stay_s2_region(pod("", &s1)),
            vec![100, 0, 100, 100, 0],
        ),
        (
            "Affinity: different Label operators and values for pod affinity scheduling preference, including some match failures ",
            nodes(vec![china(), india(), az1()]),
            plain(&[("node1", "S1"), ("node2", "S2"), ("node3", "S1")]),
            affinity3(pod("", &s1)),
            vec![20, 100, 0],
        ),
        (
            "Affinity symmetry: considered only the preferredDuringSchedulingIgnoredDuringExecution in pod affinity symmetry",
            nodes(vec![china(), india(), az1()]),
            vec![on("node1", stay_s1_region(pod("", &s1))), on("node2", stay_s2_region(pod("", &s2)))],
            pod("", &s2),
            vec![0, 100, 0],
        ),
        (
            "Affinity symmetry with namespace selector",
            nodes(vec![china(), india(), az1()]),
            vec![on("node1", affinity_ns_selector(pod("", &s1))), on("node2", stay_s2_region(pod("", &s2)))],
            pod("subteam1.team1", &s1),
            vec![100, 0, 0],
        ),
        (
            "AntiAffinity symmetry with namespace selector",
            nodes(vec![china(), india(), az1()]),
            vec![on("node1", anti_affinity_ns_selector(pod("", &s1))), on("node2", stay_s2_region(pod("", &s2)))],
            pod("subteam1.team1", &s1),
            vec![0, 100, 100],
        ),
        (
            "Affinity symmetry: considered RequiredDuringSchedulingIgnoredDuringExecution in pod affinity symmetry",
            nodes(vec![china(), india(), az1()]),
            vec![on("node1", hard_affinity(pod("", &s1))), on("node2", hard_affinity(pod("", &s2)))],
            pod("", &s1),
            vec![100, 100, 0],
        ),
        (
            "Anti Affinity: pod that does not match existing pods in node will get high score ",
            nodes(vec![az1(), china()]),
            plain(&[("node1", "S1"), ("node2", "S2")]),
            away_s1_az(pod("", &s1)),
            vec![0, 100],
        ),
        (
            "Anti Affinity: pod that does not match topology key & match the pods in nodes will get higher score comparing to others ",
            nodes(vec![az1(), china()]),
            plain(&[("node1", "S1"), ("node2", "S1")]),
            away_s1_az(pod("", &s1)),
            vec![0, 100],
        ),
        (
            "Anti Affinity: one node has more matching pods comparing to other node, so the node which has more unmatches will get high score",
            nodes(vec![az1(), india()]),
            plain(&[("node1", "S1"), ("node1", "S1"), ("node2", "S2")]),
            away_s1_az(pod("", &s1)),
            vec![0, 100],
        ),
        (
            "Anti Affinity symmetry: the existing pods in node which has anti affinity match will get high score",
            nodes(vec![az1(), az2()]),
            vec![on("node1", away_s2_az(pod("", &s1))), on("node2", away_s1_az(pod("", &s2)))],
            pod("", &s2),
            vec![0, 100],
        ),
        (
            "Affinity and Anti Affinity: considered only preferredDuringSchedulingIgnoredDuringExecution in both pod affinity & anti affinity",
            nodes(vec![china(), az1()]),
            plain(&[("node1", "S1"), ("node2", "S1")]),
            stay_s1_away_s2(pod("", &s1)),
            vec![100, 0],
        ),
        (
            "Affinity and Anti Affinity: considering both affinity and anti-affinity, the pod to schedule and existing pods have the same labels",
            nodes(vec![china_az1(), india(), china(), china(), india()]),
            plain(&[("node1", "S1"), ("node1", "S1"), ("node2", "S1"), ("node3", "S1"), ("node3", "S1"), ("node4", "S1"), ("node5", "S1")]),
            stay_s1_away_s2(pod("", &s1)),
            vec![100, 0, 100, 100, 0],
        ),
        (
            "Affinity and Anti Affinity and symmetry: considered only preferredDuringSchedulingIgnoredDuringExecution in both pod affinity & anti affinity & symmetry",
            nodes(vec![china(), az1(), india(), az2()]),
            vec![
                on("node1", pod("", &s1)),
                on("node2", pod("", &s2)),
                on("node3", stay_s1_away_s2(pod("", &[]))),
                on("node4", away_s1_az(pod("", &[]))),
            ],
            stay_s1_away_s2(pod("", &s1)),
            vec![100, 0, 100, 0],
        ),
        (
            "Avoid panic when partial nodes in a topology don't have pods with affinity",
            nodes(vec![china(), china()]),
            vec![on("node1", pod("", &s1)), on("node2", stay_s1_away_s2(pod("", &[])))],
            pod("", &s1),
            vec![0, 0],
        ),
        (
            "Affinity with pods matching NamespaceSelector",
            nodes(vec![china(), india()]),
            ns_pods("subteam1.team2"),
            affinity_ns_selector(pod("subteam1.team1", &s1)),
            vec![100, 0],
        ),
        (
            "Affinity with pods matching both NamespaceSelector and Namespaces fields",
            nodes(vec![china(), india()]),
            ns_pods("subteam2.team2"),
            affinity_ns_selector(pod("subteam1.team1", &s1)),
            vec![100, 0],
        ),
        (
            "Affinity with pods matching NamespaceSelector" /* upstream's second case of that name: anti-affinity */,
            nodes(vec![china(), india()]),
            ns_pods("subteam1.team2"),
            anti_affinity_ns_selector(pod("subteam1.team1", &s1)),
            vec![0, 100],
        ),
        (
            "Affinity with pods matching both NamespaceSelector and Namespaces fields" /* the anti-affinity one */,
            nodes(vec![china(), india()]),
            ns_pods("subteam2.team2"),
            anti_affinity_ns_selector(pod("subteam1.team1", &s1)),
            vec![0, 100],
        ),
        (
            "Do not ignore preferred terms of existing pods",
            nodes(vec![china(), india()]),
            vec![on("node1", stay_s1_away_s2(pod("", &s1))), on("node2", stay_s2_region(pod("", &s2)))],
            pod("", &s2),
            vec![0, 100],
        ),
        ("No nodes to score", vec![], vec![], pod("", &s2), vec![]),
    ];
    for (name, nodes, pods, incoming, want) in &cases {
        assert_eq!(scores(nodes, pods, incoming), *want, "{name}");
        assert_eq!(scores_with(nodes, pods, incoming, Args::default()), *want, "{name}: kernel");
    }

    // "Ignore preferred terms of existing pods": ignorePreferredTermsOfExistingPods, and the pod
    // has no preferred terms of its own: PreScore Skip, every node 0.
    let ignore = Args { ignore_preferred_terms_of_existing_pods: true, ..Args::default() };
    let (n, p, incoming) = (
        nodes(vec![china(), india()]),
        vec![on("node1", stay_s1_away_s2(pod("", &s1))), on("node2", stay_s2_region(pod("", &s2)))],
        pod("", &s2),
    );
    assert_eq!(scores_with(&n, &p, &incoming, ignore), vec![0, 0], "Ignore preferred terms of existing pods");
    // With preferred terms of its own the existing pods' terms count again (the flag is a
    // shortcut for pods without them): node2's S2 pod wants S2 near it.
    let own = preferred(pod("", &s2), AFF, vec![(1, t_in("security", &["nobody"], "region"))]);
    assert_eq!(scores_with(&n, &p, &own, ignore), vec![0, 100]);
}

/// Upstream: "invalid Affinity fails PreScore" and "invalid AntiAffinity fails PreScore": a
/// preferred term whose selector has the value "{{.bad-value.}}" makes PreScore fail with
/// Error `Invalid value: "{{.bad-value.}}"` (the pod is not scheduled in that cycle).
#[test]
fn preferred_affinity_invalid_labels_fail_prescore() {
    let nodes = [node("node1", &[("region", "China")]), node("node2", &[("region", "China")])];
    let bad = preferred(pod("", &[]), AFF, vec![(8, t_in("security", &["{{.bad-value.}}"], "region"))]);
    let mut s = snapshot(&nodes, &[]);
    assert!(s.schedule(&score_only(), &bytes(&bad), false).is_err());
}

#[test]
fn preferred_affinity_with_hard_pod_affinity_symmetric_weight() {
    let nodes = vec![
        node("node1", &[("region", "China")]),
        node("node2", &[("region", "India")]),
        node("node3", &[("az", "az1")]),
    ];
    let hard = || {
        let mut t = team_selector(t_in("service", &["S1"], "region"), "team1", TEAM1);
        t["namespaces"] = json!(["", "subteam2.team2"]);
        required(pod("", &[]), AFF, vec![t])
    };
    let pods = vec![("node1", hard()), ("node2", hard())];
    let service = [("service", "S1")];
    let weight = |w: i64| Args { hard_pod_affinity_weight: w, ..Args::default() };
    let cases: Vec<(&str, &str, i64, Vec<i64>)> = vec![
        ("with default weight", "", 1, vec![100, 100, 0]),
        ("with zero weight", "", 0, vec![0, 0, 0]),
        ("with no matching namespace", "subteam1.team2", 1, vec![0, 0, 0]),
        ("with matching NamespaceSelector", "subteam1.team1", 1, vec![100, 100, 0]),
        ("with matching Namespaces", "subteam2.team2", 1, vec![100, 100, 0]),
    ];
    for (name, ns, w, want) in cases {
        let incoming = pod(ns, &service);
        assert_eq!(scores_with(&nodes, &pods, &incoming, weight(w)), want, "{name}");
        if w == 1 {
            assert_eq!(scores(&nodes, &pods, &incoming), want, "{name}: through a cycle");
        }
    }
}

/// Not an upstream table: PreFilter's tallies count the pods of every node, also of a node
/// added after the last cycle when preemption's dry runs (here `filter_node`) come first.
#[test]
fn tallies_count_nodes_added_since_the_last_cycle() {
    let mut s = snapshot(&[node("nodeA", &[("zone", "z1")])], &[]);
    s.schedule(&filter_only(), &bytes(&pod("", &[])), false).unwrap();
    s.set_node_json(&bytes(&node("nodeB", &[("zone", "z2")]))).unwrap();
    s.add_pod_json("/db", &bytes(&pod("", &[("app", "db")])), "nodeB").unwrap();
    let incoming = required(pod("", &[]), ANTI, vec![t_in("app", &["db"], "zone")]);
    assert_eq!(s.filter_node(&filter_only(), &bytes(&incoming), "nodeB", &[]).unwrap(), vec![ERR_ANTI.to_string()]);
}

/// Not an upstream table: matchLabelKeys / mismatchLabelKeys are merged into the term's
/// labelSelector only when it has one (upstream's API server, applyMatchLabelKeysAndMismatchLabelKeys:
/// "nil-LabelSelector is match none").
#[test]
fn match_label_keys_need_a_label_selector() {
    let nodes = [node("nodeA", &[("zone", "z1")]), node("nodeB", &[("zone", "z2")])];
    let web = [("app", "web"), ("ver", "1")];
    let pods = [("nodeA", pod("", &web))];
    let with = |selector: Option<Value>, keys: &str| {
        let mut t = json!({"topologyKey": "zone", keys: ["app"]});
        if let Some(sel) = selector {
            t["labelSelector"] = sel;
        }
        required(pod("", &[("app", "web"), ("ver", "2")]), AFF, vec![t])
    };
    let none: &[Option<&str>] = &[Some(ERR_AFFINITY), Some(ERR_AFFINITY)];
    // No labelSelector: matches nothing, the keys add nothing; the pod does not match it either.
    check_filter("no selector, matchLabelKeys", &nodes, &pods, &with(None, "matchLabelKeys"), Want::Each(none));
    check_filter("no selector, mismatchLabelKeys", &nodes, &pods, &with(None, "mismatchLabelKeys"), Want::Each(none));
    // `{}` with matchLabelKeys [app] is `app In (web)`: the web pod on nodeA.
    check_filter("{} and matchLabelKeys", &nodes, &pods, &with(Some(json!({})), "matchLabelKeys"), Want::Each(&[None, Some(ERR_AFFINITY)]));
}
