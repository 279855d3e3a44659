//! The cache of one resource (one key prefix): current objects, an event ring, the revision it
//! has caught up to, and the watchers it feeds.
//!
//! Fed with `Change`s in revision order (by `feed::Feed` from a store watch, or directly in
//! tests). Worked example, ring capacity 2, cache listed at revision 10:
//!
//! ```text
//! apply put a@11       objects {a@11}         ring [11]      floor 10  revision 11
//! apply put b@12       objects {a@11, b@12}   ring [11, 12]  floor 10  revision 12
//! apply delete a@13    objects {b@12}         ring [12, 13]  floor 11  revision 13
//! advance(20)          (no change under the prefix up to 20)             revision 20
//! watch from 11: replays 12, 13 then live.   watch from 10: too old (11 left the ring).
//! ```

use std::collections::VecDeque;
use std::sync::{Arc, RwLock};

use imbl::OrdMap;

use crate::entry::{Bytes, Entry, FieldSpec};
use crate::selector::{FieldTerm, LabelOp, LabelReq, Selector};
use crate::watcher::{End, Notify, Watcher};

/// The objects of a resource by key; cloning is O(1) (a persistent map), so a LIST or a
/// paginated snapshot holds a consistent view without copying or blocking the feed.
pub type Objects = OrdMap<Bytes, Arc<Entry>>;

#[derive(Debug, Clone)]
pub struct Options {
    /// Events kept for watches that start in the past.
    pub ring_capacity: usize,
    /// Live events a watcher may have pending before it is ended as too slow.
    pub watcher_buffer: usize,
    /// Snapshots kept for paginated LISTs (continue tokens); the oldest goes first.
    pub max_snapshots: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self { ring_capacity: 8192, watcher_buffer: 10_000, max_snapshots: 16 }
    }
}

/// What is cached: the key prefix of a resource, its kind (for bookmarks) and the selectable
/// fields extracted from each object.
#[derive(Debug, Clone)]
pub struct Spec {
    pub prefix: Vec<u8>,
    pub kind: String,
    pub api_version: String,
    pub fields: Vec<FieldSpec>,
}

/// A stored object as listed from the store: (key, value, mod revision).
pub type Item = (Bytes, Bytes, i64);

/// One change fed to the cache: a key's new value (None: deleted) at a revision.
#[derive(Debug, Clone)]
pub struct Change {
    pub key: Bytes,
    pub value: Option<Bytes>,
    pub revision: i64,
}

/// A change as the cache saw it: the entry before and after.
#[derive(Debug)]
pub struct CacheEvent {
    pub key: Bytes,
    /// None for a delete.
    pub new: Option<Arc<Entry>>,
    /// The cached entry the change replaced (None for a creation).
    pub prev: Option<Arc<Entry>>,
    pub revision: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchError {
    /// Events after this start revision have left the ring; `floor` is the oldest start served.
    TooOld { floor: i64 },
    Closed,
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// Events with a revision above this one.
    After(i64),
    /// The current objects as ADDED (then, with `end_bookmark`, an initial-events-end BOOKMARK),
    /// then live events.
    Current { end_bookmark: bool },
}

pub(crate) struct State {
    pub(crate) objects: Objects,
    /// Events with revision in (floor, revision], oldest first, at most `ring_capacity`.
    ring: VecDeque<Arc<CacheEvent>>,
    /// A watch can start after any revision >= floor.
    floor: i64,
    /// Every change up to this revision is applied (and dispatched).
    pub(crate) revision: i64,
    /// (revision, objects at that revision) for continue tokens, oldest first.
    pub(crate) snapshots: VecDeque<(i64, Objects)>,
    watchers: Vec<Arc<Watcher>>,
    closed: bool,
}

pub struct Cache {
    pub(crate) spec: Spec,
    pub(crate) opts: Options,
    bookmark_head: Arc<[u8]>,
    pub(crate) state: RwLock<State>,
}

fn entries(items: Vec<Item>, specs: &[FieldSpec]) -> Objects {
    items.into_iter().map(|(k, v, rev)| (k.clone(), Arc::new(Entry::new(k, v, rev, specs)))).collect()
}

impl Cache {
    /// A cache holding `items` (key, value, mod revision), the resource's objects at `revision`.
    pub fn new(spec: Spec, opts: Options, revision: i64, items: Vec<Item>) -> Self {
        let objects = entries(items, &spec.fields);
        let head = format!(
            r#"{{"type":"BOOKMARK","object":{{"kind":{},"apiVersion":{},"metadata":{{"resourceVersion":""#,
            serde_json::Value::from(spec.kind.as_str()),
            serde_json::Value::from(spec.api_version.as_str())
        );
        let state = State {
            objects,
            ring: VecDeque::new(),
            floor: revision,
            revision,
            snapshots: VecDeque::new(),
            watchers: Vec::new(),
            closed: false,
        };
        Self { spec, opts, bookmark_head: Arc::from(head.into_bytes()), state: RwLock::new(state) }
    }

    pub fn spec(&self) -> &Spec {
        &self.spec
    }

    pub fn revision(&self) -> i64 {
        self.state.read().unwrap().revision
    }

    pub fn floor(&self) -> i64 {
        self.state.read().unwrap().floor
    }

    pub fn len(&self) -> usize {
        self.state.read().unwrap().objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn watcher_count(&self) -> usize {
        self.state.read().unwrap().watchers.len()
    }

    /// A selector over this cache's fields from already-parsed requirements:
    /// labels as (key, op, values), fields as (label, op, value).
    pub fn selector(&self, prefix: &[u8], labels: &[(String, String, Vec<String>)], fields: &[(String, String, String)]) -> Result<Selector, String> {
        let labels = labels
            .iter()
            .map(|(k, op, vs)| Ok(LabelReq { key: k.clone(), op: LabelOp::parse(op)?, values: vs.clone() }))
            .collect::<Result<_, String>>()?;
        let fields = fields.iter().map(|(l, op, v)| FieldTerm::new(l, op, v, &self.spec.fields)).collect::<Result<_, _>>()?;
        Ok(Selector { prefix: prefix.to_vec(), labels, fields })
    }

    /// Applies changes in revision order and feeds the watchers. Objects are decoded before
    /// the lock is taken.
    pub fn apply(&self, changes: Vec<Change>) {
        if changes.is_empty() {
            return;
        }
        let built: Vec<(Change, Option<Arc<Entry>>)> = changes
            .into_iter()
            .map(|c| {
                let e = c.value.clone().map(|v| Arc::new(Entry::new(c.key.clone(), v, c.revision, &self.spec.fields)));
                (c, e)
            })
            .collect();
        let mut st = self.state.write().unwrap();
        let mut batch = Vec::with_capacity(built.len());
        for (c, new) in built {
            let prev = match &new {
                Some(e) => st.objects.insert(c.key.clone(), e.clone()),
                None => st.objects.remove(&c.key),
            };
            if new.is_none() && prev.is_none() {
                continue; // a delete of a key the cache never had: nothing to tell anyone
            }
            batch.push(Arc::new(CacheEvent { key: c.key, new, prev, revision: c.revision }));
        }
        if let Some(last) = batch.last() {
            st.revision = st.revision.max(last.revision);
        }
        self.push_ring(&mut st, &batch);
        st.watchers.retain(|w| w.offer(&batch));
    }

    fn push_ring(&self, st: &mut State, batch: &[Arc<CacheEvent>]) {
        st.ring.extend(batch.iter().cloned());
        while st.ring.len() > self.opts.ring_capacity.max(1) {
            let gone = st.ring.pop_front().expect("ring is longer than its capacity");
            st.floor = st.floor.max(gone.revision);
        }
        let floor = st.floor;
        st.snapshots.retain(|(rev, _)| *rev >= floor);
    }

    /// Records that nothing under the prefix changed up to `revision` (a consistent read found
    /// the store there).
    pub fn advance(&self, revision: i64) {
        let mut st = self.state.write().unwrap();
        st.revision = st.revision.max(revision);
    }

    /// Starts over from a fresh list at `revision`: history is gone, so every watcher ends
    /// with `End::Reset` (its client re-watches) and snapshots are dropped.
    pub fn reset(&self, revision: i64, items: Vec<Item>) {
        let objects = entries(items, &self.spec.fields);
        let mut st = self.state.write().unwrap();
        st.objects = objects;
        st.ring.clear();
        st.snapshots.clear();
        st.floor = revision;
        st.revision = revision;
        for w in st.watchers.drain(..) {
            w.end(End::Reset);
        }
    }

    /// Ends every watcher; later watches are refused. Objects stay readable.
    pub fn close(&self) {
        let mut st = self.state.write().unwrap();
        st.closed = true;
        for w in st.watchers.drain(..) {
            w.end(End::Closed);
        }
    }

    pub fn is_closed(&self) -> bool {
        self.state.read().unwrap().closed
    }

    /// Registers a watcher (events replayed from the ring when it starts in the past).
    pub fn watch(&self, id: u64, selector: Selector, start: Start, notify: Option<Notify>) -> Result<Arc<Watcher>, WatchError> {
        let mut st = self.state.write().unwrap();
        if st.closed {
            return Err(WatchError::Closed);
        }
        let after = match start {
            Start::After(rev) if rev < st.floor => return Err(WatchError::TooOld { floor: st.floor }),
            Start::After(rev) => rev,
            Start::Current { .. } => st.revision,
        };
        let w = Arc::new(Watcher::new(id, selector, after, self.opts.watcher_buffer, self.bookmark_head.clone(), notify));
        match start {
            Start::Current { end_bookmark } => w.set_initial(st.objects.clone(), after, end_bookmark),
            Start::After(rev) => {
                let from = st.ring.partition_point(|e| e.revision <= rev);
                let replay: Vec<Arc<CacheEvent>> = st.ring.range(from..).cloned().collect();
                w.replay(&replay);
            }
        }
        st.watchers.push(w.clone());
        Ok(w)
    }

    /// Unregisters and ends a watcher.
    pub fn cancel(&self, w: &Watcher) {
        self.state.write().unwrap().watchers.retain(|x| x.id != w.id);
        w.end(End::Cancelled);
    }

    /// The revision a BOOKMARK may carry for `w` now, if it has nothing pending.
    pub fn progress(&self, w: &Watcher) -> Option<i64> {
        let rev = self.revision();
        w.progress(rev)
    }
}
