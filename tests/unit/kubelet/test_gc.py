"""Container, sandbox and image garbage collection over the simulated runtime, on a fake clock."""

from __future__ import annotations

from typing import Any

from kubecore.kubelet import cri, runtime_config
from kubecore.kubelet.gc import ContainerGC, ContainerGCPolicy, ImageGC, ImageGCPolicy
from tests.unit.kubelet.kubelet_fixtures import SimNode, container, make_pod

Obj = dict[str, Any]


class Pods:
    """Which pod uids the kubelet still has (content of others may be removed)."""

    def __init__(self, *uids: str) -> None:
        self.live = set(uids)
        self.synced = True

    def removable(self, uid: str) -> bool:
        return uid not in self.live


async def attempts(node: SimNode, pod: Obj, name: str, n: int, *, running_last: bool = False,
                   sid: str | None = None) -> tuple[str, list[str]]:
    """`n` instances of container `name` (one second apart), all exited but maybe the last."""
    sandbox = runtime_config.sandbox_config(pod, 0)
    sid = sid or await node.runtime.run_pod_sandbox(sandbox)
    spec = next(c for c in pod["spec"]["containers"] if c["name"] == name)
    ref = await node.runtime.pull_image(cri.ImageSpec(image=spec["image"]), None, sandbox)
    ids = []
    for i in range(n):
        config = runtime_config.container_config(pod, spec, restart_count=i, image_ref=ref)
        cid = await node.runtime.create_container(sid, config, sandbox)
        await node.runtime.start_container(cid)
        if not (running_last and i == n - 1):
            await node.runtime.stop_container(cid, 0)
        ids.append(cid)
        node.clock.advance(1)
    return sid, ids


async def container_ids(node: SimNode) -> set[str]:
    return {c.id for c in await node.runtime.list_containers()}


def container_gc(node: SimNode, pods: Pods, policy: ContainerGCPolicy = ContainerGCPolicy()) -> ContainerGC:
    return ContainerGC(node.runtime, clock=node.clock, content_removable=pods.removable,
                       sources_ready=lambda: pods.synced, policy=policy)


async def test_keeps_the_newest_dead_instance_per_container_and_every_running_one() -> None:
    node = SimNode()
    pod = make_pod(uid="u1", containers=[container("app"), container("side")])
    sid, app = await attempts(node, pod, "app", 3)
    _, side = await attempts(node, pod, "side", 2, running_last=True, sid=sid)
    result = await container_gc(node, Pods("u1")).collect()
    assert sorted(result.containers) == sorted(app[:2])
    assert await container_ids(node) == {app[2], *side}
    assert result.sandboxes == []  # the pod's only sandbox stays


async def test_a_removed_pod_loses_all_dead_containers_and_inactive_sandboxes() -> None:
    node = SimNode()
    pod = make_pod(uid="gone")
    sid, ids = await attempts(node, pod, "app", 2)
    await node.runtime.stop_pod_sandbox(sid)
    pods = Pods()
    pods.synced = False  # before the pod list is synced, a pod unknown to the kubelet is not "gone"
    first = await container_gc(node, pods).collect()
    assert first.containers == [ids[0]] and first.sandboxes == []
    pods.synced = True
    second = await container_gc(node, pods).collect()
    assert second.containers == [ids[1]] and second.sandboxes == [sid]
    assert await node.runtime.list_pod_sandbox() == []


async def test_old_sandboxes_go_the_newest_stays_while_the_pod_exists() -> None:
    node = SimNode()
    pod = make_pod(uid="u1")
    old = await node.runtime.run_pod_sandbox(runtime_config.sandbox_config(pod, 0))
    await node.runtime.stop_pod_sandbox(old)
    node.clock.advance(1)
    mid = await node.runtime.run_pod_sandbox(runtime_config.sandbox_config(pod, 1))
    await node.runtime.stop_pod_sandbox(mid)
    node.clock.advance(1)
    await node.runtime.run_pod_sandbox(runtime_config.sandbox_config(pod, 2))  # ready: active, never removed
    result = await container_gc(node, Pods("u1")).collect()
    assert sorted(result.sandboxes) == sorted([old, mid])


async def test_min_age_and_max_containers() -> None:
    node = SimNode()
    pods = [make_pod(uid=f"u{i}", name=f"p{i}") for i in range(3)]
    made = [await attempts(node, p, "app", 2) for p in pods]
    young = await container_gc(node, Pods("u0", "u1", "u2"),
                               ContainerGCPolicy(min_age=60, max_per_pod_container=0)).collect()
    assert young.containers == []  # all younger than a minute
    node.clock.advance(60)
    result = await container_gc(node, Pods("u0", "u1", "u2"),
                                ContainerGCPolicy(max_per_pod_container=-1, max_containers=2)).collect()
    # 6 dead: each unit is cut to max(1, 2 // 3) = 1, then the oldest overall go until 2 remain
    left = await container_ids(node)
    assert len(left) == 2 and len(result.containers) == 4
    assert left == {made[1][1][1], made[2][1][1]}


# -- images -----------------------------------------------------------------------------------------

class Disk:
    def __init__(self, capacity: int, available: int) -> None:
        self.capacity, self.available = capacity, available

    async def __call__(self) -> tuple[int, int]:
        return self.capacity, self.available


async def pull(node: SimNode, *names: str) -> dict[str, cri.Image]:
    out = {}
    for name in names:
        iid = await node.runtime.pull_image(cri.ImageSpec(image=name))
        image = (await node.runtime.image_status(cri.ImageSpec(image=iid))).image
        assert image is not None
        out[name] = image
    return out


async def present(node: SimNode) -> set[str]:
    return {i.id for i in await node.runtime.list_images()}


async def use_once(node: SimNode, gc: ImageGC, image: str, uid: str) -> None:
    """A container of `image` exists while the GC looks, then is removed."""
    _, ids = await attempts(node, make_pod(uid=uid, containers=[container("app", image=image)]), "app", 1)
    await gc.detect()
    await node.runtime.remove_container(ids[0])


async def test_image_gc_frees_the_least_recently_used_old_enough_images_down_to_the_low_threshold() -> None:
    node = SimNode()
    images = await pull(node, "old:1", "newer:1", "kubecore.local/pause:1.0")
    x = images["old:1"].size
    disk = Disk(capacity=1000 * x, available=99 * x)  # 91% used; freeing x reaches the low threshold (90%)
    gc = ImageGC(node.runtime, clock=node.clock, fs_usage=disk, sandbox_image="kubecore.local/pause:1.0",
                 policy=ImageGCPolicy(high_threshold_percent=90, low_threshold_percent=90))
    await use_once(node, gc, "old:1", "u1")
    node.clock.advance(5)
    await use_once(node, gc, "newer:1", "u2")
    await attempts(node, make_pod(uid="u3", containers=[container("app", image="used:1")]), "app", 1,
                                running_last=True)
    young = await gc.collect()
    assert young.removed == [] and young.wanted == x  # everything is younger than two minutes
    assert young.shortfall == (f"Failed to garbage collect required amount of images. Attempted to free {x} "
                               "bytes, but only found 0 bytes eligible to free.")
    node.clock.advance(121)
    result = await gc.collect()
    assert result.removed == [images["old:1"].id] and result.freed == x and result.shortfall == ""
    left = await present(node)
    assert images["newer:1"].id in left and images["kubecore.local/pause:1.0"].id in left and len(left) == 3


async def test_image_gc_does_nothing_below_the_high_threshold() -> None:
    node = SimNode()
    await pull(node, "a:1", "b:1")
    gc = ImageGC(node.runtime, clock=node.clock, fs_usage=Disk(1000, 200), policy=ImageGCPolicy())  # 80% used
    node.clock.advance(500)
    assert (await gc.collect()).removed == [] and len(await present(node)) == 2


async def test_delete_unused_removes_every_old_enough_unused_image_oldest_use_first() -> None:
    node = SimNode()
    images = await pull(node, "a:1", "b:1")
    gc = ImageGC(node.runtime, clock=node.clock, fs_usage=Disk(1, 1), policy=ImageGCPolicy(min_age=0))
    pod = make_pod(uid="u1", containers=[container("app", image="b:1")])
    _, ids = await attempts(node, pod, "app", 1)
    await gc.detect()  # b:1 in use now
    await node.runtime.remove_container(ids[0])
    node.clock.advance(10)
    result = await gc.delete_unused()
    assert result.removed == [images["a:1"].id, images["b:1"].id] and result.shortfall == ""
    assert await present(node) == set()
