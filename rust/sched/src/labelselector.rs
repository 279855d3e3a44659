//! `metav1.LabelSelector` over pod labels (`LabelSelectorAsSelector`), for PodTopologySpread
//! and InterPodAffinity, compiled against the snapshot's interned strings.
//!
//! - a missing selector selects nothing; an empty one (`{}`) selects everything;
//! - matchLabels are `key In (value)`; matchExpressions use In, NotIn, Exists, DoesNotExist
//!   (a selector with any other operator, or In/NotIn without values, selects nothing);
//! - `with_labels` adds `key In (value)` requirements (matchLabelKeys merged into a selector).

use crate::api::LabelSelector;
use crate::intern::Interner;
use crate::nodeaffinity::{CTerm, Op, Requirement, Term};

#[derive(Debug, Clone, PartialEq)]
pub enum Selector {
    Nothing,
    Everything,
    Requirements(Term),
}

fn requirement(key: &str, op: Op, values: Vec<String>) -> Requirement {
    Requirement { key: key.to_string(), op, values, bound: 0 }
}

impl Selector {
    pub fn parse(sel: Option<&LabelSelector>) -> Selector {
        let Some(sel) = sel else { return Selector::Nothing };
        let mut reqs: Vec<Requirement> = Vec::new();
        let mut labels: Vec<(&String, &String)> = sel.match_labels.iter().flatten().collect();
        labels.sort();
        for (k, v) in labels {
            reqs.push(requirement(k, Op::In, vec![v.clone()]));
        }
        for e in sel.match_expressions.iter().flatten() {
            let values = e.values.clone().unwrap_or_default();
            let op = match e.operator.as_deref() {
                Some("In") if !values.is_empty() => Op::In,
                Some("NotIn") if !values.is_empty() => Op::NotIn,
                Some("Exists") if values.is_empty() => Op::Exists,
                Some("DoesNotExist") if values.is_empty() => Op::DoesNotExist,
                _ => return Selector::Nothing,
            };
            reqs.push(requirement(e.key.as_deref().unwrap_or_default(), op, values));
        }
        if reqs.is_empty() {
            Selector::Everything
        } else {
            Selector::Requirements(Term { labels: reqs, fields: Vec::new() })
        }
    }

    /// The selector with `key = value` for each pair added (`mergeLabelSetWithSelector`; a
    /// selector that selected nothing becomes just the pairs).
    pub fn with_labels(self, pairs: &[(String, String)]) -> Selector {
        self.with_requirements(pairs, Op::In)
    }

    /// The selector with `key op (value)` for each pair added (In for matchLabelKeys, NotIn
    /// for pod affinity's mismatchLabelKeys).
    pub fn with_requirements(self, pairs: &[(String, String)], op: Op) -> Selector {
        if pairs.is_empty() {
            return self;
        }
        let mut labels: Vec<Requirement> = pairs.iter().map(|(k, v)| requirement(k, op, vec![v.clone()])).collect();
        if let Selector::Requirements(t) = self {
            labels.extend(t.labels);
        }
        Selector::Requirements(Term { labels, fields: Vec::new() })
    }
}

impl Selector {
    /// Matching against labels given as strings (sorted by key), e.g. the incoming pod's own.
    pub fn matches_strings(&self, labels: &[(String, String)]) -> bool {
        let Selector::Requirements(t) = self else { return *self == Selector::Everything };
        t.labels.iter().all(|r| {
            let value = labels.binary_search_by(|(k, _)| k.as_str().cmp(&r.key)).ok().map(|i| &labels[i].1);
            match r.op {
                Op::In => value.is_some_and(|v| r.values.contains(v)),
                Op::NotIn => value.is_none_or(|v| !r.values.contains(v)),
                Op::Exists => value.is_some(),
                Op::DoesNotExist => value.is_none(),
                Op::Gt | Op::Lt => false,
            }
        })
    }
}

/// A selector over interned labels.
#[derive(Debug, Clone)]
pub enum Compiled {
    Nothing,
    Everything,
    Term(CTerm),
}

impl Compiled {
    pub fn new(sel: &Selector, strings: &Interner) -> Compiled {
        match sel {
            Selector::Nothing => Compiled::Nothing,
            Selector::Everything => Compiled::Everything,
            Selector::Requirements(t) => Compiled::Term(CTerm::compile(t, strings)),
        }
    }

    pub fn matches(&self, labels: &[(u32, u32)], strings: &Interner) -> bool {
        match self {
            Compiled::Nothing => false,
            Compiled::Everything => true,
            Compiled::Term(t) => t.matches(labels, "", strings),
        }
    }

    /// `Selector.Empty()`: true only for the selector of everything.
    pub fn is_empty(&self) -> bool {
        matches!(self, Compiled::Everything)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{LabelSelector, NodeSelectorRequirement};

    fn strings_and_labels(pairs: &[(&str, &str)]) -> (Interner, Vec<(u32, u32)>) {
        let mut i = Interner::default();
        let mut labels: Vec<(u32, u32)> = pairs.iter().map(|(k, v)| (i.intern(k), i.intern(v))).collect();
        labels.sort();
        (i, labels)
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: Some(key.into()),
            operator: Some(op.into()),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        }
    }

    #[test]
    fn selects() {
        let (mut strings, labels) = strings_and_labels(&[("app", "web"), ("tier", "fe")]);
        strings.intern("db");
        let sel = |s: Option<LabelSelector>| Compiled::new(&Selector::parse(s.as_ref()), &strings).matches(&labels, &strings);
        assert!(!sel(None));
        assert!(sel(Some(LabelSelector::default())));
        let app = |v: &str| Some(LabelSelector { match_labels: Some([("app".into(), v.into())].into()), match_expressions: None });
        assert!(sel(app("web")));
        assert!(!sel(app("db")));
        let e = |r| Some(LabelSelector { match_labels: None, match_expressions: Some(vec![r]) });
        assert!(sel(e(expr("tier", "In", &["fe", "be"]))));
        assert!(sel(e(expr("zone", "DoesNotExist", &[]))));
        assert!(!sel(e(expr("tier", "NotIn", &["fe"]))));
        assert!(!sel(e(expr("tier", "Gt", &["1"]))), "not a label selector operator");
        assert!(!sel(e(expr("tier", "In", &[]))));
        let own = vec![("app".to_string(), "new".to_string())];
        let s = Selector::parse(app("new").as_ref());
        assert!(s.matches_strings(&own), "strings never interned still match");
        assert!(Selector::Everything.matches_strings(&own) && !Selector::Nothing.matches_strings(&own));
    }

    #[test]
    fn merges_match_label_keys() {
        let pairs = vec![("app".to_string(), "web".to_string())];
        assert!(matches!(Selector::Nothing.with_labels(&pairs), Selector::Requirements(t) if t.labels.len() == 1));
        assert!(matches!(Selector::Everything.with_labels(&pairs), Selector::Requirements(_)));
        assert_eq!(Selector::Everything.with_labels(&[]), Selector::Everything);
    }
}
