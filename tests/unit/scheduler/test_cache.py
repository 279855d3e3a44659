"""The cache's pod states (assume, forget, finish binding, expiry) and its native mirror."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from kubecore.client.clock import FakeClock
from kubecore.scheduler.cache import Cache, CacheError
from kubecore.scheduler.podinfo import with_node_name
from tests.unit.scheduler.helpers import needs_native, node, pod


class RecordingSnapshot:
    """Records the native calls; enough of NativeSchedSnapshot for the cache."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.pods: dict[str, str] = {}
        self.nodes: set[str] = set()

    def set_node(self, node_json: bytes) -> None:
        name = msgspec.json.decode(node_json)["metadata"]["name"]
        self.nodes.add(name)
        self.calls.append(("set_node", name))

    def remove_node(self, name: str) -> bool:
        self.nodes.discard(name)
        self.calls.append(("remove_node", name))
        return True

    def add_pod(self, key: str, pod_json: bytes, node_name: str) -> None:
        self.pods[key] = node_name
        self.calls.append(("add_pod", key, node_name))

    def remove_pod(self, key: str) -> bool:
        self.calls.append(("remove_pod", key))
        return self.pods.pop(key, None) is not None


def make(ttl: float = 0.0) -> tuple[Cache, RecordingSnapshot, FakeClock]:
    clock = FakeClock()
    snap = RecordingSnapshot()
    cache = Cache(clock=clock, snapshot=snap, assumed_ttl=ttl)  # type: ignore[arg-type]
    cache.add_node(node("n1"))
    cache.add_node(node("n2"))
    return cache, snap, clock


def test_assume_counts_the_pod_until_forgotten() -> None:
    cache, snap, _ = make()
    cache.assume_pod(with_node_name(pod("a"), "n1"), "n1")
    assert cache.is_assumed("default/a") and snap.pods == {"default/a": "n1"}
    ni = cache.node_info("n1")
    assert ni is not None and list(ni.pods) == ["default/a"]
    with pytest.raises(CacheError, match="is in the cache, so can't be assumed"):
        cache.assume_pod(with_node_name(pod("a"), "n2"), "n2")
    with pytest.raises(CacheError, match="was assumed on n2 but assigned to n1"):
        cache.forget_pod("default/a", "n2")
    cache.forget_pod("default/a", "n1")
    assert len(cache) == 0 and snap.pods == {}
    with pytest.raises(CacheError, match="wasn't assumed so cannot be forgotten"):
        cache.forget_pod("default/a")


def test_bound_pod_confirms_the_assumed_one() -> None:
    cache, snap, _ = make()
    cache.assume_pod(with_node_name(pod("a"), "n1"), "n1")
    calls = len(snap.calls)
    cache.add_pod(pod("a", node_name="n1"))
    assert not cache.is_assumed("default/a") and cache.pod_node("default/a") == "n1"
    assert len(snap.calls) == calls  # same node: the kernels already count it
    with pytest.raises(CacheError, match="was already in added state"):
        cache.add_pod(pod("a", node_name="n1"))
    with pytest.raises(CacheError, match="wasn't assumed so cannot be forgotten"):
        cache.forget_pod("default/a")


def test_bound_elsewhere_moves_the_pod() -> None:
    cache, snap, _ = make()
    cache.assume_pod(with_node_name(pod("a"), "n1"), "n1")
    cache.add_pod(pod("a", node_name="n2"))
    assert snap.pods == {"default/a": "n2"} and cache.pod_node("default/a") == "n2"


def test_assumed_pods_expire_only_after_binding_finished_and_ttl() -> None:
    cache, snap, clock = make(ttl=30.0)
    cache.assume_pod(with_node_name(pod("a"), "n1"), "n1")
    clock.advance(100)
    assert cache.cleanup_assumed_pods() == []  # binding not finished: never expires
    cache.finish_binding("default/a")
    clock.advance(30)
    assert cache.cleanup_assumed_pods() == []
    clock.advance(0.1)
    assert cache.cleanup_assumed_pods() == ["default/a"]
    assert len(cache) == 0 and snap.pods == {}


def test_zero_ttl_never_expires() -> None:
    cache, _, clock = make(ttl=0.0)
    cache.assume_pod(with_node_name(pod("a"), "n1"), "n1")
    cache.finish_binding("default/a")
    clock.advance(10 ** 6)
    assert cache.cleanup_assumed_pods() == [] and cache.is_assumed("default/a")


def test_updates_reach_the_kernels_only_when_they_matter() -> None:
    cache, snap, _ = make()
    old = pod("a", node_name="n1")
    cache.add_pod(old)
    calls = len(snap.calls)
    status_only = {**old, "status": {"phase": "Running"}}
    cache.update_pod(old, status_only)
    assert len(snap.calls) == calls
    relabelled = {**status_only, "metadata": {**old["metadata"], "labels": {"app": "x"}}}
    cache.update_pod(status_only, relabelled)
    assert snap.calls[-1] == ("add_pod", "default/a", "n1")
    with pytest.raises(CacheError, match="assumed pod default/b should not be updated"):
        cache.assume_pod(with_node_name(pod("b"), "n1"), "n1")
        cache.update_pod(pod("b"), pod("b"))


def test_pods_on_unknown_nodes_wait_for_the_node() -> None:
    cache, snap, _ = make()
    cache.add_pod(pod("a", node_name="n9"))
    assert "default/a" not in snap.pods and cache.node_info("n9") is None
    cache.add_node(node("n9"))
    assert snap.pods["default/a"] == "n9"
    cache.remove_node("n9")
    assert "default/a" not in snap.pods and cache.pod_node("default/a") == "n9"
    cache.remove_pod(pod("a", node_name="n9"))
    assert cache.node_names() == ["n1", "n2"] and len(cache) == 0


def test_label_index() -> None:
    cache, _, _ = make()
    cache.add_pod(pod("a", node_name="n1", labels={"grp": "x"}))
    cache.add_label_index("grp")
    cache.assume_pod(with_node_name(pod("b", labels={"grp": "x"}), "n2"), "n2")
    cache.add_pod(pod("c", node_name="n1", labels={"grp": "x"}, namespace="other"))
    assert cache.pods_with_label("default", "grp", "x") == {"default/a", "default/b"}
    cache.forget_pod("default/b")
    assert cache.pods_with_label("default", "grp", "x") == {"default/a"}


@needs_native
def test_native_snapshot_follows_the_cache() -> None:
    from kubecore import _native
    snap = _native.NativeSchedSnapshot(seed=1)
    cache = Cache(clock=FakeClock(), snapshot=snap)
    cache.add_node(node("n1", cpu="2"))
    cache.add_pod(pod("a", cpu="500m", node_name="n1"))
    cache.assume_pod(with_node_name(pod("b", cpu="1"), "n1"), "n1")
    assert snap.requested("n1")["cpu"] == 1500 and snap.pod_count() == 2
    cache.forget_pod("default/b")
    assert snap.requested("n1")["cpu"] == 500
    cache.remove_pod(pod("a", node_name="n1"))
    assert snap.requested("n1")["cpu"] == 0 and snap.pod_count() == 0
