"""metrics.k8s.io/v1beta1: the conversion of scraped usage into NodeMetrics / PodMetrics
(metrics-server's quantities and durations), the scraper's rates and cache, and the API served
by build_app over a scripted kubelet (no HTTP to a kubelet: the scraper's fetch is replaced)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from kubecore.apiserver.app import METRICS_API, OBJECTS, build_app
from kubecore.apiserver.metricsapi import go_duration, node_metrics, pod_metrics, usage_json
from kubecore.apiserver.metricsscraper import (
    Endpoint, Sample, Scrape, ScrapeError, Scraper, Usage, node_usage, parse, usage)
from kubecore.store import Store

Obj = dict[str, Any]
MI = 1 << 20
T0 = 1_700_000_000.0


class StepClock:
    """now() stands still; sleep() moves it forward at once."""

    def __init__(self, t: float = T0) -> None:
        self.t = t

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.t += seconds


class Kubelets:
    """Scripted /metrics/resource answers: every container burns `cores`, time is the clock's."""

    def __init__(self, clock: StepClock) -> None:
        self.clock = clock
        self.calls: list[str] = []
        self.containers: dict[str, list[tuple[str, str, str, float, int]]] = {}
        self.node_cores: dict[str, float] = {}
        self.down: set[str] = set()

    async def fetch(self, node: str, endpoint: Endpoint) -> str:
        self.calls.append(node)
        if node in self.down:
            raise ScrapeError("connection refused")
        t = self.clock.now()
        stamp = int(t * 1000)
        lines = [f"node_cpu_usage_seconds_total {self.node_cores.get(node, 1.0) * (t - T0 + 100)} {stamp}",
                 f"node_memory_working_set_bytes {512 * MI} {stamp}"]
        for ns, pod, name, cores, mem in self.containers.get(node, []):
            labels = f'container="{name}",namespace="{ns}",pod="{pod}"'
            lines.append(f"container_cpu_usage_seconds_total{{{labels}}} {cores * (t - T0 + 100)} {stamp}")
            lines.append(f"container_memory_working_set_bytes{{{labels}}} {mem} {stamp}")
        return "\n".join(lines) + "\n"


# -- conversion ----------------------------------------------------------------------------------

def test_usage_quantities_are_printed_as_metrics_server_prints_them() -> None:
    def q(nano: int, mem: int) -> Obj:
        return usage_json(Usage(timestamp=T0, window=1.0, nano_cores=nano, memory=mem))
    assert q(1_234_567, 64 * MI) == {"cpu": "1234567n", "memory": "64Mi"}
    assert q(250_000_000, 123_456 * 1024) == {"cpu": "250m", "memory": "123456Ki"}
    assert q(2_000_000_000, 1000) == {"cpu": "2", "memory": "1k"}
    assert q(1_500_000, 4097) == {"cpu": "1500u", "memory": "4097"}
    assert q(0, 0) == {"cpu": "0", "memory": "0"}


def test_windows_are_go_durations() -> None:
    cases = {1.0: "1s", 15.02: "15.02s", 0.5: "500ms", 65.0: "1m5s", 3600.0: "1h0m0s", 0.0: "0s", 61.25: "1m1.25s"}
    assert {s: go_duration(s) for s in cases} == cases


def test_node_and_pod_metrics_objects() -> None:
    u = Usage(timestamp=T0 + 0.7, window=15.02, nano_cores=250_000_000, memory=64 * MI)
    node = {"metadata": {"name": "n1", "labels": {"zone": "a"}, "uid": "x"}, "spec": {}}
    assert node_metrics(node, u, now=T0 + 5) == {
        "kind": "NodeMetrics", "apiVersion": "metrics.k8s.io/v1beta1",
        "metadata": {"name": "n1", "creationTimestamp": "2023-11-14T22:13:25Z", "labels": {"zone": "a"}},
        "timestamp": "2023-11-14T22:13:20Z", "window": "15.02s", "usage": {"cpu": "250m", "memory": "64Mi"}}
    older = Usage(timestamp=T0, window=10.0, nano_cores=1_000_000, memory=MI)
    pod = {"metadata": {"name": "web", "namespace": "ns1"}}
    got = pod_metrics(pod, {"side": older, "app": u}, now=T0)
    assert got["metadata"] == {"name": "web", "namespace": "ns1", "creationTimestamp": "2023-11-14T22:13:20Z"}
    assert (got["kind"], got["window"]) == ("PodMetrics", "15.02s")
    assert got["containers"] == [{"name": "app", "usage": {"cpu": "250m", "memory": "64Mi"}},
                                 {"name": "side", "usage": {"cpu": "1m", "memory": "1Mi"}}]


# -- scraping ------------------------------------------------------------------------------------

def test_parse_reads_labels_escapes_and_timestamps() -> None:
    text = ('# HELP x y\nnode_cpu_usage_seconds_total 12.5 1700000000500\nnode_memory_working_set_bytes 1e+06\n'
            'container_cpu_usage_seconds_total{container="a",namespace="n",pod="p\\"q"} 1 1700000000000\n'
            'container_memory_working_set_bytes{container="a",namespace="n",pod="p\\"q"} 2048 1700000000000\n'
            'container_cpu_usage_seconds_total{container="only-cpu",namespace="n",pod="p"} 1 1700000000000\n'
            'resource_scrape_error 0\n')
    s = parse(text, at=5.0)
    assert s.node == Sample(time=1_700_000_000.5, cpu_seconds=12.5, memory=1_000_000)
    assert s.containers == {("n", 'p"q', "a"): Sample(time=1_700_000_000.0, cpu_seconds=1.0, memory=2048)}
    with pytest.raises(ScrapeError):
        parse("this is not prometheus\n", at=0.0)


def test_rates_need_time_between_samples_and_a_counter_that_did_not_reset() -> None:
    a, b = Sample(time=10.0, cpu_seconds=1.0, memory=5), Sample(time=14.0, cpu_seconds=2.0, memory=7)
    assert usage(a, b) == Usage(timestamp=14.0, window=4.0, nano_cores=250_000_000, memory=7)
    assert usage(b, a) is None
    assert usage(a, Sample(time=14.0, cpu_seconds=0.5, memory=1)) is None  # restarted container


def test_a_pod_is_reported_only_when_every_container_has_a_rate() -> None:
    def scrape(t: float, containers: dict[tuple[str, str, str], float]) -> Scrape:
        return Scrape(at=t, node=Sample(t, t, 1),
                      containers={k: Sample(t, v, 1) for k, v in containers.items()})
    prev = scrape(10.0, {("n", "old", "a"): 1.0, ("n", "mixed", "a"): 1.0})
    last = scrape(12.0, {("n", "old", "a"): 2.0, ("n", "mixed", "a"): 2.0, ("n", "mixed", "new"): 0.1,
                         ("n", "fresh", "a"): 0.1})
    got = node_usage(prev, last)
    assert set(got.containers) == {("n", "old")}
    assert got.containers[("n", "old")]["a"].nano_cores == 500_000_000
    assert got.node is not None and got.node.nano_cores == 1_000_000_000


async def test_the_scraper_scrapes_twice_first_then_caches_for_its_ttl() -> None:
    clock = StepClock()
    kubelets = Kubelets(clock)
    kubelets.containers["n1"] = [("ns", "web", "app", 0.25, 64 * MI)]
    scraper = Scraper(kubelets.fetch, clock=clock, ttl=5.0, first_gap=1.0)
    first = await scraper.node_usage("n1", ("10.0.0.1", 10250))
    assert kubelets.calls == ["n1", "n1"]  # two samples one first_gap apart
    assert first is not None and first.containers[("ns", "web")]["app"].nano_cores == 250_000_000
    assert first.containers[("ns", "web")]["app"].window == 1.0
    clock.t += 2
    again = await scraper.node_usage("n1", ("10.0.0.1", 10250))
    assert again == first and len(kubelets.calls) == 2  # within the ttl: no kubelet call
    clock.t += 10
    later = await scraper.node_usage("n1", ("10.0.0.1", 10250))
    assert len(kubelets.calls) == 3 and later is not None and later.node is not None
    assert later.node.window == 12.0 and later.node.nano_cores == 1_000_000_000
    kubelets.down.add("n1")
    clock.t += 10
    assert await scraper.node_usage("n1", ("10.0.0.1", 10250)) is None


# -- the API -------------------------------------------------------------------------------------

@pytest.fixture
async def api() -> AsyncIterator[tuple[TestClient[Any, Any], Kubelets]]:
    store = Store.memory()
    app = build_app(store)
    clock = StepClock()
    kubelets = Kubelets(clock)
    metrics_api = app[METRICS_API]
    metrics_api.clock = clock
    metrics_api.scraper = Scraper(kubelets.fetch, clock=clock)
    async with TestClient(TestServer(app)) as c:
        yield c, kubelets
    app[OBJECTS].cache.close()
    store.close()


async def _node(c: TestClient[Any, Any], name: str, labels: dict[str, str]) -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}
    r = await c.post("/api/v1/nodes", json=node)
    assert r.status == 201, await r.text()
    got = await r.json()
    got["status"] = {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                     "daemonEndpoints": {"kubeletEndpoint": {"Port": 1}}}
    r = await c.put(f"/api/v1/nodes/{name}/status", json=got)
    assert r.status == 200, await r.text()


async def _pod(c: TestClient[Any, Any], ns: str, name: str, node: str, *, phase: str = "Running",
               labels: dict[str, str] | None = None) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
           "spec": {"nodeName": node, "containers": [{"name": "app", "image": "x"}]}}
    r = await c.post(f"/api/v1/namespaces/{ns}/pods", json=pod)
    assert r.status == 201, await r.text()
    got = await r.json()
    got["status"] = {"phase": phase}
    r = await c.put(f"/api/v1/namespaces/{ns}/pods/{name}/status", json=got)
    assert r.status == 200, await r.text()


async def _cluster(c: TestClient[Any, Any], kubelets: Kubelets) -> None:
    r = await c.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}})
    assert r.status == 201, await r.text()
    await _node(c, "n1", {"pool": "a"})
    await _node(c, "n2", {"pool": "b"})
    await _node(c, "silent", {"pool": "a"})
    kubelets.down.add("silent")
    await _pod(c, "ns", "web", "n1", labels={"app": "web"})
    await _pod(c, "ns", "db", "n2", labels={"app": "db"})
    await _pod(c, "ns", "pending", "n2", phase="Pending")
    kubelets.containers["n1"] = [("ns", "web", "app", 0.25, 64 * MI)]
    kubelets.containers["n2"] = [("ns", "db", "app", 0.5, 128 * MI), ("ns", "pending", "app", 0.1, MI)]
    kubelets.node_cores["n2"] = 2.0


async def test_node_metrics_list_get_selectors_and_not_found(api: tuple[TestClient[Any, Any], Kubelets]) -> None:
    c, kubelets = api
    await _cluster(c, kubelets)
    body = await (await c.get("/apis/metrics.k8s.io/v1beta1/nodes")).json()
    assert (body["kind"], body["apiVersion"]) == ("NodeMetricsList", "metrics.k8s.io/v1beta1")
    assert {i["metadata"]["name"]: i["usage"] for i in body["items"]} == {
        "n1": {"cpu": "1", "memory": "512Mi"}, "n2": {"cpu": "2", "memory": "512Mi"}}  # silent has none
    body = await (await c.get("/apis/metrics.k8s.io/v1beta1/nodes", params={"labelSelector": "pool=a"})).json()
    assert [i["metadata"]["name"] for i in body["items"]] == ["n1"]
    assert body["items"][0]["metadata"]["labels"] == {"pool": "a"}
    got = await (await c.get("/apis/metrics.k8s.io/v1beta1/nodes/n2")).json()
    assert (got["kind"], got["usage"]["cpu"]) == ("NodeMetrics", "2")
    for name, message in (("silent", 'nodemetrics.metrics.k8s.io "silent" not found'), ("nope", 'nodes "nope" not found')):
        r = await c.get(f"/apis/metrics.k8s.io/v1beta1/nodes/{name}")
        status = await r.json()
        assert (r.status, status["reason"], status["message"]) == (404, "NotFound", message)
    r = await c.delete("/apis/metrics.k8s.io/v1beta1/nodes/n1")
    assert r.status == 405


async def test_pod_metrics_list_get_and_not_found(api: tuple[TestClient[Any, Any], Kubelets]) -> None:
    c, kubelets = api
    await _cluster(c, kubelets)
    body = await (await c.get("/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods")).json()
    assert body["kind"] == "PodMetricsList"
    assert {i["metadata"]["name"]: i["containers"] for i in body["items"]} == {
        "db": [{"name": "app", "usage": {"cpu": "500m", "memory": "128Mi"}}],
        "web": [{"name": "app", "usage": {"cpu": "250m", "memory": "64Mi"}}]}  # not the Pending pod
    assert [i["metadata"]["name"] for i in body["items"]] == ["db", "web"]
    every = await (await c.get("/apis/metrics.k8s.io/v1beta1/pods", params={"labelSelector": "app=web"})).json()
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in every["items"]] == [("ns", "web")]
    got = await (await c.get("/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods/web")).json()
    assert got["kind"] == "PodMetrics" and got["metadata"]["labels"] == {"app": "web"}
    for name, message in (("pending", 'podmetrics.metrics.k8s.io "ns/pending" not found'),
                          ("nope", 'pods "nope" not found')):
        r = await c.get(f"/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods/{name}")
        assert (r.status, (await r.json())["message"]) == (404, message)


async def test_discovery_lists_the_group(api: tuple[TestClient[Any, Any], Kubelets]) -> None:
    c, _ = api
    groups = await (await c.get("/apis")).json()
    assert {"groupVersion": "metrics.k8s.io/v1beta1", "version": "v1beta1"} in \
        next(g for g in groups["groups"] if g["name"] == "metrics.k8s.io")["versions"]
    resources = await (await c.get("/apis/metrics.k8s.io/v1beta1")).json()
    assert {(r["name"], r["kind"], r["namespaced"], tuple(r["verbs"])) for r in resources["resources"]} == {
        ("nodes", "NodeMetrics", False, ("get", "list")), ("pods", "PodMetrics", True, ("get", "list"))}
    v2 = await (await c.get("/apis", headers={
        "Accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"})).json()
    group = next(g for g in v2["items"] if g["metadata"].get("name") == "metrics.k8s.io")
    assert sorted(r["resource"] for r in group["versions"][0]["resources"]) == ["nodes", "pods"]
    r = await c.get("/openapi/v3/apis/metrics.k8s.io/v1beta1")
    assert r.status == 200
    doc = await r.json()
    assert "/apis/metrics.k8s.io/v1beta1/nodes" in doc["paths"]
