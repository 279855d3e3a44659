//! A pod compiled for one scheduling cycle under one profile: its strings resolved to the
//! snapshot's ids and every per-pod quantity the plugins need computed once (PreFilter and
//! PreScore), so the per-node work is integer compares over columns.

use std::sync::Arc;

use smallvec::SmallVec;

use crate::columns::Columns;
use crate::filter;
use crate::nodeaffinity::Compiled;
use crate::overlay::Nominated;
use crate::pod::ParsedPod;
use crate::profile::{FilterPlugin, Profile};
use crate::resources::{self, Kind};
use crate::snapshot::Snapshot;
use crate::{interpod, spread};

/// A scalar resource the pod requests.
#[derive(Debug, Clone)]
pub struct ScalarRequest {
    /// Column id (None: no node has ever reported or requested it).
    pub id: Option<u32>,
    pub value: i64,
    /// An extended resource the profile ignores (ignoredResources / ignoredResourceGroups).
    pub ignored: bool,
    /// "Insufficient <name>".
    pub reason: Arc<str>,
}

/// Where a scoring resource's node-side numbers come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Requests with upstream's 100m / 200Mi defaults for containers that omit them.
    NonZeroCpu,
    NonZeroMemory,
    Cpu,
    Memory,
    Ephemeral,
    Scalar(u32),
    /// Not scored (a scalar the pod does not request, or a name the scheduler ignores).
    Skip,
}

/// One resource of a resource-allocation scorer: the pod's request and the scorer weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceTerm {
    pub source: Source,
    pub pod: i64,
    pub weight: i64,
}

impl ResourceTerm {
    /// `calculateResourceAllocatableRequest`'s columns: (allocatable, requested without the
    /// pod); None when not scored.
    #[inline]
    pub fn columns<'c>(&self, c: &'c Columns) -> Option<(&'c [i64], &'c [i64])> {
        match self.source {
            Source::NonZeroCpu => Some((&c.allocatable_cpu, &c.non_zero_cpu)),
            Source::NonZeroMemory => Some((&c.allocatable_memory, &c.non_zero_memory)),
            Source::Cpu => Some((&c.allocatable_cpu, &c.requested_cpu)),
            Source::Memory => Some((&c.allocatable_memory, &c.requested_memory)),
            Source::Ephemeral => Some((&c.allocatable_ephemeral, &c.requested_ephemeral)),
            Source::Scalar(id) => Some((c.scalar_allocatable.get(id as usize)?, c.scalar_requested.get(id as usize)?)),
            Source::Skip => None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Query<'p> {
    pub pod: &'p ParsedPod,
    /// The profile's filters this pod needs (PreFilter Skip leaves a plugin out), in order.
    pub filters: SmallVec<[FilterPlugin; 8]>,
    pub milli_cpu: i64,
    pub memory: i64,
    pub ephemeral: i64,
    pub scalars: Vec<ScalarRequest>,
    /// No cpu, memory, ephemeral-storage or scalar request at all (only "Too many pods" applies).
    pub zero_requests: bool,
    pub affinity: Compiled,
    pub fit_terms: Vec<ResourceTerm>,
    pub balanced_terms: Vec<ResourceTerm>,
    /// BalancedAllocation skips best-effort pods (nothing requested among its resources).
    pub balanced_skip: bool,
    /// ImageLocality: (image id, size scaled by the share of nodes that have it) per container.
    pub images: Vec<(u32, i64)>,
    /// The pod's namespace id (None: no counted pod is in it).
    pub namespace: Option<u32>,
    /// PodTopologySpread's hard constraints with their counts (None: nothing to filter).
    pub spread: Option<spread::Filter>,
    /// PodTopologySpread's soft constraints.
    pub spread_soft: Vec<spread::CConstraint>,
    /// InterPodAffinity's required terms with their counts (None: nothing to filter).
    pub interpod: Option<interpod::Filter>,
    /// The cycle's nominated pods the filters add on their nodes (see `overlay`); neither the
    /// counts above nor the scores include them.
    pub nominated: Nominated,
    /// A native PreFilter's UnschedulableAndUnresolvable status, which every node gets as its
    /// reason: NodeAffinity's "pod affinity terms conflict" (its node names exclude each other),
    /// then InterPodAffinity's "parsing pod: ..." (a selector of the pod's terms does not convert).
    pub rejected: Option<Arc<str>>,
}

/// NodeAffinity's PreFilter status when the pod's `metadata.name` terms allow no node.
pub const ERR_NODE_AFFINITY_CONFLICT: &str = "pod affinity terms conflict";

/// The first native PreFilter, in upstream's order, that rejects the pod everywhere.
fn pre_filter_rejection(profile: &Profile, pod: &ParsedPod) -> Option<Arc<str>> {
    // The pod's side first: most pods have neither, and then no plugin is looked up.
    if pod.selector.node_names.as_ref().is_some_and(|n| n.is_empty()) && profile.has_filter(FilterPlugin::NodeAffinity) {
        return Some(Arc::from(ERR_NODE_AFFINITY_CONFLICT));
    }
    let err = pod.affinity.parse_error.as_ref()?;
    profile.has_filter(FilterPlugin::InterPodAffinity).then(|| Arc::from(format!("parsing pod: {err}")))
}

fn ignored(profile: &Profile, name: &str) -> bool {
    if !resources::is_extended(name) {
        return false;
    }
    let group = name.split('/').next().unwrap_or_default();
    profile.ignored_resources.contains(name) || profile.ignored_resource_groups.contains(group)
}

fn term(snap: &Snapshot, pod: &ParsedPod, name: &str, weight: i64, non_zero: bool) -> ResourceTerm {
    let r = &pod.requests;
    let (source, value) = match resources::kind(name) {
        Kind::Cpu if non_zero => (Source::NonZeroCpu, r.non_zero_milli_cpu),
        Kind::Memory if non_zero => (Source::NonZeroMemory, r.non_zero_memory),
        Kind::Cpu => (Source::Cpu, r.requests.milli_cpu),
        Kind::Memory => (Source::Memory, r.requests.memory),
        Kind::EphemeralStorage => (Source::Ephemeral, r.requests.ephemeral_storage),
        Kind::Scalar => {
            let v = r.requests.scalar(name);
            match snap.resources.get(name) {
                Some(id) if v != 0 => (Source::Scalar(id), v),
                _ => (Source::Skip, v),
            }
        }
        Kind::Pods | Kind::Ignored => (Source::Skip, 0),
    };
    ResourceTerm { source, pod: value, weight }
}

impl<'p> Query<'p> {
    pub fn new(snap: &Snapshot, profile: &Profile, pod: &'p ParsedPod) -> Query<'p> {
        let r = &pod.requests.requests;
        let scalars = r
            .scalars
            .iter()
            .map(|(name, v)| ScalarRequest {
                id: snap.resources.get(name),
                value: *v,
                ignored: ignored(profile, name),
                reason: Arc::from(format!("Insufficient {name}")),
            })
            .collect();
        let fit_terms = profile.fit_resources.iter().map(|(n, w)| term(snap, pod, n, *w, true)).collect();
        let balanced_terms: Vec<ResourceTerm> =
            profile.balanced_resources.iter().map(|n| term(snap, pod, n, 1, false)).collect();
        let balanced_skip = balanced_terms.iter().all(|t| t.pod == 0);
        let total = snap.node_count().max(1) as f64;
        let images = pod
            .images
            .iter()
            .filter_map(|name| snap.images.get(name))
            .map(|(id, st)| (id, (st.size as f64 * (st.num_nodes as f64 / total)) as i64))
            .collect();
        let affinity = Compiled::with_added(&pod.selector, profile.added.as_ref(), &snap.strings);
        let hard = spread::compile(&pod.spread, true, &pod.labels, &snap.strings);
        let rejected = pre_filter_rejection(profile, pod);
        let interpod = if profile.has_filter(FilterPlugin::InterPodAffinity) && rejected.is_none() {
            interpod::Filter::new(snap, pod)
        } else {
            None
        };
        let filters = profile
            .filters
            .iter()
            .copied()
            .filter(|&f| !filter::skipped(f, pod, &affinity, &hard) && (f != FilterPlugin::InterPodAffinity || interpod.is_some()))
            .collect();
        let mut q = Query {
            pod,
            filters,
            milli_cpu: r.milli_cpu,
            memory: r.memory,
            ephemeral: r.ephemeral_storage,
            scalars,
            zero_requests: r.is_zero(),
            affinity,
            fit_terms,
            balanced_terms,
            balanced_skip,
            images,
            namespace: snap.strings.get(&pod.namespace),
            spread: None,
            spread_soft: spread::compile(&pod.spread, false, &pod.labels, &snap.strings),
            interpod,
            nominated: snap.nominated_for(pod),
            rejected,
        };
        if q.filters.contains(&FilterPlugin::PodTopologySpread) {
            q.spread = Some(spread::Filter::new(snap, &q, hard, q.namespace));
        }
        q
    }
}
