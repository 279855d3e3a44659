"""SharedInformerFactory: one informer (one LIST+WATCH, one cache) per resource per process.

    factory = SharedInformerFactory(rest, resync_period=0)
    pods = await factory.informer_for("v1", "pods")           # same object for every caller
    pods.add_event_handler(EventHandlerFuncs(on_add_func=...))
    factory.start()
    await factory.wait_for_cache_sync()

Every controller of a process asks the factory instead of building informers, so ten controllers
watching pods cost one watch and one cache (client-go's sharedInformerFactory). Resources are
resolved through discovery first, so "pods", "pod", "Pod" and "po" all give the same informer;
the identity is (group, version, resource, namespace, label selector, field selector).
Informers created after `start()` are started by the next `start()` call, as upstream.
Extra indexers asked for by a later caller are added to the shared informer's indexer.

Metadata-only informers (client-go's metadatainformer factory, here in the same factory):
`metadata_informer_for(...)` gives the shared informer of a resource whose objects are
PartialObjectMetadata (see `metadata.py`): for a consumer that reads only metadata (the garbage
collector) of a resource nobody caches in full. It is a separate watch and cache from
`informer_for`'s; `existing_informer(info)` tells whether a full one already exists (its
objects carry the metadata too, so sharing it costs nothing). `start`, `wait_for_cache_sync`
and `shutdown` cover both kinds; `remove_metadata_informer` stops and forgets one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.client.discovery import ResourceInfo
from kubecore.client.indexer import IndexFunc, TransformFunc
from kubecore.client.informer import SharedIndexInformer
from kubecore.client.metadata import MetadataResourceClient
from kubecore.client.resource import ResourceClient, Selectors
from kubecore.client.rest import RestClient

InformerKey = tuple[str, str, str, str | None, Selectors]


class SharedInformerFactory:
    """Informers shared by everyone holding this factory."""

    def __init__(self, rest: RestClient, *, resync_period: float = 0.0, namespace: str | None = None,
                 selectors: Selectors = Selectors(), use_watch_list: bool = True,
                 clock: Clock = REAL_CLOCK, transform: TransformFunc | None = None) -> None:
        self.rest = rest
        self.transform = transform
        """Installed on every full-object informer the factory makes (client-go's WithTransform)."""
        self.resync_period = resync_period
        self.namespace = namespace
        self.selectors = selectors
        self.use_watch_list = use_watch_list
        self._clock = clock
        self._informers: dict[InformerKey, SharedIndexInformer] = {}
        self._metadata_informers: dict[InformerKey, SharedIndexInformer] = {}

    async def informer_for(self, api_version: str | None, resource: str, *,
                           indexers: Mapping[str, IndexFunc] | None = None,
                           resync_period: float | None = None) -> SharedIndexInformer:
        """The shared informer of `resource` (any name discovery knows), created on first use."""
        rc = await self.rest.resource(api_version, resource)
        return self._shared(self._informers, rc, indexers=indexers, resync_period=resync_period,
                            name=f"{rc.info.resource}.{rc.info.group or 'core'}")

    def _shared(self, informers: dict[InformerKey, SharedIndexInformer],
                rc: ResourceClient | MetadataResourceClient, *, indexers: Mapping[str, IndexFunc] | None,
                resync_period: float | None, name: str) -> SharedIndexInformer:
        """The informer of `rc`'s resource in `informers`, made on first use; later callers' extra
        indexers are added to it. No await inside: creation is atomic."""
        key = self._key(rc.info)
        informer = informers.get(key)
        if informer is None:
            informer = SharedIndexInformer(
                rc, namespace=key[3], selectors=self.selectors,
                resync_period=self.resync_period if resync_period is None else resync_period,
                indexers=indexers, use_watch_list=self.use_watch_list, clock=self._clock, name=name)
            if self.transform is not None and informers is self._informers:
                informer.set_transform(self.transform)
            informers[key] = informer
        elif indexers:
            known = informer.indexer.get_indexers()
            extra = {k: v for k, v in indexers.items() if k not in known}
            if extra:
                informer.indexer.add_indexers(extra)
        return informer

    def _key(self, info: ResourceInfo) -> InformerKey:
        return (info.group, info.version, info.resource, self.namespace if info.namespaced else None, self.selectors)

    def existing_informer(self, info: ResourceInfo) -> SharedIndexInformer | None:
        """The full informer of `info`'s resource if someone asked for it already (no discovery)."""
        return self._informers.get(self._key(info))

    async def metadata_informer_for(self, api_version: str | None, resource: str, *,
                                    indexers: Mapping[str, IndexFunc] | None = None,
                                    resync_period: float | None = None) -> SharedIndexInformer:
        """The shared metadata-only informer of `resource`, created on first use (module docstring)."""
        info = (await self.rest.resource(api_version, resource)).info
        return self._shared(self._metadata_informers, MetadataResourceClient(self.rest, info), indexers=indexers,
                            resync_period=resync_period, name=f"{info.resource}.{info.group or 'core'} (metadata)")

    async def remove_metadata_informer(self, info: ResourceInfo) -> None:
        """Stop and forget the metadata-only informer of `info`'s resource (if any)."""
        informer = self._metadata_informers.pop(self._key(info), None)
        if informer is not None:
            await informer.stop()

    @property
    def informers(self) -> list[SharedIndexInformer]:
        return list(self._informers.values())

    @property
    def metadata_informers(self) -> list[SharedIndexInformer]:
        return list(self._metadata_informers.values())

    def _all(self) -> list[SharedIndexInformer]:
        return [*self._informers.values(), *self._metadata_informers.values()]

    def start(self) -> None:
        """Start every informer not started yet (needs a running event loop)."""
        for informer in self._all():
            informer.start()

    async def wait_for_cache_sync(self, timeout: float | None = None) -> dict[str, bool]:
        """Wait for every informer's first list; name -> synced."""
        informers = self._all()
        results = await asyncio.gather(*(i.wait_for_sync(timeout) for i in informers))
        return {i.name: ok for i, ok in zip(informers, results)}

    async def shutdown(self) -> None:
        """Stop every informer and wait for their tasks to end."""
        await asyncio.gather(*(i.stop() for i in self._all()))
