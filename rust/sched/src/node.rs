//! A node as the kernels see it, parsed from JSON (`NodeInfo.SetNode`).

use crate::api::{self, from_json};
use crate::resources::{self, Kind, List, Requests};
use crate::taints::Taint;
use crate::{quantity, Error};

#[derive(Debug, Clone, Default)]
pub struct ParsedNode {
    pub name: String,
    /// metadata.labels, sorted by key.
    pub labels: Vec<(String, String)>,
    pub unschedulable: bool,
    pub taints: Vec<Taint>,
    pub allocatable: Requests,
    /// Allocatable pods (`AllowedPodNumber`).
    pub allowed_pods: i64,
    /// (image name, size in bytes) for every name of every image the node reports.
    pub images: Vec<(String, i64)>,
    /// The node tree's zone key: `region:\0:zone` ("" without either label).
    pub zone: String,
}

const ZONE: &str = "topology.kubernetes.io/zone";
const ZONE_BETA: &str = "failure-domain.beta.kubernetes.io/zone";
const REGION: &str = "topology.kubernetes.io/region";
const REGION_BETA: &str = "failure-domain.beta.kubernetes.io/region";

/// `utilnode.GetZoneKey` (component-helpers' `topology.GetZoneKey`): the deprecated
/// `failure-domain.beta.kubernetes.io/{zone,region}` labels win when present (even with an
/// empty value), then `topology.kubernetes.io/{zone,region}`; "" when both parts are empty.
pub fn zone_key(labels: &[(String, String)]) -> String {
    let get = |k: &str| labels.iter().find(|(lk, _)| lk == k).map(|(_, v)| v.as_str());
    let zone = get(ZONE_BETA).or_else(|| get(ZONE)).unwrap_or_default();
    let region = get(REGION_BETA).or_else(|| get(REGION)).unwrap_or_default();
    if zone.is_empty() && region.is_empty() {
        String::new()
    } else {
        format!("{region}:\0:{zone}")
    }
}

impl ParsedNode {
    pub fn from_json(bytes: &[u8]) -> Result<ParsedNode, Error> {
        let node: api::Node = from_json(bytes, "node")?;
        let meta = node.metadata.unwrap_or_default();
        let name = meta.name.filter(|n| !n.is_empty()).ok_or_else(|| Error::Json("node: metadata.name is required".into()))?;
        let mut labels: Vec<(String, String)> = meta.labels.unwrap_or_default().into_iter().collect();
        labels.sort();
        let spec = node.spec.unwrap_or_default();
        let status = node.status.unwrap_or_default();
        let list = List::parse(status.allocatable.as_ref()).map_err(|e| Error::Quantity(format!("node {name}: {e}")))?;
        let allowed_pods = list.0.iter().filter(|(n, _)| resources::kind(n) == Kind::Pods).map(|(_, v)| quantity::value(*v)).sum();
        let images = status
            .images
            .unwrap_or_default()
            .into_iter()
            .flat_map(|img| {
                let size = img.size_bytes.unwrap_or(0);
                img.names.unwrap_or_default().into_iter().map(move |n| (n, size))
            })
            .collect();
        Ok(ParsedNode {
            zone: zone_key(&labels),
            name,
            labels,
            unschedulable: spec.unschedulable.unwrap_or(false),
            taints: spec.taints.unwrap_or_default().iter().map(Taint::from_api).collect(),
            allocatable: Requests::from_list(&list),
            allowed_pods,
            images,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_node() {
        let n = ParsedNode::from_json(
            br#"{"metadata":{"name":"n1","labels":{"topology.kubernetes.io/zone":"z1"}},
                 "spec":{"unschedulable":true,"taints":[{"key":"k","value":"v","effect":"NoSchedule"}]},
                 "status":{"allocatable":{"cpu":"4","memory":"32Gi","pods":"110","nvidia.com/gpu":"8","foo":"1"},
                           "images":[{"names":["a:1","a@sha256:x"],"sizeBytes":100}]}}"#,
        )
        .unwrap();
        assert_eq!(n.name, "n1");
        assert!(n.unschedulable);
        assert_eq!(n.allocatable.milli_cpu, 4000);
        assert_eq!(n.allocatable.memory, 32 << 30);
        assert_eq!(n.allowed_pods, 110);
        assert_eq!(n.allocatable.scalars, vec![("nvidia.com/gpu".to_string(), 8)]);
        assert_eq!(n.images.len(), 2);
        assert_eq!(n.zone, ":\0:z1");
        assert_eq!(n.taints[0].key, "k");
    }

    #[test]
    fn rejects_bad_nodes() {
        assert!(matches!(ParsedNode::from_json(b"{}"), Err(Error::Json(_))));
        assert!(matches!(
            ParsedNode::from_json(br#"{"metadata":{"name":"n"},"status":{"allocatable":{"cpu":"x"}}}"#),
            Err(Error::Quantity(_))
        ));
    }
}
