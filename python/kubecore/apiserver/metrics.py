"""Prometheus metrics (`GET /metrics`, text format 0.0.4), named as upstream's API server names them:
request counts and latency histograms per verb/group/version/resource/subresource/scope/code,
long-running requests (watches) in flight, and the store's revision and key count."""

from __future__ import annotations

import bisect
import contextlib
from collections import defaultdict
from typing import Iterator

from kubecore.apiserver.requestinfo import RequestInfo
from kubecore.store import Store

BUCKETS = (0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45, 60)
Labels = tuple[str, str, str, str, str, str]  # verb, group, version, resource, subresource, scope


def _escape(value: str) -> str:
    """A Prometheus label value: backslash, quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _scope(info: RequestInfo) -> str:
    if info.name:
        return "resource"
    return "namespace" if info.namespace else "cluster"


def _verb(info: RequestInfo) -> str:
    return {"update": "PUT", "create": "POST"}.get(info.verb, info.verb.upper())


class Metrics:
    def __init__(self) -> None:
        self.requests: dict[tuple[Labels, int], int] = defaultdict(int)
        self.latency: dict[Labels, list[float]] = {}  # per label set: bucket counts + [sum, count]
        self.watches: dict[tuple[str, str, str], int] = defaultdict(int)
        self._labels: dict[tuple[str, str, str, str, str, str], Labels] = {}  # escaped once per label set

    def observe(self, labels: Labels, code: int, seconds: float) -> None:
        self.requests[(labels, code)] += 1
        h = self.latency.get(labels)
        if h is None:
            h = self.latency[labels] = [0.0] * (len(BUCKETS) + 2)
        i = bisect.bisect_left(BUCKETS, seconds)
        if i < len(BUCKETS):
            h[i] += 1
        h[-2] += seconds
        h[-1] += 1

    def observe_request(self, info: RequestInfo, code: int, seconds: float) -> None:
        key = (info.verb, info.group, info.version, info.resource, info.subresource, _scope(info))
        labels = self._labels.get(key)
        if labels is None:
            e = _escape
            if len(self._labels) >= 4096:
                self._labels.clear()
            labels = self._labels[key] = (e(_verb(info)), e(info.group), e(info.version), e(info.resource),
                                          e(info.subresource), key[5])
        self.observe(labels, code, seconds)

    @contextlib.contextmanager
    def watching(self, info: RequestInfo) -> Iterator[None]:
        """Counts a watch as in flight while the block runs."""
        key = (info.group, info.version, info.resource)
        self.watches[key] += 1
        try:
            yield
        finally:
            self.watches[key] -= 1

    def render(self, store: Store) -> str:
        out = [
            "# HELP apiserver_request_total Counter of apiserver requests broken out for each verb, group, version, resource, scope, component, and HTTP response code.",
            "# TYPE apiserver_request_total counter",
        ]
        for ((verb, g, v, r, sub, scope), code), n in sorted(self.requests.items()):
            out.append(f'apiserver_request_total{{code="{code}",component="apiserver",group="{g}",resource="{r}",scope="{scope}",'
                       f'subresource="{sub}",verb="{verb}",version="{v}"}} {n}')
        out += [
            "# HELP apiserver_request_duration_seconds Response latency distribution in seconds for each verb, group, version, resource, subresource, scope and component.",
            "# TYPE apiserver_request_duration_seconds histogram",
        ]
        for (verb, g, v, r, sub, scope), h in sorted(self.latency.items()):
            cum = 0
            base = f'component="apiserver",group="{g}",resource="{r}",scope="{scope}",subresource="{sub}",verb="{verb}",version="{v}"'
            for le, in_bucket in zip(BUCKETS, h):
                cum += int(in_bucket)
                out.append(f'apiserver_request_duration_seconds_bucket{{{base},le="{le}"}} {cum}')
            out.append(f'apiserver_request_duration_seconds_bucket{{{base},le="+Inf"}} {int(h[-1])}')
            out.append(f"apiserver_request_duration_seconds_sum{{{base}}} {h[-2]:.6f}")
            out.append(f"apiserver_request_duration_seconds_count{{{base}}} {int(h[-1])}")
        out += ["# HELP apiserver_longrunning_requests Gauge of all active long-running apiserver requests.",
                "# TYPE apiserver_longrunning_requests gauge"]
        for (g, v, r), n in sorted(self.watches.items()):
            out.append(f'apiserver_longrunning_requests{{component="apiserver",group="{g}",resource="{r}",scope="",subresource="",verb="WATCH",version="{v}"}} {n}')
        stats = store.stats()
        out += [
            "# HELP kubecore_store_revision The store's current revision.",
            "# TYPE kubecore_store_revision gauge",
            f"kubecore_store_revision {stats['revision']}",
            "# HELP kubecore_store_keys Keys in the store.",
            "# TYPE kubecore_store_keys gauge",
            f"kubecore_store_keys {stats['keys']}",
            "# HELP kubecore_store_fsyncs_total WAL fsyncs since the store was opened.",
            "# TYPE kubecore_store_fsyncs_total counter",
            f"kubecore_store_fsyncs_total {stats['fsyncs']}",
        ]
        return "\n".join(out) + "\n"
