"""The node lifecycle controller's monitor and tainting passes with a fake clock and in-memory
clients standing in for the API server (the caches are updated as an informer would): a node
that stops renewing its Lease goes Unknown after the grace period, its pods become not ready,
it is tainted unreachable:NoExecute with timeAdded from the clock, and the taint goes when it
reports Ready again."""

from __future__ import annotations

import copy
from typing import Any, cast

from kubecore.client.clock import FakeClock
from kubecore.client.indexer import Indexer
from kubecore.controllers.base import ControllerContext
from kubecore.controllers.controller_utils import format_time
from kubecore.controllers.nodelifecycle import NodeLifecycleController
from kubecore.controllers.nodelifecycle_eviction import NODE_NAME_INDEX, node_name_index

Obj = dict[str, Any]
UNREACHABLE = "node.kubernetes.io/unreachable"


class FakeClient:
    """get / update_status / patch (merge) on one indexer, as the API server plus informer would."""

    def __init__(self, indexer: Indexer) -> None:
        self.indexer = indexer
        self.writes: list[tuple[str, str]] = []

    def _key(self, name: str, namespace: str | None) -> str:
        return f"{namespace}/{name}" if namespace else name

    async def get(self, name: str, *, namespace: str | None = None) -> Obj:
        obj = self.indexer.get_by_key(self._key(name, namespace))
        assert obj is not None
        return copy.deepcopy(obj)

    async def update_status(self, obj: Obj) -> Obj:
        self.writes.append(("status", obj["metadata"]["name"]))
        self.indexer.put(obj)
        return obj

    async def patch(self, name: str, body: Obj, *, patch_type: str, namespace: str | None = None) -> Obj:
        assert patch_type == "merge"
        obj = await self.get(name, namespace=namespace)
        self.writes.append(("patch", name))
        for section, fields in body.items():
            if section != "metadata":
                obj.setdefault(section, {}).update(fields)
        self.indexer.put(obj)
        return obj


class Events:
    def __init__(self) -> None:
        self.reasons: list[tuple[str, str]] = []

    def event(self, obj: Obj, event_type: str, *, reason: str, message: str, **_: Any) -> None:
        self.reasons.append((reason, message))


def node(name: str, heartbeat: float) -> Obj:
    stamp = format_time(heartbeat)
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "uid": f"uid-{name}",
                                                             "creationTimestamp": stamp},
            "spec": {}, "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                                   "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}]}}


class Harness:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.events = Events()
        ctx = ControllerContext(rest=cast(Any, None), informers=cast(Any, None),
                                recorder=lambda _c: cast(Any, self.events), clock=self.clock,
                                options={"node_monitor_grace_period": 40.0})
        self.c = NodeLifecycleController(ctx)
        self.c.node_indexer = Indexer(key_func=lambda o: str(o["metadata"]["name"]))
        self.c.pod_indexer = Indexer(indexers={NODE_NAME_INDEX: node_name_index})
        self.c.lease_indexer = Indexer()
        self.nodes = FakeClient(self.c.node_indexer)
        self.pods = FakeClient(self.c.pod_indexer)
        self.c.nodes_client, self.c.pods_client = cast(Any, self.nodes), cast(Any, self.pods)
        for name in ("lost", "fine"):
            self.c.node_indexer.put(node(name, self.clock.now()))
            self.renew(name)
        self.c.pod_indexer.put({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "lost"},
                                "status": {"conditions": [{"type": "Ready", "status": "True",
                                                           "lastTransitionTime": format_time(self.clock.now())}]}})

    def renew(self, name: str) -> None:
        self.c.lease_indexer.put({"metadata": {"name": name, "namespace": "kube-node-lease"},
                                  "spec": {"renewTime": format_time(self.clock.now())}})

    async def seconds(self, n: int) -> None:
        """`n` seconds of 1 s monitor passes, the "fine" node renewing its lease throughout."""
        for _ in range(n):
            self.clock.advance(1.0)
            self.renew("fine")
            await self.c.monitor_node_health()
            await self.c.no_execute_tainting_pass()

    def get(self, name: str) -> Obj:
        obj = self.c.node_indexer.get_by_key(name)
        assert obj is not None
        return obj


async def test_silent_node_goes_unknown_its_pods_not_ready_and_it_is_tainted() -> None:
    h = Harness()
    await h.c.monitor_node_health()
    assert [r for r, _ in h.events.reasons] == ["RegisteredNode", "RegisteredNode"]
    await h.seconds(40)
    assert ("status", "lost") not in h.nodes.writes  # not yet past the grace period
    await h.seconds(1)
    lost = h.get("lost")
    ready = lost["status"]["conditions"][0]
    assert (ready["status"], ready["reason"]) == ("Unknown", "NodeStatusUnknown")
    assert ready["lastTransitionTime"] == format_time(h.clock.now())
    pod = h.c.pod_indexer.get_by_key("ns/p")
    assert pod is not None and pod["status"]["conditions"][0]["status"] == "False"
    assert ("NodeNotReady", "Node lost status is now: NodeNotReady") in h.events.reasons
    assert ("NodeNotReady", "Node is not ready") in h.events.reasons
    await h.seconds(1)  # the next pass observes Unknown and queues the node; the tainting pass taints it
    taints = h.get("lost")["spec"]["taints"]
    assert taints == [{"key": UNREACHABLE, "effect": "NoExecute", "timeAdded": format_time(h.clock.now())}]
    assert h.get("fine")["status"]["conditions"][0]["status"] == "True" and not h.get("fine")["spec"].get("taints")

    h.c.node_indexer.put(node("lost", h.clock.now()) | {"spec": {"taints": taints}})  # the kubelet is back
    h.renew("lost")
    await h.seconds(1)
    assert not h.get("lost")["spec"].get("taints")
