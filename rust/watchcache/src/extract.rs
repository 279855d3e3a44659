//! Labels and selectable fields of stored JSON in one pass, without building the whole document.
//!
//! Guarantee: for every input (valid or not) `extract` returns exactly what the full-parse
//! extraction in `entry` returns (parse into a `serde_json::Value`, then read `metadata.labels`
//! and walk each `FieldSpec`), for a fraction of the work. How:
//!
//! - A plan (a small tree of the object members and array elements some spec or the labels
//!   need) is walked over the document, filling one slot per plan node: only a spec's leaf is
//!   built as a `Value` (then formatted by the same code); labels are collected as strings; a
//!   container on a path records only its kind. Two walks fill the slots the same way:
//! - The scanner (`fastscan`), tried first: a small JSON tokenizer over the bytes that accepts
//!   only documents it can prove valid (see its docs: grammar, strings, number range, depth,
//!   UTF-8) and declines anything else (a repeated member on the plan, deep nesting, any
//!   invalid JSON), handing the document to the serde walk, which decides.
//! - The serde walk: serde visitors over the same `serde_json` deserializer a full parse uses.
//!   Everything off the plan is visited by `Skip`, which accepts and rejects precisely what a
//!   `Value` parse does (the same `deserialize_any` calls: string escapes and lone surrogates,
//!   number range, nesting limit) but allocates nothing. `serde::de::IgnoredAny` and `RawValue`
//!   would be faster still, but they skip those checks, so a document a full parse rejects
//!   (say `1e999` deep inside `managedFields`) would get labels and fields.
//! - Duplicate members: the last one wins, as in `Value`'s map; a repeated member clears what an
//!   earlier one recorded below it (the serde walk; the scanner declines such documents).
//! - Invalid UTF-8 anywhere fails the whole document, as `serde_json::from_slice` does: the
//!   scanner checks every string holding a byte >= 0x80 (only ASCII passes its grammar outside
//!   strings); the serde walk checks the whole input up front.
//!
//! Worked example, specs `spec.nodeName` and `status.podIPs[0].ip | status.podIP`:
//!
//! ```text
//! plan      root ─ metadata ─ labels*        * string members collected
//!                ─ spec ─ nodeName=          = leaf: built as a Value
//!                ─ status ─ podIPs ─ [0] ─ ip=
//!                         ─ podIP=
//! input     {"metadata":{"name":"p","managedFields":[…]},"spec":{"nodeName":"n1",…},"status":{"podIPs":[]}}
//! slots     root=Object metadata=Object spec=Object nodeName="n1" status=Object podIPs=Array
//! fields    "n1", then podIPs[0] is absent so its parent does not resolve: status.podIP -> ""
//! ```

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

use crate::entry::{format, string_members, FieldSpec, Fmt, Seg};

/// The `Visitor` methods for JSON scalars (null, bools, numbers and, unless `no_str`, strings),
/// each giving `$out`: serde_json's `deserialize_any` has checked the token already.
macro_rules! scalars {
    ($out:expr) => {
        scalars!($out, no_str);
        fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok($out)
        }
    };
    ($out:expr, no_str) => {
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok($out)
        }
        fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($out)
        }
        fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($out)
        }
        fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($out)
        }
        fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($out)
        }
    };
}

/// Labels (sorted, string values only) and one value per spec, as `Entry` stores them.
pub(crate) type Extracted = (Vec<(String, String)>, Vec<String>);

const LABELS: [Step<'static>; 2] = [Step::Key("metadata"), Step::Key("labels")];

/// One step of a plan path, borrowed from the specs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step<'s> {
    Key(&'s str),
    Index(usize),
}

impl<'s> From<&'s Seg> for Step<'s> {
    fn from(seg: &'s Seg) -> Self {
        match seg {
            Seg::Key(k) => Step::Key(k),
            Seg::Index(i) => Step::Index(*i),
        }
    }
}

/// One plan node: a JSON value some spec (or the labels) needs to look at.
#[derive(Debug)]
struct Node<'s> {
    /// Index of the parent node; the root (index 0) is its own parent.
    parent: usize,
    step: Step<'s>,
    /// Build the whole value (a spec's leaf, or a labels object a spec also walks into).
    value: bool,
    /// Collect the string members (`metadata.labels`).
    labels: bool,
    /// The first child and the next sibling (0: none; the root is no one's child).
    first_child: usize,
    next_sibling: usize,
    /// The leaf of more than one spec path.
    shared: bool,
}

/// The nodes on the paths of the specs and of the labels; the root is node 0.
#[derive(Debug)]
struct Plan<'s> {
    nodes: Vec<Node<'s>>,
    labels: usize,
    /// The node each spec path ends at, for the specs' paths in order (the root for `[]`).
    leaves: Vec<usize>,
}

impl<'s> Plan<'s> {
    fn new(specs: &'s [FieldSpec]) -> Self {
        let steps: usize = specs.iter().flat_map(|s| &s.paths).map(Vec::len).sum();
        let mut nodes = Vec::with_capacity(1 + steps + LABELS.len());
        nodes.push(Node { parent: 0, step: Step::Index(0), value: false, labels: false, first_child: 0, next_sibling: 0, shared: false });
        let mut plan = Plan { nodes, labels: 0, leaves: Vec::with_capacity(specs.iter().map(|s| s.paths.len()).sum()) };
        for path in specs.iter().flat_map(|s| &s.paths) {
            let leaf = plan.insert(path.iter().map(Step::from));
            plan.nodes[leaf].shared = plan.nodes[leaf].value;
            plan.nodes[leaf].value = true;
            plan.leaves.push(leaf);
        }
        plan.labels = plan.insert(LABELS.iter().copied());
        let nested = plan.nodes[plan.labels].first_child != 0;
        let labels = &mut plan.nodes[plan.labels];
        labels.labels = true;
        labels.value |= nested;
        plan
    }

    fn insert(&mut self, steps: impl Iterator<Item = Step<'s>>) -> usize {
        let mut at = 0;
        for step in steps {
            at = match self.child(at, step) {
                Some(c) => c,
                None => {
                    let next_sibling = self.nodes[at].first_child;
                    self.nodes.push(Node { parent: at, step, value: false, labels: false, first_child: 0, next_sibling, shared: false });
                    self.nodes[at].first_child = self.nodes.len() - 1;
                    self.nodes.len() - 1
                }
            };
        }
        at
    }

    fn child(&self, parent: usize, step: Step<'_>) -> Option<usize> {
        let mut n = self.nodes[parent].first_child;
        while n != 0 && self.nodes[n].step != step {
            n = self.nodes[n].next_sibling;
        }
        (n != 0).then_some(n)
    }

    fn child_key(&self, parent: usize, key: &str) -> Option<usize> {
        self.child(parent, Step::Key(key))
    }

    /// The leaves of each spec's paths, spec by spec.
    fn spec_leaves<'p>(&'p self, specs: &'p [FieldSpec]) -> impl Iterator<Item = (&'p FieldSpec, &'p [usize])> {
        let mut rest = &self.leaves[..];
        specs.iter().map(move |s| {
            let (leaves, more) = rest.split_at(s.paths.len());
            rest = more;
            (s, leaves)
        })
    }

    fn is_below(&self, mut n: usize, ancestor: usize) -> bool {
        while n != 0 {
            n = self.nodes[n].parent;
            if n == ancestor {
                return true;
            }
        }
        false
    }
}

/// What the walk found at one plan node.
#[derive(Debug, Default)]
enum Slot {
    /// Not present in the document (or not reached).
    #[default]
    Absent,
    Object,
    Array,
    Scalar,
    Value(Value),
    /// Members in document order, None for a non-string value (later duplicates win).
    Labels(Vec<(String, Option<String>)>),
}

/// Extracts labels and the values of `specs` from `bytes`; see the module docs.
pub(crate) fn extract(bytes: &[u8], specs: &[FieldSpec]) -> Extracted {
    run(bytes, specs, Walks::Both).unwrap_or_else(|| failed(specs))
}

/// Which walks `run` may take (the tests take each alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(test), allow(dead_code))]
enum Walks {
    /// The scanner, then the serde walk if it declines (what `extract` does).
    Both,
    /// The scanner only: None when it declines.
    Fast,
    /// The serde walk only.
    Serde,
}

/// The extraction by `walks`; None: the document fails (or, `Walks::Fast`, the scanner declined).
fn run(bytes: &[u8], specs: &[FieldSpec], walks: Walks) -> Option<Extracted> {
    let plan = Plan::new(specs);
    let mut slots: Vec<Slot> = std::iter::repeat_with(Slot::default).take(plan.nodes.len()).collect();
    if walks == Walks::Serde || fastscan::walk(bytes, &plan, &mut slots).is_none() {
        if walks == Walks::Fast {
            return None;
        }
        slots.fill_with(Slot::default);
        walk(std::str::from_utf8(bytes).ok()?, &plan, &mut slots).ok()?;
    }
    let fields = plan.spec_leaves(specs).map(|(s, leaves)| field_value(&plan, &mut slots, s.fmt, leaves)).collect();
    Some((labels(&plan, &mut slots), fields))
}

/// What a document that fails to parse gives: no labels, every field's zero value.
fn failed(specs: &[FieldSpec]) -> Extracted {
    (Vec::new(), specs.iter().map(|s| format(None, s.fmt)).collect())
}

fn walk(text: &str, plan: &Plan<'_>, slots: &mut [Slot]) -> serde_json::Result<()> {
    let mut de = serde_json::Deserializer::from_str(text);
    NodeSeed { plan, slots, id: 0 }.deserialize(&mut de)?;
    de.end()
}

/// Where resolution stands: at a plan node, or inside a value built whole.
#[derive(Clone, Copy)]
enum Cursor<'a> {
    Node(usize),
    Value(&'a Value),
}

impl<'a> Cursor<'a> {
    fn at(slots: &'a [Slot], id: usize) -> Self {
        match &slots[id] {
            Slot::Value(v) => Cursor::Value(v),
            _ => Cursor::Node(id),
        }
    }

    fn is_object(self, slots: &[Slot]) -> bool {
        match self {
            Cursor::Value(v) => v.is_object(),
            Cursor::Node(id) => matches!(slots[id], Slot::Object | Slot::Labels(_)),
        }
    }

    /// `entry::step` on the plan, to plan node `child` (a child of this cursor's node, or of
    /// the node whose value this cursor is inside): a member of an object, an element of an array.
    #[inline]
    fn step(self, plan: &Plan<'_>, slots: &'a [Slot], child: usize) -> Option<Self> {
        let step = plan.nodes[child].step;
        let id = match self {
            Cursor::Value(v) => {
                return match step {
                    Step::Key(k) => v.as_object()?.get(k),
                    Step::Index(i) => v.as_array()?.get(i),
                }
                .map(Cursor::Value)
            }
            Cursor::Node(id) => id,
        };
        let fits = matches!((&slots[id], step), (Slot::Object, Step::Key(_)) | (Slot::Array, Step::Index(_)));
        (fits && !matches!(slots[child], Slot::Absent)).then(|| Cursor::at(slots, child))
    }

    /// `entry::resolve` from the root along the plan path to node `id`.
    fn reach(plan: &Plan<'_>, slots: &'a [Slot], id: usize) -> Option<Self> {
        let (mut at, mut done) = (Cursor::at(slots, 0), 0);
        while done != id {
            let mut next = id; // the child of `done` on the way down to `id`
            while plan.nodes[next].parent != done {
                next = plan.nodes[next].parent;
            }
            at = at.step(plan, slots, next)?;
            done = next;
        }
        Some(at)
    }

    fn value(self) -> Option<&'a Value> {
        match self {
            Cursor::Value(v) => Some(v),
            Cursor::Node(_) => None,
        }
    }
}

/// The value at the end of one path (`leaf`), if the document has one.
fn reach_value<'s>(plan: &Plan<'_>, slots: &'s [Slot], leaf: usize) -> Option<&'s Value> {
    if leaf == 0 {
        return Cursor::at(slots, 0).value();
    }
    let parent = Cursor::reach(plan, slots, plan.nodes[leaf].parent)?;
    parent.step(plan, slots, leaf).and_then(Cursor::value)
}

/// `entry::field_value` over the walk's slots, for a spec whose paths end at `leaves`.
/// A string leaf that nothing else reads (no other path, spec or label below it) is moved out
/// of its slot rather than copied.
fn field_value(plan: &Plan<'_>, slots: &mut [Slot], fmt: Fmt, leaves: &[usize]) -> String {
    if fmt == Fmt::FirstStr {
        return leaves.iter().map(|&leaf| format(reach_value(plan, slots, leaf), Fmt::Str)).find(|v| !v.is_empty()).unwrap_or_default();
    }
    for (i, &leaf) in leaves.iter().enumerate() {
        if leaf == 0 {
            return format(Cursor::at(slots, 0).value(), fmt); // the empty path
        }
        let parent = Cursor::reach(plan, slots, plan.nodes[leaf].parent).filter(|p| p.is_object(slots));
        if parent.is_none() && i + 1 < leaves.len() {
            continue;
        }
        let hit = parent.and_then(|p| p.step(plan, slots, leaf));
        let node = &plan.nodes[leaf];
        let own = !node.shared && node.first_child == 0 && leaf != plan.labels && matches!(parent, Some(Cursor::Node(_)));
        if fmt == Fmt::Str && own && matches!(hit, Some(Cursor::Value(Value::String(_)))) {
            // `hit` is this leaf's own slot, which holds a string.
            return match std::mem::take(&mut slots[leaf]) {
                Slot::Value(Value::String(s)) => s,
                _ => String::new(),
            };
        }
        return format(hit.and_then(Cursor::value), fmt);
    }
    format(None, fmt)
}

/// `entry::labels_of` over the walk's slots.
fn labels(plan: &Plan<'_>, slots: &mut [Slot]) -> Vec<(String, String)> {
    match Cursor::reach(plan, slots, plan.labels) {
        Some(Cursor::Value(v)) => v.as_object().map(string_members).unwrap_or_default(),
        Some(Cursor::Node(id)) => match std::mem::take(&mut slots[id]) {
            Slot::Labels(members) => last_strings(members),
            _ => Vec::new(),
        },
        None => Vec::new(),
    }
}

/// Members sorted by key, the last of equal keys winning, non-strings dropped.
fn last_strings(mut members: Vec<(String, Option<String>)>) -> Vec<(String, String)> {
    members.sort_by(|a, b| a.0.cmp(&b.0)); // stable: equal keys stay in document order
    let mut out: Vec<(String, String)> = Vec::with_capacity(members.len());
    let mut it = members.into_iter().peekable();
    while let Some((k, v)) = it.next() {
        let later = it.peek().is_some_and(|(next, _)| *next == k);
        if let (false, Some(v)) = (later, v) {
            out.push((k, v));
        }
    }
    out
}

/// Visits the value at plan node `id`, recording what it finds in `slots`.
struct NodeSeed<'p, 's> {
    plan: &'p Plan<'s>,
    slots: &'p mut [Slot],
    id: usize,
}

impl<'de> DeserializeSeed<'de> for NodeSeed<'_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        if !matches!(self.slots[self.id], Slot::Absent) {
            // A repeated member: forget what the earlier one left below this node.
            for n in 1..self.plan.nodes.len() {
                if self.plan.is_below(n, self.id) {
                    self.slots[n] = Slot::Absent;
                }
            }
        }
        let node = &self.plan.nodes[self.id];
        if node.value {
            self.slots[self.id] = Slot::Value(Value::deserialize(d)?);
            return Ok(());
        }
        if node.labels {
            self.slots[self.id] = d.deserialize_any(LabelsVisitor)?;
            return Ok(());
        }
        let kind = d.deserialize_any(NodeVisitor { plan: self.plan, slots: self.slots, id: self.id })?;
        self.slots[self.id] = kind;
        Ok(())
    }
}

struct NodeVisitor<'p, 's> {
    plan: &'p Plan<'s>,
    slots: &'p mut [Slot],
    id: usize,
}

impl<'de> Visitor<'de> for NodeVisitor<'_, '_> {
    type Value = Slot;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Slot, A::Error> {
        while let Some(child) = map.next_key_seed(KeySeed { plan: self.plan, parent: self.id })? {
            match child {
                Some(id) => map.next_value_seed(NodeSeed { plan: self.plan, slots: &mut *self.slots, id })?,
                None => map.next_value::<Skip>().map(drop)?,
            }
        }
        Ok(Slot::Object)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Slot, A::Error> {
        for i in 0.. {
            let more = match self.plan.child(self.id, Step::Index(i)) {
                Some(id) => seq.next_element_seed(NodeSeed { plan: self.plan, slots: &mut *self.slots, id })?.is_some(),
                None => seq.next_element::<Skip>()?.is_some(),
            };
            if !more {
                break;
            }
        }
        Ok(Slot::Array)
    }

    scalars!(Slot::Scalar);
}

/// An object key: the index of the plan child it names, if any.
struct KeySeed<'p, 's> {
    plan: &'p Plan<'s>,
    parent: usize,
}

impl<'de> DeserializeSeed<'de> for KeySeed<'_, '_> {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_, '_> {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Option<usize>, E> {
        Ok(self.plan.child_key(self.parent, key))
    }
}

/// `metadata.labels`: every member, its value kept only when it is a string.
struct LabelsVisitor;

impl<'de> Visitor<'de> for LabelsVisitor {
    type Value = Slot;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Slot, A::Error> {
        let mut members = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            members.push((key, map.next_value_seed(SkipVisitor { keep: true })?.0));
        }
        Ok(Slot::Labels(members))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Slot, A::Error> {
        SkipVisitor { keep: false }.visit_seq(seq).map(|_| Slot::Array)
    }

    scalars!(Slot::Scalar);
}

/// Any JSON value, checked exactly as a `Value` parse checks it and then dropped; the text of a
/// string is kept when `keep` (a label's value). Unlike `IgnoredAny` (serde_json's
/// `ignore_value`), this goes through `deserialize_any`: strings are unescaped into the
/// deserializer's scratch buffer, numbers parsed, nesting counted.
struct Skip(Option<String>);

impl<'de> Deserialize<'de> for Skip {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        SkipVisitor { keep: false }.deserialize(d)
    }
}

#[derive(Clone, Copy)]
struct SkipVisitor {
    keep: bool,
}

impl<'de> DeserializeSeed<'de> for SkipVisitor {
    type Value = Skip;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Skip, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for SkipVisitor {
    type Value = Skip;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Skip, E> {
        Ok(Skip(self.keep.then(|| v.to_owned())))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Skip, A::Error> {
        while map.next_entry::<Skip, Skip>()?.is_some() {}
        Ok(Skip(None))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Skip, A::Error> {
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(Skip(None))
    }

    scalars!(Skip(None), no_str);
}

#[path = "fastscan.rs"]
mod fastscan;

#[cfg(test)]
#[path = "extract_tests.rs"]
mod tests;
