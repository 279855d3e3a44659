"""Field sets in upstream's FieldsV1 encoding: what an object sets, what a write changed, how
managedFields entries are named, ordered and decoded (structured-merge-diff fieldpath facts)."""

from __future__ import annotations

from typing import Any

import pytest

from kubecore.api.managedentries import (
    Managed, VersionedSet, decode_managed, encode_managed, manager_identifier, print_manager,
)
from kubecore.api.managedfields import compare, field_set, from_fields_v1, iterate, path_string, to_fields_v1
from kubecore.api.typefacts import facts_for

POD = facts_for("", "Pod")
CM = facts_for("", "ConfigMap")
SVC = facts_for("", "Service")
DEPLOY = facts_for("apps", "Deployment")
CR = facts_for("example.com", "Widget", typed=False)


def fv1(obj: Any, facts: Any = CM) -> dict[str, Any]:
    return to_fields_v1(field_set(obj, facts))


# ---- ToFieldSet -----------------------------------------------------------------------------------

FIELD_SETS = [
    ("map keys are leaves", CM, {"data": {"a": "1", "b": "2"}}, {"f:data": {"f:a": {}, "f:b": {}}}),
    ("empty map and null are members", CM, {"data": {}, "binaryData": None}, {"f:binaryData": {}, "f:data": {}}),
    ("empty granular list owns nothing", CM, {"metadata": {"finalizers": []}}, {}),
    ("finalizers are a set", CM, {"metadata": {"finalizers": ["b", "a"]}},
     {"f:metadata": {"f:finalizers": {'v:"a"': {}, 'v:"b"': {}}}}),
    ("containers keyed by name, the item itself is a member", POD,
     {"spec": {"containers": [{"name": "main", "image": "busybox"}]}},
     {"f:spec": {"f:containers": {'k:{"name":"main"}': {".": {}, "f:image": {}, "f:name": {}}}}}),
    ("container ports keyed by port and protocol, protocol defaulted", POD,
     {"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80}]}]}},
     {"f:spec": {"f:containers": {'k:{"name":"c"}': {".": {}, "f:name": {}, "f:ports": {
         'k:{"containerPort":80,"protocol":"TCP"}': {".": {}, "f:containerPort": {}}}}}}}),
    ("service ports keyed by port and protocol", SVC,
     {"spec": {"ports": [{"port": 53, "protocol": "UDP", "name": "dns"}]}},
     {"f:spec": {"f:ports": {'k:{"port":53,"protocol":"UDP"}': {".": {}, "f:name": {}, "f:port": {}, "f:protocol": {}}}}}),
    ("tolerations and args are atomic", POD,
     {"spec": {"tolerations": [{"key": "k"}], "containers": [{"name": "c", "args": ["x"]}]}},
     {"f:spec": {"f:containers": {'k:{"name":"c"}': {".": {}, "f:args": {}, "f:name": {}}}, "f:tolerations": {}}}),
    ("label selectors and node selectors are atomic", DEPLOY,
     {"spec": {"selector": {"matchLabels": {"a": "b"}},
               "template": {"spec": {"nodeSelector": {"disk": "ssd"}}}}},
     {"f:spec": {"f:selector": {}, "f:template": {"f:spec": {"f:nodeSelector": {}}}}}),
    ("owner references are keyed atomic items", CM,
     {"metadata": {"ownerReferences": [{"uid": "u1", "name": "x", "kind": "K", "apiVersion": "v1"}]}},
     {"f:metadata": {"f:ownerReferences": {'k:{"uid":"u1"}': {}}}}),
    ("env keyed by name", POD,
     {"spec": {"containers": [{"name": "c", "env": [{"name": "A", "value": "1"}]}]}},
     {"f:spec": {"f:containers": {'k:{"name":"c"}': {".": {}, "f:env": {
         'k:{"name":"A"}': {".": {}, "f:name": {}, "f:value": {}}}, "f:name": {}}}}}),
    ("untyped kinds: lists are atomic", CR, {"spec": {"containers": [{"name": "x"}], "size": 3}},
     {"f:spec": {"f:containers": {}, "f:size": {}}}),
]


@pytest.mark.parametrize("facts,obj,want", [c[1:] for c in FIELD_SETS], ids=[c[0] for c in FIELD_SETS])
def test_field_set(facts: Any, obj: dict[str, Any], want: dict[str, Any]) -> None:
    assert fv1(obj, facts) == want


def test_missing_key_without_default_is_an_error() -> None:
    with pytest.raises(ValueError, match='omits key field "name"'):
        field_set({"spec": {"containers": [{"image": "x"}]}}, POD)


# ---- FieldsV1 ----------------------------------------------------------------------------------------


def test_fields_v1_order_and_self_marker() -> None:
    paths = {
        (("f", "spec"), ("f", "ports")),
        (("f", "spec"), ("f", "ports"), ("k", '{"port":80,"protocol":"TCP"}')),
        (("f", "spec"), ("f", "ports"), ("k", '{"port":443,"protocol":"TCP"}'), ("f", "port")),
        (("f", "spec"), ("f", "ports"), ("k", '{"port":443,"protocol":"TCP"}')),
        (("f", "spec"), ("f", "ports"), ("k", '{"name":"x"}')),
        (("f", "apiVersion"),),
    }
    out = to_fields_v1(paths)
    assert list(out) == ["f:apiVersion", "f:spec"]
    ports = out["f:spec"]["f:ports"]
    # "." first; shorter keys sort first, then by field name and numeric value.
    assert list(ports) == [".", 'k:{"name":"x"}', 'k:{"port":80,"protocol":"TCP"}', 'k:{"port":443,"protocol":"TCP"}']
    assert ports['k:{"port":443,"protocol":"TCP"}'] == {".": {}, "f:port": {}}


@pytest.mark.parametrize("raw", [
    {"f:data": {".": {}, "f:a": {}}, "f:metadata": {"f:labels": {"f:x": {}}}},
    {"f:spec": {"f:containers": {'k:{"name":"a"}': {".": {}, "f:image": {}}}}},
    {"f:metadata": {"f:finalizers": {'v:"x"': {}, "v:1": {}}}},
])
def test_fields_v1_round_trip(raw: dict[str, Any]) -> None:
    assert to_fields_v1(from_fields_v1(raw)) == raw


def test_fields_v1_key_order_in_input_is_normalized() -> None:
    paths = from_fields_v1({'k:{"protocol":"TCP","containerPort":80}': {}})
    assert paths == {(("k", '{"containerPort":80,"protocol":"TCP"}'),)}


def test_fields_v1_unknown_elements_are_skipped_and_garbage_rejected() -> None:
    assert from_fields_v1({"x:whatever": {}, "f:a": {}}) == {(("f", "a"),)}
    for bad in ({"nocolon": {}}, {"k:{notjson": {}}, {"f:a": 1}, []):
        with pytest.raises(ValueError):
            from_fields_v1(bad)


# ---- paths -------------------------------------------------------------------------------------------


def test_path_string() -> None:
    p = (("f", "spec"), ("f", "containers"), ("k", '{"name":"main"}'), ("f", "ports"),
         ("k", '{"containerPort":80,"protocol":"TCP"}'))
    assert path_string(p) == '.spec.containers[name="main"].ports[containerPort=80,protocol="TCP"]'
    assert path_string((("f", "metadata"), ("f", "finalizers"), ("v", '"a/b"'))) == '.metadata.finalizers[="a/b"]'


def test_iterate_lists_members_of_a_level_before_descending() -> None:
    paths = {(("f", "b"),), (("f", "a"), ("f", "c")), (("f", "a"), ("f", "b")), (("f", "a"),)}
    assert [path_string(p) for p in iterate(paths)] == [".a", ".b", ".a.b", ".a.c"]


# ---- Compare -----------------------------------------------------------------------------------------


def fv(paths: set[Any]) -> dict[str, Any]:
    return to_fields_v1(paths)


def test_compare_reports_added_containers_as_a_whole() -> None:
    c = compare({"metadata": {}}, {"metadata": {"labels": {"a": "1"}}, "data": {"x": "1"}}, CM)
    assert fv(c.added) == {"f:data": {".": {}, "f:x": {}}, "f:metadata": {"f:labels": {".": {}, "f:a": {}}}}
    assert not c.modified and not c.removed


def test_compare_modified_removed_and_empty_maps() -> None:
    old = {"data": {"a": "1", "b": "2"}, "spec": {}, "x": 1}
    new = {"data": {"a": "9"}, "spec": None, "x": True}
    c = compare(old, new, CM)
    # {} -> null: an empty map is a leaf, and null is another value; true is not 1.
    assert fv(c.modified) == {"f:data": {"f:a": {}}, "f:spec": {}, "f:x": {}}
    assert fv(c.removed) == {"f:data": {"f:b": {}}}
    assert not c.added


def test_compare_keyed_list_items() -> None:
    old = {"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}]}}
    new = {"spec": {"containers": [{"name": "b", "image": "2"}, {"name": "c", "image": "1"}]}}
    c = compare(old, new, POD)
    assert fv(c.modified) == {"f:spec": {"f:containers": {'k:{"name":"b"}': {"f:image": {}}}}}
    assert fv(c.added) == {"f:spec": {"f:containers": {'k:{"name":"c"}': {".": {}, "f:image": {}, "f:name": {}}}}}
    assert fv(c.removed) == {"f:spec": {"f:containers": {'k:{"name":"a"}': {".": {}, "f:image": {}, "f:name": {}}}}}


def test_compare_atomic_list_is_one_leaf() -> None:
    c = compare({"spec": {"tolerations": [{"key": "a"}]}}, {"spec": {"tolerations": [{"key": "b"}]}}, POD)
    assert fv(c.modified) == {"f:spec": {"f:tolerations": {}}}


# ---- managedFields entries ---------------------------------------------------------------------------


def test_manager_identifiers_and_how_conflicts_name_them() -> None:
    upd = manager_identifier("kubectl-edit", "Update", "v1")
    assert upd == '{"manager":"kubectl-edit","operation":"Update","apiVersion":"v1"}'
    app = manager_identifier("kubectl", "Apply", "apps/v1", "status")
    assert app == '{"manager":"kubectl","operation":"Apply","subresource":"status"}'
    assert print_manager(upd) == '"kubectl-edit" using v1'
    assert print_manager(app) == '"kubectl" with subresource "status"'


def test_encode_orders_apply_first_then_time_then_manager() -> None:
    s = frozenset({(("f", "data"), ("f", "a"))})
    m = Managed(
        fields={manager_identifier("b", "Update", "v1"): VersionedSet(s, "v1", False),
                manager_identifier("a", "Update", "v1"): VersionedSet(s, "v1", False),
                manager_identifier("old", "Update", "v1"): VersionedSet(s, "v1", False),
                manager_identifier("z", "Apply", "v1"): VersionedSet(s, "v1", True)},
        times={manager_identifier("b", "Update", "v1"): "2024-01-01T00:00:05Z",
               manager_identifier("a", "Update", "v1"): "2024-01-01T00:00:05Z",
               manager_identifier("old", "Update", "v1"): "2023-01-01T00:00:00Z",
               manager_identifier("z", "Apply", "v1"): "2025-01-01T00:00:00Z"})
    out = encode_managed(m)
    assert out is not None
    assert [e["manager"] for e in out] == ["z", "old", "a", "b"]
    assert list(out[0]) == ["manager", "operation", "apiVersion", "time", "fieldsType", "fieldsV1"]
    assert encode_managed(Managed()) is None


def test_decode_round_trip_and_rejections() -> None:
    entries = [{"manager": "m", "operation": "Update", "apiVersion": "v1", "time": "2024-01-01T00:00:00Z",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}}}, "subresource": "status"}]
    assert encode_managed(decode_managed(entries)) == entries
    bad = [
        ({"operation": "Patch", "apiVersion": "v1", "fieldsType": "FieldsV1"}, "operation must be `Apply` or `Update`"),
        ({"operation": "Update", "fieldsType": "FieldsV1"}, "apiVersion must not be empty"),
        ({"operation": "Update", "apiVersion": "v1"}, "missing fieldsType in managed fields entry 0"),
        ({"operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV2"}, 'invalid fieldsType "FieldsV2"'),
    ]
    for entry, message in bad:
        with pytest.raises(ValueError, match=message):
            decode_managed([entry])


def test_custom_resource_facts_come_from_the_schema() -> None:
    from kubecore.api.typefacts import SchemaFacts

    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "parts": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name", "kind"],
                  "items": {"type": "object", "properties": {"name": {"type": "string"}, "kind": {"type": "string"},
                                                             "ids": {"type": "array", "x-kubernetes-list-type": "set",
                                                                     "items": {"type": "integer"}}}}},
        "sel": {"type": "object", "x-kubernetes-map-type": "atomic"},
        "plain": {"type": "array", "items": {"type": "string"}}}}}}
    facts = SchemaFacts("example.com", "Gadget", schema)
    obj = {"spec": {"parts": [{"name": "a", "kind": "k", "ids": [2, 1]}], "sel": {"a": "b"}, "plain": ["x"]}}
    assert fv1(obj, facts) == {"f:spec": {
        "f:parts": {'k:{"kind":"k","name":"a"}': {".": {}, "f:ids": {"v:1": {}, "v:2": {}}, "f:kind": {}, "f:name": {}}},
        "f:plain": {}, "f:sel": {}}}
