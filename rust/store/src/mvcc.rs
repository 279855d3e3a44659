//! The MVCC state machine: a key index holding every key's retained versions, and a revision
//! log that orders every change for watch replay.
//!
//! * The store-wide revision starts at 1 (as etcd's) and increases by exactly one per write
//!   transaction that changes at least one key; every change of that transaction carries it.
//! * A key changes at most once per revision (a transaction that names a key twice is refused),
//!   so `(mod_revision, key)` identifies a change and the revision log lists changes in the order
//!   they were made.
//! * `compact(c)` keeps every version a read at revision `>= c` can see; reads below `c` fail.
//! * Applying a command is all-or-nothing: every check runs before the first mutation.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::time::Instant;

use crate::error::{Result, StoreError};
use crate::key_index::{empty_bytes, KeyHistory, Version};
use crate::kv::{Bytes, Event, EventType, KeyRange, KeyValue, OpResult, RangeResult, TxnResult};
use crate::lease::LeaseTable;
use crate::request::{Command, Compare, CompareTarget, DeleteRequest, PutRequest, RangeRequest, RequestOp, TxnRequest};

/// What applying one command produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    Txn(TxnResult),
    Compacted { revision: i64 },
    LeaseGranted { id: i64, ttl: i64 },
    LeaseRevoked { revision: i64 },
}

#[derive(Debug, Clone)]
pub struct Mvcc {
    pub(crate) index: BTreeMap<Bytes, KeyHistory>,
    /// `(revision, key)` of every retained change, in the order the changes were made.
    pub(crate) log: VecDeque<(i64, Bytes)>,
    pub(crate) rev: i64,
    pub(crate) compact_rev: i64,
    /// Keys whose newest version is not a tombstone.
    pub(crate) live: usize,
    /// Versions retained across all keys (live, older and tombstones).
    pub(crate) versions: usize,
    pub leases: LeaseTable,
}

impl Default for Mvcc {
    fn default() -> Self {
        Self::new()
    }
}

impl Mvcc {
    pub fn new() -> Self {
        Self {
            index: BTreeMap::new(),
            log: VecDeque::new(),
            rev: 1,
            compact_rev: 0,
            live: 0,
            versions: 0,
            leases: LeaseTable::default(),
        }
    }

    pub fn revision(&self) -> i64 {
        self.rev
    }

    pub fn compact_revision(&self) -> i64 {
        self.compact_rev
    }

    /// Number of keys that currently exist.
    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Retained versions across all keys (live, older and tombstones).
    pub fn version_count(&self) -> usize {
        self.versions
    }

    // ---- reads -------------------------------------------------------------------------------

    /// Resolves a requested read revision (0 = current) and checks it is readable.
    pub fn read_revision(&self, rev: i64) -> Result<i64> {
        if rev <= 0 {
            return Ok(self.rev);
        }
        if rev > self.rev {
            return Err(StoreError::FutureRevision { current_revision: self.rev });
        }
        if rev < self.compact_rev {
            return Err(StoreError::Compacted { compact_revision: self.compact_rev });
        }
        Ok(rev)
    }

    pub fn range(&self, req: &RangeRequest) -> Result<RangeResult> {
        let at = self.read_revision(req.revision)?;
        let mut res = self.collect_range(req, at);
        res.revision = self.rev;
        Ok(res)
    }

    pub fn get(&self, key: &[u8], rev: i64) -> Result<Option<KeyValue>> {
        let at = self.read_revision(rev)?;
        Ok(self.index.get_key_value(key).and_then(|(k, h)| h.at(at).map(|v| v.to_kv(k))))
    }

    /// The current `mod_revision` of `key`, None when it does not exist: a key-only read.
    pub fn mod_revision(&self, key: &[u8]) -> Option<i64> {
        self.index.get(key).and_then(|h| h.at(self.rev)).map(|v| v.mod_rev)
    }

    /// `(count, highest mod_revision)` of the live keys in `range`, read from the index alone.
    /// Two equal signatures of one range mean the same keys at the same versions: a write that
    /// keeps the count creates or puts a key, which raises the highest revision; a delete lowers
    /// the count.
    pub fn signature(&self, range: &KeyRange) -> (i64, i64) {
        let (mut count, mut top) = (0, 0);
        for (_, history) in self.scan(range) {
            if let Some(v) = history.at(self.rev) {
                count += 1;
                top = top.max(v.mod_rev);
            }
        }
        (count, top)
    }

    /// A transaction without writes, evaluated against the current state.
    pub fn read_txn(&self, t: &TxnRequest) -> Result<TxnResult> {
        let succeeded = t.compare.iter().all(|c| self.compare(c));
        let ops = if succeeded { &t.success } else { &t.failure };
        let mut responses = Vec::with_capacity(ops.len());
        for op in ops {
            let RequestOp::Range(r) = op else {
                return Err(StoreError::InvalidArgument("read_txn given a write".into()));
            };
            responses.push(OpResult::Range(self.range(r)?));
        }
        Ok(TxnResult { succeeded, revision: self.rev, responses })
    }

    fn collect_range(&self, req: &RangeRequest, at: i64) -> RangeResult {
        let range = req.key_range();
        let limit = if req.limit > 0 { req.limit as usize } else { usize::MAX };
        let mut kvs = Vec::new();
        let mut count: i64 = 0;
        for (key, history) in self.scan(&range) {
            let Some(v) = history.at(at) else { continue };
            count += 1;
            if !req.count_only && kvs.len() < limit {
                let mut kv = v.to_kv(key);
                if req.keys_only {
                    kv.value = empty_bytes();
                }
                kvs.push(kv);
            }
        }
        let more = !req.count_only && req.limit > 0 && count > req.limit;
        RangeResult { kvs, more, count, revision: self.rev }
    }

    /// Index entries whose key lies in `range`, in key order.
    pub(crate) fn scan<'a>(&'a self, range: &KeyRange) -> Box<dyn Iterator<Item = (&'a Bytes, &'a KeyHistory)> + 'a> {
        if let KeyRange::Single(k) = range {
            return Box::new(self.index.get_key_value(k.as_slice()).into_iter());
        }
        let start = range.start();
        match range.end() {
            Some(end) if end <= start => Box::new(std::iter::empty()),
            Some(end) => Box::new(
                self.index.range::<[u8], _>((Bound::Included(start), Bound::Excluded(end))),
            ),
            None => Box::new(self.index.range::<[u8], _>((Bound::Included(start), Bound::Unbounded))),
        }
    }

    /// The change made to `key` at `rev` as a watch event (prev_kv always filled when known).
    pub fn event_at(&self, key: &Bytes, rev: i64) -> Option<Event> {
        let (k, history) = self.index.get_key_value(&key[..])?;
        let (v, prev) = history.change_at(rev)?;
        Some(Event {
            kind: if v.is_tombstone() { EventType::Delete } else { EventType::Put },
            kv: v.to_kv(k),
            prev_kv: prev.map(|p| p.to_kv(k)),
        })
    }

    /// Appends to `out` the events in `range` from revision `from` on, stopping at a revision
    /// boundary once `out` holds `max` events. Returns the first revision not yet delivered.
    pub fn events_from(&self, from: i64, range: &KeyRange, max: usize, out: &mut Vec<Event>) -> Result<i64> {
        if from < self.compact_rev {
            return Err(StoreError::Compacted { compact_revision: self.compact_rev });
        }
        let mut i = self.log.partition_point(|(r, _)| *r < from);
        while let Some((rev, key)) = self.log.get(i) {
            if out.len() >= max && self.log.get(i.wrapping_sub(1)).is_none_or(|(p, _)| p != rev) {
                return Ok(*rev);
            }
            if range.contains(key) {
                out.extend(self.event_at(key, *rev));
            }
            i += 1;
        }
        Ok(self.rev + 1)
    }

    // ---- writes ------------------------------------------------------------------------------

    /// Applies one command. `events`, when given, receives every change in order.
    pub fn apply(&mut self, cmd: &Command, now: Instant, events: Option<&mut Vec<Event>>) -> Result<Applied> {
        let mut sink = Sink(events);
        match cmd {
            Command::Txn(t) => self.txn(t, &mut sink).map(Applied::Txn),
            Command::Compact(rev) => self.compact(*rev).map(|()| Applied::Compacted { revision: self.rev }),
            Command::LeaseGrant { id, ttl } => {
                let id = self.leases.grant(*id, *ttl, now)?;
                Ok(Applied::LeaseGranted { id, ttl: self.leases.get(id)?.ttl })
            }
            Command::LeaseRevoke(id) => self.revoke(*id, &mut sink).map(|revision| Applied::LeaseRevoked { revision }),
        }
    }

    fn txn(&mut self, t: &TxnRequest, sink: &mut Sink) -> Result<TxnResult> {
        let succeeded = t.compare.iter().all(|c| self.compare(c));
        let ops = if succeeded { &t.success } else { &t.failure };
        self.check_ops(ops)?;
        let new_rev = self.rev + 1;
        let mut changed = false;
        let mut responses = Vec::with_capacity(ops.len());
        for op in ops {
            responses.push(match op {
                RequestOp::Put(p) => {
                    changed = true;
                    let prev = self.put(p, new_rev, sink);
                    OpResult::Put { revision: 0, prev_kv: prev.filter(|_| p.prev_kv) }
                }
                RequestOp::Range(r) => {
                    // Reads see the transaction's own earlier writes; the header revision is the
                    // store's revision as of this op (etcd: begin revision, +1 once it wrote).
                    let now = if changed { new_rev } else { self.rev };
                    let mut rr = self.collect_range(r, if r.revision > 0 { r.revision } else { now });
                    rr.revision = now;
                    OpResult::Range(rr)
                }
                RequestOp::Delete(d) => {
                    let prev_kvs = self.delete_range(d, new_rev, sink);
                    changed |= !prev_kvs.is_empty();
                    let deleted = prev_kvs.len() as i64;
                    OpResult::Delete { revision: 0, deleted, prev_kvs: if d.prev_kv { prev_kvs } else { Vec::new() } }
                }
            });
        }
        if changed {
            self.rev = new_rev;
        }
        for r in &mut responses {
            if let OpResult::Put { revision, .. } | OpResult::Delete { revision, .. } = r {
                *revision = self.rev;
            }
        }
        Ok(TxnResult { succeeded, revision: self.rev, responses })
    }

    fn compare(&self, c: &Compare) -> bool {
        let cur = self.index.get(c.key.as_slice()).and_then(KeyHistory::live);
        let num = |f: fn(&Version) -> i64| cur.map_or(0, f);
        match &c.target {
            CompareTarget::Value(t) => {
                cur.is_some_and(|v| c.op.holds(v.value.as_deref().unwrap_or_default(), t.as_slice()))
            }
            CompareTarget::Version(t) => c.op.holds(&num(|v| v.version), t),
            CompareTarget::CreateRevision(t) => c.op.holds(&num(|v| v.create_rev), t),
            CompareTarget::ModRevision(t) => c.op.holds(&num(|v| v.mod_rev), t),
            CompareTarget::Lease(t) => c.op.holds(&num(|v| v.lease), t),
        }
    }

    /// Every reason the branch could fail, checked before anything changes.
    fn check_ops(&self, ops: &[RequestOp]) -> Result<()> {
        let mut put_keys: Vec<&[u8]> = Vec::new();
        for op in ops {
            match op {
                RequestOp::Put(p) => {
                    if p.key.is_empty() {
                        return Err(StoreError::InvalidArgument("key is not provided".into()));
                    }
                    if p.lease != 0 && !self.leases.contains(p.lease) {
                        return Err(StoreError::LeaseNotFound(p.lease));
                    }
                    put_keys.push(&p.key);
                }
                RequestOp::Range(r) => {
                    self.read_revision(r.revision)?;
                }
                RequestOp::Delete(_) => {}
            }
        }
        put_keys.sort_unstable();
        if put_keys.windows(2).any(|w| w[0] == w[1]) {
            return Err(StoreError::InvalidArgument("duplicate key given in txn request".into()));
        }
        for op in ops {
            if let RequestOp::Delete(d) = op {
                let range = d.key_range();
                if put_keys.iter().any(|k| range.contains(k)) {
                    return Err(StoreError::InvalidArgument("duplicate key given in txn request".into()));
                }
            }
        }
        Ok(())
    }

    /// Writes a new version of `p.key` at `rev`; returns the previous live version.
    fn put(&mut self, p: &PutRequest, rev: i64, sink: &mut Sink) -> Option<KeyValue> {
        let value = Bytes::from(p.value.as_slice());
        let key = match self.index.get_key_value(p.key.as_slice()) {
            Some((k, _)) => k.clone(),
            None => Bytes::from(p.key.as_slice()),
        };
        let history = self.index.get_mut(&key[..]);
        let prev = history.as_ref().and_then(|h| h.live()).cloned();
        let new = Version {
            value: Some(value),
            mod_rev: rev,
            create_rev: prev.as_ref().map_or(rev, |v| v.create_rev),
            version: prev.as_ref().map_or(1, |v| v.version + 1),
            lease: p.lease,
        };
        match history {
            Some(h) => h.push(new.clone()),
            None => {
                self.index.insert(key.clone(), KeyHistory::new(new.clone()));
            }
        }
        if prev.is_none() {
            self.live += 1;
        }
        self.versions += 1;
        if let Some(old) = prev.as_ref().filter(|v| v.lease != 0 && v.lease != p.lease) {
            self.leases.detach(old.lease, &key);
        }
        if p.lease != 0 {
            self.leases.attach(p.lease, &key);
        }
        let prev_kv = prev.map(|v| v.to_kv(&key));
        sink.push(|| Event { kind: EventType::Put, kv: new.to_kv(&key), prev_kv: prev_kv.clone() });
        self.log.push_back((rev, key));
        prev_kv
    }

    /// Deletes every live key in the range at `rev`; returns their last values.
    fn delete_range(&mut self, d: &DeleteRequest, rev: i64, sink: &mut Sink) -> Vec<KeyValue> {
        let keys: Vec<Bytes> = self
            .scan(&d.key_range())
            .filter(|(_, h)| h.live().is_some())
            .map(|(k, _)| k.clone())
            .collect();
        keys.into_iter().filter_map(|k| self.delete_key(k, rev, sink)).collect()
    }

    fn delete_key(&mut self, key: Bytes, rev: i64, sink: &mut Sink) -> Option<KeyValue> {
        let history = self.index.get_mut(&key[..])?;
        let prev = history.live()?.clone();
        let tomb = Version::tombstone(rev);
        history.push(tomb.clone());
        self.live -= 1;
        self.versions += 1;
        if prev.lease != 0 {
            self.leases.detach(prev.lease, &key);
        }
        let prev_kv = prev.to_kv(&key);
        sink.push(|| Event { kind: EventType::Delete, kv: tomb.to_kv(&key), prev_kv: Some(prev_kv.clone()) });
        self.log.push_back((rev, key));
        Some(prev_kv)
    }

    /// Revokes a lease: every attached key is deleted, all in one revision.
    fn revoke(&mut self, id: i64, sink: &mut Sink) -> Result<i64> {
        let mut keys: Vec<Bytes> = self.leases.remove(id)?.into_iter().collect();
        keys.sort_unstable();
        let rev = self.rev + 1;
        let mut changed = false;
        for k in keys {
            changed |= self.delete_key(k, rev, sink).is_some();
        }
        if changed {
            self.rev = rev;
        }
        Ok(self.rev)
    }

    /// Forgets history below `at` (see key_index.rs for what each key keeps).
    pub fn compact(&mut self, at: i64) -> Result<()> {
        if at <= self.compact_rev {
            return Err(StoreError::Compacted { compact_revision: self.compact_rev });
        }
        if at > self.rev {
            return Err(StoreError::FutureRevision { current_revision: self.rev });
        }
        // Keys changed below `at` lose their older versions; so do keys changed exactly at `at`
        // (their version at `at` hides every older one). The log keeps the changes at `at`, which
        // a watch from `at` still replays.
        let n = self.log.partition_point(|(r, _)| *r < at);
        let mut keys: Vec<Bytes> = self.log.drain(..n).map(|(_, k)| k).collect();
        keys.extend(self.log.iter().take_while(|(r, _)| *r == at).map(|(_, k)| k.clone()));
        keys.sort_unstable();
        keys.dedup();
        for k in keys {
            if let Some(h) = self.index.get_mut(&k[..]) {
                let before = h.versions().len();
                let remains = h.compact(at);
                self.versions -= before - if remains { h.versions().len() } else { 0 };
                if !remains {
                    self.index.remove(&k[..]);
                }
            }
        }
        if self.log.capacity() > 1024 && self.log.capacity() > 4 * self.log.len() {
            self.log.shrink_to_fit();
        }
        self.compact_rev = at;
        Ok(())
    }
}

/// Where events go while a command is applied; building them is skipped when nobody listens.
struct Sink<'a>(Option<&'a mut Vec<Event>>);

impl Sink<'_> {
    fn push(&mut self, make: impl FnOnce() -> Event) {
        if let Some(out) = self.0.as_mut() {
            out.push(make());
        }
    }
}
