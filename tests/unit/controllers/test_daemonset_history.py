"""A DaemonSet's ControllerRevisions over in-memory stores: the first revision, a new one per
template, a rollback renumbering an old one, adoption of orphans, a name collision bumping
status.collisionCount, and the history limit sparing revisions pods still run."""

from __future__ import annotations

import copy
from typing import Any, cast

import pytest

from kubecore.client.errors import AlreadyExists, NotFound
from kubecore.client.indexer import Indexer
from kubecore.client.resource import ResourceClient
from kubecore.controllers.controller_utils import selector_from_label_selector
from kubecore.controllers.daemonset_history import DaemonSetHistory
from kubecore.controllers.history import ControllerHistory

Obj = dict[str, Any]
SELECTOR = selector_from_label_selector({"matchLabels": {"app": "agent"}})


class Store:
    def __init__(self) -> None:
        self.indexer = Indexer()
        self.writes: list[str] = []

    async def create(self, obj: Obj, *, namespace: str) -> Obj:
        key = f"{namespace}/{obj['metadata']['name']}"
        if self.indexer.get_by_key(key) is not None:
            raise AlreadyExists({"reason": "AlreadyExists", "message": key}, code=409)
        stored = copy.deepcopy(obj)
        stored["metadata"]["namespace"] = namespace
        stored["metadata"].setdefault("uid", f"uid-{obj['metadata']['name']}")
        self.indexer.put(stored)
        self.writes.append(f"create {obj['metadata']['name']}")
        return stored

    async def get(self, name: str, *, namespace: str) -> Obj:
        got = self.indexer.get_by_key(f"{namespace}/{name}")
        if got is None:
            raise NotFound({"reason": "NotFound", "message": name}, code=404)
        return copy.deepcopy(got)

    async def update(self, obj: Obj, *, namespace: str) -> Obj:
        self.indexer.put(copy.deepcopy(obj))
        self.writes.append(f"update {obj['metadata']['name']}")
        return obj

    async def update_status(self, obj: Obj, *, namespace: str) -> Obj:
        return await self.update(obj, namespace=namespace)

    async def delete(self, name: str, *, namespace: str) -> Obj:
        self.indexer.delete_key(f"{namespace}/{name}")
        self.writes.append(f"delete {name}")
        return {}

    async def patch(self, name: str, patch: Obj, *, namespace: str, patch_type: str) -> Obj:
        got = copy.deepcopy(self.indexer.get_by_key(f"{namespace}/{name}"))
        assert got is not None
        got["metadata"]["ownerReferences"] = patch["metadata"]["ownerReferences"]
        self.indexer.put(got)
        self.writes.append(f"patch {name}")
        return got


def make_ds(image: str = "a:1") -> Obj:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "agent", "namespace": "ns", "uid": "ds-uid", "generation": 1},
            "spec": {"selector": {"matchLabels": {"app": "agent"}}, "revisionHistoryLimit": 1,
                     "template": {"metadata": {"labels": {"app": "agent"}},
                                  "spec": {"containers": [{"name": "c", "image": image}]}}},
            "status": {}}


class World:
    def __init__(self) -> None:
        self.revisions, self.dss, self.pods = Store(), Store(), Store()
        self.history = DaemonSetHistory(history=ControllerHistory(cast(ResourceClient, self.revisions),
                                                                  self.revisions.indexer),
                                        ds_client=cast(ResourceClient, self.dss), pods=cast(ResourceClient, self.pods))

    async def construct(self, ds: Obj) -> tuple[Obj, list[Obj]]:
        async def fresh() -> Obj:
            return ds

        async def no_pods() -> list[Obj]:
            return []

        return await self.history.construct_history(ds, SELECTOR, fresh=fresh, daemon_pods=no_pods)


async def test_revisions_follow_the_template_and_rollbacks_renumber() -> None:
    w = World()
    cur, old = await w.construct(make_ds("a:1"))
    assert cur["revision"] == 1 and old == [] and cur["metadata"]["name"] == \
        f"agent-{cur['metadata']['labels']['controller-revision-hash']}"
    assert cur["data"]["spec"]["template"]["$patch"] == "replace"
    assert cur["metadata"]["ownerReferences"][0]["uid"] == "ds-uid"
    again, _ = await w.construct(make_ds("a:1"))
    assert again["metadata"]["name"] == cur["metadata"]["name"] and len(w.revisions.indexer) == 1
    second, old = await w.construct(make_ds("a:2"))
    assert second["revision"] == 2 and [r["revision"] for r in old] == [1]
    back, old = await w.construct(make_ds("a:1"))
    assert back["metadata"]["name"] == cur["metadata"]["name"] and back["revision"] == 3
    assert [r["revision"] for r in old] == [2]


async def test_orphans_are_adopted_and_collisions_bump_the_count() -> None:
    w = World()
    ds = make_ds("a:1")
    cur, _ = await w.construct(ds)
    orphan = copy.deepcopy(cur)
    orphan["metadata"]["name"] = "agent-orphan"
    orphan["metadata"]["ownerReferences"] = []
    orphan["data"] = {"spec": {"template": {"x": 1}}}
    orphan["metadata"]["labels"] = {"app": "agent"}  # no hash label: it gets its own name as one
    w.revisions.indexer.put(orphan)
    _, old = await w.construct(ds)
    adopted, = old
    assert adopted["metadata"]["ownerReferences"][0]["uid"] == "ds-uid"
    assert "update agent-orphan" in w.revisions.writes
    relabelled = w.revisions.indexer.get_by_key("ns/agent-orphan")
    assert relabelled is not None and relabelled["metadata"]["labels"]["controller-revision-hash"] == "agent-orphan"

    clash = make_ds("a:3")
    taken = w.history.new_revision(clash, 1)
    squatter = {**taken, "data": {"other": True}}
    w.revisions.indexer.put(squatter)
    w.dss.indexer.put(copy.deepcopy(clash))
    with pytest.raises(AlreadyExists):
        await w.construct(clash)
    bumped = w.dss.indexer.get_by_key("ns/agent")
    assert bumped is not None and bumped["status"]["collisionCount"] == 1
    clash["status"]["collisionCount"] = 1
    cur3, _ = await w.construct(clash)
    assert cur3["metadata"]["name"] != taken["metadata"]["name"]


async def test_cleanup_keeps_revisions_pods_still_run() -> None:
    w = World()
    revs = []
    for image in ("a:1", "a:2", "a:3", "a:4"):
        cur, old = await w.construct(make_ds(image))
        revs.append(cur)
    live = {revs[0]["metadata"]["labels"]["controller-revision-hash"]}
    await w.history.cleanup_history(make_ds("a:4"), old, live)  # limit 1 of the three old ones
    left = sorted(r["revision"] for r in w.revisions.indexer.list())
    assert left == [1, 4]  # two of three old ones must go: 1 is live, so 2 and 3
