//! The one error type of the store. Every expected failure is a variant here; the Python
//! bindings map each variant to one exception class.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// The requested revision is older than the compaction point.
    Compacted { compact_revision: i64 },
    /// The requested revision is newer than the store's current revision.
    FutureRevision { current_revision: i64 },
    LeaseNotFound(i64),
    LeaseExists(i64),
    /// The store has been closed.
    Closed,
    /// The data directory is damaged; `detail` says where.
    Corruption(String),
    /// Another process holds the data directory.
    Locked(String),
    /// The encoded request is larger than the configured limit.
    RequestTooLarge { size: usize, limit: usize },
    /// A malformed request (duplicate key in a txn, empty key, ...).
    InvalidArgument(String),
    Io(String),
}

pub type Result<T> = std::result::Result<T, StoreError>;

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Compacted { compact_revision } => write!(
                f,
                "required revision has been compacted (compact revision {compact_revision})"
            ),
            Self::FutureRevision { current_revision } => write!(
                f,
                "required revision is a future revision (current revision {current_revision})"
            ),
            Self::LeaseNotFound(id) => write!(f, "requested lease not found: {id}"),
            Self::LeaseExists(id) => write!(f, "lease already exists: {id}"),
            Self::Closed => write!(f, "the store is closed"),
            Self::Corruption(d) => write!(f, "data corruption: {d}"),
            Self::Locked(d) => write!(f, "{d}"),
            Self::RequestTooLarge { size, limit } => write!(
                f,
                "request is too large: {size} bytes, the limit is {limit} bytes"
            ),
            Self::InvalidArgument(d) => write!(f, "invalid argument: {d}"),
            Self::Io(d) => write!(f, "i/o error: {d}"),
        }
    }
}

impl std::error::Error for StoreError {}
