"""Admission's cached lookups see every change the store makes (kubecore.apiserver.lookups)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from kubecore.api.registry import ResourceType, builtin_registry
from kubecore.apiserver.lookups import Lookups
from kubecore.apiserver.storage import ObjectStore
from kubecore.store import Store

REG = builtin_registry()


def _rt(group: str, resource: str) -> ResourceType:
    rt = REG.get(group, "v1", resource)
    assert rt is not None
    return rt


PCS, LRS, NS = _rt("scheduling.k8s.io", "priorityclasses"), _rt("", "limitranges"), _rt("", "namespaces")


@pytest.fixture
def objects(tmp_path: Path) -> Iterator[ObjectStore]:
    with Store.open(tmp_path / "s", fsync=False) as store:
        yield ObjectStore(store)


def put(objects: ObjectStore, rt: ResourceType, namespace: str, name: str, **fields: Any) -> None:
    obj = {"metadata": {"name": name, **({"namespace": namespace} if namespace else {})}, **fields}
    objects.store.put(rt.key(namespace or None, name), msgspec.json.encode(obj))


def names(items: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    return [(o["metadata"]["name"], o.get("value")) for o in items]


def test_items_follow_puts_deletes_and_same_count_swaps(objects: ObjectStore) -> None:
    look = Lookups(objects)
    assert look.items(PCS, "") == []
    put(objects, PCS, "", "a", value=1)
    put(objects, PCS, "", "b", value=2)
    first = look.items(PCS, "")
    assert names(first) == [("a", 1), ("b", 2)]
    assert look.items(PCS, "") is first  # unchanged: the decoded list is reused
    put(objects, PCS, "", "a", value=10)  # same count, newer version
    assert names(look.items(PCS, "")) == [("a", 10), ("b", 2)]
    objects.store.delete(PCS.key(None, "b"))
    put(objects, PCS, "", "c", value=3)  # a delete and a create: the count is back to 2
    assert names(look.items(PCS, "")) == [("a", 10), ("c", 3)]
    objects.store.delete(PCS.key(None, "a"))
    assert names(look.items(PCS, "")) == [("c", 3)]


def test_items_are_per_namespace(objects: ObjectStore) -> None:
    look = Lookups(objects)
    put(objects, LRS, "one", "lr", spec={"limits": []})
    assert names(look.items(LRS, "one")) == [("lr", None)]
    assert look.items(LRS, "two") == []
    put(objects, LRS, "two", "lr2")
    assert names(look.items(LRS, "two")) == [("lr2", None)] and names(look.items(LRS, "one")) == [("lr", None)]


def test_get_follows_versions_and_deletion(objects: ObjectStore) -> None:
    look = Lookups(objects)
    assert look.get(NS, "", "x") is None
    put(objects, NS, "", "x", status={"phase": "Active"})
    got = look.get(NS, "", "x")
    assert got is not None and got["status"]["phase"] == "Active"
    assert look.get(NS, "", "x") is got
    put(objects, NS, "", "x", status={"phase": "Terminating"})
    again = look.get(NS, "", "x")
    assert again is not None and again["status"]["phase"] == "Terminating"
    objects.store.delete(NS.key(None, "x"))
    assert look.get(NS, "", "x") is None


def test_get_through_async_writes(objects: ObjectStore) -> None:
    look = Lookups(objects)

    async def main() -> None:
        obj = {"metadata": {"name": "y"}, "status": {"phase": "Active"}}
        await objects.create(NS, "", "y", obj)
        rv = int(obj["metadata"]["resourceVersion"])
        assert (look.get(NS, "", "y") or {})["metadata"]["resourceVersion"] == str(rv)
        obj["status"] = {"phase": "Terminating"}
        await objects.replace(NS, "", "y", obj, expect_revision=rv)
        assert (look.get(NS, "", "y") or {})["status"]["phase"] == "Terminating"

    asyncio.run(main())
