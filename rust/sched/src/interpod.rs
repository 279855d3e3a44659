//! InterPodAffinity over the pods counted in the snapshot: required affinity and anti-affinity
//! (including existing pods' anti-affinity toward the incoming pod) as a filter, preferred
//! terms and existing pods' terms as a score.
//!
//! Filter, per node (PreFilter counts by topology pair (key, value)):
//! 1. affinity: the node has every term's key, and each term's pair holds a pod matching all
//!    the pod's affinity terms; or no such pod exists anywhere and the pod matches its own terms
//!    (the first of a group) -> else UnschedulableAndUnresolvable
//!    "node(s) didn't match pod affinity rules";
//! 2. anti-affinity: no term's pair on the node holds a pod the term matches -> else
//!    Unschedulable "node(s) didn't match pod anti-affinity rules";
//! 3. existing pods' required anti-affinity terms that match the pod: none of their pairs is one
//!    of the node's labels -> else Unschedulable "node(s) didn't satisfy existing pods
//!    anti-affinity rules".
//!
//! Score: per topology pair, + weight for each counted pod a preferred affinity term of the pod
//! matches, - weight for anti-affinity; + hardPodAffinityWeight (default 1, 0: none) for each
//! counted pod whose required affinity term matches the pod; ± weight for existing pods'
//! preferred terms that match the pod (none of the existing pods' terms count for a pod without
//! preferred terms under ignorePreferredTermsOfExistingPods). Pods on nodes without labels add
//! nothing. A node sums the pairs of its labels; scores are scaled to 0..100 between the lowest
//! and the highest of the feasible nodes (all 0 when no pair was scored).

use std::collections::HashMap;

use crate::nodeaffinity::label;
use crate::pod::ParsedPod;
use crate::podaffinity::{CTerm, Term};
use crate::snapshot::{PodEntry, Snapshot};

pub const ERR_AFFINITY: &str = "node(s) didn't match pod affinity rules";
pub const ERR_ANTI_AFFINITY: &str = "node(s) didn't match pod anti-affinity rules";
pub const ERR_EXISTING_ANTI_AFFINITY: &str = "node(s) didn't satisfy existing pods anti-affinity rules";

/// Upstream's default `hardPodAffinityWeight`.
pub const HARD_POD_AFFINITY_WEIGHT: i64 = 1;

/// (topology key id, value id).
type Pair = (u32, u32);

fn pair(labels: &[(u32, u32)], key: Option<u32>) -> Option<Pair> {
    let k = key?;
    Some((k, label(labels, k)?))
}

/// Every counted pod that is on a node, with the node's slot. Not `snap.order`: that list is
/// only rebuilt at the start of a cycle, and preemption's calls (or a cycle's PreFilter state
/// built by `Query::new` outside `schedule_pod`) may come after nodes were added or removed.
fn placed(snap: &Snapshot) -> impl Iterator<Item = (&PodEntry, usize)> {
    snap.pods.iter().flatten().filter_map(|p| Some((p, p.slot? as usize)))
}

/// The required terms' PreFilter state for one pod.
#[derive(Debug, Clone)]
pub struct Filter {
    affinity: Vec<CTerm>,
    anti: Vec<CTerm>,
    affinity_counts: HashMap<Pair, i64>,
    anti_counts: HashMap<Pair, i64>,
    existing_anti: HashMap<Pair, i64>,
    /// The pod matches all its own affinity terms.
    self_match: bool,
}

impl Filter {
    /// None when there is nothing to check (PreFilter's Skip).
    pub fn new(snap: &Snapshot, pod: &ParsedPod) -> Option<Filter> {
        let compile = |ts: &[Term]| ts.iter().map(|t| CTerm::compile(t, &snap.strings)).collect::<Vec<_>>();
        let mut f = Filter {
            affinity: compile(&pod.affinity.affinity),
            anti: compile(&pod.affinity.anti_affinity),
            affinity_counts: HashMap::new(),
            anti_counts: HashMap::new(),
            existing_anti: HashMap::new(),
            self_match: !pod.affinity.affinity.is_empty()
                && pod.affinity.affinity.iter().all(|t| t.matches_strings(&pod.namespace, &pod.labels)),
        };
        for (p, s) in snap.pods_with_affinity() {
            f.account_existing(snap, &snap.cols.labels[s], p, pod, 1);
        }
        if f.affinity.is_empty() && f.anti.is_empty() {
            return (!f.existing_anti.is_empty()).then_some(f);
        }
        for (p, s) in placed(snap) {
            f.account_incoming(snap, &snap.cols.labels[s], p, 1);
        }
        Some(f)
    }

    /// The pod's own required terms against a counted pod on a node with `labels`.
    fn account_incoming(&mut self, snap: &Snapshot, labels: &[(u32, u32)], p: &PodEntry, delta: i64) {
        let matches = |t: &CTerm| t.matches(p.namespace, &p.labels, &snap.strings);
        if !self.affinity.is_empty() && self.affinity.iter().all(matches) {
            for t in &self.affinity {
                if let Some(pr) = pair(labels, t.key) {
                    bump(&mut self.affinity_counts, pr, delta);
                }
            }
        }
        for t in self.anti.iter().filter(|t| matches(t)) {
            if let Some(pr) = pair(labels, t.key) {
                bump(&mut self.anti_counts, pr, delta);
            }
        }
    }

    /// A counted pod's required anti-affinity terms against the pod being scheduled.
    fn account_existing(&mut self, snap: &Snapshot, labels: &[(u32, u32)], p: &PodEntry, pod: &ParsedPod, delta: i64) {
        let Some(terms) = &p.affinity else { return };
        for t in terms.anti_affinity.iter().filter(|t| t.matches_strings(&pod.namespace, &pod.labels)) {
            if let Some(pr) = pair(labels, snap.strings.get(&t.key)) {
                bump(&mut self.existing_anti, pr, delta);
            }
        }
    }

    /// The PreFilter tallies by (topology key, value), sorted: (affinity, anti-affinity,
    /// existing pods' anti-affinity), upstream's `affinityCounts`, `antiAffinityCounts` and
    /// `existingAntiAffinityCounts`.
    pub fn tallies(&self, snap: &Snapshot) -> [Vec<((String, String), i64)>; 3] {
        let named = |m: &HashMap<Pair, i64>| {
            let mut v: Vec<((String, String), i64)> = m
                .iter()
                .map(|(&(k, val), &n)| ((snap.strings.name(k).to_string(), snap.strings.name(val).to_string()), n))
                .collect();
            v.sort();
            v
        };
        [named(&self.affinity_counts), named(&self.anti_counts), named(&self.existing_anti)]
    }

    /// None when the node with `labels` passes, else (reason, unresolvable).
    pub fn check(&self, labels: &[(u32, u32)]) -> Option<(&'static str, bool)> {
        let mut pods_exist = true;
        for t in &self.affinity {
            let Some(pr) = pair(labels, t.key) else { return Some((ERR_AFFINITY, true)) };
            pods_exist &= self.affinity_counts.get(&pr).is_some_and(|&n| n > 0);
        }
        // The first pod of a group with affinity to itself: nothing matches yet anywhere.
        let first_of_group = self.affinity_counts.is_empty() && self.self_match;
        if !(pods_exist || first_of_group) {
            return Some((ERR_AFFINITY, true));
        }
        let blocked = |t: &CTerm| pair(labels, t.key).is_some_and(|pr| self.anti_counts.get(&pr).is_some_and(|&n| n > 0));
        if self.anti.iter().any(blocked) {
            return Some((ERR_ANTI_AFFINITY, false));
        }
        if !self.existing_anti.is_empty() && labels.iter().any(|pr| self.existing_anti.get(pr).is_some_and(|&n| n > 0)) {
            return Some((ERR_EXISTING_ANTI_AFFINITY, false));
        }
        None
    }

    /// `RemovePod` for a preemption dry run: `victims` leave the node in `slot`.
    pub fn remove(&mut self, snap: &Snapshot, slot: usize, victims: &[&PodEntry], pod: &ParsedPod) {
        self.update(snap, slot, victims, pod, -1);
    }

    /// `AddPod` (the node's nominated pods while it is filtered): `pods` join the node in `slot`.
    pub fn add(&mut self, snap: &Snapshot, slot: usize, pods: &[&PodEntry], pod: &ParsedPod) {
        self.update(snap, slot, pods, pod, 1);
    }

    fn update(&mut self, snap: &Snapshot, slot: usize, pods: &[&PodEntry], pod: &ParsedPod, delta: i64) {
        let labels = &snap.cols.labels[slot];
        for p in pods {
            self.account_existing(snap, labels, p, pod, delta);
            self.account_incoming(snap, labels, p, delta);
        }
    }
}

/// `topologyToMatchedTermCount.update`: a pair whose count drops to zero is deleted, so that
/// an empty map means "no pod matches anywhere" (the first pod of a group) after RemovePod too.
fn bump(m: &mut HashMap<Pair, i64>, pr: Pair, delta: i64) {
    let n = m.entry(pr).or_insert(0);
    *n += delta;
    if *n == 0 {
        m.remove(&pr);
    }
}

/// InterPodAffinityArgs as the score reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Args {
    /// Weight of an existing pod's required affinity term that matches the pod (0: not counted).
    pub hard_pod_affinity_weight: i64,
    /// Without preferred terms of its own, the pod scores 0 everywhere (PreScore Skip): the
    /// existing pods' terms are not looked at.
    pub ignore_preferred_terms_of_existing_pods: bool,
}

impl Default for Args {
    /// Upstream's defaults.
    fn default() -> Self {
        Args { hard_pod_affinity_weight: HARD_POD_AFFINITY_WEIGHT, ignore_preferred_terms_of_existing_pods: false }
    }
}

/// Accumulates topology scores: pair -> weight.
struct TopologyScore<'a> {
    snap: &'a Snapshot,
    pod: &'a ParsedPod,
    hard_weight: i64,
    scores: HashMap<Pair, i64>,
}

impl TopologyScore<'_> {
    /// `processExistingPod` for a counted pod on a node with `labels`.
    fn existing(&mut self, labels: &[(u32, u32)], p: &PodEntry, preferred: &[(i64, CTerm)], anti: &[(i64, CTerm)]) {
        if labels.is_empty() {
            return;
        }
        let strings = &self.snap.strings;
        for (sign, terms) in [(1, preferred), (-1, anti)] {
            for (w, t) in terms.iter().filter(|(_, t)| t.matches(p.namespace, &p.labels, strings)) {
                if let Some(pr) = pair(labels, t.key) {
                    *self.scores.entry(pr).or_insert(0) += sign * w;
                }
            }
        }
        let Some(theirs) = &p.affinity else { return };
        let hard_weight = self.hard_weight;
        let hard = theirs.affinity.iter().filter(|_| hard_weight > 0).map(|t| (hard_weight, t, 1));
        let soft = theirs.preferred_affinity.iter().map(|(w, t)| (*w, t, 1));
        let soft_anti = theirs.preferred_anti_affinity.iter().map(|(w, t)| (*w, t, -1));
        for (w, t, sign) in hard.chain(soft).chain(soft_anti) {
            if t.matches_strings(&self.pod.namespace, &self.pod.labels) {
                if let Some(pr) = pair(labels, strings.get(&t.key)) {
                    *self.scores.entry(pr).or_insert(0) += sign * w;
                }
            }
        }
    }
}

/// InterPodAffinity's normalized scores for the feasible `slots`, with upstream's default args.
pub fn scores(snap: &Snapshot, pod: &ParsedPod, slots: &[u32], out: &mut [i64]) {
    scores_with(snap, pod, slots, out, &Args::default());
}

/// InterPodAffinity's normalized scores for the feasible `slots` under `args`.
pub fn scores_with(snap: &Snapshot, pod: &ParsedPod, slots: &[u32], out: &mut [i64], args: &Args) {
    let compile = |ts: &[(i64, Term)]| ts.iter().map(|(w, t)| (*w, CTerm::compile(t, &snap.strings))).collect::<Vec<_>>();
    let preferred = compile(&pod.affinity.preferred_affinity);
    let anti = compile(&pod.affinity.preferred_anti_affinity);
    let mut ts = TopologyScore { snap, pod, hard_weight: args.hard_pod_affinity_weight, scores: HashMap::new() };
    if preferred.is_empty() && anti.is_empty() {
        if !args.ignore_preferred_terms_of_existing_pods {
            for (p, s) in snap.pods_with_affinity() {
                ts.existing(&snap.cols.labels[s], p, &[], &[]);
            }
        }
    } else {
        for (p, s) in placed(snap) {
            ts.existing(&snap.cols.labels[s], p, &preferred, &anti);
        }
    }
    if ts.scores.is_empty() {
        out.fill(0);
        return;
    }
    for (o, &s) in out.iter_mut().zip(slots) {
        *o = snap.cols.labels[s as usize].iter().map(|pr| ts.scores.get(pr).copied().unwrap_or(0)).sum();
    }
    let (min, max) = (out.iter().copied().min().unwrap_or(0), out.iter().copied().max().unwrap_or(0));
    for o in out.iter_mut() {
        *o = if max > min { (100.0 * ((*o - min) as f64 / (max - min) as f64)) as i64 } else { 0 };
    }
}
