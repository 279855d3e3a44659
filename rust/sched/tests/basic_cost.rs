//! A SchedulingBasic-like workload for instruction counts (callgrind) and as an equality
//! digest of the cycle's outcomes. Ignored by default; run in release mode:
//! `cargo test --release -p kubecore-sched --test basic_cost -- --ignored --nocapture`
//! (`KC_PODS`, `KC_VARIANT` = basic | kernels | tight select the size and the cluster;
//! `KC_SHAPES` > 1 cycles through that many pod sizes, one per pod).

mod common;

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use common::*;
use kubecore_sched::Snapshot;
use serde_json::{json, Value};

/// 5000 nodes; `kernels` adds zones, racks, 5 % NoSchedule and 5 % PreferNoSchedule taints and an
/// image; `tight` also has nodes too small for the pod and nodes of one pod, which fill up.
fn cluster(variant: &str) -> Vec<Value> {
    (0..5000)
        .map(|i| {
            let name = format!("node-{i:05}");
            let mut n = match (variant, i % 7) {
                ("tight", 0) => node(&name, "50m", "32Gi", 110),
                ("tight", 1) => node(&name, "4", "400Mi", 110),
                ("tight", _) => node(&name, "4", "32Gi", 1),
                _ => node(&name, "4", "32Gi", 110),
            };
            if variant != "basic" {
                let (zone, rack) = (format!("zone-{}", i % 3), format!("rack-{}", i % 50));
                n = with_labels(n, &[("topology.kubernetes.io/zone", &zone), ("rack", &rack)]);
                if i % 20 == 0 {
                    n = with_taint(n, "dedicated", "infra", "NoSchedule");
                } else if i % 20 == 1 {
                    n = with_taint(n, "spot", "true", "PreferNoSchedule");
                }
                n["status"]["images"] = json!([{"names": ["registry.k8s.io/pause:3.10"], "sizeBytes": 700_000}]);
            }
            n
        })
        .collect()
}

/// templates/pod-default.yaml: one pause container, port 80 (no hostPort), 100m / 500Mi.
fn basic_pod(name: &str) -> Vec<u8> {
    sized_pod(name, "100m", "500Mi")
}

fn sized_pod(name: &str, cpu: &str, memory: &str) -> Vec<u8> {
    let res = json!({"cpu": cpu, "memory": memory});
    bytes(&json!({
        "metadata": {"name": name, "namespace": "sched-0"},
        "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
                                 "ports": [{"containerPort": 80}],
                                 "resources": {"requests": res, "limits": res}}]},
    }))
}

fn build(variant: &str) -> Snapshot {
    let mut s = snapshot(&cluster(variant));
    let names = s.node_names();
    for i in 0..1000 {
        s.add_pod_json(&format!("sched-0/init-{i}"), &basic_pod(&format!("init-{i}")), &names[i % names.len()]).unwrap();
    }
    s
}

fn env(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

#[test]
#[ignore = "a workload for measurements; run explicitly in release mode"]
fn scheduling_basic_cost() {
    let variant = env("KC_VARIANT", "basic");
    let pods: usize = env("KC_PODS", "2000").parse().unwrap();
    let shapes: usize = env("KC_SHAPES", "1").parse().unwrap();
    let mut s = build(&variant);
    let prof = default_profile();
    let mut h = DefaultHasher::new();
    let mut evaluated = 0;
    for i in 0..pods {
        let key = format!("sched-0/pod-{i}");
        let json = match i % shapes.max(1) {
            0 => basic_pod(&format!("pod-{i}")),
            k => sized_pod(&format!("pod-{i}"), &format!("{}m", 100 + 50 * k), &format!("{}Mi", 500 + 100 * k)),
        };
        let r = s.schedule(&prof, &json, true).unwrap();
        (r.node_name(), &r.feasible, &r.scores, r.evaluated, &r.reasons, r.unresolvable).hash(&mut h);
        evaluated += r.evaluated;
        if let Some(n) = r.node_name().map(str::to_string) {
            s.add_pod_json(&key, &json, &n).unwrap();
        }
    }
    println!("variant {variant} shapes {shapes} pods {pods} evaluated/pod {} digest {:016x}", evaluated / pods.max(1), h.finish());
}
