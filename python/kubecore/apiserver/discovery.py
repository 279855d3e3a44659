"""Discovery documents: /api, /apis, /api/v1, /apis/<group>[/<version>], /version.

These are upstream's legacy (v1) documents; a client that asks for aggregated discovery (v2) in
its Accept header gets kubecore.apiserver.discovery_v2's document at /api and /apis instead.
"""

from __future__ import annotations

import platform
from typing import Any

from kubecore import __version__
from kubecore.api.registry import Registry, ResourceType
from kubecore.apiserver.rest import SERVED_SUBRESOURCES

KUBE_MAJOR, KUBE_MINOR = "1", "36"

# subresource -> (group, version, kind) when it is not the parent's kind, and its verbs.
SUBRESOURCES: dict[str, tuple[tuple[str, str, str] | None, list[str]]] = {
    "status": (None, ["get", "patch", "update"]),
    "scale": (("autoscaling", "v1", "Scale"), ["get", "patch", "update"]),
    "binding": (("", "v1", "Binding"), ["create"]),
    "eviction": (("policy", "v1", "Eviction"), ["create"]),
    "finalize": (None, ["update"]),
    "log": (("", "v1", "Pod"), ["get"]),
    "exec": (("", "v1", "PodExecOptions"), ["create", "get"]),
    "attach": (("", "v1", "PodAttachOptions"), ["create", "get"]),
    "portforward": (("", "v1", "PodPortForwardOptions"), ["create", "get"]),
}


def version_info() -> dict[str, str]:
    return {
        "major": KUBE_MAJOR,
        "minor": KUBE_MINOR,
        "emulationMajor": KUBE_MAJOR,
        "emulationMinor": KUBE_MINOR,
        "gitVersion": f"v{KUBE_MAJOR}.{KUBE_MINOR}.0+kubecore.{__version__}",
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "",
        "goVersion": f"python{platform.python_version()}",
        "compiler": "kubecore",
        "platform": f"{platform.system().lower()}/{platform.machine()}",
    }


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _group(registry: Registry, group: str) -> dict[str, Any]:
    versions = [{"groupVersion": f"{group}/{v}", "version": v} for g, v in registry.group_versions() if g == group]
    pv = registry.preferred_version(group)
    return {"name": group, "versions": versions, "preferredVersion": {"groupVersion": f"{group}/{pv}", "version": pv}}


def api_group_list(registry: Registry) -> dict[str, Any]:
    groups: list[str] = []
    for g, _ in registry.group_versions():
        if g and g not in groups:
            groups.append(g)
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group(registry, g) for g in groups]}


def api_group(registry: Registry, group: str) -> dict[str, Any] | None:
    if not any(g == group for g, _ in registry.group_versions()):
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(registry, group)}


def _resource_entries(rt: ResourceType) -> list[dict[str, Any]]:
    main: dict[str, Any] = {
        "name": rt.resource,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": list(rt.verbs),
    }
    if rt.short_names:
        main["shortNames"] = list(rt.short_names)
    if rt.categories:
        main["categories"] = list(rt.categories)
    out = [main]
    for sub in (x for x in rt.subresources if x in SERVED_SUBRESOURCES):
        gvk, verbs = SUBRESOURCES.get(sub, (None, ["get"]))
        entry: dict[str, Any] = {"name": f"{rt.resource}/{sub}", "singularName": "", "namespaced": rt.namespaced}
        if gvk is not None:
            g, v, kind = gvk
            if g:
                entry["group"] = g
            entry["version"] = v
            entry["kind"] = kind
        else:
            entry["kind"] = rt.kind
        entry["verbs"] = verbs
        out.append(entry)
    return out


def api_resource_list(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    if (group, version) not in registry.group_versions():
        return None
    resources: list[dict[str, Any]] = []
    for rt in registry.resources(group, version):
        resources.extend(_resource_entries(rt))
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }
