"""What every controller is and how the controller manager finds it.

A controller is a small object with a `name` and `async run(workers)` that reconciles until it is
cancelled (kube-controller-manager's `Controller` + `InitFunc`, reduced to one protocol):

    @register("replicaset", workers=5)
    class ReplicaSetController:
        name = "replicaset"

        def __init__(self, ctx: ControllerContext) -> None:
            self.ctx = ctx

        async def run(self, workers: int) -> None:
            pods = await self.ctx.informers.informer_for("v1", "pods")
            pods.add_event_handler(EventHandlerFuncs(on_add_func=...))
            self.ctx.informers.start()          # starts the informers asked for so far
            await wait_for_informers([pods])
            await run_workers(self.sync, queue, workers)   # until cancelled

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
from kubecore.client.informer import SharedIndexInformer
from kubecore.client.rest import RestClient
from kubecore.client.workqueue import RateLimitingQueue

log = logging.getLogger(__name__)

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



async def process_queue(queue: RateLimitingQueue[Any], sync: Callable[[Any], Awaitable[None]], *,
                        name: str) -> None:
    """The canonical worker: take a key, sync it, forget on success, requeue with backoff on error."""
    async for key in queue:
        try:
            await sync(key)
            queue.forget(key)
        except asyncio.CancelledError:
            queue.done(key)
            raise
        except Exception as e:
            log.warning("%s: error syncing %r (retry %d): %s", name, key, queue.num_requeues(key) + 1, e,
                        exc_info=log.isEnabledFor(logging.DEBUG))
            queue.add_rate_limited(key)
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
