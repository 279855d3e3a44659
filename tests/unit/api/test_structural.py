"""Custom resource schemas: validation messages, pruning and defaulting (kubecore.api.structural,
kubecore.api.pruning), with upstream's texts as the expected values."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubecore.api import pruning, structural
from kubecore.api.errors import invalid

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["color"],
            "properties": {
                "replicas": {"type": "integer", "minimum": 0, "maximum": 10, "default": 1},
                "color": {"type": "string", "enum": ["red", "green"]},
                "name": {"type": "string", "minLength": 2, "maxLength": 5, "pattern": "^[a-z]+$"},
                "ratio": {"type": "number", "exclusiveMinimum": True, "minimum": 0},
                "port": {"x-kubernetes-int-or-string": True},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2, "minItems": 1},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 1},
                "when": {"type": "string", "format": "date-time"},
                "count32": {"type": "integer", "format": "int32"},
                "opt": {"type": "string", "nullable": True},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                         "properties": {"known": {"type": "object", "properties": {"a": {"type": "string"}}}}},
                "nested": {"type": "object", "properties": {"deep": {"type": "string", "default": "d"}}, "default": {}},
            },
        },
        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
    },
}


def errs(obj: Any, schema: dict[str, Any] = SCHEMA, prefix: str = "") -> list[str]:
    return [e.error() for e in structural.validate(obj, schema, prefix=prefix)]


def spec(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": "g.io/v1", "kind": "K", "metadata": {"name": "x"}, "spec": {"color": "red", **fields}}


@pytest.mark.parametrize("fields, expected", [
    ({}, []),
    ({"replicas": "string"},
     ['spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"']),
    ({"replicas": True},
     ['spec.replicas: Invalid value: "boolean": spec.replicas in body must be of type integer: "boolean"']),
    ({"replicas": {"a": 1}},
     ['spec.replicas: Invalid value: "object": spec.replicas in body must be of type integer: "object"']),
    ({"replicas": 3.0}, []),
    ({"replicas": 11}, ["spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10"]),
    ({"replicas": -1}, ["spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0"]),
    ({"replicas": 10.5}, ["spec.replicas: Invalid value: \"number\": spec.replicas in body must be of type integer: "
                          "\"number\"", "spec.replicas: Invalid value: 10.5: spec.replicas in body should be less "
                          "than or equal to 10"]),
    ({"color": "blue"}, ['spec.color: Unsupported value: "blue": supported values: "red", "green"']),
    ({"name": "a"}, ['spec.name: Invalid value: "a": spec.name in body should be at least 2 chars long']),
    ({"name": "abcdef"}, ["spec.name: Too long: may not be more than 5 bytes"]),
    ({"name": "AB"}, ["spec.name: Invalid value: \"AB\": spec.name in body should match '^[a-z]+$'"]),
    ({"ratio": 0}, ["spec.ratio: Invalid value: 0: spec.ratio in body should be greater than 0"]),
    ({"ratio": 0.0}, ["spec.ratio: Invalid value: 0: spec.ratio in body should be greater than 0"]),
    ({"port": 80}, []),
    ({"port": "http"}, []),
    ({"port": 1.5}, ['spec.port: Invalid value: "number": spec.port in body must be of type integer,string: "number"']),
    ({"tags": ["a", 1]}, ['spec.tags[1]: Invalid value: "integer": spec.tags[1] in body must be of type string: '
                          '"integer"']),
    ({"tags": ["a", "b", "c"]}, ["spec.tags: Too many: 3: must have at most 2 items"]),
    ({"tags": []}, ["spec.tags: Invalid value: 0: spec.tags in body should have at least 1 items"]),
    ({"labels": {"a": "x", "b": "y"}}, ["spec.labels: Too many: 2: must have at most 1 item"]),
    ({"labels": {"a": 1}}, ['spec.labels.a: Invalid value: "integer": spec.labels.a in body must be of type string: '
                            '"integer"']),
    ({"when": "2024-01-02T03:04:05Z"}, []),
    ({"when": "yesterday"}, ['spec.when: Invalid value: "yesterday": spec.when in body must be of type date-time: '
                             '"yesterday"']),
    ({"count32": 1 << 31}, ['<nil>: Invalid value: "": Checked value must be of type integer with format int32 in '
                            "spec.count32"]),
    ({"opt": None}, []),
    ({"free": {"x": 1, "known": {"a": 2}}},
     ['spec.free.known.a: Invalid value: "integer": spec.free.known.a in body must be of type string: "integer"']),
])
def test_validation_messages(fields: dict[str, Any], expected: list[str]) -> None:
    assert errs(spec(**fields)) == expected


def test_required_and_root_paths() -> None:
    obj = spec()
    del obj["spec"]["color"]
    assert errs(obj) == ["spec.color: Required value"]
    assert errs({"kind": "K"}, {"type": "object", "required": ["spec"]}) == ["spec: Required value"]
    closed = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}
    assert errs({"a": "x", "b": 1}, closed) == ['<nil>: Invalid value: "b": .b in body is a forbidden property']


def test_null_needs_nullable() -> None:
    assert errs(spec(color=None)) == [
        'spec.color: Invalid value: "null": spec.color in body must be of type string: "null"',
        'spec.color: Unsupported value: null: supported values: "red", "green"',
    ]


def test_status_validation_is_rooted_at_status() -> None:
    obj = {"status": {"ready": "yes"}}
    assert [e.error() for e in structural.validate_status(obj, SCHEMA)] == [
        'status.ready: Invalid value: "string": ready in body must be of type boolean: "string"']


def test_errors_become_upstream_invalid_status() -> None:
    e = invalid(("g.io", "K"), "x", structural.validate(spec(replicas="string"), SCHEMA))
    assert e.code == 422
    assert e.message == ('K.g.io "x" is invalid: spec.replicas: Invalid value: "string": spec.replicas in body must '
                         'be of type integer: "string"')
    assert e.details is not None
    assert e.details["causes"] == [{"reason": "FieldValueTypeInvalid", "message": 'Invalid value: "string": '
                                    'spec.replicas in body must be of type integer: "string"', "field": "spec.replicas"}]


def test_any_of_one_of_not() -> None:
    schema = {"type": "object", "properties": {"v": {"type": "string", "anyOf": [{"pattern": "^a"}, {"pattern": "^b"}],
                                                     "not": {"pattern": "^bad"}}}}
    assert errs({"v": "abc"}, schema) == []
    assert errs({"v": "zzz"}, schema) == [
        "<nil>: Invalid value: \"\": \"v\" must validate at least one schema (anyOf)",
        "v: Invalid value: \"zzz\": v in body should match '^a'",
    ]
    assert errs({"v": "badly"}, schema) == ['<nil>: Invalid value: "": "v" must not validate the schema (not)']


@pytest.mark.parametrize("value, text", [
    (1.0, "1"), (1.5, "1.5"), (123456.0, "123456"), (1e6, "1e+06"), (1234567.0, "1.234567e+06"),
    (0.0001, "0.0001"), (0.00001, "1e-05"), (-2.5, "-2.5"), (1e21, "1e+21"),
])
def test_go_float(value: float, text: str) -> None:
    assert structural.go_float(value) == text


# ---- pruning and defaulting ------------------------------------------------------------------

def test_pruning_worked_example() -> None:
    obj = {"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "x", "bogus": 1}, "spec": {"color": "red", "extra": True}}
    unknown = pruning.coerce(obj, SCHEMA)
    assert unknown == ["metadata.bogus", "spec.extra"]
    assert obj == {"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "x"},
                   "spec": {"color": "red", "replicas": 1, "nested": {"deep": "d"}}}


@pytest.mark.parametrize("before, after, unknown", [
    ({"spec": {"tags": ["a"], "x": {"y": 1}}}, {"spec": {"tags": ["a"]}}, ["spec.x"]),
    ({"spec": {"free": {"any": {"thing": 1}, "known": {"a": "s", "b": 2}}}},
     {"spec": {"free": {"any": {"thing": 1}, "known": {"a": "s"}}}}, ["spec.free.known.b"]),
    ({"spec": {"labels": {"k": "v"}}}, {"spec": {"labels": {"k": "v"}}}, []),
    ({"top": 1, "apiVersion": "v", "kind": "K"}, {"apiVersion": "v", "kind": "K"}, ["top"]),
    ({"spec": {"tags": [{"a": 1}]}}, {"spec": {"tags": [{}]}}, ["spec.tags[0].a"]),
])
def test_prune(before: dict[str, Any], after: dict[str, Any], unknown: list[str]) -> None:
    obj = copy.deepcopy(before)
    assert pruning.prune(obj, SCHEMA) == unknown
    assert obj == after


def test_embedded_resources_keep_type_and_metadata() -> None:
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {"template": {
        "type": "object", "x-kubernetes-embedded-resource": True,
        "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}}}}}}}}}
    obj = {"spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "junk": 1},
                                 "spec": {"a": "x", "b": 2}}}}
    assert pruning.coerce(obj, schema) == ["spec.template.metadata.junk", "spec.template.spec.b"]
    assert obj["spec"]["template"] == {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"a": "x"}}
    bad = {"spec": {"template": {"kind": "Pod", "spec": {}}}}
    assert [e.error() for e in pruning.validate_embedded(bad, schema)] == ["spec.template.apiVersion: Required value"]


@pytest.mark.parametrize("before, after", [
    ({"spec": {}}, {"spec": {"replicas": 1, "nested": {"deep": "d"}}}),
    ({"spec": {"replicas": 5, "nested": {"deep": "x"}}}, {"spec": {"replicas": 5, "nested": {"deep": "x"}}}),
    ({"spec": {"replicas": None}}, {"spec": {"replicas": 1, "nested": {"deep": "d"}}}),
    ({"spec": {"opt": None, "color": None}}, {"spec": {"opt": None, "replicas": 1, "nested": {"deep": "d"}}}),
])
def test_nulls_and_defaults(before: dict[str, Any], after: dict[str, Any]) -> None:
    obj = copy.deepcopy(before)
    pruning.prune_nulls(obj, SCHEMA)
    pruning.apply_defaults(obj, SCHEMA)
    assert obj == after


def test_defaults_are_copies() -> None:
    schema = {"type": "object", "properties": {"l": {"type": "array", "items": {"type": "string"}, "default": ["a"]}}}
    a: dict[str, Any] = {}
    b: dict[str, Any] = {}
    pruning.apply_defaults(a, schema)
    pruning.apply_defaults(b, schema)
    a["l"].append("b")
    assert b == {"l": ["a"]} and schema["properties"]["l"]["default"] == ["a"]
    assert pruning.has_defaults(schema) and not pruning.has_defaults({"type": "object", "enum": [{"default": 1}]})


def test_ratcheting_keeps_unchanged_invalid_values() -> None:
    schema = {"type": "object", "properties": {"spec": {"type": "object", "required": ["a"], "properties": {
        "n": {"type": "integer", "maximum": 3}, "a": {"type": "string"}}}}}
    old = {"spec": {"n": 5}}
    relabelled = {"metadata": {"labels": {"x": "y"}}, "spec": {"n": 5}}
    assert structural.ratchet(structural.validate(relabelled, schema), relabelled, old) == []
    changed = {"spec": {"n": 6}}
    assert [e.error() for e in structural.ratchet(structural.validate(changed, schema), changed, old)] == [
        "spec.n: Invalid value: 6: spec.n in body should be less than or equal to 3", "spec.a: Required value"]
