"""The ReplicaSet and ReplicationController controllers against a real kubecore API server, run
in-process: pods created with the right owner references, scale down removing the right pods, a
deleted pod replaced, an orphan adopted, a relabelled pod released, and never more pods than
replicas at any moment a watch observes (0 -> 50).

There is no kubelet yet, so tests mark pods Ready by writing pod status, as upstream's
integration tests do. Waits poll with a deadline; no assertion is about elapsed time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from kubecore.client.resource import ResourceClient
from kubecore.client.rest import RestClient
from kubecore.controllers.controller_utils import format_time
from tests.integration.inprocess import WAIT, eventually, run_controllers

Obj = dict[str, Any]


@dataclass
class Env:
    ns: str
    rest: RestClient
    pods: ResourceClient
    rss: ResourceClient
    rcs: ResourceClient

    async def pod_list(self) -> list[Obj]:
        items, _ = await self.pods.list_all(namespace=self.ns)
        return [p for p in items if not p["metadata"].get("deletionTimestamp")]


@pytest.fixture
async def env(server_url: str) -> AsyncIterator[Env]:
    """A fresh namespace and both controllers running in-process, watching only that namespace."""
    async with run_controllers(server_url, ("replicaset", "replicationcontroller"), ns_prefix="rs",
                               workers=3) as running:
        yield Env(ns=running.ns, rest=running.rest, pods=await running.resource("v1", "pods"),
                  rss=await running.resource("apps/v1", "replicasets"),
                  rcs=await running.resource("v1", "replicationcontrollers"))


def rs_body(name: str, replicas: int, *, app: str = "web") -> Obj:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": app}},
                     "template": {"metadata": {"labels": {"app": app}},
                                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}


def owned_by(pods: list[Obj], owner: Obj) -> list[Obj]:
    uid = owner["metadata"]["uid"]
    return [p for p in pods if any(r.get("uid") == uid and r.get("controller")
                                   for r in p["metadata"].get("ownerReferences") or ())]


async def mark_ready(env: Env, pod: Obj) -> None:
    fresh = await env.pods.get(pod["metadata"]["name"], namespace=env.ns)
    fresh["status"] = {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": format_time(time.time() - 60)}]}
    await env.pods.update_status(fresh, namespace=env.ns)


async def test_create_scale_down_replace(env: Env) -> None:
    rs = await env.rss.create(rs_body("web", 5), namespace=env.ns)

    async def five() -> bool:
        return len(owned_by(await env.pod_list(), rs)) == 5

    await eventually(five, "5 pods")
    pods = await env.pod_list()
    assert len(pods) == 5
    for p in pods:
        assert p["metadata"]["generateName"] == "web-" and p["metadata"]["name"].startswith("web-")
        assert p["metadata"]["labels"] == {"app": "web"}
        assert p["metadata"]["ownerReferences"] == [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                                                     "uid": rs["metadata"]["uid"], "controller": True,
                                                     "blockOwnerDeletion": True}]

    async def status_is(replicas: int, ready: int) -> bool:
        got = await env.rss.get("web", namespace=env.ns)
        st = got.get("status") or {}
        return (st.get("replicas"), st.get("readyReplicas", 0), st.get("observedGeneration")) == \
            (replicas, ready, got["metadata"]["generation"])

    await eventually(lambda: status_is(5, 0), "status.replicas 5")

    keep = sorted(p["metadata"]["name"] for p in pods[:2])
    for p in pods[:2]:
        await mark_ready(env, p)
    await eventually(lambda: status_is(5, 2), "status.readyReplicas 2")

    await env.rss.patch("web", {"spec": {"replicas": 2}}, namespace=env.ns)

    async def kept_ready() -> bool:
        return sorted(p["metadata"]["name"] for p in await env.pod_list()) == keep

    await eventually(kept_ready, "the two Ready pods to be the ones left")
    await eventually(lambda: status_is(2, 2), "status after scale down")

    await env.pods.delete(keep[0], namespace=env.ns)

    async def replaced() -> bool:
        names = [p["metadata"]["name"] for p in await env.pod_list()]
        return len(names) == 2 and keep[0] not in names and keep[1] in names

    await eventually(replaced, "the deleted pod to be replaced")

    async def events_recorded() -> bool:
        events = await env.rest.resource("v1", "events")
        items, _ = await events.list_all(namespace=env.ns)
        reasons = {e["reason"] for e in items if e["involvedObject"].get("uid") == rs["metadata"]["uid"]}
        return {"SuccessfulCreate", "SuccessfulDelete"} <= reasons

    await eventually(events_recorded, "SuccessfulCreate and SuccessfulDelete events about the ReplicaSet")


async def test_orphan_is_adopted(env: Env) -> None:
    orphan = await env.pods.create({"apiVersion": "v1", "kind": "Pod",
                                    "metadata": {"name": "orphan", "labels": {"app": "adopt"}},
                                    "spec": {"containers": [{"name": "c", "image": "busybox"}]}}, namespace=env.ns)
    rs = await env.rss.create(rs_body("adopter", 2, app="adopt"), namespace=env.ns)

    async def two_owned() -> bool:
        return len(owned_by(await env.pod_list(), rs)) == 2

    await eventually(two_owned, "the orphan adopted plus one new pod")
    got = await env.pods.get("orphan", namespace=env.ns)
    assert got["metadata"]["uid"] == orphan["metadata"]["uid"]
    ref, = got["metadata"]["ownerReferences"]
    assert (ref["kind"], ref["name"], ref["uid"], ref["controller"], ref["blockOwnerDeletion"]) == \
        ("ReplicaSet", "adopter", rs["metadata"]["uid"], True, True)
    assert len(await env.pod_list()) == 2


async def test_relabelled_pod_is_released_and_replaced(env: Env) -> None:
    rs = await env.rss.create(rs_body("rel", 2, app="rel"), namespace=env.ns)

    async def two_owned() -> bool:
        return len(owned_by(await env.pod_list(), rs)) == 2

    await eventually(two_owned, "2 pods")
    victim = owned_by(await env.pod_list(), rs)[0]["metadata"]["name"]
    await env.pods.patch(victim, {"metadata": {"labels": {"app": "elsewhere"}}}, namespace=env.ns)

    async def released() -> bool:
        got = await env.pods.get(victim, namespace=env.ns)
        return not got["metadata"].get("ownerReferences")

    await eventually(released, "the relabelled pod's controller reference to be removed")
    await eventually(two_owned, "a replacement pod")
    assert victim not in [p["metadata"]["name"] for p in owned_by(await env.pod_list(), rs)]


async def test_never_more_pods_than_replicas_scaling_0_to_50(env: Env) -> None:
    rs = await env.rss.create(rs_body("burst", 0, app="burst"), namespace=env.ns)
    _, rv = await env.pods.list_all(namespace=env.ns)
    live: set[str] = set()
    peak = 0
    done = asyncio.Event()

    async def watch() -> None:
        nonlocal peak
        async with await env.pods.watch(namespace=env.ns, resource_version=rv) as stream:
            async for ev in stream:
                if ev.type in ("ADDED", "MODIFIED"):
                    m = ev.object["metadata"]
                    if m.get("deletionTimestamp"):
                        live.discard(m["name"])
                    else:
                        live.add(m["name"])
                elif ev.type == "DELETED":
                    live.discard(ev.object["metadata"]["name"])
                peak = max(peak, len(live))
                if len(live) == 50:
                    done.set()

    watcher = asyncio.create_task(watch())
    try:
        await env.rss.patch("burst", {"spec": {"replicas": 50}}, namespace=env.ns)
        await asyncio.wait_for(done.wait(), WAIT)
        await asyncio.sleep(1.0)  # any over-creation would land in this second
        assert peak == 50 and len(live) == 50
        assert len(owned_by(await env.pod_list(), rs)) == 50
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)

    async def status_50() -> bool:
        st = (await env.rss.get("burst", namespace=env.ns)).get("status") or {}
        return st.get("replicas") == 50 and st.get("fullyLabeledReplicas") == 50

    await eventually(status_50, "status.replicas 50")


async def test_replication_controller(env: Env) -> None:
    rc = await env.rcs.create({"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "legacy"},
                               "spec": {"replicas": 3, "selector": {"app": "legacy"},
                                        "template": {"metadata": {"labels": {"app": "legacy"}},
                                                     "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}},
                              namespace=env.ns)

    async def three() -> bool:
        return len(owned_by(await env.pod_list(), rc)) == 3

    await eventually(three, "3 pods of the RC")
    for p in await env.pod_list():
        ref, = p["metadata"]["ownerReferences"]
        assert (ref["apiVersion"], ref["kind"], ref["name"]) == ("v1", "ReplicationController", "legacy")
    await env.rcs.patch("legacy", {"spec": {"replicas": 1}}, namespace=env.ns)

    async def one() -> bool:
        st = (await env.rcs.get("legacy", namespace=env.ns)).get("status") or {}
        return len(await env.pod_list()) == 1 and st.get("replicas") == 1

    await eventually(one, "scale down to 1")
