"""Pod GC: which pods each pass picks and in what order, the status patch, and the 40 s
quarantine of missing nodes (a fake pods/nodes client and a FakeClock; no sleeps)."""

from __future__ import annotations

from typing import Any

from kubecore.client.clock import FakeClock
from kubecore.client.errors import NotFound
from kubecore.client.indexer import Indexer
from kubecore.controllers.controller_utils import format_time
from kubecore.controllers.podgc import (
    ORPHAN_CONDITION, PodGCController, failed_status_patch, terminated_to_delete, terminating_on_out_of_service,
    unscheduled_terminating, with_condition,
)

Obj = dict[str, Any]
T0 = 1_700_000_000.0


def pod(name: str, *, phase: str = "Running", created: float = T0, node: str = "n1", deleting: bool = False,
        reason: str | None = None) -> Obj:
    m: Obj = {"name": name, "namespace": "ns", "uid": f"uid-{name}", "creationTimestamp": format_time(created)}
    if deleting:
        m["deletionTimestamp"] = format_time(created + 10)
    status: Obj = {"phase": phase}
    if reason:
        status["reason"] = reason
    return {"metadata": m, "spec": {"nodeName": node} if node else {}, "status": status}


def names(pods: list[Obj]) -> list[str]:
    return [p["metadata"]["name"] for p in pods]


def test_terminated_over_threshold_evicted_then_oldest() -> None:
    pods = [pod("new", phase="Succeeded", created=T0 + 30), pod("old", phase="Failed", created=T0),
            pod("ev", phase="Failed", created=T0 + 60, reason="Evicted"), pod("run"), pod("b", phase="Succeeded"),
            pod("pending", phase="Pending")]
    assert names(terminated_to_delete(pods, 2)) == ["ev", "b"]  # "b" ties with "old": by name
    assert terminated_to_delete(pods, 4) == [] and terminated_to_delete(pods, 0) == []


def test_out_of_service_and_unscheduled() -> None:
    nodes = Indexer()
    nodes.put({"metadata": {"name": "n1"}, "spec": {"taints": [{"key": "node.kubernetes.io/out-of-service",
                                                                 "effect": "NoExecute"}]},
               "status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    nodes.put({"metadata": {"name": "n2"}, "spec": {"taints": [{"key": "node.kubernetes.io/out-of-service"}]},
               "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    pods = [pod("a", deleting=True), pod("b", node="n2", deleting=True), pod("c"),
            pod("d", node="", deleting=True), pod("e", node="")]
    assert names(terminating_on_out_of_service(pods, nodes)) == ["a"]
    assert names(unscheduled_terminating(pods)) == ["d"]


def test_failed_status_patch() -> None:
    assert failed_status_patch(pod("x", phase="Succeeded"), None, now="t") is None
    p = pod("x")
    p["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    patch = failed_status_patch(p, ORPHAN_CONDITION, now="2024-01-01T00:00:00Z")
    assert patch == {"metadata": {"uid": "uid-x"}, "status": {"phase": "Failed", "conditions": [
        {"type": "Ready", "status": "True"},
        {**ORPHAN_CONDITION, "lastTransitionTime": "2024-01-01T00:00:00Z"}]}}
    same = with_condition([{**ORPHAN_CONDITION, "lastTransitionTime": "then"}], ORPHAN_CONDITION, now="now")
    assert same[0]["lastTransitionTime"] == "then"  # unchanged status keeps its transition time


class FakeClient:
    def __init__(self, existing_nodes: set[str]) -> None:
        self.nodes = existing_nodes
        self.calls: list[tuple[str, str]] = []

    async def get(self, name: str, **_: Any) -> Obj:
        self.calls.append(("get", name))
        if name not in self.nodes:
            raise NotFound({"message": "not found"}, code=404)
        return {"metadata": {"name": name}}

    async def patch(self, name: str, patch: Obj, **_: Any) -> Obj:
        self.calls.append(("patch", name))
        return {}

    async def delete(self, name: str, **kw: Any) -> Obj:
        assert kw.get("grace_period_seconds") == 0
        self.calls.append(("delete", name))
        return {}


async def test_orphans_deleted_only_after_quarantine() -> None:
    clock = FakeClock(T0)
    gc = PodGCController(rest=None, informers=None, clock=clock)  # type: ignore[arg-type]
    client = FakeClient({"late"})
    gc.pods = gc.nodes = client  # type: ignore[assignment]
    gc.node_indexer, gc.pod_indexer = Indexer(), Indexer()
    for p in (pod("a", node="gone"), pod("b", node="late"), pod("c", phase="Succeeded", node=""),
              pod("d", phase="Succeeded", node="", created=T0 - 10)):
        gc.pod_indexer.put(p)
    gc.terminated_pod_threshold = 1
    await gc.gc()
    assert client.calls == [("delete", "d")]  # over the threshold (the older one); both node names in quarantine
    client.calls.clear()
    await clock.run_for(40)
    await gc.gc()
    # "late" exists on the server (the cache was just behind): its pod stays; "d" is still cached here
    assert sorted(client.calls) == [("delete", "a"), ("delete", "d"), ("get", "gone"), ("get", "late"),
                                    ("patch", "a")]
