//! Preemption's dry runs (upstream DefaultPreemption's SelectVictimsOnNode, the filter part):
//! "would the pod fit on this node if these pods were gone?", for many nodes per call.
//!
//! Guarantees:
//! - The pod is parsed and compiled ([`Query`]) once per call, not once per node or victim set.
//! - A dry run takes the victims' usage off the node's columns (resources, pod count, host
//!   ports) and their counts off PodTopologySpread's and InterPodAffinity's tallies, then runs
//!   the profile's filters as a scheduling cycle does: same plugins, reasons and codes. Within an
//!   active cycle the node's nominated pods (priority >= the preemptor's) are added for a first
//!   pass and the node must pass a second one without them (`filter::run`), as upstream's
//!   SelectVictimsOnNode runs RunFilterPluginsWithNominatedPods.
//! - [`Snapshot::dry_run_lower`]: per node, every pod of lower priority than the preemptor is
//!   removed (upstream's potential victims); the node fits, is rejected (with the failure), or
//!   has no such pod. [`Snapshot::reprieve`]: per node, starting with all the given pods
//!   removed, each is added back in the given order and kept when the pod still fits; what is
//!   left are the victims (indices into the given order). Nodes are independent; large calls run
//!   them in parallel (rayon); results come back in input order, so the caller's sequential rules
//!   (which node first, when to stop) are unaffected.
//! - The snapshot is only read: nothing a dry run removes is ever taken off the snapshot.

use rayon::prelude::*;

use crate::filter::{self, Failure, Removed};
use crate::pod::ParsedPod;
use crate::profile::Profile;
use crate::query::Query;
use crate::snapshot::{PodEntry, Snapshot};
use crate::Error;

/// Dry runs cost a fraction of a microsecond each: below this many nodes (or reprieved nodes)
/// a call runs on the caller's thread, as waking rayon's workers would cost more than it saves.
const PARALLEL_DRY_RUNS: usize = 2048;
const PARALLEL_REPRIEVES: usize = 512;
/// Nodes per rayon work unit once parallel.
const MIN_NODES_PER_TASK: usize = 256;

/// One node's dry run with every lower-priority pod removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DryRun {
    /// No pod of lower priority on the node: nothing to preempt there.
    NoVictims,
    /// The pod fits once they are gone.
    Fits,
    /// The pod does not fit even then.
    Rejected(Failure),
}

fn removed_usage(victims: &[&PodEntry]) -> Removed {
    let mut removed = Removed::default();
    for p in victims {
        let u = &p.usage;
        removed.milli_cpu += u.milli_cpu;
        removed.memory += u.memory;
        removed.ephemeral += u.ephemeral_storage;
        removed.pods += 1;
        removed.scalars.extend(u.scalars.iter().copied());
        removed.ports.extend(u.ports.iter().cloned());
    }
    removed
}

impl Snapshot {
    /// The filters' verdict for `q` on `slot` with `victims` (pods on that slot) taken off.
    pub(crate) fn fails_without(&self, q: &Query<'_>, slot: usize, victims: &[&PodEntry]) -> Option<Failure> {
        let removed = removed_usage(victims);
        if victims.is_empty() || (q.spread.is_none() && q.interpod.is_none()) {
            return filter::run(self, q, slot, Some(&removed));
        }
        // The topology tallies change with the victims: adjust a copy of them.
        let mut q2 = q.clone();
        if let Some(sp) = q2.spread.as_mut() {
            sp.remove(self, q, slot, victims, q.namespace);
        }
        if let Some(ip) = q2.interpod.as_mut() {
            ip.remove(self, slot, victims, q.pod);
        }
        filter::run(self, &q2, slot, Some(&removed))
    }

    /// The pods on `slot` of lower priority than the query's pod, in the slot's order.
    pub(crate) fn lower_on(&self, q: &Query<'_>, slot: usize) -> Vec<&PodEntry> {
        self.cols.pods[slot]
            .iter()
            .filter_map(|&id| self.pods[id as usize].as_ref())
            .filter(|p| p.priority < q.pod.priority)
            .collect()
    }

    /// The dry run on `slot` without its lower-priority pods, and those pods.
    pub(crate) fn dry_run_slot<'s>(&'s self, q: &Query<'_>, slot: usize) -> (DryRun, Vec<&'s PodEntry>) {
        let lower = self.lower_on(q, slot);
        if lower.is_empty() {
            return (DryRun::NoVictims, lower);
        }
        match self.fails_without(q, slot, &lower) {
            None => (DryRun::Fits, lower),
            Some(f) => (DryRun::Rejected(f), lower),
        }
    }

    /// Upstream's reprieve loop on `slot`: with every pod of `entries` removed, each is put back
    /// in order and kept when the query's pod still fits. The indices of the others (victims).
    pub(crate) fn reprieve_slot(&self, q: &Query<'_>, slot: usize, entries: &[Option<&PodEntry>]) -> Vec<usize> {
        let mut gone = vec![true; entries.len()];
        let mut victims = Vec::new();
        for i in 0..entries.len() {
            gone[i] = false;
            let removed: Vec<&PodEntry> =
                entries.iter().zip(&gone).filter(|(_, &g)| g).filter_map(|(e, _)| *e).collect();
            if self.fails_without(q, slot, &removed).is_some() {
                gone[i] = true;
                victims.push(i);
            }
        }
        victims
    }

    /// The pods counted on `slot` under `keys` (keys of pods elsewhere or unknown are skipped).
    fn entries_on(&self, slot: usize, keys: &[&str]) -> Vec<Option<&PodEntry>> {
        keys.iter().map(|k| self.pod(k).filter(|p| p.slot == Some(slot as u32))).collect()
    }

    /// The reasons `pod` does not fit `node` with the pods `without` (keys) taken off it;
    /// empty when it fits. Pods in `without` that are not on the node are ignored.
    pub fn filter_node(&self, profile: &Profile, pod_json: &[u8], node: &str, without: &[&str]) -> Result<Vec<String>, Error> {
        let slot = self.slot(node)?;
        let pod = ParsedPod::from_json(pod_json)?;
        let q = Query::new(self, profile, &pod);
        let victims: Vec<&PodEntry> = self.entries_on(slot, without).into_iter().flatten().collect();
        let failure = self.fails_without(&q, slot, &victims);
        Ok(failure.map(|f| f.reasons.iter().map(|r| r.as_str().to_string()).collect()).unwrap_or_default())
    }

    /// Per node (in input order): the dry run with every pod of priority below `pod.priority`
    /// removed. An unknown node is an error for the whole call.
    pub fn dry_run_lower(&self, profile: &Profile, pod: &ParsedPod, nodes: &[&str]) -> Result<Vec<DryRun>, Error> {
        let slots = nodes.iter().map(|n| self.slot(n)).collect::<Result<Vec<_>, _>>()?;
        let q = Query::new(self, profile, pod);
        let one = |&slot: &usize| self.dry_run_slot(&q, slot).0;
        if slots.len() < PARALLEL_DRY_RUNS {
            return Ok(slots.iter().map(one).collect());
        }
        Ok(slots.par_iter().with_min_len(MIN_NODES_PER_TASK).map(one).collect())
    }

    /// Per (node, pod keys in reprieve order): the indices of the keys that stay victims.
    /// Starting with every listed pod removed, each is put back in turn and kept when the pod
    /// still fits (upstream's reprievePod); otherwise it is removed again and is a victim.
    pub fn reprieve(&self, profile: &Profile, pod: &ParsedPod, nodes: &[(&str, Vec<&str>)]) -> Result<Vec<Vec<usize>>, Error> {
        let slots = nodes.iter().map(|(n, _)| self.slot(n)).collect::<Result<Vec<_>, _>>()?;
        let q = Query::new(self, profile, pod);
        let one = |(slot, (_, keys)): (&usize, &(&str, Vec<&str>))| self.reprieve_slot(&q, *slot, &self.entries_on(*slot, keys));
        if slots.len() < PARALLEL_REPRIEVES {
            return Ok(slots.iter().zip(nodes).map(one).collect());
        }
        Ok(slots.par_iter().zip(nodes.par_iter()).with_min_len(MIN_NODES_PER_TASK / 8).map(one).collect())
    }
}
