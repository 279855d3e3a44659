//! Node selectors: `spec.nodeSelector`, required and preferred node affinity terms
//! (component-helpers' `nodeaffinity`), parsed from a pod and then compiled against the
//! snapshot's interned label strings.
//!
//! Rules kept from upstream:
//! - terms are ORed; inside a term, matchExpressions and matchFields are ANDed;
//! - a term with neither matches nothing; an empty required term list matches nothing;
//! - a term that does not parse (unknown operator, In/NotIn without values, Exists with values,
//!   Gt/Lt without exactly one integer) matches nothing, and the other terms still count;
//! - NotIn and DoesNotExist match a node without the key; Gt/Lt need the label to be an integer;
//! - matchFields knows `metadata.name` with In/NotIn and exactly one value (other keys read "").
//! - preferred terms of weight 0, empty, or that do not parse are left out.

use crate::api::{NodeSelectorRequirement, NodeSelectorTerm, PodSpec};
use crate::intern::Interner;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
}

/// One label requirement with its strings.
#[derive(Debug, Clone, PartialEq)]
pub struct Requirement {
    pub key: String,
    pub op: Op,
    pub values: Vec<String>,
    /// Gt/Lt's bound.
    pub bound: i64,
}

/// A node field requirement: `field == value` (In) or `!=` (NotIn).
#[derive(Debug, Clone, PartialEq)]
pub struct FieldRequirement {
    pub is_metadata_name: bool,
    pub equal: bool,
    pub value: String,
}

/// A term that parsed: every requirement must hold.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Term {
    pub labels: Vec<Requirement>,
    pub fields: Vec<FieldRequirement>,
}

/// What a pod asks of node labels and names.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PodNodeSelector {
    /// `spec.nodeSelector`: key = value, all of them.
    pub node_selector: Vec<(String, String)>,
    /// Required terms (None: no required affinity). Terms that cannot match are left out.
    pub required: Option<Vec<Term>>,
    /// Preferred terms and their weights.
    pub preferred: Vec<(i64, Term)>,
}

impl PodNodeSelector {
    pub fn is_empty(&self) -> bool {
        self.node_selector.is_empty() && self.required.is_none()
    }
}

fn parse_requirement(r: &NodeSelectorRequirement) -> Option<Requirement> {
    let values = r.values.clone().unwrap_or_default();
    let op = match r.operator.as_deref()? {
        "In" => Op::In,
        "NotIn" => Op::NotIn,
        "Exists" => Op::Exists,
        "DoesNotExist" => Op::DoesNotExist,
        "Gt" => Op::Gt,
        "Lt" => Op::Lt,
        _ => return None,
    };
    let bound = match op {
        Op::In | Op::NotIn if values.is_empty() => return None,
        Op::Exists | Op::DoesNotExist if !values.is_empty() => return None,
        Op::Gt | Op::Lt => match values.as_slice() {
            [v] => v.parse::<i64>().ok()?,
            _ => return None,
        },
        _ => 0,
    };
    Some(Requirement { key: r.key.clone().unwrap_or_default(), op, values, bound })
}

fn parse_field(r: &NodeSelectorRequirement) -> Option<FieldRequirement> {
    let equal = match r.operator.as_deref()? {
        "In" => true,
        "NotIn" => false,
        _ => return None,
    };
    let value = match r.values.as_deref() {
        Some([v]) => v.clone(),
        _ => return None,
    };
    Some(FieldRequirement { is_metadata_name: r.key.as_deref() == Some("metadata.name"), equal, value })
}

/// A term, or None when it is empty or does not parse (it then matches nothing).
pub fn parse_term(t: &NodeSelectorTerm) -> Option<Term> {
    let exprs = t.match_expressions.as_deref().unwrap_or_default();
    let fields = t.match_fields.as_deref().unwrap_or_default();
    if exprs.is_empty() && fields.is_empty() {
        return None;
    }
    let labels = exprs.iter().map(parse_requirement).collect::<Option<Vec<_>>>()?;
    let fields = fields.iter().map(parse_field).collect::<Option<Vec<_>>>()?;
    Some(Term { labels, fields })
}

pub fn parse(spec: &PodSpec) -> PodNodeSelector {
    let mut node_selector: Vec<(String, String)> =
        spec.node_selector.iter().flatten().map(|(k, v)| (k.clone(), v.clone())).collect();
    node_selector.sort();
    let na = spec.affinity.as_ref().and_then(|a| a.node_affinity.as_ref());
    let required = na
        .and_then(|na| na.required_during_scheduling_ignored_during_execution.as_ref())
        .map(|sel| sel.node_selector_terms.iter().flatten().filter_map(parse_term).collect());
    let preferred = na
        .and_then(|na| na.preferred_during_scheduling_ignored_during_execution.as_deref())
        .unwrap_or_default()
        .iter()
        .filter(|p| p.weight.unwrap_or(0) != 0)
        .filter_map(|p| Some((i64::from(p.weight.unwrap_or(0)), parse_term(p.preference.as_ref()?)?)))
        .collect();
    PodNodeSelector { node_selector, required, preferred }
}

// ---- compiled against the snapshot's strings --------------------------------------------------

/// A label requirement over interned ids (`None` key: no node has it; unknown values dropped).
#[derive(Debug, Clone)]
struct CRequirement {
    key: Option<u32>,
    op: Op,
    values: Vec<u32>,
    bound: i64,
}

#[derive(Debug, Clone, Default)]
pub struct CTerm {
    labels: Vec<CRequirement>,
    fields: Vec<FieldRequirement>,
}

/// Labels of a node: (key id, value id) sorted by key id.
pub fn label(labels: &[(u32, u32)], key: u32) -> Option<u32> {
    labels.binary_search_by_key(&key, |&(k, _)| k).ok().map(|i| labels[i].1)
}

impl CTerm {
    pub fn compile(t: &Term, strings: &Interner) -> CTerm {
        let labels = t
            .labels
            .iter()
            .map(|r| CRequirement {
                key: strings.get(&r.key),
                op: r.op,
                values: r.values.iter().filter_map(|v| strings.get(v)).collect(),
                bound: r.bound,
            })
            .collect();
        CTerm { labels, fields: t.fields.clone() }
    }

    /// Whether a node with these labels and name satisfies every requirement of the term.
    pub fn matches(&self, labels: &[(u32, u32)], name: &str, strings: &Interner) -> bool {
        self.labels.iter().all(|r| r.matches(labels, strings)) && self.fields_match(name)
    }

    fn fields_match(&self, name: &str) -> bool {
        // Upstream skips field selectors for a node without fields (a node always has a name).
        self.fields.iter().all(|f| {
            let got = if f.is_metadata_name { name } else { "" };
            (got == f.value) == f.equal
        })
    }
}

impl CRequirement {
    fn matches(&self, labels: &[(u32, u32)], strings: &Interner) -> bool {
        let value = self.key.and_then(|k| label(labels, k));
        match self.op {
            Op::In => value.is_some_and(|v| self.values.contains(&v)),
            Op::NotIn => value.is_none_or(|v| !self.values.contains(&v)),
            Op::Exists => value.is_some(),
            Op::DoesNotExist => value.is_none(),
            Op::Gt | Op::Lt => {
                let Some(n) = value.and_then(|v| strings.name(v).parse::<i64>().ok()) else { return false };
                if self.op == Op::Gt {
                    n > self.bound
                } else {
                    n < self.bound
                }
            }
        }
    }
}

/// A pod's node selection compiled for one scheduling cycle.
#[derive(Debug, Clone, Default)]
pub struct Compiled {
    /// spec.nodeSelector as (key, value) ids; `None` when some string is unknown (matches nothing).
    node_selector: Option<Vec<(u32, u32)>>,
    required: Option<Vec<CTerm>>,
    pub preferred: Vec<(i64, CTerm)>,
    /// Whether Filter has anything to check.
    pub filters: bool,
}

impl Compiled {
    pub fn new(sel: &PodNodeSelector, strings: &Interner) -> Compiled {
        let node_selector =
            sel.node_selector.iter().map(|(k, v)| Some((strings.get(k)?, strings.get(v)?))).collect::<Option<Vec<_>>>();
        Compiled {
            node_selector,
            required: sel.required.as_ref().map(|ts| ts.iter().map(|t| CTerm::compile(t, strings)).collect()),
            preferred: sel.preferred.iter().map(|(w, t)| (*w, CTerm::compile(t, strings))).collect(),
            filters: !sel.is_empty(),
        }
    }

    /// `RequiredNodeAffinity.Match`: nodeSelector, then any required term.
    pub fn required_match(&self, labels: &[(u32, u32)], name: &str, strings: &Interner) -> bool {
        let selector_ok = match &self.node_selector {
            Some(pairs) => pairs.iter().all(|&(k, v)| label(labels, k) == Some(v)),
            None => false,
        };
        selector_ok && self.required.as_ref().is_none_or(|ts| ts.iter().any(|t| t.matches(labels, name, strings)))
    }

    /// The NodeAffinity score before normalizing: the weights of the preferred terms that match.
    pub fn preferred_score(&self, labels: &[(u32, u32)], name: &str, strings: &Interner) -> i64 {
        self.preferred.iter().filter(|(_, t)| t.matches(labels, name, strings)).map(|(w, _)| w).sum()
    }
}
