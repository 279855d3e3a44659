"""`kubectl logs` (-f too), `exec` and `port-forward` against real containers: real kubectl -> the API server
-> `kubecore kubelet --runtime containerd` (its server on loopback) -> containerd's CRI log files
and streaming server (Exec/PortForward over `containerd/streaming_rpc.py`), as root with Debian's
containerd, runc, CNI plugins and busybox-static.

Missing root or packages fail the module with the reason, never skip it. Every wait polls with a
deadline; nothing asserts on elapsed time."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kubecore.client.errors import NotFound
from kubecore.kubelet.containerd import daemon
from tests.integration.cluster import env, free_port, stop
from tests.integration.inprocess import eventually, new_client, run_kubectl, write_kubeconfig
from tests.integration.test_kubelet_containerd import DISK_NEUTRAL, condition, machine_can_run_containerd

# machine_can_run_containerd: the module's autouse fixture (root and the packages, or a failure)
__all__ = ["containerd_node", "machine_can_run_containerd", "port_forward", "served_page"]

Obj = dict[str, Any]
WAIT_S = 90.0


async def remove_pods(rest: Any, ns: str) -> None:
    """Delete the namespace's pods and wait until the kubelet has stopped their containers."""
    with contextlib.suppress(Exception):
        pods: Obj = await rest.get_json(f"/api/v1/namespaces/{ns}/pods")
        for pod in pods["items"]:
            await rest.request("DELETE", f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}")

        async def gone() -> bool:
            left: Obj = await rest.get_json(f"/api/v1/namespaces/{ns}/pods")
            return not left["items"]

        await eventually(gone, "the test's pods removed", timeout=WAIT_S)


def port_forward(kubeconfig: Path, ns: str, *args: str) -> subprocess.Popen[bytes]:
    """`kubectl port-forward` left running (stop it with `stop`)."""
    binary = shutil.which("kubectl")
    assert binary is not None
    return subprocess.Popen([binary, "-n", ns, "port-forward", *args], env=dict(os.environ, KUBECONFIG=str(kubeconfig)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


async def served_page(local: int) -> str | None:
    """The page at http://127.0.0.1:<local>/, or None while nothing answers 200 there."""
    try:
        async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{local}/") as r:
            return await r.text() if r.status == 200 else None
    except aiohttp.ClientError:
        return None


@dataclass
class Node:
    """A containerd kubelet of one test: its kubeconfig, namespace and node names, API client, log."""
    kubeconfig: Path
    name: str
    ns: str
    rest: Any
    log_path: Path


@contextlib.asynccontextmanager
async def containerd_node(server_url: str, tmp_path: Path, *, prefix: str) -> AsyncIterator[Node]:
    """`kubecore kubelet --runtime containerd` on loopback, Ready, with a fresh namespace; its
    pods, the kubelet and its bridge are removed afterwards."""
    kubeconfig = write_kubeconfig(tmp_path, server_url)
    name, ns = f"{prefix}-{uuid.uuid4().hex[:6]}", f"ks-{uuid.uuid4().hex[:8]}"
    root = tmp_path / "root"
    cidr = f"10.225.{os.getpid() % 250}.0/24"
    log_path = tmp_path / "kubelet.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kubecore.cli.main", "kubelet", "--kubeconfig", str(kubeconfig), "--node-name", name,
             "--runtime", "containerd", "--root-dir", str(root), "--pod-cidr", cidr, "--node-ip", "127.0.0.1",
             "--address", "127.0.0.1", "--port", str(free_port()), "--node-status-update-frequency", "1s", *DISK_NEUTRAL],
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
        yield Node(kubeconfig, name, ns, rest, log_path)
    finally:
        await remove_pods(rest, ns)  # containers stop with their pods, not with the kubelet (it re-adopts them)
        stop(proc)
        await rest.close()
        subprocess.run(["ip", "link", "del", daemon.bridge_name(str(root.absolute()))], capture_output=True,
                       check=False)
        await asyncio.sleep(0)


async def test_logs_exec_and_port_forward_reach_containerd(server_url: str, tmp_path: Path) -> None:
    forward: subprocess.Popen[bytes] | None = None
    async with containerd_node(server_url, tmp_path, prefix="ctrs") as node:
        kubeconfig, name, ns, rest, log_path = node.kubeconfig, node.name, node.ns, node.rest, node.log_path
        try:
            script = ("echo first; echo second; mkdir -p /tmp/www; echo served > /tmp/www/index.html; "
                      "httpd -p 8080 -h /tmp/www; sleep 3600")
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bb"}, "spec": {
                "nodeName": name, "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "app", "image": "busybox", "imagePullPolicy": "IfNotPresent",
                                "command": ["sh", "-c", script]}]}}
            await rest.send_json("POST", f"/api/v1/namespaces/{ns}/pods", pod)

            async def logged() -> str | None:
                code, out, _ = await run_kubectl(kubeconfig, ns, "logs", "bb")
                return out if code == 0 and "second" in out else None

            assert await eventually(logged, "the container's log through kubectl", timeout=WAIT_S) == "first\nsecond\n"
            code, out, err = await run_kubectl(kubeconfig, ns, "logs", "bb", "--tail=1")
            assert (code, out) == (0, "second\n"), err
            code, out, err = await run_kubectl(kubeconfig, ns, "exec", "bb", "--", "sh", "-c", "echo out; echo err >&2")
            assert (code, out, err) == (0, "out\n", "err\n"), log_path.read_text()[-3000:]
            code, out, err = await run_kubectl(kubeconfig, ns, "exec", "bb", "--", "sh", "-c", "exit 3")
            assert code == 3, (out, err)
            code, out, err = await run_kubectl(kubeconfig, ns, "exec", "-i", "bb", "--", "cat", stdin="piped in\n")
            assert (code, out) == (0, "piped in\n"), err

            counter = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "count"}, "spec": {
                "nodeName": name, "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "c", "image": "busybox", "imagePullPolicy": "IfNotPresent",
                                "command": ["sh", "-c", "for i in 1 2 3; do echo $i; sleep 1; done"]}]}}
            await rest.send_json("POST", f"/api/v1/namespaces/{ns}/pods", counter)

            async def started() -> bool:
                p: Obj = await rest.get_json(f"/api/v1/namespaces/{ns}/pods/count")
                return (p.get("status") or {}).get("phase") in ("Running", "Succeeded")

            await eventually(started, "the counting pod started", timeout=WAIT_S)
            code, out, err = await run_kubectl(kubeconfig, ns, "logs", "-f", "count")
            assert (code, out) == (0, "1\n2\n3\n"), err

            local = free_port()
            forward = port_forward(kubeconfig, ns, "pod/bb", f"{local}:8080")
            assert await eventually(lambda: served_page(local), "a page through kubectl port-forward",
                                    timeout=WAIT_S) == "served\n"
        finally:
            if forward is not None:
                stop(forward)
