"""The verbs of one resource (client-go's dynamic client, `dynamic.ResourceInterface`).

Get it from `await rest.resource("apps/v1", "deployments")`. Every verb returns the decoded answer
(a dict) or raises the typed error from `errors`. Namespaces: list/watch/delete_collection with
`namespace=None` span all namespaces; single-object verbs take `namespace=`, else the object's
`metadata.namespace`, else the kubeconfig context's namespace. Cluster-scoped resources ignore it.

Patch types (`patch_type=`): "json" (RFC 6902), "merge" (RFC 7386), "strategic" (Kubernetes'
strategic merge) and "apply" (server-side apply; needs `field_manager`, `force=True` takes fields
from other managers). `apply(obj, field_manager=...)` is the apply patch of a whole object.

`list_page()` returns one page with its items as raw JSON bytes (the reflector stores bytes; no
dict is built for them unless asked); `list_all()` follows `continue` tokens like client-go's pager.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from kubecore.client.discovery import ResourceInfo
from kubecore.client.watch import WatchStream

if TYPE_CHECKING:
    from kubecore.client.rest import Params, RestClient

PATCH_CONTENT_TYPES = {
    "json": "application/json-patch+json",
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}
DEFAULT_PAGE_SIZE = 500
_encode = msgspec.json.encode


class _ListMeta(msgspec.Struct):
    resourceVersion: str = ""
    # `continue` is a Python keyword: renamed on the wire.
    continue_: str = msgspec.field(default="", name="continue")
    remainingItemCount: int | None = None


class _ListEnvelope(msgspec.Struct):
    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)
    items: list[msgspec.Raw] | None = None


_list_decoder = msgspec.json.Decoder(_ListEnvelope)


@dataclass
class ListPage:
    """One LIST answer: the list's resourceVersion, the continue token, items as JSON bytes."""

    resource_version: str
    continue_token: str
    items: list[bytes]
    remaining: int | None = None


@dataclass(frozen=True)
class Selectors:
    label_selector: str | None = None
    field_selector: str | None = None


def _name_of(obj: dict[str, Any]) -> str:
    name = (obj.get("metadata") or {}).get("name")
    if not name:
        raise ValueError("the object has no metadata.name")
    return str(name)


class ResourceClient:
    """One resource of one group version on one server."""

    def __init__(self, rest: RestClient, info: ResourceInfo) -> None:
        self.rest = rest
        self.info = info

    def __repr__(self) -> str:
        return f"ResourceClient({self.info.api_version}, {self.info.resource})"

    def _ns(self, namespace: str | None, obj: dict[str, Any] | None = None) -> str | None:
        if not self.info.namespaced:
            return None
        if namespace:
            return namespace
        if obj is not None and (obj.get("metadata") or {}).get("namespace"):
            return str(obj["metadata"]["namespace"])
        return self.rest.config.namespace

    def _path(self, *, namespace: str | None, name: str | None = None, subresource: str | None = None) -> str:
        return self.info.path(namespace=namespace, name=name, subresource=subresource)

    # -- reads ---------------------------------------------------------------------------------------
    async def get(self, name: str, *, namespace: str | None = None, subresource: str | None = None,
                  resource_version: str | None = None) -> dict[str, Any]:
        path = self._path(namespace=self._ns(namespace), name=name, subresource=subresource)
        out: dict[str, Any] = await self.rest.get_json(path, params={"resourceVersion": resource_version})
        return out

    def _list_params(self, *, selectors: Selectors, limit: int | None, continue_token: str | None,
                     resource_version: str | None, resource_version_match: str | None) -> Params:
        return {"labelSelector": selectors.label_selector, "fieldSelector": selectors.field_selector,
                "limit": limit or None, "continue": continue_token or None,
                "resourceVersion": resource_version, "resourceVersionMatch": resource_version_match}

    async def list(self, *, namespace: str | None = None, label_selector: str | None = None,
                   field_selector: str | None = None, limit: int | None = None,
                   continue_token: str | None = None, resource_version: str | None = None,
                   resource_version_match: str | None = None) -> dict[str, Any]:
        """One LIST answer, decoded (a `...List` object)."""
        params = self._list_params(selectors=Selectors(label_selector, field_selector), limit=limit,
                                   continue_token=continue_token, resource_version=resource_version,
                                   resource_version_match=resource_version_match)
        out: dict[str, Any] = await self.rest.get_json(self._path(namespace=namespace), params=params)
        return out

    async def list_page(self, *, namespace: str | None = None, selectors: Selectors = Selectors(),
                        limit: int | None = DEFAULT_PAGE_SIZE, continue_token: str | None = None,
                        resource_version: str | None = None,
                        resource_version_match: str | None = None) -> ListPage:
        """One LIST page with undecoded items."""
        params = self._list_params(selectors=selectors, limit=limit, continue_token=continue_token,
                                   resource_version=resource_version,
                                   resource_version_match=resource_version_match)
        resp = await self.rest.request("GET", self._path(namespace=namespace), params=params)
        env = _list_decoder.decode(resp.body)
        return ListPage(resource_version=env.metadata.resourceVersion, continue_token=env.metadata.continue_,
                        items=[bytes(r) for r in env.items or ()], remaining=env.metadata.remainingItemCount)

    async def pages(self, *, namespace: str | None = None, selectors: Selectors = Selectors(),
                    page_size: int = DEFAULT_PAGE_SIZE, resource_version: str | None = None,
                    resource_version_match: str | None = None) -> AsyncIterator[ListPage]:
        """client-go's ListPager: pages of `page_size` until the continue token runs out. The
        resourceVersion arguments apply to the first page only (later pages carry the token)."""
        token: str | None = None
        while True:
            page = await self.list_page(
                namespace=namespace, selectors=selectors, limit=page_size, continue_token=token,
                resource_version=None if token else resource_version,
                resource_version_match=None if token else resource_version_match)
            yield page
            if not page.continue_token:
                return
            token = page.continue_token

    async def list_all(self, *, namespace: str | None = None, label_selector: str | None = None,
                       field_selector: str | None = None,
                       page_size: int = DEFAULT_PAGE_SIZE) -> tuple[builtins.list[dict[str, Any]], str]:
        """Every object (decoded) and the resourceVersion of the list, paging as it goes."""
        items: list[dict[str, Any]] = []
        rv = ""
        async for page in self.pages(namespace=namespace, selectors=Selectors(label_selector, field_selector),
                                     page_size=page_size):
            items.extend(msgspec.json.decode(raw) for raw in page.items)
            rv = page.resource_version
        return items, rv

    # -- writes --------------------------------------------------------------------------------------
    @staticmethod
    def _write_params(*, field_manager: str | None, dry_run: bool,
                      field_validation: str | None = None) -> dict[str, str | None]:
        return {"fieldManager": field_manager, "dryRun": "All" if dry_run else None,
                "fieldValidation": field_validation}

    async def create(self, obj: dict[str, Any], *, namespace: str | None = None,
                     subresource: str | None = None, field_manager: str | None = None,
                     dry_run: bool = False, field_validation: str | None = None) -> dict[str, Any]:
        ns = self._ns(namespace, obj)
        path = (self._path(namespace=ns, name=_name_of(obj), subresource=subresource) if subresource
                else self._path(namespace=ns))
        params = self._write_params(field_manager=field_manager, dry_run=dry_run, field_validation=field_validation)
        out: dict[str, Any] = await self.rest.send_json("POST", path, obj, params=params)
        return out

    async def update(self, obj: dict[str, Any], *, namespace: str | None = None,
                     subresource: str | None = None, field_manager: str | None = None,
                     dry_run: bool = False, field_validation: str | None = None) -> dict[str, Any]:
        """PUT the whole object (optimistic concurrency through its metadata.resourceVersion)."""
        path = self._path(namespace=self._ns(namespace, obj), name=_name_of(obj), subresource=subresource)
        params = self._write_params(field_manager=field_manager, dry_run=dry_run, field_validation=field_validation)
        out: dict[str, Any] = await self.rest.send_json("PUT", path, obj, params=params)
        return out

    async def update_status(self, obj: dict[str, Any], *, namespace: str | None = None,
                            field_manager: str | None = None, dry_run: bool = False) -> dict[str, Any]:
        return await self.update(obj, namespace=namespace, subresource="status",
                                 field_manager=field_manager, dry_run=dry_run)

    async def patch(self, name: str, patch: Any, *, namespace: str | None = None, patch_type: str = "merge",
                    subresource: str | None = None, field_manager: str | None = None,
                    force: bool | None = None, dry_run: bool = False) -> dict[str, Any]:
        try:
            content_type = PATCH_CONTENT_TYPES[patch_type]
        except KeyError:
            raise ValueError(f"patch_type must be one of {sorted(PATCH_CONTENT_TYPES)}, not {patch_type!r}") from None
        if patch_type == "apply" and not field_manager:
            raise ValueError("an apply patch needs field_manager")
        if force is not None and patch_type != "apply":
            raise ValueError("force is only meaningful for apply patches")
        params: dict[str, str | bool | None] = {**self._write_params(field_manager=field_manager, dry_run=dry_run),
                                                "force": force}
        path = self._path(namespace=self._ns(namespace, patch if isinstance(patch, dict) else None),
                          name=name, subresource=subresource)
        out: dict[str, Any] = await self.rest.send_json("PATCH", path, patch, params=params,
                                                        content_type=content_type)
        return out

    async def apply(self, obj: dict[str, Any], *, field_manager: str, force: bool = False,
                    namespace: str | None = None, subresource: str | None = None,
                    dry_run: bool = False) -> dict[str, Any]:
        """Server-side apply of `obj` (its apiVersion/kind/metadata.name must be set)."""
        return await self.patch(_name_of(obj), obj, namespace=self._ns(namespace, obj), patch_type="apply",
                                subresource=subresource, field_manager=field_manager, force=force,
                                dry_run=dry_run)

    @staticmethod
    def _delete_body(*, propagation_policy: str | None, grace_period_seconds: int | None,
                     preconditions: dict[str, str] | None, dry_run: bool) -> bytes | None:
        opts: dict[str, Any] = {}
        if propagation_policy:
            opts["propagationPolicy"] = propagation_policy
        if grace_period_seconds is not None:
            opts["gracePeriodSeconds"] = grace_period_seconds
        if preconditions:
            opts["preconditions"] = preconditions
        if dry_run:
            opts["dryRun"] = ["All"]
        if not opts:
            return None
        return _encode({"kind": "DeleteOptions", "apiVersion": "v1", **opts})

    async def delete(self, name: str, *, namespace: str | None = None, propagation_policy: str | None = None,
                     grace_period_seconds: int | None = None, preconditions: dict[str, str] | None = None,
                     dry_run: bool = False) -> dict[str, Any]:
        """DELETE one object; returns what the server answers (the object, or a Status)."""
        body = self._delete_body(propagation_policy=propagation_policy, grace_period_seconds=grace_period_seconds,
                                 preconditions=preconditions, dry_run=dry_run)
        resp = await self.rest.request("DELETE", self._path(namespace=self._ns(namespace), name=name), body=body,
                                       content_type="application/json" if body else None)
        out: dict[str, Any] = resp.json() or {}
        return out

    async def delete_collection(self, *, namespace: str | None = None, label_selector: str | None = None,
                                field_selector: str | None = None, propagation_policy: str | None = None,
                                grace_period_seconds: int | None = None, dry_run: bool = False) -> dict[str, Any]:
        body = self._delete_body(propagation_policy=propagation_policy, grace_period_seconds=grace_period_seconds,
                                 preconditions=None, dry_run=dry_run)
        params = {"labelSelector": label_selector, "fieldSelector": field_selector}
        resp = await self.rest.request("DELETE", self._path(namespace=namespace), params=params, body=body,
                                       content_type="application/json" if body else None)
        out: dict[str, Any] = resp.json() or {}
        return out

    # -- watch ---------------------------------------------------------------------------------------
    async def watch(self, *, namespace: str | None = None, selectors: Selectors = Selectors(),
                    resource_version: str | None = None, allow_bookmarks: bool = True,
                    send_initial_events: bool | None = None, resource_version_match: str | None = None,
                    timeout_seconds: int | None = None) -> WatchStream:
        """Open a watch; use it as `async with await rc.watch(...) as stream: async for ev in stream`."""
        params = watch_params(selectors=selectors, resource_version=resource_version, allow_bookmarks=allow_bookmarks,
                              send_initial_events=send_initial_events,
                              resource_version_match=resource_version_match, timeout_seconds=timeout_seconds)
        resp = await self.rest.stream("GET", self._path(namespace=namespace), params=params)
        return WatchStream(resp)


def watch_params(*, selectors: Selectors, resource_version: str | None, allow_bookmarks: bool,
                 send_initial_events: bool | None, resource_version_match: str | None,
                 timeout_seconds: int | None) -> dict[str, str | int | bool | None]:
    """The query of a WATCH request (None values are left out when sent)."""
    return {"watch": True, "labelSelector": selectors.label_selector, "fieldSelector": selectors.field_selector,
            "resourceVersion": resource_version, "allowWatchBookmarks": True if allow_bookmarks else None,
            "sendInitialEvents": send_initial_events, "resourceVersionMatch": resource_version_match,
            "timeoutSeconds": timeout_seconds}
