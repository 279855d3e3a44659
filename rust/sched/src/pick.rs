//! Preemption's search, victims and choice of node in one call, for a cycle in which no
//! PodDisruptionBudget exists (upstream DefaultPreemption: findCandidates, SelectVictimsOnNode,
//! pickOneNodeForPreemption). With PDBs the caller orders victims itself and uses
//! [`Snapshot::dry_run_lower`] and [`Snapshot::reprieve`].
//!
//! 1. Nodes are dry-run in the caller's order with every lower-priority pod removed. A rejected
//!    node whose cycle status was implicit and whose failing filter says unresolvable is not a
//!    potential node (the cycle would have said so): not counted, no status. Without PDBs every
//!    candidate is violation-free, so the search stops at the `wanted`-th node that fits.
//! 2. Victims per candidate: its lower-priority pods, most important first (higher priority,
//!    then earlier start, a pod without a start time counting as starting `now`; equal pods keep
//!    the node's order), reprieved in that order ([`Snapshot::reprieve_slot`]).
//! 3. The node: the first without victims, if any; otherwise, each criterion keeping the best
//!    of the nodes left: the lowest highest-victim priority, the smallest sum of victim
//!    priorities (each shifted by 2^31, so all count positive), the fewest victims, the latest
//!    earliest start among the highest-priority victims; then the first found.
//!
//! Candidates are independent: many of them are worked out in parallel (rayon).

use std::cmp::Reverse;

use rayon::prelude::*;

use crate::filter::Failure;
use crate::pod::ParsedPod;
use crate::preempt::DryRun;
use crate::profile::Profile;
use crate::query::Query;
use crate::snapshot::{PodEntry, Snapshot};
use crate::Error;

/// Candidates worked out on rayon's threads from this many on (a candidate costs a few µs).
const PARALLEL_CANDIDATES: usize = 512;

/// What [`Snapshot::preempt_select`] found.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// The chosen node and its victims' keys, most important first; None: no candidate.
    pub chosen: Option<(String, Vec<String>)>,
    /// How many candidates there were.
    pub candidates: usize,
    /// Potential nodes the dry runs classified (fit, or rejected but not ruled out).
    pub classified: usize,
    /// Only when there is no candidate: the rejected potential nodes and why, in order.
    pub rejected: Vec<(String, Failure)>,
}

struct Candidate<'s> {
    slot: usize,
    /// Most important first.
    victims: Vec<&'s PodEntry>,
}

fn start(p: &PodEntry, now_ns: i64) -> i64 {
    p.start_ns.unwrap_or(now_ns)
}

/// pickOneNodeForPreemption over candidates without PDB violations: the index of the chosen one.
fn pick(cands: &[Candidate<'_>], now_ns: i64) -> usize {
    if let Some(i) = cands.iter().position(|c| c.victims.is_empty()) {
        return i;
    }
    let highest = |c: &Candidate<'_>| -i64::from(c.victims[0].priority);
    let sum = |c: &Candidate<'_>| -c.victims.iter().map(|p| i64::from(p.priority) + (1i64 << 31)).sum::<i64>();
    let fewest = |c: &Candidate<'_>| -(c.victims.len() as i64);
    let latest_start = |c: &Candidate<'_>| {
        let top = c.victims[0].priority;
        c.victims.iter().filter(|p| p.priority == top).map(|p| start(p, now_ns)).min().unwrap_or(now_ns)
    };
    let criteria: [&dyn Fn(&Candidate<'_>) -> i64; 4] = [&highest, &sum, &fewest, &latest_start];
    let mut left: Vec<usize> = (0..cands.len()).collect();
    for score in criteria {
        if left.len() == 1 {
            break;
        }
        let best = left.iter().map(|&i| score(&cands[i])).max().expect("candidates left");
        left.retain(|&i| score(&cands[i]) == best);
    }
    left[0]
}

impl Snapshot {
    /// The victims on a candidate node: `lower` ordered by importance, then reprieved.
    fn candidate<'s>(&'s self, q: &Query<'_>, slot: usize, mut lower: Vec<&'s PodEntry>, now_ns: i64) -> Candidate<'s> {
        lower.sort_by_key(|p| (Reverse(p.priority), start(p, now_ns)));
        let entries: Vec<Option<&PodEntry>> = lower.iter().map(|&p| Some(p)).collect();
        let victims = self.reprieve_slot(q, slot, &entries).into_iter().map(|i| lower[i]).collect();
        Candidate { slot, victims }
    }

    /// Preemption for `pod` over `nodes` ((name, whether the cycle's status for it was
    /// implicit), in visiting order), wanting `wanted` candidates; see the module docs.
    pub fn preempt_select(
        &self,
        profile: &Profile,
        pod: &ParsedPod,
        nodes: &[(&str, bool)],
        wanted: usize,
        now_ns: i64,
    ) -> Result<Selection, Error> {
        let slots = nodes.iter().map(|(n, _)| self.slot(n)).collect::<Result<Vec<_>, _>>()?;
        let q = Query::new(self, profile, pod);
        let mut out = Selection::default();
        let mut fitting: Vec<(usize, Vec<&PodEntry>)> = Vec::new();
        for (&slot, &(name, implicit)) in slots.iter().zip(nodes) {
            if fitting.len() >= wanted.max(1) {
                break;
            }
            match self.dry_run_slot(&q, slot) {
                (DryRun::NoVictims, _) => {}
                (DryRun::Rejected(f), _) if implicit && f.unresolvable => {}
                (DryRun::Rejected(f), _) => {
                    out.classified += 1;
                    out.rejected.push((name.to_string(), f));
                }
                (DryRun::Fits, lower) => {
                    out.classified += 1;
                    fitting.push((slot, lower));
                }
            }
        }
        if fitting.is_empty() {
            return Ok(out);
        }
        out.rejected.clear();
        out.candidates = fitting.len();
        let cands: Vec<Candidate<'_>> = if fitting.len() < PARALLEL_CANDIDATES {
            fitting.into_iter().map(|(slot, lower)| self.candidate(&q, slot, lower, now_ns)).collect()
        } else {
            fitting.into_par_iter().map(|(slot, lower)| self.candidate(&q, slot, lower, now_ns)).collect()
        };
        let best = &cands[pick(&cands, now_ns)];
        let victims = best.victims.iter().map(|p| p.key.clone()).collect();
        out.chosen = Some((self.cols.names[best.slot].to_string(), victims));
        Ok(out)
    }
}
