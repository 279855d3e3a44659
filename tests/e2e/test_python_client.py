"""The official `kubernetes` Python client (37.x, pydantic models) against a real `kubecore up` server.

The typed API (CoreV1Api, AppsV1Api) needs no discovery: it calls fixed paths with
`Accept: application/json` and JSON bodies (a dict PATCH body goes out as
application/strategic-merge-patch+json). Watch reads newline-separated JSON events
`{"type":..,"object":..}` and deserializes each object into the list's item model. The
DynamicClient reads GET /version, GET /apis (APIGroupList), then /api/v1 and
/apis/<group>/<version> (APIResourceList) lazily; it never asks for /api and never uses
aggregated discovery.
"""

from __future__ import annotations

import ipaddress
import re
import threading
import urllib.request
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

Unique = Callable[[str], str]


@pytest.fixture(scope="module")
def k8s() -> Any:
    """The `kubernetes` package; missing is a failure, never a skip."""
    try:
        import kubernetes
    except ImportError as e:  # pragma: no cover - environment problem
        pytest.fail(f"the official client is not installed (pip install kubernetes): {e}", pytrace=False)
    return kubernetes


pytestmark = pytest.mark.usefixtures("k8s")


@pytest.fixture(scope="module")
def api_client(k8s: Any, server) -> Iterator[Any]:
    client = k8s.config.new_client_from_config(config_file=str(server.kubeconfig))
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def core(k8s: Any, api_client: Any) -> Any:
    return k8s.client.CoreV1Api(api_client)


@pytest.fixture
def ns(core: Any, k8s: Any, unique: Unique) -> str:
    name = unique("py")
    core.create_namespace(k8s.client.V1Namespace(metadata=k8s.client.V1ObjectMeta(name=name)))
    return name


def _cm(k8s: Any, name: str, data: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> Any:
    return k8s.client.V1ConfigMap(metadata=k8s.client.V1ObjectMeta(name=name, labels=labels), data=data)


def _status_body(exc: Any) -> dict[str, Any]:
    import json

    body = json.loads(exc.body)
    assert list(body)[:4] == ["kind", "apiVersion", "metadata", "status"], body
    assert body["kind"] == "Status" and body["apiVersion"] == "v1" and body["status"] == "Failure", body
    return body


def test_namespace_crud(core: Any, k8s: Any, unique: Unique) -> None:
    name = unique("pyns")
    created = core.create_namespace(k8s.client.V1Namespace(metadata=k8s.client.V1ObjectMeta(name=name)))
    assert created.metadata.name == name and created.metadata.uid
    assert core.read_namespace(name).status.phase == "Active"
    names = {n.metadata.name for n in core.list_namespace().items}
    assert {name, "default", "kube-system", "kube-public", "kube-node-lease"} <= names, names

    with pytest.raises(k8s.client.ApiException) as e:
        core.create_namespace(k8s.client.V1Namespace(metadata=k8s.client.V1ObjectMeta(name=name)))
    assert e.value.status == 409
    body = _status_body(e.value)
    assert body["reason"] == "AlreadyExists" and body["message"] == f'namespaces "{name}" already exists'
    assert body["details"] == {"name": name, "kind": "namespaces"}, body

    core.delete_namespace(name)
    # Upstream keeps a deleted namespace as Terminating until the namespace controller empties it.
    try:
        after = core.read_namespace(name)
    except k8s.client.ApiException as exc:
        assert exc.status == 404
    else:
        assert after.status.phase == "Terminating" and after.metadata.deletion_timestamp is not None


def test_configmap_crud_and_conflict(core: Any, k8s: Any, ns: str) -> None:
    created = core.create_namespaced_config_map(ns, _cm(k8s, "settings", {"a": "1"}))
    rv1 = created.metadata.resource_version
    assert rv1.isdigit() and created.metadata.uid and created.metadata.creation_timestamp is not None
    assert created.metadata.namespace == ns

    got = core.read_namespaced_config_map("settings", ns)
    assert got.data == {"a": "1"} and got.metadata.resource_version == rv1

    lst = core.list_namespaced_config_map(ns)
    assert [i.metadata.name for i in lst.items] == ["settings"]
    assert lst.metadata.resource_version.isdigit() and int(lst.metadata.resource_version) >= int(rv1)

    got.data = {"a": "2"}
    replaced = core.replace_namespaced_config_map("settings", ns, got)
    assert replaced.data == {"a": "2"} and int(replaced.metadata.resource_version) > int(rv1)
    assert replaced.metadata.uid == created.metadata.uid

    stale = _cm(k8s, "settings", {"a": "3"})
    stale.metadata.resource_version = rv1
    with pytest.raises(k8s.client.ApiException) as e:
        core.replace_namespaced_config_map("settings", ns, stale)
    assert e.value.status == 409
    body = _status_body(e.value)
    assert body["reason"] == "Conflict" and body["code"] == 409, body
    assert 'Operation cannot be fulfilled on configmaps "settings"' in body["message"], body
    assert core.read_namespaced_config_map("settings", ns).data == {"a": "2"}

    patched = core.patch_namespaced_config_map("settings", ns, {"data": {"b": "x"}})
    assert patched.data == {"a": "2", "b": "x"}

    with pytest.raises(k8s.client.ApiException) as e:
        core.create_namespaced_config_map(ns, _cm(k8s, "settings"))
    assert e.value.status == 409 and _status_body(e.value)["reason"] == "AlreadyExists"

    core.delete_namespaced_config_map("settings", ns)
    with pytest.raises(k8s.client.ApiException) as e:
        core.read_namespaced_config_map("settings", ns)
    assert e.value.status == 404
    body = _status_body(e.value)
    assert body["reason"] == "NotFound" and body["message"] == 'configmaps "settings" not found', body
    assert body["details"] == {"name": "settings", "kind": "configmaps"}, body
    with pytest.raises(k8s.client.ApiException) as e:
        core.delete_namespaced_config_map("settings", ns)
    assert e.value.status == 404


def test_label_and_field_selectors(core: Any, k8s: Any, ns: str) -> None:
    for name, labels in (("a", {"tier": "web", "env": "prod"}), ("b", {"tier": "web"}), ("c", {"tier": "db"}),
                         ("d", None)):
        core.create_namespaced_config_map(ns, _cm(k8s, name, labels=labels))

    def names(**kw: str) -> list[str]:
        return sorted(i.metadata.name for i in core.list_namespaced_config_map(ns, **kw).items)

    assert names() == ["a", "b", "c", "d"]
    assert names(label_selector="tier=web") == ["a", "b"]
    assert names(label_selector="tier=web,env=prod") == ["a"]
    assert names(label_selector="tier!=web") == ["c", "d"]
    assert names(label_selector="tier in (db,web)") == ["a", "b", "c"]
    assert names(label_selector="tier notin (web)") == ["c", "d"]
    assert names(label_selector="!tier") == ["d"]
    assert names(label_selector="env") == ["a"]
    assert names(field_selector="metadata.name=c") == ["c"]
    assert names(field_selector=f"metadata.namespace={ns},metadata.name!=a") == ["b", "c", "d"]

    with pytest.raises(k8s.client.ApiException) as e:
        core.list_namespaced_config_map(ns, label_selector="tier in (web")
    assert e.value.status == 400
    with pytest.raises(k8s.client.ApiException) as e:
        core.list_namespaced_config_map(ns, field_selector="data.x=1")
    # Kinds without their own field label conversion (configmaps) use upstream's default message.
    assert e.value.status == 400, e.value
    assert _status_body(e.value)["message"] == \
        '"data.x" is not a known field selector: only "metadata.name", "metadata.namespace"'
    with pytest.raises(k8s.client.ApiException) as e:
        core.list_namespaced_pod(ns, field_selector="spec.bogus=1")
    assert e.value.status == 400 and "field label not supported: spec.bogus" in _status_body(e.value)["message"]


def test_list_pagination(core: Any, k8s: Any, ns: str) -> None:
    for i in range(5):
        core.create_namespaced_config_map(ns, _cm(k8s, f"page-{i}"))
    seen: list[str] = []
    token = None
    pages = 0
    while True:
        kw: dict[str, Any] = {"limit": 2}
        if token:
            kw["_continue"] = token
        page = core.list_namespaced_config_map(ns, **kw)
        pages += 1
        assert len(page.items) <= 2
        seen += [i.metadata.name for i in page.items]
        token = page.metadata._continue
        if not token:
            break
    assert pages == 3 and seen == [f"page-{i}" for i in range(5)], (pages, seen)


def test_watch_replays_added_modified_deleted(core: Any, k8s: Any, ns: str) -> None:
    start_rv = core.list_namespaced_config_map(ns).metadata.resource_version
    cm = core.create_namespaced_config_map(ns, _cm(k8s, "watched", {"v": "1"}))
    cm.data = {"v": "2"}
    core.replace_namespaced_config_map("watched", ns, cm)
    core.delete_namespaced_config_map("watched", ns)

    w = k8s.watch.Watch()
    t0 = time.monotonic()
    events = list(w.stream(core.list_namespaced_config_map, ns, resource_version=start_rv, timeout_seconds=2))
    elapsed = time.monotonic() - t0
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"], [(e["type"], e["raw_object"]) for e in events]
    assert all(isinstance(e["object"], k8s.client.V1ConfigMap) for e in events)
    assert [e["object"].data for e in events] == [{"v": "1"}, {"v": "2"}, {"v": "2"}]
    rvs = [int(e["object"].metadata.resource_version) for e in events]
    assert rvs == sorted(rvs) and len(set(rvs)) == 3, rvs
    assert 1.0 <= elapsed < 10.0, f"timeoutSeconds=2 should end the stream after ~2 s, took {elapsed:.1f}s"


def test_watch_live_events_with_selector(core: Any, k8s: Any, ns: str) -> None:
    start_rv = core.list_namespaced_config_map(ns).metadata.resource_version
    got: list[tuple[str, str]] = []
    errors: list[BaseException] = []

    def consume() -> None:
        try:
            w = k8s.watch.Watch()
            for e in w.stream(core.list_namespaced_config_map, ns, resource_version=start_rv,
                              label_selector="watch=me", timeout_seconds=3):
                got.append((e["type"], e["object"].metadata.name))
        except BaseException as exc:  # surfaced in the main thread
            errors.append(exc)

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    time.sleep(0.3)
    core.create_namespaced_config_map(ns, _cm(k8s, "ignored", labels={"watch": "not-me"}))
    core.create_namespaced_config_map(ns, _cm(k8s, "live", {"x": "1"}, labels={"watch": "me"}))
    core.patch_namespaced_config_map("live", ns, {"data": {"x": "2"}})
    core.delete_namespaced_config_map("live", ns)
    t.join(timeout=15)
    assert not t.is_alive(), "watch with timeout_seconds=3 did not end"
    assert not errors, errors
    assert got == [("ADDED", "live"), ("MODIFIED", "live"), ("DELETED", "live")], got


def test_watch_event_objects_are_complete(core: Any, k8s: Any, ns: str) -> None:
    start_rv = core.list_namespaced_config_map(ns).metadata.resource_version
    core.create_namespaced_config_map(ns, _cm(k8s, "full", {"k": "v"}, labels={"l": "1"}))
    events = list(k8s.watch.Watch().stream(core.list_namespaced_config_map, ns, resource_version=start_rv,
                                           timeout_seconds=1, deserialize=False))
    assert len(events) == 1, events
    raw = events[0]["object"]
    assert raw["kind"] == "ConfigMap" and raw["apiVersion"] == "v1", raw
    assert raw["metadata"]["namespace"] == ns and raw["metadata"]["labels"] == {"l": "1"}, raw


def test_pod_create_read_delete(core: Any, k8s: Any, ns: str) -> None:
    c = k8s.client
    pod = c.V1Pod(metadata=c.V1ObjectMeta(name="p"),
                  spec=c.V1PodSpec(containers=[c.V1Container(name="main", image="busybox:1.36")]))
    created = core.create_namespaced_pod(ns, pod)
    assert created.status.phase == "Pending"
    spec = created.spec
    assert spec.restart_policy == "Always" and spec.dns_policy == "ClusterFirst", spec  # upstream defaulting
    assert spec.containers[0].termination_message_path == "/dev/termination-log"
    assert spec.containers[0].image_pull_policy == "IfNotPresent"
    listed = core.list_namespaced_pod(ns, field_selector="status.phase=Pending")
    assert [p.metadata.name for p in listed.items] == ["p"]
    core.delete_namespaced_pod("p", ns)
    with pytest.raises(c.ApiException) as e:
        core.read_namespaced_pod("p", ns)
    assert e.value.status == 404


def test_dynamic_client(k8s: Any, api_client: Any, core: Any, ns: str, tmp_path: Path) -> None:
    from kubernetes.dynamic import DynamicClient

    core.create_namespaced_config_map(ns, _cm(k8s, "dyn", {"d": "1"}, labels={"via": "typed"}))
    # A private discovery cache file: the default one lives in /tmp keyed by host:port only.
    dyn = DynamicClient(api_client, cache_file=str(tmp_path / "discovery.json"))
    cms = dyn.resources.get(api_version="v1", kind="ConfigMap")
    assert cms.namespaced and cms.name == "configmaps"
    one = cms.get(name="dyn", namespace=ns)
    assert one.data.d == "1" and one.metadata.labels.via == "typed"
    listed = cms.get(namespace=ns, label_selector="via=typed")
    assert [i.metadata.name for i in listed.items] == ["dyn"]

    made = cms.create(body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dyn2"},
                            "data": {"e": "2"}}, namespace=ns)
    assert made.metadata.name == "dyn2"
    cms.delete(name="dyn2", namespace=ns)

    deployments = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    assert deployments.name == "deployments" and deployments.namespaced
    assert dyn.resources.get(api_version="v1", kind="Namespace").namespaced is False
    assert dyn.version["kubernetes"]["major"] == "1"


def test_service_addresses_and_node_ports(core: Any, k8s: Any, ns: str) -> None:
    c = k8s.client
    kube = core.read_namespaced_service("kubernetes", "default")
    assert kube.spec.cluster_ip == "10.96.0.1" and kube.spec.ports[0].port == 443

    def service(name: str, **spec: Any) -> Any:
        return c.V1Service(metadata=c.V1ObjectMeta(name=name),
                           spec=c.V1ServiceSpec(ports=[c.V1ServicePort(port=80)], **spec))

    a = core.create_namespaced_service(ns, service("a", type="NodePort"))
    assert ipaddress.ip_address(a.spec.cluster_ip) in ipaddress.ip_network("10.96.0.0/12")
    assert 30000 <= a.spec.ports[0].node_port <= 32767 and a.spec.ports[0].target_port == 80
    with pytest.raises(c.ApiException) as e:
        core.create_namespaced_service(ns, service("b", cluster_ip=a.spec.cluster_ip))
    assert e.value.status == 422 and "provided IP is already allocated" in _status_body(e.value)["message"]
    core.delete_namespaced_service("a", ns)
    again = core.create_namespaced_service(ns, service("b", cluster_ip=a.spec.cluster_ip))
    assert again.spec.cluster_ip == a.spec.cluster_ip, "a deleted service's address is free again"


def test_pod_admission_plugins(core: Any, k8s: Any, ns: str) -> None:
    c = k8s.client
    core.create_namespaced_limit_range(ns, c.V1LimitRange(
        metadata=c.V1ObjectMeta(name="defaults"),
        spec=c.V1LimitRangeSpec(limits=[c.V1LimitRangeItem(
            type="Container", default={"cpu": "500m"}, default_request={"cpu": "100m", "memory": "64Mi"})]),
    ))

    def pod(name: str, **spec: Any) -> Any:
        return c.V1Pod(metadata=c.V1ObjectMeta(name=name),
                       spec=c.V1PodSpec(containers=[c.V1Container(name="main", image="busybox:1.36")], **spec))

    p = core.create_namespaced_pod(ns, pod("plain"))
    assert p.spec.service_account_name == "default"  # ServiceAccount
    assert p.spec.priority == 0 and p.spec.preemption_policy == "PreemptLowerPriority"  # Priority
    tol = {(t.key, t.effect, t.toleration_seconds) for t in p.spec.tolerations}  # DefaultTolerationSeconds
    assert tol == {("node.kubernetes.io/not-ready", "NoExecute", 300), ("node.kubernetes.io/unreachable", "NoExecute", 300)}
    res = p.spec.containers[0].resources  # LimitRanger
    assert res.limits == {"cpu": "500m"} and res.requests == {"cpu": "100m", "memory": "64Mi"}

    crit = core.create_namespaced_pod(ns, pod("crit", priority_class_name="system-cluster-critical"))
    assert crit.spec.priority == 2000000000
    with pytest.raises(c.ApiException) as e:
        core.create_namespaced_pod(ns, pod("nope", priority_class_name="no-such-class"))
    assert e.value.status == 403
    assert _status_body(e.value)["message"] == 'pods "nope" is forbidden: no PriorityClass with name no-such-class was found'


def test_metrics_count_requests(core: Any, api_client: Any, ns: str) -> None:
    core.list_namespaced_config_map(ns)
    with urllib.request.urlopen(api_client.configuration.host + "/metrics", timeout=10) as r:
        body = r.read().decode()
    line = next(l for l in body.splitlines() if l.startswith("apiserver_request_total{") and 'resource="configmaps"' in l
                and 'verb="LIST"' in l and 'code="200"' in l)
    assert int(line.rsplit(" ", 1)[1]) >= 1
    assert 'apiserver_request_duration_seconds_bucket{' in body and 'le="+Inf"' in body
    assert re.search(r"^kubecore_store_revision \d+$", body, re.M)


def _watches_in_flight(host: str) -> int:
    with urllib.request.urlopen(host + "/metrics", timeout=10) as r:
        body = r.read().decode()
    return sum(int(l.rsplit(" ", 1)[1]) for l in body.splitlines()
               if l.startswith("apiserver_longrunning_requests{") and 'resource="configmaps"' in l)


def test_watch_ends_when_the_client_disconnects(api_client: Any, ns: str) -> None:
    import http.client
    from urllib.parse import urlparse

    host = api_client.configuration.host
    u = urlparse(host)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    conn.request("GET", f"/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion=1&timeoutSeconds=600")
    resp = conn.getresponse()
    assert resp.status == 200
    deadline = time.monotonic() + 5
    while _watches_in_flight(host) < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _watches_in_flight(host) >= 1
    conn.close()  # an idle watch: no event will ever be written to it
    deadline = time.monotonic() + 10
    while _watches_in_flight(host) > 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _watches_in_flight(host) == 0, "the server let go of the disconnected watch"
