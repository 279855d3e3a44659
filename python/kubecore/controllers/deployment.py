"""The Deployment controller: roll a Deployment's pods from one template to the next through
ReplicaSets it owns (upstream pkg/controller/deployment/deployment_controller.go). The
ReplicaSet controller makes the pods; this one only sizes ReplicaSets.

Level-driven. Events say which Deployment to look at: its own events; a ReplicaSet event
enqueues the ReplicaSet's controller (or, for an orphan, every Deployment whose selector matches
it); a pod deletion enqueues a Recreate Deployment once none of its pods is left. A sync reads
the Deployment and ReplicaSets from the informer caches and then, in upstream's order:

1. claims ReplicaSets: adopts matching orphans, releases owned ones that stopped matching
   (`refmanager`'s claim rules, patching ReplicaSets instead of pods);
2. groups the Deployment's pods by ReplicaSet (for Recreate);
3. a Deployment being deleted only gets its status written;
4. records pause / resume in the Progressing condition;
5. paused -> `sync` (scale only); rollback annotation -> `rollback`; a changed spec.replicas ->
   `sync` (proportional scaling); otherwise the strategy: `rollout_rolling` or `rollout_recreate`.

The modules: `deployment_util` (revisions, annotations, hash, orders), `deployment_scaling`
(maxSurge/maxUnavailable arithmetic), `deployment_progress` (status and conditions),
`deployment_sync` (the writes), `deployment_rollout` (the strategies).

A failed sync is retried with the queue's per-item backoff up to 15 times, then dropped until
the next event (upstream's maxRetries); errors caused by a terminating namespace are not retried.
"""

from __future__ import annotations

import logging
from typing import Any

from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.client.factory import SharedInformerFactory
from kubecore.client.indexer import NAMESPACE_INDEX, DeletedFinalStateUnknown, Indexer
from kubecore.client.informer import EventHandlerFuncs
from kubecore.client.resource import ResourceClient
from kubecore.client.rest import RestClient
from kubecore.controllers.base import ControllerContext, QueueController, register
from kubecore.controllers.controller_utils import (
    CONTROLLER_UID_INDEX, NAMESPACE_TERMINATING_CAUSE, OWNER_INDEX, InvalidSelector, Selector, get_controller_of,
    has_status_cause, labels_of, meta, controller_uid_index, namespace_owner_index, object_key,
    resolve_controller_ref, selecting_objects, selector_from_label_selector,
)
from kubecore.controllers.deployment_rollout import rollback, rollout_recreate, rollout_rolling
from kubecore.controllers.deployment_scaling import RECREATE, ROLLING_UPDATE, strategy_type
from kubecore.controllers.deployment_sync import D_API_VERSION, D_KIND, DeploymentSync
from kubecore.controllers.deployment_util import get_rollback_to
from kubecore.controllers.podcontrol import WARNING, EventRecorderLike
from kubecore.controllers.podview import POD_OWNER_INDEX, controlled_pod_views, pod_owner_index
from kubecore.controllers.refmanager import PodControllerRefManager, recheck_deletion_timestamp

log = logging.getLogger(__name__)

Obj = dict[str, Any]

NAME = "deployment"
COMPONENT = "deployment-controller"
MAX_RETRIES = 15


class ReplicaSetPatcher:
    """The `PodControl` face `PodControllerRefManager` needs, for ReplicaSets: its claim rules
    are the same for any kind and only ever patch (upstream's RSControlInterface)."""

    def __init__(self, rs_client: ResourceClient) -> None:
        self.rs_client = rs_client

    async def patch_pod(self, namespace: str, name: str, patch: Obj) -> None:
        await self.rs_client.patch(name, patch, namespace=namespace, patch_type="strategic")

    async def create_pods(self, namespace: str, template: Obj, owner: Obj, controller_ref: Obj) -> None:
        raise NotImplementedError("a Deployment never creates pods")

    async def delete_pod(self, namespace: str, name: str, owner: Obj) -> None:
        raise NotImplementedError("a Deployment never deletes pods")


class DeploymentController(QueueController):
    """Runs until cancelled: `await DeploymentController(rest=..., informers=...).run(workers=5)`."""

    name = NAME
    description = "deployment controller"

    def __init__(self, *, rest: RestClient, informers: SharedInformerFactory,
                 recorder: EventRecorderLike | None = None, clock: Clock = REAL_CLOCK) -> None:
        super().__init__(rest=rest, informers=informers, recorder=recorder, clock=clock)
        self.d_client: ResourceClient
        self.rs_client: ResourceClient
        self.d_indexer: Indexer
        self.rs_indexer: Indexer
        self.pod_indexer: Indexer
        self.ops: DeploymentSync

    # -- wiring -------------------------------------------------------------------------------------
    async def wire(self) -> None:
        self.d_client = await self.rest.resource("apps/v1", "deployments")
        self.rs_client = await self.rest.resource("apps/v1", "replicasets")
        d_inf = await self.informers.informer_for("apps/v1", "deployments")
        rs_inf = await self.informers.informer_for("apps/v1", "replicasets",
                                                   indexers={CONTROLLER_UID_INDEX: controller_uid_index,
                                                             OWNER_INDEX: namespace_owner_index})
        pod_inf = await self.informers.informer_for("v1", "pods", indexers={POD_OWNER_INDEX: pod_owner_index})
        self.d_indexer, self.rs_indexer, self.pod_indexer = d_inf.indexer, rs_inf.indexer, pod_inf.indexer
        self.ops = DeploymentSync(rs_client=self.rs_client, d_client=self.d_client, recorder=self.recorder,
                                  clock=self.clock, rs_lookup=self.rs_indexer.get_by_key,
                                  enqueue_after=self.queue.add_after, enqueue_rate_limited=self.queue.add_rate_limited)
        self.wiring.add(d_inf, EventHandlerFuncs(
            on_add_func=lambda obj, _initial: self.enqueue(obj),
            on_update_func=lambda _old, cur: self.enqueue(cur), on_delete_func=self._delete_deployment))
        self.wiring.add(rs_inf, EventHandlerFuncs(
            on_add_func=self._add_rs, on_update_func=self._update_rs, on_delete_func=self._delete_rs))
        self.wiring.add(pod_inf, EventHandlerFuncs(on_delete_func=self._delete_pod))

    def on_sync_error(self, key: str, err: Exception) -> None:
        """Terminating namespaces are not retried; others up to MAX_RETRIES times with backoff."""
        if has_status_cause(err, NAMESPACE_TERMINATING_CAUSE):
            self.queue.forget(key)
        elif self.queue.num_requeues(key) < MAX_RETRIES:
            log.info("error syncing deployment %s: %s", key, err)
            self.queue.add_rate_limited(key)
        else:
            log.warning("dropping deployment %s out of the queue: %s", key, err)
            self.queue.forget(key)

    # -- lookups ------------------------------------------------------------------------------------
    def resolve_controller_ref(self, namespace: str, ref: Obj) -> Obj | None:
        return resolve_controller_ref(self.d_indexer, namespace, ref, kind=D_KIND)

    def deployments_for_rs(self, rs: Obj) -> list[Obj]:
        """Deployments of the ReplicaSet's namespace whose (non-empty) selector matches its labels."""
        out = selecting_objects(self.d_indexer, rs)
        if len(out) > 1:
            log.info("user error: more than one deployment selects replica set %s", object_key(rs))
        return out

    def deployment_for_pod(self, pod: Obj) -> Obj | None:
        ref = get_controller_of(pod)
        if ref is None or ref.get("kind") != "ReplicaSet":
            return None
        namespace = str(meta(pod).get("namespace") or "")
        rs = self.rs_indexer.get_by_key(f"{namespace}/{ref.get('name')}")
        if rs is None or meta(rs).get("uid") != ref.get("uid"):
            return None
        rs_ref = get_controller_of(rs)
        return self.resolve_controller_ref(namespace, rs_ref) if rs_ref is not None else None

    # -- event handlers -----------------------------------------------------------------------------
    def _delete_deployment(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        self.enqueue(obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj)

    def _add_rs(self, rs: Obj, _initial: bool) -> None:
        if meta(rs).get("deletionTimestamp"):
            self._delete_rs(rs)
            return
        ref = get_controller_of(rs)
        if ref is not None:
            d = self.resolve_controller_ref(str(meta(rs).get("namespace") or ""), ref)
            if d is not None:
                self.enqueue(d)
            return
        for d in self.deployments_for_rs(rs):
            self.enqueue(d)

    def _update_rs(self, old: Obj, cur: Obj) -> None:
        if meta(old).get("resourceVersion") == meta(cur).get("resourceVersion"):
            return
        namespace = str(meta(cur).get("namespace") or "")
        cur_ref, old_ref = get_controller_of(cur), get_controller_of(old)
        ref_changed = cur_ref != old_ref
        if ref_changed and old_ref is not None:
            d = self.resolve_controller_ref(namespace, old_ref)
            if d is not None:
                self.enqueue(d)
        if cur_ref is not None:
            d = self.resolve_controller_ref(namespace, cur_ref)
            if d is not None:
                self.enqueue(d)
            return
        if ref_changed or labels_of(old) != labels_of(cur):
            for d in self.deployments_for_rs(cur):
                self.enqueue(d)

    def _delete_rs(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        rs = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        ref = get_controller_of(rs)
        if ref is None:
            return
        d = self.resolve_controller_ref(str(meta(rs).get("namespace") or ""), ref)
        if d is not None:
            self.enqueue(d)

    def _delete_pod(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        """A Recreate Deployment waits for its old pods to be gone: look again when none is left."""
        pod = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        d = self.deployment_for_pod(pod)
        if d is None or strategy_type(d) != RECREATE:
            return
        try:
            selector = selector_from_label_selector((d.get("spec") or {}).get("selector"))
        except InvalidSelector:
            return
        if not any(self.pod_map(d, self.owned_replica_sets(d), selector).values()):
            self.enqueue(d)

    # -- reading the world --------------------------------------------------------------------------
    def owned_replica_sets(self, d: Obj) -> list[Obj]:
        namespace = meta(d).get("namespace")
        return [rs for rs in self.rs_indexer.by_index(CONTROLLER_UID_INDEX, str(meta(d).get("uid")))
                if meta(rs).get("namespace") == namespace]

    def pod_map(self, d: Obj, rs_list: list[Obj], selector: Selector) -> dict[str, list[Obj]]:
        """ReplicaSet UID -> the Deployment's pods it controls, finished pods included."""
        namespace = str(meta(d).get("namespace") or "")
        out: dict[str, list[Obj]] = {}
        for rs in rs_list:
            uid = str(meta(rs).get("uid"))
            out[uid] = [pod for pod in controlled_pod_views(self.pod_indexer, namespace, uid)
                        if selector.matches(labels_of(pod))]
        return out

    async def claim_replica_sets(self, d: Obj, selector: Selector) -> list[Obj]:
        m = meta(d)
        namespace, name = str(m.get("namespace") or ""), str(m.get("name"))

        async def fresh() -> Obj:
            return await self.d_client.get(name, namespace=namespace)

        can_adopt = recheck_deletion_timestamp(fresh, uid=str(m.get("uid")))
        manager = PodControllerRefManager(ReplicaSetPatcher(self.rs_client), d, selector, api_version=D_API_VERSION,
                                          kind=D_KIND, can_adopt=can_adopt)
        candidates = (self.rs_indexer.by_index(OWNER_INDEX, f"{namespace}/{m.get('uid') or ''}")
                      + self.rs_indexer.by_index(OWNER_INDEX, f"{namespace}/"))  # its own and the orphans
        claimed, error = await manager.claim_pods(candidates)
        if error is not None:
            raise error
        return claimed

    # -- sync ---------------------------------------------------------------------------------------
    async def sync(self, key: str) -> None:
        """Reconcile one Deployment (never concurrently for one key: the queue's promise)."""
        owned = self.d_indexer.copy_by_key(key)
        if owned is None:
            log.debug("deployment %s has been deleted", key)
            return
        d = {**owned, "apiVersion": D_API_VERSION, "kind": D_KIND}
        selector_spec = (d.get("spec") or {}).get("selector")
        if selector_spec == {}:
            await self._selecting_all(d)
            return
        try:
            selector = selector_from_label_selector(selector_spec)
        except InvalidSelector as e:
            raise ValueError(f"deployment {key} has invalid label selector: {e}") from e
        rs_list = await self.claim_replica_sets(d, selector)
        pod_map = self.pod_map(d, rs_list, selector)
        ops = self.ops
        if meta(d).get("deletionTimestamp"):
            await ops.sync_status_only(d, rs_list)
            return
        await ops.check_paused_conditions(d)
        if (d.get("spec") or {}).get("paused"):
            await ops.sync(d, rs_list)
        elif get_rollback_to(d) is not None:
            await rollback(ops, d, rs_list)
        elif await ops.is_scaling_event(d, rs_list):
            await ops.sync(d, rs_list)
        elif strategy_type(d) == RECREATE:
            await rollout_recreate(ops, d, rs_list, pod_map)
        elif strategy_type(d) == ROLLING_UPDATE:
            await rollout_rolling(ops, d, rs_list)
        else:
            raise ValueError(f"unexpected deployment strategy type: {strategy_type(d)}")

    async def _selecting_all(self, d: Obj) -> None:
        self.recorder.event(d, WARNING, reason="SelectingAll",
                            message="This deployment is selecting all pods. A non-empty selector is required.")
        status = d.setdefault("status", {})
        generation = int(meta(d).get("generation") or 0)
        if int(status.get("observedGeneration") or 0) < generation:
            status["observedGeneration"] = generation
            try:
                await self.d_client.update_status(d)
            except Exception as e:  # upstream ignores this write's outcome too
                log.debug("writing observedGeneration of %s failed: %s", object_key(d), e)


@register(NAME, workers=5)
def new_deployment_controller(ctx: ControllerContext) -> DeploymentController:
    """The controller manager's constructor for the Deployment controller."""
    return DeploymentController(rest=ctx.rest, informers=ctx.informers, recorder=ctx.recorder(COMPONENT),
                                clock=ctx.clock)
