//! Label and field selectors, evaluated against an `Entry`.
//!
//! Parsing (and its error texts) stays in the API server (kubecore.api.selectors); this side
//! receives already-valid requirements and only matches. Semantics are upstream's:
//! - labels: `=`, `==`, `in` need the key with one of the values; `!=`, `notin` hold when the key
//!   is absent or has none of them; `exists` / `!` test presence; `gt` / `lt` compare int64 values.
//! - fields: `=` (also `==`) and `!=` on the kind's selectable fields; a label the kind does not
//!   extract has the value "".

use crate::entry::{Entry, FieldSpec};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelOp {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
}

impl LabelOp {
    /// Upstream's selection.Operator spelling.
    pub fn parse(op: &str) -> Result<Self, String> {
        Ok(match op {
            "=" | "==" | "in" => Self::In,
            "!=" | "notin" => Self::NotIn,
            "exists" => Self::Exists,
            "!" => Self::DoesNotExist,
            "gt" => Self::Gt,
            "lt" => Self::Lt,
            other => return Err(format!("unknown label selector operator {other:?}")),
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelReq {
    pub key: String,
    pub op: LabelOp,
    pub values: Vec<String>,
}

impl LabelReq {
    pub fn matches(&self, e: &Entry) -> bool {
        let v = e.label(&self.key);
        match self.op {
            LabelOp::In => v.is_some_and(|v| self.values.iter().any(|x| x == v)),
            LabelOp::NotIn => v.is_none_or(|v| !self.values.iter().any(|x| x == v)),
            LabelOp::Exists => v.is_some(),
            LabelOp::DoesNotExist => v.is_none(),
            LabelOp::Gt | LabelOp::Lt => {
                let (Some(v), [want]) = (v, self.values.as_slice()) else { return false };
                match (v.parse::<i64>(), want.parse::<i64>()) {
                    (Ok(a), Ok(b)) if self.op == LabelOp::Gt => a > b,
                    (Ok(a), Ok(b)) => a < b,
                    _ => false,
                }
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldTerm {
    /// Index of the field in the cache's specs; None for a label the kind does not extract.
    pub index: Option<usize>,
    pub equal: bool,
    pub value: String,
}

impl FieldTerm {
    /// `op` is "=", "==" or "!=".
    pub fn new(label: &str, op: &str, value: &str, specs: &[FieldSpec]) -> Result<Self, String> {
        let equal = match op {
            "=" | "==" => true,
            "!=" => false,
            other => return Err(format!("unknown field selector operator {other:?}")),
        };
        let index = specs.iter().position(|s| s.label == label);
        Ok(Self { index, equal, value: value.to_owned() })
    }

    pub fn matches(&self, e: &Entry) -> bool {
        let got = self.index.map_or("", |i| e.field(i));
        (got == self.value) == self.equal
    }
}

/// A key prefix (a namespace, or the whole resource) and an AND of label requirements and
/// field terms.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    pub prefix: Vec<u8>,
    pub labels: Vec<LabelReq>,
    pub fields: Vec<FieldTerm>,
}

impl Selector {
    /// True when only the prefix selects (every object under it matches).
    pub fn is_prefix_only(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }

    pub fn matches(&self, e: &Entry) -> bool {
        e.key.starts_with(&self.prefix)
            && self.labels.iter().all(|r| r.matches(e))
            && self.fields.iter().all(|t| t.matches(e))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::entry::{Fmt, Seg};

    fn specs() -> Vec<FieldSpec> {
        let path = vec![vec![Seg::Key("spec".into()), Seg::Key("nodeName".into())]];
        vec![FieldSpec { label: "spec.nodeName".into(), fmt: Fmt::Str, paths: path }]
    }

    fn pod(labels: &str, node: &str) -> Entry {
        let json = format!(r#"{{"metadata":{{"labels":{{{labels}}}}},"spec":{{"nodeName":"{node}"}}}}"#);
        Entry::new(Arc::from(&b"/registry/pods/ns/p"[..]), Arc::from(json.as_bytes()), 2, &specs())
    }

    fn req(key: &str, op: &str, values: &[&str]) -> LabelReq {
        LabelReq { key: key.into(), op: LabelOp::parse(op).unwrap(), values: values.iter().map(|s| s.to_string()).collect() }
    }

    #[test]
    fn label_requirements_table() {
        let e = pod(r#""app":"web","tier":"1""#, "n1");
        let table = [
            (req("app", "=", &["web"]), true),
            (req("app", "==", &["db"]), false),
            (req("app", "!=", &["db"]), true),
            (req("zone", "!=", &["a"]), true),
            (req("app", "in", &["db", "web"]), true),
            (req("app", "notin", &["db", "web"]), false),
            (req("zone", "notin", &["a"]), true),
            (req("app", "exists", &[]), true),
            (req("zone", "exists", &[]), false),
            (req("zone", "!", &[]), true),
            (req("app", "!", &[]), false),
            (req("tier", "gt", &["0"]), true),
            (req("tier", "lt", &["1"]), false),
            (req("app", "gt", &["0"]), false),
        ];
        for (r, want) in table {
            assert_eq!(r.matches(&e), want, "{r:?}");
        }
    }

    #[test]
    fn field_terms_and_unknown_labels() {
        let e = pod("", "n1");
        let s = specs();
        let t = |l: &str, op: &str, v: &str| FieldTerm::new(l, op, v, &s).unwrap().matches(&e);
        assert!(t("spec.nodeName", "=", "n1"));
        assert!(t("spec.nodeName", "==", "n1"));
        assert!(!t("spec.nodeName", "!=", "n1"));
        assert!(t("status.podIPs", "=", ""));
        assert!(!t("status.podIPs", "!=", ""));
        assert!(FieldTerm::new("x", ">", "1", &s).is_err());
    }

    #[test]
    fn prefix_and_conjunction() {
        let e = pod(r#""app":"web""#, "n1");
        let mut sel = Selector { prefix: b"/registry/pods/ns/".to_vec(), ..Selector::default() };
        assert!(sel.matches(&e) && sel.is_prefix_only());
        sel.labels.push(req("app", "=", &["web"]));
        sel.fields.push(FieldTerm::new("spec.nodeName", "=", "n2", &specs()).unwrap());
        assert!(!sel.matches(&e));
        sel.prefix = b"/registry/pods/other/".to_vec();
        sel.fields.clear();
        assert!(!sel.matches(&e));
    }
}
