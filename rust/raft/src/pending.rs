//! Completions of in-flight proposals, keyed by proposal id.
//!
//! Ids are issued consecutively from a per-open random-ish base (so ids found in entries written
//! by an earlier incarnation never match), which makes the table a deque indexed by
//! `id - base`: O(1) insert and take, no hashing.

use std::collections::VecDeque;

use crate::error::RaftError;
use crate::Completion;

pub struct Pending<O> {
    /// Id of `slots[0]`.
    base: u64,
    /// `None` = already completed; the front is never `None` (popped eagerly).
    slots: VecDeque<Option<Completion<O>>>,
}

impl<O> Pending<O> {
    pub fn new(base: u64) -> Self {
        Pending { base, slots: VecDeque::with_capacity(1024) }
    }

    /// Registers a completion and returns its id.
    pub fn insert(&mut self, done: Completion<O>) -> u64 {
        let id = self.base + self.slots.len() as u64;
        self.slots.push_back(Some(done));
        id
    }

    /// Removes the completion for `id`, if it is still pending.
    pub fn take(&mut self, id: u64) -> Option<Completion<O>> {
        let i = id.checked_sub(self.base)? as usize;
        let done = self.slots.get_mut(i)?.take();
        while let Some(None) = self.slots.front() {
            self.slots.pop_front();
            self.base += 1;
        }
        done
    }

    /// Completes every pending proposal with an error built by `err`.
    pub fn fail_all(&mut self, err: impl Fn() -> RaftError) {
        self.base += self.slots.len() as u64;
        for done in self.slots.drain(..).flatten() {
            done(Err(err()));
        }
    }
}
