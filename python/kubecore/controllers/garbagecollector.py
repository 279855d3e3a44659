"""The garbage collector: deletes objects whose owners are gone, and carries out Orphan and
Foreground deletion (upstream's pkg/controller/garbagecollector/garbagecollector.go).

Pieces: `Monitors` watch every deletable resource and feed `graph.GraphBuilder`, which keeps the
owner -> dependents graph and fills two rate-limited work queues:

attemptToDelete(node) — `attempt_to_delete_item`, upstream's decision, in this order:
  1. a node being deleted (and not deleting its dependents) is left alone: its deletion will come;
  2. GET the object by its identity; gone (or another uid) -> a *virtual delete* is applied to the
     graph (the node is dropped, its dependents queued) and the item is done;
  3. a node deleting its dependents (foregroundDeletion): if no dependent blocks it
     (blockOwnerDeletion=true) its `foregroundDeletion` finalizer is removed, else the blocking
     dependents that are not themselves deleting dependents are queued;
  4. no ownerReferences: nothing to do;
  5. classify the references by GETting each owner: *dangling* (404, or a different uid),
     *waiting* (the owner is being deleted with foregroundDeletion) or *solid*;
  6. some solid: only the dangling and waiting references are removed (patch);
     none solid but some waiting, and the item has dependents: delete it in the Foreground (after
     unblocking its own references if a dependent of it is deleting dependents: cycle breaker);
     otherwise delete it with the policy its finalizers ask for (orphan -> Orphan,
     foregroundDeletion -> Foreground, else Background).
  The worker requeues (with backoff) on errors and while the node is still virtual.

attemptToOrphan(owner) — remove the ownerReferences to the owner from all its dependents, then
  the owner's `orphan` finalizer (the API server then deletes it).

A cluster-scoped object that names a namespaced owner is invalid and never deleted for it.
Controllers are clients of the API server only: the collector reads from its informers' graph
and writes through ordinary PATCH/DELETE calls.

Monitors (upstream's GraphBuilder monitors + GetDeletableResources): every resource whose discovery
entry has the verbs list, watch and delete is watched in its group's preferred version, except core
and events.k8s.io Events. Discovery is re-read every `gc_discovery_period` (30 s): new resources (a
CRD) get a monitor, vanished ones lose it and their informer is stopped; a group whose discovery
fails keeps its monitors.

Which informer a monitor uses (the graph reads only metadata): the process's *shared* informer of
the resource when a controller already caches it in full (the collector's watch of pods is the
one the ReplicaSet controller uses: no second copy of 150,000 pods), else a *metadata-only*
informer (`SharedInformerFactory.metadata_informer_for`: PartialObjectMetadata, managedFields
trimmed), so Secrets and ConfigMaps that only the collector watches cost their metadata, not their
data. (Upstream's ObjectOrMetadataInformerFactory is metadata-only only for resources without a
typed informer, i.e. custom resources; every built-in resource gets a full typed informer there,
used by another controller or not.) When a controller creates the full informer later (the
ResourceQuota controller does, for the resources its quotas count), the next discovery round
moves the monitor onto it; the metadata-only watch is kept until the full one has delivered its
initial list to the graph (the graph takes the duplicate events), then dropped. `gc_metadata_informers=False` in the controller
options makes every monitor use full shared informers, as before.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from kubecore.client import errors
from kubecore.client.discovery import Discovery, ResourceInfo
from kubecore.client.factory import SharedInformerFactory
from kubecore.client.indexer import DeletedFinalStateUnknown
from kubecore.client.events import WARNING, EventRecorder
from kubecore.client.informer import EventHandlerFuncs, Registration, SharedIndexInformer
from kubecore.client.workqueue import RateLimitingQueue
from kubecore.controllers.base import ControllerContext, cancel_and_wait, register
from kubecore.controllers.gcoperations import (ApiOperations, MappingError, NamespacedOwnerOfClusterScopedObject,
                                               Operations, ResourceMapper)
from kubecore.controllers.graph import (FOREGROUND_FINALIZER, ORPHAN_FINALIZER, GraphBuilder, GraphEvent,
                                        Identity, Node, ObjectState, OwnerRef, owner_identity)

log = logging.getLogger(__name__)

NAME = "garbagecollector"
COMPONENT = "garbage-collector-controller"
DEFAULT_DISCOVERY_PERIOD = 30.0
SYNC_TIMEOUT = 60.0
Action = Literal["forget", "requeue"]


class VirtualDeleteEnqueued(Exception):
    """The object is gone; a virtual delete event was applied to the graph instead."""


@dataclass
class Classified:
    solid: list[OwnerRef]
    dangling: list[OwnerRef]
    waiting: list[OwnerRef]


class Collector:
    """The decision logic over a graph and an `Operations` (no informers, no tasks: unit-testable)."""

    def __init__(self, ops: Operations, *, recorder: EventRecorder | None = None) -> None:
        self.ops = ops
        self.recorder = recorder
        self.attempt_to_delete: list[Node] | RateLimitingQueue[Node] = []
        self.attempt_to_orphan: list[Node] | RateLimitingQueue[Node] = []
        self.graph = GraphBuilder(attempt_to_delete=self._add_delete, attempt_to_orphan=self._add_orphan,
                                  invalid_owner_namespace=self._report_invalid_namespace)

    def _add_delete(self, node: Node) -> None:
        q = self.attempt_to_delete
        q.append(node) if isinstance(q, list) else q.add(node)

    def _add_orphan(self, node: Node) -> None:
        q = self.attempt_to_orphan
        q.append(node) if isinstance(q, list) else q.add(node)

    def _report_invalid_namespace(self, node: Node, owner_uid: str) -> None:
        ref = next((o for o in node.owners if o.uid == owner_uid), None)
        if ref is None or self.recorder is None:
            return
        i = node.identity
        self.recorder.event(
            {"apiVersion": i.api_version, "kind": i.kind, "name": i.name, "namespace": i.namespace, "uid": i.uid},
            WARNING, reason="OwnerRefInvalidNamespace",
            message=(f"ownerRef [{ref.api_version}/{ref.kind}, namespace: {i.namespace}, name: {ref.name}, "
                     f"uid: {ref.uid}] does not exist in namespace {i.namespace!r}"))

    # -- attemptToDelete -----------------------------------------------------------------------------
    async def attempt_to_delete_worker(self, node: Node) -> Action:
        if node.virtual:
            current = self.graph.nodes.get(node.identity.uid)
            if current is None or current.observed:
                return "forget"  # gone meanwhile, or its object was observed: nothing left to verify
        try:
            await self.attempt_to_delete_item(node)
        except (VirtualDeleteEnqueued, NamespacedOwnerOfClusterScopedObject):
            return "forget"
        except MappingError as e:
            log.info("garbage collector: %s: %s (will retry)", node.identity, e)
            return "requeue"
        if node.virtual:
            return "requeue"  # not observed by an informer yet: look again later
        return "forget"

    async def attempt_to_delete_item(self, item: Node) -> None:
        if item.being_deleted and not item.deleting_dependents:
            return
        latest = await self.ops.get(item.identity)
        if latest is None or (latest.get("metadata") or {}).get("uid") != item.identity.uid:
            self.graph.process(GraphEvent("delete", ObjectState(item.identity), virtual=True))
            raise VirtualDeleteEnqueued()
        if item.deleting_dependents:
            await self._process_deleting_dependents(item)
            return
        meta = latest.get("metadata") or {}
        refs = [OwnerRef.from_dict(r) for r in meta.get("ownerReferences") or () if isinstance(r, dict)]
        if not refs:
            return
        c = await self.classify_references(item, refs)
        if c.solid:
            if c.dangling or c.waiting:
                uids = {r.uid for r in c.dangling} | {r.uid for r in c.waiting}
                log.info("garbage collector: removing references %s from %s", sorted(uids), item.identity)
                await self.ops.remove_owner_references(item.identity, uids)
            return
        if c.waiting and item.dependents:
            if any(d.deleting_dependents for d in list(item.dependents)):
                await self.ops.unblock_owner_references(item.identity)
            await self._delete(item, "Foreground")
            return
        finalizers = meta.get("finalizers") or []
        policy = ("Orphan" if ORPHAN_FINALIZER in finalizers
                  else "Foreground" if FOREGROUND_FINALIZER in finalizers else "Background")
        await self._delete(item, policy)

    async def _delete(self, item: Node, policy: str) -> None:
        log.info("garbage collector: deleting %s (propagationPolicy=%s)", item.identity, policy)
        await self.ops.delete(item.identity, policy=policy)

    async def _process_deleting_dependents(self, item: Node) -> None:
        blocking = item.blocking_dependents()
        if not blocking:
            log.info("garbage collector: %s has no blocking dependents left; removing %s", item.identity,
                     FOREGROUND_FINALIZER)
            await self.ops.remove_finalizer(item.identity, FOREGROUND_FINALIZER)
            return
        for dep in blocking:
            if not dep.deleting_dependents:
                self._add_delete(dep)

    async def classify_references(self, item: Node, refs: list[OwnerRef]) -> Classified:
        out = Classified([], [], [])
        for ref in refs:
            dangling, owner = await self.is_dangling(ref, item)
            if dangling:
                out.dangling.append(ref)
                continue
            om = (owner or {}).get("metadata") or {}
            if om.get("deletionTimestamp") and FOREGROUND_FINALIZER in (om.get("finalizers") or ()):
                out.waiting.append(ref)
            else:
                out.solid.append(ref)
        return out

    async def is_dangling(self, ref: OwnerRef, item: Node) -> tuple[bool, dict[str, Any] | None]:
        cluster_key = owner_identity(ref, "")
        namespaced_key = owner_identity(ref, item.identity.namespace)
        if cluster_key in self.graph.absent or namespaced_key in self.graph.absent:
            return True, None
        namespaced = await self.ops.namespaced(ref.api_version, ref.kind)
        if namespaced and not item.identity.namespace:
            raise NamespacedOwnerOfClusterScopedObject(
                f"{item.identity} is cluster-scoped but names a namespaced owner {ref.kind}/{ref.name}")
        key = namespaced_key if namespaced else cluster_key
        owner = await self.ops.get(key)
        if owner is None or (owner.get("metadata") or {}).get("uid") != ref.uid:
            self.graph.absent.add(key)
            return True, None
        return False, owner

    # -- attemptToOrphan -----------------------------------------------------------------------------
    async def attempt_to_orphan_worker(self, owner: Node) -> Action:
        dependents = list(owner.dependents)
        uid = owner.identity.uid
        results = await asyncio.gather(*(self.ops.remove_owner_references(d.identity, {uid}) for d in dependents),
                                       return_exceptions=True)
        failed = [r for r in results if isinstance(r, BaseException)]
        for r in failed:
            if isinstance(r, asyncio.CancelledError):
                raise r
        if failed:
            log.warning("garbage collector: orphaning dependents of %s: %s", owner.identity, failed[0])
            return "requeue"
        log.info("garbage collector: orphaned %d dependents of %s; removing %s", len(dependents), owner.identity,
                 ORPHAN_FINALIZER)
        await self.ops.remove_finalizer(owner.identity, ORPHAN_FINALIZER)
        return "forget"


# -- monitors: which resources the graph is built from ----------------------------------------

REQUIRED_VERBS = frozenset({"list", "watch", "delete"})
IGNORED_RESOURCES = frozenset({("", "events"), ("events.k8s.io", "events")})

GroupResource = tuple[str, str]


@dataclass
class Monitor:
    info: ResourceInfo
    informer: SharedIndexInformer
    registration: Registration
    metadata_only: bool = False
    retiring: tuple[SharedIndexInformer, Registration] | None = None
    """The metadata-only watch this monitor is moving away from (module docstring), until the
    new registration has synced."""


def graph_handler(info: ResourceInfo, sink: Callable[[GraphEvent], None]) -> EventHandlerFuncs:
    """Informer notifications of one resource as graph events (kind/apiVersion from discovery)."""
    api_version, kind = info.api_version, info.kind

    def state(obj: dict[str, object]) -> ObjectState:
        return ObjectState.from_object(obj, api_version=api_version, kind=kind)

    def on_add(obj: dict[str, object], initial: bool) -> None:
        sink(GraphEvent("add", state(obj)))

    def on_update(old: dict[str, object], new: dict[str, object]) -> None:
        sink(GraphEvent("update", state(new), old=state(old)))

    def on_delete(obj: dict[str, object] | DeletedFinalStateUnknown) -> None:
        sink(GraphEvent("delete", state(obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj)))

    return EventHandlerFuncs(on_add_func=on_add, on_update_func=on_update, on_delete_func=on_delete)


def deletable(info: ResourceInfo) -> bool:
    return REQUIRED_VERBS <= set(info.verbs) and (info.group, info.resource) not in IGNORED_RESOURCES


class Monitors:
    """The set of monitored resources (see the module docstring)."""

    def __init__(self, factory: SharedInformerFactory, sink: Callable[[GraphEvent], None], *,
                 discovery: Discovery | None = None, metadata_informers: bool = True) -> None:
        self._factory = factory
        self._sink = sink
        self._discovery = discovery or Discovery(factory.rest)
        self.metadata_informers = metadata_informers
        self.monitors: dict[GroupResource, Monitor] = {}

    async def deletable_resources(self) -> tuple[dict[GroupResource, ResourceInfo], set[str]]:
        """(every deletable resource by group/resource in its preferred version, failed groups)."""
        self._discovery.invalidate()
        found: dict[GroupResource, ResourceInfo] = {}
        failed: set[str] = set()
        for gv in await self._discovery.group_versions():
            try:
                infos = await self._discovery.resources(gv)
            except errors.ClientError as e:
                log.warning("garbage collector: discovery of %s failed: %s", gv, e)
                failed.add(gv.rpartition("/")[0])
                continue
            for info in infos:
                if deletable(info):
                    found.setdefault((info.group, info.resource), info)
        return found, failed

    async def sync(self) -> bool:
        """Bring the monitors in line with discovery; True if anything changed."""
        wanted, failed_groups = await self.deletable_resources()
        changed = False
        for gr, mon in list(self.monitors.items()):
            if gr in wanted and wanted[gr].version == mon.info.version:
                changed |= await self._share_full_informer(mon)
                continue
            if gr not in wanted and gr[0] in failed_groups:
                continue  # unknown right now, not gone
            await self._remove(gr, mon)
            changed = True
        for gr, info in wanted.items():
            if gr in self.monitors:
                continue
            informer, metadata_only = await self._informer_for(info)
            reg = informer.add_event_handler(graph_handler(info, self._sink))
            self.monitors[gr] = Monitor(info, informer, reg, metadata_only=metadata_only)
            changed = True
        if changed:
            self._factory.start()
            log.info("garbage collector: monitoring %d resources", len(self.monitors))
        return changed

    async def _informer_for(self, info: ResourceInfo) -> tuple[SharedIndexInformer, bool]:
        """(the informer a new monitor of `info` uses, whether it is metadata-only)."""
        if not self.metadata_informers or self._factory.existing_informer(info) is not None:
            return await self._factory.informer_for(info.api_version, info.resource), False
        return await self._factory.metadata_informer_for(info.api_version, info.resource), True

    async def _share_full_informer(self, mon: Monitor) -> bool:
        """Move a metadata-only monitor onto a full informer created since (module docstring);
        True when a handler was added (the factory must start what is new)."""
        if mon.retiring is not None:
            if mon.registration.has_synced():
                await self._retire(mon)
            return False
        full = self._factory.existing_informer(mon.info) if mon.metadata_only else None
        if full is None:
            return False
        mon.retiring = (mon.informer, mon.registration)
        mon.informer, mon.metadata_only = full, False
        mon.registration = full.add_event_handler(graph_handler(mon.info, self._sink))
        log.info("garbage collector: %s.%s is cached in full now; sharing that informer", mon.info.resource,
                 mon.info.group)
        return True

    async def _retire(self, mon: Monitor) -> None:
        if mon.retiring is not None:
            informer, reg = mon.retiring
            mon.retiring = None
            informer.remove_event_handler(reg)
            await self._factory.remove_metadata_informer(mon.info)

    async def _remove(self, gr: GroupResource, mon: Monitor) -> None:
        del self.monitors[gr]
        mon.informer.remove_event_handler(mon.registration)
        await self._retire(mon)
        # The resource (or that version of it) is gone: its watch is useless.
        if mon.metadata_only:
            await self._factory.remove_metadata_informer(mon.info)
        else:
            await mon.informer.stop()
        log.info("garbage collector: stopped monitoring %s.%s", gr[1], gr[0])

    def has_synced(self) -> bool:
        return all(m.registration.has_synced() for m in self.monitors.values())

    def unsynced(self) -> list[str]:
        return sorted(f"{gr[1]}.{gr[0]}" for gr, m in self.monitors.items() if not m.registration.has_synced())

    async def stop(self) -> None:
        for mon in self.monitors.values():
            mon.informer.remove_event_handler(mon.registration)
            if mon.retiring is not None:
                mon.retiring[0].remove_event_handler(mon.retiring[1])
        self.monitors.clear()


@register(NAME, workers=20, aliases=("gc", "garbage-collector-controller"))
class GarbageCollector:
    """The controller: monitors + `Collector` + worker tasks."""

    name = NAME

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.mapper = ResourceMapper(ctx.rest, clock=ctx.clock)
        self.collector = Collector(ApiOperations(ctx.rest, self.mapper), recorder=ctx.recorder(COMPONENT))
        self.delete_queue: RateLimitingQueue[Node] = RateLimitingQueue(clock=ctx.clock)
        self.orphan_queue: RateLimitingQueue[Node] = RateLimitingQueue(clock=ctx.clock)
        self.collector.attempt_to_delete = self.delete_queue
        self.collector.attempt_to_orphan = self.orphan_queue
        self.monitors = Monitors(ctx.informers, self.collector.graph.process,
                                 metadata_informers=bool(ctx.options.get("gc_metadata_informers", True)))
        self.discovery_period = float(ctx.options.get("gc_discovery_period", DEFAULT_DISCOVERY_PERIOD))

    async def run(self, workers: int) -> None:
        tasks: list[asyncio.Task[None]] = []
        try:
            while True:
                try:
                    await self.monitors.sync()
                    break
                except errors.ClientError as e:
                    log.warning("garbage collector: initial discovery failed: %s; retrying", e)
                    await self.ctx.clock.sleep(1.0)
            await self._wait_for_sync()
            log.info("garbage collector: graph synced; %d workers", workers)
            loop = asyncio.get_running_loop()
            tasks.append(loop.create_task(self._resync_loop(), name="gc-discovery"))
            for i in range(max(1, workers)):
                tasks.append(loop.create_task(self._worker(self.delete_queue, self.collector.attempt_to_delete_worker),
                                              name=f"gc-delete-{i}"))
                tasks.append(loop.create_task(self._worker(self.orphan_queue, self.collector.attempt_to_orphan_worker),
                                              name=f"gc-orphan-{i}"))
            await asyncio.gather(*tasks)
        finally:
            self.delete_queue.shut_down()
            self.orphan_queue.shut_down()
            await cancel_and_wait(tasks)
            await self.monitors.stop()

    async def _wait_for_sync(self) -> None:
        waited = 0.0
        while not self.monitors.has_synced() and waited < SYNC_TIMEOUT:
            await self.ctx.clock.sleep(0.1)
            waited += 0.1
        if not self.monitors.has_synced():
            log.warning("garbage collector: starting with unsynced monitors: %s", ", ".join(self.monitors.unsynced()))

    async def _resync_loop(self) -> None:
        while True:
            await self.ctx.clock.sleep(self.discovery_period)
            try:
                if await self.monitors.sync():
                    self.mapper.forget()
            except errors.ClientError as e:
                log.warning("garbage collector: discovery resync failed: %s", e)

    async def _worker(self, queue: RateLimitingQueue[Node], handle: object) -> None:
        assert callable(handle)
        async for node in queue:
            try:
                action: Action = await handle(node)
            except asyncio.CancelledError:
                queue.done(node)
                raise
            except Exception as e:
                log.warning("garbage collector: error processing %s (retry %d): %s", node.identity,
                            queue.num_requeues(node) + 1, e, exc_info=log.isEnabledFor(logging.DEBUG))
                action = "requeue"
            if action == "requeue":
                queue.add_rate_limited(node)
            else:
                queue.forget(node)
            queue.done(node)


__all__ = ["Collector", "GarbageCollector", "Identity"]
