//! Small filesystem helpers: directory fsync and the exclusive directory lock.

use std::fs::{File, OpenOptions};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use crate::error::{RaftError, Result};

/// fsyncs a directory so a create/rename/unlink inside it is durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| RaftError::io(format!("syncing directory {}", dir.display()), e))
}

/// Creates `dir` (and parents) if missing.
pub fn ensure_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| RaftError::io(format!("creating {}", dir.display()), e))
}

/// An exclusive `flock` on `dir/LOCK`, held until dropped (closing the fd releases it).
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

impl DirLock {
    /// Takes the lock without blocking; a holder elsewhere gives [`RaftError::Locked`].
    pub fn acquire(dir: &Path) -> Result<DirLock> {
        let path = dir.join("LOCK");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| RaftError::io(format!("opening {}", path.display()), e))?;
        // SAFETY: plain syscall on a valid open fd.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            return match err.raw_os_error() {
                Some(libc::EWOULDBLOCK) => Err(RaftError::Locked(PathBuf::from(dir))),
                _ => Err(RaftError::io(format!("locking {}", path.display()), err)),
            };
        }
        Ok(DirLock { _file: file })
    }
}
