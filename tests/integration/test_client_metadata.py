"""Metadata-only informers against the real API server, and the garbage collector's choice of
informer per resource (metadata-only unless a controller caches the resource in full, moving
onto the full informer when one appears later)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from kubecore.client.config import ClientConfig
from kubecore.client.factory import SharedInformerFactory
from kubecore.client.indexer import DeletedFinalStateUnknown
from kubecore.client.informer import EventHandlerFuncs
from kubecore.client.metadata import LIST_ACCEPT
from kubecore.client.resource import ResourceClient
from kubecore.client.rest import RestClient
from kubecore.controllers.garbagecollector import Monitors
from kubecore.controllers.graph import GraphBuilder, Node

WAIT = 30.0
Obj = dict[str, Any]


async def eventually(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


@pytest.fixture
async def rest_ns(server_url: str) -> AsyncIterator[tuple[RestClient, str]]:
    rest = RestClient(ClientConfig(server=server_url, qps=0))
    ns = f"meta-{uuid.uuid4().hex[:8]}"
    await (await rest.resource("v1", "namespaces")).create(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    try:
        yield rest, ns
    finally:
        await rest.close()


def configmap(name: str, *, owner: Obj | None = None) -> Obj:
    meta: Obj = {"name": name}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap", "name": owner["metadata"]["name"],
                                    "uid": owner["metadata"]["uid"]}]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"payload": "x" * 4096}}


async def test_server_lists_partial_object_metadata(rest_ns: tuple[RestClient, str]) -> None:
    rest, ns = rest_ns
    cms = await rest.resource("v1", "configmaps")
    await cms.create(configmap("a"), namespace=ns)
    doc = (await rest.request("GET", f"/api/v1/namespaces/{ns}/configmaps", headers={"Accept": LIST_ACCEPT})).json()
    assert doc["kind"] == "PartialObjectMetadataList"
    assert [i["metadata"]["name"] for i in doc["items"]] == ["a"] and "data" not in doc["items"][0]


@pytest.mark.parametrize("use_watch_list", [True, False], ids=["streaming-list", "paged-list"])
async def test_metadata_informer_caches_and_delivers_metadata_only(rest_ns: tuple[RestClient, str],
                                                                    use_watch_list: bool) -> None:
    rest, ns = rest_ns
    cms: ResourceClient = await rest.resource("v1", "configmaps")
    await cms.create(configmap("before"), namespace=ns)
    factory = SharedInformerFactory(rest, namespace=ns, use_watch_list=use_watch_list)
    informer = await factory.metadata_informer_for("v1", "configmaps")
    seen: list[tuple[str, str, Obj]] = []

    def on_delete(o: Obj | DeletedFinalStateUnknown) -> None:
        obj = o.obj if isinstance(o, DeletedFinalStateUnknown) else o
        seen.append(("delete", obj["metadata"]["name"], obj))

    informer.add_event_handler(EventHandlerFuncs(
        on_add_func=lambda o, _i: seen.append(("add", o["metadata"]["name"], o)),
        on_update_func=lambda _old, o: seen.append(("update", o["metadata"]["name"], o)),
        on_delete_func=on_delete))
    factory.start()
    try:
        assert await factory.wait_for_cache_sync(WAIT) == {"configmaps.core (metadata)": True}
        await cms.create(configmap("after"), namespace=ns)
        await cms.patch("after", {"metadata": {"labels": {"l": "1"}}}, namespace=ns)
        await cms.delete("before", namespace=ns)
        await eventually(lambda: len(seen) == 4, "four events")
    finally:
        await factory.shutdown()
    assert [(kind, name) for kind, name, _ in seen] == [("add", "before"), ("add", "after"), ("update", "after"),
                                                         ("delete", "before")]
    for _, _, obj in seen:
        assert obj["kind"] == "PartialObjectMetadata" and obj["apiVersion"] == "meta.k8s.io/v1"
        assert "data" not in obj and "managedFields" not in obj["metadata"] and obj["metadata"]["uid"]
    assert seen[2][2]["metadata"]["labels"] == {"l": "1"}
    assert factory.metadata_informers[0].indexer.list_keys() == [f"{ns}/after"]


async def test_gc_monitors_share_full_informers_and_watch_the_rest_as_metadata(
        rest_ns: tuple[RestClient, str]) -> None:
    rest, ns = rest_ns
    cms = await rest.resource("v1", "configmaps")
    owner = await cms.create(configmap("owner"), namespace=ns)
    await cms.create(configmap("dep", owner=owner), namespace=ns)
    factory = SharedInformerFactory(rest, namespace=ns)
    pods = await factory.informer_for("v1", "pods")
    queued: list[Node] = []
    graph = GraphBuilder(attempt_to_delete=queued.append, attempt_to_orphan=queued.append)
    monitors = Monitors(factory, graph.process)
    owner_uid = owner["metadata"]["uid"]

    def dependents() -> set[str]:
        node = graph.nodes.get(owner_uid)
        return {d.identity.name for d in node.dependents} if node is not None else set()

    try:
        await monitors.sync()
        await eventually(monitors.has_synced, "monitors synced")
        assert monitors.monitors[("", "pods")].informer is pods  # shared: no second copy of the pods
        mon = monitors.monitors[("", "configmaps")]
        assert mon.metadata_only and mon.informer in factory.metadata_informers
        assert dependents() == {"dep"}
        cached = mon.informer.indexer.get_by_key(f"{ns}/dep")
        assert cached is not None and "data" not in cached

        full = await factory.informer_for("v1", "configmaps")  # a controller wants them in full
        assert await monitors.sync() and mon.informer is full and mon.retiring is not None
        await eventually(mon.registration.has_synced, "the full informer's initial list reached the graph")
        await monitors.sync()
        assert mon.retiring is None and not mon.metadata_only
        assert all("configmaps" not in i.name for i in factory.metadata_informers)
        await cms.create(configmap("dep2", owner=owner), namespace=ns)
        await eventually(lambda: dependents() == {"dep", "dep2"}, "a new dependent seen through the full informer")
    finally:
        await monitors.stop()
        await factory.shutdown()


async def test_server_watches_partial_object_metadata(server_url: str, rest_ns: tuple[RestClient, str]) -> None:
    """A metadata-only WATCH gets PartialObjectMetadata events (initial ADDED, then changes),
    without the objects' data, as upstream's apiserver sends them."""
    import aiohttp
    import msgspec

    rest, ns = rest_ns
    cms = await rest.resource("v1", "configmaps")
    await cms.create(configmap("w1"), namespace=ns)
    accept = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
    url = f"{server_url}/api/v1/namespaces/{ns}/configmaps?watch=1&timeoutSeconds=5"
    events: list[Obj] = []
    async with aiohttp.ClientSession() as session, session.get(url, headers={"Accept": accept}) as resp:
        assert resp.status == 200
        await cms.create(configmap("w2"), namespace=ns)
        async for line in resp.content:
            events.append(msgspec.json.decode(line))
            if len(events) == 2:
                break
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "w1"), ("ADDED", "w2")]
    for e in events:
        assert e["object"]["kind"] == "PartialObjectMetadata"
        assert e["object"]["apiVersion"] == "meta.k8s.io/v1"
        assert "data" not in e["object"]
