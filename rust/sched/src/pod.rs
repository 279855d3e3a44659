//! A pod as the kernels see it: parsed once from JSON, then counted on a node (`add_pod`) or
//! compiled for a scheduling cycle.

use crate::api::{self, from_json};
use crate::nodeaffinity::{self, PodNodeSelector};
use crate::podaffinity::PodTerms;
use crate::ports::{self, HostPort};
use crate::resources::{self, PodRequests};
use crate::rfc3339;
use crate::spread;
use crate::taints::Tolerations;
use crate::Error;

#[derive(Debug, Clone, Default)]
pub struct ParsedPod {
    pub namespace: String,
    pub name: String,
    /// metadata.labels, sorted by key.
    pub labels: Vec<(String, String)>,
    /// spec.nodeName ("" when unset).
    pub node_name: String,
    pub requests: PodRequests,
    pub tolerations: Tolerations,
    pub selector: PodNodeSelector,
    pub host_ports: Vec<HostPort>,
    /// Normalized image names of init containers, then containers.
    pub images: Vec<String>,
    pub spread: Vec<spread::Constraint>,
    /// Pod affinity and anti-affinity terms.
    pub affinity: PodTerms,
    /// metadata.deletionTimestamp is set.
    pub terminating: bool,
    /// spec.priority, 0 when unset (upstream corev1helpers.PodPriority).
    pub priority: i32,
    /// status.startTime in Unix nanoseconds (None: unset or unparseable).
    pub start_ns: Option<i64>,
}

/// ImageLocality's `normalizedImageName`: a name without a tag gets ":latest".
pub fn normalized_image_name(name: &str) -> String {
    let colon = name.rfind(':').map_or(-1, |i| i as isize);
    let slash = name.rfind('/').map_or(-1, |i| i as isize);
    if colon <= slash {
        format!("{name}:latest")
    } else {
        name.to_string()
    }
}

impl ParsedPod {
    pub fn from_json(bytes: &[u8]) -> Result<ParsedPod, Error> {
        let pod: api::Pod = from_json(bytes, "pod")?;
        ParsedPod::from_api(&pod)
    }

    pub fn from_api(pod: &api::Pod) -> Result<ParsedPod, Error> {
        let meta = pod.metadata.as_ref();
        let default_spec = api::PodSpec::default();
        let spec = pod.spec.as_ref().unwrap_or(&default_spec);
        let mut labels: Vec<(String, String)> =
            meta.and_then(|m| m.labels.as_ref()).into_iter().flatten().map(|(k, v)| (k.clone(), v.clone())).collect();
        labels.sort();
        let images = spec
            .init_containers
            .iter()
            .flatten()
            .chain(spec.containers.iter().flatten())
            .map(|c| normalized_image_name(c.image.as_deref().unwrap_or_default()))
            .collect();
        Ok(ParsedPod {
            namespace: meta.and_then(|m| m.namespace.clone()).unwrap_or_default(),
            name: meta.and_then(|m| m.name.clone()).unwrap_or_default(),
            node_name: spec.node_name.clone().unwrap_or_default(),
            requests: resources::pod_requests(pod)?,
            tolerations: Tolerations::new(spec.tolerations.as_deref().unwrap_or_default()),
            selector: nodeaffinity::parse(spec),
            host_ports: ports::pod_host_ports(spec),
            images,
            spread: spread::parse_or_default(spec, pod.default_spread.as_ref(), &labels),
            affinity: PodTerms::parse(spec, meta.and_then(|m| m.namespace.as_deref()).unwrap_or_default(), &labels),
            terminating: meta.and_then(|m| m.deletion_timestamp.as_ref()).is_some(),
            priority: spec.priority.unwrap_or(0),
            start_ns: pod.status.as_ref().and_then(|st| st.start_time.as_deref()).and_then(rfc3339::parse_nanos),
            labels,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_image_names() {
        assert_eq!(normalized_image_name("nginx"), "nginx:latest");
        assert_eq!(normalized_image_name("nginx:1.25"), "nginx:1.25");
        assert_eq!(normalized_image_name("registry:5000/nginx"), "registry:5000/nginx:latest");
        assert_eq!(normalized_image_name("registry:5000/nginx:1"), "registry:5000/nginx:1");
    }

    #[test]
    fn parses_a_pod() {
        let p = ParsedPod::from_json(
            br#"{"metadata":{"name":"p","namespace":"ns","labels":{"b":"2","a":"1"}},
                 "spec":{"nodeName":null,"containers":[{"image":"busybox","ports":[{"containerPort":80,"hostPort":8080}]}],
                         "tolerations":null}}"#,
        )
        .unwrap();
        assert_eq!((p.namespace.as_str(), p.name.as_str()), ("ns", "p"));
        assert_eq!(p.labels[0].0, "a");
        assert_eq!(p.images, vec!["busybox:latest".to_string()]);
        assert_eq!(p.host_ports, vec![HostPort::new("", "", 8080)]);
        assert!(ParsedPod::from_json(b"{not json").is_err());
    }
}
