"""Which nodes a DaemonSet runs on (nodeSelector, node affinity, taints and tolerations, the default
daemon tolerations) and what its pods look like (placement affinity, template labels)."""

from __future__ import annotations

from typing import Any

import pytest

from kubecore.controllers.daemonset_predicates import (
    node_should_run_daemon_pod, required_node_affinity_matches, term_matches, tolerates,
)
from kubecore.controllers.daemonset_util import (
    add_daemon_pod_tolerations, create_pod_template, is_pod_updated, replace_node_name_affinity, surge_count,
    target_node_name, unavailable_count,
)

Obj = dict[str, Any]


def node(name: str, labels: Obj | None = None, taints: list[Obj] | None = None) -> Obj:
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": {"taints": taints or []}}


def ds(pod_spec: Obj | None = None, **spec: Any) -> Obj:
    return {"metadata": {"name": "agent", "namespace": "ns", "uid": "ds-uid"},
            "spec": {"selector": {"matchLabels": {"app": "agent"}},
                     "template": {"metadata": {"labels": {"app": "agent"}},
                                  "spec": {"containers": [{"name": "c", "image": "a"}], **(pod_spec or {})}},
                     **spec}}


def test_node_selector_and_node_name() -> None:
    d = ds({"nodeSelector": {"disk": "ssd"}})
    assert node_should_run_daemon_pod(node("a", {"disk": "ssd"}), d) == (True, True)
    assert node_should_run_daemon_pod(node("b", {"disk": "hdd"}), d) == (False, False)
    pinned = ds({"nodeName": "a"})
    assert node_should_run_daemon_pod(node("a"), pinned) == (True, True)
    assert node_should_run_daemon_pod(node("b"), pinned) == (False, False)


@pytest.mark.parametrize("expr,labels,want", [
    ({"key": "zone", "operator": "In", "values": ["a", "b"]}, {"zone": "b"}, True),
    ({"key": "zone", "operator": "In", "values": ["a"]}, {"zone": "c"}, False),
    ({"key": "zone", "operator": "NotIn", "values": ["a"]}, {}, True),
    ({"key": "gpu", "operator": "Exists"}, {"gpu": ""}, True),
    ({"key": "gpu", "operator": "DoesNotExist"}, {"gpu": "1"}, False),
    ({"key": "cores", "operator": "Gt", "values": ["4"]}, {"cores": "8"}, True),
    ({"key": "cores", "operator": "Lt", "values": ["4"]}, {"cores": "8"}, False),
    ({"key": "zone", "operator": "In", "values": []}, {"zone": "a"}, False),  # invalid: the term fails
    ({"key": "zone", "operator": "Near", "values": ["a"]}, {"zone": "a"}, False),
])
def test_node_affinity_expressions(expr: Obj, labels: Obj, want: bool) -> None:
    assert term_matches({"matchExpressions": [expr]}, node("n", labels)) is want


def test_node_affinity_terms_and_fields() -> None:
    n = node("n1", {"zone": "a"})
    assert not term_matches({}, n)  # an empty term matches nothing
    assert term_matches({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}, n)
    assert not term_matches({"matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["n1"]}]}, n)
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}
    assert required_node_affinity_matches({"affinity": affinity}, n)  # terms are ORed
    assert not required_node_affinity_matches({"affinity": affinity, "nodeSelector": {"x": "y"}}, n)
    empty: Obj = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}
    assert not required_node_affinity_matches({"affinity": empty}, n)


def test_taints_and_tolerations() -> None:
    no_schedule = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    no_execute = {"key": "dedicated", "value": "gpu", "effect": "NoExecute"}
    prefer = {"key": "dedicated", "value": "gpu", "effect": "PreferNoSchedule"}
    assert node_should_run_daemon_pod(node("a", taints=[prefer]), ds()) == (True, True)
    assert node_should_run_daemon_pod(node("a", taints=[no_schedule]), ds()) == (False, True)  # existing pods stay
    assert node_should_run_daemon_pod(node("a", taints=[no_execute]), ds()) == (False, False)
    tolerating = ds({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu"}]})
    assert node_should_run_daemon_pod(node("a", taints=[no_schedule, no_execute]), tolerating) == (True, True)
    assert tolerates({"operator": "Exists"}, no_execute)  # empty key and effect: everything
    assert not tolerates({"key": "dedicated", "operator": "Equal", "value": "cpu"}, no_schedule)
    assert not tolerates({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}, no_schedule)


def test_default_daemon_tolerations() -> None:
    for key, effect in (("node.kubernetes.io/unschedulable", "NoSchedule"), ("node.kubernetes.io/not-ready",
                                                                              "NoExecute"),
                        ("node.kubernetes.io/unreachable", "NoExecute"), ("node.kubernetes.io/pid-pressure",
                                                                          "NoSchedule")):
        assert node_should_run_daemon_pod(node("a", taints=[{"key": key, "effect": effect}]), ds()) == (True, True)
    network = node("a", taints=[{"key": "node.kubernetes.io/network-unavailable", "effect": "NoSchedule"}])
    assert node_should_run_daemon_pod(network, ds())[0] is False
    assert node_should_run_daemon_pod(network, ds({"hostNetwork": True}))[0] is True
    spec: Obj = {"tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                                  "tolerationSeconds": 30}]}
    add_daemon_pod_tolerations(spec)
    assert len(spec["tolerations"]) == 6 and "tolerationSeconds" not in spec["tolerations"][0]  # replaced, not doubled
    add_daemon_pod_tolerations(spec)
    assert len(spec["tolerations"]) == 6


def test_pod_template_and_placement() -> None:
    d = ds({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {}}]}}})
    d["metadata"]["annotations"] = {"deprecated.daemonset.template.generation": "3"}
    t = create_pod_template(d["spec"]["template"], generation=3, hash_="h1")
    assert t["metadata"]["labels"] == {"app": "agent", "pod-template-generation": "3", "controller-revision-hash": "h1"}
    assert "tolerations" not in d["spec"]["template"]["spec"]  # the template itself is untouched
    affinity = replace_node_name_affinity(t["spec"]["affinity"], "n7")
    na = affinity["nodeAffinity"]
    assert na["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n7"]}]}]
    assert na["preferredDuringSchedulingIgnoredDuringExecution"]  # kept
    assert replace_node_name_affinity(None, "n1")["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert target_node_name({"spec": {"affinity": affinity}}) == "n7"
    assert target_node_name({"spec": {"nodeName": "n2", "affinity": affinity}}) == "n2"
    assert target_node_name({"spec": {}}) is None
    assert is_pod_updated({"metadata": {"labels": {"controller-revision-hash": "h1"}}}, "h1", None)
    assert is_pod_updated({"metadata": {"labels": {"pod-template-generation": "3"}}}, "h2", 3)
    assert not is_pod_updated({"metadata": {"labels": {"controller-revision-hash": "h0"}}}, "h1", None)


def test_surge_and_unavailable_counts() -> None:
    rolling = ds(updateStrategy={"type": "RollingUpdate",
                                 "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "10%"}})
    assert unavailable_count(rolling, 10) == 3 and surge_count(rolling, 10) == 1  # both round up
    on_delete = ds(updateStrategy={"type": "OnDelete"})
    assert unavailable_count(on_delete, 10) == 0 and surge_count(on_delete, 10) == 0
    with pytest.raises(ValueError):
        unavailable_count(ds(updateStrategy={"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "x"}}), 3)
