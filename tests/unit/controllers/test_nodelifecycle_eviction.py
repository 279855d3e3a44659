"""Taint eviction decisions with a fake clock: immediate deletion without a matching toleration,
deletion after the shortest tolerationSeconds (and not a moment before), the earlier deadline kept
on re-evaluation, cancellation (with its event) when the taint goes, and tolerate-forever."""

from __future__ import annotations

from typing import Any, cast

import pytest

from kubecore.client.clock import FakeClock, settle
from kubecore.client.indexer import Indexer
from kubecore.controllers.base import ControllerContext
from kubecore.controllers.nodelifecycle_eviction import (
    NODE_NAME_INDEX, TaintEvictionController, TimedWorkerQueue, node_name_index,
)

Obj = dict[str, Any]
UNREACHABLE = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def event(self, obj: Obj, event_type: str, *, reason: str, message: str,
              annotations: dict[str, str] | None = None, field_path: str = "") -> None:
        self.seen.append((reason, message))


class Harness:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.events = Events()
        ctx = ControllerContext(rest=cast(Any, None), informers=cast(Any, None),
                                recorder=lambda _c: cast(Any, self.events), clock=self.clock)
        self.c = TaintEvictionController(ctx)
        self.deleted: list[tuple[str, float]] = []
        self.c.queue = TimedWorkerQueue(self._work, clock=self.clock)
        self.c.pod_indexer = Indexer(indexers={NODE_NAME_INDEX: node_name_index})
        self.c.node_indexer = Indexer(key_func=lambda o: str(o["metadata"]["name"]))
        self.start = self.clock.now()

    async def _work(self, key: str, fire_at: float) -> None:
        self.deleted.append((key, self.clock.now() - self.start))

    def node(self, taints: list[Obj]) -> None:
        self.c.node_indexer.put({"metadata": {"name": "n1"}, "spec": {"taints": taints}})
        self.c.handle_node_update("n1")

    def pod(self, name: str, tolerations: list[Obj]) -> None:
        self.c.pod_indexer.put({"metadata": {"name": name, "namespace": "ns"},
                                "spec": {"nodeName": "n1", "tolerations": tolerations}})
        self.c.handle_pod_update("ns", name, "n1")

    def deleted_names(self) -> list[str]:
        return [k for k, _ in self.deleted]


def tolerate(seconds: int | None) -> list[Obj]:
    t: Obj = {"key": UNREACHABLE["key"], "operator": "Exists", "effect": "NoExecute"}
    return [t if seconds is None else {**t, "tolerationSeconds": seconds}]


@pytest.fixture
def h() -> Harness:
    return Harness()


async def test_pod_without_toleration_is_deleted_at_once(h: Harness) -> None:
    h.pod("intolerant", [])
    h.pod("patient", tolerate(30))
    h.node([UNREACHABLE])
    await settle()
    assert h.deleted == [("ns/intolerant", 0.0)]


async def test_pod_is_deleted_after_its_toleration_seconds(h: Harness) -> None:
    h.pod("p", tolerate(30))
    h.pod("q", [*tolerate(60), {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 45}])
    h.node([UNREACHABLE])
    await h.clock.run_for(29.9)
    assert h.deleted == []
    await h.clock.run_for(0.1)
    assert h.deleted == [("ns/p", 30.0)]
    await h.clock.run_for(30)
    assert h.deleted == [("ns/p", 30.0), ("ns/q", 60.0)]  # the first toleration matching a taint is used


async def test_re_evaluation_keeps_the_earlier_deadline(h: Harness) -> None:
    h.pod("p", tolerate(30))
    h.node([UNREACHABLE])
    await h.clock.run_for(10)
    h.node([UNREACHABLE, {"key": "other", "effect": "NoExecute"}])  # taints changed, p does not tolerate "other"
    await settle()
    assert h.deleted_names() == ["ns/p"]  # now deleted at once


async def test_same_toleration_later_does_not_postpone(h: Harness) -> None:
    h.pod("p", tolerate(30))
    h.node([UNREACHABLE])
    await h.clock.run_for(20)
    h.c.process_pod_on_node("ns/p", tolerate(30), [UNREACHABLE], now=h.clock.now())
    await h.clock.run_for(10)
    assert h.deleted == [("ns/p", 30.0)]


async def test_taint_removed_cancels_with_an_event(h: Harness) -> None:
    h.pod("p", tolerate(30))
    h.node([UNREACHABLE])
    await h.clock.run_for(15)
    h.node([])
    await h.clock.run_for(60)
    assert h.deleted == []
    assert ("TaintManagerEviction", "Cancelling deletion of Pod ns/p") in h.events.seen


async def test_pod_deleted_from_the_cache_cancels(h: Harness) -> None:
    h.pod("p", tolerate(30))
    h.node([UNREACHABLE])
    h.c.pod_indexer.delete_key("ns/p")
    h.c.handle_pod_update("ns", "p", "n1")
    await h.clock.run_for(60)
    assert h.deleted == []


async def test_tolerating_forever_is_never_deleted(h: Harness) -> None:
    h.pod("p", tolerate(None))
    h.node([UNREACHABLE])
    await h.clock.run_for(3600)
    assert h.deleted == []


async def test_pod_bound_to_an_untainted_node_is_left_alone(h: Harness) -> None:
    h.node([{"key": "example.com/x", "effect": "NoSchedule"}])  # no NoExecute taint
    h.pod("p", [])
    await h.clock.run_for(10)
    assert h.deleted == [] and h.c.tainted_nodes == {}
