"""Cron schedules as CronJobs accept them: robfig/cron/v3 ParseStandard, with its error texts.

Five fields (minute hour day-of-month month day-of-week), ``*``/``?``, ranges ``a-b``, steps
``/n``, lists ``a,b``, month and weekday names, descriptors (``@hourly``, ``@every 5m``...) and a
leading ``TZ=``/``CRON_TZ=``. ``parse_error(spec)`` returns the error upstream's parser gives, or
None when the schedule parses.
"""

from __future__ import annotations

import re
import zoneinfo

__all__ = ["parse_error", "time_zone_error"]

_MONTHS = {n: i + 1 for i, n in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
                                            "nov", "dec"))}
_DAYS = {n: i for i, n in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
# (min, max, names) per field, in order.
_BOUNDS: tuple[tuple[int, int, dict[str, int] | None], ...] = (
    (0, 59, None), (0, 23, None), (1, 31, None), (1, 12, _MONTHS), (0, 6, _DAYS),
)
_DESCRIPTORS = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"})
_DURATION = re.compile(r"([0-9]*(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+")
_TZ_PART = re.compile(r"[A-Za-z\.\-_0-9+]{1,14}")


class _CronError(Exception):
    pass


def _go_slice(fields: list[str]) -> str:
    return "[" + " ".join(fields) + "]"


def _must_int(expr: str) -> int:
    if not re.fullmatch(r"[+-]?[0-9]+", expr):
        raise _CronError(f'failed to parse int from {expr}: strconv.Atoi: parsing "{expr}": invalid syntax')
    value = int(expr)
    if value < 0:
        raise _CronError(f"negative number ({value}) not allowed: {expr}")
    return value


def _int_or_name(expr: str, names: dict[str, int] | None) -> int:
    if names is not None and expr.lower() in names:
        return names[expr.lower()]
    return _must_int(expr)


def _range(expr: str, lo: int, hi: int, names: dict[str, int] | None) -> None:
    """getRange: raises _CronError with the upstream message."""
    range_and_step = expr.split("/")
    low_high = range_and_step[0].split("-")
    if low_high[0] in ("*", "?"):
        start, end = lo, hi
    else:
        start = _int_or_name(low_high[0], names)
        if len(low_high) == 1:
            end = start
        elif len(low_high) == 2:
            end = _int_or_name(low_high[1], names)
        else:
            raise _CronError(f"too many hyphens: {expr}")
    step = 1
    if len(range_and_step) == 2:
        step = _must_int(range_and_step[1])
        if len(low_high) == 1:
            end = hi
    elif len(range_and_step) > 2:
        raise _CronError(f"too many slashes: {expr}")
    if start < lo:
        raise _CronError(f"beginning of range ({start}) below minimum ({lo}): {expr}")
    if end > hi:
        raise _CronError(f"end of range ({end}) above maximum ({hi}): {expr}")
    if start > end:
        raise _CronError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise _CronError(f"step of range should be a positive number: {expr}")


def _descriptor(spec: str) -> None:
    if spec in _DESCRIPTORS:
        return
    if spec.startswith("@every "):
        duration = spec[len("@every "):]
        if not _DURATION.fullmatch(duration) or duration in ("", "."):
            raise _CronError(f'failed to parse duration {spec}: time: invalid duration "{duration}"')
        return
    raise _CronError(f"unrecognized descriptor: {spec}")


def parse_error(spec: str) -> str | None:
    """The error ParseStandard returns for ``spec``, or None."""
    try:
        _parse(spec)
    except _CronError as e:
        return str(e)
    return None


def _parse(spec: str) -> None:
    if not spec:
        raise _CronError("empty spec string")
    if spec.startswith(("TZ=", "CRON_TZ=")):
        space, eq = spec.find(" "), spec.find("=")
        name = spec[eq + 1:space] if space >= 0 else spec[eq + 1:]
        err = _load_location(name)
        if err:
            raise _CronError(f"provided bad location {name}: {err}")
        spec = spec[space:].strip() if space >= 0 else ""
    if spec.startswith("@"):
        _descriptor(spec)
        return
    fields = spec.split()
    if len(fields) != 5:
        raise _CronError(f"expected exactly 5 fields, found {len(fields)}: {_go_slice(fields)}")
    for field, (lo, hi, names) in zip(fields, _BOUNDS):
        for expr in field.split(","):
            _range(expr, lo, hi, names)


def _load_location(name: str) -> str:
    if name in ("", "UTC"):
        return ""
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        return f"unknown time zone {name}"
    return ""


def time_zone_error(tz: str) -> str | None:
    """validateTimeZone's detail for a CronJob's spec.timeZone, or None."""
    if not tz:
        return "timeZone must be nil or non-empty string"
    for part in tz.split("/"):
        if part in (".", "..") or part.startswith("-") or not _TZ_PART.fullmatch(part):
            return f"unknown time zone {tz}"
    if tz.lower() == "local":
        return "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"
    err = _load_location(tz)
    return err or None
