"""Go durations both ways: the truncation the kubelet's messages use, and the parser's errors."""

from __future__ import annotations

import pytest

from kubecore.api.gotime import format_seconds, parse_duration


def test_format_seconds_truncates_like_go_duration_truncate() -> None:
    assert format_seconds(1.23456, truncate_to=1e-3) == "1.234s"
    assert format_seconds(0.0129, truncate_to=1e-3) == "12ms"
    assert format_seconds(0.0004, truncate_to=1e-3) == "0s"
    assert format_seconds(123.5) == "2m3.5s"


@pytest.mark.parametrize(("text", "seconds"), [("1m30s", 90.0), ("500ms", 0.5), ("2h", 7200.0), ("1.5", 1.5),
                                              ("250us", 0.00025), ("1h0m0s", 3600.0)])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5x", "m5", "1.2.3s", "-"])
def test_parse_duration_refuses_what_go_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)
