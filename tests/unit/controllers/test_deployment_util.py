"""Revisions, annotations, the pod-template-hash, template equality and ReplicaSet orders
(upstream deployment_util_test.go and hash_test.go cases, adapted)."""

from __future__ import annotations

from typing import Any

import pytest

from kubecore.controllers.controller_utils import format_time
from kubecore.controllers.deployment_util import (
    CHANGE_CAUSE_ANNOTATION, DESIRED_REPLICAS_ANNOTATION, LAST_APPLIED_CONFIG_ANNOTATION, MAX_REPLICAS_ANNOTATION,
    REVISION_ANNOTATION, REVISION_HISTORY_ANNOTATION, compute_hash, equal_ignore_hash, find_active_or_latest,
    find_new_replica_set, find_old_replica_sets, fnv32a, get_rollback_to, last_revision, max_revision,
    safe_encode_string, set_deployment_annotations_to, set_from_replica_set_template,
    set_new_replica_set_annotations, sorted_by_revision, sorted_by_size_newer, sorted_by_size_older,
)

Obj = dict[str, Any]
T0 = 1_700_000_000.0


def rs(name: str, *, replicas: int = 1, created: float = 0.0, rev: str | None = None, image: str = "nginx",
       annotations: dict[str, str] | None = None, uid: str | None = None) -> Obj:
    a = dict(annotations or {})
    if rev is not None:
        a[REVISION_ANNOTATION] = rev
    return {"metadata": {"name": name, "uid": uid or f"uid-{name}", "creationTimestamp": format_time(T0 + created),
                         "annotations": a},
            "spec": {"replicas": replicas, "template": template(image, hash_label="h-" + name)}}


def template(image: str = "nginx", *, hash_label: str | None = None) -> Obj:
    labels = {"app": "web"}
    if hash_label:
        labels["pod-template-hash"] = hash_label
    return {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": image}]}}


def deployment(image: str = "nginx", *, replicas: int = 3, annotations: dict[str, str] | None = None) -> Obj:
    return {"metadata": {"name": "web", "uid": "d", "annotations": dict(annotations or {})},
            "spec": {"replicas": replicas, "template": template(image),
                     "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}}}


# -- the hash -----------------------------------------------------------------------------------------
def test_fnv32a_matches_the_reference_vectors() -> None:
    assert fnv32a(b"") == 0x811C9DC5
    assert fnv32a(b"a") == 0xE40C292C
    assert fnv32a(b"foobar") == 0xBF9CF968
    assert fnv32a(b"bar", fnv32a(b"foo")) == fnv32a(b"foobar")  # continuing a hash, as Go's Write does


def test_safe_encode_string_maps_digits_like_upstream() -> None:
    assert safe_encode_string("0123456789") == "456789bcdf"
    assert safe_encode_string("") == ""


def test_compute_hash_is_stable_and_depends_on_template_and_collision_count() -> None:
    t = template()
    h = compute_hash(t, None)
    assert h == compute_hash(template(), None)
    assert set(h) <= set("456789bcdf") and 1 <= len(h) <= 10  # a decimal uint32, safely encoded
    assert compute_hash(template("nginx:2"), None) != h
    hashes = {compute_hash(t, c) for c in (None, 0, 1, 2)}
    assert len(hashes) == 4  # nil and 0 differ: 0 is still written as 8 bytes, as upstream
    # fields that are empty or null do not count (kubectl re-encodes templates through Go structs)
    noisy = template()
    noisy["metadata"]["creationTimestamp"] = None
    noisy["spec"]["containers"][0]["resources"] = {}
    assert compute_hash(noisy, None) == h


# -- template equality ----------------------------------------------------------------------------
def test_equal_ignore_hash() -> None:
    assert equal_ignore_hash(template(hash_label="abc"), template())
    assert equal_ignore_hash(template(hash_label="abc"), template(hash_label="def"))
    assert not equal_ignore_hash(template("a"), template("b"))
    other_label = template()
    other_label["metadata"]["labels"]["tier"] = "x"
    assert not equal_ignore_hash(other_label, template())
    rolled_back = template(hash_label="abc")
    rolled_back["metadata"]["creationTimestamp"] = None
    assert equal_ignore_hash(rolled_back, template())


def test_find_new_and_old_replica_sets() -> None:
    old = rs("web-old", image="nginx:0", created=1)
    new1, new2 = rs("web-new1", created=3), rs("web-new2", created=2)
    empty_old = rs("web-empty", image="nginx:9", replicas=0, created=0)
    d = deployment()
    assert find_new_replica_set(d, [old, new1, new2]) is new2  # the oldest of the matching ones
    with_pods, all_old = find_old_replica_sets(d, [old, new1, new2, empty_old])
    assert with_pods == [old, new1]
    assert all_old == [old, new1, empty_old]
    assert find_new_replica_set(deployment("nope"), [old]) is None


def test_find_active_or_latest() -> None:
    a, b = rs("a", created=1, replicas=0), rs("b", created=2, replicas=0)
    assert find_active_or_latest(None, [a, b]) is b  # none active: the newest
    assert find_active_or_latest(a, [b]) is a
    c = rs("c", created=3, replicas=2)
    assert find_active_or_latest(a, [b, c]) is c  # the only active one
    assert find_active_or_latest(rs("d", replicas=1), [c]) is None  # several: proportional scaling


# -- revisions and annotations ----------------------------------------------------------------------
def test_max_and_last_revision_skip_unparseable() -> None:
    rses = [rs("a", rev="1"), rs("b", rev="3"), rs("c", rev="x"), rs("d"), rs("e", rev="2")]
    assert max_revision(rses) == 3
    assert last_revision(rses) == 2
    assert max_revision([]) == 0 and last_revision([rs("a", rev="5")]) == 0


def test_new_replica_set_annotations_on_create() -> None:
    d = deployment(annotations={CHANGE_CAUSE_ANNOTATION: "kubectl set image", LAST_APPLIED_CONFIG_ANNOTATION: "{}",
                                REVISION_ANNOTATION: "7", "team": "a"})
    new = {"metadata": {"name": "web-x"}, "spec": {"replicas": 0}}
    assert set_new_replica_set_annotations(d, new, "3", exists=False, max_surge=1)
    assert new["metadata"]["annotations"] == {
        CHANGE_CAUSE_ANNOTATION: "kubectl set image", "team": "a", REVISION_ANNOTATION: "3",
        DESIRED_REPLICAS_ANNOTATION: "3", MAX_REPLICAS_ANNOTATION: "4"}
    assert not set_new_replica_set_annotations(d, new, "3", exists=True, max_surge=1)  # nothing new


def test_rolled_back_replica_set_keeps_its_revision_history() -> None:
    d = deployment()
    back = rs("web-a", rev="1")
    assert set_new_replica_set_annotations(d, back, "3", exists=True, max_surge=1)
    assert back["metadata"]["annotations"][REVISION_ANNOTATION] == "3"
    assert back["metadata"]["annotations"][REVISION_HISTORY_ANNOTATION] == "1"
    assert set_new_replica_set_annotations(d, back, "5", exists=True, max_surge=1)
    assert back["metadata"]["annotations"][REVISION_HISTORY_ANNOTATION] == "1,3"
    # a lower revision never replaces a higher one
    assert not set_new_replica_set_annotations(d, back, "4", exists=True, max_surge=1)
    assert back["metadata"]["annotations"][REVISION_ANNOTATION] == "5"


def test_revision_history_is_trimmed_from_the_front() -> None:
    back = rs("web-a", rev="10", annotations={REVISION_HISTORY_ANNOTATION: "1,2,3"})
    set_new_replica_set_annotations(deployment(), back, "11", exists=True, max_surge=0, rev_history_limit=6)
    assert back["metadata"]["annotations"][REVISION_HISTORY_ANNOTATION] == "2,3,10"  # exactly 6 characters
    back = rs("web-a", rev="10", annotations={REVISION_HISTORY_ANNOTATION: "1,2,3"})
    set_new_replica_set_annotations(deployment(), back, "11", exists=True, max_surge=0, rev_history_limit=5)
    assert back["metadata"]["annotations"][REVISION_HISTORY_ANNOTATION] == "3,10"


def test_rollback_helpers() -> None:
    d = deployment(annotations={REVISION_ANNOTATION: "4", CHANGE_CAUSE_ANNOTATION: "now",
                                "deprecated.deployment.rollback.to": "2"})
    assert get_rollback_to(d) == 2
    old = rs("web-a", rev="2", image="nginx:old", annotations={CHANGE_CAUSE_ANNOTATION: "then",
                                                                DESIRED_REPLICAS_ANNOTATION: "3"})
    set_from_replica_set_template(d, old["spec"]["template"])
    set_deployment_annotations_to(d, old)
    assert d["spec"]["template"] == template("nginx:old")  # without the hash label
    assert d["metadata"]["annotations"] == {REVISION_ANNOTATION: "4", CHANGE_CAUSE_ANNOTATION: "then",
                                            "deprecated.deployment.rollback.to": "2"}
    assert get_rollback_to(deployment(annotations={"deprecated.deployment.rollback.to": "x"})) is None


# -- orders ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("fn", "expected"), [
    (sorted_by_size_older, ["big", "old", "new", "small"]),
    (sorted_by_size_newer, ["big", "new", "old", "small"]),
])
def test_size_orders(fn: Any, expected: list[str]) -> None:
    rses = [rs("small", replicas=1, created=5), rs("new", replicas=2, created=4), rs("old", replicas=2, created=1),
            rs("big", replicas=5, created=3)]
    assert [r["metadata"]["name"] for r in fn(rses)] == expected


def test_revision_order_falls_back_to_age() -> None:
    rses = [rs("c", rev="3", created=1), rs("a", rev="1", created=3), rs("x", rev="bad", created=0),
            rs("b", rev="2", created=2)]
    assert [r["metadata"]["name"] for r in sorted_by_revision(rses)] == ["x", "a", "b", "c"]
