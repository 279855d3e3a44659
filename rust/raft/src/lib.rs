//! kubecore's Raft log: a raft-rs `RawNode` driven by one dedicated thread that owns the WAL,
//! the snapshots and the apply loop, generic over a [`StateMachine`].
//!
//! # Thread model
//!
//! [`RaftHandle`] is a cheap, cloneable sender. Proposals travel over a channel to the raft
//! thread; completions are called on that thread once the entry is durable *and* applied.
//! The state machine is owned by the raft thread; callers share reads through their own wrapper.
//!
//! # The loop, in order (one iteration)
//!
//! 0. **Collect.** Block until a message or the next tick, then drain *every* queued message
//!    (group commit). All proposals of the iteration go to raft-rs as one `MsgPropose`
//!    whose entries carry their proposal id (8 bytes, little-endian) as the entry context.
//!    On a tick: `RawNode::tick`, then `StateMachine::on_tick` commands are proposed too.
//! 1. **Ready.** While `has_ready()`, take a `Ready` and handle it in this order:
//!    1. *Snapshot from a leader* (multi-node only; rejected as unsupported for now).
//!    2. *Persist*: stage the hard state (if changed) and then the new entries as WAL records;
//!       hand the entries to the in-memory [`storage::LogStore`] (later index wins).
//!    3. *Sync*: one `pwrite` of the whole staged batch and **one** `fdatasync` (if
//!       `Config::fsync`).
//!    4. *Send* messages and persisted messages (no transport in a single-node group: the
//!       slot is kept so multi-node is a configuration change).
//!    5. *Advance*: `advance_append`; a new commit index is recorded in the store and staged
//!       as a hard-state record (written with the next batch — the commit index is
//!       recoverable, so it never costs its own fsync).
//!    6. *Apply*: the ready's committed entries, then the light ready's, in one
//!       `StateMachine::apply` call per run of normal entries (conf changes in between are
//!       applied to raft-rs); each proposal's [`Completion`] gets its output, looked up by the
//!       id in the entry context.
//!    7. `advance_apply_to(applied)`.
//!    8. *Trim and snapshot*: keep at most `mem_log_entries` applied entries in memory (older
//!       ones live on in the WAL); when `snapshot_every` entries were applied since the last
//!       snapshot, write one, then compact the in-memory log and delete WAL segments wholly
//!       covered by it. (In memory mode the log is compacted to the applied index after every
//!       apply.)
//! 2. **Close.** On `close()` the loop finishes the iteration (completing in-flight proposals),
//!    writes and syncs any staged record, and exits, dropping the directory lock.
//!
//! # On-disk layout (`Config::dir`)
//!
//! ```text
//! LOCK                                   flock(LOCK_EX|LOCK_NB) while open
//! wal/<seq 016x>-<first index 016x>.wal  segments, preallocated to segment_bytes
//! snap/<index 016x>-<term 016x>.snap     newest two snapshots
//! ```
//!
//! # WAL record format
//!
//! ```text
//! [u32 len][u32 crc32(type ‖ payload)][u8 type][payload: len bytes]      (little-endian)
//! type 1 entry:      u64 term, u64 index, u8 entry type (0 normal, 1 conf change, 2 v2),
//!                    u32 context len, context, data (rest of payload)
//! type 2 hard state: u64 term, u64 vote, u64 commit
//! type 3 conf state: voters, learners, voters_outgoing, learners_next
//!                    (each u32 count + u64 ids), u8 auto_leave
//! ```
//! Replay reads segments in sequence order; an entry whose index is <= the last one replayed
//! truncates the log there (the later record wins); the last hard/conf state wins. Unused
//! preallocated space is zeros. A new segment begins with the hard and conf state as of the
//! end of the previous one. A bad record in the last segment with nothing valid after it is a
//! torn write: it is zeroed and the log continues from there. Any other bad record is
//! [`RaftError::Corruption`] naming file and offset.
//!
//! Snapshot files: `b"KCSNAP01"`, u64 index, u64 term, conf state (as above), state machine
//! bytes, u32 crc32 of all preceding bytes.

// rust-protobuf messages carry private bookkeeping fields, so they are built field by field.
#![allow(clippy::field_reassign_with_default)]

mod error;
mod fsutil;
mod handle;
mod node;
mod pending;
pub mod snapshot;
pub mod storage;
pub mod wal;

use std::path::PathBuf;
use std::time::Duration;

pub use error::RaftError;
pub use handle::RaftHandle;

/// The replicated state machine driven by the raft thread.
pub trait StateMachine: Send + 'static {
    type Output: Send + 'static;
    /// Apply committed entries (raft index, data) in order; exactly one output per entry.
    /// Empty-data entries (raft no-ops, conf changes) are NOT passed here.
    fn apply(&mut self, entries: &[(u64, &[u8])]) -> Vec<Self::Output>;
    /// Write a full snapshot of the state as of the last applied entry.
    fn snapshot(&mut self, w: &mut dyn std::io::Write) -> std::io::Result<()>;
    /// Replace the state with one written by `snapshot`.
    fn restore(&mut self, r: &mut dyn std::io::Read) -> std::io::Result<()>;
    /// Called on the raft thread every `tick_interval`; returned commands are proposed
    /// (their outputs are dropped). Used e.g. for lease expiry.
    fn on_tick(&mut self) -> Vec<Vec<u8>> {
        Vec::new()
    }
}

/// Called exactly once per proposal, on the raft thread, after the entry is durable and applied
/// (or with the reason it never will be). Keep it short: it runs inside the apply loop.
pub type Completion<O> = Box<dyn FnOnce(Result<O, RaftError>) + Send>;

/// How to open a raft log.
#[derive(Debug, Clone)]
pub struct Config {
    /// Directory for LOCK, wal/ and snap/; `None` = in memory, no files at all.
    pub dir: Option<PathBuf>,
    /// fdatasync the WAL once per batch before acknowledging (default true).
    pub fsync: bool,
    /// Applied entries between snapshots (default 100_000).
    pub snapshot_every: u64,
    /// WAL segment size; segments are preallocated to this (default 64 MiB).
    pub segment_bytes: u64,
    /// Raft tick and `StateMachine::on_tick` period (default 100 ms).
    pub tick_interval: Duration,
    /// This node's raft id; a fresh group has voters `[node_id]` (default 1).
    pub node_id: u64,
    /// Applied entries kept in memory behind the applied index (default 1024). Older ones are
    /// only in the WAL until the next snapshot, so memory does not grow with `snapshot_every`.
    pub mem_log_entries: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            dir: None,
            fsync: true,
            snapshot_every: 100_000,
            segment_bytes: 64 << 20,
            tick_interval: Duration::from_millis(100),
            node_id: 1,
            mem_log_entries: 1024,
        }
    }
}

/// Counters read by [`RaftHandle::stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Highest raft index applied to the state machine.
    pub applied_index: u64,
    /// Highest raft index in the log.
    pub last_index: u64,
    /// Index of the newest snapshot (0 = none). In memory mode: the compaction point.
    pub snapshot_index: u64,
    /// fdatasync calls on WAL segments since open.
    pub fsyncs: u64,
    /// Proposals accepted since open (including `on_tick` commands).
    pub proposals: u64,
    /// WAL bytes written since open.
    pub wal_bytes: u64,
    /// Log entries held in memory (the rest are only in the WAL).
    pub mem_entries: u64,
}
