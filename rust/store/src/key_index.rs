//! The history of one key: every version that is still visible at some non-compacted revision.
//!
//! A key's life is a sequence of *generations*: a generation starts with a put to a key that does
//! not exist and ends with a delete, recorded as a *tombstone*. `version` counts the puts of the
//! current generation; a delete resets it to 0, the next put starts again at 1.
//!
//! Worked example (the table tests below replay it):
//!
//! ```text
//! put(a)=x @2   put(a)=y @3   delete(a) @4   put(a)=z @6          (revision 5 changed another key)
//!
//!  mod_rev  value  create_rev  version
//!     2      x        2          1       generation 1
//!     3      y        2          2
//!     4      (tombstone)         0       generation 1 ends
//!     6      z        6          1       generation 2
//!
//! at(1) = none   at(2) = x   at(3) = y   at(4) = none   at(5) = none   at(6..) = z
//!
//! compact(3): keep the newest version <= 3 (y@3) and everything after it      -> [y@3, t@4, z@6]
//! compact(4): the newest version <= 4 is the tombstone at 4 itself; a revision equal to the
//!             compaction point is still readable (and watchable), so it stays -> [t@4, z@6]
//! compact(5): the newest version <= 5 is the tombstone @4 < 5: nobody can read it any more
//!             and it is dropped                                              -> [z@6]
//! compact(7) after delete(a) @7: [t@7] stays until a later compaction removes it and the key.
//! ```
//!
//! Invariants: versions are in strictly increasing `mod_rev` order (a key changes at most once per
//! revision); the history is never empty while the key is in the index.

use smallvec::SmallVec;

use crate::kv::{Bytes, KeyValue};

/// One version of a key. `value == None` is a tombstone (the key was deleted at `mod_rev`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    pub value: Option<Bytes>,
    pub mod_rev: i64,
    pub create_rev: i64,
    pub version: i64,
    pub lease: i64,
}

impl Version {
    pub fn tombstone(rev: i64) -> Self {
        Self { value: None, mod_rev: rev, create_rev: 0, version: 0, lease: 0 }
    }

    pub fn is_tombstone(&self) -> bool {
        self.value.is_none()
    }

    /// The key-value this version describes (a tombstone gives etcd's delete-event shape).
    pub fn to_kv(&self, key: &Bytes) -> KeyValue {
        KeyValue {
            key: key.clone(),
            value: self.value.clone().unwrap_or_else(empty_bytes),
            create_revision: self.create_rev,
            mod_revision: self.mod_rev,
            version: self.version,
            lease: self.lease,
        }
    }
}

pub fn empty_bytes() -> Bytes {
    Bytes::from(&[][..])
}

/// All retained versions of one key, oldest first. Most keys have exactly one version, kept
/// inline without a heap allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyHistory {
    versions: SmallVec<[Version; 1]>,
}

impl KeyHistory {
    pub fn new(first: Version) -> Self {
        let mut versions = SmallVec::new();
        versions.push(first);
        Self { versions }
    }

    pub fn from_versions(versions: Vec<Version>) -> Option<Self> {
        if versions.is_empty() {
            return None;
        }
        Some(Self { versions: SmallVec::from_vec(versions) })
    }

    pub fn versions(&self) -> &[Version] {
        &self.versions
    }

    pub fn latest(&self) -> &Version {
        self.versions.last().expect("a key history is never empty")
    }

    /// The live version at the head, if the key currently exists.
    pub fn live(&self) -> Option<&Version> {
        Some(self.latest()).filter(|v| !v.is_tombstone())
    }

    pub fn push(&mut self, v: Version) {
        debug_assert!(v.mod_rev > self.latest().mod_rev);
        self.versions.push(v);
    }

    /// The version visible at `rev` (the newest with `mod_rev <= rev`), if it is not a tombstone.
    pub fn at(&self, rev: i64) -> Option<&Version> {
        let n = self.versions.partition_point(|v| v.mod_rev <= rev);
        if n == 0 {
            return None;
        }
        Some(&self.versions[n - 1]).filter(|v| !v.is_tombstone())
    }

    /// The version written exactly at `rev`, and the live version just before it (for prev_kv).
    pub fn change_at(&self, rev: i64) -> Option<(&Version, Option<&Version>)> {
        let i = self.versions.binary_search_by_key(&rev, |v| v.mod_rev).ok()?;
        let prev = i.checked_sub(1).map(|p| &self.versions[p]).filter(|v| !v.is_tombstone());
        Some((&self.versions[i], prev))
    }

    /// Drops every version no read at a revision `>= at` can see. Returns false when nothing is
    /// left, i.e. the key must leave the index.
    pub fn compact(&mut self, at: i64) -> bool {
        let n = self.versions.partition_point(|v| v.mod_rev <= at);
        if n == 0 {
            return true;
        }
        let keep_from = {
            let newest_visible = &self.versions[n - 1];
            if newest_visible.is_tombstone() && newest_visible.mod_rev < at {
                n
            } else {
                n - 1
            }
        };
        if keep_from > 0 {
            self.versions.drain(..keep_from);
            if self.versions.len() <= 1 && self.versions.spilled() {
                self.versions.shrink_to_fit();
            }
        }
        !self.versions.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(rev: i64, value: &[u8], create: i64, version: i64) -> Version {
        Version { value: Some(Bytes::from(value)), mod_rev: rev, create_rev: create, version, lease: 0 }
    }

    /// The worked example of the module docs.
    fn example() -> KeyHistory {
        let mut h = KeyHistory::new(live(2, b"x", 2, 1));
        h.push(live(3, b"y", 2, 2));
        h.push(Version::tombstone(4));
        h.push(live(6, b"z", 6, 1));
        h
    }

    fn value_at(h: &KeyHistory, rev: i64) -> Option<Vec<u8>> {
        h.at(rev).map(|v| v.value.as_deref().unwrap().to_vec())
    }

    #[test]
    fn reads_follow_the_worked_example() {
        let h = example();
        let table: &[(i64, Option<&[u8]>)] =
            &[(1, None), (2, Some(b"x")), (3, Some(b"y")), (4, None), (5, None), (6, Some(b"z")), (9, Some(b"z"))];
        for (rev, want) in table {
            assert_eq!(value_at(&h, *rev).as_deref(), *want, "at({rev})");
        }
        let (v, prev) = h.change_at(3).unwrap();
        assert_eq!(v.version, 2);
        assert_eq!(prev.unwrap().mod_rev, 2);
        let (v, prev) = h.change_at(6).unwrap();
        assert_eq!(v.create_rev, 6);
        assert!(prev.is_none(), "a tombstone is no previous value");
        assert!(h.change_at(5).is_none());
    }

    #[test]
    fn compaction_follows_the_worked_example() {
        let table: &[(i64, &[i64])] = &[(1, &[2, 3, 4, 6]), (3, &[3, 4, 6]), (4, &[4, 6]), (5, &[6]), (8, &[6])];
        for (at, kept) in table {
            let mut h = example();
            assert!(h.compact(*at));
            let revs: Vec<i64> = h.versions().iter().map(|v| v.mod_rev).collect();
            assert_eq!(revs, *kept, "compact({at})");
            for rev in *at..8 {
                assert_eq!(value_at(&h, rev), value_at(&example(), rev), "compact({at}) then at({rev})");
            }
        }
    }

    #[test]
    fn a_deleted_key_disappears_after_a_later_compaction() {
        let mut h = example();
        h.push(Version::tombstone(7));
        assert!(h.compact(7));
        assert_eq!(h.versions().len(), 1);
        assert!(!h.compact(8));
    }
}
