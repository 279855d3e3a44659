//! One scheduler profile's native plugin set and plugin arguments (the parts of a
//! KubeSchedulerConfiguration profile the kernels run), validated once.

use std::collections::HashSet;

use crate::interpod;
use crate::nodeaffinity::AddedAffinity;
use crate::Error;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FilterPlugin {
    NodeName,
    NodeUnschedulable,
    NodeResourcesFit,
    NodeAffinity,
    TaintToleration,
    NodePorts,
    PodTopologySpread,
    InterPodAffinity,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScorePlugin {
    NodeResourcesFit,
    NodeResourcesBalancedAllocation,
    NodeAffinity,
    TaintToleration,
    ImageLocality,
    PodTopologySpread,
    InterPodAffinity,
}

/// The native filters, in the order of upstream's default plugin set.
pub const FILTER_PLUGINS: &[(&str, FilterPlugin)] = &[
    ("NodeUnschedulable", FilterPlugin::NodeUnschedulable),
    ("NodeName", FilterPlugin::NodeName),
    ("TaintToleration", FilterPlugin::TaintToleration),
    ("NodeAffinity", FilterPlugin::NodeAffinity),
    ("NodePorts", FilterPlugin::NodePorts),
    ("NodeResourcesFit", FilterPlugin::NodeResourcesFit),
    ("PodTopologySpread", FilterPlugin::PodTopologySpread),
    ("InterPodAffinity", FilterPlugin::InterPodAffinity),
];

/// The native scores with upstream's default weights.
pub const SCORE_PLUGINS: &[(&str, ScorePlugin, i64)] = &[
    ("TaintToleration", ScorePlugin::TaintToleration, 3),
    ("NodeAffinity", ScorePlugin::NodeAffinity, 2),
    ("PodTopologySpread", ScorePlugin::PodTopologySpread, 2),
    ("InterPodAffinity", ScorePlugin::InterPodAffinity, 2),
    ("NodeResourcesFit", ScorePlugin::NodeResourcesFit, 1),
    ("NodeResourcesBalancedAllocation", ScorePlugin::NodeResourcesBalancedAllocation, 1),
    ("ImageLocality", ScorePlugin::ImageLocality, 1),
];

/// `MaxCustomPriorityScore`: RequestedToCapacityRatio shape scores are 0..10.
pub const MAX_CUSTOM_PRIORITY_SCORE: i64 = 10;
pub const MAX_NODE_SCORE: i64 = 100;
/// InterPodAffinityArgs.hardPodAffinityWeight's upper bound (upstream's validation).
pub const MAX_HARD_POD_AFFINITY_WEIGHT: i64 = 100;
/// BalancedAllocation takes at most this many resources (a bound of this implementation).
pub const MAX_BALANCED_RESOURCES: usize = 16;

/// NodeResourcesFit's scoring strategy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FitStrategy {
    LeastAllocated,
    MostAllocated,
    /// Shape points (utilization 0..100, score already scaled to 0..MAX_NODE_SCORE).
    RequestedToCapacityRatio(Vec<(i64, i64)>),
}

/// The arguments as they come from the configuration.
#[derive(Debug, Clone)]
pub struct ProfileConfig {
    pub filters: Vec<String>,
    pub scores: Vec<(String, i64)>,
    pub fit_strategy: String,
    pub fit_resources: Vec<(String, i64)>,
    pub rtc_shape: Vec<(i64, i64)>,
    pub ignored_resources: Vec<String>,
    pub ignored_resource_groups: Vec<String>,
    pub balanced_resources: Vec<(String, i64)>,
    pub percentage_of_nodes_to_score: i64,
    /// InterPodAffinityArgs: hardPodAffinityWeight (0..=100) and ignorePreferredTermsOfExistingPods.
    pub interpod: interpod::Args,
    /// NodeAffinityArgs.addedAffinity ([`AddedAffinity::from_json`]).
    pub added_affinity: Option<AddedAffinity>,
}

impl Default for ProfileConfig {
    /// Upstream's default plugin set, weights and arguments.
    fn default() -> Self {
        let cpu_mem = vec![("cpu".to_string(), 1), ("memory".to_string(), 1)];
        ProfileConfig {
            filters: FILTER_PLUGINS.iter().map(|(n, _)| n.to_string()).collect(),
            scores: SCORE_PLUGINS.iter().map(|(n, _, w)| (n.to_string(), *w)).collect(),
            fit_strategy: "LeastAllocated".into(),
            fit_resources: cpu_mem.clone(),
            rtc_shape: Vec::new(),
            ignored_resources: Vec::new(),
            ignored_resource_groups: Vec::new(),
            balanced_resources: cpu_mem,
            percentage_of_nodes_to_score: 0,
            interpod: interpod::Args::default(),
            added_affinity: None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Profile {
    pub filters: Vec<FilterPlugin>,
    pub scores: Vec<(ScorePlugin, i64)>,
    pub strategy: FitStrategy,
    pub fit_resources: Vec<(String, i64)>,
    pub ignored_resources: HashSet<String>,
    pub ignored_resource_groups: HashSet<String>,
    pub balanced_resources: Vec<String>,
    pub percentage_of_nodes_to_score: i64,
    /// InterPodAffinity's score arguments.
    pub interpod: interpod::Args,
    /// NodeAffinity's addedAffinity: required terms every node must match (Filter), preferred
    /// terms added to the pod's (Score).
    pub added: Option<AddedAffinity>,
}

fn lookup<T: Copy + Eq + std::hash::Hash>(table: &[(&str, T)], name: &str, what: &str, seen: &mut HashSet<T>) -> Result<T, Error> {
    let known = || table.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ");
    let p = table.iter().find(|(n, _)| *n == name).map(|&(_, p)| p);
    let p = p.ok_or_else(|| Error::Config(format!("unknown native {what} plugin {name:?} (known: {})", known())))?;
    if !seen.insert(p) {
        return Err(Error::Config(format!("{what} plugin {name:?} listed twice")));
    }
    Ok(p)
}

fn rtc_shape(points: &[(i64, i64)]) -> Result<Vec<(i64, i64)>, Error> {
    if points.is_empty() {
        return Err(Error::Config("RequestedToCapacityRatio needs at least one shape point".into()));
    }
    for (i, &(u, s)) in points.iter().enumerate() {
        if !(0..=100).contains(&u) {
            return Err(Error::Config(format!("shape utilization {u} not in [0, 100]")));
        }
        if !(0..=MAX_CUSTOM_PRIORITY_SCORE).contains(&s) {
            return Err(Error::Config(format!("shape score {s} not in [0, {MAX_CUSTOM_PRIORITY_SCORE}]")));
        }
        if i > 0 && points[i - 1].0 >= u {
            return Err(Error::Config("shape utilization values must be sorted in increasing order".into()));
        }
    }
    Ok(points.iter().map(|&(u, s)| (u, s * (MAX_NODE_SCORE / MAX_CUSTOM_PRIORITY_SCORE))).collect())
}

impl Profile {
    pub fn new(cfg: ProfileConfig) -> Result<Profile, Error> {
        let mut seen_f = HashSet::new();
        let filters =
            cfg.filters.iter().map(|n| lookup(FILTER_PLUGINS, n, "filter", &mut seen_f)).collect::<Result<_, _>>()?;
        let mut seen_s = HashSet::new();
        let mut scores = Vec::new();
        for (name, weight) in &cfg.scores {
            if *weight < 0 {
                return Err(Error::Config(format!("score plugin {name:?} has a negative weight {weight}")));
            }
            let table: Vec<(&str, ScorePlugin)> = SCORE_PLUGINS.iter().map(|&(n, p, _)| (n, p)).collect();
            scores.push((lookup(&table, name, "score", &mut seen_s)?, *weight));
        }
        let strategy = match cfg.fit_strategy.as_str() {
            "LeastAllocated" => FitStrategy::LeastAllocated,
            "MostAllocated" => FitStrategy::MostAllocated,
            "RequestedToCapacityRatio" => FitStrategy::RequestedToCapacityRatio(rtc_shape(&cfg.rtc_shape)?),
            other => return Err(Error::Config(format!("scoring strategy {other:?} is not supported"))),
        };
        for (name, w) in &cfg.fit_resources {
            if !(1..=100).contains(w) {
                return Err(Error::Config(format!("resource weight of {name} not in valid range [1, 100]")));
            }
        }
        if cfg.balanced_resources.len() > MAX_BALANCED_RESOURCES {
            return Err(Error::Config(format!("at most {MAX_BALANCED_RESOURCES} balanced_resources")));
        }
        if !(0..=100).contains(&cfg.percentage_of_nodes_to_score) {
            return Err(Error::Config("percentage_of_nodes_to_score not in valid range [0, 100]".into()));
        }
        let hard = cfg.interpod.hard_pod_affinity_weight;
        if !(0..=MAX_HARD_POD_AFFINITY_WEIGHT).contains(&hard) {
            return Err(Error::Config(format!(
                "hardPodAffinityWeight {hard} not in valid range [0, {MAX_HARD_POD_AFFINITY_WEIGHT}]"
            )));
        }
        Ok(Profile {
            filters,
            scores,
            strategy,
            fit_resources: cfg.fit_resources,
            ignored_resources: cfg.ignored_resources.into_iter().collect(),
            ignored_resource_groups: cfg.ignored_resource_groups.into_iter().collect(),
            balanced_resources: cfg.balanced_resources.into_iter().map(|(n, _)| n).collect(),
            percentage_of_nodes_to_score: cfg.percentage_of_nodes_to_score,
            interpod: cfg.interpod,
            added: cfg.added_affinity,
        })
    }

    pub fn has_filter(&self, p: FilterPlugin) -> bool {
        self.filters.contains(&p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_the_default_and_rejects_bad_configs() {
        let p = Profile::new(ProfileConfig::default()).unwrap();
        assert_eq!(p.filters.len(), FILTER_PLUGINS.len());
        assert_eq!(p.scores[0], (ScorePlugin::TaintToleration, 3));
        let bad = |f: fn(&mut ProfileConfig)| {
            let mut c = ProfileConfig::default();
            f(&mut c);
            Profile::new(c).is_err()
        };
        assert!(bad(|c| c.filters.push("VolumeBinding".into())));
        assert!(bad(|c| c.filters.push("NodeName".into())));
        assert!(bad(|c| c.scores.push(("Nope".into(), 1))));
        assert!(bad(|c| c.fit_strategy = "Random".into()));
        assert!(bad(|c| c.fit_strategy = "RequestedToCapacityRatio".into()));
        assert!(bad(|c| c.fit_resources[0].1 = 0));
        assert!(bad(|c| c.percentage_of_nodes_to_score = 101));
        assert!(bad(|c| c.interpod.hard_pod_affinity_weight = -1));
        assert!(bad(|c| c.interpod.hard_pod_affinity_weight = 101));
        assert!(!bad(|c| c.interpod.hard_pod_affinity_weight = 0));
        assert!(!bad(|c| c.interpod.hard_pod_affinity_weight = 100));
        assert!(bad(|c| {
            c.fit_strategy = "RequestedToCapacityRatio".into();
            c.rtc_shape = vec![(50, 5), (50, 10)];
        }));
    }

    #[test]
    fn scales_the_shape() {
        assert_eq!(rtc_shape(&[(0, 0), (100, 10)]).unwrap(), vec![(0, 0), (100, 100)]);
    }
}
