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

/// NodeResourcesFit's scores for `slots` into `out`, one pass per resource: independent
/// iterations let the divisions of many nodes overlap.
fn fit_chunk(strategy: &FitStrategy, terms: &[ResourceTerm], snap: &Snapshot, slots: &[u32], out: &mut [i64]) {
    let mut weights = vec![0i64; slots.len()];
    out.fill(0);
    for t in terms {
        let Some((alloc, req)) = t.columns(&snap.cols) else { continue };
        for ((&s, o), w) in slots.iter().zip(out.iter_mut()).zip(weights.iter_mut()) {
            let (a, r) = (alloc[s as usize], req[s as usize] + t.pod);
            if a == 0 {
                continue;
            }
            let score = match strategy {
                FitStrategy::LeastAllocated => least_requested(r, a),
                FitStrategy::MostAllocated => most_requested(r, a),
                FitStrategy::RequestedToCapacityRatio(shape) => {
                    let score = broken_linear(shape, if r > a { 100 } else { r * 100 / a });
                    if score <= 0 {
                        continue;
                    }
                    score
                }
            };
            *o += score * t.weight;
            *w += t.weight;
        }
    }
    let rtc = matches!(strategy, FitStrategy::RequestedToCapacityRatio(_));
    for (o, &w) in out.iter_mut().zip(&weights) {
        *o = match w {
            0 => 0,
            _ if rtc => (*o as f64 / w as f64).round() as i64,
            _ => small_quotient(*o, w),
        };
    }
}

/// BalancedAllocation's scores: 1 - the standard deviation of the requested fractions.
fn balanced_chunk(terms: &[ResourceTerm], snap: &Snapshot, slots: &[u32], out: &mut [i64]) {
    let n = slots.len();
    // fractions[j * n + i]: term j on node i; NaN where the node has none of the resource.
    let mut fractions = vec![f64::NAN; terms.len() * n];
    for (j, t) in terms.iter().enumerate() {
        let Some((alloc, req)) = t.columns(&snap.cols) else { continue };
        for (i, &s) in slots.iter().enumerate() {
            let a = alloc[s as usize];
            if a != 0 {
                fractions[j * n + i] = ((req[s as usize] + t.pod) as f64 / a as f64).min(1.0);
            }
        }
    }
    let mut buf = [0f64; MAX_BALANCED_RESOURCES];
    for (i, o) in out.iter_mut().enumerate() {
        let mut len = 0;
        for f in fractions[i..].iter().step_by(n).take(terms.len()) {
            if !f.is_nan() {
                buf[len] = *f;
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
    let per_node = |out: &mut [i64], f: &dyn Fn(usize) -> i64| {
        for (o, &s) in out.iter_mut().zip(slots) {
            *o = f(s as usize);
        }
    };
    match plugin {
        ScorePlugin::NodeResourcesFit => fit_chunk(&profile.strategy, &q.fit_terms, snap, slots, out),
        ScorePlugin::NodeResourcesBalancedAllocation => balanced_chunk(&q.balanced_terms, snap, slots, out),
        ScorePlugin::NodeAffinity => {
            per_node(out, &|s| q.affinity.preferred_score(&c.labels[s], &c.names[s], &snap.strings))
        }
        ScorePlugin::TaintToleration => per_node(out, &|s| q.pod.tolerations.intolerable_prefer_no_schedule(&c.taints[s])),
        ScorePlugin::ImageLocality => per_node(out, &|s| image_score(q, snap, s)),
        ScorePlugin::PodTopologySpread => spread::scores(snap, q, &q.spread_soft, q.namespace, slots, out),
        ScorePlugin::InterPodAffinity => interpod::scores(snap, q.pod, slots, out),
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
        let v = small_quotient(MAX_NODE_SCORE * (*x).max(0), max);
        *x = if reverse { MAX_NODE_SCORE - v } else { v };
    }
}

/// Whether the plugin's PreScore says Skip for this pod (it then adds nothing).
fn skipped(plugin: ScorePlugin, q: &Query<'_>) -> bool {
    match plugin {
        ScorePlugin::NodeResourcesBalancedAllocation => q.balanced_skip,
        ScorePlugin::NodeAffinity => q.affinity.preferred.is_empty(),
        ScorePlugin::PodTopologySpread => q.spread_soft.is_empty(),
        // Not a PreScore Skip upstream, but the same outcome: when even a node with all of the
        // pod's images stays under the threshold, every node scores 0.
        ScorePlugin::ImageLocality => q.images.iter().map(|&(_, v)| v).sum::<i64>() <= MIN_IMAGE_THRESHOLD,
        _ => false,
    }
}

/// The weighted total score of each slot in `slots` (same order).
pub fn totals(snap: &Snapshot, profile: &Profile, q: &Query<'_>, slots: &[u32]) -> Vec<i64> {
    if profile.scores.is_empty() {
        return vec![1; slots.len()];
    }
    let mut total = vec![0i64; slots.len()];
    let mut scores = vec![0i64; slots.len()];
    for &(plugin, weight) in &profile.scores {
        if skipped(plugin, q) {
            continue;
        }
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
