//! Snapshot files: `dir/snap/<index 016x>-<term 016x>.snap`.
//!
//! Layout: `b"KCSNAP01"`, index u64, term u64, conf state (as in the WAL's conf-state record),
//! the state machine's bytes, then a u32 crc32 of everything before it (all little-endian).
//! Written to `<name>.tmp`, fsynced, renamed into place, directory fsynced. On load the whole
//! file's checksum is verified *before* the state machine sees a byte.

use std::fs::{self, File};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use raft::eraftpb::ConfState;

use crate::error::{RaftError, Result};
use crate::fsutil::sync_dir;
use crate::wal::record::{get_conf_state, put_conf_state, Cursor};

const MAGIC: &[u8; 8] = b"KCSNAP01";

/// What a snapshot covers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SnapMeta {
    pub index: u64,
    pub term: u64,
    pub conf_state: ConfState,
}

fn file_name(index: u64, term: u64) -> String {
    format!("{index:016x}-{term:016x}.snap")
}

fn parse_name(name: &str) -> Option<(u64, u64)> {
    let (a, b) = name.strip_suffix(".snap")?.split_once('-')?;
    if a.len() != 16 || b.len() != 16 {
        return None;
    }
    Some((u64::from_str_radix(a, 16).ok()?, u64::from_str_radix(b, 16).ok()?))
}

/// Snapshot files in `dir` ordered oldest first; stale `.tmp` files are deleted.
pub fn list(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let ctx = || format!("listing {}", dir.display());
    let mut out = Vec::new();
    for ent in fs::read_dir(dir).map_err(|e| RaftError::io(ctx(), e))? {
        let ent = ent.map_err(|e| RaftError::io(ctx(), e))?;
        let name = ent.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.ends_with(".snap.tmp") {
            let _ = fs::remove_file(ent.path());
        } else if let Some((index, _)) = parse_name(name) {
            out.push((index, ent.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// A writer that checksums what passes through it.
struct CrcWriter<W: Write> {
    inner: W,
    crc: crc32fast::Hasher,
}

impl<W: Write> Write for CrcWriter<W> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(b)?;
        self.crc.update(&b[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Writes a snapshot whose body comes from `body`, durably; returns its path.
pub fn write(
    dir: &Path,
    meta: &SnapMeta,
    body: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<PathBuf> {
    let path = dir.join(file_name(meta.index, meta.term));
    let tmp = dir.join(format!("{}.tmp", file_name(meta.index, meta.term)));
    let ctx = || format!("writing snapshot {}", tmp.display());
    let file = File::create(&tmp).map_err(|e| RaftError::io(ctx(), e))?;
    let mut w = CrcWriter { inner: BufWriter::with_capacity(1 << 20, file), crc: crc32fast::Hasher::new() };
    let mut header = Vec::with_capacity(64);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&meta.index.to_le_bytes());
    header.extend_from_slice(&meta.term.to_le_bytes());
    put_conf_state(&mut header, &meta.conf_state);
    w.write_all(&header).map_err(|e| RaftError::io(ctx(), e))?;
    body(&mut w).map_err(|e| RaftError::io(ctx(), e))?;
    let crc = w.crc.clone().finalize();
    let mut inner = w.inner;
    inner.write_all(&crc.to_le_bytes()).map_err(|e| RaftError::io(ctx(), e))?;
    let file = inner.into_inner().map_err(|e| RaftError::io(ctx(), e.into_error()))?;
    file.sync_all().map_err(|e| RaftError::io(ctx(), e))?;
    drop(file);
    fs::rename(&tmp, &path).map_err(|e| RaftError::io(ctx(), e))?;
    sync_dir(dir)?;
    Ok(path)
}

/// Deletes all but the newest `keep` snapshots.
pub fn retain_newest(dir: &Path, keep: usize) -> Result<()> {
    let all = list(dir)?;
    let drop_n = all.len().saturating_sub(keep);
    for (_, p) in &all[..drop_n] {
        fs::remove_file(p).map_err(|e| RaftError::io(format!("deleting snapshot {}", p.display()), e))?;
    }
    Ok(())
}

/// Loads the newest snapshot into `restore`; `None` if there is none. A damaged newest snapshot
/// is [`RaftError::Corruption`] (older ones are not tried: the WAL was compacted against it).
pub fn load_newest(
    dir: &Path,
    restore: impl FnOnce(&mut dyn Read) -> io::Result<()>,
) -> Result<Option<SnapMeta>> {
    let Some((_, path)) = list(dir)?.pop() else { return Ok(None) };
    let ctx = || format!("reading snapshot {}", path.display());
    let len = fs::metadata(&path).map_err(|e| RaftError::io(ctx(), e))?.len();
    if len < (MAGIC.len() + 16 + 4) as u64 {
        return Err(RaftError::corruption(&path, 0, "snapshot file too short"));
    }
    verify_checksum(&path, len)?;
    let mut r = BufReader::with_capacity(1 << 20, File::open(&path).map_err(|e| RaftError::io(ctx(), e))?);
    // The header is small: read a bounded prefix and parse it with the cursor.
    let mut head = vec![0u8; (len - 4).min(1 << 16) as usize];
    r.read_exact(&mut head).map_err(|e| RaftError::io(ctx(), e))?;
    let bad = |d: &str| RaftError::corruption(&path, 0, format!("snapshot header: {d}"));
    if &head[..8] != MAGIC {
        return Err(bad("bad magic"));
    }
    let mut c = Cursor::new(&head[8..]);
    let (index, term) = (c.u64().ok_or_else(|| bad("truncated"))?, c.u64().ok_or_else(|| bad("truncated"))?);
    let conf_state = get_conf_state(&mut c).ok_or_else(|| bad("malformed conf state"))?;
    let name = path.file_name().and_then(|n| n.to_str()).and_then(parse_name);
    if name != Some((index, term)) {
        return Err(bad("index/term do not match the file name"));
    }
    let header_len = 8 + c.pos;
    let body_len = len - 4 - header_len as u64;
    let mut body = io::Cursor::new(&head[header_len..]).chain(r).take(body_len);
    restore(&mut body).map_err(|e| {
        RaftError::corruption(&path, header_len as u64, format!("state machine could not restore snapshot: {e}"))
    })?;
    Ok(Some(SnapMeta { index, term, conf_state }))
}

/// Checks the trailing crc32 over the whole file in one streaming pass.
fn verify_checksum(path: &Path, len: u64) -> Result<()> {
    let ctx = || format!("reading snapshot {}", path.display());
    let mut f = File::open(path).map_err(|e| RaftError::io(ctx(), e))?;
    let mut crc = crc32fast::Hasher::new();
    let mut left = len - 4;
    let mut buf = vec![0u8; 1 << 20];
    while left > 0 {
        let n = (left as usize).min(buf.len());
        f.read_exact(&mut buf[..n]).map_err(|e| RaftError::io(ctx(), e))?;
        crc.update(&buf[..n]);
        left -= n as u64;
    }
    let mut trailer = [0u8; 4];
    f.read_exact(&mut trailer).map_err(|e| RaftError::io(ctx(), e))?;
    if crc.finalize() != u32::from_le_bytes(trailer) {
        return Err(RaftError::corruption(path, len - 4, "snapshot checksum mismatch"));
    }
    Ok(())
}
