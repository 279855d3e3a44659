"""Published OpenAPI schemas: upstream's names, types, extensions; documents, caching, custom kinds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from kubecore.api.registry import Registry, ResourceType, builtin_registry
from kubecore.apiserver import openapi, openapi_schema as s
from kubecore.apiserver.patch import MERGE_KEYS

V2 = s.definitions(False)
V3 = s.definitions(True)
CORE = "io.k8s.api.core.v1."


def test_upstream_definition_names() -> None:
    assert s.definition_name("core.v1.Pod") == "io.k8s.api.core.v1.Pod"
    assert s.definition_name("apps.v1.Deployment") == "io.k8s.api.apps.v1.Deployment"
    assert s.definition_name("meta.v1.ObjectMeta") == "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    for name in ("io.k8s.apimachinery.pkg.api.resource.Quantity", "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
                 "io.k8s.apimachinery.pkg.apis.meta.v1.Time", "io.k8s.apimachinery.pkg.runtime.RawExtension",
                 CORE + "PodSpec", "io.k8s.api.networking.v1.Ingress"):
        assert name in V2 and name in V3


def test_types_and_formats_as_upstream() -> None:
    port = V2[CORE + "ContainerPort"]["properties"]
    assert port["containerPort"] == {"type": "integer", "format": "int32"}
    assert port["protocol"] == {"type": "string"}
    assert V2[CORE + "PodSpec"]["properties"]["terminationGracePeriodSeconds"] == {"type": "integer", "format": "int64"}
    assert V2[CORE + "ServicePort"]["properties"]["targetPort"] == {"$ref": "#/definitions/" + s.INT_OR_STRING}
    assert V2[CORE + "ResourceRequirements"]["properties"]["limits"] == {
        "type": "object", "additionalProperties": {"$ref": "#/definitions/" + s.QUANTITY}}
    assert V2[CORE + "Secret"]["properties"]["data"]["additionalProperties"] == {"type": "string", "format": "byte"}
    assert V2[s.META + "ObjectMeta"]["properties"]["creationTimestamp"] == {"$ref": "#/definitions/" + s.META + "Time"}
    assert V2[s.META + "Time"]["format"] == "date-time"
    assert V2[s.QUANTITY]["type"] == "string" and V2[s.INT_OR_STRING]["format"] == "int-or-string"
    assert V3[s.QUANTITY]["oneOf"] == [{"type": "string"}, {"type": "number"}]
    assert V3[s.INT_OR_STRING]["oneOf"] == [{"type": "integer"}, {"type": "string"}]


def test_v3_wraps_struct_references() -> None:
    assert V3[CORE + "Pod"]["properties"]["spec"] == {
        "allOf": [{"$ref": "#/components/schemas/" + CORE + "PodSpec"}], "default": {}}
    # a pointer field stays a plain reference
    assert V3[CORE + "PodSpec"]["properties"]["affinity"] == {"$ref": "#/components/schemas/" + CORE + "Affinity"}


def test_top_level_kinds_carry_gvk_and_type_meta() -> None:
    dep = V2["io.k8s.api.apps.v1.Deployment"]
    assert dep["x-kubernetes-group-version-kind"] == [{"group": "apps", "kind": "Deployment", "version": "v1"}]
    assert {"apiVersion", "kind", "metadata", "spec", "status"} <= set(dep["properties"])
    assert "x-kubernetes-group-version-kind" not in V2[CORE + "PodSpec"]
    assert list(dep["properties"]) == sorted(dep["properties"])


def test_required_fields_from_upstream_markers() -> None:
    assert V2[CORE + "Container"]["required"] == ["name"]
    assert V2[CORE + "PodSpec"]["required"] == ["containers"]
    assert V2["io.k8s.api.apps.v1.DeploymentSpec"]["required"] == ["selector", "template"]
    assert V2[CORE + "ServicePort"]["required"] == ["port"]
    assert "required" not in V2[s.META + "ObjectMeta"]


def test_list_and_patch_extensions() -> None:
    containers = V2[CORE + "PodSpec"]["properties"]["containers"]
    assert containers["x-kubernetes-list-type"] == "map"
    assert containers["x-kubernetes-list-map-keys"] == ["name"]
    assert containers["x-kubernetes-patch-merge-key"] == "name"
    assert containers["x-kubernetes-patch-strategy"] == "merge"
    ports = V2[CORE + "Container"]["properties"]["ports"]
    assert ports["x-kubernetes-list-map-keys"] == ["containerPort", "protocol"]
    assert ports["x-kubernetes-patch-merge-key"] == "containerPort"
    assert V2[CORE + "ServiceSpec"]["properties"]["ports"]["x-kubernetes-patch-merge-key"] == "port"
    assert V2[s.META + "ObjectMeta"]["properties"]["finalizers"]["x-kubernetes-list-type"] == "set"
    assert V2[s.META + "ObjectMeta"]["properties"]["finalizers"]["x-kubernetes-patch-strategy"] == "merge"
    assert V2[CORE + "LocalObjectReference"]["x-kubernetes-map-type"] == "atomic"
    assert "x-kubernetes-patch-strategy" not in V2[CORE + "PodSpec"]["properties"]["tolerations"]


def test_patch_keys_agree_with_the_servers_strategic_merge() -> None:
    """Every published merge key is the one patch.py merges that field by (one source of facts)."""
    for name, d in V2.items():
        for field, prop in d.get("properties", {}).items():
            key = prop.get("x-kubernetes-patch-merge-key")
            if key and field != "ports":
                assert MERGE_KEYS[field] == key, (name, field)


def test_every_reference_resolves() -> None:
    for defs in (V2, V3):
        for name, d in defs.items():
            for ref in s.refs(d):
                assert ref in defs, (name, ref)


def _doc(o: openapi.OpenAPI, gv: str) -> dict[str, Any]:
    enc = o.v3(gv)
    assert enc is not None
    doc: dict[str, Any] = msgspec.json.decode(enc.body)
    return doc


def test_group_version_documents_carry_their_kinds_closure() -> None:
    o = openapi.OpenAPI(builtin_registry())
    doc = _doc(o, "apis/apps/v1")
    names = doc["components"]["schemas"]
    assert "io.k8s.api.apps.v1.Deployment" in names and CORE + "Container" in names
    assert "io.k8s.api.batch.v1.Job" not in names
    assert all(r in names for r in s.refs(doc))
    status = names[s.META + "Status"]["x-kubernetes-group-version-kind"]
    assert {"group": "apps", "kind": "Status", "version": "v1"} in status
    patch = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]


def test_index_hashes_are_the_documents_etags_and_cached() -> None:
    o = openapi.OpenAPI(builtin_registry())
    idx = o.index()
    url = idx["paths"]["api/v1"]["serverRelativeURL"]
    enc = o.v3("api/v1")
    assert enc is not None and url == f"/openapi/v3/api/v1?hash={enc.etag}"
    assert len(enc.etag) == 128 and enc.etag == enc.etag.upper()
    assert o.v3("api/v1") is enc
    assert o.v3("apis/nope/v1") is None


def test_v2_document_holds_every_definition() -> None:
    o = openapi.OpenAPI(builtin_registry())
    doc = msgspec.json.decode(o.v2().body)
    assert doc["swagger"] == "2.0"
    assert set(V2) <= set(doc["definitions"])
    post = doc["paths"]["/api/v1/namespaces/{namespace}/pods"]["post"]
    assert post["parameters"][-1]["schema"] == {"$ref": "#/definitions/" + CORE + "Pod"}


@dataclass(frozen=True)
class CustomType(ResourceType):
    schema: Any = None


def test_custom_kinds_appear_and_documents_follow_the_registry() -> None:
    reg = Registry(builtin_registry().all())
    o = openapi.OpenAPI(reg)
    before = o.index()
    widget_schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}
    reg.add(CustomType(group="example.com", version="v1", resource="widgets", kind="Widget", namespaced=True,
                       singular="widget", schema=widget_schema))
    after = o.index()
    assert "apis/example.com/v1" in after["paths"] and "apis/example.com/v1" not in before["paths"]
    doc = _doc(o, "apis/example.com/v1")
    widget = doc["components"]["schemas"]["com.example.v1.Widget"]
    assert widget["properties"]["spec"]["properties"]["size"] == {"type": "integer"}
    assert widget["x-kubernetes-group-version-kind"] == [{"group": "example.com", "kind": "Widget", "version": "v1"}]
    v2 = msgspec.json.decode(o.v2().body)
    assert "com.example.v1.Widget" in v2["definitions"]
    reg.remove("example.com", "v1", "widgets")
    assert "apis/example.com/v1" not in o.index()["paths"]
