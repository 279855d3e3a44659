"""Endpoints subsets: repacking (the module docstring's example), truncation to 1000 with the
over-capacity annotation, and the subsets the Endpoints controller builds from pods."""

from __future__ import annotations

from typing import Any

from kubecore.controllers.endpoints import build_subsets, desired_endpoints, up_to_date
from kubecore.controllers.endpoints_subsets import (
    capacity_annotation_correct, repack_subsets, subsets_equal_ignoring_rv, truncate_subsets,
)

Obj = dict[str, Any]
P80 = {"name": "http", "port": 80, "protocol": "TCP"}
P443 = {"name": "https", "port": 443, "protocol": "TCP"}


def addr(ip: str) -> Obj:
    return {"ip": ip, "targetRef": {"kind": "Pod", "uid": f"uid-{ip}"}}


def test_repack_worked_example() -> None:
    a, b = addr("10.0.0.1"), addr("10.0.0.2")
    out = repack_subsets([{"addresses": [a], "ports": [P80]}, {"addresses": [b], "ports": [P80]},
                          {"addresses": [a], "ports": [P443]}, {"notReadyAddresses": [b], "ports": [P443]}])
    assert out == [{"addresses": [a, b], "ports": [P80]}, {"addresses": [a], "notReadyAddresses": [b], "ports": [P443]}]


def test_repack_merges_same_address_sets() -> None:
    a, b = addr("10.0.0.1"), addr("10.0.0.2")
    out = repack_subsets([{"addresses": [b], "ports": [P443]}, {"addresses": [a], "ports": [P80]},
                          {"addresses": [a], "ports": [P443]}, {"addresses": [b], "ports": [P80]}])
    assert out == [{"addresses": [a, b], "ports": [P80, P443]}]
    assert repack_subsets([{"addresses": [a], "ports": []}]) == [{"addresses": [a]}]  # headless, no ports


def test_truncate_keeps_ready_first() -> None:
    ready = [addr(f"10.0.{i // 250}.{i % 250}") for i in range(600)]
    not_ready = [addr(f"10.9.{i // 250}.{i % 250}") for i in range(600)]
    out, cut = truncate_subsets([{"addresses": ready, "notReadyAddresses": not_ready, "ports": [P80]}])
    assert cut and len(out[0]["addresses"]) == 600 and len(out[0]["notReadyAddresses"]) == 400
    many = [addr(f"10.1.{i // 250}.{i % 250}") for i in range(1200)]
    out, cut = truncate_subsets([{"addresses": many[:900], "ports": [P80]}, {"addresses": many[900:], "ports": [P443]},
                                 {"notReadyAddresses": not_ready[:5], "ports": [P80]}])
    assert cut and sum(len(s.get("addresses") or []) for s in out) == 1000
    assert [len(s["addresses"]) for s in out] == [750, 250, 0] and out[2]["notReadyAddresses"] == []
    subsets = [{"addresses": ready[:10]}]
    assert truncate_subsets(subsets) == (subsets, False)


def test_capacity_annotation() -> None:
    small = [{"addresses": [addr("10.0.0.1")]}]
    assert capacity_annotation_correct({}, small)
    assert not capacity_annotation_correct({"endpoints.kubernetes.io/over-capacity": "truncated"}, small)
    big = [{"addresses": [addr(f"10.0.{i // 250}.{i % 250}") for i in range(1001)]}]
    assert not capacity_annotation_correct({}, big)


def service(**spec: Any) -> Obj:
    base = {"selector": {"app": "a"}, "clusterIP": "10.0.0.9",
            "ports": [{"name": "web", "port": 80, "targetPort": "http", "protocol": "TCP"}]}
    return {"metadata": {"name": "svc", "namespace": "ns", "labels": {"l": "1"}}, "spec": {**base, **spec}}


def pod(name: str, ip: str, *, ready: bool = True, port: int = 8080, deleting: bool = False) -> Obj:
    m: Obj = {"name": name, "namespace": "ns", "uid": f"uid-{name}"}
    if deleting:
        m["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return {"metadata": m, "spec": {"nodeName": "n1", "containers": [{"name": "c", "ports": [
        {"name": "http", "containerPort": port}]}]},
            "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_build_subsets_from_pods() -> None:
    pods = [pod("a", "10.1.0.1"), pod("b", "10.1.0.2", ready=False), pod("c", "10.1.0.3", port=9090),
            pod("d", "10.1.0.4", deleting=True)]
    subsets = build_subsets(service(), pods)
    assert subsets == [
        {"addresses": [{"ip": "10.1.0.1", "nodeName": "n1", "targetRef": {
            "kind": "Pod", "namespace": "ns", "name": "a", "uid": "uid-a"}}],
         "notReadyAddresses": [{"ip": "10.1.0.2", "nodeName": "n1", "targetRef": {
             "kind": "Pod", "namespace": "ns", "name": "b", "uid": "uid-b"}}],
         "ports": [{"port": 8080, "protocol": "TCP", "name": "web"}]},
        {"addresses": [{"ip": "10.1.0.3", "nodeName": "n1", "targetRef": {
            "kind": "Pod", "namespace": "ns", "name": "c", "uid": "uid-c"}}],
         "ports": [{"port": 9090, "protocol": "TCP", "name": "web"}]}]
    published = build_subsets(service(publishNotReadyAddresses=True), pods)
    assert sum(len(s.get("addresses") or []) for s in published) == 4  # terminating and unready too
    headless = build_subsets(service(clusterIP="None", ports=[]), pods[:1])
    assert headless == [{"addresses": [{"ip": "10.1.0.1", "nodeName": "n1", "targetRef": {
        "kind": "Pod", "namespace": "ns", "name": "a", "uid": "uid-a"}}]}]


def test_desired_endpoints_labels_annotations_and_no_op() -> None:
    svc = service(clusterIP="None")
    subsets = build_subsets(svc, [pod("a", "10.1.0.1")])
    new = desired_endpoints(svc, None, subsets, trigger_time=1_700_000_000.0)
    assert new["metadata"]["labels"] == {"l": "1", "service.kubernetes.io/headless": ""}
    assert new["metadata"]["annotations"] == {"endpoints.kubernetes.io/last-change-trigger-time": "2023-11-14T22:13:20Z"}
    stored = {**new, "metadata": {**new["metadata"], "resourceVersion": "5"}}
    assert up_to_date(stored, svc, subsets)
    assert not up_to_date(stored, service(clusterIP="None", selector={"app": "a"}) | {
        "metadata": {"name": "svc", "namespace": "ns", "labels": {"l": "2"}}}, subsets)
    again = desired_endpoints(svc, stored, subsets, trigger_time=None)
    assert "endpoints.kubernetes.io/last-change-trigger-time" not in again["metadata"]["annotations"]
    with_rv = [{**subsets[0], "addresses": [{**subsets[0]["addresses"][0], "targetRef": {
        **subsets[0]["addresses"][0]["targetRef"], "resourceVersion": "77"}}]}]
    assert subsets_equal_ignoring_rv(with_rv, subsets)
