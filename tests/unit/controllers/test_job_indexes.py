"""Completion-index bookkeeping of Indexed Jobs: the compressed interval format of
status.completedIndexes, pending indexes, duplicate indexes, per-index templates and names."""

from __future__ import annotations

import pytest

from kubecore.controllers.job_indexes import (
    completion_index, duplicated_index_pods, first_pending_indexes, generate_name_with_index, has, index_template,
    merge, parse_indexes, to_string, total, with_indexes,
)
from tests.unit.controllers.test_job_fixtures import make_pod


def test_worked_example_of_the_module_docstring() -> None:
    intervals = with_indexes([], [1, 3, 4, 5, 7, 8])
    assert intervals == [(1, 1), (3, 5), (7, 8)]
    assert to_string(intervals) == "1,3-5,7,8"
    assert parse_indexes("1,3-5,7,8", 10) == intervals
    assert total(intervals) == 6
    assert [has(intervals, i) for i in (0, 1, 2, 4, 6, 8, 9)] == [False, True, False, True, False, True, False]


@pytest.mark.parametrize("text,completions,expected", [
    ("", 5, []),
    ("1,2-3", 10, [(1, 3)]),          # adjacent intervals merge
    ("0-9", 5, [(0, 4)]),             # cut at completions
    ("1,7,2", 5, [(1, 1)]),           # stops at the first index past completions
    ("x,2,3-y,4", 10, [(2, 2), (4, 4)]),  # corrupt parts are skipped
])
def test_parse_tolerates_user_text(text: str, completions: int, expected: list[tuple[int, int]]) -> None:
    assert parse_indexes(text, completions) == expected


def test_merge_unions() -> None:
    assert merge([(0, 2), (6, 6)], [(3, 4), (8, 9)]) == [(0, 4), (6, 6), (8, 9)]


def test_first_pending_skips_succeeded_active_and_failed() -> None:
    active = [make_pod("a", index=1), make_pod("b", index=4)]
    assert first_pending_indexes(count=3, completions=8, succeeded=[(0, 0), (2, 2)], active=active,
                                 failed=[(5, 5)]) == [3, 6, 7]
    assert first_pending_indexes(count=9, completions=3, succeeded=[], active=[]) == [0, 1, 2]
    assert first_pending_indexes(count=0, completions=3, succeeded=[], active=[]) == []


def test_duplicated_and_invalid_indexes_are_removed() -> None:
    keep_ready = make_pod("dup-ready", index=0, phase="Running", ready=True)
    drop_pending = make_pod("dup-pending", index=0, phase="Pending")
    no_index = make_pod("none")
    too_big = make_pod("big", index=7)
    single = make_pod("one", index=1)
    rm, left = duplicated_index_pods([keep_ready, drop_pending, no_index, too_big, single], 3)
    assert sorted(p["metadata"]["name"] for p in rm) == ["big", "dup-pending", "none"]
    assert sorted(p["metadata"]["name"] for p in left) == ["dup-ready", "one"]


def test_completion_index_annotation() -> None:
    assert completion_index(make_pod("p", index=3)) == 3
    pod = make_pod("p")
    pod["metadata"]["annotations"] = {"batch.kubernetes.io/job-completion-index": "-1"}
    assert completion_index(pod) == -1
    pod["metadata"]["annotations"] = {"batch.kubernetes.io/job-completion-index": " 2"}
    assert completion_index(pod) == -1


def test_index_template_and_generate_name() -> None:
    template = {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": []}}
    out = index_template(template, job_name="pi", index=2)
    assert out["metadata"]["labels"] == {"app": "x", "batch.kubernetes.io/job-completion-index": "2"}
    assert out["metadata"]["annotations"] == {"batch.kubernetes.io/job-completion-index": "2"}
    assert out["spec"]["hostname"] == "pi-2"
    assert template["metadata"] == {"labels": {"app": "x"}}  # the shared template is untouched
    assert generate_name_with_index("pi", 12) == "pi-12-"
    long = generate_name_with_index("j" * 70, 12345)
    assert len(long) == 58 and long.endswith("-12345-")
