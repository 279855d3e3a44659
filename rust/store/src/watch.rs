//! Watchers and the hub that feeds them.
//!
//! A watcher is *synced* or *unsynced* (etcd's watchable_store has the same two groups):
//!
//! * synced: the apply loop pushes each matching event into the watcher's bounded buffer, while
//!   it still holds the store's write lock, so a synced watcher sees every change exactly once.
//! * unsynced: the watcher is behind — it started at a past revision, or its consumer was slow and
//!   its buffer filled up. The apply loop skips it (a slow watcher never blocks writers or other
//!   watchers); its consumer catches up from the revision log under the store's read lock, and
//!   the moment it reaches the current revision it rejoins the synced group, still under that read
//!   lock, so no apply can slip between "caught up" and "synced".
//!
//! When a buffer overflows in the middle of a revision, the events of that revision already
//! buffered are taken back and the catch-up starts at that revision: delivery stays exactly once
//! and whole revisions stay together. A watcher whose next revision has been compacted away ends
//! with `WatchEnd::Compacted`.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

use crate::kv::{Event, KeyRange};
use crate::mvcc::Mvcc;
use crate::error::StoreError;

/// Called with the watcher id when its buffer becomes non-empty or the watch ends. Runs on the
/// apply thread with locks held: it must only record the fact and return.
pub type Notify = Arc<dyn Fn(u64) + Send + Sync>;

/// Why a watch stopped producing events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchEnd {
    Cancelled,
    /// The watcher's next revision was compacted before it could be delivered.
    Compacted(i64),
    Closed,
}

impl From<WatchEnd> for StoreError {
    fn from(e: WatchEnd) -> Self {
        match e {
            WatchEnd::Compacted(rev) => StoreError::Compacted { compact_revision: rev },
            WatchEnd::Cancelled | WatchEnd::Closed => StoreError::Closed,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Mode {
    Synced,
    Unsynced { next_rev: i64 },
    Ended(WatchEnd),
}

struct State {
    buf: VecDeque<Arc<Event>>,
    mode: Mode,
    /// Events below this revision are never offered: the start revision, then, after a catch-up,
    /// the first revision history did not deliver (the dispatch of a batch the catch-up already
    /// read may still be on its way: the store dispatches after releasing its lock).
    from: i64,
}

pub struct Watcher {
    pub id: u64,
    pub range: KeyRange,
    capacity: usize,
    state: Mutex<State>,
    ready: Condvar,
    notify: Option<Notify>,
}

/// The synced group. Lock order: store lock, then hub, then a watcher's state.
#[derive(Default)]
pub struct Hub {
    synced: Mutex<Vec<Arc<Watcher>>>,
    /// Set by `close_all`; a watcher that catches up afterwards ends instead of rejoining.
    closed: std::sync::atomic::AtomicBool,
}

impl Hub {
    pub fn has_synced(&self) -> bool {
        !self.synced.lock().unwrap().is_empty()
    }

    /// Offers a batch of applied events, in revision order, to every synced watcher (the store's
    /// applier calls it after releasing its lock; batches never overlap).
    pub fn dispatch(&self, events: &[Arc<Event>]) {
        self.synced.lock().unwrap().retain(|w| w.offer(events));
    }

    pub fn add_synced(&self, w: Arc<Watcher>) {
        let mut synced = self.synced.lock().unwrap();
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            drop(synced);
            w.end(WatchEnd::Closed);
            return;
        }
        synced.push(w);
    }

    pub fn remove(&self, id: u64) {
        self.synced.lock().unwrap().retain(|w| w.id != id);
    }

    /// Ends every synced watcher (the store is closing).
    pub fn close_all(&self) {
        let mut synced = self.synced.lock().unwrap();
        self.closed.store(true, std::sync::atomic::Ordering::Release);
        for w in synced.drain(..) {
            w.end(WatchEnd::Closed);
        }
    }
}

impl Watcher {
    /// A watcher that has to catch up from `start_rev` (unsynced) or, when `start_rev` is past
    /// the current revision, one that is synced right away.
    pub fn new(id: u64, range: KeyRange, start_rev: i64, current_rev: i64, capacity: usize, notify: Option<Notify>) -> Self {
        let mode = if start_rev > current_rev { Mode::Synced } else { Mode::Unsynced { next_rev: start_rev } };
        Self {
            id,
            range,
            capacity: capacity.max(1),
            state: Mutex::new(State { buf: VecDeque::new(), mode, from: start_rev }),
            ready: Condvar::new(),
            notify,
        }
    }

    pub fn is_synced(&self) -> bool {
        self.state.lock().unwrap().mode == Mode::Synced
    }

    /// Pushes the matching events; returns false when the watcher leaves the synced group.
    fn offer(&self, events: &[Arc<Event>]) -> bool {
        let mut st = self.state.lock().unwrap();
        if st.mode != Mode::Synced {
            return false;
        }
        let was_empty = st.buf.is_empty();
        for ev in events {
            let rev = ev.kv.mod_revision;
            if rev < st.from || !self.range.contains(&ev.kv.key) {
                continue;
            }
            if st.buf.len() >= self.capacity {
                while st.buf.back().is_some_and(|b| b.kv.mod_revision == rev) {
                    st.buf.pop_back();
                }
                st.mode = Mode::Unsynced { next_rev: rev };
                break;
            }
            st.buf.push_back(ev.clone());
        }
        let keep = st.mode == Mode::Synced;
        if was_empty && (!st.buf.is_empty() || !keep) {
            drop(st);
            self.wake();
        }
        keep
    }

    fn wake(&self) {
        self.ready.notify_all();
        if let Some(n) = &self.notify {
            n(self.id);
        }
    }

    /// Ends the watch; buffered events are dropped.
    pub fn end(&self, why: WatchEnd) {
        let mut st = self.state.lock().unwrap();
        if matches!(st.mode, Mode::Ended(_)) {
            return;
        }
        st.buf.clear();
        st.mode = Mode::Ended(why);
        drop(st);
        self.wake();
    }

    /// Takes up to `max` events, waiting up to `timeout` when there are none (callers that wait
    /// forever loop, so that they can notice interrupts). Catches up from the log when unsynced.
    /// `Ok(empty)` means the timeout passed.
    pub fn poll(self: &Arc<Self>, store: &RwLock<Mvcc>, hub: &Hub, max: usize, timeout: Duration) -> Result<Vec<Arc<Event>>, WatchEnd> {
        let deadline = Instant::now() + timeout;
        let max = max.max(1);
        loop {
            let mut st = self.state.lock().unwrap();
            if !st.buf.is_empty() {
                // Never split a revision: take past `max` to the end of the last one taken.
                let mut n = st.buf.len().min(max);
                while n < st.buf.len() && st.buf[n].kv.mod_revision == st.buf[n - 1].kv.mod_revision {
                    n += 1;
                }
                return Ok(st.buf.drain(..n).collect());
            }
            match st.mode.clone() {
                Mode::Ended(why) => return Err(why),
                Mode::Unsynced { next_rev } => {
                    drop(st);
                    let got = self.catch_up(store, hub, next_rev, max)?;
                    if !got.is_empty() {
                        return Ok(got);
                    }
                }
                Mode::Synced => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Ok(Vec::new());
                    }
                    drop(self.ready.wait_timeout(st, left).unwrap());
                }
            }
        }
    }

    /// Reads the next events from the log; rejoins the synced group when it reaches the head.
    fn catch_up(self: &Arc<Self>, store: &RwLock<Mvcc>, hub: &Hub, next_rev: i64, max: usize) -> Result<Vec<Arc<Event>>, WatchEnd> {
        let mvcc = store.read().unwrap();
        let mut out = Vec::new();
        let next = match mvcc.events_from(next_rev, &self.range, max, &mut out) {
            Ok(next) => next,
            Err(_) => {
                let why = WatchEnd::Compacted(mvcc.compact_revision());
                drop(mvcc);
                self.end(why.clone());
                return Err(why);
            }
        };
        let mut st = self.state.lock().unwrap();
        if let Mode::Ended(why) = &st.mode {
            return Err(why.clone());
        }
        if next > mvcc.revision() {
            st.mode = Mode::Synced;
            st.from = next;
            drop(st);
            hub.add_synced(self.clone());
        } else {
            st.mode = Mode::Unsynced { next_rev: next };
        }
        Ok(out.into_iter().map(Arc::new).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mvcc::Mvcc;
    use crate::request::{Command, PutRequest, RequestOp, TxnRequest};
    use std::time::Instant;

    fn put(mvcc: &mut Mvcc, key: &[u8], events: &mut Vec<Event>) {
        let op = RequestOp::Put(PutRequest { key: key.to_vec(), value: b"v".to_vec(), lease: 0, prev_kv: false });
        mvcc.apply(&Command::Txn(TxnRequest::single(op)), Instant::now(), Some(events)).unwrap();
    }

    #[test]
    fn a_dispatch_of_revisions_a_catch_up_already_read_is_not_delivered_twice() {
        // The store dispatches a batch after releasing its lock: a watcher can read the batch's
        // revisions from history, join the synced group, and only then be offered them.
        let store = RwLock::new(Mvcc::new());
        let hub = Hub::default();
        let mut early = Vec::new();
        put(&mut store.write().unwrap(), b"a", &mut early);
        let w = Arc::new(Watcher::new(1, KeyRange::new(b"a".to_vec(), Some(b"z".to_vec())), 2, 2, 16, None));
        let mut batch = Vec::new();
        put(&mut store.write().unwrap(), b"b", &mut batch); // applied, its dispatch still pending
        let caught = w.poll(&store, &hub, 10, Duration::ZERO).unwrap();
        assert_eq!(caught.iter().map(|e| e.kv.mod_revision).collect::<Vec<_>>(), vec![2, 3]);
        assert!(w.is_synced());
        hub.dispatch(&batch.into_iter().map(Arc::new).collect::<Vec<_>>());
        assert!(w.poll(&store, &hub, 10, Duration::ZERO).unwrap().is_empty(), "revision 3 delivered twice");
        let mut next = Vec::new();
        put(&mut store.write().unwrap(), b"c", &mut next);
        hub.dispatch(&next.into_iter().map(Arc::new).collect::<Vec<_>>());
        assert_eq!(w.poll(&store, &hub, 10, Duration::ZERO).unwrap()[0].kv.mod_revision, 4);
    }
}
