"""SharedIndexInformer: one reflector + one compact cache + any number of event handlers
(client-go tools/cache/shared_informer.go, with the DeltaFIFO folded into the event loop).

    informer = SharedIndexInformer(pods, resync_period=0, indexers={"node": by_node})
    reg = informer.add_event_handler(EventHandlerFuncs(on_add=..., on_update=..., on_delete=...))
    informer.start()
    await informer.wait_for_sync()
    informer.indexer.by_index("namespace", "default")

How events flow. The reflector writes into the informer (it is the reflector's `Sink`); each write
updates the indexer first and then queues one notification per handler, so by the time a handler
runs, the cache already holds the state it is told about (client-go's ordering). On a relist
(`end_replace`) objects new to the cache are adds, objects already there are updates (even if
unchanged, as client-go's Replaced deltas are), and cached objects missing from the list are
deletes carrying a `DeletedFinalStateUnknown` tombstone with the last known state.

Each handler has its own unbounded queue and task (client-go's processorListener), so a slow
handler delays only itself; every handler sees every notification, in order, one at a time.
Handlers may be plain functions or coroutines. An exception in a handler is logged and the next
notification is delivered. Queued notifications hold the cache's compact entries rather than dicts
when a queue is long, so 150,000 queued adds cost kilobytes, not gigabytes; objects are decoded
when delivered. Handlers must treat objects as read-only (they are shared with the cache's LRU).

Handlers added after the informer started first get a synthetic add (`is_in_initial_list=True`)
for every cached object. `has_synced()` is true once the first full list is in the cache; a
registration's `has_synced()` additionally waits until that handler got its initial adds.
Resync: every `resync_period` seconds (per handler; 0 = never, and never less often than the
informer's own period allows) each cached object is re-delivered as `on_update(obj, obj)`.

Decoding: with a transform that has a bytes-level equivalent (`strip_managed_fields`), the
started informer has its watches decode each object with it as the event is parsed
(`Indexer.raw_decoder`, `WatchStream.decoder`), so an event costs one decode and no probe.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.client.indexer import DeletedFinalStateUnknown, Indexer, IndexFunc, Replacement, TransformFunc
from kubecore.client.reflector import ListerWatcher, Reflector
from kubecore.client.resource import Selectors
from kubecore.client.watch import DELETED, WatchEvent

log = logging.getLogger(__name__)

INLINE_LIMIT = 4096
"""A handler queue shorter than this holds decoded objects; a longer one holds compact entries."""
MIN_RESYNC_PERIOD = 1.0

Obj = dict[str, Any]
MaybeAwaitable = Awaitable[None] | None


class ResourceEventHandler(Protocol):
    def on_add(self, obj: Obj, is_in_initial_list: bool) -> MaybeAwaitable: ...

    def on_update(self, old: Obj, new: Obj) -> MaybeAwaitable: ...

    def on_delete(self, obj: Obj | DeletedFinalStateUnknown) -> MaybeAwaitable: ...


@dataclass
class EventHandlerFuncs:
    """A handler from up to three functions (sync or async); missing ones ignore the event."""

    on_add_func: Callable[[Obj, bool], MaybeAwaitable] | None = None
    on_update_func: Callable[[Obj, Obj], MaybeAwaitable] | None = None
    on_delete_func: Callable[[Obj | DeletedFinalStateUnknown], MaybeAwaitable] | None = None

    def on_add(self, obj: Obj, is_in_initial_list: bool) -> MaybeAwaitable:
        return self.on_add_func(obj, is_in_initial_list) if self.on_add_func else None

    def on_update(self, old: Obj, new: Obj) -> MaybeAwaitable:
        return self.on_update_func(old, new) if self.on_update_func else None

    def on_delete(self, obj: Obj | DeletedFinalStateUnknown) -> MaybeAwaitable:
        return self.on_delete_func(obj) if self.on_delete_func else None


@dataclass(frozen=True)
class _LazyTombstone:
    key: str
    entry: bytes


Ref = Obj | bytes | _LazyTombstone | None
Note = tuple[int, Ref, Ref, bool]
"""A queued notification: (ADD/UPDATE/DELETE, old, new, part of the initial list)."""
ADD, UPDATE, DELETE = 0, 1, 2


class _Listener:
    """One handler's queue and delivery task. Invariant: `initial_left` counts queued adds that
    are part of the handler's initial list."""

    def __init__(self, handler: ResourceEventHandler, informer: SharedIndexInformer, *,
                 resync_period: float) -> None:
        self.handler = handler
        self.informer = informer
        self.resync_period = resync_period
        self.next_resync = 0.0
        self.pending: deque[Note] = deque()
        self.initial_left = 0
        self.delivered = 0
        self._waiter: asyncio.Future[None] | None = None
        """Set while `_run` sleeps on an empty queue; `push` resolves it."""
        self.task: asyncio.Task[None] | None = None

    def add(self, kind: int, old: Ref, new: Ref, *, new_entry: bytes | None = None, initial: bool = False) -> None:
        if new_entry is not None and isinstance(new, dict) and len(self.pending) >= INLINE_LIMIT:
            new = new_entry
        self.push((kind, old, new, initial))

    def push(self, note: Note) -> None:
        """Queue a notification tuple; one tuple may be queued to every listener (a relist of
        150,000 objects then costs 150,000 tuples, not 150,000 per handler)."""
        self.pending.append(note)
        if note[3]:
            self.initial_left += 1
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def start(self) -> None:
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(self._run(), name="informer-listener")

    async def _run(self) -> None:
        # The loop is looked up once: asyncio.Event.wait() would look it up (a getpid() system call
        # on Python 3.11) every time the queue runs dry, which is about once per event.
        loop = asyncio.get_running_loop()
        pending = self.pending
        while True:
            while not pending:
                waiter = self._waiter = loop.create_future()
                await waiter
            kind, old, new, initial = pending.popleft()
            try:
                result = self._call(kind, old, new, initial)
                if result is not None and inspect.isawaitable(result):
                    await result
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("informer event handler %r failed", self.handler)
            finally:
                self.delivered += 1
                if initial:
                    self.initial_left -= 1

    def _call(self, kind: int, old: Ref, new: Ref, initial: bool) -> MaybeAwaitable:
        """The handler's call for one notification (what a coroutine handler returns is awaited
        by `_run`; a plain one costs no coroutine). Decoded objects (the usual case) are passed
        as they are; compact entries and tombstones are materialized first."""
        if type(new) is not dict:
            new = self.informer._materialize(new)
        if kind == ADD:
            return self.handler.on_add(new, initial)  # type: ignore[arg-type]
        if kind == UPDATE:
            if type(old) is not dict:
                old = self.informer._materialize(old)
            return self.handler.on_update(old, new)  # type: ignore[arg-type]
        return self.handler.on_delete(new)  # type: ignore[arg-type]

    def has_synced(self) -> bool:
        return self.informer.has_synced() and self.initial_left == 0


class Registration:
    """What `add_event_handler` returns: ask it `has_synced()`, pass it to `remove_event_handler`."""

    def __init__(self, listener: _Listener) -> None:
        self._listener = listener

    def has_synced(self) -> bool:
        return self._listener.has_synced()

    @property
    def pending(self) -> int:
        return len(self._listener.pending)


class SharedIndexInformer:
    """One resource's shared cache and handlers. Not started until `start()` or `run()`."""

    def __init__(self, lw: ListerWatcher, *, namespace: str | None = None, selectors: Selectors = Selectors(),
                 resync_period: float = 0.0, indexers: Mapping[str, IndexFunc] | None = None,
                 indexer: Indexer | None = None, use_watch_list: bool = True, clock: Clock = REAL_CLOCK,
                 name: str = "informer") -> None:
        self.indexer = indexer or Indexer(indexers=indexers)
        if indexer is not None and indexers:
            self.indexer.add_indexers(indexers)
        self.resync_period = resync_period
        self.name = name
        self._clock = clock
        self.reflector = Reflector(lw, self, namespace=namespace, selectors=selectors,
                                   use_watch_list=use_watch_list, clock=clock, name=name)
        self._listeners: list[_Listener] = []
        self._synced = False
        self._synced_event = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._started = False
        self._resync_wanted = asyncio.Event()

    def set_transform(self, transform: TransformFunc | None) -> None:
        """What the cache keeps of each object (client-go's SetTransform; `strip_managed_fields` is
        the usual one). Handlers see transformed objects. Only before the informer started."""
        if self._started:
            raise RuntimeError(f"{self.name}: the transform cannot change after the informer started")
        self.indexer.transform = transform

    # -- handlers ------------------------------------------------------------------------------------
    def add_event_handler(self, handler: ResourceEventHandler, *, resync_period: float | None = None) -> Registration:
        period = self.resync_period if resync_period is None else resync_period
        if 0 < period < MIN_RESYNC_PERIOD:
            period = MIN_RESYNC_PERIOD
        if self._started and period and (not self.resync_period or period < self.resync_period):
            # client-go: a started informer cannot resync faster than it was built for.
            period = self.resync_period
        listener = _Listener(handler, self, resync_period=period)
        listener.next_resync = self._clock.now() + period
        for key in self.indexer.list_keys():
            entry = self.indexer.entry(key)
            if entry is not None:
                listener.add(ADD, None, entry, initial=True)
        self._listeners.append(listener)
        if period > 0:
            self._resync_wanted.set()
        if self._started:
            listener.start()
        return Registration(listener)

    def remove_event_handler(self, registration: Registration) -> None:
        listener = registration._listener
        if listener in self._listeners:
            self._listeners.remove(listener)
            if listener.task is not None:
                listener.task.cancel()

    def _materialize(self, ref: Ref) -> Any:
        if isinstance(ref, bytes):
            return self.indexer.decode_entry(ref)
        if isinstance(ref, _LazyTombstone):
            return DeletedFinalStateUnknown(ref.key, self.indexer.decode_entry(ref.entry))
        return ref

    # -- the reflector's sink ------------------------------------------------------------------------
    def begin_replace(self) -> Replacement:
        return self.indexer.replacement()

    def end_replace(self, replacement: Replacement, *, resource_version: str) -> None:
        initial = not self._synced
        old = self.indexer.commit_replacement(replacement)
        listeners = self._listeners
        for key, entry in replacement.items.items():
            previous = old.get(key)
            note: Note = (ADD, None, entry, initial) if previous is None else (UPDATE, previous, entry, False)
            for lis in listeners:
                lis.push(note)
        for key, entry in old.items():
            if key not in replacement.items:
                note = (DELETE, None, _LazyTombstone(key, entry), False)
                for lis in listeners:
                    lis.push(note)
        if not self._synced:
            self._synced = True
            self._synced_event.set()

    def on_event(self, event: WatchEvent) -> None:
        indexer = self.indexer
        prepared = event.prepared
        raw: bytes | None
        if prepared is not None:  # decoded by the indexer's raw decoder as the watch parsed it
            obj, raw = prepared
        elif event.is_decoded:
            obj, raw = indexer.prepare(event.object, event.raw)
        else:  # decoded once, here, after the transform's cut when it has one (rawmeta)
            obj, raw = indexer.prepare_raw(event.raw, probed=event.probed)
        if event.type == DELETED:
            indexer.delete(obj)
            for lis in self._listeners:
                lis.add(DELETE, None, obj)
            return
        key = indexer.key_func(obj)
        previous, previous_obj = indexer.swap_keyed(key, obj, raw=raw)
        entry = indexer.entry(key)
        if previous is None:
            for lis in self._listeners:
                lis.add(ADD, None, obj, new_entry=entry)
            return
        old: Ref = previous_obj if previous_obj is not None else previous
        for lis in self._listeners:
            lis.add(UPDATE, old, obj, new_entry=entry)

    # -- resync --------------------------------------------------------------------------------------
    def _resync_due(self) -> list[_Listener]:
        now = self._clock.now()
        due = [lis for lis in self._listeners if lis.resync_period > 0 and now >= lis.next_resync]
        for lis in due:
            lis.next_resync = now + lis.resync_period
        return due

    async def _resync_loop(self) -> None:
        while True:
            periods = [lis.resync_period for lis in self._listeners if lis.resync_period > 0]
            if self.resync_period > 0:
                periods.append(self.resync_period)
            if not periods:  # nobody resyncs: wait for a handler that does
                self._resync_wanted.clear()
                await self._resync_wanted.wait()
                continue
            await self._clock.sleep(min(periods))
            if not self._synced:
                continue
            due = self._resync_due()
            if not due:
                continue
            for key in self.indexer.list_keys():
                entry = self.indexer.entry(key)
                if entry is not None:
                    note: Note = (UPDATE, entry, entry, False)
                    for lis in due:
                        lis.push(note)

    # -- lifecycle -----------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the reflector, resync and handler tasks on the running loop (idempotent)."""
        if self._started:
            return
        self._started = True
        self.reflector.decoder = self.indexer.raw_decoder()  # (the transform is fixed from now on)
        loop = asyncio.get_running_loop()
        for lis in self._listeners:
            lis.start()
        self._tasks = [loop.create_task(self.reflector.run(), name=f"{self.name}-reflector"),
                       loop.create_task(self._resync_loop(), name=f"{self.name}-resync")]

    async def run(self) -> None:
        """start() and wait until cancelled; stops everything on the way out."""
        self.start()
        try:
            await asyncio.gather(*self._tasks)
        finally:
            await self.stop()

    async def stop(self) -> None:
        tasks = [*self._tasks, *(lis.task for lis in self._listeners if lis.task is not None)]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks = []
        for lis in self._listeners:
            lis.task = None
        self._started = False

    def has_synced(self) -> bool:
        return self._synced

    async def wait_for_sync(self, timeout: float | None = None) -> bool:
        """True once synced; False if `timeout` seconds (real time) passed first."""
        try:
            await asyncio.wait_for(self._synced_event.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    @property
    def last_sync_resource_version(self) -> str:
        return self.reflector.last_sync_resource_version
