//! The order in which a scheduling cycle visits nodes: upstream's `nodeTree.list()`, which takes
//! one node from each zone in turn so that a cycle that stops early (numFeasibleNodesToFind)
//! still sees every zone.
//!
//! Zones keep the order in which they first appeared and nodes the order in which they joined
//! their zone. Example: zone a = [a1, a2, a3], zone b = [b1] gives a1, b1, a2, a3.

use std::collections::HashMap;

#[derive(Debug, Default, Clone)]
pub struct NodeTree {
    zones: Vec<String>,
    /// Zone key -> node slots in the zone, in joining order.
    tree: HashMap<String, Vec<u32>>,
    len: usize,
}

impl NodeTree {
    pub fn add(&mut self, zone: &str, slot: u32) {
        match self.tree.get_mut(zone) {
            Some(nodes) => {
                if nodes.contains(&slot) {
                    return;
                }
                nodes.push(slot);
            }
            None => {
                self.zones.push(zone.to_string());
                self.tree.insert(zone.to_string(), vec![slot]);
            }
        }
        self.len += 1;
    }

    pub fn remove(&mut self, zone: &str, slot: u32) {
        let Some(nodes) = self.tree.get_mut(zone) else { return };
        let Some(i) = nodes.iter().position(|&s| s == slot) else { return };
        nodes.remove(i);
        if nodes.is_empty() {
            self.tree.remove(zone);
            self.zones.retain(|z| z != zone);
        }
        self.len -= 1;
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The zones in their order with their slots in joining order (upstream's `zones` and
    /// `tree`).
    pub fn zones(&self) -> Vec<(&str, &[u32])> {
        self.zones.iter().map(|z| (z.as_str(), self.tree[z].as_slice())).collect()
    }

    /// All slots, one zone at a time round-robin.
    pub fn list(&self) -> Vec<u32> {
        let zones: Vec<&Vec<u32>> = self.zones.iter().map(|z| &self.tree[z]).collect();
        let mut out = Vec::with_capacity(self.len);
        let deepest = zones.iter().map(|z| z.len()).max().unwrap_or(0);
        for i in 0..deepest {
            out.extend(zones.iter().filter_map(|z| z.get(i)));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaves_zones() {
        let mut t = NodeTree::default();
        for (zone, slot) in [("a", 1), ("a", 2), ("b", 10), ("a", 3), ("c", 20), ("c", 21)] {
            t.add(zone, slot);
        }
        assert_eq!(t.list(), vec![1, 10, 20, 2, 21, 3]);
        t.remove("b", 10);
        t.add("b", 11);
        assert_eq!(t.list(), vec![1, 20, 11, 2, 21, 3], "a re-created zone goes last");
        t.add("a", 1);
        assert_eq!(t.len(), 6);
    }
}
