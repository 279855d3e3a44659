//! LIST from the cache: a page of matching objects in key order, assembled into the response
//! body (`{"kind":...,"metadata":{...},"items":[...]}`) without the caller touching an item.
//!
//! Pagination matches the store path (storage.py `_page`) byte for byte: a page ends after
//! `limit` matching items; if keys remain after the last one, `metadata.continue` carries
//! base64url(`{"v":"meta.k8s.io/v1","rv":R,"start":"<last key>\u0000"}`, the key relative to the
//! listed prefix) and, without selectors, `remainingItemCount`. Every page of one LIST reads the
//! same snapshot (revision R): the first page that hands out a token keeps the persistent map
//! of that revision; when it is gone (evicted, or older than the ring) the caller falls back to
//! the store, which reads revision R from its MVCC history.

use std::ops::Bound;
use std::sync::Arc;

use crate::cache::{Cache, Objects};
use crate::entry::{push_decimal, Entry};
use crate::selector::Selector;

pub struct ListRequest<'a> {
    pub selector: &'a Selector,
    /// 0: no limit.
    pub limit: usize,
    /// From a continue token: (its revision, absolute key to start at).
    pub continue_from: Option<(i64, Vec<u8>)>,
    /// The body up to the list metadata: `{"kind":"PodList","apiVersion":"v1","metadata":`.
    pub head: &'a [u8],
}

#[derive(Debug)]
pub struct ListPage {
    pub body: Vec<u8>,
    pub revision: i64,
    pub items: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListError {
    /// The continue token's snapshot is no longer kept.
    SnapshotGone,
}

/// A LIST body handed out in chunks (a big LIST goes to the socket while the rest is being
/// assembled, and the whole body never sits in memory twice): the head with the list metadata,
/// then the items, then `]}`. `len` is the whole body's length, known before the first chunk.
#[derive(Debug)]
pub struct ListBody {
    head: Vec<u8>,
    items: Vec<Arc<Entry>>,
    /// Items already written; `head` is written with the first chunk.
    next: usize,
    started: bool,
    finished: bool,
    pub len: usize,
    pub revision: i64,
}

impl ListBody {
    /// The next part of the body, about `max` bytes (always at least one item); None at the end.
    pub fn next_chunk(&mut self, max: usize) -> Option<Vec<u8>> {
        if self.finished {
            return None;
        }
        let mut out = Vec::with_capacity(max.min(self.len));
        self.write(&mut out, max);
        Some(out)
    }

    /// Appends up to about `max` bytes of the body to `out`.
    fn write(&mut self, out: &mut Vec<u8>, max: usize) {
        if !self.started {
            out.extend_from_slice(&self.head);
            self.started = true;
        }
        let limit = out.len().saturating_add(max);
        while self.next < self.items.len() && (out.len() < limit || self.next == 0) {
            if self.next > 0 {
                out.push(b',');
            }
            let e = &self.items[self.next];
            e.write_json(out, e.mod_revision);
            self.next += 1;
        }
        if self.next == self.items.len() {
            out.extend_from_slice(b"]}");
            self.finished = true;
        }
    }

    /// Items on this page.
    pub fn items(&self) -> usize {
        self.items.len()
    }
}

impl Cache {
    /// One page; see the module docs.
    pub fn list(&self, req: &ListRequest<'_>) -> Result<ListPage, ListError> {
        let mut body = self.list_body(req)?;
        let mut out = Vec::with_capacity(body.len);
        body.write(&mut out, usize::MAX);
        Ok(ListPage { body: out, revision: body.revision, items: body.items() })
    }

    /// One page as a body to be taken in chunks (`ListBody::next_chunk`).
    pub fn list_body(&self, req: &ListRequest<'_>) -> Result<ListBody, ListError> {
        let (objects, revision) = self.view(req.continue_from.as_ref().map(|c| c.0))?;
        let sel = req.selector;
        let start = req.continue_from.as_ref().map_or(sel.prefix.as_slice(), |c| c.1.as_slice());
        let end = kubecore_store::kv::prefix_end(&sel.prefix);
        let upper = if end == [0] { Bound::Unbounded } else { Bound::Excluded(end.as_slice()) };
        let mut iter = objects.range::<_, [u8]>((Bound::Included(start), upper));
        let mut items: Vec<&Arc<Entry>> = Vec::new();
        let mut last_key = None;
        for (key, e) in iter.by_ref() {
            if !sel.matches(e) {
                continue;
            }
            items.push(e);
            if req.limit > 0 && items.len() >= req.limit {
                last_key = Some(key);
                break;
            }
        }
        let left = if last_key.is_some() { iter.count() } else { 0 };
        let mut token = None;
        if let (Some(key), true) = (last_key, left > 0) {
            token = Some(continue_token(revision, &key[sel.prefix.len().min(key.len())..]));
            if req.continue_from.is_none() {
                self.keep_snapshot(revision, &objects);
            }
        }
        let remaining = (token.is_some() && sel.is_prefix_only()).then_some(left);
        let head = head(req.head, revision, token.as_deref(), remaining);
        let items: Vec<Arc<Entry>> = items.into_iter().cloned().collect();
        let commas = items.len().saturating_sub(1);
        let len = head.len() + items.iter().map(|e| e.json_len(e.mod_revision)).sum::<usize>() + commas + 2;
        Ok(ListBody { head, items, next: 0, started: false, finished: false, len, revision })
    }

    /// The objects to list and their revision: current, or a kept snapshot.
    fn view(&self, snapshot: Option<i64>) -> Result<(Objects, i64), ListError> {
        let st = self.state.read().unwrap();
        match snapshot {
            None => Ok((st.objects.clone(), st.revision)),
            Some(rev) => st
                .snapshots
                .iter()
                .find(|(r, _)| *r == rev)
                .map(|(r, o)| (o.clone(), *r))
                .ok_or(ListError::SnapshotGone),
        }
    }

    fn keep_snapshot(&self, revision: i64, objects: &Objects) {
        let mut st = self.state.write().unwrap();
        if st.snapshots.iter().any(|(r, _)| *r == revision) {
            return;
        }
        st.snapshots.push_back((revision, objects.clone()));
        while st.snapshots.len() > self.opts.max_snapshots {
            st.snapshots.pop_front();
        }
    }

    /// Revisions of the snapshots kept for continue tokens, oldest first.
    pub fn snapshot_revisions(&self) -> Vec<i64> {
        self.state.read().unwrap().snapshots.iter().map(|(r, _)| *r).collect()
    }
}

/// The body up to the first item: `head`, the list metadata, `,"items":[`.
fn head(head: &[u8], revision: i64, token: Option<&str>, remaining: Option<usize>) -> Vec<u8> {
    let mut out = Vec::with_capacity(head.len() + 256);
    out.extend_from_slice(head);
    out.extend_from_slice(br#"{"resourceVersion":""#);
    push_decimal(&mut out, revision);
    out.push(b'"');
    if let Some(t) = token {
        out.extend_from_slice(br#","continue":""#);
        out.extend_from_slice(t.as_bytes());
        out.push(b'"');
        if let Some(n) = remaining {
            out.extend_from_slice(br#","remainingItemCount":"#);
            push_decimal(&mut out, n as i64);
        }
    }
    out.extend_from_slice(br#"},"items":["#);
    out
}

/// The continue token storage.py's `_encode_continue` makes for (revision, last key + "\0").
pub fn continue_token(revision: i64, last_relative_key: &[u8]) -> String {
    let mut start = String::from_utf8_lossy(last_relative_key).into_owned();
    start.push('\0');
    let json = format!(r#"{{"v":"meta.k8s.io/v1","rv":{revision},"start":{}}}"#, serde_json::Value::from(start));
    base64url(json.as_bytes())
}

/// Unpadded URL-safe base64.
fn base64url(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..=chunk.len() {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_join_to_the_whole_body() {
        let mut items = Vec::new();
        for i in 0..5 {
            let value = format!(r#"{{"metadata":{{"name":"o{i}"}},"data":"{}"}}"#, "x".repeat(i * 10));
            items.push(Arc::new(Entry::new(Arc::from(&b"/k"[..]), Arc::from(value.as_bytes()), 10 + i as i64, &[])));
        }
        let make = || ListBody {
            head: head(br#"{"metadata":"#, 14, None, None),
            items: items.clone(),
            next: 0,
            started: false,
            finished: false,
            len: 0,
            revision: 14,
        };
        let mut whole = make();
        let mut all = Vec::new();
        whole.write(&mut all, usize::MAX);
        for max in [1, 30, 70, 1000] {
            let mut b = make();
            let mut joined = Vec::new();
            let mut chunks = 0;
            while let Some(c) = b.next_chunk(max) {
                assert!(!c.is_empty());
                joined.extend_from_slice(&c);
                chunks += 1;
            }
            assert_eq!(joined, all, "max {max}");
            assert!(chunks >= 1 && b.next_chunk(max).is_none());
        }
        let mut empty = ListBody { items: Vec::new(), ..make() };
        assert_eq!(empty.next_chunk(10).unwrap(), br#"{"metadata":{"resourceVersion":"14"},"items":[]}"#.to_vec());
        assert!(empty.next_chunk(10).is_none());
    }

    #[test]
    fn base64url_without_padding() {
        let table: [(&[u8], &str); 5] = [(b"", ""), (b"f", "Zg"), (b"fo", "Zm8"), (b"foo", "Zm9v"), (b"\xfb\xff", "-_8")];
        for (input, want) in table {
            assert_eq!(base64url(input), want);
        }
    }

    #[test]
    fn token_is_the_store_paths_token() {
        // base64.urlsafe_b64encode(msgspec.json.encode({"v": "meta.k8s.io/v1", "rv": 12, "start": "a\0"})).rstrip("=")
        assert_eq!(continue_token(12, b"a"), "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTIsInN0YXJ0IjoiYVx1MDAwMCJ9");
    }
}
