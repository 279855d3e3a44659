//! Resource names and a pod's effective requests (component-helpers' `PodRequests`, then the
//! scheduler's `Resource.SetMaxResource`).
//!
//! Effective requests, per resource:
//! `max(sum(containers) + sum(sidecars), max over init containers i of (i + sidecars started
//! before i))`, pod-level `spec.resources.requests` replacing cpu/memory/hugepages when set, plus
//! `spec.overhead`. Sums are exact (nanos) and rounded once: cpu up to millicores, the rest up to
//! whole units. The scoring variant ("non-zero") gives each container that omits cpu or memory
//! upstream's defaults, 100m and 200Mi (with pod-level requests, only for a resource the pod
//! requests at neither level).
//!
//! In-place resize (InPlacePodVerticalScaling): a bound pod counts the larger of what its spec
//! asks and what its status reports actuated (`containerStatuses[].resources.requests`) or
//! allocated (`allocatedResources`), or only the status when the resize is `Infeasible`; see
//! `aggregate`. A pod whose statuses repeat its spec costs one aggregate, as a pending pod does.

use crate::api::{Container, Pod, PodStatus, ResourceMap, StatusList};
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

    /// A status list as a `List` (a name listed twice keeps its last value, as a Go map does).
    fn from_status(list: &StatusList) -> Result<List, Error> {
        let mut out = List::default();
        for (name, text) in &list.0 {
            *out.slot(name) = status_value(name, text.as_bytes())?;
        }
        Ok(out)
    }

    /// `max_with` a status list.
    fn max_with_status(&mut self, other: &StatusList) -> Result<(), Error> {
        for (name, text) in &other.0 {
            let v = status_value(name, text.as_bytes())?;
            let s = self.slot(name);
            *s = (*s).max(v);
        }
        Ok(())
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

/// A status quantity's value (its text came from a JSON string or number).
fn status_value(name: &str, text: &[u8]) -> Result<Nanos, Error> {
    let text = std::str::from_utf8(text).unwrap_or_default();
    quantity::parse(text).map_err(|e| Error::Quantity(format!("{name}: {e}")))
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

/// `IsSupportedPodLevelResource`.
fn is_pod_level(name: &str) -> bool {
    name == CPU || name == MEMORY || name.starts_with("hugepages-")
}

/// Which of a container's request lists upstream's `aggregateContainerResourcesByFn` reads.
#[derive(Clone, Copy)]
enum Source {
    /// `containerSpecRequests`: the spec.
    Spec,
    /// `containerAllocatedRequests`: status allocatedResources, else the spec (none when the
    /// resize is infeasible).
    Allocated,
    /// `containerActuatedRequests`: status resources.requests, else allocatedResources, else the
    /// spec (none when the resize is infeasible).
    Actuated,
}

/// The list a [`Source`] gives a container.
#[derive(Clone, Copy)]
enum Pick<'a> {
    Spec,
    Status(&'a StatusList),
    Nothing,
}

fn spec_requests(c: &Container) -> Option<&ResourceMap> {
    c.resources.as_ref().and_then(|r| r.requests.as_ref())
}

/// A container's (actuated, allocated) lists: `containerActuatedRequests` and
/// `containerAllocatedRequests` (the status found once).
fn picks<'a>(status: Option<&'a PodStatus>, c: &Container, infeasible: bool) -> (Pick<'a>, Pick<'a>) {
    let status = status.and_then(|st| st.container_status(c.name.as_ref()));
    let allocated = status.and_then(|s| s.allocated_resources.as_ref());
    let actuated = status.and_then(|s| s.resources.as_ref()).and_then(|r| r.requests.as_ref()).or(allocated);
    let pick = |list: Option<&'a StatusList>| match list {
        Some(list) => Pick::Status(list),
        None if infeasible => Pick::Nothing,
        None => Pick::Spec,
    };
    (pick(actuated), pick(allocated))
}

fn pick<'a>(status: Option<&'a PodStatus>, c: &Container, source: Source, infeasible: bool) -> Pick<'a> {
    match source {
        Source::Spec => Pick::Spec,
        Source::Actuated => picks(status, c, infeasible).0,
        Source::Allocated => picks(status, c, infeasible).1,
    }
}

/// `pick` is the spec's list, value for value (a bad spec quantity is not).
fn same_as_spec(pick: Pick<'_>, spec: Option<&ResourceMap>) -> bool {
    match pick {
        Pick::Spec => true,
        Pick::Nothing => spec.is_none_or(|m| m.is_empty()),
        Pick::Status(list) => {
            list.0.len() == spec.map_or(0, |m| m.len())
                && spec.into_iter().flatten().all(|(name, text)| {
                    let listed = list.0.iter().find(|(n, _)| n == name);
                    listed.is_some_and(|(_, t)| {
                        t.as_bytes() == text.0.as_bytes()
                            || quantity::parse(&text.0).is_ok_and(|n| status_value(name, t.as_bytes()).is_ok_and(|v| v == n))
                    })
                })
        }
    }
}

/// Every container's actuated and allocated lists are its spec's, so `max(spec, actuated,
/// allocated)` (or `max(actuated, allocated)`) is the spec's aggregate: true for a pod without
/// statuses (every pending pod) and a bound pod with no resize in flight.
fn statuses_match_spec(pod: &Pod, infeasible: bool) -> bool {
    let status = pod.status.as_ref();
    if !infeasible && !status.is_some_and(|st| st.has_container_statuses()) {
        return true;
    }
    let spec = pod.spec.as_ref();
    let mut all = spec.into_iter().flat_map(|s| s.containers.iter().flatten().chain(s.init_containers.iter().flatten()));
    all.all(|c| {
        let (actuated, allocated) = picks(status, c, infeasible);
        same_as_spec(actuated, spec_requests(c)) && same_as_spec(allocated, spec_requests(c))
    })
}

/// `aggregateContainerResourcesByFn`: `max(sum(containers) + sum(sidecars), max over init
/// containers i of (i + sidecars started before i))`, each container's list from `source` with
/// `defaults` for the names it lacks.
fn aggregate_containers(pod: &Pod, defaults: &List, source: Source, infeasible: bool) -> Result<List, Error> {
    let spec = pod.spec.as_ref();
    let containers = spec.and_then(|s| s.containers.as_deref()).unwrap_or_default();
    let inits = spec.and_then(|s| s.init_containers.as_deref()).unwrap_or_default();
    let list = |c| {
        let own = match pick(pod.status.as_ref(), c, source, infeasible) {
            Pick::Spec => List::parse(spec_requests(c))?,
            Pick::Status(list) => List::from_status(list)?,
            Pick::Nothing => List::default(),
        };
        Ok::<_, Error>(own.with_defaults(defaults))
    };
    let mut reqs = List::default();
    for c in containers {
        reqs.add(&list(c)?);
    }
    let mut sidecars = List::default();
    let mut init_max = List::default();
    for c in inits {
        let own = list(c)?;
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
    Ok(reqs)
}

/// `subtractResourceList`: `overhead` off the names `list` has, floored at zero.
fn subtract(list: &mut List, overhead: &List) {
    for (name, v) in &mut list.0 {
        if let Some(o) = overhead.get(name) {
            *v = (*v - o).max(0);
        }
    }
}

/// `PodRequests(pod, opts)` as the scheduler counts a pod (`PodInfo.CalculateResource`): the
/// InPlacePodVerticalScaling (GA) and InPlacePodLevelResourcesVerticalScaling (beta, on) gates
/// on, so a bound pod's status counts while a resize is in flight; `NonMissingContainerRequests
/// = defaults` (empty: none).
///
/// Container level: `max(spec, actuated, allocated)` per resource, each aggregated over the
/// containers as above (a max of sums, not a sum of maxes), or `max(actuated, allocated)` when
/// the resize is infeasible; actuated and allocated are the pod-level status maps when both are
/// set. `spec_only` ([`statuses_match_spec`]): that is the spec's aggregate, computed once.
/// Pod level (cpu, memory, hugepages-*): `max(spec, status - overhead, allocated - overhead)`
/// (the spec left out when infeasible) when the pod has status resources, else the spec.
fn aggregate(pod: &Pod, defaults: &List, spec_only: bool) -> Result<List, Error> {
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let infeasible = status.is_some_and(|st| st.resize_infeasible);
    let status_requests = status.and_then(|st| st.resources.as_ref()).and_then(|r| r.requests.as_ref());
    let status_allocated = status.and_then(|st| st.allocated_resources.as_ref());
    let overhead = List::parse(spec.and_then(|s| s.overhead.as_ref()))?;

    let mut reqs = match (status_requests, status_allocated) {
        (Some(actuated), Some(allocated)) => {
            let mut reqs =
                if infeasible { List::default() } else { aggregate_containers(pod, defaults, Source::Spec, false)? };
            reqs.max_with_status(actuated)?;
            reqs.max_with_status(allocated)?;
            reqs
        }
        _ => {
            if spec_only {
                // Every list is the spec's: max(spec, spec, spec).
                aggregate_containers(pod, defaults, Source::Spec, false)?
            } else {
                let mut reqs =
                    if infeasible { List::default() } else { aggregate_containers(pod, defaults, Source::Spec, false)? };
                reqs.max_with(&aggregate_containers(pod, defaults, Source::Actuated, infeasible)?);
                reqs.max_with(&aggregate_containers(pod, defaults, Source::Allocated, infeasible)?);
                reqs
            }
        }
    };

    if pod_level_requests_set(pod) {
        let mut effective = List::parse(spec.and_then(|s| s.resources.as_ref()).and_then(|r| r.requests.as_ref()))?;
        if status.and_then(|st| st.resources.as_ref()).is_some() || status_allocated.is_some() {
            let mut actuated = status_requests.map(List::from_status).transpose()?.unwrap_or_default();
            let mut allocated = status_allocated.map(List::from_status).transpose()?.unwrap_or_default();
            subtract(&mut actuated, &overhead);
            subtract(&mut allocated, &overhead);
            if infeasible {
                effective = List::default();
            }
            effective.max_with(&actuated);
            effective.max_with(&allocated);
        }
        for (name, n) in effective.0 {
            if is_pod_level(&name) {
                *reqs.slot(&name) = n;
            }
        }
    }
    reqs.add(&overhead);
    Ok(reqs)
}

/// `IsPodLevelRequestsSet`: spec.resources.requests names cpu, memory or hugepages-*.
fn pod_level_requests_set(pod: &Pod) -> bool {
    let requests = pod.spec.as_ref().and_then(|s| s.resources.as_ref()).and_then(|r| r.requests.as_ref());
    requests.is_some_and(|m| m.keys().any(|n| is_pod_level(n)))
}

/// The requests of `pod` (bad quantities are errors).
pub fn pod_requests(pod: &Pod) -> Result<PodRequests, Error> {
    let infeasible = pod.status.as_ref().is_some_and(|st| st.resize_infeasible);
    let spec_only = statuses_match_spec(pod, infeasible);
    let list = aggregate(pod, &List::default(), spec_only)?;
    // getNonMissingContainerRequests: both defaults for each container, or with pod-level
    // requests only those the pod's requests lack altogether.
    let cpu = (CPU.to_string(), DEFAULT_MILLI_CPU_REQUEST as Nanos * 1_000_000);
    let memory = (MEMORY.to_string(), DEFAULT_MEMORY_REQUEST as Nanos * quantity::NANOS_PER_UNIT);
    let defaults = if pod_level_requests_set(pod) {
        List([cpu, memory].into_iter().filter(|(n, _)| list.get(n).is_none()).collect())
    } else {
        List(vec![cpu, memory])
    };
    let non_zero = if defaults.0.is_empty() { None } else { Some(aggregate(pod, &defaults, spec_only)?) };
    let non_zero = non_zero.as_ref().unwrap_or(&list);
    Ok(PodRequests {
        non_zero_milli_cpu: quantity::milli_value(non_zero.get(CPU).unwrap_or(0)),
        non_zero_memory: quantity::value(non_zero.get(MEMORY).unwrap_or(0)),
        requests: Requests::from_list(&list),
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
    fn resize_status_counts_in_both_views() {
        // Spec without cpu, status actuated at 2 cpu: max(spec, actuated, allocated) per resource,
        // and the scoring defaults fill each list's missing names (100m < 2 cpu; memory 200Mi).
        let r = reqs(
            r#"{"spec":{"containers":[{"name":"a","resources":{"requests":{"memory":"1Gi"}}}]},
              "status":{"containerStatuses":[{"name":"a","resources":{"requests":{"cpu":"2"}},"allocatedResources":{"memory":"2Gi"}}]}}"#,
        );
        assert_eq!((r.requests.milli_cpu, r.requests.memory), (2000, 2 << 30));
        assert_eq!((r.non_zero_milli_cpu, r.non_zero_memory), (2000, 2 << 30));
        // A status of another name is not this container's.
        let r = reqs(r#"{"spec":{"containers":[{"name":"a","resources":{"requests":{"cpu":"1"}}}]},"status":{"containerStatuses":[{"name":"b","allocatedResources":{"cpu":"3"}}]}}"#);
        assert_eq!(r.requests.milli_cpu, 1000);
        // Infeasible with no statuses: upstream counts no container requests (nor the spec).
        let r = reqs(
            r#"{"spec":{"containers":[{"name":"a","resources":{"requests":{"cpu":"1"}}}]},
              "status":{"conditions":[{"type":"Ready","reason":"Infeasible"},{"type":"PodResizePending","status":"True","reason":"Infeasible"}]}}"#,
        );
        assert_eq!((r.requests.milli_cpu, r.non_zero_milli_cpu), (0, DEFAULT_MILLI_CPU_REQUEST));
        // Only the first PodResizePending condition counts; a Deferred resize keeps the spec.
        let r = reqs(
            r#"{"spec":{"containers":[{"name":"a","resources":{"requests":{"cpu":"4"}}}]},
              "status":{"conditions":[{"type":"PodResizePending","reason":"Deferred"},{"type":"PodResizePending","reason":"Infeasible"}],
                        "containerStatuses":[{"name":"a","resources":{"requests":{"cpu":"2"}}}]}}"#,
        );
        assert_eq!(r.requests.milli_cpu, 4000);
    }

    #[test]
    fn pod_level_scoring_defaults_only_for_missing_names() {
        // getNonMissingContainerRequests with pod-level requests: the pod requests memory (one
        // container does), so no container gets the memory default; cpu comes from the pod level.
        let r = reqs(
            r#"{"spec":{"resources":{"requests":{"cpu":"2"}},
              "containers":[{"resources":{"requests":{"memory":"1Gi"}}},{}]}}"#,
        );
        assert_eq!((r.non_zero_milli_cpu, r.non_zero_memory), (2000, 1 << 30));
        // Neither level requests memory: each container gets the default.
        let r = reqs(r#"{"spec":{"resources":{"requests":{"cpu":"2"}},"containers":[{},{}]}}"#);
        assert_eq!((r.non_zero_milli_cpu, r.non_zero_memory), (2000, 2 * DEFAULT_MEMORY_REQUEST));
    }

    #[test]
    fn odd_status_values_read_as_absent() {
        // Non-string condition fields never match; null lists and maps are absent.
        let r = reqs(
            r#"{"spec":{"containers":[{"name":"a","resources":{"requests":{"cpu":"1"}}}]},
              "status":{"conditions":[{"type":{"x":[1]},"reason":7},{"type":null}],"containerStatuses":null,
                        "initContainerStatuses":[{"name":"a","resources":null,"allocatedResources":null}],"resources":null}}"#,
        );
        assert_eq!(r.requests.milli_cpu, 1000);
    }

    #[test]
    fn bad_quantity_is_an_error() {
        let pod: Pod = from_json(br#"{"spec":{"containers":[{"resources":{"requests":{"cpu":"lots"}}}]}}"#, "pod").unwrap();
        assert!(matches!(pod_requests(&pod), Err(Error::Quantity(_))));
    }
}
