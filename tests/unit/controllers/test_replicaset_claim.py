"""Claiming pods (refmanager, upstream's PodControllerRefManager): every row of the module's table,
the adopt/release patches, the once-per-pass adoption recheck, and ignored 404/422 on release."""

from __future__ import annotations

import pytest

from kubecore.client.errors import Conflict, Invalid, NotFound
from kubecore.controllers.controller_utils import selector_from_label_selector
from kubecore.controllers.refmanager import AggregateError, CannotAdopt, PodControllerRefManager, recheck_deletion_timestamp
from tests.unit.controllers.test_replicaset_fixtures import RS_UID, FakePodControl, api_error, make_pod, make_rs

SELECTOR = selector_from_label_selector({"matchLabels": {"app": "web"}})


def manager(control: FakePodControl, *, deleting: bool = False, can_adopt: object = None) -> PodControllerRefManager:
    return PodControllerRefManager(control, make_rs(deleting=deleting), SELECTOR, api_version="apps/v1",
                                   kind="ReplicaSet", can_adopt=can_adopt)  # type: ignore[arg-type]


async def test_claim_table() -> None:
    control = FakePodControl()
    pods = [
        make_pod("theirs", owner_uid="someone-else"),
        make_pod("ours", owner_uid=RS_UID),
        make_pod("ours-unmatched", owner_uid=RS_UID, labels={"app": "db"}),
        make_pod("orphan", labels={"app": "web", "extra": "x"}),
        make_pod("orphan-unmatched", labels={"app": "db"}),
        make_pod("orphan-deleting", deleting=True),
    ]
    claimed, err = await manager(control).claim_pods(pods)
    assert err is None
    assert [p["metadata"]["name"] for p in claimed] == ["ours", "orphan"]
    assert [(name, patch) for _, name, patch in control.patches] == [
        ("ours-unmatched", {"metadata": {"ownerReferences": [{"$patch": "delete", "uid": RS_UID}],
                                         "uid": "uid-ours-unmatched"}}),
        ("orphan", {"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                                                      "uid": RS_UID, "controller": True,
                                                      "blockOwnerDeletion": True}],
                                 "uid": "uid-orphan"}}),
    ]


async def test_a_deleting_controller_keeps_what_it_has_and_touches_nothing() -> None:
    control = FakePodControl()
    pods = [make_pod("ours", owner_uid=RS_UID), make_pod("ours-unmatched", owner_uid=RS_UID, labels={"app": "db"}),
            make_pod("orphan")]
    claimed, err = await manager(control, deleting=True).claim_pods(pods)
    assert err is None and [p["metadata"]["name"] for p in claimed] == ["ours"]
    assert control.patches == []


async def test_can_adopt_runs_once_and_refusal_fails_every_adoption() -> None:
    control = FakePodControl()
    calls = 0

    async def refuse() -> None:
        nonlocal calls
        calls += 1
        raise CannotAdopt("being deleted")

    claimed, err = await manager(control, can_adopt=refuse).claim_pods([make_pod("o1"), make_pod("o2"),
                                                                        make_pod("mine", owner_uid=RS_UID)])
    assert calls == 1
    assert [p["metadata"]["name"] for p in claimed] == ["mine"]
    assert isinstance(err, AggregateError) and len(err.errors) == 2
    assert all(isinstance(e, CannotAdopt) for e in err.errors)
    assert control.patches == []


async def test_adoption_errors_are_collected_not_found_ignored() -> None:
    control = FakePodControl()
    control.fail_patch = {"gone": api_error(NotFound), "taken": api_error(Conflict)}
    claimed, err = await manager(control).claim_pods([make_pod("gone"), make_pod("taken"), make_pod("fine")])
    assert [p["metadata"]["name"] for p in claimed] == ["fine"]
    assert isinstance(err, AggregateError) and [type(e) for e in err.errors] == [Conflict]


async def test_release_ignores_not_found_and_invalid_but_not_conflict() -> None:
    control = FakePodControl()
    control.fail_patch = {"a": api_error(NotFound), "b": api_error(Invalid), "c": api_error(Conflict)}
    pods = [make_pod(n, owner_uid=RS_UID, labels={"app": "db"}) for n in ("a", "b", "c")]
    claimed, err = await manager(control).claim_pods(pods)
    assert claimed == []
    assert isinstance(err, AggregateError) and [type(e) for e in err.errors] == [Conflict]


@pytest.mark.parametrize("fresh,ok", [
    ({"metadata": {"uid": RS_UID}}, True),
    ({"metadata": {"uid": "another"}}, False),
    ({"metadata": {"uid": RS_UID, "deletionTimestamp": "2024-01-01T00:00:00Z"}}, False),
])
async def test_recheck_deletion_timestamp(fresh: dict, ok: bool) -> None:  # type: ignore[type-arg]
    async def get() -> dict:  # type: ignore[type-arg]
        return fresh

    check = recheck_deletion_timestamp(get, uid=RS_UID)
    if ok:
        await check()
    else:
        with pytest.raises(CannotAdopt):
            await check()


async def test_recheck_wraps_get_errors() -> None:
    async def get() -> dict:  # type: ignore[type-arg]
        raise api_error(NotFound)

    with pytest.raises(CannotAdopt, match="can't recheck"):
        await recheck_deletion_timestamp(get, uid=RS_UID)()
