"""Cron schedule math: robfig/cron's Next (fields, names, steps, the day-of-month/day-of-week
rule, descriptors, @every, TZ= prefixes), Go's DST behaviour in a real time zone, and the
CronJob controller's missed-schedule arithmetic."""

from __future__ import annotations

import zoneinfo
from datetime import datetime, timezone

import pytest

from kubecore.api.kinds.cron import STAR_BIT, CronError, parse
from kubecore.controllers.cronjob_schedule import (
    NEXT_SCHEDULE_DELTA, InvalidSchedule, Missed, format_in_zone, go_date, job_name, most_recent_schedule_time,
    next_schedule_delay, parse_schedule,
)

UTC = timezone.utc
NY = zoneinfo.ZoneInfo("America/New_York")


def ts(*args: int, tz: zoneinfo.ZoneInfo | timezone = UTC) -> float:
    return datetime(*args, tzinfo=tz).timestamp()  # type: ignore[arg-type, misc]


def wall(t: float | None, tz: zoneinfo.ZoneInfo | timezone = UTC) -> str:
    assert t is not None
    return datetime.fromtimestamp(t, tz).isoformat()


def nexts(schedule: str, start: float, n: int, tz: zoneinfo.ZoneInfo | timezone = UTC) -> list[str]:
    s = parse_schedule(schedule, default_tz=tz)
    out, t = [], start
    for _ in range(n):
        nt = s.next(t)
        assert nt is not None
        out.append(wall(nt, tz))
        t = nt
    return out


@pytest.mark.parametrize("schedule,start,expected", [
    ("*/15 * * * *", (2024, 1, 1, 10, 7), ["2024-01-01T10:15:00+00:00", "2024-01-01T10:30:00+00:00"]),
    ("0 9 * * mon-fri", (2024, 1, 5, 10, 0), ["2024-01-08T09:00:00+00:00", "2024-01-09T09:00:00+00:00"]),
    ("30 4 1,15 * *", (2024, 1, 2, 0, 0), ["2024-01-15T04:30:00+00:00", "2024-02-01T04:30:00+00:00"]),
    ("0 0 * FEB *", (2024, 3, 1, 0, 0), ["2025-02-01T00:00:00+00:00", "2025-02-02T00:00:00+00:00"]),
    ("5-10/5 0 * * *", (2024, 1, 1, 0, 6), ["2024-01-01T00:10:00+00:00", "2024-01-02T00:05:00+00:00"]),
    ("0 12 29 2 *", (2024, 3, 1, 0, 0), ["2028-02-29T12:00:00+00:00"]),
    ("@hourly", (2024, 1, 1, 10, 0), ["2024-01-01T11:00:00+00:00", "2024-01-01T12:00:00+00:00"]),
    ("@daily", (2024, 1, 1, 10, 0), ["2024-01-02T00:00:00+00:00"]),
    ("@weekly", (2024, 1, 1, 10, 0), ["2024-01-07T00:00:00+00:00"]),  # Sunday
    ("@monthly", (2024, 1, 31, 10, 0), ["2024-02-01T00:00:00+00:00"]),
    ("@yearly", (2024, 1, 31, 10, 0), ["2025-01-01T00:00:00+00:00"]),
])
def test_next_activations(schedule: str, start: tuple[int, ...], expected: list[str]) -> None:
    assert nexts(schedule, ts(*start), len(expected)) == expected


def test_next_is_strictly_after_and_whole_minutes() -> None:
    s = parse_schedule("* * * * *", default_tz=UTC)
    assert s.next(ts(2024, 1, 1, 10, 0)) == ts(2024, 1, 1, 10, 1)
    assert s.next(ts(2024, 1, 1, 10, 0) + 59.5) == ts(2024, 1, 1, 10, 1)


def test_day_of_month_and_week_are_or_unless_one_is_a_star() -> None:
    # both restricted: the 13th OR a Friday
    assert nexts("0 0 13 * 5", ts(2024, 1, 1), 3) == [
        "2024-01-05T00:00:00+00:00", "2024-01-12T00:00:00+00:00", "2024-01-13T00:00:00+00:00"]
    # day-of-week "*": only the 13th
    assert nexts("0 0 13 * *", ts(2024, 1, 1), 1) == ["2024-01-13T00:00:00+00:00"]
    # "*/2" is not a star for this rule (robfig clears the star bit for steps > 1)
    assert not parse("0 0 */2 * *").dom & STAR_BIT and parse("0 0 */1 * *").dom & STAR_BIT


def test_impossible_schedule_never_fires() -> None:
    assert parse_schedule("0 0 31 2 *", default_tz=UTC).next(ts(2024, 1, 1)) is None


def test_every_descriptor() -> None:
    s = parse_schedule("@every 1m30s", default_tz=UTC)
    assert s.next(1000.7) == 1090
    assert parse_schedule("@every 10ms", default_tz=UTC).next(5) == 6  # at least a second


def test_tz_prefix_and_default_zone() -> None:
    s = parse_schedule("TZ=Asia/Tokyo 0 9 * * *", default_tz=UTC)
    assert wall(s.next(ts(2023, 12, 31, 12)), UTC) == "2024-01-01T00:00:00+00:00"  # 09:00 JST
    s = parse_schedule("0 9 * * *", default_tz=NY)
    assert wall(s.next(ts(2024, 1, 1)), UTC) == "2024-01-01T14:00:00+00:00"
    with pytest.raises(CronError, match="provided bad location Mars/Base"):
        parse_schedule("TZ=Mars/Base 0 9 * * *", default_tz=UTC)


def test_spring_forward_skips_the_missing_hour() -> None:
    # 2024-03-10 02:00 EST -> 03:00 EDT in New York: 02:30 does not exist that day
    assert nexts("30 2 * * *", ts(2024, 3, 8, 12, 0, tz=NY), 3, NY) == [
        "2024-03-09T02:30:00-05:00", "2024-03-11T02:30:00-04:00", "2024-03-12T02:30:00-04:00"]
    # hourly keeps firing every real hour across the gap
    assert nexts("0 * * * *", ts(2024, 3, 10, 0, 30, tz=NY), 3, NY) == [
        "2024-03-10T01:00:00-05:00", "2024-03-10T03:00:00-04:00", "2024-03-10T04:00:00-04:00"]


def test_fall_back_repeats_the_doubled_hour() -> None:
    # 2024-11-03 02:00 EDT -> 01:00 EST: 01:30 happens twice, and robfig fires at both
    assert nexts("30 1 * * *", ts(2024, 11, 2, 12, 0, tz=NY), 3, NY) == [
        "2024-11-03T01:30:00-04:00", "2024-11-03T01:30:00-05:00", "2024-11-04T01:30:00-05:00"]
    assert nexts("30 2 * * *", ts(2024, 11, 2, 12, 0, tz=NY), 2, NY) == [
        "2024-11-03T02:30:00-05:00", "2024-11-04T02:30:00-05:00"]


def test_go_date_resolves_a_gap_like_go() -> None:
    # time.Date(2024, 3, 10, 2, 0, 0, 0, New_York) is 01:00 EST (Go's rule), not 03:00 EDT
    assert wall(go_date(2024, 3, 10, 2, NY), NY) == "2024-03-10T01:00:00-05:00"
    assert wall(go_date(2024, 13, 1, 0, UTC), UTC) == "2025-01-01T00:00:00+00:00"  # month overflow


# -- the controller's arithmetic --------------------------------------------------------------------
FIVE = parse_schedule("*/5 * * * *", default_tz=UTC)


def test_most_recent_when_nothing_is_due() -> None:
    r = most_recent_schedule_time(FIVE, created=ts(2024, 1, 1, 10, 1), last_scheduled=None, now=ts(2024, 1, 1, 10, 4))
    assert r.most_recent is None and r.missed is Missed.NONE and r.earliest == ts(2024, 1, 1, 10, 1)


def test_most_recent_with_one_due() -> None:
    r = most_recent_schedule_time(FIVE, created=ts(2024, 1, 1, 10, 1), last_scheduled=None, now=ts(2024, 1, 1, 10, 6))
    assert r.most_recent == ts(2024, 1, 1, 10, 5) and r.missed is Missed.NONE


def test_most_recent_worked_example_few_missed() -> None:
    r = most_recent_schedule_time(FIVE, created=0, last_scheduled=ts(2024, 1, 1, 10, 0),
                                  now=ts(2024, 1, 1, 10, 17) + 30)
    assert r.most_recent == ts(2024, 1, 1, 10, 15) and r.missed is Missed.FEW
    delay = next_schedule_delay(FIVE, created=0, last_scheduled=ts(2024, 1, 1, 10, 0), now=ts(2024, 1, 1, 10, 17) + 30)
    assert delay == pytest.approx(150 + NEXT_SCHEDULE_DELTA)


def test_many_missed_still_finds_the_latest() -> None:
    minute = parse_schedule("* * * * *", default_tz=UTC)
    r = most_recent_schedule_time(minute, created=ts(2024, 1, 1), last_scheduled=None, now=ts(2024, 1, 2, 0, 0) + 10)
    assert r.missed is Missed.MANY and r.most_recent == ts(2024, 1, 2)


def test_starting_deadline_moves_the_earliest_time() -> None:
    minute = parse_schedule("* * * * *", default_tz=UTC)
    r = most_recent_schedule_time(minute, created=ts(2024, 1, 1), last_scheduled=None, now=ts(2024, 1, 2) + 10,
                                  starting_deadline=200)
    assert r.missed is Missed.FEW and r.most_recent == ts(2024, 1, 2)


def test_impossible_schedule_is_invalid() -> None:
    never = parse_schedule("0 0 31 2 *", default_tz=UTC)
    with pytest.raises(InvalidSchedule, match="less than 1 second"):
        most_recent_schedule_time(never, created=ts(2024, 1, 1), last_scheduled=None, now=ts(2024, 6, 1))


def test_next_delay_aims_at_the_next_activation() -> None:
    hourly = parse_schedule("@hourly", default_tz=UTC)
    delay = next_schedule_delay(hourly, created=ts(2024, 1, 1, 10, 10), last_scheduled=None, now=ts(2024, 1, 1, 10, 20))
    assert delay == pytest.approx(40 * 60 + NEXT_SCHEDULE_DELTA)


def test_job_name_and_scheduled_timestamp() -> None:
    t = ts(2024, 1, 2, 3, 4)
    assert job_name("hello", t) == f"hello-{int(t) // 60}" == "hello-28402744"
    assert format_in_zone(t, UTC) == "2024-01-02T03:04:00Z"
    assert format_in_zone(t, NY) == "2024-01-01T22:04:00-05:00"
    assert format_in_zone(t, zoneinfo.ZoneInfo("Asia/Kolkata")) == "2024-01-02T08:34:00+05:30"
