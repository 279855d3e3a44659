"""Go's time.Duration as text, both ways: `format_duration` is Duration.String() (what upstream's
messages and metav1.Duration print: "1h2m3.5s", "1.5ms", "0s"); `parse_duration` is
time.ParseDuration for the units Kubernetes flags and annotations use ("1m30s", "500ms", "2h"),
plus a bare number as seconds."""

from __future__ import annotations

import re

__all__ = ["format_duration", "format_seconds", "parse_duration"]

_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_NUMBER_UNIT = r"(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|ms|s|m|h)"
_WHOLE = re.compile(f"(?:{_NUMBER_UNIT})+")
_PARTS = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Seconds in a Go duration ("1m30s", "500ms", "2h") or a bare number; ValueError otherwise."""
    s = text.strip()
    if s.replace(".", "", 1).isdigit():
        return float(s)
    if not _WHOLE.fullmatch(s):
        raise ValueError(f"invalid duration {text!r} (use e.g. 500ms, 15s, 1m30s)")
    return sum(float(number) * _UNIT[unit] for number, unit in _PARTS.findall(s))


def _fmt_frac(v: int, prec: int) -> tuple[str, int]:
    digits = []
    printed = False
    for _ in range(prec):
        d = v % 10
        printed = printed or d != 0
        if printed:
            digits.append(str(d))
        v //= 10
    frac = "." + "".join(reversed(digits)) if printed else ""
    return frac, v


def format_duration(d: int) -> str:
    """Go's time.Duration.String() of `d` nanoseconds."""
    if d == 0:
        return "0s"
    neg = d < 0
    u = -d if neg else d
    if u < 1_000_000_000:
        if u < 1000:
            s = f"{u}ns"
        elif u < 1_000_000:
            frac, whole = _fmt_frac(u, 3)
            s = f"{whole}{frac}µs"
        else:
            frac, whole = _fmt_frac(u, 6)
            s = f"{whole}{frac}ms"
    else:
        frac, u = _fmt_frac(u, 9)
        s = f"{u % 60}{frac}s"
        u //= 60
        if u > 0:
            s = f"{u % 60}m" + s
            u //= 60
            if u > 0:
                s = f"{u}h" + s
    return "-" + s if neg else s


def format_seconds(seconds: float, *, truncate_to: float = 1e-9) -> str:
    """format_duration of `seconds`, first truncated to a multiple of `truncate_to` seconds (Go's
    Duration.Truncate, e.g. 1e-3 for the kubelet's millisecond-truncated pull times)."""
    step = max(1, round(truncate_to * 1e9))
    return format_duration(int(round(seconds * 1e9)) // step * step)
