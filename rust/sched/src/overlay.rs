//! Nominated pods counted for one scheduling cycle (upstream's RunFilterPluginsWithNominatedPods
//! takes them as running), kept between cycles so the next cycle only adds and removes what
//! differs.
//!
//! States: Empty -> [`Snapshot::nominate`] -> Active -> [`Snapshot::end_nominated`] -> Lazy.
//! While Active, every kernel sees the nominated pods. Once Lazy they are still counted but no
//! longer stand: [`Snapshot::settle`] (which the bindings call before any read of the
//! snapshot) takes them off first, so what a caller observes is exactly what adding them at the
//! start of the cycle and removing them at its end gives. `nominate` from Lazy or Active only
//! removes the pods no longer wanted (or whose JSON or node changed) and adds the new ones.
//!
//! A key already counted as a real (bound or assumed) pod is not added: the real pod counts.
//! Counting or removing a real pod under a key the overlay holds ([`Snapshot::forget_nominated`])
//! drops the overlay's pod first.

use std::collections::HashMap;

use crate::snapshot::Snapshot;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OverlayState {
    #[default]
    Empty,
    Active,
    Lazy,
}

/// The nominated pods counted in the snapshot: key -> node.
#[derive(Debug, Default)]
pub struct Overlay {
    pub(crate) pods: HashMap<String, String>,
    pub(crate) state: OverlayState,
}

impl Snapshot {
    /// Counts exactly `pods` (key, pod JSON, node) as nominated until [`Snapshot::end_nominated`];
    /// returns how many are counted. Pods that do not parse are skipped.
    pub fn nominate(&mut self, pods: &[(&str, &[u8], &str)]) -> usize {
        let wanted: HashMap<&str, (&[u8], &str)> = pods.iter().map(|&(k, b, n)| (k, (b, n))).collect();
        let stale: Vec<String> = self
            .overlay
            .pods
            .iter()
            .filter(|(k, node)| match wanted.get(k.as_str()) {
                Some(&(bytes, n)) => n != node.as_str() || !self.cached_bytes_are(k, bytes),
                None => true,
            })
            .map(|(k, _)| k.clone())
            .collect();
        for k in stale {
            self.overlay.pods.remove(&k);
            self.remove_pod(&k);
        }
        let missing: Vec<(&str, &[u8], &str)> = pods
            .iter()
            .copied()
            .filter(|(k, _, _)| !self.overlay.pods.contains_key(*k) && self.pod(k).is_none())
            .collect();
        for key in self.add_pods_cached(&missing) {
            let node = wanted[key.as_str()].1.to_string();
            self.overlay.pods.insert(key, node);
        }
        self.overlay.state = OverlayState::Active;
        self.overlay.pods.len()
    }

    /// The cycle is over: the nominated pods stop counting (lazily, see the module docs).
    pub fn end_nominated(&mut self) {
        if self.overlay.state == OverlayState::Active {
            self.overlay.state = OverlayState::Lazy;
        }
    }

    /// Takes off the nominated pods of a finished cycle (nothing while a cycle is active).
    pub fn settle(&mut self) {
        if self.overlay.state != OverlayState::Lazy {
            return;
        }
        let keys: Vec<String> = self.overlay.pods.drain().map(|(k, _)| k).collect();
        for k in keys {
            self.remove_pod(&k);
        }
        self.overlay.state = OverlayState::Empty;
    }

    /// Drops the overlay's pod under `key`, if any (a real pod of that key is being counted or
    /// removed).
    pub fn forget_nominated(&mut self, key: &str) {
        if self.overlay.pods.remove(key).is_some() {
            self.remove_pod(key);
        }
    }

    /// How many nominated pods are counted (in any state).
    pub fn nominated_count(&self) -> usize {
        self.overlay.pods.len()
    }
}
