"""What the kubelet's server makes of a stats Summary (`stats.py`) for its two metrics endpoints:

- `cpu_and_memory(summary)`: `GET /stats/summary?only_cpu_and_memory=true`, upstream's
  GetCPUAndMemoryStats shape: the node's name, start time, cpu, memory and system containers;
  each pod's ref, start time, cpu, memory and containers (name, start time, cpu, memory). No
  file systems, volumes, rlimit or process counts.
- `render(summary, at=...)`: `GET /metrics/resource`, upstream's resource metrics collector
  (pkg/kubelet/metrics/collectors/resource_metrics.go) in the Prometheus text format, which is
  what metrics-server (and kubecore's API server, `apiserver/metricsscraper.py`) scrapes:

| metric | type | labels |
| --- | --- | --- |
| `node_cpu_usage_seconds_total` | counter | |
| `node_memory_working_set_bytes` | gauge | |
| `container_cpu_usage_seconds_total` | counter | container, pod, namespace |
| `container_memory_working_set_bytes` | gauge | container, pod, namespace |
| `container_start_time_seconds` | gauge | container, pod, namespace |
| `pod_cpu_usage_seconds_total` | counter | pod, namespace |
| `pod_memory_working_set_bytes` | gauge | pod, namespace |
| `resource_scrape_error` (and its old name `scrape_error`) | gauge | |

Every sample carries the explicit timestamp `at` (ms since the epoch): the Summary's own times
are whole seconds (metav1.Time), too coarse for a rate over a few seconds, so the caller passes
the moment the Summary was read. A figure the Summary lacks is left out, as upstream (a
container that exited has no cpu/memory). Values are printed as client_golang's text encoder prints
them (shortest digits, `6.7108864e+07`: `api/gofmt.go_float`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kubecore.api.gofmt import go_float
from kubecore.api.podlogoptions import parse_rfc3339

Obj = dict[str, Any]
NANOS_PER_S = 1_000_000_000
_NODE_KEYS = ("nodeName", "startTime", "cpu", "memory", "swap")
_POD_KEYS = ("podRef", "startTime", "cpu", "memory", "swap")
_CONTAINER_KEYS = ("name", "startTime", "cpu", "memory", "swap")
_STABLE = "[STABLE] "
METRICS: tuple[tuple[str, str, str], ...] = (
    ("container_cpu_usage_seconds_total", "counter", "Cumulative cpu time consumed by the container in core-seconds"),
    ("container_memory_working_set_bytes", "gauge", "Current working set of the container in bytes"),
    ("container_start_time_seconds", "gauge", "Start time of the container since unix epoch in seconds"),
    ("node_cpu_usage_seconds_total", "counter", "Cumulative cpu time consumed by the node in core-seconds"),
    ("node_memory_working_set_bytes", "gauge", "Current working set of the node in bytes"),
    ("pod_cpu_usage_seconds_total", "counter", "Cumulative cpu time consumed by the pod in core-seconds"),
    ("pod_memory_working_set_bytes", "gauge", "Current working set of the pod in bytes"),
    ("resource_scrape_error", "gauge", "1 if there was an error while getting container metrics, 0 otherwise"),
    ("scrape_error", "gauge", "1 if there was an error while getting container metrics, 0 otherwise"),
)


def _pick(d: Obj, keys: tuple[str, ...]) -> Obj:
    return {k: d[k] for k in keys if d.get(k) is not None}


def cpu_and_memory(summary: Obj) -> Obj:
    """The Summary cut down to what `only_cpu_and_memory=true` answers upstream."""
    node = summary.get("node") or {}
    out_node = _pick(node, _NODE_KEYS)
    out_node["systemContainers"] = [_pick(c, _CONTAINER_KEYS) for c in node.get("systemContainers") or []]
    pods = []
    for pod in summary.get("pods") or []:
        p = _pick(pod, _POD_KEYS)
        p["containers"] = [_pick(c, _CONTAINER_KEYS) for c in pod.get("containers") or []]
        pods.append(p)
    return {"node": out_node, "pods": pods}


def _labels(**labels: str) -> str:
    if not labels:
        return ""
    esc = (f'{k}="{v.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34)).replace(chr(10), chr(92) + "n")}"'
           for k, v in labels.items())
    return "{" + ",".join(esc) + "}"


def _cpu_seconds(stats: Obj) -> float | None:
    ns = (stats.get("cpu") or {}).get("usageCoreNanoSeconds")
    return None if ns is None else int(ns) / NANOS_PER_S


def _working_set(stats: Obj) -> float | None:
    ws = (stats.get("memory") or {}).get("workingSetBytes")
    return None if ws is None else float(ws)


def _samples(summary: Obj) -> Iterator[tuple[str, str, float]]:
    """(metric, labels, value) for every figure the Summary has."""
    node = summary.get("node") or {}
    for metric, value in (("node_cpu_usage_seconds_total", _cpu_seconds(node)),
                          ("node_memory_working_set_bytes", _working_set(node))):
        if value is not None:
            yield metric, "", value
    for pod in summary.get("pods") or []:
        ref = pod.get("podRef") or {}
        ns, name = str(ref.get("namespace") or ""), str(ref.get("name") or "")
        for c in pod.get("containers") or []:
            labels = _labels(container=str(c.get("name") or ""), namespace=ns, pod=name)
            start = parse_rfc3339(str(c.get("startTime") or ""))
            for metric, value in (("container_cpu_usage_seconds_total", _cpu_seconds(c)),
                                  ("container_memory_working_set_bytes", _working_set(c)),
                                  ("container_start_time_seconds", start)):
                if value is not None:
                    yield metric, labels, value
        labels = _labels(namespace=ns, pod=name)
        for metric, value in (("pod_cpu_usage_seconds_total", _cpu_seconds(pod)),
                              ("pod_memory_working_set_bytes", _working_set(pod))):
            if value is not None:
                yield metric, labels, value


def render(summary: Obj | None, *, at: float) -> str:
    """The exposition text; `summary` None means the stats could not be read (scrape error 1)."""
    by_metric: dict[str, list[str]] = {name: [] for name, _, _ in METRICS}
    stamp = f" {int(at * 1000)}"
    for metric, labels, value in _samples(summary or {}):
        by_metric[metric].append(f"{metric}{labels} {go_float(value)}{stamp}")
    error = "0" if summary is not None else "1"
    by_metric["resource_scrape_error"].append(f"resource_scrape_error {error}")
    by_metric["scrape_error"].append(f"scrape_error {error}")
    lines: list[str] = []
    for name, kind, help_text in METRICS:
        lines.append(f"# HELP {name} {_STABLE}{help_text}")
        lines.append(f"# TYPE {name} {kind}")
        lines.extend(by_metric[name])
    return "\n".join(lines) + "\n"
