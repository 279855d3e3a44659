"""PodLogOptions from a query and upstream's validation of it."""

from __future__ import annotations

import pytest

from kubecore.api.podlogoptions import LogOptions, LogOptionsError, format_rfc3339, parse_rfc3339


def messages(opts: LogOptions) -> list[str]:
    return [e.error() for e in opts.validate()]


def test_the_query_is_read_with_upstream_names() -> None:
    opts = LogOptions.from_query({"container": "c", "follow": "true", "previous": "1", "timestamps": "false",
                                  "tailLines": "10", "limitBytes": "100", "sinceSeconds": "5"})
    assert opts == LogOptions(container="c", follow=True, previous=True, tail_lines=10, limit_bytes=100,
                              since_seconds=5)
    assert LogOptions.from_query({"tail": "3"}).tail_lines == 3
    assert LogOptions.from_query({"tail": "all", "tailLines": "3"}).tail_lines is None
    since = LogOptions.from_query({"sinceTime": "2026-01-02T03:04:05Z"}).since_time
    assert since == parse_rfc3339("2026-01-02T03:04:05Z") == 1767323045.0


@pytest.mark.parametrize("query", [{"follow": "yes"}, {"tailLines": "x"}, {"sinceTime": "yesterday"}])
def test_an_undecodable_query_is_refused(query: dict[str, str]) -> None:
    with pytest.raises(LogOptionsError):
        LogOptions.from_query(query)


def test_validation_has_upstream_messages() -> None:
    assert messages(LogOptions(tail_lines=-1)) == ["tailLines: Invalid value: -1: must be greater than or equal to 0"]
    assert messages(LogOptions(limit_bytes=0)) == ["limitBytes: Invalid value: 0: must be greater than 0"]
    assert messages(LogOptions(since_seconds=0)) == ["sinceSeconds: Invalid value: 0: must be greater than 0"]
    both = messages(LogOptions(since_seconds=5, since_time=1.0))
    assert len(both) == 1 and "at most one of `sinceTime` or `sinceSeconds` may be specified" in both[0]
    assert messages(LogOptions(stream="Stdout", tail_lines=1)) != []
    assert messages(LogOptions(tail_lines=0, limit_bytes=1, since_seconds=1)) == []


def test_the_kubelet_query_carries_only_what_is_set() -> None:
    assert LogOptions().kubelet_query() == {}
    opts = LogOptions(container="c", follow=True, tail_lines=2, since_time=parse_rfc3339("2026-01-02T03:04:05.5Z"))
    assert opts.kubelet_query() == {"follow": "true", "tailLines": "2", "sinceTime": "2026-01-02T03:04:05Z"}
    assert format_rfc3339(0) == "1970-01-01T00:00:00Z"
