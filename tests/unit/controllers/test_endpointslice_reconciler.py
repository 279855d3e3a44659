"""The EndpointSlice reconciler's plans (pure): grouping by resolved ports, 100 endpoints per
slice, in-place updates, filling before creating, the placeholder, and recycling deletes."""

from __future__ import annotations

from typing import Any

from kubecore.controllers.endpointslice_reconciler import plan_slices, recycle_deletes, SlicePlan
from kubecore.controllers.endpointslice_utils import (
    endpoint_key, find_port, pod_to_endpoint, services_to_update,
)

Obj = dict[str, Any]
NODE = {"metadata": {"name": "n1", "labels": {"topology.kubernetes.io/zone": "z1"}}}
SVC_UID = "svc-uid"


def svc(*, target_port: Any = "http", publish: bool = False, labels: dict[str, str] | None = None) -> Obj:
    return {"metadata": {"name": "web", "namespace": "ns", "uid": SVC_UID, "labels": labels or {}},
            "spec": {"selector": {"app": "web"}, "clusterIP": "10.0.0.10", "ipFamilies": ["IPv4"],
                     "publishNotReadyAddresses": publish,
                     "ports": [{"name": "web", "port": 80, "targetPort": target_port, "protocol": "TCP"}]}}


def pod(i: int, *, port: int = 8080, ready: bool = True, deleting: bool = False, node: str = "n1",
        phase: str = "Running") -> Obj:
    m: Obj = {"name": f"p{i}", "namespace": "ns", "uid": f"u{i}", "labels": {"app": "web"}, "resourceVersion": "1"}
    if deleting:
        m["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return {"metadata": m,
            "spec": {"nodeName": node, "containers": [{"name": "c", "ports": [
                {"name": "http", "containerPort": port, "protocol": "TCP"}]}]},
            "status": {"phase": phase, "podIPs": [{"ip": f"10.1.{i // 250}.{i % 250 + 1}"}],
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def nodes(name: str) -> Obj | None:
    return NODE if name == "n1" else None


def existing(plan: SlicePlan, *, names: list[str]) -> list[Obj]:
    """The created slices as the server would store them (named, owned)."""
    out = []
    for s, name in zip(plan.create, names):
        s = {**s, "metadata": {**s["metadata"], "name": name, "uid": f"uid-{name}"}}
        out.append(s)
    return out


def test_endpoint_from_pod() -> None:
    ep = pod_to_endpoint(pod(1, deleting=True), NODE, svc(), "IPv4")
    assert ep == {"addresses": ["10.1.0.2"], "conditions": {"ready": False, "serving": True, "terminating": True},
                  "targetRef": {"kind": "Pod", "namespace": "ns", "name": "p1", "uid": "u1"},
                  "nodeName": "n1", "zone": "z1"}
    assert pod_to_endpoint(pod(1, ready=False), NODE, svc(publish=True), "IPv4")["conditions"]["ready"] is True
    assert pod_to_endpoint(pod(1), NODE, svc(), "IPv6")["addresses"] == []


def test_find_port_by_name_number_and_protocol() -> None:
    p = pod(1, port=9000)
    assert find_port(p, {"targetPort": "http", "protocol": "TCP"}) == 9000
    assert find_port(p, {"targetPort": "http", "protocol": "UDP"}) is None
    assert find_port(p, {"targetPort": 1234}) == 1234
    assert find_port(p, {"targetPort": "nope"}) is None


def test_new_service_slices_of_at_most_100_grouped_by_port() -> None:
    pods = [pod(i) for i in range(230)] + [pod(i, port=9090) for i in range(230, 235)]
    plan = plan_slices(svc(), pods, [], node_lookup=nodes)
    assert not plan.update and not plan.delete and not plan.errors
    sizes = sorted(len(s["endpoints"]) for s in plan.create)
    assert sizes == [5, 30, 100, 100]
    for s in plan.create:
        m = s["metadata"]
        assert m["generateName"] == "web-" and "name" not in m
        assert m["labels"] == {"kubernetes.io/service-name": "web",
                               "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}
        assert m["ownerReferences"][0]["uid"] == SVC_UID and s["addressType"] == "IPv4"
    by_port = {s["ports"][0]["port"] for s in plan.create}
    assert by_port == {8080, 9090}


def test_condition_change_updates_in_place() -> None:
    pods = [pod(i) for i in range(3)]
    first = plan_slices(svc(), pods, [], node_lookup=nodes)
    slices = existing(first, names=["web-a"])
    assert plan_slices(svc(), pods, slices, node_lookup=nodes) == SlicePlan()  # nothing to do
    pods[1] = pod(1, ready=False)
    plan = plan_slices(svc(), pods, slices, node_lookup=nodes)
    assert not plan.create and not plan.delete and len(plan.update) == 1
    updated = plan.update[0]
    assert updated["metadata"]["name"] == "web-a"
    assert [e["conditions"]["ready"] for e in updated["endpoints"]] == [True, False, True]


def test_new_endpoints_fill_unchanged_slice_that_fits_best() -> None:
    a = existing(plan_slices(svc(), [pod(i) for i in range(90)], [], node_lookup=nodes), names=["web-a"])
    b = existing(plan_slices(svc(), [pod(i) for i in range(90, 140)], [], node_lookup=nodes), names=["web-b"])
    pods = [pod(i) for i in range(145)]  # five new ones: web-a (90 + 5 = 95) is the closest to full
    plan = plan_slices(svc(), pods, a + b, node_lookup=nodes)
    assert not plan.create and not plan.delete
    assert [s["metadata"]["name"] for s in plan.update] == ["web-a"]
    assert len(plan.update[0]["endpoints"]) == 95


def test_removed_pods_empty_slice_is_reused_for_new_port_group() -> None:
    old = existing(plan_slices(svc(), [pod(1)], [], node_lookup=nodes), names=["web-a"])
    plan = plan_slices(svc(), [pod(2, port=9090)], old, node_lookup=nodes)
    assert not plan.create and not plan.delete  # the delete + create became one update
    assert plan.update[0]["metadata"]["name"] == "web-a"
    assert plan.update[0]["ports"][0]["port"] == 9090


def test_placeholder_created_once() -> None:
    plan = plan_slices(svc(), [], [], node_lookup=nodes)
    assert len(plan.create) == 1 and plan.create[0]["endpoints"] == [] and plan.create[0]["ports"] == []
    stored = existing(plan, names=["web-p"])
    assert plan_slices(svc(), [], stored, node_lookup=nodes) == SlicePlan()
    with_pod = plan_slices(svc(), [pod(1)], stored, node_lookup=nodes)
    assert not with_pod.create and not with_pod.delete and len(with_pod.update) == 1  # placeholder recycled


def test_label_change_updates_slice() -> None:
    stored = existing(plan_slices(svc(), [pod(1)], [], node_lookup=nodes), names=["web-a"])
    plan = plan_slices(svc(labels={"team": "x"}), [pod(1)], stored, node_lookup=nodes)
    assert len(plan.update) == 1 and plan.update[0]["metadata"]["labels"]["team"] == "x"


def test_unknown_node_skips_pod_unless_publishing_not_ready() -> None:
    pods = [pod(1), pod(2, node="ghost")]
    plan = plan_slices(svc(), pods, [], node_lookup=nodes)
    assert len(plan.create[0]["endpoints"]) == 1 and plan.errors
    plan = plan_slices(svc(publish=True), pods, [], node_lookup=nodes)
    assert len(plan.create[0]["endpoints"]) == 2 and not plan.errors


def test_terminal_pods_and_pods_without_ip_left_out() -> None:
    no_ip = pod(2)
    no_ip["status"].pop("podIPs")
    plan = plan_slices(svc(), [pod(1), pod(3, phase="Succeeded"), no_ip], [], node_lookup=nodes)
    assert [e["targetRef"]["name"] for e in plan.create[0]["endpoints"]] == ["p1"]


def test_slices_not_owned_are_deleted() -> None:
    stored = existing(plan_slices(svc(), [pod(1)], [], node_lookup=nodes), names=["web-a"])
    stored[0]["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Service", "uid": "old"}]
    plan = plan_slices(svc(), [pod(1)], stored, node_lookup=nodes)
    assert [s["metadata"]["name"] for s in plan.delete] == ["web-a"] and len(plan.create) == 1


def test_recycle_keeps_other_address_type() -> None:
    stored = existing(plan_slices(svc(), [pod(1)], [], node_lookup=nodes), names=["web-a"])
    stored[0]["addressType"] = "IPv6"
    new = plan_slices(svc(), [pod(2)], [], node_lookup=nodes).create
    plan = recycle_deletes(svc(), SlicePlan(create=new, delete=stored))
    assert plan.create == new and plan.delete == stored


def test_services_to_update_on_pod_changes() -> None:
    services = [svc(), {"metadata": {"name": "other", "namespace": "ns"}, "spec": {"selector": {"tier": "x"}}},
                {"metadata": {"name": "none", "namespace": "ns"}, "spec": {}}]
    p = pod(1)
    assert services_to_update(services, None, p) == {"ns/web"}
    same = {**p, "metadata": {**p["metadata"], "resourceVersion": "2", "annotations": {"a": "b"}}}
    assert services_to_update(services, p, same) == set()  # nothing the endpoints show changed
    unready = pod(1, ready=False)
    unready["metadata"]["resourceVersion"] = "2"
    assert services_to_update(services, p, unready) == {"ns/web"}
    moved = {**p, "metadata": {**p["metadata"], "resourceVersion": "3", "labels": {"tier": "x"}}}
    assert services_to_update(services, p, moved) == {"ns/web", "ns/other"}
    assert endpoint_key(pod_to_endpoint(p, NODE, svc(), "IPv4")) == (("10.1.0.2",), "", "ns", "p1")
