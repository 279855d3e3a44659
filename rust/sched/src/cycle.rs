//! One scheduling cycle's native part (upstream's `schedulePod` minus the Python plugins):
//! find feasible nodes, score them, select a host.
//!
//! - `numFeasibleNodesToFind`: all nodes under 100; else `percentage` of them (profile value, or
//!   adaptive `50 - n/125` floored at 5 %), at least 100. A profile without any Score plugin
//!   (`select` and no native one: the caller scores nothing either) looks for one feasible node,
//!   as upstream's findNodesThatPassFilters (numNodesToFind = 1).
//! - Nodes are visited in node-tree order starting at the rotating index `next_start`; after the
//!   cycle it advances by the number of nodes processed (feasible found + failed), modulo the
//!   number of all nodes.
//! - NodeAffinity's PreFilterResult: when every required term of the pod names nodes
//!   (`metadata.name In`), only those of them that exist are visited (in name order, from
//!   `next_start` modulo their number, upstream's order being a set's); every other node has the
//!   status UnschedulableAndUnresolvable "node(s) didn't satisfy plugin(s) [NodeAffinity]",
//!   counted among the reasons but not among the evaluated nodes (upstream's absent nodes). When
//!   none of them exists, every node fails with that reason.
//! - A native PreFilter that rejects the pod (the query's `rejected`) fails every node with its
//!   status; the rotating index does not move.
//! - A PreScore error (InterPodAffinity: the pod's preferred terms do not convert) ends the cycle
//!   with `error` set and nothing selected (`schedule` returns it as [`Error::Plugin`]).
//! - Filtering runs over chunks of that order in parallel (rayon) and stops at the chunk that
//!   yields enough feasible nodes. Unlike upstream's racy cancellation, the outcome is what a
//!   sequential scan gives: the first `k` feasible nodes in visiting order, and only the nodes
//!   up to the k-th feasible one count as processed.
//! - One feasible node is chosen without scoring; otherwise the highest total wins, ties broken
//!   uniformly at random (selectHost's reservoir sampling) with the snapshot's PRNG.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use rayon::prelude::*;

use crate::filter::{self, Failure};
use crate::pod::ParsedPod;
use crate::profile::{FilterPlugin, Profile};
use crate::query::Query;
use crate::score;
use crate::snapshot::Snapshot;
use crate::Error;

pub const MIN_FEASIBLE_NODES_TO_FIND: usize = 100;
pub const MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND: i64 = 5;

/// Chunks of at least this many nodes are filtered in parallel.
const PARALLEL_FILTER_NODES: usize = 2048;
/// Work units rayon may split a parallel chunk into are at least this long.
const PARALLEL_GRAIN: usize = 512;

/// `numFeasibleNodesToFind(percentageOfNodesToScore, numAllNodes)`; 0 = adaptive.
pub fn num_feasible_nodes_to_find(percentage: i64, num_all_nodes: usize) -> usize {
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND {
        return num_all_nodes;
    }
    let mut pct = percentage;
    if pct == 0 {
        pct = (50 - num_all_nodes as i64 / 125).max(MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND);
    }
    let n = (num_all_nodes as i64 * pct / 100) as usize;
    n.max(MIN_FEASIBLE_NODES_TO_FIND)
}

/// What one cycle found.
#[derive(Debug, Clone, Default)]
pub struct ScheduleResult {
    /// The chosen node's slot (None: nothing feasible, or selection not asked for).
    pub node: Option<u32>,
    /// Feasible slots in visiting order.
    pub feasible: Vec<u32>,
    /// Weighted total per feasible slot; empty with at most one feasible node.
    pub scores: Vec<i64>,
    /// Nodes whose filters ran (the rotating start moved by as many).
    pub evaluated: usize,
    /// Reason -> nodes that failed with it, sorted by reason; with NodeAffinity's
    /// PreFilterResult also the nodes it left out, under `ERR_PRE_FILTER_NODE_AFFINITY`.
    pub reasons: Vec<(String, usize)>,
    pub unresolvable: usize,
    /// Node names by slot as they were during the cycle.
    pub names: Arc<Vec<Arc<str>>>,
    /// A plugin's Error status that ended the cycle (upstream returns it as the cycle's error).
    pub error: Option<String>,
    /// The message of the native PreFilter that rejected the pod (UnschedulableAndUnresolvable;
    /// every node failed with it): upstream's Diagnosis.PreFilterMsg.
    pub rejected: Option<String>,
}

/// The status of the nodes a PreFilterResult of NodeAffinity left out.
pub const ERR_PRE_FILTER_NODE_AFFINITY: &str = "node(s) didn't satisfy plugin(s) [NodeAffinity]";

impl ScheduleResult {
    pub fn node_name(&self) -> Option<&str> {
        self.node.map(|s| &*self.names[s as usize])
    }

    pub fn feasible_names(&self) -> impl Iterator<Item = &str> {
        self.feasible.iter().map(|&s| &*self.names[s as usize])
    }
}

struct Scan {
    feasible: Vec<u32>,
    failures: Vec<Failure>,
    processed: usize,
}

fn count_reasons(failures: &[Failure]) -> (Vec<(String, usize)>, usize) {
    if failures.is_empty() {
        return (Vec::new(), 0);
    }
    // Reasons are a few strings, shared (static, or one Arc per taint or resource): counted by
    // address first (no string hashing per failure), then merged by text.
    let mut by_addr: HashMap<(usize, usize), (&str, usize), BuildHasherDefault<AddrHasher>> = HashMap::default();
    for f in failures {
        for r in &f.reasons {
            let text = r.as_str();
            by_addr.entry((text.as_ptr() as usize, text.len())).or_insert((text, 0)).1 += 1;
        }
    }
    let mut texts: Vec<(&str, usize)> = by_addr.into_values().collect();
    texts.sort_unstable();
    let mut reasons: Vec<(String, usize)> = Vec::with_capacity(texts.len());
    for (text, n) in texts {
        match reasons.last_mut() {
            Some((last, count)) if last == text => *count += n,
            _ => reasons.push((text.to_string(), n)),
        }
    }
    (reasons, failures.iter().filter(|f| f.unresolvable).count())
}

/// A hasher for (address, length) keys: a multiply per word (FxHash's).
#[derive(Default)]
struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// How many nodes the next chunk filters: enough to find `needed` more at the feasibility
/// ratio seen so far (found / seen), with a margin; everything past the needed node is wasted.
fn next_chunk(needed: usize, found: usize, seen: usize) -> usize {
    if found == 0 {
        return seen.max(PARALLEL_GRAIN) * 2;
    }
    let estimate = needed * seen / found;
    (estimate + estimate / 4 + 16).max(64)
}

/// Positions `i..end` (`end <= order.len()`) of `order` rotated to start at `start`.
fn rotated_range<'a>(order: &'a [u32], start: usize, i: usize, end: usize, buf: &'a mut Vec<u32>) -> &'a [u32] {
    let n = order.len();
    let (a, b) = (start + i, start + end);
    if b <= n {
        &order[a..b]
    } else if a >= n {
        &order[a - n..b - n]
    } else {
        buf.clear();
        buf.extend_from_slice(&order[a..]);
        buf.extend_from_slice(&order[..b - n]);
        buf
    }
}

impl Snapshot {
    /// Filters the nodes of `order` from `start` on (wrapping around) until `to_find` fit or all
    /// were seen.
    fn scan(&self, q: &Query<'_>, order: &[u32], start: usize, to_find: usize) -> Scan {
        let n = order.len();
        let mut scan = Scan { feasible: Vec::with_capacity(to_find), failures: Vec::new(), processed: n };
        let mut chunk = to_find;
        let mut wrapped: Vec<u32> = Vec::new();
        let mut i = 0;
        while i < n {
            let end = (i + chunk).min(n);
            // Visiting positions i..end are order[(start + i) % n ..]: one slice of the order, or
            // (across its end) two, copied together.
            let slots = rotated_range(order, start, i, end, &mut wrapped);
            let done = if end - i < PARALLEL_FILTER_NODES {
                self.scan_sequential(q, slots, to_find, &mut scan)
            } else {
                self.scan_parallel(q, slots, to_find, &mut scan)
            };
            if let Some(k) = done {
                scan.processed = i + k + 1;
                return scan;
            }
            i = end;
            chunk = next_chunk(to_find - scan.feasible.len(), scan.feasible.len(), i);
        }
        scan
    }

    /// Filters `slots` in order; Some(k) when the k-th one completed `to_find`.
    fn scan_sequential(&self, q: &Query<'_>, slots: &[u32], to_find: usize, scan: &mut Scan) -> Option<usize> {
        let mut mask = vec![true; slots.len()];
        filter::mask(self, q, slots, &mut mask);
        filter::nominated_mask(self, q, slots, &mut mask);
        self.collect(q, slots, &mask, to_find, scan)
    }

    /// As [`Snapshot::scan_sequential`], the masks computed on rayon's threads.
    fn scan_parallel(&self, q: &Query<'_>, slots: &[u32], to_find: usize, scan: &mut Scan) -> Option<usize> {
        let mut mask = vec![true; slots.len()];
        slots
            .par_chunks(PARALLEL_GRAIN)
            .zip(mask.par_chunks_mut(PARALLEL_GRAIN))
            .for_each(|(sl, m)| filter::mask(self, q, sl, m));
        filter::nominated_mask(self, q, slots, &mut mask);
        self.collect(q, slots, &mask, to_find, scan)
    }

    /// Walks a filtered chunk in order: feasible nodes until `to_find`, failures' reasons.
    /// Runs of feasible nodes are copied whole.
    fn collect(&self, q: &Query<'_>, slots: &[u32], mask: &[bool], to_find: usize, scan: &mut Scan) -> Option<usize> {
        let mut i = 0;
        while i < slots.len() {
            let run = mask[i..].iter().position(|&ok| !ok).unwrap_or(slots.len() - i);
            let need = to_find - scan.feasible.len();
            if run >= need {
                scan.feasible.extend_from_slice(&slots[i..i + need]);
                return Some(i + need - 1);
            }
            scan.feasible.extend_from_slice(&slots[i..i + run]);
            i += run;
            if let Some(&slot) = slots.get(i) {
                if let Some(f) = filter::run(self, q, slot as usize, None) {
                    scan.failures.push(f);
                }
                i += 1;
            }
        }
        None
    }

    /// NodeAffinity's PreFilterResult for the query: the slots of the named nodes that exist, in
    /// name order (None: every node).
    fn narrowed(&self, profile: &Profile, q: &Query<'_>) -> Option<Vec<u32>> {
        let names = q.pod.selector.node_names.as_ref()?;
        if !profile.has_filter(FilterPlugin::NodeAffinity) {
            return None;
        }
        Some(names.iter().filter_map(|n| self.by_name.get(n.as_str()).copied()).collect())
    }

    /// One cycle for a parsed pod. `select = false` stops after scoring: the caller scores too
    /// (Python Score plugins), so the search is for numFeasibleNodesToFind nodes even when the
    /// profile has no native Score plugin.
    pub fn schedule_pod(&mut self, profile: &Profile, pod: &ParsedPod, select: bool) -> ScheduleResult {
        self.ensure_order();
        let n_all = self.order.len();
        let mut result = ScheduleResult { names: self.cols.names.clone(), ..Default::default() };
        if n_all == 0 {
            return result;
        }
        let q = Query::new(self, profile, pod);
        let narrowed = self.narrowed(profile, &q);
        let fail_all = |result: &mut ScheduleResult, reason: &str| {
            (result.reasons, result.unresolvable, result.evaluated) = (vec![(reason.to_string(), n_all)], n_all, n_all);
        };
        if let Some(reason) = &q.rejected {
            fail_all(&mut result, reason);
            result.rejected = Some(reason.to_string());
            return result;
        }
        if narrowed.as_ref().is_some_and(|s| s.is_empty()) {
            fail_all(&mut result, ERR_PRE_FILTER_NODE_AFFINITY);
            return result;
        }
        let order = narrowed.as_deref().unwrap_or(&self.order);
        let n = order.len();
        let to_find = if select && profile.scores.is_empty() {
            1
        } else {
            num_feasible_nodes_to_find(profile.percentage_of_nodes_to_score, n)
        };
        let start = self.next_start % n;
        let processed = if profile.filters.is_empty() {
            result.feasible = (0..to_find).map(|i| order[(start + i) % n]).collect();
            to_find
        } else {
            let scan = self.scan(&q, order, start, to_find);
            (result.reasons, result.unresolvable) = count_reasons(&scan.failures);
            result.feasible = scan.feasible;
            scan.processed
        };
        result.evaluated = processed;
        self.next_start = (self.next_start + processed) % n_all;
        if n < n_all {
            let at = result.reasons.partition_point(|(r, _)| r.as_str() < ERR_PRE_FILTER_NODE_AFFINITY);
            result.reasons.insert(at, (ERR_PRE_FILTER_NODE_AFFINITY.to_string(), n_all - n));
        }
        if result.feasible.len() > 1 {
            if let Some(e) = score::pre_score_error(profile, pod) {
                result.error = Some(e);
                return result;
            }
            let mut cache = self.resource_cache.take();
            result.scores = score::totals(self, profile, &q, &result.feasible, cache.as_mut());
            self.resource_cache = cache;
        }
        if select && !result.feasible.is_empty() {
            result.node = Some(result.feasible[self.select_host(&result.scores)]);
        }
        result
    }

    /// selectHost: the index of a top score, uniformly among ties (0 without scores).
    fn select_host(&mut self, scores: &[i64]) -> usize {
        let mut best = 0;
        let mut ties = 0u64;
        for (i, &s) in scores.iter().enumerate() {
            if s > scores[best] {
                best = i;
                ties = 1;
            } else if s == scores[best] {
                ties += 1;
                if self.rng.below(ties) == 0 {
                    best = i;
                }
            }
        }
        best
    }

    pub fn schedule(&mut self, profile: &Profile, pod_json: &[u8], select: bool) -> Result<ScheduleResult, Error> {
        let pod = ParsedPod::from_json(pod_json)?;
        let r = self.schedule_pod(profile, &pod, select);
        match r.error {
            Some(e) => Err(Error::Plugin(e)),
            None => Ok(r),
        }
    }

    /// Schedules pods in order, counting each placed pod on its node before the next one.
    /// All pods are parsed first: a bad one fails the batch before anything is counted. A pod
    /// whose cycle ended with a plugin error has `error` set (and no node).
    pub fn schedule_batch(&mut self, profile: &Profile, pods: &[(&str, &[u8])]) -> Result<Vec<ScheduleResult>, Error> {
        let parsed = pods
            .iter()
            .map(|(key, json)| ParsedPod::from_json(json).map_err(|e| e.for_pod(key)))
            .collect::<Result<Vec<_>, _>>()?;
        let mut out = Vec::with_capacity(pods.len());
        for ((key, _), pod) in pods.iter().zip(&parsed) {
            let r = self.schedule_pod(profile, pod, true);
            if let Some(slot) = r.node {
                let name = r.names[slot as usize].clone();
                self.add_pod(key, pod, &name);
            }
            out.push(r);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::Reason;

    #[test]
    fn reasons_are_counted_by_text() {
        let fail = |reasons: &[Reason], unresolvable| Failure { unresolvable, reasons: reasons.iter().cloned().collect() };
        let taint = "node(s) had untolerated taint(s)";
        let (a1, a2): (Arc<str>, Arc<str>) = (Arc::from(taint), Arc::from(taint));
        let cpu = Reason::Static(filter::ERR_CPU);
        let failures = [
            fail(&[Reason::Shared(a1.clone())], true),
            fail(&[cpu.clone(), Reason::Static(filter::ERR_MEMORY)], false),
            fail(&[Reason::Shared(a2)], true),
            fail(&[Reason::Shared(Arc::from(filter::ERR_CPU))], false),
            fail(&[Reason::Shared(a1)], true),
            fail(&[cpu], false),
        ];
        let want = vec![
            ("Insufficient cpu".to_string(), 3),
            ("Insufficient memory".to_string(), 1),
            ("node(s) had untolerated taint(s)".to_string(), 3),
        ];
        assert_eq!(count_reasons(&failures), (want, 3));
        assert_eq!(count_reasons(&[]), (Vec::new(), 0));
    }
}
