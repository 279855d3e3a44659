//! Values exchanged with callers: key-values, events, results.

use std::sync::Arc;

/// Keys and values are shared, immutable byte strings: the index, the revision log, watch
/// events and range results all point at the same allocation.
pub type Bytes = Arc<[u8]>;

/// A key's state at one revision, as etcd's `mvccpb.KeyValue`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeyValue {
    pub key: Bytes,
    pub value: Bytes,
    pub create_revision: i64,
    pub mod_revision: i64,
    /// 1 on creation, +1 per modification, reset to 0 by a delete.
    pub version: i64,
    pub lease: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Put,
    Delete,
}

/// One change at one revision. For a delete, `kv` holds the key and the delete revision
/// (`mod_revision`), everything else zero.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub kind: EventType,
    pub kv: KeyValue,
    pub prev_kv: Option<KeyValue>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RangeResult {
    pub kvs: Vec<KeyValue>,
    pub more: bool,
    pub count: i64,
    pub revision: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpResult {
    Put { revision: i64, prev_kv: Option<KeyValue> },
    Range(RangeResult),
    Delete { revision: i64, deleted: i64, prev_kvs: Vec<KeyValue> },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnResult {
    pub succeeded: bool,
    /// The store revision after the transaction.
    pub revision: i64,
    pub responses: Vec<OpResult>,
}

/// The key range `[start, end)` with etcd's conventions for `end`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyRange {
    /// Exactly one key.
    Single(Vec<u8>),
    /// `[start, end)`; an `end` of `[0]` (etcd's "\0") means "to the end of the keyspace".
    Range(Vec<u8>, Vec<u8>),
}

impl KeyRange {
    /// Builds a range from an etcd-style (key, range_end) pair: no or empty `end` is a single key.
    pub fn new(start: Vec<u8>, end: Option<Vec<u8>>) -> Self {
        match end {
            None => Self::Single(start),
            Some(e) if e.is_empty() => Self::Single(start),
            Some(e) => Self::Range(start, e),
        }
    }

    pub fn start(&self) -> &[u8] {
        match self {
            Self::Single(k) | Self::Range(k, _) => k,
        }
    }

    /// The exclusive end, or None for "no upper bound".
    pub fn end(&self) -> Option<&[u8]> {
        match self {
            Self::Single(_) => None,
            Self::Range(_, e) if e.as_slice() == [0u8] => None,
            Self::Range(_, e) => Some(e),
        }
    }

    pub fn is_single(&self) -> bool {
        matches!(self, Self::Single(_))
    }

    pub fn contains(&self, key: &[u8]) -> bool {
        match self {
            Self::Single(k) => k.as_slice() == key,
            Self::Range(s, _) => key >= s.as_slice() && self.end().is_none_or(|e| key < e),
        }
    }
}

/// The smallest key greater than every key with `prefix` (etcd's `GetPrefixRangeEnd`).
/// A prefix of all 0xff bytes (or empty) has no such key: the result is `[0]`, "to the end".
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_increments_last_byte_below_ff() {
        assert_eq!(prefix_end(b"abc"), b"abd".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b"\xff\xff"), vec![0]);
        assert_eq!(prefix_end(b""), vec![0]);
    }

    #[test]
    fn key_range_conventions() {
        assert!(KeyRange::new(b"a".to_vec(), None).contains(b"a"));
        assert!(!KeyRange::new(b"a".to_vec(), None).contains(b"ab"));
        let all = KeyRange::new(b"b".to_vec(), Some(vec![0]));
        assert!(all.contains(b"zzz") && !all.contains(b"a"));
        let r = KeyRange::new(b"b".to_vec(), Some(b"d".to_vec()));
        assert!(r.contains(b"c") && !r.contains(b"d"));
    }
}
