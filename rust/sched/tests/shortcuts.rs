//! The cycle's shortcuts give what the general path gives: the resource-score cache between
//! cycles, the plugins left out when no node has what they look at (unschedulable nodes,
//! NoSchedule/NoExecute and PreferNoSchedule taints, pods with affinity terms), and the counts
//! behind them as nodes change.

mod common;

use common::*;
use kubecore_sched::{Profile, ScheduleResult, Snapshot};
use serde_json::{json, Value};

/// 150 nodes of a few shapes: some without cpu allocatable, some with ephemeral storage or a
/// scalar resource, a few PreferNoSchedule-tainted.
fn mixed_nodes() -> Vec<Value> {
    (0..150)
        .map(|i| {
            let name = format!("n{i:03}");
            let mut n = match i % 5 {
                0 => node(&name, "4", "32Gi", 110),
                1 => node(&name, "2", "8Gi", 110),
                2 => node(&name, "8", "4Gi", 20),
                3 => node(&name, "0", "16Gi", 110),
                _ => node(&name, "16", "64Gi", 110),
            };
            if i % 7 == 0 {
                n["status"]["allocatable"]["ephemeral-storage"] = json!("100Gi");
                n["status"]["allocatable"]["example.com/gpu"] = json!("4");
            }
            if i % 11 == 0 {
                n = with_taint(n, "spot", "true", "PreferNoSchedule");
            }
            n
        })
        .collect()
}

fn kind_of_pod(i: usize) -> Value {
    match i % 4 {
        0 | 1 => pod(&format!("p{i}"), "100m", "500Mi"),
        2 => pod(&format!("p{i}"), "1", "2Gi"),
        _ => {
            let mut p = pod(&format!("p{i}"), "250m", "1Gi");
            p["spec"]["containers"][0]["resources"]["requests"]["example.com/gpu"] = json!("1");
            p["spec"]["containers"][0]["resources"]["requests"]["ephemeral-storage"] = json!("1Gi");
            p
        }
    }
}

/// Everything a cycle returns, as a string to compare.
fn outcome(r: &ScheduleResult) -> String {
    let names: Vec<&str> = r.feasible_names().collect();
    format!("{:?} {names:?} {:?} {} {:?} {}", r.node_name(), r.scores, r.evaluated, r.reasons, r.unresolvable)
}

/// Runs the same cycles and changes on two snapshots, one keeping resource scores between
/// cycles and one not, and requires the same outcome from every cycle.
#[test]
fn resource_score_cache_changes_nothing() {
    let nodes = mixed_nodes();
    let (mut cached, mut plain) = (snapshot(&nodes), snapshot(&nodes));
    plain.keep_resource_scores(false);
    let profiles: Vec<Profile> = vec![
        default_profile(),
        profile(|c| c.fit_strategy = "MostAllocated".into()),
        profile(|c| {
            c.fit_resources.push(("example.com/gpu".into(), 3));
            c.balanced_resources.push(("ephemeral-storage".into(), 1));
        }),
        profile(|c| {
            c.fit_strategy = "RequestedToCapacityRatio".into();
            c.rtc_shape = vec![(0, 10), (100, 0)];
        }),
    ];
    for i in 0..400 {
        // Mostly one profile and pod kind in a row (the cache's case), sometimes others.
        let prof = &profiles[if i % 50 < 40 { 0 } else { i % profiles.len() }];
        let p = bytes(&kind_of_pod(if i % 10 < 7 { 0 } else { i }));
        let (a, b) = (cached.schedule(prof, &p, true).unwrap(), plain.schedule(prof, &p, true).unwrap());
        assert_eq!(outcome(&a), outcome(&b), "cycle {i}");
        let Some(chosen) = a.node_name().map(str::to_string) else { continue };
        for s in [&mut cached, &mut plain] {
            s.add_pod_json(&format!("default/p{i}"), &p, &chosen).unwrap();
            match i % 40 {
                // Pods leave, nodes change size, go and come back.
                13 => assert!(s.remove_pod(&format!("default/p{}", i - 5))),
                21 => s.set_node_json(&bytes(&node(&format!("n{:03}", i * 7 % 150), "3", "6Gi", 110))).unwrap(),
                29 => assert!(s.remove_node(&chosen)),
                30 => s.set_node_json(&bytes(&nodes[i % nodes.len()])).unwrap(),
                _ => {}
            }
        }
    }
}

/// Three identical nodes; the totals of a 1-cpu pod on each.
fn totals(s: &mut Snapshot, p: &Value) -> Vec<(String, i64)> {
    let r = s.schedule(&default_profile(), &bytes(p), false).unwrap();
    let mut out: Vec<(String, i64)> = r.feasible_names().map(str::to_string).zip(r.scores.iter().copied()).collect();
    out.sort();
    out
}

#[test]
fn taint_toleration_score_follows_prefer_no_schedule_taints() {
    let plain = |n: &str| node(n, "4", "8Gi", 110);
    let mut s = snapshot(&[plain("a"), plain("b"), plain("c")]);
    let p = pod("p", "1", "2Gi");
    // No PreferNoSchedule taint anywhere: TaintToleration gives all 100 (x 3).
    let even = totals(&mut s, &p);
    assert_eq!(even[0].1, 75 + 100 + 300, "Fit 75, Balanced 100, TaintToleration 100 x 3");
    assert!(even.iter().all(|(_, v)| *v == even[0].1));
    // One tainted node: it gets 0 from TaintToleration, the others 100.
    s.set_node_json(&bytes(&with_taint(plain("b"), "spot", "true", "PreferNoSchedule"))).unwrap();
    let t = totals(&mut s, &p);
    assert_eq!((t[0].1 - t[1].1, t[2].1), (300, t[0].1), "{t:?}");
    // A toleration of it: even again (the general path, the taint is still there).
    let mut tolerant = p.clone();
    tolerant["spec"]["tolerations"] = json!([{"key": "spot", "operator": "Exists"}]);
    assert_eq!(totals(&mut s, &tolerant), even);
    // The taint goes (node updated, or node removed and its slot reused): even again.
    s.set_node_json(&bytes(&plain("b"))).unwrap();
    assert_eq!(totals(&mut s, &p), even);
    s.set_node_json(&bytes(&with_taint(plain("c"), "spot", "true", "PreferNoSchedule"))).unwrap();
    assert!(s.remove_node("c"));
    s.set_node_json(&bytes(&plain("d"))).unwrap();
    let after: Vec<i64> = totals(&mut s, &p).into_iter().map(|(_, v)| v).collect();
    assert_eq!(after, vec![even[0].1; 3]);
}

#[test]
fn unschedulable_and_tainted_nodes_as_they_change() {
    let plain = |n: &str| node(n, "4", "8Gi", 110);
    let mut unsched = plain("u");
    unsched["spec"]["unschedulable"] = json!(true);
    let mut s = snapshot(&[plain("a"), unsched.clone(), with_taint(plain("t"), "k", "v", "NoSchedule")]);
    let p = pod("p", "100m", "1Mi");
    let r = s.schedule(&default_profile(), &bytes(&p), false).unwrap();
    assert_eq!(r.feasible_names().collect::<Vec<_>>(), vec!["a"]);
    let want = vec![
        ("node(s) had untolerated taint(s)".to_string(), 1),
        ("node(s) were unschedulable".to_string(), 1),
    ];
    assert_eq!((r.reasons.clone(), r.unresolvable), (want, 2));
    // The pod tolerating both: all three fit.
    let mut tolerant = p.clone();
    tolerant["spec"]["tolerations"] = json!([{"operator": "Exists"}]);
    assert_eq!(feasible(&mut s, &tolerant), vec!["a", "t", "u"]);
    // Both nodes become plain (updated; removed with the slot reused): all fit.
    s.set_node_json(&bytes(&plain("u"))).unwrap();
    assert!(s.remove_node("t"));
    s.set_node_json(&bytes(&plain("t2"))).unwrap();
    assert_eq!(feasible(&mut s, &p), vec!["a", "t2", "u"]);
    // And back.
    s.set_node_json(&bytes(&unsched)).unwrap();
    assert_eq!(feasible(&mut s, &p), vec!["a", "t2"]);
}

#[test]
fn inter_pod_affinity_scores_only_with_terms_about() {
    let mut s = snapshot(&[node("a", "4", "8Gi", 110), node("b", "4", "8Gi", 110)]);
    let mut web = pod("p", "1", "2Gi");
    web["metadata"]["labels"] = json!({"app": "web"});
    assert_eq!(totals(&mut s, &web)[0].1, totals(&mut s, &web)[1].1);
    // A counted pod on "a" preferring web pods near it: the incoming web pod scores higher on "a".
    let mut near = pod("near", "1", "2Gi");
    let term = json!({"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"});
    near["spec"]["affinity"] =
        json!({"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "podAffinityTerm": term}]}});
    s.add_pod_json("default/near", &bytes(&near), "a").unwrap();
    s.add_pod_json("default/other", &bytes(&pod("other", "1", "2Gi")), "b").unwrap();
    let t = totals(&mut s, &web);
    assert_eq!(t[0].1 - t[1].1, 2 * 100, "{t:?}");
    // Gone again: no terms about, equal.
    assert!(s.remove_pod("default/near"));
    s.add_pod_json("default/near2", &bytes(&pod("near2", "1", "2Gi")), "a").unwrap();
    let t = totals(&mut s, &web);
    assert_eq!(t[0].1, t[1].1);
}
