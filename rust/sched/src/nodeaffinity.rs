//! Node selectors: `spec.nodeSelector`, required and preferred node affinity terms
//! (component-helpers' `nodeaffinity`), parsed from a pod and then compiled against the
//! snapshot's interned label strings.
//!
//! Rules kept from upstream:
//! - terms are ORed; inside a term, matchExpressions and matchFields are ANDed;
//! - a term with neither matches nothing; an empty required term list matches nothing;
//! - a term that does not parse (unknown operator, In/NotIn without values, Exists with values,
//!   Gt/Lt without exactly one integer, a key that is not a qualified name, a value that is not a
//!   valid label value: `labels.NewRequirement`) matches nothing, and the other terms still count;
//! - NotIn and DoesNotExist match a node without the key; Gt/Lt need the label to be an integer;
//! - matchFields knows `metadata.name` with In/NotIn and exactly one value (other keys read "").
//! - preferred terms of weight 0, empty, or that do not parse are left out.
//! - NodeAffinityArgs.addedAffinity ([`AddedAffinity`]): its required terms are checked before the
//!   pod's (failing them is "scheduler-enforced"), its preferred terms add to the pod's; a term of
//!   it that does not parse is a configuration error, as upstream's plugin constructor.

use crate::api::{self, NodeSelectorRequirement, NodeSelectorTerm, PodSpec};
use crate::intern::Interner;
use crate::Error;

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
    /// NodeAffinity's PreFilterResult: when every required term has a `metadata.name In`
    /// matchFields requirement, the node names the terms allow (per term the intersection of
    /// those requirements' values, then the union over the terms; sorted). None: all nodes.
    /// Some(empty): the terms conflict (PreFilter fails).
    pub node_names: Option<Vec<String>>,
}

impl PodNodeSelector {
    pub fn is_empty(&self) -> bool {
        self.node_selector.is_empty() && self.required.is_none()
    }
}

/// `validation.IsQualifiedName`: an optional DNS-subdomain prefix and "/", then a name of at most
/// 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric.
pub fn is_qualified_name(key: &str) -> bool {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if name.contains('/') {
        return false;
    }
    prefix.is_none_or(is_dns1123_subdomain) && !name.is_empty() && name.len() <= 63 && is_name_part(name)
}

/// `validation.IsValidLabelValue`: empty, or at most 63 characters as a qualified name's name part.
pub fn is_valid_label_value(value: &str) -> bool {
    value.is_empty() || (value.len() <= 63 && is_name_part(value))
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
pub(crate) fn is_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    let ext = |c: &u8| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.');
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => f.is_ascii_alphanumeric() && l.is_ascii_alphanumeric() && b.iter().all(ext),
        _ => false,
    }
}

/// `validation.IsDNS1123Subdomain`: at most 253 characters, dot-separated lowercase RFC 1123 labels.
fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && is_dns1123_subdomain_pattern(s)
}

/// Dot-separated lowercase RFC 1123 labels (`IsDNS1123Subdomain`'s regex, any length).
pub(crate) fn is_dns1123_subdomain_pattern(s: &str) -> bool {
    let label = |l: &str| {
        let b = l.as_bytes();
        let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        match (b.first(), b.last()) {
            (Some(f), Some(e)) => alnum(f) && alnum(e) && b.iter().all(|c| alnum(c) || *c == b'-'),
            _ => false,
        }
    };
    !s.is_empty() && s.split('.').all(label)
}

fn parse_requirement(r: &NodeSelectorRequirement) -> Option<Requirement> {
    let values = r.values.clone().unwrap_or_default();
    let key = r.key.clone().unwrap_or_default();
    if !is_qualified_name(&key) || !values.iter().all(|v| is_valid_label_value(v)) {
        return None;
    }
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
    Some(Requirement { key, op, values, bound })
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
    parse_term_strict(t).ok().flatten()
}

/// A term: Ok(None) when it is empty, Err when it does not parse.
fn parse_term_strict(t: &NodeSelectorTerm) -> Result<Option<Term>, ()> {
    let exprs = t.match_expressions.as_deref().unwrap_or_default();
    let fields = t.match_fields.as_deref().unwrap_or_default();
    if exprs.is_empty() && fields.is_empty() {
        return Ok(None);
    }
    let labels = exprs.iter().map(parse_requirement).collect::<Option<Vec<_>>>().ok_or(())?;
    let fields = fields.iter().map(parse_field).collect::<Option<Vec<_>>>().ok_or(())?;
    Ok(Some(Term { labels, fields }))
}

/// `NodeAffinityArgs.addedAffinity`, parsed once for a profile.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AddedAffinity {
    /// Required terms (None: none; empty terms are left out, as in `NewNodeSelector`).
    pub required: Option<Vec<Term>>,
    /// Preferred terms of non-zero weight.
    pub preferred: Vec<(i64, Term)>,
}

impl AddedAffinity {
    /// From the JSON of a `v1.NodeAffinity`; a term that does not parse is an error.
    pub fn from_json(bytes: &[u8]) -> Result<AddedAffinity, Error> {
        let na: api::NodeAffinity =
            serde_json::from_slice(bytes).map_err(|e| Error::Config(format!("addedAffinity: {e}")))?;
        let bad = |what: &str, i: usize| Error::Config(format!("addedAffinity: {what}[{i}] does not parse"));
        let required = match &na.required_during_scheduling_ignored_during_execution {
            None => None,
            Some(sel) => {
                let mut terms = Vec::new();
                for (i, t) in sel.node_selector_terms.iter().flatten().enumerate() {
                    let what = "requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";
                    terms.extend(parse_term_strict(t).map_err(|_| bad(what, i))?);
                }
                Some(terms)
            }
        };
        let mut preferred = Vec::new();
        let prefs = na.preferred_during_scheduling_ignored_during_execution.as_deref().unwrap_or_default();
        for (i, p) in prefs.iter().enumerate() {
            let weight = i64::from(p.weight.unwrap_or(0));
            let Some(t) = p.preference.as_ref().filter(|_| weight != 0) else { continue };
            let what = "preferredDuringSchedulingIgnoredDuringExecution";
            preferred.extend(parse_term_strict(t).map_err(|_| bad(what, i))?.map(|t| (weight, t)));
        }
        Ok(AddedAffinity { required, preferred })
    }
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
    let node_names = na
        .and_then(|na| na.required_during_scheduling_ignored_during_execution.as_ref())
        .and_then(|sel| required_node_names(sel.node_selector_terms.as_deref().unwrap_or_default()));
    PodNodeSelector { node_selector, required, preferred, node_names }
}

/// NodeAffinity's PreFilter over the pod's required terms as written (terms that do not parse
/// included): None when there are none or some term has no `metadata.name In` requirement.
fn required_node_names(terms: &[NodeSelectorTerm]) -> Option<Vec<String>> {
    if terms.is_empty() {
        return None;
    }
    let mut names: Vec<String> = Vec::new();
    for t in terms {
        let mut term_names: Option<Vec<&String>> = None;
        let by_name = t.match_fields.iter().flatten().filter(|r| {
            r.key.as_deref() == Some("metadata.name") && r.operator.as_deref() == Some("In")
        });
        for r in by_name {
            let values = r.values.iter().flatten();
            term_names = Some(match term_names {
                None => values.collect(),
                Some(prev) => prev.into_iter().filter(|n| r.values.iter().flatten().any(|v| v == *n)).collect(),
            });
        }
        names.extend(term_names?.into_iter().cloned());
    }
    names.sort();
    names.dedup();
    Some(names)
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

/// NodeAffinity's Filter reason for the pod's own nodeSelector and terms.
pub const ERR_REASON_POD: &str = "node(s) didn't match Pod's node affinity/selector";
/// NodeAffinity's Filter reason for the profile's addedAffinity.
pub const ERR_REASON_ENFORCED: &str = "node(s) didn't match scheduler-enforced node affinity";

/// A pod's node selection compiled for one scheduling cycle.
#[derive(Debug, Clone, Default)]
pub struct Compiled {
    /// spec.nodeSelector as (key, value) ids; `None` when some string is unknown (matches nothing).
    node_selector: Option<Vec<(u32, u32)>>,
    required: Option<Vec<CTerm>>,
    /// The profile's addedAffinity required terms.
    enforced: Option<Vec<CTerm>>,
    pub preferred: Vec<(i64, CTerm)>,
    /// Whether Filter has anything to check.
    pub filters: bool,
}

fn compile_terms(ts: &[Term], strings: &Interner) -> Vec<CTerm> {
    ts.iter().map(|t| CTerm::compile(t, strings)).collect()
}

fn any_matches(ts: &[CTerm], labels: &[(u32, u32)], name: &str, strings: &Interner) -> bool {
    ts.iter().any(|t| t.matches(labels, name, strings))
}

impl Compiled {
    pub fn new(sel: &PodNodeSelector, strings: &Interner) -> Compiled {
        Compiled::with_added(sel, None, strings)
    }

    /// The pod's selection with the profile's addedAffinity, if any.
    pub fn with_added(sel: &PodNodeSelector, added: Option<&AddedAffinity>, strings: &Interner) -> Compiled {
        let node_selector =
            sel.node_selector.iter().map(|(k, v)| Some((strings.get(k)?, strings.get(v)?))).collect::<Option<Vec<_>>>();
        let enforced = added.and_then(|a| a.required.as_deref()).map(|ts| compile_terms(ts, strings));
        let added_preferred = added.map(|a| a.preferred.as_slice()).unwrap_or_default();
        Compiled {
            node_selector,
            required: sel.required.as_deref().map(|ts| compile_terms(ts, strings)),
            filters: !sel.is_empty() || enforced.is_some(),
            enforced,
            preferred: sel.preferred.iter().chain(added_preferred).map(|(w, t)| (*w, CTerm::compile(t, strings))).collect(),
        }
    }

    /// NodeAffinity's Filter: the addedAffinity's required terms first (`ERR_REASON_ENFORCED`),
    /// then the pod's nodeSelector and required terms (`ERR_REASON_POD`).
    pub fn failure(&self, labels: &[(u32, u32)], name: &str, strings: &Interner) -> Option<&'static str> {
        if self.enforced.as_deref().is_some_and(|ts| !any_matches(ts, labels, name, strings)) {
            return Some(ERR_REASON_ENFORCED);
        }
        (!self.pod_required_match(labels, name, strings)).then_some(ERR_REASON_POD)
    }

    /// Whether the node passes the Filter (addedAffinity and the pod's own selection).
    pub fn required_match(&self, labels: &[(u32, u32)], name: &str, strings: &Interner) -> bool {
        self.enforced.as_deref().is_none_or(|ts| any_matches(ts, labels, name, strings))
            && self.pod_required_match(labels, name, strings)
    }

    /// `RequiredNodeAffinity.Match`: the pod's nodeSelector, then any of its required terms
    /// (without the addedAffinity: what PodTopologySpread's nodeAffinityPolicy Honor uses).
    pub fn pod_required_match(&self, labels: &[(u32, u32)], name: &str, strings: &Interner) -> bool {
        let selector_ok = match &self.node_selector {
            Some(pairs) => pairs.iter().all(|&(k, v)| label(labels, k) == Some(v)),
            None => false,
        };
        selector_ok && self.required.as_deref().is_none_or(|ts| any_matches(ts, labels, name, strings))
    }

    /// The NodeAffinity score before normalizing: the weights of the preferred terms that match.
    pub fn preferred_score(&self, labels: &[(u32, u32)], name: &str, strings: &Interner) -> i64 {
        self.preferred.iter().filter(|(_, t)| t.matches(labels, name, strings)).map(|(w, _)| w).sum()
    }
}
