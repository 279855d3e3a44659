"""StatefulSet pod identity, storage, revisions and status helpers, and the claim retention policy
as owner references (upstream's table, row by row)."""

from __future__ import annotations

from typing import Any

import pytest

from kubecore.controllers.statefulset_pvc import claim_owner_refs_for, is_claim_owner_up_to_date, with_owner_refs
from kubecore.controllers.statefulset_utils import (
    REVISION_LABEL, apply_revision, complete_rolling_update, get_patch, identity_matches, inconsistent_status,
    is_member_of, max_unavailable, new_revision, new_stateful_set_pod, new_versioned_stateful_set_pod,
    parent_name_and_ordinal, persistent_volume_claims, pod_in_ordinal_range, storage_matches,
)

Obj = dict[str, Any]


def make_set(*, replicas: int = 3, start: int | None = None, partition: int | None = None,
             retention: tuple[str, str] | None = None, **spec: Any) -> Obj:
    s: Obj = {"replicas": replicas, "serviceName": "svc", "selector": {"matchLabels": {"app": "web"}},
              "template": {"metadata": {"labels": {"app": "web"}, "annotations": {"a": "b"}},
                           "spec": {"containers": [{"name": "c", "image": "nginx:1"}],
                                    "volumes": [{"name": "data", "emptyDir": {}}, {"name": "cfg", "emptyDir": {}}]}},
              "volumeClaimTemplates": [{"metadata": {"name": "data", "labels": {"tier": "disk"}},
                                        "spec": {"accessModes": ["ReadWriteOnce"]}}],
              "updateStrategy": {"type": "RollingUpdate"}, **spec}
    if start is not None:
        s["ordinals"] = {"start": start}
    if partition is not None:
        s["updateStrategy"]["rollingUpdate"] = {"partition": partition}
    if retention is not None:
        s["persistentVolumeClaimRetentionPolicy"] = {"whenDeleted": retention[0], "whenScaled": retention[1]}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "web", "namespace": "ns", "uid": "set-uid", "generation": 2,
                         "annotations": {"note": "x"}},
            "spec": s, "status": {}}


def test_names_and_ordinals() -> None:
    assert parent_name_and_ordinal("web-12") == ("web", 12)
    assert parent_name_and_ordinal("my-web-0") == ("my-web", 0)
    assert parent_name_and_ordinal("web") == ("", -1)
    assert parent_name_and_ordinal("web-99999999999") == ("web", -1)  # not an int32
    s = make_set(start=5)
    assert [pod_in_ordinal_range({"metadata": {"name": f"web-{i}"}}, s) for i in (4, 5, 7, 8)] == \
        [False, True, True, False]
    assert is_member_of(s, {"metadata": {"name": "web-3"}}) and not is_member_of(s, {"metadata": {"name": "webx-3"}})


def test_new_pod_identity_and_storage() -> None:
    s = make_set()
    pod = new_stateful_set_pod(s, 1)
    m = pod["metadata"]
    assert (m["name"], m["namespace"], m["generateName"]) == ("web-1", "ns", "web-")
    assert m["labels"] == {"app": "web", "statefulset.kubernetes.io/pod-name": "web-1",
                           "apps.kubernetes.io/pod-index": "1"}
    assert m["annotations"] == {"a": "b"}
    assert m["ownerReferences"] == [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": "set-uid",
                                     "controller": True, "blockOwnerDeletion": True}]
    assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == ("web-1", "svc")
    assert pod["spec"]["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "data-web-1"}},
                                      {"name": "cfg", "emptyDir": {}}]  # the claim replaces the template's "data"
    m["namespace"] = "ns"
    assert identity_matches(s, pod) and storage_matches(s, pod)
    del m["labels"]["statefulset.kubernetes.io/pod-name"]
    assert not identity_matches(s, pod)
    pod["spec"]["volumes"] = []
    assert not storage_matches(s, pod)
    assert "status" not in pod and s["spec"]["template"]["metadata"]["labels"] == {"app": "web"}  # set untouched


def test_claims() -> None:
    claims = persistent_volume_claims(make_set(), 2)
    claim = claims["data"]
    assert claim["metadata"] == {"name": "data-web-2", "namespace": "ns", "labels": {"tier": "disk", "app": "web"}}
    assert claim["spec"] == {"accessModes": ["ReadWriteOnce"]} and claim["kind"] == "PersistentVolumeClaim"


def test_versioned_pods_follow_the_partition() -> None:
    current, update = make_set(partition=2), make_set(partition=2)
    update["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:2"
    pods = [new_versioned_stateful_set_pod(current, update, current_revision="r1", update_revision="r2", ordinal=i)
            for i in range(3)]
    assert [p["metadata"]["labels"][REVISION_LABEL] for p in pods] == ["r1", "r1", "r2"]
    assert pods[2]["spec"]["containers"][0]["image"] == "nginx:2"
    started = make_set(start=10, partition=1)
    got = [new_versioned_stateful_set_pod(started, started, current_revision="r1", update_revision="r2", ordinal=o)
           for o in (10, 11)]
    assert [p["metadata"]["labels"][REVISION_LABEL] for p in got] == ["r1", "r2"]


def test_revisions_round_trip() -> None:
    s = make_set()
    patch = get_patch(s)
    assert patch["spec"]["template"]["$patch"] == "replace" and "$patch" not in s["spec"]["template"]
    cr = new_revision(s, 4, 0)
    assert cr["revision"] == 4 and cr["metadata"]["annotations"] == {"note": "x"}
    assert cr["metadata"]["labels"]["app"] == "web" and cr["metadata"]["name"].startswith("web-")
    changed = make_set()
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:9"
    restored = apply_revision(changed, cr)
    assert restored["spec"]["template"] == s["spec"]["template"]
    assert changed["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:9"


def test_status_helpers() -> None:
    s = make_set()
    s["status"] = {"observedGeneration": 2, "replicas": 3, "readyReplicas": 3, "currentReplicas": 3,
                   "updatedReplicas": 3, "availableReplicas": 3, "currentRevision": "a", "updateRevision": "a"}
    assert not inconsistent_status(s, dict(s["status"]))
    assert inconsistent_status(s, {**s["status"], "availableReplicas": 2})
    assert inconsistent_status(s, {**s["status"], "observedGeneration": 3})
    st = {"replicas": 3, "readyReplicas": 3, "updatedReplicas": 3, "currentReplicas": 1, "currentRevision": "a",
          "updateRevision": "b"}
    complete_rolling_update(s, st)
    assert (st["currentReplicas"], st["currentRevision"]) == (3, "b")
    st2 = {**st, "readyReplicas": 2, "currentRevision": "a"}
    complete_rolling_update(s, st2)
    assert st2["currentRevision"] == "a"


@pytest.mark.parametrize("value,replicas,want", [(None, 5, 1), (2, 5, 2), ("50%", 5, 2), ("10%", 5, 1)])
def test_max_unavailable(value: Any, replicas: int, want: int) -> None:
    s = make_set(replicas=replicas, partition=0)
    if value is not None:
        s["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] = value
    assert max_unavailable(s) == want


# -- retention policy ------------------------------------------------------------------------------
POD_UID = "pod-uid"


def set_ref(uid: str = "set-uid") -> Obj:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": uid, "controller": True,
            "blockOwnerDeletion": True}


def pod_ref(name: str = "web-4", uid: str = POD_UID) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid, "controller": True,
            "blockOwnerDeletion": True}


def claim(*refs: Obj) -> Obj:
    m: Obj = {"name": "data-web-x", "namespace": "ns"}
    if refs:
        m["ownerReferences"] = list(refs)
    return {"metadata": m}


@pytest.mark.parametrize("deleted,scaled,in_range,want", [
    ("Retain", "Retain", True, []),
    ("Retain", "Retain", False, []),
    ("Delete", "Retain", True, ["set"]),
    ("Delete", "Retain", False, ["set"]),
    ("Retain", "Delete", True, []),
    ("Retain", "Delete", False, ["pod"]),
    ("Delete", "Delete", True, ["set"]),
    ("Delete", "Delete", False, ["pod"]),
])
def test_retention_policy_table(deleted: str, scaled: str, in_range: bool, want: list[str]) -> None:
    s = make_set(replicas=3, retention=(deleted, scaled))
    pod = {"metadata": {"name": "web-1" if in_range else "web-4", "uid": POD_UID, "namespace": "ns"}}
    refs = claim_owner_refs_for(claim(), s, pod)
    assert [("set" if r["kind"] == "StatefulSet" else "pod") for r in refs] == want
    fixed = with_owner_refs(claim(), refs)
    assert is_claim_owner_up_to_date(fixed, s, pod)
    if want:
        assert not is_claim_owner_up_to_date(claim(), s, pod)


def test_stale_and_foreign_owners_are_left_alone() -> None:
    s = make_set(retention=("Delete", "Delete"))
    pod = {"metadata": {"name": "web-4", "uid": POD_UID, "namespace": "ns"}}
    assert is_claim_owner_up_to_date(claim(set_ref(uid="old-set")), s, pod)  # a previous set's claim: hands off
    foreign = {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "cm", "controller": True}
    assert is_claim_owner_up_to_date(claim(foreign), s, pod)  # someone else's controller, no refs of ours
    assert not is_claim_owner_up_to_date(claim(foreign, set_ref()), s, pod)
    assert claim_owner_refs_for(claim(foreign, set_ref()), s, pod) == [foreign]  # ours scrubbed, none added
    non_controller = {**set_ref(), "controller": False}
    assert not is_claim_owner_up_to_date(claim(non_controller), make_set(retention=("Delete", "Retain")), pod)
