//! The fast path of `extract`: the same plan walked over the bytes by a small JSON scanner
//! instead of serde visitors, filling the same slots, or declining.
//!
//! It answers only when it is sure the result is the serde walk's, and declines (None) on
//! anything else; `extract` then runs the serde walk from scratch. So it never has to decide
//! what an invalid document yields, only to recognise a subset of the valid ones:
//!
//! - structure: the JSON grammar, whitespace as serde_json has it (space, tab, CR, LF); a
//!   trailing comma, a missing colon, garbage after the value, truncation: declined;
//! - UTF-8: outside strings only ASCII passes the grammar; a string holding a byte >= 0x80 has
//!   its contents checked (`str::from_utf8`), so every byte of an answered document is checked;
//! - strings: a control character (below 0x20) declines; the simple escapes (`\" \\ \/ \b \f \n
//!   \r \t`) are checked here; a string with a `\u` escape is checked by serde_json itself (the
//!   string's bytes through `Skip`: hex digits, surrogate pairs, lone surrogates), and any string
//!   whose text is needed (a key on the plan, a label) and holds a backslash is unescaped by it;
//! - numbers: the JSON grammar here; one with an exponent or longer than `MAX_NUMBER` bytes
//!   (`1e999`, 400 digits: out of range for an f64) goes through serde_json (`Skip`);
//! - nesting: deeper than `MAX_DEPTH` containers declines (serde_json fails at 128);
//! - a member repeated on the plan (`Value` keeps the last one, the serde walk forgets what the
//!   earlier one recorded) declines; repeated labels are resolved by the same `last_strings`;
//! - a spec's leaf is found by the scanner and built from its bytes: a string (unescaped as
//!   above), `null`, `true`, `false` directly, anything else by serde_json from the slice (its
//!   depth is bounded by the scanner), so `format` sees the same `Value`.

use std::borrow::Cow;

use serde_json::Value;

use super::{Plan, Skip, Slot, Step};

/// Containers open at once beyond which the scanner declines (serde_json fails at 128).
const MAX_DEPTH: usize = 100;

/// Number length (bytes) up to which a number without exponent is surely in range.
const MAX_NUMBER: usize = 64;

/// Fills `slots` exactly as the serde walk over `bytes` would, or returns None (then `slots`
/// may hold anything). `slots` must start all `Absent`.
pub(super) fn walk(bytes: &[u8], plan: &Plan<'_>, slots: &mut [Slot]) -> Option<()> {
    let mut scan = Scan { bytes, pos: ws(bytes, 0) };
    scan.node(plan, slots, 0, 0)?;
    (ws(bytes, scan.pos) == bytes.len()).then_some(())
}

/// The index of the first byte from `at` on that is not JSON whitespace.
#[inline(always)]
fn ws(bytes: &[u8], mut at: usize) -> usize {
    if bytes.get(at).is_some_and(|&b| b > b' ') {
        return at; // compact JSON: no whitespace at all
    }
    while let Some(b' ' | b'\n' | b'\t' | b'\r') = bytes.get(at) {
        at += 1;
    }
    at
}

/// The bytes of `word` (eight, little-endian) that end the plain (ASCII, unescaped) run of a
/// string: `"`, `\`, a control character or a byte >= 0x80, flagged by their high bit. In each
/// mask the lowest flagged byte is a true match (a borrow only flags bytes above one), so the
/// lowest flag of their union is the first such byte.
#[inline(always)]
fn stops(word: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let zero = |x: u64| x.wrapping_sub(ONES) & !x;
    let (quote, backslash) = (ONES * u64::from(b'"'), ONES * u64::from(b'\\'));
    (zero(word ^ quote) | zero(word ^ backslash) | word.wrapping_sub(ONES * 0x20) | word) & 0x8080_8080_8080_8080
}

/// A string token: `start..end` covers the quotes.
#[derive(Clone, Copy)]
struct Str {
    start: usize,
    end: usize,
    escaped: bool,
}

/// The string whose opening quote is at `start`. Inline for the common case (plain ASCII, seen
/// eight bytes a step); the rest is `string_slow`.
#[inline(always)]
fn string(bytes: &[u8], start: usize) -> Option<Str> {
    let mut at = start + 1;
    while let Some(chunk) = bytes.get(at..at + 8) {
        let word = u64::from_le_bytes(chunk.try_into().unwrap_or_default());
        let stop = stops(word);
        if stop != 0 {
            let bit = stop.trailing_zeros() & !7;
            if (word >> bit) as u8 == b'"' {
                return Some(Str { start, end: at + (bit / 8) as usize + 1, escaped: false });
            }
            break;
        }
        at += 8;
    }
    string_slow(bytes, start)
}

/// `string` byte by byte from the opening quote: escapes, non-ASCII text, the document's end.
#[cold]
#[inline(never)]
fn string_slow(bytes: &[u8], start: usize) -> Option<Str> {
    let (mut at, mut escaped, mut unicode, mut high) = (start + 1, false, false, false);
    loop {
        match *bytes.get(at)? {
            b'"' => break,
            b'\\' => {
                escaped = true;
                match bytes.get(at + 1)? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                    b'u' => unicode = true,
                    _ => return None,
                }
                at += 2;
            }
            0x80.. => {
                high = true;
                at += 1;
            }
            0x20.. => at += 1,
            _ => return None, // a control character
        }
    }
    let s = Str { start, end: at + 1, escaped };
    if high {
        std::str::from_utf8(&bytes[start + 1..at]).ok()?;
    }
    if unicode {
        // Hex digits, surrogate pairs, lone surrogates: as serde_json checks them.
        serde_json::from_slice::<Skip>(&bytes[start..s.end]).ok()?;
    }
    Some(s)
}

/// A member's key at `at` (after whitespace) and its colon: the key, and where its value
/// starts, whitespace included. The whitespace checks come after the expected byte's, since
/// stored JSON is compact.
#[inline(always)]
fn key(bytes: &[u8], mut at: usize) -> Option<(Str, usize)> {
    if bytes.get(at) != Some(&b'"') {
        at = ws(bytes, at);
        if bytes.get(at) != Some(&b'"') {
            return None;
        }
    }
    let key = string(bytes, at)?;
    let mut colon = key.end;
    if bytes.get(colon) != Some(&b':') {
        colon = ws(bytes, colon);
        if bytes.get(colon) != Some(&b':') {
            return None;
        }
    }
    Some((key, colon + 1))
}

fn literal(bytes: &[u8], at: usize, word: &[u8]) -> Option<usize> {
    let end = at + word.len();
    (bytes.get(at..end)? == word).then_some(end)
}

fn digits(bytes: &[u8], mut at: usize) -> usize {
    while let Some(b'0'..=b'9') = bytes.get(at) {
        at += 1;
    }
    at
}

/// The end of the number at `at`: `-`? (`0` | [1-9][0-9]*) (`.` [0-9]+)? ([eE] [+-]? [0-9]+)?
fn number(bytes: &[u8], start: usize) -> Option<usize> {
    let mut at = start + usize::from(bytes[start] == b'-');
    at = match bytes.get(at)? {
        b'0' => at + 1,
        b'1'..=b'9' => digits(bytes, at + 1),
        _ => return None,
    };
    if bytes.get(at) == Some(&b'.') {
        let end = digits(bytes, at + 1);
        if end == at + 1 {
            return None;
        }
        at = end;
    }
    let mut exponent = false;
    if let Some(b'e' | b'E') = bytes.get(at) {
        exponent = true;
        at += 1;
        if let Some(b'+' | b'-') = bytes.get(at) {
            at += 1;
        }
        let end = digits(bytes, at);
        if end == at {
            return None;
        }
        at = end;
    }
    if exponent || at - start > MAX_NUMBER {
        // Range: serde_json's own number parser decides (1e999 fails, 1e-999 is 0).
        serde_json::from_slice::<Skip>(&bytes[start..at]).ok()?;
    }
    Some(at)
}

/// The end of any value at `at` (enclosed by `depth` containers), checked as the module docs
/// say. A loop rather than recursion: `closers` holds the closing bracket of each container
/// opened here.
fn skip(bytes: &[u8], mut at: usize, depth: usize) -> Option<usize> {
    let mut closers = [0u8; MAX_DEPTH];
    let mut open = 0;
    loop {
        // At a value.
        match *bytes.get(at)? {
            b' ' | b'\n' | b'\t' | b'\r' => {
                at += 1;
                continue;
            }
            b'"' => at = string(bytes, at)?.end,
            b @ (b'{' | b'[') if bytes.get(at + 1) == Some(&(b + 2)) && depth + open < MAX_DEPTH => at += 2, // `{}`, `[]`
            b @ (b'{' | b'[') => {
                let closer = b + 2; // '}' or ']'
                *closers.get_mut(depth + open..)?.first_mut()? = closer; // declines at MAX_DEPTH
                open += 1;
                at = ws(bytes, at + 1);
                if *bytes.get(at)? != closer {
                    if closer == b'}' {
                        at = key(bytes, at)?.1;
                    }
                    continue;
                }
                at += 1;
                open -= 1;
            }
            b'-' | b'0'..=b'9' => at = number(bytes, at)?,
            b'n' => at = literal(bytes, at, b"null")?,
            b't' => at = literal(bytes, at, b"true")?,
            b'f' => at = literal(bytes, at, b"false")?,
            _ => return None,
        }
        // After a value: close containers until a comma leads to the next value.
        loop {
            if open == 0 {
                return Some(at);
            }
            let closer = closers[depth + open - 1];
            match *bytes.get(at)? {
                b',' if closer == b'}' => {
                    at = key(bytes, at + 1)?.1;
                    break;
                }
                b',' => {
                    at += 1;
                    break;
                }
                b' ' | b'\n' | b'\t' | b'\r' => at += 1,
                b if b == closer => {
                    at += 1;
                    open -= 1;
                }
                _ => return None,
            }
        }
    }
}

struct Scan<'b> {
    bytes: &'b [u8],
    pos: usize,
}

impl<'b> Scan<'b> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip(&mut self, depth: usize) -> Option<()> {
        self.pos = match self.peek()? {
            b'"' => string(self.bytes, self.pos)?.end, // the common case, without a call
            _ => skip(self.bytes, self.pos, depth)?,
        };
        Some(())
    }

    /// The value at plan node `id`, enclosed by `depth` containers: its slot as `NodeSeed` fills it.
    fn node(&mut self, plan: &Plan<'_>, slots: &mut [Slot], id: usize, depth: usize) -> Option<()> {
        if !matches!(slots[id], Slot::Absent) {
            return None; // a repeated member on the plan: the serde walk settles it
        }
        let node = &plan.nodes[id];
        let slot = if node.value {
            Slot::Value(self.value(depth)?)
        } else if node.labels && self.peek()? == b'{' {
            Slot::Labels(self.labels(depth)?)
        } else {
            match self.peek()? {
                b'{' if !node.labels => {
                    self.members(depth, |scan, key| {
                        let key = scan.key_text(key)?;
                        let mut child = plan.nodes[id].first_child;
                        while child != 0 && !matches!(plan.nodes[child].step, Step::Key(k) if k.as_bytes() == &*key) {
                            child = plan.nodes[child].next_sibling;
                        }
                        match child {
                            0 => scan.skip(depth + 1),
                            _ => scan.node(plan, slots, child, depth + 1),
                        }
                    })?;
                    Slot::Object
                }
                b'[' if !node.labels => {
                    self.items(depth, b']', |scan, i| match plan.child(id, Step::Index(i)) {
                        Some(child) => scan.node(plan, slots, child, depth + 1),
                        None => scan.skip(depth + 1),
                    })?;
                    Slot::Array
                }
                b'[' => self.skip(depth).map(|()| Slot::Array)?,
                _ => self.skip(depth).map(|()| Slot::Scalar)?,
            }
        };
        slots[id] = slot;
        Some(())
    }

    /// A spec's leaf, built as the `Value` a full parse gives.
    fn value(&mut self, depth: usize) -> Option<Value> {
        let start = self.pos;
        if self.peek()? == b'"' {
            let s = string(self.bytes, start)?;
            self.pos = s.end;
            return Some(Value::String(self.text(s)?.into_owned()));
        }
        self.skip(depth)?;
        let token = &self.bytes[start..self.pos];
        match token {
            b"null" => Some(Value::Null),
            b"true" => Some(Value::Bool(true)),
            b"false" => Some(Value::Bool(false)),
            _ => serde_json::from_slice(token).ok(),
        }
    }

    /// `metadata.labels` as an object: every member, the value kept when it is a string.
    fn labels(&mut self, depth: usize) -> Option<Vec<(String, Option<String>)>> {
        let mut members = Vec::new();
        self.members(depth, |scan, key| {
            let key = scan.text(key)?.into_owned();
            let value = match scan.peek()? {
                b'"' => {
                    let s = string(scan.bytes, scan.pos)?;
                    scan.pos = s.end;
                    Some(scan.text(s)?.into_owned())
                }
                _ => {
                    scan.skip(depth + 1)?;
                    None
                }
            };
            members.push((key, value));
            Some(())
        })?;
        Some(members)
    }

    /// An object at `pos` (enclosed by `depth` containers): `member` is called with each key,
    /// positioned at the value, which it consumes.
    fn members(&mut self, depth: usize, mut member: impl FnMut(&mut Self, Str) -> Option<()>) -> Option<()> {
        self.items(depth, b'}', |scan, _| {
            let (k, value) = key(scan.bytes, scan.pos)?;
            scan.pos = ws(scan.bytes, value);
            member(scan, k)
        })
    }

    /// A container at `pos` (enclosed by `depth` containers) that `closer` ends: `item` is
    /// called with each index, positioned at the item (a member's key, an element), which it
    /// consumes.
    fn items(&mut self, depth: usize, closer: u8, mut item: impl FnMut(&mut Self, usize) -> Option<()>) -> Option<()> {
        if depth >= MAX_DEPTH {
            return None;
        }
        self.pos = ws(self.bytes, self.pos + 1);
        if self.peek()? == closer {
            self.pos += 1;
            return Some(());
        }
        for i in 0.. {
            item(self, i)?;
            self.pos = ws(self.bytes, self.pos);
            match self.peek()? {
                b',' => self.pos = ws(self.bytes, self.pos + 1),
                b if b == closer => {
                    self.pos += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
        None
    }

    /// A string's text, unescaped as serde_json does it.
    fn text(&self, s: Str) -> Option<Cow<'b, str>> {
        if s.escaped {
            serde_json::from_slice::<String>(&self.bytes[s.start..s.end]).ok().map(Cow::Owned)
        } else {
            std::str::from_utf8(&self.bytes[s.start + 1..s.end - 1]).ok().map(Cow::Borrowed)
        }
    }

    /// A key's unescaped bytes (no UTF-8 check needed to compare them with the plan's).
    fn key_text(&self, s: Str) -> Option<Cow<'b, [u8]>> {
        if s.escaped {
            self.text(s).map(|t| Cow::Owned(t.into_owned().into_bytes()))
        } else {
            Some(Cow::Borrowed(&self.bytes[s.start + 1..s.end - 1]))
        }
    }
}
