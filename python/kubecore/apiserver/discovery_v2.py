"""Aggregated discovery (``apidiscovery.k8s.io/v2``): every group, version and resource in one
document, so a client learns the whole API with two requests (``/api`` and ``/apis``).

A client asks for it in ``Accept`` (client-go and kubectl send
``application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList`` first, then the legacy
types); the answer carries that media type as its Content-Type (which is how a client tells the
aggregated document from the legacy one) and an ETag, and ``If-None-Match`` with the current ETag
gets 304. Versions are listed preferred first, resources by name, subresources by name.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec
from aiohttp import web

from kubecore.api.registry import Registry, ResourceType
from kubecore.apiserver.discovery import SUBRESOURCES
from kubecore.apiserver.rest import SERVED_SUBRESOURCES

MEDIA_TYPE = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
_ACCEPTED = (("apidiscovery.k8s.io", "v2"),)


def wants_aggregated(accept: str) -> bool:
    """True when the client's first acceptable type is an APIGroupDiscoveryList we serve."""
    for clause in accept.split(","):
        params = dict(p.strip().split("=", 1) for p in clause.split(";")[1:] if "=" in p)
        media = clause.split(";")[0].strip()
        if media not in ("application/json", "*/*"):
            continue
        if params.get("as") != "APIGroupDiscoveryList":
            return False  # the client prefers a legacy document first
        if (params.get("g"), params.get("v")) in _ACCEPTED:
            return True
    return False


def _subresources(rt: ResourceType) -> list[dict[str, Any]]:
    out = []
    for sub in sorted(s for s in rt.subresources if s in SERVED_SUBRESOURCES):
        gvk, verbs = SUBRESOURCES.get(sub, (None, ["get"]))
        group, version, kind = gvk if gvk is not None else (rt.group, rt.version, rt.kind)
        out.append({"subresource": sub, "responseKind": {"group": group, "version": version, "kind": kind},
                    "verbs": list(verbs)})
    return out


def _resource(rt: ResourceType) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "resource": rt.resource,
        "responseKind": {"group": rt.group, "version": rt.version, "kind": rt.kind},
        "scope": "Namespaced" if rt.namespaced else "Cluster",
        "singularResource": rt.singular,
        "verbs": list(rt.verbs),
    }
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    if rt.categories:
        entry["categories"] = list(rt.categories)
    subs = _subresources(rt)
    if subs:
        entry["subresources"] = subs
    return entry


def _group(registry: Registry, group: str) -> dict[str, Any]:
    preferred = registry.preferred_version(group)
    versions = [v for g, v in registry.group_versions() if g == group]
    versions.sort(key=lambda v: v != preferred)  # stable: the preferred version first
    meta: dict[str, Any] = {"name": group, "creationTimestamp": None} if group else {"creationTimestamp": None}
    return {
        "metadata": meta,
        "versions": [
            {"version": v,
             "resources": [_resource(rt) for rt in sorted(registry.resources(group, v), key=lambda r: r.resource)
                           if rt.verbs],
             "freshness": "Current"}
            for v in versions
        ],
    }


def document(registry: Registry, *, core: bool) -> dict[str, Any]:
    """The APIGroupDiscoveryList of /api (core) or /apis (every named group)."""
    groups: list[str] = []
    for g, _ in registry.group_versions():
        if (g == "") == core and g not in groups:
            groups.append(g)
    return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {},
            "items": [_group(registry, g) for g in groups]}


def respond(request: web.Request, registry: Registry, *, core: bool) -> web.Response:
    body = msgspec.json.encode(document(registry, core=core))
    etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
    headers = {"ETag": etag, "Vary": "Accept"}
    if request.headers.get("If-None-Match") == etag:
        return web.Response(status=304, headers=headers)
    return web.Response(body=body, headers={**headers, "Content-Type": MEDIA_TYPE})
