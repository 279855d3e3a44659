//! String interning: label keys and values, scalar resource names and image names become dense
//! `u32` ids, so node columns hold integers and comparisons are integer compares.
//!
//! Ids are never reused or forgotten (the sets involved are small and slow-changing); a lookup
//! of a string never seen is `None`, which matching code reads as "no node has it".

use std::collections::HashMap;
use std::sync::Arc;

#[derive(Debug, Default, Clone)]
pub struct Interner {
    ids: HashMap<Arc<str>, u32>,
    names: Vec<Arc<str>>,
}

impl Interner {
    /// The id of `s`, adding it when new.
    pub fn intern(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = u32::try_from(self.names.len()).expect("fewer than 2^32 distinct strings");
        let name: Arc<str> = Arc::from(s);
        self.names.push(name.clone());
        self.ids.insert(name, id);
        id
    }

    /// The id of `s` if it has been seen.
    pub fn get(&self, s: &str) -> Option<u32> {
        self.ids.get(s).copied()
    }

    /// The string of an id handed out by this interner.
    pub fn name(&self, id: u32) -> &str {
        &self.names[id as usize]
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_dense_and_stable() {
        let mut i = Interner::default();
        assert_eq!(i.intern("a"), 0);
        assert_eq!(i.intern("b"), 1);
        assert_eq!(i.intern("a"), 0);
        assert_eq!(i.get("b"), Some(1));
        assert_eq!(i.get("c"), None);
        assert_eq!(i.name(1), "b");
        assert_eq!(i.len(), 2);
    }
}
