"""String formats a CRD schema may check (kube-openapi's strfmt registry as the apiextensions
server keeps it: apiserver/validation/formats.go's supported set).

``check(format, value)`` answers whether ``value`` is valid for a format; names are normalized as
go-openapi does (``date-time`` and ``datetime`` are the same format). Formats outside SUPPORTED
are not checked at all (upstream strips them from the schema before validating).
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import ipaddress
import re
from collections.abc import Callable

from kubecore.api.validation import is_dns1123_label, is_dns1123_subdomain

__all__ = ["SUPPORTED", "check"]

_DATE_TIME_TAIL = re.compile(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$")
_UUID = re.compile(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
_UUID3 = re.compile(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
_UUID4 = re.compile(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
_UUID5 = re.compile(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
_HOSTNAME = re.compile(
    r"^([a-zA-Z0-9]((-?[a-zA-Z0-9]{0,62})?)|([a-zA-Z0-9](([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)(\.)){1,}([a-zA-Z]){2,63})$")
_MAC = re.compile(r"^([0-9A-Fa-f]{2}[:-]){5}([0-9A-Fa-f]{2})$|^([0-9A-Fa-f]{4}\.){2}([0-9A-Fa-f]{4})$"
                  r"|^([0-9A-Fa-f]{2}[:-]){7}([0-9A-Fa-f]{2})$|^([0-9A-Fa-f]{2}[:-]){19}([0-9A-Fa-f]{2})$")
_EMAIL = re.compile(r"^[^@\s<>]+@[^@\s<>]+$")
_URI = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*:|/)\S*$")
_DURATION = re.compile(r"^[-+]?((\d+(\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h))+$"
                       r"|^\d+\s*(ns|us|ms|s|m|h|d|w|nanoseconds?|microseconds?|milliseconds?|seconds?|minutes?"
                       r"|hours?|days?|weeks?)$")
_HEXCOLOR = re.compile(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$")
_RGBCOLOR = re.compile(r"^rgb\(\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])"
                       r"\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*\)$")
_BSON = re.compile(r"^[0-9a-fA-F]{24}$")
_SSN = re.compile(r"^\d{3}[- ]?\d{2}[- ]?\d{4}$")


def is_date(s: str) -> bool:
    try:
        dt.datetime.strptime(s, "%Y-%m-%d")
    except ValueError:
        return False
    return len(s) == 10


def is_date_time(s: str) -> bool:
    """strfmt.IsDateTime: a full date, a ``t`` (any case) and hh:mm:ss[.frac](z|+hh:mm)."""
    if len(s) < 4:
        return False
    parts = s.lower().split("t")
    if len(parts) < 2 or not is_date(parts[0]):
        return False
    m = _DATE_TIME_TAIL.match(parts[1])
    return m is not None and m.group(1) <= "23" and m.group(2) <= "59" and m.group(3) <= "59"


def is_base64(s: str) -> bool:
    try:
        base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def is_ipv4(s: str) -> bool:
    try:
        ipaddress.IPv4Address(s)
    except ValueError:
        return False
    return True


def is_ipv6(s: str) -> bool:
    try:
        ipaddress.IPv6Address(s)
    except ValueError:
        return False
    return True


def is_cidr(s: str) -> bool:
    try:
        ipaddress.ip_network(s, strict=False)
    except ValueError:
        return False
    return "/" in s


def is_hostname(s: str) -> bool:
    return bool(_HOSTNAME.match(s)) and len(s) <= 255 and all(len(p) <= 63 for p in s.split("."))


def _isbn10(s: str) -> bool:
    d = re.sub(r"[\s-]", "", s)
    if not re.fullmatch(r"\d{9}[\dX]", d):
        return False
    total = sum((10 - i) * (10 if c == "X" else int(c)) for i, c in enumerate(d))
    return total % 11 == 0


def _isbn13(s: str) -> bool:
    d = re.sub(r"[\s-]", "", s)
    if not re.fullmatch(r"\d{13}", d):
        return False
    total = sum(int(c) * (1 if i % 2 == 0 else 3) for i, c in enumerate(d))
    return total % 10 == 0


def _credit_card(s: str) -> bool:
    d = re.sub(r"\D", "", s)
    if not 12 <= len(d) <= 19:
        return False
    total = 0
    for i, c in enumerate(reversed(d)):
        n = int(c) * (2 if i % 2 else 1)
        total += n - 9 if n > 9 else n
    return total % 10 == 0


_CHECKS: dict[str, Callable[[str], bool]] = {
    "bsonobjectid": lambda s: bool(_BSON.match(s)),
    "uri": lambda s: bool(_URI.match(s)),
    "email": lambda s: bool(_EMAIL.match(s)),
    "hostname": is_hostname,
    "ipv4": is_ipv4,
    "ipv6": is_ipv6,
    "cidr": is_cidr,
    "mac": lambda s: bool(_MAC.match(s)),
    "uuid": lambda s: bool(_UUID.match(s)),
    "uuid3": lambda s: bool(_UUID3.match(s)),
    "uuid4": lambda s: bool(_UUID4.match(s)),
    "uuid5": lambda s: bool(_UUID5.match(s)),
    "isbn": lambda s: _isbn10(s) or _isbn13(s),
    "isbn10": _isbn10,
    "isbn13": _isbn13,
    "creditcard": _credit_card,
    "ssn": lambda s: bool(_SSN.match(s)),
    "hexcolor": lambda s: bool(_HEXCOLOR.match(s)),
    "rgbcolor": lambda s: bool(_RGBCOLOR.match(s)),
    "byte": is_base64,
    "password": lambda s: True,
    "date": is_date,
    "duration": lambda s: bool(_DURATION.match(s)),
    "datetime": is_date_time,
    "k8sshortname": lambda s: not is_dns1123_label(s),
    "k8slongname": lambda s: not is_dns1123_subdomain(s),
}

SUPPORTED = frozenset(_CHECKS)


def check(fmt: str, value: str) -> bool:
    """Whether ``value`` is valid for ``fmt`` (unknown formats always are)."""
    fn = _CHECKS.get(fmt.replace("-", ""))
    return True if fn is None else fn(value)
