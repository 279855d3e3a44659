//! The walkers on small objects whose field sets are written out by hand. The worked example of
//! lib.rs is the first case; the others pin the corners kubecore's Python walkers defined:
//! null vs absent, bools vs numbers, repeated keys, atomic lists/maps/items, defaults of key
//! fields, top-level fields skipped, and the error messages.

use kubecore_fieldpath::{compare, field_set, Error, Facts, Keyed, Tables};

fn tables() -> Tables {
    let mut t = Tables::default();
    for (field, keys, atomic_items) in [
        ("containers", &["name"][..], false),
        ("env", &["name"], false),
        ("ownerReferences", &["uid"], true),
        ("topologySpreadConstraints", &["topologyKey", "whenUnsatisfiable"], false),
    ] {
        t.keyed.insert(field.into(), Keyed { keys: keys.iter().map(|k| k.to_string()).collect(), atomic_items });
    }
    t.container_ports = vec!["containerPort".into(), "protocol".into()];
    t.service_ports = vec!["port".into(), "protocol".into()];
    t.container_fields.insert("containers".into());
    t.atomic_maps.insert("nodeSelector".into());
    t.key_defaults.insert("protocol".into(), "\"TCP\"".into());
    t
}

fn pod() -> Facts {
    Facts::builtin("", "Pod", true, tables())
}

fn fs(facts: &Facts, obj: &str, skip: &[&str]) -> Vec<String> {
    let s = field_set(facts, obj.as_bytes(), skip).unwrap();
    let mut out: Vec<String> = s.members.iter().map(|&i| s.paths.display(i)).collect();
    out.sort();
    out.dedup();
    out
}

/// (added, modified, removed), each sorted.
fn cmp(facts: &Facts, lhs: Option<&str>, rhs: Option<&str>, skip: &[&str]) -> [Vec<String>; 3] {
    let c = compare(facts, lhs.map(str::as_bytes), rhs.map(str::as_bytes), skip).unwrap();
    let show = |set: &[u32]| {
        let mut v: Vec<String> = set.iter().map(|&i| c.paths.display(i)).collect();
        v.sort();
        v.dedup();
        v
    };
    [show(&c.added), show(&c.modified), show(&c.removed)]
}

#[test]
fn field_set_of_a_pod() {
    let obj = r#"{"metadata":{"labels":{"a":"b"},"finalizers":["x"],"ownerReferences":[{"uid":"u1","name":"n"}]},
                  "spec":{"nodeSelector":{"disk":"ssd"},"tolerations":[{"key":"k"}],"priority":null,
                          "containers":[{"name":"c","ports":[{"containerPort":80}],"env":[]}]},
                  "status":{"phase":"Running"}}"#;
    assert_eq!(
        fs(&pod(), obj, &["status"]),
        [
            "f:metadata.f:finalizers.v:\"x\"",
            "f:metadata.f:labels.f:a",
            "f:metadata.f:ownerReferences.k:{\"uid\":\"u1\"}",
            "f:spec.f:containers.k:{\"name\":\"c\"}",
            "f:spec.f:containers.k:{\"name\":\"c\"}.f:name",
            "f:spec.f:containers.k:{\"name\":\"c\"}.f:ports.k:{\"containerPort\":80,\"protocol\":\"TCP\"}",
            "f:spec.f:containers.k:{\"name\":\"c\"}.f:ports.k:{\"containerPort\":80,\"protocol\":\"TCP\"}.f:containerPort",
            "f:spec.f:nodeSelector",
            "f:spec.f:priority",
            "f:spec.f:tolerations",
        ]
    );
}

#[test]
fn repeated_items_are_members_once_and_not_descended() {
    let obj = r#"{"spec":{"containers":[{"name":"a","image":"x"},{"name":"a","image":"y"},{"name":"b"}]}}"#;
    assert_eq!(
        fs(&pod(), obj, &[]),
        [
            "f:spec.f:containers.k:{\"name\":\"a\"}",
            "f:spec.f:containers.k:{\"name\":\"b\"}",
            "f:spec.f:containers.k:{\"name\":\"b\"}.f:name",
        ]
    );
    let old = r#"{"spec":{"containers":[{"name":"a","image":"x"},{"name":"a"}]}}"#;
    let new = r#"{"spec":{"containers":[{"name":"a","image":"z"}]}}"#;
    let [added, modified, removed] = cmp(&pod(), Some(old), Some(new), &[]);
    // one side repeated: the other side's item against nothing, and the item removed
    let item = "f:spec.f:containers.k:{\"name\":\"a\"}";
    assert_eq!(added, [item.to_string(), format!("{item}.f:image"), format!("{item}.f:name")]);
    assert!(modified.is_empty());
    assert_eq!(removed, [item]);
}

#[test]
fn null_absent_and_bools() {
    let p = pod();
    let [a, m, r] = cmp(&p, Some(r#"{"x":null,"y":1,"z":true,"w":[true]}"#), Some(r#"{"y":1.0,"z":1,"v":null,"w":[1]}"#), &[]);
    assert_eq!(a, ["f:v"]);
    assert_eq!(m, ["f:z"]); // True is not 1 as a leaf; 1 == 1.0; [True] == [1] as a whole
    assert_eq!(r, ["f:x"]);
    let [a, m, r] = cmp(&p, Some(r#"{"x":null}"#), Some(r#"{"x":{}}"#), &[]);
    assert!(a.is_empty() && r.is_empty());
    assert_eq!(m, ["f:x"]);
    let [a, m, r] = cmp(&p, None, Some(r#"{"a":{"b":[1]},"c":{}}"#), &[]);
    assert_eq!(a, ["f:a", "f:a.f:b", "f:c"]);
    assert!(m.is_empty() && r.is_empty());
    let [a, _, _] = cmp(&p, None, Some("3"), &[]);
    assert_eq!(a, [""]); // the root itself
}

#[test]
fn atomic_values_and_skipped_fields() {
    let p = pod();
    let old = r#"{"spec":{"nodeSelector":{"a":"1"},"tolerations":[{"key":"a"}]},"status":{"x":1}}"#;
    let new = r#"{"spec":{"nodeSelector":{"a":"2","b":"3"},"tolerations":[{"key":"b"}]},"status":{"x":2}}"#;
    let [a, m, r] = cmp(&p, Some(old), Some(new), &["status"]);
    assert!(a.is_empty() && r.is_empty());
    assert_eq!(m, ["f:spec.f:nodeSelector", "f:spec.f:tolerations"]);
    let owners_old = r#"{"metadata":{"ownerReferences":[{"uid":"u","name":"a"}]}}"#;
    let owners_new = r#"{"metadata":{"ownerReferences":[{"uid":"u","name":"b"}]}}"#;
    let [_, m, _] = cmp(&p, Some(owners_old), Some(owners_new), &[]);
    assert_eq!(m, ["f:metadata.f:ownerReferences.k:{\"uid\":\"u\"}"]);
}

#[test]
fn keys_are_canonical_json() {
    let obj = r#"{"spec":{"topologySpreadConstraints":[{"whenUnsatisfiable":"a<b","topologyKey":"z\u2028","maxSkew":1}]}}"#;
    assert_eq!(
        fs(&pod(), obj, &[]),
        [
            "f:spec.f:topologySpreadConstraints.k:{\"topologyKey\":\"z\\u2028\",\"whenUnsatisfiable\":\"a\\u003cb\"}",
            "f:spec.f:topologySpreadConstraints.k:{\"topologyKey\":\"z\\u2028\",\"whenUnsatisfiable\":\"a\\u003cb\"}.f:maxSkew",
            "f:spec.f:topologySpreadConstraints.k:{\"topologyKey\":\"z\\u2028\",\"whenUnsatisfiable\":\"a\\u003cb\"}.f:topologyKey",
            "f:spec.f:topologySpreadConstraints.k:{\"topologyKey\":\"z\\u2028\",\"whenUnsatisfiable\":\"a\\u003cb\"}.f:whenUnsatisfiable",
        ]
    );
}

#[test]
fn errors_name_the_list() {
    let p = pod();
    let err = |obj: &str| field_set(&p, obj.as_bytes(), &[]).unwrap_err();
    assert_eq!(
        err(r#"{"spec":{"containers":[{"image":"x"}]}}"#),
        Error::FieldPath(
            ".spec.containers: associative list with keys has an element that omits key field \"name\" (and doesn't have default value)".into()
        )
    );
    assert_eq!(
        err(r#"{"spec":{"containers":[{"name":"c","env":[{"name":null}]}]}}"#),
        Error::FieldPath(".spec.containers.env: key field \"name\" cannot be null".into())
    );
    assert_eq!(
        err(r#"{"spec":{"containers":["c"]}}"#),
        Error::FieldPath(".spec.containers: associative list with keys has an element that is not a map".into())
    );
    // equal subtrees are not walked, so they cannot fail
    let bad = r#"{"spec":{"containers":[{"image":"x"}]}}"#;
    assert!(compare(&p, Some(bad.as_bytes()), Some(bad.as_bytes()), &[]).is_ok());
    assert!(compare(&p, None, Some(bad.as_bytes()), &[]).is_err());
    assert!(matches!(field_set(&p, b"{", &[]), Err(Error::Json(_))));
}

#[test]
fn untyped_and_schema_facts() {
    let untyped = Facts::builtin("example.com", "W", false, tables());
    assert_eq!(
        fs(&untyped, r#"{"spec":{"containers":[{"name":"x"}],"m":{"a":1}}}"#, &[]),
        ["f:spec.f:containers", "f:spec.f:m.f:a"]
    );
    let schema = br#"{"type":"object","properties":{"spec":{"type":"object","properties":{
        "parts":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["name","kind"],
                 "items":{"type":"object","properties":{"ids":{"type":"array","x-kubernetes-list-type":"set"}}}},
        "sel":{"type":"object","x-kubernetes-map-type":"atomic"}}}}}"#;
    let crd = Facts::with_schema("example.com", "Gadget", tables(), schema).unwrap();
    let obj = r#"{"spec":{"parts":[{"name":"a","kind":"k","ids":[2,1]}],"sel":{"a":"b"},"plain":["x"]}}"#;
    let item = "f:spec.f:parts.k:{\"kind\":\"k\",\"name\":\"a\"}";
    assert_eq!(
        fs(&crd, obj, &[]),
        [
            item.to_string(),
            format!("{item}.f:ids.v:1"),
            format!("{item}.f:ids.v:2"),
            format!("{item}.f:kind"),
            format!("{item}.f:name"),
            "f:spec.f:plain".into(),
            "f:spec.f:sel".into(),
        ]
    );
}
