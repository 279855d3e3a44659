//! [`RaftHandle`]: the public, cloneable front of the raft thread.

use std::marker::PhantomData;
use std::sync::mpsc::{self, SendError};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;

use crate::error::RaftError;
use crate::node::{Msg, Node, Shared, StatsCell};
use crate::{Completion, Config, StateMachine, Stats};

/// A handle to an open raft log. Clone + Send + Sync; the last handle dropped closes the log.
pub struct RaftHandle<S: StateMachine> {
    inner: Arc<Inner<S::Output>>,
    _sm: PhantomData<fn() -> S>,
}

struct Inner<O> {
    shared: Arc<Shared<O>>,
    thread: Mutex<Option<JoinHandle<Result<(), RaftError>>>>,
}

impl<S: StateMachine> Clone for RaftHandle<S> {
    fn clone(&self) -> Self {
        RaftHandle { inner: self.inner.clone(), _sm: PhantomData }
    }
}

impl<S: StateMachine> RaftHandle<S> {
    /// Takes an exclusive lock on dir (flock on dir/LOCK, non-blocking -> RaftError::Locked),
    /// loads the newest snapshot (sm.restore), replays the WAL, spawns the raft thread, and
    /// returns only once every entry in the log has been applied to `sm` (so reads see the full state).
    pub fn open(config: Config, sm: S) -> Result<Self, RaftError> {
        let (tx, rx) = mpsc::channel();
        let shared = Arc::new(Shared { tx: RwLock::new(Some(tx)), stats: StatsCell::default() });
        let node = Node::open(config, sm, shared.clone())?;
        let thread = std::thread::Builder::new()
            .name("kubecore-raft".into())
            .spawn(move || node.run(rx))
            .map_err(|e| RaftError::io("spawning the raft thread", e))?;
        let inner = Arc::new(Inner { shared, thread: Mutex::new(Some(thread)) });
        Ok(RaftHandle { inner, _sm: PhantomData })
    }

    /// Proposes one command; `done` is called once it is durable and applied (or failed).
    /// Empty commands are refused (empty entries are raft no-ops and are never applied).
    pub fn propose(&self, data: Vec<u8>, done: Completion<S::Output>) {
        if data.is_empty() {
            return done(Err(empty()));
        }
        self.inner.send(Msg::Propose(data, done));
    }

    /// Proposes several commands in one channel message (they share one fsync).
    pub fn propose_batch(&self, mut items: Vec<(Vec<u8>, Completion<S::Output>)>) {
        if items.iter().any(|(d, _)| d.is_empty()) {
            let (bad, good): (Vec<_>, Vec<_>) = items.into_iter().partition(|(d, _)| d.is_empty());
            bad.into_iter().for_each(|(_, done)| done(Err(empty())));
            items = good;
        }
        if !items.is_empty() {
            self.inner.send(Msg::Batch(items));
        }
    }

    /// Completes in-flight proposals, final sync, joins the thread, releases the lock. Idempotent.
    /// Later proposals complete with Err(RaftError::Closed). Returns the error that stopped the
    /// raft thread, if one did (once).
    pub fn close(&self) -> Result<(), RaftError> {
        self.inner.close()
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        self.inner.shared.stats.load()
    }
}

fn empty() -> RaftError {
    RaftError::Raft("empty proposals are not allowed".into())
}

impl<O: Send + 'static> Inner<O> {
    fn send(&self, msg: Msg<O>) {
        let guard = self.shared.tx.read().unwrap_or_else(|p| p.into_inner());
        let unsent = match guard.as_ref() {
            Some(tx) => tx.send(msg).err().map(|SendError(m)| m),
            None => Some(msg),
        };
        drop(guard);
        match unsent {
            Some(Msg::Propose(_, done)) => done(Err(RaftError::Closed)),
            Some(Msg::Batch(items)) => items.into_iter().for_each(|(_, done)| done(Err(RaftError::Closed))),
            _ => {}
        }
    }

    fn close(&self) -> Result<(), RaftError> {
        let mut thread = self.thread.lock().unwrap_or_else(|p| p.into_inner());
        let tx = self.shared.tx.write().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(tx) = tx {
            let _ = tx.send(Msg::Close);
        }
        match thread.take() {
            Some(t) => t.join().map_err(|_| RaftError::Raft("raft thread panicked".into()))?,
            None => Ok(()),
        }
    }
}

impl<O> Drop for Inner<O> {
    fn drop(&mut self) {
        if let Some(tx) = self.shared.tx.write().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = tx.send(Msg::Close);
        }
        if let Some(t) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = t.join();
        }
    }
}
