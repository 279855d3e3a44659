"""What the per-pod shortcuts of the scheduler must keep: the Binding call's request, the event's
involvedObject, Bind's all-skipped status, and the in-flight record of a new pod's creation."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from kubecore.scheduler import events as ev
from kubecore.scheduler.apiwrites import ApiWrites, TaskSet, pod_reference
from kubecore.scheduler.interface import CycleState
from kubecore.scheduler.podinfo import Obj
from kubecore.scheduler.status import Code, Status
from tests.unit.scheduler.helpers import build, config, pod, python_profile


class FakeRest:
    """Records `request` calls; answers with a body that is not JSON (the bind must not read it)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Obj, str | None]] = []

    async def request(self, method: str, path: str, *, body: bytes | None = None,
                      content_type: str | None = None, **_: Any) -> object:
        assert body is not None
        self.calls.append((method, path, msgspec.json.decode(body), content_type))
        return object()


def writes(rest: FakeRest) -> ApiWrites:
    return ApiWrites(rest, None, tasks=TaskSet(), lookup=lambda key: None)  # type: ignore[arg-type]


def test_bind_posts_the_binding_and_does_not_read_the_answer() -> None:
    rest = FakeRest()
    p = {"metadata": {"name": "web-1", "namespace": "shop", "uid": "u-1"}, "spec": {}}
    asyncio.run(writes(rest).bind(p, "node-7"))
    assert rest.calls == [("POST", "/api/v1/namespaces/shop/pods/web-1/binding",
                           {"apiVersion": "v1", "kind": "Binding",
                            "metadata": {"name": "web-1", "namespace": "shop", "uid": "u-1"},
                            "target": {"apiVersion": "v1", "kind": "Node", "name": "node-7"}},
                           "application/json")]


def test_bind_without_uid_or_namespace() -> None:
    rest = FakeRest()
    asyncio.run(writes(rest).bind({"metadata": {"name": "a"}}, "n"))
    _, path, body, _ = rest.calls[0]
    assert path == "/api/v1/namespaces/default/pods/a/binding"
    assert body["metadata"] == {"name": "a", "namespace": "default"}


def test_pod_reference_keeps_set_fields_in_order() -> None:
    full = pod_reference({"metadata": {"name": "a", "namespace": "ns", "uid": "u", "resourceVersion": "9"}})
    assert list(full.items()) == [("kind", "Pod"), ("apiVersion", "v1"), ("namespace", "ns"), ("name", "a"),
                                  ("uid", "u"), ("resourceVersion", "9")]
    assert pod_reference({"metadata": {"name": "a", "uid": ""}}) == {
        "kind": "Pod", "apiVersion": "v1", "namespace": "default", "name": "a"}
    assert pod_reference({}) == {"kind": "Pod", "apiVersion": "v1", "namespace": "default"}


class Skipper:
    def __init__(self, name: str) -> None:
        self.name = name
        self.calls = 0

    async def bind(self, state: CycleState, p: Obj, node: str) -> Status | None:
        self.calls += 1
        return Status(Code.SKIP)


def test_bind_with_every_plugin_skipping_is_skip() -> None:
    core, _, _ = build(config([python_profile()]))
    fw = core.frameworks["default-scheduler"]
    fw.plugins.bind = [Skipper("A"), Skipper("B")]  # type: ignore[list-item]
    st = asyncio.run(fw.run_bind(CycleState(), pod("p"), "n0"))
    assert st is not None and st.code is Code.SKIP
    assert [pl.calls for pl in fw.plugins.bind] == [1, 1]  # type: ignore[attr-defined]
    fw.plugins.bind = []
    st = asyncio.run(fw.run_bind(CycleState(), pod("p"), "n0"))
    assert st is not None and st.code is Code.SKIP


def test_a_new_pod_and_a_bound_one_are_recorded_for_the_pods_in_flight() -> None:
    core, _, _ = build(config([python_profile("Coscheduling")]))  # it listens to both events
    q = core.queue
    assert q._pod_add_matters and not q._unschedulable.on_pod_add and not q._unschedulable.on_topology
    q.add(pod("first"))
    popped = q.pop()
    assert popped is not None and popped.key == "default/first"
    q.add(pod("second"))
    q.assigned_pod_added(pod("bound", node_name="n0"))
    seen = [(e[1], e[3]["metadata"]["name"]) for e in q._inflight.events_for("default/first")]
    assert seen == [(ev.EVENT_UNSCHEDULED_POD_ADD, "second"), (ev.EVENT_ASSIGNED_POD_ADD, "bound")]
    q.done("default/first")
    q.add(pod("third"))  # nothing in flight: nothing recorded
    assert q._inflight.recorded == 0
