//! `metav1.LabelSelector` over pod labels (`LabelSelectorAsSelector`), for PodTopologySpread
//! and InterPodAffinity, compiled against the snapshot's interned strings.
//!
//! - a missing selector selects nothing; an empty one (`{}`) selects everything;
//! - matchLabels are `key In (value)`; matchExpressions use In, NotIn, Exists, DoesNotExist
//!   (a selector with any other operator, or In/NotIn without values, selects nothing);
//! - `with_labels` adds `key In (value)` requirements (matchLabelKeys merged into a selector).
//!
//! [`validate`] gives the error upstream's `LabelSelectorAsSelector` returns for a selector it
//! refuses (an operator it does not know, In/NotIn without values, Exists/DoesNotExist with
//! values, a key that is not a qualified name, a value that is not a label value), with
//! apimachinery's wording, e.g. `values[0][app]: Invalid value: "a b": a valid label must be ...`.

use kubecore_fieldpath::canon::go_quote;

use crate::api::{LabelSelector, NodeSelectorRequirement};
use crate::intern::Interner;
use crate::nodeaffinity::{CTerm, Op, Requirement, Term};

const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_MSG: &str =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' \
     or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
     characters, '-' or '.', and must start and end with an alphanumeric character";

/// apimachinery's `RegexError`: the message, examples and the regex.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let examples: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!("{msg} (e.g. {}regex used for validation is '{fmt}')", examples.join(" or "))
}

/// Go's `%#v` of the `[]string` a requirement was given.
fn go_string_slice(values: &[String]) -> String {
    if values.is_empty() {
        return "[]string(nil)".to_string();
    }
    let quoted: Vec<String> = values.iter().map(|v| go_quote(v)).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// `validation.IsQualifiedName`'s messages (empty: the key is valid).
fn qualified_name_errors(key: &str) -> Vec<String> {
    let parts: Vec<&str> = key.split('/').collect();
    let mut errs = Vec::new();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                if prefix.len() > 253 {
                    errs.push("prefix part must be no more than 253 characters".to_string());
                }
                if !crate::nodeaffinity::is_dns1123_subdomain_pattern(prefix) {
                    let m = regex_error(DNS1123_SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, &["example.com"]);
                    errs.push(format!("prefix part {m}"));
                }
            }
            *name
        }
        _ => {
            let m = regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"]);
            return vec![format!(
                "a qualified name {m} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".to_string());
    }
    if !crate::nodeaffinity::is_name_part(name) {
        let m = regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"]);
        errs.push(format!("name part {m}"));
    }
    errs
}

/// `validation.IsValidLabelValue`'s messages (empty: the value is valid).
fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !value.is_empty() && !crate::nodeaffinity::is_name_part(value) {
        errs.push(regex_error(LABEL_VALUE_MSG, LABEL_VALUE_FMT, &["MyValue", "my_value", "12345"]));
    }
    errs
}

/// An error list as `ErrorList.ToAggregate().Error()` prints it: duplicates dropped, one
/// message as it is, several as `[a, b]`.
pub fn aggregate(errs: Vec<String>) -> Option<String> {
    let mut unique: Vec<String> = Vec::with_capacity(errs.len());
    for e in errs {
        if !unique.contains(&e) {
            unique.push(e);
        }
    }
    match unique.len() {
        0 => None,
        1 => unique.pop(),
        _ => Some(format!("[{}]", unique.join(", "))),
    }
}

/// `labels.NewRequirement`'s error for one requirement (`equals`: a matchLabels pair).
fn requirement_error(key: &str, op: Op, equals: bool, values: &[String]) -> Option<String> {
    let mut errs = Vec::new();
    let key_errs = qualified_name_errors(key);
    if !key_errs.is_empty() {
        errs.push(format!("key: Invalid value: {}: {}", go_quote(key), key_errs.join("; ")));
    }
    let count = match op {
        _ if equals => (values.len() != 1).then_some("exact-match compatibility requires one single value"),
        Op::In | Op::NotIn => values.is_empty().then_some("for 'in', 'notin' operators, values set can't be empty"),
        _ => (!values.is_empty()).then_some("values set must be empty for exists and does not exist"),
    };
    if let Some(m) = count {
        errs.push(format!("values: Invalid value: {}: {m}", go_string_slice(values)));
    }
    for (i, v) in values.iter().enumerate() {
        let v_errs = label_value_errors(v);
        if !v_errs.is_empty() {
            errs.push(format!("values[{i}][{key}]: Invalid value: {}: {}", go_quote(v), v_errs.join("; ")));
        }
    }
    aggregate(errs)
}

fn operator(op: Option<&str>) -> Option<Op> {
    match op {
        Some("In") => Some(Op::In),
        Some("NotIn") => Some(Op::NotIn),
        Some("Exists") => Some(Op::Exists),
        Some("DoesNotExist") => Some(Op::DoesNotExist),
        _ => None,
    }
}

fn pair_ok(k: &str, v: &str) -> bool {
    crate::nodeaffinity::is_qualified_name(k) && crate::nodeaffinity::is_valid_label_value(v)
}

fn expression_ok(e: &NodeSelectorRequirement) -> bool {
    let values = e.values.as_deref().unwrap_or_default();
    let counts_ok = match operator(e.operator.as_deref()) {
        Some(Op::In | Op::NotIn) => !values.is_empty(),
        Some(_) => values.is_empty(),
        None => return false,
    };
    counts_ok
        && crate::nodeaffinity::is_qualified_name(e.key.as_deref().unwrap_or_default())
        && values.iter().all(|v| crate::nodeaffinity::is_valid_label_value(v))
}

/// The error upstream's `LabelSelectorAsSelector` gives for `sel` (None: it converts). The
/// matchLabels pairs are checked in key order (upstream: a map's order), then matchExpressions;
/// the first requirement that fails gives the error. A valid selector costs a scan of its
/// strings and no allocation.
pub fn validate(sel: Option<&LabelSelector>) -> Option<String> {
    let sel = sel?;
    let labels_ok = sel.match_labels.iter().flatten().all(|(k, v)| pair_ok(k, v));
    if labels_ok && sel.match_expressions.iter().flatten().all(expression_ok) {
        return None;
    }
    let mut labels: Vec<(&String, &String)> = sel.match_labels.iter().flatten().collect();
    labels.sort();
    for (k, v) in labels.into_iter().filter(|(k, v)| !pair_ok(k, v)) {
        if let Some(e) = requirement_error(k, Op::In, true, std::slice::from_ref(v)) {
            return Some(e);
        }
    }
    for e in sel.match_expressions.iter().flatten().filter(|e| !expression_ok(e)) {
        let Some(op) = operator(e.operator.as_deref()) else {
            return Some(format!("{} is not a valid label selector operator", go_quote(e.operator.as_deref().unwrap_or_default())));
        };
        let values = e.values.as_deref().unwrap_or_default();
        if let Some(err) = requirement_error(e.key.as_deref().unwrap_or_default(), op, false, values) {
            return Some(err);
        }
    }
    None
}

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
            let op = match operator(e.operator.as_deref()) {
                Some(op @ (Op::In | Op::NotIn)) if !values.is_empty() => op,
                Some(op @ (Op::Exists | Op::DoesNotExist)) if values.is_empty() => op,
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
    fn quotes_and_aggregates_as_go() {
        assert_eq!(go_string_slice(&[]), "[]string(nil)");
        assert_eq!(go_string_slice(&["a".into(), "b".into()]), "[]string{\"a\", \"b\"}");
        assert_eq!(aggregate(vec![]), None);
        assert_eq!(aggregate(vec!["x".into(), "x".into()]), Some("x".into()));
        assert_eq!(aggregate(vec!["x".into(), "y".into(), "x".into()]), Some("[x, y]".into()));
        let sel = |e| Some(LabelSelector { match_labels: None, match_expressions: Some(vec![e]) });
        assert_eq!(validate(sel(expr("app", "In", &["ok"])).as_ref()), None);
        assert_eq!(validate(None), None);
        assert!(validate(sel(expr("app", "In", &["a b"])).as_ref()).unwrap().starts_with("values[0][app]: Invalid value: \"a b\": "));
        let long = "x".repeat(64);
        let too_long = validate(sel(expr("app", "In", &[&long])).as_ref()).unwrap();
        assert!(too_long.ends_with(": must be no more than 63 characters"), "{too_long}");
        let prefixed = validate(sel(expr("Example.com/app", "Exists", &[])).as_ref()).unwrap();
        assert!(prefixed.starts_with("key: Invalid value: \"Example.com/app\": prefix part a lowercase RFC 1123 subdomain"), "{prefixed}");
    }

    #[test]
    fn merges_match_label_keys() {
        let pairs = vec![("app".to_string(), "web".to_string())];
        assert!(matches!(Selector::Nothing.with_labels(&pairs), Selector::Requirements(t) if t.labels.len() == 1));
        assert!(matches!(Selector::Everything.with_labels(&pairs), Selector::Requirements(_)));
        assert_eq!(Selector::Everything.with_labels(&[]), Selector::Everything);
    }
}
