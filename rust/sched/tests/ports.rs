//! NodePorts: host port conflicts, including the 0.0.0.0 wildcard, through the snapshot.

mod common;

use common::*;
use serde_json::{json, Value};

fn with_port(name: &str, ip: &str, protocol: &str, port: i64) -> Value {
    let mut p = pod(name, "10m", "1Mi");
    p["spec"]["containers"][0]["ports"] = json!([{"containerPort": 80, "hostPort": port, "hostIP": ip, "protocol": protocol}]);
    p
}

#[test]
fn conflicts() {
    let mut s = snapshot(&[node("n", "4", "8Gi", 110)]);
    let prof = default_profile();
    s.add_pod_json("default/a", &bytes(&with_port("a", "127.0.0.1", "TCP", 8080)), "n").unwrap();
    let fits = |s: &kubecore_sched::Snapshot, p: Value| s.filter_node(&prof, &bytes(&p), "n", &[]).unwrap().is_empty();
    assert!(!fits(&s, with_port("p", "127.0.0.1", "TCP", 8080)));
    assert!(!fits(&s, with_port("p", "", "", 8080)), "wildcard wanted");
    assert!(!fits(&s, with_port("p", "0.0.0.0", "TCP", 8080)), "explicit wildcard wanted");
    assert!(fits(&s, with_port("p", "127.0.0.2", "TCP", 8080)));
    assert!(fits(&s, with_port("p", "127.0.0.1", "UDP", 8080)));
    assert!(fits(&s, with_port("p", "127.0.0.1", "TCP", 8081)));
    s.add_pod_json("default/b", &bytes(&with_port("b", "", "UDP", 53)), "n").unwrap();
    assert!(!fits(&s, with_port("p", "10.0.0.1", "UDP", 53)), "wildcard used");
    assert!(fits(&s, with_port("p", "10.0.0.1", "TCP", 53)));
    let r = s.schedule(&prof, &bytes(&with_port("p", "", "UDP", 53)), true).unwrap();
    assert_eq!(r.reasons, vec![("node(s) didn't have free ports for the requested pod ports".to_string(), 1)]);
    assert_eq!(r.unresolvable, 0);
    assert!(fits(&s, with_port("p", "", "", 0)), "no host port");
    // A preemption dry run without the user of the port, and the pod's removal, free it.
    assert!(s.filter_node(&prof, &bytes(&with_port("p", "", "UDP", 53)), "n", &["default/b"]).unwrap().is_empty());
    s.remove_pod("default/b");
    assert!(fits(&s, with_port("p", "", "UDP", 53)));
}

#[test]
fn sidecar_ports_count_and_batches_spread_port_users() {
    let mut s = snapshot(&[node("n1", "4", "8Gi", 110), node("n2", "4", "8Gi", 110)]);
    let mut side = pod("s", "10m", "1Mi");
    side["spec"]["initContainers"] = json!([{"name": "i", "restartPolicy": "Always", "ports": [{"containerPort": 1, "hostPort": 9000}]}]);
    s.add_pod_json("default/s", &bytes(&side), "n1").unwrap();
    let prof = default_profile();
    let pods: Vec<(String, Vec<u8>)> = (0..3).map(|i| (format!("default/p{i}"), bytes(&with_port(&format!("p{i}"), "", "", 9000)))).collect();
    let refs: Vec<(&str, &[u8])> = pods.iter().map(|(k, b)| (k.as_str(), b.as_slice())).collect();
    let r = s.schedule_batch(&prof, &refs).unwrap();
    assert_eq!(r[0].node_name(), Some("n2"));
    assert_eq!(r[1].node, None);
    assert_eq!(r[2].node, None);
}
