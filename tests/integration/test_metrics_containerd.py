"""`kubectl top` against real containers: real kubectl -> the API server's metrics.k8s.io ->
`kubecore kubelet --runtime containerd` (its server on loopback) /metrics/resource -> containerd's
CRI stats. A busy-looping container shows CPU, an idle one next to it far less.

As root with Debian's containerd, runc, CNI plugins and busybox-static; missing root or packages
fail the module with the reason, never skip it. Every wait polls with a deadline; nothing
asserts on elapsed time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from kubecore.api import quantity
from kubecore.client.errors import NotFound
from kubecore.kubelet.containerd import daemon
from tests.integration.cluster import env, free_port, stop
from tests.integration.inprocess import eventually, new_client, run_kubectl, write_kubeconfig
from tests.integration.test_kubelet_containerd import condition, machine_can_run_containerd
from tests.integration.test_kubelet_containerd_streaming import remove_pods

__all__ = ["machine_can_run_containerd"]  # the module's autouse fixture: root and the packages, or a failure

Obj = dict[str, Any]
WAIT_S = 120.0


def _pod(name: str, node: str, script: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
        "nodeName": node, "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "app", "image": "busybox", "imagePullPolicy": "IfNotPresent",
                        "command": ["sh", "-c", script]}]}}


async def test_kubectl_top_shows_a_busy_container_burning_cpu(server_url: str, tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path, server_url)
    name, ns = f"ctrm-{uuid.uuid4().hex[:6]}", f"km-{uuid.uuid4().hex[:8]}"
    root = tmp_path / "root"
    cidr = f"10.226.{os.getpid() % 250}.0/24"
    log_path = tmp_path / "kubelet.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kubecore.cli.main", "kubelet", "--kubeconfig", str(kubeconfig), "--node-name", name,
             "--runtime", "containerd", "--root-dir", str(root), "--pod-cidr", cidr, "--node-ip", "127.0.0.1",
             "--address", "127.0.0.1", "--port", str(free_port()), "--node-status-update-frequency", "1s"],
            env=env(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    rest = new_client(server_url)
    try:
        async def node_ready() -> bool:
            if proc.poll() is not None:
                pytest.fail(f"the kubelet exited {proc.returncode}: {log_path.read_text()[-3000:]}")
            try:
                return condition(await rest.get_json(f"/api/v1/nodes/{name}"), "Ready").get("status") == "True"
            except NotFound:
                return False

        await eventually(node_ready, "the containerd node Ready", timeout=WAIT_S)
        await rest.send_json("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                            "metadata": {"name": ns}})
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
    finally:
        await remove_pods(rest, ns)
        stop(proc)
        await rest.close()
        subprocess.run(["ip", "link", "del", daemon.bridge_name(str(root.absolute()))], capture_output=True,
                       check=False)
