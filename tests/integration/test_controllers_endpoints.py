"""The EndpointSlice and Endpoints controllers against a real kubecore API server, run in-process.

There is no kubelet: pods are created bound to a Node object the test creates, and the test
writes their status (podIP, Ready) itself, as upstream's integration tests do. Waits poll with a
deadline; nothing asserts on elapsed time."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from kubecore.client.errors import NotFound
from kubecore.client.resource import ResourceClient
from kubecore.controllers.controller_utils import format_time
from tests.integration.inprocess import eventually, run_controllers

Obj = dict[str, Any]
MANAGED_BY = "endpointslice.kubernetes.io/managed-by"


@dataclass
class Env:
    ns: str
    node: str
    pods: ResourceClient
    services: ResourceClient
    slices: ResourceClient
    endpoints: ResourceClient

    async def service_slices(self, svc: str) -> list[Obj]:
        items, _ = await self.slices.list_all(namespace=self.ns, label_selector=f"kubernetes.io/service-name={svc}")
        return items


@pytest.fixture
async def env(server_url: str) -> AsyncIterator[Env]:
    async with run_controllers(server_url, ("endpointslice", "endpoint"), ns_prefix="ep") as running:
        node = f"node-{uuid.uuid4().hex[:6]}"
        nodes = await running.resource("v1", "nodes")
        await nodes.create({"apiVersion": "v1", "kind": "Node",
                            "metadata": {"name": node, "labels": {"topology.kubernetes.io/zone": "zone-a"}}})
        yield Env(ns=running.ns, node=node, pods=await running.resource("v1", "pods"),
                  services=await running.resource("v1", "services"),
                  slices=await running.resource("discovery.k8s.io/v1", "endpointslices"),
                  endpoints=await running.resource("v1", "endpoints"))


def service_body(name: str, *, target_port: Any = "http", publish_not_ready: bool = False) -> Obj:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "labels": {"team": "a"}},
            "spec": {"selector": {"app": name}, "publishNotReadyAddresses": publish_not_ready,
                     "ports": [{"name": "web", "port": 80, "targetPort": target_port, "protocol": "TCP"}]}}


async def make_pod(env: Env, name: str, *, app: str, port: int, ip: str, ready: bool) -> Obj:
    pod = await env.pods.create({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": app}},
        "spec": {"nodeName": env.node, "containers": [{"name": "c", "image": "busybox", "ports": [
            {"name": "http", "containerPort": port, "protocol": "TCP"}]}]}}, namespace=env.ns)
    await set_ready(env, name, ip=ip, ready=ready)
    return pod


async def set_ready(env: Env, name: str, *, ip: str, ready: bool) -> None:
    fresh = await env.pods.get(name, namespace=env.ns)
    fresh["status"] = {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "conditions": [
        {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": format_time(time.time())}]}
    await env.pods.update_status(fresh, namespace=env.ns)


def endpoints_by_pod(slices: list[Obj]) -> dict[str, Obj]:
    return {ep["targetRef"]["name"]: ep for s in slices for ep in s.get("endpoints") or ()}


async def test_slices_follow_pods_and_named_ports(env: Env) -> None:
    svc = await env.services.create(service_body("web"), namespace=env.ns)
    await make_pod(env, "a", app="web", port=8080, ip="10.1.0.1", ready=True)
    await make_pod(env, "b", app="web", port=8080, ip="10.1.0.2", ready=False)
    await make_pod(env, "c", app="web", port=9090, ip="10.1.0.3", ready=True)  # same name, other number

    async def three_endpoints() -> bool:
        return len(endpoints_by_pod(await env.service_slices("web"))) == 3

    await eventually(three_endpoints, "3 endpoints in slices")
    slices = await env.service_slices("web")
    by_port = {s["ports"][0]["port"]: s for s in slices if s.get("ports")}
    assert set(by_port) == {8080, 9090}, slices
    for s in slices:
        m = s["metadata"]
        assert m["name"].startswith("web-") and m["generateName"] == "web-"
        assert m["labels"] == {"kubernetes.io/service-name": "web", MANAGED_BY: "endpointslice-controller.k8s.io",
                               "team": "a"}
        assert m["ownerReferences"][0]["uid"] == svc["metadata"]["uid"]
        assert s["addressType"] == "IPv4"
        assert s["ports"] == [{"name": "web", "port": s["ports"][0]["port"], "protocol": "TCP"}]
    eps = endpoints_by_pod(slices)
    assert eps["a"]["addresses"] == ["10.1.0.1"]
    assert eps["a"]["conditions"] == {"ready": True, "serving": True, "terminating": False}
    assert eps["b"]["conditions"] == {"ready": False, "serving": False, "terminating": False}
    assert eps["a"]["nodeName"] == env.node and eps["a"]["zone"] == "zone-a"
    assert eps["a"]["targetRef"]["kind"] == "Pod" and eps["a"]["targetRef"]["namespace"] == env.ns
    names_before = {s["metadata"]["name"] for s in slices}

    await set_ready(env, "b", ip="10.1.0.2", ready=True)  # an in-place update, not a new slice

    async def b_ready() -> bool:
        e = endpoints_by_pod(await env.service_slices("web")).get("b")
        return e is not None and e["conditions"]["ready"] is True

    await eventually(b_ready, "b ready in its slice")
    assert {s["metadata"]["name"] for s in await env.service_slices("web")} == names_before

    await env.pods.delete("c", namespace=env.ns, grace_period_seconds=0)

    async def c_gone() -> bool:
        slices = await env.service_slices("web")
        return set(endpoints_by_pod(slices)) == {"a", "b"} and len(slices) == 1

    await eventually(c_gone, "the 9090 slice removed with its pod")


async def test_legacy_endpoints(env: Env) -> None:
    await env.services.create(service_body("api"), namespace=env.ns)
    await make_pod(env, "p1", app="api", port=8080, ip="10.2.0.1", ready=True)
    await make_pod(env, "p2", app="api", port=8080, ip="10.2.0.2", ready=False)

    async def both_listed() -> bool:
        try:
            ep = await env.endpoints.get("api", namespace=env.ns)
        except NotFound:
            return False
        subsets = ep.get("subsets") or []
        return len(subsets) == 1 and len(subsets[0].get("addresses") or []) == 1 \
            and len(subsets[0].get("notReadyAddresses") or []) == 1

    await eventually(both_listed, "Endpoints with one ready and one not-ready address")
    ep = await env.endpoints.get("api", namespace=env.ns)
    subset = ep["subsets"][0]
    assert subset["addresses"][0]["ip"] == "10.2.0.1"
    assert subset["addresses"][0]["targetRef"]["name"] == "p1"
    assert subset["addresses"][0]["nodeName"] == env.node
    assert subset["notReadyAddresses"][0]["ip"] == "10.2.0.2"
    assert subset["ports"] == [{"name": "web", "port": 8080, "protocol": "TCP"}]
    assert ep["metadata"]["labels"] == {"team": "a"}
    assert "endpoints.kubernetes.io/last-change-trigger-time" in ep["metadata"]["annotations"]

    await env.services.delete("api", namespace=env.ns)

    async def endpoints_gone() -> bool:
        try:
            await env.endpoints.get("api", namespace=env.ns)
        except NotFound:
            return True
        return False

    await eventually(endpoints_gone, "Endpoints deleted with the Service")


async def test_empty_service_gets_placeholder_slice(env: Env) -> None:
    await env.services.create(service_body("idle", target_port=80), namespace=env.ns)

    async def placeholder() -> bool:
        slices = await env.service_slices("idle")
        return len(slices) == 1 and not slices[0].get("endpoints") and not slices[0].get("ports")

    await eventually(placeholder, "one empty placeholder slice")
