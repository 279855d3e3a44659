//! One cached object: its stored bytes plus what selectors look at (labels, selectable fields).
//!
//! The store keeps an object's JSON with `metadata` first and without `resourceVersion` (the API
//! server's `storage.encode` layout); the resourceVersion a client sees is the key's mod revision,
//! spliced in as the first field of `metadata` when the bytes are written out (storage.py
//! `with_rv`). Worked example, revision 7:
//!
//! ```text
//! stored   {"metadata":{"name":"a"},"spec":{}}
//! client   {"metadata":{"resourceVersion":"7","name":"a"},"spec":{}}
//! ```
//!
//! Bytes in any other layout are re-encoded into that one once, when the entry is built.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::extract;

/// Shared immutable bytes (the store's own `Bytes`: no copy of keys or values).
pub type Bytes = Arc<[u8]>;

const META_FIRST: &[u8] = br#"{"metadata":{"#;

/// One step of a JSON path: an object member or an array element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// How a field value is written (Go's fmt of the field's type; a missing value is the zero value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fmt {
    /// A string field: missing -> "", bools "true"/"false", numbers in decimal.
    Str,
    /// An integer field: an integer in decimal, anything else "0".
    Int,
    /// A boolean field: "true" only for JSON `true`.
    Bool,
    /// A string read from the first path whose value (formatted as `Str`) is not empty, "" when
    /// none is: upstream's "source.component, or reportingController when that is empty".
    FirstStr,
}

/// One selectable field of a kind: its label, format and where its value lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldSpec {
    pub label: String,
    pub fmt: Fmt,
    /// Alternatives, tried in order: the first whose parent (every segment but the last)
    /// resolves to a JSON object gives the value; the last one always does. This expresses
    /// upstream's "podIPs[0].ip if podIPs is non-empty, else podIP". With `Fmt::FirstStr` the
    /// first non-empty value wins instead.
    pub paths: Vec<Vec<Seg>>,
}

/// An object as the cache holds it. Immutable once built; shared by the object map, the event
/// ring, list snapshots and watcher buffers.
#[derive(Debug)]
pub struct Entry {
    pub key: Bytes,
    /// Stored JSON in the `META_FIRST` layout without resourceVersion (see the module docs),
    /// unless `splice` is false (bytes that are not a JSON object: written as they are).
    value: Bytes,
    splice: bool,
    pub mod_revision: i64,
    /// `metadata.labels` with string values, sorted by key.
    labels: Vec<(String, String)>,
    /// One value per `FieldSpec` of the cache, in spec order.
    fields: Vec<String>,
}

impl Entry {
    /// Builds an entry from stored bytes, extracting labels and the fields of `specs`.
    ///
    /// Bytes already in the stored layout (every write the API server makes) are walked once
    /// without building the document (`extract`); others are parsed whole, to re-encode them.
    pub fn new(key: Bytes, value: Bytes, mod_revision: i64, specs: &[FieldSpec]) -> Self {
        if value.starts_with(META_FIRST) {
            let (labels, fields) = extract::extract(&value, specs);
            return Self { key, value, splice: true, mod_revision, labels, fields };
        }
        let doc: Option<Value> = serde_json::from_slice(&value).ok();
        let obj = doc.as_ref().and_then(Value::as_object);
        let (labels, fields) = extract_from(doc.as_ref(), specs);
        let (value, splice) = match obj {
            Some(o) => (normalize(o), true),
            None => (value, false),
        };
        Self { key, value, splice, mod_revision, labels, fields }
    }

    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.binary_search_by(|(k, _)| k.as_str().cmp(key)).ok().map(|i| self.labels[i].1.as_str())
    }

    /// The value of the cache's `index`-th field spec.
    pub fn field(&self, index: usize) -> &str {
        self.fields.get(index).map_or("", String::as_str)
    }

    /// Bytes `write_json` appends for `revision`.
    pub fn json_len(&self, revision: i64) -> usize {
        if !self.splice {
            return self.value.len();
        }
        let sep = usize::from(self.value.get(META_FIRST.len()) != Some(&b'}'));
        self.value.len() + r#""resourceVersion":"""#.len() + decimal_len(revision) + sep
    }

    /// Appends the object as a client sees it, with `revision` as its resourceVersion.
    pub fn write_json(&self, out: &mut Vec<u8>, revision: i64) {
        if !self.splice {
            out.extend_from_slice(&self.value);
            return;
        }
        let at = META_FIRST.len();
        out.extend_from_slice(&self.value[..at]);
        out.extend_from_slice(br#""resourceVersion":""#);
        push_decimal(out, revision);
        out.push(b'"');
        if self.value.get(at) != Some(&b'}') {
            out.push(b',');
        }
        out.extend_from_slice(&self.value[at..]);
    }
}

/// Labels and fields from a fully parsed document (None: not JSON). `extract::extract` returns
/// the same for the document's bytes; the tests hold it to that.
pub(crate) fn extract_from(doc: Option<&Value>, specs: &[FieldSpec]) -> (Vec<(String, String)>, Vec<String>) {
    let labels = doc.and_then(Value::as_object).map(labels_of).unwrap_or_default();
    (labels, specs.iter().map(|s| field_value(doc, s)).collect())
}

fn labels_of(obj: &Map<String, Value>) -> Vec<(String, String)> {
    let labels = obj.get("metadata").and_then(|m| m.get("labels")).and_then(Value::as_object);
    labels.map(string_members).unwrap_or_default()
}

/// The string-valued members of an object, sorted by key.
pub(crate) fn string_members(obj: &Map<String, Value>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = obj.iter().filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned()))).collect();
    out.sort_unstable();
    out
}

fn field_value(doc: Option<&Value>, spec: &FieldSpec) -> String {
    let Some(doc) = doc else { return format(None, spec.fmt) };
    if spec.fmt == Fmt::FirstStr {
        return spec.paths.iter().map(|p| format(resolve(doc, p), Fmt::Str)).find(|v| !v.is_empty()).unwrap_or_default();
    }
    let last = spec.paths.len().saturating_sub(1);
    for (i, path) in spec.paths.iter().enumerate() {
        let (leaf, parent) = match path.split_last() {
            Some(split) => split,
            None => return format(Some(doc), spec.fmt),
        };
        let parent = resolve(doc, parent).filter(|p| p.is_object());
        if parent.is_none() && i < last {
            continue;
        }
        return format(parent.and_then(|p| step(p, leaf)), spec.fmt);
    }
    format(None, spec.fmt)
}

fn step<'a>(v: &'a Value, seg: &Seg) -> Option<&'a Value> {
    match seg {
        Seg::Key(k) => v.as_object()?.get(k),
        Seg::Index(i) => v.as_array()?.get(*i),
    }
}

fn resolve<'a>(mut v: &'a Value, path: &[Seg]) -> Option<&'a Value> {
    for seg in path {
        v = step(v, seg)?;
    }
    Some(v)
}

/// The fieldsets.py formatting (`_s`, `_i`, `_b`) of one JSON value.
pub(crate) fn format(v: Option<&Value>, fmt: Fmt) -> String {
    match (fmt, v) {
        (Fmt::Bool, Some(Value::Bool(true))) => "true".into(),
        (Fmt::Bool, _) => "false".into(),
        (Fmt::Int, Some(Value::Number(n))) if n.is_i64() || n.is_u64() => n.to_string(),
        (Fmt::Int, _) => "0".into(),
        (Fmt::Str | Fmt::FirstStr, None | Some(Value::Null)) => String::new(),
        (Fmt::Str | Fmt::FirstStr, Some(Value::String(s))) => s.clone(),
        (Fmt::Str | Fmt::FirstStr, Some(Value::Bool(b))) => b.to_string(),
        (Fmt::Str | Fmt::FirstStr, Some(other)) => other.to_string(),
    }
}

/// Re-encodes an object with `metadata` first and without `metadata.resourceVersion`.
fn normalize(obj: &Map<String, Value>) -> Bytes {
    let mut meta = obj.get("metadata").and_then(Value::as_object).cloned().unwrap_or_default();
    meta.remove("resourceVersion");
    let mut out = b"{\"metadata\":".to_vec();
    out.extend_from_slice(&serde_json::to_vec(&Value::Object(meta)).unwrap_or_else(|_| b"{}".to_vec()));
    for (k, v) in obj.iter().filter(|(k, _)| k.as_str() != "metadata") {
        out.push(b',');
        out.extend_from_slice(&serde_json::to_vec(k).unwrap_or_default());
        out.push(b':');
        out.extend_from_slice(&serde_json::to_vec(v).unwrap_or_default());
    }
    out.push(b'}');
    out.into()
}

pub(crate) fn decimal_len(mut n: i64) -> usize {
    let mut len = usize::from(n < 0) + 1;
    while n / 10 != 0 {
        n /= 10;
        len += 1;
    }
    len
}

pub(crate) fn push_decimal(out: &mut Vec<u8>, n: i64) {
    use std::io::Write;
    let _ = write!(out, "{n}");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(label: &str, fmt: Fmt, paths: &[&[Seg]]) -> FieldSpec {
        FieldSpec { label: label.into(), fmt, paths: paths.iter().map(|p| p.to_vec()).collect() }
    }

    fn k(s: &str) -> Seg {
        Seg::Key(s.into())
    }

    fn entry(json: &str, specs: &[FieldSpec]) -> Entry {
        Entry::new(Arc::from(&b"/k"[..]), Arc::from(json.as_bytes()), 7, specs)
    }

    fn client(e: &Entry, rev: i64) -> String {
        let mut out = Vec::new();
        e.write_json(&mut out, rev);
        assert_eq!(out.len(), e.json_len(rev));
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn splices_the_resource_version_as_with_rv_does() {
        let cases = [
            (r#"{"metadata":{"name":"a"},"spec":{}}"#, r#"{"metadata":{"resourceVersion":"7","name":"a"},"spec":{}}"#),
            (r#"{"metadata":{}}"#, r#"{"metadata":{"resourceVersion":"7"}}"#),
            (r#"{"spec":1,"metadata":{"resourceVersion":"3","name":"b"}}"#, r#"{"metadata":{"resourceVersion":"7","name":"b"},"spec":1}"#),
            ("not json", "not json"),
        ];
        for (stored, want) in cases {
            assert_eq!(client(&entry(stored, &[]), 7), want, "{stored}");
        }
    }

    #[test]
    fn labels_are_sorted_and_only_strings() {
        let e = entry(r#"{"metadata":{"labels":{"b":"2","a":"1","n":3}}}"#, &[]);
        assert_eq!(e.label("a"), Some("1"));
        assert_eq!(e.label("b"), Some("2"));
        assert_eq!(e.label("n"), None);
    }

    #[test]
    fn field_formats_follow_fieldsets() {
        let specs = [
            spec("s", Fmt::Str, &[&[k("spec"), k("nodeName")]]),
            spec("b", Fmt::Bool, &[&[k("spec"), k("hostNetwork")]]),
            spec("i", Fmt::Int, &[&[k("status"), k("replicas")]]),
            spec("missing", Fmt::Str, &[&[k("nope"), k("x")]]),
            spec("ip", Fmt::Str, &[&[k("status"), k("podIPs"), Seg::Index(0), k("ip")], &[k("status"), k("podIP")]]),
        ];
        let table = [
            (r#"{"spec":{"nodeName":"n1","hostNetwork":true},"status":{"replicas":3,"podIP":"1.1.1.1"}}"#, ["n1", "true", "3", "", "1.1.1.1"]),
            (r#"{"spec":{"nodeName":5,"hostNetwork":"yes"},"status":{"replicas":3.0,"podIPs":[{"ip":"2.2.2.2"}],"podIP":"x"}}"#, ["5", "false", "0", "", "2.2.2.2"]),
            (r#"{"status":{"podIPs":[{}],"podIP":"x"}}"#, ["", "false", "0", "", ""]),
            (r#"{"status":{"podIPs":[],"podIP":"x"}}"#, ["", "false", "0", "", "x"]),
        ];
        for (json, want) in table {
            let e = entry(json, &specs);
            let got: Vec<&str> = (0..specs.len()).map(|i| e.field(i)).collect();
            assert_eq!(got, want, "{json}");
        }
    }

    #[test]
    fn first_str_takes_the_first_non_empty_value() {
        let specs = [spec("source", Fmt::FirstStr, &[&[k("source"), k("component")], &[k("reportingComponent")]])];
        let table = [
            (r#"{"source":{"component":"kubelet"},"reportingComponent":"x"}"#, "kubelet"),
            (r#"{"source":{"component":""},"reportingComponent":"default-scheduler"}"#, "default-scheduler"),
            (r#"{"source":{},"reportingComponent":"default-scheduler"}"#, "default-scheduler"),
            (r#"{"reportingComponent":"default-scheduler"}"#, "default-scheduler"),
            (r#"{"source":{"component":null}}"#, ""),
            (r#"{"source":"odd","reportingComponent":7}"#, "7"),
        ];
        for (json, want) in table {
            assert_eq!(entry(json, &specs).field(0), want, "{json}");
        }
    }

    #[test]
    fn decimal_len_matches_formatting() {
        for n in [0, 7, 10, 99, 100, 123_456_789, -5, i64::MAX] {
            assert_eq!(decimal_len(n), n.to_string().len(), "{n}");
        }
    }
}
