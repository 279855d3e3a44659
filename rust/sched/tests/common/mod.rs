//! Builders shared by the cargo tests: API JSON for nodes and pods, and a default profile.
#![allow(dead_code)]

use kubecore_sched::{Profile, ProfileConfig, Snapshot};
use serde_json::{json, Value};

pub fn node(name: &str, cpu: &str, memory: &str, pods: i64) -> Value {
    json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods.to_string()}},
    })
}

pub fn with_labels(mut n: Value, labels: &[(&str, &str)]) -> Value {
    for (k, v) in labels {
        n["metadata"]["labels"][*k] = json!(v);
    }
    n
}

pub fn with_taint(mut n: Value, key: &str, value: &str, effect: &str) -> Value {
    let taints = n["spec"]["taints"].as_array().cloned().unwrap_or_default();
    let mut taints = taints;
    taints.push(json!({"key": key, "value": value, "effect": effect}));
    n["spec"]["taints"] = json!(taints);
    n
}

pub fn pod(name: &str, cpu: &str, memory: &str) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]},
    })
}

pub fn bytes(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap()
}

pub fn snapshot(nodes: &[Value]) -> Snapshot {
    let mut s = Snapshot::new(42);
    for n in nodes {
        s.set_node_json(&bytes(n)).unwrap();
    }
    s
}

pub fn profile(f: impl FnOnce(&mut ProfileConfig)) -> Profile {
    let mut c = ProfileConfig::default();
    f(&mut c);
    Profile::new(c).unwrap()
}

pub fn default_profile() -> Profile {
    profile(|_| {})
}

/// The value of one resource in `Snapshot::requested`/`allocatable` output.
pub fn res(list: &[(String, i64)], name: &str) -> i64 {
    list.iter().find(|(n, _)| n == name).map_or(0, |(_, v)| *v)
}

/// The feasible node names for `p` under the default profile, sorted (no selection).
pub fn feasible(s: &mut Snapshot, p: &Value) -> Vec<String> {
    let r = s.schedule(&default_profile(), &bytes(p), false).unwrap();
    let mut names: Vec<String> = r.feasible_names().map(str::to_string).collect();
    names.sort();
    names
}
