//! List and map semantics of one kind: which lists are keyed (and by what), which are sets,
//! which are atomic; which maps are owned as a whole.
//!
//! The rules are the ones of kubecore.api.typefacts, as data: `Tables` holds that module's name
//! tables (handed over by Python at construction, so they are defined once), `Facts` applies
//! the same decisions `TypeFacts._list_type` / `atomic_map` and `SchemaFacts` make. A node is
//! named by `names`, the field names from the root with list items left out
//! (`["spec", "containers", "ports"]`), and — for a custom resource — by a `Cursor` into its
//! compiled structural schema, which the walkers move along with `names` (`child`).

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

use serde_json::Value as Json;

use crate::Error;

/// FNV-1a: the tables are small, fixed and looked up by short names once per list or map
/// (callers' field names are only looked up, never inserted, so hash flooding is moot).
#[derive(Clone, Copy)]
pub struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A table by field name.
pub type NameMap<V> = HashMap<String, V, BuildHasherDefault<Fnv>>;
pub type NameSet = HashSet<String, BuildHasherDefault<Fnv>>;

/// How a list is owned: as a whole, as a set of values, or as items keyed by some of their fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListType<'f> {
    Atomic,
    Set,
    /// `atomic_items`: each item is one leaf (its type is +structType=atomic).
    Map { keys: &'f [String], atomic_items: bool },
}

/// A keyed list's keys (typefacts `_keyed(field)`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Keyed {
    pub keys: Vec<String>,
    pub atomic_items: bool,
}

/// kubecore.api.typefacts' name tables.
#[derive(Debug, Clone, Default)]
pub struct Tables {
    /// Field name -> its keys, for every field `_keyed` knows.
    pub keyed: NameMap<Keyed>,
    /// Keys of `ports` under a container field, and of a Service's `spec.ports`.
    pub container_ports: Vec<String>,
    pub service_ports: Vec<String>,
    pub container_fields: NameSet,
    /// Maps and structs owned as a whole, by field name.
    pub atomic_maps: NameSet,
    /// Key field -> the canonical JSON text of the value a missing key field takes.
    pub key_defaults: NameMap<String>,
}

/// One node of a structural schema, as far as the facts need it.
#[derive(Debug, Default)]
pub struct SchemaNode {
    list: SchemaList,
    atomic_map: bool,
    /// `type: array`, and its `items` when those are an object.
    array: bool,
    items: Option<Box<SchemaNode>>,
    properties: NameMap<SchemaNode>,
    additional: Option<Box<SchemaNode>>,
}

#[derive(Debug, Default)]
enum SchemaList {
    #[default]
    Atomic,
    Set,
    Map(Keyed),
}

/// Where a walker stands in a custom resource's schema (always None for built-in kinds).
#[derive(Debug, Clone, Copy, Default)]
pub struct Cursor<'f>(Option<&'f SchemaNode>);

/// The facts of one kind: built-in rules by field name, or a custom resource's schema.
#[derive(Debug)]
pub struct Facts {
    group: String,
    kind: String,
    typed: bool,
    tables: Tables,
    schema: Option<SchemaNode>,
}

impl Facts {
    /// A built-in kind (`typed`), or a kind without a schema (`!typed`: lists atomic, maps granular).
    pub fn builtin(group: &str, kind: &str, typed: bool, tables: Tables) -> Facts {
        Facts { group: group.into(), kind: kind.into(), typed, tables, schema: None }
    }

    /// A custom resource with a structural schema (JSON text of the `openAPIV3Schema`).
    pub fn with_schema(group: &str, kind: &str, tables: Tables, schema: &[u8]) -> Result<Facts, Error> {
        let json: Json = serde_json::from_slice(schema).map_err(|e| Error::Json(format!("schema: {e}")))?;
        let root = compile(&json).unwrap_or_default();
        Ok(Facts { group: group.into(), kind: kind.into(), typed: true, tables, schema: Some(root) })
    }

    /// The cursor of the object's root.
    pub fn root(&self) -> Cursor<'_> {
        Cursor(self.schema.as_ref())
    }

    /// SchemaFacts._node one step further: through arrays to their items, then the property
    /// `name` or else `additionalProperties`.
    pub fn child<'f>(&'f self, at: Cursor<'f>, name: &str) -> Cursor<'f> {
        let mut node = match at.0 {
            Some(n) => n,
            None => return Cursor(None),
        };
        while node.array {
            match &node.items {
                Some(items) => node = items,
                None => return Cursor(None),
            }
        }
        Cursor(node.properties.get(name).or(node.additional.as_deref()))
    }

    /// The value a missing key field takes (canonical JSON text), if it has one.
    pub fn key_default(&self, field: &str) -> Option<&str> {
        self.tables.key_defaults.get(field).map(String::as_str)
    }

    fn keyed(&self, field: &str) -> ListType<'_> {
        match self.tables.keyed.get(field) {
            Some(k) => ListType::Map { keys: &k.keys, atomic_items: k.atomic_items },
            None => ListType::Atomic,
        }
    }

    /// The list type of the list at `names` (`at` is its cursor).
    pub fn list_type<'f>(&'f self, names: &[&str], at: Cursor<'f>) -> ListType<'f> {
        if names == ["metadata", "finalizers"] {
            return if self.typed { ListType::Set } else { ListType::Atomic };
        }
        if self.schema.is_some() {
            if names == ["metadata", "ownerReferences"] {
                return self.keyed("ownerReferences");
            }
            return match at.0.map(|n| &n.list) {
                Some(SchemaList::Set) => ListType::Set,
                Some(SchemaList::Map(k)) => ListType::Map { keys: &k.keys, atomic_items: k.atomic_items },
                _ => ListType::Atomic,
            };
        }
        let Some(&field) = names.last() else { return ListType::Atomic };
        if !self.typed {
            return ListType::Atomic;
        }
        if field == "ports" {
            let n = names.len();
            if n >= 2 && self.tables.container_fields.contains(names[n - 2]) {
                return ListType::Map { keys: &self.tables.container_ports, atomic_items: false };
            }
            if self.group.is_empty() && self.kind == "Service" && names == ["spec", "ports"] {
                return ListType::Map { keys: &self.tables.service_ports, atomic_items: false };
            }
            return ListType::Atomic;
        }
        self.keyed(field)
    }

    /// Whether the map at `names` is owned as a whole.
    pub fn atomic_map(&self, names: &[&str], at: Cursor<'_>) -> bool {
        if self.schema.is_some() {
            if names.is_empty() || names[0] == "metadata" {
                return false;
            }
            return at.0.is_some_and(|n| n.atomic_map);
        }
        self.typed && names.last().is_some_and(|f| self.tables.atomic_maps.contains(*f))
    }
}

/// Python's `str()` of a list-map-key (structural schemas only allow strings).
fn key_name(k: &Json) -> String {
    match k {
        Json::String(s) => s.clone(),
        Json::Bool(true) => "True".into(),
        Json::Bool(false) => "False".into(),
        Json::Null => "None".into(),
        other => other.to_string(),
    }
}

fn compile(node: &Json) -> Option<SchemaNode> {
    let obj = node.as_object()?;
    let items = obj.get("items");
    let list = match (obj.get("x-kubernetes-list-type").and_then(Json::as_str), obj.get("x-kubernetes-list-map-keys")) {
        (Some("set"), _) => SchemaList::Set,
        (Some("map"), Some(Json::Array(keys))) if !keys.is_empty() => {
            let atomic_items = items.and_then(|i| i.get("x-kubernetes-map-type")).and_then(Json::as_str) == Some("atomic");
            SchemaList::Map(Keyed { keys: keys.iter().map(key_name).collect(), atomic_items })
        }
        _ => SchemaList::Atomic,
    };
    let properties = match obj.get("properties").and_then(Json::as_object) {
        Some(props) => props.iter().filter_map(|(k, v)| Some((k.clone(), compile(v)?))).collect(),
        None => NameMap::default(),
    };
    Some(SchemaNode {
        list,
        atomic_map: obj.get("x-kubernetes-map-type").and_then(Json::as_str) == Some("atomic"),
        array: obj.get("type").and_then(Json::as_str) == Some("array"),
        items: items.and_then(compile).map(Box::new),
        properties,
        additional: obj.get("additionalProperties").and_then(compile).map(Box::new),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tables() -> Tables {
        let mut t = Tables::default();
        t.keyed.insert("containers".into(), Keyed { keys: vec!["name".into()], atomic_items: false });
        t.keyed.insert("ownerReferences".into(), Keyed { keys: vec!["uid".into()], atomic_items: true });
        t.container_ports = vec!["containerPort".into(), "protocol".into()];
        t.service_ports = vec!["port".into(), "protocol".into()];
        t.container_fields.insert("containers".into());
        t.atomic_maps.insert("selector".into());
        t
    }

    #[test]
    fn builtin_rules() {
        let f = Facts::builtin("", "Service", true, tables());
        let r = f.root();
        assert_eq!(f.list_type(&["spec", "containers"], r), ListType::Map { keys: &["name".to_string()], atomic_items: false });
        assert!(matches!(f.list_type(&["spec", "containers", "ports"], r), ListType::Map { keys, .. } if keys[0] == "containerPort"));
        assert!(matches!(f.list_type(&["spec", "ports"], r), ListType::Map { keys, .. } if keys[0] == "port"));
        assert_eq!(f.list_type(&["spec", "x", "ports"], r), ListType::Atomic);
        assert_eq!(f.list_type(&["metadata", "finalizers"], r), ListType::Set);
        assert_eq!(f.list_type(&[], r), ListType::Atomic);
        assert!(f.atomic_map(&["spec", "selector"], r));
        let pod = Facts::builtin("", "Pod", true, tables());
        assert_eq!(pod.list_type(&["spec", "ports"], r), ListType::Atomic);
        let untyped = Facts::builtin("x", "Y", false, tables());
        assert_eq!(untyped.list_type(&["spec", "containers"], r), ListType::Atomic);
        assert_eq!(untyped.list_type(&["metadata", "finalizers"], r), ListType::Atomic);
        assert!(!untyped.atomic_map(&["selector"], r));
    }

    #[test]
    fn schema_rules() {
        let schema = br#"{"type":"object","properties":{"spec":{"type":"object","properties":{
            "parts":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["name"],
                     "items":{"type":"object","x-kubernetes-map-type":"atomic","properties":{"ids":{"type":"array","x-kubernetes-list-type":"set"}}}},
            "sel":{"type":"object","x-kubernetes-map-type":"atomic"},
            "free":{"type":"object","additionalProperties":{"type":"array","x-kubernetes-list-type":"set"}}}}}}"#;
        let f = Facts::with_schema("example.com", "Gadget", tables(), schema).unwrap();
        let at = |names: &[&str]| names.iter().fold(f.root(), |c, n| f.child(c, n));
        let parts = ["spec", "parts"];
        assert_eq!(f.list_type(&parts, at(&parts)), ListType::Map { keys: &["name".to_string()], atomic_items: true });
        let ids = ["spec", "parts", "ids"];
        assert_eq!(f.list_type(&ids, at(&ids)), ListType::Set);
        let any = ["spec", "free", "anything"];
        assert_eq!(f.list_type(&any, at(&any)), ListType::Set);
        assert!(f.atomic_map(&["spec", "sel"], at(&["spec", "sel"])));
        let unknown = ["spec", "nope", "x"];
        assert_eq!(f.list_type(&unknown, at(&unknown)), ListType::Atomic);
        let owners = ["metadata", "ownerReferences"];
        assert!(matches!(f.list_type(&owners, at(&owners)), ListType::Map { atomic_items: true, .. }));
    }
}
