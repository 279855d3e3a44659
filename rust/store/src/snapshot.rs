//! The MVCC state as a byte stream, for Raft snapshots. Little-endian throughout:
//!
//! ```text
//! "KCMVCC01"  rev:i64  compact_rev:i64  last_lease_id:i64
//! keys:u64   { key_len:u32 key  versions:u32 { mod:i64 create:i64 version:i64 lease:i64 value_len:i32 (-1 = tombstone) value } }
//! log:u64    { rev:i64  key_ordinal:u32 }          (ordinal = position of the key in the list above)
//! leases:u64 { id:i64  ttl:i64  keys:u32 { key_ordinal:u32 } }
//! ```
//! The Raft layer adds the file header, the checksum and atomic replacement.

use std::collections::{BTreeMap, VecDeque};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::time::Instant;

use crate::key_index::{KeyHistory, Version};
use crate::kv::Bytes;
use crate::mvcc::Mvcc;

const MAGIC: &[u8; 8] = b"KCMVCC01";

pub fn write(m: &Mvcc, w: &mut dyn Write) -> io::Result<()> {
    let mut w = BufWriter::with_capacity(1 << 20, w);
    w.write_all(MAGIC)?;
    for n in [m.rev, m.compact_rev, m.leases.last_id()] {
        w.write_all(&n.to_le_bytes())?;
    }
    let keys: Vec<&Bytes> = m.index.keys().collect();
    w.write_all(&(keys.len() as u64).to_le_bytes())?;
    for (key, history) in &m.index {
        write_bytes(&mut w, key)?;
        w.write_all(&(history.versions().len() as u32).to_le_bytes())?;
        for v in history.versions() {
            for n in [v.mod_rev, v.create_rev, v.version, v.lease] {
                w.write_all(&n.to_le_bytes())?;
            }
            match &v.value {
                Some(value) => write_bytes(&mut w, value)?,
                None => w.write_all(&(-1i32).to_le_bytes())?,
            }
        }
    }
    let ordinal = |k: &Bytes| -> io::Result<u32> {
        keys.binary_search(&k).map(|i| i as u32).map_err(|_| {
            io::Error::new(io::ErrorKind::InvalidData, "a revision log key is missing from the index")
        })
    };
    w.write_all(&(m.log.len() as u64).to_le_bytes())?;
    for (rev, key) in &m.log {
        w.write_all(&rev.to_le_bytes())?;
        w.write_all(&ordinal(key)?.to_le_bytes())?;
    }
    w.write_all(&(m.leases.len() as u64).to_le_bytes())?;
    let mut leases: Vec<_> = m.leases.iter().collect();
    leases.sort_by_key(|(id, _)| **id);
    for (id, lease) in leases {
        w.write_all(&id.to_le_bytes())?;
        w.write_all(&lease.ttl.to_le_bytes())?;
        w.write_all(&(lease.keys.len() as u32).to_le_bytes())?;
        let mut ords = lease.keys.iter().map(ordinal).collect::<io::Result<Vec<u32>>>()?;
        ords.sort_unstable();
        for o in ords {
            w.write_all(&o.to_le_bytes())?;
        }
    }
    w.flush()
}

pub fn read(r: &mut dyn Read) -> io::Result<Mvcc> {
    let mut r = BufReader::with_capacity(1 << 20, r);
    let mut magic = [0u8; 8];
    r.read_exact(&mut magic)?;
    if &magic != MAGIC {
        return Err(invalid("not a kubecore MVCC snapshot"));
    }
    let mut m = Mvcc::new();
    m.rev = read_i64(&mut r)?;
    m.compact_rev = read_i64(&mut r)?;
    m.leases.set_last_id(read_i64(&mut r)?);
    let n_keys = read_u64(&mut r)? as usize;
    let mut keys: Vec<Bytes> = Vec::with_capacity(n_keys.min(1 << 24));
    let mut entries = Vec::with_capacity(n_keys.min(1 << 24));
    for _ in 0..n_keys {
        let key = read_bytes(&mut r)?.ok_or_else(|| invalid("a key cannot be a tombstone"))?;
        let n = read_u32(&mut r)? as usize;
        let mut versions = Vec::with_capacity(n.min(1 << 16));
        for _ in 0..n {
            let (mod_rev, create_rev, version, lease) =
                (read_i64(&mut r)?, read_i64(&mut r)?, read_i64(&mut r)?, read_i64(&mut r)?);
            versions.push(Version { value: read_bytes(&mut r)?, mod_rev, create_rev, version, lease });
        }
        let history = KeyHistory::from_versions(versions).ok_or_else(|| invalid("a key without versions"))?;
        if history.live().is_some() {
            m.live += 1;
        }
        m.versions += history.versions().len();
        if keys.last().is_some_and(|prev| prev >= &key) {
            return Err(invalid("snapshot keys are not in order"));
        }
        keys.push(key.clone());
        entries.push((key, history));
    }
    m.index = BTreeMap::from_iter(entries);
    let key_at = |o: u32| keys.get(o as usize).cloned().ok_or_else(|| invalid("key ordinal out of range"));
    let n_log = read_u64(&mut r)? as usize;
    let mut log = VecDeque::with_capacity(n_log.min(1 << 24));
    for _ in 0..n_log {
        let rev = read_i64(&mut r)?;
        log.push_back((rev, key_at(read_u32(&mut r)?)?));
    }
    m.log = log;
    let now = Instant::now();
    for _ in 0..read_u64(&mut r)? {
        let (id, ttl) = (read_i64(&mut r)?, read_i64(&mut r)?);
        m.leases.grant(id, ttl, now).map_err(|e| invalid(&e.to_string()))?;
        for _ in 0..read_u32(&mut r)? {
            let key = key_at(read_u32(&mut r)?)?;
            m.leases.attach(id, &key);
        }
    }
    Ok(m)
}

fn invalid(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("MVCC snapshot: {msg}"))
}

fn write_bytes(w: &mut impl Write, b: &[u8]) -> io::Result<()> {
    w.write_all(&(b.len() as i32).to_le_bytes())?;
    w.write_all(b)
}

fn read_bytes(r: &mut impl Read) -> io::Result<Option<Bytes>> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let len = i32::from_le_bytes(len);
    if len < 0 {
        return Ok(None);
    }
    let mut buf = vec![0u8; len as usize];
    r.read_exact(&mut buf)?;
    Ok(Some(Bytes::from(buf)))
}

fn read_i64(r: &mut impl Read) -> io::Result<i64> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    Ok(i64::from_le_bytes(b))
}

fn read_u64(r: &mut impl Read) -> io::Result<u64> {
    read_i64(r).map(|n| n as u64)
}

fn read_u32(r: &mut impl Read) -> io::Result<u32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)?;
    Ok(u32::from_le_bytes(b))
}
