"""Server-side apply and update bookkeeping (kubecore.api.apply, kubecore.api.fieldmanager):
merges, conflicts, forced applies, removal of fields an applier dropped, and the managedFields
every write leaves behind. Times are injected; objects are plain dicts."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from kubecore.api.apply import ApplyConflict, merge
from kubecore.api.errors import StatusError
from kubecore.api.fieldmanager import LAST_APPLIED, FieldManager
from kubecore.api.typefacts import facts_for

T0, T1, T2, T3 = (f"2024-01-01T00:00:0{i}Z" for i in range(4))
CM_FM = FieldManager(group="", version="v1", kind="ConfigMap")
POD = facts_for("", "Pod")


def cm(data: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", **meta}}
    if data is not None:
        obj["data"] = data
    return obj


def entries(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["manager"]: e for e in obj["metadata"].get("managedFields", [])}


def fields(obj: dict[str, Any], manager: str) -> dict[str, Any]:
    out: dict[str, Any] = entries(obj)[manager]["fieldsV1"]
    return out


def created(data: dict[str, str], manager: str = "creator", **meta: Any) -> dict[str, Any]:
    obj = cm(data, namespace="ns", uid="u1", **meta)
    return CM_FM.create(obj, manager, now=T0)


# ---- merge ---------------------------------------------------------------------------------------

SET_MERGES = [  # structured-merge-diff's set merge vectors: live, applied, merged
    (["a", "b", "c"], ["a", "b"], ["a", "b", "c"]),
    (["a", "b"], ["b", "a"], ["b", "a"]),
    (["a", "b", "c"], ["c", "d", "e", "f"], ["a", "b", "c", "d", "e", "f"]),
    (["a", "b", "c", "g", "f"], ["c", "d", "e", "f"], ["a", "b", "c", "g", "d", "e", "f"]),
    (["c", "d", "e", "f"], ["a", "c", "e"], ["a", "c", "d", "e", "f"]),
    (["a", "b", "c", "d"], ["d", "e", "f", "a"], ["b", "c", "d", "e", "f", "a"]),
    (["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"], ["1", "b", "2", "h", "3", "e", "4", "k", "l"],
     ["a", "1", "b", "c", "d", "f", "g", "2", "h", "i", "j", "3", "e", "4", "k", "l"]),
    (["a", "b", "b"], ["c"], ["a", "b", "b", "c"]),
    (["a", "b", "b"], ["b"], ["a", "b"]),
    (["a", "a", "b", "b"], [], ["a", "a", "b", "b"]),
]


@pytest.mark.parametrize("live,applied,want", SET_MERGES)
def test_set_list_merge_order(live: list[str], applied: list[str], want: list[str]) -> None:
    out = merge({"metadata": {"finalizers": live}}, {"metadata": {"finalizers": applied}}, POD)
    assert out["metadata"]["finalizers"] == want


def test_keyed_lists_merge_items_and_atomic_lists_are_replaced() -> None:
    live = {"spec": {"containers": [{"name": "a", "image": "1", "args": ["x", "y"]}, {"name": "b", "image": "1"}],
                     "tolerations": [{"key": "t1"}, {"key": "t2"}]}}
    applied = {"spec": {"containers": [{"name": "a", "image": "2", "args": ["z"]}], "tolerations": [{"key": "t3"}]}}
    out = merge(live, applied, POD)
    assert out["spec"]["containers"] == [{"name": "a", "image": "2", "args": ["z"]}, {"name": "b", "image": "1"}]
    assert out["spec"]["tolerations"] == [{"key": "t3"}]


def test_duplicate_keys_in_the_configuration_are_refused() -> None:
    with pytest.raises(ValueError, match=r'duplicate entries for key \[name="a"\]'):
        merge({}, {"spec": {"containers": [{"name": "a"}, {"name": "a"}]}}, POD)


# ---- updates ------------------------------------------------------------------------------------------


def test_create_records_the_body_against_the_empty_object() -> None:
    obj = created({"a": "1"}, labels={"x": "y"})
    e = entries(obj)["creator"]
    assert (e["operation"], e["apiVersion"], e["time"]) == ("Update", "v1", T0)
    assert e["fieldsV1"] == {"f:data": {".": {}, "f:a": {}}, "f:metadata": {"f:labels": {".": {}, "f:x": {}}}}


def test_create_of_a_pod_keys_containers_without_self_entries_for_value_structs() -> None:
    fm = FieldManager(group="", version="v1", kind="Pod", has_status=True)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "image": "i", "resources": {}}], "restartPolicy": "Always"},
           "status": {"phase": "Pending"}}
    out = fm.create(pod, "kubectl-run", now=T0)
    assert fields(out, "kubectl-run") == {"f:spec": {
        "f:containers": {'k:{"name":"c"}': {".": {}, "f:image": {}, "f:name": {}, "f:resources": {}}},
        "f:restartPolicy": {}}}  # status is reset by the strategy: nobody's


def test_update_takes_changed_fields_from_their_owners() -> None:
    obj = created({"a": "1", "b": "1"})
    new = copy.deepcopy(obj)
    new["data"]["a"] = "2"
    new["data"]["c"] = "3"
    del new["metadata"]["managedFields"]
    out = CM_FM.update(obj, new, "editor", now=T1)
    assert fields(out, "creator") == {"f:data": {".": {}, "f:b": {}}}
    assert fields(out, "editor") == {"f:data": {"f:a": {}, "f:c": {}}}
    assert entries(out)["editor"]["time"] == T1


def test_update_that_changes_nothing_keeps_times() -> None:
    obj = created({"a": "1"})
    out = CM_FM.update(obj, copy.deepcopy(obj), "creator", now=T3)
    assert out["metadata"]["managedFields"] == obj["metadata"]["managedFields"]


def test_untracked_objects_stay_untracked_until_applied() -> None:
    live = cm({"a": "1"}, uid="u1")
    new = cm({"a": "2"}, uid="u1")
    assert "managedFields" not in CM_FM.update(live, new, "m", now=T1)["metadata"]


def test_client_sent_managed_fields() -> None:
    obj = created({"a": "1"})
    # [] resets (and an existing object with no entries records nothing) ...
    reset = copy.deepcopy(obj)
    reset["metadata"]["managedFields"] = []
    assert "managedFields" not in CM_FM.update(obj, reset, "m", now=T1)["metadata"]
    # ... valid entries replace ...
    mine = copy.deepcopy(obj)
    mine["metadata"]["managedFields"] = [{"manager": "mine", "operation": "Update", "apiVersion": "v1",
                                          "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}}}}]
    assert list(entries(CM_FM.update(obj, mine, "m", now=T1))) == ["mine"]
    # ... and invalid ones mean the live object's.
    bad = copy.deepcopy(obj)
    bad["metadata"]["managedFields"] = [{"manager": "x", "operation": "Bogus"}]
    assert CM_FM.update(obj, bad, "m", now=T1)["metadata"]["managedFields"] == obj["metadata"]["managedFields"]


def test_status_subresource_writes_ignore_sent_entries_and_record_the_subresource() -> None:
    fm = FieldManager(group="apps", version="v1", kind="Deployment", subresource="status", has_status=True)
    live = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "uid": "u"}, "status": {}}
    live = FieldManager(group="apps", version="v1", kind="Deployment", has_status=True).create(
        {**live, "spec": {"replicas": 1}}, "c", now=T0)
    new = copy.deepcopy(live)
    new["status"] = {"replicas": 1}
    new["metadata"]["managedFields"] = []
    out = fm.update(live, new, "controller", now=T1)
    e = entries(out)["controller"]
    assert (e["subresource"], e["fieldsV1"]) == ("status", {"f:status": {"f:replicas": {}}})
    assert "c" in entries(out)


def test_update_managers_are_capped_at_ten() -> None:
    obj = created({"k0": "0"})
    for i in range(1, 12):
        new = copy.deepcopy(obj)
        new["data"][f"k{i}"] = str(i)
        obj = CM_FM.update(obj, new, f"m{i:02d}", now=f"2024-01-01T00:00:{i:02d}Z")
    names = [e["manager"] for e in obj["metadata"]["managedFields"]]
    assert len(names) == 10 and "ancient-changes" in names and "creator" not in names and "m01" not in names
    ancient = entries(obj)["ancient-changes"]
    assert ancient["fieldsV1"] == {"f:data": {".": {}, "f:k0": {}, "f:k1": {}, "f:k2": {}}}


# ---- apply --------------------------------------------------------------------------------------------


def test_apply_creates_with_one_apply_entry() -> None:
    out = CM_FM.apply(None, cm({"a": "1"}), "tool", force=False, now=T0)
    assert out["data"] == {"a": "1"}
    assert out["metadata"]["managedFields"] == [{
        "manager": "tool", "operation": "Apply", "apiVersion": "v1", "time": T0, "fieldsType": "FieldsV1",
        "fieldsV1": {"f:data": {"f:a": {}}}}]


def test_conflict_message_and_causes_are_upstreams() -> None:
    live = created({"a": "1", "b": "1"}, manager="kubectl-client-side-apply")
    with pytest.raises(ApplyConflict) as one:
        CM_FM.apply(live, cm({"a": "2"}), "tool", force=False, now=T1)
    assert one.value.code == 409
    assert one.value.status() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using v1: .data.a',
        "reason": "Conflict",
        "details": {"causes": [{"reason": "FieldManagerConflict",
                                "message": 'conflict with "kubectl-client-side-apply" using v1', "field": ".data.a"}]},
        "code": 409}
    other = CM_FM.apply(live, cm(None, labels={"x": "1"}), "labeler", force=False, now=T1)
    with pytest.raises(ApplyConflict) as many:
        CM_FM.apply(other, cm({"a": "2", "b": "2"}, labels={"x": "2"}), "tool", force=False, now=T2)
    assert many.value.message == (
        'Apply failed with 3 conflicts: conflicts with "kubectl-client-side-apply" using v1:\n- .data.a\n- .data.b\n'
        'conflicts with "labeler":\n- .metadata.labels.x')


def test_same_value_is_shared_and_force_takes_ownership() -> None:
    live = CM_FM.apply(None, cm({"a": "1", "b": "1"}), "one", force=False, now=T0)
    shared = CM_FM.apply(live, cm({"a": "1"}), "two", force=False, now=T1)
    assert fields(shared, "one") == {"f:data": {"f:a": {}, "f:b": {}}}
    assert fields(shared, "two") == {"f:data": {"f:a": {}}}
    forced = CM_FM.apply(shared, cm({"b": "2"}), "two", force=True, now=T2)
    assert forced["data"] == {"a": "1", "b": "2"}  # .data.a: one still owns it
    assert fields(forced, "one") == {"f:data": {"f:a": {}}}
    assert fields(forced, "two") == {"f:data": {"f:b": {}}}


def test_dropped_fields_are_removed_unless_someone_else_owns_them() -> None:
    live = CM_FM.apply(None, cm({"a": "1", "b": "1", "c": "1"}, labels={"l": "1"}), "one", force=False, now=T0)
    live = CM_FM.apply(live, cm({"b": "1"}), "two", force=False, now=T1)
    out = CM_FM.apply(live, cm({"c": "1"}), "one", force=False, now=T2)
    assert out["data"] == {"b": "1", "c": "1"}
    assert "labels" not in out["metadata"]
    # A field set by an update is not the applier's to remove.
    updated = copy.deepcopy(out)
    updated["data"]["u"] = "1"
    updated = CM_FM.update(out, updated, "editor", now=T2)
    again = CM_FM.apply(updated, cm({"c": "1"}), "one", force=False, now=T3)
    assert again["data"] == {"b": "1", "c": "1", "u": "1"}


def test_dropped_container_is_removed() -> None:
    fm = FieldManager(group="", version="v1", kind="Pod", has_status=True)

    def pod(*names: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": [{"name": n, "image": "i"} for n in names]}}

    live = fm.apply(None, pod("a", "b"), "tool", force=False, now=T0)
    out = fm.apply(live, pod("a"), "tool", force=False, now=T1)
    assert [c["name"] for c in out["spec"]["containers"]] == ["a"]
    assert fields(out, "tool") == {"f:spec": {"f:containers": {'k:{"name":"a"}': {".": {}, "f:image": {}, "f:name": {}}}}}


def test_noop_apply_keeps_the_time_and_first_apply_adopts_existing_fields() -> None:
    live = CM_FM.apply(None, cm({"a": "1"}), "tool", force=False, now=T0)
    assert entries(CM_FM.apply(live, cm({"a": "1"}), "tool", force=False, now=T3))["tool"]["time"] == T0
    untracked = cm({"a": "1", "b": "1"}, uid="u1")
    out = CM_FM.apply(untracked, cm({"a": "1"}), "tool", force=False, now=T1)
    # Same value: shared, not taken.
    assert fields(out, "before-first-apply") == {"f:data": {".": {}, "f:a": {}, "f:b": {}}}
    assert fields(out, "tool") == {"f:data": {"f:a": {}}}


def test_status_is_not_the_main_resource_appliers() -> None:
    fm = FieldManager(group="apps", version="v1", kind="Deployment", has_status=True)
    cfg = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
           "spec": {"replicas": 2}, "status": {"replicas": 5}}
    out = fm.apply(None, cfg, "tool", force=False, now=T0)
    assert fields(out, "tool") == {"f:spec": {"f:replicas": {}}}


def test_kubectl_takes_over_client_side_applied_fields() -> None:
    last = json.dumps(cm({"a": "1"}))
    live = created({"a": "1"}, manager="kubectl-client-side-apply", annotations={LAST_APPLIED: last})
    with pytest.raises(ApplyConflict):
        CM_FM.apply(live, cm({"a": "2"}), "someone", force=False, now=T1)
    out = CM_FM.apply(live, cm({"a": "2"}), "kubectl", force=False, now=T1)
    assert out["data"] == {"a": "2"}
    annotation = out["metadata"]["annotations"][LAST_APPLIED]
    assert annotation == '{"apiVersion":"v1","data":{"a":"2"},"kind":"ConfigMap","metadata":{"name":"c"}}\n'
    # A field whose live value no longer matches the annotation still conflicts.
    drifted = copy.deepcopy(live)
    drifted["data"]["a"] = "9"
    with pytest.raises(ApplyConflict):
        CM_FM.apply(CM_FM.update(live, drifted, "editor", now=T1), cm({"a": "2"}), "kubectl", force=False, now=T2)


@pytest.mark.parametrize("config,code,message", [
    ({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "c"}}, 400, "invalid object type: /v1, Kind=Secret"),
    ({"metadata": {"name": "c"}}, 400, "invalid object type: /, Kind="),
    ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "managedFields": []}}, 400,
     "metadata.managedFields must be nil"),
])
def test_apply_refuses(config: dict[str, Any], code: int, message: str) -> None:
    with pytest.raises(StatusError) as e:
        CM_FM.apply(None, config, "tool", force=False, now=T0)
    assert (e.value.code, e.value.message) == (code, message)


def test_keyed_item_without_its_key_is_a_server_error() -> None:
    fm = FieldManager(group="", version="v1", kind="Pod", has_status=True)
    cfg = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "n"},
           "spec": {"containers": [{"image": "i"}]}}
    with pytest.raises(StatusError) as e:
        fm.apply(None, cfg, "tool", force=False, now=T0)
    assert e.value.code == 500
    assert e.value.message.startswith("failed to create typed patch object (n/p; /v1, Kind=Pod): ")
    assert 'omits key field "name"' in e.value.message
