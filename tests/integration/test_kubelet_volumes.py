"""The kubelet's volumes and environment against a real API server (the `server_url` fixture),
with the simulated runtime: ConfigMaps and Secrets read through the API become files under the
kubelet's root directory and variables in the CRI ContainerConfig the runtime receives; a
missing ConfigMap keeps the pod from starting and says why; a deleted pod's files go.

Every wait polls with a deadline (inprocess.eventually); nothing asserts on elapsed time."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from kubecore.client.clock import REAL_CLOCK
from kubecore.client.errors import NotFound
from kubecore.kubelet import cri
from kubecore.kubelet.hollow import sim_kubelet
from kubecore.kubelet.host import KubeletHost
from kubecore.kubelet.sim.runtime import SimRuntime
from kubecore.kubelet.timers import Timers
from tests.integration.inprocess import eventually, new_client
from tests.integration.test_kubelet_sim import Node, condition, fast_config, get_pod, pod_when

Obj = dict[str, Any]


class RecordingRuntime(SimRuntime):
    """The simulated runtime, keeping every ContainerConfig it was asked to create."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.configs: dict[str, cri.ContainerConfig] = {}

    async def create_container(self, pod_sandbox_id: str, config: cri.ContainerConfig,
                               sandbox_config: cri.PodSandboxConfig) -> str:
        cid = await super().create_container(pod_sandbox_id, config, sandbox_config)
        self.configs[f"{sandbox_config.metadata.name}/{config.metadata.name}"] = config
        return cid


@asynccontextmanager
async def node_with_root(server_url: str, root: Path) -> AsyncIterator[tuple[Node, RecordingRuntime]]:
    rest = new_client(server_url)
    name, ns = f"vol-{uuid.uuid4().hex[:6]}", f"kv-{uuid.uuid4().hex[:8]}"
    await rest.send_json("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                        "metadata": {"name": ns}})
    timers = Timers(REAL_CLOCK)
    timers.start()
    runtime = RecordingRuntime(clock=REAL_CLOCK, timers=timers, pod_cidr="10.201.0.0/24")
    host = KubeletHost(rest)
    kubelet = sim_kubelet(host, fast_config(name, root_dir=str(root)), node_ip="10.9.8.7", runtime=runtime)
    await host.start()
    try:
        yield Node(rest=rest, host=host, kubelet=kubelet, ns=ns), runtime
    finally:
        await host.stop()
        await timers.stop()
        await rest.close()


async def create(node: Node, resource: str, obj: Obj) -> Obj:
    out: Obj = await node.rest.send_json("POST", f"/api/v1/namespaces/{node.ns}/{resource}", obj)
    return out


async def bind_pod(node: Node, name: str, spec: Obj) -> Obj:
    pod = await create(node, "pods", {"apiVersion": "v1", "kind": "Pod",
                                      "metadata": {"name": name, "labels": {"app": name}}, "spec": spec})
    await node.rest.send_json("POST", f"/api/v1/namespaces/{node.ns}/pods/{name}/binding",
                              {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                               "target": {"kind": "Node", "name": node.name}})
    return pod


async def events_for(node: Node, pod: str, reason: str) -> list[Obj]:
    items: list[Obj] = (await node.rest.get_json(f"/api/v1/namespaces/{node.ns}/events"))["items"]
    return [e for e in items if e["involvedObject"].get("name") == pod and e.get("reason") == reason]


async def test_config_map_secret_and_downward_api_reach_files_and_env(server_url: str, tmp_path: Path) -> None:
    async with node_with_root(server_url, tmp_path) as (node, runtime):
        await create(node, "configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app"},
                                          "data": {"app.conf": "level=debug\n", "GREETING": "hello"}})
        await create(node, "secrets", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"},
                                       "stringData": {"password": "s3cret"}})
        spec = {"containers": [{
            "name": "app", "image": "registry.example/app:1",
            "command": ["sh", "-c", "echo $(GREETING) $(POD_NAME) $$(KEPT)"],
            "envFrom": [{"configMapRef": {"name": "app"}, "prefix": "CFG_"}],
            "env": [{"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
                    {"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "app", "key": "GREETING"}}},
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                    {"name": "URL", "value": "http://$(POD_NAME):80"}],
            "volumeMounts": [{"name": "config", "mountPath": "/etc/app"}, {"name": "info", "mountPath": "/etc/info"}]}],
            "volumes": [{"name": "config", "configMap": {"name": "app"}},
                        {"name": "info", "downwardAPI": {"items": [
                            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                            {"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}}]}
        created = await bind_pod(node, "web", spec)
        pod = await pod_when(node, "web", "Running")
        uid = created["metadata"]["uid"]
        volumes = tmp_path / "pods" / uid / "volumes"
        assert (volumes / "kubernetes.io~configmap" / "config" / "app.conf").read_text() == "level=debug\n"
        assert (volumes / "kubernetes.io~downward-api" / "info" / "labels").read_text() == 'app="web"'
        assert (volumes / "kubernetes.io~downward-api" / "info" / "namespace").read_text() == node.ns
        config = runtime.configs["web/app"]
        env = {kv.key: kv.value for kv in config.envs}
        assert env == {"CFG_app.conf": "level=debug\n", "CFG_GREETING": "hello", "PASSWORD": "s3cret",
                       "GREETING": "hello", "POD_NAME": "web", "POD_IP": pod["status"]["podIP"],
                       "URL": "http://web:80"}
        assert config.command == ["sh", "-c", "echo hello web $(KEPT)"]
        assert [(m.container_path, m.host_path, m.readonly) for m in config.mounts] == [
            ("/etc/app", str(volumes / "kubernetes.io~configmap" / "config"), True),
            ("/etc/info", str(volumes / "kubernetes.io~downward-api" / "info"), True),
            ("/etc/hosts", str(tmp_path / "pods" / uid / "etc-hosts"), False)]
        hosts = (tmp_path / "pods" / uid / "etc-hosts").read_text()
        assert hosts.startswith("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n")
        assert hosts.endswith(f"{pod['status']['podIP']}\tweb\n")

        await node.rest.request("DELETE", f"/api/v1/namespaces/{node.ns}/pods/web",
                                params={"gracePeriodSeconds": "0"})

        async def cleaned() -> bool:
            try:
                await get_pod(node, "web")
                return False
            except NotFound:
                return not (tmp_path / "pods" / uid).exists()

        await eventually(cleaned, "the pod gone and its volume directory removed")


async def test_a_missing_config_map_keeps_the_pod_waiting_and_says_why(server_url: str, tmp_path: Path) -> None:
    async with node_with_root(server_url, tmp_path) as (node, runtime):
        await bind_pod(node, "mounts", {"containers": [{"name": "app", "image": "registry.example/app:1"}],
                                        "volumes": [{"name": "config", "configMap": {"name": "later"}}]})
        await bind_pod(node, "envs", {"containers": [{"name": "app", "image": "registry.example/app:1", "env": [
            {"name": "X", "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "x"}}}]}]})

        async def failed_mount() -> list[Obj]:
            return await events_for(node, "mounts", "FailedMount")

        event = (await eventually(failed_mount, "a FailedMount event"))[0]
        assert event["type"] == "Warning"
        assert event["message"] == 'MountVolume.SetUp failed for volume "config" : configmap "later" not found'
        pod = await get_pod(node, "mounts")
        assert pod["status"]["phase"] == "Pending"
        assert pod["status"]["containerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}
        assert "mounts/app" not in runtime.configs

        async def config_error() -> Obj | None:
            p = await get_pod(node, "envs")
            statuses = p["status"].get("containerStatuses") or [{}]
            waiting = (statuses[0].get("state") or {}).get("waiting") or {}
            return waiting if waiting.get("reason") == "CreateContainerConfigError" else None

        waiting = await eventually(config_error, "CreateContainerConfigError")
        assert waiting["message"] == 'configmap "nope" not found'
        assert condition(await get_pod(node, "envs"), "Ready")["status"] == "False"
        failed = await eventually(lambda: events_for(node, "envs", "Failed"), "a Failed event")
        assert failed[0]["message"] == 'Error: configmap "nope" not found'

        await create(node, "configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "later"},
                                          "data": {"k": "v"}})
        pod = await pod_when(node, "mounts", "Running")
        files = tmp_path / "pods" / pod["metadata"]["uid"] / "volumes" / "kubernetes.io~configmap" / "config"
        assert (files / "k").read_text() == "v"
