//! One WATCH served from the cache: a selector, a bounded buffer of pending events, and the
//! frames (`{"type":"ADDED","object":{...}}\n`) they are written out as.
//!
//! Guarantees:
//! - every change after the start revision that concerns the selector is delivered once, in
//!   revision order (replayed from the ring, then live);
//! - with a selector, an object that starts matching arrives as ADDED, one that stops matching
//!   as DELETED carrying the last state that matched with the new resourceVersion (upstream's
//!   cacheWatcher does the same);
//! - bounded: a watcher whose buffer is full when a live event comes is ended (`End::TooSlow`)
//!   and its buffer dropped; the client re-watches from the last resourceVersion it saw;
//! - `notify(id)` is called when the watcher goes from "nothing to poll" to "something to poll"
//!   and when it ends; never once per event.

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::{Arc, Mutex};

use crate::cache::{CacheEvent, Objects};
use crate::entry::{push_decimal, Bytes, Entry};
use crate::selector::Selector;

/// Told the watcher id; runs on the feeding thread with cache locks held: it must only record
/// the fact and return.
pub type Notify = Arc<dyn Fn(u64) + Send + Sync>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Added,
    Modified,
    Deleted,
}

impl Kind {
    fn frame_head(self) -> &'static [u8] {
        match self {
            Kind::Added => br#"{"type":"ADDED","object":"#,
            Kind::Modified => br#"{"type":"MODIFIED","object":"#,
            Kind::Deleted => br#"{"type":"DELETED","object":"#,
        }
    }
}

/// Why a watcher stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Cancelled,
    /// Its buffer was full when a live event came.
    TooSlow,
    /// The cache was closed (its store closed).
    Closed,
    /// The cache re-listed from the store (its history was compacted): watchers start over.
    Reset,
}

/// The watch event a change makes for a watcher with `sel`, if any: (kind, object to send).
pub fn transition<'a>(sel: &Selector, ev: &'a CacheEvent) -> Option<(Kind, &'a Arc<Entry>)> {
    if !ev.key.starts_with(&sel.prefix) {
        return None;
    }
    let old = ev.prev.as_ref().filter(|p| sel.matches(p));
    match &ev.new {
        None => old.map(|p| (Kind::Deleted, p)),
        Some(new) if sel.matches(new) => Some((if old.is_some() { Kind::Modified } else { Kind::Added }, new)),
        Some(_) => old.map(|p| (Kind::Deleted, p)),
    }
}

#[derive(Clone)]
struct Pending {
    kind: Kind,
    entry: Arc<Entry>,
    /// The resourceVersion written into the object (the event's revision).
    revision: i64,
}

impl Pending {
    /// Exact size of the frame: a poll that stops for its budget has written at least that.
    fn frame_len(&self) -> usize {
        self.kind.frame_head().len() + self.entry.json_len(self.revision) + 2
    }
}

/// The current objects still to send as ADDED before live events (a watch without a start
/// revision, or with sendInitialEvents).
struct Initial {
    objects: Objects,
    /// Resume after this key (None: from the selector's prefix).
    after: Option<Bytes>,
    revision: i64,
    /// Send a BOOKMARK annotated `k8s.io/initial-events-end` after the objects.
    end_bookmark: bool,
}

struct WState {
    initial: Option<Initial>,
    buf: VecDeque<Pending>,
    /// Most pending live events allowed; grows by the size of the replay at registration.
    limit: usize,
    end: Option<End>,
}

impl WState {
    fn idle(&self) -> bool {
        self.initial.is_none() && self.buf.is_empty()
    }
}

/// What a poll found.
#[derive(Debug, PartialEq, Eq)]
pub enum Polled {
    /// Frames, joined; never empty.
    Frames(Vec<u8>),
    /// Nothing pending (wait for `notify`).
    Empty,
    Ended(End),
}

pub struct Watcher {
    pub id: u64,
    selector: Selector,
    /// Only events with a revision above this are delivered.
    start: i64,
    /// `{"type":"BOOKMARK","object":{"kind":..,"apiVersion":..,"metadata":{"resourceVersion":"`
    bookmark_head: Arc<[u8]>,
    state: Mutex<WState>,
    notify: Option<Notify>,
}

impl Watcher {
    pub(crate) fn new(id: u64, selector: Selector, start: i64, limit: usize, bookmark_head: Arc<[u8]>, notify: Option<Notify>) -> Self {
        let state = WState { initial: None, buf: VecDeque::new(), limit: limit.max(1), end: None };
        Self { id, selector, start, bookmark_head, state: Mutex::new(state), notify }
    }

    pub fn selector(&self) -> &Selector {
        &self.selector
    }

    /// Queues the current objects (a snapshot) to be sent first.
    pub(crate) fn set_initial(&self, objects: Objects, revision: i64, end_bookmark: bool) {
        let mut st = self.state.lock().unwrap();
        st.initial = Some(Initial { objects, after: None, revision, end_bookmark });
    }

    /// Queues history at registration: the limit grows by what the replay added.
    pub(crate) fn replay(&self, events: &[Arc<CacheEvent>]) {
        let mut st = self.state.lock().unwrap();
        let before = st.buf.len();
        for ev in events.iter().filter(|e| e.revision > self.start) {
            if let Some((kind, entry)) = transition(&self.selector, ev) {
                st.buf.push_back(Pending { kind, entry: entry.clone(), revision: ev.revision });
            }
        }
        st.limit += st.buf.len() - before;
    }

    /// Offers live events; returns false once the watcher has ended (the cache drops it).
    pub(crate) fn offer(&self, events: &[Arc<CacheEvent>]) -> bool {
        let mut st = self.state.lock().unwrap();
        if st.end.is_some() {
            return false;
        }
        let was_idle = st.idle();
        for ev in events.iter().filter(|e| e.revision > self.start) {
            let Some((kind, entry)) = transition(&self.selector, ev) else { continue };
            if st.buf.len() >= st.limit {
                drop(st);
                self.end(End::TooSlow);
                return false;
            }
            st.buf.push_back(Pending { kind, entry: entry.clone(), revision: ev.revision });
        }
        let wake = was_idle && !st.idle();
        drop(st);
        if wake {
            self.wake();
        }
        true
    }

    /// Ends the watcher (idempotent); what it still had pending is dropped.
    pub fn end(&self, why: End) {
        let mut st = self.state.lock().unwrap();
        if st.end.is_some() {
            return;
        }
        st.end = Some(why);
        st.buf = VecDeque::new();
        st.initial = None;
        drop(st);
        self.wake();
    }

    pub fn ended(&self) -> Option<End> {
        self.state.lock().unwrap().end
    }

    fn wake(&self) {
        if let Some(n) = &self.notify {
            n(self.id);
        }
    }

    /// `revision` if nothing is pending (a bookmark at the cache's revision is then truthful).
    pub(crate) fn progress(&self, revision: i64) -> Option<i64> {
        let st = self.state.lock().unwrap();
        (st.end.is_none() && st.idle()).then_some(revision)
    }

    /// Takes pending events, about `max_bytes` of frames (at least one), and encodes them
    /// outside the lock: initial objects, the initial-events-end bookmark, then live events.
    /// Frames shorter than `max_bytes` in all mean nothing was left: the next news comes with
    /// a `notify`, so the caller may wait without polling again.
    pub fn poll(&self, max_bytes: usize) -> Polled {
        let mut first: Vec<Pending> = Vec::new();
        let mut live: Vec<Pending> = Vec::new();
        let mut bookmark = None;
        {
            let mut st = self.state.lock().unwrap();
            if let Some(end) = st.end {
                return Polled::Ended(end);
            }
            let mut budget = max_bytes.max(1);
            if let Some(init) = st.initial.as_mut() {
                if take_initial(init, &self.selector, &mut first, &mut budget) {
                    bookmark = init.end_bookmark.then_some(init.revision);
                    st.initial = None;
                }
            }
            while budget > 0 && st.initial.is_none() {
                let Some(p) = st.buf.pop_front() else { break };
                budget = budget.saturating_sub(p.frame_len());
                live.push(p);
            }
        }
        if first.is_empty() && live.is_empty() && bookmark.is_none() {
            return Polled::Empty;
        }
        let size: usize = first.iter().chain(&live).map(Pending::frame_len).sum();
        let mut out = Vec::with_capacity(size + 200);
        encode(&mut out, &first);
        if let Some(rev) = bookmark {
            out.extend_from_slice(&self.bookmark_head);
            push_decimal(&mut out, rev);
            out.extend_from_slice(br#"","annotations":{"k8s.io/initial-events-end":"true"}}}}"#);
            out.push(b'\n');
        }
        encode(&mut out, &live);
        Polled::Frames(out)
    }
}

fn encode(out: &mut Vec<u8>, items: &[Pending]) {
    for p in items {
        out.extend_from_slice(p.kind.frame_head());
        p.entry.write_json(out, p.revision);
        out.extend_from_slice(b"}\n");
    }
}

/// Moves matching initial objects into `items` until the budget is spent; true when all are.
fn take_initial(init: &mut Initial, sel: &Selector, items: &mut Vec<Pending>, budget: &mut usize) -> bool {
    let end = kubecore_store::kv::prefix_end(&sel.prefix);
    let upper = if end == [0] { Bound::Unbounded } else { Bound::Excluded(end.as_slice()) };
    let lower = match &init.after {
        Some(k) => Bound::Excluded(&k[..]),
        None => Bound::Included(sel.prefix.as_slice()),
    };
    for (key, entry) in init.objects.range::<_, [u8]>((lower, upper)) {
        if sel.matches(entry) {
            let p = Pending { kind: Kind::Added, entry: entry.clone(), revision: entry.mod_revision };
            *budget = budget.saturating_sub(p.frame_len());
            items.push(p);
        }
        if *budget == 0 {
            init.after = Some(key.clone());
            return false;
        }
    }
    true
}
