"""The StatefulSet controller: stable, ordered pods with their own claims (upstream
pkg/controller/statefulset/stateful_set.go).

Level-driven like every controller here: a StatefulSet event enqueues that set; a pod event
enqueues its controlling set (resolved by name, checked by UID), or for an orphan every set in
its namespace whose selector matches. A sync (`sync`) then:

1. reads the set from the cache (gone: done) and compiles its selector (invalid: logged, not retried);
2. adopts orphaned ControllerRevisions matching the selector (after re-reading the set from the
   server, so a set being replaced never adopts);
3. claims pods: owned pods that are still members (named "<set>-<ordinal>" and matching the
   selector) are kept, owned non-members released, matching orphans adopted (`refmanager`);
4. hands the set and its pods to `statefulset_control.StatefulSetControl` (creates, deletes,
   rolling update, status, history);
5. with minReadySeconds, requeues after that long while not every replica is available.

There are no expectations: pod names are fixed, so a create the cache has not seen yet fails
with AlreadyExists and the sync is retried with backoff, as upstream.

Pods, claims and revisions it writes are described in `statefulset_utils`, `statefulset_pvc`
and `statefulset_podcontrol`; the ControllerRevision machinery is `history`.
"""

from __future__ import annotations

import logging
from typing import Any

from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.client.errors import Conflict
from kubecore.client.factory import SharedInformerFactory
from kubecore.client.indexer import DeletedFinalStateUnknown, Indexer, split_meta_namespace_key
from kubecore.client.informer import EventHandlerFuncs
from kubecore.client.resource import ResourceClient
from kubecore.client.rest import RestClient
from kubecore.controllers.base import ControllerContext, QueueController, register
from kubecore.controllers.controller_utils import (
    InvalidSelector, Selector, get_controller_of, is_pod_ready, labels_of, meta, object_key, resolve_controller_ref,
    selecting_objects, selector_from_label_selector,
)
from kubecore.controllers.history import ControllerHistory
from kubecore.controllers.podcontrol import EventRecorderLike, RealPodControl
from kubecore.controllers.podview import namespace_pod_views
from kubecore.controllers.refmanager import PodControllerRefManager, recheck_deletion_timestamp
from kubecore.controllers.statefulset_control import StatefulSetControl
from kubecore.controllers.statefulset_podcontrol import StatefulPodControl
from kubecore.controllers.statefulset_utils import API_VERSION, KIND, is_member_of, min_ready_seconds, replicas

log = logging.getLogger(__name__)

Obj = dict[str, Any]
NAME = "statefulset"
COMPONENT = "statefulset-controller"
STATUS_UPDATE_RETRIES = 5
_OMIT_WHEN_ZERO = ("observedGeneration", "readyReplicas", "currentReplicas", "updatedReplicas", "currentRevision",
                   "updateRevision")


def wire_status(status: Obj) -> Obj:
    """The status as upstream serialises it (omitempty fields left out when zero)."""
    return {k: v for k, v in status.items() if not (k in _OMIT_WHEN_ZERO and not v)}


class _MemberRefManager(PodControllerRefManager):
    """Claims only pods named like members of the set (upstream's ClaimPods filter)."""

    def _match(self, pod: Obj) -> bool:
        return super()._match(pod) and is_member_of(self.controller, pod)


class StatefulSetController(QueueController):
    """Runs until cancelled: `await StatefulSetController(rest=..., informers=...).run(workers=5)`."""

    name = NAME
    description = "statefulset controller"

    def __init__(self, *, rest: RestClient, informers: SharedInformerFactory,
                 recorder: EventRecorderLike | None = None, clock: Clock = REAL_CLOCK) -> None:
        super().__init__(rest=rest, informers=informers, recorder=recorder, clock=clock)
        self.set_client: ResourceClient
        self.set_indexer: Indexer
        self.pod_indexer: Indexer
        self.pod_control: RealPodControl
        self.control: StatefulSetControl

    # -- wiring -------------------------------------------------------------------------------------
    async def wire(self) -> None:
        pods = await self.rest.resource("v1", "pods")
        claims = await self.rest.resource("v1", "persistentvolumeclaims")
        revisions = await self.rest.resource("apps/v1", "controllerrevisions")
        self.set_client = await self.rest.resource(API_VERSION, "statefulsets")
        set_informer = await self.informers.informer_for(API_VERSION, "statefulsets")
        pod_informer = await self.informers.informer_for("v1", "pods")
        claim_informer = await self.informers.informer_for("v1", "persistentvolumeclaims")
        revision_informer = await self.informers.informer_for("apps/v1", "controllerrevisions")
        self.set_indexer, self.pod_indexer = set_informer.indexer, pod_informer.indexer
        self.pod_control = RealPodControl(pods, self.recorder)
        stateful_pods = StatefulPodControl(pods=pods, claims=claims, pod_indexer=pod_informer.indexer,
                                           claim_indexer=claim_informer.indexer, recorder=self.recorder)
        self.control = StatefulSetControl(pod_control=stateful_pods,
                                          history=ControllerHistory(revisions, revision_informer.indexer),
                                          status_updater=self.update_status, clock=self.clock)
        self.wiring.add(set_informer, EventHandlerFuncs(
            on_add_func=lambda obj, _initial: self.enqueue(obj), on_update_func=lambda _old, cur: self.enqueue(cur),
            on_delete_func=self._delete_set))
        self.wiring.add(pod_informer, EventHandlerFuncs(
            on_add_func=self._add_pod, on_update_func=self._update_pod, on_delete_func=self._delete_pod))
        self.wiring.add(claim_informer)
        self.wiring.add(revision_informer)

    # -- lookups ------------------------------------------------------------------------------------
    def resolve_controller_ref(self, namespace: str, ref: Obj) -> Obj | None:
        return resolve_controller_ref(self.set_indexer, namespace, ref, kind=KIND)

    def sets_for_pod(self, pod: Obj) -> list[Obj]:
        out = selecting_objects(self.set_indexer, pod)
        if len(out) > 1:
            log.warning("user error: more than one StatefulSet is selecting pods with labels: %s", labels_of(pod))
        return out

    # -- event handlers -----------------------------------------------------------------------------
    def _delete_set(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        self.enqueue(obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj)

    def _add_pod(self, pod: Obj, _initial: bool) -> None:
        if meta(pod).get("deletionTimestamp"):
            self._delete_pod(pod)
            return
        ref = get_controller_of(pod)
        if ref is not None:
            set_ = self.resolve_controller_ref(str(meta(pod).get("namespace") or ""), ref)
            if set_ is not None:
                self.enqueue(set_)
            return
        for set_ in self.sets_for_pod(pod):
            self.enqueue(set_)

    def _update_pod(self, old: Obj, cur: Obj) -> None:
        if meta(old).get("resourceVersion") == meta(cur).get("resourceVersion"):
            return
        label_changed = labels_of(old) != labels_of(cur)
        cur_ref, old_ref = get_controller_of(cur), get_controller_of(old)
        ns = str(meta(cur).get("namespace") or "")
        ref_changed = cur_ref != old_ref
        if ref_changed and old_ref is not None:
            old_set = self.resolve_controller_ref(ns, old_ref)
            if old_set is not None:
                self.enqueue(old_set)
        if cur_ref is not None:
            set_ = self.resolve_controller_ref(ns, cur_ref)
            if set_ is None:
                return
            self.enqueue(set_)
            min_ready = min_ready_seconds(set_)
            if min_ready > 0 and not is_pod_ready(old) and is_pod_ready(cur):
                self.queue.add_after(object_key(set_), float(min_ready))
            return
        if label_changed or ref_changed:
            for set_ in self.sets_for_pod(cur):
                self.enqueue(set_)

    def _delete_pod(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        pod = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        ref = get_controller_of(pod)
        if ref is None:
            return
        set_ = self.resolve_controller_ref(str(meta(pod).get("namespace") or ""), ref)
        if set_ is not None:
            self.enqueue(set_)

    # -- sync ---------------------------------------------------------------------------------------
    async def sync(self, key: str) -> None:
        cached = self.set_indexer.get_by_key(key)
        if cached is None:
            log.info("StatefulSet has been deleted %s", key)
            return
        set_ = {**cached, "apiVersion": API_VERSION, "kind": KIND}
        try:
            selector = selector_from_label_selector((set_.get("spec") or {}).get("selector"))
        except InvalidSelector as e:
            log.error("error converting StatefulSet %s selector: %s", key, e)
            return  # not transient: no retry
        await self.adopt_orphan_revisions(set_, selector)
        pods = await self.claim_pods(set_, selector)
        status = await self.control.update_stateful_set(set_, pods, selector)
        min_ready = min_ready_seconds(set_)
        if min_ready > 0 and int(status.get("availableReplicas") or 0) != replicas(set_):
            self.queue.add_after(key, float(min_ready))

    async def _fresh_set(self, set_: Obj) -> Obj:
        m = meta(set_)
        fresh = await self.set_client.get(str(m.get("name")), namespace=str(m.get("namespace")))
        if meta(fresh).get("uid") != m.get("uid"):
            raise RuntimeError(f"original StatefulSet {m.get('namespace')}/{m.get('name')} is gone: got uid "
                               f"{meta(fresh).get('uid')}, wanted {m.get('uid')}")
        return fresh

    async def adopt_orphan_revisions(self, set_: Obj, selector: Selector) -> None:
        orphans = [r for r in self.control.list_revisions(set_, selector) if get_controller_of(r) is None]
        if not orphans:
            return
        await self._fresh_set(set_)
        for rev in orphans:
            await self.control.history.adopt_controller_revision(set_, api_version=API_VERSION, kind=KIND,
                                                                 revision=rev)

    async def claim_pods(self, set_: Obj, selector: Selector) -> list[Obj]:
        """The full cached objects of the pods this set owns after adopting and releasing."""
        namespace, _ = split_meta_namespace_key(object_key(set_))
        manager = _MemberRefManager(self.pod_control, set_, selector, api_version=API_VERSION, kind=KIND,
                                    can_adopt=recheck_deletion_timestamp(lambda: self._fresh_set(set_),
                                                                         uid=str(meta(set_).get("uid"))))
        claimed, error = await manager.claim_pods(namespace_pod_views(self.pod_indexer, namespace))
        if error is not None:
            raise error
        pods = []
        uid = meta(set_).get("uid")
        for view in claimed:
            pod = self.pod_indexer.get_by_key(object_key(view))
            if pod is None:
                continue
            if get_controller_of(pod) is None:  # adopted just now: the cache has the orphan
                pod = {**pod, "metadata": {**meta(pod), "ownerReferences": [
                    {"apiVersion": API_VERSION, "kind": KIND, "name": meta(set_).get("name"), "uid": uid,
                     "controller": True, "blockOwnerDeletion": True}]}}
            pods.append(pod)
        return pods

    async def update_status(self, set_: Obj, status: Obj) -> None:
        """Write `status` through the status subresource, re-reading the set after a conflict."""
        m = meta(set_)
        current = set_
        for attempt in range(STATUS_UPDATE_RETRIES):
            try:
                await self.set_client.update_status({**current, "status": wire_status(status)},
                                                    namespace=str(m.get("namespace")))
                return
            except Conflict:
                if attempt == STATUS_UPDATE_RETRIES - 1:
                    raise
                current = await self.set_client.get(str(m.get("name")), namespace=str(m.get("namespace")))


@register(NAME, workers=5)
def new_statefulset_controller(ctx: ControllerContext) -> StatefulSetController:
    """The controller manager's constructor for the StatefulSet controller."""
    return StatefulSetController(rest=ctx.rest, informers=ctx.informers, recorder=ctx.recorder(COMPONENT),
                                 clock=ctx.clock)
