"""The resource metrics API, `metrics.k8s.io/v1beta1`, served by the API server itself from the
kubelets (what metrics-server serves through API aggregation upstream): `kubectl top`, HPAs
on cpu/memory and `kubectl get --raw /apis/metrics.k8s.io/v1beta1/...` work without installing
anything.

| path | answer |
| --- | --- |
| `GET /apis/metrics.k8s.io/v1beta1/nodes[/{name}]` | NodeMetricsList / NodeMetrics |
| `GET /apis/metrics.k8s.io/v1beta1[/namespaces/{ns}]/pods` | PodMetricsList |
| `GET /apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods/{name}` | PodMetrics |

The group is in the registry (`register`) so every discovery document and the OpenAPI list it:
resources `nodes` (NodeMetrics, cluster-scoped) and `pods` (PodMetrics, namespaced), verbs get
and list; other verbs get 405 MethodNotAllowed. Lists take `labelSelector` and `fieldSelector`
(`metadata.name`, `metadata.namespace`) and select among the Node and Pod objects, as
metrics-server selects among its informer's objects.

An answer is built as metrics-server builds it: metadata {name, namespace, labels (the object's),
creationTimestamp (now)}, `timestamp` (the last sample's time), `window` (between the two samples
the cpu rate comes from, a Go duration), `usage` {cpu in nanocores, memory: working set bytes},
quantities in canonical form (`1234567n`, `250m`, `20Mi`, `123456Ki`). A pod's timestamp and
window are its newest container's. The usage comes from `metricsscraper.Scraper` (rates from
two scrapes of the node's `/metrics/resource`; see there for the cache). A node or pod without
metrics, or a pod not Running, is left out of a list; asked by name it is 404
`nodemetrics.metrics.k8s.io "x" not found` (`podmetrics.metrics.k8s.io "ns/x" not found`, the
name with its namespace), and a name that does not exist is the object's own 404 (`nodes "x"
not found`, `pods "x" not found`), as metrics-server answers from its listers. Items are in
name order (pods: namespace, then name).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterable
from typing import Any

import aiohttp
from aiohttp import web

from kubecore.api import errors
from kubecore.api.quantity import BINARY_SI, DECIMAL_SI, NANO, Quantity
from kubecore.api.registry import Registry, ResourceType
from kubecore.api.selectors import parse_field_selector, parse_label_selector
from kubecore.apiserver.metricsscraper import Endpoint, NodeUsage, Scraper, Usage, http_fetch
from kubecore.apiserver.podstream import kubelet_endpoint
from kubecore.apiserver.requestinfo import RequestInfo
from kubecore.apiserver.rest import path_not_found, respond
from kubecore.apiserver.storage import ObjectStore
from kubecore.client.clock import Clock, RealClock

Obj = dict[str, Any]
GROUP, VERSION = "metrics.k8s.io", "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"
MAX_PARALLEL_SCRAPES = 64
NODE_METRICS_GR, POD_METRICS_GR = (GROUP, "nodemetrics"), (GROUP, "podmetrics")
"""What a NotFound names, as metrics-server's (`nodemetrics.metrics.k8s.io "x" not found`)."""
_USAGE_SCHEMA: Obj = {"type": "object", "additionalProperties": {"type": "string", "x-kubernetes-int-or-string": True}}
_META: Obj = {"type": "object"}
NODE_METRICS = ResourceType(
    group=GROUP, version=VERSION, resource="nodes", kind="NodeMetrics", namespaced=False, singular="nodemetrics",
    verbs=("get", "list"),
    schema={"type": "object", "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                                             "metadata": _META, "timestamp": {"type": "string", "format": "date-time"},
                                             "window": {"type": "string"}, "usage": _USAGE_SCHEMA}})
POD_METRICS = ResourceType(
    group=GROUP, version=VERSION, resource="pods", kind="PodMetrics", namespaced=True, singular="podmetrics",
    verbs=("get", "list"),
    schema={"type": "object", "properties": {
        "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": _META,
        "timestamp": {"type": "string", "format": "date-time"}, "window": {"type": "string"},
        "containers": {"type": "array", "items": {"type": "object", "properties": {
            "name": {"type": "string"}, "usage": _USAGE_SCHEMA}}}}})


def register(registry: Registry) -> None:
    """Adds the group's two resources (for discovery and OpenAPI) unless already there."""
    for rt in (NODE_METRICS, POD_METRICS):
        if registry.get(rt.group, rt.version, rt.resource) is None:
            registry.add(rt)


# -- conversion (pure) ---------------------------------------------------------------------------

def rfc3339(t: float) -> str:
    """metav1.Time: whole seconds, UTC."""
    return dt.datetime.fromtimestamp(int(t), tz=dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def go_duration(seconds: float) -> str:
    """metav1.Duration's JSON (Go's Duration.String) to the millisecond: `15.02s`, `1m5s`, `500ms`."""
    ms = round(seconds * 1000)
    if ms == 0:
        return "0s"
    sign, ms = ("-", -ms) if ms < 0 else ("", ms)
    if ms < 1000:
        return f"{sign}{ms}ms"
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs = f"{rest // 1000}" + (f".{rest % 1000:03d}".rstrip("0") if rest % 1000 else "") + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{secs}"
    if minutes:
        return f"{sign}{minutes}m{secs}"
    return sign + secs


def usage_json(u: Usage) -> Obj:
    """{cpu, memory} as metrics-server makes them: NewScaledQuantity(nanocores, -9), NewQuantity(bytes, BinarySI)."""
    return {"cpu": Quantity(max(0, u.nano_cores), DECIMAL_SI).canonical(),
            "memory": Quantity(max(0, u.memory) * NANO, BINARY_SI).canonical()}


def _meta(obj: Obj, *, now: float, namespaced: bool) -> Obj:
    src = obj.get("metadata") or {}
    out: Obj = {"name": src.get("name", "")}
    if namespaced:
        out["namespace"] = src.get("namespace", "")
    out["creationTimestamp"] = rfc3339(now)
    if src.get("labels"):
        out["labels"] = dict(src["labels"])
    return out


def node_metrics(node: Obj, u: Usage, *, now: float) -> Obj:
    """A NodeMetrics for the Node object `node`."""
    return {"kind": "NodeMetrics", "apiVersion": API_VERSION, "metadata": _meta(node, now=now, namespaced=False),
            "timestamp": rfc3339(u.timestamp), "window": go_duration(u.window), "usage": usage_json(u)}


def pod_metrics(pod: Obj, containers: dict[str, Usage], *, now: float) -> Obj:
    """A PodMetrics for the Pod object `pod`; containers by name, its timestamp the newest one's."""
    newest = max(containers.values(), key=lambda u: u.timestamp)
    return {"kind": "PodMetrics", "apiVersion": API_VERSION, "metadata": _meta(pod, now=now, namespaced=True),
            "timestamp": rfc3339(newest.timestamp), "window": go_duration(newest.window),
            "containers": [{"name": name, "usage": usage_json(u)} for name, u in sorted(containers.items())]}


def metrics_list(kind: str, items: list[Obj]) -> Obj:
    return {"kind": kind, "apiVersion": API_VERSION, "metadata": {}, "items": items}


# -- serving -------------------------------------------------------------------------------------

class MetricsAPI:
    """The handlers (see the module docstring), over the object store and a Scraper."""

    def __init__(self, registry: Registry, objects: ObjectStore, *, clock: Clock | None = None,
                 scraper: Scraper | None = None) -> None:
        nodes, pods = registry.get("", "v1", "nodes"), registry.get("", "v1", "pods")
        assert nodes is not None and pods is not None
        self.nodes_rt, self.pods_rt = nodes, pods
        self.objects = objects
        self.clock: Clock = clock or RealClock()
        self._session: aiohttp.ClientSession | None = None
        self.scraper = scraper or Scraper(self._fetch, clock=self.clock)
        self._parallel = asyncio.Semaphore(MAX_PARALLEL_SCRAPES)

    async def _fetch(self, node: str, endpoint: Endpoint) -> str:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
        return await http_fetch(self._session)(node, endpoint)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def handle(self, request: web.Request, info: RequestInfo) -> web.Response:
        rt = {"nodes": NODE_METRICS, "pods": POD_METRICS}.get(info.resource)
        if info.version != VERSION or rt is None or info.subresource or len(info.parts) > 2 \
                or (info.namespace and not rt.namespaced):
            raise path_not_found()
        if info.verb not in rt.verbs:
            raise errors.method_not_allowed(rt, info.verb)
        request["rt"] = rt
        if rt is NODE_METRICS:
            return respond(await (self.get_node(info.name) if info.name else self.list_nodes(request)))
        if info.name:
            return respond(await self.get_pod(info.namespace, info.name))
        return respond(await self.list_pods(request, info.namespace))

    def _selected(self, request: web.Request, objs: Iterable[Obj]) -> list[Obj]:
        labels = parse_label_selector(request.query.get("labelSelector", ""))
        fields = parse_field_selector(request.query.get("fieldSelector", ""))
        out = []
        for o in objs:
            meta = o.get("metadata") or {}
            if labels.matches(meta.get("labels")) and fields.matches(
                    {"metadata.name": str(meta.get("name", "")), "metadata.namespace": str(meta.get("namespace", ""))}):
                out.append(o)
        return out

    async def _usage(self, node: Obj) -> NodeUsage | None:
        name = str(node["metadata"]["name"])
        try:
            endpoint = kubelet_endpoint(node)
        except errors.StatusError:
            return None  # no address yet
        async with self._parallel:
            return await self.scraper.node_usage(name, endpoint)

    async def _usages(self, node_names: Iterable[str]) -> dict[str, NodeUsage]:
        nodes = []
        for name in sorted(set(node_names)):
            try:
                nodes.append(self.objects.get(self.nodes_rt, "", name))
            except errors.StatusError:
                continue
        found = await asyncio.gather(*(self._usage(n) for n in nodes))
        return {str(n["metadata"]["name"]): u for n, u in zip(nodes, found) if u is not None}

    async def get_node(self, name: str) -> Obj:
        node = self.objects.get(self.nodes_rt, "", name)  # none: `nodes "x" not found`, as upstream's lister
        usage = await self._usage(node)
        if usage is None or usage.node is None:
            raise errors.not_found(NODE_METRICS_GR, name)
        return node_metrics(node, usage.node, now=self.clock.now())

    async def list_nodes(self, request: web.Request) -> Obj:
        nodes = self._selected(request, self.objects.list(self.nodes_rt, "").items)
        usages = await self._usages(str(n["metadata"]["name"]) for n in nodes)
        now = self.clock.now()
        items = []
        for n in nodes:
            u = usages.get(str(n["metadata"]["name"]))
            if u is not None and u.node is not None:
                items.append(node_metrics(n, u.node, now=now))
        return metrics_list("NodeMetricsList", items)

    def _pod_items(self, pods: list[Obj], usages: dict[str, NodeUsage]) -> list[Obj]:
        now = self.clock.now()
        items = []
        for p in pods:
            if (p.get("status") or {}).get("phase") != "Running":
                continue  # metrics-server ignores pods in other phases
            meta = p.get("metadata") or {}
            u = usages.get(str((p.get("spec") or {}).get("nodeName") or ""))
            containers = u.containers.get((str(meta.get("namespace", "")), str(meta.get("name", "")))) if u else None
            if containers:
                items.append(pod_metrics(p, containers, now=now))
        return items

    async def get_pod(self, namespace: str, name: str) -> Obj:
        pod = self.objects.get(self.pods_rt, namespace, name)  # none: `pods "x" not found`
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        items = self._pod_items([pod], await self._usages([node] if node else []))
        if not items:
            raise errors.not_found(POD_METRICS_GR, f"{namespace}/{name}")
        return items[0]

    async def list_pods(self, request: web.Request, namespace: str) -> Obj:
        pods = self._selected(request, self.objects.list(self.pods_rt, namespace).items)
        pods = [p for p in pods if (p.get("spec") or {}).get("nodeName")]
        usages = await self._usages(str(p["spec"]["nodeName"]) for p in pods)
        return metrics_list("PodMetricsList", self._pod_items(pods, usages))
