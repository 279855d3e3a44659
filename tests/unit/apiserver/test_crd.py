"""CRDs through an in-process API server: establishing, serving custom resources (defaults,
pruning, validation, status/scale subresources, printer columns, versions), deletion, restart."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from aiohttp.test_utils import TestClient, TestServer

from kubecore.api import crd_validation
from kubecore.apiserver import crd as crd_controller
from kubecore.apiserver.app import OBJECTS, build_app
from kubecore.store import Store

Obj = dict[str, Any]
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def widget_crd(**version: Any) -> Obj:
    v1: Obj = {
        "name": "v1", "served": True, "storage": True,
        "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                                                 "statusReplicasPath": ".status.replicas"}},
        "additionalPrinterColumns": [{"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
                                     {"name": "Color", "type": "string", "jsonPath": ".spec.color", "priority": 1}],
        "schema": {"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "required": ["color"], "properties": {
                "replicas": {"type": "integer", "minimum": 0, "default": 1},
                "color": {"type": "string", "enum": ["red", "blue"]}}},
            "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}}},
    }
    v1.update(version)
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]}, "versions": [v1]}}


def widget(name: str, **spec: Any) -> Obj:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": {"color": "red", **spec}}


async def start(store: Store) -> AsyncIterator[TestClient[Any, Any]]:
    app = build_app(store)
    async with TestClient(TestServer(app)) as c:
        r = await c.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
        assert r.status in (201, 409), await r.text()
        yield c
    app[OBJECTS].cache.close()


@pytest.fixture
async def client() -> AsyncIterator[TestClient[Any, Any]]:
    store = Store.memory()
    async for c in start(store):
        yield c
    store.close()


async def established(client: TestClient[Any, Any], crd: Obj) -> Obj:
    r = await client.post(CRDS, json=crd)
    assert r.status == 201, await r.text()
    created = await r.json()
    assert created["status"] == {"acceptedNames": {"plural": "", "kind": ""}, "storedVersions": ["v1"]}
    for _ in range(200):
        got = await (await client.get(f"{CRDS}/{crd['metadata']['name']}")).json()
        if any(c["type"] == "Established" and c["status"] == "True" for c in got["status"].get("conditions", [])):
            return dict(got)
        await asyncio.sleep(0.01)
    raise AssertionError(f"not established: {got}")


async def test_lifecycle(client: TestClient[Any, Any]) -> None:
    crd = await established(client, widget_crd())
    assert [c["type"] for c in crd["status"]["conditions"]] == ["NamesAccepted", "Established"]
    assert crd["status"]["acceptedNames"] == {"plural": "widgets", "singular": "widget", "shortNames": ["wd"],
                                              "kind": "Widget", "listKind": "WidgetList"}
    disc = await (await client.get("/apis/example.com/v1")).json()
    assert [(r["name"], r.get("kind")) for r in disc["resources"]] == [
        ("widgets", "Widget"), ("widgets/status", "Widget"), ("widgets/scale", "Scale")]

    r = await client.post(WIDGETS, json={**widget("w1"), "extra": 1})
    assert r.status == 201, await r.text()
    w1 = await r.json()
    assert w1["spec"] == {"color": "red", "replicas": 1} and "extra" not in w1 and w1["metadata"]["generation"] == 1
    assert r.headers.getall("Warning") == ['299 - "unknown field \\"extra\\""']

    r = await client.post(WIDGETS, json=widget("bad", replicas="many", color="green"))
    assert r.status == 422
    body = await r.json()
    assert body["message"].startswith('Widget.example.com "bad" is invalid: [')
    assert {c["field"] for c in body["details"]["causes"]} == {"spec.replicas", "spec.color", ".spec.replicas"}
    r = await client.post(WIDGETS + "?fieldValidation=Strict", json={**widget("strict"), "extra": 1})
    assert r.status == 400
    assert (await r.json())["message"] == ('Widget in version "v1" cannot be handled as a Widget: strict decoding '
                                           'error: unknown field "extra"')

    w1["status"] = {"replicas": 7}
    w1["spec"]["replicas"] = 2
    r = await client.put(f"{WIDGETS}/w1", json=w1)
    updated = await r.json()
    assert "status" not in updated and updated["metadata"]["generation"] == 2
    updated["status"] = {"replicas": 3}
    r = await client.put(f"{WIDGETS}/w1/status", json=updated)
    assert (await r.json())["status"] == {"replicas": 3}
    r = await client.patch(f"{WIDGETS}/w1/scale", data=b'{"spec":{"replicas":5}}',
                           headers={"Content-Type": "application/merge-patch+json"})
    assert r.status == 200, await r.text()
    assert (await r.json())["spec"] == {"replicas": 5}
    got = await (await client.get(f"{WIDGETS}/w1")).json()
    assert got["spec"]["replicas"] == 5 and got["status"] == {"replicas": 3} and got["metadata"]["generation"] == 3

    table = await (await client.get(WIDGETS, headers={"Accept": TABLE})).json()
    assert [(c["name"], c["type"], c["priority"]) for c in table["columnDefinitions"]] == [
        ("Name", "string", 0), ("Replicas", "integer", 0), ("Color", "string", 1)]
    assert [row["cells"] for row in table["rows"]] == [["w1", 5, "red"]]

    r = await client.delete(f"{CRDS}/widgets.example.com")
    assert r.status == 200
    for _ in range(200):
        if (await client.get(f"{CRDS}/widgets.example.com")).status == 404:
            break
        await asyncio.sleep(0.01)
    assert (await client.get(WIDGETS)).status == 404
    assert (await client.get("/apis/example.com/v1")).status == 404
    assert client.app[OBJECTS].store.range(b"/registry/example.com/", b"/registry/example.com0").kvs == []


async def test_versions_storage_and_served(client: TestClient[Any, Any]) -> None:
    crd = widget_crd(storage=False)
    crd["spec"]["versions"] += [
        {"name": "v2", "served": True, "storage": True, "schema": {"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "properties": {"color": {"type": "string", "default": "blue"}}}}}}},
        {"name": "v0", "served": False, "storage": False, "schema": {"openAPIV3Schema": {"type": "object"}}},
    ]
    r = await client.post(CRDS, json=crd)
    assert r.status == 201, await r.text()
    assert (await r.json())["status"]["storedVersions"] == ["v2"]
    for _ in range(200):
        if (await client.get("/apis/example.com/v2")).status == 200:
            break
        await asyncio.sleep(0.01)
    r = await client.post(WIDGETS, json=widget("w", replicas=2))
    assert r.status == 201, await r.text()
    assert (await r.json())["apiVersion"] == "example.com/v1"
    stored = client.app[OBJECTS].store.get(b"/registry/example.com/widgets/default/w")
    assert stored is not None and msgspec.json.decode(stored.value)["apiVersion"] == "example.com/v2"
    v2 = await (await client.get("/apis/example.com/v2/namespaces/default/widgets/w")).json()
    assert v2["apiVersion"] == "example.com/v2" and v2["spec"] == {"color": "red"}
    listed = await (await client.get(WIDGETS)).json()
    assert [o["apiVersion"] for o in listed["items"]] == ["example.com/v1"]
    assert (await client.get("/apis/example.com/v0/namespaces/default/widgets")).status == 404
    group = await (await client.get("/apis/example.com")).json()
    assert group["preferredVersion"]["version"] == "v2"
    assert [v["version"] for v in group["versions"]] == ["v2", "v1"]


async def test_names_conflict(client: TestClient[Any, Any]) -> None:
    await established(client, widget_crd())
    other = widget_crd()
    other["metadata"]["name"] = "gizmos.example.com"
    other["spec"]["names"] = {"plural": "gizmos", "kind": "Widget", "shortNames": ["wd"]}
    r = await client.post(CRDS, json=other)
    assert r.status == 201
    for _ in range(200):
        got = await (await client.get(f"{CRDS}/gizmos.example.com")).json()
        conds = {c["type"]: c for c in got["status"].get("conditions", [])}
        if "NamesAccepted" in conds:
            break
        await asyncio.sleep(0.01)
    assert conds["NamesAccepted"]["status"] == "False"
    assert conds["NamesAccepted"]["reason"] == "ListKindConflict"  # the last conflict found wins, as upstream
    assert conds["NamesAccepted"]["message"] == '"WidgetList" is already in use'
    assert conds["Established"]["status"] == "False"
    assert (await client.get("/apis/example.com/v1/namespaces/default/gizmos")).status == 404
    assert (await client.delete(f"{CRDS}/widgets.example.com")).status == 200
    for _ in range(300):
        if (await client.get("/apis/example.com/v1/namespaces/default/gizmos")).status == 200:
            break
        await asyncio.sleep(0.01)
    got = await (await client.get(f"{CRDS}/gizmos.example.com")).json()
    assert {c["type"]: c["status"] for c in got["status"]["conditions"]} == {"NamesAccepted": "True", "Established": "True"}


async def test_served_again_after_restart(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "store")
    try:
        async for c in start(store):
            await established(c, widget_crd())
            assert (await c.post(WIDGETS, json=widget("w1"))).status == 201
    finally:
        store.close()
    store = Store.open(tmp_path / "store")
    try:
        async for c in start(store):
            r = await c.get(f"{WIDGETS}/w1")
            assert r.status == 200 and (await r.json())["spec"] == {"color": "red", "replicas": 1}
    finally:
        store.close()


def test_accepted_names_keep_what_was_accepted() -> None:
    crd = crd_validation.set_defaults(widget_crd())
    crd["status"] = {"acceptedNames": {"plural": "widgets", "kind": "Widget"}}
    names, cond = crd_controller.accepted_names(crd, {"widgets", "wd"}, {"Widget"})
    assert cond == {"status": "False", "reason": "ShortNamesConflict", "message": '"wd" is already in use'}
    assert names == {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"}
