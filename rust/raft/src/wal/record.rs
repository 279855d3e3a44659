//! WAL record encoding: `[u32 len][u32 crc32(type+payload)][u8 type][payload]`, little-endian,
//! `len` = payload length. Encoding appends to a caller-owned buffer (no per-record allocation);
//! decoding slices a segment's bytes (entry data/context share the segment buffer, zero-copy).

use bytes::Bytes;
use raft::eraftpb::{ConfState, Entry, EntryType, HardState};

/// Bytes before the payload: len (4) + crc (4) + type (1).
pub const HEADER_LEN: usize = 9;
/// Payload: term u64, index u64, entry type u8, context len u32, context, data (rest).
pub const TYPE_ENTRY: u8 = 1;
/// Payload: term u64, vote u64, commit u64.
pub const TYPE_HARD_STATE: u8 = 2;
/// Payload: voters, learners, voters_outgoing, learners_next (each u32 count + u64s), auto_leave u8.
pub const TYPE_CONF_STATE: u8 = 3;

const ENTRY_FIXED: usize = 8 + 8 + 1 + 4;

/// One decoded record.
#[derive(Debug)]
pub enum Record {
    Entry(Entry),
    HardState(HardState),
    ConfState(ConfState),
}

/// Result of decoding at one offset.
#[derive(Debug)]
pub enum Decoded {
    /// A valid record and its total encoded length.
    Record(Record, usize),
    /// Everything from the offset to the end of the buffer is zero (preallocated space).
    End,
    /// Not a valid record here; the string says why.
    Bad(String),
}

/// Appends a record of type `ty`, letting `fill` write the payload into `buf`.
#[inline]
fn put(buf: &mut Vec<u8>, ty: u8, fill: impl FnOnce(&mut Vec<u8>)) {
    let start = buf.len();
    buf.extend_from_slice(&[0u8; 8]);
    buf.push(ty);
    fill(buf);
    let len = (buf.len() - start - HEADER_LEN) as u32;
    let crc = crc32fast::hash(&buf[start + 8..]);
    buf[start..start + 4].copy_from_slice(&len.to_le_bytes());
    buf[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

pub fn entry_type_code(t: EntryType) -> u8 {
    match t {
        EntryType::EntryNormal => 0,
        EntryType::EntryConfChange => 1,
        EntryType::EntryConfChangeV2 => 2,
    }
}

fn entry_type_from(code: u8) -> Option<EntryType> {
    match code {
        0 => Some(EntryType::EntryNormal),
        1 => Some(EntryType::EntryConfChange),
        2 => Some(EntryType::EntryConfChangeV2),
        _ => None,
    }
}

/// Appends an entry record.
pub fn encode_entry(buf: &mut Vec<u8>, e: &Entry) {
    buf.reserve(HEADER_LEN + ENTRY_FIXED + e.context.len() + e.data.len());
    put(buf, TYPE_ENTRY, |b| {
        b.extend_from_slice(&e.term.to_le_bytes());
        b.extend_from_slice(&e.index.to_le_bytes());
        b.push(entry_type_code(e.get_entry_type()));
        b.extend_from_slice(&(e.context.len() as u32).to_le_bytes());
        b.extend_from_slice(&e.context);
        b.extend_from_slice(&e.data);
    });
}

/// Appends a hard-state record.
pub fn encode_hard_state(buf: &mut Vec<u8>, hs: &HardState) {
    put(buf, TYPE_HARD_STATE, |b| {
        b.extend_from_slice(&hs.term.to_le_bytes());
        b.extend_from_slice(&hs.vote.to_le_bytes());
        b.extend_from_slice(&hs.commit.to_le_bytes());
    });
}

/// Appends a conf-state record.
pub fn encode_conf_state(buf: &mut Vec<u8>, cs: &ConfState) {
    put(buf, TYPE_CONF_STATE, |b| put_conf_state(b, cs));
}

/// Conf state body, shared with the snapshot header.
pub fn put_conf_state(b: &mut Vec<u8>, cs: &ConfState) {
    for list in [&cs.voters, &cs.learners, &cs.voters_outgoing, &cs.learners_next] {
        b.extend_from_slice(&(list.len() as u32).to_le_bytes());
        for id in list.iter() {
            b.extend_from_slice(&id.to_le_bytes());
        }
    }
    b.push(cs.auto_leave as u8);
}

/// A bounds-checked little-endian cursor; every read returns None past the end.
pub struct Cursor<'a> {
    pub buf: &'a [u8],
    pub pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }
    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }
    pub fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|s| s[0])
    }
    pub fn u32(&mut self) -> Option<u32> {
        self.take(4).map(|s| u32::from_le_bytes(s.try_into().unwrap()))
    }
    pub fn u64(&mut self) -> Option<u64> {
        self.take(8).map(|s| u64::from_le_bytes(s.try_into().unwrap()))
    }
}

/// Reads a conf state written by [`put_conf_state`].
pub fn get_conf_state(c: &mut Cursor<'_>) -> Option<ConfState> {
    let mut lists: [Vec<u64>; 4] = Default::default();
    for list in lists.iter_mut() {
        let n = c.u32()? as usize;
        if n > c.buf.len() / 8 {
            return None;
        }
        for _ in 0..n {
            list.push(c.u64()?);
        }
    }
    let auto_leave = match c.u8()? {
        0 => false,
        1 => true,
        _ => return None,
    };
    let [voters, learners, voters_outgoing, learners_next] = lists;
    let mut cs = ConfState::default();
    cs.voters = voters;
    cs.learners = learners;
    cs.voters_outgoing = voters_outgoing;
    cs.learners_next = learners_next;
    cs.auto_leave = auto_leave;
    Some(cs)
}

/// Decodes the record starting at `off` in `seg` (a whole segment's bytes).
pub fn decode(seg: &Bytes, off: usize) -> Decoded {
    let rest = &seg[off..];
    if rest.len() < HEADER_LEN || rest[..HEADER_LEN].iter().all(|&b| b == 0) {
        if rest.iter().all(|&b| b == 0) {
            return Decoded::End;
        }
        if rest.len() < HEADER_LEN {
            return Decoded::Bad(format!("short record header ({} bytes)", rest.len()));
        }
        return Decoded::Bad("zero record header followed by data".into());
    }
    let len = u32::from_le_bytes(rest[0..4].try_into().unwrap()) as usize;
    let crc = u32::from_le_bytes(rest[4..8].try_into().unwrap());
    let total = HEADER_LEN + len;
    if total > rest.len() {
        return Decoded::Bad(format!("record length {len} runs past end of file"));
    }
    if crc32fast::hash(&rest[8..total]) != crc {
        return Decoded::Bad("record checksum mismatch".into());
    }
    let ty = rest[8];
    let payload_off = off + HEADER_LEN;
    let mut c = Cursor::new(&rest[HEADER_LEN..total]);
    let rec = match ty {
        TYPE_ENTRY => decode_entry(seg, payload_off, &mut c).map(Record::Entry),
        TYPE_HARD_STATE => (|| {
            let mut hs = HardState::default();
            hs.term = c.u64()?;
            hs.vote = c.u64()?;
            hs.commit = c.u64()?;
            Some(hs)
        })()
        .map(Record::HardState),
        TYPE_CONF_STATE => get_conf_state(&mut c).map(Record::ConfState),
        other => return Decoded::Bad(format!("unknown record type {other}")),
    };
    match rec {
        Some(r) if c.pos == len => Decoded::Record(r, total),
        _ => Decoded::Bad(format!("malformed payload for record type {ty}")),
    }
}

fn decode_entry(seg: &Bytes, payload_off: usize, c: &mut Cursor<'_>) -> Option<Entry> {
    let mut e = Entry::default();
    e.term = c.u64()?;
    e.index = c.u64()?;
    e.set_entry_type(entry_type_from(c.u8()?)?);
    let ctx_len = c.u32()? as usize;
    let ctx_start = c.pos;
    c.take(ctx_len)?;
    let data_start = c.pos;
    let end = c.buf.len();
    c.pos = end;
    e.context = seg.slice(payload_off + ctx_start..payload_off + data_start);
    e.data = seg.slice(payload_off + data_start..payload_off + end);
    Some(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let mut buf = Vec::new();
        let mut e = Entry::default();
        e.term = 3;
        e.index = 7;
        e.context = Bytes::from_static(b"ctx");
        e.data = Bytes::from_static(b"hello");
        encode_entry(&mut buf, &e);
        let mut hs = HardState::default();
        hs.term = 3;
        hs.commit = 7;
        encode_hard_state(&mut buf, &hs);
        let first_len = HEADER_LEN + ENTRY_FIXED + 3 + 5;
        buf.extend_from_slice(&[0u8; 32]);
        let seg = Bytes::from(buf.clone());
        match decode(&seg, 0) {
            Decoded::Record(Record::Entry(d), n) => {
                assert_eq!(n, first_len);
                assert_eq!((d.term, d.index), (3, 7));
                assert_eq!(&d.context[..], b"ctx");
                assert_eq!(&d.data[..], b"hello");
            }
            other => panic!("{other:?}"),
        }
        match decode(&seg, first_len) {
            Decoded::Record(Record::HardState(d), n) => {
                assert_eq!(d, hs);
                assert_eq!(n, HEADER_LEN + 24);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(decode(&seg, first_len + HEADER_LEN + 24), Decoded::End));
        buf[12] ^= 0xff;
        assert!(matches!(decode(&Bytes::from(buf), 0), Decoded::Bad(_)));
    }
}
