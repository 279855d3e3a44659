"""How the disruption controller finds the scale of a pod's controller: the caches for
ReplicationControllers, Deployments (through their ReplicaSet), ReplicaSets and StatefulSets
(UIDs checked), then the /scale subresource of any other kind (fake caches and client)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from kubecore.client.errors import NotFound
from kubecore.client.indexer import Indexer
from kubecore.controllers.disruption import DisruptionController

Obj = dict[str, Any]


def obj(name: str, uid: str, *, replicas: int | None = None, owner: Obj | None = None) -> Obj:
    m: Obj = {"name": name, "namespace": "ns", "uid": uid}
    if owner is not None:
        m["ownerReferences"] = [{**owner, "controller": True}]
    return {"metadata": m, "spec": {} if replicas is None else {"replicas": replicas}}


def ref(kind: str, name: str, uid: str, api_version: str = "apps/v1") -> Obj:
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": True}


@dataclass
class FakeInfo:
    group: str = "example.com"
    resource: str = "widgets"
    subresources: frozenset[str] = frozenset({"scale"})


@dataclass
class FakeScaleClient:
    scales: dict[str, Obj]
    info: FakeInfo = field(default_factory=FakeInfo)

    async def get(self, name: str, *, namespace: str, subresource: str) -> Obj:
        assert subresource == "scale"
        if name not in self.scales:
            raise NotFound({"message": "nope"}, code=404)
        return self.scales[name]


class FakeRest:
    def __init__(self, client: FakeScaleClient) -> None:
        self.client = client

    async def resource(self, api_version: str, name: str) -> FakeScaleClient:
        return self.client


def make(scales: dict[str, Obj] | None = None, subresources: frozenset[str] = frozenset({"scale"})) -> DisruptionController:
    client = FakeScaleClient(scales or {}, FakeInfo(subresources=subresources))
    c = DisruptionController(rest=FakeRest(client), informers=None)  # type: ignore[arg-type]
    c.idx = {k: Indexer() for k in ("pdb", "pod", "rc", "rs", "deploy", "sts")}
    c.idx["deploy"].put(obj("d", "d-uid", replicas=4))
    c.idx["rs"].put(obj("d-rs", "drs-uid", replicas=4, owner=ref("Deployment", "d", "d-uid")))
    c.idx["rs"].put(obj("plain", "rs-uid", replicas=2))
    c.idx["sts"].put(obj("s", "s-uid", replicas=3))
    c.idx["rc"].put(obj("r", "r-uid"))
    return c


def pod(owner: Obj | None) -> Obj:
    return {"metadata": {"name": f"p-{owner['uid'] if owner else 'none'}", "namespace": "ns",
                         **({"ownerReferences": [owner]} if owner else {})}}


async def test_cached_finders() -> None:
    c = make()
    assert await c.controller_scale(ref("ReplicaSet", "d-rs", "drs-uid"), "ns") == ("d-uid", 4)
    assert await c.controller_scale(ref("ReplicaSet", "plain", "rs-uid"), "ns") == ("rs-uid", 2)
    assert await c.controller_scale(ref("StatefulSet", "s", "s-uid"), "ns") == ("s-uid", 3)
    assert await c.controller_scale(ref("ReplicationController", "r", "r-uid", "v1"), "ns") == ("r-uid", 1)
    total, unmanaged = await c.expected_scale([pod(ref("ReplicaSet", "d-rs", "drs-uid")),
                                               pod(ref("StatefulSet", "s", "s-uid")), pod(None)])
    assert (total, unmanaged) == (7, ["p-none"])


async def test_scale_subresource_fallback() -> None:
    c = make({"w": {"metadata": {"uid": "w-uid"}, "spec": {"replicas": 6}}})
    widget = ref("Widget", "w", "w-uid", "example.com/v1")
    assert await c.controller_scale(widget, "ns") == ("w-uid", 6)
    assert await c.controller_scale(ref("Widget", "w", "other-uid", "example.com/v1"), "ns") is None
    with pytest.raises(RuntimeError, match="found no controllers"):
        await c.expected_scale([pod(ref("Widget", "missing", "m-uid", "example.com/v1"))])
    no_scale = make(subresources=frozenset())
    with pytest.raises(RuntimeError, match="widgets.example.com does not implement the scale subresource"):
        await no_scale.controller_scale(ref("Widget", "x", "x-uid", "example.com/v1"), "ns")
