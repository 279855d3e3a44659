"""Pod informer events into the queue: which pod deletions wake the unschedulable pods
(upstream deletePodFromSchedulingQueue)."""

from __future__ import annotations

from kubecore.scheduler.driver import Driver
from kubecore.scheduler.eventhandlers import PodHandlers
from kubecore.scheduler.podinfo import Obj
from kubecore.scheduler.queue import BACKOFF, UNSCHEDULABLE
from kubecore.scheduler.registry import SchedulerCore
from tests.unit.scheduler.helpers import build, config, node, pod


def bound(p: Obj, node_name: str) -> Obj:
    return {**p, "spec": {**p["spec"], "nodeName": node_name}}


async def stuck() -> tuple[SchedulerCore, PodHandlers]:
    """A one-cpu node and a nine-cpu pod NodeResourcesFit rejected, waiting in the unschedulable
    pool (the default profile: Fit registers pod deletions, not additions)."""
    core, _, _ = build(config(), native=True)
    core.cache.add_node(node("n0", cpu="1"))
    handlers = PodHandlers(core)
    handlers.on_add(pod("big", cpu="9"))
    await Driver(core, on_failed=lambda f: None).drain()
    assert core.queue.where("default/big") == UNSCHEDULABLE
    return core, handlers


async def test_a_pending_pod_that_gets_bound_or_is_deleted_wakes_no_one() -> None:
    core, handlers = await stuck()
    small = pod("small")
    handlers.on_add(small)
    handlers.on_update(small, bound(small, "n0"))  # its binding: the pod leaves the queue, nothing freed
    gone = pod("gone")
    handlers.on_add(gone)
    handlers.on_delete(gone)  # a pending pod held nothing
    assert core.queue.where("default/big") == UNSCHEDULABLE
    assert core.queue.where("default/small") is None and core.queue.where("default/gone") is None


async def test_deleting_a_nominated_pending_pod_wakes_pods_of_lower_or_equal_priority() -> None:
    core, handlers = await stuck()
    nominated = {**pod("nominated", priority=5), "status": {"nominatedNodeName": "n0"}}
    handlers.on_add(nominated)
    handlers.on_delete(nominated)
    assert core.queue.where("default/big") == BACKOFF


async def test_the_informers_json_of_a_pending_pod_reaches_the_kernels_without_an_encode() -> None:
    import msgspec

    from kubecore.client.codec import CompactCodec
    from kubecore.client.indexer import Indexer

    core, _, _ = build(config(), native=True)
    core.cache.add_node(node("n0", cpu="4"))
    ix = Indexer(codec=CompactCodec(compress=False))
    handlers = PodHandlers(core, json_of=ix.json_of)
    cached, raw = ix.prepare_raw(msgspec.json.encode(pod("cached")))
    ix.put(cached, raw=raw)
    handlers.on_add(cached)
    handlers.on_add(pod("other"))  # not the informer's object: encoded when the kernels need it
    queued = {k: core.queue.get(k) for k in ("default/cached", "default/other")}
    assert all(p is not None for p in queued.values())
    assert queued["default/cached"].raw is ix.entry("default/cached")  # type: ignore[union-attr]
    assert msgspec.json.decode(queued["default/other"].raw) == pod("other")  # type: ignore[union-attr]
    placed: list[str] = []
    await Driver(core, on_bound=lambda b: placed.append(b.key)).drain()
    assert sorted(placed) == ["default/cached", "default/other"]


class _Spy(PodHandlers):
    """Records which of the handlers' cache and queue calls an update made."""

    def __init__(self, core: SchedulerCore) -> None:
        super().__init__(core)
        self.calls: list[str] = []

    def add_to_cache(self, pod: Obj) -> None:
        self.calls.append("cache.add")

    def update_in_cache(self, old: Obj, new: Obj) -> None:
        self.calls.append("cache.update")

    def delete_from_cache(self, pod: Obj) -> None:
        self.calls.append("cache.delete")

    def update_in_queue(self, old: Obj, new: Obj) -> None:
        self.calls.append("queue.update")

    def delete_from_queue(self, pod: Obj, *, in_binding: bool = False) -> None:
        self.calls.append("queue.delete(in_binding)" if in_binding else "queue.delete")


def _expected(h: PodHandlers, old: Obj, new: Obj) -> list[str]:
    """What upstream's two FilteringResourceEventHandlers do with an update, from the filters."""
    out = []
    was, now = h.for_cache(old), h.for_cache(new)
    out += ["cache.update"] if was and now else ["cache.add"] if now else ["cache.delete"] if was else []
    was, now = h.for_queue(old), h.for_queue(new)
    if was and not now and h.for_cache(new):
        return out + ["queue.delete(in_binding)"]
    return out + (["queue.update"] if was and now else ["queue.add"] if now else ["queue.delete"] if was else [])


def test_an_update_reaches_the_cache_and_the_queue_as_the_two_filters_say() -> None:
    core, _, _ = build(config(), native=True)
    variants: dict[str, Obj] = {
        "pending": pod("p"), "bound": pod("p", node_name="n0"), "other scheduler": pod("p", scheduler="other"),
        "succeeded": {**pod("p"), "status": {"phase": "Succeeded"}},
        "failed and bound": {**pod("p", node_name="n0"), "status": {"phase": "Failed"}},
        "running": {**pod("p", node_name="n0"), "status": {"phase": "Running"}},
        "no spec": {"metadata": {"name": "p", "namespace": "default"}},
    }
    for old_name, old in variants.items():
        for new_name, new in variants.items():
            spy = _Spy(core)
            added: list[str] = []
            spy.core.queue.add = lambda p, raw=None: added.append("queue.add")  # type: ignore[method-assign]
            try:
                spy.on_update(old, new)
            finally:
                del spy.core.queue.add
            assert spy.calls + added == _expected(spy, old, new), (old_name, new_name)
