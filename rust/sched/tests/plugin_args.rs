//! Plugin arguments through a profile (KubeSchedulerConfiguration `pluginConfig`), as upstream
//! kube-scheduler applies them:
//! - NodeAffinityArgs.addedAffinity: its required terms filter every node first ("scheduler-enforced"),
//!   its preferred terms add to the pod's in NodeAffinity's score;
//! - InterPodAffinityArgs.hardPodAffinityWeight and ignorePreferredTermsOfExistingPods.

use kubecore_sched::nodeaffinity::{AddedAffinity, ERR_REASON_ENFORCED, ERR_REASON_POD};
use kubecore_sched::{Error, Profile, ProfileConfig, Snapshot};
use serde_json::{json, Map, Value};

fn bytes(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap()
}

fn labels(pairs: &[(&str, &str)]) -> Value {
    Value::Object(pairs.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<Map<_, _>>())
}

fn node(name: &str, l: &[(&str, &str)]) -> Value {
    json!({"metadata": {"name": name, "labels": labels(l)}, "spec": {},
           "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}})
}

/// A pod in "default" with labels `l` and `spec` merged over one container.
fn pod(l: &[(&str, &str)], spec: Value) -> Value {
    let mut p = json!({"metadata": {"name": "p", "namespace": "default", "labels": labels(l)},
                       "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    for (k, v) in spec.as_object().cloned().unwrap_or_default() {
        p["spec"][k] = v;
    }
    p
}

fn snapshot(nodes: &[Value], placed: &[(&str, Value)]) -> Snapshot {
    let mut s = Snapshot::new(7);
    for n in nodes {
        s.set_node_json(&bytes(n)).unwrap();
    }
    for (i, (on, p)) in placed.iter().enumerate() {
        s.add_pod_json(&format!("default/existing-{i}"), &bytes(p), on).unwrap();
    }
    s
}

fn profile(f: impl FnOnce(&mut ProfileConfig)) -> Result<Profile, Error> {
    let mut c = ProfileConfig::default();
    f(&mut c);
    Profile::new(c)
}

fn added(v: Value) -> AddedAffinity {
    AddedAffinity::from_json(&bytes(&v)).unwrap()
}

fn req(key: &str, op: &str, values: &[&str]) -> Value {
    json!({"key": key, "operator": op, "values": values})
}

fn required(terms: Value) -> Value {
    json!({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}})
}

/// Every node evaluated, no selection: (node, weighted total) sorted by node.
fn scored(s: &mut Snapshot, prof: &Profile, p: &Value) -> Vec<(String, i64)> {
    let r = s.schedule(prof, &bytes(p), false).unwrap();
    let mut got: Vec<(String, i64)> = r.feasible_names().map(str::to_string).zip(r.scores.iter().copied()).collect();
    got.sort();
    got
}

fn named(want: &[(&str, i64)]) -> Vec<(String, i64)> {
    want.iter().map(|(n, v)| (n.to_string(), *v)).collect()
}

// ---- NodeAffinityArgs.addedAffinity: Filter ---------------------------------------------------

fn zones() -> Vec<Value> {
    vec![node("node1", &[("zone", "foo")]), node("node2", &[("zone", "bar")]), node("node3", &[("zone", "bar"), ("disk", "ssd")])]
}

fn enforced_zone_bar() -> Profile {
    profile(|c| c.added_affinity = Some(added(required(json!([{"matchExpressions": [req("zone", "In", &["bar"])]}])))))
        .unwrap()
}

/// Upstream TestNodeAffinity's addedAffinity cases through a profile: the addedAffinity is
/// checked before the pod's own selection and gives its own reason.
#[test]
fn added_affinity_filters_before_the_pods_own_selection() {
    let mut s = snapshot(&zones(), &[]);
    let prof = enforced_zone_bar();
    let fits = |s: &Snapshot, p: &Value, n: &str| s.filter_node(&prof, &bytes(p), n, &[]).unwrap();
    let plain = pod(&[], json!({}));
    assert_eq!(fits(&s, &plain, "node1"), vec![ERR_REASON_ENFORCED.to_string()], "Doesn't match added affinity");
    assert!(fits(&s, &plain, "node2").is_empty(), "a pod without selection is filtered by the addedAffinity");
    let ssd = pod(&[], json!({"nodeSelector": {"disk": "ssd"}}));
    assert_eq!(fits(&s, &ssd, "node1"), vec![ERR_REASON_ENFORCED.to_string()], "enforced is checked first");
    assert_eq!(fits(&s, &ssd, "node2"), vec![ERR_REASON_POD.to_string()], "Matches added affinity but not Pod's");
    assert!(fits(&s, &ssd, "node3").is_empty(), "Matches added affinity and Pod's node affinity");

    // A whole cycle counts each node's reason once (the FitError histogram).
    let r = s.schedule(&prof, &bytes(&ssd), true).unwrap();
    assert_eq!(r.node_name(), Some("node3"));
    let blocked = pod(&[], json!({"nodeSelector": {"disk": "hdd"}}));
    let r = s.schedule(&prof, &bytes(&blocked), true).unwrap();
    assert_eq!(r.node, None);
    let want = vec![(ERR_REASON_POD.to_string(), 2), (ERR_REASON_ENFORCED.to_string(), 1)];
    assert_eq!(r.reasons, want);
    assert_eq!(r.unresolvable, 3, "both reasons are UnschedulableAndUnresolvable");

    // The same pod under the default profile: only the pod's own reason.
    let r = s.schedule(&Profile::new(ProfileConfig::default()).unwrap(), &bytes(&blocked), true).unwrap();
    assert_eq!(r.reasons, vec![(ERR_REASON_POD.to_string(), 3)]);
}

/// matchFields on metadata.name (upstream's "Matches added affinity and Pod's node affinity").
#[test]
fn added_affinity_match_fields() {
    let mut s = snapshot(&zones(), &[]);
    let terms = json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node2"]}]}]);
    let prof = profile(|c| c.added_affinity = Some(added(required(terms)))).unwrap();
    let p = pod(&[], json!({"affinity": {"nodeAffinity": required(json!([{"matchExpressions": [req("zone", "In", &["bar"])]}]))}}));
    let r = s.schedule(&prof, &bytes(&p), true).unwrap();
    assert_eq!(r.node_name(), Some("node2"));
    assert_eq!(r.reasons, vec![(ERR_REASON_ENFORCED.to_string(), 2)]);
}

/// An addedAffinity whose required selector has no terms matches no node (NewNodeSelector); one
/// with preferred terms only filters nothing (no addedNodeSelector, PreFilter Skip).
#[test]
fn added_affinity_without_terms_and_preferred_only() {
    let mut s = snapshot(&zones(), &[]);
    let none = profile(|c| c.added_affinity = Some(added(required(json!([]))))).unwrap();
    let r = s.schedule(&none, &bytes(&pod(&[], json!({}))), true).unwrap();
    assert_eq!(r.reasons, vec![(ERR_REASON_ENFORCED.to_string(), 3)]);
    let empty_term = profile(|c| c.added_affinity = Some(added(required(json!([{}]))))).unwrap();
    let r = s.schedule(&empty_term, &bytes(&pod(&[], json!({}))), true).unwrap();
    assert_eq!(r.reasons, vec![(ERR_REASON_ENFORCED.to_string(), 3)], "an empty term selects nothing");
    let preferred = json!({"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 5, "preference": {"matchExpressions": [req("zone", "In", &["bar"])]}}]});
    let soft = profile(|c| c.added_affinity = Some(added(preferred))).unwrap();
    let r = s.schedule(&soft, &bytes(&pod(&[], json!({}))), true).unwrap();
    assert_eq!((r.feasible.len(), r.reasons.len()), (3, 0));
}

/// Many nodes (filtered in parallel chunks): the fused mask and the per-node reasons agree.
#[test]
fn added_affinity_on_the_parallel_path() {
    // Zones a, b, c, d in turn; every third node is gold; the pod fits the gold nodes in a or b.
    let gold = |i: usize| i.is_multiple_of(3);
    let fits = |i: usize| i % 4 < 2 && gold(i);
    let nodes: Vec<Value> = (0..5000)
        .map(|i| node(&format!("n{i:04}"), &[("zone", ["a", "b", "c", "d"][i % 4]), ("tier", if gold(i) { "gold" } else { "std" })]))
        .collect();
    let mut s = snapshot(&nodes, &[]);
    let prof = profile(|c| {
        c.percentage_of_nodes_to_score = 100;
        c.added_affinity = Some(added(required(json!([{"matchExpressions": [req("zone", "In", &["a", "b"])]}]))));
    })
    .unwrap();
    let p = pod(&[], json!({"nodeSelector": {"tier": "gold"}}));
    let r = s.schedule(&prof, &bytes(&p), false).unwrap();
    let gold_ab = (0..5000).filter(|&i| fits(i)).count();
    assert_eq!(r.feasible.len(), gold_ab);
    assert!(r.feasible_names().all(|n| fits(n[1..].parse().unwrap())));
    let want = vec![(ERR_REASON_POD.to_string(), 2500 - gold_ab), (ERR_REASON_ENFORCED.to_string(), 2500)];
    assert_eq!(r.reasons, want);
    assert_eq!(r.evaluated, 5000);
}

/// A term of the addedAffinity that does not parse is a configuration error.
#[test]
fn added_affinity_terms_must_parse() {
    let bad = required(json!([{"matchExpressions": [{"key": "zone", "operator": "In"}]}]));
    assert!(matches!(AddedAffinity::from_json(&bytes(&bad)), Err(Error::Config(_))));
    let bad_pref = json!({"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [req("invalid key", "In", &["v"])]}}]});
    assert!(matches!(AddedAffinity::from_json(&bytes(&bad_pref)), Err(Error::Config(_))));
}

// ---- NodeAffinityArgs.addedAffinity: Score ----------------------------------------------------

/// Upstream TestNodeAffinityPriority "added affinity" and "added affinity and pod has default
/// affinity": the addedAffinity's preferred terms add to the pod's (and score a pod without any).
#[test]
fn added_affinity_scores_with_the_pods_preferred_terms() {
    let nodes = vec![
        node("node1", &[("key", "value")]),
        node("node2", &[("foo", "bar")]),
        node("node3", &[("key", "value"), ("foo", "bar")]),
        node("node4", &[]),
    ];
    let mut s = snapshot(&nodes, &[]);
    let preferred = json!({"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 3, "preference": {"matchExpressions": [req("key", "In", &["value"])]}}]});
    let prof = profile(|c| {
        c.filters.clear();
        c.scores = vec![("NodeAffinity".into(), 1)];
        c.added_affinity = Some(added(preferred));
    })
    .unwrap();
    let plain = pod(&[], json!({}));
    assert_eq!(scored(&mut s, &prof, &plain), named(&[("node1", 100), ("node2", 0), ("node3", 100), ("node4", 0)]));
    let own = pod(&[], json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 2, "preference": {"matchExpressions": [req("foo", "In", &["bar"])]}}]}}}));
    // raw 3, 2, 5, 0 -> normalized to the maximum.
    assert_eq!(scored(&mut s, &prof, &own), named(&[("node1", 60), ("node2", 40), ("node3", 100), ("node4", 0)]));
    let default = profile(|c| {
        c.filters.clear();
        c.scores = vec![("NodeAffinity".into(), 1)];
    })
    .unwrap();
    assert_eq!(scored(&mut s, &default, &plain), named(&[("node1", 0), ("node2", 0), ("node3", 0), ("node4", 0)]));
}

// ---- InterPodAffinityArgs ---------------------------------------------------------------------

fn zoned() -> Vec<Value> {
    vec![node("n1", &[("zone", "z1")]), node("n2", &[("zone", "z2")]), node("n3", &[("zone", "z3")])]
}

fn web_term() -> Value {
    json!({"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone"})
}

/// On n1 a pod with required affinity to app=web; on n2 one that prefers app=web with weight 3.
fn existing() -> Vec<(&'static str, Value)> {
    let hard = pod(&[("app", "db")], json!({"affinity": {"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [web_term()]}}}));
    let soft = pod(&[("app", "cache")], json!({"affinity": {"podAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 3, "podAffinityTerm": web_term()}]}}}));
    vec![("n1", hard), ("n2", soft)]
}

fn interpod_profile(f: impl FnOnce(&mut kubecore_sched::interpod::Args)) -> Profile {
    profile(|c| {
        c.filters.clear();
        c.scores = vec![("InterPodAffinity".into(), 1)];
        f(&mut c.interpod);
    })
    .unwrap()
}

/// hardPodAffinityWeight: an existing pod's required affinity term matching the incoming pod
/// counts with that weight (0: not at all), next to the existing pods' preferred terms.
#[test]
fn hard_pod_affinity_weight() {
    let mut s = snapshot(&zoned(), &existing());
    let web = pod(&[("app", "web")], json!({}));
    let cases = [
        (None, [("n1", 33), ("n2", 100), ("n3", 0)]), // default 1: raw 1, 3, 0
        (Some(0), [("n1", 0), ("n2", 100), ("n3", 0)]),
        (Some(5), [("n1", 100), ("n2", 60), ("n3", 0)]),
    ];
    for (weight, want) in cases {
        let prof = interpod_profile(|a| {
            if let Some(w) = weight {
                a.hard_pod_affinity_weight = w;
            }
        });
        assert_eq!(scored(&mut s, &prof, &web), named(&want), "hardPodAffinityWeight {weight:?}");
    }
    // The weight is not the required term's filter: the incoming pod has no required terms.
    let prof = interpod_profile(|a| a.hard_pod_affinity_weight = 0);
    assert_eq!(s.schedule(&prof, &bytes(&web), false).unwrap().feasible.len(), 3);
}

/// Upstream validates hardPodAffinityWeight in [0, 100].
#[test]
fn hard_pod_affinity_weight_range() {
    for (w, ok) in [(-1, false), (0, true), (100, true), (101, false)] {
        let got = profile(|c| c.interpod.hard_pod_affinity_weight = w);
        assert_eq!(got.is_ok(), ok, "{w}");
        if let Err(e) = got {
            assert!(matches!(e, Error::Config(ref m) if m.contains("not in valid range [0, 100]")), "{e}");
        }
    }
}

/// ignorePreferredTermsOfExistingPods: a pod without preferred terms of its own scores 0
/// everywhere (PreScore Skip); a pod with some still counts the existing pods' terms.
#[test]
fn ignore_preferred_terms_of_existing_pods() {
    let mut s = snapshot(&zoned(), &existing());
    let web = pod(&[("app", "web")], json!({}));
    let ignoring = interpod_profile(|a| a.ignore_preferred_terms_of_existing_pods = true);
    assert_eq!(scored(&mut s, &ignoring, &web), named(&[("n1", 0), ("n2", 0), ("n3", 0)]));
    let counting = interpod_profile(|_| {});
    assert_eq!(scored(&mut s, &counting, &web), named(&[("n1", 33), ("n2", 100), ("n3", 0)]));

    // With a preferred term of its own (anti-affinity to app=db, weight 1) the existing pods'
    // terms count as before: raw n1 = 1 (hard) - 1 (own anti) = 0, n2 = 3, n3 = 0.
    let own = pod(&[("app", "web")], json!({"affinity": {"podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm":
            {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}}]}}}));
    let want = named(&[("n1", 0), ("n2", 100), ("n3", 0)]);
    assert_eq!(scored(&mut s, &ignoring, &own), want);
    assert_eq!(scored(&mut s, &counting, &own), want);

    // Next to another score plugin, the skipped plugin adds nothing (as scoring it gives all 0).
    let both = profile(|c| {
        c.filters.clear();
        c.scores = vec![("InterPodAffinity".into(), 2), ("NodeResourcesFit".into(), 1)];
        c.interpod.ignore_preferred_terms_of_existing_pods = true;
    })
    .unwrap();
    let fit_only = profile(|c| {
        c.filters.clear();
        c.scores = vec![("NodeResourcesFit".into(), 1)];
    })
    .unwrap();
    assert_eq!(scored(&mut s, &both, &web), scored(&mut s, &fit_only, &web));
}
