//! The bridge to asyncio: the Raft thread pushes finished writes (and watch ids with new events)
//! here and signals one eventfd; the event loop watches that fd and drains everything in one call,
//! so one wake-up resolves many futures. No Python runs on the Raft thread.

use std::collections::HashSet;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use kubecore_store::error::Result;
use kubecore_store::mvcc::Applied;

/// Which Python result a finished write turns into.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Put,
    Delete,
    Txn,
    Compact,
    LeaseGrant,
    LeaseRevoke,
}

pub struct Finished {
    pub token: u64,
    pub kind: Kind,
    pub result: Result<Applied>,
}

pub struct Completions {
    fd: OwnedFd,
    /// Set between a signal and the next drain: later pushes skip the syscall.
    signalled: AtomicBool,
    done: Mutex<Vec<Finished>>,
    /// Watches with news; a set, so a watch nobody drains costs one slot, not one per event.
    watches: Mutex<HashSet<u64>>,
}

impl Completions {
    pub fn new() -> io::Result<Self> {
        // SAFETY: eventfd has no memory-safety preconditions; the fd is owned right away.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Self { fd, signalled: AtomicBool::new(false), done: Mutex::new(Vec::new()), watches: Mutex::new(HashSet::new()) })
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    pub fn push(&self, f: Finished) {
        self.done.lock().unwrap().push(f);
        self.signal();
    }

    pub fn watch_ready(&self, id: u64) {
        self.watches.lock().unwrap().insert(id);
        self.signal();
    }

    fn signal(&self) {
        if !self.signalled.swap(true, Ordering::AcqRel) {
            let one: u64 = 1;
            // SAFETY: writes 8 bytes from a live u64 to our own eventfd.
            unsafe { libc::write(self.fd(), (&one as *const u64).cast(), 8) };
        }
    }

    /// Everything finished since the last drain.
    ///
    /// Order matters: reset the fd, then re-arm the flag, then take the queues. A push before the
    /// re-arm is in the queues we take; a push after it signals the fd again. (Re-arming before
    /// the read could swallow that new signal and strand the next push.)
    pub fn drain(&self) -> (Vec<Finished>, Vec<u64>) {
        let mut buf: u64 = 0;
        // SAFETY: reads at most 8 bytes into a live u64; EAGAIN is fine (non-blocking fd).
        unsafe { libc::read(self.fd(), (&mut buf as *mut u64).cast(), 8) };
        self.signalled.store(false, Ordering::Release);
        let done = std::mem::take(&mut *self.done.lock().unwrap());
        let watches = std::mem::take(&mut *self.watches.lock().unwrap()).into_iter().collect();
        (done, watches)
    }
}
