"""PATCH semantics: RFC 6902 JSON patch, RFC 7386 merge patch, strategic merge patch."""

from __future__ import annotations

from typing import Any

import pytest

from kubecore.api.errors import StatusError
from kubecore.apiserver.patch import JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, apply_patch

POD: dict[str, Any] = {
    "metadata": {"name": "p", "labels": {"a": "1", "b": "2"}},
    "spec": {
        "containers": [
            {"name": "app", "image": "app:1", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]},
            {"name": "side", "image": "side:1"},
        ],
        "tolerations": [{"key": "k", "operator": "Exists"}],
    },
}


def test_merge_patch_replaces_lists_and_deletes_with_null() -> None:
    out = apply_patch(MERGE_PATCH, POD, {"metadata": {"labels": {"a": None, "c": "3"}}, "spec": {"containers": [{"name": "only"}]}})
    assert out["metadata"]["labels"] == {"b": "2", "c": "3"}
    assert out["spec"]["containers"] == [{"name": "only"}]
    assert POD["metadata"]["labels"] == {"a": "1", "b": "2"}, "the target is not modified in place"


def test_strategic_merge_merges_lists_by_key() -> None:
    patch = {"spec": {"containers": [{"name": "app", "image": "app:2", "env": [{"name": "Y", "value": "3"}]}]}}
    out = apply_patch(STRATEGIC_MERGE_PATCH, POD, patch)
    app, side = out["spec"]["containers"]
    assert app["image"] == "app:2" and side == {"name": "side", "image": "side:1"}
    assert app["env"] == [{"name": "X", "value": "1"}, {"name": "Y", "value": "3"}]


def test_strategic_merge_directives() -> None:
    out = apply_patch(STRATEGIC_MERGE_PATCH, POD, {"spec": {"containers": [{"name": "side", "$patch": "delete"}]}})
    assert [c["name"] for c in out["spec"]["containers"]] == ["app"]
    out = apply_patch(STRATEGIC_MERGE_PATCH, POD, {"metadata": {"labels": {"$patch": "replace", "z": "9"}}})
    assert out["metadata"]["labels"] == {"z": "9"}
    out = apply_patch(STRATEGIC_MERGE_PATCH, POD, {"$setElementOrder/containers": [{"name": "app"}], "metadata": {"labels": {"a": None}}})
    assert "$setElementOrder/containers" not in out and out["metadata"]["labels"] == {"b": "2"}


@pytest.mark.parametrize(
    ("ops", "check"),
    [
        ([{"op": "add", "path": "/metadata/labels/c", "value": "3"}], lambda o: o["metadata"]["labels"]["c"] == "3"),
        ([{"op": "remove", "path": "/spec/containers/1"}], lambda o: len(o["spec"]["containers"]) == 1),
        ([{"op": "replace", "path": "/spec/containers/0/image", "value": "x"}], lambda o: o["spec"]["containers"][0]["image"] == "x"),
        ([{"op": "add", "path": "/spec/tolerations/-", "value": {"key": "z"}}], lambda o: o["spec"]["tolerations"][-1] == {"key": "z"}),
        ([{"op": "move", "from": "/metadata/labels/a", "path": "/metadata/labels/m"}], lambda o: o["metadata"]["labels"] == {"b": "2", "m": "1"}),
        ([{"op": "copy", "from": "/metadata/labels/a", "path": "/metadata/labels/m"}], lambda o: o["metadata"]["labels"]["m"] == "1"),
        ([{"op": "test", "path": "/metadata/name", "value": "p"}], lambda o: o == POD),
        ([{"op": "add", "path": "/metadata/labels/a~1b", "value": "s"}], lambda o: o["metadata"]["labels"]["a/b"] == "s"),
    ],
)
def test_json_patch_operations(ops: list[dict[str, Any]], check: Any) -> None:
    assert check(apply_patch(JSON_PATCH, POD, ops))


@pytest.mark.parametrize(
    ("ops", "code"),
    [
        ([{"op": "test", "path": "/metadata/name", "value": "q"}], 422),
        ([{"op": "remove", "path": "/nope"}], 422),
        ([{"op": "replace", "path": "/spec/containers/9", "value": 1}], 422),
        ([{"op": "frobnicate", "path": "/a"}], 400),
        ({"op": "add"}, 400),
        ([{"path": "/a"}], 400),
    ],
)
def test_json_patch_errors(ops: Any, code: int) -> None:
    with pytest.raises(StatusError) as e:
        apply_patch(JSON_PATCH, POD, ops)
    assert e.value.code == code


def test_merge_patch_must_be_an_object() -> None:
    with pytest.raises(StatusError) as e:
        apply_patch(MERGE_PATCH, POD, [1, 2])
    assert e.value.code == 400


def test_strategic_merge_list_strategies_follow_upstream_types() -> None:
    out = apply_patch(STRATEGIC_MERGE_PATCH, POD, {"spec": {"tolerations": [{"key": "z", "operator": "Exists"}]}})
    assert out["spec"]["tolerations"] == [{"key": "z", "operator": "Exists"}], "tolerations have no merge strategy"
    obj = {"metadata": {"finalizers": ["x/a"]}}
    out = apply_patch(STRATEGIC_MERGE_PATCH, obj, {"metadata": {"finalizers": ["x/b"]}})
    assert out["metadata"]["finalizers"] == ["x/a", "x/b"], "finalizers merge as a set"
    out = apply_patch(STRATEGIC_MERGE_PATCH, out, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["x/a"]}})
    assert out["metadata"]["finalizers"] == ["x/b"]
