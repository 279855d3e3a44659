//! kubecore's watch cache: per resource (a key prefix) the current objects and a bounded ring of
//! recent events, fed from the store inside Rust; serves LIST (label/field selectors,
//! pagination over consistent snapshots, the response body assembled here) and WATCH fan-out
//! (replay from the ring, selector transitions, pre-encoded frames, bounded per-watcher buffers)
//! without touching the store. Upstream's counterpart is the apiserver's cacher
//! (k8s.io/apiserver/pkg/storage/cacher).
//!
//! - `entry`: one cached object (stored bytes, labels, selectable fields) and the resourceVersion splice
//! - `extract`: labels and fields of stored bytes in one pass, without building the document
//! - `selector`: label requirements and field terms, matched against entries
//! - `cache`: objects + ring + revision + watchers of one resource; `apply` feeds it
//! - `list`: LIST pages and continue tokens
//! - `watcher`: one WATCH: transitions, bounded buffer, frames
//! - `feed`: the thread that feeds caches from store watches; consistent reads (`Feed::sync`)

pub mod cache;
pub mod entry;
mod extract;
pub mod feed;
pub mod list;
pub mod selector;
pub mod watcher;

pub use cache::{Cache, Change, Item, Options, Spec, Start, WatchError};
pub use entry::{Entry, FieldSpec, Fmt, Seg};
pub use feed::{Feed, Feeder};
pub use list::{ListBody, ListError, ListPage, ListRequest};
pub use selector::Selector;
pub use watcher::{End, Notify, Polled, Watcher};
