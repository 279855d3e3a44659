"""The three ways a Deployment moves to a new template (upstream rolling.go, recreate.go and
rollback.go), each one sync step at a time: a step makes at most one kind of change, writes the
status and returns; the ReplicaSet and pod events it causes bring the next step.

RollingUpdate (`rollout_rolling`), with N = spec.replicas:
1. find or create the new ReplicaSet (`DeploymentSync.get_all_replica_sets_and_sync_revision`);
2. if it can grow without exceeding N + maxSurge pods in all ReplicaSets, grow it and stop;
3. else shrink old ReplicaSets, never below N - maxUnavailable available pods: unhealthy pods
   first, then the oldest ReplicaSets' pods;
4. if neither moved and the rollout is complete, delete ReplicaSets beyond revisionHistoryLimit;
5. write the status (Progressing / Available conditions, counts).
Worked example, N = 3, maxSurge 1, maxUnavailable 0: new RS 0 -> 1 (4 pods); once its pod is
available the old RS 3 -> 2; then new 1 -> 2, old 2 -> 1, new 2 -> 3, old 1 -> 0: never more than
4 pods, never fewer than 3 available.

Recreate (`rollout_recreate`): scale every old ReplicaSet to 0, wait until none of their pods
is left running (Succeeded/Failed pods do not count), only then create the new ReplicaSet at N.

Rollback (`rollback`): the deprecated `deprecated.deployment.rollback.to` annotation (what
extensions/v1beta1's spec.rollbackTo round-trips to) copies the template of that revision (0:
the previous one) into the Deployment and removes the annotation. Modern `kubectl rollout undo`
does not use it: it patches the template itself, which the controller sees as a new template
whose ReplicaSet already exists (and gives it the next revision).
"""

from __future__ import annotations

import logging
from typing import Any

from kubecore.controllers.controller_utils import meta, pod_phase
from kubecore.controllers.deployment_progress import deployment_complete, status_of
from kubecore.controllers.deployment_scaling import (
    cleanup_unhealthy_plan, max_scaled_down, new_rs_new_replicas, scale_down_old_plan,
)
from kubecore.controllers.deployment_sync import DeploymentSync
from kubecore.controllers.deployment_util import (
    actual_replica_count, clear_rollback_to, equal_ignore_hash, filter_active_replica_sets, get_rollback_to,
    last_revision, replica_count, replicas_of, revision, set_deployment_annotations_to, set_from_replica_set_template,
    template_of,
)
from kubecore.controllers.podcontrol import NORMAL, WARNING

log = logging.getLogger(__name__)

Obj = dict[str, Any]

ROLLBACK_REVISION_NOT_FOUND = "DeploymentRollbackRevisionNotFound"
ROLLBACK_TEMPLATE_UNCHANGED = "DeploymentRollbackTemplateUnchanged"
ROLLBACK_DONE = "DeploymentRollback"


# -- RollingUpdate --------------------------------------------------------------------------------
async def rollout_rolling(s: DeploymentSync, d: Obj, rs_list: list[Obj]) -> None:
    new_rs, old_rses = await s.get_all_replica_sets_and_sync_revision(d, rs_list, create=True)
    assert new_rs is not None  # create=True either returns one or raises
    all_rses: list[Obj | None] = [*old_rses, new_rs]
    if await reconcile_new_replica_set(s, [*old_rses, new_rs], new_rs, d):
        await s.sync_rollout_status(all_rses, new_rs, d)
        return
    if await reconcile_old_replica_sets(s, [*old_rses, new_rs], filter_active_replica_sets(old_rses), new_rs, d):
        await s.sync_rollout_status(all_rses, new_rs, d)
        return
    if deployment_complete(d, status_of(d)):
        await s.cleanup_deployment(old_rses, d)
    await s.sync_rollout_status(all_rses, new_rs, d)


async def reconcile_new_replica_set(s: DeploymentSync, all_rses: list[Obj], new_rs: Obj, d: Obj) -> bool:
    """Grow (or, above spec.replicas, shrink) the new ReplicaSet; True if its size changed."""
    if replicas_of(new_rs) == replicas_of(d):
        return False
    if replicas_of(new_rs) > replicas_of(d):
        scaled, _ = await s.scale_replica_set_and_record_event(new_rs, replicas_of(d), d)
        return scaled
    scaled, _ = await s.scale_replica_set_and_record_event(new_rs, new_rs_new_replicas(d, all_rses, new_rs), d)
    return scaled


async def reconcile_old_replica_sets(s: DeploymentSync, all_rses: list[Obj], old_rses: list[Obj], new_rs: Obj,
                                     d: Obj) -> bool:
    """Shrink old ReplicaSets as far as availability allows; True if any shrank. Errors of the
    writes are logged, not raised (as upstream): the status is written either way."""
    if replica_count(old_rses) == 0:
        return False
    budget = max_scaled_down(d, all_rses, new_rs)
    if budget <= 0:
        return False
    try:
        old_rses, cleaned = await _apply_plan(s, cleanup_unhealthy_plan(old_rses, budget), old_rses, d)
        log.debug("cleaned up %d unhealthy replicas of old replica sets of %s", cleaned, meta(d).get("name"))
        _, scaled = await _apply_plan(s, scale_down_old_plan(d, [*old_rses, new_rs], old_rses), old_rses, d)
    except Exception as e:
        log.info("scaling down old replica sets of %s failed: %s", meta(d).get("name"), e)
        return False
    return cleaned + scaled > 0


async def _apply_plan(s: DeploymentSync, plan: list[tuple[Obj, int]], rses: list[Obj],
                      d: Obj) -> tuple[list[Obj], int]:
    """Scale each ReplicaSet of `plan`; `rses` with the written ones replaced, and how many
    replicas were removed in total."""
    by_uid = {meta(rs).get("uid"): i for i, rs in enumerate(rses)}
    out = list(rses)
    removed = 0
    for rs, size in plan:
        _, updated = await s.scale_replica_set_and_record_event(rs, size, d)
        removed += replicas_of(rs) - size
        i = by_uid.get(meta(rs).get("uid"))
        if i is not None:
            out[i] = updated
    return out, removed


# -- Recreate -------------------------------------------------------------------------------------
async def rollout_recreate(s: DeploymentSync, d: Obj, rs_list: list[Obj], pod_map: dict[str, list[Obj]]) -> None:
    new_rs, old_rses = await s.get_all_replica_sets_and_sync_revision(d, rs_list, create=False)
    all_rses: list[Obj | None] = [*old_rses, new_rs]
    scaled_down = False
    for rs in filter_active_replica_sets(old_rses):
        scaled, _ = await s.scale_replica_set_and_record_event(rs, 0, d)
        scaled_down = scaled_down or scaled
    if scaled_down or old_pods_running(new_rs, old_rses, pod_map):
        await s.sync_rollout_status(all_rses, new_rs, d)
        return
    if new_rs is None:
        new_rs, old_rses = await s.get_all_replica_sets_and_sync_revision(d, rs_list, create=True)
        all_rses = [*old_rses, new_rs]
    assert new_rs is not None
    await s.scale_replica_set_and_record_event(new_rs, replicas_of(d), d)
    if deployment_complete(d, status_of(d)):
        await s.cleanup_deployment(old_rses, d)
    await s.sync_rollout_status(all_rses, new_rs, d)


def old_pods_running(new_rs: Obj | None, old_rses: list[Obj], pod_map: dict[str, list[Obj]]) -> bool:
    """Any pod of an old ReplicaSet not yet Succeeded or Failed (terminating ones included)."""
    if actual_replica_count(old_rses) > 0:
        return True
    new_uid = meta(new_rs).get("uid") if new_rs is not None else None
    for rs_uid, pods in pod_map.items():
        if rs_uid == new_uid:
            continue
        if any(pod_phase(p) not in ("Failed", "Succeeded") for p in pods):
            return True
    return False


# -- rollback (the deprecated annotation) ---------------------------------------------------------
async def rollback(s: DeploymentSync, d: Obj, rs_list: list[Obj]) -> None:
    new_rs, old_rses = await s.get_all_replica_sets_and_sync_revision(d, rs_list, create=True)
    all_rses = [rs for rs in [*old_rses, new_rs] if rs is not None]
    to_revision = get_rollback_to(d) or 0
    if to_revision == 0:
        to_revision = last_revision(all_rses)
        if to_revision == 0:
            s.recorder.event(d, WARNING, reason=ROLLBACK_REVISION_NOT_FOUND, message="Unable to find last revision.")
            await update_deployment_and_clear_rollback_to(s, d)
            return
    for rs in all_rses:
        if revision(rs) == to_revision:
            if await rollback_to_template(s, d, rs):
                s.recorder.event(d, NORMAL, reason=ROLLBACK_DONE,
                                 message=f'Rolled back deployment "{meta(d).get("name")}" to revision {to_revision}')
            return
    s.recorder.event(d, WARNING, reason=ROLLBACK_REVISION_NOT_FOUND,
                     message="Unable to find the revision to rollback to.")
    await update_deployment_and_clear_rollback_to(s, d)


async def rollback_to_template(s: DeploymentSync, d: Obj, rs: Obj) -> bool:
    """Copy `rs`'s template (and annotations) into `d`; False if it was the same template."""
    performed = False
    if not equal_ignore_hash(template_of(d), template_of(rs)):
        set_from_replica_set_template(d, template_of(rs))
        set_deployment_annotations_to(d, rs)
        performed = True
    else:
        s.recorder.event(d, WARNING, reason=ROLLBACK_TEMPLATE_UNCHANGED,
                         message=f'The rollback revision contains the same template as current deployment '
                                 f'"{meta(d).get("name")}"')
    await update_deployment_and_clear_rollback_to(s, d)
    return performed


async def update_deployment_and_clear_rollback_to(s: DeploymentSync, d: Obj) -> None:
    clear_rollback_to(d)
    await s.d_client.update(d)
