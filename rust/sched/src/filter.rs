//! The Filter plugins over one node slot, with upstream's reasons and status codes.
//!
//! Per node the profile's filters run in order and stop at the first failing plugin (as the
//! framework's RunFilterPlugins does); that plugin's reasons are the node's reasons.
//!
//! | plugin            | reason(s)                                                   | code |
//! |-------------------|-------------------------------------------------------------|------|
//! | NodeName          | node(s) didn't match the requested node name                | UU   |
//! | NodeUnschedulable | node(s) were unschedulable                                  | UU   |
//! | NodeResourcesFit  | Too many pods, Insufficient cpu/memory/ephemeral-storage/X  | U, or UU when a request exceeds the node's allocatable |
//! | NodeAffinity      | node(s) didn't match scheduler-enforced node affinity (the profile's addedAffinity, checked first) / node(s) didn't match Pod's node affinity/selector | UU |
//! | TaintToleration   | node(s) had untolerated taint(s)                            | UU   |
//! | NodePorts         | node(s) didn't have free ports for the requested pod ports  | U    |
//! | PodTopologySpread | node(s) didn't match pod topology spread constraints         | U; UU with " (missing required label)" |
//! | InterPodAffinity  | node(s) didn't match pod affinity rules (UU) / pod anti-affinity rules (U) / node(s) didn't satisfy existing pods anti-affinity rules (U) | |
//!
//! (U = Unschedulable, UU = UnschedulableAndUnresolvable: preemption cannot help.)
//!
//! A pod a native PreFilter rejected (the query's `rejected`) fails on every node with that
//! status (UU) before any filter runs.
//!
//! A node with nominated pods (the query's `nominated`, see `overlay`) is filtered as upstream's
//! RunFilterPluginsWithNominatedPods does: first with those pods added (their usage, pod count and
//! host ports, and PodTopologySpread's and InterPodAffinity's AddPod on a copy of the PreFilter
//! state), then as it is; the first failing pass gives the reasons. Other nodes take one pass.

use std::collections::HashMap;
use std::sync::Arc;

use smallvec::SmallVec;

use crate::columns::Columns;
use crate::nodeaffinity::{self, Compiled};
use crate::pod::ParsedPod;
use crate::ports::HostPort;
use crate::profile::FilterPlugin;
use crate::query::Query;
use crate::snapshot::{PodEntry, Snapshot};
use crate::spread::CConstraint;

pub const ERR_NODE_NAME: &str = "node(s) didn't match the requested node name";
pub const ERR_UNSCHEDULABLE: &str = "node(s) were unschedulable";
pub const ERR_AFFINITY: &str = nodeaffinity::ERR_REASON_POD;
pub const ERR_AFFINITY_ENFORCED: &str = nodeaffinity::ERR_REASON_ENFORCED;
pub const ERR_PORTS: &str = "node(s) didn't have free ports for the requested pod ports";
pub const ERR_TOO_MANY_PODS: &str = "Too many pods";
pub const ERR_CPU: &str = "Insufficient cpu";
pub const ERR_MEMORY: &str = "Insufficient memory";
pub const ERR_EPHEMERAL: &str = "Insufficient ephemeral-storage";

/// A reason string: fixed, or built once and shared (taints, scalar resources).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    Static(&'static str),
    Shared(Arc<str>),
}

impl Reason {
    pub fn as_str(&self) -> &str {
        match self {
            Reason::Static(s) => s,
            Reason::Shared(s) => s,
        }
    }
}

/// Why a node was filtered out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub unresolvable: bool,
    pub reasons: SmallVec<[Reason; 2]>,
}

impl Failure {
    fn one(reason: Reason, unresolvable: bool) -> Failure {
        let mut reasons = SmallVec::new();
        reasons.push(reason);
        Failure { unresolvable, reasons }
    }
}

/// Pods taken off a node for a preemption dry run: their usage is not counted. Nominated pods
/// added to the node count negatively, their host ports in `added_ports`.
#[derive(Debug, Clone, Default)]
pub struct Removed {
    pub milli_cpu: i64,
    pub memory: i64,
    pub ephemeral: i64,
    pub pods: i64,
    pub scalars: Vec<(u32, i64)>,
    pub ports: Vec<HostPort>,
    pub added_ports: Vec<HostPort>,
}

impl Removed {
    fn scalar(&self, id: u32) -> i64 {
        self.scalars.iter().filter(|(i, _)| *i == id).map(|(_, v)| v).sum()
    }
}

static NOTHING_REMOVED: Removed = Removed {
    milli_cpu: 0,
    memory: 0,
    ephemeral: 0,
    pods: 0,
    scalars: Vec::new(),
    ports: Vec::new(),
    added_ports: Vec::new(),
};

/// Whether the plugin's PreFilter says Skip for this pod (its Filter then does not run).
pub fn skipped(plugin: FilterPlugin, pod: &ParsedPod, affinity: &Compiled, hard_spread: &[CConstraint]) -> bool {
    match plugin {
        FilterPlugin::PodTopologySpread => hard_spread.is_empty(),
        FilterPlugin::NodeName => pod.node_name.is_empty(),
        FilterPlugin::NodePorts => pod.host_ports.is_empty(),
        FilterPlugin::NodeAffinity => !affinity.filters,
        _ => false,
    }
}

/// Runs the pod's filters for the node in `slot` (with `removed` taken off it): with the node's
/// nominated pods, then without; None when the node fits.
pub fn run(snap: &Snapshot, q: &Query<'_>, slot: usize, removed: Option<&Removed>) -> Option<Failure> {
    if let Some(reason) = &q.rejected {
        return Some(Failure::one(Reason::Shared(reason.clone()), true));
    }
    if let Some(pods) = nominated_on(q, slot) {
        if let Some(f) = run_nominated(snap, q, slot, removed, pods) {
            return Some(f);
        }
    }
    run_once(snap, q, slot, removed.unwrap_or(&NOTHING_REMOVED))
}

/// The pods nominated to `slot` that the query's filters add there.
fn nominated_on<'q>(q: &'q Query<'_>, slot: usize) -> Option<&'q [PodEntry]> {
    Some(q.nominated.as_ref()?.get(&(slot as u32))?.as_slice())
}

/// The pass with `pods` (nominated to `slot`) added to the node and to a copy of the PreFilter
/// state (upstream's `addGENominatedPods`).
fn run_nominated(snap: &Snapshot, q: &Query<'_>, slot: usize, removed: Option<&Removed>, pods: &[PodEntry]) -> Option<Failure> {
    let refs: Vec<&PodEntry> = pods.iter().collect();
    let mut with = q.clone();
    if let Some(sp) = with.spread.as_mut() {
        sp.add(snap, q, slot, &refs, q.namespace);
    }
    if let Some(ip) = with.interpod.as_mut() {
        ip.add(snap, slot, &refs, q.pod);
    }
    let mut rm = removed.cloned().unwrap_or_default();
    for p in pods {
        let u = &p.usage;
        rm.milli_cpu -= u.milli_cpu;
        rm.memory -= u.memory;
        rm.ephemeral -= u.ephemeral_storage;
        rm.pods -= 1;
        rm.scalars.extend(u.scalars.iter().map(|&(id, v)| (id, -v)));
        rm.added_ports.extend(u.ports.iter().cloned());
    }
    run_once(snap, &with, slot, &rm)
}

/// One pass of the pod's filters over the node in `slot` as `rm` leaves it.
fn run_once(snap: &Snapshot, q: &Query<'_>, slot: usize, rm: &Removed) -> Option<Failure> {
    q.filters.iter().find_map(|f| match f {
        FilterPlugin::NodeName => node_name(snap, q, slot),
        FilterPlugin::NodeUnschedulable => unschedulable(snap, q, slot),
        FilterPlugin::NodeResourcesFit => fit(snap, q, slot, rm),
        FilterPlugin::NodeAffinity => affinity(snap, q, slot),
        FilterPlugin::TaintToleration => taints(snap, q, slot),
        FilterPlugin::NodePorts => ports(snap, q, slot, rm),
        FilterPlugin::PodTopologySpread => spread(snap, q, slot),
        FilterPlugin::InterPodAffinity => interpod(snap, q, slot),
    })
}

/// Which of `slots` pass every filter of the pod: the hot path, no reasons built
/// (feasibility does not depend on the plugins' order; [`run`] gives a failing node's reasons).
/// NodeUnschedulable, TaintToleration and NodeResourcesFit's pods/cpu/memory/ephemeral checks
/// share one pass ([`column_mask`]); the others have a tight pass each. `mask[i]` must start true.
/// Nodes with nominated pods need [`nominated_mask`] too.
pub fn mask(snap: &Snapshot, q: &Query<'_>, slots: &[u32], mask: &mut [bool]) {
    if q.rejected.is_some() {
        mask.fill(false);
        return;
    }
    let c = &snap.cols;
    // Generic, not `dyn`: each plugin's check is inlined into its own loop.
    fn each(slots: &[u32], mask: &mut [bool], keep: impl Fn(usize) -> bool) {
        for (m, &s) in mask.iter_mut().zip(slots) {
            *m = *m && keep(s as usize);
        }
    }
    column_mask(c, q, slots, mask);
    for f in &q.filters {
        match f {
            FilterPlugin::NodeName => each(slots, mask, |s| *q.pod.node_name == *c.names[s]),
            FilterPlugin::NodeResourcesFit => scalars_mask(c, q, slots, mask),
            FilterPlugin::NodeAffinity => {
                each(slots, mask, |s| q.affinity.required_match(&c.labels[s], &c.names[s], &snap.strings))
            }
            FilterPlugin::NodePorts => each(slots, mask, |s| !c.ports[s].conflicts(&q.pod.host_ports, &[])),
            FilterPlugin::PodTopologySpread => {
                let Some(sp) = &q.spread else { continue };
                each(slots, mask, |s| sp.check(&c.labels[s]).is_none())
            }
            FilterPlugin::InterPodAffinity => {
                let Some(ip) = &q.interpod else { continue };
                each(slots, mask, |s| ip.check(&c.labels[s]).is_none())
            }
            FilterPlugin::NodeUnschedulable | FilterPlugin::TaintToleration => {} // in column_mask
        }
    }
}

/// After [`mask`]: the nodes with nominated pods among `slots` that passed take the pass with
/// those pods too, as [`run`] does (most cycles have none: nothing to do).
pub fn nominated_mask(snap: &Snapshot, q: &Query<'_>, slots: &[u32], mask: &mut [bool]) {
    if let Some(nominated) = &q.nominated {
        nominated_pass(snap, q, nominated, slots, mask);
    }
}

#[cold]
#[inline(never)]
fn nominated_pass(snap: &Snapshot, q: &Query<'_>, nominated: &HashMap<u32, Vec<PodEntry>>, slots: &[u32], mask: &mut [bool]) {
    for (m, &s) in mask.iter_mut().zip(slots) {
        if let (true, Some(pods)) = (*m, nominated.get(&s)) {
            *m = run_nominated(snap, q, s as usize, None, pods).is_none();
        }
    }
}

/// What [`column_mask`] checks for a pod: the requests (`i64::MIN` when not checked, which any
/// free amount satisfies) and which plugins' checks apply. A plugin whose input is the same on
/// every node is left out: NodeUnschedulable when no node is unschedulable (or the pod tolerates
/// it), TaintToleration when no node has a NoSchedule/NoExecute taint.
struct ColumnChecks {
    fit: bool,
    cpu: i64,
    memory: i64,
    ephemeral: Option<i64>,
    unschedulable: bool,
    taints: bool,
}

impl ColumnChecks {
    fn new(c: &Columns, q: &Query<'_>) -> ColumnChecks {
        let has = |p| q.filters.contains(&p);
        let fit = has(FilterPlugin::NodeResourcesFit);
        let want = |v: i64| if fit && !q.zero_requests && v > 0 { v } else { i64::MIN };
        ColumnChecks {
            fit,
            cpu: want(q.milli_cpu),
            memory: want(q.memory),
            ephemeral: Some(want(q.ephemeral)).filter(|&v| v != i64::MIN),
            unschedulable: has(FilterPlugin::NodeUnschedulable)
                && !q.pod.tolerations.tolerates_unschedulable
                && c.unschedulable_nodes > 0,
            taints: has(FilterPlugin::TaintToleration) && c.blocking_taint_nodes > 0,
        }
    }
}

/// NodeUnschedulable, TaintToleration and `fitsRequest`'s pods/cpu/memory/ephemeral-storage in
/// one pass over the chunk.
fn column_mask(c: &Columns, q: &Query<'_>, slots: &[u32], mask: &mut [bool]) {
    let k = ColumnChecks::new(c, q);
    // A loop per combination of the common flags: the per-node work tests none of them.
    match (k.ephemeral.is_some(), k.unschedulable || k.taints) {
        (false, false) => column_loop::<false, false>(c, q, &k, slots, mask),
        (true, false) => column_loop::<true, false>(c, q, &k, slots, mask),
        (false, true) => column_loop::<false, true>(c, q, &k, slots, mask),
        (true, true) => column_loop::<true, true>(c, q, &k, slots, mask),
    }
}

/// [`column_mask`]'s pass: EPH = ephemeral-storage is requested, OTHERS = NodeUnschedulable or
/// TaintToleration has something to check.
#[inline(always)]
fn column_loop<const EPH: bool, const OTHERS: bool>(
    c: &Columns,
    q: &Query<'_>,
    k: &ColumnChecks,
    slots: &[u32],
    mask: &mut [bool],
) {
    if !(k.fit || OTHERS) {
        return;
    }
    let n = c.len();
    let (pods, allowed) = (&c.pod_count[..n], &c.allowed_pods[..n]);
    let (acpu, rcpu) = (&c.allocatable_cpu[..n], &c.requested_cpu[..n]);
    let (amem, rmem) = (&c.allocatable_memory[..n], &c.requested_memory[..n]);
    let (aeph, reph) = (&c.allocatable_ephemeral[..n], &c.requested_ephemeral[..n]);
    let ephemeral = k.ephemeral.unwrap_or(i64::MIN);
    for (m, &s) in mask.iter_mut().zip(slots) {
        let s = s as usize;
        let mut ok = *m;
        if k.fit {
            ok &= (pods[s] < allowed[s]) & (k.cpu <= acpu[s] - rcpu[s]) & (k.memory <= amem[s] - rmem[s]);
        }
        if EPH {
            ok &= ephemeral <= aeph[s] - reph[s];
        }
        if OTHERS {
            if k.unschedulable {
                ok &= !c.unschedulable[s];
            }
            if k.taints && ok {
                ok = c.taints[s].is_empty() || q.pod.tolerations.first_untolerated(&c.taints[s]).is_none();
            }
        }
        *m = ok;
    }
}

/// `fitsRequest` for the scalar resources, a pass per requested one.
fn scalars_mask(c: &Columns, q: &Query<'_>, slots: &[u32], mask: &mut [bool]) {
    if q.zero_requests {
        return;
    }
    for sc in q.scalars.iter().filter(|sc| !sc.ignored && sc.value > 0) {
        match sc.id.and_then(|id| Some((c.scalar_allocatable.get(id as usize)?, c.scalar_requested.get(id as usize)?))) {
            Some((alloc, used)) => {
                for (m, &s) in mask.iter_mut().zip(slots) {
                    *m &= sc.value <= alloc[s as usize] - used[s as usize];
                }
            }
            None => mask.fill(false),
        }
    }
}

fn spread(snap: &Snapshot, q: &Query<'_>, s: usize) -> Option<Failure> {
    let (reason, unresolvable) = q.spread.as_ref()?.check(&snap.cols.labels[s])?;
    Some(Failure::one(Reason::Static(reason), unresolvable))
}

fn interpod(snap: &Snapshot, q: &Query<'_>, s: usize) -> Option<Failure> {
    let (reason, unresolvable) = q.interpod.as_ref()?.check(&snap.cols.labels[s])?;
    Some(Failure::one(Reason::Static(reason), unresolvable))
}

fn node_name(snap: &Snapshot, q: &Query<'_>, s: usize) -> Option<Failure> {
    (*q.pod.node_name != *snap.cols.names[s]).then(|| Failure::one(Reason::Static(ERR_NODE_NAME), true))
}

fn unschedulable(snap: &Snapshot, q: &Query<'_>, s: usize) -> Option<Failure> {
    (snap.cols.unschedulable[s] && !q.pod.tolerations.tolerates_unschedulable)
        .then(|| Failure::one(Reason::Static(ERR_UNSCHEDULABLE), true))
}

/// The profile's addedAffinity first ("scheduler-enforced"), then the pod's own selection.
fn affinity(snap: &Snapshot, q: &Query<'_>, s: usize) -> Option<Failure> {
    let reason = q.affinity.failure(&snap.cols.labels[s], &snap.cols.names[s], &snap.strings)?;
    Some(Failure::one(Reason::Static(reason), true))
}

fn taints(snap: &Snapshot, q: &Query<'_>, s: usize) -> Option<Failure> {
    let taints = &snap.cols.taints[s];
    if taints.is_empty() {
        return None;
    }
    let t = q.pod.tolerations.first_untolerated(taints)?;
    Some(Failure::one(Reason::Shared(t.reason.clone()), true))
}

fn ports(snap: &Snapshot, q: &Query<'_>, s: usize, rm: &Removed) -> Option<Failure> {
    let used = &snap.cols.ports[s];
    let conflict = if rm.added_ports.is_empty() {
        used.conflicts(&q.pod.host_ports, &rm.ports)
    } else {
        let mut with = used.clone();
        with.add(&rm.added_ports);
        with.conflicts(&q.pod.host_ports, &rm.ports)
    };
    conflict.then(|| Failure::one(Reason::Static(ERR_PORTS), false))
}

/// `fitsRequest`: every insufficient resource is a reason.
fn fit(snap: &Snapshot, q: &Query<'_>, s: usize, rm: &Removed) -> Option<Failure> {
    let c = &snap.cols;
    let mut f = Failure { unresolvable: false, reasons: SmallVec::new() };
    if c.pod_count[s] - rm.pods + 1 > c.allowed_pods[s] {
        f.reasons.push(Reason::Static(ERR_TOO_MANY_PODS));
    }
    if !q.zero_requests {
        let mut check = |want: i64, alloc: i64, used: i64, reason: Reason| {
            if want > 0 && want > alloc - used {
                f.reasons.push(reason);
                f.unresolvable |= want > alloc;
            }
        };
        check(q.milli_cpu, c.allocatable_cpu[s], c.requested_cpu[s] - rm.milli_cpu, Reason::Static(ERR_CPU));
        check(q.memory, c.allocatable_memory[s], c.requested_memory[s] - rm.memory, Reason::Static(ERR_MEMORY));
        check(q.ephemeral, c.allocatable_ephemeral[s], c.requested_ephemeral[s] - rm.ephemeral, Reason::Static(ERR_EPHEMERAL));
        for sc in q.scalars.iter().filter(|sc| !sc.ignored) {
            let (alloc, used) = match sc.id {
                Some(id) => (c.scalar_allocatable(id, s), c.scalar_requested(id, s) - rm.scalar(id)),
                None => (0, 0),
            };
            check(sc.value, alloc, used, Reason::Shared(sc.reason.clone()));
        }
    }
    (!f.reasons.is_empty()).then_some(f)
}
