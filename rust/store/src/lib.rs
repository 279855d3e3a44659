pub mod error;
pub mod key_index;
pub mod kv;
pub mod lease;
pub mod mvcc;
pub mod request;
pub mod watch;
pub mod snapshot;
