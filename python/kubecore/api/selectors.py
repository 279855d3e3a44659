"""Label and field selectors: upstream's syntax, errors and matching.

Label selectors port k8s.io/apimachinery/pkg/labels/selector.go (lexer, recursive-descent parser,
NewRequirement validation) so that the same input gives the same requirements or the same error
text. Field selectors port pkg/fields/selector.go (``=``, ``==``, ``!=``; ``\\``-escapes in values).
Parse errors raise ``StatusError`` 400 (BadRequest) with the parser's message, as the API server's
LIST handler does. Per-resource field sets live in ``kubecore.api.fieldsets`` and are re-exported here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kubecore.api.errors import FieldError, aggregate_message, bad_request
from kubecore.api.fieldsets import convert_field_label, object_fields, supported_fields
from kubecore.api.validation import is_label_value, is_qualified_name

if TYPE_CHECKING:
    from kubecore.api.registry import ResourceType

__all__ = [
    "Requirement", "LabelSelector", "FieldSelector", "FieldTerm", "parse_label_selector",
    "parse_field_selector", "object_fields", "supported_fields", "EVERYTHING",
]

BINARY_OPERATORS = ("in", "notin", "=", "==", "!=", "gt", "lt")

# Tokens (labels.Token); ERROR is 0 as upstream.
_ERROR, _EOS, _CPAR, _COMMA, _NOT, _DEQ, _EQ, _GT, _ID, _IN, _LT, _NEQ, _NOTIN, _OPAR = range(14)
_STRING2TOKEN = {")": _CPAR, ",": _COMMA, "!": _NOT, "==": _DEQ, "=": _EQ, ">": _GT, "in": _IN, "<": _LT,
                 "!=": _NEQ, "notin": _NOTIN, "(": _OPAR}
_SPECIAL = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")
_INT64 = re.compile(r"[+-]?[0-9]+")


class _SelectorSyntaxError(Exception):
    pass


def _lex(s: str) -> list[tuple[int, str]]:
    """Scan the whole input into (token, literal) pairs ending with EOS (Lexer.Lex in a loop)."""
    items: list[tuple[int, str]] = []
    pos, n = 0, len(s)
    while True:
        while pos < n and s[pos] in _WHITESPACE:
            pos += 1
        if pos >= n or s[pos] == "\x00":
            items.append((_EOS, ""))
            return items
        if s[pos] in _SPECIAL:
            buf, last_tok, last_lit = "", _ERROR, ""
            while pos < n and s[pos] in _SPECIAL:
                buf += s[pos]
                tok = _STRING2TOKEN.get(buf)
                if tok is not None:
                    last_tok, last_lit = tok, buf
                    pos += 1
                elif last_tok != _ERROR:
                    break
                else:
                    pos += 1
            if last_tok == _ERROR:
                items.append((_ERROR, f"error expected: keyword found '{buf}'"))
            else:
                items.append((last_tok, last_lit))
            continue
        start = pos
        while pos < n and s[pos] not in _SPECIAL and s[pos] not in _WHITESPACE and s[pos] != "\x00":
            pos += 1
        lit = s[start:pos]
        items.append((_STRING2TOKEN.get(lit, _ID), lit))


@dataclass(frozen=True)
class Requirement:
    """One ``key op values`` term. ``op`` is upstream's selection.Operator string
    (``=``, ``==``, ``!=``, ``in``, ``notin``, ``exists``, ``!``, ``gt``, ``lt``)."""

    key: str
    op: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.op
        if op in ("in", "=", "=="):
            v = labels.get(self.key)
            return v is not None and v in self.values
        if op in ("notin", "!="):
            v = labels.get(self.key)
            return v is None or v not in self.values
        if op == "exists":
            return self.key in labels
        if op == "!":
            return self.key not in labels
        if op in ("gt", "lt"):
            v = labels.get(self.key)
            if v is None or not _is_int64(v) or len(self.values) != 1 or not _is_int64(self.values[0]):
                return False
            a, b = int(v), int(self.values[0])
            return a > b if op == "gt" else a < b
        return False

    def __str__(self) -> str:
        if self.op == "exists":
            return self.key
        if self.op == "!":
            return "!" + self.key
        vals = ",".join(sorted(self.values))
        if self.op in ("in", "notin"):
            return f"{self.key} {self.op} ({vals})"
        sym = {"gt": ">", "lt": "<"}.get(self.op, self.op)
        return f"{self.key}{sym}{vals}"


def _is_int64(s: str) -> bool:
    return _INT64.fullmatch(s) is not None and -(1 << 63) <= int(s) < (1 << 63)


def _new_requirement(key: str, op: str, values: list[str]) -> Requirement:
    """labels.NewRequirement with the parser's nil field path (errors raise _SelectorSyntaxError)."""
    errs: list[FieldError] = []
    key_msgs = is_qualified_name(key)
    if key_msgs:
        errs.append(FieldError.invalid("key", key, "; ".join(key_msgs)))
    if op in ("in", "notin") and not values:
        errs.append(FieldError.invalid("values", values, "for 'in', 'notin' operators, values set can't be empty"))
    elif op in ("=", "==", "!=") and len(values) != 1:
        errs.append(FieldError.invalid("values", values, "exact-match compatibility requires one single value"))
    elif op in ("gt", "lt"):
        if len(values) != 1:
            errs.append(FieldError.invalid("values", values,
                                           "for 'Gt', 'Lt' operators, exactly one value is required"))
        for i, v in enumerate(values):
            if not _is_int64(v):
                errs.append(FieldError.invalid(f"values[{i}]", v, "for 'Gt', 'Lt' operators, the value must be an integer"))
    for i, v in enumerate(values):
        msgs = is_label_value(v)
        if msgs:
            errs.append(FieldError.invalid(f"values[{i}][{key}]", v, "; ".join(msgs)))
    if errs:
        raise _SelectorSyntaxError(aggregate_message(e.error() for e in errs))
    return Requirement(key, op, tuple(values))


class _Parser:
    def __init__(self, s: str) -> None:
        self.items = _lex(s)
        self.pos = 0

    def lookahead(self, values_ctx: bool) -> tuple[int, str]:
        tok, lit = self.items[self.pos]
        if values_ctx and tok in (_IN, _NOTIN):
            tok = _ID
        return tok, lit

    def consume(self, values_ctx: bool) -> tuple[int, str]:
        r = self.lookahead(values_ctx)
        self.pos += 1
        return r

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            tok, lit = self.lookahead(True)
            if tok in (_ID, _NOT):
                try:
                    reqs.append(self.parse_requirement())
                except _SelectorSyntaxError as e:
                    raise _SelectorSyntaxError(f"unable to parse requirement: {e}") from None
                t, lit2 = self.consume(True)
                if t == _EOS:
                    return reqs
                if t == _COMMA:
                    t2, l2 = self.lookahead(True)
                    if t2 not in (_ID, _NOT):
                        raise _SelectorSyntaxError(f"found '{l2}', expected: identifier after ','")
                else:
                    raise _SelectorSyntaxError(f"found '{lit2}', expected: ',' or 'end of string'")
            elif tok == _EOS:
                return reqs
            else:
                raise _SelectorSyntaxError(f"found '{lit}', expected: !, identifier, or 'end of string'")

    def parse_requirement(self) -> Requirement:
        key, op = self.parse_key_and_infer_operator()
        if op in ("exists", "!"):
            return _new_requirement(key, op, [])
        op = self.parse_operator()
        values = self.parse_values() if op in ("in", "notin") else self.parse_exact_value()
        return _new_requirement(key, op, sorted(values))

    def parse_key_and_infer_operator(self) -> tuple[str, str]:
        op = ""
        tok, lit = self.consume(True)
        if tok == _NOT:
            op = "!"
            tok, lit = self.consume(True)
        if tok != _ID:
            raise _SelectorSyntaxError(f"found '{lit}', expected: identifier")
        msgs = is_qualified_name(lit)
        if msgs:
            raise _SelectorSyntaxError(FieldError.invalid("<nil>", lit, "; ".join(msgs)).error())
        t, _ = self.lookahead(True)
        if t in (_EOS, _COMMA) and op != "!":
            op = "exists"
        return lit, op

    def parse_operator(self) -> str:
        tok, lit = self.consume(False)
        op = {_IN: "in", _EQ: "=", _DEQ: "==", _GT: "gt", _LT: "lt", _NOTIN: "notin", _NEQ: "!="}.get(tok)
        if op is None:
            raise _SelectorSyntaxError(f"found '{lit}', expected: {', '.join(BINARY_OPERATORS)}")
        return op

    def parse_values(self) -> set[str]:
        tok, lit = self.consume(True)
        if tok != _OPAR:
            raise _SelectorSyntaxError(f"found '{lit}' expected: '('")
        tok, lit = self.lookahead(True)
        if tok in (_ID, _COMMA):
            s = self.parse_identifiers_list()
            if self.consume(True)[0] != _CPAR:
                raise _SelectorSyntaxError(f"found '{lit}', expected: ')'")
            return s
        if tok == _CPAR:
            self.consume(True)
            return {""}
        raise _SelectorSyntaxError(f"found '{lit}', expected: ',', ')' or identifier")

    def parse_identifiers_list(self) -> set[str]:
        s: set[str] = set()
        while True:
            tok, lit = self.consume(True)
            if tok == _ID:
                s.add(lit)
                tok2, lit2 = self.lookahead(True)
                if tok2 == _COMMA:
                    continue
                if tok2 == _CPAR:
                    return s
                raise _SelectorSyntaxError(f"found '{lit2}', expected: ',' or ')'")
            if tok == _COMMA:
                if not s:
                    s.add("")
                tok2, _ = self.lookahead(True)
                if tok2 == _CPAR:
                    s.add("")
                    return s
                if tok2 == _COMMA:
                    s.add("")
            else:
                raise _SelectorSyntaxError(f"found '{lit}', expected: ',', or identifier")

    def parse_exact_value(self) -> set[str]:
        tok, _ = self.lookahead(True)
        if tok in (_EOS, _COMMA):
            return {""}
        tok, lit = self.consume(True)
        if tok == _ID:
            return {lit}
        raise _SelectorSyntaxError(f"found '{lit}', expected: identifier")


class LabelSelector:
    """AND of requirements, sorted by key (as upstream's parse)."""

    __slots__ = ("requirements",)

    def __init__(self, requirements: list[Requirement]) -> None:
        self.requirements = tuple(sorted(requirements, key=lambda r: r.key))

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        ls = labels or {}
        return all(r.matches(ls) for r in self.requirements)

    def requires_exact_match(self, key: str) -> str | None:
        for r in self.requirements:
            if r.key == key:
                if r.op in ("=", "==", "in") and len(r.values) == 1:
                    return r.values[0]
                return None
        return None

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)

    def __repr__(self) -> str:
        return f"LabelSelector({str(self)!r})"


def parse_label_selector(s: str) -> LabelSelector:
    """labels.Parse; a syntax error raises StatusError 400 with upstream's message."""
    try:
        return LabelSelector(_Parser(s).parse())
    except _SelectorSyntaxError as e:
        raise bad_request(str(e)) from None


@dataclass(frozen=True)
class FieldTerm:
    field: str
    op: str  # "=" (also for "==") or "!="
    value: str

    def matches(self, fields: Mapping[str, str]) -> bool:
        got = fields.get(self.field, "")
        return got == self.value if self.op == "=" else got != self.value


class FieldSelector:
    """AND of ``field=value`` / ``field!=value`` terms."""

    __slots__ = ("terms",)

    def __init__(self, terms: list[FieldTerm]) -> None:
        self.terms = tuple(terms)

    @property
    def empty(self) -> bool:
        return not self.terms

    def matches(self, fields: Mapping[str, str]) -> bool:
        return all(t.matches(fields) for t in self.terms)

    def requires_exact_match(self, field: str) -> str | None:
        for t in self.terms:
            if t.field == field and t.op == "=":
                return t.value
        return None

    def __str__(self) -> str:
        return ",".join(f"{t.field}{t.op}{_escape_value(t.value)}" for t in self.terms)

    def __repr__(self) -> str:
        return f"FieldSelector({str(self)!r})"


EVERYTHING = FieldSelector([])


def _escape_value(v: str) -> str:
    return v.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def _split_terms(s: str) -> list[str]:
    if not s:
        return []
    terms, start, in_slash = [], 0, False
    for i, c in enumerate(s):
        if in_slash:
            in_slash = False
        elif c == "\\":
            in_slash = True
        elif c == ",":
            terms.append(s[start:i])
            start = i + 1
    terms.append(s[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    for i in range(len(term)):
        for op in ("!=", "==", "="):
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op):]
    return None


def _unescape_value(s: str) -> str:
    if not any(c in s for c in "\\,="):
        return s
    out, in_slash = [], False
    for c in s:
        if in_slash:
            if c not in "\\,=":
                raise bad_request(f"invalid field selector: invalid escape sequence: \\{c}")
            out.append(c)
            in_slash = False
        elif c == "\\":
            in_slash = True
        elif c in ",=":
            raise bad_request(f"invalid field selector: unescaped character in value: {ord(c)}")
        else:
            out.append(c)
    if in_slash:
        raise bad_request("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def parse_field_selector(s: str, rt: ResourceType | None = None) -> FieldSelector:
    """fields.ParseSelector; with ``rt``, also the LIST handler's field-label conversion for that
    type (unsupported label -> 400 with upstream's per-kind message; legacy labels renamed)."""
    parts = sorted(_split_terms(s))
    terms: list[FieldTerm] = []
    for part in parts:
        if not part:
            continue
        split = _split_term(part)
        if split is None:
            raise bad_request(f"invalid selector: '{s}'; can't understand '{part}'")
        lhs, op, rhs = split
        terms.append(FieldTerm(lhs, "!=" if op == "!=" else "=", _unescape_value(rhs)))
    if rt is not None:
        converted: list[FieldTerm] = []
        for t in terms:
            try:
                label = convert_field_label(rt, t.field)
            except ValueError as e:
                raise bad_request(str(e)) from None
            converted.append(FieldTerm(label, t.op, t.value))
        terms = converted
    return FieldSelector(terms)

