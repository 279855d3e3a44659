"""What every controller is and how the controller manager finds it.

A controller is a small object with a `name` and `async run(workers)` that reconciles until it is
cancelled (kube-controller-manager's `Controller` + `InitFunc`, reduced to one protocol). Most are
a `QueueController`: they say which informers they watch and what a sync of one key does, and
inherit the rest (upstream's Run / worker / processNextWorkItem, written once here):

    class ThingController(QueueController):
        name = "thing"
        description = "thing controller"            # in the start/stop log lines

        async def wire(self) -> None:             # once per run: clients, informers, handlers
            pods = await self.informers.informer_for("v1", "pods")
            self.pod_indexer = pods.indexer
            self.wiring.add(pods, EventHandlerFuncs(on_add_func=lambda p, _i: self.enqueue(p)))

        async def sync(self, key: str) -> None:   # never concurrently for one key
            ...

    @register("thing", workers=5)
    def new_thing(ctx: ControllerContext) -> ThingController:
        return ThingController(rest=ctx.rest, informers=ctx.informers, clock=ctx.clock)

`run(workers)` then starts the informers, waits for their caches, runs `workers` copies of the
worker loop (`process_queue`: sync, forget on success, requeue with backoff on error) until
cancelled, and finally shuts the queue and takes its event handlers off the shared informers.
Controllers of another shape (periodic passes, several kinds of queue) use the same pieces:
`Wiring` (handlers on, caches synced, handlers off), `process_queue`, `run_workers`, `run_every`.

Rules a controller follows (DESIGN.md, issue 4):
- It talks to the API server only, through `ctx.rest` and informers from `ctx.informers` (one
  shared watch per resource in the process). It never calls another controller.
- It is level-driven: events only say *which* object to look at; the worker reads the current
  state from the cache (or the server) and makes the world match it.
- `run()` returns only by cancellation (the manager cancels it on shutdown or when leadership is
  lost) and must leave nothing running behind: tasks it starts are cancelled and awaited.
- Time comes from `ctx.clock`, events go through `ctx.recorder(name)`.

Registration: a module decorates its constructor with `@register(name, ...)`; the manager imports
the modules listed in `CONTROLLER_MODULES`, so a new controller joins by adding its module name
there and one decorator.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.client.events import EventRecorder
from kubecore.client.factory import SharedInformerFactory
from kubecore.client.informer import Registration, ResourceEventHandler, SharedIndexInformer
from kubecore.client.rest import RestClient
from kubecore.client.workqueue import RateLimitingQueue, WorkQueue
from kubecore.controllers.controller_utils import object_key
from kubecore.controllers.podcontrol import EventRecorderLike, NullRecorder

log = logging.getLogger(__name__)

Obj = dict[str, Any]

CONTROLLER_MODULES = (
    "kubecore.controllers.garbagecollector",
    "kubecore.controllers.namespace",
    "kubecore.controllers.replicaset",
    "kubecore.controllers.replication",
    "kubecore.controllers.deployment",
    "kubecore.controllers.statefulset",
    "kubecore.controllers.daemonset",
    "kubecore.controllers.job",
    "kubecore.controllers.cronjob",
    "kubecore.controllers.ttlafterfinished",
    "kubecore.controllers.endpointslice",
    "kubecore.controllers.endpoints",
    "kubecore.controllers.serviceaccount",
    "kubecore.controllers.podgc",
    "kubecore.controllers.resourcequota",
    "kubecore.controllers.disruption",
    "kubecore.controllers.nodelifecycle",
)
"""Modules whose import registers controllers."""

INFORMER_SYNC_TIMEOUT = 60.0


class Controller(Protocol):
    """One control loop. `run` works until cancelled (see the module docstring)."""

    name: str

    async def run(self, workers: int) -> None: ...


@dataclass
class ControllerContext:
    """Everything a controller is built from; one per leadership term (fresh informers)."""

    rest: RestClient
    informers: SharedInformerFactory
    recorder: Callable[[str], EventRecorder]
    """recorder(component) -> an event recorder whose events carry that source component."""
    clock: Clock = REAL_CLOCK
    options: dict[str, Any] = field(default_factory=dict)
    """Controller-specific settings by name ("gc_discovery_period", ...); read with defaults."""


ControllerConstructor = Callable[[ControllerContext], Controller]


@dataclass(frozen=True)
class ControllerSpec:
    name: str
    constructor: ControllerConstructor
    workers: int = 5
    enabled_by_default: bool = True
    aliases: tuple[str, ...] = ()


REGISTRY: dict[str, ControllerSpec] = {}
C = TypeVar("C", bound=ControllerConstructor)


def register(name: str, *, workers: int = 5, enabled_by_default: bool = True,
             aliases: Iterable[str] = ()) -> Callable[[C], C]:
    """Class (or factory function) decorator: make `name` known to the controller manager."""

    def deco(constructor: C) -> C:
        REGISTRY[name] = ControllerSpec(name=name, constructor=constructor, workers=workers,
                                        enabled_by_default=enabled_by_default, aliases=tuple(aliases))
        return constructor

    return deco


def load_builtin_controllers(modules: Iterable[str] = CONTROLLER_MODULES) -> dict[str, ControllerSpec]:
    """Import every controller module; returns the registry."""
    for mod in modules:
        importlib.import_module(mod)
    return REGISTRY


class UnknownController(ValueError):
    pass


def canonical_name(name: str, registry: dict[str, ControllerSpec]) -> str:
    if name in registry:
        return name
    for spec in registry.values():
        if name in spec.aliases:
            return spec.name
    raise UnknownController(f"unknown controller {name!r}; known: {', '.join(sorted(registry))}")


def select_controllers(flags: Iterable[str], registry: dict[str, ControllerSpec]) -> list[ControllerSpec]:
    """kube-controller-manager's --controllers: "*" = every default-on controller, "foo" turns one
    on, "-foo" turns one off (the most specific word wins over "*"). Order: registry order."""
    words = [w.strip() for f in flags for w in f.split(",") if w.strip()]
    star = "*" in words
    on = {canonical_name(w, registry) for w in words if w != "*" and not w.startswith("-")}
    off = {canonical_name(w[1:], registry) for w in words if w.startswith("-")}
    chosen = []
    for spec in registry.values():
        if spec.name in off:
            continue
        if spec.name in on or (star and spec.enabled_by_default):
            chosen.append(spec)
    return chosen


# -- helpers every controller uses ---------------------------------------------------------------

async def wait_for_informers(informers: Iterable[SharedIndexInformer], *,
                             timeout: float = INFORMER_SYNC_TIMEOUT) -> bool:
    """Wait for each informer's first list (cache sync); False if some did not sync in time."""
    results = await asyncio.gather(*(i.wait_for_sync(timeout) for i in informers))
    for inf, ok in zip(informers, results):
        if not ok:
            log.warning("informer %s did not sync within %ss", inf.name, timeout)
    return all(results)


K = TypeVar("K")


def requeue_with_backoff(queue: RateLimitingQueue[K], key: K, err: Exception, *, name: str) -> None:
    """What a failed sync means unless a controller says otherwise: log it, retry with backoff."""
    log.warning("%s: error syncing %r (retry %d): %s", name, key, queue.num_requeues(key) + 1, err,
                exc_info=log.isEnabledFor(logging.DEBUG))
    queue.add_rate_limited(key)


async def process_queue(queue: RateLimitingQueue[K], sync: Callable[[K], Awaitable[Any]], *, name: str,
                        on_error: Callable[[K, Exception], None] | None = None,
                        on_success: Callable[[K, Any], None] | None = None) -> None:
    """The canonical worker: take a key, sync it, forget it on success, requeue it with backoff on
    error; `done` in every case. Until the queue shuts down.

    `name` labels the error log lines. `on_error(key, err)` replaces the requeue-with-backoff
    policy; `on_success(key, result)` replaces the forget (it gets what `sync` returned)."""
    failed = on_error if on_error is not None else (lambda key, e: requeue_with_backoff(queue, key, e, name=name))
    async for key in queue:
        try:
            result = await sync(key)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            failed(key, e)
        else:
            if on_success is None:
                queue.forget(key)
            else:
                on_success(key, result)
        finally:
            queue.done(key)


async def run_workers(workers: int, worker: Callable[[], Awaitable[None]], *,
                      queues: Iterable[RateLimitingQueue[Any]] = ()) -> None:
    """Run `workers` copies of `worker` until cancelled; then shut the queues down and wait."""
    tasks = [asyncio.ensure_future(worker()) for _ in range(max(1, workers))]
    try:
        await asyncio.gather(*tasks)
    finally:
        for q in queues:
            q.shut_down()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any] | asyncio.Future[Any]]) -> None:
    pending = [t for t in tasks if not t.done()]
    for t in pending:
        t.cancel()
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)


async def run_every(period: float, fn: Callable[[], Awaitable[None]], *, clock: Clock, what: str) -> None:
    """wait.Until: run `fn`, then sleep `period`, until cancelled; a failing run is logged, not fatal."""
    while True:
        try:
            await fn()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s failed", what)
        await clock.sleep(period)


class Wiring:
    """What one controller plugged into the process's shared informers: the informers whose first
    list it waits for, and the event handlers it registered on them. The informers outlive the
    controller (they are shared); its handlers do not: `run` takes them off when it ends."""

    def __init__(self, factory: SharedInformerFactory) -> None:
        self.factory = factory
        self.informers: list[SharedIndexInformer] = []
        """Waited for before any work starts (registration order)."""
        self.registrations: list[tuple[SharedIndexInformer, Registration]] = []

    def add(self, informer: SharedIndexInformer, handler: ResourceEventHandler | None = None, *,
            wait: bool = True, resync_period: float | None = None) -> None:
        """Register `handler` (if any) on `informer`; with `wait`, its cache must sync before work starts."""
        if wait and informer not in self.informers:
            self.informers.append(informer)
        if handler is not None:
            self.registrations.append((informer, informer.add_event_handler(handler, resync_period=resync_period)))

    def remove(self) -> None:
        """Take every handler off and forget the informers (a later run wires again)."""
        for informer, registration in self.registrations:
            informer.remove_event_handler(registration)
        self.registrations, self.informers = [], []

    async def run(self, label: str, work: Callable[[], Awaitable[object]], *,
                  queues: Iterable[WorkQueue[Any]] = ()) -> None:
        """Start the factory's informers, wait (as long as it takes) for the caches, then `work()`
        until cancelled; finally shut `queues` down and `remove` the handlers. `label` names the
        controller in the start/stop log lines."""
        self.factory.start()
        log.info("starting %s", label)
        try:
            while not await wait_for_informers(self.informers):
                pass
            await work()
        finally:
            for queue in queues:
                queue.shut_down()
            self.remove()
            log.info("shutting down %s", label)


class QueueController:
    """A controller driven by one rate-limited queue of keys ("<namespace>/<name>" unless it says
    otherwise).

    A subclass sets `name` and `description`, implements `wire()` (clients, informers, handlers
    through `self.wiring.add`) and `sync(key)`; it may override `on_sync_error` (the retry policy),
    `work` (more queues or tasks) and `queues` (what is shut down at the end)."""

    name: str
    """The registry name; it also labels the error log lines."""
    description: str
    """How the start/stop log lines call it ("deployment controller")."""

    def __init__(self, *, rest: RestClient, informers: SharedInformerFactory,
                 recorder: EventRecorderLike | None = None, clock: Clock = REAL_CLOCK,
                 queue: RateLimitingQueue[str] | None = None) -> None:
        self.rest = rest
        self.informers = informers
        self.recorder: EventRecorderLike = recorder if recorder is not None else NullRecorder()
        self.clock = clock
        self.queue: RateLimitingQueue[str] = queue if queue is not None else RateLimitingQueue(clock=clock)
        self.wiring = Wiring(informers)
        self._ready = False

    async def setup(self) -> None:
        """Resolve the clients, get the shared informers and register the handlers (once per run)."""
        if self._ready:
            return
        await self.wire()
        self._ready = True

    async def wire(self) -> None:
        raise NotImplementedError

    async def sync(self, key: str) -> object:
        """Reconcile one key (never called concurrently for one key: the queue's promise)."""
        raise NotImplementedError

    async def run(self, workers: int) -> None:
        """Set up, start the informers (if nobody did), wait for their first lists, `work` until
        cancelled; then shut the queues down and unregister the handlers."""
        await self.setup()
        try:
            await self.wiring.run(self.description, lambda: self.work(workers), queues=self.queues())
        finally:
            self._ready = False

    def queues(self) -> list[RateLimitingQueue[str]]:
        """The queues `run` shuts down when it ends."""
        return [self.queue]

    async def work(self, workers: int) -> None:
        """What runs once the caches synced, until cancelled: `workers` copies of `worker`."""
        await run_workers(workers, self.worker)

    async def worker(self) -> None:
        """One worker on `queue`: `sync` each key, `on_sync_error` when it fails."""
        await process_queue(self.queue, self.sync, name=self.name, on_error=self.on_sync_error)

    def on_sync_error(self, key: str, err: Exception) -> None:
        """The retry policy: log, requeue with the queue's per-item backoff."""
        requeue_with_backoff(self.queue, key, err, name=self.name)

    def enqueue(self, obj: Obj) -> None:
        self.queue.add(object_key(obj))
