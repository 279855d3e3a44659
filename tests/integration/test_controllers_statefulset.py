"""The StatefulSet controller against a real kubecore API server, run in-process (with the garbage
collector for the claim retention test): ordered creation with claims made before their pods,
stable identities, scale down in reverse order, Parallel management, a partitioned rolling update
with ControllerRevisions, and whenScaled=Delete claims removed with their pods.

There is no kubelet: tests mark pods Running and Ready by writing pod status, as upstream's
integration tests do. Waits poll with a deadline; no assertion is about elapsed time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kubecore.client.errors import Conflict, NotFound
from kubecore.client.resource import ResourceClient
from kubecore.client.rest import RestClient
from kubecore.controllers.controller_utils import format_time
from tests.integration.inprocess import eventually, kubectl, run_controllers, write_kubeconfig

Obj = dict[str, Any]


@dataclass
class Env:
    ns: str
    rest: RestClient
    pods: ResourceClient
    sets: ResourceClient
    claims: ResourceClient
    revisions: ResourceClient
    kubeconfig: Path

    async def kubectl(self, *args: str) -> str:
        """Real kubectl, run without blocking the in-process controllers."""
        return await kubectl(self.kubeconfig, self.ns, *args)

    async def pod_names(self) -> list[str]:
        items, _ = await self.pods.list_all(namespace=self.ns)
        return sorted(p["metadata"]["name"] for p in items if not p["metadata"].get("deletionTimestamp"))

    async def get_pod(self, name: str) -> Obj | None:
        try:
            return await self.pods.get(name, namespace=self.ns)
        except NotFound:
            return None

    async def mark_ready(self, name: str) -> Obj:
        for _ in range(10):
            pod = await self.pods.get(name, namespace=self.ns)
            pod["status"] = {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": format_time(time.time() - 60)}]}
            try:
                return await self.pods.update_status(pod, namespace=self.ns)
            except Conflict:
                continue
        raise AssertionError(f"could not mark {name} ready")


@pytest.fixture
async def env(server_url: str, tmp_path: Path) -> AsyncIterator[Env]:
    """A fresh namespace; the StatefulSet controller and the garbage collector run in-process."""
    async with run_controllers(server_url, ("statefulset", "garbagecollector"), ns_prefix="sts") as running:
        yield Env(ns=running.ns, rest=running.rest, pods=await running.resource("v1", "pods"),
                  sets=await running.resource("apps/v1", "statefulsets"),
                  claims=await running.resource("v1", "persistentvolumeclaims"),
                  revisions=await running.resource("apps/v1", "controllerrevisions"),
                  kubeconfig=write_kubeconfig(tmp_path, server_url))


def sts_body(name: str, replicas: int, *, policy: str = "OrderedReady", claims: bool = False,
             partition: int | None = None, retention: Obj | None = None, image: str = "nginx:1") -> Obj:
    spec: Obj = {"replicas": replicas, "serviceName": f"{name}-svc", "podManagementPolicy": policy,
                 "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": image}]}}}
    if claims:
        spec["volumeClaimTemplates"] = [{"metadata": {"name": "data"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]
    if partition is not None:
        spec["updateStrategy"] = {"type": "RollingUpdate", "rollingUpdate": {"partition": partition}}
    if retention is not None:
        spec["persistentVolumeClaimRetentionPolicy"] = retention
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name}, "spec": spec}


async def test_ordered_creation_claims_and_identity(env: Env) -> None:
    sts = await env.sets.create(sts_body("web", 3, claims=True), namespace=env.ns)
    web0 = await eventually(lambda: env.get_pod("web-0"), "web-0")
    claim0 = await env.claims.get("data-web-0", namespace=env.ns)
    assert int(claim0["metadata"]["resourceVersion"]) < int(web0["metadata"]["resourceVersion"])  # claim first
    assert claim0["metadata"]["labels"] == {"app": "web"}
    assert await env.pod_names() == ["web-0"]  # web-1 waits for web-0 to be Running and Ready

    ready_rvs = {}
    for i in range(3):
        ready_rvs[i] = int((await env.mark_ready(f"web-{i}"))["metadata"]["resourceVersion"])
        if i < 2:
            nxt = await eventually(lambda: env.get_pod(f"web-{i + 1}"), f"web-{i + 1}")
            assert int(nxt["metadata"]["resourceVersion"]) > ready_rvs[i]  # created after its predecessor was ready

    async def status_ready() -> Obj | None:
        got = await env.sets.get("web", namespace=env.ns)
        st = got.get("status") or {}
        done = (st.get("replicas"), st.get("readyReplicas"), st.get("currentReplicas"), st.get("updatedReplicas"),
                st.get("availableReplicas"), st.get("observedGeneration")) == \
            (3, 3, 3, 3, 3, got["metadata"]["generation"])
        return st if done else None

    st = await eventually(status_ready, "status 3/3 ready")
    assert st["currentRevision"] == st["updateRevision"] and st["collisionCount"] == 0
    revs, _ = await env.revisions.list_all(namespace=env.ns)
    rev, = [r for r in revs if r["metadata"]["ownerReferences"][0]["uid"] == sts["metadata"]["uid"]]
    assert rev["metadata"]["name"] == st["updateRevision"] and rev["metadata"]["name"].startswith("web-")
    assert rev["revision"] == 1 and rev["data"]["spec"]["template"]["$patch"] == "replace"
    for i in range(3):
        pod = await env.pods.get(f"web-{i}", namespace=env.ns)
        labels = pod["metadata"]["labels"]
        assert labels["statefulset.kubernetes.io/pod-name"] == f"web-{i}"
        assert labels["apps.kubernetes.io/pod-index"] == str(i)
        assert labels["controller-revision-hash"] == st["updateRevision"]
        assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == (f"web-{i}", "web-svc")
        assert {"name": "data", "persistentVolumeClaim": {"claimName": f"data-web-{i}"}} in pod["spec"]["volumes"]
        ref, = pod["metadata"]["ownerReferences"]
        assert (ref["kind"], ref["uid"], ref["controller"]) == ("StatefulSet", sts["metadata"]["uid"], True)
        claim = await env.claims.get(f"data-web-{i}", namespace=env.ns)
        assert not claim["metadata"].get("ownerReferences")  # Retain/Retain: no owner


async def test_scale_down_in_reverse_order(env: Env) -> None:
    await env.sets.create(sts_body("db", 3, policy="Parallel"), namespace=env.ns)

    async def three() -> bool:
        return await env.pod_names() == ["db-0", "db-1", "db-2"]

    await eventually(three, "all three pods at once (Parallel)")
    for i in range(3):
        await env.mark_ready(f"db-{i}")
    await env.sets.patch("db", {"spec": {"podManagementPolicy": "Parallel", "replicas": 1}}, namespace=env.ns)

    async def one() -> bool:
        return await env.pod_names() == ["db-0"]

    await eventually(one, "scale down to db-0")
    # OrderedReady: a fresh set scaled down deletes the highest ordinal first, one at a time.
    await env.sets.create(sts_body("ord", 3), namespace=env.ns)
    for i in range(3):
        await eventually(lambda: env.get_pod(f"ord-{i}"), f"ord-{i}")
        await env.mark_ready(f"ord-{i}")
    _, rv = await env.pods.list_all(namespace=env.ns)
    deleted: list[str] = []

    async def watch_deletes() -> None:
        async with await env.pods.watch(namespace=env.ns, resource_version=rv) as stream:
            async for ev in stream:
                if ev.type == "DELETED" and ev.object["metadata"]["name"].startswith("ord-"):
                    deleted.append(ev.object["metadata"]["name"])

    watcher = asyncio.create_task(watch_deletes())
    try:
        await env.sets.patch("ord", {"spec": {"replicas": 0}}, namespace=env.ns)

        async def all_gone() -> bool:
            return len(deleted) == 3

        await eventually(all_gone, "ord-2, ord-1, ord-0 deleted")
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
    assert deleted == ["ord-2", "ord-1", "ord-0"]


async def test_partitioned_rolling_update(env: Env) -> None:
    await env.sets.create(sts_body("app", 3, partition=1), namespace=env.ns)
    for i in range(3):
        await eventually(lambda: env.get_pod(f"app-{i}"), f"app-{i}")
        await env.mark_ready(f"app-{i}")

    async def settled() -> Obj | None:
        st = (await env.sets.get("app", namespace=env.ns)).get("status") or {}
        return st if st.get("readyReplicas") == 3 and st.get("updatedReplicas") == 3 else None

    first = await eventually(settled, "3 ready pods")
    await env.sets.patch("app", {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}}},
                         namespace=env.ns)

    async def image_of(name: str) -> str | None:
        pod = await env.get_pod(name)
        return pod["spec"]["containers"][0]["image"] if pod else None

    for i in (2, 1):  # highest ordinal first, each once the one above is ready again
        async def updated(i: int = i) -> bool:
            return await image_of(f"app-{i}") == "nginx:2"

        await eventually(updated, f"app-{i} recreated at the new revision")
        await env.mark_ready(f"app-{i}")

    async def partitioned() -> Obj | None:
        st = (await env.sets.get("app", namespace=env.ns)).get("status") or {}
        ok = st.get("updatedReplicas") == 2 and st.get("currentReplicas") == 1 and st.get("readyReplicas") == 3
        return st if ok else None

    st = await eventually(partitioned, "2 updated, 1 current (partition 1)")
    assert st["currentRevision"] == first["currentRevision"] != st["updateRevision"]
    assert await image_of("app-0") == "nginx:1"  # below the partition: untouched
    pod0 = await env.pods.get("app-0", namespace=env.ns)
    assert pod0["metadata"]["labels"]["controller-revision-hash"] == st["currentRevision"]
    revs, _ = await env.revisions.list_all(namespace=env.ns)
    numbers = {r["metadata"]["name"]: r["revision"] for r in revs if r["metadata"]["name"].startswith("app-")}
    assert numbers == {st["currentRevision"]: 1, st["updateRevision"]: 2}

    out = await env.kubectl("rollout", "status", "statefulset/app", "--timeout=60s")
    assert "partitioned roll out complete: 2 new pods have been updated" in out

    await env.sets.patch("app", {"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}}, namespace=env.ns)

    async def app0_updated() -> bool:
        return await image_of("app-0") == "nginx:2"

    await eventually(app0_updated, "app-0 updated once the partition is 0")
    await env.mark_ready("app-0")

    async def complete() -> Obj | None:
        s = (await env.sets.get("app", namespace=env.ns)).get("status") or {}
        return s if s.get("currentRevision") == st["updateRevision"] and s.get("currentReplicas") == 3 else None

    await eventually(complete, "the rolling update to complete")
    out = await env.kubectl("rollout", "status", "statefulset/app", "--timeout=60s")
    assert "partitioned roll out complete: 3 new pods have been updated" in out  # partition set (0): kubectl's wording
    history = await env.kubectl("rollout", "history", "statefulset/app")
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"]
    revision1 = await env.kubectl("rollout", "history", "statefulset/app", "--revision=1")
    assert "nginx:1" in revision1 and "nginx:2" not in revision1


async def test_when_scaled_delete_removes_claims(env: Env) -> None:
    await env.sets.create(sts_body("kv", 2, policy="Parallel", claims=True,
                                   retention={"whenDeleted": "Retain", "whenScaled": "Delete"}), namespace=env.ns)
    for i in range(2):
        await eventually(lambda: env.get_pod(f"kv-{i}"), f"kv-{i}")
    claim = await env.claims.get("data-kv-1", namespace=env.ns)
    assert not claim["metadata"].get("ownerReferences")  # in range: no owner yet
    await env.sets.patch("kv", {"spec": {"replicas": 1}}, namespace=env.ns)

    async def claim_gone() -> bool:
        try:
            await env.claims.get("data-kv-1", namespace=env.ns)
        except NotFound:
            return True
        return False

    await eventually(claim_gone, "data-kv-1 deleted by the garbage collector after its pod", timeout=60.0)
    assert await env.pod_names() == ["kv-0"]
    kept = await env.claims.get("data-kv-0", namespace=env.ns)
    assert not kept["metadata"].get("deletionTimestamp")
