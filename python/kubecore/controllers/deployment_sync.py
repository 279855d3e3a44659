"""The writes a Deployment sync makes, shared by every strategy (upstream sync.go and the writing
half of progress.go): find or create the new ReplicaSet and keep revisions in step, scale a
ReplicaSet (with its ScalingReplicaSet event), scale proportionally, delete old ReplicaSets
beyond revisionHistoryLimit, and write the Deployment's status.

`DeploymentSync` works on the sync's own deep copy of the Deployment, `d`, and mutates it as
upstream does (the revision annotation, conditions, collisionCount); ReplicaSets come from the
informer cache and are copied before any change. Every write is an optimistic-concurrency update
of what the cache showed: if the cache was behind, the server answers 409, the error propagates
and the queue retries the Deployment with backoff; no expectations are needed because the new
ReplicaSet's name is deterministic (`<deployment>-<pod-template-hash>`), so creating it twice
fails with AlreadyExists instead of doubling anything.

Unlike upstream, a write's answer replaces what the sync holds (a status write refreshes `d`'s
resourceVersion, an updated new ReplicaSet replaces its cached copy in the sync's list), so a
second write in the same sync (revision first, rollout status after) does not fail with a
conflict and cost a retry.

Events (reason ScalingReplicaSet, type Normal) as upstream words them:
    "Scaled up replica set <rs> to <n>"                        (the new ReplicaSet, created at n)
    "Scaled <up|down> replica set <rs> to <new> from <old>"    (any later size change)
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kubecore.client.errors import AlreadyExists, NotFound
from kubecore.client.resource import ResourceClient
from kubecore.client.clock import Clock
from kubecore.controllers.controller_utils import (
    NAMESPACE_TERMINATING_CAUSE, has_status_cause, meta, new_controller_ref, object_key,
)
from kubecore.controllers.deployment_progress import (
    FAILED_RS_CREATE_REASON, FOUND_NEW_RS_REASON, FALSE, NEW_REPLICA_SET_REASON, PROGRESSING, TRUE,
    calculate_status, get_condition, new_condition, paused_condition_changed, requeue_after, rollout_status,
    set_condition, status_equal, status_of,
)
from kubecore.controllers.deployment_scaling import (
    is_rolling_update, is_saturated, max_surge, new_rs_new_replicas, proportional_plan,
)
from kubecore.controllers.deployment_util import (
    DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY, REVISION_ANNOTATION, annotations_of, compute_hash, deep_copy,
    desired_replicas_annotation, equal_ignore_hash, filter_active_replica_sets, find_active_or_latest,
    find_new_replica_set, find_old_replica_sets, get_rollback_to, has_progress_deadline, has_revision_history_limit,
    max_revision,
    replicas_annotations_need_update, replicas_of, set_deployment_revision, set_new_replica_set_annotations,
    set_replicas_annotations, sorted_by_revision, status_int, template_of,
)
from kubecore.controllers.podcontrol import NORMAL, WARNING, EventRecorderLike

log = logging.getLogger(__name__)

Obj = dict[str, Any]

SCALING_REPLICA_SET = "ScalingReplicaSet"
RS_API_VERSION, RS_KIND = "apps/v1", "ReplicaSet"
D_API_VERSION, D_KIND = "apps/v1", "Deployment"


def _with_kind(rs: Obj) -> Obj:
    rs["apiVersion"], rs["kind"] = RS_API_VERSION, RS_KIND
    return rs


class DeploymentSync:
    """The write operations of one controller; stateless apart from its clients."""

    def __init__(self, *, rs_client: ResourceClient, d_client: ResourceClient, recorder: EventRecorderLike,
                 clock: Clock, rs_lookup: Callable[[str], Obj | None],
                 enqueue_after: Callable[[str, float], None], enqueue_rate_limited: Callable[[str], None]) -> None:
        self.rs_client = rs_client
        self.d_client = d_client
        self.recorder = recorder
        self.clock = clock
        self.rs_lookup = rs_lookup
        """"<namespace>/<name>" -> the cached ReplicaSet (None if not cached)."""
        self.enqueue_after = enqueue_after
        self.enqueue_rate_limited = enqueue_rate_limited

    # -- the Deployment -----------------------------------------------------------------------------
    async def update_status(self, d: Obj) -> Obj:
        """PUT `d`'s status (and, as upstream's status strategy allows, its annotations)."""
        updated = await self.d_client.update_status(d)
        rv = meta(updated).get("resourceVersion")
        if rv:
            d.setdefault("metadata", {})["resourceVersion"] = rv
        return updated

    async def check_paused_conditions(self, d: Obj) -> None:
        if paused_condition_changed(d, now=self.clock.now()):
            await self.update_status(d)

    async def sync_deployment_status(self, all_rses: list[Obj | None], new_rs: Obj | None, d: Obj) -> None:
        """Write the counts and the Available condition if they changed (syncDeploymentStatus)."""
        new_status = calculate_status(all_rses, new_rs, d, now=self.clock.now())
        if status_equal(status_of(d), new_status):
            return
        d["status"] = new_status
        await self.update_status(d)

    async def sync_rollout_status(self, all_rses: list[Obj | None], new_rs: Obj | None, d: Obj) -> None:
        """Write the status of a rollout (syncRolloutStatus); unchanged: maybe requeue to check
        the progress deadline later."""
        new_status = rollout_status(all_rses, new_rs, d, now=self.clock.now())
        if status_equal(status_of(d), new_status):
            delay = requeue_after(d, new_status, now=self.clock.now())
            if delay == 0.0:
                self.enqueue_rate_limited(object_key(d))
            elif delay is not None:
                self.enqueue_after(object_key(d), delay)
            return
        d["status"] = new_status
        await self.update_status(d)

    # -- the new ReplicaSet and revisions -----------------------------------------------------------
    async def get_all_replica_sets_and_sync_revision(self, d: Obj, rs_list: list[Obj], *,
                                                     create: bool) -> tuple[Obj | None, list[Obj]]:
        """(the new ReplicaSet, every old one), the new one's revision brought up to date."""
        _, all_old = find_old_replica_sets(d, rs_list)
        new_rs = await self.get_new_replica_set(d, rs_list, all_old, create=create)
        return new_rs, all_old

    async def get_new_replica_set(self, d: Obj, rs_list: list[Obj], old_rses: list[Obj], *,
                                  create: bool) -> Obj | None:
        """The ReplicaSet whose template is the Deployment's, its annotations synced; created
        (with revision max(old) + 1) when missing and `create` (getNewReplicaSet)."""
        existing = find_new_replica_set(d, rs_list)
        new_revision = str(max_revision(old_rses) + 1)
        if existing is not None:
            synced = await self._sync_existing_new_rs(d, existing, new_revision)
            if synced is not existing:  # later steps of this sync must not write the stale copy
                rs_list[:] = [synced if rs is existing else rs for rs in rs_list]
            return synced
        if not create:
            return None
        return await self._create_new_rs(d, old_rses, new_revision)

    async def _sync_existing_new_rs(self, d: Obj, existing: Obj, new_revision: str) -> Obj:
        rs_copy = _with_kind(deep_copy(existing))
        annotations_updated = set_new_replica_set_annotations(d, rs_copy, new_revision, exists=True,
                                                              max_surge=max_surge(d))
        d_min_ready = int((d.get("spec") or {}).get("minReadySeconds") or 0)
        if annotations_updated or int(rs_copy["spec"].get("minReadySeconds") or 0) != d_min_ready:
            rs_copy["spec"]["minReadySeconds"] = d_min_ready
            return await self.rs_client.update(rs_copy)
        needs_update = set_deployment_revision(d, annotations_of(rs_copy).get(REVISION_ANNOTATION, ""))
        if has_progress_deadline(d) and get_condition(status_of(d), PROGRESSING) is None:
            msg = f'Found new replica set "{meta(rs_copy).get("name")}"'
            set_condition(d.setdefault("status", {}), new_condition(PROGRESSING, TRUE, reason=FOUND_NEW_RS_REASON,
                                                                    message=msg, now=self.clock.now()))
            needs_update = True
        if needs_update:
            await self.update_status(d)
        return rs_copy

    def new_replica_set_object(self, d: Obj, old_rses: list[Obj], new_revision: str) -> Obj:
        """The ReplicaSet a Deployment creates for its current template."""
        template = deep_copy(template_of(d))
        pod_hash = compute_hash(template_of(d), status_of(d).get("collisionCount"))
        labels = {**((template.get("metadata") or {}).get("labels") or {}),
                  DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY: pod_hash}
        template.setdefault("metadata", {})["labels"] = labels
        selector = deep_copy((d.get("spec") or {}).get("selector") or {})
        selector["matchLabels"] = {**(selector.get("matchLabels") or {}), DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY: pod_hash}
        dm = meta(d)
        rs: Obj = {"apiVersion": RS_API_VERSION, "kind": RS_KIND,
                   "metadata": {"name": f"{dm.get('name')}-{pod_hash}", "namespace": dm.get("namespace"),
                                "ownerReferences": [new_controller_ref(d, api_version=D_API_VERSION, kind=D_KIND)],
                                "labels": dict(labels)},
                   "spec": {"replicas": 0, "minReadySeconds": int((d.get("spec") or {}).get("minReadySeconds") or 0),
                            "selector": selector, "template": template}}
        rs["spec"]["replicas"] = new_rs_new_replicas(d, [*old_rses, rs], rs)
        set_new_replica_set_annotations(d, rs, new_revision, exists=False, max_surge=max_surge(d))
        return rs

    async def _create_new_rs(self, d: Obj, old_rses: list[Obj], new_revision: str) -> Obj:
        rs = self.new_replica_set_object(d, old_rses, new_revision)
        name, count = str(rs["metadata"]["name"]), int(rs["spec"]["replicas"])
        already_exists = False
        try:
            created = await self.rs_client.create(rs)
        except AlreadyExists:
            already_exists = True
            created = await self._existing_or_collision(d, rs)
        except Exception as e:
            if has_status_cause(e, NAMESPACE_TERMINATING_CAUSE):
                raise
            msg = f'Failed to create new replica set "{name}": {e}'
            if has_progress_deadline(d):
                set_condition(d.setdefault("status", {}), new_condition(
                    PROGRESSING, FALSE, reason=FAILED_RS_CREATE_REASON, message=msg, now=self.clock.now()))
                try:
                    await self.update_status(d)
                except Exception as status_error:  # the create error is the one worth reporting
                    log.debug("writing the status of %s failed: %s", object_key(d), status_error)
            self.recorder.event(d, WARNING, reason=FAILED_RS_CREATE_REASON, message=msg)
            raise
        if not already_exists and count > 0:
            self.recorder.event(d, NORMAL, reason=SCALING_REPLICA_SET,
                                message=f"Scaled up replica set {name} to {count}")
        needs_update = set_deployment_revision(d, new_revision)
        if not already_exists and has_progress_deadline(d):
            set_condition(d.setdefault("status", {}), new_condition(
                PROGRESSING, TRUE, reason=NEW_REPLICA_SET_REASON, message=f'Created new replica set "{name}"',
                now=self.clock.now()))
            needs_update = True
        if needs_update:
            await self.update_status(d)
        return created

    async def _existing_or_collision(self, d: Obj, rs: Obj) -> Obj:
        """After AlreadyExists: the cached ReplicaSet of that name if it is ours with our template;
        otherwise a hash collision: bump status.collisionCount and fail (the retry picks a new name)."""
        key = f"{meta(rs)['namespace']}/{meta(rs)['name']}"
        cached = self.rs_lookup(key)
        if cached is None:
            raise NotFound({"kind": "Status", "reason": "NotFound", "code": 404,
                            "message": f'replicaset.apps "{meta(rs)["name"]}" not found'}, code=404)
        ref = next((r for r in meta(cached).get("ownerReferences") or () if r.get("controller") is True), None)
        if ref is not None and ref.get("uid") == meta(d).get("uid") and \
                equal_ignore_hash(template_of(d), template_of(cached)):
            return _with_kind(deep_copy(cached))
        status = d.setdefault("status", {})
        before = status.get("collisionCount")
        status["collisionCount"] = int(before or 0) + 1
        try:
            await self.update_status(d)
            log.info("found a hash collision for deployment %s: collisionCount %s -> %d", object_key(d), before,
                     status["collisionCount"])
        except Exception as e:
            log.debug("writing collisionCount of %s failed: %s", object_key(d), e)
        raise AlreadyExists({"kind": "Status", "reason": "AlreadyExists", "code": 409,
                             "message": f'replicasets.apps "{meta(rs)["name"]}" already exists'}, code=409)

    # -- scaling --------------------------------------------------------------------------------------
    async def scale_replica_set(self, rs: Obj, new_scale: int, d: Obj, operation: str) -> tuple[bool, Obj]:
        """Set `rs`'s size and replica annotations; the event only for a size change."""
        replicas = replicas_of(d)
        max_replicas = replicas + max_surge(d)
        size_changed = replicas_of(rs) != new_scale
        if not size_changed and not replicas_annotations_need_update(rs, replicas, max_replicas):
            return False, rs
        old_scale = replicas_of(rs)
        rs_copy = _with_kind(deep_copy(rs))
        rs_copy.setdefault("spec", {})["replicas"] = new_scale
        set_replicas_annotations(rs_copy, replicas, max_replicas)
        updated = await self.rs_client.update(rs_copy)
        if size_changed:
            self.recorder.event(d, NORMAL, reason=SCALING_REPLICA_SET,
                                message=f"Scaled {operation} replica set {meta(updated).get('name')} to {new_scale} "
                                        f"from {old_scale}")
        return size_changed, updated

    async def scale_replica_set_and_record_event(self, rs: Obj, new_scale: int, d: Obj) -> tuple[bool, Obj]:
        if replicas_of(rs) == new_scale:
            return False, rs
        return await self.scale_replica_set(rs, new_scale, d, "up" if replicas_of(rs) < new_scale else "down")

    async def scale(self, d: Obj, new_rs: Obj | None, old_rses: list[Obj]) -> None:
        """A scaling event (or a paused Deployment): resize without advancing the rollout."""
        target = find_active_or_latest(new_rs, old_rses)
        if target is not None:
            if replicas_of(target) != replicas_of(d):
                await self.scale_replica_set_and_record_event(target, replicas_of(d), d)
            return
        if is_saturated(d, new_rs):
            for old in filter_active_replica_sets(old_rses):
                await self.scale_replica_set_and_record_event(old, 0, d)
            return
        if is_rolling_update(d):
            plan, operation = proportional_plan(d, [*old_rses, new_rs])
            for rs, size in plan:
                await self.scale_replica_set(rs, size, d, operation)

    async def cleanup_deployment(self, old_rses: list[Obj], d: Obj) -> None:
        """Delete the oldest empty ReplicaSets beyond spec.revisionHistoryLimit."""
        if not has_revision_history_limit(d):
            return
        cleanable = [rs for rs in old_rses if rs is not None and not meta(rs).get("deletionTimestamp")]
        diff = len(cleanable) - int((d.get("spec") or {}).get("revisionHistoryLimit") or 0)
        if diff <= 0:
            return
        log.debug("looking to clean up old replica sets of deployment %s", object_key(d))
        for rs in sorted_by_revision(cleanable)[:diff]:
            m = meta(rs)
            if status_int(rs, "replicas") != 0 or replicas_of(rs) != 0 or m.get("deletionTimestamp") or \
                    int(m.get("generation") or 0) > status_int(rs, "observedGeneration"):
                continue
            try:
                await self.rs_client.delete(str(m.get("name")), namespace=str(m.get("namespace")))
            except NotFound:
                pass

    # -- the non-rollout syncs ------------------------------------------------------------------------
    async def sync(self, d: Obj, rs_list: list[Obj]) -> None:
        """Scaling events and paused Deployments: scale, clean up when paused, write the status."""
        new_rs, old_rses = await self.get_all_replica_sets_and_sync_revision(d, rs_list, create=False)
        await self.scale(d, new_rs, old_rses)
        if (d.get("spec") or {}).get("paused") and get_rollback_to(d) is None:
            await self.cleanup_deployment(old_rses, d)
        await self.sync_deployment_status([*old_rses, new_rs], new_rs, d)

    async def sync_status_only(self, d: Obj, rs_list: list[Obj]) -> None:
        new_rs, old_rses = await self.get_all_replica_sets_and_sync_revision(d, rs_list, create=False)
        await self.sync_deployment_status([*old_rses, new_rs], new_rs, d)

    async def is_scaling_event(self, d: Obj, rs_list: list[Obj]) -> bool:
        """Some active ReplicaSet was last sized for another spec.replicas (desired-replicas)."""
        new_rs, old_rses = await self.get_all_replica_sets_and_sync_revision(d, rs_list, create=False)
        for rs in filter_active_replica_sets([*old_rses, new_rs]):
            desired = desired_replicas_annotation(rs)
            if desired is not None and desired != replicas_of(d):
                return True
        return False
