"""`$(VAR)` references in env values, command, args and subPathExpr, expanded as upstream's
third_party/forked/golang/expansion does.

Rules (each one is a case in the unit tests):
- `$(NAME)` becomes the value of NAME when a mapping knows it, else stays `$(NAME)` as written;
- `$$` is an escaped `$`: `$$(NAME)` becomes the literal `$(NAME)`;
- a `$` before anything else stays as it is (`$x` -> `$x`), as does an unclosed `$(` (`$(A` -> `$(A`);
- expansion is one pass: a value that itself contains `$(OTHER)` is not expanded again.

`mapping_for(a, b)` looks a name up in `a`, then `b` (the container's own variables before the
service variables, upstream's MappingFuncFor).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

Mapping_ = Callable[[str], str]
OPERATOR, OPENER, CLOSER = "$", "(", ")"


def _wrap(name: str) -> str:
    return f"{OPERATOR}{OPENER}{name}{CLOSER}"


def mapping_for(*contexts: Mapping[str, str]) -> Mapping_:
    """A lookup over `contexts` in order; an unknown name maps to its own `$(name)`."""

    def lookup(name: str) -> str:
        for ctx in contexts:
            if name in ctx:
                return ctx[name]
        return _wrap(name)

    return lookup


def _read_reference(rest: str) -> tuple[str, bool, int]:
    """What follows a `$`: (text, is a variable name, characters consumed after the `$`)."""
    first = rest[0]
    if first == OPERATOR:
        return OPERATOR, False, 1
    if first == OPENER:
        close = rest.find(CLOSER, 1)
        if close >= 0:
            return rest[1:close], True, close + 1
        return OPERATOR + OPENER, False, 1
    return OPERATOR + first, False, 1


def expand(text: str, mapping: Mapping_) -> str:
    """`text` with every `$(NAME)` replaced by `mapping(NAME)` (see the module docstring)."""
    if OPERATOR not in text:
        return text
    out: list[str] = []
    checkpoint = 0
    cursor = 0
    while cursor < len(text):
        if text[cursor] == OPERATOR and cursor + 1 < len(text):
            out.append(text[checkpoint:cursor])
            read, is_var, advance = _read_reference(text[cursor + 1:])
            out.append(mapping(read) if is_var else read)
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    out.append(text[checkpoint:])
    return "".join(out)
