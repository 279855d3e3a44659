"""Which resources the server has: /api, /apis and each group version's APIResourceList.

`Discovery.resolve(api_version, name)` finds one resource the way kubectl's RESTMapper does for a
user-typed name: `name` may be the plural ("deployments"), the singular ("deployment"), the Kind
("Deployment") or a short name ("deploy"), matched case-insensitively; a "resource.group" form
("deployments.apps") narrows the group. With `api_version` ("v1", "apps/v1") only that group
version is read; without it, the core group first and then every group's preferred version, in the
order the server lists them (kubectl's priority). Subresources ("pods/status") are never matched as
resources; they are recorded on their parent (`ResourceInfo.subresources`).

/api and /apis are asked for the aggregated form first (apidiscovery.k8s.io/v2
`APIGroupDiscoveryList`, as kubectl asks): two requests describe every resource of every group
version. A server that answers with the legacy `APIVersions`/`APIGroupList` gets the legacy walk
(one `APIResourceList` per group version, fetched when needed).

Answers are cached per group version. A miss refreshes once (a CRD may have appeared) before
`errors.NotFound`-like `ResourceNotFound` is raised.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubecore.client import errors

if TYPE_CHECKING:
    from kubecore.client.rest import RestClient


class ResourceNotFound(errors.ClientError):
    """Discovery knows no resource by that name."""


@dataclass(frozen=True)
class ResourceInfo:
    """One resource of one group version, as discovery describes it."""

    group: str
    version: str
    resource: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ()
    subresources: frozenset[str] = field(default_factory=frozenset)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def prefix(self) -> str:
        """/api/v1 or /apis/<group>/<version>."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    def path(self, *, namespace: str | None = None, name: str | None = None,
             subresource: str | None = None) -> str:
        """The URL path of the collection, one object, or one object's subresource."""
        parts = [self.prefix]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{namespace}")
        parts.append(self.resource)
        if name is not None:
            if not name:
                raise ValueError(f"an empty name for {self.resource}")
            parts.append(name)
            if subresource:
                parts.append(subresource)
        return "/".join(parts)

    def matches(self, name: str) -> bool:
        n = name.lower()
        return n in (self.resource, self.singular.lower(), self.kind.lower()) or n in self.short_names


def parse_resource_list(group_version: str, doc: dict[str, Any]) -> list[ResourceInfo]:
    """The resources of one APIResourceList (subresources folded into their parents)."""
    group, _, version = group_version.rpartition("/")
    subs: dict[str, set[str]] = {}
    entries: list[dict[str, Any]] = []
    for r in doc.get("resources") or []:
        name = str(r.get("name", ""))
        if "/" in name:
            parent, _, sub = name.partition("/")
            subs.setdefault(parent, set()).add(sub)
        else:
            entries.append(r)
    return [ResourceInfo(group=str(r.get("group") or group), version=str(r.get("version") or version),
                         resource=str(r["name"]), kind=str(r.get("kind", "")),
                         namespaced=bool(r.get("namespaced", False)),
                         singular=str(r.get("singularName") or ""),
                         short_names=tuple(str(s).lower() for s in r.get("shortNames") or ()),
                         verbs=tuple(str(v) for v in r.get("verbs") or ()),
                         subresources=frozenset(subs.get(str(r["name"]), ())))
            for r in entries]


AGGREGATED_ACCEPT = ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
                     "application/json")


def parse_aggregated(doc: dict[str, Any]) -> tuple[list[str], dict[str, list[ResourceInfo]]]:
    """(preferred group versions in order, resources per group version) of an APIGroupDiscoveryList."""
    preferred: list[str] = []
    by_gv: dict[str, list[ResourceInfo]] = {}
    for item in doc.get("items") or []:
        group = str((item.get("metadata") or {}).get("name") or "")
        for i, ver in enumerate(item.get("versions") or []):
            version = str(ver.get("version", ""))
            gv = f"{group}/{version}" if group else version
            if i == 0:
                preferred.append(gv)
            by_gv[gv] = [
                ResourceInfo(group=group, version=version, resource=str(r.get("resource", "")),
                             kind=str((r.get("responseKind") or {}).get("kind", "")),
                             namespaced=r.get("scope") == "Namespaced",
                             singular=str(r.get("singularResource") or ""),
                             short_names=tuple(str(x).lower() for x in r.get("shortNames") or ()),
                             verbs=tuple(str(v) for v in r.get("verbs") or ()),
                             subresources=frozenset(str(sr.get("subresource", ""))
                                                    for sr in r.get("subresources") or ()))
                for r in ver.get("resources") or []]
    return preferred, by_gv


class Discovery:
    """Cached discovery for one RestClient (asyncio-safe; one refresh at a time is enough)."""

    def __init__(self, rest: RestClient) -> None:
        self._rest = rest
        self._by_gv: dict[str, list[ResourceInfo]] = {}
        self._preferred: list[str] | None = None

    def invalidate(self) -> None:
        self._by_gv.clear()
        self._preferred = None

    async def group_versions(self) -> list[str]:
        """"v1" then every group's preferred version, in server order."""
        if self._preferred is None:
            gvs: list[str] = []
            core = await self._rest.get_json("/api", headers={"Accept": AGGREGATED_ACCEPT}) or {}
            groups = await self._rest.get_json("/apis", headers={"Accept": AGGREGATED_ACCEPT}) or {}
            for doc in (core, groups):
                if doc.get("kind") == "APIGroupDiscoveryList":
                    preferred, by_gv = parse_aggregated(doc)
                    gvs.extend(preferred)
                    self._by_gv.update(by_gv)
                elif doc is core:
                    gvs.extend(str(v) for v in (core.get("versions") or ["v1"])[:1])
                else:
                    gvs.extend(_preferred_legacy(groups))
            self._preferred = gvs
        return self._preferred

    async def resources(self, group_version: str) -> list[ResourceInfo]:
        """The resources of one group version ("v1", "apps/v1")."""
        cached = self._by_gv.get(group_version)
        if cached is None:
            path = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
            cached = parse_resource_list(group_version, await self._rest.get_json(path) or {})
            self._by_gv[group_version] = cached
        return cached

    async def _find(self, api_version: str | None, name: str) -> ResourceInfo | None:
        plain, _, group = name.partition(".")
        if api_version is not None:
            candidates = [api_version]
        else:
            candidates = await self.group_versions()
            if group:
                candidates = [gv for gv in candidates if gv.rpartition("/")[0] == group]
        for gv in candidates:
            try:
                infos = await self.resources(gv)
            except errors.NotFound:
                continue
            for info in infos:
                if info.matches(plain):
                    return info
        return None

    async def resolve(self, api_version: str | None, name: str) -> ResourceInfo:
        if "/" in name:
            raise ValueError(f"{name!r} is a subresource; resolve its parent and pass subresource=")
        info = await self._find(api_version, name)
        if info is None:
            self.invalidate()
            info = await self._find(api_version, name)
        if info is None:
            where = f" in {api_version}" if api_version else ""
            raise ResourceNotFound(f"the server has no resource {name!r}{where}")
        return info


def _preferred_legacy(groups: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for g in groups.get("groups") or []:
        pref = (g.get("preferredVersion") or {}).get("groupVersion")
        if not pref and g.get("versions"):
            pref = g["versions"][0].get("groupVersion")
        if pref:
            out.append(str(pref))
    return out
