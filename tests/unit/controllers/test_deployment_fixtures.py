"""An in-memory world for the Deployment controller's unit tests: Deployments and ReplicaSets in
informer indexers that the fake clients write through (so the cache is never behind), a fake
clock, and a stand-in for the ReplicaSet controller (`settle`: each ReplicaSet's status catches
up with its spec, its pods ready and available or not)."""

from __future__ import annotations

import itertools
from typing import Any, cast

from kubecore.controllers.controller_utils import (
    CONTROLLER_UID_INDEX, OWNER_INDEX, controller_uid_index, namespace_owner_index,
)
from kubecore.controllers.podview import POD_OWNER_INDEX, pod_owner_index
from kubecore.client.clock import FakeClock
from kubecore.client.errors import AlreadyExists, Conflict, NotFound
from kubecore.client.factory import SharedInformerFactory
from kubecore.client.indexer import Indexer
from kubecore.client.rest import RestClient
from kubecore.controllers.controller_utils import format_time
from kubecore.controllers.deployment import DeploymentController
from kubecore.controllers.deployment_sync import DeploymentSync
from kubecore.controllers.deployment_util import deep_copy

Obj = dict[str, Any]
NOW = 1_700_000_000.0
D_UID = "d-uid-1"


def status_error(cls: type[Exception], code: int, reason: str) -> Exception:
    status = {"kind": "Status", "reason": reason, "code": code, "message": reason}
    return cls(status, code=code)  # type: ignore[call-arg]


def make_deployment(*, replicas: int = 3, image: str = "nginx:1", strategy: Obj | None = None,
                    name: str = "web", generation: int = 1, **spec: Any) -> Obj:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default", "uid": D_UID, "generation": generation,
                     "resourceVersion": "1", "creationTimestamp": format_time(NOW - 100)},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": image}]}},
                 "strategy": strategy if strategy is not None else
                 {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
                 "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600, **spec},
        "status": {},
    }


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def event(self, obj: Obj, event_type: str, *, reason: str, message: str,
              annotations: dict[str, str] | None = None, field_path: str = "") -> None:
        self.events.append((event_type, reason, message))

    def messages(self, reason: str = "ScalingReplicaSet") -> list[str]:
        return [m for _, r, m in self.events if r == reason]


class _Store:
    """Writes land in an indexer, with resourceVersion checks like the API server's."""

    def __init__(self, world: World, indexer: Indexer) -> None:
        self.world = world
        self.indexer = indexer

    def _key(self, name: str) -> str:
        return f"default/{name}"

    def _check_rv(self, obj: Obj) -> Obj:
        current = self.indexer.get_by_key(self._key(obj["metadata"]["name"]))
        if current is None:
            raise status_error(NotFound, 404, "NotFound")
        if obj["metadata"].get("resourceVersion") != current["metadata"].get("resourceVersion"):
            raise status_error(Conflict, 409, "Conflict")
        return current

    def _store(self, obj: Obj) -> Obj:
        obj = deep_copy(obj)
        obj["metadata"]["resourceVersion"] = str(next(self.world.rv))
        self.indexer.put(obj)
        return deep_copy(obj)

    async def get(self, name: str, *, namespace: str | None = None) -> Obj:
        got = self.indexer.get_by_key(self._key(name))
        if got is None:
            raise status_error(NotFound, 404, "NotFound")
        return deep_copy(got)


class FakeReplicaSets(_Store):
    async def create(self, rs: Obj) -> Obj:
        if self.indexer.get_by_key(self._key(rs["metadata"]["name"])) is not None:
            raise status_error(AlreadyExists, 409, "AlreadyExists")
        if self.world.fail_creates:
            raise status_error(Conflict, 500, "InternalError")
        rs = deep_copy(rs)
        self.world.clock.advance(1)
        rs["metadata"].update(uid=f"rs-uid-{next(self.world.uids)}", generation=1,
                              creationTimestamp=format_time(self.world.clock.now()))
        self.world.writes.append(("create", rs["metadata"]["name"], rs["spec"]["replicas"]))
        return self._store(rs)

    async def update(self, rs: Obj) -> Obj:
        current = self._check_rv(rs)
        rs = deep_copy(rs)
        rs["status"] = current.get("status") or {}
        if rs["spec"] != current["spec"]:
            rs["metadata"]["generation"] = int(current["metadata"].get("generation") or 0) + 1
        self.world.writes.append(("scale", rs["metadata"]["name"], rs["spec"]["replicas"]))
        return self._store(rs)

    async def delete(self, name: str, *, namespace: str | None = None) -> Obj:
        if self.indexer.get_by_key(self._key(name)) is None:
            raise status_error(NotFound, 404, "NotFound")
        self.indexer.delete_key(self._key(name))
        self.world.writes.append(("delete", name, 0))
        return {}

    async def patch(self, name: str, patch: Obj, **_: Any) -> Obj:
        current = await self.get(name)
        current["metadata"]["ownerReferences"] = patch["metadata"]["ownerReferences"]
        return self._store(current)


class FakeDeployments(_Store):
    async def update_status(self, d: Obj) -> Obj:
        current = deep_copy(self._check_rv(d))
        current["status"] = deep_copy(d.get("status") or {})
        current["metadata"]["annotations"] = dict(d["metadata"].get("annotations") or {})
        self.world.status_writes += 1
        return self._store(current)

    async def update(self, d: Obj) -> Obj:
        current = self._check_rv(d)
        d = deep_copy(d)
        d["status"] = current.get("status") or {}
        if d["spec"] != current["spec"] or d["metadata"].get("annotations") != current["metadata"].get("annotations"):
            d["metadata"]["generation"] = int(current["metadata"].get("generation") or 0) + 1
        return self._store(d)


class World:
    def __init__(self, d: Obj) -> None:
        self.clock = FakeClock(NOW)
        self.rv = itertools.count(2)
        self.uids = itertools.count(1)
        self.writes: list[tuple[str, str, int]] = []
        self.status_writes = 0
        self.fail_creates = False
        self.recorder = Recorder()
        self.c = DeploymentController(rest=cast(RestClient, None), informers=cast(SharedInformerFactory, None),
                                      recorder=self.recorder, clock=self.clock)
        self.c.d_indexer = Indexer()
        self.c.rs_indexer = Indexer(indexers={CONTROLLER_UID_INDEX: controller_uid_index,
                                              OWNER_INDEX: namespace_owner_index})
        self.c.pod_indexer = Indexer(indexers={POD_OWNER_INDEX: pod_owner_index})
        self.rs_client = FakeReplicaSets(self, self.c.rs_indexer)
        self.d_client = FakeDeployments(self, self.c.d_indexer)
        self.c.rs_client = self.rs_client  # type: ignore[assignment]
        self.c.d_client = self.d_client  # type: ignore[assignment]
        self.c.ops = DeploymentSync(rs_client=self.rs_client, d_client=self.d_client,  # type: ignore[arg-type]
                                    recorder=self.recorder, clock=self.clock, rs_lookup=self.c.rs_indexer.get_by_key,
                                    enqueue_after=lambda k, t: None, enqueue_rate_limited=lambda k: None)
        self.c.d_indexer.put(d)

    @property
    def d(self) -> Obj:
        got = self.c.d_indexer.get_by_key("default/web")
        assert got is not None
        return got

    def rses(self) -> list[Obj]:
        return sorted(self.c.rs_indexer.list(), key=lambda r: r["metadata"]["creationTimestamp"])

    def sizes(self) -> list[int]:
        return [r["spec"]["replicas"] for r in self.rses()]

    def settle(self, *, available: bool = True) -> None:
        """The ReplicaSet controller's part: status.replicas = spec.replicas, all ready/available."""
        for rs in self.rses():
            rs = deep_copy(rs)
            n = rs["spec"]["replicas"]
            rs["status"] = {"replicas": n, "readyReplicas": n if available else 0,
                            "availableReplicas": n if available else 0,
                            "observedGeneration": rs["metadata"]["generation"]}
            rs["metadata"]["resourceVersion"] = str(next(self.rv))
            self.c.rs_indexer.put(rs)

    def edit(self, **spec: Any) -> None:
        d = deep_copy(self.d)
        for k, v in spec.items():
            if k == "image":
                d["spec"]["template"]["spec"]["containers"][0]["image"] = v
            else:
                d["spec"][k] = v
        d["metadata"]["generation"] += 1
        d["metadata"]["resourceVersion"] = str(next(self.rv))
        self.c.d_indexer.put(d)

    async def sync(self) -> None:
        await self.c.sync("default/web")
