"""Whole rollouts, one sync at a time, against the in-memory world of test_deployment_fixtures:
the rolling worked example step by step, Recreate waiting for old pods, proportional scaling in
the middle of a rollout, pause, the rollback annotation, revisionHistoryLimit, hash collisions,
and a failing ReplicaSet create reported in the Progressing condition."""

from __future__ import annotations

from typing import Any

from kubecore.client.errors import Conflict
from kubecore.controllers.deployment_progress import PROGRESSING, get_condition
from kubecore.controllers.deployment_util import (
    DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY, DESIRED_REPLICAS_ANNOTATION, MAX_REPLICAS_ANNOTATION, REVISION_ANNOTATION,
    REVISION_HISTORY_ANNOTATION, compute_hash,
)
from tests.unit.controllers.test_deployment_fixtures import World, make_deployment

Obj = dict[str, Any]


async def roll_until_stable(w: World, *, max_syncs: int = 40, limit: int | None = None) -> list[list[int]]:
    """Sync and settle until nothing changes; the ReplicaSet sizes after every sync. A conflict
    (a write from a stale copy) is retried, as the work queue would."""
    history: list[list[int]] = []
    for _ in range(max_syncs):
        before = len(w.writes) + w.status_writes
        try:
            await w.sync()
        except Conflict:
            continue
        w.settle()
        history.append(w.sizes())
        if limit is not None:
            assert sum(w.sizes()) <= limit, history
        if len(w.writes) + w.status_writes == before:
            return history
    raise AssertionError(f"no steady state after {max_syncs} syncs: {history}")


async def test_first_sync_creates_the_new_replica_set_with_revision_1() -> None:
    w = World(make_deployment(replicas=3))
    await w.sync()
    [rs] = w.rses()
    d = w.d
    pod_hash = compute_hash(d["spec"]["template"], None)
    assert rs["metadata"]["name"] == f"web-{pod_hash}"
    assert rs["metadata"]["labels"] == {"app": "web", DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY: pod_hash}
    assert rs["spec"]["selector"] == {"matchLabels": {"app": "web", DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY: pod_hash}}
    assert rs["spec"]["template"]["metadata"]["labels"][DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY] == pod_hash
    assert rs["spec"]["replicas"] == 3
    assert rs["metadata"]["ownerReferences"] == [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                                  "uid": "d-uid-1", "controller": True, "blockOwnerDeletion": True}]
    assert rs["metadata"]["annotations"] == {REVISION_ANNOTATION: "1", DESIRED_REPLICAS_ANNOTATION: "3",
                                             MAX_REPLICAS_ANNOTATION: "4"}
    assert d["metadata"]["annotations"][REVISION_ANNOTATION] == "1"
    cond = get_condition(d["status"], PROGRESSING)
    assert cond is not None and cond["reason"] == "NewReplicaSetCreated"
    assert cond["message"] == f'Created new replica set "web-{pod_hash}"'
    assert w.recorder.messages() == [f"Scaled up replica set web-{pod_hash} to 3"]
    w.settle()
    await w.sync()
    s = w.d["status"]
    assert (s["replicas"], s["updatedReplicas"], s["availableReplicas"], s["observedGeneration"]) == (3, 3, 3, 1)
    cond = get_condition(s, PROGRESSING)
    assert cond is not None and cond["reason"] == "NewReplicaSetAvailable"
    assert get_condition(s, "Available") is not None


async def test_rolling_update_follows_the_worked_example() -> None:
    w = World(make_deployment(replicas=3))
    await roll_until_stable(w)
    w.edit(image="nginx:2")
    history = await roll_until_stable(w, limit=4)  # never more than replicas + maxSurge
    compact = [h for i, h in enumerate(history) if i == 0 or h != history[i - 1]]
    assert compact == [[3, 1], [2, 1], [2, 2], [1, 2], [1, 3], [0, 3]]
    old, new = w.rses()
    assert new["metadata"]["annotations"][REVISION_ANNOTATION] == "2"
    assert w.d["metadata"]["annotations"][REVISION_ANNOTATION] == "2"
    msgs = w.recorder.messages()
    assert f"Scaled up replica set {new['metadata']['name']} to 1" in msgs
    assert f"Scaled down replica set {old['metadata']['name']} to 2 from 3" in msgs
    assert f"Scaled up replica set {new['metadata']['name']} to 2 from 1" in msgs
    s = w.d["status"]
    assert (s["replicas"], s["updatedReplicas"], s["availableReplicas"]) == (3, 3, 3)
    assert get_condition(s, PROGRESSING)["reason"] == "NewReplicaSetAvailable"  # type: ignore[index]


async def test_unavailable_new_pods_stop_the_rollout_at_max_surge() -> None:
    w = World(make_deployment(replicas=3))
    await roll_until_stable(w)
    w.edit(image="broken")
    for _ in range(5):
        await w.sync()
        w.settle(available=False)
    assert w.sizes() == [3, 1]  # the old ReplicaSet keeps every pod while the new one is not available


async def test_recreate_scales_old_to_zero_before_creating_the_new() -> None:
    w = World(make_deployment(replicas=2, strategy={"type": "Recreate"}))
    await roll_until_stable(w)
    w.edit(image="nginx:2")
    await w.sync()
    assert w.sizes() == [0]  # old scaled down; no new ReplicaSet while its pods still run
    await w.sync()
    assert len(w.rses()) == 1  # status.replicas of the old one is still 2
    w.settle()
    await w.sync()
    assert w.sizes() == [0, 2]
    assert w.recorder.messages()[-1].startswith("Scaled up replica set web-") and \
        w.recorder.messages()[-1].endswith(" to 2")


async def test_scaling_in_the_middle_of_a_rollout_is_proportional() -> None:
    w = World(make_deployment(replicas=10, strategy={"type": "RollingUpdate",
                                                     "rollingUpdate": {"maxSurge": 3, "maxUnavailable": 2}}))
    await roll_until_stable(w)
    w.edit(image="nginx:2")
    await w.sync()  # new RS at 3 (13 pods), none available yet
    w.settle(available=False)
    await w.sync()  # old RS shrinks to 8 (minAvailable 8)
    w.settle(available=False)
    await w.sync()  # new RS grows to 5
    w.settle(available=False)
    assert w.sizes() == [8, 5]
    w.edit(replicas=15)
    await w.sync()
    assert w.sizes() == [11, 7]  # 18 allowed, shared by size (see test_deployment_scaling)
    for rs in w.rses():
        assert rs["metadata"]["annotations"][DESIRED_REPLICAS_ANNOTATION] == "15"
        assert rs["metadata"]["annotations"][MAX_REPLICAS_ANNOTATION] == "18"


async def test_paused_deployment_scales_but_does_not_roll() -> None:
    w = World(make_deployment(replicas=3))
    await roll_until_stable(w)
    w.edit(paused=True, image="nginx:2")
    await w.sync()
    assert w.sizes() == [3]  # no new ReplicaSet while paused
    cond = get_condition(w.d["status"], PROGRESSING)
    assert cond is not None and (cond["status"], cond["reason"]) == ("Unknown", "DeploymentPaused")
    w.edit(replicas=5)
    await w.sync()
    assert w.sizes() == [5]
    w.edit(paused=False)
    await roll_until_stable(w)
    assert w.sizes() == [0, 5]


async def test_rollback_annotation_restores_the_old_template() -> None:
    w = World(make_deployment(replicas=2))
    await roll_until_stable(w)
    w.edit(image="nginx:2")
    await roll_until_stable(w)
    d = dict(w.d)
    d["metadata"] = {**d["metadata"], "annotations": {**d["metadata"]["annotations"],
                                                      "deprecated.deployment.rollback.to": "0"}}
    w.c.d_indexer.put(d)
    await w.sync()
    d = w.d
    assert d["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1"
    assert "deprecated.deployment.rollback.to" not in d["metadata"]["annotations"]
    assert ("Normal", "DeploymentRollback", 'Rolled back deployment "web" to revision 1') in w.recorder.events
    await roll_until_stable(w)
    first, second = w.rses()
    assert (first["spec"]["replicas"], second["spec"]["replicas"]) == (2, 0)  # the first ReplicaSet is back
    assert first["metadata"]["annotations"][REVISION_ANNOTATION] == "3"
    assert first["metadata"]["annotations"][REVISION_HISTORY_ANNOTATION] == "1"


async def test_revision_history_limit_deletes_the_oldest_empty_replica_sets() -> None:
    w = World(make_deployment(replicas=1, revisionHistoryLimit=1))
    await roll_until_stable(w)
    first = w.rses()[0]["metadata"]["name"]
    for image in ("nginx:2", "nginx:3"):
        w.edit(image=image)
        await roll_until_stable(w)
    images = [rs["spec"]["template"]["spec"]["containers"][0]["image"] for rs in w.rses()]
    assert images == ["nginx:2", "nginx:3"]  # revision 1 is gone, one old ReplicaSet kept
    assert [(op, name) for op, name, _ in w.writes if op == "delete"] == [("delete", first)]


async def test_hash_collision_bumps_collision_count() -> None:
    w = World(make_deployment(replicas=1))
    d = w.d
    squatter = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": f"web-{compute_hash(d['spec']['template'], None)}", "namespace": "default",
                             "uid": "other", "resourceVersion": "1", "labels": {"other": "x"},
                             "creationTimestamp": "2020-01-01T00:00:00Z"},
                "spec": {"replicas": 0, "selector": {"matchLabels": {"other": "x"}},
                         "template": {"metadata": {"labels": {"other": "x"}}, "spec": {"containers": []}}}}
    w.c.rs_indexer.put(squatter)
    try:
        await w.sync()
    except Exception as e:
        assert type(e).__name__ == "AlreadyExists"
    assert w.d["status"]["collisionCount"] == 1
    await w.sync()
    mine = [rs for rs in w.rses() if rs["metadata"]["uid"] != "other"]
    assert len(mine) == 1 and mine[0]["metadata"]["name"] == f"web-{compute_hash(d['spec']['template'], 1)}"


async def test_failed_create_is_reported() -> None:
    w = World(make_deployment(replicas=1))
    w.fail_creates = True
    try:
        await w.sync()
        raise AssertionError("the sync should fail")
    except Exception as e:
        assert "InternalError" in str(e)
    cond = get_condition(w.d["status"], PROGRESSING)
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "ReplicaSetCreateError")
    assert any(r == "ReplicaSetCreateError" and t == "Warning" for t, r, _ in w.recorder.events)


async def test_min_ready_seconds_is_passed_on_to_the_new_replica_set() -> None:
    w = World(make_deployment(replicas=2, minReadySeconds=5))
    await roll_until_stable(w)
    [rs] = w.rses()
    assert rs["spec"]["minReadySeconds"] == 5
    w.edit(minReadySeconds=7)
    await w.sync()
    [rs] = w.rses()
    assert rs["spec"]["minReadySeconds"] == 7 and rs["spec"]["replicas"] == 2  # the same ReplicaSet, updated


async def test_matching_orphan_replica_set_is_adopted_and_used() -> None:
    w = World(make_deployment(replicas=2))
    template = w.d["spec"]["template"]
    orphan = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
              "metadata": {"name": "web-orphan", "namespace": "default", "uid": "orphan-uid", "resourceVersion": "1",
                           "generation": 1, "labels": {"app": "web"}, "creationTimestamp": "2020-01-01T00:00:00Z"},
              "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": template}}
    w.c.rs_indexer.put(orphan)
    w.settle()
    await roll_until_stable(w)
    [rs] = w.rses()  # no second ReplicaSet: the orphan has the Deployment's template
    assert rs["metadata"]["name"] == "web-orphan"
    assert rs["metadata"]["ownerReferences"][0]["uid"] == "d-uid-1"
    assert rs["metadata"]["annotations"][REVISION_ANNOTATION] == "1"
    cond = get_condition(w.d["status"], PROGRESSING)
    assert cond is not None and cond["reason"] in ("FoundNewReplicaSet", "NewReplicaSetAvailable")
