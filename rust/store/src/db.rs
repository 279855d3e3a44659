//! The durable store: the MVCC engine as the state machine of a Raft group.
//!
//! Writes are encoded commands proposed to the Raft log; the Raft thread persists them (WAL, one
//! fsync per batch), applies them here one entry at a time under the write lock (a reader waits
//! for one entry, not for a batch), then dispatches the batch's events to synced watchers without
//! the lock and completes each proposal's callback. Reads take the read lock and never touch the
//! log: a write's callback runs only after it is applied and its events are dispatched, so a
//! caller always reads its own acknowledged writes. A watcher that catches up from history while
//! a dispatch is pending skips the revisions it already read (`watch::Watcher`).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use kubecore_raft::{Config as RaftConfig, RaftError, RaftHandle, StateMachine};

use crate::error::{Result, StoreError};
use crate::kv::{Event, KeyRange, KeyValue, RangeResult, TxnResult};
use crate::lease::remaining_secs;
use crate::mvcc::{Applied, Mvcc};
use crate::request::{Command, RangeRequest, TxnRequest};
use crate::watch::{Hub, Notify, WatchEnd, Watcher};

#[derive(Debug, Clone)]
pub struct Options {
    /// None keeps everything in memory (still through the Raft loop, without files).
    pub dir: Option<PathBuf>,
    pub fsync: bool,
    /// Largest encoded write request accepted (etcd's default: 1.5 MiB).
    pub max_request_bytes: usize,
    /// Applied entries between two snapshots of the state.
    pub snapshot_every: u64,
    /// Events a synced watcher may buffer before it falls back to catching up from history.
    pub watch_buffer: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self { dir: None, fsync: true, max_request_bytes: 1536 * 1024, snapshot_every: 100_000, watch_buffer: 8192 }
    }
}

/// Called once with the outcome of a write, on the Raft thread: it must not block.
pub type Done = Box<dyn FnOnce(Result<Applied>) + Send>;

/// State shared by the Raft thread (writer) and every reader.
pub struct Shared {
    pub mvcc: RwLock<Mvcc>,
    pub hub: Hub,
}

/// The Raft state machine: decodes and applies commands, feeds watchers.
struct Machine {
    shared: Arc<Shared>,
}

impl StateMachine for Machine {
    type Output = Result<Applied>;

    fn apply(&mut self, entries: &[(u64, &[u8])]) -> Vec<Self::Output> {
        let now = Instant::now();
        let mut events: Vec<Event> = Vec::new();
        let out = entries
            .iter()
            .map(|(_, data)| {
                // Decoded without the lock; each entry is applied under a write lock of its own,
                // so that a reader waits for one entry, never for a whole batch.
                let cmd = Command::decode(data)?;
                let mut mvcc = self.shared.mvcc.write().unwrap();
                let listening = self.shared.hub.has_synced();
                mvcc.apply(&cmd, now, listening.then_some(&mut events))
            })
            .collect();
        if !events.is_empty() {
            let events: Vec<Arc<Event>> = events.into_iter().map(Arc::new).collect();
            self.shared.hub.dispatch(&events);
        }
        out
    }

    fn snapshot(&mut self, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        crate::snapshot::write(&self.shared.mvcc.read().unwrap(), w)
    }

    fn restore(&mut self, r: &mut dyn std::io::Read) -> std::io::Result<()> {
        let restored = crate::snapshot::read(r)?;
        *self.shared.mvcc.write().unwrap() = restored;
        Ok(())
    }

    fn on_tick(&mut self) -> Vec<Vec<u8>> {
        let expired = self.shared.mvcc.write().unwrap().leases.take_expired(Instant::now());
        expired.into_iter().map(|id| Command::LeaseRevoke(id).encode()).collect()
    }
}

/// What a lease looks like from outside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseInfo {
    pub id: i64,
    /// Seconds left, rounded down.
    pub ttl: i64,
    pub granted_ttl: i64,
    pub keys: Vec<Vec<u8>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stats {
    pub revision: i64,
    pub compact_revision: i64,
    pub keys: usize,
    pub versions: usize,
    pub leases: usize,
    pub fsyncs: u64,
    pub applied_index: u64,
    pub snapshot_index: u64,
    pub proposals: u64,
}

pub struct Db {
    shared: Arc<Shared>,
    raft: RaftHandle<Machine>,
    opts: Options,
    closed: AtomicBool,
    next_watch_id: AtomicU64,
}

impl Db {
    /// Opens (or creates) the store: loads the newest snapshot and replays the log. Returns once
    /// every logged write is applied.
    pub fn open(opts: Options) -> Result<Self> {
        let shared = Arc::new(Shared { mvcc: RwLock::new(Mvcc::new()), hub: Hub::default() });
        let config = RaftConfig {
            dir: opts.dir.clone(),
            fsync: opts.fsync,
            snapshot_every: opts.snapshot_every.max(1),
            ..RaftConfig::default()
        };
        let raft = RaftHandle::open(config, Machine { shared: shared.clone() }).map_err(from_raft)?;
        shared.mvcc.write().unwrap().leases.refresh_all(Instant::now());
        Ok(Self { shared, raft, opts, closed: AtomicBool::new(false), next_watch_id: AtomicU64::new(1) })
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    pub fn options(&self) -> &Options {
        &self.opts
    }

    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(StoreError::Closed);
        }
        Ok(())
    }

    /// Encodes and checks a command; the bytes to propose.
    fn encode(&self, cmd: &Command) -> Result<Vec<u8>> {
        self.check_open()?;
        let data = cmd.encode();
        if data.len() > self.opts.max_request_bytes {
            return Err(StoreError::RequestTooLarge { size: data.len(), limit: self.opts.max_request_bytes });
        }
        Ok(data)
    }

    /// Proposes writes; each `done` is called exactly once (immediately for a request refused
    /// before it reaches the log).
    pub fn submit_many(&self, items: Vec<(Command, Done)>) {
        let mut batch = Vec::with_capacity(items.len());
        for (cmd, done) in items {
            match self.encode(&cmd) {
                Ok(data) => batch.push((data, wrap(done))),
                Err(e) => done(Err(e)),
            }
        }
        if !batch.is_empty() {
            self.raft.propose_batch(batch);
        }
    }

    pub fn submit(&self, cmd: Command, done: Done) {
        self.submit_many(vec![(cmd, done)]);
    }

    /// Proposes one write and waits for its outcome.
    pub fn execute(&self, cmd: Command) -> Result<Applied> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.submit(cmd, Box::new(move |r| drop(tx.send(r))));
        rx.recv().unwrap_or(Err(StoreError::Closed))
    }

    pub fn range(&self, req: &RangeRequest) -> Result<RangeResult> {
        self.check_open()?;
        self.shared.mvcc.read().unwrap().range(req)
    }

    pub fn get(&self, key: &[u8], revision: i64) -> Result<Option<KeyValue>> {
        self.check_open()?;
        self.shared.mvcc.read().unwrap().get(key, revision)
    }

    /// See `Mvcc::mod_revision`.
    pub fn mod_revision(&self, key: &[u8]) -> Result<Option<i64>> {
        self.check_open()?;
        Ok(self.shared.mvcc.read().unwrap().mod_revision(key))
    }

    /// See `Mvcc::signature`.
    pub fn signature(&self, range: &KeyRange) -> Result<(i64, i64)> {
        self.check_open()?;
        Ok(self.shared.mvcc.read().unwrap().signature(range))
    }

    /// A transaction: served locally when it cannot write, through the log otherwise.
    pub fn txn(&self, t: TxnRequest) -> Result<TxnResult> {
        if t.is_read_only() {
            self.check_open()?;
            return self.shared.mvcc.read().unwrap().read_txn(&t);
        }
        match self.execute(Command::Txn(t))? {
            Applied::Txn(r) => Ok(r),
            other => unreachable!("a txn applies as a txn, got {other:?}"),
        }
    }

    pub fn lease_keepalive(&self, id: i64) -> Result<i64> {
        self.check_open()?;
        self.shared.mvcc.write().unwrap().leases.keepalive(id, Instant::now())
    }

    pub fn lease_info(&self, id: i64, with_keys: bool) -> Result<LeaseInfo> {
        self.check_open()?;
        let mvcc = self.shared.mvcc.read().unwrap();
        let lease = mvcc.leases.get(id)?;
        let mut keys: Vec<Vec<u8>> = if with_keys { lease.keys.iter().map(|k| k.to_vec()).collect() } else { Vec::new() };
        keys.sort_unstable();
        Ok(LeaseInfo { id, ttl: remaining_secs(lease.expiry, Instant::now()), granted_ttl: lease.ttl, keys })
    }

    pub fn leases(&self) -> Result<Vec<i64>> {
        self.check_open()?;
        Ok(self.shared.mvcc.read().unwrap().leases.ids())
    }

    /// Starts a watch on `range` from `start_revision` (0: from the next change on).
    pub fn watch(&self, range: KeyRange, start_revision: i64, notify: Option<Notify>) -> Result<Arc<Watcher>> {
        self.check_open()?;
        // A start revision below the compaction point is accepted, as etcd does: the first poll
        // ends the watch with WatchEnd::Compacted.
        let mvcc = self.shared.mvcc.read().unwrap();
        let start = if start_revision > 0 { start_revision } else { mvcc.revision() + 1 };
        let id = self.next_watch_id.fetch_add(1, Ordering::Relaxed);
        let w = Arc::new(Watcher::new(id, range, start, mvcc.revision(), self.opts.watch_buffer, notify));
        if w.is_synced() {
            self.shared.hub.add_synced(w.clone());
        }
        Ok(w)
    }

    /// Next events of a watcher, waiting at most `timeout`.
    pub fn poll(&self, w: &Arc<Watcher>, max: usize, timeout: Duration) -> std::result::Result<Vec<Arc<Event>>, WatchEnd> {
        if self.is_closed() {
            w.end(WatchEnd::Closed);
        }
        w.poll(&self.shared.mvcc, &self.shared.hub, max, timeout)
    }

    pub fn cancel_watch(&self, w: &Watcher) {
        self.shared.hub.remove(w.id);
        w.end(WatchEnd::Cancelled);
    }

    pub fn revision(&self) -> i64 {
        self.shared.mvcc.read().unwrap().revision()
    }

    pub fn compact_revision(&self) -> i64 {
        self.shared.mvcc.read().unwrap().compact_revision()
    }

    pub fn stats(&self) -> Stats {
        let r = self.raft.stats();
        let m = self.shared.mvcc.read().unwrap();
        Stats {
            revision: m.revision(),
            compact_revision: m.compact_revision(),
            keys: m.len(),
            versions: m.version_count(),
            leases: m.leases.len(),
            fsyncs: r.fsyncs,
            applied_index: r.applied_index,
            snapshot_index: r.snapshot_index,
            proposals: r.proposals,
        }
    }

    /// Completes in-flight writes, ends every watch, syncs and releases the directory. Idempotent.
    pub fn close(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let res = self.raft.close().map_err(from_raft);
        self.shared.hub.close_all();
        res
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

fn wrap(done: Done) -> kubecore_raft::Completion<Result<Applied>> {
    Box::new(move |r: std::result::Result<Result<Applied>, RaftError>| done(r.map_err(from_raft).and_then(|x| x)))
}

pub fn from_raft(e: RaftError) -> StoreError {
    match e {
        RaftError::Closed => StoreError::Closed,
        RaftError::Locked(p) => StoreError::Locked(format!(
            "the store directory {} is in use by another process (or another Store in this one)",
            p.display()
        )),
        RaftError::Corruption { path, offset, detail } => {
            StoreError::Corruption(format!("{} at offset {offset}: {detail}", path.display()))
        }
        other => StoreError::Io(other.to_string()),
    }
}
