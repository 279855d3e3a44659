//! The write-ahead log, which *is* the raft log: segmented files under `dir/wal/`.
//!
//! Records are staged in one buffer (`append_*`, no syscalls) and written with one `pwrite` and
//! at most one `fdatasync` per batch ([`Wal::flush`]). Segments are preallocated to
//! `segment_bytes`; a batch that would overflow the current segment starts a new one, which
//! begins with the hard state and conf state as of the previous flush so that older segments
//! can be deleted once a snapshot covers all their entries ([`Wal::purge`]).

pub mod record;
pub mod segment;

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use raft::eraftpb::{ConfState, Entry, HardState};

use self::record::Record;
use crate::error::{RaftError, Result};
use crate::fsutil::{ensure_dir, sync_dir};

/// A live segment: its sequence number, path and the highest entry index written to it.
#[derive(Debug)]
struct SegInfo {
    seq: u64,
    path: PathBuf,
    max_index: u64,
}

/// The state recovered from the WAL by [`Wal::open`].
#[derive(Debug, Default)]
pub struct Replayed {
    /// Entries with index > the snapshot index, contiguous, conflicts resolved (later wins).
    pub entries: Vec<Entry>,
    /// The last hard state record, if any.
    pub hard_state: Option<HardState>,
    /// The last conf state record, if any.
    pub conf_state: Option<ConfState>,
    /// True if the WAL held no record at all (a fresh directory).
    pub empty: bool,
}

/// An open WAL positioned for appends at the tail of its last segment.
pub struct Wal {
    dir: PathBuf,
    segment_bytes: u64,
    fsync: bool,
    /// The last segment, open for writing at `offset`.
    file: File,
    offset: u64,
    segments: Vec<SegInfo>,
    /// Records staged for the next flush.
    buf: Vec<u8>,
    /// Hard/conf state as of the last flush (written at the head of a new segment).
    flushed_hs: HardState,
    flushed_cs: ConfState,
    pending_hs: HardState,
    pending_cs: ConfState,
    /// The next segment, being zero-filled in the background (see [`segment::prepare`]).
    next: Option<JoinHandle<std::io::Result<File>>>,
    /// Counters for [`crate::Stats`].
    pub fsyncs: u64,
    pub bytes_written: u64,
}

impl Wal {
    /// Opens (creating if needed) `dir`, replays every segment and repairs a torn tail.
    /// Entries with index <= `snap_index` are skipped (the snapshot covers them).
    pub fn open(dir: &Path, snap_index: u64, segment_bytes: u64, fsync: bool) -> Result<(Wal, Replayed)> {
        ensure_dir(dir)?;
        let mut listed = segment::list(dir)?;
        let mut rep = Replayed { empty: true, ..Default::default() };
        let mut segments = Vec::with_capacity(listed.len() + 1);
        let mut tail_end = None;
        let n = listed.len();
        for (i, (seq, path)) in listed.drain(..).enumerate() {
            let mut max_index = 0;
            let end = segment::scan(&path, i + 1 == n, |rec, off| {
                rep.empty = false;
                match rec {
                    Record::Entry(e) => {
                        max_index = max_index.max(e.index);
                        push_entry(&mut rep.entries, e, snap_index, &path, off)
                    }
                    Record::HardState(hs) => {
                        rep.hard_state = Some(hs);
                        Ok(())
                    }
                    Record::ConfState(cs) => {
                        rep.conf_state = Some(cs);
                        Ok(())
                    }
                }
            })?;
            tail_end = Some(end);
            segments.push(SegInfo { seq, path, max_index });
        }
        let (file, offset) = match (segments.last(), tail_end) {
            (Some(last), Some(end)) => (reopen_tail(&last.path, &end, segment_bytes)?, end.valid_end),
            _ => {
                let path = dir.join(segment::file_name(0, snap_index + 1));
                let tmp = dir.join("next.tmp");
                let f = segment::prepare(&tmp, segment_bytes)
                    .and_then(|f| std::fs::rename(&tmp, &path).map(|()| f))
                    .map_err(|e| RaftError::io(format!("creating WAL segment {}", path.display()), e))?;
                sync_dir(dir)?;
                segments.push(SegInfo { seq: 0, path, max_index: 0 });
                (f, 0)
            }
        };
        let hs = rep.hard_state.clone().unwrap_or_default();
        let cs = rep.conf_state.clone().unwrap_or_default();
        let wal = Wal {
            dir: dir.to_path_buf(),
            segment_bytes,
            fsync,
            file,
            offset,
            segments,
            buf: Vec::with_capacity(1 << 20),
            flushed_hs: hs.clone(),
            flushed_cs: cs.clone(),
            pending_hs: hs,
            pending_cs: cs,
            next: None,
            fsyncs: 0,
            bytes_written: 0,
        };
        let mut wal = wal;
        wal.prepare_next();
        Ok((wal, rep))
    }

    /// Stages an entry record.
    #[inline]
    pub fn append_entry(&mut self, e: &Entry) {
        record::encode_entry(&mut self.buf, e);
        if let Some(cur) = self.segments.last_mut() {
            cur.max_index = cur.max_index.max(e.index);
        }
    }

    /// Stages a hard state record.
    pub fn append_hard_state(&mut self, hs: &HardState) {
        record::encode_hard_state(&mut self.buf, hs);
        self.pending_hs = hs.clone();
    }

    /// Stages a conf state record.
    pub fn append_conf_state(&mut self, cs: &ConfState) {
        record::encode_conf_state(&mut self.buf, cs);
        self.pending_cs = cs.clone();
    }

    /// True if records are staged but not yet written.
    pub fn has_pending(&self) -> bool {
        !self.buf.is_empty()
    }

    /// Writes the staged records with one write and (if `fsync` is configured) one fdatasync.
    pub fn flush(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        if self.offset > 0 && self.offset + self.buf.len() as u64 > self.segment_bytes {
            self.rotate()?;
        }
        let path = &self.segments.last().expect("a live segment").path;
        self.file
            .write_all_at(&self.buf, self.offset)
            .map_err(|e| RaftError::io(format!("writing WAL segment {}", path.display()), e))?;
        if self.fsync {
            self.file
                .sync_data()
                .map_err(|e| RaftError::io(format!("fdatasync of {}", path.display()), e))?;
            self.fsyncs += 1;
        }
        self.offset += self.buf.len() as u64;
        self.bytes_written += self.buf.len() as u64;
        self.buf.clear();
        self.flushed_hs = self.pending_hs.clone();
        self.flushed_cs = self.pending_cs.clone();
        Ok(())
    }

    /// Seals the current segment and starts the next, headed by the last flushed hard/conf state.
    fn rotate(&mut self) -> Result<()> {
        let cur = self.segments.last().expect("a live segment");
        if self.fsync {
            self.file
                .sync_data()
                .map_err(|e| RaftError::io(format!("fdatasync of {}", cur.path.display()), e))?;
        }
        let seq = cur.seq + 1;
        let first = self.segments.iter().map(|s| s.max_index).max().unwrap_or(0) + 1;
        let path = self.dir.join(segment::file_name(seq, first));
        self.file = match self.next.take().map(|t| t.join()) {
            Some(Ok(Ok(f))) => {
                std::fs::rename(self.next_path(), &path)
                    .map_err(|e| RaftError::io(format!("installing WAL segment {}", path.display()), e))?;
                f
            }
            _ => segment::create(&path, self.segment_bytes)?,
        };
        sync_dir(&self.dir)?;
        self.prepare_next();
        self.segments.push(SegInfo { seq, path, max_index: 0 });
        self.offset = 0;
        let mut head = Vec::with_capacity(128 + self.buf.len());
        record::encode_hard_state(&mut head, &self.flushed_hs);
        record::encode_conf_state(&mut head, &self.flushed_cs);
        head.extend_from_slice(&self.buf);
        self.buf = head;
        Ok(())
    }

    fn next_path(&self) -> PathBuf {
        self.dir.join("next.tmp")
    }

    /// Starts zero-filling the next segment on a helper thread.
    fn prepare_next(&mut self) {
        let (tmp, size) = (self.next_path(), self.segment_bytes);
        self.next = std::thread::Builder::new()
            .name("kubecore-wal-prep".into())
            .spawn(move || segment::prepare(&tmp, size))
            .ok();
    }

    /// Deletes every segment except the last whose entries are all <= `snap_index`.
    /// Returns how many were deleted.
    pub fn purge(&mut self, snap_index: u64) -> Result<usize> {
        let keep_from = self
            .segments
            .iter()
            .position(|s| s.max_index > snap_index)
            .unwrap_or(self.segments.len())
            .min(self.segments.len() - 1);
        for s in self.segments.drain(..keep_from) {
            std::fs::remove_file(&s.path)
                .map_err(|e| RaftError::io(format!("deleting WAL segment {}", s.path.display()), e))?;
        }
        if keep_from > 0 {
            sync_dir(&self.dir)?;
        }
        Ok(keep_from)
    }

    /// Paths of the live segments, oldest first.
    pub fn segment_paths(&self) -> Vec<PathBuf> {
        self.segments.iter().map(|s| s.path.clone()).collect()
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        if let Some(t) = self.next.take() {
            let _ = t.join();
        }
    }
}

/// Appends a replayed entry, truncating a conflicting suffix (later record wins).
fn push_entry(entries: &mut Vec<Entry>, e: Entry, snap_index: u64, path: &Path, off: u64) -> Result<()> {
    if e.index <= snap_index {
        return Ok(());
    }
    let next = snap_index + 1 + entries.len() as u64;
    if e.index > next {
        return Err(RaftError::corruption(
            path,
            off,
            format!("entry index {} leaves a gap (expected at most {next})", e.index),
        ));
    }
    entries.truncate((e.index - snap_index - 1) as usize);
    entries.push(e);
    Ok(())
}

/// Opens the last segment for appends, zeroing a torn tail and restoring its preallocation.
fn reopen_tail(path: &Path, end: &segment::ScanEnd, segment_bytes: u64) -> Result<File> {
    let ctx = || format!("repairing WAL tail of {}", path.display());
    let f = OpenOptions::new().read(true).write(true).open(path).map_err(|e| RaftError::io(ctx(), e))?;
    if let Some(garbage_end) = end.garbage_end {
        let zeros = vec![0u8; (garbage_end - end.valid_end) as usize];
        f.write_all_at(&zeros, end.valid_end).map_err(|e| RaftError::io(ctx(), e))?;
    }
    segment::preallocate(&f, segment_bytes).map_err(|e| RaftError::io(ctx(), e))?;
    if end.garbage_end.is_some() {
        f.sync_all().map_err(|e| RaftError::io(ctx(), e))?;
    }
    Ok(f)
}
