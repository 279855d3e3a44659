//! The two walkers: `field_set` (ToFieldSet) and `compare` (typed.Compare).
//!
//! Both follow kubecore's former Python walkers step for step, including the order in which
//! they visit nodes (it decides which FieldPathError is reported first):
//!
//! * field_set: a map's members in order; a member that is null or an empty map is itself a
//!   member of the set; a non-atomic list computes every item's element first, items whose
//!   element repeats are members once and are not descended into; atomic lists/maps/items and
//!   scalars are leaves.
//! * compare: two nodes of the same Python type that are `==` are skipped whole. Otherwise maps
//!   (or null/absent against a map) are compared member by member (left's members, then right's
//!   new ones), lists likewise item by item, by element; everything else — type changes, atomic
//!   values, two empty containers — is one leaf (added, removed, or modified unless equal with
//!   bools told apart from numbers). A subtree present on one side only is reported with every
//!   node under it. Items whose element repeats: both sides repeated → modified unless equal;
//!   one side repeated → the other side's item compared against nothing, and the path added or
//!   removed.

use std::collections::{HashMap, HashSet};

use crate::canon;
use crate::facts::{Cursor, Facts, ListType};
use crate::json::{self, leaf_eq, member, py_eq, same, Members, Value};
use crate::{Comparison, Error, FieldSet, Paths, Pe, ROOT};

/// Above this many items, repeated elements are found through a hash map.
const LINEAR_SCAN: usize = 16;

type Map<'a> = [(std::borrow::Cow<'a, str>, Value<'a>)];

/// The fields `obj` (JSON text) sets, outside the top-level fields `skip`. Not a map: none.
pub fn field_set<'a>(facts: &Facts, obj: &'a [u8], skip: &[&str]) -> Result<FieldSet<'a>, Error> {
    field_set_value(facts, json::parse(obj)?, skip)
}

/// `field_set` of a parsed value.
pub fn field_set_value<'a>(facts: &Facts, mut obj: Value<'a>, skip: &[&str]) -> Result<FieldSet<'a>, Error> {
    without(&mut obj, skip);
    let mut w = Walk::new(facts);
    if let Value::Map(m) = &obj {
        w.fs_map(m, ROOT, facts.root())?;
    }
    Ok(FieldSet { paths: w.paths, members: std::mem::take(&mut w.out[0]) })
}

/// What changed from `lhs` to `rhs` (JSON texts; None: absent), top-level fields `skip` aside.
pub fn compare<'a>(facts: &Facts, lhs: Option<&'a [u8]>, rhs: Option<&'a [u8]>, skip: &[&str]) -> Result<Comparison<'a>, Error> {
    let l = lhs.map(json::parse).transpose()?;
    let r = rhs.map(json::parse).transpose()?;
    compare_values(facts, l, r, skip)
}

/// `compare` of parsed values.
pub fn compare_values<'a>(facts: &Facts, mut lhs: Option<Value<'a>>, mut rhs: Option<Value<'a>>, skip: &[&str]) -> Result<Comparison<'a>, Error> {
    for v in [&mut lhs, &mut rhs].into_iter().flatten() {
        without(v, skip);
    }
    let mut w = Walk::new(facts);
    w.cmp_value(lhs.as_ref(), rhs.as_ref(), ROOT, facts.root())?;
    let [added, modified, removed] = w.out;
    Ok(Comparison { paths: w.paths, added, modified, removed })
}

/// Drops the top-level fields `skip` of a map.
fn without(v: &mut Value<'_>, skip: &[&str]) {
    if let (Value::Map(m), false) = (v, skip.is_empty()) {
        m.retain(|(k, _)| !skip.contains(&k.as_ref()));
    }
}

const ADDED: usize = 0;
const MODIFIED: usize = 1;
const REMOVED: usize = 2;

struct Walk<'f, 'v, 'a> {
    facts: &'f Facts,
    paths: Paths<'a>,
    /// field_set: out[0]; compare: added, modified, removed.
    out: [Vec<u32>; 3],
    /// The field names from the root to the node being visited.
    names: Vec<&'v str>,
}

/// How many times each element occurs (an O(n²) scan for short lists).
fn counts(pes: &[Pe<'_>]) -> Vec<usize> {
    if pes.len() <= LINEAR_SCAN {
        return pes.iter().map(|p| pes.iter().filter(|q| *q == p).count()).collect();
    }
    let mut n: HashMap<&str, usize> = HashMap::new();
    for p in pes {
        *n.entry(p.text()).or_default() += 1;
    }
    pes.iter().map(|p| n[p.text()]).collect()
}

/// Items of two lists grouped by element, in order of first appearance (left, then right).
struct Groups<'v, 'a> {
    pes: Vec<Pe<'a>>,
    items: Vec<[Vec<&'v Value<'a>>; 2]>,
    index: HashMap<String, usize>,
}

impl<'v, 'a> Groups<'v, 'a> {
    fn add(&mut self, pe: Pe<'a>, side: usize, item: &'v Value<'a>) {
        let found = if self.pes.len() <= LINEAR_SCAN {
            self.pes.iter().position(|p| *p == pe)
        } else {
            if self.index.is_empty() {
                self.index = self.pes.iter().enumerate().map(|(i, p)| (p.text().to_string(), i)).collect();
            }
            self.index.get(pe.text()).copied()
        };
        let i = found.unwrap_or_else(|| {
            if !self.index.is_empty() {
                self.index.insert(pe.text().to_string(), self.pes.len());
            }
            self.pes.push(pe);
            self.items.push([Vec::new(), Vec::new()]);
            self.pes.len() - 1
        });
        self.items[i][side].push(item);
    }
}

impl<'f, 'v, 'a: 'v> Walk<'f, 'v, 'a> {
    fn new(facts: &'f Facts) -> Self {
        Walk { facts, paths: Paths::default(), out: Default::default(), names: Vec::new() }
    }

    #[allow(clippy::ptr_arg)] // the Cow itself: cloning it keeps a borrowed name borrowed
    fn field(&mut self, parent: u32, name: &'v std::borrow::Cow<'a, str>, at: Cursor<'f>) -> (u32, Cursor<'f>) {
        self.names.push(name);
        (self.paths.push(parent, Pe::Field(name.clone())), self.facts.child(at, name))
    }

    fn list_type(&self, at: Cursor<'f>) -> ListType<'f> {
        self.facts.list_type(&self.names, at)
    }

    fn atomic_map(&self, at: Cursor<'f>) -> bool {
        self.facts.atomic_map(&self.names, at)
    }

    fn error(&self, what: String) -> Error {
        Error::FieldPath(format!(".{}: {what}", self.names.join(".")))
    }

    /// The path element of one item of a set or associative list (managedfields.item_element).
    fn element(&self, item: &Value<'a>, lt: ListType<'f>) -> Result<Pe<'a>, Error> {
        let ListType::Map { keys, .. } = lt else { return Ok(Pe::Value(canon::to_string(item))) };
        let Value::Map(m) = item else {
            return Err(self.error("associative list with keys has an element that is not a map".into()));
        };
        let mut fields: Vec<(&str, String)> = Vec::with_capacity(keys.len());
        for k in keys {
            let text = match member(m, k) {
                Some(Value::Null) => return Err(self.error(format!("key field {} cannot be null", canon::go_quote(k)))),
                Some(v) => canon::to_string(v),
                None => match self.facts.key_default(k) {
                    Some(d) => d.to_string(),
                    None => {
                        return Err(self.error(format!(
                            "associative list with keys has an element that omits key field {} (and doesn't have default value)",
                            canon::go_quote(k)
                        )))
                    }
                },
            };
            fields.push((k, text));
        }
        fields.sort_by(|a, b| a.0.cmp(b.0));
        fields.dedup_by(|later, earlier| later.0 == earlier.0);
        let mut out = String::from("{");
        for (i, (k, text)) in fields.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            canon::write_str(k, &mut out);
            out.push(':');
            out.push_str(text);
        }
        out.push('}');
        Ok(Pe::Key(out))
    }

    fn elements(&self, items: &[Value<'a>], lt: ListType<'f>) -> Result<Vec<Pe<'a>>, Error> {
        items.iter().map(|item| self.element(item, lt)).collect()
    }

    // ---- ToFieldSet ------------------------------------------------------------------------------

    fn fs_node(&mut self, v: &'v Value<'a>, at_path: u32, at: Cursor<'f>) -> Result<(), Error> {
        match v {
            Value::Map(m) if !self.atomic_map(at) => self.fs_map(m, at_path, at),
            Value::List(items) => match self.list_type(at) {
                ListType::Atomic => {
                    self.out[0].push(at_path);
                    Ok(())
                }
                lt => self.fs_list(items, lt, at_path, at),
            },
            _ => {
                self.out[0].push(at_path);
                Ok(())
            }
        }
    }

    fn fs_map(&mut self, m: &'v Map<'a>, at_path: u32, at: Cursor<'f>) -> Result<(), Error> {
        for (k, v) in m {
            let (p, c) = self.field(at_path, k, at);
            self.fs_node(v, p, c)?;
            self.names.pop();
            if matches!(v, Value::Null) || matches!(v, Value::Map(x) if x.is_empty()) {
                self.out[0].push(p);
            }
        }
        Ok(())
    }

    fn fs_list(&mut self, items: &'v [Value<'a>], lt: ListType<'f>, at_path: u32, at: Cursor<'f>) -> Result<(), Error> {
        let pes = self.elements(items, lt)?;
        let n = counts(&pes);
        let mut repeated: HashSet<&str> = HashSet::new();
        for (pe, &count) in pes.iter().zip(&n) {
            if count > 1 && repeated.insert(pe.text()) {
                let p = self.paths.push(at_path, pe.clone());
                self.out[0].push(p);
            }
        }
        let atomic_items = matches!(lt, ListType::Map { atomic_items: true, .. });
        for ((pe, item), count) in pes.into_iter().zip(items).zip(n) {
            if count > 1 {
                continue;
            }
            let p = self.paths.push(at_path, pe);
            if !atomic_items {
                self.fs_node(item, p, at)?;
            }
            self.out[0].push(p);
        }
        Ok(())
    }

    // ---- Compare ---------------------------------------------------------------------------------

    fn leaf(&mut self, l: Option<&Value<'a>>, r: Option<&Value<'a>>, at_path: u32) {
        match (l, r) {
            (None, _) => self.out[ADDED].push(at_path),
            (_, None) => self.out[REMOVED].push(at_path),
            (Some(a), Some(b)) if !leaf_eq(a, b) => self.out[MODIFIED].push(at_path),
            _ => {}
        }
    }

    fn cmp(&mut self, l: Option<&'v Value<'a>>, r: Option<&'v Value<'a>>, at_path: u32, at: Cursor<'f>) -> Result<(), Error> {
        match (l, r) {
            (None, Some(v)) => self.whole(v, at_path, at, ADDED),
            (Some(v), None) => self.whole(v, at_path, at, REMOVED),
            (None, None) => {
                self.out[ADDED].push(at_path);
                Ok(())
            }
            _ => self.cmp_value(l, r, at_path, at),
        }
    }

    fn cmp_value(&mut self, l: Option<&'v Value<'a>>, r: Option<&'v Value<'a>>, at_path: u32, at: Cursor<'f>) -> Result<(), Error> {
        if let (Some(a), Some(b)) = (l, r) {
            if same(a, b) {
                return Ok(());
            }
        }
        let empty = |x: Option<&Value<'a>>| x.is_none_or(|v| matches!(v, Value::Null) || v.is_empty_container());
        let is_map = |x: Option<&Value<'a>>| matches!(x, Some(Value::Map(_)));
        let is_list = |x: Option<&Value<'a>>| matches!(x, Some(Value::List(_)));
        let nullish = |x: Option<&Value<'a>>| matches!(x, None | Some(Value::Null));
        if is_map(l) || is_map(r) {
            let maps = (is_map(l) || nullish(l)) && (is_map(r) || nullish(r));
            if !maps || self.atomic_map(at) || (empty(l) && empty(r)) {
                self.leaf(l, r, at_path);
                return Ok(());
            }
            let (lm, rm) = (map_of(l), map_of(r));
            return self.cmp_map(lm, rm, at_path, at);
        }
        if is_list(l) || is_list(r) {
            let lt = self.list_type(at);
            let lists = (is_list(l) || nullish(l)) && (is_list(r) || nullish(r));
            if !lists || lt == ListType::Atomic || (empty(l) && empty(r)) {
                self.leaf(l, r, at_path);
                return Ok(());
            }
            return self.cmp_list(list_of(l), list_of(r), lt, at_path, at);
        }
        self.leaf(l, r, at_path);
        Ok(())
    }

    fn cmp_map(&mut self, lm: &'v Map<'a>, rm: &'v Map<'a>, at_path: u32, at: Cursor<'f>) -> Result<(), Error> {
        let (lix, rix) = (Members::new(lm), Members::new(rm));
        for (k, v) in lm {
            let (p, c) = self.field(at_path, k, at);
            self.cmp(Some(v), rix.get(k), p, c)?;
            self.names.pop();
        }
        for (k, v) in rm {
            if lix.get(k).is_none() {
                let (p, c) = self.field(at_path, k, at);
                self.cmp(None, Some(v), p, c)?;
                self.names.pop();
            }
        }
        Ok(())
    }

    fn cmp_item(&mut self, atomic: bool, l: Option<&'v Value<'a>>, r: Option<&'v Value<'a>>, p: u32, at: Cursor<'f>) -> Result<(), Error> {
        if atomic {
            self.leaf(l, r, p);
            Ok(())
        } else {
            self.cmp(l, r, p, at)
        }
    }

    fn cmp_list(&mut self, l: &'v [Value<'a>], r: &'v [Value<'a>], lt: ListType<'f>, at_path: u32, at: Cursor<'f>) -> Result<(), Error> {
        let mut g = Groups { pes: Vec::new(), items: Vec::new(), index: HashMap::new() };
        for (side, items) in [l, r].into_iter().enumerate() {
            for item in items {
                let pe = self.element(item, lt)?;
                g.add(pe, side, item);
            }
        }
        let atomic = matches!(lt, ListType::Map { atomic_items: true, .. });
        for (pe, [ll, rl]) in g.pes.into_iter().zip(g.items) {
            let p = self.paths.push(at_path, pe);
            match (ll.len(), rl.len()) {
                (0 | 1, 0 | 1) => self.cmp_item(atomic, ll.first().copied(), rl.first().copied(), p, at)?,
                (2.., 2..) => {
                    if ll.len() != rl.len() || !ll.iter().zip(&rl).all(|(a, b)| py_eq(a, b)) {
                        self.out[MODIFIED].push(p);
                    }
                }
                (2.., _) => {
                    if let Some(&x) = rl.first() {
                        self.cmp_item(atomic, None, Some(x), p, at)?;
                    }
                    self.out[REMOVED].push(p);
                }
                (_, _) => {
                    if let Some(&x) = ll.first() {
                        self.cmp_item(atomic, Some(x), None, p, at)?;
                    }
                    self.out[ADDED].push(p);
                }
            }
        }
        Ok(())
    }

    /// A subtree that appeared (or disappeared) entirely: every node of it goes to `out[which]`.
    fn whole(&mut self, v: &'v Value<'a>, at_path: u32, at: Cursor<'f>, which: usize) -> Result<(), Error> {
        self.out[which].push(at_path);
        match v {
            Value::Map(m) if !m.is_empty() && !self.atomic_map(at) => {
                for (k, x) in m {
                    let (p, c) = self.field(at_path, k, at);
                    self.whole(x, p, c, which)?;
                    self.names.pop();
                }
            }
            Value::List(items) if !items.is_empty() => {
                let lt = self.list_type(at);
                if lt == ListType::Atomic {
                    return Ok(());
                }
                let atomic = matches!(lt, ListType::Map { atomic_items: true, .. });
                let pes = self.elements(items, lt)?;
                let n = counts(&pes);
                for ((pe, item), count) in pes.into_iter().zip(items).zip(n) {
                    let p = self.paths.push(at_path, pe);
                    if count > 1 || atomic {
                        self.out[which].push(p);
                    } else {
                        self.whole(item, p, at, which)?;
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }
}

fn map_of<'v, 'a>(v: Option<&'v Value<'a>>) -> &'v Map<'a> {
    match v {
        Some(Value::Map(m)) => m,
        _ => &[],
    }
}

fn list_of<'v, 'a>(v: Option<&'v Value<'a>>) -> &'v [Value<'a>] {
    match v {
        Some(Value::List(l)) => l,
        _ => &[],
    }
}
