"""The kubelet's /metrics/resource and /stats/summary?only_cpu_and_memory=true, built from the
Summary of a simulated node (stats.py), and read back the way the API server's scraper reads them."""

from __future__ import annotations

from typing import Any

from kubecore.apiserver.metricsscraper import node_usage, parse
from kubecore.kubelet.resource_metrics import cpu_and_memory, render
from tests.unit.kubelet.kubelet_fixtures import SimNode, container, make_pod
from tests.unit.kubelet.test_stats import provider, run_pod

Obj = dict[str, Any]
MI = 1 << 20
SIM = "sim.kubecore.io/"


async def busy_node() -> SimNode:
    node = SimNode()
    await run_pod(node, make_pod("web", uid="u-web", containers=[container("app"), container("side")],
                                 annotations={f"{SIM}cpu-usage.app": "250m", f"{SIM}cpu-usage.side": "50m",
                                              f"{SIM}memory-usage": "64Mi"}))
    return node


async def test_metrics_resource_has_upstream_names_labels_and_timestamps() -> None:
    node = await busy_node()
    node.clock.advance(10)
    at = node.clock.now()
    text = render(await provider(node).summary(), at=at)
    lines = text.splitlines()
    stamp = str(int(at * 1000))
    assert f'container_cpu_usage_seconds_total{{container="app",namespace="default",pod="web"}} 2.5 {stamp}' in lines
    assert f'container_memory_working_set_bytes{{container="side",namespace="default",pod="web"}} 6.7108864e+07 {stamp}' \
        in lines
    assert f'pod_cpu_usage_seconds_total{{namespace="default",pod="web"}} 3 {stamp}' in lines
    assert f"node_cpu_usage_seconds_total 3 {stamp}" in lines
    assert f"node_memory_working_set_bytes 1.34217728e+08 {stamp}" in lines
    assert "resource_scrape_error 0" in lines
    assert "# TYPE node_cpu_usage_seconds_total counter" in lines
    assert "# TYPE pod_memory_working_set_bytes gauge" in lines
    assert any(line.startswith('container_start_time_seconds{container="app"') for line in lines)


def test_a_failed_summary_is_a_scrape_error_and_no_samples() -> None:
    lines = render(None, at=1000.0).splitlines()
    assert "resource_scrape_error 1" in lines and "scrape_error 1" in lines
    assert not [line for line in lines if line.startswith("node_") or line.startswith("container_")]


async def test_the_scraper_reads_the_rate_back_from_two_renders() -> None:
    node = await busy_node()
    stats = provider(node)
    node.clock.advance(5)
    first = parse(render(await stats.summary(), at=node.clock.now()), at=0.0)
    node.clock.advance(4)
    second = parse(render(await stats.summary(), at=node.clock.now()), at=0.0)
    usage = node_usage(first, second)
    assert usage.node is not None and usage.node.nano_cores == 300_000_000 and usage.node.window == 4.0
    web = usage.containers[("default", "web")]
    assert {name: (u.nano_cores, u.memory) for name, u in web.items()} == \
        {"app": (250_000_000, 64 * MI), "side": (50_000_000, 64 * MI)}


async def test_only_cpu_and_memory_drops_file_systems_and_keeps_usage() -> None:
    node = await busy_node()
    node.clock.advance(2)
    full = await provider(node).summary()
    small = cpu_and_memory(full)
    assert set(small["node"]) == {"nodeName", "startTime", "cpu", "memory", "systemContainers"}
    assert small["node"]["memory"] == full["node"]["memory"]
    (pod,) = small["pods"]
    assert set(pod) == {"podRef", "startTime", "cpu", "memory", "containers"}
    assert pod["podRef"]["name"] == "web"
    assert sorted(c["name"] for c in pod["containers"]) == ["app", "side"]
    assert all(set(c) == {"name", "startTime", "cpu", "memory"} for c in pod["containers"])
