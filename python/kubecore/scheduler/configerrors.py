"""The typed error for a bad scheduler configuration and the field-error list that builds it.

Messages follow apimachinery's field errors, collected rather than stopping at the first:

    profiles[0].pluginConfig[0].args.scoringStrategy.type: Unsupported value: "Foo": supported
    values: "LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"
"""

from __future__ import annotations

from typing import Any

__all__ = ["ConfigError", "FieldErrors"]


def _go_value(v: Any) -> str:
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    return str(v)


class ConfigError(ValueError):
    """A KubeSchedulerConfiguration that cannot be used; `errors` lists every problem found."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors) if errors else "invalid scheduler configuration")
        self.errors = list(errors)


class FieldErrors:
    """Collects field errors; `raise_if_any()` turns them into one ConfigError."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def invalid(self, path: str, value: Any, detail: str) -> None:
        self.errors.append(f"{path}: Invalid value: {_go_value(value)}: {detail}")

    def invalid_raw(self, path: str, value: str, detail: str) -> None:
        """An invalid value printed as is (a Go Stringer such as a duration: 0s)."""
        self.errors.append(f"{path}: Invalid value: {value}: {detail}")

    def required(self, path: str, detail: str = "") -> None:
        self.errors.append(f"{path}: Required value" + (f": {detail}" if detail else ""))

    def duplicate(self, path: str, value: Any) -> None:
        self.errors.append(f"{path}: Duplicate value: {_go_value(value)}")

    def unsupported(self, path: str, value: Any, supported: list[str]) -> None:
        values = ", ".join(_go_value(s) for s in supported)
        self.errors.append(f"{path}: Unsupported value: {_go_value(value)}: supported values: {values}")

    def forbidden(self, path: str, detail: str) -> None:
        self.errors.append(f"{path}: Forbidden: {detail}")

    def type_error(self, path: str, value: Any, expected: str) -> None:
        self.errors.append(f"{path}: Invalid value: {_go_value(value)}: must be {expected}")

    def unknown_field(self, path: str, name: str) -> None:
        where = f"{path}." if path else ""
        self.errors.append(f'strict decoding error: unknown field "{where}{name}"')

    def decoding(self, path: str, detail: str) -> None:
        """A decoder error about the object at `path` (not a field error): "decoding .path: detail"."""
        self.errors.append(f"decoding .{path}: {detail}")

    def raise_if_any(self) -> None:
        if self.errors:
            raise ConfigError(self.errors)
