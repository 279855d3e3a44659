//! Taints and tolerations (`v1.Toleration.ToleratesTaint`), the TaintToleration filter and
//! score inputs, and NodeUnschedulable's toleration check.
//!
//! - A toleration with an effect only tolerates taints of that effect; with a key, only that key
//!   (an empty key with `Exists` tolerates everything).
//! - Operator "" or "Equal" compares values; "Exists" ignores them; anything else tolerates nothing.
//! - Filter looks at NoSchedule and NoExecute taints and fails a node with one untolerated as
//!   `node(s) had untolerated taint(s)` (upstream since 1.35: the taint's key and value are not
//!   shown, they may be sensitive).
//! - Score counts PreferNoSchedule taints not tolerated by the tolerations whose effect is
//!   PreferNoSchedule or empty.

use std::sync::Arc;

use crate::api;

pub const NO_SCHEDULE: &str = "NoSchedule";
pub const NO_EXECUTE: &str = "NoExecute";
pub const PREFER_NO_SCHEDULE: &str = "PreferNoSchedule";
/// TaintToleration's Filter reason.
pub const UNTOLERATED: &str = "node(s) had untolerated taint(s)";
/// `v1.TaintNodeUnschedulable`.
pub const UNSCHEDULABLE_TAINT_KEY: &str = "node.kubernetes.io/unschedulable";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: String,
    /// The filter's reason for this taint.
    pub reason: Arc<str>,
    /// Effect NoSchedule or NoExecute (the filter's concern).
    pub blocks: bool,
}

impl Taint {
    pub fn new(key: &str, value: &str, effect: &str) -> Taint {
        let reason = Arc::from(UNTOLERATED);
        let blocks = effect == NO_SCHEDULE || effect == NO_EXECUTE;
        Taint { key: key.to_string(), value: value.to_string(), effect: effect.to_string(), reason, blocks }
    }

    pub fn from_api(t: &api::Taint) -> Taint {
        Taint::new(
            t.key.as_deref().unwrap_or_default(),
            t.value.as_deref().unwrap_or_default(),
            t.effect.as_deref().unwrap_or_default(),
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TolOp {
    Equal,
    Exists,
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Toleration {
    key: String,
    op: TolOp,
    value: String,
    effect: String,
}

impl Toleration {
    pub fn from_api(t: &api::Toleration) -> Toleration {
        let op = match t.operator.as_deref().unwrap_or_default() {
            "" | "Equal" => TolOp::Equal,
            "Exists" => TolOp::Exists,
            _ => TolOp::Unknown,
        };
        Toleration {
            key: t.key.clone().unwrap_or_default(),
            op,
            value: t.value.clone().unwrap_or_default(),
            effect: t.effect.clone().unwrap_or_default(),
        }
    }

    /// `ToleratesTaint` for a taint given by its parts.
    pub fn tolerates(&self, key: &str, value: &str, effect: &str) -> bool {
        if !self.effect.is_empty() && self.effect != effect {
            return false;
        }
        if !self.key.is_empty() && self.key != key {
            return false;
        }
        match self.op {
            TolOp::Equal => self.value == value,
            TolOp::Exists => true,
            TolOp::Unknown => false,
        }
    }
}

/// A pod's tolerations, with the subset the score uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tolerations {
    all: Vec<Toleration>,
    prefer_no_schedule: Vec<Toleration>,
    /// Whether the pod tolerates `node.kubernetes.io/unschedulable:NoSchedule`.
    pub tolerates_unschedulable: bool,
}

impl Tolerations {
    pub fn new(api: &[api::Toleration]) -> Tolerations {
        let all: Vec<Toleration> = api.iter().map(Toleration::from_api).collect();
        let prefer_no_schedule =
            all.iter().filter(|t| t.effect.is_empty() || t.effect == PREFER_NO_SCHEDULE).cloned().collect();
        let tolerates_unschedulable = all.iter().any(|t| t.tolerates(UNSCHEDULABLE_TAINT_KEY, "", NO_SCHEDULE));
        Tolerations { all, prefer_no_schedule, tolerates_unschedulable }
    }

    fn tolerate(list: &[Toleration], t: &Taint) -> bool {
        list.iter().any(|tol| tol.tolerates(&t.key, &t.value, &t.effect))
    }

    /// The first NoSchedule/NoExecute taint none of the tolerations tolerates.
    pub fn first_untolerated<'a>(&self, taints: &'a [Taint]) -> Option<&'a Taint> {
        taints.iter().find(|t| t.blocks && !Self::tolerate(&self.all, t))
    }

    /// TaintToleration's raw score: intolerable PreferNoSchedule taints.
    pub fn intolerable_prefer_no_schedule(&self, taints: &[Taint]) -> i64 {
        taints.iter().filter(|t| t.effect == PREFER_NO_SCHEDULE && !Self::tolerate(&self.prefer_no_schedule, t)).count()
            as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tol(key: &str, op: &str, value: &str, effect: &str) -> api::Toleration {
        let s = |x: &str| (!x.is_empty()).then(|| x.to_string());
        api::Toleration { key: s(key), operator: s(op), value: s(value), effect: s(effect) }
    }

    #[test]
    fn toleration_rules() {
        let t = Taint::new("k", "v", NO_SCHEDULE);
        let ok = |api: api::Toleration| Tolerations::new(&[api]).first_untolerated(std::slice::from_ref(&t)).is_none();
        assert!(ok(tol("k", "Equal", "v", NO_SCHEDULE)));
        assert!(ok(tol("k", "", "v", "")));
        assert!(ok(tol("k", "Exists", "", "")));
        assert!(ok(tol("", "Exists", "", "")));
        assert!(!ok(tol("k", "Equal", "w", NO_SCHEDULE)));
        assert!(!ok(tol("k", "Exists", "", NO_EXECUTE)));
        assert!(!ok(tol("j", "Exists", "", "")));
        assert!(!ok(tol("k", "Gt", "v", "")));
        assert!(!ok(tol("", "Equal", "", "")), "empty key with Equal compares values");
    }

    #[test]
    fn filter_ignores_prefer_no_schedule_and_reports_the_first() {
        let taints = vec![
            Taint::new("soft", "", PREFER_NO_SCHEDULE),
            Taint::new("a", "1", NO_EXECUTE),
            Taint::new("b", "2", NO_SCHEDULE),
        ];
        let none = Tolerations::new(&[]);
        assert_eq!(&*none.first_untolerated(&taints).unwrap().reason, "node(s) had untolerated taint(s)");
        let some = Tolerations::new(&[tol("a", "Exists", "", "")]);
        assert_eq!(some.first_untolerated(&taints).unwrap().key, "b");
        assert_eq!(none.intolerable_prefer_no_schedule(&taints), 1);
        // A NoSchedule toleration does not count for the PreferNoSchedule score.
        let ns = Tolerations::new(&[tol("soft", "Exists", "", NO_SCHEDULE)]);
        assert_eq!(ns.intolerable_prefer_no_schedule(&taints), 1);
        let any = Tolerations::new(&[tol("soft", "Exists", "", "")]);
        assert_eq!(any.intolerable_prefer_no_schedule(&taints), 0);
    }

    #[test]
    fn unschedulable_toleration() {
        assert!(Tolerations::new(&[tol(UNSCHEDULABLE_TAINT_KEY, "Exists", "", NO_SCHEDULE)]).tolerates_unschedulable);
        assert!(Tolerations::new(&[tol("", "Exists", "", "")]).tolerates_unschedulable);
        assert!(!Tolerations::new(&[tol(UNSCHEDULABLE_TAINT_KEY, "Exists", "", NO_EXECUTE)]).tolerates_unschedulable);
    }
}
