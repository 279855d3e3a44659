"""The TTL-after-finished controller: delete a finished Job once spec.ttlSecondsAfterFinished
have passed since it finished (upstream pkg/controller/ttlafterfinished).

A Job is a candidate when it has ttlSecondsAfterFinished and a Complete or Failed condition that
is True; it finished at that condition's lastTransitionTime and expires TTL seconds later. Job add
and update events enqueue candidates that are not being deleted; a sync

1. reads the Job from the cache: not expired yet -> requeue the key for when it expires (on the
   injected clock, so tests drive it with a FakeClock);
2. expired -> re-reads the Job from the server (the TTL may have changed since the cache saw
   it) and checks again;
3. still expired -> deletes it with Foreground propagation (its pods go first, the Job last) and
   a UID precondition, so a new Job of the same name is never hit.

A finish time in the future (clock skew) is logged and simply waits. Errors requeue with the
queue's backoff.
"""

from __future__ import annotations

import logging
from typing import Any

from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.client.errors import NotFound
from kubecore.client.factory import SharedInformerFactory
from kubecore.client.indexer import Indexer, split_meta_namespace_key
from kubecore.client.informer import EventHandlerFuncs
from kubecore.client.resource import ResourceClient
from kubecore.client.rest import RestClient
from kubecore.controllers.base import ControllerContext, QueueController, register
from kubecore.controllers.controller_utils import meta, object_key, parse_time

log = logging.getLogger(__name__)

Obj = dict[str, Any]
COMPONENT = "ttl-after-finished-controller"


class NoFinishTime(ValueError):
    """A finished Job whose finishing condition has no lastTransitionTime."""


def ttl_seconds(job: Obj) -> int | None:
    ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
    return int(ttl) if isinstance(ttl, int) and not isinstance(ttl, bool) else None


def _finished_condition(job: Obj) -> Obj | None:
    for c in (job.get("status") or {}).get("conditions") or ():
        if isinstance(c, dict) and c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
            return c
    return None


def needs_cleanup(job: Obj) -> bool:
    """The Job has a TTL and has finished (needsCleanup)."""
    return ttl_seconds(job) is not None and _finished_condition(job) is not None


def finish_time(job: Obj) -> float:
    """When the finished Job finished (raises NoFinishTime)."""
    cond = _finished_condition(job)
    t = parse_time(cond.get("lastTransitionTime")) if cond is not None else None
    if t is None:
        m = meta(job)
        raise NoFinishTime(f"unable to find the time when the Job {m.get('namespace')}/{m.get('name')} finished")
    return t


def time_left(job: Obj, now: float) -> float:
    """Seconds until the TTL of a finished Job expires (<= 0: expired)."""
    finished = finish_time(job)
    if finished > now:
        log.warning("found Job %s finished in the future; this is likely due to time skew in the cluster, "
                    "cleanup deferred", object_key(job))
    return finished + (ttl_seconds(job) or 0) - now


class TTLAfterFinishedController(QueueController):
    """Runs until cancelled: `await TTLAfterFinishedController(rest=..., informers=...).run(5)`."""

    name = "ttl-after-finished"
    description = "TTL after finished controller"

    def __init__(self, *, rest: RestClient, informers: SharedInformerFactory, clock: Clock = REAL_CLOCK) -> None:
        super().__init__(rest=rest, informers=informers, clock=clock)
        self.jobs: ResourceClient
        self.job_indexer: Indexer

    async def wire(self) -> None:
        self.jobs = await self.rest.resource("batch/v1", "jobs")
        informer = await self.informers.informer_for("batch/v1", "jobs")
        self.job_indexer = informer.indexer
        self.wiring.add(informer, EventHandlerFuncs(on_add_func=lambda job, _initial: self._consider(job),
                                                    on_update_func=lambda _old, job: self._consider(job)))

    def _consider(self, job: Obj) -> None:
        if not meta(job).get("deletionTimestamp") and needs_cleanup(job):
            self.queue.add(object_key(job))

    def process_ttl(self, job: Obj, key: str) -> bool:
        """True when the TTL has expired; otherwise requeue `key` for when it will."""
        if meta(job).get("deletionTimestamp") or not needs_cleanup(job):
            return False
        left = time_left(job, self.clock.now())
        if left <= 0:
            return True
        self.queue.add_after(key, left)
        return False

    async def sync(self, key: str) -> None:
        """processJob: delete the Job of `key` if its TTL truly expired."""
        job = self.job_indexer.get_by_key(key)
        if job is None or not self.process_ttl(job, key):
            return
        namespace, name = split_meta_namespace_key(key)
        try:
            fresh = await self.jobs.get(name, namespace=namespace)
        except NotFound:
            return
        if not self.process_ttl(fresh, key):
            return
        log.info("cleaning up Job %s", key)
        try:
            await self.jobs.delete(name, namespace=namespace, propagation_policy="Foreground",
                                   preconditions={"uid": str(meta(fresh).get("uid"))})
        except NotFound:
            return


@register("ttl-after-finished", workers=5,
          aliases=("ttlafterfinished", "ttl-after-finished-controller"))
def new_ttl_after_finished_controller(ctx: ControllerContext) -> TTLAfterFinishedController:
    """The controller manager's constructor for the TTL-after-finished controller."""
    return TTLAfterFinishedController(rest=ctx.rest, informers=ctx.informers, clock=ctx.clock)
