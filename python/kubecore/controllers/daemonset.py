"""The DaemonSet controller: one pod per eligible node, placed by the scheduler (upstream
pkg/controller/daemon/daemon_controller.go and update.go).

Events only say which DaemonSet to look at: a DaemonSet event enqueues it; a pod or
ControllerRevision event its controlling DaemonSet (orphans: every DaemonSet whose selector
matches); a new node every DaemonSet that should run on it; a node whose labels or taints
changed every DaemonSet whose answer for it changed; a deleted node every DaemonSet (kubecore
addition: its unscheduled pods for that node are then removed at once, not at the next sync).

A sync (`sync`), in upstream's order:

1. the DaemonSet from the cache (gone: forget its expectations); an empty selector `{}` only
   records a SelectingAll warning; a DaemonSet being deleted is left alone;
2. its history (`daemonset_history`): the current revision's hash labels new pods;
3. while earlier creates/deletes are unobserved (expectations), only the status is refreshed,
   without raising observedGeneration;
4. manage (`daemonset_sync.pods_should_be_on_node` for every node, plus unscheduled pods whose
   node is gone): create pods (slow-start batches, at most 250 per sync) each pinned to its node
   by a required node affinity on metadata.name, and delete pods;
5. RollingUpdate (OnDelete: nothing): `daemonset_sync.rolling_update_plan`, within maxSurge and
   maxUnavailable;
6. old revisions beyond revisionHistoryLimit deleted; status written (only when it changed),
   and with minReadySeconds a delayed requeue while ready pods are not yet available.

The controller never binds pods: the scheduler (or, until there is one, whoever writes
pods/binding) does.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import msgspec

from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.client.errors import NotFound
from kubecore.client.factory import SharedInformerFactory
from kubecore.client.indexer import DeletedFinalStateUnknown, Indexer
from kubecore.client.informer import EventHandlerFuncs
from kubecore.client.resource import ResourceClient
from kubecore.client.rest import RestClient
from kubecore.controllers.base import ControllerContext, QueueController, register
from kubecore.controllers.controller_utils import (
    NAMESPACE_TERMINATING_CAUSE, InvalidSelector, Selector, get_controller_of, has_status_cause, is_pod_ready,
    labels_of, meta, new_controller_ref, object_key, pod_phase, resolve_controller_ref, selecting_objects,
    selector_from_label_selector,
)
from kubecore.controllers.daemonset_history import DaemonSetHistory
from kubecore.controllers.daemonset_predicates import node_should_run_daemon_pod
from kubecore.controllers.daemonset_sync import (
    FailedPodsBackoff, NodeToPods, Plan, compute_status, pods_should_be_on_node, rolling_update_plan,
    unscheduled_pods_without_node, updated_desired_node_counts,
)
from kubecore.controllers.daemonset_util import (
    API_VERSION, KIND, ROLLING_UPDATE, UNIQUE_LABEL, create_pod_template, min_ready_seconds,
    replace_node_name_affinity, strategy_type, target_node_name, template, template_generation,
)
from kubecore.controllers.expectations import ControllerExpectations
from kubecore.controllers.history import ControllerHistory
from kubecore.controllers.podcontrol import (
    FAILED_CREATE, NORMAL, SUCCESSFUL_CREATE, WARNING, EventRecorderLike, RealPodControl,
    pod_from_template,
)
from kubecore.controllers.podview import namespace_pod_views
from kubecore.controllers.refmanager import AggregateError, PodControllerRefManager, recheck_deletion_timestamp

log = logging.getLogger(__name__)

Obj = dict[str, Any]
NAME = "daemonset"
COMPONENT = "daemonset-controller"
BURST_REPLICAS = 250
STATUS_UPDATE_RETRIES = 1
SELECTING_ALL = "SelectingAll"
STATUS_COUNTS = ("desiredNumberScheduled", "currentNumberScheduled", "numberMisscheduled", "numberReady",
                 "updatedNumberScheduled", "numberAvailable", "numberUnavailable")
_OMIT_WHEN_ZERO = ("observedGeneration", "updatedNumberScheduled", "numberAvailable", "numberUnavailable")


class DaemonSetsController(QueueController):
    """Runs until cancelled: `await DaemonSetsController(rest=..., informers=...).run(workers=2)`."""

    name = NAME
    description = "daemon sets controller"

    def __init__(self, *, rest: RestClient, informers: SharedInformerFactory,
                 recorder: EventRecorderLike | None = None, clock: Clock = REAL_CLOCK,
                 burst_replicas: int = BURST_REPLICAS) -> None:
        super().__init__(rest=rest, informers=informers, recorder=recorder, clock=clock)
        self.burst_replicas = burst_replicas
        self.expectations = ControllerExpectations(clock=clock)
        self.backoff = FailedPodsBackoff()
        self.ds_client: ResourceClient
        self.pods: ResourceClient
        self.ds_indexer: Indexer
        self.pod_indexer: Indexer
        self.node_indexer: Indexer
        self.pod_control: RealPodControl
        self.history: DaemonSetHistory

    # -- wiring -------------------------------------------------------------------------------------
    async def wire(self) -> None:
        self.pods = await self.rest.resource("v1", "pods")
        self.ds_client = await self.rest.resource(API_VERSION, "daemonsets")
        revisions = await self.rest.resource("apps/v1", "controllerrevisions")
        ds_informer = await self.informers.informer_for(API_VERSION, "daemonsets")
        rev_informer = await self.informers.informer_for("apps/v1", "controllerrevisions")
        pod_informer = await self.informers.informer_for("v1", "pods")
        node_informer = await self.informers.informer_for("v1", "nodes")
        self.ds_indexer, self.pod_indexer, self.node_indexer = (ds_informer.indexer, pod_informer.indexer,
                                                                node_informer.indexer)
        self.pod_control = RealPodControl(self.pods, self.recorder)
        self.history = DaemonSetHistory(history=ControllerHistory(revisions, rev_informer.indexer),
                                        ds_client=self.ds_client, pods=self.pods)
        self.wiring.add(ds_informer, EventHandlerFuncs(on_add_func=lambda obj, _i: self.enqueue(obj),
                                                       on_update_func=self._update_ds, on_delete_func=self._delete_ds))
        self.wiring.add(rev_informer, EventHandlerFuncs(on_add_func=self._add_history,
                                                        on_update_func=self._update_history,
                                                        on_delete_func=self._delete_history))
        self.wiring.add(pod_informer, EventHandlerFuncs(on_add_func=self._add_pod, on_update_func=self._update_pod,
                                                        on_delete_func=self._delete_pod))
        self.wiring.add(node_informer, EventHandlerFuncs(on_add_func=self._add_node, on_update_func=self._update_node,
                                                         on_delete_func=lambda _node: self._enqueue_all()))

    # -- lookups ------------------------------------------------------------------------------------
    def _enqueue_all(self) -> None:
        for key in self.ds_indexer.list_keys():
            self.queue.add(key)

    def resolve_controller_ref(self, namespace: str, ref: Obj) -> Obj | None:
        return resolve_controller_ref(self.ds_indexer, namespace, ref, kind=KIND)

    def daemon_sets_selecting(self, obj: Obj) -> list[Obj]:
        """DaemonSets in the object's namespace whose non-empty selector matches its labels."""
        out = selecting_objects(self.ds_indexer, obj)
        if len(out) > 1:
            log.warning("user error! more than one daemon is selecting objects with labels: %s", labels_of(obj))
        return out

    # -- event handlers -----------------------------------------------------------------------------
    def _update_ds(self, old: Obj, cur: Obj) -> None:
        if meta(old).get("uid") != meta(cur).get("uid"):
            self._delete_ds(DeletedFinalStateUnknown(object_key(old), old))
        self.enqueue(cur)

    def _delete_ds(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        ds = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        self.expectations.delete_expectations(object_key(ds))
        self.enqueue(ds)

    def _add_history(self, rev: Obj, _initial: bool) -> None:
        if meta(rev).get("deletionTimestamp"):
            self._delete_history(rev)
            return
        if get_controller_of(rev) is not None:
            return  # its DaemonSet made it: nothing to do
        for ds in self.daemon_sets_selecting(rev):
            self.enqueue(ds)

    def _update_history(self, old: Obj, cur: Obj) -> None:
        self._changed_owned(old, cur, observe=False)

    def _delete_history(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        rev = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        ref = get_controller_of(rev)
        ds = self.resolve_controller_ref(str(meta(rev).get("namespace") or ""), ref) if ref is not None else None
        if ds is not None:
            self.enqueue(ds)

    def _add_pod(self, pod: Obj, _initial: bool) -> None:
        if meta(pod).get("deletionTimestamp"):
            self._delete_pod(pod)
            return
        ref = get_controller_of(pod)
        if ref is not None:
            ds = self.resolve_controller_ref(str(meta(pod).get("namespace") or ""), ref)
            if ds is not None:
                self.expectations.creation_observed(object_key(ds))
                self.enqueue(ds)
            return
        for ds in self.daemon_sets_selecting(pod):
            self.enqueue(ds)

    def _update_pod(self, old: Obj, cur: Obj) -> None:
        if meta(old).get("resourceVersion") == meta(cur).get("resourceVersion"):
            return
        if meta(cur).get("deletionTimestamp"):
            self._delete_pod(cur)
            return
        ds = self._changed_owned(old, cur, observe=True)
        if ds is not None and min_ready_seconds(ds) > 0 and not is_pod_ready(old) and is_pod_ready(cur):
            self.queue.add_after(object_key(ds), min_ready_seconds(ds) + 1.0)

    def _changed_owned(self, old: Obj, cur: Obj, *, observe: bool) -> Obj | None:
        """Shared update logic of pods and revisions: enqueue the old and new controller, or for
        an orphan whose labels or controller changed, every DaemonSet selecting it."""
        if meta(old).get("resourceVersion") == meta(cur).get("resourceVersion"):
            return None
        cur_ref, old_ref = get_controller_of(cur), get_controller_of(old)
        ns = str(meta(cur).get("namespace") or "")
        if cur_ref != old_ref and old_ref is not None:
            old_ds = self.resolve_controller_ref(ns, old_ref)
            if old_ds is not None:
                self.enqueue(old_ds)
        if cur_ref is not None:
            ds = self.resolve_controller_ref(ns, cur_ref)
            if ds is not None:
                self.enqueue(ds)
            return ds
        if labels_of(old) != labels_of(cur) or cur_ref != old_ref:
            for ds in self.daemon_sets_selecting(cur):
                self.enqueue(ds)
        return None

    def _delete_pod(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        pod = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        ref = get_controller_of(pod)
        ds = self.resolve_controller_ref(str(meta(pod).get("namespace") or ""), ref) if ref is not None else None
        if ds is not None:
            self.expectations.deletion_observed(object_key(ds))
            self.enqueue(ds)

    def _add_node(self, node: Obj, _initial: bool) -> None:
        for ds in self.ds_indexer.list():
            if node_should_run_daemon_pod(node, ds)[0]:
                self.enqueue(ds)

    def _update_node(self, old: Obj, cur: Obj) -> None:
        if labels_of(old) == labels_of(cur) and \
                (old.get("spec") or {}).get("taints") == (cur.get("spec") or {}).get("taints"):
            return
        for ds in self.ds_indexer.list():
            if node_should_run_daemon_pod(old, ds) != node_should_run_daemon_pod(cur, ds):
                self.enqueue(ds)

    # -- pods of a DaemonSet ------------------------------------------------------------------------
    async def _fresh(self, ds: Obj) -> Obj:
        m = meta(ds)
        fresh = await self.ds_client.get(str(m.get("name")), namespace=str(m.get("namespace")))
        if meta(fresh).get("uid") != m.get("uid"):
            raise RuntimeError(f"original DaemonSet {m.get('namespace')}/{m.get('name')} is gone: got uid "
                               f"{meta(fresh).get('uid')}, wanted {m.get('uid')}")
        return fresh

    async def daemon_pods(self, ds: Obj, selector: Selector) -> list[Obj]:
        """Slim views of the pods `ds` owns after adopting and releasing."""
        manager = PodControllerRefManager(self.pod_control, ds, selector, api_version=API_VERSION, kind=KIND,
                                          can_adopt=recheck_deletion_timestamp(lambda: self._fresh(ds),
                                                                               uid=str(meta(ds).get("uid"))))
        claimed, error = await manager.claim_pods(namespace_pod_views(self.pod_indexer,
                                                                      str(meta(ds).get("namespace") or "")))
        if error is not None:
            raise error
        return claimed

    async def nodes_to_daemon_pods(self, ds: Obj, selector: Selector, *, include_deleted_terminal: bool) -> NodeToPods:
        out: NodeToPods = {}
        for pod in await self.daemon_pods(ds, selector):
            if not include_deleted_terminal and pod_phase(pod) in ("Succeeded", "Failed") and \
                    meta(pod).get("deletionTimestamp"):
                continue
            node = (pod.get("spec") or {}).get("nodeName")
            if not node:  # not bound yet: the view lacks the affinity, read the whole pod
                full = self.pod_indexer.get_by_key(object_key(pod))
                node = target_node_name(full) if full is not None else None
            if node:
                out.setdefault(str(node), []).append(pod)
        return out

    # -- sync ---------------------------------------------------------------------------------------
    async def sync(self, key: str) -> None:
        cached = self.ds_indexer.get_by_key(key)
        if cached is None:
            log.info("daemon set has been deleted %s", key)
            self.expectations.delete_expectations(key)
            return
        ds = {**cached, "apiVersion": API_VERSION, "kind": KIND}
        nodes = self.node_indexer.list()
        raw_selector = (ds.get("spec") or {}).get("selector")
        if raw_selector == {}:
            self.recorder.event(ds, WARNING, reason=SELECTING_ALL,
                                message="This daemon set is selecting all pods. A non-empty selector is required.")
            return
        try:
            selector = selector_from_label_selector(raw_selector)
        except InvalidSelector as e:
            log.error("DaemonSet %s has an invalid selector: %s", key, e)
            return
        if meta(ds).get("deletionTimestamp"):
            return
        self.backoff.gc(self.clock.now())
        cur, old = await self.history.construct_history(ds, selector, fresh=lambda: self._fresh(ds),
                                                        daemon_pods=lambda: self.daemon_pods(ds, selector))
        hash_ = labels_of(cur).get(UNIQUE_LABEL, "")
        if not self.expectations.satisfied_expectations(key):
            await self.update_status(ds, selector, nodes, hash_, update_observed_gen=False)
            return
        error: Exception | None = None
        try:
            await self.update_daemon_set(ds, selector, nodes, hash_, old, key=key)
        except Exception as e:
            error = e
        try:
            await self.update_status(ds, selector, nodes, hash_, update_observed_gen=True)
        except Exception as status_error:
            if error is None:
                raise
            log.error("failed to update status of DaemonSet %s: %s", key, status_error)
        if error is not None:
            raise error

    async def update_daemon_set(self, ds: Obj, selector: Selector, nodes: list[Obj], hash_: str, old: list[Obj], *,
                                key: str) -> None:
        await self.manage(ds, selector, nodes, hash_)
        if self.expectations.satisfied_expectations(key) and strategy_type(ds) == ROLLING_UPDATE:
            await self.rolling_update(ds, selector, nodes, hash_)
        node_to_pods = await self.nodes_to_daemon_pods(ds, selector, include_deleted_terminal=True)
        live = {labels_of(p).get(UNIQUE_LABEL, "") for pods in node_to_pods.values() for p in pods} - {""}
        await self.history.cleanup_history(ds, old, live)

    async def manage(self, ds: Obj, selector: Selector, nodes: list[Obj], hash_: str) -> None:
        node_to_pods = await self.nodes_to_daemon_pods(ds, selector, include_deleted_terminal=False)
        plan, now = Plan(), self.clock.now()
        for node in nodes:
            pods_should_be_on_node(node, node_to_pods, ds, hash_, now=now, backoff=self.backoff, plan=plan)
        plan.delete.extend(unscheduled_pods_without_node(nodes, node_to_pods))
        for event_type, reason, message in plan.events:
            self.recorder.event(ds, event_type, reason=reason, message=message)
        if plan.requeue_after is not None:
            self.queue.add_after(object_key(ds), plan.requeue_after)
        await self.sync_nodes(ds, plan.delete, plan.create_on, hash_)

    async def rolling_update(self, ds: Obj, selector: Selector, nodes: list[Obj], hash_: str) -> None:
        node_to_pods = await self.nodes_to_daemon_pods(ds, selector, include_deleted_terminal=False)
        max_surge, max_unavailable, desired = updated_desired_node_counts(ds, nodes, node_to_pods)
        by_name = {str(meta(n).get("name")): n for n in nodes}

        def should_run(node_name: str) -> bool:
            node = by_name.get(node_name)
            if node is None:
                raise LookupError(f"couldn't get node for nodeName {node_name!r}")
            return node_should_run_daemon_pod(node, ds)[0]

        delete, create = rolling_update_plan(ds, node_to_pods, hash_, max_surge=max_surge,
                                             max_unavailable=max_unavailable, desired=desired, now=self.clock.now(),
                                             should_run=should_run)
        await self.sync_nodes(ds, delete, create, hash_)

    # -- writes -------------------------------------------------------------------------------------
    async def sync_nodes(self, ds: Obj, pods_to_delete: list[str], nodes_needing_pods: list[str], hash_: str) -> None:
        """Create pods on the nodes and delete the pods, expecting each write first."""
        key = object_key(ds)
        create_n = min(len(nodes_needing_pods), self.burst_replicas)
        delete_n = min(len(pods_to_delete), self.burst_replicas)
        self.expectations.set_expectations(key, add=create_n, delete=delete_n)
        errors: list[BaseException] = []
        tmpl = create_pod_template(template(ds), generation=template_generation(ds), hash_=hash_)
        pos, batch = 0, min(create_n, 1)
        while batch > 0:
            batch_nodes = nodes_needing_pods[pos:pos + batch]
            results = await asyncio.gather(*(self._create_pod(ds, tmpl, n) for n in batch_nodes),
                                           return_exceptions=True)
            failed = [r for r in results if isinstance(r, BaseException)]
            for e in failed:
                if isinstance(e, asyncio.CancelledError):
                    raise e
                self.expectations.creation_observed(key)
            errors.extend(failed)
            pos += batch
            if failed and create_n - pos > 0:
                self.expectations.lower_expectations(key, add=create_n - pos)  # never attempted
                break
            batch = min(2 * batch, create_n - pos)
        deletes = await asyncio.gather(*(self.pod_control.delete_pod(str(meta(ds).get("namespace")), name, ds)
                                         for name in pods_to_delete[:delete_n]), return_exceptions=True)
        for result in deletes:
            if isinstance(result, BaseException):
                self.expectations.deletion_observed(key)
                if not isinstance(result, NotFound):
                    errors.append(result)
        if errors:
            raise errors[0] if len(errors) == 1 else AggregateError(errors)

    async def _create_pod(self, ds: Obj, tmpl: Obj, node_name: str) -> None:
        """Create one pod pinned to `node_name` (events as RealPodControl's)."""
        pinned = {**tmpl, "spec": {**(tmpl.get("spec") or {}),
                                   "affinity": replace_node_name_affinity((tmpl.get("spec") or {}).get("affinity"),
                                                                          node_name)}}
        pod = pod_from_template(pinned, owner=ds, controller_ref=new_controller_ref(ds, api_version=API_VERSION,
                                                                                    kind=KIND))
        namespace = str(meta(ds).get("namespace") or "")
        try:
            resp = await self.pods.rest.request("POST", self.pods.info.path(namespace=namespace),
                                                body=msgspec.json.encode(pod), content_type="application/json")
        except Exception as e:
            if has_status_cause(e, NAMESPACE_TERMINATING_CAUSE):
                return  # every later create fails the same way: the namespace is going away
            self.recorder.event(ds, WARNING, reason=FAILED_CREATE, message=f"Error creating: {e}")
            raise
        name = (resp.json() or {}).get("metadata", {}).get("name", "")
        self.recorder.event(ds, NORMAL, reason=SUCCESSFUL_CREATE, message=f"Created pod: {name}")

    async def update_status(self, ds: Obj, selector: Selector, nodes: list[Obj], hash_: str, *,
                            update_observed_gen: bool) -> None:
        node_to_pods = await self.nodes_to_daemon_pods(ds, selector, include_deleted_terminal=False)
        counts = compute_status(ds, nodes, node_to_pods, hash_, now=self.clock.now())
        await self.store_status(ds, counts, update_observed_gen=update_observed_gen)
        min_ready = min_ready_seconds(ds)
        if min_ready > 0 and counts["numberReady"] != counts["numberAvailable"]:
            self.queue.add_after(object_key(ds), float(min_ready))

    async def store_status(self, ds: Obj, counts: dict[str, int], *, update_observed_gen: bool) -> None:
        """Write the counts unless the DaemonSet already reports them for its generation."""
        old = ds.get("status") or {}
        generation = int(meta(ds).get("generation") or 0)
        if all(int(old.get(k) or 0) == v for k, v in counts.items()) and \
                int(old.get("observedGeneration") or 0) >= generation:
            return
        current = ds
        for attempt in range(STATUS_UPDATE_RETRIES + 1):
            status = {**(current.get("status") or {}), **counts}
            if update_observed_gen:
                status["observedGeneration"] = generation
            status = {k: v for k, v in status.items() if not (k in _OMIT_WHEN_ZERO and not v)}
            try:
                await self.ds_client.update_status({**current, "status": status},
                                                   namespace=str(meta(ds).get("namespace")))
                return
            except Exception:
                if attempt >= STATUS_UPDATE_RETRIES:
                    raise
                current = await self.ds_client.get(str(meta(ds).get("name")), namespace=str(meta(ds).get("namespace")))


@register(NAME, workers=2)
def new_daemonset_controller(ctx: ControllerContext) -> DaemonSetsController:
    """The controller manager's constructor for the DaemonSet controller."""
    return DaemonSetsController(rest=ctx.rest, informers=ctx.informers, recorder=ctx.recorder(COMPONENT),
                                clock=ctx.clock)
