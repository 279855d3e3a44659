"""When a CronJob fires: robfig/cron/v3's SpecSchedule.Next over a parsed schedule, and the
CronJob controller's schedule arithmetic on top of it (upstream pkg/controller/cronjob/utils.go:
mostRecentScheduleTime, nextScheduleTime, nextScheduleTimeDuration).

Times are seconds since the Unix epoch (floats, as `Clock.now()`); wall-clock fields are read in
the schedule's time zone. `Schedule.next(t)` is the first activation strictly after `t`, in whole
seconds, or None when nothing matches within five years (robfig's zero time: ``0 0 31 2 *``).

Time zones and DST follow Go's time package exactly, because upstream's results depend on it:
- moving by hours and minutes is absolute (an hour of a 23-hour day is still 3600 s);
- moving to "midnight of the next day" builds a wall time (Go's time.Date), and a wall time that
  does not exist (a spring-forward gap) resolves the way Go resolves it: 02:30 in a gap from
  02:00 to 03:00 becomes 01:30 of the old offset. A wall time that exists twice (fall back) is the
  first one. `go_date` implements that rule;
- after stepping a day, a midnight that DST pushed to 23:00 or 01:00 is corrected, as robfig does.

Consequences worth knowing (the unit tests pin them), in America/New_York: "30 2 * * *" does not
fire on the spring-forward day (02:30 never happens); "30 1 * * *" fires twice on the fall-back
day (01:30 EDT and, an hour later, 01:30 EST), since hours advance in absolute time.

Worked example (`most_recent_schedule_time`): "*/5 * * * *", last scheduled 10:00, now 10:17:30.
t1 = 10:05, t2 = 10:10, 300 s apart; 12.5 min elapsed since t1 -> 3 missed (10:05, 10:10, 10:15);
the most recent is 10:15 and the next requeue is 10:20 + 100 ms.
"""

from __future__ import annotations

import enum
import math
import os
import zoneinfo
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone, tzinfo

from kubecore.api.kinds.cron import STAR_BIT, CronError, CronSpec, parse

YEAR_LIMIT = 5
"""robfig gives up (returns the zero time) after searching this many years ahead."""
NEXT_SCHEDULE_DELTA = 0.1
"""Padding added to every requeue so a sync never runs just before its schedule (NTP skew)."""
MANY_MISSED = 100
"""More missed start times than this is reported as "too many" (upstream's arbitrary 100)."""

UTC = timezone.utc


class Missed(enum.Enum):
    NONE = "none"
    FEW = "few"
    MANY = "many"


class InvalidSchedule(ValueError):
    """The schedule parses but cannot be used (two activations less than a second apart)."""


def local_zone() -> tzinfo:
    """The process's time zone (Go's time.Local): $TZ, else /etc/localtime, else UTC."""
    name = os.environ.get("TZ")
    if name is not None:
        try:
            return zoneinfo.ZoneInfo(name.lstrip(":")) if name else UTC
        except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
            return UTC
    try:
        with open("/etc/localtime", "rb") as f:
            return zoneinfo.ZoneInfo.from_file(f, key="Local")
    except (OSError, ValueError):
        return UTC


def load_location(name: str) -> tzinfo:
    """time.LoadLocation: "" and "UTC" are UTC; raises ZoneInfoNotFoundError/ValueError."""
    if name in ("", "UTC"):
        return UTC
    return zoneinfo.ZoneInfo(name)


def _offset_at(unix: int, tz: tzinfo) -> int:
    """The zone's UTC offset in seconds at the instant `unix`."""
    off = datetime.fromtimestamp(unix, UTC).astimezone(tz).utcoffset()
    return int(off.total_seconds()) if off is not None else 0


def go_date(year: int, month: int, day: int, hour: int, tz: tzinfo) -> int:
    """Go's time.Date(year, month, day, hour, 0, 0, 0, tz) as Unix seconds; month and day may
    overflow (normalised like Go: month 13 is January of the next year, day 32 rolls over)."""
    year += (month - 1) // 12
    month = (month - 1) % 12 + 1
    wall = int((datetime(year, month, 1, tzinfo=UTC) + timedelta(days=day - 1, hours=hour)).timestamp())
    guess = _offset_at(wall, tz)
    return wall - _offset_at(wall - guess, tz)


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule bound to the time zone its activations are computed in."""

    spec: CronSpec
    tz: tzinfo

    def next(self, t: float) -> int | None:
        """The first activation strictly after `t` (robfig's Next), None for "never"."""
        if self.spec.every is not None:
            return math.floor(t) + self.spec.every
        return _spec_next(self.spec, math.floor(t) + 1, self.tz)


def parse_schedule(schedule: str, *, default_tz: tzinfo) -> Schedule:
    """cron.ParseStandard bound to a time zone: a TZ= prefix wins, else `default_tz` (raises
    CronError for a bad schedule or zone)."""
    spec = parse(schedule)
    if not spec.location:
        return Schedule(spec, default_tz)
    try:
        return Schedule(spec, load_location(spec.location))
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError) as e:
        raise CronError(f"provided bad location {spec.location}: {e}") from e


def _wall(t: int, tz: tzinfo) -> datetime:
    return datetime.fromtimestamp(t, tz)


def _day_matches(spec: CronSpec, w: datetime) -> bool:
    dom_match = bool(1 << w.day & spec.dom)
    dow_match = bool(1 << ((w.weekday() + 1) % 7) & spec.dow)
    if spec.dom & STAR_BIT or spec.dow & STAR_BIT:
        return dom_match and dow_match
    return dom_match or dow_match


def _spec_next(spec: CronSpec, t: int, tz: tzinfo) -> int | None:
    """SpecSchedule.Next from the whole second `t` (already "the upcoming second"); the loop
    restarts ("WRAP") whenever a field wraps around. Seconds are always 0 for 5-field specs."""
    limit = _wall(t, tz).year + YEAR_LIMIT
    added = False
    while True:
        w = _wall(t, tz)
        if w.year > limit:
            return None
        wrapped = False
        while not (1 << w.month & spec.month):
            if not added:
                added, t = True, go_date(w.year, w.month, 1, 0, tz)
                w = _wall(t, tz)
            t = go_date(w.year, w.month + 1, w.day, w.hour, tz)
            w = _wall(t, tz)
            if w.month == 1:
                wrapped = True
                break
        if wrapped:
            continue
        while not _day_matches(spec, w):
            if not added:
                added, t = True, go_date(w.year, w.month, w.day, 0, tz)
                w = _wall(t, tz)
            t = go_date(w.year, w.month, w.day + 1, w.hour, tz)
            w = _wall(t, tz)
            if w.hour != 0:  # DST moved midnight: back to it
                t += (24 - w.hour) * 3600 if w.hour > 12 else -w.hour * 3600
                w = _wall(t, tz)
            if w.day == 1:
                wrapped = True
                break
        if wrapped:
            continue
        while not (1 << w.hour & spec.hour):
            if not added:
                added, t = True, go_date(w.year, w.month, w.day, w.hour, tz)
            t += 3600
            w = _wall(t, tz)
            if w.hour == 0:
                wrapped = True
                break
        if wrapped:
            continue
        while not (1 << w.minute & spec.minute):
            if not added:
                added, t = True, t - t % 60
            t += 60
            w = _wall(t, tz)
            if w.minute == 0:
                wrapped = True
                break
        if wrapped:
            continue
        if w.second != 0:  # 5-field specs only match second 0
            if not added:
                added = True
            t += 60 - w.second
            continue
        return t


# -- the controller's arithmetic (utils.go) ------------------------------------------------------
@dataclass(frozen=True)
class RecentSchedule:
    earliest: float
    """The last schedule time, or the CronJob's creation time (moved up to now - startingDeadline)."""
    most_recent: int | None
    """The latest activation in (earliest, now], None when there is none."""
    missed: Missed


def most_recent_schedule_time(schedule: Schedule, *, created: float, last_scheduled: float | None, now: float,
                              starting_deadline: int | None = None) -> RecentSchedule:
    """mostRecentScheduleTime; raises InvalidSchedule when two activations are < 1 s apart (or
    the schedule never fires)."""
    earliest = last_scheduled if last_scheduled is not None else created
    if starting_deadline is not None:
        earliest = max(earliest, now - starting_deadline)
    t1 = schedule.next(earliest)
    t2 = schedule.next(t1) if t1 is not None else None
    if t1 is not None and now < t1:
        return RecentSchedule(earliest, None, Missed.NONE)
    if t2 is not None and now < t2:
        return RecentSchedule(earliest, t1, Missed.NONE)
    if t1 is None or t2 is None or t2 - t1 < 1:
        raise InvalidSchedule("time difference between two schedules is less than 1 second")
    between = t2 - t1
    number_missed = int(now - t1) // between + 1
    most_recent: int | None = None
    t: int | None = schedule.next(t1 + (number_missed - 2) * between)
    while t is not None and t <= now:
        most_recent = t
        t = schedule.next(t)
    missed = Missed.MANY if number_missed > MANY_MISSED else Missed.FEW if number_missed > 0 else Missed.NONE
    return RecentSchedule(earliest, most_recent, missed)


def next_schedule_delay(schedule: Schedule, *, created: float, last_scheduled: float | None,
                        now: float) -> float | None:
    """nextScheduleTimeDuration: seconds until the sync after the next activation (+100 ms);
    None when the schedule never fires again."""
    try:
        recent = most_recent_schedule_time(schedule, created=created, last_scheduled=last_scheduled, now=now)
        base: float = recent.most_recent if recent.most_recent is not None else (
            recent.earliest if recent.missed is Missed.NONE else now)
    except InvalidSchedule:
        base = now
    nxt = schedule.next(base)
    return None if nxt is None else nxt + NEXT_SCHEDULE_DELTA - now


def job_name(cronjob_name: str, scheduled: float) -> str:
    """"<cronjob>-<scheduled time in minutes since the epoch>" (getJobName)."""
    return f"{cronjob_name}-{int(scheduled) // 60}"


def format_in_zone(t: float, tz: tzinfo) -> str:
    """RFC 3339 in `tz`, "Z" for a zero offset, as Go's time.RFC3339 formatting."""
    w = datetime.fromtimestamp(math.floor(t), tz)
    off = w.utcoffset() or timedelta(0)
    if not off:
        return w.strftime("%Y-%m-%dT%H:%M:%SZ")
    total = int(off.total_seconds())
    sign, total = ("+", total) if total > 0 else ("-", -total)
    return w.strftime("%Y-%m-%dT%H:%M:%S") + f"{sign}{total // 3600:02d}:{total % 3600 // 60:02d}"
