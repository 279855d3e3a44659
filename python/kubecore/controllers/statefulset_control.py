"""One StatefulSet sync: revisions, pods in ordinal order, rolling update, status, history limit
(upstream stateful_set_control.go, defaultStatefulSetControl.UpdateStatefulSet).

The steps of `update_stateful_set`, in upstream's order:

1. Revisions. The set's current template is a revision: the newest revision if equal to it, else an
   older equal one renumbered (a rollback), else a new ControllerRevision (bumping the collision
   count on name clashes). That is the update revision; status.currentRevision names the current
   one (the update revision when there is none yet).
2. Slots. Owned pods with an ordinal in [start, start + replicas) fill their slot; the others with
   a valid ordinal are condemned (sorted by descending ordinal). Empty slots get a not-yet-created
   pod: at the current revision below the partition, else at the update revision.
3. Unless the set is being deleted, each slot in ordinal order (`process_replica`): a Failed or
   Succeeded pod is deleted (recreated by a later sync); a missing pod is created (claims first);
   with OrderedReady ("monotonic") the pass stops at the first pod it created, that is
   terminating, or is not Running+Ready and available; a pod whose identity, storage or claim
   owners drifted is updated. Parallel processes all slots in slow-start batches instead.
4. Condemned pods' claims get the retention policy's owners; then condemned pods are deleted,
   highest ordinal first; with OrderedReady only once every slot is healthy and one at a time
   (waiting for the previous to finish terminating).
5. RollingUpdate (OnDelete stops here): from the highest ordinal down to the partition, delete
   the first pod not at the update revision, unless some pod on the way is unavailable (then
   wait). With rollingUpdate.maxUnavailable set, up to maxUnavailable minus the unavailable pods
   are deleted at once (upstream's MaxUnavailableStatefulSet).
6. Status: counts over the slots and condemned pods; when every replica is updated and ready the
   update revision becomes current. Written only if it differs from what the set reports.
7. History: non-live revisions beyond revisionHistoryLimit are deleted, oldest first (also after
   a failed sync).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.client.errors import NotFound
from kubecore.controllers.controller_utils import Selector, meta
from kubecore.controllers.history import (
    ControllerHistory, equal_revision, find_equal_revisions, next_revision, revision_number, revisions_to_truncate,
    sort_controller_revisions,
)
from kubecore.controllers.refmanager import AggregateError
from kubecore.controllers.statefulset_podcontrol import StatefulPodControl
from kubecore.controllers.statefulset_utils import (
    ON_DELETE, allows_burst, apply_revision, complete_rolling_update, end_ordinal, identity_matches,
    inconsistent_status, is_created, is_failed, is_pending, is_running_and_available, is_running_and_ready,
    is_succeeded, is_terminating, is_unavailable, max_unavailable, min_ready_seconds, new_revision,
    new_versioned_stateful_set_pod, ordinal_of, partition, pod_in_ordinal_range, pod_revision, replicas,
    revision_history_limit, rolling_update, start_ordinal, storage_matches, strategy_type,
)

log = logging.getLogger(__name__)

Obj = dict[str, Any]
StatusUpdater = Callable[[Obj, Obj], Awaitable[None]]
MAX_BATCH_SIZE = 500


@dataclass
class _Revisions:
    current: Obj | None = None
    update: Obj | None = None


def count_status(status: Obj, *, min_ready: int, now: float, current: Obj, update: Obj,
                 pod_lists: list[list[Obj]]) -> None:
    """Mutates `status`: replicas, ready, available, current and updated counts (upstream's updateStatus)."""
    counts = dict.fromkeys(("replicas", "readyReplicas", "availableReplicas", "currentReplicas", "updatedReplicas"), 0)
    current_name, update_name = meta(current).get("name"), meta(update).get("name")
    for pods in pod_lists:
        for pod in pods:
            created = is_created(pod)
            counts["replicas"] += created
            if is_running_and_ready(pod):
                counts["readyReplicas"] += 1
                counts["availableReplicas"] += is_running_and_available(pod, min_ready, now)
            if created and not is_terminating(pod):
                revision = pod_revision(pod)
                counts["currentReplicas"] += revision == current_name
                counts["updatedReplicas"] += revision == update_name
    status.update(counts)


async def run_for_all(count: int, fn: Callable[[int], Awaitable[bool]], *, monotonic: bool) -> bool:
    """In order, stopping at the first True (monotonic); else every index in slow-start batches
    1, 2, 4, ... (at most 500) stopping after a batch with errors. True means: stop the sync here.
    Errors are raised (several together as an AggregateError)."""
    if monotonic:
        for i in range(count):
            if await fn(i):
                return True
        return False
    done, batch = 0, min(count, 1)
    while batch > 0:
        results = await asyncio.gather(*(fn(i) for i in range(done, done + batch)), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        for e in errors:
            if isinstance(e, asyncio.CancelledError):
                raise e
        if errors:
            raise errors[0] if len(errors) == 1 else AggregateError(errors)
        done += batch
        batch = min(2 * batch, count - done, MAX_BATCH_SIZE)
    return False


class StatefulSetControl:
    """The sync algorithm (module docstring); the controller feeds it a set and its claimed pods."""

    def __init__(self, *, pod_control: StatefulPodControl, history: ControllerHistory,
                 status_updater: StatusUpdater, clock: Clock = REAL_CLOCK) -> None:
        self.pod_control = pod_control
        self.history = history
        self.status_updater = status_updater
        self.clock = clock

    def list_revisions(self, set_: Obj, selector: Selector) -> list[Obj]:
        return self.history.list_controller_revisions(set_, selector)

    async def update_stateful_set(self, set_: Obj, pods: list[Obj], selector: Selector) -> Obj:
        """Reconcile one set; returns the status it computed (raises on any failed write)."""
        revisions = sort_controller_revisions(self.list_revisions(set_, selector))
        seen = _Revisions()
        try:
            status = await self.perform_update(set_, pods, revisions, seen)
        except Exception as e:
            try:
                await self.truncate_history(set_, pods, revisions, seen)
            except Exception as te:
                raise AggregateError([e, te]) from e
            raise
        await self.truncate_history(set_, pods, revisions, seen)
        return status

    async def perform_update(self, set_: Obj, pods: list[Obj], revisions: list[Obj], seen: _Revisions) -> Obj:
        current, update, collision_count = await self.get_stateful_set_revisions(set_, revisions)
        seen.current, seen.update = current, update
        status, error = await self.update_pods(set_, current, update, collision_count, pods)
        status_error: BaseException | None = None
        try:
            await self.update_stateful_set_status(set_, status)
        except Exception as e:
            status_error = e
        if error is not None:
            if status_error is not None:
                log.error("could not update status of StatefulSet %s: %s", meta(set_).get("name"), status_error)
            raise error
        if status_error is not None:
            raise status_error
        return status

    async def get_stateful_set_revisions(self, set_: Obj, revisions: list[Obj]) -> tuple[Obj, Obj, int]:
        """(current revision, update revision, collision count); may create or renumber a revision."""
        collision_count = int((set_.get("status") or {}).get("collisionCount") or 0)
        update = new_revision(set_, next_revision(revisions), collision_count)
        equal = find_equal_revisions(revisions, update)
        if equal and equal_revision(revisions[-1], equal[-1]):
            update = revisions[-1]
        elif equal:
            update = await self.history.update_controller_revision(equal[-1], revision_number(update))
        else:
            update, collision_count = await self.history.create_controller_revision(set_, update, collision_count)
        current_name = (set_.get("status") or {}).get("currentRevision")
        current = next((r for r in revisions if meta(r).get("name") == current_name), None)
        return (current if current is not None else update), update, collision_count

    async def truncate_history(self, set_: Obj, pods: list[Obj], revisions: list[Obj], seen: _Revisions) -> None:
        live = {str(meta(r).get("name")) for r in (seen.current, seen.update) if r is not None}
        live.update(pod_revision(p) for p in pods)
        for rev in revisions_to_truncate(revisions, live, revision_history_limit(set_)):
            await self.history.delete_controller_revision(rev)

    async def update_stateful_set_status(self, set_: Obj, status: Obj) -> None:
        complete_rolling_update(set_, status)
        if inconsistent_status(set_, status):
            await self.status_updater(set_, status)

    # -- pods ----------------------------------------------------------------------------------------
    async def update_pods(self, set_: Obj, current: Obj, update: Obj, collision_count: int,
                          pods: list[Obj]) -> tuple[Obj, BaseException | None]:
        """Steps 2-5; returns the status so far and the error that stopped it (if any)."""
        current_set, update_set = apply_revision(set_, current), apply_revision(set_, update)
        now, min_ready = self.clock.now(), min_ready_seconds(set_)
        status: Obj = {"observedGeneration": int(meta(set_).get("generation") or 0),
                       "currentRevision": meta(current).get("name"), "updateRevision": meta(update).get("name"),
                       "collisionCount": collision_count}
        count_status(status, min_ready=min_ready, now=now, current=current, update=update, pod_lists=[pods])
        slots, condemned = self.slots(set_, current_set, update_set, current=current, update=update, pods=pods)
        first_unavailable = next((p for p in [*slots, *reversed(condemned)] if is_unavailable(p, min_ready, now)),
                                 None)
        if meta(set_).get("deletionTimestamp"):
            return status, None
        monotonic = not allows_burst(set_)

        def recount() -> None:
            count_status(status, min_ready=min_ready, now=now, current=current, update=update,
                         pod_lists=[slots, condemned])

        try:
            stop = await run_for_all(len(slots), lambda i: self.process_replica(
                set_, update_set, slots, i, monotonic=monotonic, now=now), monotonic=monotonic)
            if not stop:
                stop = await run_for_all(len(condemned), lambda i: self.fix_pod_claim(update_set, condemned[i]),
                                         monotonic=monotonic)
            if not stop:
                stop = await run_for_all(len(condemned), lambda i: self.process_condemned(
                    set_, first_unavailable, condemned[i], monotonic=monotonic, now=now), monotonic=monotonic)
        except Exception as e:
            recount()
            return status, e
        recount()
        if stop or strategy_type(set_) == ON_DELETE:
            return status, None
        try:
            await self.rolling_update(set_, slots, update, status, now=now)
        except Exception as e:
            return status, e
        return status, None

    def slots(self, set_: Obj, current_set: Obj, update_set: Obj, *, current: Obj, update: Obj,
              pods: list[Obj]) -> tuple[list[Obj], list[Obj]]:
        """(one pod per ordinal in range, created or not; condemned pods by descending ordinal)."""
        start, end = start_ordinal(set_), end_ordinal(set_)
        by_ordinal: dict[int, Obj] = {}
        condemned: list[Obj] = []
        for pod in pods:
            if pod_in_ordinal_range(pod, set_):
                by_ordinal[ordinal_of(pod)] = pod
            elif ordinal_of(pod) >= 0:
                condemned.append(pod)
        slots = [by_ordinal.get(o) or new_versioned_stateful_set_pod(
            current_set, update_set, current_revision=str(meta(current).get("name")),
            update_revision=str(meta(update).get("name")), ordinal=o) for o in range(start, end + 1)]
        condemned.sort(key=ordinal_of, reverse=True)
        return slots, condemned

    async def process_replica(self, set_: Obj, update_set: Obj, slots: list[Obj], i: int, *, monotonic: bool,
                              now: float) -> bool:
        pod, control = slots[i], self.pod_control
        if is_failed(pod) or is_succeeded(pod):
            if not is_terminating(pod):
                await control.delete_stateful_pod(set_, pod)
            return True  # a new pod is made by a later sync, once this one is gone
        if not is_created(pod):
            if control.pod_claim_is_stale(set_, pod):
                return True
            await control.create_stateful_pod(set_, pod)
            if monotonic:
                return True
        if is_pending(pod):
            await control.create_missing_persistent_volume_claims(set_, pod)
        if monotonic and (is_terminating(pod) or not is_running_and_ready(pod)
                          or not is_running_and_available(pod, min_ready_seconds(set_), now)):
            return True
        if not is_created(pod):
            return False  # created just now (Parallel): nothing to repair yet
        if identity_matches(set_, pod) and storage_matches(set_, pod) and \
                control.claims_match_retention_policy(update_set, pod):
            return False
        await control.update_stateful_pod(update_set, pod)
        return False

    async def fix_pod_claim(self, update_set: Obj, pod: Obj) -> bool:
        if not self.pod_control.claims_match_retention_policy(update_set, pod):
            await self.pod_control.update_pod_claim_for_retention_policy(update_set, pod)
        return False

    async def process_condemned(self, set_: Obj, first_unhealthy: Obj | None, pod: Obj, *, monotonic: bool,
                                now: float) -> bool:
        if is_terminating(pod):
            return monotonic  # OrderedReady waits for it to be gone
        if monotonic and pod is not first_unhealthy and (
                not is_running_and_ready(pod) or not is_running_and_available(pod, min_ready_seconds(set_), now)):
            return True
        log.info("pod %s of StatefulSet %s is terminating for scale down", meta(pod).get("name"),
                 meta(set_).get("name"))
        await self.pod_control.delete_stateful_pod(set_, pod)
        return True

    async def rolling_update(self, set_: Obj, slots: list[Obj], update: Obj, status: Obj, *, now: float) -> None:
        """Step 5: delete pods not at the update revision, highest ordinal first."""
        update_name, min_ready = meta(update).get("name"), min_ready_seconds(set_)
        update_min = partition(set_)
        if (rolling_update(set_) or {}).get("maxUnavailable") is not None:
            await self._rolling_update_max_unavailable(set_, slots, update_name, status, now=now)
            return
        for target in range(len(slots) - 1, update_min - 1, -1):
            pod = slots[target]
            if pod_revision(pod) != update_name and not is_terminating(pod):
                log.info("pod %s of StatefulSet %s is terminating for update", meta(pod).get("name"),
                         meta(set_).get("name"))
                await self._delete_for_update(set_, pod)
                status["currentReplicas"] = int(status.get("currentReplicas") or 0) - 1
                return
            if is_unavailable(pod, min_ready, now):
                return  # wait for it before touching a lower ordinal

    async def _rolling_update_max_unavailable(self, set_: Obj, slots: list[Obj], update_name: Any, status: Obj, *,
                                              now: float) -> None:
        budget = max_unavailable(set_)
        unavailable = sum(is_unavailable(p, min_ready_seconds(set_), now) for p in slots)
        if unavailable > budget:
            return
        to_delete = budget - unavailable
        target = len(slots) - 1
        while target >= partition(set_) and to_delete > 0:
            pod = slots[target]
            if pod_revision(pod) != update_name and not is_terminating(pod):
                await self._delete_for_update(set_, pod)
                to_delete -= 1
                status["currentReplicas"] = int(status.get("currentReplicas") or 0) - 1
            target -= 1

    async def _delete_for_update(self, set_: Obj, pod: Obj) -> None:
        try:
            await self.pod_control.delete_stateful_pod(set_, pod)
        except NotFound:
            pass
