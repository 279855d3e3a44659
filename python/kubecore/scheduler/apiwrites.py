"""What the scheduler writes to the API server (upstream schedule_one.go's I/O and
preemption's victim handling), as the `Services` and `Driver` callbacks a process plugs in.

    writes = ApiWrites(rest, recorders, tasks=TaskSet(), clock=clock, lookup=latest_pod_by_key)
    services = Services(bind=writes.bind, evict=writes.evict, clear_nominated_node=writes.clear_nominated_node)
    Driver(core, on_bound=writes.scheduled, on_failed=writes.failed, on_skipped=writes.skipped)

- `bind(pod, node)`: POST pods/<name>/binding with a v1 Binding whose target is the Node (and
  the pod's uid, so a re-created pod of the same name is never bound by mistake).
Events are events.k8s.io/v1 Events (client-go's tools/events, as kube-scheduler records them):
`recorders` maps each profile's schedulerName to the recorder whose reportingController it is;
every event is written, each by its own task, and repeats become a series (`events_v1`).

- `scheduled(bound)`: a Normal `Scheduled` event (action `Binding`) "Successfully assigned
  ns/name to node".
- `failed(f)`: a Warning `FailedScheduling` event (action `Scheduling`) carrying the FitError message (cut to 1024
  bytes, as upstream), then, unless the pod is gone or got bound meanwhile, the PodScheduled
  condition False with `f.reason` (Unschedulable, or SchedulerError) and the message, and
  status.nominatedNodeName when preemption nominated a node — one strategic-merge PATCH of
  pods/status, skipped when nothing would change (upstream updatePod).
- `skipped(pod)`: a Warning `FailedScheduling` event "skip schedule deleting pod: ns/name" for a
  popped pod that is being deleted (nothing else is written).
- `evict(victim, preemptor, node)`: the DisruptionTarget condition (reason PreemptionByScheduler)
  on the victim, then DELETE with its uid as precondition, and a Normal `Preempted` event
  (action `Preempting`, related: the preemptor).
- `evict_victims(victims, preemptor, node, failed=)`: a preemption's victims evicted
  concurrently (upstream's asynchronous preemption); `failed()` if an eviction failed (a victim
  already gone is no failure: its deletion is what the preemptor waits for).
- `clear_nominated_node(pod)`: PATCH status.nominatedNodeName to null.

Everything but `bind` is fire and forget: a task in `tasks`, errors logged, never raised into
the scheduling loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

import msgspec

from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.client.errors import ApiError, NotFound
from kubecore.client.events import NORMAL, WARNING
from kubecore.client.events_v1 import EventRecorder
from kubecore.client.events_cache import rfc3339
from kubecore.client.rest import RestClient
from kubecore.scheduler.binding import Bound
from kubecore.scheduler.interface import NominatingMode
from kubecore.scheduler.podinfo import Obj, pod_key, scheduler_name
from kubecore.scheduler.schedule_one import Failed

__all__ = ["ApiWrites", "TaskSet", "pod_reference", "truncate_message", "MESSAGE_SIZE_LIMIT"]

log = logging.getLogger(__name__)

MESSAGE_SIZE_LIMIT = 1024
"""Upstream's cap on a FailedScheduling event's note, in bytes (events.k8s.io's NoteLengthLimit)."""
STRATEGIC = "strategic"
_CUT_SUFFIX = " ..."


def truncate_message(message: str) -> str:
    """The note cut to MESSAGE_SIZE_LIMIT UTF-8 bytes, ending in " ..." when cut (upstream
    truncateMessage; a character split by the cut is left out)."""
    if len(message) * 4 <= MESSAGE_SIZE_LIMIT:
        return message
    raw = message.encode()
    if len(raw) <= MESSAGE_SIZE_LIMIT:
        return message
    return raw[:MESSAGE_SIZE_LIMIT - len(_CUT_SUFFIX)].decode(errors="ignore") + _CUT_SUFFIX


_REFERENCE_FIELDS = ("name", "uid", "resourceVersion")
_encode = msgspec.json.encode
_JSON = "application/json"


def pod_reference(pod: Obj) -> Obj:
    """The involvedObject of an event about `pod` (informer objects carry no kind)."""
    meta = pod.get("metadata") or {}
    ref: Obj = {"kind": "Pod", "apiVersion": "v1", "namespace": meta.get("namespace") or "default"}
    for k in _REFERENCE_FIELDS:  # set ones only (a loop, not a comprehension: this runs per bound pod)
        v = meta.get(k)
        if v:
            ref[k] = v
    return ref


def _pod_path(pod: Obj, sub: str = "") -> str:
    meta = pod.get("metadata") or {}
    path = f"/api/v1/namespaces/{meta.get('namespace') or 'default'}/pods/{meta.get('name', '')}"
    return f"{path}/{sub}" if sub else path


class TaskSet:
    """Fire-and-forget tasks kept alive until done; `drain` waits for them (shutdown, tests)."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, what: str, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(self._logged(what, coro))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _logged(what: str, coro: Coroutine[Any, Any, None]) -> None:
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except NotFound:
            log.debug("%s: the object is gone", what)
        except Exception as e:  # noqa: BLE001 - a failed write is logged; the informers bring the truth back
            log.warning("%s failed: %s", what, e)

    def __len__(self) -> int:
        return len(self._tasks)

    async def drain(self) -> None:
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def cancel(self) -> None:
        for t in list(self._tasks):
            t.cancel()


def _condition_changed(current: Obj | None, wanted: Obj) -> bool:
    if current is None:
        return True
    return any(current.get(k) != wanted.get(k) for k in ("status", "reason", "message"))


class ApiWrites:
    """The scheduler's writes (see the module docstring)."""

    def __init__(self, rest: RestClient, recorders: Mapping[str, EventRecorder], *, tasks: TaskSet,
                 lookup: Callable[[str], Obj | None], clock: Clock = REAL_CLOCK) -> None:
        self.rest = rest
        self.recorders = recorders
        """Each profile's recorder by schedulerName (upstream: one recorder per profile)."""
        self.tasks = tasks
        self.lookup = lookup
        """The informer's latest copy of a pod by "ns/name" (None when it is gone)."""
        self.clock = clock

    async def bind(self, pod: Obj, node: str) -> None:
        meta = pod.get("metadata") or {}
        binding_meta: Obj = {"name": meta.get("name", ""), "namespace": meta.get("namespace") or "default"}
        uid = meta.get("uid")
        if uid:
            binding_meta["uid"] = uid
        binding: Obj = {"apiVersion": "v1", "kind": "Binding", "metadata": binding_meta,
                        "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        # the answer is not decoded (upstream's Bind reads only the error)
        await self.rest.request("POST", _pod_path(pod, "binding"), body=_encode(binding), content_type=_JSON)

    def _event(self, pod: Obj, related: Obj | None, event_type: str, reason: str, action: str, note: str, *,
               profile_of: Obj | None = None) -> None:
        """An event about `pod`, recorded by the profile of `profile_of` (default: `pod`'s)."""
        name = scheduler_name(pod if profile_of is None else profile_of)
        recorder = self.recorders.get(name)
        if recorder is None:  # not one of this scheduler's profiles (it never schedules such a pod)
            log.warning("no profile for scheduler %r: event %s about pod %s not recorded", name, reason, pod_key(pod))
            return
        recorder.eventf(pod_reference(pod), related, event_type, reason, action, note)

    def scheduled(self, bound: Bound) -> None:
        pod = bound.assumed.pod
        meta = pod.get("metadata") or {}
        self._event(pod, None, NORMAL, "Scheduled", "Binding",
                    f"Successfully assigned {meta.get('namespace') or 'default'}/{meta.get('name', '')} to {bound.node}")

    def skipped(self, pod: Obj) -> None:
        """A popped pod that is being deleted was not scheduled (upstream's skipPodSchedule)."""
        meta = pod.get("metadata") or {}
        self._event(pod, None, WARNING, "FailedScheduling", "Scheduling",
                    f"skip schedule deleting pod: {meta.get('namespace') or 'default'}/{meta.get('name', '')}")

    def failed(self, f: Failed) -> None:
        pod = f.pinfo.pod
        message = f.message
        self._event(pod, None, WARNING, "FailedScheduling", "Scheduling", truncate_message(message))
        latest = self.lookup(f.pinfo.key)
        if latest is None or (latest.get("spec") or {}).get("nodeName"):
            return  # deleted, or bound by someone else meanwhile: nothing to report on it
        patch = self._failure_patch(latest, reason=f.reason, message=message, nominating=f.nominating)
        if patch is not None:
            self.tasks.spawn(f"updating the status of pod {f.pinfo.key}",
                             self._patch_status(latest, patch))

    def _failure_patch(self, pod: Obj, *, reason: str, message: str, nominating: Any) -> Obj | None:
        status = pod.get("status") or {}
        current = next((c for c in status.get("conditions") or () if c.get("type") == "PodScheduled"), None)
        wanted: Obj = {"type": "PodScheduled", "status": "False", "reason": reason, "message": message}
        nominate = (nominating is not None and nominating.mode is NominatingMode.OVERRIDE
                    and (status.get("nominatedNodeName") or "") != nominating.node)
        changed = _condition_changed(current, wanted)
        if not changed and not nominate:
            return None
        out: Obj = {}
        if changed:
            keep = current is not None and current.get("status") == "False" and current.get("lastTransitionTime")
            wanted["lastTransitionTime"] = current["lastTransitionTime"] if keep and current else rfc3339(self.clock.now())
            wanted["lastProbeTime"] = None
            out["conditions"] = [wanted]
        if nominate:
            out["nominatedNodeName"] = nominating.node or None
        return {"status": out}

    async def _patch_status(self, pod: Obj, patch: Obj) -> None:
        meta = pod.get("metadata") or {}
        pods = await self.rest.resource("v1", "pods")
        await pods.patch(meta.get("name", ""), patch, namespace=meta.get("namespace") or "default",
                         patch_type=STRATEGIC, subresource="status")

    def evict(self, victim: Obj, preemptor: Obj, node: str) -> None:
        self.tasks.spawn(f"preempting pod {pod_key(victim)}", self._evict_one(victim, preemptor, node))

    async def _evict_one(self, victim: Obj, preemptor: Obj, node: str) -> None:
        await self._evict(victim, preemptor, node)

    def evict_victims(self, victims: list[Obj], preemptor: Obj, node: str, *, failed: Callable[[], None]) -> None:
        self.tasks.spawn(f"preempting for pod {pod_key(preemptor)}", self._evict_victims(victims, preemptor, node, failed))

    async def _evict_victims(self, victims: list[Obj], preemptor: Obj, node: str, failed: Callable[[], None]) -> None:
        results = await asyncio.gather(*(self._evict(v, preemptor, node) for v in victims), return_exceptions=True)
        errors = [(v, r) for v, r in zip(victims, results) if isinstance(r, BaseException)]
        for victim, r in errors:
            if isinstance(r, asyncio.CancelledError):
                raise r
            log.warning("preemption: evicting pod %s failed: %s", pod_key(victim), r)
        if errors:
            failed()

    async def _evict(self, victim: Obj, preemptor: Obj, node: str) -> bool:
        """Whether this call deleted the victim (False: it was gone already)."""
        meta = victim.get("metadata") or {}
        name, ns = meta.get("name", ""), meta.get("namespace") or "default"
        pods = await self.rest.resource("v1", "pods")
        condition = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                     "message": f"{scheduler_name(preemptor)}: preempting to accommodate a higher priority pod",
                     "lastTransitionTime": rfc3339(self.clock.now())}
        try:
            await pods.patch(name, {"status": {"conditions": [condition]}}, namespace=ns, patch_type=STRATEGIC,
                             subresource="status")
        except NotFound:
            return False
        except ApiError as e:
            log.warning("preemption: could not mark pod %s/%s as a disruption target: %s", ns, name, e)
        uid = meta.get("uid")
        try:
            await pods.delete(name, namespace=ns, preconditions={"uid": uid} if uid else None)
        except NotFound:  # deleted meanwhile: what the eviction wanted (upstream ignores NotFound too)
            return False
        pmeta = preemptor.get("metadata") or {}
        self._event(victim, pod_reference(preemptor), NORMAL, "Preempted", "Preempting",
                    f"Preempted by pod {pmeta.get('uid') or pod_key(preemptor)} on node {node}", profile_of=preemptor)
        return True

    def clear_nominated_node(self, pod: Obj) -> None:
        self.tasks.spawn(f"clearing the nominated node of pod {pod_key(pod)}",
                         self._patch_status(pod, {"status": {"nominatedNodeName": None}}))
