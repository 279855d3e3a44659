//! The few fields of v1 Pod and Node the kernels read, deserialized straight from API JSON.
//!
//! Every field is optional and `null` reads as absent (API objects encoded by other tools carry
//! `null` for empty maps and lists); everything else in the object is skipped unparsed.
//! Quantities may be JSON strings or numbers, as `resource.Quantity` accepts.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use smallvec::SmallVec;

/// An int32, or None for any other JSON value (never an error).
fn lenient_i32<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i32>, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    Ok(v.as_i64().and_then(|n| i32::try_from(n).ok()))
}

/// A string, or None for any other JSON value (never an error).
fn lenient_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    Ok(match v {
        serde_json::Value::String(s) => Some(s),
        _ => None,
    })
}

/// A quantity's text (`"100m"`, or a JSON number's digits).
#[derive(Debug, Clone, PartialEq)]
pub struct QtyText(pub String);

/// Reads a quantity (a JSON string or number) through `read`, which sees its text.
struct QtyVisitor<T>(fn(&str) -> Result<T, String>);

impl<T> Visitor<'_> for QtyVisitor<T> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a quantity (string or number)")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        (self.0)(v).map_err(E::custom)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        self.visit_str(&v.to_string())
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        self.visit_str(&v.to_string())
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
        self.visit_str(&v.to_string())
    }
}

impl<'de> Deserialize<'de> for QtyText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(QtyVisitor(|v| Ok(QtyText(v.to_string()))))
    }
}

pub type ResourceMap = HashMap<String, QtyText>;
pub type Labels = HashMap<String, String>;

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ObjectMeta {
    pub name: Option<String>,
    pub namespace: Option<String>,
    pub labels: Option<Labels>,
    pub deletion_timestamp: Option<String>,
}

// ---- Node -----------------------------------------------------------------------------------

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Node {
    pub metadata: Option<ObjectMeta>,
    pub spec: Option<NodeSpec>,
    pub status: Option<NodeStatus>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct NodeSpec {
    pub unschedulable: Option<bool>,
    pub taints: Option<Vec<Taint>>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(default)]
pub struct Taint {
    pub key: Option<String>,
    pub value: Option<String>,
    pub effect: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct NodeStatus {
    pub allocatable: Option<ResourceMap>,
    pub images: Option<Vec<ContainerImage>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ContainerImage {
    pub names: Option<Vec<String>>,
    pub size_bytes: Option<i64>,
}

// ---- Pod ------------------------------------------------------------------------------------

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Pod {
    pub metadata: Option<ObjectMeta>,
    pub spec: Option<PodSpec>,
    pub status: Option<PodStatus>,
    /// Not an API field: the cluster default spread constraints the scheduler resolved for a pod
    /// without its own (they need the pod's Services and owners, which the kernels lack).
    #[serde(rename = "kubecoreDefaultSpread")]
    pub default_spread: Option<DefaultSpread>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PodStatus {
    /// status.startTime (RFC 3339); anything but a string reads as absent.
    #[serde(deserialize_with = "lenient_string")]
    pub start_time: Option<String>,
    /// From status.conditions: `IsPodResizeInfeasible`, the first `PodResizePending` condition
    /// has reason `Infeasible` (its `status` is not read, as upstream does not). Anything but a
    /// list reads as no conditions.
    #[serde(rename = "conditions", deserialize_with = "resize_infeasible")]
    pub resize_infeasible: bool,
    pub container_statuses: Option<Vec<ContainerStatus>>,
    pub init_container_statuses: Option<Vec<ContainerStatus>>,
    /// Pod-level status.resources (InPlacePodLevelResourcesVerticalScaling): the actuated requests.
    pub resources: Option<StatusResources>,
    /// Pod-level status.allocatedResources.
    pub allocated_resources: Option<StatusList>,
}

impl PodStatus {
    /// `findContainerStatus`: the status named `name`, from containerStatuses then
    /// initContainerStatuses (an unset name is "", as in Go).
    pub fn container_status(&self, name: Option<&ShortText>) -> Option<&ContainerStatus> {
        let name = name.map_or(&[][..], ShortText::as_bytes);
        self.container_statuses
            .iter()
            .flatten()
            .chain(self.init_container_statuses.iter().flatten())
            .find(|s| s.name.as_ref().map_or(&[][..], ShortText::as_bytes) == name)
    }

    /// Some container or init container status is listed.
    pub fn has_container_statuses(&self) -> bool {
        self.container_statuses.as_ref().is_some_and(|v| !v.is_empty())
            || self.init_container_statuses.as_ref().is_some_and(|v| !v.is_empty())
    }
}

/// Which of `names` a map key is, read as raw bytes (serde_json then skips the UTF-8 check a
/// derived struct's keys get): status objects are many keys the kernels skip.
struct FieldSeed(&'static [&'static str]);

impl<'de> de::DeserializeSeed<'de> for FieldSeed {
    type Value = Option<usize>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
        d.deserialize_bytes(self)
    }
}

impl Visitor<'_> for FieldSeed {
    type Value = Option<usize>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }
    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Option<usize>, E> {
        Ok(self.0.iter().position(|n| n.as_bytes() == v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Option<usize>, E> {
        self.visit_bytes(v.as_bytes())
    }
}

/// Reads a JSON object field by field: `read(field index in names, map)` reads a named field's
/// value, other fields are skipped (a field given twice: the last one).
fn read_fields<'de, A: de::MapAccess<'de>>(
    mut a: A,
    names: &'static [&'static str],
    mut read: impl FnMut(usize, &mut A) -> Result<(), A::Error>,
) -> Result<(), A::Error> {
    while let Some(key) = a.next_key_seed(FieldSeed(names))? {
        match key {
            Some(i) => read(i, &mut a)?,
            None => {
                a.next_value::<de::IgnoredAny>()?;
            }
        }
    }
    Ok(())
}

/// Deserializes `$ty` (Default) from a JSON object, reading each listed field with
/// `next_value` into `$field` and skipping the rest (what `#[derive(Deserialize)]` with
/// `#[serde(default)]` does, at less cost per key).
macro_rules! fields_deserialize {
    ($ty:ident { $($name:literal => $field:ident),* $(,)? }) => {
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> Visitor<'de> for V {
                    type Value = $ty;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str(concat!("a ", stringify!($ty)))
                    }
                    fn visit_map<A: de::MapAccess<'de>>(self, a: A) -> Result<$ty, A::Error> {
                        const NAMES: &[&str] = &[$($name),*];
                        let mut out = $ty::default();
                        read_fields(a, NAMES, |i, a| {
                            let mut n = 0;
                            $(
                                if i == n {
                                    out.$field = a.next_value()?;
                                    return Ok(());
                                }
                                n += 1;
                            )*
                            let _ = n;
                            Ok(())
                        })?;
                        Ok(out)
                    }
                }
                d.deserialize_map(V)
            }
        }
    };
}

/// A status.conditions[] entry, reduced to what the scheduler reads.
#[derive(Debug, Default)]
struct PodCondition {
    kind: Word,
    reason: Word,
}

fields_deserialize!(PodCondition { "type" => kind, "reason" => reason });

/// A condition string, classified while parsing (no allocation); anything else, a string or
/// not, is `Other`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Word {
    PodResizePending,
    Infeasible,
    #[default]
    Other,
}

/// Consumes any JSON value, classifying strings with `word` and reading lists with `list`;
/// anything else is `T::default()` (never an error).
struct AnyVisitor<T> {
    word: fn(&str) -> T,
    list: bool,
}

impl<'de, T: Default + Deserialize<'de>> Visitor<'de> for AnyVisitor<T> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        Ok((self.word)(v))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_unit<E: de::Error>(self) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut a: A) -> Result<T, A::Error> {
        if self.list {
            return T::deserialize(de::value::SeqAccessDeserializer::new(a));
        }
        while a.next_element::<de::IgnoredAny>()?.is_some() {}
        Ok(T::default())
    }
    fn visit_map<A: de::MapAccess<'de>>(self, mut a: A) -> Result<T, A::Error> {
        while a.next_entry::<de::IgnoredAny, de::IgnoredAny>()?.is_some() {}
        Ok(T::default())
    }
}

impl<'de> Deserialize<'de> for Word {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let word = |v: &str| match v {
            "PodResizePending" => Word::PodResizePending,
            "Infeasible" => Word::Infeasible,
            _ => Word::Other,
        };
        d.deserialize_any(AnyVisitor { word, list: false })
    }
}

/// status.conditions read straight into `IsPodResizeInfeasible` (no list kept).
#[derive(Default)]
struct ResizeInfeasible(bool);

impl<'de> Deserialize<'de> for ResizeInfeasible {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Conditions;
        impl<'de> Visitor<'de> for Conditions {
            type Value = ResizeInfeasible;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of conditions")
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut a: A) -> Result<ResizeInfeasible, A::Error> {
                let mut first = None;
                while let Some(c) = a.next_element::<PodCondition>()? {
                    if first.is_none() && c.kind == Word::PodResizePending {
                        first = Some(c.reason == Word::Infeasible);
                    }
                }
                Ok(ResizeInfeasible(first.unwrap_or(false)))
            }
        }
        d.deserialize_seq(Conditions)
    }
}

fn resize_infeasible<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    let word = |_: &str| ResizeInfeasible(false);
    Ok(d.deserialize_any(AnyVisitor { word, list: true })?.0)
}

/// A status.containerStatuses[] / initContainerStatuses[] entry: the requests in-place resize
/// reports (`resources.requests` actuated, `allocatedResources` admitted by the kubelet).
#[derive(Debug, Default)]
pub struct ContainerStatus {
    pub name: Option<ShortText>,
    pub resources: Option<StatusResources>,
    pub allocated_resources: Option<StatusList>,
}

fields_deserialize!(ContainerStatus {
    "name" => name,
    "resources" => resources,
    "allocatedResources" => allocated_resources,
});

#[derive(Debug, Default)]
pub struct StatusResources {
    pub requests: Option<StatusList>,
}

fields_deserialize!(StatusResources { "requests" => requests });

/// A resource name: the common ones without allocation.
pub type ResName = Cow<'static, str>;

fn res_name(v: &str) -> ResName {
    const COMMON: [&str; 6] = ["cpu", "memory", "ephemeral-storage", "pods", "hugepages-2Mi", "hugepages-1Gi"];
    match COMMON.iter().find(|&&c| c == v) {
        Some(c) => Cow::Borrowed(c),
        None => Cow::Owned(v.to_string()),
    }
}

/// A short string (a JSON string or number) kept inline, without allocation for up to 16
/// bytes: container names and status quantities, which every bound pod has a few of.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ShortText(pub SmallVec<[u8; 16]>);

impl ShortText {
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl<'de> Deserialize<'de> for ShortText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(QtyVisitor(|v| Ok(ShortText(SmallVec::from_slice(v.as_bytes())))))
    }
}

/// A resource list in a pod's status, read without allocating for the usual entries (common
/// names, short quantities); the quantities are parsed only when they differ from the spec's
/// text, which they rarely do, so a bad one is an error then.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct StatusList(pub Vec<(ResName, ShortText)>);

impl<'de> Deserialize<'de> for StatusList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Name(ResName);
        impl<'de> Deserialize<'de> for Name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_str(QtyVisitor(|v| Ok(Name(res_name(v)))))
            }
        }
        struct Entries;
        impl<'de> Visitor<'de> for Entries {
            type Value = StatusList;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a resource list")
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut a: A) -> Result<StatusList, A::Error> {
                let mut out = StatusList::default();
                while let Some((Name(n), t)) = a.next_entry::<Name, ShortText>()? {
                    out.0.push((n, t));
                }
                Ok(out)
            }
        }
        d.deserialize_map(Entries)
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct DefaultSpread {
    /// From `defaultingType: System`: nodes lacking a topology key are still scored.
    pub system: bool,
    pub constraints: Vec<TopologySpreadConstraint>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PodSpec {
    pub node_name: Option<String>,
    pub node_selector: Option<Labels>,
    pub affinity: Option<Affinity>,
    pub tolerations: Option<Vec<Toleration>>,
    pub containers: Option<Vec<Container>>,
    pub init_containers: Option<Vec<Container>>,
    pub overhead: Option<ResourceMap>,
    /// Pod-level resources (PodLevelResources, on by default upstream).
    pub resources: Option<Resources>,
    pub topology_spread_constraints: Option<Vec<TopologySpreadConstraint>>,
    /// spec.priority (admission resolves it from the PriorityClass); anything but an int32
    /// reads as absent, as the scheduler's Python side treats it.
    #[serde(deserialize_with = "lenient_i32")]
    pub priority: Option<i32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct TopologySpreadConstraint {
    pub max_skew: Option<i64>,
    pub topology_key: Option<String>,
    pub when_unsatisfiable: Option<String>,
    pub label_selector: Option<LabelSelector>,
    pub min_domains: Option<i64>,
    pub node_affinity_policy: Option<String>,
    pub node_taints_policy: Option<String>,
    pub match_label_keys: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct LabelSelector {
    pub match_labels: Option<Labels>,
    pub match_expressions: Option<Vec<NodeSelectorRequirement>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Container {
    /// Matches the container to its status (in-place resize); unset reads as "".
    pub name: Option<ShortText>,
    pub image: Option<String>,
    pub resources: Option<Resources>,
    pub ports: Option<Vec<ContainerPort>>,
    pub restart_policy: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Resources {
    pub requests: Option<ResourceMap>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ContainerPort {
    pub host_port: Option<i32>,
    pub protocol: Option<String>,
    #[serde(rename = "hostIP")]
    pub host_ip: Option<String>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(default)]
pub struct Toleration {
    pub key: Option<String>,
    pub operator: Option<String>,
    pub value: Option<String>,
    pub effect: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Affinity {
    pub node_affinity: Option<NodeAffinity>,
    pub pod_affinity: Option<PodAffinity>,
    pub pod_anti_affinity: Option<PodAffinity>,
}

/// podAffinity and podAntiAffinity have the same shape.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PodAffinity {
    pub required_during_scheduling_ignored_during_execution: Option<Vec<PodAffinityTerm>>,
    pub preferred_during_scheduling_ignored_during_execution: Option<Vec<WeightedPodAffinityTerm>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct WeightedPodAffinityTerm {
    pub weight: Option<i64>,
    pub pod_affinity_term: Option<PodAffinityTerm>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PodAffinityTerm {
    pub label_selector: Option<LabelSelector>,
    pub namespaces: Option<Vec<String>>,
    pub topology_key: Option<String>,
    pub namespace_selector: Option<LabelSelector>,
    pub match_label_keys: Option<Vec<String>>,
    pub mismatch_label_keys: Option<Vec<String>>,
    /// kubecore's extension: the namespaces `namespaceSelector` selected when the caller
    /// resolved it (the kernels do not see Namespace objects). Not part of the Kubernetes API.
    pub resolved_namespaces: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NodeAffinity {
    pub required_during_scheduling_ignored_during_execution: Option<NodeSelector>,
    pub preferred_during_scheduling_ignored_during_execution: Option<Vec<PreferredSchedulingTerm>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NodeSelector {
    pub node_selector_terms: Option<Vec<NodeSelectorTerm>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NodeSelectorTerm {
    pub match_expressions: Option<Vec<NodeSelectorRequirement>>,
    pub match_fields: Option<Vec<NodeSelectorRequirement>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct NodeSelectorRequirement {
    pub key: Option<String>,
    pub operator: Option<String>,
    pub values: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct PreferredSchedulingTerm {
    pub weight: Option<i32>,
    pub preference: Option<NodeSelectorTerm>,
}

/// Parses `bytes` as `T`, naming `what` in the error.
pub fn from_json<'a, T: Deserialize<'a>>(bytes: &'a [u8], what: &str) -> Result<T, crate::Error> {
    serde_json::from_slice(bytes).map_err(|e| crate::Error::Json(format!("{what}: {e}")))
}
