"""OpenAPI v3 discovery: `/openapi/v3` (an index of group-versions) and one document per
group-version listing every resource path and its operations.

What clients read today: kubectl's `--validate=strict` looks for the PATCH operation of a kind
(by `x-kubernetes-group-version-kind`) with a `fieldValidation` query parameter and, finding it,
leaves field validation to the server. Schemas (`components.schemas`) are not published yet, so
the PATCH request body does not advertise strategic-merge patches and kubectl computes apply
patches from its own compiled-in types.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

from kubecore.api.registry import Registry, ResourceType

QUERY_PARAMS = ("dryRun", "fieldManager", "fieldValidation", "force")
PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml")


def gv_path(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def _gvk(rt: ResourceType) -> dict[str, str]:
    return {"group": rt.group, "version": rt.version, "kind": rt.kind}


def _params(names: tuple[str, ...]) -> list[dict[str, Any]]:
    return [{"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": True}} for n in names]


def _item_ops(rt: ResourceType, action_kind: str = "") -> dict[str, Any]:
    gvk = _gvk(rt)
    ops: dict[str, Any] = {
        "get": {"x-kubernetes-action": "get", "x-kubernetes-group-version-kind": gvk, "responses": {"200": {"description": "OK"}}},
        "put": {"x-kubernetes-action": "put", "x-kubernetes-group-version-kind": gvk, "parameters": _params(QUERY_PARAMS[:3]),
                "responses": {"200": {"description": "OK"}}},
        "patch": {
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": gvk,
            "parameters": _params(QUERY_PARAMS),
            "requestBody": {"content": {t: {"schema": {"type": "object"}} for t in PATCH_TYPES}, "required": True},
            "responses": {"200": {"description": "OK"}},
        },
        "delete": {"x-kubernetes-action": "delete", "x-kubernetes-group-version-kind": gvk, "responses": {"200": {"description": "OK"}}},
    }
    return ops


def _collection_ops(rt: ResourceType) -> dict[str, Any]:
    gvk = _gvk(rt)
    return {
        "get": {"x-kubernetes-action": "list", "x-kubernetes-group-version-kind": gvk, "responses": {"200": {"description": "OK"}}},
        "post": {"x-kubernetes-action": "post", "x-kubernetes-group-version-kind": gvk, "parameters": _params(QUERY_PARAMS[:3]),
                 "responses": {"201": {"description": "Created"}}},
    }


def document(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    if (group, version) not in registry.group_versions():
        return None
    base = "/" + gv_path(group, version)
    paths: dict[str, Any] = {}
    for rt in registry.resources(group, version):
        if rt.namespaced:
            coll = f"{base}/namespaces/{{namespace}}/{rt.resource}"
        else:
            coll = f"{base}/{rt.resource}"
        paths[coll] = _collection_ops(rt)
        paths[f"{coll}/{{name}}"] = _item_ops(rt)
        if "status" in rt.subresources:
            paths[f"{coll}/{{name}}/status"] = _item_ops(rt)
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "kubecore"}, "paths": paths, "components": {"schemas": {}}}


def index(registry: Registry) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for group, version in registry.group_versions():
        doc = document(registry, group, version)
        digest = hashlib.sha512(msgspec.json.encode(doc)).hexdigest()[:32].upper()
        p = gv_path(group, version)
        out[p] = {"serverRelativeURL": f"/openapi/v3/{p}?hash={digest}"}
    return {"paths": out}
