"""The subset of client-go's JSONPath that CRD printer columns use.

``find(obj, path)`` returns every value ``path`` selects (missing keys select nothing, as with
AllowMissingKeys). Supported: ``.field``, ``['field.with.dots']``, ``[2]`` / ``[-1]``, ``[1:3]``,
``[*]`` / ``.*``, and filters ``[?(@.type=="Ready")]`` (``==``, ``!=``, ``<``, ``>``, ``<=``,
``>=`` against a quoted string or a number, or ``[?(@.field)]`` for presence). A path may be
wrapped in ``{}`` as kubectl writes it. ``text(value)`` prints a result as
JSONPath.PrintResults does: strings raw, objects and arrays as compact JSON.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import msgspec

from kubecore.api.structural import go_float

__all__ = ["parse", "find", "text", "JSONPathError", "Steps"]

_encode = msgspec.json.Encoder(order="sorted").encode
_FILTER = re.compile(r"^@((?:\.[A-Za-z0-9_\-/]+|\['[^']*'\]|\[\"[^\"]*\"\])*)\s*(?:(==|!=|<=|>=|<|>)\s*(.+?))?\s*$")


class JSONPathError(ValueError):
    pass


@dataclass(frozen=True)
class _Step:
    kind: str          # "field", "index", "slice", "all", "filter"
    arg: Any = None


Steps = list[_Step]


def _bracket(body: str) -> _Step:
    body = body.strip()
    if body == "*":
        return _Step("all")
    if body.startswith("?(") and body.endswith(")"):
        m = _FILTER.match(body[2:-1].strip())
        if m is None:
            raise JSONPathError(f"unrecognized filter {body!r}")
        return _Step("filter", (parse("." + m.group(1).lstrip(".")) if m.group(1) else [], m.group(2), m.group(3)))
    if body[:1] in ("'", '"') and body[-1:] == body[:1]:
        return _Step("field", body[1:-1])
    if ":" in body:
        a, _, b = body.partition(":")
        return _Step("slice", (int(a) if a.strip() else None, int(b.split(":")[0]) if b.split(":")[0].strip() else None))
    try:
        return _Step("index", int(body))
    except ValueError:
        raise JSONPathError(f"unrecognized index {body!r}") from None


def parse(path: str) -> list[_Step]:
    p = path.strip()
    if p.startswith("{") and p.endswith("}"):
        p = p[1:-1].strip()
    steps: list[_Step] = []
    i = 0
    while i < len(p):
        c = p[i]
        if c == ".":
            j = i + 1
            while j < len(p) and p[j] not in ".[":
                j += 1
            name = p[i + 1:j]
            if name:
                steps.append(_Step("all") if name == "*" else _Step("field", name))
            i = j
        elif c == "[":
            depth, j, quote = 0, i, ""
            while j < len(p):
                ch = p[j]
                if quote:
                    quote = "" if ch == quote else quote
                elif ch in "'\"":
                    quote = ch
                elif ch == "[":
                    depth += 1
                elif ch == "]":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            if j >= len(p):
                raise JSONPathError(f"unterminated [ in {path!r}")
            steps.append(_bracket(p[i + 1:j]))
            i = j + 1
        elif c == "@" or c == "$":
            i += 1
        else:
            raise JSONPathError(f"unrecognized character {c!r} in {path!r}")
    return steps


def _literal(raw: str) -> Any:
    raw = raw.strip()
    if raw[:1] in ("'", '"') and raw[-1:] == raw[:1]:
        return raw[1:-1]
    try:
        return float(raw) if any(ch in raw for ch in ".eE") else int(raw)
    except ValueError:
        return raw


def _compare(left: Any, op: str, right: Any) -> bool:
    if isinstance(left, bool) or isinstance(right, bool):
        return op == "==" and left == right or op == "!=" and left != right
    if op == "==":
        return bool(left == right)
    if op == "!=":
        return bool(left != right)
    if isinstance(left, (int, float)) and isinstance(right, (int, float)):
        return {"<": left < right, ">": left > right, "<=": left <= right, ">=": left >= right}[op]
    return False


def _apply(values: list[Any], step: _Step) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if step.kind == "field":
            if isinstance(v, dict) and step.arg in v:
                out.append(v[step.arg])
        elif step.kind == "index":
            if isinstance(v, list) and -len(v) <= step.arg < len(v):
                out.append(v[step.arg])
        elif step.kind == "slice":
            if isinstance(v, list):
                out.extend(v[step.arg[0]:step.arg[1]])
        elif step.kind == "all":
            if isinstance(v, list):
                out.extend(v)
            elif isinstance(v, dict):
                out.extend(v[k] for k in sorted(v))
        elif step.kind == "filter" and isinstance(v, list):
            sub, op, lit = step.arg
            for item in v:
                found = _eval([item], sub)
                if op is None and found or op is not None and found and _compare(found[0], op, _literal(lit)):
                    out.append(item)
    return out


def _eval(values: list[Any], steps: list[_Step]) -> list[Any]:
    for step in steps:
        values = _apply(values, step)
    return values


def find(obj: Any, path: str | list[_Step]) -> list[Any]:
    steps = parse(path) if isinstance(path, str) else path
    return _eval([obj], steps)


def text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list)):
        return _encode(value).decode()
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return go_float(value)
    return str(value)
