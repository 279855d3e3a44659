"""Go's fmt ``%v`` of a float64, as upstream's messages print JSON numbers (decoded as float64):
shortest digits, exponent form when the exponent is below -4 or at least 6 (``1e+06``)."""

from __future__ import annotations

from decimal import Decimal

__all__ = ["go_float"]


def go_float(f: float) -> str:
    """fmt's %v for a float64: shortest digits, %e when the exponent is < -4 or >= 21 is JSON's
    rule, but %v switches at >= 6 digits before the point (``1e+06``)."""
    if f != f:
        return "NaN"
    if f in (float("inf"), float("-inf")):
        return "+Inf" if f > 0 else "-Inf"
    if f == 0:
        return "-0" if str(f).startswith("-") else "0"
    sign, digits_t, exponent = Decimal(repr(f)).normalize().as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digits_t))
    dp = len(digits) + exponent
    exp = dp - 1
    prefix = "-" if sign else ""
    if exp < -4 or exp >= 6:
        mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{prefix}{mant}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if dp <= 0:
        return f"{prefix}0.{'0' * -dp}{digits}"
    if dp >= len(digits):
        return prefix + digits + "0" * (dp - len(digits))
    return f"{prefix}{digits[:dp]}.{digits[dp:]}"
