//! Pod affinity terms (`framework.AffinityTerm`): a label selector over pods, the namespaces
//! it looks in, and a topology key; parsed once per pod.
//!
//! - A term without `namespaces` and `namespaceSelector` looks in the pod's own namespace;
//!   otherwise in `namespaces` plus what `namespaceSelector` selects. The kernels do not see
//!   Namespace objects: an empty `namespaceSelector` (`{}`) selects every namespace, and any
//!   other is read from the term's `resolvedNamespaces` field, which the caller fills with the
//!   namespaces the selector selected (missing: it selects none).
//! - matchLabelKeys / mismatchLabelKeys add `key In (v)` / `key NotIn (v)` with the value of
//!   the term owner's label `key` (keys the owner lacks are skipped); a term without
//!   labelSelector matches nothing and gets none added (upstream merges them at pod creation,
//!   in the API server, the same way).
//! - Preferred terms carry their weight; weight 0 terms are dropped.
//! - A term whose labelSelector or namespaceSelector upstream's `LabelSelectorAsSelector`
//!   refuses (an invalid label value, ...) makes its whole kind (required or preferred affinity or
//!   anti-affinity) empty, and `parse_error` says why, as upstream's `NewPodInfo`: for a counted
//!   pod the kind is then ignored; for the pod being scheduled InterPodAffinity's PreFilter fails
//!   (UnschedulableAndUnresolvable) and its PreScore errors.

use crate::api::{self, PodAffinityTerm};
use crate::intern::Interner;
use crate::labelselector::{self, Compiled as CSelector, Selector};
use crate::nodeaffinity::Op;

#[derive(Debug, Clone, PartialEq)]
pub struct Term {
    pub selector: Selector,
    pub namespaces: Vec<String>,
    pub all_namespaces: bool,
    pub key: String,
}

fn label_pairs(keys: Option<&Vec<String>>, labels: &[(String, String)]) -> Vec<(String, String)> {
    keys.into_iter().flatten().filter_map(|k| labels.iter().find(|(lk, _)| lk == k).cloned()).collect()
}

impl Term {
    fn parse(t: &PodAffinityTerm, namespace: &str, labels: &[(String, String)]) -> Term {
        let selector = match t.label_selector.as_ref() {
            // A missing labelSelector matches nothing and stays so: the label keys are not
            // merged into it (upstream's applyMatchLabelKeysAndMismatchLabelKeys).
            None => Selector::Nothing,
            Some(sel) => Selector::parse(Some(sel))
                .with_requirements(&label_pairs(t.match_label_keys.as_ref(), labels), Op::In)
                .with_requirements(&label_pairs(t.mismatch_label_keys.as_ref(), labels), Op::NotIn),
        };
        let mut namespaces = t.namespaces.clone().unwrap_or_default();
        let all_namespaces = match &t.namespace_selector {
            None => {
                if namespaces.is_empty() {
                    namespaces.push(namespace.to_string());
                }
                false
            }
            Some(sel) => match Selector::parse(Some(sel)) {
                Selector::Everything => true,
                _ => {
                    namespaces.extend(t.resolved_namespaces.iter().flatten().cloned());
                    false
                }
            },
        };
        Term { selector, namespaces, all_namespaces, key: t.topology_key.clone().unwrap_or_default() }
    }

    /// `AffinityTerm.Matches` for a pod given by strings (the pod being scheduled).
    pub fn matches_strings(&self, namespace: &str, labels: &[(String, String)]) -> bool {
        (self.all_namespaces || self.namespaces.iter().any(|n| n == namespace)) && self.selector.matches_strings(labels)
    }
}

/// A pod's affinity terms, required and preferred (weight, term).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodTerms {
    pub affinity: Vec<Term>,
    pub anti_affinity: Vec<Term>,
    pub preferred_affinity: Vec<(i64, Term)>,
    pub preferred_anti_affinity: Vec<(i64, Term)>,
    /// `NewPodInfo`'s error, e.g. `requiredAffinityTerms: values[0][app]: Invalid value: ...`
    /// (None: every term's selectors convert).
    pub parse_error: Option<String>,
    /// The pod lists preferred affinity or anti-affinity terms (any weight, parsed or not):
    /// upstream's `hasPreferredAffinityConstraints || hasPreferredAntiAffinityConstraints`.
    pub declares_preferred: bool,
}

/// The first term whose selectors do not convert: its error.
fn terms_error<'a>(mut terms: impl Iterator<Item = &'a PodAffinityTerm>) -> Option<String> {
    terms.find_map(|t| {
        labelselector::validate(t.label_selector.as_ref()).or_else(|| labelselector::validate(t.namespace_selector.as_ref()))
    })
}

impl PodTerms {
    pub fn parse(spec: &api::PodSpec, namespace: &str, labels: &[(String, String)]) -> PodTerms {
        let aff = spec.affinity.as_ref();
        let required = |pa: Option<&api::PodAffinity>| -> Vec<Term> {
            let terms = pa.and_then(|a| a.required_during_scheduling_ignored_during_execution.as_deref());
            terms.unwrap_or_default().iter().map(|t| Term::parse(t, namespace, labels)).collect()
        };
        let preferred = |pa: Option<&api::PodAffinity>| -> Vec<(i64, Term)> {
            let terms = pa.and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_deref());
            terms
                .unwrap_or_default()
                .iter()
                .filter(|w| w.weight.unwrap_or(0) != 0)
                .filter_map(|w| Some((w.weight.unwrap_or(0), Term::parse(w.pod_affinity_term.as_ref()?, namespace, labels))))
                .collect()
        };
        let (pa, anti) = (aff.and_then(|a| a.pod_affinity.as_ref()), aff.and_then(|a| a.pod_anti_affinity.as_ref()));
        let mut terms = PodTerms {
            affinity: required(pa),
            anti_affinity: required(anti),
            preferred_affinity: preferred(pa),
            preferred_anti_affinity: preferred(anti),
            parse_error: None,
            declares_preferred: [pa, anti]
                .iter()
                .any(|a| a.and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref()).is_some_and(|p| !p.is_empty())),
        };
        if pa.is_some() || anti.is_some() {
            terms.validate(pa, anti);
        }
        terms
    }

    /// `NewPodInfo`'s checks: a kind with a term that does not convert is emptied and named in
    /// `parse_error` (kinds in upstream's order, the errors aggregated as upstream does).
    fn validate(&mut self, pa: Option<&api::PodAffinity>, anti: Option<&api::PodAffinity>) {
        let required = |a: Option<&api::PodAffinity>| {
            terms_error(a.and_then(|a| a.required_during_scheduling_ignored_during_execution.as_deref()).unwrap_or_default().iter())
        };
        let preferred = |a: Option<&api::PodAffinity>| {
            let weighted = a.and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_deref()).unwrap_or_default();
            terms_error(weighted.iter().filter_map(|w| w.pod_affinity_term.as_ref()))
        };
        const KINDS: [&str; 4] =
            ["requiredAffinityTerms", "requiredAntiAffinityTerms", "preferredAffinityTerms", "preferredAntiAffinityTerms"];
        let found = [required(pa), required(anti), preferred(pa), preferred(anti)];
        let mut errors = Vec::new();
        for (i, (kind, err)) in KINDS.iter().zip(found).enumerate() {
            let Some(e) = err else { continue };
            errors.push(format!("{kind}: {e}"));
            match i {
                0 => self.affinity.clear(),
                1 => self.anti_affinity.clear(),
                2 => self.preferred_affinity.clear(),
                _ => self.preferred_anti_affinity.clear(),
            }
        }
        self.parse_error = labelselector::aggregate(errors);
    }

    pub fn is_empty(&self) -> bool {
        self.affinity.is_empty()
            && self.anti_affinity.is_empty()
            && self.preferred_affinity.is_empty()
            && self.preferred_anti_affinity.is_empty()
    }
}

/// A term of the pod being scheduled, compiled to match counted pods (interned labels).
#[derive(Debug, Clone)]
pub struct CTerm {
    selector: CSelector,
    /// Namespace ids (unknown names dropped: no counted pod is there).
    namespaces: Vec<u32>,
    all_namespaces: bool,
    /// Topology key id (None: no node has the key).
    pub key: Option<u32>,
}

impl CTerm {
    pub fn compile(t: &Term, strings: &Interner) -> CTerm {
        CTerm {
            selector: CSelector::new(&t.selector, strings),
            namespaces: t.namespaces.iter().filter_map(|n| strings.get(n)).collect(),
            all_namespaces: t.all_namespaces,
            key: strings.get(&t.key),
        }
    }

    /// `AffinityTerm.Matches` for a counted pod.
    pub fn matches(&self, namespace: u32, labels: &[(u32, u32)], strings: &Interner) -> bool {
        (self.all_namespaces || self.namespaces.contains(&namespace)) && self.selector.matches(labels, strings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::from_json;

    fn terms(json: &str) -> PodTerms {
        let pod: api::Pod = from_json(json.as_bytes(), "pod").unwrap();
        let labels = vec![("app".to_string(), "web".to_string()), ("ver".to_string(), "2".to_string())];
        PodTerms::parse(pod.spec.as_ref().unwrap(), "ns1", &labels)
    }

    #[test]
    fn namespaces_and_label_keys() {
        let t = terms(
            r#"{"spec":{"affinity":{"podAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[
                {"labelSelector":{"matchLabels":{"app":"web"}},"topologyKey":"zone"},
                {"labelSelector":{},"namespaces":["a"],"topologyKey":"zone","matchLabelKeys":["ver"]},
                {"labelSelector":{},"namespaceSelector":{},"topologyKey":"zone","mismatchLabelKeys":["app"]},
                {"labelSelector":{},"namespaceSelector":{"matchLabels":{"team":"x"}},"resolvedNamespaces":["x1"],"topologyKey":"zone"}]},
              "podAntiAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[
                {"weight":0,"podAffinityTerm":{"topologyKey":"zone"}},
                {"weight":5,"podAffinityTerm":{"labelSelector":{},"topologyKey":"zone"}}]}}}}"#,
        );
        let own = vec![("app".to_string(), "web".to_string())];
        assert!(t.affinity[0].matches_strings("ns1", &own));
        assert!(!t.affinity[0].matches_strings("ns2", &own), "own namespace only");
        assert_eq!(t.affinity[1].namespaces, vec!["a".to_string()]);
        let v2 = vec![("ver".to_string(), "2".to_string())];
        assert!(t.affinity[1].matches_strings("a", &v2) && !t.affinity[1].matches_strings("a", &own));
        assert!(t.affinity[2].all_namespaces);
        assert!(!t.affinity[2].matches_strings("zz", &own), "mismatchLabelKeys: app NotIn (web)");
        assert!(t.affinity[3].matches_strings("x1", &own) && !t.affinity[3].matches_strings("ns1", &own));
        assert_eq!(t.preferred_anti_affinity.len(), 1);
        assert_eq!(t.preferred_anti_affinity[0].0, 5);
    }
}
