//! The scheduler's view of the cluster: node columns plus the pods counted on them (bound or
//! assumed), kept up to date incrementally by the caller (`set_node`, `add_pod`, ...).
//!
//! Pods are kept by key with the [`Usage`] they added, so removing a pod subtracts exactly what
//! adding it added. A pod counted on a node the snapshot does not have (yet, or any more) waits
//! as an orphan and is counted when a node of that name is set, as upstream's cache keeps pods
//! of a deleted node until they go.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crate::columns::{Columns, Usage};
use crate::images::Images;
use crate::intern::Interner;
use crate::node::ParsedNode;
use crate::overlay::Overlay;
use crate::pod::ParsedPod;
use crate::podaffinity::PodTerms;
use crate::resources::{CPU, EPHEMERAL_STORAGE, MEMORY, PODS};
use crate::rng::Rng;
use crate::score::ResourceCache;
use crate::zones::NodeTree;
use crate::Error;

/// A pod counted in the snapshot.
#[derive(Debug, Clone)]
pub struct PodEntry {
    pub key: String,
    pub node: String,
    /// The node's slot, or None while the node is missing (an orphan).
    pub slot: Option<u32>,
    pub usage: Usage,
    pub namespace: u32,
    /// (key id, value id) sorted by key id.
    pub labels: Vec<(u32, u32)>,
    pub terminating: bool,
    /// spec.priority (0 when unset): preemption's victims are the pods below the preemptor's.
    pub priority: i32,
    /// status.startTime in Unix nanoseconds (None: unset): ties among victims of one priority.
    pub start_ns: Option<i64>,
    /// Its pod affinity terms (None: it has none).
    pub affinity: Option<Box<PodTerms>>,
}

#[derive(Debug)]
pub struct Snapshot {
    pub(crate) cols: Columns,
    pub(crate) by_name: HashMap<Arc<str>, u32>,
    free_slots: Vec<u32>,
    /// Label keys and values, namespaces.
    pub(crate) strings: Interner,
    /// Scalar resource names (column ids of `cols.scalar_*`).
    pub(crate) resources: Interner,
    pub(crate) images: Images,
    tree: NodeTree,
    /// Live slots in visiting order (the node tree's list), rebuilt when nodes come or go.
    pub(crate) order: Vec<u32>,
    order_dirty: bool,
    pub(crate) pods: Vec<Option<PodEntry>>,
    pod_ids: HashMap<String, u32>,
    free_pods: Vec<u32>,
    orphans: HashMap<String, Vec<u32>>,
    /// Ids of the pods with affinity terms (InterPodAffinity looks at them for every pod).
    affinity_pods: BTreeSet<u32>,
    /// Where the next cycle starts in `order` (upstream's nextStartNodeIndex).
    pub(crate) next_start: usize,
    pub(crate) rng: Rng,
    /// Entries of `add_pods_cached`'s and the overlay's pods, by key, with the bytes they came
    /// from: the scheduler passes its nominated pods again for every cycle.
    parse_cache: HashMap<String, (Vec<u8>, PodEntry)>,
    /// The nominated pods of the current or last cycle, not counted (see `overlay`).
    pub(crate) overlay: Overlay,
    /// The resource scorers' per-node scores between cycles (None: not kept).
    pub(crate) resource_cache: Option<ResourceCache>,
}

/// `parse_cache` is emptied when it would grow past this many pods.
const PARSE_CACHE_MAX: usize = 4096;

impl Snapshot {
    pub fn new(seed: u64) -> Snapshot {
        Snapshot {
            cols: Columns::default(),
            by_name: HashMap::new(),
            free_slots: Vec::new(),
            strings: Interner::default(),
            resources: Interner::default(),
            images: Images::default(),
            tree: NodeTree::default(),
            order: Vec::new(),
            order_dirty: false,
            pods: Vec::new(),
            pod_ids: HashMap::new(),
            free_pods: Vec::new(),
            orphans: HashMap::new(),
            affinity_pods: BTreeSet::new(),
            next_start: 0,
            rng: Rng::new(seed),
            parse_cache: HashMap::new(),
            overlay: Overlay::default(),
            resource_cache: Some(ResourceCache::default()),
        }
    }

    /// Whether cycles keep NodeResourcesFit's and BalancedAllocation's per-node scores for the
    /// next cycle (on by default; results are the same either way, see `score::ResourceCache`).
    pub fn keep_resource_scores(&mut self, on: bool) {
        self.resource_cache = on.then(ResourceCache::default);
    }

    pub fn node_count(&self) -> usize {
        self.by_name.len()
    }

    pub fn pod_count(&self) -> usize {
        self.pod_ids.len()
    }

    /// Node names in the order a cycle visits them.
    pub fn node_names(&mut self) -> Vec<String> {
        self.ensure_order();
        self.order.iter().map(|&s| self.cols.names[s as usize].to_string()).collect()
    }

    pub(crate) fn ensure_order(&mut self) {
        if self.order_dirty {
            self.order = self.tree.list();
            self.order_dirty = false;
        }
    }

    pub fn slot(&self, name: &str) -> Result<usize, Error> {
        self.by_name.get(name).map(|&s| s as usize).ok_or_else(|| Error::UnknownNode(name.to_string()))
    }

    pub fn set_node_json(&mut self, json: &[u8]) -> Result<(), Error> {
        let node = ParsedNode::from_json(json)?;
        self.set_node(&node);
        Ok(())
    }

    /// Inserts or replaces a node (by name); pods counted on it stay counted.
    pub fn set_node(&mut self, node: &ParsedNode) {
        let slot = match self.by_name.get(node.name.as_str()) {
            Some(&slot) => {
                let s = slot as usize;
                if self.cols.zone[s] != node.zone {
                    self.tree.remove(&self.cols.zone[s], slot);
                    self.tree.add(&node.zone, slot);
                    self.order_dirty = true;
                }
                self.images.remove_node(&self.cols.images[s]);
                slot
            }
            None => self.add_slot(node),
        };
        self.write_attributes(slot as usize, node);
        if let Some(waiting) = self.orphans.remove(node.name.as_str()) {
            for id in waiting {
                self.attach(id, slot);
            }
        }
    }

    fn add_slot(&mut self, node: &ParsedNode) -> u32 {
        let slot = self.free_slots.pop().unwrap_or_else(|| self.cols.push_slot());
        let name: Arc<str> = Arc::from(node.name.as_str());
        self.cols.live[slot as usize] = true;
        Arc::make_mut(&mut self.cols.names)[slot as usize] = name.clone();
        self.by_name.insert(name, slot);
        self.tree.add(&node.zone, slot);
        self.order_dirty = true;
        slot
    }

    fn write_attributes(&mut self, s: usize, node: &ParsedNode) {
        let c = &mut self.cols;
        c.touch(s);
        c.allocatable_cpu[s] = node.allocatable.milli_cpu;
        c.allocatable_memory[s] = node.allocatable.memory;
        c.allocatable_ephemeral[s] = node.allocatable.ephemeral_storage;
        c.allowed_pods[s] = node.allowed_pods;
        for col in &mut c.scalar_allocatable {
            col[s] = 0;
        }
        for (name, v) in &node.allocatable.scalars {
            let id = self.resources.intern(name);
            c.ensure_scalar(id);
            c.scalar_allocatable[id as usize][s] = *v;
        }
        let mut labels: Vec<(u32, u32)> =
            node.labels.iter().map(|(k, v)| (self.strings.intern(k), self.strings.intern(v))).collect();
        labels.sort_unstable();
        c.labels[s] = labels;
        c.set_taints(s, node.unschedulable, node.taints.clone());
        c.images[s] = self.images.add_node(&node.images);
        c.zone[s] = node.zone.clone();
    }

    /// Removes a node; its pods wait as orphans for a node of the same name.
    pub fn remove_node(&mut self, name: &str) -> bool {
        let Some(slot) = self.by_name.remove(name) else { return false };
        let s = slot as usize;
        self.tree.remove(&self.cols.zone[s], slot);
        self.order_dirty = true;
        self.images.remove_node(&self.cols.images[s]);
        let pods = std::mem::take(&mut self.cols.pods[s]);
        for &id in &pods {
            if let Some(p) = self.pods[id as usize].as_mut() {
                p.slot = None;
            }
        }
        if !pods.is_empty() {
            self.orphans.entry(name.to_string()).or_default().extend(pods);
        }
        self.cols.clear_usage(s);
        self.cols.set_taints(s, false, Vec::new());
        self.cols.live[s] = false;
        Arc::make_mut(&mut self.cols.names)[s] = Arc::from("");
        self.free_slots.push(slot);
        true
    }

    /// What `pod` adds to a node (interning the scalar names it requests).
    pub(crate) fn usage(&mut self, pod: &ParsedPod) -> Usage {
        let r = &pod.requests;
        let scalars = r
            .requests
            .scalars
            .iter()
            .map(|(name, v)| {
                let id = self.resources.intern(name);
                self.cols.ensure_scalar(id);
                (id, *v)
            })
            .collect();
        Usage {
            milli_cpu: r.requests.milli_cpu,
            memory: r.requests.memory,
            ephemeral_storage: r.requests.ephemeral_storage,
            non_zero_cpu: r.non_zero_milli_cpu,
            non_zero_memory: r.non_zero_memory,
            scalars,
            ports: pod.host_ports.clone(),
        }
    }

    pub fn add_pod_json(&mut self, key: &str, json: &[u8], node: &str) -> Result<(), Error> {
        let pod = ParsedPod::from_json(json)?;
        self.add_pod(key, &pod, node);
        Ok(())
    }

    /// `add_pod_json` for many pods, parsing only bytes not seen before under the same key (see
    /// `parse_cache`). Returns the keys added; a pod that does not parse is skipped. A nominated
    /// pod of the same key is dropped (the real pod wins).
    pub fn add_pods_cached(&mut self, pods: &[(&str, &[u8], &str)]) -> Vec<String> {
        let mut added = Vec::with_capacity(pods.len());
        for &(key, json, node) in pods {
            let Some(entry) = self.cached_entry(key, json, node) else { continue };
            self.overlay.pods.remove(key);
            self.remove_pod(key);
            self.insert(entry);
            added.push(key.to_string());
        }
        added
    }

    /// The entry of `json` under `key` on `node`, not counted, parsed only when `parse_cache`
    /// has other bytes for the key (None: it does not parse).
    pub(crate) fn cached_entry(&mut self, key: &str, json: &[u8], node: &str) -> Option<PodEntry> {
        if let Some((bytes, e)) = self.parse_cache.get(key) {
            if bytes.as_slice() == json {
                let mut e = e.clone();
                if e.node != node {
                    e.node = node.to_string();
                }
                return Some(e);
            }
        }
        let pod = ParsedPod::from_json(json).ok()?;
        let e = self.entry(key, &pod, node);
        if self.parse_cache.len() >= PARSE_CACHE_MAX {
            self.parse_cache.clear();
        }
        self.parse_cache.insert(key.to_string(), (json.to_vec(), e.clone()));
        Some(e)
    }

    /// Counts `pod` on `node` under `key` (replacing an earlier pod of the same key, a nominated
    /// one included: the real pod wins).
    pub fn add_pod(&mut self, key: &str, pod: &ParsedPod, node: &str) {
        self.overlay.pods.remove(key);
        self.remove_pod(key);
        let entry = self.entry(key, pod, node);
        self.insert(entry);
    }

    /// What counting `pod` takes, not yet counted (strings interned; ids are never reused, so an
    /// entry stays valid for later insertion).
    fn entry(&mut self, key: &str, pod: &ParsedPod, node: &str) -> PodEntry {
        let usage = self.usage(pod);
        let mut labels: Vec<(u32, u32)> =
            pod.labels.iter().map(|(k, v)| (self.strings.intern(k), self.strings.intern(v))).collect();
        labels.sort_unstable();
        PodEntry {
            key: key.to_string(),
            node: node.to_string(),
            slot: None,
            usage,
            namespace: self.strings.intern(&pod.namespace),
            labels,
            terminating: pod.terminating,
            priority: pod.priority,
            start_ns: pod.start_ns,
            affinity: (!pod.affinity.is_empty()).then(|| Box::new(pod.affinity.clone())),
        }
    }

    /// Counts an entry whose key is not counted.
    fn insert(&mut self, entry: PodEntry) {
        let has_affinity = entry.affinity.is_some();
        let key = entry.key.clone();
        let node = entry.node.clone();
        let id = match self.free_pods.pop() {
            Some(id) => {
                self.pods[id as usize] = Some(entry);
                id
            }
            None => {
                self.pods.push(Some(entry));
                u32::try_from(self.pods.len() - 1).expect("fewer than 2^32 pods")
            }
        };
        self.pod_ids.insert(key, id);
        if has_affinity {
            self.affinity_pods.insert(id);
        }
        match self.by_name.get(node.as_str()) {
            Some(&slot) => self.attach(id, slot),
            None => self.orphans.entry(node).or_default().push(id),
        }
    }

    fn attach(&mut self, id: u32, slot: u32) {
        let Some(p) = self.pods[id as usize].as_mut() else { return };
        p.slot = Some(slot);
        self.cols.apply(slot as usize, &p.usage, 1);
        self.cols.pods[slot as usize].push(id);
    }

    pub fn remove_pod(&mut self, key: &str) -> bool {
        let Some(id) = self.pod_ids.remove(key) else { return false };
        let p = self.pods[id as usize].take().expect("a pod id in the key map has an entry");
        self.affinity_pods.remove(&id);
        match p.slot {
            Some(slot) => {
                let s = slot as usize;
                self.cols.apply(s, &p.usage, -1);
                let list = &mut self.cols.pods[s];
                if let Some(i) = list.iter().position(|&x| x == id) {
                    list.swap_remove(i);
                }
            }
            None => {
                if let Some(list) = self.orphans.get_mut(&p.node) {
                    list.retain(|&x| x != id);
                    if list.is_empty() {
                        self.orphans.remove(&p.node);
                    }
                }
            }
        }
        self.free_pods.push(id);
        true
    }

    /// Counted pods with affinity terms that are on a node, with the node's slot.
    pub fn pods_with_affinity(&self) -> impl Iterator<Item = (&PodEntry, usize)> {
        self.affinity_pods
            .iter()
            .filter_map(|&id| self.pods[id as usize].as_ref())
            .filter_map(|p| Some((p, p.slot? as usize)))
    }

    /// The pod counted under `key`, if any.
    pub fn pod(&self, key: &str) -> Option<&PodEntry> {
        self.pod_ids.get(key).and_then(|&id| self.pods[id as usize].as_ref())
    }

    /// Requested resources on a node: cpu (millicores), memory and ephemeral-storage (bytes),
    /// pods (how many are counted), and each scalar resource requested there.
    pub fn requested(&self, node: &str) -> Result<Vec<(String, i64)>, Error> {
        let s = self.slot(node)?;
        let c = &self.cols;
        let fixed = [c.requested_cpu[s], c.requested_memory[s], c.requested_ephemeral[s], c.pod_count[s]];
        Ok(self.with_scalars(fixed, |id| c.scalar_requested(id, s)))
    }

    /// Allocatable resources of a node, in the same units as [`Snapshot::requested`].
    pub fn allocatable(&self, node: &str) -> Result<Vec<(String, i64)>, Error> {
        let s = self.slot(node)?;
        let c = &self.cols;
        let fixed = [c.allocatable_cpu[s], c.allocatable_memory[s], c.allocatable_ephemeral[s], c.allowed_pods[s]];
        Ok(self.with_scalars(fixed, |id| c.scalar_allocatable(id, s)))
    }

    fn with_scalars(&self, fixed: [i64; 4], scalar: impl Fn(u32) -> i64) -> Vec<(String, i64)> {
        let mut out: Vec<(String, i64)> =
            [CPU, MEMORY, EPHEMERAL_STORAGE, PODS].iter().zip(fixed).map(|(n, v)| (n.to_string(), v)).collect();
        for id in 0..self.resources.len() as u32 {
            let v = scalar(id);
            if v != 0 {
                out.push((self.resources.name(id).to_string(), v));
            }
        }
        out
    }
}
