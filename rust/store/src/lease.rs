//! Leases: a TTL that keys can be attached to. Grant and revoke are log commands; keep-alive
//! and expiry deadlines are local to the leader (as in etcd's lessor), so after a restart every
//! lease gets its full TTL again.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use crate::error::{Result, StoreError};
use crate::kv::Bytes;

/// Shortest TTL granted, in seconds: etcd's minimum for its default election timeout (1 s):
/// 1.5 election timeouts, rounded up.
pub const MIN_TTL: i64 = 2;
/// Longest TTL granted, in seconds (etcd's MaxLeaseTTL).
pub const MAX_TTL: i64 = 9_000_000_000;

#[derive(Debug, Clone)]
pub struct Lease {
    pub ttl: i64,
    pub keys: HashSet<Bytes>,
    pub expiry: Instant,
    /// An expiry revoke has been proposed and not yet applied.
    pub revoking: bool,
}

#[derive(Debug, Default, Clone)]
pub struct LeaseTable {
    leases: HashMap<i64, Lease>,
    /// The highest id ever granted; `grant(0, ..)` uses the next one.
    last_id: i64,
}

impl LeaseTable {
    /// Grants lease `id` (0: the next free id). The TTL is raised to `MIN_TTL` and may not
    /// exceed `MAX_TTL`, as etcd's lessor does.
    pub fn grant(&mut self, id: i64, ttl: i64, now: Instant) -> Result<i64> {
        if ttl > MAX_TTL {
            return Err(StoreError::InvalidArgument(format!("too large lease TTL: {ttl} > {MAX_TTL} seconds")));
        }
        let id = if id == 0 { self.last_id + 1 } else { id };
        if self.leases.contains_key(&id) {
            return Err(StoreError::LeaseExists(id));
        }
        self.last_id = self.last_id.max(id);
        let ttl = ttl.max(MIN_TTL);
        self.leases.insert(
            id,
            Lease { ttl, keys: HashSet::new(), expiry: now + secs(ttl), revoking: false },
        );
        Ok(id)
    }

    /// Removes the lease and returns the keys attached to it.
    pub fn remove(&mut self, id: i64) -> Result<HashSet<Bytes>> {
        self.leases.remove(&id).map(|l| l.keys).ok_or(StoreError::LeaseNotFound(id))
    }

    pub fn contains(&self, id: i64) -> bool {
        self.leases.contains_key(&id)
    }

    pub fn get(&self, id: i64) -> Result<&Lease> {
        self.leases.get(&id).ok_or(StoreError::LeaseNotFound(id))
    }

    pub fn attach(&mut self, id: i64, key: &Bytes) {
        if let Some(l) = self.leases.get_mut(&id) {
            l.keys.insert(key.clone());
        }
    }

    pub fn detach(&mut self, id: i64, key: &[u8]) {
        if let Some(l) = self.leases.get_mut(&id) {
            l.keys.remove(key);
        }
    }

    pub fn keepalive(&mut self, id: i64, now: Instant) -> Result<i64> {
        let l = self.leases.get_mut(&id).ok_or(StoreError::LeaseNotFound(id))?;
        l.expiry = now + secs(l.ttl);
        Ok(l.ttl)
    }

    /// Leases past their deadline that are not already being revoked; marks them as revoking.
    pub fn take_expired(&mut self, now: Instant) -> Vec<i64> {
        let mut out = Vec::new();
        for (id, l) in self.leases.iter_mut() {
            if !l.revoking && l.expiry <= now {
                l.revoking = true;
                out.push(*id);
            }
        }
        out.sort_unstable();
        out
    }

    /// Gives every lease its full TTL from `now` (after a restart or leader change).
    pub fn refresh_all(&mut self, now: Instant) {
        for l in self.leases.values_mut() {
            l.expiry = now + secs(l.ttl);
            l.revoking = false;
        }
    }

    pub fn ids(&self) -> Vec<i64> {
        let mut ids: Vec<i64> = self.leases.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    pub fn last_id(&self) -> i64 {
        self.last_id
    }

    pub fn set_last_id(&mut self, id: i64) {
        self.last_id = id;
    }

    pub fn iter(&self) -> impl Iterator<Item = (&i64, &Lease)> {
        self.leases.iter()
    }

    pub fn len(&self) -> usize {
        self.leases.len()
    }

    pub fn is_empty(&self) -> bool {
        self.leases.is_empty()
    }
}

fn secs(ttl: i64) -> Duration {
    Duration::from_secs(ttl.max(0) as u64)
}

/// Seconds left before `expiry`, rounded down, never negative (etcd's TimeToLive).
pub fn remaining_secs(expiry: Instant, now: Instant) -> i64 {
    expiry.saturating_duration_since(now).as_secs() as i64
}
