"""ContainerdRuntime against a real containerd 1.6 + runc + CNI bridge (Debian packages), as root.

The module starts its own containerd in a temporary state dir (kubecore.kubelet.containerd.daemon),
with its own pod network and the locally built busybox/pause images, and removes every pod and
the bridge afterwards. Missing root or packages fail the module with the reason, never skip it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import re
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kubecore.kubelet import cri
from kubecore.kubelet.containerd import (
    ContainerdHandle,
    ContainerdRuntime,
    ensure_local_images,
    start_containerd,
    write_cni_config,
)
from kubecore.kubelet.containerd import daemon, images

WAIT_S = 60.0
CRI_LOG_LINE = re.compile(r"^(\S+) (stdout|stderr) ([FP]) (.*)$")


@dataclass
class Node:
    handle: ContainerdHandle
    state_dir: Path
    pod_cidr: str

    @property
    def logs(self) -> Path:
        return self.state_dir / "pods"


async def _remove_all_pods(socket: str) -> None:
    async with ContainerdRuntime(socket) as rt:
        for sandbox in await rt.list_pod_sandbox():
            await rt.stop_pod_sandbox(sandbox.id)
            await rt.remove_pod_sandbox(sandbox.id)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    if os.geteuid() != 0:
        pytest.fail("the containerd runtime test needs root (containerd, runc and CNI plugins run as root)")
    missing = daemon.missing_binaries()
    if missing:
        pytest.fail(f"missing {', '.join(missing)}: apt-get install containerd runc containernetworking-plugins "
                    "(tests/run.sh installs them)")
    images.find_busybox()  # fails with the package to install
    state_dir = tmp_path_factory.mktemp("node")
    pod_cidr = f"10.223.{os.getpid() % 250}.0/24"
    write_cni_config(state_dir, pod_cidr)
    handle = start_containerd(state_dir)
    try:
        ensure_local_images(handle.socket)
        yield Node(handle, state_dir, pod_cidr)
    finally:
        try:
            asyncio.run(_remove_all_pods(handle.socket))
        finally:
            handle.stop()
            subprocess.run(["ip", "link", "del", daemon.bridge_name(state_dir)], capture_output=True, check=False)


@pytest.fixture
async def rt(node: Node) -> AsyncIterator[ContainerdRuntime]:
    async with ContainerdRuntime(node.handle.socket) as runtime:
        yield runtime


def sandbox_config(node: Node, name: str, **labels: str) -> cri.PodSandboxConfig:
    uid = f"uid-{name}"
    return cri.PodSandboxConfig(
        metadata=cri.PodSandboxMetadata(name=name, uid=uid, namespace="default"), hostname=name,
        log_directory=str(node.logs / uid), labels={cri.POD_UID_LABEL: uid, **labels})


def container_config(name: str, script: str, *, memory: int = 0, **env: str) -> cri.ContainerConfig:
    resources = cri.LinuxContainerResources(memory_limit_in_bytes=memory) if memory else None
    return cri.ContainerConfig(
        metadata=cri.ContainerMetadata(name=name), image=cri.ImageSpec(image="busybox"),
        command=["sh", "-c"], args=[script], envs=[cri.KeyValue(key=k, value=v) for k, v in env.items()],
        labels={cri.CONTAINER_NAME_LABEL: name}, log_path=f"{name}/0.log",
        linux=cri.LinuxContainerConfig(resources=resources))


async def run_container(rt: ContainerdRuntime, sid: str, sandbox: cri.PodSandboxConfig,
                        config: cri.ContainerConfig) -> str:
    cid = await rt.create_container(sid, config, sandbox)
    await rt.start_container(cid)
    return cid


async def wait_exited(rt: ContainerdRuntime, cid: str) -> cri.ContainerStatus:
    deadline = time.monotonic() + WAIT_S
    while True:
        status = (await rt.container_status(cid)).status
        if status.state == cri.ContainerState.CONTAINER_EXITED:
            return status
        assert time.monotonic() < deadline, f"container {cid} still {status.state.name} after {WAIT_S}s"
        await asyncio.sleep(0.1)


async def wait_log(path: Path, lines: int) -> list[str]:
    deadline = time.monotonic() + WAIT_S
    while True:
        text = path.read_text() if path.exists() else ""
        if text.count("\n") >= lines:
            return text.splitlines()
        assert time.monotonic() < deadline, f"{path} has {text!r} after {WAIT_S}s"
        await asyncio.sleep(0.1)


async def test_version_and_status(rt: ContainerdRuntime) -> None:
    v = await rt.version()
    assert v.runtime_name == "containerd" and v.runtime_api_version == "v1" and v.runtime_version
    conditions = {c.type: c.status for c in (await rt.status()).status.conditions}
    assert conditions == {cri.RUNTIME_READY: True, cri.NETWORK_READY: True}


async def test_local_images_are_present_and_import_is_idempotent(node: Node, rt: ContainerdRuntime) -> None:
    assert ensure_local_images(node.handle.socket) == []
    busybox = (await rt.image_status(cri.ImageSpec(image="busybox"))).image
    assert busybox is not None and images.BUSYBOX_IMAGE in busybox.repo_tags and busybox.size > 0
    tags = {t for i in await rt.list_images() for t in i.repo_tags}
    assert {images.BUSYBOX_IMAGE, images.PAUSE_IMAGE} <= tags
    # no registry is reachable: a pull of a present image answers the local one
    assert await rt.pull_image(cri.ImageSpec(image="busybox")) == busybox.id
    assert (await rt.image_status(cri.ImageSpec(image="kubecore.local/absent:1"))).image is None


async def test_sandbox_ip_lists_and_idempotent_removal(node: Node, rt: ContainerdRuntime) -> None:
    config = sandbox_config(node, "sbx", suite="sandbox-lists")
    sid = await rt.run_pod_sandbox(config)
    status = (await rt.pod_sandbox_status(sid)).status
    assert status.state == cri.PodSandboxState.SANDBOX_READY and status.metadata.name == "sbx"
    assert status.network is not None
    assert ipaddress.ip_address(status.network.ip) in ipaddress.ip_network(node.pod_cidr)
    by_label = await rt.list_pod_sandbox(cri.PodSandboxFilter(label_selector={"suite": "sandbox-lists"}))
    assert [s.id for s in by_label] == [sid]
    await rt.stop_pod_sandbox(sid)
    await rt.stop_pod_sandbox(sid)
    ready = await rt.list_pod_sandbox(cri.PodSandboxFilter(id=sid, state=cri.PodSandboxState.SANDBOX_READY))
    not_ready = await rt.list_pod_sandbox(cri.PodSandboxFilter(id=sid, state=cri.PodSandboxState.SANDBOX_NOTREADY))
    assert ready == [] and [s.id for s in not_ready] == [sid]
    await rt.remove_pod_sandbox(sid)
    await rt.remove_pod_sandbox(sid)
    with pytest.raises(cri.NotFound):
        await rt.pod_sandbox_status(sid)


async def test_container_lifecycle(node: Node, rt: ContainerdRuntime) -> None:
    sandbox = sandbox_config(node, "life")
    sid = await rt.run_pod_sandbox(sandbox)
    config = container_config("app", "echo hello $GREETING; echo oops >&2; exec sleep 300",
                              memory=48 << 20, GREETING="world")
    cid = await run_container(rt, sid, sandbox, config)

    running = await rt.list_containers(cri.ContainerFilter(pod_sandbox_id=sid, state=cri.ContainerState.CONTAINER_RUNNING))
    assert [c.id for c in running] == [cid]
    assert [c.id for c in await rt.list_containers(cri.ContainerFilter(id=cid))] == [cid]
    labelled = await rt.list_containers(cri.ContainerFilter(label_selector={cri.CONTAINER_NAME_LABEL: "app"}))
    assert [c.id for c in labelled] == [cid]
    assert await rt.list_containers(cri.ContainerFilter(id=cid, state=cri.ContainerState.CONTAINER_EXITED)) == []

    out = await rt.exec_sync(cid, ["sh", "-c", "echo $GREETING; cat /sys/fs/cgroup/memory/memory.limit_in_bytes"], 10)
    assert out.exit_code == 0 and out.stdout.decode().split() == ["world", str(48 << 20)]
    failed = await rt.exec_sync(cid, ["sh", "-c", "echo bad >&2; exit 3"], 10)
    assert (failed.exit_code, failed.stderr, failed.stdout) == (3, b"bad\n", b"")
    with pytest.raises(cri.DeadlineExceeded):
        await rt.exec_sync(cid, ["sleep", "30"], 1)

    status = (await rt.container_status(cid)).status
    log_path = Path(status.log_path)
    assert log_path == node.logs / sandbox.metadata.uid / "app" / "0.log"
    lines = [CRI_LOG_LINE.match(line) for line in await wait_log(log_path, 2)]
    assert all(lines), lines
    assert sorted((m.group(2), m.group(3), m.group(4)) for m in lines if m) == [
        ("stderr", "F", "oops"), ("stdout", "F", "hello world")]

    # `sleep` as PID 1 ignores SIGTERM: the stop kills it at the 1 s deadline
    await rt.stop_container(cid, 1)
    stopped = await wait_exited(rt, cid)
    assert stopped.exit_code == 137 and stopped.finished_at >= stopped.started_at > 0
    await rt.remove_container(cid)
    await rt.remove_container(cid)
    with pytest.raises(cri.NotFound):
        await rt.container_status(cid)
    await rt.stop_pod_sandbox(sid)
    await rt.remove_pod_sandbox(sid)


async def test_stop_sends_sigterm_first(node: Node, rt: ContainerdRuntime) -> None:
    sandbox = sandbox_config(node, "term")
    sid = await rt.run_pod_sandbox(sandbox)
    script = "trap 'echo got TERM; exit 0' TERM; echo ready; while :; do sleep 1 & wait $!; done"
    cid = await run_container(rt, sid, sandbox, container_config("graceful", script))
    await wait_log(node.logs / sandbox.metadata.uid / "graceful" / "0.log", 1)
    await rt.stop_container(cid, 30)
    status = await wait_exited(rt, cid)
    assert status.exit_code == 0
    lines = await wait_log(node.logs / sandbox.metadata.uid / "graceful" / "0.log", 2)
    assert lines[-1].endswith("stdout F got TERM")
    await rt.remove_pod_sandbox(sid)


async def test_memory_limit_oom_killed(node: Node, rt: ContainerdRuntime) -> None:
    sandbox = sandbox_config(node, "oom")
    sid = await rt.run_pod_sandbox(sandbox)
    hog = "x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo survived"
    cid = await run_container(rt, sid, sandbox, container_config("hog", hog, memory=32 << 20))
    status = await wait_exited(rt, cid)
    assert (status.reason, status.exit_code) == ("OOMKilled", 137)
    await rt.remove_pod_sandbox(sid)


async def test_security_context_user_group_read_only_root_and_capabilities(node: Node, rt: ContainerdRuntime) -> None:
    """The kubelet's security context reaches the process: uid/gid, a read-only root file
    system, a dropped capability (chown as root fails without CAP_CHOWN)."""
    from kubecore.kubelet.securitycontext import linux_security_context

    pod = {"metadata": {"name": "sc"}, "spec": {"securityContext": {"runAsUser": 1000, "runAsGroup": 3000}}}
    sandbox = sandbox_config(node, "sc")
    sid = await rt.run_pod_sandbox(sandbox)
    config = container_config("who", "id -u; id -g; touch /x 2>/dev/null && echo writable || echo read-only; sleep 30")
    assert config.linux is not None
    config.linux.security_context = linux_security_context(pod, {"name": "who", "securityContext": {
        "readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False}})
    cid = await run_container(rt, sid, sandbox, config)
    lines = await wait_log(node.logs / "uid-sc" / "who" / "0.log", 3)
    assert [line.split(" ", 3)[3] for line in lines[:3]] == ["1000", "3000", "read-only"]
    root = container_config("root", "sleep 30")
    assert root.linux is not None
    root.linux.security_context = linux_security_context(
        {"metadata": {"name": "sc"}, "spec": {}}, {"name": "root", "securityContext": {"capabilities": {"drop": ["CHOWN"]}}})
    rid = await run_container(rt, sid, sandbox, root)
    chown = await rt.exec_sync(rid, ["chown", "1:1", "/tmp"], 10)
    assert chown.exit_code != 0 and b"Operation not permitted" in chown.stderr
    ok = await rt.exec_sync(cid, ["id", "-u"], 10)
    assert ok.stdout.strip() == b"1000"
    besteffort = container_config("be", "sleep 30")
    assert besteffort.linux is not None
    besteffort.linux.resources = cri.LinuxContainerResources(oom_score_adj=1000)
    bid = await run_container(rt, sid, sandbox, besteffort)
    assert (await rt.exec_sync(bid, ["cat", "/proc/1/oom_score_adj"], 10)).stdout.strip() == b"1000"
    await rt.remove_pod_sandbox(sid)


async def test_pods_reach_each_other(node: Node, rt: ContainerdRuntime) -> None:
    pods = []
    for name in ("ping-a", "ping-b"):
        sandbox = sandbox_config(node, name)
        sid = await rt.run_pod_sandbox(sandbox)
        cid = await run_container(rt, sid, sandbox, container_config("c", "exec sleep 300"))
        network = (await rt.pod_sandbox_status(sid)).status.network
        assert network is not None
        pods.append((sid, cid, network.ip))
    (sid_a, cid_a, ip_a), (sid_b, cid_b, ip_b) = pods
    assert ip_a != ip_b
    for cid, target in ((cid_a, ip_b), (cid_b, ip_a)):
        out = await rt.exec_sync(cid, ["ping", "-c", "1", "-W", "5", target], 15)
        assert out.exit_code == 0, out
        assert b"1 packets received" in out.stdout
    loopback = await rt.exec_sync(cid_a, ["ping", "-c", "1", "-W", "5", "127.0.0.1"], 15)
    assert loopback.exit_code == 0, loopback  # containerd brings up lo in every pod
    for sid in (sid_a, sid_b):
        await rt.remove_pod_sandbox(sid)


async def test_host_port_reaches_the_pod(node: Node, rt: ContainerdRuntime) -> None:
    host_port = 20000 + os.getpid() % 10000
    sandbox = sandbox_config(node, "hostport")
    sandbox.port_mappings = [cri.PortMapping(container_port=8080, host_port=host_port)]
    sid = await rt.run_pod_sandbox(sandbox)
    script = "while :; do echo hello-from-pod | nc -l -p 8080; done"
    cid = await run_container(rt, sid, sandbox, container_config("server", script))
    # the bridge's address (the CIDR's first host) is one of this node's own: portmap's DNAT applies
    gateway = str(next(ipaddress.ip_network(node.pod_cidr).hosts()))
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(gateway, host_port), 5)
            answer = await asyncio.wait_for(reader.read(100), 5)
            writer.close()
            if answer:
                break
        except (OSError, asyncio.TimeoutError):
            pass
        assert time.monotonic() < deadline, f"nothing answered on {gateway}:{host_port}"
        await asyncio.sleep(0.2)
    assert answer == b"hello-from-pod\n"
    await rt.stop_container(cid, 0)
    await rt.remove_pod_sandbox(sid)


async def test_container_events_or_unimplemented(node: Node, rt: ContainerdRuntime) -> None:
    version = (await rt.version()).runtime_version
    if version.startswith("1.6"):
        with pytest.raises(cri.Unimplemented):
            async for _ in rt.get_container_events():
                pass
        return
    events = rt.get_container_events()
    sid = await rt.run_pod_sandbox(sandbox_config(node, "events"))
    event = await asyncio.wait_for(events.__anext__(), WAIT_S)
    assert event.pod_sandbox_status is not None and event.pod_sandbox_status.id == sid
    await rt.remove_pod_sandbox(sid)


def test_a_containerd_left_by_a_killed_node_is_replaced(node: Node, tmp_path: Path) -> None:
    # the node process died without stopping its containerd (SIGKILL, OOM): the next start over
    # the same state dir stops that one instead of failing on a socket that is still served
    first = start_containerd(tmp_path)
    second = None
    try:
        second = start_containerd(tmp_path)
        assert first.process.wait(timeout=WAIT_S) is not None  # stopped by the second start
        assert second.running and daemon.ping_version(second.socket).runtime_name == "containerd"
    finally:
        for handle in (second, first):
            if handle is not None:
                handle.stop()
