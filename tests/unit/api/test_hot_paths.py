"""The write path's shortcuts give exactly what the long way gives: the create memo of managed
fields, the FieldsV1 conversion memos, the pod validation memo, and json_copy."""

from __future__ import annotations

import copy
from typing import Any

import msgspec

from kubecore.api import defaults, kinds
from kubecore.api.fieldmanager import FieldManager
from kubecore.api.jsoncopy import json_copy
from kubecore.api.managedfields import from_fields_v1, to_fields_v1
from kubecore.api.registry import builtin_registry

PODS = builtin_registry().get("", "v1", "pods")


def pod(name: str, *, image: str = "busybox:1.36", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "labels": labels or {"app": "x"},
                         "creationTimestamp": "2026-12-02T12:00:00Z"},
            "spec": {"containers": [{"name": "c", "image": image, "ports": [{"containerPort": 80}]}]}}


def _created(fm: FieldManager, obj: dict[str, Any], now: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = fm.create(obj, "kubectl-create", now=now)["metadata"]["managedFields"]
    return out


def test_create_memo_matches_the_long_way_and_keeps_times_fresh() -> None:
    cached = FieldManager(group="", version="v1", kind="Pod", has_status=True)
    first = _created(cached, pod("a"), "2026-12-02T12:00:00Z")
    second = _created(cached, pod("b"), "2026-12-02T12:00:07Z")  # same shape, another name: a memo hit
    fresh = _created(FieldManager(group="", version="v1", kind="Pod", has_status=True), pod("b"), "2026-12-02T12:00:07Z")
    assert second == fresh and second[0]["time"] == "2026-12-02T12:00:07Z"
    assert {**first[0], "time": ""} == {**second[0], "time": ""}
    second[0]["fieldsV1"]["f:spec"]["tampered"] = {}  # results are copies: the memo is not affected
    assert _created(cached, pod("c"), "2026-12-02T12:00:09Z")[0]["fieldsV1"] == first[0]["fieldsV1"]
    other = _created(cached, pod("d", labels={"app": "x", "tier": "web"}), "2026-12-02T12:00:09Z")
    assert "f:tier" in other[0]["fieldsV1"]["f:metadata"]["f:labels"]


def test_create_memo_is_shared_by_values_but_not_by_list_items_or_types() -> None:
    def event(i: int, **extra: Any) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": f"e{i}", "namespace": "ns"},
                "involvedObject": {"kind": "Pod", "name": f"p{i}", "uid": f"u{i}"}, "reason": "Scheduled",
                "message": f"assigned ns/p{i} to node-{i}" if i else "", "count": i, "type": "Normal", **extra}

    def fresh(obj: dict[str, Any]) -> list[dict[str, Any]]:
        return _created(FieldManager(group="", version="v1", kind="Event"), obj, "T")

    events = FieldManager(group="", version="v1", kind="Event")
    for i in range(5):  # other values (an empty message, a zero count): one memo entry, the long way's result
        assert _created(events, event(i), "T") == fresh(event(i))
    assert len(events._create_memo) == 1
    assert _created(events, event(1, count="1"), "T") == fresh(event(1, count="1"))  # another type: its own entry
    assert len(events._create_memo) == 2
    cached = FieldManager(group="", version="v1", kind="Pod", has_status=True)
    for name in ("a", "b"):  # labels' values are outside lists: shared
        _created(cached, pod(name, labels={"app": name}), "T")
    assert len(cached._create_memo) == 1
    two = pod("x")
    two["spec"]["containers"].append({"name": "d", "image": "i"})  # list items are kept whole (keyed by values)
    assert _created(cached, two, "T") == fresh_pod(two)
    assert len(cached._create_memo) == 2


def test_raw_create_entries_encode_as_the_long_way_and_follow_the_clock() -> None:
    """create(raw=True) (the API server's): a memo hit sets the entries' JSON, shared within one
    second; the stored bytes are what the decoded entries encode to, with the current time."""
    raw = FieldManager(group="", version="v1", kind="Pod", has_status=True)
    first = raw.create(pod("a"), "kube-scheduler", now="2026-12-02T12:00:00Z", raw=True)
    assert isinstance(first["metadata"]["managedFields"], list)  # a memo miss: computed, decoded
    b = raw.create(pod("b"), "kube-scheduler", now="2026-12-02T12:00:00Z", raw=True)["metadata"]["managedFields"]
    c = raw.create(pod("c"), "kube-scheduler", now="2026-12-02T12:00:00Z", raw=True)["metadata"]["managedFields"]
    assert isinstance(b, msgspec.Raw) and c is b  # one second, one shape: one shared value
    assert msgspec.json.decode(bytes(b)) == first["metadata"]["managedFields"]
    later = raw.create(pod("d"), "kube-scheduler", now="2026-12-02T12:00:01Z", raw=True)["metadata"]["managedFields"]
    assert later is not b and msgspec.json.decode(bytes(later))[0]["time"] == "2026-12-02T12:00:01Z"
    plain = FieldManager(group="", version="v1", kind="Pod", has_status=True)
    want = plain.create(pod("d"), "kube-scheduler", now="2026-12-02T12:00:01Z")["metadata"]["managedFields"]
    assert msgspec.json.decode(bytes(later)) == want
    other = raw.create(pod("e"), "kubectl-create", now="2026-12-02T12:00:01Z", raw=True)  # another manager: a miss
    assert other["metadata"]["managedFields"][0]["manager"] == "kubectl-create"
    stored = msgspec.json.decode(msgspec.json.encode(raw.create(pod("f"), "kube-scheduler", now="2026-12-02T12:00:01Z", raw=True)))
    assert stored["metadata"]["managedFields"] == want  # encoding the object writes the entries out


def fresh_pod(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return _created(FieldManager(group="", version="v1", kind="Pod", has_status=True), copy.deepcopy(obj), "T")


def test_fields_v1_memos_hand_out_copies() -> None:
    raw = {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}, "f:spec": {"f:replicas": {}}}
    paths = from_fields_v1(raw)
    assert to_fields_v1(paths) == raw
    again = from_fields_v1(raw)
    again.clear()
    assert from_fields_v1(raw) == paths
    out = to_fields_v1(paths)
    out["f:spec"].clear()
    assert to_fields_v1(paths) == raw


def test_pod_validation_memo_repeats_the_same_errors() -> None:
    bad = pod("p", image="")
    first = kinds.validate_create(PODS, copy.deepcopy(bad))
    second = kinds.validate_create(PODS, copy.deepcopy(bad))
    assert first and [e.error() for e in first] == [e.error() for e in second]
    assert kinds.validate_create(PODS, defaults.apply_defaults("", "Pod", pod("q"))) == []


def test_a_pod_update_that_keeps_the_spec_skips_spec_rules() -> None:
    old = defaults.apply_defaults("", "Pod", pod("p"))
    new = copy.deepcopy(old)
    new["metadata"]["annotations"] = {"a": "b"}
    assert kinds.validate_update(PODS, new, old) == []
    new["spec"]["containers"][0]["name"] = "renamed"
    assert kinds.validate_update(PODS, new, old) != []


def test_json_copy_is_deep_and_equal() -> None:
    obj = {"a": [1, 2.5, {"b": None, "c": True}], "d": "x"}
    c = json_copy(obj)
    assert c == obj and c is not obj and c["a"][2] is not obj["a"][2]
    assert json_copy("s") == "s" and json_copy(None) is None
