//! kubecore-sched: the scheduler's native kernels (no pyo3).
//!
//! A [`Snapshot`] holds the nodes as columns (allocatable and requested resources, labels,
//! taints, host ports, images) and the pods counted on them. A [`Profile`] names the native
//! Filter and Score plugins of one scheduler profile with their arguments. A cycle
//! ([`Snapshot::schedule`]) runs upstream kube-scheduler's Filter plugins over the nodes in
//! parallel (rayon), scores the feasible ones, normalizes and weights the scores, and selects
//! a host, with upstream's `numFeasibleNodesToFind` and rotating start index.
//!
//! Modules, leaves first: `quantity` (resource quantities), `api` (the JSON fields read),
//! `resources` (a pod's effective requests), `pod`/`node` (parsed objects), `intern`,
//! `nodeaffinity`, `taints`, `ports`, `images`, `zones` (visiting order), `columns`,
//! `snapshot`, `profile`, `query` (a pod compiled for a cycle), `filter`, `score`, `cycle`,
//! `preempt` (preemption's dry runs, many nodes per call), `rfc3339`, `pick` (preemption's
//! victims and node in one call), `overlay` (a cycle's nominated pods, added only while their own node is filtered).

use std::fmt;

pub mod api;
pub mod columns;
pub mod cycle;
pub mod filter;
pub mod images;
pub mod intern;
pub mod interpod;
pub mod labelselector;
pub mod node;
pub mod nodeaffinity;
pub mod overlay;
pub mod pick;
pub mod pod;
pub mod podaffinity;
pub mod ports;
pub mod preempt;
pub mod profile;
pub mod quantity;
pub mod query;
pub mod resources;
pub mod rfc3339;
pub mod rng;
pub mod score;
pub mod snapshot;
pub mod spread;
pub mod taints;
pub mod zones;

pub use cycle::{num_feasible_nodes_to_find, ScheduleResult};
pub use pick::Selection;
pub use preempt::DryRun;
pub use profile::{Profile, ProfileConfig, FILTER_PLUGINS, SCORE_PLUGINS};
pub use snapshot::Snapshot;

/// Every expected failure of the kernels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Not JSON, or not the object expected.
    Json(String),
    /// A resource quantity that does not parse.
    Quantity(String),
    /// A profile the kernels cannot run.
    Config(String),
    /// No node of that name in the snapshot.
    UnknownNode(String),
    /// A plugin's Error status ended the scheduling cycle (upstream: the cycle's error).
    Plugin(String),
}

impl Error {
    /// The same error, naming the pod it came from.
    pub fn for_pod(self, key: &str) -> Error {
        match self {
            Error::Json(m) => Error::Json(format!("pod {key}: {m}")),
            Error::Quantity(m) => Error::Quantity(format!("pod {key}: {m}")),
            other => other,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Json(m) => write!(f, "malformed object: {m}"),
            Error::Quantity(m) => write!(f, "bad quantity: {m}"),
            Error::Config(m) => write!(f, "bad profile: {m}"),
            Error::UnknownNode(n) => write!(f, "no node {n:?} in the snapshot"),
            Error::Plugin(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for Error {}
