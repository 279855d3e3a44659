//! The JSON text of key and value path elements, and Go's `%q` for error messages.
//!
//! A key element (`k:{"containerPort":80,"protocol":"TCP"}`) or a set element (`v:"a"`) keeps
//! the JSON text of its value so that equal items are equal elements. The text is the one
//! kubecore.api.managedfields.canon() writes: object members sorted by name (by code point, which
//! is UTF-8 byte order), no whitespace, numbers exactly as the input wrote them, strings escaped
//! as msgspec does (`\"`, `\\`, `\b \t \n \f \r`, other control characters as `\u00XX`) and then
//! as Go's encoding/json does on top (`<` `>` `&` as `\u003c` `\u003e` `\u0026`, U+2028 and U+2029
//! as `\u2028` `\u2029`). Worked example:
//!
//! ```
//! use kubecore_fieldpath::{canon, json};
//! let v = json::parse(br#"{"port": 80, "name": "a<b", "z": [1.0, null]}"#).unwrap();
//! let mut out = String::new();
//! canon::write(&v, &mut out);
//! assert_eq!(out, r#"{"name":"a\u003cb","port":80,"z":[1.0,null]}"#);
//! assert_eq!(canon::go_quote("a\"b\x01"), r#""a\"b\x01""#);
//! ```

use std::fmt::Write;

use crate::json::Value;

/// Appends the canonical JSON text of `v`.
pub fn write(v: &Value<'_>, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(t) | Value::Float(t) => out.push_str(t),
        Value::Str(s) => write_str(s, out),
        Value::List(items) => {
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(x, out);
            }
            out.push(']');
        }
        Value::Map(members) => {
            // reversed before the stable sort: of repeated names the last wins, as in a Python dict
            let mut sorted: Vec<&(_, Value<'_>)> = members.iter().rev().collect();
            sorted.sort_by(|a, b| a.0.cmp(&b.0));
            sorted.dedup_by(|later, earlier| later.0 == earlier.0);
            out.push('{');
            for (i, (k, x)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_str(k, out);
                out.push(':');
                write(x, out);
            }
            out.push('}');
        }
    }
}

/// The canonical JSON text of `v`.
pub fn to_string(v: &Value<'_>) -> String {
    let mut out = String::new();
    write(v, &mut out);
    out
}

/// Appends a JSON string literal with msgspec's escapes plus Go's HTML and line-separator escapes.
pub fn write_str(s: &str, out: &mut String) {
    out.push('"');
    let b = s.as_bytes();
    let mut run = 0;
    let mut i = 0;
    while i < b.len() {
        let (esc, width): (&str, usize) = match b[i] {
            b'"' => ("\\\"", 1),
            b'\\' => ("\\\\", 1),
            0x08 => ("\\b", 1),
            b'\t' => ("\\t", 1),
            b'\n' => ("\\n", 1),
            0x0c => ("\\f", 1),
            b'\r' => ("\\r", 1),
            b'<' => ("\\u003c", 1),
            b'>' => ("\\u003e", 1),
            b'&' => ("\\u0026", 1),
            c if c < 0x20 => ("", 1),
            // U+2028 and U+2029 are E2 80 A8 and E2 80 A9 in UTF-8
            0xE2 if b.get(i + 1) == Some(&0x80) && b.get(i + 2) == Some(&0xA8) => ("\\u2028", 3),
            0xE2 if b.get(i + 1) == Some(&0x80) && b.get(i + 2) == Some(&0xA9) => ("\\u2029", 3),
            _ => {
                i += 1;
                continue;
            }
        };
        out.push_str(&s[run..i]);
        if esc.is_empty() {
            let _ = write!(out, "\\u{:04x}", b[i]);
        } else {
            out.push_str(esc);
        }
        i += width;
        run = i;
    }
    out.push_str(&s[run..]);
    out.push('"');
}

/// kubecore.api.errors.go_quote: `"`-quoted with `\"`, `\\`, `\n`, `\t`, `\r`, `\xNN` for
/// other ASCII control characters and DEL, and `\uNNNN` for the C1 controls (as Go's %q).
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse;

    #[test]
    fn go_quote_escapes_control_characters_as_go() {
        assert_eq!(go_quote("a\"b\\c\n\u{1}\u{7f}\u{85}é"), "\"a\\\"b\\\\c\\n\\x01\\x7f\\u0085é\"");
    }

    #[test]
    fn escapes_as_msgspec_then_go() {
        let all: String = (0u32..0x20).filter_map(char::from_u32).collect::<String>() + "\u{7f}\u{2028}\u{2029}é\"\\<>&";
        let mut out = String::new();
        write_str(&all, &mut out);
        let want = concat!(
            r#""\u0000\u0001\u0002\u0003\u0004\u0005\u0006\u0007\b\t\n\u000b\f\r\u000e\u000f"#,
            r#"\u0010\u0011\u0012\u0013\u0014\u0015\u0016\u0017\u0018\u0019\u001a\u001b\u001c\u001d\u001e\u001f"#,
            "\u{7f}", r#"\u2028\u2029"#, "é", r#"\"\\\u003c\u003e\u0026""#
        );
        assert_eq!(out, want);
    }

    #[test]
    fn sorts_members_and_keeps_numbers() {
        let v = parse(br#"{"b":{"y":1e16,"x":-0},"a":[{"d":true,"c":"\u00e9"}], "\u00e9":1, "z":2}"#).unwrap();
        assert_eq!(to_string(&v), "{\"a\":[{\"c\":\"é\",\"d\":true}],\"b\":{\"x\":-0,\"y\":1e16},\"z\":2,\"é\":1}");
    }
}
