//! Resource names and a pod's effective requests (component-helpers' `PodRequests`, then the
//! scheduler's `Resource.SetMaxResource`).
//!
//! Effective requests, per resource:
//! `max(sum(containers) + sum(sidecars), max over init containers i of (i + sidecars started
//! before i))`, pod-level `spec.resources.requests` replacing cpu/memory/hugepages when set, plus
//! `spec.overhead`. Sums are exact (nanos) and rounded once: cpu up to millicores, the rest up to
//! whole units. The scoring variant ("non-zero") gives each container that omits cpu or memory
//! upstream's defaults, 100m and 200Mi.

use crate::api::{Container, Pod, ResourceMap};
use crate::quantity::{self, Nanos};
use crate::Error;

pub const CPU: &str = "cpu";
pub const MEMORY: &str = "memory";
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
pub const PODS: &str = "pods";

/// Upstream's `DefaultMilliCPURequest` and `DefaultMemoryRequest` (scoring only).
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// What the scheduler does with a resource name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Cpu,
    Memory,
    EphemeralStorage,
    Pods,
    /// Extended (`example.com/gpu`), hugepages-*, attachable-volumes-*, `*kubernetes.io/*`.
    Scalar,
    /// Any other name (not counted by the scheduler).
    Ignored,
}

pub fn kind(name: &str) -> Kind {
    match name {
        CPU => Kind::Cpu,
        MEMORY => Kind::Memory,
        EPHEMERAL_STORAGE => Kind::EphemeralStorage,
        PODS => Kind::Pods,
        _ if is_scalar(name) => Kind::Scalar,
        _ => Kind::Ignored,
    }
}

/// `IsExtendedResourceName` (minus the qualified-name check the API server already made).
pub fn is_extended(name: &str) -> bool {
    name.contains('/') && !name.contains("kubernetes.io/") && !name.starts_with("requests.")
}

/// `IsScalarResourceName`.
pub fn is_scalar(name: &str) -> bool {
    is_extended(name)
        || name.starts_with("hugepages-")
        || name.contains("kubernetes.io/")
        || name.starts_with("attachable-volumes-")
}

/// A resource list in nanos; few entries, so a vector (missing = absent, not zero).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct List(pub Vec<(String, Nanos)>);

impl List {
    pub fn parse(map: Option<&ResourceMap>) -> Result<List, Error> {
        let mut out = List::default();
        for (name, q) in map.into_iter().flatten() {
            let n = quantity::parse(&q.0).map_err(|e| Error::Quantity(format!("{name}: {e}")))?;
            out.0.push((name.clone(), n));
        }
        Ok(out)
    }

    pub fn get(&self, name: &str) -> Option<Nanos> {
        self.0.iter().find(|(n, _)| n == name).map(|&(_, v)| v)
    }

    fn slot(&mut self, name: &str) -> &mut Nanos {
        let i = match self.0.iter().position(|(n, _)| n == name) {
            Some(i) => i,
            None => {
                self.0.push((name.to_string(), 0));
                self.0.len() - 1
            }
        };
        &mut self.0[i].1
    }

    pub fn add(&mut self, other: &List) {
        for (name, v) in &other.0 {
            *self.slot(name) += v;
        }
    }

    pub fn max_with(&mut self, other: &List) {
        for (name, v) in &other.0 {
            let s = self.slot(name);
            *s = (*s).max(*v);
        }
    }

    /// `applyNonMissing`: `defaults` for the names this list lacks.
    fn with_defaults(mut self, defaults: &List) -> List {
        for (name, v) in &defaults.0 {
            if self.get(name).is_none() {
                self.0.push((name.clone(), *v));
            }
        }
        self
    }
}

/// Requests in the scheduler's units (`framework.Resource`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requests {
    pub milli_cpu: i64,
    pub memory: i64,
    pub ephemeral_storage: i64,
    /// Scalar resources by name, in first-seen order.
    pub scalars: Vec<(String, i64)>,
}

impl Requests {
    /// `SetMaxResource` over a fresh `Resource`: the scheduler's view of a resource list.
    pub fn from_list(list: &List) -> Requests {
        let mut r = Requests::default();
        for (name, n) in &list.0 {
            match kind(name) {
                Kind::Cpu => r.milli_cpu = quantity::milli_value(*n),
                Kind::Memory => r.memory = quantity::value(*n),
                Kind::EphemeralStorage => r.ephemeral_storage = quantity::value(*n),
                Kind::Scalar => r.scalars.push((name.clone(), quantity::value(*n))),
                Kind::Pods | Kind::Ignored => {}
            }
        }
        r
    }

    pub fn is_zero(&self) -> bool {
        self.milli_cpu == 0 && self.memory == 0 && self.ephemeral_storage == 0 && self.scalars.is_empty()
    }

    pub fn scalar(&self, name: &str) -> i64 {
        self.scalars.iter().find(|(n, _)| n == name).map_or(0, |&(_, v)| v)
    }

    /// The value for a resource name (cpu in millicores); 0 when not requested.
    pub fn get(&self, name: &str) -> i64 {
        match kind(name) {
            Kind::Cpu => self.milli_cpu,
            Kind::Memory => self.memory,
            Kind::EphemeralStorage => self.ephemeral_storage,
            Kind::Scalar => self.scalar(name),
            Kind::Pods | Kind::Ignored => 0,
        }
    }
}

/// A pod's requests: `requests` for fitting and accounting, `non_zero_*` for scoring.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodRequests {
    pub requests: Requests,
    pub non_zero_milli_cpu: i64,
    pub non_zero_memory: i64,
}

fn is_sidecar(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

fn container_list(c: &Container) -> Result<List, Error> {
    List::parse(c.resources.as_ref().and_then(|r| r.requests.as_ref()))
}

/// `PodRequests(pod, opts)` with `NonMissingContainerRequests = defaults` (empty: none).
fn aggregate(pod: &Pod, defaults: &List) -> Result<List, Error> {
    let spec = pod.spec.as_ref();
    let containers = spec.and_then(|s| s.containers.as_deref()).unwrap_or_default();
    let inits = spec.and_then(|s| s.init_containers.as_deref()).unwrap_or_default();
    let mut reqs = List::default();
    for c in containers {
        reqs.add(&container_list(c)?.with_defaults(defaults));
    }
    let mut sidecars = List::default();
    let mut init_max = List::default();
    for c in inits {
        let own = container_list(c)?.with_defaults(defaults);
        let during = if is_sidecar(c) {
            reqs.add(&own);
            sidecars.add(&own);
            sidecars.clone()
        } else {
            let mut tmp = own;
            tmp.add(&sidecars);
            tmp
        };
        init_max.max_with(&during);
    }
    reqs.max_with(&init_max);
    if let Some(pod_level) = spec.and_then(|s| s.resources.as_ref()).and_then(|r| r.requests.as_ref()) {
        for (name, n) in List::parse(Some(pod_level))?.0 {
            if name == CPU || name == MEMORY || name.starts_with("hugepages-") {
                *reqs.slot(&name) = n;
            }
        }
    }
    reqs.add(&List::parse(spec.and_then(|s| s.overhead.as_ref()))?);
    Ok(reqs)
}

/// The requests of `pod` (bad quantities are errors).
pub fn pod_requests(pod: &Pod) -> Result<PodRequests, Error> {
    let requests = Requests::from_list(&aggregate(pod, &List::default())?);
    let defaults = List(vec![
        (CPU.to_string(), DEFAULT_MILLI_CPU_REQUEST as Nanos * 1_000_000),
        (MEMORY.to_string(), DEFAULT_MEMORY_REQUEST as Nanos * quantity::NANOS_PER_UNIT),
    ]);
    let non_zero = aggregate(pod, &defaults)?;
    Ok(PodRequests {
        non_zero_milli_cpu: quantity::milli_value(non_zero.get(CPU).unwrap_or(0)),
        non_zero_memory: quantity::value(non_zero.get(MEMORY).unwrap_or(0)),
        requests,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::from_json;

    fn reqs(json: &str) -> PodRequests {
        pod_requests(&from_json::<Pod>(json.as_bytes(), "pod").unwrap()).unwrap()
    }

    #[test]
    fn classifies_names() {
        assert_eq!(kind("cpu"), Kind::Cpu);
        assert_eq!(kind("nvidia.com/gpu"), Kind::Scalar);
        assert_eq!(kind("hugepages-2Mi"), Kind::Scalar);
        assert_eq!(kind("kubernetes.io/something"), Kind::Scalar);
        assert_eq!(kind("foo"), Kind::Ignored);
        assert!(is_extended("example.com/foo"));
        assert!(!is_extended("hugepages-1Gi"));
        assert!(!is_extended("kubernetes.io/foo"));
    }

    #[test]
    fn upstream_doc_example_init_containers() {
        // computePodResourceRequest's example: IC1 2/1G, IC2 2/3G, C1 2/1G, C2 1/1G -> 3 cpu, 3G.
        let r = reqs(
            r#"{"spec":{"initContainers":[
                {"resources":{"requests":{"cpu":"2","memory":"1G"}}},
                {"resources":{"requests":{"cpu":"2","memory":"3G"}}}],
              "containers":[
                {"resources":{"requests":{"cpu":"2","memory":"1G"}}},
                {"resources":{"requests":{"cpu":"1","memory":"1G"}}}]}}"#,
        );
        assert_eq!(r.requests.milli_cpu, 3000);
        assert_eq!(r.requests.memory, 3_000_000_000);
    }

    #[test]
    fn sidecars_add_to_containers_and_to_later_inits() {
        // sidecar 1 cpu, then init 2 cpu (runs beside the sidecar: 3), containers 1 cpu (+1 sidecar = 2).
        let r = reqs(
            r#"{"spec":{"initContainers":[
                {"restartPolicy":"Always","resources":{"requests":{"cpu":"1"}}},
                {"resources":{"requests":{"cpu":"2"}}}],
              "containers":[{"resources":{"requests":{"cpu":"1"}}}]}}"#,
        );
        assert_eq!(r.requests.milli_cpu, 3000);
        let r = reqs(
            r#"{"spec":{"initContainers":[
                {"resources":{"requests":{"cpu":"1"}}},
                {"restartPolicy":"Always","resources":{"requests":{"cpu":"1"}}}],
              "containers":[{"resources":{"requests":{"cpu":"2"}}}]}}"#,
        );
        assert_eq!(r.requests.milli_cpu, 3000);
    }

    #[test]
    fn overhead_pod_level_and_defaults() {
        let r = reqs(
            r#"{"spec":{"overhead":{"cpu":"250m"},
              "containers":[{"resources":{"requests":{"memory":"1Gi","example.com/gpu":2}}},{}]}}"#,
        );
        assert_eq!(r.requests.milli_cpu, 250);
        assert_eq!(r.requests.memory, 1 << 30);
        assert_eq!(r.requests.scalars, vec![("example.com/gpu".to_string(), 2)]);
        // Non-zero: both containers miss cpu (2 x 100m) + overhead; the second misses memory.
        assert_eq!(r.non_zero_milli_cpu, 450);
        assert_eq!(r.non_zero_memory, (1 << 30) + DEFAULT_MEMORY_REQUEST);
        let r = reqs(r#"{"spec":{"resources":{"requests":{"cpu":"2"}},"containers":[{"resources":{"requests":{"cpu":"1"}}}]}}"#);
        assert_eq!(r.requests.milli_cpu, 2000);
        assert_eq!(r.non_zero_milli_cpu, 2000);
    }

    #[test]
    fn sums_before_rounding() {
        // Three containers of 0.4m: 1.2m exactly, rounded once to 2m (not 3 x 1m).
        let r = reqs(r#"{"spec":{"containers":[{"resources":{"requests":{"cpu":"0.4m"}}},{"resources":{"requests":{"cpu":"0.4m"}}},{"resources":{"requests":{"cpu":"0.4m"}}}]}}"#);
        assert_eq!(r.requests.milli_cpu, 2);
    }

    #[test]
    fn bad_quantity_is_an_error() {
        let pod: Pod = from_json(br#"{"spec":{"containers":[{"resources":{"requests":{"cpu":"lots"}}}]}}"#, "pod").unwrap();
        assert!(matches!(pod_requests(&pod), Err(Error::Quantity(_))));
    }
}
