"""The read fast path answers exactly the GETs it may, with the bytes the chain would send."""

from __future__ import annotations

from collections.abc import Iterator

import msgspec
import pytest

from kubecore.api.registry import builtin_registry
from kubecore.apiserver.fastpath import FastReads
from kubecore.apiserver.metrics import Metrics
from kubecore.apiserver.storage import encode
from kubecore.store import Store

REG = builtin_registry()
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": []}}
NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}
DEPLOY = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ns"}}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    s = Store.open(tmp_path_factory.mktemp("fast") / "s", fsync=False)
    s.put(b"/registry/pods/ns/p", encode(POD))
    s.put(b"/registry/nodes/n1", encode(NODE))
    s.put(b"/registry/apps/deployments/ns/d", encode(DEPLOY))
    yield s
    s.close()


@pytest.fixture
def fast(store: Store) -> FastReads:
    return FastReads(REG, store, Metrics())


def get(path: str, *headers: str) -> bytes:
    return ("\r\n".join([f"GET {path} HTTP/1.1", "Host: x", *headers]) + "\r\n\r\n").encode()


def body(resp: bytes) -> dict:
    head, _, payload = resp.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
    assert f"Content-Length: {len(payload)}".encode() in head
    return msgspec.json.decode(payload)


@pytest.mark.parametrize(("path", "name"), [
    ("/api/v1/namespaces/ns/pods/p", "p"),
    ("/api/v1/nodes/n1", "n1"),
    ("/apis/apps/v1/namespaces/ns/deployments/d", "d"),
])
def test_serves_one_object_with_its_resource_version(fast: FastReads, path: str, name: str) -> None:
    resp = fast.serve(get(path, "Accept: application/json, */*"))
    assert resp is not None
    obj = body(resp)
    assert obj["metadata"]["name"] == name and int(obj["metadata"]["resourceVersion"]) > 0
    assert fast.served == 1


@pytest.mark.parametrize("request_bytes", [
    get("/api/v1/namespaces/ns/pods/p?resourceVersion=0"),
    get("/api/v1/namespaces/ns/pods/missing"),
    get("/api/v1/namespaces/ns/pods"),  # a list
    get("/api/v1/pods/p"),  # namespaced kind without a namespace
    get("/api/v1/namespaces/ns/nodes/n1"),  # cluster-scoped kind with one
    get("/api/v1/namespaces/ns/pods/p/status"),
    get("/api/v1/namespaces/ns/pods/p", "Accept: application/json;as=Table;v=v1;g=meta.k8s.io"),
    get("/api/v1/namespaces/ns/pods/p", "Accept: application/yaml"),
    get("/api/v1/namespaces/ns/pods/p", "Connection: close"),
    get("/api/v1/namespaces/ns/pods/p", "Content-Length: 0"),
    get("/api/v1/namespaces/ns/pods/p") + get("/api/v1/namespaces/ns/pods/p"),  # pipelined
    get("/api/v1/namespaces/ns/pods/p").replace(b"HTTP/1.1", b"HTTP/1.0"),
    get("/api/v1/namespaces/ns/pods/p%2Fx"),
    get("/apis/example.com/v1/namespaces/ns/widgets/w"),
    get("/version"),
    get("/api"),  # shorter than any object path (the official client's first request)
    get("/apis"),
    get("/"),
])
def test_everything_else_goes_to_the_chain(fast: FastReads, request_bytes: bytes) -> None:
    assert fast.serve(request_bytes) is None and fast.served == 0


def test_counted_in_metrics_and_switchable(fast: FastReads) -> None:
    fast.serve(get("/api/v1/namespaces/ns/pods/p"))
    assert fast.metrics.requests[(("GET", "", "v1", "pods", "", "resource"), 200)] == 1
    fast.enabled = False
    assert fast.serve(get("/api/v1/namespaces/ns/pods/p")) is None
