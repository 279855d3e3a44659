"""`kubectl top` end to end: real kubectl -> the real API server's metrics.k8s.io/v1beta1 ->
the simulated kubelet's /metrics/resource (usage from the pods' sim.kubecore.io annotations).

Every wait polls with a deadline (inprocess.eventually); nothing asserts on elapsed time."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import aiohttp

from kubecore.api import quantity
from kubecore.kubelet.hollow import HollowOptions, add_hollow_nodes
from kubecore.kubelet.host import KubeletHost
from kubecore.kubelet.server import KubeletServer
from tests.integration.cluster import free_port
from tests.integration.inprocess import eventually, kubectl, new_client, run_kubectl, write_kubeconfig
from tests.integration.test_kubelet_sim import Node, pod_when, run_pod
from tests.integration.test_kubelet_streaming import Served, _namespace, served_node

Obj = dict[str, Any]
SIM = "sim.kubecore.io/"


async def _start_pods(s: Served) -> None:
    await run_pod(s.node, "busy", annotations={f"{SIM}cpu-usage": "250m", f"{SIM}memory-usage": "64Mi"})
    await run_pod(s.node, "idle", annotations={f"{SIM}cpu-usage": "2m", f"{SIM}memory-usage": "10Mi"})
    for name in ("busy", "idle"):
        await pod_when(s.node, name, "Running")


def _near(cpu: str, millicores: int) -> bool:
    """A rate from two scrapes whose timestamps are the kubelet's read times, close to the
    simulated figure (a few ms of scheduling in a 1 s window move it by a few tenths of a percent)."""
    got = quantity.parse(cpu).nanos / 1e6
    return abs(got - millicores) <= max(1.0, millicores * 0.05)


def _rows(out: str) -> tuple[list[str], dict[str, list[str]]]:
    lines = [line.split() for line in out.strip().splitlines()]
    header = re.split(r"\s{2,}", out.strip().splitlines()[0].strip())
    return header, {row[0]: row[1:] for row in lines[1:]}


async def test_kubectl_top_pods_and_nodes_show_the_simulated_usage(server_url: str, tmp_path: Path) -> None:
    async with served_node(server_url, tmp_path) as s:
        await _start_pods(s)

        async def top_pods() -> str | None:
            out = await kubectl(s.kubeconfig, s.node.ns, "top", "pods")
            return out if "busy" in out and "idle" in out else None
        header, rows = _rows(await eventually(top_pods, "kubectl top pods lists both pods"))
        assert header == ["NAME", "CPU(cores)", "MEMORY(bytes)"]
        assert _near(rows["busy"][0], 250) and rows["busy"][1] == "64Mi", rows
        assert _near(rows["idle"][0], 2) and rows["idle"][1] == "10Mi", rows

        out = await kubectl(s.kubeconfig, s.node.ns, "top", "pods", "--containers")
        line = next(row.split() for row in out.splitlines() if row.startswith("busy "))
        assert line[:2] == ["busy", "app"] and _near(line[2], 250) and line[3] == "64Mi", out

        header, rows = _rows(await kubectl(s.kubeconfig, s.node.ns, "top", "nodes"))
        assert header == ["NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)"]
        cpu, cpu_pct, mem, mem_pct = rows[s.node.name]
        assert _near(cpu, 252)  # a simulated node burns what its pods burn
        assert mem == "74Mi"
        assert cpu_pct.endswith("%") and mem_pct.endswith("%")

        raw = json.loads(await kubectl(s.kubeconfig, s.node.ns, "get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes"))
        assert raw["kind"] == "NodeMetricsList" and raw["apiVersion"] == "metrics.k8s.io/v1beta1"
        item = next(i for i in raw["items"] if i["metadata"]["name"] == s.node.name)
        assert _near(item["usage"]["cpu"], 252), item
        assert item["usage"]["memory"] == "74Mi"
        assert re.fullmatch(r"[0-9.]+m?s", item["window"]), item["window"]


async def test_kubectl_top_pod_by_name_and_missing_metrics(server_url: str, tmp_path: Path) -> None:
    async with served_node(server_url, tmp_path) as s:
        await _start_pods(s)
        out = await eventually(lambda: _top(s, "pod", "busy"), "kubectl top pod busy")
        assert out.split("\n")[0].split() == ["NAME", "CPU(cores)", "MEMORY(bytes)"]
        code, out, err = await s.kubectl("top", "pod", "nope")
        assert code != 0 and 'pods "nope" not found' in err, (out, err)
        code, out, err = await s.kubectl("top", "node", "nope")
        assert code != 0 and 'nodes "nope" not found' in err, (out, err)


async def _top(s: Served, *args: str) -> str | None:
    code, out, _ = await s.kubectl("top", *args)
    return out if code == 0 else None


async def test_the_kubelet_serves_summary_and_resource_metrics(server_url: str, tmp_path: Path) -> None:
    async with served_node(server_url, tmp_path) as s:
        await _start_pods(s)
        base = f"http://127.0.0.1:{s.server.port}"
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{base}/stats/summary") as r:
                assert r.status == 200
                summary = await r.json()
            async with http.get(f"{base}/stats/summary", params={"only_cpu_and_memory": "true"}) as r:
                small = await r.json()
            async with http.get(f"{base}/metrics/resource") as r:
                assert r.status == 200 and r.content_type == "text/plain"
                text = await r.text()
            async with http.get(f"{base}/metrics/resource", params={"node": "other"}) as r:
                assert r.status == 404
        assert summary["node"]["nodeName"] == s.node.name and "fs" in summary["node"]
        assert "fs" not in small["node"] and small["node"]["nodeName"] == s.node.name
        pods = {p["podRef"]["name"]: p for p in small["pods"]}
        assert pods["busy"]["memory"]["workingSetBytes"] == 64 << 20
        assert re.search(rf'^container_memory_working_set_bytes{{container="app",namespace="{s.node.ns}",'
                         r'pod="busy"} 6.7108864e\+07 \d+$', text, re.M), text
        assert "resource_scrape_error 0" in text.splitlines()


async def test_kubectl_top_nodes_across_hollow_nodes_of_one_server(server_url: str, tmp_path: Path) -> None:
    rest = new_client(server_url)
    ns = await _namespace(rest)
    host = KubeletHost(rest)
    port = free_port()
    prefix = f"hm-{uuid.uuid4().hex[:4]}-"
    kubelets = add_hollow_nodes(host, HollowOptions(count=3, prefix=prefix, node_ip="127.0.0.1", kubelet_port=port))
    await host.start()
    server = KubeletServer(host, address="127.0.0.1", port=port)
    await server.start()
    kubeconfig = write_kubeconfig(tmp_path, server_url)
    try:
        for i, kubelet in enumerate(kubelets):
            node = Node(rest=rest, host=host, kubelet=kubelet, ns=ns)
            await run_pod(node, f"p{i}", annotations={f"{SIM}cpu-usage": f"{100 * (i + 1)}m",
                                                      f"{SIM}memory-usage": f"{i + 1}Gi"})
            await pod_when(node, f"p{i}", "Running")

        async def top() -> str | None:
            code, out, _ = await run_kubectl(kubeconfig, ns, "top", "nodes", "--no-headers")
            names = {line.split()[0] for line in out.splitlines() if line.strip()}
            return out if code == 0 and {k.name for k in kubelets} <= names else None
        out = await eventually(top, "kubectl top nodes lists every hollow node")
        rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.startswith(prefix)}
        for i, kubelet in enumerate(kubelets):
            cpu, _, mem, _ = rows[kubelet.name]
            assert _near(cpu, 100 * (i + 1)) and mem == f"{(i + 1) * 1024}Mi", rows
        code, out, err = await run_kubectl(kubeconfig, ns, "top", "pods", "--sort-by=memory", "--no-headers")
        assert code == 0, err
        assert [line.split()[0] for line in out.splitlines()] == ["p2", "p1", "p0"], out
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/stats/summary") as r:
                assert r.status == 400  # several nodes: the request must name one
    finally:
        await server.stop()
        await host.stop()
        await rest.close()
