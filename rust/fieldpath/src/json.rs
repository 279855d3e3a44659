//! A JSON value that borrows from its input, and the equality Python's `==` gives decoded JSON.
//!
//! The walkers need three things serde_json's `Value` does not keep: object members in their
//! original order (the walk order decides which error is reported first), the exact text of
//! every number (a key element writes it back unchanged, as the encoder that produced the input
//! did: `1.0` stays `1.0`, `18446744073709551616` stays exact), and strings without a copy.
//!
//! Types follow Python's view of decoded JSON: a number without `.`, `e` or `E` is an int,
//! otherwise a float; `true` is also the int 1 when compared (`True == 1 == 1.0`).

use std::borrow::Cow;
use std::collections::HashMap;

use crate::Error;

/// Deeper nesting than this is refused (the Python walkers hit their recursion limit earlier).
pub const MAX_DEPTH: usize = 1000;
/// Objects with more members than this are looked up through a hash map.
const LINEAR_LOOKUP: usize = 16;

#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    Null,
    Bool(bool),
    /// An integer, as written (arbitrary size).
    Int(&'a str),
    /// A float, as written.
    Float(&'a str),
    Str(Cow<'a, str>),
    List(Vec<Value<'a>>),
    /// Members in input order.
    Map(Vec<(Cow<'a, str>, Value<'a>)>),
}

impl Value<'_> {
    /// Python's truthiness of an empty container (`not v` for a dict or list).
    pub fn is_empty_container(&self) -> bool {
        matches!(self, Value::List(l) if l.is_empty()) || matches!(self, Value::Map(m) if m.is_empty())
    }

    fn tag(&self) -> u8 {
        match self {
            Value::Null => 0,
            Value::Bool(_) => 1,
            Value::Int(_) => 2,
            Value::Float(_) => 3,
            Value::Str(_) => 4,
            Value::List(_) => 5,
            Value::Map(_) => 6,
        }
    }
}

/// Parses one JSON document (surrounding whitespace allowed).
pub fn parse(input: &[u8]) -> Result<Value<'_>, Error> {
    let text = std::str::from_utf8(input).map_err(|e| Error::Json(format!("invalid UTF-8: {e}")))?;
    let mut p = Parser { s: text, b: input, pos: 0, depth: 0, error: None };
    let parsed = p.value().and_then(|v| {
        p.ws();
        if p.pos == p.b.len() {
            Ok(v)
        } else {
            Err(p.err("trailing data"))
        }
    });
    parsed.map_err(|Failed| p.error.take().unwrap_or(Error::TooDeep))
}

/// A parse failed; the parser holds the error (keeps the parser's results one word smaller).
struct Failed;

struct Parser<'a> {
    s: &'a str,
    b: &'a [u8],
    pos: usize,
    depth: usize,
    error: Option<Error>,
}

impl<'a> Parser<'a> {
    #[cold]
    fn err(&mut self, what: &str) -> Failed {
        self.error = Some(Error::Json(format!("{what} at byte {}", self.pos)));
        Failed
    }

    fn ws(&mut self) {
        let skipped = self.b[self.pos..].iter().take_while(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r')).count();
        self.pos += skipped;
    }

    fn literal(&mut self, word: &str, v: Value<'a>) -> Result<Value<'a>, Failed> {
        if self.b[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(v)
        } else {
            Err(self.err("invalid literal"))
        }
    }

    fn value(&mut self) -> Result<Value<'a>, Failed> {
        self.ws();
        match self.b.get(self.pos) {
            None => Err(self.err("unexpected end of input")),
            Some(b'{') => self.nested(Self::map),
            Some(b'[') => self.nested(Self::list),
            Some(b'"') => Ok(Value::Str(self.string()?)),
            Some(b't') => self.literal("true", Value::Bool(true)),
            Some(b'f') => self.literal("false", Value::Bool(false)),
            Some(b'n') => self.literal("null", Value::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.err("unexpected character")),
        }
    }

    fn nested(&mut self, f: fn(&mut Self) -> Result<Value<'a>, Failed>) -> Result<Value<'a>, Failed> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            self.error = Some(Error::TooDeep);
            return Err(Failed);
        }
        self.pos += 1;
        let v = f(self)?;
        self.depth -= 1;
        Ok(v)
    }

    fn map(&mut self) -> Result<Value<'a>, Failed> {
        let mut out = Vec::with_capacity(4);
        self.ws();
        if self.b.get(self.pos) == Some(&b'}') {
            self.pos += 1;
            return Ok(Value::Map(out));
        }
        loop {
            self.ws();
            if self.b.get(self.pos) != Some(&b'"') {
                return Err(self.err("expected a member name"));
            }
            let k = self.string()?;
            self.ws();
            if self.b.get(self.pos) != Some(&b':') {
                return Err(self.err("expected ':'"));
            }
            self.pos += 1;
            out.push((k, self.value()?));
            self.ws();
            match self.b.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Value::Map(out));
                }
                _ => return Err(self.err("expected ',' or '}'")),
            }
        }
    }

    fn list(&mut self) -> Result<Value<'a>, Failed> {
        let mut out = Vec::new();
        self.ws();
        if self.b.get(self.pos) == Some(&b']') {
            self.pos += 1;
            return Ok(Value::List(out));
        }
        loop {
            out.push(self.value()?);
            self.ws();
            match self.b.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Value::List(out));
                }
                _ => return Err(self.err("expected ',' or ']'")),
            }
        }
    }

    fn number(&mut self) -> Result<Value<'a>, Failed> {
        let start = self.pos;
        let mut float = false;
        if self.b[self.pos] == b'-' {
            self.pos += 1;
        }
        let digits = |p: &mut Self| {
            let s = p.pos;
            while p.pos < p.b.len() && p.b[p.pos].is_ascii_digit() {
                p.pos += 1;
            }
            p.pos > s
        };
        if !digits(self) {
            return Err(self.err("invalid number"));
        }
        if self.b.get(self.pos) == Some(&b'.') {
            self.pos += 1;
            float = true;
            if !digits(self) {
                return Err(self.err("invalid number"));
            }
        }
        if matches!(self.b.get(self.pos), Some(b'e' | b'E')) {
            self.pos += 1;
            float = true;
            if matches!(self.b.get(self.pos), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if !digits(self) {
                return Err(self.err("invalid number"));
            }
        }
        let text = &self.s[start..self.pos];
        Ok(if float { Value::Float(text) } else { Value::Int(text) })
    }

    fn string(&mut self) -> Result<Cow<'a, str>, Failed> {
        let start = self.pos + 1; // after the opening quote
        match self.b[start..].iter().position(|&c| c == b'"' || c == b'\\') {
            Some(n) if self.b[start + n] == b'"' => {
                self.pos = start + n + 1;
                Ok(Cow::Borrowed(&self.s[start..start + n]))
            }
            Some(n) => {
                self.pos = start + n;
                self.escaped(start).map(Cow::Owned)
            }
            None => {
                self.pos = self.b.len();
                Err(self.err("unterminated string"))
            }
        }
    }

    fn escaped(&mut self, start: usize) -> Result<String, Failed> {
        let mut out = String::from(&self.s[start..self.pos]);
        loop {
            let run = self.pos;
            while self.pos < self.b.len() && !matches!(self.b[self.pos], b'"' | b'\\') {
                self.pos += 1;
            }
            out.push_str(&self.s[run..self.pos]);
            match self.b.get(self.pos) {
                None => return Err(self.err("unterminated string")),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(_) => {
                    let c = *self.b.get(self.pos + 1).ok_or_else(|| self.err("unterminated string"))?;
                    self.pos += 2;
                    match c {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => out.push(self.unicode()?),
                        _ => return Err(self.err("invalid escape")),
                    }
                }
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, Failed> {
        let h = self.s.get(self.pos..self.pos + 4).ok_or_else(|| self.err("invalid \\u escape"))?;
        let v = u32::from_str_radix(h, 16).map_err(|_| self.err("invalid \\u escape"))?;
        self.pos += 4;
        Ok(v)
    }

    fn unicode(&mut self) -> Result<char, Failed> {
        let hi = self.hex4()?;
        let code = if (0xD800..0xDC00).contains(&hi) {
            if !self.b[self.pos..].starts_with(b"\\u") {
                return Err(self.err("lone surrogate"));
            }
            self.pos += 2;
            let lo = self.hex4()?;
            if !(0xDC00..0xE000).contains(&lo) {
                return Err(self.err("lone surrogate"));
            }
            0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
        } else {
            hi
        };
        char::from_u32(code).ok_or_else(|| self.err("lone surrogate"))
    }
}

// ---- Python's equality ---------------------------------------------------------------------------

enum Num<'a> {
    Int(i128),
    /// An int too large for i128, in its canonical decimal text.
    Big(&'a str),
    Float(f64),
}

fn num<'a>(v: &Value<'a>) -> Option<Num<'a>> {
    match v {
        Value::Bool(b) => Some(Num::Int(i128::from(*b))),
        Value::Int(t) => Some(t.parse::<i128>().map_or(Num::Big(t), Num::Int)),
        Value::Float(t) => t.parse::<f64>().ok().map(Num::Float),
        _ => None,
    }
}

/// Python compares an int and a float exactly (2**53 + 1 != 2.0**53).
fn int_float_eq(i: &Num<'_>, f: f64) -> bool {
    if !f.is_finite() || f.fract() != 0.0 {
        return false;
    }
    match i {
        Num::Int(i) if f.abs() < 1e38 => (f as i128) == *i,
        Num::Int(i) => format!("{f:.0}") == i.to_string(),
        Num::Big(t) => format!("{f:.0}") == *t,
        Num::Float(_) => false,
    }
}

fn num_eq(a: &Num<'_>, b: &Num<'_>) -> bool {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => x == y,
        (Num::Big(x), Num::Big(y)) => x == y,
        (Num::Float(x), Num::Float(y)) => x == y,
        (Num::Float(f), i) | (i, Num::Float(f)) => int_float_eq(i, *f),
        _ => false,
    }
}

/// A member of an object (the last one when a name repeats, as a Python dict keeps it).
pub fn member<'v, 'a>(m: &'v [(Cow<'a, str>, Value<'a>)], name: &str) -> Option<&'v Value<'a>> {
    m.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v)
}

/// Looks members up by name: a scan for small objects, a hash map for large ones.
pub struct Members<'v, 'a> {
    items: &'v [(Cow<'a, str>, Value<'a>)],
    index: Option<HashMap<&'v str, &'v Value<'a>>>,
}

impl<'v, 'a> Members<'v, 'a> {
    pub fn new(items: &'v [(Cow<'a, str>, Value<'a>)]) -> Self {
        let index = (items.len() > LINEAR_LOOKUP).then(|| items.iter().map(|(k, v)| (k.as_ref(), v)).collect());
        Members { items, index }
    }

    pub fn get(&self, name: &str) -> Option<&'v Value<'a>> {
        match &self.index {
            Some(ix) => ix.get(name).copied(),
            None => member(self.items, name),
        }
    }
}

/// Python's `a == b` for decoded JSON: numbers (and bools) by value, dicts regardless of order.
pub fn py_eq(a: &Value<'_>, b: &Value<'_>) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Str(x), Value::Str(y)) => x == y,
        (Value::List(x), Value::List(y)) => x.len() == y.len() && x.iter().zip(y).all(|(v, w)| py_eq(v, w)),
        (Value::Map(x), Value::Map(y)) => {
            let ys = Members::new(y);
            x.len() == y.len() && x.iter().all(|(k, v)| ys.get(k).is_some_and(|w| py_eq(v, w)))
        }
        _ => match (num(a), num(b)) {
            (Some(x), Some(y)) => num_eq(&x, &y),
            _ => false,
        },
    }
}

/// `type(a) is type(b) and a == b`: the test that skips a whole equal subtree.
pub fn same(a: &Value<'_>, b: &Value<'_>) -> bool {
    a.tag() == b.tag() && py_eq(a, b)
}

/// A leaf's equality: `a == b` and both or neither are bools (True is not 1 here).
pub fn leaf_eq(a: &Value<'_>, b: &Value<'_>) -> bool {
    matches!(a, Value::Bool(_)) == matches!(b, Value::Bool(_)) && py_eq(a, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_text_and_borrows() {
        let v = parse(br#"{"b": 1.0, "a": [true, null, -0, 1e16], "c\u00e9": "x\ny"}"#).unwrap();
        let Value::Map(m) = &v else { panic!() };
        assert_eq!(m[0].0, "b");
        assert!(matches!(m[0].0, Cow::Borrowed(_)));
        assert_eq!(m[0].1, Value::Float("1.0"));
        assert_eq!(m[1].1, Value::List(vec![Value::Bool(true), Value::Null, Value::Int("-0"), Value::Float("1e16")]));
        assert_eq!(m[2].0, "cé");
        assert_eq!(m[2].1, Value::Str(Cow::Owned("x\ny".into())));
        assert!(parse(b"[1,]").is_err());
        assert!(parse(br#""\ud800""#).is_err());
        assert_eq!(parse(br#""\ud83d\ude00""#).unwrap(), Value::Str("😀".into()));
    }

    #[test]
    fn python_equality() {
        let eq = |a: &str, b: &str| py_eq(&parse(a.as_bytes()).unwrap(), &parse(b.as_bytes()).unwrap());
        assert!(eq("1", "1.0"));
        assert!(eq("true", "1"));
        assert!(eq("-0.0", "0"));
        assert!(!eq("9007199254740993", "9007199254740992.0"));
        assert!(eq("18446744073709551616", "1.8446744073709552e19"));
        assert!(eq(r#"{"a":[true],"b":null}"#, r#"{"b":null,"a":[1]}"#));
        assert!(!eq(r#"{"a":1}"#, r#"{"a":1,"b":2}"#));
        assert!(!eq("null", "0"));
        assert!(!eq(r#""1""#, "1"));
        fn p(s: &str) -> Value<'_> {
            parse(s.as_bytes()).unwrap()
        }
        assert!(!same(&p("1"), &p("1.0")));
        assert!(!leaf_eq(&p("true"), &p("1")));
        assert!(leaf_eq(&p("1"), &p("1.0")));
    }

    #[test]
    fn refuses_deep_nesting() {
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert!(matches!(parse(deep.as_bytes()), Err(Error::TooDeep)));
        let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(parse(ok.as_bytes()).is_ok());
    }
}
