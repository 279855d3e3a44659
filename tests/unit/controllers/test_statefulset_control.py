"""The StatefulSet sync algorithm (`StatefulSetControl`) with the real pod control over in-memory
stores whose writes show up in the caches at once: OrderedReady and Parallel creation, claims before
pods, reverse-order scale down, failed pods replaced, partitioned and maxUnavailable rolling
updates, OnDelete, status, and the revision history limit. Time is a fake clock."""

from __future__ import annotations

import copy
import itertools
from typing import Any, cast

from kubecore.client.clock import FakeClock
from kubecore.client.errors import AlreadyExists, NotFound
from kubecore.client.indexer import Indexer
from kubecore.client.resource import ResourceClient
from kubecore.controllers.controller_utils import format_time, selector_from_label_selector
from kubecore.controllers.history import ControllerHistory
from kubecore.controllers.statefulset_control import StatefulSetControl
from kubecore.controllers.statefulset_podcontrol import StatefulPodControl

Obj = dict[str, Any]
NOW = 1_700_000_000.0
SELECTOR = selector_from_label_selector({"matchLabels": {"app": "web"}})
_uids = itertools.count(1)


class Store:
    """One resource: writes land in `indexer` immediately (a cache that is never behind)."""

    def __init__(self, log: list[str], kind: str, *, phase: str | None = None) -> None:
        self.indexer = Indexer()
        self.log, self.kind, self.phase = log, kind, phase

    async def create(self, obj: Obj, *, namespace: str) -> Obj:
        name = obj["metadata"]["name"]
        if self.indexer.get_by_key(f"{namespace}/{name}") is not None:
            raise AlreadyExists({"reason": "AlreadyExists", "message": name}, code=409)
        stored = copy.deepcopy(obj)
        stored["metadata"].update(namespace=namespace, uid=f"uid-{next(_uids)}", resourceVersion="1",
                                  creationTimestamp=format_time(NOW))
        if self.phase:
            stored["status"] = {"phase": self.phase}
        self.indexer.put(stored)
        self.log.append(f"create {self.kind} {name}")
        return stored

    async def update(self, obj: Obj, *, namespace: str) -> Obj:
        self.indexer.put(copy.deepcopy(obj))
        self.log.append(f"update {self.kind} {obj['metadata']['name']}")
        return obj

    async def delete(self, name: str, *, namespace: str) -> Obj:
        if self.indexer.get_by_key(f"{namespace}/{name}") is None:
            raise NotFound({"reason": "NotFound", "message": name}, code=404)
        self.indexer.delete_key(f"{namespace}/{name}")
        self.log.append(f"delete {self.kind} {name}")
        return {}

    async def get(self, name: str, *, namespace: str) -> Obj:
        got = self.indexer.get_by_key(f"{namespace}/{name}")
        if got is None:
            raise NotFound({"reason": "NotFound", "message": name}, code=404)
        return copy.deepcopy(got)


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def event(self, obj: Obj, event_type: str, *, reason: str, message: str,
              annotations: dict[str, str] | None = None, field_path: str = "") -> None:
        self.events.append((reason, message))


class World:
    def __init__(self) -> None:
        self.log: list[str] = []
        self.pods = Store(self.log, "pod", phase="Pending")
        self.claims = Store(self.log, "claim")
        self.revisions = Store(self.log, "revision")
        self.recorder = Recorder()
        self.statuses: list[Obj] = []
        self.clock = FakeClock(NOW)
        pod_control = StatefulPodControl(pods=cast(ResourceClient, self.pods), claims=cast(ResourceClient, self.claims),
                                         pod_indexer=self.pods.indexer, claim_indexer=self.claims.indexer,
                                         recorder=self.recorder)

        async def write_status(set_: Obj, status: Obj) -> None:
            self.statuses.append(status)

        self.control = StatefulSetControl(pod_control=pod_control,
                                          history=ControllerHistory(cast(ResourceClient, self.revisions),
                                                                    self.revisions.indexer),
                                          status_updater=write_status, clock=self.clock)

    def pod_names(self) -> list[str]:
        return sorted(p["metadata"]["name"] for p in self.pods.indexer.list())

    def pod(self, name: str) -> Obj:
        got = self.pods.indexer.get_by_key(f"ns/{name}")
        assert got is not None
        return got

    def set_phase(self, name: str, phase: str, *, ready: bool = True) -> None:
        pod = copy.deepcopy(self.pod(name))
        pod["status"] = {"phase": phase, "conditions": [
            {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": format_time(NOW - 60)}]}
        self.pods.indexer.put(pod)

    async def sync(self, set_: Obj) -> Obj:
        """One sync; the set then reports the status it wrote, as the informer would show."""
        self.log.clear()
        status = await self.control.update_stateful_set(set_, self.pods.indexer.list(), SELECTOR)
        if self.statuses:
            set_["status"] = self.statuses[-1]
        return status


def make_set(replicas: int = 3, *, policy: str = "OrderedReady", image: str = "nginx:1", partition: int | None = None,
             strategy: str = "RollingUpdate", max_unavailable: int | None = None, history_limit: int = 10) -> Obj:
    update: Obj = {"type": strategy}
    if partition is not None or max_unavailable is not None:
        update["rollingUpdate"] = {"partition": partition or 0}
        if max_unavailable is not None:
            update["rollingUpdate"]["maxUnavailable"] = max_unavailable
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "web", "namespace": "ns", "uid": "set-uid", "generation": 1},
            "spec": {"replicas": replicas, "serviceName": "svc", "podManagementPolicy": policy,
                     "selector": {"matchLabels": {"app": "web"}}, "revisionHistoryLimit": history_limit,
                     "updateStrategy": update,
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": image}]}},
                     "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {}}]},
            "status": {}}


def with_image(set_: Obj, image: str) -> Obj:
    out = copy.deepcopy(set_)
    out["spec"]["template"]["spec"]["containers"][0]["image"] = image
    out["metadata"]["generation"] += 1
    return out


async def bring_up(w: World, set_: Obj) -> Obj:
    """Sync and mark pods ready until every replica runs."""
    for _ in range(20):
        await w.sync(set_)
        for name in w.pod_names():
            if w.pod(name)["status"]["phase"] == "Pending":
                w.set_phase(name, "Running")
        if len(w.pod_names()) == set_["spec"]["replicas"] and all(
                w.pod(n)["status"]["phase"] == "Running" for n in w.pod_names()):
            await w.sync(set_)
            return set_
    raise AssertionError("the set never came up")


async def test_ordered_ready_creates_one_pod_at_a_time_claims_first() -> None:
    w, s = World(), make_set()
    await w.sync(s)
    assert w.log == ["create revision " + s["status"]["updateRevision"], "create claim data-web-0", "create pod web-0"]
    await w.sync(s)
    assert w.pod_names() == ["web-0"]  # web-0 is Pending: web-1 waits
    w.set_phase("web-0", "Running", ready=False)
    await w.sync(s)
    assert w.pod_names() == ["web-0"]  # Running but not Ready still blocks
    w.set_phase("web-0", "Running")
    await w.sync(s)
    assert w.pod_names() == ["web-0", "web-1"]
    assert ("SuccessfulCreate", "create Claim data-web-0 Pod web-0 in StatefulSet web success") in w.recorder.events
    assert ("SuccessfulCreate", "create Pod web-0 in StatefulSet web successful") in w.recorder.events
    assert s["status"]["replicas"] == 1 and s["status"]["readyReplicas"] == 1  # counted before the create
    await w.sync(s)
    assert s["status"]["replicas"] == 2 and s["status"]["currentReplicas"] == 2


async def test_parallel_creates_everything_in_one_sync() -> None:
    w, s = World(), make_set(policy="Parallel")
    await w.sync(s)
    assert w.pod_names() == ["web-0", "web-1", "web-2"]
    assert sorted(x for x in w.log if x.startswith("create claim")) == \
        ["create claim data-web-0", "create claim data-web-1", "create claim data-web-2"]


async def test_scale_down_in_reverse_order_one_at_a_time() -> None:
    w = World()
    s = await bring_up(w, make_set())
    s["spec"]["replicas"] = 1
    await w.sync(s)
    assert w.log == ["delete pod web-2"]
    await w.sync(s)
    assert w.log == ["delete pod web-1"]
    await w.sync(s)
    assert w.log == [] and w.pod_names() == ["web-0"] and s["status"]["replicas"] == 1
    assert sorted(c["metadata"]["name"] for c in w.claims.indexer.list()) == ["data-web-0", "data-web-1", "data-web-2"]


async def test_unhealthy_pod_blocks_ordered_scale_down_unless_it_is_the_first() -> None:
    w = World()
    s = await bring_up(w, make_set())
    w.set_phase("web-1", "Running", ready=False)
    w.set_phase("web-2", "Running", ready=False)
    s["spec"]["replicas"] = 1
    await w.sync(s)
    assert w.log == []  # web-2 is unhealthy and web-1 is the first unhealthy pod: wait
    w.set_phase("web-1", "Running")
    await w.sync(s)
    assert w.log == ["delete pod web-2"]  # now web-2 is the first unhealthy pod: it may go


async def test_failed_pod_is_deleted_then_recreated() -> None:
    w = World()
    s = await bring_up(w, make_set())
    w.set_phase("web-1", "Failed", ready=False)
    await w.sync(s)
    assert w.log == ["delete pod web-1"]
    await w.sync(s)
    assert w.log == ["create pod web-1"]  # the claim is still there: only the pod


async def test_partitioned_rolling_update_goes_down_from_the_highest_ordinal() -> None:
    w = World()
    s = await bring_up(w, make_set(partition=1))
    first = s["status"]["currentRevision"]
    s = with_image(s, "nginx:2")
    await w.sync(s)
    second = s["status"]["updateRevision"]
    assert second != first and w.log[-1] == "delete pod web-2"
    assert s["status"]["currentReplicas"] == 2  # the deleted pod no longer counts
    await w.sync(s)
    assert w.log == ["create pod web-2"] and w.pod("web-2")["spec"]["containers"][0]["image"] == "nginx:2"
    await w.sync(s)
    assert w.log == []  # web-2 is not ready yet: web-1 waits
    w.set_phase("web-2", "Running")
    await w.sync(s)
    assert w.log == ["delete pod web-1"]
    await w.sync(s)
    w.set_phase("web-1", "Running")
    await w.sync(s)
    assert w.log == [] and w.pod("web-0")["spec"]["containers"][0]["image"] == "nginx:1"  # below the partition
    st = s["status"]
    assert (st["currentReplicas"], st["updatedReplicas"], st["currentRevision"], st["updateRevision"]) == \
        (1, 2, first, second)
    revisions = {r["metadata"]["name"]: r["revision"] for r in w.revisions.indexer.list()}
    assert revisions == {first: 1, second: 2}


async def test_max_unavailable_deletes_several_at_once() -> None:
    w = World()
    s = await bring_up(w, make_set(policy="Parallel", max_unavailable=2))
    s = with_image(s, "nginx:2")
    await w.sync(s)
    assert sorted(x for x in w.log if x.startswith("delete")) == ["delete pod web-1", "delete pod web-2"]


async def test_on_delete_only_replaces_deleted_pods_and_rollback_reuses_a_revision() -> None:
    w = World()
    s = await bring_up(w, make_set(strategy="OnDelete"))
    first = s["status"]["updateRevision"]
    s = with_image(s, "nginx:2")
    await w.sync(s)
    assert [x for x in w.log if "pod" in x] == []
    await w.pods.delete("web-1", namespace="ns")
    await w.sync(s)
    assert w.log == ["create pod web-1"] and w.pod("web-1")["spec"]["containers"][0]["image"] == "nginx:2"
    s = with_image(s, "nginx:1")  # back to the first template: its revision is renumbered, not recreated
    await w.sync(s)
    assert s["status"]["updateRevision"] == first
    assert sorted(r["revision"] for r in w.revisions.indexer.list()) == [2, 3]


async def test_completed_update_makes_the_update_revision_current_and_truncates_history() -> None:
    w = World()
    s = await bring_up(w, make_set(policy="Parallel", history_limit=0))
    for image in ("nginx:2", "nginx:3"):
        s = with_image(s, image)
        for _ in range(10):
            await w.sync(s)
            for name in w.pod_names():
                w.set_phase(name, "Running")
        assert s["status"]["currentRevision"] == s["status"]["updateRevision"]
        assert s["status"]["updatedReplicas"] == s["status"]["currentReplicas"] == 3
        assert s["status"]["observedGeneration"] == s["metadata"]["generation"]
    assert [r["metadata"]["name"] for r in w.revisions.indexer.list()] == [s["status"]["updateRevision"]]


async def test_nothing_but_status_while_the_set_is_being_deleted() -> None:
    w, s = World(), make_set()
    s["metadata"]["deletionTimestamp"] = format_time(NOW)
    await w.sync(s)
    assert w.pod_names() == [] and s["status"]["replicas"] == 0
