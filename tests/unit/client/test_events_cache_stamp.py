"""rfc3339 keeps the last second's text: repeated and alternating seconds give the right text."""

from __future__ import annotations

from datetime import datetime, timezone

from kubecore.client.events_cache import rfc3339


def _plain(t: float) -> str:
    return datetime.fromtimestamp(int(t), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_stamps_within_and_across_seconds() -> None:
    times = [1_700_000_000.0, 1_700_000_000.9, 1_700_000_001.0, 1_700_000_000.5, 0.0, 86_399.99, 86_400.0,
             1_700_000_001.2]
    assert [rfc3339(t) for t in times] == [_plain(t) for t in times]
    assert rfc3339(1_700_000_001.7) == "2023-11-14T22:13:21Z"
