"""Metadata-only LIST and WATCH (client-go's `k8s.io/client-go/metadata` client and
`metadatainformer`): a cache of 100,000 Secrets that keeps their names, labels, owners and
finalizers, not their data.

    informer = await factory.metadata_informer_for("v1", "secrets")   # see factory.py
    informer.add_event_handler(...)

Objects are `PartialObjectMetadata`: `{"apiVersion": "meta.k8s.io/v1", "kind":
"PartialObjectMetadata", "metadata": {...}}`; the resource's own apiVersion/kind are the
caller's to know (from discovery), as in client-go.

On the wire, LIST asks for `Accept: application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,
application/json` and WATCH for `...;as=PartialObjectMetadata;...`: the server converts, and the
trailing plain `application/json` lets a server that cannot convert answer with whole objects.
Whatever arrives, every object is cut down on arrival, before any cache sees it (`partial_bytes`):
only its metadata is kept, and `metadata.managedFields` is dropped (kube-controller-manager trims
managedFields from all its informers the same way; `trim_managed_fields=False` keeps them). A
server that ignores the Accept header therefore costs bandwidth, never cache memory.

`MetadataResourceClient` is a `ResourceClient` whose `list_page`/`pages`/`watch` speak this
protocol, so the ordinary `Reflector`/`SharedIndexInformer` run on it unchanged (paged LISTs,
streaming lists, bookmarks, 410 relists). Its other verbs are the ordinary ones (whole objects).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import msgspec

from kubecore.client.discovery import ResourceInfo
from kubecore.client.resource import DEFAULT_PAGE_SIZE, ListPage, ResourceClient, Selectors, watch_params
from kubecore.client.rest import RestClient
from kubecore.client.watch import ADDED, DELETED, MODIFIED, WatchEvent, WatchStream

PARTIAL_API_VERSION = "meta.k8s.io/v1"
PARTIAL_KIND = "PartialObjectMetadata"
LIST_ACCEPT = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
WATCH_ACCEPT = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"

_PREFIX = b'{"apiVersion":"meta.k8s.io/v1","kind":"PartialObjectMetadata","metadata":'
_MANAGED_FIELDS = b'"managedFields"'
_OBJECT_EVENTS = frozenset({ADDED, MODIFIED, DELETED})


class _Object(msgspec.Struct):
    metadata: msgspec.Raw = msgspec.Raw(b"{}")


class _ListMeta(msgspec.Struct):
    resourceVersion: str = ""
    continue_: str = msgspec.field(default="", name="continue")
    remainingItemCount: int | None = None


class _List(msgspec.Struct):
    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)
    items: list[_Object] | None = None


_object_decoder = msgspec.json.Decoder(_Object)
_list_decoder = msgspec.json.Decoder(_List)
_decode_dict = msgspec.json.Decoder(dict[str, Any])
_encode = msgspec.json.encode


def _partial_of(meta: bytes, *, trim_managed_fields: bool) -> bytes:
    if trim_managed_fields and _MANAGED_FIELDS in meta:
        m = _decode_dict.decode(meta)
        if m.pop("managedFields", None) is not None:
            meta = _encode(m)
    return _PREFIX + meta + b"}"


def partial_bytes(raw: bytes, *, trim_managed_fields: bool = True) -> bytes:
    """The PartialObjectMetadata JSON of one object's JSON (whole or already partial)."""
    return _partial_of(bytes(_object_decoder.decode(raw).metadata), trim_managed_fields=trim_managed_fields)


class MetadataWatchStream(WatchStream):
    """A watch whose object events carry PartialObjectMetadata (BOOKMARK and ERROR pass as sent)."""

    def __init__(self, response: aiohttp.ClientResponse, *, trim_managed_fields: bool = True) -> None:
        super().__init__(response)
        self.trim_managed_fields = trim_managed_fields

    async def _events(self) -> AsyncIterator[WatchEvent]:
        async for ev in super()._events():
            if ev.type in _OBJECT_EVENTS:
                ev = WatchEvent(ev.type, partial_bytes(ev.raw, trim_managed_fields=self.trim_managed_fields))
            yield ev


class MetadataResourceClient(ResourceClient):
    """A resource client whose LIST and WATCH return metadata only (see the module docstring)."""

    def __init__(self, rest: RestClient, info: ResourceInfo, *, trim_managed_fields: bool = True) -> None:
        super().__init__(rest, info)
        self.trim_managed_fields = trim_managed_fields

    def __repr__(self) -> str:
        return f"MetadataResourceClient({self.info.api_version}, {self.info.resource})"

    async def list_page(self, *, namespace: str | None = None, selectors: Selectors = Selectors(),
                        limit: int | None = DEFAULT_PAGE_SIZE, continue_token: str | None = None,
                        resource_version: str | None = None,
                        resource_version_match: str | None = None) -> ListPage:
        """One LIST page; items are PartialObjectMetadata JSON bytes."""
        params = self._list_params(selectors=selectors, limit=limit, continue_token=continue_token,
                                   resource_version=resource_version,
                                   resource_version_match=resource_version_match)
        resp = await self.rest.request("GET", self._path(namespace=namespace), params=params,
                                       headers={"Accept": LIST_ACCEPT})
        env = _list_decoder.decode(resp.body)
        trim = self.trim_managed_fields
        return ListPage(resource_version=env.metadata.resourceVersion, continue_token=env.metadata.continue_,
                        items=[_partial_of(bytes(o.metadata), trim_managed_fields=trim) for o in env.items or ()],
                        remaining=env.metadata.remainingItemCount)

    async def watch(self, *, namespace: str | None = None, selectors: Selectors = Selectors(),
                    resource_version: str | None = None, allow_bookmarks: bool = True,
                    send_initial_events: bool | None = None, resource_version_match: str | None = None,
                    timeout_seconds: int | None = None) -> WatchStream:
        """Open a watch whose objects are PartialObjectMetadata."""
        params = watch_params(selectors=selectors, resource_version=resource_version, allow_bookmarks=allow_bookmarks,
                              send_initial_events=send_initial_events,
                              resource_version_match=resource_version_match, timeout_seconds=timeout_seconds)
        resp = await self.rest.stream("GET", self._path(namespace=namespace), params=params,
                                      headers={"Accept": WATCH_ACCEPT})
        return MetadataWatchStream(resp, trim_managed_fields=self.trim_managed_fields)


async def metadata_client(rest: RestClient, api_version: str | None, resource: str, *,
                          trim_managed_fields: bool = True) -> MetadataResourceClient:
    """The metadata client of `resource` (any name discovery knows)."""
    info = (await rest.resource(api_version, resource)).info
    return MetadataResourceClient(rest, info, trim_managed_fields=trim_managed_fields)
