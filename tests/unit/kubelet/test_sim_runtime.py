"""The simulated runtime behind CRI: sandboxes and IPs, container timing from annotations, stop
and kill, events, images."""

from __future__ import annotations

import asyncio

import pytest

from kubecore.client.clock import settle
from kubecore.kubelet import cri, runtime_config
from kubecore.kubelet.cri import ContainerEventType, ContainerState, PodSandboxState
from kubecore.kubelet.sim import behaviour
from kubecore.kubelet.sim.runtime import Ipam, IpamError, default_pod_cidr, hollow_node_ip
from tests.unit.kubelet.kubelet_fixtures import SimNode, container, make_pod


async def start(node: SimNode, pod: dict[str, object], name: str = "app") -> str:
    sandbox = runtime_config.sandbox_config(pod, 0)
    sid = await node.runtime.run_pod_sandbox(sandbox)
    spec = next(c for c in pod["spec"]["containers"] + pod["spec"].get("initContainers", [])  # type: ignore[index]
                if c["name"] == name)
    ref = await node.runtime.pull_image(cri.ImageSpec(image=spec["image"]), None, sandbox)
    config = runtime_config.container_config(pod, spec, restart_count=0, image_ref=ref)  # type: ignore[arg-type]
    cid = await node.runtime.create_container(sid, config, sandbox)
    await node.runtime.start_container(cid)
    return cid


async def state(node: SimNode, cid: str) -> cri.ContainerStatus:
    return (await node.runtime.container_status(cid)).status


async def test_a_job_container_exits_zero_after_one_second() -> None:
    node = SimNode()
    node.timers.start()
    cid = await start(node, make_pod(restart_policy="Never"))
    assert (await state(node, cid)).state == ContainerState.CONTAINER_RUNNING
    await node.clock.run_for(0.9)
    assert (await state(node, cid)).state == ContainerState.CONTAINER_RUNNING
    await node.clock.run_for(0.1)
    s = await state(node, cid)
    assert s.state == ContainerState.CONTAINER_EXITED and s.exit_code == 0 and s.reason == "Completed"
    await node.timers.stop()


async def test_duration_and_exit_code_annotations_per_container() -> None:
    node = SimNode()
    node.timers.start()
    pod = make_pod(containers=[container("a"), container("b")], annotations={
        "sim.kubecore.io/duration": "2s", "sim.kubecore.io/exit-code": "1", "sim.kubecore.io/exit-code.b": "7"})
    a, b = await start(node, pod, "a"), await start(node, pod, "b")
    await node.clock.run_for(2)
    sa, sb = await state(node, a), await state(node, b)
    assert (sa.exit_code, sa.reason, sb.exit_code) == (1, "Error", 7)
    await node.timers.stop()


async def test_always_containers_run_until_stopped() -> None:
    node = SimNode()
    node.timers.start()
    cid = await start(node, make_pod())
    await node.clock.run_for(3600)
    assert (await state(node, cid)).state == ContainerState.CONTAINER_RUNNING
    await node.runtime.stop_container(cid, 30)
    s = await state(node, cid)
    assert s.state == ContainerState.CONTAINER_EXITED and s.exit_code == 143
    await node.timers.stop()


async def test_a_slow_stop_is_killed_at_the_grace_period() -> None:
    node = SimNode()
    node.timers.start()
    cid = await start(node, make_pod(annotations={"sim.kubecore.io/stop-duration": "60s"}))
    stopping = asyncio.create_task(node.runtime.stop_container(cid, 5))
    await node.clock.run_for(4)
    assert not stopping.done()
    await node.clock.run_for(1)
    await stopping
    assert (await state(node, cid)).exit_code == 137
    await node.timers.stop()


async def test_sandboxes_get_ips_and_stopping_kills_and_releases() -> None:
    node = SimNode()
    node.timers.start()
    pod = make_pod()
    cid = await start(node, pod)
    sandboxes = await node.runtime.list_pod_sandbox()
    status = (await node.runtime.pod_sandbox_status(sandboxes[0].id)).status
    assert status.network is not None and status.network.ip == "10.128.0.2"
    await node.runtime.stop_pod_sandbox(sandboxes[0].id)
    await node.runtime.stop_pod_sandbox(sandboxes[0].id)  # idempotent
    assert (await state(node, cid)).exit_code == 137
    status = (await node.runtime.pod_sandbox_status(sandboxes[0].id)).status
    assert status.state == PodSandboxState.SANDBOX_NOTREADY and len(node.runtime.ipam) == 0
    await node.runtime.remove_pod_sandbox(sandboxes[0].id)
    await node.runtime.remove_pod_sandbox(sandboxes[0].id)  # idempotent
    assert node.runtime.counts()["containers"] == 0
    with pytest.raises(cri.NotFound):
        await node.runtime.container_status(cid)
    await node.timers.stop()


async def test_host_network_sandboxes_get_no_pod_ip() -> None:
    node = SimNode()
    pod = make_pod()
    pod["spec"]["hostNetwork"] = True
    sid = await node.runtime.run_pod_sandbox(runtime_config.sandbox_config(pod, 0))
    status = (await node.runtime.pod_sandbox_status(sid)).status
    assert status.network is not None and status.network.ip == "" and len(node.runtime.ipam) == 0


async def test_events_carry_the_pods_statuses() -> None:
    node = SimNode()
    node.timers.start()
    events: list[cri.ContainerEventResponse] = []

    async def follow() -> None:
        async for ev in node.runtime.get_container_events():
            events.append(ev)

    task = asyncio.create_task(follow())
    await settle()
    cid = await start(node, make_pod(restart_policy="Never"))
    await node.clock.run_for(1)
    await settle()
    kinds = [(e.container_id == cid, e.container_event_type) for e in events]
    assert kinds == [(False, ContainerEventType.CONTAINER_CREATED_EVENT),
                     (False, ContainerEventType.CONTAINER_STARTED_EVENT),
                     (True, ContainerEventType.CONTAINER_CREATED_EVENT),
                     (True, ContainerEventType.CONTAINER_STARTED_EVENT),
                     (True, ContainerEventType.CONTAINER_STOPPED_EVENT)]
    last = events[-1]
    assert last.pod_sandbox_status is not None and last.pod_sandbox_status.metadata.name == "web"
    assert [s.state for s in last.containers_statuses] == [ContainerState.CONTAINER_EXITED]
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await node.timers.stop()


async def test_images_pull_and_fail_by_annotation() -> None:
    node = SimNode()
    pod = make_pod(annotations={"sim.kubecore.io/pull-fail": "bad:1, other"})
    sandbox = runtime_config.sandbox_config(pod, 0)
    ref = await node.runtime.pull_image(cri.ImageSpec(image="busybox"), None, sandbox)
    status = await node.runtime.image_status(cri.ImageSpec(image="docker.io/library/busybox:latest"))
    assert status.image is not None and status.image.id == ref and ref.startswith("sha256:")
    assert status.image.repo_tags == ["docker.io/library/busybox:latest"]
    with pytest.raises(cri.CriError, match="failed to pull and unpack image"):
        await node.runtime.pull_image(cri.ImageSpec(image="bad:1"), None, sandbox)
    assert (await node.runtime.image_status(cri.ImageSpec(image="bad:1"))).image is None


async def test_exec_sync_needs_a_running_container() -> None:
    node = SimNode()
    node.timers.start()
    cid = await start(node, make_pod(restart_policy="Never"))
    assert (await node.runtime.exec_sync(cid, ["true"], 1)).exit_code == 0
    await node.clock.run_for(1)
    with pytest.raises(cri.FailedPrecondition):
        await node.runtime.exec_sync(cid, ["true"], 1)
    await node.timers.stop()


def test_ipam_skips_gateway_wraps_and_reuses_last() -> None:
    ipam = Ipam("10.0.0.0/29")  # .2 .. .6 usable
    got = [ipam.allocate() for _ in range(5)]
    assert got == ["10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6"]
    with pytest.raises(IpamError):
        ipam.allocate()
    ipam.release("10.0.0.3")
    ipam.release("10.0.0.2")
    assert ipam.allocate() == "10.0.0.2"  # the search continues after the last handed out, wrapping


def test_default_cidrs_and_node_ips_are_deterministic() -> None:
    assert default_pod_cidr(index=0) == "10.128.0.0/24"
    assert default_pod_cidr(index=257) == "10.129.1.0/24"
    assert default_pod_cidr(node_name="a") == default_pod_cidr(node_name="a")
    assert hollow_node_ip(0) == "172.16.0.1" and hollow_node_ip(256) == "172.16.1.1"


def test_behaviour_parsing() -> None:
    assert behaviour.parse_go_duration("1m30s") == 90 and behaviour.parse_go_duration("500ms") == 0.5
    assert behaviour.parse_go_duration("2") == 2
    with pytest.raises(behaviour.BehaviourError):
        behaviour.parse_go_duration("soon")
    ann = {"sim.kubecore.io/readiness": "fail", "sim.kubecore.io/readiness.side": "pass"}
    assert behaviour.probe_answer(ann, "readiness", "app") == "fail"
    assert behaviour.probe_answer(ann, "readiness", "side") == "pass"
    assert behaviour.probe_answer(ann, "liveness", "app") == "pass"
    assert behaviour.run_duration({}, "a", container_type="container", restart_policy="Always") is None
    assert behaviour.run_duration({}, "a", container_type="container", restart_policy="OnFailure") == 1.0
    assert behaviour.run_duration({}, "a", container_type="init", restart_policy="Always") == 0.0
    assert behaviour.run_duration({}, "a", container_type="sidecar", restart_policy="Never") is None
