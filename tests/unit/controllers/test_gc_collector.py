"""The garbage collector's decisions (attemptToDelete / attemptToOrphan) over a fake API:
a dict of objects by uid standing in for the server, recording every write."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubecore.controllers.garbagecollector import Collector
from kubecore.controllers.gcoperations import MappingError
from kubecore.controllers.graph import GraphEvent, Identity, Node, ObjectState

Obj = dict[str, Any]
CLUSTER_KINDS = {"ClusterRole", "Namespace"}


class FakeOps:
    def __init__(self) -> None:
        self.objects: dict[str, Obj] = {}  # by uid
        self.kinds: dict[str, str] = {}  # uid -> kind
        self.calls: list[tuple[Any, ...]] = []
        self.unknown_kinds: set[str] = set()

    def put(self, kind: str, name: str, uid: str, *, ns: str = "a", owners: list[Obj] | None = None,
            finalizers: list[str] | None = None, deleting: bool = False) -> Obj:
        meta: Obj = {"name": name, "uid": uid}
        if kind not in CLUSTER_KINDS:
            meta["namespace"] = ns
        if owners:
            meta["ownerReferences"] = owners
        if finalizers:
            meta["finalizers"] = finalizers
        if deleting:
            meta["deletionTimestamp"] = "2024-01-02T03:04:05Z"
        o = {"apiVersion": "v1", "kind": kind, "metadata": meta}
        self.objects[uid] = o
        self.kinds[uid] = kind
        return o

    async def namespaced(self, api_version: str, kind: str) -> bool:
        if kind in self.unknown_kinds:
            raise MappingError(kind)
        return kind not in CLUSTER_KINDS

    async def get(self, ident: Identity) -> Obj | None:
        if ident.kind in self.unknown_kinds:
            raise MappingError(ident.kind)
        for o in self.objects.values():
            m = o["metadata"]
            if (o["kind"], m["name"], m.get("namespace", "")) == (ident.kind, ident.name, ident.namespace):
                return o
        return None

    async def delete(self, ident: Identity, *, policy: str) -> None:
        self.calls.append(("delete", ident.name, policy))

    async def remove_owner_references(self, ident: Identity, owner_uids: set[str]) -> None:
        self.calls.append(("remove_refs", ident.name, tuple(sorted(owner_uids))))

    async def unblock_owner_references(self, ident: Identity) -> None:
        self.calls.append(("unblock", ident.name))

    async def remove_finalizer(self, ident: Identity, finalizer: str) -> None:
        self.calls.append(("remove_finalizer", ident.name, finalizer))


def ref(o: Obj, *, block: bool = False) -> Obj:
    return {"apiVersion": o["apiVersion"], "kind": o["kind"], "name": o["metadata"]["name"],
            "uid": o["metadata"]["uid"], "blockOwnerDeletion": block}


def observe(c: Collector, o: Obj) -> Node:
    c.graph.process(GraphEvent("add", ObjectState.from_object(o, api_version=o["apiVersion"], kind=o["kind"])))
    return c.graph.nodes[o["metadata"]["uid"]]


@pytest.fixture
def ops() -> FakeOps:
    return FakeOps()


@pytest.fixture
def gc(ops: FakeOps) -> Collector:
    return Collector(ops)


async def test_dependent_of_a_vanished_owner_is_deleted_in_the_background(ops: FakeOps, gc: Collector) -> None:
    owner = ops.put("ConfigMap", "o", "o-uid")
    dep = observe(gc, ops.put("ConfigMap", "d", "d-uid", owners=[ref(owner)]))
    observe(gc, owner)
    del ops.objects["o-uid"]
    assert await gc.attempt_to_delete_worker(dep) == "forget"
    assert ops.calls == [("delete", "d", "Background")]


async def test_dependent_keeps_its_own_deletion_policy(ops: FakeOps, gc: Collector) -> None:
    dep = observe(gc, ops.put("ConfigMap", "d", "d-uid", owners=[{"apiVersion": "v1", "kind": "ConfigMap",
                                                                   "name": "x", "uid": "x-uid"}],
                              finalizers=["orphan"]))
    await gc.attempt_to_delete_worker(dep)
    assert ops.calls == [("delete", "d", "Orphan")]


async def test_solid_owner_keeps_the_dependent_but_dangling_references_go(ops: FakeOps, gc: Collector) -> None:
    solid = ops.put("ConfigMap", "s", "s-uid")
    ghost = {"apiVersion": "v1", "kind": "ConfigMap", "name": "g", "uid": "g-uid"}
    wrong_uid = {"apiVersion": "v1", "kind": "ConfigMap", "name": "s", "uid": "old-s-uid"}
    dep = observe(gc, ops.put("ConfigMap", "d", "d-uid", owners=[ref(solid), ghost, wrong_uid]))
    await gc.attempt_to_delete_worker(dep)
    assert ops.calls == [("remove_refs", "d", ("g-uid", "old-s-uid"))]


async def test_all_owners_solid_means_nothing_happens(ops: FakeOps, gc: Collector) -> None:
    solid = ops.put("ConfigMap", "s", "s-uid")
    dep = observe(gc, ops.put("ConfigMap", "d", "d-uid", owners=[ref(solid)]))
    await gc.attempt_to_delete_worker(dep)
    assert ops.calls == []


async def test_owner_waiting_for_dependents_deletes_a_dependent_with_dependents_in_foreground(
        ops: FakeOps, gc: Collector) -> None:
    owner = ops.put("ConfigMap", "o", "o-uid", deleting=True, finalizers=["foregroundDeletion"])
    mid = ops.put("ConfigMap", "m", "m-uid", owners=[ref(owner, block=True)])
    leaf = ops.put("ConfigMap", "l", "l-uid", owners=[ref(mid, block=True)])
    observe(gc, owner)
    m = observe(gc, mid)
    observe(gc, leaf)
    await gc.attempt_to_delete_worker(m)
    assert ops.calls == [("delete", "m", "Foreground")]


async def test_foreground_cycle_breaker_unblocks_first(ops: FakeOps, gc: Collector) -> None:
    owner = ops.put("ConfigMap", "o", "o-uid", deleting=True, finalizers=["foregroundDeletion"])
    mid = ops.put("ConfigMap", "m", "m-uid", owners=[ref(owner, block=True)])
    leaf = ops.put("ConfigMap", "l", "l-uid", owners=[ref(mid, block=True)], deleting=True,
                   finalizers=["foregroundDeletion"])
    observe(gc, owner)
    m = observe(gc, mid)
    observe(gc, leaf)
    await gc.attempt_to_delete_worker(m)
    assert ops.calls == [("unblock", "m"), ("delete", "m", "Foreground")]


async def test_owner_deleting_dependents_waits_for_blockers_then_drops_its_finalizer(
        ops: FakeOps, gc: Collector) -> None:
    owner = ops.put("ConfigMap", "o", "o-uid", deleting=True, finalizers=["foregroundDeletion"])
    o = observe(gc, owner)
    blocker = ops.put("ConfigMap", "b", "b-uid", owners=[ref(owner, block=True)])
    b = observe(gc, blocker)
    ops.put("ConfigMap", "n", "n-uid", owners=[ref(owner, block=False)])
    observe(gc, ops.objects["n-uid"])
    gc.attempt_to_delete.clear()  # type: ignore[union-attr]
    await gc.attempt_to_delete_worker(o)
    assert ops.calls == [] and gc.attempt_to_delete == [b]
    del ops.objects["b-uid"]
    gc.graph.process(GraphEvent("delete", ObjectState.from_object(blocker, api_version="v1", kind="ConfigMap")))
    assert o in gc.attempt_to_delete  # type: ignore[operator]
    await gc.attempt_to_delete_worker(o)
    assert ops.calls == [("remove_finalizer", "o", "foregroundDeletion")]


async def test_object_being_deleted_is_left_alone(ops: FakeOps, gc: Collector) -> None:
    dep = observe(gc, ops.put("ConfigMap", "d", "d-uid", deleting=True, finalizers=["example.com/x"],
                              owners=[{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "x-uid"}]))
    await gc.attempt_to_delete_worker(dep)
    assert ops.calls == []


async def test_virtual_owner_that_does_not_exist_releases_its_dependents(ops: FakeOps, gc: Collector) -> None:
    observe(gc, ops.put("ConfigMap", "d", "d-uid", owners=[{"apiVersion": "v1", "kind": "ConfigMap",
                                                             "name": "ghost", "uid": "g-uid"}]))
    ghost = gc.graph.nodes["g-uid"]
    assert ghost.virtual and gc.attempt_to_delete == [ghost]
    gc.attempt_to_delete.clear()  # type: ignore[union-attr]
    assert await gc.attempt_to_delete_worker(ghost) == "forget"
    assert "g-uid" not in gc.graph.nodes
    [dep] = gc.attempt_to_delete  # type: ignore[misc]
    await gc.attempt_to_delete_worker(dep)
    assert ops.calls == [("delete", "d", "Background")]


async def test_virtual_owner_that_exists_is_requeued_until_observed(ops: FakeOps, gc: Collector) -> None:
    owner = ops.put("ConfigMap", "o", "o-uid")
    observe(gc, ops.put("ConfigMap", "d", "d-uid", owners=[ref(owner)]))
    virtual = gc.graph.nodes["o-uid"]
    assert await gc.attempt_to_delete_worker(virtual) == "requeue"
    observe(gc, owner)
    assert await gc.attempt_to_delete_worker(virtual) == "forget"
    assert ops.calls == []


async def test_unknown_owner_kind_is_retried(ops: FakeOps, gc: Collector) -> None:
    ops.unknown_kinds.add("Widget")
    dep = observe(gc, ops.put("ConfigMap", "d", "d-uid", owners=[{"apiVersion": "example.com/v1", "kind": "Widget",
                                                                   "name": "w", "uid": "w-uid"}]))
    assert await gc.attempt_to_delete_worker(dep) == "requeue"
    assert ops.calls == []


async def test_cluster_scoped_dependent_of_a_namespaced_owner_is_never_deleted(ops: FakeOps, gc: Collector) -> None:
    dep = observe(gc, ops.put("ClusterRole", "cr", "cr-uid", owners=[{"apiVersion": "v1", "kind": "ConfigMap",
                                                                       "name": "c", "uid": "c-uid"}]))
    assert await gc.attempt_to_delete_worker(dep) == "forget"
    assert ops.calls == []


async def test_orphaning_strips_the_reference_from_every_dependent_then_the_finalizer(
        ops: FakeOps, gc: Collector) -> None:
    owner = ops.put("ConfigMap", "o", "o-uid")
    o = observe(gc, owner)
    for n in ("d1", "d2"):
        observe(gc, ops.put("ConfigMap", n, f"{n}-uid", owners=[ref(owner)]))
    assert await gc.attempt_to_orphan_worker(o) == "forget"
    assert sorted(ops.calls[:2]) == [("remove_refs", "d1", ("o-uid",)), ("remove_refs", "d2", ("o-uid",))]
    assert ops.calls[2] == ("remove_finalizer", "o", "orphan")


async def test_orphaning_keeps_the_finalizer_when_a_dependent_fails(ops: FakeOps, gc: Collector) -> None:
    owner = ops.put("ConfigMap", "o", "o-uid")
    o = observe(gc, owner)
    observe(gc, ops.put("ConfigMap", "d", "d-uid", owners=[ref(owner)]))

    async def boom(ident: Identity, uids: set[str]) -> None:
        await asyncio.sleep(0)
        raise RuntimeError("server said no")

    ops.remove_owner_references = boom  # type: ignore[method-assign]
    assert await gc.attempt_to_orphan_worker(o) == "requeue"
    assert ops.calls == []
