"""The garbage collector's writes and reads against the API server (upstream's
garbagecollector/operations.go and patch.go), by object `Identity` rather than by resource.

`ResourceMapper` turns an ownerReference's (apiVersion, kind) into a resource client through
discovery (a RESTMapper): a miss re-reads discovery once (a CRD may have appeared), at most once
per `refresh_interval`, and then raises `MappingError` (the caller retries later).

`ApiOperations` is what the collector's decision logic needs (`Operations`), over a RestClient:
- `get` returns the object or None when it is not there (404);
- `delete` deletes with a propagation policy and a uid precondition (someone else's object with
  the same name is never touched); "already gone" (404, or 409 from the precondition) is success;
- `remove_owner_references` / `unblock_owner_references` / `remove_finalizer` read the object,
  compute the new metadata and write it back as a JSON merge patch carrying the resourceVersion it
  read, retrying on 409 Conflict (upstream's JSON-merge-patch path, which works for every kind,
  custom resources included). A vanished object (404) means there is nothing left to do.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from kubecore.client import errors
from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.client.discovery import Discovery, ResourceInfo
from kubecore.client.resource import ResourceClient
from kubecore.client.rest import RestClient
from kubecore.controllers.graph import Identity

log = logging.getLogger(__name__)

Obj = dict[str, Any]
CONFLICT_RETRIES = 5
DISCOVERY_REFRESH_INTERVAL = 5.0


class MappingError(Exception):
    """No resource serves this apiVersion/kind (yet)."""


class NamespacedOwnerOfClusterScopedObject(Exception):
    """A cluster-scoped object names a namespaced owner: invalid, retrying will not help."""


class Operations(Protocol):
    """The API calls the collector's decisions need (faked in unit tests)."""

    async def namespaced(self, api_version: str, kind: str) -> bool: ...

    async def get(self, ident: Identity) -> Obj | None: ...

    async def delete(self, ident: Identity, *, policy: str) -> None: ...

    async def remove_owner_references(self, ident: Identity, owner_uids: set[str]) -> None: ...

    async def unblock_owner_references(self, ident: Identity) -> None: ...

    async def remove_finalizer(self, ident: Identity, finalizer: str) -> None: ...


class ResourceMapper:
    """(apiVersion, kind) -> ResourceClient, through discovery."""

    def __init__(self, rest: RestClient, *, clock: Clock = REAL_CLOCK,
                 refresh_interval: float = DISCOVERY_REFRESH_INTERVAL) -> None:
        self._rest = rest
        self._discovery = Discovery(rest)
        self._clock = clock
        self._refresh_interval = refresh_interval
        self._last_refresh = float("-inf")
        self._clients: dict[tuple[str, str], ResourceClient] = {}

    async def _lookup(self, api_version: str, kind: str) -> ResourceInfo | None:
        try:
            infos = await self._discovery.resources(api_version)
        except errors.NotFound:
            return None
        return next((i for i in infos if i.kind == kind), None)

    async def client_for(self, api_version: str, kind: str) -> ResourceClient:
        key = (api_version, kind)
        rc = self._clients.get(key)
        if rc is not None:
            return rc
        info = await self._lookup(api_version, kind)
        now = self._clock.now()
        if info is None and now - self._last_refresh >= self._refresh_interval:
            self._last_refresh = now
            self._discovery.invalidate()
            info = await self._lookup(api_version, kind)
        if info is None:
            raise MappingError(f"no resource serves kind {kind!r} in {api_version!r}")
        rc = self._clients[key] = ResourceClient(self._rest, info)
        return rc

    def forget(self) -> None:
        """Drop cached mappings (after discovery changed)."""
        self._clients.clear()
        self._discovery.invalidate()


def _ns(rc: ResourceClient, ident: Identity) -> str | None:
    return ident.namespace if rc.info.namespaced and ident.namespace else None


class ApiOperations:
    """`Operations` over the REST client."""

    def __init__(self, rest: RestClient, mapper: ResourceMapper) -> None:
        self._rest = rest
        self._mapper = mapper

    async def namespaced(self, api_version: str, kind: str) -> bool:
        return (await self._mapper.client_for(api_version, kind)).info.namespaced

    async def _client(self, ident: Identity) -> ResourceClient:
        rc = await self._mapper.client_for(ident.api_version, ident.kind)
        if rc.info.namespaced and not ident.namespace:
            raise NamespacedOwnerOfClusterScopedObject(f"{ident} is namespaced but has no namespace")
        return rc

    async def get(self, ident: Identity) -> Obj | None:
        rc = await self._client(ident)
        try:
            return await rc.get(ident.name, namespace=_ns(rc, ident))
        except errors.NotFound:
            return None

    async def delete(self, ident: Identity, *, policy: str) -> None:
        rc = await self._client(ident)
        try:
            await rc.delete(ident.name, namespace=_ns(rc, ident), propagation_policy=policy,
                            preconditions={"uid": ident.uid})
        except (errors.NotFound, errors.Conflict) as e:
            log.debug("delete %s: already gone (%s)", ident, e)

    async def _rewrite_metadata(self, ident: Identity, change: Any) -> None:
        """GET, let `change(metadata) -> patch or None` decide, merge-patch with the read rv."""
        rc = await self._client(ident)
        ns = _ns(rc, ident)
        for _ in range(CONFLICT_RETRIES):
            try:
                obj = await rc.get(ident.name, namespace=ns)
            except errors.NotFound:
                return
            meta = obj.get("metadata") or {}
            if meta.get("uid") != ident.uid:
                return  # a different object by that name: ours is gone
            patch = change(meta)
            if patch is None:
                return
            patch["resourceVersion"] = meta.get("resourceVersion")
            try:
                await rc.patch(ident.name, {"metadata": patch}, namespace=ns, patch_type="merge")
                return
            except errors.NotFound:
                return
            except errors.Conflict:
                continue
        raise errors.TransportError(f"{ident}: metadata kept changing; will retry")

    async def remove_owner_references(self, ident: Identity, owner_uids: set[str]) -> None:
        def change(meta: Obj) -> Obj | None:
            refs = meta.get("ownerReferences") or []
            kept = [r for r in refs if r.get("uid") not in owner_uids]
            if len(kept) == len(refs):
                return None
            return {"ownerReferences": kept or None}

        await self._rewrite_metadata(ident, change)

    async def unblock_owner_references(self, ident: Identity) -> None:
        def change(meta: Obj) -> Obj | None:
            refs = meta.get("ownerReferences") or []
            if not any(r.get("blockOwnerDeletion") for r in refs):
                return None
            return {"ownerReferences": [{**r, "blockOwnerDeletion": False} if r.get("blockOwnerDeletion") else r
                                        for r in refs]}

        await self._rewrite_metadata(ident, change)

    async def remove_finalizer(self, ident: Identity, finalizer: str) -> None:
        def change(meta: Obj) -> Obj | None:
            finalizers = meta.get("finalizers") or []
            if finalizer not in finalizers:
                return None
            kept = [f for f in finalizers if f != finalizer]
            return {"finalizers": kept or None}

        await self._rewrite_metadata(ident, change)
