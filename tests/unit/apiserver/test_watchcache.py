"""The watch cache: the native API (LIST with selectors and pages, WATCH replay and transitions,
slow watchers, consistent reads), its field specs against fieldsets, and LIST/WATCH through the
API server served from it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from aiohttp.test_utils import TestClient, TestServer

from kubecore._native import NativeResourceCache, NativeWatchCache
from kubecore.api.registry import ResourceType, builtin_registry
from kubecore.api.selectors import object_fields
from kubecore.apiserver.app import OBJECTS, build_app
from kubecore.apiserver.cache import FIELD_SPECS, field_specs
from kubecore.apiserver.storage import _encode_continue, encode
from kubecore.store import Store

Obj = dict[str, Any]
HEAD = b'{"kind":"PodList","apiVersion":"v1","metadata":'


def _registry() -> Any:
    return builtin_registry()


def _rt(group: str, version: str, resource: str) -> ResourceType:
    rt = _registry().get(group, version, resource)
    assert rt is not None
    return rt


PODS = "/registry/pods/"


def pod(ns: str, name: str, *, app: str = "web", node: str = "", phase: str = "") -> Obj:
    return {"metadata": {"name": name, "namespace": ns, "labels": {"app": app}},
            "spec": {"nodeName": node}, "status": {"phase": phase}}


def put(store: Store, obj: Obj) -> int:
    m = obj["metadata"]
    return store.put(f"{PODS}{m['namespace']}/{m['name']}".encode(), encode(obj)).revision


@pytest.fixture
def store() -> Iterator[Store]:
    s = Store.memory()
    yield s
    s.close()


@pytest.fixture
def caches(store: Store) -> Iterator[NativeWatchCache]:
    c = NativeWatchCache(store._native, ring_capacity=16, watcher_buffer=8)
    yield c
    c.close()


def pods_cache(caches: NativeWatchCache) -> NativeResourceCache:
    return caches.resource(PODS.encode(), kind="Pod", api_version="v1", fields=field_specs(_rt("", "v1", "pods")))


def names(body: bytes) -> list[str]:
    return [o["metadata"]["name"] for o in msgspec.json.decode(body)["items"]]


def frames(data: bytes | None) -> list[tuple[str, str, str]]:
    assert data is not None
    out = []
    for line in data.splitlines():
        ev = msgspec.json.decode(line)
        out.append((ev["type"], ev["object"]["metadata"].get("name", ""), ev["object"]["metadata"]["resourceVersion"]))
    return out


# ---- the native API ------------------------------------------------------------------------

def test_list_with_label_and_field_selectors(store: Store, caches: NativeWatchCache) -> None:
    put(store, pod("a", "p1", app="web", node="n1", phase="Running"))
    put(store, pod("a", "p2", app="db", node="n2"))
    put(store, pod("b", "p3", app="web", node="n2"))
    rc = pods_cache(caches)
    table: list[tuple[bytes, list[Any], list[Any], list[str]]] = [
        (b"/registry/pods/", [], [], ["p1", "p2", "p3"]),
        (b"/registry/pods/a/", [], [], ["p1", "p2"]),
        (b"/registry/pods/", [("app", "in", ["web"])], [], ["p1", "p3"]),
        (b"/registry/pods/", [("app", "!=", ["web"])], [], ["p2"]),
        (b"/registry/pods/", [], [("spec.nodeName", "=", "n2")], ["p2", "p3"]),
        (b"/registry/pods/", [], [("status.phase", "!=", "Running")], ["p2", "p3"]),
        (b"/registry/pods/", [("tier", "!", [])], [("metadata.namespace", "=", "b")], ["p3"]),
    ]
    for prefix, labels, fields, want in table:
        got = rc.list(prefix, head=HEAD, labels=labels, fields=fields)
        assert got is not None
        assert names(got[0]) == want, (prefix, labels, fields)
        assert got[1] == store.revision


def test_pages_share_one_snapshot_and_the_store_paths_tokens(store: Store, caches: NativeWatchCache) -> None:
    for i in range(5):
        put(store, pod("a", f"p{i}"))
    rc = pods_cache(caches)
    rev = rc.sync()
    got = rc.list(b"/registry/pods/", head=HEAD, limit=2)
    assert got is not None
    meta = msgspec.json.decode(got[0])["metadata"]
    assert meta == {"resourceVersion": str(rev), "continue": _encode_continue(rev, b"/registry/pods/a/p1\0", b"/registry/pods/"),
                    "remainingItemCount": 3}
    put(store, pod("a", "p2", app="changed"))  # after the first page: not seen by the next ones
    rc.sync()
    page2 = rc.list(b"/registry/pods/", head=HEAD, limit=10, continue_revision=rev, continue_key=b"/registry/pods/a/p1\0")
    assert page2 is not None
    items = msgspec.json.decode(page2[0])["items"]
    assert [o["metadata"]["name"] for o in items] == ["p2", "p3", "p4"]
    assert items[0]["metadata"]["labels"] == {"app": "web"}
    assert rc.list(b"/registry/pods/", head=HEAD, limit=1, continue_revision=rev - 1, continue_key=b"x") is None


def test_watch_replays_then_transitions(store: Store, caches: NativeWatchCache) -> None:
    start = put(store, pod("a", "p", app="web"))
    rc = pods_cache(caches)
    put(store, pod("a", "p", app="db"))  # leaves the selection
    put(store, pod("a", "p", app="web"))  # comes back
    rc.sync()
    w = rc.watch(b"/registry/pods/", labels=[("app", "=", ["web"])], start_revision=start)
    assert w is not None
    put(store, pod("a", "p", app="web", node="n1"))
    store.delete(b"/registry/pods/a/p")
    rc.sync()
    got = frames(w.poll())
    assert [(t, n) for t, n, _ in got] == [("DELETED", "p"), ("ADDED", "p"), ("MODIFIED", "p"), ("DELETED", "p")]
    assert [int(rv) for _, _, rv in got] == list(range(start + 1, start + 5))
    assert w.poll() == b""
    assert w.progress() == rc.revision


def test_watch_older_than_the_ring_is_refused(store: Store, caches: NativeWatchCache) -> None:
    first = put(store, pod("a", "p"))
    rc = pods_cache(caches)
    for i in range(20):
        put(store, pod("a", "p", app=str(i)))
    rc.sync()
    assert rc.oldest_revision > first
    assert rc.watch(b"/registry/pods/", start_revision=first) is None
    assert rc.watch(b"/registry/pods/", start_revision=rc.oldest_revision) is not None


def test_slow_watcher_is_terminated(store: Store, caches: NativeWatchCache) -> None:
    rc = pods_cache(caches)
    w = rc.watch(b"/registry/pods/", start_revision=rc.sync())
    assert w is not None
    for i in range(9):  # the buffer holds 8
        put(store, pod("a", f"p{i}"))
    rc.sync()
    assert w.poll() is None
    assert w.end_reason == "too_slow"
    assert w.id in caches.drain()


def test_consistent_read_reaches_the_store_revision(store: Store, caches: NativeWatchCache) -> None:
    put(store, pod("a", "p"))
    rc = pods_cache(caches)
    last = store.put(b"/registry/configmaps/a/c", b"{}").revision  # another resource moves the revision
    assert rc.sync() == last == rc.revision


def test_initial_events_then_bookmark(store: Store, caches: NativeWatchCache) -> None:
    put(store, pod("a", "p1"))
    put(store, pod("a", "p2", app="db"))
    rc = pods_cache(caches)
    rev = rc.sync()
    w = rc.watch(b"/registry/pods/", labels=[("app", "=", ["web"])], initial=True, initial_end_bookmark=True)
    assert w is not None
    data = w.poll()
    assert data is not None
    lines = [msgspec.json.decode(x) for x in data.splitlines()]
    assert [x["type"] for x in lines] == ["ADDED", "BOOKMARK"]
    assert lines[1]["object"] == {"kind": "Pod", "apiVersion": "v1", "metadata": {
        "resourceVersion": str(rev), "annotations": {"k8s.io/initial-events-end": "true"}}}


SAMPLES: list[Obj] = [
    {},
    {"metadata": {"name": "x", "namespace": "y"}},
    {"spec": {"nodeName": "n", "restartPolicy": "Always", "hostNetwork": True, "unschedulable": True, "clusterIP": "1.2.3.4",
              "type": "NodePort"},
     "status": {"phase": "Running", "podIP": "10.0.0.1", "replicas": 3, "succeeded": 2, "nominatedNodeName": "m"},
     "type": "Opaque", "reason": "Started", "reportingComponent": "k", "reportingController": "c",
     "involvedObject": {"kind": "Pod", "name": "p", "uid": "u"}, "regarding": {"kind": "Pod", "fieldPath": "f"},
     "source": {"component": "kubelet"}, "deprecatedSource": {"component": "d"}},
    {"status": {"podIPs": [{"ip": "10.0.0.2"}], "podIP": "10.0.0.1", "replicas": "3"}, "spec": {"hostNetwork": "true"}},
    {"status": {"podIPs": [], "podIP": "10.0.0.1", "replicas": 2.0, "succeeded": True}},
]


def _kinds() -> list[ResourceType]:
    reg = _registry()
    out = [rt for rt in reg.all() if (rt.group, rt.kind) in FIELD_SPECS]
    assert {(rt.group, rt.kind) for rt in out} == set(FIELD_SPECS), "every spec'd kind is served"
    return out


@pytest.mark.parametrize("rt", _kinds(), ids=lambda rt: f"{rt.group}/{rt.kind}")
def test_field_specs_extract_what_fieldsets_does(store: Store, caches: NativeWatchCache, rt: ResourceType) -> None:
    """For every sample object and every field, Rust's value selects exactly like Python's."""
    prefix = f"/t/{rt.group}/{rt.kind}/".encode()
    rc = caches.resource(prefix, kind=rt.kind, api_version=rt.api_version, fields=field_specs(rt))
    for i, obj in enumerate(SAMPLES):
        store.put(prefix + str(i).encode(), encode(obj))
    rc.sync()
    assert set(object_fields(rt, {})) <= {label for label, _, _ in field_specs(rt)}
    for i, obj in enumerate(SAMPLES):
        for label, value in object_fields(rt, obj).items():
            got = rc.list(prefix + str(i).encode(), head=HEAD, fields=[(label, "=", value)])
            assert got is not None and len(names_or_empty(got[0])) == 1, (label, value, obj)


def names_or_empty(body: bytes) -> list[Any]:
    items: list[Any] = msgspec.json.decode(body)["items"]
    return items


# ---- through the API server ------------------------------------------------------------------

@pytest.fixture
async def client(store: Store) -> Any:
    app = build_app(store)
    async with TestClient(TestServer(app)) as c:
        r = await c.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
        assert r.status in (201, 409), await r.text()
        yield c
    app[OBJECTS].cache.close()


async def _create(client: Any, ns: str, name: str, **kw: str) -> Obj:
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": kw.get("app", "web")}},
            "spec": {"containers": [{"name": "c", "image": "i"}], "nodeName": kw.get("node", "")}}
    r = await client.post(f"/api/v1/namespaces/{ns}/pods", json=body)
    assert r.status == 201, await r.text()
    return dict(await r.json())


async def test_list_from_the_cache_matches_the_store_path(client: Any) -> None:
    for i in range(3):
        await _create(client, "default", f"p{i}", app="web" if i else "db")
    objects = client.app[OBJECTS]
    r = await client.get("/api/v1/pods?labelSelector=app%3Dweb&limit=1")
    body = await r.json()
    assert [o["metadata"]["name"] for o in body["items"]] == ["p1"]
    assert len(objects.cache._caches) == 1, "served from the pods cache"
    r2 = await client.get(f"/api/v1/pods?labelSelector=app%3Dweb&limit=1&continue={body['metadata']['continue']}")
    assert [o["metadata"]["name"] for o in (await r2.json())["items"]] == ["p2"]
    full = await (await client.get("/api/v1/namespaces/default/pods")).read()
    store_path = objects.list_raw(_rt("", "v1", "pods"), "default")
    assert msgspec.json.decode(full)["items"] == [msgspec.json.decode(b) for b in store_path.items]


async def test_watch_through_the_server_sees_selector_transitions(client: Any) -> None:
    created = await _create(client, "default", "w", app="web")
    rv = created["metadata"]["resourceVersion"]
    r = await client.get(f"/api/v1/namespaces/default/pods?watch=1&labelSelector=app%3Dweb&resourceVersion={rv}&timeoutSeconds=5")
    obj = dict(created)
    obj["metadata"]["labels"] = {"app": "db"}
    put = await client.put("/api/v1/namespaces/default/pods/w", json=obj)
    assert put.status == 200, await put.text()
    line = await asyncio.wait_for(r.content.readline(), 5)
    ev = msgspec.json.decode(line)
    assert ev["type"] == "DELETED"
    assert ev["object"]["metadata"]["labels"] == {"app": "web"}
    assert ev["object"]["metadata"]["resourceVersion"] == (await put.json())["metadata"]["resourceVersion"]
    r.close()
