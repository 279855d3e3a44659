//! The node columns: one vector per attribute, indexed by node slot.
//!
//! Invariants:
//! - every column has `len()` entries; a slot is in use iff `live[slot]`;
//! - `requested_*`, `non_zero_*`, `pod_count`, `ports` and `scalar_requested` are exactly the sum
//!   of the [`Usage`] of the pods counted on the slot (add and remove apply the same `Usage`);
//! - `stamp[slot]` changes whenever the slot's allocatable or usage columns do;
//! - `scalar_*[r]` is the column of scalar resource id `r` (ids from the snapshot's interner);
//!   a resource a node does not report has allocatable 0.
//!
//! Example: a node with cpu 4 and one pod of 100m and one of no requests has allocatable_cpu 4000,
//! requested_cpu 100, non_zero_cpu 200 (the second pod counts upstream's 100m default), pod_count 2.

use std::sync::Arc;

use crate::ports::{HostPort, UsedPorts};
use crate::taints::{Taint, PREFER_NO_SCHEDULE};

/// What one pod adds to its node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Usage {
    pub milli_cpu: i64,
    pub memory: i64,
    pub ephemeral_storage: i64,
    pub non_zero_cpu: i64,
    pub non_zero_memory: i64,
    /// (scalar resource id, amount).
    pub scalars: Vec<(u32, i64)>,
    pub ports: Vec<HostPort>,
}

#[derive(Debug, Default)]
pub struct Columns {
    pub live: Vec<bool>,
    /// Node names by slot, shared with results (copied on write while a result holds it).
    pub names: Arc<Vec<Arc<str>>>,
    pub allocatable_cpu: Vec<i64>,
    pub allocatable_memory: Vec<i64>,
    pub allocatable_ephemeral: Vec<i64>,
    pub allowed_pods: Vec<i64>,
    pub requested_cpu: Vec<i64>,
    pub requested_memory: Vec<i64>,
    pub requested_ephemeral: Vec<i64>,
    pub non_zero_cpu: Vec<i64>,
    pub non_zero_memory: Vec<i64>,
    pub pod_count: Vec<i64>,
    pub scalar_allocatable: Vec<Vec<i64>>,
    pub scalar_requested: Vec<Vec<i64>>,
    pub unschedulable: Vec<bool>,
    /// (label key id, value id), sorted by key id.
    pub labels: Vec<Vec<(u32, u32)>>,
    pub taints: Vec<Vec<Taint>>,
    pub ports: Vec<UsedPorts>,
    /// Image ids, sorted.
    pub images: Vec<Vec<u32>>,
    pub zone: Vec<String>,
    /// Ids of the pods counted on the slot.
    pub pods: Vec<Vec<u32>>,
    /// Slots with `unschedulable` set, with a NoSchedule/NoExecute taint, with a PreferNoSchedule
    /// taint (kept by [`Columns::set_taints`]): at 0, the plugins reading them are constant.
    pub unschedulable_nodes: usize,
    pub blocking_taint_nodes: usize,
    pub prefer_no_schedule_nodes: usize,
    /// Per slot, a stamp renewed (from `last_stamp`, never reused) whenever the slot's
    /// allocatable or usage columns change: a value computed from them at stamp `x` is still
    /// valid while the slot's stamp is `x` (see `score::ResourceCache`).
    pub stamp: Vec<u64>,
    last_stamp: u64,
}

impl Columns {
    pub fn len(&self) -> usize {
        self.live.len()
    }

    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// Appends an empty, not yet live slot.
    pub fn push_slot(&mut self) -> u32 {
        let slot = u32::try_from(self.len()).expect("fewer than 2^32 nodes");
        self.live.push(false);
        Arc::make_mut(&mut self.names).push(Arc::from(""));
        for col in [&mut self.allocatable_cpu, &mut self.allocatable_memory, &mut self.allocatable_ephemeral, &mut self.allowed_pods] {
            col.push(0);
        }
        for col in self.usage_columns() {
            col.push(0);
        }
        for col in self.scalar_allocatable.iter_mut().chain(self.scalar_requested.iter_mut()) {
            col.push(0);
        }
        self.unschedulable.push(false);
        self.labels.push(Vec::new());
        self.taints.push(Vec::new());
        self.ports.push(UsedPorts::default());
        self.images.push(Vec::new());
        self.zone.push(String::new());
        self.pods.push(Vec::new());
        self.stamp.push(0);
        self.touch(slot as usize);
        slot
    }

    /// Renews the slot's stamp: its allocatable or usage columns changed.
    pub fn touch(&mut self, slot: usize) {
        self.last_stamp += 1;
        self.stamp[slot] = self.last_stamp;
    }

    /// Writes a slot's `unschedulable` and `taints`, keeping the counts of such slots.
    pub fn set_taints(&mut self, slot: usize, unschedulable: bool, taints: Vec<Taint>) {
        let counts = |unschedulable: bool, taints: &[Taint]| {
            let prefer = taints.iter().any(|t| t.effect == PREFER_NO_SCHEDULE);
            [unschedulable, taints.iter().any(|t| t.blocks), prefer].map(usize::from)
        };
        let old = counts(self.unschedulable[slot], &self.taints[slot]);
        let new = counts(unschedulable, &taints);
        let totals = [&mut self.unschedulable_nodes, &mut self.blocking_taint_nodes, &mut self.prefer_no_schedule_nodes];
        for ((total, o), n) in totals.into_iter().zip(old).zip(new) {
            *total = *total - o + n;
        }
        self.unschedulable[slot] = unschedulable;
        self.taints[slot] = taints;
    }

    /// Makes room for scalar resource id `id`.
    pub fn ensure_scalar(&mut self, id: u32) {
        while self.scalar_allocatable.len() <= id as usize {
            self.scalar_allocatable.push(vec![0; self.len()]);
            self.scalar_requested.push(vec![0; self.len()]);
        }
    }

    /// The columns that sum the pods' usage (scalars aside).
    fn usage_columns(&mut self) -> [&mut Vec<i64>; 6] {
        [
            &mut self.requested_cpu,
            &mut self.requested_memory,
            &mut self.requested_ephemeral,
            &mut self.non_zero_cpu,
            &mut self.non_zero_memory,
            &mut self.pod_count,
        ]
    }

    /// Clears a slot's usage (the node's own attributes are overwritten by the caller).
    pub fn clear_usage(&mut self, slot: usize) {
        self.touch(slot);
        for col in self.usage_columns() {
            col[slot] = 0;
        }
        for col in &mut self.scalar_requested {
            col[slot] = 0;
        }
        self.ports[slot] = UsedPorts::default();
        self.pods[slot].clear();
    }

    /// Adds (`sign` = 1) or removes (`sign` = -1) one pod's usage.
    pub fn apply(&mut self, slot: usize, u: &Usage, sign: i64) {
        self.touch(slot);
        self.requested_cpu[slot] += sign * u.milli_cpu;
        self.requested_memory[slot] += sign * u.memory;
        self.requested_ephemeral[slot] += sign * u.ephemeral_storage;
        self.non_zero_cpu[slot] += sign * u.non_zero_cpu;
        self.non_zero_memory[slot] += sign * u.non_zero_memory;
        self.pod_count[slot] += sign;
        for &(id, v) in &u.scalars {
            self.scalar_requested[id as usize][slot] += sign * v;
        }
        if sign > 0 {
            self.ports[slot].add(&u.ports);
        } else {
            self.ports[slot].remove(&u.ports);
        }
    }

    /// Allocatable of scalar `id` on `slot` (0 when no node reports it).
    pub fn scalar_allocatable(&self, id: u32, slot: usize) -> i64 {
        self.scalar_allocatable.get(id as usize).map_or(0, |c| c[slot])
    }

    pub fn scalar_requested(&self, id: u32, slot: usize) -> i64 {
        self.scalar_requested.get(id as usize).map_or(0, |c| c[slot])
    }
}
