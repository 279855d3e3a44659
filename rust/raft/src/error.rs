//! The one error type of the crate. Every expected failure (I/O, a damaged file, a second
//! opener, use after close, a refusal from raft-rs) is a variant; nothing here panics on bad input.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// Errors returned by [`crate::RaftHandle`] and passed to proposal completions.
#[derive(Debug)]
pub enum RaftError {
    /// An operating-system I/O failure; `context` says what was being done (and on which file).
    Io { context: String, source: io::Error },
    /// A file is damaged in a way that cannot be explained by a crash mid-write.
    Corruption { path: PathBuf, offset: u64, detail: String },
    /// Another `RaftHandle` (in this or another process) holds the directory lock.
    Locked(PathBuf),
    /// The handle was closed (or the raft thread stopped); the proposal was not applied.
    Closed,
    /// raft-rs refused an operation (e.g. a proposal dropped because this node is not leader).
    Raft(String),
}

impl RaftError {
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        RaftError::Io { context: context.into(), source }
    }

    pub(crate) fn corruption(path: impl Into<PathBuf>, offset: u64, detail: impl Into<String>) -> Self {
        RaftError::Corruption { path: path.into(), offset, detail: detail.into() }
    }

    /// An equivalent error value (io::Error is not Clone); used to fail every pending
    /// proposal with the error that stopped the raft thread.
    pub(crate) fn duplicate(&self) -> Self {
        match self {
            RaftError::Io { context, source } => RaftError::Io {
                context: context.clone(),
                source: io::Error::new(source.kind(), source.to_string()),
            },
            RaftError::Corruption { path, offset, detail } => {
                RaftError::Corruption { path: path.clone(), offset: *offset, detail: detail.clone() }
            }
            RaftError::Locked(p) => RaftError::Locked(p.clone()),
            RaftError::Closed => RaftError::Closed,
            RaftError::Raft(s) => RaftError::Raft(s.clone()),
        }
    }
}

impl fmt::Display for RaftError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RaftError::Io { context, source } => write!(f, "I/O error while {context}: {source}"),
            RaftError::Corruption { path, offset, detail } => {
                write!(f, "corrupt file {} at offset {offset}: {detail}", path.display())
            }
            RaftError::Locked(p) => {
                write!(f, "raft directory {} is locked by another open handle", p.display())
            }
            RaftError::Closed => write!(f, "raft handle is closed"),
            RaftError::Raft(s) => write!(f, "raft: {s}"),
        }
    }
}

impl std::error::Error for RaftError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RaftError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<raft::Error> for RaftError {
    fn from(e: raft::Error) -> Self {
        RaftError::Raft(e.to_string())
    }
}

/// Shorthand used throughout the crate.
pub type Result<T> = std::result::Result<T, RaftError>;
