//! Field sets of JSON objects, for server-side apply's bookkeeping (metadata.managedFields):
//! upstream structured-merge-diff's ToFieldSet (`field_set`) and typed.Compare (`compare`),
//! with exactly the semantics of kubecore.api.managedfields' former Python walkers.
//!
//! A path is a sequence of elements: a field `f:name`, a keyed item `k:{"name":"main"}` or a set
//! item `v:"a"` (key and value elements hold canonical JSON text, see `canon`). The walkers
//! produce paths into a `Paths` arena (each node = parent + one element, so prefixes are shared)
//! and return sets of node indices. Which lists are keyed, sets or atomic, and which maps are
//! atomic, is the kind's `Facts`.
//!
//! Worked example (a pod; `containers` keyed by name, `args` atomic):
//!
//! ```
//! use kubecore_fieldpath::{compare, field_set, Facts, Keyed, Tables};
//! let mut tables = Tables::default();
//! tables.keyed.insert("containers".into(), Keyed { keys: vec!["name".into()], atomic_items: false });
//! let facts = Facts::builtin("", "Pod", true, tables);
//!
//! let old = br#"{"spec":{"containers":[{"name":"main","image":"a","args":["x"]}],"status":{}}}"#;
//! let fs = field_set(&facts, old, &[]).unwrap();
//! let mut got: Vec<String> = fs.members.iter().map(|&i| fs.paths.display(i)).collect();
//! got.sort();
//! assert_eq!(got, [
//!     r#"f:spec.f:containers.k:{"name":"main"}"#,
//!     r#"f:spec.f:containers.k:{"name":"main"}.f:args"#,
//!     r#"f:spec.f:containers.k:{"name":"main"}.f:image"#,
//!     r#"f:spec.f:containers.k:{"name":"main"}.f:name"#,
//!     r#"f:spec.f:status"#,   // an empty map is a member
//! ]);
//!
//! let new = br#"{"spec":{"containers":[{"name":"main","image":"b","args":["x"]},{"name":"side"}],"status":{}}}"#;
//! let c = compare(&facts, Some(old), Some(new), &[]).unwrap();
//! let show = |set: &[u32]| set.iter().map(|&i| c.paths.display(i)).collect::<Vec<_>>();
//! assert_eq!(show(&c.modified), [r#"f:spec.f:containers.k:{"name":"main"}.f:image"#]);
//! assert_eq!(show(&c.added), [r#"f:spec.f:containers.k:{"name":"side"}"#,
//!                             r#"f:spec.f:containers.k:{"name":"side"}.f:name"#]);
//! assert!(c.removed.is_empty());
//! ```

use std::borrow::Cow;
use std::fmt;

pub mod canon;
pub mod facts;
pub mod json;
mod walk;

pub use facts::{Cursor, Facts, Keyed, ListType, Tables};
pub use walk::{compare, compare_values, field_set, field_set_value};

/// Why an object has no field paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Upstream's message, e.g. `.spec.containers: associative list with keys has an element
    /// that omits key field "name" (and doesn't have default value)`.
    FieldPath(String),
    /// The input is not JSON.
    Json(String),
    /// Nested deeper than `json::MAX_DEPTH`.
    TooDeep,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::FieldPath(m) => f.write_str(m),
            Error::Json(m) => write!(f, "invalid JSON: {m}"),
            Error::TooDeep => write!(f, "object nested deeper than {} levels", json::MAX_DEPTH),
        }
    }
}

impl std::error::Error for Error {}

/// One path element. Field names borrow from the input when they had no escapes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pe<'a> {
    /// `f:` a field of a map or struct.
    Field(Cow<'a, str>),
    /// `k:` an item of an associative list: the canonical JSON of its key fields.
    Key(String),
    /// `v:` an item of a set: the canonical JSON of the item.
    Value(String),
}

impl Pe<'_> {
    /// `f`, `k` or `v`.
    pub fn kind(&self) -> char {
        match self {
            Pe::Field(_) => 'f',
            Pe::Key(_) => 'k',
            Pe::Value(_) => 'v',
        }
    }

    /// The name, or the JSON text.
    pub fn text(&self) -> &str {
        match self {
            Pe::Field(s) => s,
            Pe::Key(s) | Pe::Value(s) => s,
        }
    }
}

/// The parent of a top-level path element (the empty path).
pub const ROOT: u32 = u32::MAX;

/// One path: its parent path (`ROOT` for none) and its last element.
#[derive(Debug, Clone)]
pub struct PathNode<'a> {
    pub parent: u32,
    pub pe: Pe<'a>,
}

/// Paths sharing their prefixes; a path is named by its index (`ROOT` is the empty path).
/// Two indices may name equal paths (a list's duplicate items): sets built from them dedupe.
#[derive(Debug, Clone, Default)]
pub struct Paths<'a> {
    pub nodes: Vec<PathNode<'a>>,
}

impl<'a> Paths<'a> {
    pub(crate) fn push(&mut self, parent: u32, pe: Pe<'a>) -> u32 {
        self.nodes.push(PathNode { parent, pe });
        u32::try_from(self.nodes.len() - 1).expect("fewer than 2**32 paths")
    }

    /// The elements of path `i`, from the root.
    pub fn elements(&self, mut i: u32) -> Vec<&Pe<'a>> {
        let mut out = Vec::new();
        while i != ROOT {
            let n = &self.nodes[i as usize];
            out.push(&n.pe);
            i = n.parent;
        }
        out.reverse();
        out
    }

    /// `f:spec.k:{"name":"main"}.f:image` (for tests and messages).
    pub fn display(&self, i: u32) -> String {
        let parts: Vec<String> = self.elements(i).iter().map(|pe| format!("{}:{}", pe.kind(), pe.text())).collect();
        parts.join(".")
    }
}

/// What an object sets (ToFieldSet).
#[derive(Debug, Clone, Default)]
pub struct FieldSet<'a> {
    pub paths: Paths<'a>,
    pub members: Vec<u32>,
}

/// What changed between two objects (typed.Compare).
#[derive(Debug, Clone, Default)]
pub struct Comparison<'a> {
    pub paths: Paths<'a>,
    pub added: Vec<u32>,
    pub modified: Vec<u32>,
    pub removed: Vec<u32>,
}
