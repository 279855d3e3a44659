"""The controller's sync and event handlers against in-memory caches and a fake PodControl: creates
in slow-start batches capped at burst_replicas, never over-creates while expectations are pending,
deletes by rank, observes deletions once, routes pod events to owners, writes status only on change."""

from __future__ import annotations

from typing import Any, cast

import pytest

from kubecore.client.clock import FakeClock
from kubecore.client.errors import ApiError, NotFound
from kubecore.client.factory import SharedInformerFactory
from kubecore.client.indexer import Indexer
from kubecore.client.rest import RestClient
from kubecore.controllers.controller_utils import CONTROLLER_UID_INDEX, controller_uid_index
from kubecore.controllers.podview import POD_OWNER_INDEX, pod_owner_index
from kubecore.controllers.replicaset import ReplicaSetController
from kubecore.controllers.replication import ReplicationManager
from tests.unit.controllers.test_replicaset_fixtures import NOW, RS_UID, FakePodControl, api_error, make_pod, make_rs

Obj = dict[str, Any]
KEY = "default/web"


class FakeRsClient:
    def __init__(self, controller: ReplicaSetController) -> None:
        self.controller = controller
        self.status_writes: list[Obj] = []

    async def update_status(self, obj: Obj) -> Obj:
        self.status_writes.append(obj)
        return obj

    async def get(self, name: str, *, namespace: str) -> Obj:
        got = self.controller.rs_indexer.get_by_key(f"{namespace}/{name}")
        if got is None:
            raise api_error(NotFound)
        return got


def make_controller(*, burst: int = 500, rc: bool = False) -> tuple[ReplicaSetController, FakePodControl, FakeRsClient]:
    control = FakePodControl()
    cls = ReplicationManager if rc else ReplicaSetController
    c = cls(rest=cast(RestClient, None), informers=cast(SharedInformerFactory, None), clock=FakeClock(NOW),
            burst_replicas=burst, pod_control=control)
    c.rs_indexer = Indexer(indexers={CONTROLLER_UID_INDEX: controller_uid_index})
    c.pod_indexer = Indexer(indexers={POD_OWNER_INDEX: pod_owner_index})
    client = FakeRsClient(c)
    c.rs_client = client  # type: ignore[assignment]
    return c, control, client


def observe_created(c: ReplicaSetController, control: FakePodControl, *, start: int = 0) -> list[Obj]:
    """Turn what the fake created into cached pods and deliver their add events."""
    pods = []
    for i, (ns, template, ref) in enumerate(control.created[start:], start=start):
        pod = make_pod(f"web-{i}", ns=ns, labels=dict(template["metadata"]["labels"]), owner_uid=ref["uid"],
                       owner_kind=ref["kind"])
        c.pod_indexer.put(pod)
        c._add_pod(pod, False)
        pods.append(pod)
    return pods


async def test_creates_then_waits_for_its_own_pods() -> None:
    c, control, client = make_controller()
    c.rs_indexer.put(make_rs(replicas=5))
    await c.sync(KEY)
    assert control.create_calls == 5
    ns, template, ref = control.created[0]
    assert ns == "default" and template["metadata"]["labels"] == {"app": "web"}
    assert ref == {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": RS_UID, "controller": True,
                   "blockOwnerDeletion": True}
    # the cache has not seen the pods yet: another sync must not create more
    await c.sync(KEY)
    await c.sync(KEY)
    assert control.create_calls == 5
    observe_created(c, control)
    assert c.expectations.satisfied_expectations(KEY)
    await c.sync(KEY)
    assert control.create_calls == 5 and control.deleted == []
    assert client.status_writes[-1]["status"]["replicas"] == 5


async def test_burst_replicas_caps_one_sync() -> None:
    c, control, _ = make_controller(burst=20)
    c.rs_indexer.put(make_rs(replicas=50))
    await c.sync(KEY)
    assert control.create_calls == 20
    observe_created(c, control)
    await c.sync(KEY)
    assert control.create_calls == 40


async def test_create_failure_stops_slow_start_and_sets_condition() -> None:
    c, control, client = make_controller()
    control.fail_create_after = 3  # batches 1, 2 succeed; the batch of 4 fails
    c.rs_indexer.put(make_rs(replicas=10))
    with pytest.raises(ApiError, match="quota exceeded"):
        await c.sync(KEY)
    assert control.create_calls == 7 and len(control.created) == 3
    exp = c.expectations.get_expectations(KEY)
    assert exp is not None and exp.add == 3  # only the successful creates are still expected
    cond = client.status_writes[-1]["status"]["conditions"][0]
    assert (cond["type"], cond["reason"]) == ("ReplicaFailure", "FailedCreate")


async def test_namespace_terminating_is_not_an_error() -> None:
    c, control, _ = make_controller()
    control.fail_create_after = 0
    control.create_error = api_error(ApiError, "terminating", causes=[{"type": "NamespaceTerminating"}])
    c.rs_indexer.put(make_rs(replicas=2))
    await c.sync(KEY)  # does not raise


async def test_scale_down_deletes_by_rank_and_counts_each_deletion_once() -> None:
    c, control, _ = make_controller()
    c.rs_indexer.put(make_rs(replicas=2))
    pods = [make_pod("ready-old", node="n1", ready_since=NOW - 5000, owner_uid=RS_UID),
            make_pod("pending", node="n1", phase="Pending", owner_uid=RS_UID),
            make_pod("unassigned", owner_uid=RS_UID),
            make_pod("ready-new", node="n1", ready_since=NOW - 5, owner_uid=RS_UID)]
    for p in pods:
        c.pod_indexer.put(p)
    await c.sync(KEY)
    assert sorted(n for _, n in control.deleted) == ["pending", "unassigned"]
    await c.sync(KEY)
    assert len(control.deleted) == 2  # waiting for the deletions to be observed
    # graceful deletion: first the deletionTimestamp update, then the delete
    terminating = make_pod("pending", node="n1", phase="Pending", owner_uid=RS_UID, deleting=True, rv="2")
    c.pod_indexer.put(terminating)
    c._update_pod(pods[1], terminating)
    c._delete_pod(terminating)
    exp = c.expectations.get_expectations(KEY)
    assert exp is not None and exp.delete == 1
    c.pod_indexer.delete(pods[2])
    c._delete_pod(pods[2])
    assert c.expectations.satisfied_expectations(KEY)


async def test_failed_delete_is_observed_and_not_found_is_fine() -> None:
    c, control, _ = make_controller()
    control.fail_delete = {"a": api_error(NotFound), "b": api_error(ApiError, "nope")}
    c.rs_indexer.put(make_rs(replicas=0))
    for n in ("a", "b"):
        c.pod_indexer.put(make_pod(n, owner_uid=RS_UID))
    with pytest.raises(ApiError, match="nope"):
        await c.sync(KEY)
    assert c.expectations.satisfied_expectations(KEY)


async def test_terminating_and_finished_pods_do_not_count() -> None:
    c, control, _ = make_controller()
    c.rs_indexer.put(make_rs(replicas=2))
    c.pod_indexer.put(make_pod("done", owner_uid=RS_UID, phase="Succeeded"))
    c.pod_indexer.put(make_pod("going", owner_uid=RS_UID, deleting=True))
    c.pod_indexer.put(make_pod("live", owner_uid=RS_UID))
    await c.sync(KEY)
    assert control.create_calls == 1


async def test_deleting_rs_is_not_managed_and_gone_rs_forgets_expectations() -> None:
    c, control, _ = make_controller()
    c.rs_indexer.put(make_rs(replicas=3, deleting=True))
    await c.sync(KEY)
    assert control.create_calls == 0
    c.expectations.expect_creations(KEY, 3)
    c.rs_indexer.delete_key(KEY)
    await c.sync(KEY)
    assert c.expectations.get_expectations(KEY) is None


async def test_status_written_only_when_changed() -> None:
    c, control, client = make_controller()
    rs = make_rs(replicas=1)
    c.rs_indexer.put(rs)
    c.pod_indexer.put(make_pod("a", owner_uid=RS_UID))
    await c.sync(KEY)
    assert len(client.status_writes) == 1
    c.rs_indexer.put(client.status_writes[-1])
    await c.sync(KEY)
    assert len(client.status_writes) == 1


async def test_pod_events_enqueue_their_owner_or_matching_sets() -> None:
    c, _, _ = make_controller()
    c.rs_indexer.put(make_rs())
    c.rs_indexer.put(make_rs("db", uid="db-uid", selector={"matchLabels": {"app": "db"}},
                             template_labels={"app": "db"}))
    c.rs_indexer.put(make_rs("all", uid="all-uid", selector={}))  # empty selector: never adopts orphans

    def drained() -> set[str]:
        keys = set(c.queue._queue)
        c.queue._queue.clear()
        c.queue._dirty.clear()
        return keys

    c._add_pod(make_pod("orphan", labels={"app": "db"}), False)
    assert drained() == {"default/db"}
    c._add_pod(make_pod("owned", owner_uid=RS_UID), False)
    assert drained() == {KEY}
    c._add_pod(make_pod("stranger", owner_uid="not-ours"), False)
    assert drained() == set()
    old = make_pod("p", labels={"app": "web"}, rv="1")
    new = make_pod("p", labels={"app": "db"}, rv="2")
    c._update_pod(old, new)
    assert drained() == {"default/db"}
    c._update_pod(new, new)  # a resync: same resourceVersion
    assert drained() == set()
    released = make_pod("p", labels={"app": "db"}, rv="3")
    c._update_pod(make_pod("p", owner_uid=RS_UID, labels={"app": "db"}, rv="2"), released)
    assert drained() == {KEY, "default/db"}
    c._delete_pod(make_pod("orphan-gone"))
    assert drained() == set()


async def test_pod_turning_ready_requeues_after_min_ready_seconds() -> None:
    c, _, _ = make_controller()
    c.rs_indexer.put(make_rs(min_ready=10))
    old = make_pod("p", owner_uid=RS_UID, not_ready=True, rv="1")
    new = make_pod("p", owner_uid=RS_UID, ready_since=NOW, rv="2")
    c._update_pod(old, new)
    assert c.queue.waiting == 1
    c.queue.shut_down()


async def test_replication_manager_uses_map_selectors_and_v1_refs() -> None:
    c, control, _ = make_controller(rc=True)
    rc = make_rs(replicas=2)
    rc.update(apiVersion="v1", kind="ReplicationController")
    rc["spec"]["selector"] = {"app": "web"}
    c.rs_indexer.put(rc)
    c.pod_indexer.put(make_pod("orphan"))
    await c.sync(KEY)
    assert control.create_calls == 1
    (_, name, patch), = control.patches
    assert name == "orphan"
    assert patch["metadata"]["ownerReferences"][0]["kind"] == "ReplicationController"
    assert control.created[0][2]["apiVersion"] == "v1"
    assert c.name == "replicationcontroller"


def test_pod_views_keep_what_the_controller_reads() -> None:
    from kubecore.controllers.podview import namespace_pod_views

    ix = Indexer()
    full = make_pod("p", node="n1", ready_since=NOW - 10, owner_uid=RS_UID, cost=3, restarts=2)
    full["metadata"]["managedFields"] = [{"manager": "x", "fieldsV1": {"f:spec": {}}}] * 20
    ix.put(full)
    ix.put(make_pod("other", ns="elsewhere"))
    (view,) = namespace_pod_views(ix, "default")
    want_meta = {k: v for k, v in full["metadata"].items() if k != "managedFields"}
    assert view["metadata"] == want_meta
    assert view["spec"] == {"nodeName": "n1"}
    assert view["status"] == {**full["status"], "containerStatuses": [{"restartCount": 2}]}


def test_owner_index_finds_a_controllers_pods_and_the_orphans_only() -> None:
    from kubecore.controllers.podview import controlled_pod_views, owned_pod_views

    ix = Indexer(indexers={POD_OWNER_INDEX: pod_owner_index})
    for name, ns, owner in [("mine-1", "default", RS_UID), ("mine-2", "default", RS_UID), ("orphan", "default", None),
                            ("theirs", "default", "someone-else"), ("far", "elsewhere", RS_UID)]:
        ix.put(make_pod(name, ns=ns, owner_uid=owner) if owner else make_pod(name, ns=ns))
    names = lambda views: sorted(v["metadata"]["name"] for v in views)  # noqa: E731
    assert names(controlled_pod_views(ix, "default", RS_UID)) == ["mine-1", "mine-2"]
    assert names(owned_pod_views(ix, "default", RS_UID)) == ["mine-1", "mine-2", "orphan"]
    adopted = make_pod("orphan", owner_uid=RS_UID)
    ix.put(adopted)  # re-indexed under its new controller, and its view follows the new entry
    assert names(controlled_pod_views(ix, "default", RS_UID)) == ["mine-1", "mine-2", "orphan"]
    assert names(owned_pod_views(ix, "default", "someone-else")) == ["theirs"]
    ix.delete(adopted)
    assert names(owned_pod_views(ix, "default", RS_UID)) == ["mine-1", "mine-2"]


def test_pod_views_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from kubecore.controllers import podview

    monkeypatch.setattr(podview, "MAX_VIEWS", 3)
    ix = Indexer(indexers={POD_OWNER_INDEX: pod_owner_index})
    for i in range(5):
        ix.put(make_pod(f"p{i}", owner_uid=RS_UID))
    views = podview.controlled_pod_views(ix, "default", RS_UID)
    assert [v["metadata"]["name"] for v in views] == [f"p{i}" for i in range(5)]  # all read, some decoded again
    assert len(podview._VIEWS[ix]) == 3
