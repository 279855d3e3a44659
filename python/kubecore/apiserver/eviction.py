"""``POST .../pods/NAME/eviction``: delete a pod only if its PodDisruptionBudget allows it.

As upstream's EvictionREST: a pod that is pending, finished or already being deleted is deleted
without looking at budgets. Otherwise the pod's budget (at most one; more is a 500) must be
observed by its controller (status.observedGeneration) and allow a disruption; the eviction
then takes one (disruptionsAllowed - 1, the pod recorded in disruptedPods) with a conditional
status write, and deletes the pod with the eviction's DeleteOptions. A budget that allows none
answers 429 TooManyRequests with a DisruptionBudget cause; the pod stays.
An unready pod may go without taking a disruption when the budget is healthy anyway
(unhealthyPodEvictionPolicy IfHealthyBudget, the default) or always (AlwaysAllow).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from kubecore.api.jsoncopy import json_copy
from kubecore.api import errors
from kubecore.api.kinds.common import selector_matches
from kubecore.api.meta import now_rfc3339
from kubecore.api.registry import Registry, ResourceType
from kubecore.apiserver import deletion
from kubecore.apiserver.deletion import DeleteOptions
from kubecore.apiserver.storage import ObjectStore

Obj = dict[str, Any]
DeletePod = Callable[[Obj, DeleteOptions], Awaitable[Any]]
RETRIES = 20
MAX_DISRUPTED_PODS = 2000
BLOCKED = "Cannot evict pod as it would violate the pod's disruption budget."


def _blocked(cause: str) -> errors.StatusError:
    return errors.StatusError(429, "TooManyRequests", BLOCKED,
                              {"causes": [{"reason": "DisruptionBudget", "message": cause}]})


def _budget_selects(selector: Any, labels: dict[str, str]) -> bool:
    """A budget's selector against a pod's labels; a missing (nil) selector selects nothing."""
    return isinstance(selector, dict) and selector_matches(selector, labels)


def _ready(pod: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _ignores_budgets(pod: Obj) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Succeeded", "Failed", "Pending") or bool(pod["metadata"].get("deletionTimestamp"))


def _check_name(name: str, body: Any) -> Obj:
    if not isinstance(body, dict):
        raise errors.bad_request("the request body must be an Eviction object")
    given = (body.get("metadata") or {}).get("name")
    if given and given != name:
        raise errors.bad_request("name in URL does not match name in Eviction object")
    return body


def _take_disruption(pdb: Obj, pod: Obj) -> Obj | None:
    """The budget's new status after this eviction, or None when the pod may go without one.
    Raises the 429/403 upstream answers when the budget does not allow it."""
    name, status = pdb["metadata"]["name"], pdb.get("status") or {}
    allowed = int(status.get("disruptionsAllowed") or 0)
    healthy, desired = int(status.get("currentHealthy") or 0), int(status.get("desiredHealthy") or 0)
    if not _ready(pod):
        policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") or "IfHealthyBudget"
        if policy == "AlwaysAllow" or (desired > 0 and healthy >= desired):
            return None
    if int(status.get("observedGeneration") or 0) < int(pdb["metadata"].get("generation") or 0):
        raise _blocked(f"The disruption budget {name} is still being processed by the server.")
    if allowed < 0:
        raise errors.forbidden(("policy", "poddisruptionbudget"), name, "pdb disruptions allowed is negative")
    if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_PODS:
        raise errors.forbidden(("policy", "poddisruptionbudget"), name,
                               "DisruptedPods map too big - too many evictions not confirmed by PDB controller")
    if allowed == 0:
        raise _blocked(f"The disruption budget {name} needs {desired} healthy pods and has {healthy} currently")
    new = json_copy(pdb)
    st = new.setdefault("status", {})
    st["disruptionsAllowed"] = allowed - 1
    st.setdefault("disruptedPods", {})[pod["metadata"]["name"]] = now_rfc3339()
    return new


async def evict(
    objects: ObjectStore,
    registry: Registry,
    pods: ResourceType,
    *,
    namespace: str,
    name: str,
    body: Any,
    dry_run: bool,
    delete_pod: DeletePod,
) -> None:
    eviction = _check_name(name, body)
    options = eviction.get("deleteOptions") or {}
    opts = deletion.parse_options(options if isinstance(options, dict) else {}, {})
    pdbs_rt = registry.get("policy", "v1", "poddisruptionbudgets")
    assert pdbs_rt is not None
    for _ in range(RETRIES):
        pod = objects.get(pods, namespace, name)
        if _ignores_budgets(pod):
            await delete_pod(pod, opts)
            return
        labels = pod["metadata"].get("labels") or {}
        budgets = [p for p in objects.list(pdbs_rt, namespace).items
                   if _budget_selects((p.get("spec") or {}).get("selector"), labels)]
        if len(budgets) > 1:
            raise errors.internal("This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.")
        new_budget = _take_disruption(budgets[0], pod) if budgets else None
        if dry_run:
            return
        try:
            if new_budget is not None:
                rv = int(new_budget["metadata"].pop("resourceVersion"))
                await objects.replace(pdbs_rt, namespace, new_budget["metadata"]["name"], new_budget, expect_revision=rv)
            pinned = DeleteOptions(grace_period=opts.grace_period, propagation=opts.propagation,
                                   orphan_dependents=opts.orphan_dependents, uid=opts.uid or pod["metadata"].get("uid"),
                                   resource_version=opts.resource_version or pod["metadata"]["resourceVersion"])
            await delete_pod(pod, pinned)
            return
        except errors.StatusError as e:
            if e.code != 409 or opts.uid or opts.resource_version:
                raise
    raise errors.conflict(pods, name, "too many concurrent writes; try again")
