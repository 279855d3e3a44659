"""SyncPod / KillPod over the simulated runtime on a fake clock: start-up, crash loops, image pulls,
init containers, termination."""

from __future__ import annotations

from kubecore.kubelet.cri import ContainerState
from kubecore.kubelet.runtime_manager import SyncResult
from tests.unit.kubelet.kubelet_fixtures import UID, SimNode, container, make_pod


async def sync(node: SimNode, pod: dict[str, object]) -> SyncResult:
    return await node.manager.sync_pod(pod, await node.status())


async def test_a_new_pod_starts_and_the_next_sync_does_nothing() -> None:
    node = SimNode()
    pod = make_pod(containers=[container("a"), container("b", image="nginx")])
    result = await sync(node, pod)
    assert result.changed and not result.failures
    rs = await node.status()
    assert [c.state for c in rs.containers] == [ContainerState.CONTAINER_RUNNING] * 2
    assert rs.ips == ["10.128.0.2"]
    assert node.events.reasons() == ["Pulling", "Pulled", "Created", "Started"] * 2
    assert node.events.items[2][2] == "Created container: a" and node.events.items[3][2] == "Started container a"
    again = await sync(node, pod)
    assert not again.changed and not again.failures


async def test_crash_loop_backs_off_10s_then_20s() -> None:
    node = SimNode()
    node.timers.start()
    pod = make_pod(annotations={"sim.kubecore.io/duration": "0s", "sim.kubecore.io/exit-code": "1"})
    await sync(node, pod)                       # start, exits at once
    await node.clock.run_for(0)
    result = await sync(node, pod)              # first restart: immediate
    assert result.changed and not result.failures
    await node.clock.run_for(0)
    result = await sync(node, pod)              # second: back-off 10 s
    assert [f.reason for f in result.failures] == ["CrashLoopBackOff"]
    assert result.failures[0].message == f"back-off 10s restarting failed container=app pod=web_default({UID})"
    assert result.retry_after == 10
    cached = node.manager.reasons.get(UID, "app")
    assert cached is not None and cached.reason == "CrashLoopBackOff"
    await node.clock.run_for(10)
    result = await sync(node, pod)
    assert result.changed and not result.failures
    assert node.manager.reasons.get(UID, "app") is None
    await node.clock.run_for(0)
    result = await sync(node, pod)
    assert result.failures[0].message.startswith("back-off 20s") and result.retry_after == 20
    rs = await node.status()
    assert rs.containers[0].restart_count == 2 and len(rs.containers) == 2, "older dead instances are pruned"
    assert "BackOff" in node.events.reasons()
    await node.timers.stop()


async def test_image_pull_failure_then_back_off() -> None:
    node = SimNode()
    pod = make_pod(containers=[container("app", image="nope:1")],
                   annotations={"sim.kubecore.io/pull-fail": "nope:1"})
    result = await sync(node, pod)
    assert [f.reason for f in result.failures] == ["ErrImagePull"] and result.retry_after == 10
    assert "failed to pull and unpack image" in result.failures[0].message
    result = await sync(node, pod)
    assert [(f.reason, f.message) for f in result.failures] == [("ImagePullBackOff", 'Back-off pulling image "nope:1"')]
    assert node.events.reasons().count("Pulling") == 1
    node.clock.advance(10)
    result = await sync(node, pod)
    assert [f.reason for f in result.failures] == ["ErrImagePull"]
    assert node.events.reasons().count("Pulling") == 2


async def test_pull_policy_never_and_if_not_present() -> None:
    node = SimNode()
    never = make_pod(containers=[container("app", image="busybox:1", imagePullPolicy="Never")])
    result = await sync(node, never)
    assert result.failures[0].reason == "ErrImageNeverPull"
    assert result.failures[0].message == 'Container image "busybox:1" is not present with pull policy of Never'
    await sync(node, make_pod("other", containers=[container("app", image="busybox:1")], uid="u2"))
    node.events.items.clear()
    await sync(node, make_pod("third", containers=[container("app", image="busybox:1")], uid="u3"))
    assert node.events.items[0] == ("Normal", "Pulled", 'Container image "busybox:1" already present on machine')


async def test_init_containers_run_one_after_another() -> None:
    node = SimNode()
    node.timers.start()
    pod = make_pod(init=[container("i1"), container("i2")], annotations={"sim.kubecore.io/init-duration": "1s"})
    await sync(node, pod)
    assert [c.name for c in (await node.status()).containers] == ["i1"]
    assert not (await sync(node, pod)).changed              # i1 still running
    await node.clock.run_for(1)
    await sync(node, pod)
    assert [c.name for c in (await node.status()).containers] == ["i2", "i1"]
    await node.clock.run_for(1)
    await sync(node, pod)
    rs = await node.status()
    app = rs.find("app")
    assert app is not None and app.running
    await node.timers.stop()


async def test_kill_pod_runs_pre_stop_stops_containers_and_the_sandbox() -> None:
    node = SimNode()
    node.timers.start()
    pod = make_pod(containers=[container("app", lifecycle={"preStop": {"sleep": {"seconds": 3}}})], grace=10)
    await sync(node, pod)
    rs = await node.status()
    import asyncio
    killing = asyncio.create_task(node.manager.kill_pod(pod, rs))
    await node.clock.run_for(2)
    assert not killing.done()
    await node.clock.run_for(1)
    await killing
    rs = await node.status()
    assert rs.containers[0].exited and rs.containers[0].exit_code == 143
    assert rs.ips == [] and "Killing" in node.events.reasons()
    await node.manager.remove_pod(rs)
    assert (await node.status()).is_empty()
    await node.timers.stop()
