//! One WAL segment file: naming, creation with preallocation, and the recovery scan that tells
//! a torn tail (crash mid-write: truncate and carry on) from corruption (refuse to open).

use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::record::{decode, Decoded, Record, HEADER_LEN};
use crate::error::{RaftError, Result};

/// `<seq 016x>-<first index 016x>.wal`; `seq` orders segments, `first` is the index the segment
/// was opened to receive next (informational; replay trusts the records).
pub fn file_name(seq: u64, first_index: u64) -> String {
    format!("{seq:016x}-{first_index:016x}.wal")
}

fn parse_name(name: &str) -> Option<(u64, u64)> {
    let stem = name.strip_suffix(".wal")?;
    let (a, b) = stem.split_once('-')?;
    if a.len() != 16 || b.len() != 16 {
        return None;
    }
    Some((u64::from_str_radix(a, 16).ok()?, u64::from_str_radix(b, 16).ok()?))
}

/// Segment files in `dir`, ordered by sequence number.
pub fn list(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let rd = fs::read_dir(dir).map_err(|e| RaftError::io(format!("listing {}", dir.display()), e))?;
    let mut out = Vec::new();
    for ent in rd {
        let ent = ent.map_err(|e| RaftError::io(format!("listing {}", dir.display()), e))?;
        if let Some((seq, _)) = ent.file_name().to_str().and_then(parse_name) {
            out.push((seq, ent.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// Makes `file` at least `size` bytes with blocks allocated, so appends don't change the
/// file size and fdatasync only flushes data. Falls back to set_len where fallocate is absent.
pub fn preallocate(file: &File, size: u64) -> std::io::Result<()> {
    let cur = file.metadata()?.len();
    if cur >= size {
        return Ok(());
    }
    // SAFETY: plain syscall on a valid open fd.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, size as libc::off_t) };
    if rc == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => file.set_len(size),
        _ => Err(err),
    }
}

/// Creates a new, preallocated segment (fails if it exists).
pub fn create(path: &Path, size: u64) -> Result<File> {
    let ctx = || format!("creating WAL segment {}", path.display());
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| RaftError::io(ctx(), e))?;
    preallocate(&f, size).map_err(|e| RaftError::io(ctx(), e))?;
    Ok(f)
}

/// Builds a segment-to-be at `tmp`: allocated *and* zero-filled, then synced. Writing into
/// blocks that were already written needs no extent conversion on ext4/xfs, so the per-batch
/// fdatasync of a prepared segment flushes data only (fallocate alone leaves "unwritten"
/// extents whose conversion costs a journal commit per sync). Runs off the raft thread.
pub fn prepare(tmp: &Path, size: u64) -> std::io::Result<File> {
    let f = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(tmp)?;
    preallocate(&f, size)?;
    let zeros = vec![0u8; 1 << 20];
    let mut off = 0u64;
    while off < size {
        let n = (size - off).min(zeros.len() as u64) as usize;
        std::os::unix::fs::FileExt::write_all_at(&f, &zeros[..n], off)?;
        off += n as u64;
    }
    f.sync_all()?;
    Ok(f)
}

/// What [`scan`] found after the last valid record.
#[derive(Debug, PartialEq, Eq)]
pub struct ScanEnd {
    /// Offset just past the last valid record: where appends continue.
    pub valid_end: u64,
    /// A torn tail `[valid_end, garbage_end)` that must be zeroed before appending.
    pub garbage_end: Option<u64>,
}

/// Reads every record of the segment at `path`, in order, into `on_record(record, offset)`.
///
/// A bad record is a torn tail only if `is_last` and no valid record can be found anywhere
/// after it; otherwise it is [`RaftError::Corruption`] naming the file and offset.
pub fn scan(
    path: &Path,
    is_last: bool,
    mut on_record: impl FnMut(Record, u64) -> Result<()>,
) -> Result<ScanEnd> {
    let mut raw = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut raw))
        .map_err(|e| RaftError::io(format!("reading WAL segment {}", path.display()), e))?;
    let seg = Bytes::from(raw);
    let mut off = 0usize;
    loop {
        if off >= seg.len() {
            return Ok(ScanEnd { valid_end: off as u64, garbage_end: None });
        }
        match decode(&seg, off) {
            Decoded::Record(rec, n) => {
                on_record(rec, off as u64)?;
                off += n;
            }
            Decoded::End => return Ok(ScanEnd { valid_end: off as u64, garbage_end: None }),
            Decoded::Bad(why) => {
                if !is_last {
                    return Err(RaftError::corruption(
                        path,
                        off as u64,
                        format!("{why} in a non-final WAL segment"),
                    ));
                }
                if let Some(next) = find_valid_after(&seg, off) {
                    return Err(RaftError::corruption(
                        path,
                        off as u64,
                        format!("{why}, but a valid record follows at offset {next}"),
                    ));
                }
                let garbage_end = seg.iter().rposition(|&b| b != 0).map_or(off, |p| p + 1);
                return Ok(ScanEnd {
                    valid_end: off as u64,
                    garbage_end: Some(garbage_end.max(off) as u64),
                });
            }
        }
    }
}

/// The offset of any valid record starting after `bad`, skipping runs of zeros quickly
/// (a record header is never all-zero, so only offsets near non-zero bytes are candidates).
fn find_valid_after(seg: &Bytes, bad: usize) -> Option<usize> {
    let mut p = bad + 1;
    while p + HEADER_LEN <= seg.len() {
        if seg[p..p + HEADER_LEN].iter().all(|&b| b == 0) {
            let q = p + seg[p..].iter().position(|&b| b != 0)?;
            p = (p + 1).max(q.saturating_sub(HEADER_LEN - 1));
            continue;
        }
        if let Decoded::Record(..) = decode(seg, p) {
            return Some(p);
        }
        p += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let n = file_name(3, 0x1234);
        assert_eq!(n, "0000000000000003-0000000000001234.wal");
        assert_eq!(parse_name(&n), Some((3, 0x1234)));
        assert_eq!(parse_name("junk.wal"), None);
    }
}
