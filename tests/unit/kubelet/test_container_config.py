"""The runtime manager's generateContainerConfig over the simulated runtime: env from ConfigMaps
and Secrets, status.podIP of the sandbox just created, mounts from the volume manager (and the
managed /etc/hosts), and
CreateContainerConfigError (reason cache, "Failed" event) when a reference is missing."""

from __future__ import annotations

import base64
from pathlib import Path

from kubecore.kubelet import cri
from kubecore.kubelet.envvars import EnvContext
from kubecore.kubelet.objects import CONFIGMAP, SECRET
from kubecore.kubelet.volumes import VolumeManager
from tests.unit.kubelet.kubelet_fixtures import UID, FakeObjects, SimNode, container, make_pod


class Recording(SimNode):
    """A SimNode whose runtime keeps the ContainerConfigs, with ConfigMaps/Secrets and a root dir."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.objects = FakeObjects({(CONFIGMAP, "cfg"): {"data": {"mode": "fast"}},
                                    (SECRET, "creds"): {"data": {"pw": base64.b64encode(b"pw1").decode()}}})
        self.configs: list[cri.ContainerConfig] = []
        create = self.runtime.create_container

        async def recording(sid: str, config: cri.ContainerConfig, sandbox: cri.PodSandboxConfig) -> str:
            self.configs.append(config)
            return await create(sid, config, sandbox)

        self.runtime.create_container = recording  # type: ignore[method-assign,assignment]
        self.manager.env = EnvContext(objects=self.objects, node_name="node-1", host_ips=["172.16.0.1"],
                                      allocatable={"cpu": "2"}, record=self.events)
        self.manager.volumes = VolumeManager(root_dir=str(root), objects=self.objects, clock=self.clock,
                                             record=self.events, allocatable=lambda: {})


async def test_env_mounts_and_the_new_sandbox_ip_reach_the_runtime(tmp_path: Path) -> None:
    node = Recording(tmp_path)
    c = container(command=["echo", "$(MODE)"], env=[
        {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "mode"}}},
        {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "pw"}}},
        {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        volumeMounts=[{"name": "scratch", "mountPath": "/scratch"}])
    pod = make_pod(containers=[c])
    pod["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    assert await node.manager.volumes.setup(pod) == []  # type: ignore[union-attr]
    result = await node.manager.sync_pod(pod, await node.status())
    assert not result.failures
    [config] = node.configs
    assert {kv.key: kv.value for kv in config.envs} == {"MODE": "fast", "PW": "pw1", "IP": "10.128.0.2"}
    assert config.command == ["echo", "fast"]
    scratch = tmp_path / "pods" / UID / "volumes" / "kubernetes.io~empty-dir" / "scratch"
    hosts = tmp_path / "pods" / UID / "etc-hosts"
    assert config.mounts == [cri.Mount(container_path="/scratch", host_path=str(scratch)),
                             cri.Mount(container_path="/etc/hosts", host_path=str(hosts))]
    assert hosts.read_text().splitlines()[-1] == "10.128.0.2\tweb"


async def test_a_missing_key_is_create_container_config_error(tmp_path: Path) -> None:
    node = Recording(tmp_path)
    pod = make_pod(containers=[container(env=[
        {"name": "X", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "nope"}}}])])
    result = await node.manager.sync_pod(pod, await node.status())
    assert [(f.reason, f.message) for f in result.failures] == [
        ("CreateContainerConfigError", "couldn't find key nope in Secret default/creds")]
    cached = node.manager.reasons.get(UID, "app")
    assert cached is not None and cached.reason == "CreateContainerConfigError"
    assert ("Warning", "Failed", "Error: couldn't find key nope in Secret default/creds") in node.events.items
    assert node.configs == [] and result.retry_after is not None


def test_security_context_merges_pod_and_container_and_refuses_root_for_non_root() -> None:
    import pytest

    from kubecore.kubelet.securitycontext import SecurityContextError, linux_security_context

    pod = make_pod()
    pod["spec"].update({"securityContext": {"runAsUser": 1000, "runAsGroup": 2000}, "hostNetwork": True,
                        "shareProcessNamespace": True})
    c = container("app")
    c["securityContext"] = {"runAsUser": 1001, "readOnlyRootFilesystem": True, "privileged": False,
                            "allowPrivilegeEscalation": False, "capabilities": {"add": ["NET_ADMIN"], "drop": ["ALL"]}}
    sc = linux_security_context(pod, c)
    assert (sc.run_as_user, sc.run_as_group, sc.readonly_rootfs, sc.no_new_privs) == (1001, 2000, True, True)
    assert sc.capabilities == cri.Capability(add_capabilities=["NET_ADMIN"], drop_capabilities=["ALL"])
    assert (sc.namespace_options.network, sc.namespace_options.pid, sc.namespace_options.ipc) == (
        cri.NamespaceMode.NODE, cri.NamespaceMode.POD, cri.NamespaceMode.POD)
    plain = linux_security_context(make_pod(), container("app"))
    assert (plain.run_as_user, plain.capabilities, plain.no_new_privs) == (None, None, False)
    assert plain.namespace_options.pid == cri.NamespaceMode.CONTAINER
    strict = make_pod()
    strict["spec"]["securityContext"] = {"runAsNonRoot": True}
    with pytest.raises(SecurityContextError, match="container has runAsNonRoot and image will run as root"):
        linux_security_context(strict, container("app"))
    as_root = container("app")
    as_root["securityContext"] = {"runAsUser": 0}
    with pytest.raises(SecurityContextError, match="container's runAsUser breaks non-root policy"):
        linux_security_context(strict, as_root)
    fine = container("app")
    fine["securityContext"] = {"runAsUser": 1000}
    assert linux_security_context(strict, fine).run_as_user == 1000


def test_oom_score_adj_by_qos_as_upstream() -> None:
    from kubecore.kubelet.runtime_config import container_config, oom_score_adj

    gi = 1 << 30

    def with_resources(requests: dict[str, str], limits: dict[str, str]) -> tuple[dict, dict]:  # type: ignore[type-arg]
        c = container("app")
        c["resources"] = {"requests": requests, "limits": limits}
        p = make_pod()
        p["spec"]["containers"] = [c]
        return p, c

    assert oom_score_adj(*with_resources({}, {}), 8 * gi) == 1000  # BestEffort
    assert oom_score_adj(*with_resources({"cpu": "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"}), 8 * gi) == -997
    assert oom_score_adj(*with_resources({"memory": "2Gi"}, {}), 8 * gi) == 750  # 1000 - 1000 * 2/8
    assert oom_score_adj(*with_resources({"memory": "8Gi"}, {}), 8 * gi) == 3  # never below Guaranteed's + 1000
    assert oom_score_adj(*with_resources({"cpu": "1m"}, {}), 8 * gi) == 999  # never equal to BestEffort
    critical, c = with_resources({"memory": "1Gi"}, {})
    critical["spec"]["priorityClassName"] = "system-node-critical"
    assert oom_score_adj(critical, c, 8 * gi) == -997
    p, c = with_resources({"memory": "2Gi"}, {})
    cfg = container_config(p, c, restart_count=0, image_ref="busybox", memory_capacity=8 * gi)
    assert cfg.linux is not None and cfg.linux.resources is not None and cfg.linux.resources.oom_score_adj == 750
