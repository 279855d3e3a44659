"""The ReplicaSet controller: keep spec.replicas active pods matching a ReplicaSet's selector
(upstream pkg/controller/replicaset/replica_set.go). The same class runs ReplicationControllers
with another `ReplicaKind` (see `kubecore.controllers.replication`), as upstream does by conversion.

Level-driven. Informer events only say *which* object to look at: a ReplicaSet event enqueues
that ReplicaSet; a pod event enqueues its controller (resolved by name and checked by UID), or, for
an orphan, every ReplicaSet in its namespace whose selector matches it. A sync then reads
everything from the informer caches and reconciles:

1. the ReplicaSet from the cache (gone: forget its expectations, done);
2. the active pods of its namespace (slim views, `podview`), claimed (`refmanager`: adopt matching orphans, release owned
   pods that stopped matching);
3. if its expectations are satisfied and it is not being deleted, `manage_replicas`: too few pods
   -> create min(diff, burst_replicas) in slow-start batches 1, 2, 4, ... stopping at the first
   failing batch; too many -> delete min(diff, burst_replicas) chosen by `podranking`;
4. the status (`replicaset_status`), written through update_status only when it changed;
5. with minReadySeconds, a delayed requeue so availableReplicas catches up.

Expectations (`expectations`) make it safe while its own writes are in flight: before creating N
pods it expects N adds, each pod add event with this controller reference counts one, and until
they are all seen (or 5 minutes pass) no sync creates or deletes anything, so it never creates more
pods than wanted because its cache is behind. Deletions are expected by pod key, counted once
whether the informer first sees the deletionTimestamp or the delete.

A sync that fails (an API error creating, deleting, claiming or writing status) raises; the worker
requeues the key with the queue's per-item backoff.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.client.errors import Conflict, NotFound
from kubecore.client.factory import SharedInformerFactory
from kubecore.client.indexer import DeletedFinalStateUnknown, Indexer, split_meta_namespace_key
from kubecore.client.informer import EventHandlerFuncs
from kubecore.client.resource import ResourceClient
from kubecore.client.rest import RestClient
from kubecore.controllers.base import ControllerContext, QueueController, register
from kubecore.controllers.controller_utils import (
    CONTROLLER_UID_INDEX, NAMESPACE_TERMINATING_CAUSE, SLOW_START_INITIAL_BATCH_SIZE, InvalidSelector, Selector, filter_active_pods,
    controller_uid_index, get_controller_of, has_status_cause, is_pod_ready, labels_of, meta, new_controller_ref, object_key,
    resolve_controller_ref, selecting_objects, selector_from_label_selector, slow_start_batch,
)
from kubecore.controllers.expectations import UIDTrackingControllerExpectations
from kubecore.controllers.podcontrol import EventRecorderLike, PodControl, RealPodControl
from kubecore.controllers.podranking import get_pods_to_delete
from kubecore.controllers.podview import POD_OWNER_INDEX, namespace_pod_views, owned_pod_views, pod_owner_index
from kubecore.controllers.refmanager import PodControllerRefManager, recheck_deletion_timestamp
from kubecore.controllers.replicaset_status import (
    calculate_status, min_ready_seconds, spec_replicas, status_unchanged, with_status,
)

log = logging.getLogger(__name__)

Obj = dict[str, Any]

BURST_REPLICAS = 500
"""At most this many pods are created or deleted by one sync (upstream's BurstReplicas)."""
STATUS_UPDATE_RETRIES = 1


@dataclass(frozen=True)
class ReplicaKind:
    """What differs between ReplicaSets and ReplicationControllers."""

    name: str
    """The controller's name in the controller manager's registry."""
    api_version: str
    kind: str
    resource: str
    component: str
    """The events' source component."""
    selector_of: Callable[[Obj], Selector]
    """The compiled pod selector of an object (raises InvalidSelector)."""


def _rs_selector(obj: Obj) -> Selector:
    return selector_from_label_selector((obj.get("spec") or {}).get("selector"))


REPLICA_SET = ReplicaKind(name="replicaset", api_version="apps/v1", kind="ReplicaSet", resource="replicasets",
                          component="replicaset-controller", selector_of=_rs_selector)


class ReplicaSetController(QueueController):
    """Runs until cancelled: `await ReplicaSetController(rest=..., informers=...).run(workers=5)`."""

    def __init__(self, *, rest: RestClient, informers: SharedInformerFactory,
                 recorder: EventRecorderLike | None = None, clock: Clock = REAL_CLOCK,
                 burst_replicas: int = BURST_REPLICAS, kind: ReplicaKind = REPLICA_SET,
                 pod_control: PodControl | None = None) -> None:
        super().__init__(rest=rest, informers=informers, recorder=recorder, clock=clock)
        self.burst_replicas = burst_replicas
        self.kind = kind
        self.name = kind.name
        self.description = f"{kind.kind} controller"
        self.pod_control = pod_control
        self.expectations = UIDTrackingControllerExpectations(clock=clock)
        self._selectors: dict[str, tuple[str, Selector]] = {}
        self.rs_client: ResourceClient
        self.rs_indexer: Indexer
        self.pod_indexer: Indexer

    # -- wiring -----------------------------------------------------------------------------------
    async def wire(self) -> None:
        pods_client = await self.rest.resource("v1", "pods")
        self.rs_client = await self.rest.resource(self.kind.api_version, self.kind.resource)
        if self.pod_control is None:
            self.pod_control = RealPodControl(pods_client, self.recorder)
        rs_informer = await self.informers.informer_for(self.kind.api_version, self.kind.resource,
                                                        indexers={CONTROLLER_UID_INDEX: controller_uid_index})
        pod_informer = await self.informers.informer_for("v1", "pods", indexers={POD_OWNER_INDEX: pod_owner_index})
        self.rs_indexer, self.pod_indexer = rs_informer.indexer, pod_informer.indexer
        self.wiring.add(rs_informer, EventHandlerFuncs(
            on_add_func=lambda obj, _initial: self.enqueue(obj), on_update_func=self._update_rs,
            on_delete_func=self._delete_rs))
        self.wiring.add(pod_informer, EventHandlerFuncs(
            on_add_func=self._add_pod, on_update_func=self._update_pod, on_delete_func=self._delete_pod))

    # -- lookups ----------------------------------------------------------------------------------
    def selector_of(self, rs: Obj) -> Selector:
        """The compiled selector of `rs`, cached per resourceVersion (raises InvalidSelector)."""
        key, rv = object_key(rs), str(meta(rs).get("resourceVersion", ""))
        hit = self._selectors.get(key)
        if hit is not None and hit[0] == rv and rv:
            return hit[1]
        selector = self.kind.selector_of(rs)
        self._selectors[key] = (rv, selector)
        return selector

    def resolve_controller_ref(self, namespace: str, ref: Obj) -> Obj | None:
        """The cached object a controller reference names, if it is of our kind and UID."""
        return resolve_controller_ref(self.rs_indexer, namespace, ref, kind=self.kind.kind)

    def get_pod_replica_sets(self, pod: Obj) -> list[Obj]:
        """Every cached object in the pod's namespace whose (non-empty) selector matches the pod."""
        out = selecting_objects(self.rs_indexer, pod, selector_of=self.selector_of)
        if len(out) > 1:
            log.warning("user error: more than one %s selects pods with labels %s", self.kind.kind, labels_of(pod))
        return out

    # -- event handlers ---------------------------------------------------------------------------
    def _update_rs(self, old: Obj, cur: Obj) -> None:
        if meta(old).get("uid") != meta(cur).get("uid"):
            self._delete_rs(DeletedFinalStateUnknown(object_key(old), old))
        self.enqueue(cur)

    def _delete_rs(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        rs = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        key = object_key(rs)
        self.expectations.delete_expectations(key)
        self._selectors.pop(key, None)
        self.queue.add(key)

    def _add_pod(self, pod: Obj, _initial: bool) -> None:
        if meta(pod).get("deletionTimestamp"):
            self._delete_pod(pod)  # seen first while terminating: not a creation we wait for
            return
        ref = get_controller_of(pod)
        if ref is not None:
            rs = self.resolve_controller_ref(str(meta(pod).get("namespace") or ""), ref)
            if rs is not None:
                key = object_key(rs)
                self.expectations.creation_observed(key)
                self.queue.add(key)
            return
        for rs in self.get_pod_replica_sets(pod):  # an orphan: whoever matches may adopt it
            self.enqueue(rs)

    def _update_pod(self, old: Obj, cur: Obj) -> None:
        om, cm = meta(old), meta(cur)
        if om.get("resourceVersion") == cm.get("resourceVersion"):
            return  # a resync: nothing changed
        label_changed = labels_of(old) != labels_of(cur)
        if cm.get("deletionTimestamp"):
            self._delete_pod(cur)  # a graceful delete started: replace it now, not when it is gone
            if label_changed:
                self._delete_pod(old)
            return
        cur_ref, old_ref = get_controller_of(cur), get_controller_of(old)
        ref_changed = cur_ref != old_ref
        ns = str(cm.get("namespace") or "")
        if ref_changed and old_ref is not None:
            old_rs = self.resolve_controller_ref(ns, old_ref)
            if old_rs is not None:
                self.enqueue(old_rs)
        if cur_ref is not None:
            rs = self.resolve_controller_ref(ns, cur_ref)
            if rs is None:
                return
            self.enqueue(rs)
            min_ready = min_ready_seconds(rs)
            if min_ready > 0 and not is_pod_ready(old) and is_pod_ready(cur):
                self.queue.add_after(object_key(rs), min_ready + 1.0)  # availability check
            return
        if label_changed or ref_changed:
            for rs in self.get_pod_replica_sets(cur):
                self.enqueue(rs)

    def _delete_pod(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        pod = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        ref = get_controller_of(pod)
        if ref is None:
            return  # nobody cares about orphans going away
        rs = self.resolve_controller_ref(str(meta(pod).get("namespace") or ""), ref)
        if rs is None:
            return
        key = object_key(rs)
        self.expectations.deletion_observed(key, object_key(pod))
        self.queue.add(key)

    # -- sync -------------------------------------------------------------------------------------
    async def sync(self, key: str) -> None:
        """Reconcile one object by key (never called concurrently for one key: the queue's promise)."""
        cached = self.rs_indexer.get_by_key(key)
        if cached is None:
            self.expectations.delete_expectations(key)
            self._selectors.pop(key, None)
            return
        rs = {**cached, "apiVersion": self.kind.api_version, "kind": self.kind.kind}
        needs_sync = self.expectations.satisfied_expectations(key)
        try:
            selector = self.selector_of(rs)
        except InvalidSelector as e:
            log.error("%s %s has an invalid selector: %s", self.kind.kind, key, e)
            return
        namespace, _ = split_meta_namespace_key(key)
        pods = filter_active_pods(owned_pod_views(self.pod_indexer, namespace, str(meta(rs).get("uid") or "")))
        pods = await self.claim_pods(rs, selector, pods)
        manage_error: Exception | None = None
        if needs_sync and not meta(rs).get("deletionTimestamp"):
            try:
                await self.manage_replicas(pods, rs, key=key)
            except Exception as e:
                manage_error = e
        new_status = calculate_status(rs, pods, manage_error, now=self.clock.now())
        updated = await self.update_status(rs, new_status)
        status = updated.get("status") or {}
        min_ready = min_ready_seconds(updated)
        if manage_error is None and min_ready > 0 and status.get("readyReplicas") == spec_replicas(updated) \
                and status.get("availableReplicas") != spec_replicas(updated):
            self.queue.add_after(key, float(min_ready))  # guards against clock skew, as upstream
        if manage_error is not None:
            raise manage_error

    async def claim_pods(self, rs: Obj, selector: Selector, pods: list[Obj]) -> list[Obj]:
        m = meta(rs)

        async def fresh() -> Obj:
            return await self.rs_client.get(str(m.get("name")), namespace=str(m.get("namespace")))

        assert self.pod_control is not None
        manager = PodControllerRefManager(self.pod_control, rs, selector, api_version=self.kind.api_version,
                                          kind=self.kind.kind,
                                          can_adopt=recheck_deletion_timestamp(fresh, uid=str(m.get("uid"))))
        claimed, error = await manager.claim_pods(pods)
        if error is not None:
            raise error
        return claimed

    async def manage_replicas(self, pods: list[Obj], rs: Obj, *, key: str) -> None:
        """Create or delete pods so `rs` has spec.replicas (at most burst_replicas per call)."""
        assert self.pod_control is not None
        control = self.pod_control
        namespace = str(meta(rs).get("namespace") or "")
        diff = len(pods) - spec_replicas(rs)
        if diff < 0:
            count = min(-diff, self.burst_replicas)
            self.expectations.expect_creations(key, count)
            log.info("too few replicas for %s %s: need %d, creating %d", self.kind.kind, key,
                     spec_replicas(rs), count)
            template = (rs.get("spec") or {}).get("template") or {}
            ref = new_controller_ref(rs, api_version=self.kind.api_version, kind=self.kind.kind)

            async def create_one() -> None:
                try:
                    await control.create_pods(namespace, template, rs, ref)
                except Exception as e:
                    if not has_status_cause(e, NAMESPACE_TERMINATING_CAUSE):
                        raise  # a terminating namespace refuses every create: not worth an error

            successes, error = await slow_start_batch(count, SLOW_START_INITIAL_BATCH_SIZE, create_one)
            skipped = count - successes
            if skipped > 0:  # no watch event will come for these
                self.expectations.lower_expectations(key, add=skipped)
            if error is not None:
                raise error
        elif diff > 0:
            count = min(diff, self.burst_replicas)
            log.info("too many replicas for %s %s: need %d, deleting %d", self.kind.kind, key,
                     spec_replicas(rs), count)
            to_delete = get_pods_to_delete(pods, self.indirectly_related_pods(rs), count, now=self.clock.now())
            self.expectations.expect_deletions(key, [object_key(p) for p in to_delete])
            results = await asyncio.gather(*(control.delete_pod(namespace, str(meta(p).get("name")), rs)
                                             for p in to_delete), return_exceptions=True)
            errors: list[BaseException] = []
            for pod, result in zip(to_delete, results):
                if isinstance(result, BaseException):
                    self.expectations.deletion_observed(key, object_key(pod))
                    if not isinstance(result, NotFound):
                        errors.append(result)
            if errors:
                raise errors[0]

    def indirectly_related_pods(self, rs: Obj) -> list[Obj]:
        """Pods of every object with the same controller as `rs` (none when `rs` has no controller)."""
        ref = get_controller_of(rs)
        if ref is None:
            return []
        namespace = str(meta(rs).get("namespace") or "")
        pods = namespace_pod_views(self.pod_indexer, namespace)
        seen: set[str] = set()
        related: list[Obj] = []
        for other in self.rs_indexer.by_index(CONTROLLER_UID_INDEX, str(ref.get("uid"))):
            if meta(other).get("namespace") != namespace:
                continue
            try:
                selector = self.selector_of(other)
            except InvalidSelector:
                continue
            for pod in pods:
                uid = str(meta(pod).get("uid"))
                if uid not in seen and selector.matches(labels_of(pod)):
                    seen.add(uid)
                    related.append(pod)
        return related

    async def update_status(self, rs: Obj, new_status: Obj) -> Obj:
        """Write `new_status` unless nothing changed; one GET-and-retry after a conflict."""
        if status_unchanged(rs, new_status):
            return rs
        m = meta(rs)
        generation = int(m.get("generation") or 0)
        current = rs
        for attempt in range(STATUS_UPDATE_RETRIES + 1):
            try:
                return await self.rs_client.update_status(with_status(current, new_status, generation=generation))
            except Conflict:
                if attempt >= STATUS_UPDATE_RETRIES:
                    raise
                current = await self.rs_client.get(str(m.get("name")), namespace=str(m.get("namespace")))
        return current  # not reached


@register(REPLICA_SET.name, workers=5)
def new_replicaset_controller(ctx: ControllerContext) -> ReplicaSetController:
    """The controller manager's constructor for the ReplicaSet controller."""
    return ReplicaSetController(rest=ctx.rest, informers=ctx.informers, recorder=ctx.recorder(REPLICA_SET.component),
                                clock=ctx.clock)
