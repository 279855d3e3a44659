//! The scheduler's native kernels (kubecore-sched) for Python: `NativeSchedProfile` (one
//! profile's native plugins), `NativeSchedSnapshot` (node columns + counted pods; every call
//! releases the GIL and takes the snapshot's lock without it) and `NativeScheduleResult`.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Mutex, MutexGuard};

use pyo3::exceptions::{PyKeyError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use kubecore_sched::interpod::{self, HARD_POD_AFFINITY_WEIGHT};
use kubecore_sched::nodeaffinity::AddedAffinity;
use kubecore_sched::pod::ParsedPod;
use kubecore_sched::{DryRun, Error, Profile, ProfileConfig, ScheduleResult, Snapshot, FILTER_PLUGINS, SCORE_PLUGINS};

// The literal default of `hard_pod_affinity_weight` in `NativeSchedProfile`'s signature (a
// literal, so the text signature and the .pyi stub can show it) is upstream's default.
const _: () = assert!(HARD_POD_AFFINITY_WEIGHT == 1);

fn to_py(e: Error) -> PyErr {
    match e {
        Error::UnknownNode(name) => PyKeyError::new_err(name),
        // A plugin's Error status ended the cycle (not a malformed input).
        Error::Plugin(msg) => PyRuntimeError::new_err(msg),
        other => PyValueError::new_err(other.to_string()),
    }
}

#[pyclass(frozen, module = "kubecore._native")]
pub struct NativeSchedProfile {
    inner: Profile,
}

#[pymethods]
impl NativeSchedProfile {
    /// `added_affinity` is NodeAffinityArgs.addedAffinity as the JSON of a v1.NodeAffinity.
    #[new]
    #[pyo3(signature = (*, filters, scores, fit_strategy="LeastAllocated", fit_resources=None, rtc_shape=None,
                        ignored_resources=None, ignored_resource_groups=None, balanced_resources=None,
                        percentage_of_nodes_to_score=0, hard_pod_affinity_weight=1,
                        ignore_preferred_terms_of_existing_pods=false, added_affinity=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        filters: Vec<String>,
        scores: Vec<(String, i64)>,
        fit_strategy: &str,
        fit_resources: Option<Vec<(String, i64)>>,
        rtc_shape: Option<Vec<(i64, i64)>>,
        ignored_resources: Option<Vec<String>>,
        ignored_resource_groups: Option<Vec<String>>,
        balanced_resources: Option<Vec<(String, i64)>>,
        percentage_of_nodes_to_score: i64,
        hard_pod_affinity_weight: i64,
        ignore_preferred_terms_of_existing_pods: bool,
        added_affinity: Option<Bound<'_, PyBytes>>,
    ) -> PyResult<Self> {
        let added_affinity = added_affinity.map(|b| AddedAffinity::from_json(b.as_bytes())).transpose().map_err(to_py)?;
        let d = ProfileConfig::default();
        let cfg = ProfileConfig {
            filters,
            scores,
            fit_strategy: fit_strategy.to_string(),
            fit_resources: fit_resources.unwrap_or(d.fit_resources),
            rtc_shape: rtc_shape.unwrap_or_default(),
            ignored_resources: ignored_resources.unwrap_or_default(),
            ignored_resource_groups: ignored_resource_groups.unwrap_or_default(),
            balanced_resources: balanced_resources.unwrap_or(d.balanced_resources),
            percentage_of_nodes_to_score,
            interpod: interpod::Args { hard_pod_affinity_weight, ignore_preferred_terms_of_existing_pods },
            added_affinity,
        };
        Ok(NativeSchedProfile { inner: Profile::new(cfg).map_err(to_py)? })
    }
}

#[pyclass(frozen, module = "kubecore._native")]
pub struct NativeScheduleResult(ScheduleResult);

#[pymethods]
impl NativeScheduleResult {
    #[getter]
    fn node(&self) -> Option<&str> {
        self.0.node_name()
    }
    #[getter]
    fn feasible<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.0.feasible_names())
    }
    #[getter]
    fn scores(&self) -> Vec<i64> {
        self.0.scores.clone()
    }
    #[getter]
    fn evaluated(&self) -> usize {
        self.0.evaluated
    }
    #[getter]
    fn reasons<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (reason, n) in &self.0.reasons {
            d.set_item(reason, n)?;
        }
        Ok(d)
    }
    #[getter]
    fn unresolvable(&self) -> usize {
        self.0.unresolvable
    }
    #[getter]
    fn rejected(&self) -> Option<&str> {
        self.0.rejected.as_deref()
    }
    #[getter]
    fn error(&self) -> Option<&str> {
        self.0.error.as_deref()
    }
    fn __repr__(&self) -> String {
        let r = &self.0;
        let node = r.node_name().map_or_else(|| "None".to_string(), |n| format!("'{n}'"));
        format!(
            "NativeScheduleResult(node={node}, feasible={}, evaluated={}, reasons={:?}, unresolvable={})",
            r.feasible.len(),
            r.evaluated,
            r.reasons,
            r.unresolvable
        )
    }
}

#[pyclass(frozen, module = "kubecore._native")]
pub struct NativeSchedSnapshot {
    inner: Mutex<Snapshot>,
}

impl NativeSchedSnapshot {
    /// Runs `f` on the snapshot without the GIL (the lock is taken after releasing it, so a
    /// thread waiting for the lock never blocks Python), the last cycle's nominated pods taken
    /// off first (`Snapshot::settle`).
    fn with<T: Send>(&self, py: Python<'_>, f: impl FnOnce(&mut Snapshot) -> T + Send) -> T {
        py.detach(|| {
            let mut s = lock(&self.inner);
            s.settle();
            f(&mut s)
        })
    }

    /// As `with`, leaving a finished cycle's nominated pods in place: for changes that commute
    /// with them (nodes, real pods) and for the nominated pods themselves.
    fn with_lazy<T: Send>(&self, py: Python<'_>, f: impl FnOnce(&mut Snapshot) -> T + Send) -> T {
        py.detach(|| f(&mut lock(&self.inner)))
    }
}

fn lock(m: &Mutex<Snapshot>) -> MutexGuard<'_, Snapshot> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn results(py: Python<'_>, rs: Vec<ScheduleResult>) -> PyResult<Vec<Py<NativeScheduleResult>>> {
    rs.into_iter().map(|r| Py::new(py, NativeScheduleResult(r))).collect()
}

/// A rejected node's (reasons, unresolvable).
type Rejection = (Vec<String>, bool);
/// `preempt_select`'s answer: ((node, victim keys) or None, candidates, classified,
/// [(node, reasons, unresolvable)]).
type Selected = (Option<(String, Vec<String>)>, usize, usize, Vec<(String, Vec<String>, bool)>);

fn pairs_dict<'py>(py: Python<'py>, pairs: Vec<(String, i64)>) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in pairs {
        d.set_item(k, v)?;
    }
    Ok(d)
}

#[pymethods]
impl NativeSchedSnapshot {
    /// `seed` makes host selection among equal scores reproducible (None: a random seed).
    #[new]
    #[pyo3(signature = (*, seed=None))]
    fn new(seed: Option<u64>) -> Self {
        let seed = seed.unwrap_or_else(|| RandomState::new().build_hasher().finish());
        NativeSchedSnapshot { inner: Mutex::new(Snapshot::new(seed)) }
    }

    fn set_node(&self, py: Python<'_>, node_json: &Bound<'_, PyBytes>) -> PyResult<()> {
        let raw = node_json.as_bytes();
        self.with_lazy(py, |s| s.set_node_json(raw)).map_err(to_py)
    }

    fn remove_node(&self, py: Python<'_>, name: &str) -> bool {
        self.with_lazy(py, |s| s.remove_node(name))
    }

    fn add_pod(&self, py: Python<'_>, key: &str, pod_json: &Bound<'_, PyBytes>, node: &str) -> PyResult<()> {
        let raw = pod_json.as_bytes();
        self.with_lazy(py, |s| {
            s.forget_nominated(key);
            s.add_pod_json(key, raw, node)
        })
        .map_err(to_py)
    }

    fn remove_pod(&self, py: Python<'_>, key: &str) -> bool {
        self.with_lazy(py, |s| {
            s.forget_nominated(key);
            s.remove_pod(key)
        })
    }

    /// Counts exactly these (key, pod JSON, node) as nominated pods until `end_nominated`
    /// (adding and removing only what changed since the last cycle); how many are counted.
    fn nominate(&self, py: Python<'_>, pods: Vec<(String, Bound<'_, PyBytes>, String)>) -> usize {
        let refs: Vec<(&str, &[u8], &str)> = pods.iter().map(|(k, b, n)| (k.as_str(), b.as_bytes(), n.as_str())).collect();
        self.with_lazy(py, |s| s.nominate(&refs))
    }

    /// The cycle's nominated pods stop counting (taken off before the next read).
    fn end_nominated(&self, py: Python<'_>) {
        self.with_lazy(py, |s| s.end_nominated())
    }

    fn node_count(&self, py: Python<'_>) -> usize {
        self.with(py, |s| s.node_count())
    }

    fn pod_count(&self, py: Python<'_>) -> usize {
        self.with(py, |s| s.pod_count())
    }

    fn node_names(&self, py: Python<'_>) -> Vec<String> {
        self.with(py, |s| s.node_names())
    }

    #[pyo3(signature = (profile, pod_json, *, select=true))]
    fn schedule(
        &self,
        py: Python<'_>,
        profile: &NativeSchedProfile,
        pod_json: &Bound<'_, PyBytes>,
        select: bool,
    ) -> PyResult<NativeScheduleResult> {
        let raw = pod_json.as_bytes();
        let p = &profile.inner;
        let r = self.with(py, |s| s.schedule(p, raw, select)).map_err(to_py)?;
        Ok(NativeScheduleResult(r))
    }

    fn schedule_batch(
        &self,
        py: Python<'_>,
        profile: &NativeSchedProfile,
        pods: Vec<(String, Bound<'_, PyBytes>)>,
    ) -> PyResult<Vec<Py<NativeScheduleResult>>> {
        let items: Vec<(&str, &[u8])> = pods.iter().map(|(k, b)| (k.as_str(), b.as_bytes())).collect();
        let p = &profile.inner;
        let rs = self.with(py, |s| s.schedule_batch(p, &items)).map_err(to_py)?;
        results(py, rs)
    }

    #[pyo3(signature = (profile, pod_json, node, *, without=None))]
    fn filter_node(
        &self,
        py: Python<'_>,
        profile: &NativeSchedProfile,
        pod_json: &Bound<'_, PyBytes>,
        node: &str,
        without: Option<Vec<String>>,
    ) -> PyResult<Vec<String>> {
        let raw = pod_json.as_bytes();
        let without = without.unwrap_or_default();
        let keys: Vec<&str> = without.iter().map(String::as_str).collect();
        let p = &profile.inner;
        self.with(py, |s| s.filter_node(p, raw, node, &keys)).map_err(to_py)
    }

    /// Preemption's first dry run on each node (in order), every lower-priority pod removed:
    /// (one byte per node: 0 no such pod, 1 fits, 2 rejected; per rejected node in order,
    /// (reasons, unresolvable)).
    fn dry_run_lower<'py>(
        &self,
        py: Python<'py>,
        profile: &NativeSchedProfile,
        pod_json: &Bound<'_, PyBytes>,
        nodes: Vec<String>,
    ) -> PyResult<(Bound<'py, PyBytes>, Vec<Rejection>)> {
        let raw = pod_json.as_bytes();
        let names: Vec<&str> = nodes.iter().map(String::as_str).collect();
        let p = &profile.inner;
        let runs = self
            .with(py, |s| ParsedPod::from_json(raw).and_then(|pod| s.dry_run_lower(p, &pod, &names)))
            .map_err(to_py)?;
        let mut kinds = Vec::with_capacity(runs.len());
        let mut rejected = Vec::new();
        for r in runs {
            kinds.push(match r {
                DryRun::NoVictims => 0u8,
                DryRun::Fits => 1,
                DryRun::Rejected(f) => {
                    rejected.push((f.reasons.iter().map(|r| r.as_str().to_string()).collect(), f.unresolvable));
                    2
                }
            });
        }
        Ok((PyBytes::new(py, &kinds), rejected))
    }

    /// Per (node, victim keys in reprieve order): the indices of the pods that stay victims.
    fn reprieve(
        &self,
        py: Python<'_>,
        profile: &NativeSchedProfile,
        pod_json: &Bound<'_, PyBytes>,
        nodes: Vec<(String, Vec<String>)>,
    ) -> PyResult<Vec<Vec<usize>>> {
        let raw = pod_json.as_bytes();
        let items: Vec<(&str, Vec<&str>)> =
            nodes.iter().map(|(n, ks)| (n.as_str(), ks.iter().map(String::as_str).collect())).collect();
        let p = &profile.inner;
        self.with(py, |s| ParsedPod::from_json(raw).and_then(|pod| s.reprieve(p, &pod, &items))).map_err(to_py)
    }

    /// Preemption in one call when no PDB exists: ((node, victim keys) or None, candidates,
    /// classified, [(node, reasons, unresolvable)] of the rejected nodes when no candidate).
    /// `nodes` are (name, status implicit) in visiting order; `now` in Unix seconds.
    fn preempt_select(
        &self,
        py: Python<'_>,
        profile: &NativeSchedProfile,
        pod_json: &Bound<'_, PyBytes>,
        nodes: Vec<(String, bool)>,
        wanted: usize,
        now: f64,
    ) -> PyResult<Selected> {
        let raw = pod_json.as_bytes();
        let items: Vec<(&str, bool)> = nodes.iter().map(|(n, i)| (n.as_str(), *i)).collect();
        let p = &profile.inner;
        let now_ns = (now * 1e9).round() as i64;
        let sel = self
            .with(py, |s| ParsedPod::from_json(raw).and_then(|pod| s.preempt_select(p, &pod, &items, wanted, now_ns)))
            .map_err(to_py)?;
        let rejected = sel
            .rejected
            .into_iter()
            .map(|(n, f)| (n, f.reasons.iter().map(|r| r.as_str().to_string()).collect(), f.unresolvable))
            .collect();
        Ok((sel.chosen, sel.candidates, sel.classified, rejected))
    }

    fn requested<'py>(&self, py: Python<'py>, node: &str) -> PyResult<Bound<'py, PyDict>> {
        let pairs = self.with(py, |s| s.requested(node)).map_err(to_py)?;
        pairs_dict(py, pairs)
    }

    fn allocatable<'py>(&self, py: Python<'py>, node: &str) -> PyResult<Bound<'py, PyDict>> {
        let pairs = self.with(py, |s| s.allocatable(node)).map_err(to_py)?;
        pairs_dict(py, pairs)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<NativeSchedProfile>()?;
    m.add_class::<NativeSchedSnapshot>()?;
    m.add_class::<NativeScheduleResult>()?;
    m.add("NATIVE_FILTER_PLUGINS", PyTuple::new(py, FILTER_PLUGINS.iter().map(|(n, _)| *n))?)?;
    m.add("NATIVE_SCORE_PLUGINS", PyTuple::new(py, SCORE_PLUGINS.iter().map(|(n, _, _)| *n))?)?;
    Ok(())
}
