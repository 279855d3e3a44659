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
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.client.indexer import IndexFunc
from kubecore.client.informer import SharedIndexInformer
from kubecore.client.resource import Selectors
from kubecore.client.rest import RestClient

InformerKey = tuple[str, str, str, str | None, Selectors]


class SharedInformerFactory:
    """Informers shared by everyone holding this factory."""

    def __init__(self, rest: RestClient, *, resync_period: float = 0.0, namespace: str | None = None,
                 selectors: Selectors = Selectors(), use_watch_list: bool = True,
                 clock: Clock = REAL_CLOCK) -> None:
        self.rest = rest
        self.resync_period = resync_period
        self.namespace = namespace
        self.selectors = selectors
        self.use_watch_list = use_watch_list
        self._clock = clock
        self._informers: dict[InformerKey, SharedIndexInformer] = {}

    async def informer_for(self, api_version: str | None, resource: str, *,
                           indexers: Mapping[str, IndexFunc] | None = None,
                           resync_period: float | None = None) -> SharedIndexInformer:
        """The shared informer of `resource` (any name discovery knows), created on first use."""
        rc = await self.rest.resource(api_version, resource)
        info = rc.info
        ns = self.namespace if info.namespaced else None
        key: InformerKey = (info.group, info.version, info.resource, ns, self.selectors)
        informer = self._informers.get(key)  # no await from here on: creation is atomic
        if informer is None:
            informer = SharedIndexInformer(
                rc, namespace=ns, selectors=self.selectors,
                resync_period=self.resync_period if resync_period is None else resync_period,
                indexers=indexers, use_watch_list=self.use_watch_list, clock=self._clock,
                name=f"{info.resource}.{info.group or 'core'}")
            self._informers[key] = informer
        elif indexers:
            known = informer.indexer.get_indexers()
            extra = {k: v for k, v in indexers.items() if k not in known}
            if extra:
                informer.indexer.add_indexers(extra)
        return informer

    @property
    def informers(self) -> list[SharedIndexInformer]:
        return list(self._informers.values())

    def start(self) -> None:
        """Start every informer not started yet (needs a running event loop)."""
        for informer in self._informers.values():
            informer.start()

    async def wait_for_cache_sync(self, timeout: float | None = None) -> dict[str, bool]:
        """Wait for every informer's first list; name -> synced."""
        informers = list(self._informers.values())
        results = await asyncio.gather(*(i.wait_for_sync(timeout) for i in informers))
        return {i.name: ok for i, ok in zip(informers, results)}

    async def shutdown(self) -> None:
        """Stop every informer and wait for their tasks to end."""
        await asyncio.gather(*(i.stop() for i in self._informers.values()))
