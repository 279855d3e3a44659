"""`kubecore kubelet --runtime containerd` against a real API server (the `server_url` fixture), as
root with Debian's containerd, runc, CNI plugins and busybox-static: the CLI starts its own
containerd under --root-dir, imports the local images, writes the pod network, registers the
Node, and runs a busybox pod to Running with an IP from the pod CIDR, its ConfigMap volume and
managed /etc/hosts mounted and its env resolved (read back from the container's own log). Deleting the pod removes
its containers, volume directory and logs; SIGTERM stops the kubelet and its containerd.

Missing root or packages fail the module with the reason, never skip it. Every wait polls with a
deadline; nothing asserts on elapsed time."""

from __future__ import annotations

import asyncio
import ipaddress
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubecore.client.errors import NotFound
from kubecore.kubelet.containerd import daemon
from kubecore.kubelet.containerd_node import unusable
from tests.integration.cluster import env, stop
from tests.integration.inprocess import eventually, new_client, write_kubeconfig

Obj = dict[str, Any]
WAIT_S = 60.0
DISK_NEUTRAL = ("--eviction-hard", "memory.available<100Mi", "--image-gc-high-threshold", "100")
"""As `kubecore up` runs its node: these tests run real containers, whatever the test machine's
disk holds (upstream's default would taint the node DiskPressure on a disk 85% full)."""


@pytest.fixture(scope="module", autouse=True)
def machine_can_run_containerd() -> Iterator[None]:
    why = unusable()
    if why:
        pytest.fail(f"the containerd kubelet test cannot run here: {why} (tests/run.sh installs the packages; "
                    "run as root)", pytrace=False)
    yield


def condition(obj: Obj, ctype: str) -> Obj:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == ctype), {})


async def test_the_cli_runs_a_busybox_pod_with_volumes_and_env(server_url: str, tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path, server_url)
    name, ns = f"ctrd-{uuid.uuid4().hex[:6]}", f"kc-{uuid.uuid4().hex[:8]}"
    root = tmp_path / "root"
    cidr = f"10.224.{os.getpid() % 250}.0/24"
    log_path = tmp_path / "kubelet.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kubecore.cli.main", "kubelet", "--kubeconfig", str(kubeconfig), "--node-name", name,
             "--runtime", "containerd", "--root-dir", str(root), "--pod-cidr", cidr, "--node-status-update-frequency",
             "1s", *DISK_NEUTRAL], env=env(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    rest = new_client(server_url)
    uid = ""
    try:
        async def node_ready() -> Obj | None:
            if proc.poll() is not None:
                pytest.fail(f"the kubelet exited {proc.returncode}: {log_path.read_text()[-3000:]}")
            try:
                n: Obj = await rest.get_json(f"/api/v1/nodes/{name}")
            except NotFound:
                return None
            return n if condition(n, "Ready").get("status") == "True" else None

        await eventually(node_ready, "the containerd node Ready", timeout=WAIT_S)
        await rest.send_json("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                            "metadata": {"name": ns}})
        await rest.send_json("POST", f"/api/v1/namespaces/{ns}/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"msg": "from-a-volume"}})
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bb"}, "spec": {
            "nodeName": name, "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "app", "image": "busybox", "imagePullPolicy": "IfNotPresent",
                            "command": ["sh", "-c", "cat /etc/cfg/msg; echo; tail -n 1 /etc/hosts; echo env=$(GREETING); sleep 3600"],
                            "env": [{"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "msg"}}}],
                            "volumeMounts": [{"name": "cfg", "mountPath": "/etc/cfg"}]}],
            "volumes": [{"name": "cfg", "configMap": {"name": "cfg"}}]}}
        created: Obj = await rest.send_json("POST", f"/api/v1/namespaces/{ns}/pods", pod)
        uid = created["metadata"]["uid"]

        async def running() -> Obj | None:
            p: Obj = await rest.get_json(f"/api/v1/namespaces/{ns}/pods/bb")
            return p if (p.get("status") or {}).get("phase") == "Running" and p["status"].get("podIP") else None

        status = (await eventually(running, "the busybox pod Running with an IP", timeout=WAIT_S))["status"]
        assert ipaddress.ip_address(status["podIP"]) in ipaddress.ip_network(cidr)
        cs = status["containerStatuses"][0]
        assert cs["containerID"].startswith("containerd://") and "running" in cs["state"]
        container_log = Path(f"/var/log/pods/{ns}_bb_{uid}/app/0.log")

        async def logged() -> str | None:
            text = container_log.read_text() if container_log.exists() else ""
            return text if "env=" in text else None

        text = await eventually(logged, "the container's output", timeout=WAIT_S)
        assert "from-a-volume" in text and "env=from-a-volume" in text
        assert f"{status['podIP']}\tbb" in text  # the kubelet-managed /etc/hosts
        assert (root / "pods" / uid / "volumes" / "kubernetes.io~configmap" / "cfg" / "msg").exists()

        await rest.request("DELETE", f"/api/v1/namespaces/{ns}/pods/bb")

        async def gone() -> bool:
            try:
                await rest.get_json(f"/api/v1/namespaces/{ns}/pods/bb")
                return False
            except NotFound:
                return not (root / "pods" / uid).exists() and not container_log.parent.parent.exists()

        await eventually(gone, "the pod deleted, its volumes and logs removed", timeout=WAIT_S)
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(proc.wait, 30)
        assert code == 0, log_path.read_text()[-3000:]
        assert b"registered and ready" in log_path.read_bytes()
    finally:
        stop(proc)
        await rest.close()
        subprocess.run(["ip", "link", "del", daemon.bridge_name(str(root.absolute()))], capture_output=True,
                       check=False)
