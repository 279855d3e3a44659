"""resource.Quantity: parsing, comparison and the canonical string upstream prints.

Mirrors k8s.io/apimachinery/pkg/api/resource (quantity.go, suffix.go, amount.go) for the parts
the API server and the scheduler need. A Quantity is held exactly as an integer count of nano
units (10^-9), because upstream rounds every parsed value up to nano precision; the scheduler
reads ``milli_value()`` (CPU) and ``value()`` (bytes, counts), both rounded up like upstream's
MilliValue/Value.

Worked examples (the table tests reuse them):

    parse("1.5")     -> 1500m      parse("1000")   -> 1k        parse("0.1")   -> 100m
    parse("1024Mi")  -> 1Gi        parse("1536Mi") -> 1536Mi    parse("1e3")   -> 1e3
    parse("512Ki")   -> 512Ki      parse("1000Ki") -> 1000Ki    parse("0.5Gi") -> 512Mi
    parse("5K")      -> QuantityError("unable to parse quantity's suffix")
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Quantity", "QuantityError", "parse", "parse_json", "ERR_FORMAT_WRONG", "ERR_SUFFIX", "ERR_NUMERIC",
    "DECIMAL_SI", "BINARY_SI", "DECIMAL_EXPONENT",
]

SPLIT_RE = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
ERR_FORMAT_WRONG = "quantities must match the regular expression '" + SPLIT_RE + "'"
ERR_SUFFIX = "unable to parse quantity's suffix"
ERR_NUMERIC = "unable to parse quantity's numeric part"

DECIMAL_SI, BINARY_SI, DECIMAL_EXPONENT = "DecimalSI", "BinarySI", "DecimalExponent"

NANO = 10 ** 9
# The largest value upstream keeps for a binary quantity (2^63 - 1 bytes).
_MAX_INT64 = (1 << 63) - 1

_DEC_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DEC_BY_EXP = {v: k for k, v in _DEC_SUFFIXES.items()}
_BIN_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_BIN_BY_EXP = {v: k for k, v in _BIN_SUFFIXES.items()}
_EXP_RE = re.compile(r"[eE]([-+]?[0-9]+)")
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")


class QuantityError(ValueError):
    """A string that is not a quantity; the message is upstream's error text."""


@dataclass(frozen=True, order=False)
class Quantity:
    """An exact quantity: ``nanos`` units of 10^-9, printed in ``format``."""

    nanos: int
    format: str = DECIMAL_SI

    # ---- values --------------------------------------------------------------------------

    def milli_value(self) -> int:
        """Value in milli-units, rounded up (MilliValue)."""
        return -((-self.nanos) // 10 ** 6)

    def value(self) -> int:
        """Value in whole units, rounded up (Value)."""
        return -((-self.nanos) // NANO)

    def is_zero(self) -> bool:
        return self.nanos == 0

    def sign(self) -> int:
        return (self.nanos > 0) - (self.nanos < 0)

    def cmp(self, other: Quantity) -> int:
        """-1, 0 or 1 as upstream's Cmp (formats do not matter)."""
        return (self.nanos > other.nanos) - (self.nanos < other.nanos)

    def __lt__(self, other: Quantity) -> bool:
        return self.nanos < other.nanos

    def __le__(self, other: Quantity) -> bool:
        return self.nanos <= other.nanos

    def __add__(self, other: Quantity) -> Quantity:
        return Quantity(self.nanos + other.nanos, self.format)

    def __str__(self) -> str:
        return self.canonical()

    # ---- printing --------------------------------------------------------------------------

    def canonical(self) -> str:
        """Quantity.String(): the canonical form (what the API server stores and prints)."""
        if self.nanos == 0:
            return "0"
        fmt = self.format
        if fmt == BINARY_SI and (-1024 * NANO < self.nanos < 1024 * NANO or self.nanos % NANO):
            fmt = DECIMAL_SI  # small or fractional binary quantities print as decimal
        sign = "-" if self.nanos < 0 else ""
        if fmt == BINARY_SI:
            return sign + _binary(abs(self.nanos) // NANO)
        number, exponent = _decimal(abs(self.nanos))
        return sign + str(number) + _dec_suffix(exponent, fmt)


def _decimal(nanos: int) -> tuple[int, int]:
    """AsCanonicalBytes: mantissa without trailing zeros, exponent lowered to a multiple of 3."""
    mantissa, exponent = nanos, -9
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    shift = exponent % 3
    return mantissa * 10 ** shift, exponent - shift


def _dec_suffix(exponent: int, fmt: str) -> str:
    if fmt == DECIMAL_EXPONENT:
        return "" if exponent == 0 else f"e{exponent}"
    if exponent in _DEC_BY_EXP:
        return _DEC_BY_EXP[exponent]
    return f"e{exponent}"


def _binary(value: int) -> str:
    """AsCanonicalBase1024Bytes: divide by 1024 while exact."""
    exponent = 0
    while value % 1024 == 0 and exponent < 60:
        value //= 1024
        exponent += 10
    return f"{value}{_BIN_BY_EXP.get(exponent, '')}"


# ---- parsing -------------------------------------------------------------------------------


def _split(s: str) -> tuple[bool, str, str, str]:
    """parseQuantityString: (positive, whole digits, fraction digits, suffix)."""
    if not s:
        raise QuantityError(ERR_FORMAT_WRONG)
    positive, pos, end = True, 0, len(s)
    if s[0] in "+-":
        positive, pos = s[0] == "+", 1
    start = pos
    while pos < end and s[pos].isdigit() and s[pos].isascii():
        pos += 1
    whole = s[start:pos]
    frac = ""
    if pos < end and s[pos] == ".":
        pos += 1
        fstart = pos
        while pos < end and s[pos].isdigit() and s[pos].isascii():
            pos += 1
        frac = s[fstart:pos]
    if not whole and not frac:
        raise QuantityError(ERR_FORMAT_WRONG)
    sstart = pos
    while pos < end and s[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and s[pos] in "+-":
        pos += 1
    while pos < end and s[pos].isdigit() and s[pos].isascii():
        pos += 1
    if pos < end:
        raise QuantityError(ERR_FORMAT_WRONG)
    return positive, whole, frac, s[sstart:]


def _suffix(suffix: str) -> tuple[int, int, str]:
    """(base, exponent, format) for a suffix; base 10 or 2."""
    if suffix in _DEC_SUFFIXES:
        return 10, _DEC_SUFFIXES[suffix], DECIMAL_SI
    if suffix in _BIN_SUFFIXES:
        return 2, _BIN_SUFFIXES[suffix], BINARY_SI
    m = _EXP_RE.fullmatch(suffix)
    if m is not None:
        return 10, int(m.group(1)), DECIMAL_EXPONENT
    raise QuantityError(ERR_SUFFIX)


def parse(s: str) -> Quantity:
    """ParseQuantity: raises QuantityError with upstream's message."""
    positive, whole, frac, suffix = _split(s)
    base, exponent, fmt = _suffix(suffix)
    numerator = int((whole or "0") + frac)
    denominator = 10 ** len(frac)
    if base == 2:
        numerator <<= exponent
    elif exponent >= 0:
        numerator *= 10 ** exponent
    else:
        denominator *= 10 ** (-exponent)
    scaled = numerator * NANO
    nanos = -((-scaled) // denominator)  # round up to nano precision, as upstream does
    if fmt == BINARY_SI and nanos > _MAX_INT64 * NANO:
        nanos = _MAX_INT64 * NANO
    return Quantity(nanos if positive else -nanos, fmt)


def parse_json(value: Any) -> Quantity:
    """A quantity as decoded JSON: a string, or a number (which upstream also accepts)."""
    if isinstance(value, bool) or value is None:
        raise QuantityError(ERR_FORMAT_WRONG)
    if isinstance(value, int):
        return parse(str(value))
    if isinstance(value, float):
        return parse(repr(value).replace("e+", "e"))
    if isinstance(value, str):
        return parse(value.strip())
    raise QuantityError(ERR_FORMAT_WRONG)


def from_milli(milli: int, fmt: str = DECIMAL_SI) -> Quantity:
    """NewMilliQuantity."""
    return Quantity(milli * 10 ** 6, fmt)


def from_int(value: int, fmt: str = DECIMAL_SI) -> Quantity:
    """NewQuantity."""
    return Quantity(value * NANO, fmt)
