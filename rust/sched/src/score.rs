//! The Score plugins over the feasible nodes, their NormalizeScore, and the weighted total.
//!
//! | plugin                          | node score (0..100)                                   | normalize         |
//! |---------------------------------|-------------------------------------------------------|-------------------|
//! | NodeResourcesFit LeastAllocated | Σ w·(alloc-req)·100/alloc / Σ w                       | none              |
//! | NodeResourcesFit MostAllocated  | Σ w·min(req,alloc)·100/alloc / Σ w                    | none              |
//! | NodeResourcesFit RTC            | round(Σ w·shape(req·100/alloc) / Σ w), zero terms out | none              |
//! | BalancedAllocation              | (1 - std of req/alloc fractions)·100; best effort: 0  | none              |
//! | NodeAffinity                    | Σ weights of matching preferred terms                 | max → 100         |
//! | TaintToleration                 | intolerable PreferNoSchedule taints                   | max → 0, reversed |
//! | ImageLocality                   | images' scaled sizes clamped to [23Mi, 1000Mi·n]      | none              |
//! | PodTopologySpread               | see spread.rs                                         | its own           |
//! | InterPodAffinity                | see interpod.rs                                       | min..max → 0..100 |
//!
//! "req" includes the pod; Fit uses non-zero requests for cpu/memory, BalancedAllocation the
//! real ones; resources with allocatable 0 are left out of the sums.

use rayon::prelude::*;
use smallvec::SmallVec;

use crate::pod::ParsedPod;
use crate::profile::{FitStrategy, Profile, ScorePlugin, MAX_BALANCED_RESOURCES, MAX_NODE_SCORE};
use crate::query::{Query, ResourceTerm};
use crate::snapshot::Snapshot;
use crate::{interpod, spread};

const MB: i64 = 1024 * 1024;
const MIN_IMAGE_THRESHOLD: i64 = 23 * MB;
const MAX_CONTAINER_IMAGE_THRESHOLD: i64 = 1000 * MB;

/// Feasible nodes from this many up are scored in parallel.
const PARALLEL_SCORE_NODES: usize = 2048;
/// Nodes per parallel work unit.
const PARALLEL_SCORE_GRAIN: usize = 512;

/// `a / b` for `0 <= a` and `0 < b` whose quotient is small (a score): a float division
/// corrected to the exact integer quotient (64-bit integer division is the slowest instruction
/// in the scoring loops).
#[inline]
pub fn small_quotient(a: i64, b: i64) -> i64 {
    let q = (a as f64 / b as f64) as i64;
    if q * b > a {
        q - 1
    } else if (q + 1) * b <= a {
        q + 1
    } else {
        q
    }
}

fn least_requested(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return 0;
    }
    small_quotient((capacity - requested) * MAX_NODE_SCORE, capacity)
}

fn most_requested(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 {
        return 0;
    }
    small_quotient(requested.clamp(0, capacity) * MAX_NODE_SCORE, capacity)
}

/// `BuildBrokenLinearFunction` over scaled shape points.
pub fn broken_linear(shape: &[(i64, i64)], p: i64) -> i64 {
    for (i, &(u, s)) in shape.iter().enumerate() {
        if p <= u {
            if i == 0 {
                return s;
            }
            let (u0, s0) = shape[i - 1];
            return s0 + (s - s0) * (p - u0) / (u - u0);
        }
    }
    shape.last().map_or(0, |&(_, s)| s)
}

/// A scored resource's columns resolved once per chunk: (allocatable, requested without the
/// pod, the pod's request, weight); terms without columns are left out (they add nothing).
type TermColumns<'c> = SmallVec<[(&'c [i64], &'c [i64], i64, i64); 4]>;

fn term_columns<'c>(terms: &[ResourceTerm], snap: &'c Snapshot) -> TermColumns<'c> {
    terms.iter().filter_map(|t| t.columns(&snap.cols).map(|(a, r)| (a, r, t.pod, t.weight))).collect()
}

/// NodeResourcesFit's scores for `slots` into `out`: per node, the weighted mean of the
/// strategy's score over the resources the node has (allocatable > 0).
fn fit_chunk(strategy: &FitStrategy, terms: &[ResourceTerm], snap: &Snapshot, slots: &[u32], out: &mut [i64]) {
    let cols = term_columns(terms, snap);
    match strategy {
        FitStrategy::LeastAllocated => fit_mean(&cols, slots, out, least_requested),
        FitStrategy::MostAllocated => fit_mean(&cols, slots, out, most_requested),
        FitStrategy::RequestedToCapacityRatio(shape) => {
            for (o, &s) in out.iter_mut().zip(slots) {
                let (mut sum, mut weights) = (0i64, 0i64);
                for &(alloc, req, pod, weight) in &cols {
                    let (a, r) = (alloc[s as usize], req[s as usize] + pod);
                    if a == 0 {
                        continue;
                    }
                    let score = broken_linear(shape, if r > a { 100 } else { r * 100 / a });
                    if score > 0 {
                        sum += score * weight;
                        weights += weight;
                    }
                }
                *o = if weights == 0 { 0 } else { (sum as f64 / weights as f64).round() as i64 };
            }
        }
    }
}

/// LeastAllocated / MostAllocated: `Σ w·score(req, alloc) / Σ w` over the node's resources.
#[inline(always)]
fn fit_mean(cols: &TermColumns<'_>, slots: &[u32], out: &mut [i64], score: fn(i64, i64) -> i64) {
    if let [(a1, r1, p1, w1), (a2, r2, p2, w2)] = cols[..] {
        // The default (cpu and memory): both terms unrolled.
        for (o, &s) in out.iter_mut().zip(slots) {
            let s = s as usize;
            let (x, y) = (a1[s], a2[s]);
            *o = match (x != 0, y != 0) {
                (true, true) => small_quotient(score(r1[s] + p1, x) * w1 + score(r2[s] + p2, y) * w2, w1 + w2),
                (true, false) => small_quotient(score(r1[s] + p1, x) * w1, w1),
                (false, true) => small_quotient(score(r2[s] + p2, y) * w2, w2),
                (false, false) => 0,
            };
        }
        return;
    }
    for (o, &s) in out.iter_mut().zip(slots) {
        let (mut sum, mut weights) = (0i64, 0i64);
        for &(alloc, req, pod, weight) in cols {
            let a = alloc[s as usize];
            if a != 0 {
                sum += score(req[s as usize] + pod, a) * weight;
                weights += weight;
            }
        }
        *o = if weights == 0 { 0 } else { small_quotient(sum, weights) };
    }
}

/// BalancedAllocation's scores: 1 - the standard deviation of the requested fractions (of the
/// resources the node has, in the terms' order).
fn balanced_chunk(terms: &[ResourceTerm], snap: &Snapshot, slots: &[u32], out: &mut [i64]) {
    let cols = term_columns(terms, snap);
    let fraction = |a: i64, r: i64| (r as f64 / a as f64).min(1.0);
    if let [(a1, r1, p1, _), (a2, r2, p2, _)] = cols[..] {
        // The default (cpu and memory): balanced_from's two-fraction case, unrolled.
        for (o, &s) in out.iter_mut().zip(slots) {
            let s = s as usize;
            let (x, y) = (a1[s], a2[s]);
            let std = if x != 0 && y != 0 { ((fraction(x, r1[s] + p1) - fraction(y, r2[s] + p2)) / 2.0).abs() } else { 0.0 };
            *o = ((1.0 - std) * MAX_NODE_SCORE as f64) as i64;
        }
        return;
    }
    let mut buf = [0f64; MAX_BALANCED_RESOURCES];
    for (o, &s) in out.iter_mut().zip(slots) {
        let mut len = 0;
        for &(alloc, req, pod, _) in &cols {
            let a = alloc[s as usize];
            if a != 0 {
                buf[len] = fraction(a, req[s as usize] + pod);
                len += 1;
            }
        }
        *o = balanced_from(&buf[..len]);
    }
}

/// `(1 - std(fractions)) * 100`, as upstream computes it.
fn balanced_from(fractions: &[f64]) -> i64 {
    let std = match fractions {
        [] | [_] => 0.0,
        [a, b] => ((a - b) / 2.0).abs(),
        all => {
            let len = all.len() as f64;
            let mean = all.iter().sum::<f64>() / len;
            (all.iter().map(|f| (f - mean) * (f - mean)).sum::<f64>() / len).sqrt()
        }
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

fn image_score(q: &Query<'_>, snap: &Snapshot, s: usize) -> i64 {
    let have = &snap.cols.images[s];
    let sum: i64 = q.images.iter().filter(|(id, _)| have.binary_search(id).is_ok()).map(|&(_, v)| v).sum();
    let max = MAX_CONTAINER_IMAGE_THRESHOLD * q.pod.images.len() as i64;
    if sum <= MIN_IMAGE_THRESHOLD || max <= MIN_IMAGE_THRESHOLD {
        return 0;
    }
    small_quotient(MAX_NODE_SCORE * (sum.min(max) - MIN_IMAGE_THRESHOLD), max - MIN_IMAGE_THRESHOLD)
}

/// One plugin's raw scores for `slots` into `out`.
fn raw_chunk(plugin: ScorePlugin, profile: &Profile, q: &Query<'_>, snap: &Snapshot, slots: &[u32], out: &mut [i64]) {
    let c = &snap.cols;
    fn per_node(slots: &[u32], out: &mut [i64], f: impl Fn(usize) -> i64) {
        for (o, &s) in out.iter_mut().zip(slots) {
            *o = f(s as usize);
        }
    }
    match plugin {
        ScorePlugin::NodeResourcesFit => fit_chunk(&profile.strategy, &q.fit_terms, snap, slots, out),
        ScorePlugin::NodeResourcesBalancedAllocation => balanced_chunk(&q.balanced_terms, snap, slots, out),
        ScorePlugin::NodeAffinity => {
            per_node(slots, out, |s| q.affinity.preferred_score(&c.labels[s], &c.names[s], &snap.strings))
        }
        ScorePlugin::TaintToleration => per_node(slots, out, |s| q.pod.tolerations.intolerable_prefer_no_schedule(&c.taints[s])),
        ScorePlugin::ImageLocality => per_node(slots, out, |s| image_score(q, snap, s)),
        ScorePlugin::PodTopologySpread => spread::scores(snap, q, &q.spread_soft, q.namespace, slots, out),
        ScorePlugin::InterPodAffinity => interpod::scores_with(snap, q.pod, slots, out, &profile.interpod),
    }
}

/// `DefaultNormalizeScore`: scale so the maximum is 100 (reversed: 100 - that).
pub fn default_normalize(scores: &mut [i64], reverse: bool) {
    let max = scores.iter().copied().max().unwrap_or(0).max(0);
    if max == 0 {
        if reverse {
            scores.iter_mut().for_each(|x| *x = MAX_NODE_SCORE);
        }
        return;
    }
    for x in scores.iter_mut() {
        // A raw 0 (most nodes, for TaintToleration) needs no division.
        let v = if *x <= 0 { 0 } else { small_quotient(MAX_NODE_SCORE * *x, max) };
        *x = if reverse { MAX_NODE_SCORE - v } else { v };
    }
}

/// The Error a native PreScore ends the cycle with, as the framework wraps it: InterPodAffinity's
/// when the pod's terms do not convert (unless it skips first: ignorePreferredTermsOfExistingPods
/// and no preferred terms).
pub fn pre_score_error(profile: &Profile, pod: &ParsedPod) -> Option<String> {
    let terms = &pod.affinity;
    let err = terms.parse_error.as_ref()?;
    if !profile.scores.iter().any(|&(p, _)| p == ScorePlugin::InterPodAffinity)
        || (profile.interpod.ignore_preferred_terms_of_existing_pods && !terms.declares_preferred)
    {
        return None;
    }
    Some(format!("running PreScore plugin \"InterPodAffinity\": failed to parse pod: {err}"))
}

/// Whether the plugin's PreScore says Skip for this pod (it then adds nothing).
fn skipped(plugin: ScorePlugin, profile: &Profile, snap: &Snapshot, q: &Query<'_>) -> bool {
    match plugin {
        ScorePlugin::NodeResourcesBalancedAllocation => q.balanced_skip,
        ScorePlugin::NodeAffinity => q.affinity.preferred.is_empty(),
        ScorePlugin::PodTopologySpread => q.spread_soft.is_empty(),
        // Not a PreScore Skip upstream, but the same outcome: when even a node with all of the
        // pod's images stays under the threshold, every node scores 0.
        ScorePlugin::ImageLocality => q.images.iter().map(|&(_, v)| v).sum::<i64>() <= MIN_IMAGE_THRESHOLD,
        // No preferred terms of its own, and no counted pod with terms or (PreScore Skip under
        // ignorePreferredTermsOfExistingPods) their terms not looked at: no topology score at all.
        ScorePlugin::InterPodAffinity => {
            let terms = &q.pod.affinity;
            terms.preferred_affinity.is_empty()
                && terms.preferred_anti_affinity.is_empty()
                && (profile.interpod.ignore_preferred_terms_of_existing_pods || snap.pods_with_affinity().next().is_none())
        }
        _ => false,
    }
}

/// The plugin's normalized score when it is provably the same on every node: TaintToleration
/// when no node has a PreferNoSchedule taint (every raw score 0, reversed to the maximum).
fn constant(plugin: ScorePlugin, snap: &Snapshot) -> Option<i64> {
    match plugin {
        ScorePlugin::TaintToleration if snap.cols.prefer_no_schedule_nodes == 0 => Some(MAX_NODE_SCORE),
        _ => None,
    }
}

/// NodeResourcesFit's and BalancedAllocation's weighted scores per slot, kept between cycles.
/// Both depend only on the slot's allocatable and usage columns (summed up by its
/// `Columns::stamp`) and on the pod's requests and the profile's arguments (the key): for
/// consecutive pods with the same requests (a workload's replicas) only the nodes whose columns
/// changed since (the ones pods were placed on) are scored again. A few keys are kept, most
/// recently used first, so that interleaved workloads do not evict each other.
#[derive(Debug, Default)]
pub struct ResourceCache {
    entries: Vec<CacheEntry>,
}

/// Keys kept at most.
const CACHE_KEYS: usize = 4;

#[derive(Debug)]
struct CacheEntry {
    key: ResourceKey,
    /// Per slot: the column stamp `values[slot]` was computed at (0: never).
    stamps: Vec<u64>,
    values: Vec<i64>,
}

/// What the resource scores depend on besides the node's columns: (weight, terms) per plugin.
#[derive(Debug, Clone, PartialEq)]
struct ResourceKey {
    strategy: FitStrategy,
    fit: Option<(i64, Vec<ResourceTerm>)>,
    balanced: Option<(i64, Vec<ResourceTerm>)>,
}

impl ResourceCache {
    /// `base` plus the resource plugins' weighted scores, for each of `slots`.
    fn totals(&mut self, key: ResourceKey, snap: &Snapshot, slots: &[u32], base: i64) -> Vec<i64> {
        match self.entries.iter().position(|e| e.key == key) {
            Some(i) => self.entries[..=i].rotate_right(1),
            None => {
                if self.entries.len() == CACHE_KEYS {
                    self.entries.pop();
                }
                self.entries.insert(0, CacheEntry { key, stamps: Vec::new(), values: Vec::new() });
            }
        }
        self.entries[0].totals(snap, slots, base)
    }
}

impl CacheEntry {
    fn totals(&mut self, snap: &Snapshot, slots: &[u32], base: i64) -> Vec<i64> {
        let n = snap.cols.len();
        if self.stamps.len() < n {
            self.stamps.resize(n, 0);
            self.values.resize(n, 0);
        }
        let (stamps, values, stamp) = (&mut self.stamps[..n], &mut self.values[..n], &snap.cols.stamp[..n]);
        // Hits are taken right away; misses (slot, position) are scored together below.
        let (mut misses, mut at) = (Vec::new(), Vec::new());
        let mut total: Vec<i64> = slots
            .iter()
            .enumerate()
            .map(|(i, &s)| {
                let s = s as usize;
                if stamps[s] == stamp[s] {
                    base + values[s]
                } else {
                    misses.push(s as u32);
                    at.push(i);
                    base
                }
            })
            .collect();
        if misses.is_empty() {
            return total;
        }
        let key = &self.key;
        let mut sum = vec![0i64; misses.len()];
        let mut buf = vec![0i64; misses.len()];
        if let Some((w, terms)) = &key.fit {
            fit_chunk(&key.strategy, terms, snap, &misses, &mut buf);
            sum.iter_mut().zip(&buf).for_each(|(t, s)| *t += s * w);
        }
        if let Some((w, terms)) = &key.balanced {
            balanced_chunk(terms, snap, &misses, &mut buf);
            sum.iter_mut().zip(&buf).for_each(|(t, s)| *t += s * w);
        }
        for ((&s, &i), v) in misses.iter().zip(&at).zip(sum) {
            stamps[s as usize] = stamp[s as usize];
            values[s as usize] = v;
            total[i] += v;
        }
        total
    }
}

/// The cache's key for this pod and profile; None when neither resource plugin scores.
fn resource_key(profile: &Profile, q: &Query<'_>) -> Option<ResourceKey> {
    let weight = |p: ScorePlugin| profile.scores.iter().find(|&&(x, _)| x == p).map(|&(_, w)| w);
    let fit = weight(ScorePlugin::NodeResourcesFit).map(|w| (w, q.fit_terms.clone()));
    let balanced = weight(ScorePlugin::NodeResourcesBalancedAllocation)
        .filter(|_| !q.balanced_skip)
        .map(|w| (w, q.balanced_terms.clone()));
    (fit.is_some() || balanced.is_some()).then(|| ResourceKey { strategy: profile.strategy.clone(), fit, balanced })
}

/// The weighted total score of each slot in `slots` (same order). With a `cache` (and fewer
/// slots than are scored in parallel) the resource plugins' scores come from it.
pub fn totals(
    snap: &Snapshot,
    profile: &Profile,
    q: &Query<'_>,
    slots: &[u32],
    cache: Option<&mut ResourceCache>,
) -> Vec<i64> {
    if profile.scores.is_empty() {
        return vec![1; slots.len()];
    }
    // Each plugin once: skipped (adds nothing), the same on every node (adds to all totals
    // alike), or scored below.
    let mut base = 0i64;
    let mut scored: SmallVec<[(ScorePlugin, i64); 8]> = SmallVec::new();
    for &(plugin, weight) in &profile.scores {
        if skipped(plugin, profile, snap, q) {
            continue;
        }
        match constant(plugin, snap) {
            Some(score) => base += score * weight,
            None => scored.push((plugin, weight)),
        }
    }
    let key = cache.as_ref().and_then(|_| resource_key(profile, q)).filter(|_| slots.len() < PARALLEL_SCORE_NODES);
    let cached = key.is_some();
    let mut total = match (cache, key) {
        (Some(cache), Some(key)) => cache.totals(key, snap, slots, base),
        _ => vec![base; slots.len()],
    };
    let mut scores = Vec::new();
    for &(plugin, weight) in &scored {
        if cached && matches!(plugin, ScorePlugin::NodeResourcesFit | ScorePlugin::NodeResourcesBalancedAllocation) {
            continue;
        }
        scores.resize(slots.len(), 0);
        // PodTopologySpread and InterPodAffinity count and normalize over all the slots at once.
        let whole = matches!(plugin, ScorePlugin::PodTopologySpread | ScorePlugin::InterPodAffinity);
        if slots.len() >= PARALLEL_SCORE_NODES && !whole {
            slots
                .par_chunks(PARALLEL_SCORE_GRAIN)
                .zip(scores.par_chunks_mut(PARALLEL_SCORE_GRAIN))
                .for_each(|(sl, out)| raw_chunk(plugin, profile, q, snap, sl, out));
        } else {
            raw_chunk(plugin, profile, q, snap, slots, &mut scores);
        }
        match plugin {
            ScorePlugin::NodeAffinity => default_normalize(&mut scores, false),
            ScorePlugin::TaintToleration => default_normalize(&mut scores, true),
            _ => {}
        }
        for (t, s) in total.iter_mut().zip(&scores) {
            *t += s * weight;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::Source;

    /// Nodes of assorted sizes (some without cpu or memory) with pods on them, and a scalar
    /// resource no node has any of.
    fn assorted() -> (Snapshot, u32) {
        let mut s = Snapshot::new(1);
        let sizes = [("4", "32Gi"), ("0", "8Gi"), ("2", "0"), ("0", "0"), ("16", "3Gi"), ("1500m", "1Gi")];
        for (i, (cpu, mem)) in sizes.iter().enumerate() {
            let json = format!(
                r#"{{"metadata":{{"name":"n{i}"}},
                    "status":{{"allocatable":{{"cpu":"{cpu}","memory":"{mem}","pods":"110","example.com/x":"0"}}}}}}"#
            );
            s.set_node_json(json.as_bytes()).unwrap();
            for j in 0..i {
                let (cpu, mem) = (300 * j, 700 * j);
                let pod = format!(r#"{{"spec":{{"containers":[{{"resources":{{"requests":{{"cpu":"{cpu}m","memory":"{mem}Mi"}}}}}}]}}}}"#);
                s.add_pod_json(&format!("p{i}-{j}"), pod.as_bytes(), &format!("n{i}")).unwrap();
            }
        }
        let id = s.resources.get("example.com/x").unwrap();
        (s, id)
    }

    #[test]
    fn unrolled_resource_scores_match_the_general_loops() {
        let (snap, x) = assorted();
        let slots: Vec<u32> = (0..snap.cols.len() as u32).collect();
        let term = |source, pod, weight| ResourceTerm { source, pod, weight };
        let two = [term(Source::NonZeroCpu, 250, 1), term(Source::NonZeroMemory, 300 << 20, 3)];
        // A third resource the nodes lack adds nothing, but takes the general loops.
        let three = [two[0], two[1], term(Source::Scalar(x), 1, 5)];
        let run = |f: &dyn Fn(&[ResourceTerm], &mut [i64]), terms: &[ResourceTerm]| {
            let mut out = vec![-1; slots.len()];
            f(terms, &mut out);
            out
        };
        for strategy in [FitStrategy::LeastAllocated, FitStrategy::MostAllocated] {
            let fit = |t: &[ResourceTerm], out: &mut [i64]| fit_chunk(&strategy, t, &snap, &slots, out);
            assert_eq!(run(&fit, &two), run(&fit, &three), "{strategy:?}");
        }
        let balanced = |t: &[ResourceTerm], out: &mut [i64]| balanced_chunk(t, &snap, &slots, out);
        let got = run(&balanced, &two);
        assert_eq!(got, run(&balanced, &three));
        // And the two-fraction case by hand.
        let c = &snap.cols;
        for (i, &s) in slots.iter().enumerate() {
            let s = s as usize;
            let cpu = (c.allocatable_cpu[s], c.non_zero_cpu[s] + 250);
            let requested = [cpu, (c.allocatable_memory[s], c.non_zero_memory[s] + (300 << 20))];
            let fractions: Vec<f64> = requested
                .into_iter()
                .filter(|&(a, _)| a != 0)
                .map(|(a, r)| (r as f64 / a as f64).min(1.0))
                .collect();
            assert_eq!(got[i], balanced_from(&fractions), "node {s}");
        }
    }

    #[test]
    fn resource_scorers() {
        assert_eq!(least_requested(1000, 4000), 75);
        assert_eq!(least_requested(5000, 4000), 0);
        assert_eq!(most_requested(1000, 4000), 25);
        assert_eq!(most_requested(5000, 4000), 100);
    }

    #[test]
    fn small_quotients_are_exact() {
        let cases = [(0, 7), (99, 100), (100, 100), (u32::MAX as i64 * 100, u32::MAX as i64), (3 << 40, (1 << 40) + 1)];
        for (a, b) in cases {
            assert_eq!(small_quotient(a, b), a / b, "{a} / {b}");
        }
        for a in 0..2000 {
            for b in 1..50 {
                assert_eq!(small_quotient(a * 100, b * 37), a * 100 / (b * 37));
            }
        }
        let cap = (32i64 << 30) + 12345;
        for req in [0, 1, cap / 3, cap - 1, cap] {
            assert_eq!(small_quotient((cap - req) * 100, cap), (cap - req) * 100 / cap);
        }
    }

    #[test]
    fn broken_linear_function() {
        let shape = [(10, 10), (50, 90), (90, 20)];
        assert_eq!(broken_linear(&shape, 0), 10);
        assert_eq!(broken_linear(&shape, 30), 50);
        assert_eq!(broken_linear(&shape, 70), 55);
        assert_eq!(broken_linear(&shape, 100), 20);
    }

    #[test]
    fn normalizes() {
        let mut s = [0, 5, 10];
        default_normalize(&mut s, false);
        assert_eq!(s, [0, 50, 100]);
        let mut s = [0, 1, 2];
        default_normalize(&mut s, true);
        assert_eq!(s, [100, 50, 0]);
        let mut s = [0, 0];
        default_normalize(&mut s, true);
        assert_eq!(s, [100, 100]);
        let mut s = [0, 0];
        default_normalize(&mut s, false);
        assert_eq!(s, [0, 0]);
    }
}
