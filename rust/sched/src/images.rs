//! Image states for ImageLocality: per image name, its size and how many nodes have it
//! (`ImageStateSummary`). As in the scheduler cache, the size is the one reported by the first
//! node that had the image since no node had it.

use crate::intern::Interner;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImageState {
    pub size: i64,
    pub num_nodes: i64,
}

#[derive(Debug, Clone, Default)]
pub struct Images {
    names: Interner,
    states: Vec<ImageState>,
}

impl Images {
    /// Counts a node's images; returns their ids, sorted and without duplicates.
    pub fn add_node(&mut self, images: &[(String, i64)]) -> Vec<u32> {
        let mut ids: Vec<u32> = Vec::with_capacity(images.len());
        for (name, size) in images {
            let id = self.names.intern(name);
            if ids.contains(&id) {
                continue;
            }
            ids.push(id);
            if id as usize == self.states.len() {
                self.states.push(ImageState::default());
            }
            let st = &mut self.states[id as usize];
            if st.num_nodes == 0 {
                st.size = *size;
            }
            st.num_nodes += 1;
        }
        ids.sort_unstable();
        ids
    }

    pub fn remove_node(&mut self, ids: &[u32]) {
        for &id in ids {
            self.states[id as usize].num_nodes -= 1;
        }
    }

    pub fn get(&self, name: &str) -> Option<(u32, ImageState)> {
        let id = self.names.get(name)?;
        Some((id, self.states[id as usize]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_nodes_and_keeps_the_first_size() {
        let mut im = Images::default();
        let a = im.add_node(&[("x:1".into(), 10), ("y:1".into(), 20), ("x:1".into(), 10)]);
        assert_eq!(a.len(), 2);
        let b = im.add_node(&[("x:1".into(), 99)]);
        assert_eq!(im.get("x:1").unwrap().1, ImageState { size: 10, num_nodes: 2 });
        im.remove_node(&a);
        im.remove_node(&b);
        im.add_node(&[("x:1".into(), 99)]);
        assert_eq!(im.get("x:1").unwrap().1, ImageState { size: 99, num_nodes: 1 });
        assert!(im.get("z").is_none());
    }
}
