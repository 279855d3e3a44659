"""The reflector: keeps a sink (the informer's cache) equal to the server's view of one resource,
by LIST then WATCH, forever (client-go tools/cache/reflector.go).

One round (`list_and_watch`), in order:
1. Initial content. If `use_watch_list`, a *streaming list*: WATCH with `sendInitialEvents=true`,
   `resourceVersionMatch=NotOlderThan`, `allowWatchBookmarks=true` from the resourceVersion below;
   the current objects arrive as ADDED events and a BOOKMARK annotated
   `k8s.io/initial-events-end: "true"` ends them; its resourceVersion is the list's. If the server
   refuses that request, ends the stream before the bookmark, or goes quiet for
   `initial_events_timeout` seconds before it (a server that ignores the parameters), the round
   falls back to a paged LIST (and a quiet server is not asked again). Otherwise a LIST in pages of
   `page_size` (500) following `continue`, from resourceVersion:
   "0" on the very first list (any cached state), the last synced version afterwards, "" (a
   consistent read) once the last version is known to be gone (410). As client-go does, a LIST at
   a specific version is not paged unless the server has paged before (watch caches ignore limit).
   A 410 during the LIST retries it at once with "".
2. The sink gets the whole content at once (`begin_replace`/`end_replace`): deletions while we were
   away become visible there.
3. WATCH from the last synced resourceVersion, with bookmarks and a server timeout of
   `min_watch_timeout` x [1, 2) (5-10 minutes). Every event advances the version; a BOOKMARK only
   advances it. When the stream ends (server timeout, dropped connection) the reflector watches
   again from the last version: nothing is relisted. Opening a watch that fails because the
   server is unreachable or answers 429 is retried after a backoff, still without relisting.
4. A 410 Gone (as an ERROR event or as the answer to the WATCH) ends the round: relist.
   Any other error ends the round too. A watch that ends within a second without a single event
   (a "very short watch") counts as an error, so a server that closes watches at once is not hammered.

Between rounds the reflector sleeps on its `BackoffManager` (800 ms doubling to 30 s, jitter 1.0,
reset after 2 quiet minutes), on the injected clock. `run()` loops until cancelled.

`decoder` (set by the informer when its cache's transform works on bytes) is handed to every plain
`WatchStream` it opens, so each event's object is decoded once, as it is parsed (`ev.prepared`).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from kubecore.client import errors
from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.client.flowcontrol import BackoffManager
from kubecore.client.indexer import Indexer, Replacement
from kubecore.client.resource import ListPage, Selectors
from kubecore.client.watch import BOOKMARK, DELETED, ERROR, Decoder, WatchEvent, WatchStream

log = logging.getLogger(__name__)

MIN_WATCH_TIMEOUT = 300.0
SHORT_WATCH = 1.0
NOT_OLDER_THAN = "NotOlderThan"


class ListerWatcher(Protocol):
    """What the reflector needs of a resource client (`resource.ResourceClient` has it)."""

    def pages(self, *, namespace: str | None = None, selectors: Selectors = Selectors(),
              page_size: int = 500, resource_version: str | None = None,
              resource_version_match: str | None = None) -> AsyncIterator[ListPage]: ...

    async def watch(self, *, namespace: str | None = None, selectors: Selectors = Selectors(),
                    resource_version: str | None = None, allow_bookmarks: bool = True,
                    send_initial_events: bool | None = None, resource_version_match: str | None = None,
                    timeout_seconds: int | None = None) -> WatchStream: ...


class Sink(Protocol):
    """Where the reflector writes (the informer; `StoreSink` for a bare indexer)."""

    def begin_replace(self) -> Replacement: ...

    def end_replace(self, replacement: Replacement, *, resource_version: str) -> None: ...

    def on_event(self, event: WatchEvent) -> None: ...


class StoreSink:
    """A sink that only keeps an indexer up to date (no notifications)."""

    def __init__(self, indexer: Indexer) -> None:
        self.indexer = indexer

    def begin_replace(self) -> Replacement:
        return self.indexer.replacement()

    def end_replace(self, replacement: Replacement, *, resource_version: str) -> None:
        self.indexer.commit_replacement(replacement)

    def on_event(self, event: WatchEvent) -> None:
        if event.type == DELETED:
            self.indexer.delete(event.object)
        else:
            self.indexer.put(event.object, raw=event.raw)


class WatchTooShort(errors.ClientError):
    """The watch ended within a second without any event."""


class InitialEventsIncomplete(errors.ClientError):
    """A streaming list ended (or went quiet) before its initial-events-end bookmark."""


class Reflector:
    """LIST+WATCH one resource into a sink. See the module docstring for the exact protocol."""

    def __init__(self, lw: ListerWatcher, sink: Sink, *, namespace: str | None = None,
                 selectors: Selectors = Selectors(), page_size: int = 500, use_watch_list: bool = True,
                 initial_events_timeout: float = 30.0, min_watch_timeout: float = MIN_WATCH_TIMEOUT,
                 clock: Clock = REAL_CLOCK, rand: Callable[[], float] = random.random,
                 backoff: BackoffManager | None = None, name: str = "reflector") -> None:
        self._lw, self._sink = lw, sink
        self.namespace, self.selectors, self.page_size = namespace, selectors, page_size
        self.use_watch_list = use_watch_list
        self.initial_events_timeout = initial_events_timeout
        self.min_watch_timeout = min_watch_timeout
        self._clock, self._rand, self.name = clock, rand, name
        self._backoff = backoff or BackoffManager.reflector_default(clock=clock, rand=rand)
        self.last_sync_resource_version = ""
        self._rv_unavailable = False
        self._paginated_result = False
        self._server_ignores_watch_list = False
        self._stalled = False
        self._progress = 0.0
        # Counters (read by tests and metrics): what the reflector has done so far.
        self.lists = 0
        """Completed paged LISTs."""
        self.watch_lists = 0
        """Completed streaming lists (initial-events-end bookmark seen)."""
        self.watches = 0
        """Watch streams consumed (including the one a streaming list continues into)."""
        self.synced = asyncio.Event()
        self.decoder: Decoder | None = None
        """The sink's decode of an object's bytes, run as each event is parsed (`WatchStream.decoder`;
        the informer sets its cache's). Streams of WatchStream subclasses, which rewrite their
        events, are left without it."""

    # -- the loop ----------------------------------------------------------------------------------
    async def run(self) -> None:
        """list_and_watch, then back off, until cancelled."""
        while True:
            try:
                await self.list_and_watch()
            except asyncio.CancelledError:
                raise
            except errors.ClientError as e:
                log.info("%s: %s", self.name, e)
            except Exception:
                log.exception("%s: list and watch failed", self.name)
            await self._backoff.sleep()

    async def list_and_watch(self) -> None:
        stream: WatchStream | None = None
        if self.use_watch_list and not self._server_ignores_watch_list:
            try:
                stream = await self._watch_list()
            except asyncio.CancelledError:
                raise
            except errors.ClientError as e:
                log.info("%s: the streaming list failed, falling back to LIST: %s", self.name, e)
        if stream is None:
            await self._list()
        await self._watch(stream)

    # -- resource versions -------------------------------------------------------------------------
    def _relist_rv(self) -> str:
        if self._rv_unavailable:
            return ""
        return self.last_sync_resource_version or "0"

    def _rewatch_rv(self) -> str:
        return "" if self._rv_unavailable else self.last_sync_resource_version

    def _synced_at(self, rv: str) -> None:
        self.last_sync_resource_version = rv
        self._rv_unavailable = False
        self.synced.set()

    def _watch_timeout(self) -> int:
        return int(self.min_watch_timeout * (self._rand() + 1.0))

    # -- 1a. streaming list --------------------------------------------------------------------------
    async def _watch_list(self) -> WatchStream:
        stream = await self._lw.watch(
            namespace=self.namespace, selectors=self.selectors, resource_version=self._rewatch_rv(),
            allow_bookmarks=True, send_initial_events=True, resource_version_match=NOT_OLDER_THAN,
            timeout_seconds=self._watch_timeout())
        self._with_decoder(stream)
        self._stalled = False
        self._progress = self._clock.now()
        watchdog = asyncio.ensure_future(self._initial_events_watchdog(stream))
        try:
            replacement = self._sink.begin_replace()
            async for ev in stream:
                self._progress = self._clock.now()
                if ev.type == ERROR:
                    raise ev.error()
                if ev.type == BOOKMARK:
                    if ev.is_initial_events_end():
                        rv = ev.resource_version()
                        self._sink.end_replace(replacement, resource_version=rv)
                        self._synced_at(rv)
                        self.watch_lists += 1
                        return stream
                elif ev.type == DELETED:
                    replacement.remove(self._key_of(ev))
                elif ev.prepared is not None:
                    replacement.add_prepared(*ev.prepared)
                elif ev.is_decoded:
                    replacement.add(ev.object, raw=ev.raw)
                else:
                    replacement.add_raw(ev.raw, probed=ev.probed)
        except BaseException:
            stream.close()
            raise
        finally:
            watchdog.cancel()
        if self._stalled:
            self._server_ignores_watch_list = True
        raise InitialEventsIncomplete("the watch ended before the initial-events-end bookmark")

    def _with_decoder(self, stream: WatchStream) -> None:
        if self.decoder is not None and type(stream) is WatchStream:
            stream.decoder = self.decoder

    async def _initial_events_watchdog(self, stream: WatchStream) -> None:
        """Close the stream when no event came for `initial_events_timeout` (one task per stream;
        the event loop only stamps `_progress`)."""
        while True:
            quiet = self._clock.now() - self._progress
            if quiet >= self.initial_events_timeout:
                break
            await self._clock.sleep(self.initial_events_timeout - quiet)
        self._stalled = True
        log.warning("%s: no event for %.0fs before initial-events-end: the server does not stream lists",
                    self.name, self.initial_events_timeout)
        stream.close()

    def _key_of(self, ev: WatchEvent) -> str:
        meta: dict[str, Any] = ev.object.get("metadata") or {}
        ns, name = meta.get("namespace"), str(meta.get("name", ""))
        return f"{ns}/{name}" if ns else name

    # -- 1b. paged LIST ----------------------------------------------------------------------------
    async def _list(self) -> None:
        rv = self._relist_rv()
        try:
            await self._list_at(rv)
        except errors.Gone:
            if rv == "":
                raise
            log.info("%s: LIST at resourceVersion %s is gone; listing the latest", self.name, rv)
            self._rv_unavailable = True
            await self._list_at("")

    async def _list_at(self, rv: str) -> None:
        page_size = self.page_size
        if rv not in ("", "0") and not self._paginated_result:
            page_size = 0  # served from the watch cache, which does not page
        replacement = self._sink.begin_replace()
        list_rv, pages = "", 0
        async for page in self._lw.pages(namespace=self.namespace, selectors=self.selectors,
                                         page_size=page_size, resource_version=rv):
            pages += 1
            list_rv = page.resource_version
            for raw in page.items:
                replacement.add_raw(raw)
        if rv == "0" and pages > 1:
            self._paginated_result = True
        self.lists += 1
        self._sink.end_replace(replacement, resource_version=list_rv)
        self._synced_at(list_rv)

    # -- 3. watch ------------------------------------------------------------------------------------
    async def _watch(self, stream: WatchStream | None) -> None:
        while True:
            if stream is None:
                try:
                    stream = await self._lw.watch(
                        namespace=self.namespace, selectors=self.selectors,
                        resource_version=self.last_sync_resource_version, allow_bookmarks=True,
                        timeout_seconds=self._watch_timeout())
                except (errors.TransportError, errors.TooManyRequests) as e:
                    log.info("%s: cannot watch yet (%s); retrying", self.name, e)
                    await self._backoff.sleep()
                    continue
            self._with_decoder(stream)
            self.watches += 1
            started = self._clock.now()
            async with stream:
                seen = await self._handle(stream)
            broken = stream.broken
            stream = None
            if seen == 0 and not broken and self._clock.now() - started < SHORT_WATCH:
                raise WatchTooShort(f"{self.name}: the watch closed at once without events")

    async def _handle(self, stream: WatchStream) -> int:
        """Apply a watch's events to the sink; returns how many arrived. 410 -> raise Gone."""
        seen = 0
        on_event = self._sink.on_event
        async for ev in stream:
            seen += 1
            kind = ev.type
            if kind == ERROR:
                err = ev.error()
                if isinstance(err, errors.Gone):
                    log.info("%s: watch from %s expired: %s", self.name, self.last_sync_resource_version, err)
                raise err
            rv = ev.resource_version()
            if kind != BOOKMARK:
                on_event(ev)
            if rv:
                self.last_sync_resource_version = rv
        return seen

