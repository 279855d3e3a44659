//! PodTopologySpread: hard constraints (DoNotSchedule) as a filter, soft ones (ScheduleAnyway)
//! as a score, over the pods counted in the snapshot.
//!
//! Filter (PreFilter counts, then per node):
//! - only nodes with every constraint's topology key count; per constraint a node counts when
//!   it passes the inclusion policies (nodeAffinityPolicy Honor by default: the pod's
//!   nodeSelector/required affinity; nodeTaintsPolicy Ignore by default, Honor: no untolerated
//!   NoSchedule/NoExecute taint);
//! - a domain's count is the pods on its counted nodes in the pod's namespace, not terminating,
//!   matched by the selector (labelSelector plus matchLabelKeys, which leave a missing
//!   labelSelector selecting nothing; an empty selector counts none);
//! - a node passes when `count(domain) + (pod matches its own selector) - min over domains
//!   <= maxSkew`, the minimum being 0 while there are fewer domains than minDomains. A node
//!   without a constraint's key fails as UnschedulableAndUnresolvable "... (missing required label)",
//!   a skew too large as Unschedulable.
//!
//! Score: feasible nodes lacking a key are ignored (score 0); per constraint the domains of the
//! other feasible nodes are counted over all eligible nodes (hostname: the node's own pods), a
//! node scores `Σ count·ln(domains+2) + (maxSkew-1)` rounded, and scores are normalized so the
//! fewest matching pods get 100: `100·(max+min-s)/max` (all 100 when max is 0).
//!
//! Cluster default constraints: a pod without constraints of its own gets the profile's default
//! ones, with a label selector built from its Services and controller (upstream's
//! `helper.DefaultSelector`). The scheduler resolves them (the kernels have no Services) and
//! passes them beside the pod (`kubecoreDefaultSpread`). With `defaultingType: System` a node
//! lacking a key is not ignored: it scores by the constraints whose key it has (upstream's
//! `requireAllTopologies` false), and its missing value counts in the domain of the value "",
//! as upstream reads a missing label.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::api::{DefaultSpread, PodSpec, TopologySpreadConstraint};
use crate::intern::Interner;
use crate::labelselector::{Compiled as CSelector, Selector};
use crate::nodeaffinity::label;
use crate::query::Query;
use crate::snapshot::{PodEntry, Snapshot};

pub const ERR_CONSTRAINTS_NOT_MATCH: &str = "node(s) didn't match pod topology spread constraints";
pub const ERR_NODE_LABEL_NOT_MATCH: &str = "node(s) didn't match pod topology spread constraints (missing required label)";
pub const HOSTNAME: &str = "kubernetes.io/hostname";

/// One of the pod's constraints as written.
#[derive(Debug, Clone, PartialEq)]
pub struct Constraint {
    pub max_skew: i64,
    pub key: String,
    /// DoNotSchedule (a filter) rather than ScheduleAnyway (a score).
    pub hard: bool,
    pub selector: Selector,
    pub min_domains: i64,
    pub honor_affinity: bool,
    pub honor_taints: bool,
    /// One of the System default constraints (see the module docs).
    pub system_default: bool,
}

pub fn parse(spec: &PodSpec, pod_labels: &[(String, String)]) -> Vec<Constraint> {
    parse_list(spec.topology_spread_constraints.as_deref().unwrap_or_default(), false, pod_labels)
}

/// The pod's own constraints, else the cluster defaults the scheduler resolved for it.
pub fn parse_or_default(spec: &PodSpec, defaults: Option<&DefaultSpread>, pod_labels: &[(String, String)]) -> Vec<Constraint> {
    match (spec.topology_spread_constraints.as_deref(), defaults) {
        (None | Some([]), Some(d)) => parse_list(&d.constraints, d.system, pod_labels),
        _ => parse(spec, pod_labels),
    }
}

fn parse_list(list: &[TopologySpreadConstraint], system_default: bool, pod_labels: &[(String, String)]) -> Vec<Constraint> {
    let get = |k: &String| pod_labels.iter().find(|(lk, _)| lk == k).cloned();
    list.iter()
        .map(|c| {
            let keys: Vec<(String, String)> = c.match_label_keys.iter().flatten().filter_map(get).collect();
            // upstream's mergeLabelSetWithSelector: a selector of nothing (no labelSelector)
            // stays one; matchLabelKeys only narrow a selector that has requirements
            let selector = match Selector::parse(c.label_selector.as_ref()) {
                Selector::Nothing => Selector::Nothing,
                s => s.with_labels(&keys),
            };
            Constraint {
                max_skew: c.max_skew.unwrap_or(1),
                key: c.topology_key.clone().unwrap_or_default(),
                hard: c.when_unsatisfiable.as_deref() != Some("ScheduleAnyway"),
                selector,
                min_domains: c.min_domains.unwrap_or(1),
                honor_affinity: c.node_affinity_policy.as_deref() != Some("Ignore"),
                honor_taints: c.node_taints_policy.as_deref() == Some("Honor"),
                system_default,
            }
        })
        .collect()
}

/// Per constraint: domain (value id) -> matching pods. Ids are dense small integers, hashed with
/// one multiply (FxHash's constant) rather than SipHash: PreFilter touches the map once per node.
type Domains = HashMap<u32, i64, BuildHasherDefault<IdHasher>>;

#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write_u32(&mut self, id: u32) {
        self.0 = u64::from(id).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write(&mut self, _: &[u8]) {
        unreachable!("domain keys are u32 value ids")
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A constraint compiled for a cycle.
#[derive(Debug, Clone)]
pub struct CConstraint {
    max_skew: i64,
    key: Option<u32>,
    hostname: bool,
    selector: CSelector,
    /// Whether the pod itself matches the selector.
    self_match: bool,
    min_domains: i64,
    honor_affinity: bool,
    honor_taints: bool,
    system_default: bool,
}

/// The pod's hard (or soft) constraints over the snapshot's strings; `pod_labels` sorted.
pub fn compile(cs: &[Constraint], hard: bool, pod_labels: &[(String, String)], strings: &Interner) -> Vec<CConstraint> {
    cs.iter()
        .filter(|c| c.hard == hard)
        .map(|c| {
            CConstraint {
                max_skew: c.max_skew,
                key: strings.get(&c.key),
                hostname: c.key == HOSTNAME,
                self_match: c.selector.matches_strings(pod_labels),
                selector: CSelector::new(&c.selector, strings),
                min_domains: c.min_domains,
                honor_affinity: c.honor_affinity,
                honor_taints: c.honor_taints,
                system_default: c.system_default,
            }
        })
        .collect()
}

fn has_keys(labels: &[(u32, u32)], cs: &[CConstraint]) -> bool {
    cs.iter().all(|c| c.key.and_then(|k| label(labels, k)).is_some())
}

/// `matchNodeInclusionPolicies`. nodeAffinityPolicy Honor reads the pod's own nodeSelector and
/// required terms only (upstream's `GetRequiredNodeAffinity(pod)`), not a profile's
/// addedAffinity.
fn included(snap: &Snapshot, q: &Query<'_>, c: &CConstraint, s: usize) -> bool {
    let cols = &snap.cols;
    (!c.honor_affinity || q.affinity.pod_required_match(&cols.labels[s], &cols.names[s], &snap.strings))
        && (!c.honor_taints || q.pod.tolerations.first_untolerated(&cols.taints[s]).is_none())
}

/// Whether a counted pod is one a constraint of a pod in namespace `ns` counts.
fn counts(p: &PodEntry, c: &CConstraint, ns: Option<u32>, strings: &Interner) -> bool {
    !p.terminating && Some(p.namespace) == ns && c.selector.matches(&p.labels, strings)
}

/// Every node's slot, in slot order. Not `snap.order`: that list is only rebuilt when a cycle
/// starts, and preemption's calls (`filter_node`, dry runs, reprieve) may come after nodes were
/// added or removed. The counts are sums per domain, the same in any order.
fn live_slots(snap: &Snapshot) -> impl Iterator<Item = usize> + '_ {
    snap.cols.live.iter().enumerate().filter_map(|(s, &live)| live.then_some(s))
}

/// `countPodsMatchSelector` on one node.
fn count_on(snap: &Snapshot, s: usize, c: &CConstraint, ns: Option<u32>) -> i64 {
    if c.selector.is_empty() {
        return 0;
    }
    let pods = snap.cols.pods[s].iter().filter_map(|&id| snap.pods[id as usize].as_ref());
    pods.filter(|p| counts(p, c, ns, &snap.strings)).count() as i64
}

/// The hard constraints with their PreFilter counts.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    constraints: Vec<CConstraint>,
    /// Per constraint: domain (value id) -> matching pods.
    domains: Vec<Domains>,
    /// Per constraint: the minimum `check` compares with (upstream's critical path), kept with
    /// `domains` rather than searched for every node.
    mins: Vec<i64>,
}

/// The minimum matching pods over a constraint's domains; 0 while there are fewer domains than
/// minDomains.
fn global_min(c: &CConstraint, d: &Domains) -> i64 {
    if (d.len() as i64) < c.min_domains {
        0
    } else {
        d.values().copied().min().unwrap_or(i64::MAX)
    }
}

impl Filter {
    pub fn new(snap: &Snapshot, q: &Query<'_>, constraints: Vec<CConstraint>, ns: Option<u32>) -> Filter {
        let mut domains = vec![Domains::default(); constraints.len()];
        for s in live_slots(snap) {
            let labels = &snap.cols.labels[s];
            if !has_keys(labels, &constraints) {
                continue;
            }
            for (c, d) in constraints.iter().zip(domains.iter_mut()) {
                if included(snap, q, c, s) {
                    let value = c.key.and_then(|k| label(labels, k)).expect("has_keys checked it");
                    *d.entry(value).or_insert(0) += count_on(snap, s, c, ns);
                }
            }
        }
        let mins = constraints.iter().zip(&domains).map(|(c, d)| global_min(c, d)).collect();
        Filter { constraints, domains, mins }
    }

    /// The hard constraints the counts are for.
    pub fn constraints(&self) -> &[CConstraint] {
        &self.constraints
    }

    /// PreFilter's tally (upstream's `TpValueToMatchNum`): per hard constraint, the eligible
    /// domains' values with their matching pods, sorted by value.
    pub fn domain_counts(&self, snap: &Snapshot) -> Vec<Vec<(String, i64)>> {
        let named = |d: &Domains| {
            let mut v: Vec<(String, i64)> = d.iter().map(|(&k, &n)| (snap.strings.name(k).to_string(), n)).collect();
            v.sort();
            v
        };
        self.domains.iter().map(named).collect()
    }

    /// None when the node passes, else (reason, unresolvable).
    pub fn check(&self, labels: &[(u32, u32)]) -> Option<(&'static str, bool)> {
        for ((c, d), &min) in self.constraints.iter().zip(&self.domains).zip(&self.mins) {
            let Some(value) = c.key.and_then(|k| label(labels, k)) else {
                return Some((ERR_NODE_LABEL_NOT_MATCH, true));
            };
            let skew = d.get(&value).copied().unwrap_or(0) + i64::from(c.self_match) - min;
            if skew > c.max_skew {
                return Some((ERR_CONSTRAINTS_NOT_MATCH, false));
            }
        }
        None
    }

    /// `RemovePod` for a preemption dry run: `pods` leave the node in `slot`.
    pub fn remove(&mut self, snap: &Snapshot, q: &Query<'_>, slot: usize, pods: &[&PodEntry], ns: Option<u32>) {
        self.update(snap, q, slot, pods, ns, -1);
    }

    /// `AddPod` (upstream adds a node's nominated pods to a copy of the PreFilter state while it
    /// filters that node): `pods` join the node in `slot`.
    pub fn add(&mut self, snap: &Snapshot, q: &Query<'_>, slot: usize, pods: &[&PodEntry], ns: Option<u32>) {
        self.update(snap, q, slot, pods, ns, 1);
    }

    /// `updateWithPod`: the node's domains count `pods` `delta` times more (terminating or not).
    fn update(&mut self, snap: &Snapshot, q: &Query<'_>, slot: usize, pods: &[&PodEntry], ns: Option<u32>, delta: i64) {
        let labels = &snap.cols.labels[slot];
        if !has_keys(labels, &self.constraints) {
            return;
        }
        for ((c, d), min) in self.constraints.iter().zip(self.domains.iter_mut()).zip(self.mins.iter_mut()) {
            if !included(snap, q, c, slot) {
                continue;
            }
            let value = c.key.and_then(|k| label(labels, k)).expect("has_keys checked it");
            let n = pods.iter().filter(|p| Some(p.namespace) == ns && c.selector.matches(&p.labels, &snap.strings)).count();
            *d.entry(value).or_insert(0) += delta * n as i64;
            *min = global_min(c, d);
        }
    }
}

/// The soft constraints' normalized scores for the feasible `slots`.
pub fn scores(snap: &Snapshot, q: &Query<'_>, cs: &[CConstraint], ns: Option<u32>, slots: &[u32], out: &mut [i64]) {
    let cols = &snap.cols;
    // upstream's requireAllTopologies: false only for the System default constraints
    let require_all = !cs.iter().any(|c| c.system_default);
    let value_of = |c: &CConstraint, s: usize| c.key.and_then(|k| label(&cols.labels[s], k));
    // upstream reads a missing label as "": the same domain as a label whose value is ""
    let missing = snap.strings.get("").unwrap_or(MISSING);
    let ignored: Vec<bool> = slots.iter().map(|&s| require_all && !has_keys(&cols.labels[s as usize], cs)).collect();
    let mut domains: Vec<Domains> = vec![Domains::default(); cs.len()];
    for (&s, _) in slots.iter().zip(&ignored).filter(|(_, &ig)| !ig) {
        for (c, d) in cs.iter().zip(domains.iter_mut()).filter(|(c, _)| !c.hostname) {
            d.entry(value_of(c, s as usize).unwrap_or(missing)).or_insert(0);
        }
    }
    let kept = ignored.iter().filter(|&&ig| !ig).count();
    let weights: Vec<f64> =
        cs.iter().zip(&domains).map(|(c, d)| (if c.hostname { kept } else { d.len() } as f64 + 2.0).ln()).collect();
    // hostname constraints read each node's own pods below: no walk when there are only those
    let walk = cs.iter().any(|c| !c.hostname);
    for s in live_slots(snap).filter(|_| walk) {
        if require_all && !has_keys(&cols.labels[s], cs) {
            continue;
        }
        for (c, d) in cs.iter().zip(domains.iter_mut()).filter(|(c, _)| !c.hostname) {
            if let Some(n) = d.get_mut(&value_of(c, s).unwrap_or(missing)) {
                if included(snap, q, c, s) {
                    *n += count_on(snap, s, c, ns);
                }
            }
        }
    }
    for ((o, &s), &ig) in out.iter_mut().zip(slots).zip(&ignored) {
        if ig {
            continue;
        }
        let mut score = 0.0;
        for ((c, d), w) in cs.iter().zip(&domains).zip(&weights) {
            let Some(value) = value_of(c, s as usize) else { continue }; // only without require_all
            let cnt = if c.hostname { count_on(snap, s as usize, c, ns) } else { d[&value] };
            score += cnt as f64 * w + (c.max_skew - 1) as f64;
        }
        *o = score.round() as i64;
    }
    normalize(out, &ignored);
}

/// The domain of nodes without a constraint's key when they are not ignored and no label in
/// the snapshot has the value "" (upstream reads the missing label as "", one more domain).
const MISSING: u32 = u32::MAX;

/// PodTopologySpread's NormalizeScore: fewer matching pods score higher; ignored nodes 0.
fn normalize(scores: &mut [i64], ignored: &[bool]) {
    let kept = || scores.iter().zip(ignored).filter(|(_, &ig)| !ig).map(|(&s, _)| s);
    let (Some(min), Some(max)) = (kept().min(), kept().max()) else {
        scores.fill(0);
        return;
    };
    for (s, &ig) in scores.iter_mut().zip(ignored) {
        *s = match (ig, max) {
            (true, _) => 0,
            (false, 0) => 100,
            (false, _) => 100 * (max + min - *s) / max,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_like_upstream() {
        let mut s = [4, 2, 0, 7];
        normalize(&mut s, &[false, false, false, true]);
        assert_eq!(s, [0, 50, 100, 0]);
        let mut s = [0, 0];
        normalize(&mut s, &[false, false]);
        assert_eq!(s, [100, 100]);
    }
}
