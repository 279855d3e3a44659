"""CustomResourceDefinition defaulting and validation (kubecore.api.crd_validation, crd_schema)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubecore.api import crd_validation as cv


def crd(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                "type": "object", "properties": {"spec": {"type": "object", "properties": {
                    "replicas": {"type": "integer", "default": 1}}}}}}}],
        },
    }
    base["spec"].update(spec)
    return base


def errors_of(obj: dict[str, Any]) -> list[str]:
    cv.set_defaults(obj)
    cv.prepare_create(obj)
    return [e.error() for e in cv.name_errors(obj) + cv.validate_create(obj)]


def with_schema(schema: dict[str, Any], **version: Any) -> dict[str, Any]:
    obj = crd()
    obj["spec"]["versions"][0]["schema"] = {"openAPIV3Schema": schema}
    obj["spec"]["versions"][0].update(version)
    return obj


def test_defaults_and_fresh_status() -> None:
    obj = crd()
    cv.set_defaults(obj)
    cv.prepare_create(obj)
    assert obj["spec"]["names"] == {"plural": "widgets", "kind": "Widget", "singular": "widget", "listKind": "WidgetList"}
    assert obj["spec"]["conversion"] == {"strategy": "None"}
    assert obj["status"] == {"acceptedNames": {"plural": "", "kind": ""}, "storedVersions": ["v1"]}
    assert errors_of(crd()) == []


@pytest.mark.parametrize("change, expected", [
    ({"group": "example"}, ['metadata.name: Invalid value: "widgets.example.com": must be spec.names.plural+"."+spec.group',
                            'spec.group: Invalid value: "example": should be a domain with at least one dot']),
    ({"scope": "Global"}, ['spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced"']),
    ({"scope": ""}, ["spec.scope: Required value"]),
    ({"names": {"plural": "widgets", "kind": "Widget", "listKind": "Widget"}},
     ['spec.names.listKind: Invalid value: "Widget": kind and listKind may not be the same']),
    ({"names": {"plural": "widgets", "singular": "widget", "kind": "Wid_get", "listKind": "WidgetList"}},
     ['spec.names.kind: Invalid value: "Wid_get": may have mixed case, but should otherwise match: a DNS-1035 label '
      "must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an "
      "alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"]),
    ({"conversion": {"strategy": "Webhook"}},
     ["spec.conversion.webhookClientConfig: Required value: required when strategy is set to Webhook",
      "spec.conversion.conversionReviewVersions: Required value"]),
])
def test_spec_errors(change: dict[str, Any], expected: list[str]) -> None:
    assert errors_of(crd(**change)) == expected


def test_storage_version_rules() -> None:
    obj = crd()
    obj["spec"]["versions"][0]["storage"] = False
    got = errors_of(obj)
    assert got[0].startswith('spec.versions: Invalid value: [{"Name":"v1","Served":true,"Storage":false,')
    assert got[0].endswith(": must have exactly one version marked as storage version")
    assert got[1] == "status.storedVersions: Invalid value: null: must have at least one stored version"
    obj = crd()
    obj["spec"]["versions"].append({"name": "v1", "served": True, "storage": False})
    assert any(e.endswith("must contain unique version names") for e in errors_of(obj))


@pytest.mark.parametrize("schema, expected", [
    ({"type": "object", "properties": {"spec": {"properties": {"a": {"type": "string"}}}}},
     ["spec.validation.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields"]),
    ({"type": "array", "items": {"type": "string"}},
     ['spec.validation.openAPIV3Schema.type: Invalid value: "array": must be object at the root']),
    ({"type": "object", "properties": {"m": {"type": "object", "properties": {"a": {"type": "string"}},
                                             "additionalProperties": {"type": "string"}}}},
     ["spec.validation.openAPIV3Schema.properties[m].additionalProperties: Forbidden: additionalProperties and "
      "properties are mutual exclusive"]),
    ({"type": "object", "properties": {"l": {"type": "array"}}},
     ["spec.validation.openAPIV3Schema.properties[l].items: Required value: must be specified"]),
    ({"type": "object", "properties": {"a": {"type": "string", "uniqueItems": True}}},
     ["spec.validation.openAPIV3Schema.properties[a].uniqueItems: Forbidden: uniqueItems cannot be set to true since "
      "the runtime complexity becomes quadratic"]),
    ({"type": "object", "properties": {"a": {"type": "integer", "default": "x"}}},
     ['spec.validation.openAPIV3Schema.properties[a].default: Invalid value: "string":  in body must be of type '
      'integer: "string"']),
    ({"type": "object", "properties": {"o": {"type": "object", "properties": {"a": {"type": "string"}},
                                             "default": {"a": "x", "b": 1}}}},
     ['spec.validation.openAPIV3Schema.properties[o].default: Invalid value: {"a":"x","b":1}: must not have unknown fields']),
    ({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}}},
     ["spec.validation.openAPIV3Schema.properties[metadata]: Forbidden: must not specify anything other than name and "
      "generateName, but metadata is implicitly specified"]),
    ({"type": "object", "properties": {"a": {"type": "strin"}}},
     ['spec.validation.openAPIV3Schema.properties[a].type: Unsupported value: "strin": supported values: "array", '
      '"boolean", "integer", "number", "object", "string"']),
    ({"type": "object", "properties": {"a": {"type": "string", "x-kubernetes-preserve-unknown-fields": False}}},
     ["spec.validation.openAPIV3Schema.properties[a].x-kubernetes-preserve-unknown-fields: Invalid value: false: must "
      "be true or undefined"]),
    ({"type": "object", "properties": {"a": {"anyOf": [{"type": "integer"}, {"type": "string"}],
                                             "x-kubernetes-int-or-string": True}}}, []),
    ({"type": "object", "properties": {"a": {"type": "string", "allOf": [{"properties": {"b": {"type": "string"}}}]}}},
     ["spec.validation.openAPIV3Schema.properties[a].allOf[0].properties[b].type: Forbidden: must be empty to be "
      "structural"]),
    ({"type": "object", "anyOf": [{"properties": {"b": {"minLength": 1}}}]},
     ["spec.validation.openAPIV3Schema.properties[b]: Required value: because it is defined in "
      "spec.validation.openAPIV3Schema.anyOf[0].properties[b]"]),
    ({"type": "object", "nullable": True},
     ["spec.validation.openAPIV3Schema.nullable: Forbidden: nullable cannot be true at the root"]),
])
def test_schema_errors(schema: dict[str, Any], expected: list[str]) -> None:
    assert errors_of(with_schema(schema)) == expected


def test_status_subresource_root_rules() -> None:
    obj = with_schema({"type": "object", "x-kubernetes-preserve-unknown-fields": True, "nullable": False},
                      subresources={"status": {}})
    assert errors_of(obj) == []
    obj = with_schema({"type": "object", "minProperties": 1}, subresources={"status": {}})
    got = errors_of(obj)
    assert len(got) == 1 and got[0].startswith('spec.validation.openAPIV3Schema: Invalid value: {"type":"object",')
    assert got[0].endswith("fields are allowed at the root of the schema if the status subresource is enabled")


def test_per_version_paths_when_versions_differ() -> None:
    obj = crd()
    obj["spec"]["versions"].append({"name": "v2", "served": True, "storage": False, "schema": {"openAPIV3Schema": {
        "type": "object", "properties": {"x": {}}}},
        "subresources": {"scale": {"specReplicasPath": "spec.replicas", "statusReplicasPath": ".spec.x"}},
        "additionalPrinterColumns": [{"name": "X", "type": "str", "jsonPath": ".x"}]})
    assert errors_of(obj) == [
        "spec.versions[1].schema.openAPIV3Schema.properties[x].type: Required value: must not be empty for specified "
        "object fields",
        'spec.versions[1].subresources.scale.specReplicasPath: Invalid value: "spec.replicas": must be a simple json '
        "path starting with .",
        'spec.versions[1].subresources.scale.statusReplicasPath: Invalid value: ".spec.x": should be a json path under '
        ".status",
        'spec.versions[1].additionalPrinterColumns[0].type: Invalid value: "str": must be one of '
        "boolean,date,integer,number,string",
    ]


def test_single_version_columns_are_top_level() -> None:
    obj = crd()
    obj["spec"]["versions"][0]["additionalPrinterColumns"] = [{"name": "R", "type": "integer"}]
    assert errors_of(obj) == ["spec.additionalPrinterColumns[0].JSONPath: Required value"]


def test_protected_groups_need_approval() -> None:
    obj = crd(group="widgets.k8s.io")
    obj["metadata"]["name"] = "widgets.widgets.k8s.io"
    assert errors_of(copy.deepcopy(obj)) == [
        'metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval '
        'annotation "api-approved.kubernetes.io", see https://github.com/kubernetes/enhancements/pull/1111']
    obj["metadata"]["annotations"] = {"api-approved.kubernetes.io": "unapproved, testing"}
    assert errors_of(obj) == []


def test_update_rules() -> None:
    old = crd()
    cv.set_defaults(old)
    cv.prepare_create(old)
    old["status"]["conditions"] = [{"type": "Established", "status": "True"}]
    new = copy.deepcopy(old)
    new["spec"]["scope"] = "Cluster"
    new["spec"]["names"]["plural"] = "gadgets"
    new["spec"]["versions"].append({"name": "v2", "served": True, "storage": True, "schema": {"openAPIV3Schema": {"type": "object"}}})
    new["spec"]["versions"][0]["storage"] = False
    cv.prepare_update(new, old)
    assert new["status"]["storedVersions"] == ["v1", "v2"]
    assert [e.error() for e in cv.validate_update(new, old)] == [
        'spec.scope: Invalid value: "Cluster": field is immutable',
        'spec.names.plural: Invalid value: "gadgets": field is immutable',
    ]
    dropped = copy.deepcopy(new)
    dropped["spec"]["versions"] = dropped["spec"]["versions"][1:]
    dropped["spec"]["names"]["plural"] = "widgets"
    dropped["spec"]["scope"] = "Namespaced"
    assert [e.error() for e in cv.validate_update(dropped, old)] == [
        'status.storedVersions[0]: Invalid value: "v1": missing from spec.versions; v1 was previously a storage '
        "version, and must remain in spec.versions until a storage migration ensures no data remains persisted in v1 "
        "and removes v1 from status.storedVersions"]
