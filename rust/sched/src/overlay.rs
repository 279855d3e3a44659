//! Nominated pods for one scheduling cycle, as upstream's RunFilterPluginsWithNominatedPods
//! sees them (`addGENominatedPods`).
//!
//! They are never counted in the snapshot: PreFilter counts (`Query::new`) and scores see only
//! bound and assumed pods. While a node is filtered, the pods nominated to that node (of
//! priority at least the pod's, not the pod itself) are added to a copy of its usage and of the
//! PreFilter state (PodTopologySpread's and InterPodAffinity's AddPod), and the filters run
//! twice, with them and without: the node must pass both (see [`crate::filter::run`]). A node
//! without nominated pods is filtered once, on the fast path.
//!
//! States: Empty -> [`Snapshot::nominate`] -> Active -> [`Snapshot::end_nominated`] -> Lazy.
//! Only an Active overlay is seen by the kernels. Lazy keeps the parsed entries for the next
//! `nominate` ([`Snapshot::settle`] drops them). The entries' strings are interned when they are
//! added, before any cycle compiles a pod against the snapshot's strings.
//!
//! A key already counted as a real (bound or assumed) pod is not added: the real pod counts.
//! Counting a real pod under a key the overlay holds (`add_pod`, `add_pods_cached`) or
//! [`Snapshot::forget_nominated`] drops the overlay's pod.

use std::collections::HashMap;
use std::sync::Arc;

use crate::pod::ParsedPod;
use crate::snapshot::{PodEntry, Snapshot};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OverlayState {
    #[default]
    Empty,
    Active,
    Lazy,
}

/// The nominated pods of the current or last cycle: key -> entry (its `node` the nominated
/// node; `slot` unused, resolved by name when a pod is compiled).
#[derive(Debug, Default)]
pub struct Overlay {
    pub(crate) pods: HashMap<String, PodEntry>,
    pub(crate) state: OverlayState,
}

/// A cycle's nominated pods by node slot (only nodes that have some): what the filters add.
/// None when there are none (the common case costs no allocation).
pub type Nominated = Option<Arc<HashMap<u32, Vec<PodEntry>>>>;

impl Snapshot {
    /// Takes exactly `pods` (key, pod JSON, node) as nominated until [`Snapshot::end_nominated`];
    /// returns how many are taken. Pods that do not parse, and keys counted as real pods, are
    /// skipped.
    pub fn nominate(&mut self, pods: &[(&str, &[u8], &str)]) -> usize {
        let mut kept = HashMap::with_capacity(pods.len());
        for &(key, json, node) in pods {
            if self.pod(key).is_some() {
                continue;
            }
            if let Some(e) = self.cached_entry(key, json, node) {
                kept.insert(key.to_string(), e);
            }
        }
        self.overlay.pods = kept;
        self.overlay.state = OverlayState::Active;
        self.overlay.pods.len()
    }

    /// The cycle is over: the nominated pods stop counting.
    pub fn end_nominated(&mut self) {
        if self.overlay.state == OverlayState::Active {
            self.overlay.state = OverlayState::Lazy;
        }
    }

    /// Drops the nominated pods of a finished cycle (nothing while a cycle is active).
    pub fn settle(&mut self) {
        if self.overlay.state != OverlayState::Lazy {
            return;
        }
        self.overlay.pods.clear();
        self.overlay.state = OverlayState::Empty;
    }

    /// Drops the overlay's pod under `key`, if any (a real pod of that key is being counted or
    /// removed).
    pub fn forget_nominated(&mut self, key: &str) {
        self.overlay.pods.remove(key);
    }

    /// How many nominated pods the overlay holds (in any state).
    pub fn nominated_count(&self) -> usize {
        self.overlay.pods.len()
    }

    /// While a cycle is active: the pods nominated to live nodes that `pod`'s filters add,
    /// those of priority >= its own other than itself, by slot (None when there are none).
    pub fn nominated_for(&self, pod: &ParsedPod) -> Nominated {
        if self.overlay.state != OverlayState::Active || self.overlay.pods.is_empty() {
            return None;
        }
        let own = format!("{}/{}", pod.namespace, pod.name);
        let mut by_slot: HashMap<u32, Vec<PodEntry>> = HashMap::new();
        for (key, e) in &self.overlay.pods {
            if *key == own || e.priority < pod.priority {
                continue;
            }
            let Some(&slot) = self.by_name.get(e.node.as_str()) else { continue };
            by_slot.entry(slot).or_default().push(PodEntry { slot: Some(slot), ..e.clone() });
        }
        for list in by_slot.values_mut() {
            list.sort_by(|a, b| a.key.cmp(&b.key));
        }
        (!by_slot.is_empty()).then(|| Arc::new(by_slot))
    }
}
