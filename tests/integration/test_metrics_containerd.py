"""`kubectl top` against real containers: real kubectl -> the API server's metrics.k8s.io ->
`kubecore kubelet --runtime containerd` (its server on loopback) /metrics/resource -> containerd's
CRI stats. A busy-looping container shows CPU, an idle one next to it far less.

As root with Debian's containerd, runc, CNI plugins and busybox-static; missing root or packages
fail the module with the reason, never skip it. Every wait polls with a deadline; nothing
asserts on elapsed time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kubecore.api import quantity
from tests.integration.inprocess import eventually, run_kubectl
from tests.integration.test_kubelet_containerd import machine_can_run_containerd
from tests.integration.test_kubelet_containerd_streaming import containerd_node

__all__ = ["machine_can_run_containerd"]  # the module's autouse fixture: root and the packages, or a failure

Obj = dict[str, Any]
WAIT_S = 120.0


def _pod(name: str, node: str, script: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
        "nodeName": node, "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "app", "image": "busybox", "imagePullPolicy": "IfNotPresent",
                        "command": ["sh", "-c", script]}]}}


async def test_kubectl_top_shows_a_busy_container_burning_cpu(server_url: str, tmp_path: Path) -> None:
    async with containerd_node(server_url, tmp_path, prefix="ctrm") as node:
        kubeconfig, name, ns, rest = node.kubeconfig, node.name, node.ns, node.rest
        await rest.send_json("POST", f"/api/v1/namespaces/{ns}/pods", _pod("busy", name, "while :; do :; done"))
        await rest.send_json("POST", f"/api/v1/namespaces/{ns}/pods", _pod("idle", name, "sleep 3600"))

        async def top() -> dict[str, list[str]] | None:
            code, out, _ = await run_kubectl(kubeconfig, ns, "top", "pods", "--no-headers")
            rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.strip()}
            return rows if code == 0 and {"busy", "idle"} <= set(rows) else None

        rows = await eventually(top, "kubectl top pods lists both containers", timeout=WAIT_S)
        busy, idle = (quantity.parse(rows[p][0]).nanos for p in ("busy", "idle"))
        assert busy >= 100_000_000 and busy > idle, rows  # a busy loop burns at least a tenth of a core
        code, out, err = await run_kubectl(kubeconfig, ns, "get", "--raw",
                                           f"/apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods/busy")
        assert code == 0, err
        metrics = json.loads(out)
        assert metrics["kind"] == "PodMetrics" and metrics["containers"][0]["name"] == "app", metrics
        assert quantity.parse(metrics["containers"][0]["usage"]["memory"]).value() > 0, metrics  # below 1Mi: top says 0Mi

        code, out, err = await run_kubectl(kubeconfig, ns, "top", "node", name, "--no-headers")
        assert code == 0, err
        cpu = out.split()[1]
        assert out.split()[0] == name and quantity.parse(cpu).nanos >= 100_000_000, out
