"""Status computation (replicaset_status, upstream calculateStatus/updateReplicaSetStatus) and the
compiled label selectors it and the controller rely on."""

from __future__ import annotations

import pytest

from kubecore.controllers.controller_utils import (
    InvalidSelector, is_pod_available, parse_time, selector_from_label_selector, selector_from_set,
)
from kubecore.controllers.replicaset_status import calculate_status, status_unchanged, with_status
from tests.unit.controllers.test_replicaset_fixtures import NOW, make_pod, make_rs


def test_counts_fully_labeled_ready_available() -> None:
    rs = make_rs(replicas=4, min_ready=30, template_labels={"app": "web", "tier": "fe"})
    pods = [
        make_pod("a", labels={"app": "web", "tier": "fe"}, ready_since=NOW - 60),   # available
        make_pod("b", labels={"app": "web", "tier": "fe"}, ready_since=NOW - 10),   # ready, not yet available
        make_pod("c", labels={"app": "web"}, not_ready=True),
        make_pod("d", labels={"app": "web", "tier": "fe", "x": "y"}),
    ]
    status = calculate_status(rs, pods, None, now=NOW)
    assert (status["replicas"], status["fullyLabeledReplicas"], status["readyReplicas"],
            status["availableReplicas"]) == (4, 3, 2, 1)
    assert "conditions" not in status


def test_available_is_strictly_after_min_ready() -> None:
    pod = make_pod("a", ready_since=NOW - 30)
    assert not is_pod_available(pod, 30, NOW)
    assert is_pod_available(pod, 30, NOW + 0.5)
    assert is_pod_available(pod, 0, NOW)


def test_replica_failure_condition_set_kept_and_removed() -> None:
    rs = make_rs(replicas=3)
    status = calculate_status(rs, [], RuntimeError("quota exceeded"), now=NOW)
    (cond,) = status["conditions"]
    assert cond["type"] == "ReplicaFailure" and cond["status"] == "True"
    assert cond["reason"] == "FailedCreate" and cond["message"] == "quota exceeded"
    assert parse_time(cond["lastTransitionTime"]) == NOW
    # a later failure keeps the first condition (time and message)
    rs2 = make_rs(replicas=3, status=status)
    again = calculate_status(rs2, [], RuntimeError("other"), now=NOW + 100)
    assert again["conditions"] == [cond]
    # a clean sync removes it
    assert "conditions" not in calculate_status(rs2, [], None, now=NOW + 200)
    # too many pods: FailedDelete
    many = calculate_status(make_rs(replicas=0), [make_pod("x")], RuntimeError("nope"), now=NOW)
    assert many["conditions"][0]["reason"] == "FailedDelete"


def test_status_unchanged_and_observed_generation() -> None:
    rs = make_rs(replicas=1, generation=2)
    status = calculate_status(rs, [make_pod("a")], None, now=NOW)
    assert not status_unchanged(rs, status)
    written = with_status(rs, status)
    assert written["status"]["observedGeneration"] == 2 and rs["status"] == {}
    assert status_unchanged(written, calculate_status(written, [make_pod("a")], None, now=NOW))
    newer = {**written, "metadata": {**written["metadata"], "generation": 3}}
    assert not status_unchanged(newer, newer["status"])
    assert with_status(newer, status, generation=2)["status"]["observedGeneration"] == 2


def test_label_selector_operators() -> None:
    sel = selector_from_label_selector({
        "matchLabels": {"app": "web"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["fe", "be"]},
                             {"key": "env", "operator": "NotIn", "values": ["prod"]},
                             {"key": "team", "operator": "Exists"},
                             {"key": "legacy", "operator": "DoesNotExist"}]})
    assert sel.matches({"app": "web", "tier": "fe", "team": "a"})
    assert sel.matches({"app": "web", "tier": "be", "team": "a", "env": "dev"})
    assert not sel.matches({"app": "web", "tier": "fe", "team": "a", "env": "prod"})
    assert not sel.matches({"app": "web", "tier": "xx", "team": "a"})
    assert not sel.matches({"app": "web", "tier": "fe"})
    assert not sel.matches({"app": "web", "tier": "fe", "team": "a", "legacy": ""})
    assert not sel.matches({"app": "db", "tier": "fe", "team": "a"})


def test_nil_selector_matches_nothing_and_empty_everything() -> None:
    assert not selector_from_label_selector(None).matches({"a": "b"})
    everything = selector_from_label_selector({})
    assert everything.empty and everything.matches({}) and everything.matches({"a": "b"})
    assert selector_from_set({"a": "b"}).matches({"a": "b", "c": "d"})
    assert not selector_from_set({"a": "b"}).matches({"a": "c"})


@pytest.mark.parametrize("bad", [
    {"matchExpressions": [{"key": "a", "operator": "Bogus"}]},
    {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]},
    {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
    "app=web",
])
def test_invalid_selectors(bad: object) -> None:
    with pytest.raises(InvalidSelector):
        selector_from_label_selector(bad)
