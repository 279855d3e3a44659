"""The disruption controller: PodDisruptionBudget status (upstream pkg/controller/disruption).

The eviction subresource (kubecore.apiserver.eviction) only lets a pod go when its budget's status
says so; this controller keeps that status true. Level-driven; the queue holds budget keys:
- a budget added, updated or deleted enqueues itself;
- a pod event enqueues the (first) budget whose selector matches the pod (a pod matched by
  several gets a MultiplePodDisruptionBudgets Warning event);
- a budget with recent disruptions is looked at again when the oldest one expires.

A sync (upstream trySync) reads the budget and the pods its selector matches from the caches:
1. expectedPods and desiredHealthy (`disruption_status.desired_healthy`): an integer minAvailable
   counts the selected pods; maxUnavailable or a percentage minAvailable is relative to the
   pods' controllers' scale — for each pod, its controller reference resolved (checking UIDs) to
   a ReplicationController, a Deployment (through its ReplicaSet), a ReplicaSet not owned by a
   Deployment, a StatefulSet (from the informer caches), or else any kind serving the /scale
   subresource (GET .../scale); the scales of the distinct controllers are summed. Pods without a
   controller get an UnmanagedPods Warning event; a pod whose controller is not found fails the
   sync.
2. disruptedPods: entries older than 2 minutes whose pod was not deleted are dropped (NotDeleted
   event on the pod).
3. currentHealthy: Ready pods not being deleted and not recently disrupted;
   disruptionsAllowed = currentHealthy - desiredHealthy (0 when negative or nothing expected).
4. The status (with observedGeneration and the DisruptionAllowed condition) is written through
   /status only when it changed.
A failing sync (other than a write conflict) writes a fail-safe status instead: disruptionsAllowed
0 and DisruptionAllowed False/SyncFailed with the error, so evictions stop while the budget is
unknown. The error is retried with backoff.

A second queue clears stale DisruptionTarget conditions: a pod that got DisruptionTarget=True (not
from the kubelet) but is neither being deleted nor finished 2 minutes later gets it set to False.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.client.errors import Conflict, NotFound
from kubecore.client.factory import SharedInformerFactory
from kubecore.client.indexer import NAMESPACE_INDEX, DeletedFinalStateUnknown, Indexer, split_meta_namespace_key
from kubecore.client.informer import EventHandlerFuncs
from kubecore.client.resource import ResourceClient
from kubecore.client.rest import RestClient
from kubecore.client.workqueue import RateLimitingQueue
from kubecore.controllers.base import ControllerContext, QueueController, process_queue, register
from kubecore.controllers.controller_utils import (
    InvalidSelector, format_time, get_controller_of, labels_of, meta, object_key, parse_time, pod_phase,
    selector_from_label_selector,
)
from kubecore.controllers.disruption_status import (
    build_disrupted_pods, count_healthy, desired_healthy, fail_safe_status, needs_scale, new_status,
)
from kubecore.controllers.podcontrol import EventRecorderLike
from kubecore.controllers.podgc import DISRUPTION_TARGET, with_condition

log = logging.getLogger(__name__)

Obj = dict[str, Any]
NAME = "disruption"
COMPONENT = "controllermanager"
STALE_POD_DISRUPTION_TIMEOUT = 120.0
TERMINATION_BY_KUBELET = "TerminationByKubelet"
PDB_API_VERSION = "policy/v1"


def _unwrap(obj: Obj | DeletedFinalStateUnknown) -> Obj:
    return obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj


def _group(api_version: str) -> str:
    return api_version.split("/", 1)[0] if "/" in api_version else ""


def _replicas(obj: Obj) -> int:
    value = (obj.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


class DisruptionController(QueueController):
    """Runs until cancelled: `await DisruptionController(rest=..., informers=...).run(1)` (one worker on
    PodDisruptionBudget keys and one on stale pod conditions, whatever `workers` says)."""

    name = NAME
    description = "disruption controller"

    def __init__(self, *, rest: RestClient, informers: SharedInformerFactory,
                 recorder: EventRecorderLike | None = None, clock: Clock = REAL_CLOCK,
                 stale_pod_disruption_timeout: float = STALE_POD_DISRUPTION_TIMEOUT) -> None:
        super().__init__(rest=rest, informers=informers, recorder=recorder, clock=clock)
        self.stale_timeout = stale_pod_disruption_timeout
        self.stale_queue: RateLimitingQueue[str] = RateLimitingQueue(clock=clock)
        self.pdbs: ResourceClient
        self.pods: ResourceClient
        self.idx: dict[str, Indexer] = {}

    async def wire(self) -> None:
        self.pdbs = await self.rest.resource(PDB_API_VERSION, "poddisruptionbudgets")
        self.pods = await self.rest.resource("v1", "pods")
        informers = {name: await self.informers.informer_for(av, res) for name, av, res in (
            ("pdb", PDB_API_VERSION, "poddisruptionbudgets"), ("pod", "v1", "pods"),
            ("rc", "v1", "replicationcontrollers"), ("rs", "apps/v1", "replicasets"),
            ("deploy", "apps/v1", "deployments"), ("sts", "apps/v1", "statefulsets"))}
        self.idx = {name: inf.indexer for name, inf in informers.items()}
        self.wiring.add(informers["pdb"], EventHandlerFuncs(
            on_add_func=lambda p, _i: self.enqueue(p), on_update_func=lambda _o, p: self.enqueue(p),
            on_delete_func=lambda p: self.enqueue(_unwrap(p))))
        self.wiring.add(informers["pod"], EventHandlerFuncs(
            on_add_func=lambda p, _i: self._pod_event(p, check_stale=True),
            on_update_func=lambda _o, p: self._pod_event(p, check_stale=True),
            on_delete_func=lambda p: self._pod_event(_unwrap(p), check_stale=False)))
        for name in ("rc", "rs", "deploy", "sts"):
            self.wiring.add(informers[name])

    def queues(self) -> list[RateLimitingQueue[str]]:
        return [self.queue, self.stale_queue]

    async def work(self, workers: int) -> None:
        await asyncio.gather(self.worker(), process_queue(self.stale_queue, self.sync_stale_pod_disruption, name=NAME))

    # -- events ---------------------------------------------------------------------------------------
    def _pod_event(self, pod: Obj, *, check_stale: bool) -> None:
        pdb = self.pdb_for_pod(pod)
        if pdb is not None:
            self.enqueue(pdb)
        if check_stale:
            stale, wait = self.stale_disruption_condition(pod)
            if stale:
                self.stale_queue.add_after(object_key(pod), wait)

    def pdb_for_pod(self, pod: Obj) -> Obj | None:
        labels = labels_of(pod)
        if not labels:
            return None
        matching = []
        for pdb in self.idx["pdb"].by_index(NAMESPACE_INDEX, str(meta(pod).get("namespace") or "")):
            try:
                selector = selector_from_label_selector((pdb.get("spec") or {}).get("selector"))
            except InvalidSelector:
                continue
            if selector.matches(labels):
                matching.append(pdb)
        if not matching:
            return None
        if len(matching) > 1:
            m = meta(pod)
            msg = (f'Pod "{m.get("namespace")}"/"{m.get("name")}" matches multiple PodDisruptionBudgets.  '
                   f'Chose "{meta(matching[0]).get("name")}" arbitrarily.')
            self.recorder.event({**pod, "apiVersion": "v1", "kind": "Pod"}, "Warning",
                                reason="MultiplePodDisruptionBudgets", message=msg)
        return matching[0]

    # -- expected scale ---------------------------------------------------------------------------------
    def _cached(self, kind: str, namespace: str, ref: Obj) -> Obj | None:
        obj = self.idx[kind].get_by_key(f"{namespace}/{ref.get('name')}")
        return obj if obj is not None and meta(obj).get("uid") == ref.get("uid") else None

    async def controller_scale(self, ref: Obj, namespace: str) -> tuple[str, int] | None:
        """(uid, scale) of the controller a pod's controller reference names: upstream's finders in
        order (ReplicationController, Deployment, ReplicaSet, StatefulSet from the caches), then the
        /scale subresource of whatever kind it is."""
        found = self._cached_scale(ref, namespace)
        return found if found is not None else await self.scale_subresource(ref, namespace)

    def _cached_scale(self, ref: Obj, namespace: str) -> tuple[str, int] | None:
        kind, group = ref.get("kind"), _group(str(ref.get("apiVersion") or ""))
        if kind == "ReplicationController" and group == "":
            rc = self._cached("rc", namespace, ref)
            return (str(ref["uid"]), _replicas(rc)) if rc is not None else None
        if kind == "ReplicaSet" and group in ("apps", "extensions"):
            rs = self._cached("rs", namespace, ref)
            if rs is None:
                return None
            owner = get_controller_of(rs)
            if owner is None:
                return str(ref["uid"]), _replicas(rs)
            owner_group = _group(str(owner.get("apiVersion") or ""))
            if owner.get("kind") == "Deployment" and owner_group in ("apps", "extensions"):
                deploy = self._cached("deploy", namespace, owner)
                return (str(owner["uid"]), _replicas(deploy)) if deploy is not None else None
            if owner.get("kind") != "Deployment":
                return str(ref["uid"]), _replicas(rs)
            return None
        if kind == "StatefulSet" and group == "apps":
            sts = self._cached("sts", namespace, ref)
            return (str(ref["uid"]), _replicas(sts)) if sts is not None else None
        return None

    async def scale_subresource(self, ref: Obj, namespace: str) -> tuple[str, int] | None:
        client = await self.rest.resource(str(ref.get("apiVersion") or ""), str(ref.get("kind") or ""))
        try:
            scale = await client.get(str(ref.get("name")), namespace=namespace, subresource="scale")
        except NotFound:
            if "scale" not in client.info.subresources:
                group = client.info.group
                raise RuntimeError(f"{client.info.resource}{'.' + group if group else ''} does not implement "
                                   f"the scale subresource") from None
            return None
        if meta(scale).get("uid") != ref.get("uid"):
            return None
        return str(ref["uid"]), int((scale.get("spec") or {}).get("replicas") or 0)

    async def expected_scale(self, pods: list[Obj]) -> tuple[int, list[str]]:
        """(sum of the distinct controllers' scale, names of pods without a controller)."""
        scales: dict[str, int] = {}
        unmanaged: list[str] = []
        for pod in pods:
            ref = get_controller_of(pod)
            if ref is None:
                unmanaged.append(str(meta(pod).get("name")))
                continue
            if ref.get("uid") in scales:
                continue
            found = await self.controller_scale(ref, str(meta(pod).get("namespace") or ""))
            if found is None:
                raise RuntimeError(f'found no controllers for pod "{meta(pod).get("name")}"')
            scales[found[0]] = found[1]
        return sum(scales.values()), unmanaged

    # -- sync ---------------------------------------------------------------------------------------------
    def pods_for(self, pdb: Obj) -> list[Obj]:
        selector = selector_from_label_selector((pdb.get("spec") or {}).get("selector"))
        return [p for p in self.idx["pod"].by_index(NAMESPACE_INDEX, str(meta(pdb).get("namespace") or ""))
                if selector.matches(labels_of(p))]

    def _event(self, pdb: Obj, event_type: str, reason: str, message: str) -> None:
        self.recorder.event({**pdb, "apiVersion": PDB_API_VERSION, "kind": "PodDisruptionBudget"}, event_type,
                            reason=reason, message=message)

    async def sync(self, key: str) -> None:
        pdb = self.idx["pdb"].get_by_key(key)
        if pdb is None:
            return
        try:
            await self.try_sync(pdb)
        except Conflict:
            raise
        except Exception as e:
            log.error("failed to sync PDB %s: %s", key, e)
            await self.write_status(pdb, fail_safe_status(pdb, str(e), now=self.clock.now()))
            raise

    async def try_sync(self, pdb: Obj) -> None:
        try:
            pods = self.pods_for(pdb)
        except InvalidSelector as e:
            self._event(pdb, "Warning", "NoPods", f"Failed to get pods: {e}")
            raise
        if not pods:
            self._event(pdb, "Normal", "NoPods", "No matching pods found")
        try:
            scale, unmanaged = await self.expected_scale(pods) if needs_scale(pdb) else (0, [])
            expected, desired = desired_healthy(pdb, pod_count=len(pods), scale=scale)
        except Exception as e:
            self._event(pdb, "Warning", "CalculateExpectedPodCountFailed",
                        f"Failed to calculate the number of expected pods: {e}")
            raise
        if unmanaged:
            self._event(pdb, "Warning", "UnmanagedPods",
                        f"Pods selected by this PodDisruptionBudget "
                        f"(selector: {(pdb.get('spec') or {}).get('selector')})"
                        " were found to be unmanaged. As a result, the status of the PDB cannot be calculated "
                        "correctly, which may result in undefined behavior. To account for these pods please set "
                        "\".spec.minAvailable\" field of the PDB to an integer value.")
        now = self.clock.now()
        disrupted, recheck, expired = build_disrupted_pods(pods, pdb, now)
        m = meta(pdb)
        for pod in expired:
            self.recorder.event({**pod, "apiVersion": "v1", "kind": "Pod"}, "Warning", reason="NotDeleted",
                                message=f"Pod was expected by PDB {m.get('namespace')}/{m.get('namespace')} "
                                        "to be deleted but it wasn't")
        status = new_status(pdb, current_healthy=count_healthy(pods, disrupted, now), desired=desired,
                            expected=expected, disrupted=disrupted, now=now)
        if status is not None:
            await self.write_status(pdb, status)
        if recheck is not None:
            self.queue.add_after(object_key(pdb), recheck - now)

    async def write_status(self, pdb: Obj, status: Obj) -> None:
        body = {**pdb, "apiVersion": PDB_API_VERSION, "kind": "PodDisruptionBudget", "status": status}
        await self.pdbs.update_status(body, namespace=str(meta(pdb).get("namespace")))

    # -- stale DisruptionTarget conditions ----------------------------------------------------------------
    def stale_disruption_condition(self, pod: Obj) -> tuple[bool, float]:
        """(whether the pod has a DisruptionTarget=True condition nobody acted on, seconds until stale)."""
        if meta(pod).get("deletionTimestamp"):
            return False, 0.0
        cond = next((c for c in (pod.get("status") or {}).get("conditions") or ()
                     if isinstance(c, dict) and c.get("type") == DISRUPTION_TARGET), None)
        if cond is None or cond.get("status") != "True" or cond.get("reason") == TERMINATION_BY_KUBELET \
                or pod_phase(pod) in ("Succeeded", "Failed"):
            return False, 0.0
        since = parse_time(cond.get("lastTransitionTime")) or 0.0
        return True, max(0.0, self.stale_timeout - (self.clock.now() - since))

    async def sync_stale_pod_disruption(self, key: str) -> None:
        pod = self.idx["pod"].get_by_key(key)
        if pod is None:
            return
        stale, wait = self.stale_disruption_condition(pod)
        if not stale:
            return
        if wait > 0:
            self.stale_queue.add_after(key, wait)
            return
        namespace, name = split_meta_namespace_key(key)
        status = dict(pod.get("status") or {})
        status["conditions"] = with_condition(list(status.get("conditions") or []),
                                              {"type": DISRUPTION_TARGET, "status": "False"},
                                              now=format_time(self.clock.now()))
        await self.pods.update_status({**pod, "apiVersion": "v1", "kind": "Pod", "status": status},
                                      namespace=namespace)
        log.info("reset stale DisruptionTarget condition of pod %s to False", key)


@register(NAME, workers=1, aliases=("disruption-controller",))
def new_disruption_controller(ctx: ControllerContext) -> DisruptionController:
    return DisruptionController(rest=ctx.rest, informers=ctx.informers, recorder=ctx.recorder(COMPONENT),
                                clock=ctx.clock)
