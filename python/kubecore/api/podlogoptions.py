"""PodLogOptions (the query of `pods/{name}/log` and of the kubelet's `/containerLogs`): parsing
and upstream's ValidatePodLogOptions.

    opts = LogOptions.from_query(request.query)     # LogOptionsError: not decodable
    errs = opts.validate()                          # FieldErrors, upstream's messages

Booleans are `true`/`false`/`1`/`0`; integers decimal; sinceTime RFC3339. The legacy `tail=N`
(or `tail=all`) of the kubelet's API is read as tailLines. `container`, `stream` and
`insecureSkipTLSVerifyBackend` are read but only the API server uses them.

Validation (upstream's): tailLines >= 0; limitBytes > 0; at most one of sinceSeconds and
sinceTime; sinceSeconds > 0; stream one of All, Stdout, Stderr (and not with tailLines).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass

from kubecore.api.errors import FieldError

STREAMS = ("All", "Stdout", "Stderr")


class LogOptionsError(ValueError):
    """A query that cannot be decoded into PodLogOptions."""


def parse_rfc3339(text: str) -> float | None:
    """RFC3339 with up to nanosecond fractions -> epoch seconds, or None."""
    head, dot, rest = text.partition(".")
    frac = 0.0
    if dot:
        digits = len(rest) - len(rest.lstrip("0123456789"))
        frac = float("0." + rest[:digits]) if digits else 0.0
        head += rest[digits:]
    try:
        parsed = dt.datetime.fromisoformat(head.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None
    return parsed.timestamp() + frac


def format_rfc3339(t: float) -> str:
    """Epoch seconds -> RFC3339 in UTC, whole seconds (how the API server passes sinceTime on)."""
    return dt.datetime.fromtimestamp(int(t), dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class LogOptions:
    container: str = ""
    follow: bool = False
    previous: bool = False
    timestamps: bool = False
    tail_lines: int | None = None
    limit_bytes: int | None = None
    since_seconds: int | None = None
    since_time: float | None = None
    stream: str | None = None
    insecure_skip_tls_verify_backend: bool = False

    def since(self, now: float) -> float | None:
        """The oldest time wanted (epoch seconds), or None for all."""
        if self.since_seconds is not None:
            return now - self.since_seconds
        return self.since_time

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> LogOptions:
        q = dict(query)
        tail = q.pop("tail", None)
        if tail:
            if tail == "all":
                q.pop("tailLines", None)
            else:
                q["tailLines"] = tail
        return cls(container=q.get("container", ""), follow=_bool(q, "follow"), previous=_bool(q, "previous"),
                   timestamps=_bool(q, "timestamps"), tail_lines=_int(q, "tailLines"),
                   limit_bytes=_int(q, "limitBytes"), since_seconds=_int(q, "sinceSeconds"),
                   since_time=_time(q, "sinceTime"), stream=q.get("stream") or None,
                   insecure_skip_tls_verify_backend=_bool(q, "insecureSkipTLSVerifyBackend"))

    def validate(self) -> list[FieldError]:
        """ValidatePodLogOptions."""
        out = []
        if self.tail_lines is not None and self.tail_lines < 0:
            out.append(FieldError.invalid("tailLines", self.tail_lines, "must be greater than or equal to 0"))
        if self.limit_bytes is not None and self.limit_bytes < 1:
            out.append(FieldError.invalid("limitBytes", self.limit_bytes, "must be greater than 0"))
        if self.since_seconds is not None and self.since_time is not None:
            out.append(FieldError.forbidden("", "at most one of `sinceTime` or `sinceSeconds` may be specified"))
        elif self.since_seconds is not None and self.since_seconds < 1:
            out.append(FieldError.invalid("sinceSeconds", self.since_seconds, "must be greater than 0"))
        if self.stream is not None:
            if self.stream not in STREAMS:
                out.append(FieldError.not_supported("stream", self.stream, STREAMS))
            elif self.stream != "All" and self.tail_lines is not None:
                out.append(FieldError.forbidden("", "`tailLines` and specific `stream` are mutually exclusive "
                                                    "for now"))
        return out

    def kubelet_query(self) -> dict[str, str]:
        """The query the API server sends to the kubelet's /containerLogs (LogLocation)."""
        q: dict[str, str] = {}
        for key, flag in (("follow", self.follow), ("previous", self.previous), ("timestamps", self.timestamps)):
            if flag:
                q[key] = "true"
        if self.since_seconds is not None:
            q["sinceSeconds"] = str(self.since_seconds)
        if self.since_time is not None:
            q["sinceTime"] = format_rfc3339(self.since_time)
        if self.tail_lines is not None:
            q["tailLines"] = str(self.tail_lines)
        if self.limit_bytes is not None:
            q["limitBytes"] = str(self.limit_bytes)
        if self.stream is not None:
            q["stream"] = self.stream
        return q


def _bool(q: Mapping[str, str], key: str) -> bool:
    value = q.get(key)
    if value is None or value == "":
        return False
    if value.lower() in ("true", "1"):
        return True
    if value.lower() in ("false", "0"):
        return False
    raise LogOptionsError(f"{key}: invalid boolean value {value!r}")


def _int(q: Mapping[str, str], key: str) -> int | None:
    value = q.get(key)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise LogOptionsError(f"{key}: invalid integer value {value!r}") from None


def _time(q: Mapping[str, str], key: str) -> float | None:
    value = q.get(key)
    if not value:
        return None
    t = parse_rfc3339(value)
    if t is None:
        raise LogOptionsError(f"{key}: invalid RFC3339 time {value!r}")
    return t
