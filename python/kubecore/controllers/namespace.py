"""The namespace controller: empties a namespace that is being deleted, then finalizes it
(upstream's pkg/controller/namespace: namespace_controller.go + deletion/namespaced_resources_deleter.go).

The API server only marks a deleted namespace (deletionTimestamp, phase Terminating, spec.finalizers
["kubernetes"]) and refuses new content in it. This controller, for every namespace it sees with a
deletionTimestamp (after `sync_delay`, upstream's 5 s grace for caches to settle):

1. GETs the namespace (fresh, not from the cache); gone, not being deleted, or spec.finalizers
   already empty -> done. Phase not Terminating yet -> written through /status.
2. Deletes all content: discovery (fresh each pass) lists every namespaced resource with the delete
   verb in its group's preferred version; for each, a DELETE of the collection (propagationPolicy
   Background), or LIST + DELETE of each item where deletecollection is not served; then LIST what
   remains. Pods get a time estimate: the longest terminationGracePeriodSeconds of non-terminal
   pods, until that long after the namespace's deletionTimestamp. Remaining items with finalizers
   estimate 15 s; remaining items without any are an error.
3. Writes the five deletion conditions when they changed (`ConditionUpdater`, upstream's
   status_condition_utils.go): each type carries the failure recorded in this pass, or its "ok"
   variant (status False); lastTransitionTime changes only with the status; reasons and messages
   are upstream's word for word, so `kubectl describe namespace` reads the same.
4. Errors -> retried with backoff; content remaining -> looked at again after estimate/2 + 1 s;
   empty -> PUT /finalize without "kubernetes" in spec.finalizers (the API server then deletes the
   namespace unless metadata.finalizers still holds something).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubecore.client import errors
from kubecore.client.clock import Clock
from kubecore.client.discovery import Discovery, ResourceInfo
from kubecore.client.informer import EventHandlerFuncs
from kubecore.client.ratelimit import ItemExponentialFailureRateLimiter
from kubecore.client.resource import ResourceClient
from kubecore.client.rest import RestClient
from kubecore.client.workqueue import RateLimitingQueue
from kubecore.controllers.base import ControllerContext, QueueController, register

log = logging.getLogger(__name__)

NAME = "namespace"
FINALIZER = "kubernetes"
FINALIZER_ESTIMATE_SECONDS = 15
DEFAULT_SYNC_DELAY = 5.0
RESYNC_PERIOD = 300.0
CONFLICT_RETRIES = 5
Obj = dict[str, Any]


# -- status conditions (upstream's status_condition_utils.go) ------------------------------
DISCOVERY_FAILURE = "NamespaceDeletionDiscoveryFailure"
GV_PARSING_FAILURE = "NamespaceDeletionGroupVersionParsingFailure"
CONTENT_FAILURE = "NamespaceDeletionContentFailure"
CONTENT_REMAINING = "NamespaceContentRemaining"
FINALIZERS_REMAINING = "NamespaceFinalizersRemaining"

CONDITION_TYPES = (DISCOVERY_FAILURE, GV_PARSING_FAILURE, CONTENT_FAILURE, CONTENT_REMAINING, FINALIZERS_REMAINING)
OK_MESSAGES = {
    DISCOVERY_FAILURE: "All resources successfully discovered",
    GV_PARSING_FAILURE: "All legacy kube types successfully parsed",
    CONTENT_FAILURE: "All content successfully deleted, may be waiting on finalization",
    CONTENT_REMAINING: "All content successfully removed",
    FINALIZERS_REMAINING: "All content successfully removed",
}
OK_REASONS = {
    DISCOVERY_FAILURE: "ResourcesDiscovered",
    GV_PARSING_FAILURE: "ParsedGroupVersions",
    CONTENT_FAILURE: "ContentDeleted",
    CONTENT_REMAINING: "ContentRemoved",
    FINALIZERS_REMAINING: "ContentRemoved",
}

Condition = dict[str, Any]


@dataclass
class ContentTotals:
    """What is left after one pass: per "resource.group", and per finalizer."""

    remaining: dict[str, int] = field(default_factory=dict)
    finalizers: dict[str, int] = field(default_factory=dict)

    def add(self, resource: str, group: str, count: int, finalizers: Mapping[str, int]) -> None:
        if count <= 0:
            return
        key = f"{resource}.{group}"
        self.remaining[key] = self.remaining.get(key, 0) + count
        for f, n in finalizers.items():
            if n:
                self.finalizers[f] = self.finalizers.get(f, 0) + n


@dataclass
class ConditionUpdater:
    now: str
    """The RFC 3339 time stamped on conditions that change status."""
    new: list[Condition] = field(default_factory=list)
    content_errors: list[str] = field(default_factory=list)

    def _failed(self, ctype: str, reason: str, message: str) -> None:
        self.new.append({"type": ctype, "status": "True", "lastTransitionTime": self.now,
                         "reason": reason, "message": message})

    def discovery_failed(self, message: str, *, failing_groups: int | None = None) -> None:
        if failing_groups is not None:
            message = f"Discovery failed for some groups, {failing_groups} failing: {message}"
        self._failed(DISCOVERY_FAILURE, "DiscoveryFailed", message)

    def group_version_failed(self, message: str) -> None:
        self._failed(GV_PARSING_FAILURE, "GroupVersionParsingFailed", message)

    def delete_content_failed(self, message: str) -> None:
        self.content_errors.append(message)

    def content_totals(self, totals: ContentTotals) -> None:
        if totals.remaining:
            items = sorted(f"{k} has {n} resource instances" for k, n in totals.remaining.items() if n)
            self._failed(CONTENT_REMAINING, "SomeResourcesRemain", f"Some resources are remaining: {', '.join(items)}")
        if totals.finalizers:
            items = sorted(f"{k} in {n} resource instances" for k, n in totals.finalizers.items() if n)
            self._failed(FINALIZERS_REMAINING, "SomeFinalizerRemain",
                         f"Some finalizers are remaining: {', '.join(items)}")

    def update(self, status: dict[str, Any]) -> bool:
        """Write the conditions into `status` (in place); True if anything changed."""
        if self.content_errors and _find(self.new, CONTENT_FAILURE) is None:
            msgs = sorted(self.content_errors)
            self._failed(CONTENT_FAILURE, "ContentDeletionFailed",
                         f"Failed to delete all resource types, {len(msgs)} remaining: {', '.join(msgs)}")
        conditions: list[Condition] = status.setdefault("conditions", [])
        changed = False
        for ctype in CONDITION_TYPES:
            new = _find(self.new, ctype) or {"type": ctype, "status": "False", "lastTransitionTime": self.now,
                                             "reason": OK_REASONS[ctype], "message": OK_MESSAGES[ctype]}
            old = _find(conditions, ctype)
            if old is None:
                conditions.append(dict(new))
                changed = True
            elif (old.get("status"), old.get("reason"), old.get("message")) != (
                    new["status"], new["reason"], new["message"]):
                if old.get("status") != new["status"]:
                    old["lastTransitionTime"] = self.now
                old.update(status=new["status"], reason=new["reason"], message=new["message"])
                changed = True
        return changed


def _find(conditions: list[Condition], ctype: str) -> Condition | None:
    return next((c for c in conditions if c.get("type") == ctype), None)


class ResourcesRemaining(Exception):
    def __init__(self, estimate: int) -> None:
        super().__init__(f"some content remains in the namespace, estimate {estimate} seconds before it is removed")
        self.estimate = estimate


class ContentErrors(Exception):
    """One or more resources could not be emptied (aggregated, as upstream)."""


def rfc3339(t: float) -> str:
    return dt.datetime.fromtimestamp(t, tz=dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(s: str) -> float | None:
    try:
        return dt.datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc).timestamp()
    except (TypeError, ValueError):
        return None


def gvr_string(info: ResourceInfo) -> str:
    """Go's GroupVersionResource.String(): "apps/v1, Resource=deployments"."""
    return f"{info.group}/{info.version}, Resource={info.resource}"


@dataclass
class ResourceResult:
    estimate: int = 0
    remaining: int = 0
    finalizers: dict[str, int] = field(default_factory=dict)


def pods_estimate(pods: list[Obj]) -> int:
    """The longest grace period of the pods that are not finished."""
    estimate = 0
    for pod in pods:
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
        if isinstance(grace, int) and grace > estimate:
            estimate = grace
    return estimate


class NamespacedResourcesDeleter:
    """Steps 1-4 of the module docstring for one namespace (no informers: drivable from tests)."""

    def __init__(self, rest: RestClient, *, clock: Clock) -> None:
        self.rest = rest
        self.clock = clock
        self.discovery = Discovery(rest)
        self._namespaces: ResourceClient | None = None
        self._no_deletecollection: set[tuple[str, str]] = set()

    async def namespaces(self) -> ResourceClient:
        if self._namespaces is None:
            self._namespaces = await self.rest.resource("v1", "namespaces")
        return self._namespaces

    async def delete(self, name: str) -> None:
        """Raises ResourcesRemaining (look again later) or another error (retry with backoff)."""
        nsc = await self.namespaces()
        try:
            ns = await nsc.get(name)
        except errors.NotFound:
            return
        if not (ns.get("metadata") or {}).get("deletionTimestamp"):
            return
        current = await self._ensure_terminating(nsc, ns)
        if current is None or not (current.get("spec") or {}).get("finalizers"):
            return
        ns = current
        estimate = await self.delete_all_content(nsc, ns)
        if estimate > 0:
            raise ResourcesRemaining(estimate)
        await self._finalize(nsc, ns)

    async def _ensure_terminating(self, nsc: ResourceClient, ns: Obj) -> Obj | None:
        if (ns.get("status") or {}).get("phase") == "Terminating":
            return ns
        body = {**ns, "status": {**(ns.get("status") or {}), "phase": "Terminating"}}
        try:
            return await nsc.update_status(body)
        except errors.NotFound:
            return None

    async def _finalize(self, nsc: ResourceClient, ns: Obj) -> None:
        name = ns["metadata"]["name"]
        for _ in range(CONFLICT_RETRIES):
            finalizers = sorted({f for f in (ns.get("spec") or {}).get("finalizers") or () if f != FINALIZER})
            body = {"apiVersion": "v1", "kind": "Namespace", "metadata": ns["metadata"],
                    "spec": {**(ns.get("spec") or {}), "finalizers": finalizers}}
            try:
                await nsc.update(body, subresource="finalize")
                log.info("namespace controller: %s is empty; finalized", name)
                return
            except errors.NotFound:
                return
            except errors.Conflict:
                latest = await nsc.get(name)
                if latest["metadata"].get("uid") != ns["metadata"].get("uid"):
                    raise errors.ClientError("namespace uid has changed across retries") from None
                ns = latest
        raise errors.ClientError(f"namespace {name}: finalize kept conflicting")

    async def deletable_resources(self, cond: ConditionUpdater) -> list[ResourceInfo]:
        """Namespaced resources with the delete verb, preferred versions; failures go to `cond`."""
        self.discovery.invalidate()
        try:
            gvs = await self.discovery.group_versions()
        except errors.ClientError as e:
            cond.discovery_failed(str(e))
            raise
        out: dict[tuple[str, str], ResourceInfo] = {}
        failed: list[str] = []
        for gv in gvs:
            try:
                infos = await self.discovery.resources(gv)
            except errors.ClientError as e:
                failed.append(f"{gv}: {e}")
                continue
            for info in infos:
                if info.namespaced and "delete" in info.verbs:
                    out.setdefault((info.group, info.resource), info)
        if failed:
            cond.discovery_failed(", ".join(failed), failing_groups=len(failed))
        return list(out.values())

    async def delete_all_content(self, nsc: ResourceClient, ns: Obj) -> int:
        """One pass over every resource; returns the estimate (0: nothing left)."""
        name = ns["metadata"]["name"]
        deleted_at = parse_rfc3339(ns["metadata"].get("deletionTimestamp", "")) or self.clock.now()
        cond = ConditionUpdater(now=rfc3339(self.clock.now()))
        errs: list[str] = []
        try:
            resources = await self.deletable_resources(cond)
        except errors.ClientError as e:
            errs.append(str(e))
            resources = []
        results = await asyncio.gather(*(self.delete_resource(info, name, deleted_at=deleted_at) for info in resources),
                                       return_exceptions=True)
        totals = ContentTotals()
        estimate = 0
        for info, res in zip(resources, results):
            if isinstance(res, asyncio.CancelledError):
                raise res
            if isinstance(res, BaseException):
                msg = str(res) or type(res).__name__
                errs.append(msg)
                cond.delete_content_failed(msg)
                res = getattr(res, "result", None) or ResourceResult()
            assert isinstance(res, ResourceResult)
            estimate = max(estimate, res.estimate)
            totals.add(info.resource, info.group, res.remaining, res.finalizers)
        cond.content_totals(totals)
        status = dict(ns.get("status") or {})
        status["conditions"] = [dict(c) for c in status.get("conditions") or ()]
        if cond.update(status):
            try:
                ns_new = await nsc.update_status({**ns, "status": status})
                ns["metadata"] = ns_new["metadata"]
            except errors.ClientError as e:
                log.warning("namespace controller: couldn't update status conditions of %s: %s", name, e)
        if errs:
            raise ContentErrors("; ".join(errs))
        return estimate

    async def delete_resource(self, info: ResourceInfo, namespace: str, *, deleted_at: float) -> ResourceResult:
        rc = ResourceClient(self.rest, info)
        estimate = 0
        if (info.group, info.resource) == ("", "pods"):
            pods, _ = await rc.list_all(namespace=namespace)
            estimate = pods_estimate(pods)
            if self.clock.now() - deleted_at >= estimate:
                estimate = 0
        key = (info.group, info.resource)
        if "deletecollection" in info.verbs and key not in self._no_deletecollection:
            try:
                await rc.delete_collection(namespace=namespace, propagation_policy="Background")
            except (errors.MethodNotAllowed, errors.NotFound):
                self._no_deletecollection.add(key)
        if "deletecollection" not in info.verbs or key in self._no_deletecollection:
            await self._delete_each(rc, namespace)
        if "list" not in info.verbs:
            return ResourceResult(estimate=estimate)
        items, _ = await rc.list_all(namespace=namespace)
        if not items:
            return ResourceResult()
        finalizers: dict[str, int] = {}
        for item in items:
            for f in (item.get("metadata") or {}).get("finalizers") or ():
                finalizers[f] = finalizers.get(f, 0) + 1
        if estimate:
            return ResourceResult(estimate=estimate, remaining=len(items), finalizers=finalizers)
        if finalizers:
            return ResourceResult(estimate=FINALIZER_ESTIMATE_SECONDS, remaining=len(items), finalizers=finalizers)
        err = ContentErrors(f"unexpected items still remain in namespace: {namespace} for gvr: {gvr_string(info)}")
        err.result = ResourceResult(remaining=len(items))  # type: ignore[attr-defined]
        raise err

    async def _delete_each(self, rc: ResourceClient, namespace: str) -> None:
        if "list" not in rc.info.verbs:
            return
        items, _ = await rc.list_all(namespace=namespace)
        for item in items:
            try:
                await rc.delete(item["metadata"]["name"], namespace=namespace, propagation_policy="Background")
            except errors.NotFound:
                pass


@register(NAME, workers=10, aliases=("namespace-controller",))
class NamespaceController(QueueController):
    """Runs until cancelled; the queue holds the names of namespaces being deleted."""

    name = NAME
    description = "namespace controller"

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(rest=ctx.rest, informers=ctx.informers, clock=ctx.clock, queue=RateLimitingQueue(
            ItemExponentialFailureRateLimiter(0.005, 60.0), clock=ctx.clock))
        self.ctx = ctx
        self.deleter = NamespacedResourcesDeleter(ctx.rest, clock=ctx.clock)
        self.sync_delay = float(ctx.options.get("namespace_sync_delay", DEFAULT_SYNC_DELAY))

    def _enqueue(self, ns: Obj) -> None:
        meta = ns.get("metadata") or {}
        if meta.get("deletionTimestamp") and meta.get("name"):
            self.queue.add_after(str(meta["name"]), self.sync_delay)

    async def wire(self) -> None:
        informer = await self.informers.informer_for("v1", "namespaces", resync_period=RESYNC_PERIOD)
        self.wiring.add(informer, EventHandlerFuncs(on_add_func=lambda obj, initial: self._enqueue(obj),
                                                    on_update_func=lambda old, new: self._enqueue(new)),
                        resync_period=RESYNC_PERIOD)

    async def sync(self, key: str) -> None:
        await self.deleter.delete(key)

    def on_sync_error(self, key: str, err: Exception) -> None:
        """Content still there: look again after half its estimate; anything else: backoff."""
        if isinstance(err, ResourcesRemaining):
            log.info("namespace controller: %s: %s", key, err)
            self.queue.add_after(key, err.estimate // 2 + 1)
        else:
            log.warning("namespace controller: deletion of namespace %s failed: %s", key, err)
            self.queue.add_rate_limited(key)
