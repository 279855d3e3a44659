"""Cron schedules as CronJobs accept them: robfig/cron/v3 ParseStandard, with its error texts.

Five fields (minute hour day-of-month month day-of-week), ``*``/``?``, ranges ``a-b``, steps
``/n``, lists ``a,b``, month and weekday names, descriptors (``@hourly``, ``@every 5m``...) and a
leading ``TZ=``/``CRON_TZ=``. ``parse_error(spec)`` returns the error upstream's parser gives, or
None when the schedule parses. ``parse(spec)`` returns what the parser built (`CronSpec`: one bit
set per field, robfig's SpecSchedule, or the delay of an ``@every``) and raises `CronError`; the
CronJob controller computes activation times from it (`kubecore.controllers.cronjob_schedule`).
"""

from __future__ import annotations

import re
import zoneinfo
from dataclasses import dataclass

__all__ = ["STAR_BIT", "CronError", "CronSpec", "parse", "parse_error", "time_zone_error"]

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
_DURATION_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}

STAR_BIT = 1 << 63
"""Set in a field's bits when it was written ``*`` or ``?`` (robfig's starBit): day-of-month and
day-of-week then combine with AND instead of OR."""


class CronError(Exception):
    """The schedule does not parse; the message is robfig/cron's."""


_CronError = CronError


@dataclass(frozen=True)
class CronSpec:
    """A parsed schedule: bit i of `minute` set means minute i matches (likewise for the other
    fields; `dow` 0 is Sunday), or, for ``@every``, `every` seconds between activations.
    `location` is the name from a ``TZ=``/``CRON_TZ=`` prefix ("" when absent)."""

    minute: int = 0
    hour: int = 0
    dom: int = 0
    month: int = 0
    dow: int = 0
    location: str = ""
    every: int | None = None


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


def _range(expr: str, lo: int, hi: int, names: dict[str, int] | None) -> int:
    """getRange: the bits `expr` sets; raises _CronError with the upstream message."""
    range_and_step = expr.split("/")
    low_high = range_and_step[0].split("-")
    extra = 0
    if low_high[0] in ("*", "?"):
        start, end, extra = lo, hi, STAR_BIT
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
        if step > 1:
            extra = 0
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
    return sum(1 << i for i in range(start, end + 1, step)) | extra


def _all(lo: int, hi: int) -> int:
    return sum(1 << i for i in range(lo, hi + 1)) | STAR_BIT


def _duration_seconds(duration: str) -> float:
    """time.ParseDuration of a string `_DURATION` matched (no sign), in seconds."""
    return sum(float(num or "0") * _UNIT_SECONDS[unit] for num, unit in _DURATION_PART.findall(duration))


def _descriptor(spec: str, location: str) -> CronSpec:
    """parseDescriptor: the fixed schedules and ``@every <duration>``."""
    minute0, hour0, dom1, month1, sunday = 1, 1, 1 << 1, 1 << 1, 1
    every_hour, every_dom, every_month, every_dow = _all(0, 23), _all(1, 31), _all(1, 12), _all(0, 6)
    fixed = {
        "@yearly": (minute0, hour0, dom1, month1, every_dow),
        "@annually": (minute0, hour0, dom1, month1, every_dow),
        "@monthly": (minute0, hour0, dom1, every_month, every_dow),
        "@weekly": (minute0, hour0, every_dom, every_month, sunday),
        "@daily": (minute0, hour0, every_dom, every_month, every_dow),
        "@midnight": (minute0, hour0, every_dom, every_month, every_dow),
        "@hourly": (minute0, every_hour, every_dom, every_month, every_dow),
    }
    if spec in fixed:
        mi, h, d, mo, w = fixed[spec]
        return CronSpec(minute=mi, hour=h, dom=d, month=mo, dow=w, location=location)
    if spec.startswith("@every "):
        duration = spec[len("@every "):]
        if not _DURATION.fullmatch(duration) or duration in ("", "."):
            raise _CronError(f'failed to parse duration {spec}: time: invalid duration "{duration}"')
        return CronSpec(location=location, every=max(1, int(_duration_seconds(duration))))
    raise _CronError(f"unrecognized descriptor: {spec}")


def parse_error(spec: str) -> str | None:
    """The error ParseStandard returns for ``spec``, or None."""
    try:
        _parse(spec)
    except _CronError as e:
        return str(e)
    return None


def parse(spec: str) -> CronSpec:
    """ParseStandard: the schedule `spec` describes; raises `CronError` with upstream's message."""
    return _parse(spec)


def _parse(spec: str) -> CronSpec:
    if not spec:
        raise _CronError("empty spec string")
    location = ""
    if spec.startswith(("TZ=", "CRON_TZ=")):
        space, eq = spec.find(" "), spec.find("=")
        name = spec[eq + 1:space] if space >= 0 else spec[eq + 1:]
        err = _load_location(name)
        if err:
            raise _CronError(f"provided bad location {name}: {err}")
        location = name or "UTC"
        spec = spec[space:].strip() if space >= 0 else ""
    if spec.startswith("@"):
        return _descriptor(spec, location)
    fields = spec.split()
    if len(fields) != 5:
        raise _CronError(f"expected exactly 5 fields, found {len(fields)}: {_go_slice(fields)}")
    bits = []
    for field, (lo, hi, names) in zip(fields, _BOUNDS):
        value = 0
        for expr in field.split(","):
            value |= _range(expr, lo, hi, names)
        bits.append(value)
    return CronSpec(minute=bits[0], hour=bits[1], dom=bits[2], month=bits[3], dow=bits[4], location=location)


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
