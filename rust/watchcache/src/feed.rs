//! Feeding caches from the store, inside Rust: one thread per `Feeder` moves store watch events
//! into caches; no caller code runs per event.
//!
//! Each cache has one store watch on its prefix, opened right after the initial range (at R,
//! watch from R+1), so no change is missed or seen twice. The store's notify callback only marks
//! the feed ready; the feeder thread then drains the store watch until it is empty.
//!
//! Consistent reads (`Feed::sync`): read the store's revision R, drain the store watch under
//! the feed lock, then `advance(R)`. A store watch that polls empty is synced with an empty
//! buffer, and the store dispatches every event under its write lock before R becomes
//! visible, so every change up to R under the prefix has been applied: the cache is at R
//! without waiting for the feeder thread.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use kubecore_store::db::Db;
use kubecore_store::error::{Result, StoreError};
use kubecore_store::kv::{prefix_end, Event, EventType, KeyRange};
use kubecore_store::request::RangeRequest;
use kubecore_store::watch::{Notify as StoreNotify, WatchEnd, Watcher as StoreWatcher};

use crate::cache::{Cache, Change, Item, Options, Spec};

/// Events taken from the store watch per poll.
const BATCH: usize = 4096;

#[derive(Default)]
struct Ready {
    ids: HashSet<u64>,
    stop: bool,
}

struct Shared {
    ready: Mutex<Ready>,
    cv: Condvar,
    feeds: Mutex<HashMap<u64, Arc<Feed>>>,
}

impl Shared {
    fn mark(&self, id: u64) {
        self.ready.lock().unwrap().ids.insert(id);
        self.cv.notify_one();
    }
}

/// The caches of one store and the thread that feeds them.
pub struct Feeder {
    db: Arc<Db>,
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// Ids of feeds and of watchers (one sequence: ids are unique across caches).
    next_id: AtomicU64,
}

/// One cache and the store watch that feeds it.
pub struct Feed {
    db: Arc<Db>,
    pub cache: Arc<Cache>,
    /// The store watch (None once closed). Held while polling and applying: the feeder thread
    /// and `sync` never apply concurrently, so changes reach the cache in revision order.
    watch: Mutex<Option<Arc<StoreWatcher>>>,
    notify: StoreNotify,
}

fn load(db: &Db, prefix: &[u8]) -> Result<(i64, Vec<Item>)> {
    let req = RangeRequest {
        key: prefix.to_vec(),
        end: Some(serde_bytes_end(prefix)),
        revision: 0,
        limit: 0,
        keys_only: false,
        count_only: false,
    };
    let r = db.range(&req)?;
    Ok((r.revision, r.kvs.into_iter().map(|kv| (kv.key, kv.value, kv.mod_revision)).collect()))
}

fn serde_bytes_end(prefix: &[u8]) -> serde_bytes::ByteBuf {
    serde_bytes::ByteBuf::from(prefix_end(prefix))
}

fn change(ev: &Event) -> Change {
    let value = (ev.kind == EventType::Put).then(|| ev.kv.value.clone());
    Change { key: ev.kv.key.clone(), value, revision: ev.kv.mod_revision }
}

impl Feed {
    fn open_watch(&self, revision: i64) -> Result<Arc<StoreWatcher>> {
        let prefix = &self.cache.spec().prefix;
        let range = KeyRange::new(prefix.clone(), Some(prefix_end(prefix)));
        self.db.watch(range, revision + 1, Some(self.notify.clone()))
    }

    /// Moves everything the store watch has into the cache.
    pub fn pump(&self) -> Result<()> {
        let mut guard = self.watch.lock().unwrap();
        loop {
            let Some(w) = guard.clone() else { return Err(StoreError::Closed) };
            match self.db.poll(&w, BATCH, Duration::ZERO) {
                Ok(events) if events.is_empty() => return Ok(()),
                Ok(events) => self.cache.apply(events.iter().map(|e| change(e)).collect()),
                Err(WatchEnd::Compacted(_)) => match self.relist() {
                    Ok(w) => *guard = Some(w),
                    Err(e) => return self.fail(&mut guard, e),
                },
                Err(WatchEnd::Cancelled | WatchEnd::Closed) => return self.fail(&mut guard, StoreError::Closed),
            }
        }
    }

    /// The store compacted history the cache still needed: list again and start over.
    fn relist(&self) -> Result<Arc<StoreWatcher>> {
        let (revision, items) = load(&self.db, &self.cache.spec().prefix)?;
        let w = self.open_watch(revision)?;
        self.cache.reset(revision, items);
        Ok(w)
    }

    fn fail(&self, guard: &mut Option<Arc<StoreWatcher>>, e: StoreError) -> Result<()> {
        if let Some(w) = guard.take() {
            self.db.cancel_watch(&w);
        }
        self.cache.close();
        Err(e)
    }

    /// Brings the cache up to the store's current revision (see the module docs); returns the
    /// cache's revision.
    pub fn sync(&self) -> Result<i64> {
        let target = self.db.revision();
        self.pump()?;
        self.cache.advance(target);
        Ok(self.cache.revision())
    }

    /// Stops feeding; the cache's watchers end.
    pub fn close(&self) {
        let mut guard = self.watch.lock().unwrap();
        let _ = self.fail(&mut guard, StoreError::Closed);
    }
}

impl Feeder {
    pub fn new(db: Arc<Db>) -> Self {
        let shared = Arc::new(Shared { ready: Mutex::default(), cv: Condvar::new(), feeds: Mutex::default() });
        let weak = Arc::downgrade(&shared);
        let thread = std::thread::Builder::new()
            .name("kubecore-watchcache".into())
            .spawn(move || run(weak))
            .expect("cannot start the watch cache thread");
        Self { db, shared, thread: Mutex::new(Some(thread)), next_id: AtomicU64::new(1) }
    }

    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Lists the prefix from the store and starts feeding a cache of it.
    pub fn cache(&self, spec: Spec, opts: Options) -> Result<Arc<Feed>> {
        let id = self.next_id();
        let weak = Arc::downgrade(&self.shared);
        let notify: StoreNotify = Arc::new(move |_| {
            if let Some(s) = weak.upgrade() {
                s.mark(id);
            }
        });
        let (revision, items) = load(&self.db, &spec.prefix)?;
        let cache = Arc::new(Cache::new(spec, opts, revision, items));
        let feed = Arc::new(Feed { db: self.db.clone(), cache, watch: Mutex::new(None), notify });
        *feed.watch.lock().unwrap() = Some(feed.open_watch(revision)?);
        self.shared.feeds.lock().unwrap().insert(id, feed.clone());
        self.shared.mark(id);
        Ok(feed)
    }

    /// Stops the thread and every feed. Idempotent.
    pub fn close(&self) {
        self.shared.ready.lock().unwrap().stop = true;
        self.shared.cv.notify_all();
        if let Some(t) = self.thread.lock().unwrap().take() {
            let _ = t.join();
        }
        let feeds: Vec<Arc<Feed>> = self.shared.feeds.lock().unwrap().drain().map(|(_, f)| f).collect();
        for f in feeds {
            f.close();
        }
    }
}

impl Drop for Feeder {
    fn drop(&mut self) {
        self.close();
    }
}

/// The feeder thread: waits for marked feeds and pumps them.
fn run(shared: Weak<Shared>) {
    loop {
        let Some(s) = shared.upgrade() else { return };
        let ids: Vec<u64> = {
            let mut ready = s.ready.lock().unwrap();
            while ready.ids.is_empty() && !ready.stop {
                ready = s.cv.wait(ready).unwrap();
            }
            if ready.stop {
                return;
            }
            ready.ids.drain().collect()
        };
        for id in ids {
            let feed = s.feeds.lock().unwrap().get(&id).cloned();
            if let Some(f) = feed {
                if f.pump().is_err() {
                    s.feeds.lock().unwrap().remove(&id);
                }
            }
        }
    }
}
