"""Namespace deletion conditions: upstream's reasons and messages, ok variants, transition times."""

from __future__ import annotations

from typing import Any

from kubecore.controllers.namespace import gvr_string, pods_estimate
from kubecore.controllers.namespace import CONDITION_TYPES, ConditionUpdater, ContentTotals
from kubecore.client.discovery import ResourceInfo

T0, T1 = "2024-01-02T03:04:05Z", "2024-01-02T03:05:00Z"


def by_type(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


def test_everything_fine_gives_five_false_conditions() -> None:
    status: dict[str, Any] = {"phase": "Terminating"}
    assert ConditionUpdater(now=T0).update(status)
    conds = by_type(status)
    assert list(conds) == list(CONDITION_TYPES)
    assert all(c["status"] == "False" and c["lastTransitionTime"] == T0 for c in conds.values())
    assert conds["NamespaceContentRemaining"]["reason"] == "ContentRemoved"
    assert conds["NamespaceDeletionContentFailure"]["message"] == (
        "All content successfully deleted, may be waiting on finalization")
    assert not ConditionUpdater(now=T1).update(status)  # nothing changed: no write needed


def test_remaining_content_and_failures() -> None:
    status: dict[str, Any] = {}
    ConditionUpdater(now=T0).update(status)
    u = ConditionUpdater(now=T1)
    totals = ContentTotals()
    totals.add("configmaps", "", 2, {"example.com/hold": 2})
    totals.add("widgets", "example.com", 1, {"example.com/hold": 1, "other.io/x": 1})
    totals.add("secrets", "", 0, {})
    u.content_totals(totals)
    u.delete_content_failed("b went wrong")
    u.delete_content_failed("a went wrong")
    u.discovery_failed("metrics.k8s.io/v1beta1: 503", failing_groups=1)
    assert u.update(status)
    c = by_type(status)
    assert c["NamespaceContentRemaining"] == {
        "type": "NamespaceContentRemaining", "status": "True", "lastTransitionTime": T1,
        "reason": "SomeResourcesRemain",
        "message": "Some resources are remaining: configmaps. has 2 resource instances, "
                   "widgets.example.com has 1 resource instances"}
    assert c["NamespaceFinalizersRemaining"]["reason"] == "SomeFinalizerRemain"
    assert c["NamespaceFinalizersRemaining"]["message"] == (
        "Some finalizers are remaining: example.com/hold in 3 resource instances, other.io/x in 1 resource instances")
    assert c["NamespaceDeletionContentFailure"]["message"] == (
        "Failed to delete all resource types, 2 remaining: a went wrong, b went wrong")
    assert c["NamespaceDeletionDiscoveryFailure"]["message"] == (
        "Discovery failed for some groups, 1 failing: metrics.k8s.io/v1beta1: 503")
    assert c["NamespaceDeletionGroupVersionParsingFailure"]["lastTransitionTime"] == T0  # unchanged


def test_pods_estimate_and_gvr_string() -> None:
    pods = [{"spec": {"terminationGracePeriodSeconds": 30}},
            {"spec": {"terminationGracePeriodSeconds": 90}, "status": {"phase": "Succeeded"}},
            {"spec": {}}]
    assert pods_estimate(pods) == 30
    info = ResourceInfo(group="apps", version="v1", resource="deployments", kind="Deployment", namespaced=True)
    assert gvr_string(info) == "apps/v1, Resource=deployments"
