//! The raft loop: one `Node` owns the `RawNode`, the WAL, the snapshots and the state machine.
//! The numbered `Ready` order is documented once, in the crate docs (lib.rs); the step numbers
//! in comments below refer to it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, RwLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use protobuf::Message as _;
use raft::eraftpb::{ConfChange, ConfChangeV2, ConfState, Entry, EntryType, Message, MessageType};
use raft::{RawNode, Ready};

use crate::error::{RaftError, Result};
use crate::fsutil::{ensure_dir, DirLock};
use crate::pending::Pending;
use crate::snapshot::{self, SnapMeta};
use crate::storage::LogStore;
use crate::wal::Wal;
use crate::{Completion, Config, StateMachine, Stats};

/// What a handle sends to the raft thread.
pub(crate) enum Msg<O> {
    Propose(Vec<u8>, Completion<O>),
    Batch(Vec<(Vec<u8>, Completion<O>)>),
    Close,
}

/// State shared between handles and the raft thread.
pub(crate) struct Shared<O> {
    /// `None` once closed (or the thread stopped): later proposals fail with `Closed`.
    pub tx: RwLock<Option<Sender<Msg<O>>>>,
    pub stats: StatsCell,
}

#[derive(Default)]
pub(crate) struct StatsCell {
    applied_index: AtomicU64,
    last_index: AtomicU64,
    snapshot_index: AtomicU64,
    fsyncs: AtomicU64,
    proposals: AtomicU64,
    wal_bytes: AtomicU64,
    mem_entries: AtomicU64,
}

impl StatsCell {
    pub fn load(&self) -> Stats {
        Stats {
            applied_index: self.applied_index.load(Relaxed),
            last_index: self.last_index.load(Relaxed),
            snapshot_index: self.snapshot_index.load(Relaxed),
            fsyncs: self.fsyncs.load(Relaxed),
            proposals: self.proposals.load(Relaxed),
            wal_bytes: self.wal_bytes.load(Relaxed),
            mem_entries: self.mem_entries.load(Relaxed),
        }
    }
}

/// The files of a durable node. Dropping it releases the directory lock.
struct Disk {
    wal: Wal,
    snap_dir: PathBuf,
    _lock: DirLock,
}

pub(crate) struct Node<S: StateMachine> {
    raw: RawNode<LogStore>,
    sm: S,
    disk: Option<Disk>,
    cfg: Config,
    pending: Pending<S::Output>,
    shared: Arc<Shared<S::Output>>,
    applied: u64,
    last_snap: u64,
    proposals: u64,
    closing: bool,
    /// Entries proposed in the current iteration (sent to raft-rs as one `MsgPropose`).
    batch: Vec<Entry>,
}

impl<S: StateMachine> Node<S> {
    /// Recovers the state (snapshot + WAL), becomes leader of a single-voter group and applies
    /// every entry in the log before returning.
    pub fn open(cfg: Config, mut sm: S, shared: Arc<Shared<S::Output>>) -> Result<Self> {
        let (store, disk) = match &cfg.dir {
            None => (LogStore::new(Default::default(), voters(cfg.node_id), 0, 0, vec![]), None),
            Some(dir) => {
                let (store, disk) = recover(dir, &cfg, &mut sm)?;
                (store, Some(disk))
            }
        };
        let snap_index = store.snap_index();
        let target = store.last_index();
        let raft_cfg = raft::Config {
            id: cfg.node_id,
            election_tick: 10,
            heartbeat_tick: 3,
            applied: snap_index,
            max_size_per_msg: 1 << 20,
            max_inflight_msgs: 256,
            ..Default::default()
        };
        raft_cfg.validate()?;
        let logger = slog::Logger::root(slog::Discard, slog::o!());
        let single = store.conf_state().voters == [cfg.node_id] && store.conf_state().learners.is_empty();
        let mut raw = RawNode::new(&raft_cfg, store, &logger)?;
        if single {
            raw.campaign()?;
        }
        let mut node = Node {
            raw,
            sm,
            disk,
            cfg,
            pending: Pending::new(id_base()),
            shared,
            applied: snap_index,
            last_snap: snap_index,
            proposals: 0,
            closing: false,
            batch: Vec::with_capacity(1024),
        };
        node.process_ready()?;
        if single && node.applied < target {
            return Err(RaftError::Raft(format!(
                "recovery applied up to {} but the log ends at {target}",
                node.applied
            )));
        }
        node.publish_stats();
        Ok(node)
    }

    /// Runs the loop until `Close` (or a fatal error), then fails whatever is left.
    pub fn run(mut self, rx: Receiver<Msg<S::Output>>) -> Result<()> {
        let res = self.run_loop(&rx);
        let res = res.and_then(|()| self.finish());
        // Stop new proposals, then fail everything still queued or pending.
        self.shared.tx.write().unwrap_or_else(|p| p.into_inner()).take();
        let fail = |res: &Result<()>| match res {
            Ok(()) => RaftError::Closed,
            Err(e) => e.duplicate(),
        };
        for msg in rx.iter() {
            match msg {
                Msg::Propose(_, done) => done(Err(fail(&res))),
                Msg::Batch(items) => items.into_iter().for_each(|(_, done)| done(Err(fail(&res)))),
                Msg::Close => {}
            }
        }
        self.pending.fail_all(|| fail(&res));
        res
    }

    fn run_loop(&mut self, rx: &Receiver<Msg<S::Output>>) -> Result<()> {
        let mut next_tick = Instant::now() + self.cfg.tick_interval;
        let mut spin = Spin::default();
        while !self.closing {
            // Step 0: collect.
            let began = Instant::now();
            match spin_recv(rx, spin.budget()) {
                Some(msg) => {
                    spin.caught();
                    self.accept(msg)
                }
                None => {
                    let wait = next_tick.saturating_duration_since(Instant::now());
                    match rx.recv_timeout(wait) {
                        Ok(msg) => {
                            spin.slept(began.elapsed());
                            self.accept(msg)
                        }
                        Err(RecvTimeoutError::Timeout) => spin.missed(),
                        Err(RecvTimeoutError::Disconnected) => self.closing = true,
                    }
                }
            }
            while let Ok(msg) = rx.try_recv() {
                self.accept(msg);
            }
            if Instant::now() >= next_tick {
                next_tick = Instant::now() + self.cfg.tick_interval;
                self.tick()?;
            }
            self.propose_batch();
            // Step 1: ready.
            self.process_ready()?;
            self.publish_stats();
        }
        Ok(())
    }

    /// Completes what is in flight and makes every staged record durable.
    fn finish(&mut self) -> Result<()> {
        self.propose_batch();
        self.process_ready()?;
        if let Some(d) = &mut self.disk {
            d.wal.flush()?;
        }
        self.publish_stats();
        Ok(())
    }

    fn accept(&mut self, msg: Msg<S::Output>) {
        match msg {
            Msg::Propose(data, done) => self.stage(data, Some(done)),
            Msg::Batch(items) => {
                for (data, done) in items {
                    self.stage(data, Some(done));
                }
            }
            Msg::Close => self.closing = true,
        }
    }

    /// Adds one proposal to this iteration's batch; its id goes in the entry context.
    fn stage(&mut self, data: Vec<u8>, done: Option<Completion<S::Output>>) {
        let mut e = Entry::default();
        if let Some(done) = done {
            e.context = self.pending.insert(done).to_le_bytes().to_vec().into();
        }
        e.data = data.into();
        self.batch.push(e);
    }

    /// Proposes the whole batch to raft-rs as one message; a refusal fails every proposal in it.
    fn propose_batch(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let n = self.batch.len() as u64;
        let mut m = Message::default();
        m.set_msg_type(MessageType::MsgPropose);
        m.from = self.cfg.node_id;
        m.set_entries(std::mem::take(&mut self.batch).into());
        // raft-rs may hand back the entries only inside its error; keep ids to fail them.
        let ids: Vec<u64> = m.entries.iter().filter_map(|e| context_id(&e.context)).collect();
        if let Err(e) = self.raw.step(m) {
            for id in ids {
                if let Some(done) = self.pending.take(id) {
                    done(Err(RaftError::Raft(format!("proposal dropped: {e}"))));
                }
            }
        }
        self.proposals += n;
    }

    fn tick(&mut self) -> Result<()> {
        self.raw.tick();
        for cmd in self.sm.on_tick() {
            if !cmd.is_empty() {
                self.stage(cmd, None);
            }
        }
        // An idle node still makes its staged commit index durable, once per tick.
        if let Some(d) = &mut self.disk {
            if d.wal.has_pending() && self.batch.is_empty() {
                d.wal.flush()?;
            }
        }
        Ok(())
    }

    /// Step 1 of the loop: handles every pending `Ready` in the documented order.
    fn process_ready(&mut self) -> Result<()> {
        while self.raw.has_ready() {
            let mut rd = self.raw.ready();
            // 1.1 snapshot from a leader.
            if !rd.snapshot().is_empty() {
                return Err(RaftError::Raft("installing a snapshot from a leader is not supported".into()));
            }
            // 1.2 persist, 1.3 sync.
            self.persist(&mut rd)?;
            // 1.4 send.
            self.send(rd.take_messages());
            self.send(rd.take_persisted_messages());
            // 1.5 advance.
            let committed = rd.take_committed_entries();
            let mut light = self.raw.advance_append(rd);
            if let Some(commit) = light.commit_index() {
                self.raw.mut_store().set_commit(commit);
                if let Some(d) = &mut self.disk {
                    d.wal.append_hard_state(self.raw.store().hard_state());
                }
            }
            self.send(light.take_messages());
            // 1.6 apply, 1.7 advance apply.
            self.apply(committed)?;
            self.apply(light.take_committed_entries())?;
            self.raw.advance_apply_to(self.applied);
            // 1.8 snapshot / compact.
            self.maybe_snapshot()?;
        }
        Ok(())
    }

    fn persist(&mut self, rd: &mut Ready) -> Result<()> {
        let entries = rd.take_entries();
        let hs = rd.hs().cloned();
        if entries.is_empty() && hs.is_none() {
            return Ok(());
        }
        if let Some(d) = &mut self.disk {
            if let Some(hs) = &hs {
                d.wal.append_hard_state(hs);
            }
            for e in &entries {
                d.wal.append_entry(e);
            }
            d.wal.flush()?;
        }
        let store = self.raw.mut_store();
        if let Some(hs) = hs {
            store.set_hard_state(hs);
        }
        store.append(entries);
        Ok(())
    }

    /// No transport yet: a single-voter group never produces messages for peers.
    fn send(&mut self, msgs: Vec<Message>) {
        debug_assert!(msgs.iter().all(|m| m.to == self.cfg.node_id), "no transport for peers");
    }

    /// Applies committed entries: runs of normal entries in one `StateMachine::apply` call each.
    fn apply(&mut self, entries: Vec<Entry>) -> Result<()> {
        let Some(last) = entries.last().map(|e| e.index) else { return Ok(()) };
        let mut start = 0;
        for (i, e) in entries.iter().enumerate() {
            if e.get_entry_type() != EntryType::EntryNormal {
                self.apply_normal(&entries[start..i])?;
                self.apply_conf_change(e)?;
                start = i + 1;
            }
        }
        self.apply_normal(&entries[start..])?;
        self.applied = last;
        Ok(())
    }

    fn apply_normal(&mut self, entries: &[Entry]) -> Result<()> {
        let batch: Vec<(u64, &[u8])> =
            entries.iter().filter(|e| !e.data.is_empty()).map(|e| (e.index, &e.data[..])).collect();
        if batch.is_empty() {
            return Ok(());
        }
        let outputs = self.sm.apply(&batch);
        if outputs.len() != batch.len() {
            return Err(RaftError::Raft(format!(
                "state machine returned {} outputs for {} entries",
                outputs.len(),
                batch.len()
            )));
        }
        // Counters first, so a completion observes stats that include its own entry.
        self.publish_stats_at(entries.last().map_or(self.applied, |e| e.index));
        let with_data = entries.iter().filter(|e| !e.data.is_empty());
        for (e, out) in with_data.zip(outputs) {
            if let Some(done) = context_id(&e.context).and_then(|id| self.pending.take(id)) {
                done(Ok(out));
            }
        }
        Ok(())
    }

    fn apply_conf_change(&mut self, e: &Entry) -> Result<()> {
        if e.data.is_empty() {
            return Ok(());
        }
        let bad = |err: protobuf::ProtobufError| RaftError::Raft(format!("bad conf change at {}: {err}", e.index));
        let cs = if e.get_entry_type() == EntryType::EntryConfChange {
            self.raw.apply_conf_change(&ConfChange::parse_from_bytes(&e.data).map_err(bad)?)?
        } else {
            self.raw.apply_conf_change(&ConfChangeV2::parse_from_bytes(&e.data).map_err(bad)?)?
        };
        if let Some(d) = &mut self.disk {
            d.wal.append_conf_state(&cs);
        }
        self.raw.mut_store().set_conf_state(cs);
        Ok(())
    }

    /// Step 1.8: snapshot + compaction when due (memory mode: compact after every apply).
    fn maybe_snapshot(&mut self) -> Result<()> {
        let applied = self.applied;
        let Some(d) = &mut self.disk else {
            self.raw.mut_store().compact_to(applied);
            self.last_snap = self.raw.store().snap_index();
            return Ok(());
        };
        let window = self.cfg.mem_log_entries;
        if applied > self.raw.store().snap_index() + 2 * window {
            self.raw.mut_store().compact_to(applied - window);
        }
        if applied < self.last_snap + self.cfg.snapshot_every.max(1) {
            return Ok(());
        }
        let store = self.raw.store();
        let meta = SnapMeta {
            index: applied,
            term: store.term_of(applied).unwrap_or(0),
            conf_state: store.conf_state().clone(),
        };
        let sm = &mut self.sm;
        snapshot::write(&d.snap_dir, &meta, |w| sm.snapshot(w))?;
        snapshot::retain_newest(&d.snap_dir, 2)?;
        self.raw.mut_store().compact_to(applied);
        d.wal.purge(applied)?;
        self.last_snap = applied;
        Ok(())
    }

    fn publish_stats(&self) {
        self.publish_stats_at(self.applied);
    }

    fn publish_stats_at(&self, applied: u64) {
        let s = &self.shared.stats;
        s.applied_index.store(applied, Relaxed);
        s.last_index.store(self.raw.store().last_index(), Relaxed);
        s.snapshot_index.store(self.last_snap, Relaxed);
        s.proposals.store(self.proposals, Relaxed);
        let store = self.raw.store();
        s.mem_entries.store(store.last_index() - store.snap_index(), Relaxed);
        if let Some(d) = &self.disk {
            s.fsyncs.store(d.wal.fsyncs, Relaxed);
            s.wal_bytes.store(d.wal.bytes_written, Relaxed);
        }
    }
}

/// Locks `dir`, restores the newest snapshot into `sm` and replays the WAL.
fn recover<S: StateMachine>(dir: &std::path::Path, cfg: &Config, sm: &mut S) -> Result<(LogStore, Disk)> {
    ensure_dir(dir)?;
    let lock = DirLock::acquire(dir)?;
    let snap_dir = dir.join("snap");
    ensure_dir(&snap_dir)?;
    let meta = snapshot::load_newest(&snap_dir, |r| sm.restore(r))?.unwrap_or_default();
    let (mut wal, rep) = Wal::open(&dir.join("wal"), meta.index, cfg.segment_bytes, cfg.fsync)?;
    let fresh = rep.empty && meta.index == 0;
    let conf_state = match (rep.conf_state, fresh) {
        (Some(cs), _) => cs,
        (None, true) => {
            let cs = voters(cfg.node_id);
            wal.append_conf_state(&cs);
            cs
        }
        (None, false) => meta.conf_state.clone(),
    };
    let hs = rep.hard_state.unwrap_or_default();
    let store = LogStore::new(hs, conf_state, meta.index, meta.term, rep.entries);
    Ok((store, Disk { wal, snap_dir, _lock: lock }))
}

fn voters(id: u64) -> ConfState {
    ConfState::from((vec![id], vec![]))
}

/// How long the loop polls for the next proposal before it sleeps. A caller that writes in a
/// loop sends its next proposal right after its completion; catching it without a sleep/wake-up
/// pair (tens of microseconds on a VM) is most of the cost of a write that does not fsync.
const SPIN: std::time::Duration = std::time::Duration::from_micros(50);

/// Whether to poll before sleeping, learnt from the gaps between proposals: polling pays only
/// when the next proposal usually comes within `SPIN` of the last batch (a caller writing in a
/// loop: it saves a sleep/wake-up pair per write). A loaded server's event loop flushes its
/// writes once per iteration, mostly more than `SPIN` apart; polling for them would burn time a
/// core's other threads need. So the loop keeps a moving share of proposals that came within
/// `SPIN` (spun for or slept for) and polls while that share is at least about half.
struct Spin {
    /// Share of recent proposals that came within `SPIN`, in 1/256ths (a moving average over ~8).
    share: u32,
}

impl Default for Spin {
    fn default() -> Self {
        Self { share: 256 }
    }
}

impl Spin {
    /// A proposal came while polling.
    fn caught(&mut self) {
        self.record(true);
    }

    /// A proposal came after a sleep, `gap` after the loop started waiting for it.
    fn slept(&mut self, gap: std::time::Duration) {
        self.record(gap < SPIN);
    }

    /// The wait ended with no proposal.
    fn missed(&mut self) {
        self.record(false);
    }

    fn record(&mut self, soon: bool) {
        self.share = self.share - self.share / 8 + if soon { 32 } else { 0 };
    }

    /// How long to poll now: all of `SPIN` while at least about half the proposals came that soon.
    fn budget(&self) -> std::time::Duration {
        if self.share >= 128 {
            SPIN
        } else {
            std::time::Duration::ZERO
        }
    }
}

fn spin_recv<T>(rx: &Receiver<T>, spin: std::time::Duration) -> Option<T> {
    if spin.is_zero() {
        return rx.try_recv().ok();
    }
    let until = Instant::now() + spin;
    loop {
        if let Ok(msg) = rx.try_recv() {
            return Some(msg);
        }
        if Instant::now() >= until {
            return None;
        }
        std::hint::spin_loop();
    }
}

/// The proposal id stored in an entry context (8 bytes LE), if it is one.
fn context_id(ctx: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(ctx.try_into().ok()?))
}

/// First proposal id of this incarnation: wall-clock nanoseconds, so ids left in the log by an
/// earlier run are (practically) never mistaken for this run's.
fn id_base() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64) | 1
}

#[cfg(test)]
mod spin_tests {
    use super::{Spin, SPIN};
    use std::time::Duration;

    #[test]
    fn polling_follows_the_gaps_between_proposals() {
        let mut spin = Spin::default();
        assert_eq!(spin.budget(), SPIN, "a fresh node polls (a writer in a loop is the common embedded case)");
        spin.slept(Duration::from_micros(400));
        assert_eq!(spin.budget(), SPIN, "one late proposal changes nothing");
        for _ in 0..8 {
            spin.slept(Duration::from_micros(400)); // a loaded event loop: proposals far apart
        }
        assert_eq!(spin.budget(), Duration::ZERO, "no polling when it does not pay");
        spin.slept(Duration::from_micros(20));
        assert_eq!(spin.budget(), Duration::ZERO, "one early proposal is not a trend");
        for _ in 0..8 {
            spin.slept(Duration::from_micros(20)); // a writer in a loop again
        }
        assert_eq!(spin.budget(), SPIN);
        for i in 0..64 {
            // three proposals in four come soon: keep polling
            if i % 4 != 3 {
                spin.caught()
            } else {
                spin.missed()
            }
        }
        assert_eq!(spin.budget(), SPIN);
    }
}
