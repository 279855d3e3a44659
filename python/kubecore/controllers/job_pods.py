"""The pods of a Job as the Job controller reads and writes them (upstream pkg/controller/job:
tracking_utils.go, backoff_utils.go's finish time, and the pod helpers of job_controller.go).

Reading. `job_pod_views` decodes the cached pods of a namespace into slim dicts holding only what
the Job controller looks at (the usual metadata plus finalizers and deletionGracePeriodSeconds,
spec.nodeName, and the status's phase, conditions and container states with exit codes), so the
`controller_utils` predicates work on them unchanged. A view is never written back.

Predicates (feature gates as upstream's defaults today: JobPodReplacementPolicy, JobManagedBy,
JobBackoffLimitPerIndex, JobSuccessPolicy and PodIndexLabel all on):
- `has_tracking_finalizer`: the pod still carries batch.kubernetes.io/job-tracking, i.e. the
  Job has not counted it yet;
- `is_pod_failed`: phase Failed, or (unless only failed pods are replaced, which a
  podFailurePolicy or podReplacementPolicy=Failed asks for) being deleted without having
  succeeded: an orphan deleted before reaching Failed still counts as a failure;
- `finished_time`: the latest container finish, else when Ready turned False, else the deletion
  time minus its grace period, else the creation time.

Writing. `JobPodControl` is the `RealPodControl` that can also create a pod under a chosen
generateName (Indexed Jobs name pods "<job>-<index>-"), and `REMOVE_FINALIZER_PATCH` is the
strategic merge patch that drops the tracking finalizer.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

import msgspec

from kubecore.client.indexer import NAMESPACE_INDEX, Indexer
from kubecore.controllers.controller_utils import (
    NAMESPACE_TERMINATING_CAUSE, has_status_cause, meta, object_key, parse_time, pod_phase,
)
from kubecore.controllers.podcontrol import NORMAL, WARNING, NoLabels, PodControl, RealPodControl, pod_from_template
from kubecore.controllers.podview import ConditionView, MetaView, SpecView

log = logging.getLogger(__name__)

Obj = dict[str, Any]

JOB_TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
REMOVE_FINALIZER_PATCH: Obj = {"metadata": {"$deleteFromPrimitiveList/finalizers": [JOB_TRACKING_FINALIZER]}}


# -- the view ------------------------------------------------------------------------------------
class _Meta(MetaView, omit_defaults=True):
    """A pod view's metadata plus what the Job controller also reads."""

    finalizers: list[str] | None = None
    deletionGracePeriodSeconds: int | None = None


class _Terminated(msgspec.Struct, omit_defaults=True):
    exitCode: int = 0
    finishedAt: str | None = None


class _State(msgspec.Struct, omit_defaults=True):
    terminated: _Terminated | None = None


class _ContainerStatus(msgspec.Struct, omit_defaults=True):
    name: str = ""
    restartCount: int = 0
    state: _State | None = None


class _Status(msgspec.Struct, omit_defaults=True):
    phase: str | None = None
    conditions: list[ConditionView] | None = None
    containerStatuses: list[_ContainerStatus] | None = None
    initContainerStatuses: list[_ContainerStatus] | None = None


class _Pod(msgspec.Struct, omit_defaults=True):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    spec: SpecView = msgspec.field(default_factory=SpecView)
    status: _Status = msgspec.field(default_factory=_Status)


_decoder = msgspec.json.Decoder(_Pod)


def job_pod_view(raw: bytes) -> Obj:
    out: Obj = msgspec.to_builtins(_decoder.decode(raw))
    return out


def job_pod_views(indexer: Indexer, namespace: str) -> list[Obj]:
    """Views of every cached pod in `namespace`."""
    codec, out = indexer.codec, []
    for key in indexer.index_keys(NAMESPACE_INDEX, namespace):
        entry = indexer.entry(key)
        if entry is not None:
            out.append(job_pod_view(codec.raw(entry)))
    return out


# -- predicates ----------------------------------------------------------------------------------
def has_tracking_finalizer(pod: Obj) -> bool:
    return JOB_TRACKING_FINALIZER in (meta(pod).get("finalizers") or ())


def uid_of(pod: Obj) -> str:
    return str(meta(pod).get("uid") or "")


def only_replace_failed_pods(job: Obj) -> bool:
    spec = job.get("spec") or {}
    return spec.get("podReplacementPolicy") == "Failed" or spec.get("podFailurePolicy") is not None


def is_pod_failed(pod: Obj, job: Obj) -> bool:
    phase = pod_phase(pod)
    if phase == "Failed":
        return True
    if only_replace_failed_pods(job):
        return False
    return bool(meta(pod).get("deletionTimestamp")) and phase != "Succeeded"


def is_pod_terminating(pod: Obj) -> bool:
    """Being deleted but not terminal yet (controller.IsPodTerminating)."""
    return bool(meta(pod).get("deletionTimestamp")) and pod_phase(pod) not in ("Succeeded", "Failed")


def count_terminating(pods: list[Obj]) -> int:
    return sum(1 for p in pods if is_pod_terminating(p))


def container_statuses(pod: Obj, *, init: bool = False) -> list[Obj]:
    statuses = (pod.get("status") or {}).get("initContainerStatuses" if init else "containerStatuses")
    return [c for c in statuses if isinstance(c, dict)] if isinstance(statuses, list) else []


def _terminated(c: Obj) -> Obj | None:
    state = c.get("state")
    t = state.get("terminated") if isinstance(state, dict) else None
    return t if isinstance(t, dict) else None


def finished_time(pod: Obj) -> float:
    """When the pod finished (getFinishedTime; see the module docstring)."""
    latest: float | None = None
    statuses = container_statuses(pod)
    for c in statuses:
        t = _terminated(c)
        at = parse_time(t.get("finishedAt")) if t is not None else None
        if at is None:
            latest = None
            break
        latest = at if latest is None or at > latest else latest
    if latest is not None:
        return latest
    for c in (pod.get("status") or {}).get("conditions") or ():
        if isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "False":
            at = parse_time(c.get("lastTransitionTime"))
            if at is not None:
                return at
    m = meta(pod)
    deleted = parse_time(m.get("deletionTimestamp"))
    if deleted is not None:
        return deleted - float(m.get("deletionGracePeriodSeconds") or 0)
    return parse_time(m.get("creationTimestamp")) or 0.0


def sort_by_finished_time(pods: list[Obj]) -> list[Obj]:
    return sorted(pods, key=finished_time)


def restart_count_sum(pod: Obj) -> int:
    return sum(int(c.get("restartCount") or 0) for init in (True, False) for c in container_statuses(pod, init=init))


# -- writing -------------------------------------------------------------------------------------
class JobPodControl(RealPodControl):
    """`RealPodControl` plus creation under a given generateName (CreatePodsWithGenerateName)."""

    async def create_pod_with_generate_name(self, namespace: str, template: Obj, owner: Obj, controller_ref: Obj,
                                            generate_name: str) -> None:
        pod = pod_from_template(template, owner=owner, controller_ref=controller_ref)
        if generate_name:
            pod["metadata"]["generateName"] = generate_name
        if not pod["metadata"].get("labels"):
            raise NoLabels("unable to create pods, no labels")
        try:
            created = await self.pods.create(pod, namespace=namespace)
        except Exception as e:
            if not has_status_cause(e, NAMESPACE_TERMINATING_CAUSE):
                self.recorder.event(owner, WARNING, reason="FailedCreate", message=f"Error creating: {e}")
            raise
        name = meta(created).get("name", "")
        log.debug("job %s created pod %s", object_key(owner), name)
        self.recorder.event(owner, NORMAL, reason="SuccessfulCreate", message=f"Created pod: {name}")


class JobPodControlLike(PodControl, Protocol):
    """What the Job controller needs of its pod control (tests substitute a fake)."""

    async def create_pod_with_generate_name(self, namespace: str, template: Obj, owner: Obj, controller_ref: Obj,
                                            generate_name: str) -> None: ...
