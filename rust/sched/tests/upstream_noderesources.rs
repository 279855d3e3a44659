//! Upstream kube-scheduler's NodeResourcesFit and NodeResourcesBalancedAllocation unit-test tables
//! (pkg/scheduler/framework/plugins/noderesources: fit_test.go, least_allocated_test.go,
//! most_allocated_test.go, requested_to_capacity_ratio_test.go, balanced_allocation_test.go,
//! resource_allocation_test.go; and the request rows of k8s.io/component-helpers/resource
//! helpers_test.go behind them), restated as data: the same nodes, pods and arguments, and
//! upstream's expected outcome. Each case carries upstream's case name.
//!
//! Filter cases check the reasons in upstream's order (`filter_node`) and the status code
//! (a cycle over the one node: Unschedulable, or UnschedulableAndUnresolvable when a request
//! exceeds the node's allocatable). Score cases run a cycle with no filters and the one score
//! plugin at weight 1 (neither plugin normalizes, so the totals are upstream's `Score` values),
//! twice: the second cycle takes the scores kept between cycles.

mod common;

use common::{bytes, profile};
use kubecore_sched::pod::ParsedPod;
use kubecore_sched::score::broken_linear;
use kubecore_sched::{Profile, ProfileConfig, Snapshot};
use serde_json::{json, Map, Value};

type Res<'a> = &'a [(&'a str, &'a str)];

fn list(r: Res<'_>) -> Value {
    Value::Object(r.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<Map<_, _>>())
}

fn node(name: &str, alloc: Res<'_>) -> Value {
    json!({"metadata": {"name": name}, "status": {"allocatable": list(alloc)}})
}

/// `st.MakeNode().Name(name).Capacity(res)`: allocatable `res` plus 32 pods.
fn st_node(name: &str, res: Res<'_>) -> Value {
    let mut n = node(name, res);
    n["status"]["allocatable"]["pods"] = json!("32");
    n
}

/// A pod spec built container by container (`st.MakePod()`, `newResourcePod` and friends).
#[derive(Clone)]
struct Pod(Value);

fn pod() -> Pod {
    Pod(json!({"metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": []}}))
}

fn container(r: Option<Res<'_>>) -> Value {
    match r {
        Some(r) => json!({"name": "c", "resources": {"requests": list(r)}}),
        None => json!({"name": "c"}),
    }
}

impl Pod {
    fn push(mut self, field: &str, c: Value) -> Pod {
        let spec = &mut self.0["spec"];
        if spec[field].is_null() {
            spec[field] = json!([]);
        }
        spec[field].as_array_mut().unwrap().push(c);
        self
    }

    /// `.Req(res)`: one more container requesting `res`.
    fn req(self, r: Res<'_>) -> Pod {
        self.push("containers", container(Some(r)))
    }

    /// `.Container(name)`: one more container without requests.
    fn bare(self) -> Pod {
        self.push("containers", container(None))
    }

    fn init(self, r: Res<'_>) -> Pod {
        self.push("initContainers", container(Some(r)))
    }

    /// `.SidecarReq(res)`: a restartable init container.
    fn sidecar(self, r: Option<Res<'_>>) -> Pod {
        let mut c = container(r);
        c["restartPolicy"] = json!("Always");
        self.push("initContainers", c)
    }

    fn overhead(mut self, r: Res<'_>) -> Pod {
        self.0["spec"]["overhead"] = list(r);
        self
    }

    /// Pod-level `spec.resources.requests`.
    fn pod_level(mut self, r: Res<'_>) -> Pod {
        self.0["spec"]["resources"] = json!({"requests": list(r)});
        self
    }

    fn bytes(&self) -> Vec<u8> {
        bytes(&self.0)
    }
}

/// `framework.Resource` as a container's requests, listed the way upstream's `newResourcePod`
/// lists them: cpu (millicores), memory, pods and ephemeral-storage always (zeros included),
/// then the scalars.
#[derive(Clone, Default)]
struct R {
    cpu: i64,
    mem: i64,
    eph: i64,
    scalars: Vec<(&'static str, i64)>,
}

/// `framework.Resource{}`: every request zero.
fn none() -> R {
    R::default()
}

fn r(cpu: i64, mem: i64) -> R {
    R { cpu, mem, ..R::default() }
}

impl R {
    fn eph(mut self, eph: i64) -> R {
        self.eph = eph;
        self
    }

    fn sc(mut self, name: &'static str, v: i64) -> R {
        self.scalars.push((name, v));
        self
    }

    fn strings(&self) -> Vec<(String, String)> {
        let mut out = vec![
            ("cpu".to_string(), format!("{}m", self.cpu)),
            ("memory".to_string(), self.mem.to_string()),
            ("pods".to_string(), "0".to_string()),
            ("ephemeral-storage".to_string(), self.eph.to_string()),
        ];
        out.extend(self.scalars.iter().map(|(n, v)| (n.to_string(), v.to_string())));
        out
    }
}

fn with_strings<T>(owned: &[(String, String)], f: impl FnOnce(Res<'_>) -> T) -> T {
    let refs: Vec<(&str, &str)> = owned.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    f(&refs)
}

/// `newResourcePod(usage...)`.
fn res_pod(usage: &[R]) -> Pod {
    usage.iter().fold(pod(), |p, u| with_strings(&u.strings(), |res| p.req(res)))
}

/// `newResourceInitPod(newResourcePod(containers...), inits...)`.
fn ip(containers: &[R], inits: &[R]) -> Pod {
    with_inits(res_pod(containers), inits)
}

/// `newResourceInitPod(pod, usage...)`.
fn with_inits(p: Pod, usage: &[R]) -> Pod {
    usage.iter().fold(p, |p, u| with_strings(&u.strings(), |res| p.init(res)))
}

const EXT_A: &str = "example.com/aaa";
const EXT_B: &str = "example.com/bbb";
const K8S_IO_A: &str = "kubernetes.io/something";
const K8S_IO_B: &str = "subdomain.kubernetes.io/something";
const HUGE_A: &str = "hugepages-2Mi";
const DRA_EXT: &str = "extended.resource.dra.io/something";

/// `makeAllocatableResources(milliCPU, memory, pods, extendedA, storage, hugePageA)`.
fn alloc_node(cpu: i64, mem: i64, pods: i64, ext_a: i64, eph: i64, huge: i64) -> Value {
    let owned = [
        ("cpu", format!("{cpu}m")),
        ("memory", mem.to_string()),
        ("pods", pods.to_string()),
        (EXT_A, ext_a.to_string()),
        ("ephemeral-storage", eph.to_string()),
        (HUGE_A, huge.to_string()),
    ];
    let refs: Vec<(&str, &str)> = owned.iter().map(|(a, b)| (*a, b.as_str())).collect();
    node("node", &refs)
}

/// Upstream's Filter outcome for one node.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Want {
    Fits,
    /// Unschedulable with these reasons, in this order.
    U(&'static [&'static str]),
    /// UnschedulableAndUnresolvable with these reasons.
    UU(&'static [&'static str]),
}

use Want::{Fits, U, UU};

fn fit_filter(f: impl FnOnce(&mut ProfileConfig)) -> Profile {
    profile(|c| {
        c.filters = vec!["NodeResourcesFit".into()];
        c.scores.clear();
        f(c);
    })
}

/// Runs NodeResourcesFit's filter for `p` on the only node, "node", holding `existing`.
fn check_filter(name: &str, node_json: &Value, existing: &[Pod], p: &Pod, prof: &Profile, want: Want) {
    let mut s = Snapshot::new(1);
    s.set_node_json(&bytes(node_json)).unwrap();
    for (i, e) in existing.iter().enumerate() {
        s.add_pod_json(&format!("default/e{i}"), &e.bytes(), "node").unwrap();
    }
    let reasons = s.filter_node(prof, &p.bytes(), "node", &[]).unwrap();
    let r = s.schedule(prof, &p.bytes(), false).unwrap();
    let got = match (reasons.is_empty(), r.unresolvable) {
        (true, _) => Fits,
        (false, 0) => U(&[]),
        (false, _) => UU(&[]),
    };
    let (want_reasons, want_kind): (&[&str], Want) = match want {
        Fits => (&[], Fits),
        U(rs) => (rs, U(&[])),
        UU(rs) => (rs, UU(&[])),
    };
    assert_eq!(reasons, want_reasons, "{name}: reasons");
    assert_eq!(got, want_kind, "{name}: status code");
    assert_eq!(r.feasible.len(), usize::from(want == Fits), "{name}: the cycle's feasible nodes");
}

#[test]
fn fit_test_enough_requests() {
    let cpu: &[&str] = &["Insufficient cpu"];
    let mem: &[&str] = &["Insufficient memory"];
    let ext_a: &[&str] = &["Insufficient example.com/aaa"];
    let ext_b: &[&str] = &["Insufficient example.com/bbb"];
    let huge: &[&str] = &["Insufficient hugepages-2Mi"];
    // (name, pod, the existing pod on the node, want); upstream's node is
    // makeAllocatableResources(10, 20, 32, 5, 20, 5).
    let cases: Vec<(&str, Pod, R, Want)> = vec![
        ("no resources requested always fits", pod(), r(10, 20), Fits),
        ("too many resources fails", res_pod(&[r(1, 1)]), r(10, 20), U(&["Insufficient cpu", "Insufficient memory"])),
        ("too many resources fails due to init container cpu", ip(&[r(1, 1)], &[r(3, 1)]), r(8, 19), U(cpu)),
        ("too many resources fails due to highest init container cpu", ip(&[r(1, 1)], &[r(3, 1), r(2, 1)]), r(8, 19), U(cpu)),
        ("too many resources fails due to init container memory", ip(&[r(1, 1)], &[r(1, 3)]), r(9, 19), U(mem)),
        ("too many resources fails due to highest init container memory", ip(&[r(1, 1)], &[r(1, 3), r(1, 2)]), r(9, 19), U(mem)),
        (
            "init container fits because it's the max, not sum, of containers and init containers",
            ip(&[r(1, 1)], &[r(1, 1)]),
            r(9, 19),
            Fits,
        ),
        (
            "multiple init containers fit because it's the max, not sum, of containers and init containers",
            ip(&[r(1, 1)], &[r(1, 1), r(1, 1)]),
            r(9, 19),
            Fits,
        ),
        ("both resources fit", res_pod(&[r(1, 1)]), r(5, 5), Fits),
        ("one resource memory fits", res_pod(&[r(2, 1)]), r(9, 5), U(cpu)),
        ("one resource cpu fits", res_pod(&[r(1, 2)]), r(5, 19), U(mem)),
        ("equal edge case", res_pod(&[r(5, 1)]), r(5, 19), Fits),
        ("equal edge case for init container", ip(&[r(4, 1)], &[r(5, 1)]), r(5, 19), Fits),
        ("extended resource fits", res_pod(&[none().sc(EXT_A, 1)]), none(), Fits),
        ("extended resource fits for init container", ip(&[none()], &[none().sc(EXT_A, 1)]), none(), Fits),
        ("extended resource capacity enforced", res_pod(&[r(1, 1).sc(EXT_A, 10)]), r(0, 0).sc(EXT_A, 0), UU(ext_a)),
        (
            "extended resource capacity enforced for init container",
            ip(&[none()], &[r(1, 1).sc(EXT_A, 10)]),
            r(0, 0).sc(EXT_A, 0),
            UU(ext_a),
        ),
        ("extended resource allocatable enforced", res_pod(&[r(1, 1).sc(EXT_A, 1)]), r(0, 0).sc(EXT_A, 5), U(ext_a)),
        (
            "extended resource allocatable enforced for init container",
            ip(&[none()], &[r(1, 1).sc(EXT_A, 1)]),
            r(0, 0).sc(EXT_A, 5),
            U(ext_a),
        ),
        (
            "extended resource allocatable enforced for multiple containers",
            res_pod(&[r(1, 1).sc(EXT_A, 3), r(1, 1).sc(EXT_A, 3)]),
            r(0, 0).sc(EXT_A, 2),
            UU(ext_a),
        ),
        (
            "extended resource allocatable admits multiple init containers",
            ip(&[none()], &[r(1, 1).sc(EXT_A, 3), r(1, 1).sc(EXT_A, 3)]),
            r(0, 0).sc(EXT_A, 2),
            Fits,
        ),
        (
            "extended resource allocatable enforced for multiple init containers",
            ip(&[none()], &[r(1, 1).sc(EXT_A, 6), r(1, 1).sc(EXT_A, 3)]),
            r(0, 0).sc(EXT_A, 2),
            UU(ext_a),
        ),
        ("extended resource allocatable enforced for unknown resource", res_pod(&[r(1, 1).sc(EXT_B, 1)]), r(0, 0), UU(ext_b)),
        (
            "extended resource allocatable enforced for unknown resource for init container",
            ip(&[none()], &[r(1, 1).sc(EXT_B, 1)]),
            r(0, 0),
            UU(ext_b),
        ),
        (
            "kubernetes.io resource capacity enforced",
            res_pod(&[r(1, 1).sc(K8S_IO_A, 10)]),
            r(0, 0),
            UU(&["Insufficient kubernetes.io/something"]),
        ),
        (
            "kubernetes.io resource capacity enforced for init container",
            ip(&[none()], &[r(1, 1).sc(K8S_IO_B, 10)]),
            r(0, 0),
            UU(&["Insufficient subdomain.kubernetes.io/something"]),
        ),
        ("hugepages resource capacity enforced", res_pod(&[r(1, 1).sc(HUGE_A, 10)]), r(0, 0).sc(HUGE_A, 0), UU(huge)),
        (
            "hugepages resource capacity enforced for init container",
            ip(&[none()], &[r(1, 1).sc(HUGE_A, 10)]),
            r(0, 0).sc(HUGE_A, 0),
            UU(huge),
        ),
        (
            "hugepages resource allocatable enforced for multiple containers",
            res_pod(&[r(1, 1).sc(HUGE_A, 3), r(1, 1).sc(HUGE_A, 3)]),
            r(0, 0).sc(HUGE_A, 2),
            UU(huge),
        ),
        ("resources + pod overhead fits", res_pod(&[r(1, 1)]).overhead(&[("cpu", "3m"), ("memory", "13")]), r(5, 5), Fits),
        (
            "requests + overhead does not fit for memory",
            res_pod(&[r(1, 1)]).overhead(&[("cpu", "1m"), ("memory", "15")]),
            r(5, 5),
            U(mem),
        ),
        (
            "skip checking extended resource request with quantity zero via resource groups",
            res_pod(&[r(1, 1).sc(EXT_A, 0)]),
            r(0, 0).sc(EXT_A, 6),
            Fits,
        ),
        ("skip checking resource request with quantity zero", res_pod(&[none().sc(EXT_A, 1)]), r(20, 30).sc(EXT_A, 1), Fits),
        (
            "both pod-level and container-level resources fit",
            res_pod(&[r(1, 1)]).pod_level(&[("cpu", "1m"), ("memory", "2")]),
            r(5, 5),
            Fits,
        ),
        ("pod-level cpu resource not fit", res_pod(&[r(1, 1)]).pod_level(&[("cpu", "7m"), ("memory", "2")]), r(5, 5), U(cpu)),
        ("pod-level memory resource not fit", res_pod(&[r(1, 1)]).pod_level(&[("cpu", "3m"), ("memory", "2")]), r(5, 19), U(mem)),
        (
            "one pod-level cpu resource fits and all init and non-init containers resources fit",
            with_inits(res_pod(&[r(1, 1)]).pod_level(&[("cpu", "3m"), ("memory", "2")]), &[r(1, 1)]),
            r(5, 19),
            U(mem),
        ),
        // DRAExtendedResource gate on, but the outcome is the device-plugin one (the node has
        // example.com/aaa, or the resource has no DeviceClass).
        ("extended resource backed by device plugin", res_pod(&[none().sc(EXT_A, 1)]), none(), Fits),
        (
            "extended resource backed by DRA not enabled",
            res_pod(&[r(1, 1).sc(DRA_EXT, 1)]),
            r(0, 0),
            UU(&["Insufficient extended.resource.dra.io/something"]),
        ),
        ("extended resource NOT backed by DRA", res_pod(&[r(1, 1).sc(EXT_B, 1)]), r(0, 0), UU(ext_b)),
        (
            "extended resource was backed by Device Plugin (Allocatable: 0), global cache",
            res_pod(&[none().sc(EXT_A, 1)]),
            none().sc(EXT_A, 0),
            Fits,
        ),
    ];
    let n = alloc_node(10, 20, 32, 5, 20, 5);
    let prof = fit_filter(|_| {});
    for (name, p, existing, want) in cases {
        check_filter(name, &n, &[res_pod(&[existing])], &p, &prof, want);
    }
}

#[test]
fn fit_test_enough_requests_ignored_resources() {
    // The two TestEnoughRequests rows with NodeResourcesFitArgs.IgnoredResources /
    // IgnoredResourceGroups (only extended resources can be ignored: kubernetes.io/ ones not).
    let n = alloc_node(10, 20, 32, 5, 20, 5);
    let existing = [res_pod(&[r(0, 0)])];
    let ignoring = fit_filter(|c| c.ignored_resources = vec!["example.com/bbb".into()]);
    check_filter("skip checking ignored extended resource", &n, &existing, &res_pod(&[r(1, 1).sc(EXT_B, 1)]), &ignoring, Fits);
    let ignoring_group = fit_filter(|c| c.ignored_resource_groups = vec!["example.com".into()]);
    let p = res_pod(&[r(1, 1).sc(EXT_B, 1).sc(K8S_IO_A, 1)]);
    let want = UU(&["Insufficient kubernetes.io/something"]);
    check_filter("skip checking ignored extended resource via resource groups", &n, &existing, &p, &ignoring_group, want);
}

#[test]
fn fit_test_pod_level_hugepages_on_an_empty_node() {
    let n = alloc_node(10, 20, 32, 5, 20, 5);
    let prof = fit_filter(|_| {});
    let level =
        |huge: &str| vec![("cpu".to_string(), "3m".to_string()), ("memory".into(), "2".into()), (HUGE_A.into(), huge.into())];
    let cases = [
        ("pod-level hugepages resource fit", with_strings(&level("5"), |l| pod().pod_level(l)), Fits),
        (
            "both pod-level and container-level hugepages resource fit",
            with_strings(&level("5"), |l| res_pod(&[r(1, 1).sc(HUGE_A, 3)]).pod_level(l)),
            Fits,
        ),
        (
            "pod-level hugepages resource not fit",
            with_strings(&level("10"), |l| pod().pod_level(l)),
            UU(&["Insufficient hugepages-2Mi"]),
        ),
    ];
    for (name, p, want) in cases {
        check_filter(name, &n, &[], &p, &prof, want);
    }
}

#[test]
fn fit_test_not_enough_requests() {
    let n = alloc_node(10, 20, 1, 0, 0, 0);
    let prof = fit_filter(|_| {});
    let too_many = U(&["Too many pods"]);
    let cases = [
        ("even without specified resources, predicate fails when there's no space for additional pod", pod(), r(10, 20)),
        ("even if both resources fit, predicate fails when there's no space for additional pod", res_pod(&[r(1, 1)]), r(5, 5)),
        ("even for equal edge case, predicate fails when there's no space for additional pod", res_pod(&[r(5, 1)]), r(5, 19)),
        (
            "even for equal edge case, predicate fails when there's no space for additional pod due to init container",
            with_inits(res_pod(&[r(5, 1)]), &[r(5, 1)]),
            r(5, 19),
        ),
    ];
    for (name, p, existing) in cases {
        check_filter(name, &n, &[res_pod(&[existing])], &p, &prof, too_many);
    }
}

#[test]
fn fit_test_storage_requests() {
    let n = alloc_node(10, 20, 32, 5, 20, 5);
    let prof = fit_filter(|_| {});
    let cases = [
        ("empty storage requested, and pod fits", res_pod(&[r(1, 1)]), r(2, 10), Fits),
        (
            "storage ephemeral local storage request exceeds allocatable",
            res_pod(&[r(0, 0).eph(25)]),
            r(2, 2),
            UU(&["Insufficient ephemeral-storage"]),
        ),
        ("ephemeral local storage is sufficient", with_inits(res_pod(&[r(0, 0).eph(5)]), &[]), r(2, 2).eph(10), Fits),
        ("pod fits", res_pod(&[r(0, 0).eph(10)]), r(2, 2), Fits),
    ];
    for (name, p, existing, want) in cases {
        check_filter(name, &n, &[res_pod(&[existing])], &p, &prof, want);
    }
}

#[test]
fn fit_test_restartable_init_containers() {
    // The SidecarContainers gate is always on in kubecore (the cases with it off that expect a
    // PreFilter rejection are left out).
    let n = alloc_node(2, 0, 1, 0, 0, 0);
    let prof = fit_filter(|_| {});
    let plain = pod().bare();
    let with_sidecar = |req: Option<&str>, sidecar: Option<&str>| {
        let p = match req {
            Some(v) => pod().req(&[("cpu", v)]),
            None => pod().bare(),
        };
        match sidecar {
            Some(v) => p.sidecar(Some(&[("cpu", v)])),
            None => p.sidecar(None),
        }
    };
    let cases = [
        ("allow pod without restartable init containers if sidecar containers is disabled", plain.clone(), Fits),
        ("allow pod without restartable init containers if sidecar containers is enabled", plain, Fits),
        ("allow pod with restartable init containers if sidecar containers is enabled", with_sidecar(None, None), Fits),
        (
            "allow pod if the total requested resources do not exceed the node's allocatable resources",
            with_sidecar(Some("1m"), Some("1m")),
            Fits,
        ),
        (
            "not allow pod if the total requested resources do exceed the node's allocatable resources",
            with_sidecar(Some("1m"), Some("2m")),
            UU(&["Insufficient cpu"]),
        ),
    ];
    for (name, p, want) in cases {
        check_filter(name, &n, &[], &p, &prof, want);
    }
}

#[test]
fn fit_test_is_fit() {
    // TestIsFit: the pod against an empty node (st.MakeNode().Capacity(...)); fits or not.
    let prof = fit_filter(|_| {});
    let cases = [
        ("insufficient resource", pod().req(&[("cpu", "2")]), ("cpu", "1"), false),
        ("sufficient resource", pod().req(&[("cpu", "1")]), ("cpu", "2"), true),
        ("insufficient pod-level resource", pod().pod_level(&[("cpu", "2")]), ("cpu", "1"), false),
        ("sufficient pod-level resource", pod().pod_level(&[("cpu", "2")]), ("cpu", "2"), true),
        ("sufficient pod-level resource hugepages", pod().pod_level(&[(HUGE_A, "2Mi")]), (HUGE_A, "2Mi"), true),
        ("insufficient pod-level resource hugepages", pod().pod_level(&[(HUGE_A, "4Mi")]), (HUGE_A, "2Mi"), false),
    ];
    for (name, p, cap, fits) in cases {
        let mut s = Snapshot::new(1);
        s.set_node_json(&bytes(&st_node("node", &[cap]))).unwrap();
        let reasons = s.filter_node(&prof, &p.bytes(), "node", &[]).unwrap();
        assert_eq!(reasons.is_empty(), fits, "{name}: {reasons:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Scores.

/// A score case: nodes, existing pods (pod, node name), the incoming pod, and the expected
/// score per node in the nodes' order.
struct ScoreCase {
    name: &'static str,
    nodes: Vec<Value>,
    existing: Vec<(Pod, &'static str)>,
    pod: Pod,
    want: Vec<i64>,
}

fn score_case(name: &'static str, nodes: Vec<Value>, existing: Vec<(Pod, &'static str)>, pod: Pod, want: [i64; 2]) -> ScoreCase {
    ScoreCase { name, nodes, existing, pod, want: want.to_vec() }
}

fn node_name(n: &Value) -> String {
    n["metadata"]["name"].as_str().unwrap().to_string()
}

/// The plugin's scores per node (in `case.nodes` order), from a cycle without filters.
fn run_scores(case: &ScoreCase, prof: &Profile) {
    let mut s = Snapshot::new(7);
    for n in &case.nodes {
        s.set_node_json(&bytes(n)).unwrap();
    }
    for (i, (p, on)) in case.existing.iter().enumerate() {
        s.add_pod_json(&format!("default/e{i}"), &p.bytes(), on).unwrap();
    }
    // The second cycle takes the scores the first one kept.
    for round in 0..2 {
        let r = s.schedule(prof, &case.pod.bytes(), false).unwrap();
        let by_name: Vec<(String, i64)> = r.feasible_names().map(str::to_string).zip(r.scores.iter().copied()).collect();
        let got: Vec<i64> = case
            .nodes
            .iter()
            .map(|n| by_name.iter().find(|(x, _)| *x == node_name(n)).map(|&(_, v)| v).expect("every node is scored"))
            .collect();
        assert_eq!(got, case.want, "{} (cycle {round})", case.name);
    }
}

fn fit_scoring(strategy: &str, resources: &[(&str, i64)], shape: &[(i64, i64)]) -> Result<Profile, kubecore_sched::Error> {
    let mut c = ProfileConfig {
        filters: Vec::new(),
        scores: vec![("NodeResourcesFit".into(), 1)],
        fit_strategy: strategy.into(),
        fit_resources: resources.iter().map(|(n, w)| (n.to_string(), *w)).collect(),
        rtc_shape: shape.to_vec(),
        ..ProfileConfig::default()
    };
    c.balanced_resources.clear();
    Profile::new(c)
}

fn balanced_scoring(resources: &[&str]) -> Profile {
    Profile::new(ProfileConfig {
        filters: Vec::new(),
        scores: vec![("NodeResourcesBalancedAllocation".into(), 1)],
        balanced_resources: resources.iter().map(|n| (n.to_string(), 1)).collect(),
        ..ProfileConfig::default()
    })
    .unwrap()
}

const DEFAULT_RESOURCES: &[(&str, i64)] = &[("cpu", 1), ("memory", 1)];
const EXT_RES: &str = "abc.com/xyz";
const EXTENDED_RESOURCE_SET: &[(&str, i64)] = &[("cpu", 1), ("memory", 1), (EXT_RES, 1)];

fn two(a: Value, b: Value) -> Vec<Value> {
    vec![a, b]
}

fn cm(cpu: &'static str, mem: &'static str) -> Vec<(&'static str, &'static str)> {
    vec![("cpu", cpu), ("memory", mem)]
}

/// `st.MakePod().Req(cpu/mem).Req(cpu/mem)...`.
fn reqs(containers: &[(&str, &str)]) -> Pod {
    containers.iter().fold(pod(), |p, (c, m)| p.req(&[("cpu", c), ("memory", m)]))
}

fn on(p: Pod, node: &'static str) -> (Pod, &'static str) {
    (p, node)
}

#[test]
fn fit_test_fit_score() {
    let nodes = || two(st_node("node1", &cm("4000", "10000")), st_node("node2", &cm("6000", "10000")));
    let existing = || vec![on(reqs(&[("2000", "4000")]), "node1"), on(reqs(&[("1000", "2000")]), "node2")];
    let sidecar_nodes = || two(st_node("node1", &cm("4000", "10000")), st_node("node2", &cm("4000", "10000")));
    let sidecar_existing = || {
        vec![on(reqs(&[("1000", "2000")]).sidecar(Some(&cm("1000", "2000"))), "node1"), on(reqs(&[("1000", "2000")]), "node2")]
    };
    let rtc = |shape: &[(i64, i64)]| fit_scoring("RequestedToCapacityRatio", DEFAULT_RESOURCES, shape).unwrap();
    let least = fit_scoring("LeastAllocated", DEFAULT_RESOURCES, &[]).unwrap();
    let most = fit_scoring("MostAllocated", DEFAULT_RESOURCES, &[]).unwrap();
    let case =
        |name, pod: Pod, want: [i64; 2]| ScoreCase { name, nodes: nodes(), existing: existing(), pod, want: want.to_vec() };
    let cases = [
        (
            case("test case for ScoringStrategy RequestedToCapacityRatio case1", reqs(&[("3000", "5000")]), [10, 32]),
            rtc(&[(0, 10), (100, 0)]),
        ),
        (
            case("test case for ScoringStrategy RequestedToCapacityRatio case2", reqs(&[("3000", "5000")]), [95, 68]),
            rtc(&[(0, 0), (100, 10)]),
        ),
        (case("test case for ScoringStrategy MostAllocated", reqs(&[("1000", "2000")]), [67, 36]), most.clone()),
        (case("test case for ScoringStrategy LeastAllocated", reqs(&[("1000", "2000")]), [32, 63]), least.clone()),
        (
            case(
                "test case for ScoringStrategy RequestedToCapacityRatio case1 if PreScore is not called",
                reqs(&[("3000", "5000")]),
                [10, 32],
            ),
            rtc(&[(0, 10), (100, 0)]),
        ),
        (
            case("test case for ScoringStrategy MostAllocated if PreScore is not called", reqs(&[("1000", "2000")]), [67, 36]),
            most.clone(),
        ),
        (
            case("test case for ScoringStrategy LeastAllocated if PreScore is not called", reqs(&[("1000", "2000")]), [32, 63]),
            least.clone(),
        ),
        (
            score_case(
                "test case for ScoringStrategy MostAllocated with sidecar container",
                sidecar_nodes(),
                sidecar_existing(),
                reqs(&[("1000", "2000")]),
                [67, 45],
            ),
            most,
        ),
        (
            score_case(
                "test case for ScoringStrategy LeastAllocated with sidecar container",
                sidecar_nodes(),
                sidecar_existing(),
                reqs(&[("1000", "2000")]),
                [32, 55],
            ),
            least,
        ),
    ];
    for (case, prof) in &cases {
        run_scores(case, prof);
    }
}

fn both_4000() -> Vec<Value> {
    two(st_node("node1", &cm("4000", "10000")), st_node("node2", &cm("4000", "10000")))
}

fn sized_4000_6000() -> Vec<Value> {
    two(st_node("node1", &cm("4000", "10000")), st_node("node2", &cm("6000", "10000")))
}

fn big_nodes(mem2: &'static str) -> Vec<Value> {
    two(st_node("node1", &cm("10000", "20000")), st_node("node2", &cm("10000", mem2)))
}

fn ext_nodes(ext1: Option<&'static str>, ext2: &'static str) -> Vec<Value> {
    let mut n1 = cm("6000", "10000");
    if let Some(v) = ext1 {
        n1.push((EXT_RES, v));
    }
    let mut n2 = cm("6000", "10000");
    n2.push((EXT_RES, ext2));
    two(st_node("node1", &n1), st_node("node2", &n2))
}

fn three_and_five() -> Pod {
    reqs(&[("1000", "2000"), ("2000", "3000")])
}

/// One row of least_allocated_test.go and/or most_allocated_test.go: the two tables share most
/// of their inputs (sometimes under different names), so each row holds both expectations;
/// None where the table has no such row.
struct StrategyCase {
    least: Option<(&'static str, [i64; 2])>,
    most: Option<(&'static str, [i64; 2])>,
    nodes: Vec<Value>,
    existing: Vec<(Pod, &'static str)>,
    pod: Pod,
    resources: &'static [(&'static str, i64)],
}

fn strategy_case(
    least: Option<(&'static str, [i64; 2])>,
    most: Option<(&'static str, [i64; 2])>,
    nodes: Vec<Value>,
    existing: Vec<(Pod, &'static str)>,
    pod: Pod,
    resources: &'static [(&'static str, i64)],
) -> StrategyCase {
    StrategyCase { least, most, nodes, existing, pod, resources }
}

#[test]
fn least_and_most_allocated_scoring_strategies() {
    let both = |name: &'static str, least: [i64; 2], most: [i64; 2]| (Some((name, least)), Some((name, most)));
    let scheduled_with_resources = || {
        vec![
            on(reqs(&[("3000", "0")]), "node1"),
            on(reqs(&[("3000", "0")]), "node1"),
            on(reqs(&[("3000", "0")]), "node2"),
            on(reqs(&[("3000", "5000")]), "node2"),
        ]
    };
    let one_each = || vec![on(reqs(&[("3000", "0")]), "node1"), on(reqs(&[("3000", "5000")]), "node2")];
    let honor = || pod().req(&[("cpu", "3000"), ("memory", "5000"), (EXT_RES, "2")]);
    let no_ext: &[(&str, i64)] = &[(EXT_RES, 2), ("cpu", 1), ("memory", 1)];
    let (l, m) = both("nothing scheduled, nothing requested", [100, 100], [0, 0]);
    let mut cases = vec![strategy_case(l, m, both_4000(), vec![], pod(), DEFAULT_RESOURCES)];
    let (l, m) = both("nothing scheduled, resources requested, differently sized nodes", [37, 50], [62, 50]);
    cases.push(strategy_case(l, m, sized_4000_6000(), vec![], three_and_five(), DEFAULT_RESOURCES));
    let name = "no resources requested, pods scheduled";
    let existing = vec![on(pod(), "node1"), on(pod(), "node1"), on(pod(), "node2"), on(pod(), "node2")];
    cases.push(strategy_case(Some((name, [100, 100])), None, both_4000(), existing, pod(), DEFAULT_RESOURCES));
    let (l, m) = both("no resources requested, pods scheduled with resources", [70, 57], [30, 42]);
    cases.push(strategy_case(l, m, big_nodes("20000"), scheduled_with_resources(), pod(), DEFAULT_RESOURCES));
    let (l, m) = both("resources requested, pods scheduled with resources", [57, 45], [42, 55]);
    cases.push(strategy_case(l, m, big_nodes("20000"), one_each(), three_and_five(), DEFAULT_RESOURCES));
    let name = "resources requested, pods scheduled with resources, differently sized nodes";
    cases.push(strategy_case(Some((name, [57, 60])), None, big_nodes("50000"), one_each(), three_and_five(), DEFAULT_RESOURCES));
    let name = "requested resources exceed node capacity";
    cases.push(strategy_case(Some((name, [50, 25])), None, both_4000(), one_each(), reqs(&[("3000", "0")]), DEFAULT_RESOURCES));
    let name = "zero node resources, pods scheduled with resources";
    let empty = two(node("node1", &[]), node("node2", &[]));
    cases.push(strategy_case(Some((name, [0, 0])), None, empty, one_each(), pod(), DEFAULT_RESOURCES));
    let name = "resources requested equal node capacity";
    let nodes = two(st_node("node1", &cm("5000", "10000")), st_node("node2", &cm("10000", "9000")));
    let p = reqs(&[("2000", "4000"), ("3000", "5000")]);
    cases.push(strategy_case(None, Some((name, [95, 75])), nodes, vec![], p, DEFAULT_RESOURCES));
    cases.push(strategy_case(
        Some((
            "nothing scheduled, resources requested with different weight on CPU and memory, differently sized nodes",
            [41, 50],
        )),
        Some(("nothing scheduled, resources requested, differently sized nodes", [58, 50])),
        sized_4000_6000(),
        vec![],
        three_and_five(),
        &[("memory", 2), ("cpu", 1)],
    ));
    let name = "no resources requested, pods scheduled, nonzero request for resource";
    let nodes = two(st_node("node1", &cm("250m", "1000Mi")), st_node("node2", &cm("250m", "1000Mi")));
    let existing = vec![on(pod().bare(), "node1"), on(pod().bare(), "node1")];
    cases.push(strategy_case(None, Some((name, [80, 30])), nodes, existing, pod().bare(), DEFAULT_RESOURCES));
    let (l, m) = both("bypass extended resource if the pod does not request", [50, 50], [50, 50]);
    cases.push(strategy_case(l, m, ext_nodes(None, "4"), vec![], three_and_five(), EXTENDED_RESOURCE_SET));
    let (l, m) = (
        Some(("honor extended resource if the pod requests", [50, 60])),
        Some(("honor extended resource if the pod request", [50, 40])),
    );
    cases.push(strategy_case(l, m, ext_nodes(Some("4"), "10"), vec![], honor(), EXTENDED_RESOURCE_SET));
    let (l, m) = both("if the node doesn't have a resource", [55, 55], [45, 45]);
    cases.push(strategy_case(l, m, ext_nodes(None, "4"), vec![], reqs(&[("3000", "4000")]), no_ext));
    for c in cases {
        for (strategy, expected) in [("LeastAllocated", c.least), ("MostAllocated", c.most)] {
            let Some((name, want)) = expected else { continue };
            let prof = fit_scoring(strategy, c.resources, &[]).unwrap();
            let case =
                ScoreCase { name, nodes: c.nodes.clone(), existing: c.existing.clone(), pod: c.pod.clone(), want: want.to_vec() };
            run_scores(&case, &prof);
        }
    }
}

#[test]
fn least_and_most_allocated_reject_bad_weights() {
    // "resource with negative weight", "resource with zero weight", "resource weight larger
    // than MaxNodeScore" in both tables.
    for strategy in ["LeastAllocated", "MostAllocated"] {
        for resources in
            [&[("memory", -1), ("cpu", 1)][..], &[("memory", 1), ("cpu", 0)], &[("memory", 1), ("cpu", 101)], &[("memory", 101)]]
        {
            assert!(fit_scoring(strategy, resources, &[]).is_err(), "{strategy} {resources:?}");
        }
    }
}

#[test]
fn least_and_most_allocated_without_resources() {
    // "Resources not set, pods scheduled with error": upstream's Score returns an Error status
    // (and score 0) when the strategy has no resources; kubecore scores 0 without an error
    // (the configuration's defaulting always supplies cpu and memory upstream).
    for strategy in ["LeastAllocated", "MostAllocated"] {
        let prof = fit_scoring(strategy, &[], &[]).unwrap();
        let case =
            score_case("Resources not set, pods scheduled with error", sized_4000_6000(), vec![], three_and_five(), [0, 0]);
        run_scores(&case, &prof);
    }
}

#[test]
fn requested_to_capacity_ratio_scoring_strategy() {
    let shape = [(0, 10), (100, 0)];
    let prof = fit_scoring("RequestedToCapacityRatio", DEFAULT_RESOURCES, &shape).unwrap();
    let cases = [
        score_case(
            "nothing scheduled, nothing requested (default - least requested nodes have priority)",
            both_4000(),
            vec![on(pod(), "node1"), on(pod(), "node1")],
            pod(),
            [100, 100],
        ),
        score_case(
            "nothing scheduled, resources requested, differently sized nodes (default - least requested nodes have priority)",
            sized_4000_6000(),
            vec![on(pod(), "node1"), on(pod(), "node1")],
            three_and_five(),
            [38, 50],
        ),
        score_case(
            "no resources requested, pods scheduled with resources (default - least requested nodes have priority)",
            sized_4000_6000(),
            vec![on(reqs(&[("3000", "5000")]), "node1"), on(reqs(&[("3000", "5000")]), "node2")],
            pod(),
            [38, 50],
        ),
    ];
    for case in &cases {
        run_scores(case, &prof);
    }
}

#[test]
fn requested_to_capacity_ratio_rejects_bad_shapes() {
    // Not an upstream table row: the shape checks of ValidateNodeResourcesFitArgs that the
    // RequestedToCapacityRatio tests rely on (scores 0..10, utilization 0..100, increasing).
    for shape in [&[][..], &[(0, 11)], &[(101, 1)], &[(-1, 1)], &[(10, 1), (10, 2)], &[(50, 1), (10, 2)]] {
        assert!(fit_scoring("RequestedToCapacityRatio", DEFAULT_RESOURCES, shape).is_err(), "{shape:?}");
    }
}

#[test]
fn broken_linear_function() {
    // TestBrokenLinearFunction: case_0, case_1, case_2 (unscaled shapes, as upstream's helper).
    type Points = &'static [(i64, i64)];
    let tests: [(Points, Points); 3] = [
        (
            &[(10, 1), (90, 9)],
            &[(-10, 1), (0, 1), (9, 1), (10, 1), (15, 1), (19, 1), (20, 2), (89, 8), (90, 9), (99, 9), (100, 9), (110, 9)],
        ),
        (&[(0, 2), (40, 10), (100, 0)], &[(-10, 2), (0, 2), (20, 6), (30, 8), (40, 10), (70, 5), (100, 0), (110, 0)]),
        (&[(0, 2), (40, 2), (100, 2)], &[(-10, 2), (0, 2), (20, 2), (30, 2), (40, 2), (70, 2), (100, 2), (110, 2)]),
    ];
    for (i, (points, assertions)) in tests.iter().enumerate() {
        for &(p, want) in assertions.iter() {
            assert_eq!(broken_linear(points, p), want, "case_{i}: points={points:?}, p={p}");
        }
    }
}

/// `makeNode(name, milliCPU, memory, extendedResource)` of the noderesources tests.
fn make_node(name: &str, milli_cpu: i64, memory: i64, ext: &[(&str, i64)]) -> Value {
    let mut owned = vec![("cpu".to_string(), format!("{milli_cpu}m")), ("memory".to_string(), memory.to_string())];
    owned.extend(ext.iter().map(|(n, v)| (n.to_string(), v.to_string())));
    with_strings(&owned, |res| node(name, res))
}

#[test]
fn resource_bin_packing_single_extended() {
    let mem = 10000 * 1024 * 1024;
    let nodes =
        || two(make_node("node1", 4000, mem, &[("intel.com/foo", 8)]), make_node("node2", 4000, mem, &[("intel.com/foo", 4)]));
    let prof = fit_scoring("RequestedToCapacityRatio", &[("intel.com/foo", 1)], &[(0, 0), (100, 1)]).unwrap();
    let foo = |v: &'static str| pod().req(&[("intel.com/foo", v)]);
    // Upstream's pods without a node (st.MakePod().Obj()) are on no node: left out.
    let cases = [
        score_case("nothing scheduled, nothing requested", nodes(), vec![], pod(), [0, 0]),
        score_case("resources requested, pods scheduled with less resources", nodes(), vec![], foo("2"), [2, 5]),
        score_case(
            "resources requested, pods scheduled with resources, on node with existing pod running ",
            nodes(),
            vec![on(foo("2"), "node2")],
            foo("2"),
            [2, 10],
        ),
        score_case("resources requested, pods scheduled with more resources", nodes(), vec![], foo("4"), [5, 10]),
    ];
    for case in &cases {
        run_scores(case, &prof);
    }
}

#[test]
fn resource_bin_packing_multiple_extended() {
    let mem = 10000 * 1024 * 1024;
    let nodes = || {
        two(
            make_node("node1", 4000, mem, &[("intel.com/foo", 8), ("intel.com/bar", 4)]),
            make_node("node2", 4000, mem, &[("intel.com/foo", 4), ("intel.com/bar", 8)]),
        )
    };
    let prof =
        fit_scoring("RequestedToCapacityRatio", &[("intel.com/foo", 3), ("intel.com/bar", 5)], &[(0, 0), (100, 1)]).unwrap();
    let foo_bar = |foo: &'static str, bar: &'static str| pod().req(&[("intel.com/foo", foo), ("intel.com/bar", bar)]);
    let cases = [
        score_case("nothing scheduled, nothing requested", nodes(), vec![], pod(), [0, 0]),
        score_case("resources requested, pods scheduled with less resources", nodes(), vec![], foo_bar("2", "2"), [4, 3]),
        score_case(
            "resources requested, pods scheduled with resources, on node with existing pod running ",
            nodes(),
            vec![on(foo_bar("4", "2"), "node2")],
            foo_bar("2", "2"),
            [4, 7],
        ),
        score_case("resources requested, pods scheduled with more resources", nodes(), vec![], foo_bar("4", "2"), [5, 5]),
    ];
    for case in &cases {
        run_scores(case, &prof);
    }
}

#[test]
fn node_resources_balanced_allocation() {
    let cpu_only = || reqs(&[("1000m", "0"), ("2000m", "0")]);
    let cpu_and_memory = || reqs(&[("1000m", "2000"), ("2000m", "3000")]);
    let cpu_memory_gpu = || {
        pod().req(&[("cpu", "1000m"), ("memory", "2000")]).req(&[("cpu", "2000m"), ("memory", "3000"), ("nvidia.com/gpu", "3")])
    };
    let gpu: &[(&str, i64)] = &[("nvidia.com/gpu", 8)];
    let default = balanced_scoring(&["cpu", "memory"]);
    let with_gpu = balanced_scoring(&["cpu", "memory", "nvidia.com/gpu"]);
    // Upstream's existing pods carry their node in spec.nodeName (cpuOnly: node1, cpuAndMemory:
    // node2, cpuAndMemoryAndGPU: node1).
    let cpu_only_and_cpu_memory = || vec![on(cpu_only(), "node1"), on(cpu_and_memory(), "node2")];
    let cases = [
        (
            // PreScore says Skip: the plugin adds nothing (0 on every node).
            score_case(
                "nothing scheduled, nothing requested, skip in PreScore",
                two(make_node("node1", 4000, 10000, &[]), make_node("node2", 4000, 10000, &[])),
                vec![],
                pod(),
                [0, 0],
            ),
            &default,
        ),
        (
            score_case(
                "nothing scheduled, resources requested, differently sized nodes",
                two(make_node("node1", 4000, 10000, &[]), make_node("node2", 6000, 10000, &[])),
                vec![],
                cpu_and_memory(),
                [87, 100],
            ),
            &default,
        ),
        (
            score_case(
                "resources requested, pods scheduled with resources",
                two(make_node("node1", 10000, 20000, &[]), make_node("node2", 10000, 20000, &[])),
                cpu_only_and_cpu_memory(),
                cpu_and_memory(),
                [82, 95],
            ),
            &default,
        ),
        (
            score_case(
                "resources requested, pods scheduled with resources, differently sized nodes",
                two(make_node("node1", 10000, 20000, &[]), make_node("node2", 10000, 50000, &[])),
                cpu_only_and_cpu_memory(),
                cpu_and_memory(),
                [82, 80],
            ),
            &default,
        ),
        (
            score_case(
                "requested resources at node capacity",
                two(make_node("node1", 6000, 10000, &[]), make_node("node2", 6000, 10000, &[])),
                cpu_only_and_cpu_memory(),
                cpu_only(),
                [50, 75],
            ),
            &default,
        ),
        (
            score_case(
                "include scalar resource on a node for balanced resource allocation",
                two(make_node("node1", 3500, 40000, gpu), make_node("node2", 3500, 40000, gpu)),
                vec![on(cpu_and_memory(), "node2"), on(cpu_memory_gpu(), "node1")],
                pod().req(&[("memory", "0"), ("nvidia.com/gpu", "1")]),
                [70, 65],
            ),
            &with_gpu,
        ),
        (
            score_case(
                "node without the scalar resource should skip the scalar resource",
                two(make_node("node1", 3500, 40000, gpu), make_node("node2", 3500, 40000, &[])),
                vec![],
                cpu_and_memory(),
                [63, 63],
            ),
            &with_gpu,
        ),
        (
            score_case(
                "resources requested, pods scheduled with resources if PreScore not called",
                two(make_node("node1", 10000, 20000, &[]), make_node("node2", 10000, 20000, &[])),
                cpu_only_and_cpu_memory(),
                cpu_and_memory(),
                [82, 95],
            ),
            &default,
        ),
    ];
    for (case, prof) in &cases {
        run_scores(case, prof);
    }
}

#[test]
fn resource_allocation_scorer_calculate_requests() {
    // TestResourceAllocationScorerCalculateRequests: the pod's non-zero requests (cpu in
    // millicores, memory in bytes) that NodeResourcesFit scores with.
    const ONE_MI: i64 = 1 << 20;
    const CPU: i64 = 100; // DefaultMilliCPURequest
    const MEM: i64 = 200 * ONE_MI; // DefaultMemoryRequest
    let one = || pod().req(&[("cpu", "1"), ("memory", "1Mi")]);
    let overhead = |p: Pod| p.overhead(&[("cpu", "1"), ("memory", "1Mi")]);
    let requestless_init = || pod().push("initContainers", container(None));
    let cases = [
        ("overhead only", overhead(pod()), 1000, ONE_MI),
        ("1x requestless container", pod().bare(), CPU, MEM),
        ("2x requestless container", pod().bare().bare(), 2 * CPU, 2 * MEM),
        ("request container + requestless container", one().bare(), 1000 + CPU, ONE_MI + MEM),
        ("container + requestless container + overhead", overhead(one().bare()), 2000 + CPU, 2 * ONE_MI + MEM),
        (
            "init container + container + requestless container + overhead",
            overhead(pod().init(&[("cpu", "3")]).req(&[("cpu", "1"), ("memory", "1Mi")]).bare()),
            4000,
            2 * ONE_MI + MEM,
        ),
        (
            "requestless init container + small init container + small container ",
            requestless_init().init(&[("cpu", "1m"), ("memory", "1")]).req(&[("cpu", "3m"), ("memory", "3")]),
            CPU,
            MEM,
        ),
        (
            "requestless init container + small init container + small container + requestless container ",
            requestless_init().init(&[("cpu", "1m"), ("memory", "1")]).req(&[("cpu", "3m"), ("memory", "3")]).bare(),
            3 + CPU,
            3 + MEM,
        ),
    ];
    for (name, p, cpu, mem) in cases {
        let parsed = ParsedPod::from_json(&p.bytes()).unwrap();
        assert_eq!((parsed.requests.non_zero_milli_cpu, parsed.requests.non_zero_memory), (cpu, mem), "{name}");
    }
}

/// The scheduler's view of a pod's requests (`SetMaxResource` over `PodRequests`): cpu in
/// millicores, memory, and the scalar resources sorted by name.
fn scheduler_requests(p: &Pod) -> (i64, i64, Vec<(String, i64)>) {
    let r = ParsedPod::from_json(&p.bytes()).unwrap().requests.requests;
    let mut scalars = r.scalars.clone();
    scalars.sort();
    (r.milli_cpu, r.memory, scalars)
}

#[test]
fn component_helpers_pod_requests() {
    // k8s.io/component-helpers/resource helpers_test.go, the request side of
    // TestPodRequestsAndLimits, TestPodResourceRequests and TestPodLevelResourceRequests
    // (PodRequests with the options the scheduler uses for a pod it places), as the scheduler
    // sees them. Limits are not read by the scheduler and are left out of the pods.
    const MI: i64 = 1 << 20;
    let cpu = |v: &str| pod().req(&[("cpu", v)]);
    let sidecar = |p: Pod, v: &str| p.sidecar(Some(&[("cpu", v)]));
    let huge_2m = "hugepages-2Mi";
    let huge_1g = "hugepages-1Gi";
    // (name, pod, (milli cpu, memory, scalars))
    type Expected = (i64, i64, Vec<(&'static str, i64)>);
    let cases: Vec<(&str, Pod, Expected)> = vec![
        // TestPodRequestsAndLimits (getPod: one container and the overhead).
        ("just-limit-no-overhead", pod().bare(), (0, 0, vec![])),
        ("just-overhead", pod().bare().overhead(&[("cpu", "5"), ("memory", "5")]), (5000, 5, vec![])),
        ("req-and-overhead", pod().req(&[("cpu", "1"), ("memory", "10")]).overhead(&[("cpu", "5"), ("memory", "5")]), (6000, 15, vec![])),
        (
            "all-req-lim-and-overhead",
            pod().req(&[("cpu", "1"), ("memory", "10")]).overhead(&[("cpu", "5"), ("memory", "5")]),
            (6000, 15, vec![]),
        ),
        (
            "req-some-lim-and-overhead",
            pod().req(&[("cpu", "1"), ("memory", "10")]).overhead(&[("cpu", "5"), ("memory", "5")]),
            (6000, 15, vec![]),
        ),
        // TestPodResourceRequests.
        ("nil options, larger init container", cpu("1").init(&[("cpu", "4")]), (4000, 0, vec![])),
        ("nil options, larger containers", cpu("2").req(&[("cpu", "3")]).init(&[("cpu", "2")]), (5000, 0, vec![])),
        (
            "pod overhead included",
            cpu("2").req(&[("cpu", "3")]).init(&[("cpu", "2")]).overhead(&[("cpu", "1"), ("memory", "1Gi")]),
            (6000, 1 << 30, vec![]),
        ),
        ("resized, infeasible, but don't use status", cpu("4"), (4000, 0, vec![])),
        ("resized, restartable init container, infeasible, but don't use status", sidecar(pod(), "4"), (4000, 0, vec![])),
        ("restartable init container", sidecar(pod(), "1").req(&[("cpu", "1")]), (2000, 0, vec![])),
        (
            "multiple restartable init containers",
            sidecar(sidecar(sidecar(pod().init(&[("cpu", "5")]), "1"), "2"), "3").req(&[("cpu", "1")]),
            (7000, 0, vec![]),
        ),
        (
            "multiple restartable and regular init containers",
            sidecar(sidecar(sidecar(pod().init(&[("cpu", "5")]), "1"), "2").init(&[("cpu", "5")]), "3").req(&[("cpu", "1")]),
            (8000, 0, vec![]),
        ),
        ("restartable-init, init and regular", sidecar(pod(), "10").init(&[("cpu", "200")]).req(&[("cpu", "100")]), (210_000, 0, vec![])),
        // TestPodLevelResourceRequests (SkipPodLevelResources false: the PodLevelResources gate on).
        ("nil", pod(), (0, 0, vec![])),
        ("pod level memory resource with SkipPodLevelResources false", pod().pod_level(&[("memory", "2Mi")]), (0, 2 * MI, vec![])),
        (
            "pod level memory and container level cpu resources with SkipPodLevelResources false",
            cpu("2m").pod_level(&[("memory", "2Mi")]),
            (2, 2 * MI, vec![]),
        ),
        (
            "pod level unsupported resources set at both pod-level and container-level with SkipPodLevelResources false",
            pod().req(&[("storage", "3Mi")]).pod_level(&[("storage", "2Mi")]),
            (0, 0, vec![]),
        ),
        (
            "pod level unsupported resources set at pod-level with SkipPodLevelResources false",
            pod().req(&[("memory", "3Mi")]).pod_level(&[("storage", "2Mi")]),
            (0, 3 * MI, vec![]),
        ),
        (
            "only container level resources set with SkipPodLevelResources false",
            pod().req(&[("memory", "3Mi"), ("cpu", "2m")]),
            (2, 3 * MI, vec![]),
        ),
        (
            "both container-level and pod-level resources set with SkipPodLevelResources false",
            pod().req(&[("memory", "3Mi"), ("cpu", "2m")]).pod_level(&[("memory", "6Mi"), ("cpu", "8m")]),
            (8, 6 * MI, vec![]),
        ),
        (
            "container-level resources and init container set with SkipPodLevelResources false",
            pod().req(&[("memory", "3Mi"), ("cpu", "2m")]).init(&[("memory", "5Mi"), ("cpu", "4m")]),
            (4, 5 * MI, vec![]),
        ),
        (
            "container-level resources and sidecar container set with SkipPodLevelResources false",
            pod().req(&[("memory", "3Mi"), ("cpu", "2m")]).sidecar(Some(&[("memory", "5Mi"), ("cpu", "4m")])),
            (6, 8 * MI, vec![]),
        ),
        (
            "container-level resources, init and sidecar container set with SkipPodLevelResources false",
            pod()
                .req(&[("memory", "3Mi"), ("cpu", "2m")])
                .sidecar(Some(&[("memory", "5Mi"), ("cpu", "4m")]))
                .init(&[("memory", "6Mi"), ("cpu", "8m")]),
            (12, 11 * MI, vec![]),
        ),
        (
            "pod-level resources, container-level resources, init and sidecar container set with SkipPodLevelResources false",
            pod()
                .req(&[("memory", "3Mi"), ("cpu", "2m")])
                .sidecar(Some(&[("memory", "5Mi"), ("cpu", "4m")]))
                .init(&[("memory", "6Mi"), ("cpu", "8m")])
                .pod_level(&[("memory", "15Mi"), ("cpu", "18m")]),
            (18, 15 * MI, vec![]),
        ),
        (
            "pod-level resources, hugepage request/limit single page size",
            pod().pod_level(&[("memory", "10Mi"), (huge_2m, "2Mi")]),
            (0, 10 * MI, vec![(huge_2m, 2 * MI)]),
        ),
        (
            "pod-level resources, hugepage request/limit multiple page sizes",
            pod().pod_level(&[("cpu", "1"), (huge_2m, "2Mi"), (huge_1g, "1Gi")]),
            (1000, 0, vec![(huge_1g, 1 << 30), (huge_2m, 2 * MI)]),
        ),
        (
            "pod-level resources, container-level resources, hugepage request/limit single page size",
            pod().req(&[(huge_2m, "6Mi")]).pod_level(&[("cpu", "1"), (huge_2m, "10Mi")]),
            (1000, 0, vec![(huge_2m, 10 * MI)]),
        ),
        (
            "pod-level resources, container-level resources, hugepage request/limit multiple page sizes",
            pod().req(&[("cpu", "1"), (huge_1g, "2Gi")]).pod_level(&[("cpu", "1"), (huge_2m, "10Mi"), (huge_1g, "2Gi")]),
            (1000, 0, vec![(huge_1g, 2 << 30), (huge_2m, 10 * MI)]),
        ),
        (
            "pod-level resources, container-level resources, hugepage request/limit multiple page sizes between pod-level and container-level",
            pod().req(&[("memory", "4Mi"), (huge_1g, "1Gi")]).pod_level(&[("cpu", "1"), (huge_2m, "10Mi")]),
            (1000, 4 * MI, vec![(huge_1g, 1 << 30), (huge_2m, 10 * MI)]),
        ),
    ];
    for (name, p, (cpu, mem, scalars)) in cases {
        let scalars: Vec<(String, i64)> = scalars.into_iter().map(|(n, v)| (n.to_string(), v)).collect();
        assert_eq!(scheduler_requests(&p), (cpu, mem, scalars), "{name}");
    }
}

#[test]
fn component_helpers_pod_requests_with_resize_status() {
    // TestPodResourceRequests rows with UseStatusResources (InPlacePodVerticalScaling, on by
    // default upstream): what NodeInfo counts for a bound pod whose resize is pending or in
    // progress. Checked as the node's requested cpu/memory/ephemeral-storage with the pod on it.
    let status = |name: &str, requests: Option<Value>, allocated: Option<Value>| {
        let mut s = json!({"name": name});
        if let Some(r) = requests {
            s["resources"] = json!({"requests": r});
        }
        if let Some(a) = allocated {
            s["allocatedResources"] = a;
        }
        s
    };
    let infeasible = json!([{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]);
    let named = |mut p: Pod, field: &str, name: &str| {
        p.0["spec"][field][0]["name"] = json!(name);
        p
    };
    let with_status = |mut p: Pod, field: &str, statuses: Vec<Value>, conditions: Option<&Value>| {
        p.0["status"][field] = json!(statuses);
        if let Some(c) = conditions {
            p.0["status"]["conditions"] = c.clone();
        }
        p
    };
    let cases = [
        (
            "resized, infeasible",
            with_status(
                named(pod().req(&[("cpu", "4")]), "containers", "container-1"),
                "containerStatuses",
                vec![status("container-1", Some(json!({"cpu": "2"})), None)],
                Some(&infeasible),
            ),
            (2000, 0, 0),
        ),
        (
            "resized, infeasible & in-progress",
            with_status(
                named(pod().req(&[("cpu", "6")]), "containers", "container-1"),
                "containerStatuses",
                vec![status("container-1", Some(json!({"cpu": "2"})), Some(json!({"cpu": "4"})))],
                Some(&infeasible),
            ),
            (4000, 0, 0),
        ),
        (
            "resized: per-resource 3-way maximum",
            with_status(
                named(pod().req(&[("cpu", "30m"), ("memory", "20M"), ("ephemeral-storage", "10G")]), "containers", "container-1"),
                "containerStatuses",
                vec![status(
                    "container-1",
                    Some(json!({"cpu": "10m", "memory": "30M", "ephemeral-storage": "20G"})),
                    Some(json!({"cpu": "20m", "memory": "10M", "ephemeral-storage": "30G"})),
                )],
                None,
            ),
            (30, 30_000_000, 30_000_000_000),
        ),
        (
            "resized, restartable init container, infeasible",
            with_status(
                named(pod().sidecar(Some(&[("cpu", "4")])), "initContainers", "restartable-init-1"),
                "initContainerStatuses",
                vec![status("restartable-init-1", Some(json!({"cpu": "2"})), None)],
                Some(&infeasible),
            ),
            (2000, 0, 0),
        ),
    ];
    for (name, p, want) in cases {
        assert_eq!(requested_with_pod(&p.0), want, "{name}");
    }
}

/// The node's requested cpu (millicores), memory and ephemeral-storage once the bound `pod` is
/// counted on it (NodeInfo's `calculateResource`).
fn requested_with_pod(pod: &Value) -> (i64, i64, i64) {
    let mut s = Snapshot::new(1);
    s.set_node_json(&bytes(&st_node("node", &[("cpu", "100"), ("memory", "100G"), ("ephemeral-storage", "100G")]))).unwrap();
    s.add_pod_json("default/p", &bytes(pod), "node").unwrap();
    let req = s.requested("node").unwrap();
    let get = |n: &str| req.iter().find(|(k, _)| k == n).map_or(0, |&(_, v)| v);
    (get("cpu"), get("memory"), get("ephemeral-storage"))
}

#[test]
fn component_helpers_pod_requests_with_status_resources() {
    // The other helpers_test.go rows with status resources, with the options the scheduler counts
    // a bound pod with (UseStatusResources, InPlacePodLevelResourcesVerticalScalingEnabled and
    // pod-level resources on; DRA node-allocatable claims off): the request side of
    // TestPodResourceRequests, TestAggregateContainerRequestsAndLimits,
    // TestPodLevelResourceRequests and TestPodRequestsAndLimitsVerticalScalingWrappers.
    // Limits are not read by the scheduler and are left out.
    const MI: i64 = 1 << 20;
    let c = |name: &str, requests: Value| json!({"name": name, "resources": {"requests": requests}});
    let sidecar = |name: &str, requests: Value| json!({"name": name, "restartPolicy": "Always", "resources": {"requests": requests}});
    let st = |name: &str, requests: Option<Value>, allocated: Option<Value>| {
        let mut s = json!({"name": name});
        if let Some(r) = requests {
            s["resources"] = json!({"requests": r});
        }
        if let Some(a) = allocated {
            s["allocatedResources"] = a;
        }
        s
    };
    let infeasible = json!([{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]);
    let pod = |spec: Value, status: Value| json!({"metadata": {"name": "p", "namespace": "default"}, "spec": spec, "status": status});
    let cpu = |v: &str| json!({"cpu": v});
    // Pod-level spec requests of 1 cpu and 100Mi with an overhead of 100m and 10Mi, and the given
    // pod-level status.resources.requests and status.allocatedResources.
    let overhead_pod = |status: Value, allocated: Value| {
        pod(
            json!({"containers": [], "resources": {"requests": {"cpu": "1", "memory": "100Mi"}}, "overhead": {"cpu": "100m", "memory": "10Mi"}}),
            json!({"resources": {"requests": status}, "allocatedResources": allocated}),
        )
    };
    let both = json!({"cpu": "1100m", "memory": "110Mi"});
    let spec_values = json!({"cpu": "1", "memory": "100Mi"});
    // Both containers resized the other way: allocated 2+1 against spec 1+2 (the same pod in two tables).
    let max_of_sums = pod(
        json!({"containers": [c("c1", cpu("1")), c("c2", cpu("2"))]}),
        json!({"containerStatuses": [st("c1", None, Some(cpu("2"))), st("c2", None, Some(cpu("1")))]}),
    );
    let cases = vec![
        // TestPodResourceRequests.
        (
            "resized, no resize status",
            pod(json!({"containers": [c("container-1", cpu("4"))]}), json!({"containerStatuses": [st("container-1", Some(cpu("2")), None)]})),
            (4000, 0, 0),
        ),
        (
            "resized, restartable init container, no resize status",
            pod(
                json!({"initContainers": [sidecar("restartable-init-1", cpu("4"))]}),
                json!({"initContainerStatuses": [st("restartable-init-1", Some(cpu("2")), None)]}),
            ),
            (4000, 0, 0),
        ),
        (
            "aggregate request resolves max of sums instead of sum of maxes",
            max_of_sums.clone(),
            (3000, 0, 0),
        ),
        // TestAggregateContainerRequestsAndLimits.
        (
            "regularcontainers with empty requests, but status with non-empty requests",
            pod(json!({"containers": [{"name": "container-1", "resources": {}}]}), json!({"containerStatuses": [st("container-1", Some(cpu("2")), None)]})),
            (2000, 0, 0),
        ),
        (
            "always-restart init containers with empty requests, but status with non-empty requests",
            pod(
                json!({"initContainers": [{"name": "container-1", "restartPolicy": "Always", "resources": {}}]}),
                json!({"initContainerStatuses": [st("container-1", Some(cpu("2")), None)]}),
            ),
            (2000, 0, 0),
        ),
        (
            "aggregate container request resolves max of sums instead of sum of maxes",
            max_of_sums.clone(),
            (3000, 0, 0),
        ),
        (
            "aggregate container request/limit resolves directly from pod status when PLR vertical scaling enabled",
            pod(json!({"containers": [c("c1", cpu("1"))]}), json!({"allocatedResources": cpu("4"), "resources": {"requests": cpu("3")}})),
            (4000, 0, 0),
        ),
        (
            "falls back to container status aggregation when PLR vertical scaling enabled but podAllocatedResources is nil",
            pod(
                json!({"containers": [c("c1", cpu("1"))]}),
                json!({"containerStatuses": [st("c1", Some(cpu("5")), Some(cpu("6")))], "resources": {"requests": cpu("3")}}),
            ),
            (6000, 0, 0),
        ),
        (
            "falls back to container status aggregation when PLR vertical scaling enabled but podResources is nil",
            pod(json!({"containers": [c("c1", cpu("1"))]}), json!({"containerStatuses": [st("c1", Some(cpu("5")), Some(cpu("6")))], "allocatedResources": cpu("6")})),
            (6000, 0, 0),
        ),
        // TestPodLevelResourceRequests.
        ("status resources include overhead for all pod-level resources", overhead_pod(both.clone(), both.clone()), (1100, 110 * MI, 0)),
        ("status resources include overhead for only one pod-level resource", overhead_pod(cpu("1100m"), cpu("1100m")), (1100, 110 * MI, 0)),
        ("status resources without overhead still receive overhead", overhead_pod(spec_values.clone(), spec_values.clone()), (1100, 110 * MI, 0)),
        ("allocated resources include overhead when status requests do not", overhead_pod(spec_values.clone(), both.clone()), (1100, 110 * MI, 0)),
        (
            "allocated resources include stale overhead during resize",
            overhead_pod(spec_values.clone(), json!({"cpu": "1050m", "memory": "105Mi"})),
            (1100, 110 * MI, 0),
        ),
        // TestPodRequestsAndLimitsVerticalScalingWrappers.
        (
            "pod level requests/limits with PLR vertical scaling enabled and status populated",
            pod(
                json!({"resources": {"requests": cpu("2")}, "containers": [c("c1", cpu("1"))]}),
                json!({"allocatedResources": cpu("3"), "resources": {"requests": cpu("3.5")}}),
            ),
            (3500, 0, 0),
        ),
        (
            "pod level requests/limits with PLR vertical scaling enabled, status.resources nil, status.allocatedResources set",
            pod(json!({"resources": {"requests": cpu("2")}, "containers": [c("c1", cpu("1"))]}), json!({"allocatedResources": cpu("3")})),
            (3000, 0, 0),
        ),
        (
            "pod level requests/limits with PLR vertical scaling enabled and infeasible resize",
            pod(
                json!({"resources": {"requests": cpu("10")}, "containers": [c("c1", cpu("1"))]}),
                json!({"conditions": infeasible, "allocatedResources": cpu("3"), "resources": {"requests": cpu("4")}}),
            ),
            (4000, 0, 0),
        ),
        (
            "container limits aggregation with infeasible resize",
            pod(
                json!({"containers": [{"name": "c1", "resources": {"limits": cpu("10")}}]}),
                json!({"conditions": infeasible, "containerStatuses": [{"name": "c1", "resources": {"limits": cpu("6")}}]}),
            ),
            (0, 0, 0),
        ),
        (
            "pod level requests/limits with PLR vertical scaling enabled, overhead set, and status populated",
            pod(
                json!({"overhead": {"cpu": "1", "memory": "500Mi"}, "resources": {"requests": {"cpu": "2", "memory": "2Gi"}}, "containers": []}),
                json!({"allocatedResources": {"cpu": "3", "memory": "2.5Gi"}, "resources": {"requests": {"cpu": "3", "memory": "2.5Gi"}}}),
            ),
            (3000, 2560 * MI, 0),
        ),
    ];
    for (name, p, want) in cases {
        assert_eq!(requested_with_pod(&p), want, "{name}");
    }
}
