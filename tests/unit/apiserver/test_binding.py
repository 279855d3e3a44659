"""Bindings (kubecore.apiserver.binding): the byte-level path that leaves metadata undecoded writes
the same pod the general decode-edit-encode path writes, and both refuse what upstream refuses."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from kubecore.api.errors import StatusError
from kubecore.api.registry import builtin_registry
from kubecore.apiserver import binding
from kubecore.apiserver.storage import ObjectStore, encode
from kubecore.store import Store

PODS = builtin_registry().get("", "v1", "pods")
assert PODS is not None
MANAGED = [{"manager": "kubectl", "operation": "Update", "apiVersion": "v1", "time": "2026-12-03T10:00:00Z",
            "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:containers": {'k:{"name":"c"}': {".": {}}}}}}]


@pytest.fixture
def objects(tmp_path: Path) -> Iterator[ObjectStore]:
    with Store.open(tmp_path / "s", fsync=False) as store:
        yield ObjectStore(store)


def pod(name: str, **extra: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "ns", "uid": "u-" + name, "managedFields": MANAGED,
                     "labels": {"app": "x"}},
        "apiVersion": "v1", "kind": "Pod",
        "spec": {"containers": [{"name": "c", "image": "busybox"}], "schedulerName": "default-scheduler"},
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastProbeTime": None,
             "lastTransitionTime": "2026-12-03T09:00:00Z"}]},
    }
    for k, v in extra.items():
        if v is None:
            obj.pop(k, None)
        else:
            obj[k] = v
    return obj


def stored(objects: ObjectStore, obj: dict[str, Any], raw: bytes | None = None) -> None:
    objects.store.put(PODS.key("ns", obj["metadata"]["name"]), raw if raw is not None else encode(obj))


def read(objects: ObjectStore, name: str) -> dict[str, Any]:
    kv = objects.store.get(PODS.key("ns", name))
    assert kv is not None
    out: dict[str, Any] = msgspec.json.decode(kv.value)
    return out


def bind(objects: ObjectStore, name: str, node: str = "node-1", annotations: dict[str, str] | None = None) -> None:
    body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "annotations": annotations or {}},
            "target": {"kind": "Node", "name": node}}
    asyncio.run(binding.bind(objects, PODS, "ns", name, body))


def without_times(obj: dict[str, Any]) -> dict[str, Any]:
    for c in obj.get("status", {}).get("conditions", []):
        c["lastTransitionTime"] = "T"
    return obj


def test_the_byte_path_writes_what_the_general_path_writes(objects: ObjectStore) -> None:
    stored(objects, pod("fast"))
    stored(objects, pod("slow"))
    bind(objects, "fast")
    bind(objects, "slow", annotations={"why": "test"})  # annotations: the general path
    fast, slow = without_times(read(objects, "fast")), without_times(read(objects, "slow"))
    assert fast["spec"]["nodeName"] == "node-1"
    assert fast["status"] == {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": "T"}]}
    assert fast["metadata"]["managedFields"] == MANAGED, "metadata is written back unchanged"
    assert next(iter(read(objects, "fast"))) == "metadata", "the stored layout keeps metadata first"
    assert slow["metadata"].pop("annotations") == {"why": "test"}
    for obj in (fast, slow):
        obj["metadata"]["name"] = obj["metadata"]["uid"] = ""
    assert fast == slow


@pytest.mark.parametrize("variant", ["no status", "null status", "empty spec", "empty nodeName", "other layout"])
def test_unusual_stored_pods_are_bound_too(objects: ObjectStore, variant: str) -> None:
    obj = pod("p")
    raw = None
    if variant == "no status":
        obj.pop("status")
    elif variant == "null status":
        obj["status"] = None
    elif variant == "empty spec":
        obj["spec"] = {}
    elif variant == "empty nodeName":
        obj["spec"]["nodeName"] = ""
    else:  # metadata not first (written by an older version, or by hand)
        raw = msgspec.json.encode({"spec": obj["spec"], "metadata": obj["metadata"], "status": obj["status"]})
    stored(objects, obj, raw)
    byte_path = binding._bound_bytes(PODS, "p", raw if raw is not None else encode(obj), "node-7") is not None
    assert byte_path == (variant not in ("empty nodeName", "other layout", "null status"))
    bind(objects, "p", "node-7")
    got = read(objects, "p")
    assert got["spec"]["nodeName"] == "node-7"
    assert [c["type"] + c["status"] for c in got["status"]["conditions"]] == ["PodScheduledTrue"]
    assert got["metadata"]["managedFields"] == MANAGED


def test_bound_and_deleting_pods_are_conflicts(objects: ObjectStore) -> None:
    stored(objects, pod("bound", spec={"nodeName": "node-2", "containers": []}))
    deleting = pod("deleting")
    deleting["metadata"]["deletionTimestamp"] = "2026-12-03T10:00:00Z"
    stored(objects, deleting)
    for name, message in (("bound", 'pod bound is already assigned to node "node-2"'),
                          ("deleting", "pod deleting is being deleted, cannot be assigned to a host")):
        before = objects.store.get(PODS.key("ns", name))
        with pytest.raises(StatusError) as e:
            bind(objects, name)
        assert e.value.code == 409 and message in e.value.message
        after = objects.store.get(PODS.key("ns", name))
        assert before is not None and after is not None and after.mod_revision == before.mod_revision
    with pytest.raises(StatusError) as missing:
        bind(objects, "nope")
    assert missing.value.code == 404


@pytest.mark.parametrize("where", ["annotation key", "annotation value", "label value", "nested spec key"])
def test_field_names_elsewhere_in_the_pod_never_make_a_conflict(objects: ObjectStore, where: str) -> None:
    """The byte path looks for `"deletionTimestamp":` and `"nodeName":` before decoding anything:
    the same names nested deeper, or inside strings, must not be taken for the fields."""
    obj = pod("p")
    if where == "annotation key":
        obj["metadata"]["annotations"] = {"deletionTimestamp": "2026-12-03T10:00:00Z", "nodeName": "x"}
    elif where == "annotation value":
        obj["metadata"]["annotations"] = {"note": '{"deletionTimestamp":"2026-12-03T10:00:00Z"}'}
    elif where == "label value":
        obj["metadata"]["labels"] = {"a": '"nodeName":'}
    else:
        obj["spec"]["containers"][0]["env"] = [{"name": "nodeName", "value": '"nodeName":"n"'}]
        obj["spec"]["extra"] = {"nodeName": "n"}  # an unknown nested key with the name
    stored(objects, obj)
    bind(objects, "p", "node-3")
    got = read(objects, "p")
    assert got["spec"]["nodeName"] == "node-3"
    assert "deletionTimestamp" not in got["metadata"]
    assert [c["type"] + c["status"] for c in got["status"]["conditions"]] == ["PodScheduledTrue"]
