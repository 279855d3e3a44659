//! The few fields of v1 Pod and Node the kernels read, deserialized straight from API JSON.
//!
//! Every field is optional and `null` reads as absent (API objects encoded by other tools carry
//! `null` for empty maps and lists); everything else in the object is skipped unparsed.
//! Quantities may be JSON strings or numbers, as `resource.Quantity` accepts.

use std::collections::HashMap;
use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

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

impl<'de> Deserialize<'de> for QtyText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = QtyText;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a quantity (string or number)")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<QtyText, E> {
                Ok(QtyText(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<QtyText, E> {
                Ok(QtyText(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<QtyText, E> {
                Ok(QtyText(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<QtyText, E> {
                Ok(QtyText(v.to_string()))
            }
        }
        d.deserialize_any(V)
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
