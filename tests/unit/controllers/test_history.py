"""ControllerRevision history helpers: FNV hashes and safe encoding as upstream, Go-style canonical
JSON, names, equality, ordering, truncation, and the create loop's collision handling against an
in-memory revision store."""

from __future__ import annotations

import copy
from typing import Any, cast

import pytest

from kubecore.client.errors import AlreadyExists, Conflict
from kubecore.client.indexer import Indexer
from kubecore.client.resource import ResourceClient
from kubecore.controllers.controller_utils import selector_from_label_selector
from kubecore.controllers.history import (
    CONTROLLER_REVISION_HASH_LABEL, ControllerHistory, canonical_json, compute_hash, controller_revision_name,
    equal_revision, find_equal_revisions, fnv32, fnv32a, hash_controller_revision, max_revision,
    new_controller_revision, next_revision, revisions_to_truncate, safe_encode_string, sort_controller_revisions,
)

Obj = dict[str, Any]
PARENT: Obj = {"metadata": {"name": "web", "namespace": "ns", "uid": "u-1"}}


def rev(name: str, number: int, data: Obj, *, created: str = "2024-01-01T00:00:00Z", labels: Obj | None = None,
        owner: str | None = "u-1") -> Obj:
    m: Obj = {"name": name, "namespace": "ns", "creationTimestamp": created, "labels": labels or {"app": "web"}}
    if owner is not None:
        m["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": owner,
                                 "controller": True}]
    return {"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": m, "data": data, "revision": number}


def test_fnv_matches_the_published_vectors() -> None:
    assert fnv32(b"") == 0x811C9DC5
    assert fnv32(b"a") == 0x050C5D7E
    assert fnv32a(b"a") == 0xE40C292C
    assert fnv32a(b"foobar") == 0xBF9CF968
    assert fnv32(b"b", fnv32(b"a")) == fnv32(b"ab")  # a running hash continues


def test_safe_encode_string_uses_no_vowels() -> None:
    assert safe_encode_string("1234567890") == "56789bcdf4"
    assert not set(safe_encode_string("0123456789")) & set("aeiou")


def test_canonical_json_is_gos_map_encoding() -> None:
    assert canonical_json({"b": "<&>", "a": [1, 2.5], "c": {"z": 1, "y": None}}) == \
        b'{"a":[1,2.5],"b":"\\u003c\\u0026\\u003e","c":{"y":null,"z":1}}'
    assert canonical_json({"s": "\u2028"}) == b'{"s":"\\u2028"}'


def test_names_and_hashes() -> None:
    assert controller_revision_name("web", "abc") == "web-abc"
    assert controller_revision_name("x" * 300, "h") == "x" * 223 + "-h"
    h0, h1 = hash_controller_revision({"a": 1}, None), hash_controller_revision({"a": 1}, 1)
    assert h0 != h1 and h0 == hash_controller_revision({"a": 1}, None)
    assert h0 == safe_encode_string(str(fnv32(b'{"a":1}')))
    assert hash_controller_revision({"a": 1}, 0) == safe_encode_string(str(fnv32(b"0", fnv32(b'{"a":1}'))))
    t = {"metadata": {"labels": {"app": "web"}}, "spec": {}}
    assert compute_hash(t, None) != compute_hash(t, 0) != compute_hash(t, 1)
    assert compute_hash(t, 0) == safe_encode_string(str(fnv32a(b"\0" * 8, fnv32a(canonical_json(t)))))


def test_new_controller_revision() -> None:
    cr = new_controller_revision(PARENT, api_version="apps/v1", kind="StatefulSet", template_labels={"app": "web"},
                                 data={"spec": {"template": {"$patch": "replace"}}}, revision=3, collision_count=0)
    h = hash_controller_revision(cr["data"], 0)
    assert cr["metadata"]["name"] == f"web-{h}" and cr["metadata"]["namespace"] == "ns"
    assert cr["metadata"]["labels"] == {"app": "web", CONTROLLER_REVISION_HASH_LABEL: h}
    assert cr["metadata"]["ownerReferences"] == [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web",
                                                  "uid": "u-1", "controller": True, "blockOwnerDeletion": True}]
    assert cr["revision"] == 3


def test_equality_ordering_and_numbers() -> None:
    a, b = rev("web-a", 2, {"x": 1}), rev("web-b", 1, {"x": 2})
    a2 = rev("web-c", 5, {"x": 1})
    assert equal_revision(a, a2) and not equal_revision(a, b)
    assert equal_revision(None, None) and not equal_revision(a, None)
    numeric = rev("web-d", 1, {"x": 1}, labels={CONTROLLER_REVISION_HASH_LABEL: "12"})
    other = rev("web-e", 1, {"x": 1}, labels={CONTROLLER_REVISION_HASH_LABEL: "13"})
    assert not equal_revision(numeric, other)  # numeric hash labels that differ decide
    assert find_equal_revisions([a, b, a2], rev("n", 0, {"x": 1})) == [a, a2]
    early = rev("web-y", 1, {}, created="2024-01-01T00:00:00Z")
    late = rev("web-x", 1, {}, created="2024-01-02T00:00:00Z")
    assert [r["metadata"]["name"] for r in sort_controller_revisions([a2, late, a, early, b])] == \
        ["web-b", "web-y", "web-x", "web-a", "web-c"]
    assert next_revision([]) == 1 and next_revision(sort_controller_revisions([a, b])) == 3
    assert max_revision([]) == 0 and max_revision([a, a2, b]) == 5


def test_truncation_keeps_live_and_newest() -> None:
    revs = [rev(f"web-{i}", i, {"i": i}) for i in range(1, 7)]
    # live: web-6 (update), web-5 (current), web-1 (a pod still runs it); limit 2 of the rest (2, 3, 4)
    doomed = revisions_to_truncate(revs, {"web-6", "web-5", "web-1"}, 2)
    assert [r["metadata"]["name"] for r in doomed] == ["web-2"]
    assert revisions_to_truncate(revs, set(), -1) == []
    assert [r["metadata"]["name"] for r in revisions_to_truncate(revs, set(), 0)] == [f"web-{i}" for i in range(1, 7)]


class FakeRevisions:
    """An in-memory controllerrevisions resource: create refuses taken names, update checks versions."""

    def __init__(self) -> None:
        self.items: dict[str, Obj] = {}
        self.conflicts = 0

    async def create(self, obj: Obj, *, namespace: str) -> Obj:
        name = obj["metadata"]["name"]
        if name in self.items:
            raise AlreadyExists({"reason": "AlreadyExists", "message": f"{name} exists"}, code=409)
        stored = {**obj, "metadata": {**obj["metadata"], "resourceVersion": "1"}}
        self.items[name] = stored
        return stored

    async def get(self, name: str, *, namespace: str) -> Obj:
        return copy.deepcopy(self.items[name])

    async def update(self, obj: Obj, *, namespace: str) -> Obj:
        if self.conflicts:
            self.conflicts -= 1
            raise Conflict({"reason": "Conflict", "message": "changed"}, code=409)
        self.items[obj["metadata"]["name"]] = obj
        return obj


async def test_create_resolves_name_collisions() -> None:
    store = FakeRevisions()
    history = ControllerHistory(cast(ResourceClient, store), Indexer())
    wanted = new_controller_revision(PARENT, api_version="apps/v1", kind="StatefulSet", template_labels={},
                                     data={"a": 1}, revision=1, collision_count=0)
    taken = f"web-{hash_controller_revision({'a': 1}, 0)}"
    store.items[taken] = rev(taken, 9, {"b": 2})  # another template holds the name
    created, count = await history.create_controller_revision(PARENT, wanted, 0)
    assert count == 1 and created["metadata"]["name"] == f"web-{hash_controller_revision({'a': 1}, 1)}"
    again, count2 = await history.create_controller_revision(PARENT, wanted, 1)  # the same data: found, not new
    assert again == created and count2 == 1 and len(store.items) == 2


async def test_update_retries_conflicts_and_list_filters_owners() -> None:
    store = FakeRevisions()
    indexer = Indexer()
    history = ControllerHistory(cast(ResourceClient, store), indexer)
    r = rev("web-a", 1, {"a": 1})
    store.items["web-a"] = r
    store.conflicts = 1
    updated = await history.update_controller_revision(r, 4)
    assert updated["revision"] == 4 and r["revision"] == 1  # the argument is not mutated
    for item in (rev("mine", 1, {}), rev("orphan", 1, {}, owner=None), rev("theirs", 1, {}, owner="u-2"),
                 rev("other-app", 1, {}, labels={"app": "db"})):
        indexer.put(item)
    names = sorted(x["metadata"]["name"] for x in history.list_controller_revisions(
        PARENT, selector_from_label_selector({"matchLabels": {"app": "web"}})))
    assert names == ["mine", "orphan"]
    with pytest.raises(ValueError):
        await history.adopt_controller_revision(PARENT, api_version="apps/v1", kind="StatefulSet", revision=r)
