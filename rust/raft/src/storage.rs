//! [`LogStore`]: raft-rs's `Storage` over the entries since the last snapshot, held in memory.
//! Durability is the WAL's job; the node writes each entry to the WAL and then hands the same
//! entries (moved, not copied) to [`LogStore::append`].

use raft::eraftpb::{ConfState, Entry, HardState, Snapshot};
use raft::{GetEntriesContext, RaftState, Storage, StorageError};

/// Invariant: `entries[i].index == snap_index + 1 + i`.
#[derive(Debug, Default)]
pub struct LogStore {
    hard_state: HardState,
    conf_state: ConfState,
    snap_index: u64,
    snap_term: u64,
    entries: Vec<Entry>,
}

impl LogStore {
    /// A store whose log starts after (`snap_index`, `snap_term`); `entries` must be contiguous
    /// from `snap_index + 1`. The hard state is normalised so raft-rs accepts it: commit is
    /// clamped into `[snap_index, last_index]` and the term is at least the last entry's.
    pub fn new(
        mut hard_state: HardState,
        conf_state: ConfState,
        snap_index: u64,
        snap_term: u64,
        entries: Vec<Entry>,
    ) -> Self {
        let last_index = snap_index + entries.len() as u64;
        let last_term = entries.last().map_or(snap_term, |e| e.term);
        hard_state.commit = hard_state.commit.clamp(snap_index, last_index);
        hard_state.term = hard_state.term.max(last_term);
        LogStore { hard_state, conf_state, snap_index, snap_term, entries }
    }

    pub fn hard_state(&self) -> &HardState {
        &self.hard_state
    }

    pub fn conf_state(&self) -> &ConfState {
        &self.conf_state
    }

    pub fn set_hard_state(&mut self, hs: HardState) {
        self.hard_state = hs;
    }

    pub fn set_commit(&mut self, commit: u64) {
        self.hard_state.commit = commit;
    }

    pub fn set_conf_state(&mut self, cs: ConfState) {
        self.conf_state = cs;
    }

    pub fn snap_index(&self) -> u64 {
        self.snap_index
    }

    pub fn last_index(&self) -> u64 {
        self.snap_index + self.entries.len() as u64
    }

    /// Appends entries, first discarding any suffix they conflict with. Entries at or below the
    /// snapshot index are ignored (they are covered by the snapshot).
    pub fn append(&mut self, mut ents: Vec<Entry>) {
        let Some(first) = ents.first().map(|e| e.index) else { return };
        if first <= self.snap_index {
            let skip = ((self.snap_index + 1 - first) as usize).min(ents.len());
            ents.drain(..skip);
            if ents.is_empty() {
                return;
            }
        }
        let keep = (ents[0].index - self.snap_index - 1) as usize;
        debug_assert!(keep <= self.entries.len(), "gap in appended entries");
        self.entries.truncate(keep);
        if self.entries.is_empty() {
            self.entries = ents;
        } else {
            self.entries.append(&mut ents);
        }
    }

    /// Drops entries up to and including `index`, which becomes the snapshot point.
    pub fn compact_to(&mut self, index: u64) {
        if index <= self.snap_index || index > self.last_index() {
            return;
        }
        let n = (index - self.snap_index) as usize;
        self.snap_term = self.entries[n - 1].term;
        if n == self.entries.len() {
            self.entries.clear();
        } else {
            self.entries.drain(..n);
        }
        self.snap_index = index;
    }

    /// Term of `idx` if it is the snapshot point or in memory.
    pub fn term_of(&self, idx: u64) -> Option<u64> {
        if idx == self.snap_index {
            return Some(self.snap_term);
        }
        if idx < self.snap_index {
            return None;
        }
        self.entries.get((idx - self.snap_index - 1) as usize).map(|e| e.term)
    }
}

impl Storage for LogStore {
    fn initial_state(&self) -> raft::Result<RaftState> {
        Ok(RaftState::new(self.hard_state.clone(), self.conf_state.clone()))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        if low <= self.snap_index {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if high > self.last_index() + 1 || low > high {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        let lo = (low - self.snap_index - 1) as usize;
        let hi = (high - self.snap_index - 1) as usize;
        let mut ents = self.entries[lo..hi].to_vec();
        raft::util::limit_size(&mut ents, max_size.into());
        Ok(ents)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        if idx < self.snap_index {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        self.term_of(idx).ok_or(raft::Error::Store(StorageError::Unavailable))
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.snap_index + 1)
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.last_index())
    }

    /// Shipping snapshots to followers needs a transport; single-node groups never ask.
    fn snapshot(&self, _request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        Err(raft::Error::Store(StorageError::SnapshotTemporarilyUnavailable))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ent(index: u64, term: u64) -> Entry {
        let mut e = Entry::default();
        e.index = index;
        e.term = term;
        e
    }

    #[test]
    fn append_truncates_and_compacts() {
        let mut s = LogStore::new(HardState::default(), ConfState::default(), 0, 0, vec![]);
        s.append((1..=5).map(|i| ent(i, 1)).collect());
        assert_eq!(s.last_index(), 5);
        s.append(vec![ent(4, 2)]);
        assert_eq!(s.last_index(), 4);
        assert_eq!(s.term(4).unwrap(), 2);
        s.compact_to(3);
        assert_eq!(s.first_index().unwrap(), 4);
        assert_eq!(s.term(3).unwrap(), 1);
        assert!(s.term(2).is_err());
        let got = s.entries(4, 5, None, GetEntriesContext::empty(false)).unwrap();
        assert_eq!(got.len(), 1);
        s.append(vec![ent(2, 1), ent(3, 1), ent(4, 3), ent(5, 3)]);
        assert_eq!((s.last_index(), s.term(4).unwrap()), (5, 3));
    }
}
