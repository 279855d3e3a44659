"""Metadata-only LIST/WATCH and informers (kubecore.client.metadata + the factory's
metadata_informer_for) against the fake server, which ignores the Accept header and always
sends whole objects: what reaches the cache must be PartialObjectMetadata all the same."""

from __future__ import annotations

from typing import Any

import msgspec

from kubecore.client.clock import FakeClock
from kubecore.client.config import ClientConfig
from kubecore.client.factory import SharedInformerFactory
from kubecore.client.indexer import DeletedFinalStateUnknown
from kubecore.client.informer import EventHandlerFuncs
from kubecore.client.metadata import LIST_ACCEPT, WATCH_ACCEPT, metadata_client, partial_bytes
from kubecore.client.rest import RestClient
from tests.unit.client.fakeapi import FakeApi, eventually, serve

MANAGED = [{"manager": "kubectl", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:k": {}}}}]


def full_object() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "data": {"big": "eA==" * 1000},
            "metadata": {"name": "s", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
                         "labels": {"app": "x"}, "finalizers": ["f"], "managedFields": MANAGED,
                         "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u0"}]}}


def test_partial_bytes_keeps_the_metadata_without_managed_fields() -> None:
    out = msgspec.json.decode(partial_bytes(msgspec.json.encode(full_object())))
    meta = {k: v for k, v in full_object()["metadata"].items() if k != "managedFields"}
    assert out == {"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": meta}


def test_partial_bytes_can_keep_managed_fields_and_accepts_partial_input() -> None:
    raw = partial_bytes(msgspec.json.encode(full_object()), trim_managed_fields=False)
    out = msgspec.json.decode(raw)
    assert out["metadata"]["managedFields"] == MANAGED and "data" not in out
    assert msgspec.json.decode(partial_bytes(raw, trim_managed_fields=False)) == out  # idempotent
    assert msgspec.json.decode(partial_bytes(b'{"kind":"X"}')) == {
        "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": {}}


async def test_list_and_watch_ask_for_metadata_and_yield_only_metadata() -> None:
    api = FakeApi()
    obj = await api.put("a", {"k": "v" * 500})
    obj["metadata"]["managedFields"] = MANAGED
    async with serve(api) as url, RestClient(ClientConfig(server=url, qps=0)) as rest:
        mc = await metadata_client(rest, "v1", "cm")
        page = await mc.list_page(namespace="default")
        assert api.accepts[-1] == LIST_ACCEPT
        [item] = [msgspec.json.decode(r) for r in page.items]
        assert item["kind"] == "PartialObjectMetadata" and "data" not in item
        assert item["metadata"]["name"] == "a" and "managedFields" not in item["metadata"]
        async with await mc.watch(namespace="default", resource_version=page.resource_version) as stream:
            assert api.accepts[-1] == WATCH_ACCEPT
            await api.put("a", {"k": "w"})
            await api.bookmark()
            events = []
            async for ev in stream:
                events.append(ev)
                if len(events) == 2:
                    break
    modified, bookmark = events
    assert modified.type == "MODIFIED" and modified.object["kind"] == "PartialObjectMetadata"
    assert "data" not in modified.object and modified.resource_version() == "102"
    assert bookmark.type == "BOOKMARK" and bookmark.resource_version() == "103"


async def test_factory_metadata_informer_is_shared_separate_and_started_with_the_others() -> None:
    api = FakeApi()
    await api.put("a", {"k": "v"})
    seen: list[tuple[str, str, bool]] = []

    def on_delete(o: Any) -> None:
        o = o.obj if isinstance(o, DeletedFinalStateUnknown) else o
        seen.append(("delete", o["metadata"]["name"], "data" in o))

    handler = EventHandlerFuncs(
        on_add_func=lambda o, _initial: seen.append(("add", o["metadata"]["name"], "data" in o)),
        on_update_func=lambda _old, o: seen.append(("update", o["metadata"]["name"], "data" in o)),
        on_delete_func=on_delete)
    async with serve(api) as url, RestClient(ClientConfig(server=url, qps=0)) as rest:
        factory = SharedInformerFactory(rest, clock=FakeClock())
        meta = await factory.metadata_informer_for("v1", "configmaps")
        assert await factory.metadata_informer_for(None, "cm") is meta
        info = (await rest.resource("v1", "configmaps")).info
        assert factory.existing_informer(info) is None and factory.informers == []
        meta.add_event_handler(handler)
        factory.start()
        assert await factory.wait_for_cache_sync(10) == {"configmaps.core (metadata)": True}
        await api.put("b", {"k": "v"})
        await api.put("a", {"k": "changed"})
        await api.remove("b")
        await eventually(lambda: len(seen) == 4, what="metadata events")
        cached = meta.indexer.get_by_key("default/a")
        assert cached is not None and cached["kind"] == "PartialObjectMetadata" and "data" not in cached
        full = await factory.informer_for("v1", "configmaps")
        assert full is not meta and factory.existing_informer(info) is full
        await factory.remove_metadata_informer(info)
        assert factory.metadata_informers == []
        await factory.shutdown()
    assert seen == [("add", "a", False), ("add", "b", False), ("update", "a", False), ("delete", "b", False)]
