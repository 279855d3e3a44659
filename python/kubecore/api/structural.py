"""Validation of custom resources against a CRD version's OpenAPI v3 (structural) schema.

Ports what the apiextensions-apiserver runs for a custom resource: kube-openapi's SchemaValidator
(type, allOf/anyOf/oneOf/not, string, format, number, slice, enum and object validators, in that
order for every node) and the conversion of its results into field errors
(apiserver/validation.kubeOpenAPIResultToFieldErrors). Messages are kube-openapi's, e.g.

    spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"

Paths follow kube-openapi: a property below the root is ``spec.replicas``, an item
``spec.items[2]``, a missing required property at the root ``.spec`` (the field path drops one
leading dot). Errors that kube-openapi does not report as a validation error (composite
``anyOf``/``oneOf`` failures, int32 range checks) get the nil field path ``<nil>``, as upstream.

Schemas are the CRD's JSON (plain dicts). Unsupported ``format`` values are ignored, as
upstream's StripUnsupportedFormatsPostProcess does; Go's number printing is reproduced
(``go_value``) so that messages read the same.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import msgspec

from kubecore.api import formats
from kubecore.api.errors import FieldError, go_quote
from kubecore.api.gofmt import go_float

__all__ = ["validate", "validate_status", "ratchet", "go_value", "go_float", "schema_types", "type_name"]

Schema = dict[str, Any]
IN = "body"
_INT64 = (-(1 << 63), (1 << 63) - 1)
_INT32 = (-(1 << 31), (1 << 31) - 1)
_STRING_FORMATS = formats.SUPPORTED
_encode = msgspec.json.Encoder(order="sorted").encode


# ---- Go-compatible printing ------------------------------------------------------------------

def go_value(value: Any) -> str:
    """How field.Error prints a JSON BadValue: %q for strings, %v for numbers and booleans,
    json.Marshal (sorted keys, HTML-escaped) for objects and arrays."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return go_quote(value)
    raw = _encode(value)
    return raw.replace(b"<", b"\\u003c").replace(b">", b"\\u003e").replace(b"&", b"\\u0026").decode()


def _go_num(value: Any) -> str:
    return go_float(value) if isinstance(value, float) else str(value)


def type_name(value: Any) -> str:
    """The OpenAPI type kube-openapi infers for a decoded JSON value."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null" if value is None else ""


def schema_types(schema: Schema) -> list[str]:
    if schema.get("x-kubernetes-int-or-string"):
        return ["integer", "string"]
    t = schema.get("type")
    return [t] if isinstance(t, str) and t else []


def effective_format(schema: Schema) -> str:
    """The format kube-openapi checks after StripUnsupportedFormatsPostProcess."""
    fmt = schema.get("format")
    if not isinstance(fmt, str) or not fmt:
        return ""
    t = schema.get("type") or ""
    if schema.get("x-kubernetes-int-or-string"):
        t = "-"  # two types: the post-processor clears the format
    if t in ("", "string"):
        return fmt if fmt.replace("-", "") in _STRING_FORMATS else ""
    if t == "integer":
        return fmt if fmt in ("int32", "int64") else ""
    if t == "number":
        return fmt if fmt in ("float", "double") else ""
    return ""


@functools.lru_cache(maxsize=512)
def _regex(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern)
    except re.error:
        return None


# ---- the validator ---------------------------------------------------------------------------

class _Validator:
    """One validation run; ``prefix`` is the field path the schema's root stands for ("" for the
    object, "status" for a status update)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.errors: list[FieldError] = []

    # field paths as kubeOpenAPIResultToFieldErrors builds them
    def _field(self, name: str) -> str:
        if name and name != ".":
            name = name[1:] if name.startswith(".") else name
            return f"{self.prefix}.{name}" if self.prefix else name
        return self.prefix or "<nil>"

    def invalid(self, name: str, value: Any, msg: str, *, reason: str = "FieldValueInvalid") -> None:
        value = "" if value is None else value
        self.errors.append(FieldError(reason, self._field(name), f"Invalid value: {go_value(value)}: {msg}"))

    def plain(self, msg: str) -> None:
        """An error kube-openapi returns as a plain error (no field): field.Invalid(fldPath, "", msg)."""
        self.errors.append(FieldError("FieldValueInvalid", self.prefix or "<nil>", f'Invalid value: "": {msg}'))

    def type_invalid(self, name: str, type_names: str, value: Any) -> None:
        """errors.InvalidType: the value shown is the *type name* of what was found (or the string)."""
        if isinstance(value, str):
            msg = f"{name} in {IN} must be of type {type_names}: {go_quote(value)}"
        else:
            msg = f"{name} in {IN} must be of type {type_names}"
        self.invalid(name, value, msg, reason="FieldValueTypeInvalid")

    # one schema node, validators in kube-openapi's order
    def node(self, data: Any, s: Schema, path: str) -> None:
        if data is None:
            self.check_type(data, s, path)
            self.check_enum(data, s, path)
            return
        self.check_type(data, s, path)
        self.check_props(data, s, path)
        if isinstance(data, str):
            self.check_string(data, s, path)
            self.check_format(data, s, path)
        elif isinstance(data, (int, float)) and not isinstance(data, bool):
            self.check_number(data, s, path)
        elif isinstance(data, list):
            self.check_array(data, s, path)
        self.check_enum(data, s, path)
        if isinstance(data, dict):
            self.check_object(data, s, path)

    def check_type(self, data: Any, s: Schema, path: str) -> bool:
        types, fmt = schema_types(s), effective_format(s)
        if not types and not fmt:
            return True
        if data is None:
            if types and "null" not in types and not s.get("nullable"):
                self.type_invalid(path, ",".join(types), "null")
                return False
            return True
        found = type_name(data)
        is_float_int = found == "number" and float(data).is_integer() and "integer" in types
        is_int_float = found == "integer" and "number" in types
        value_fmt = "int64" if found == "integer" else "float64" if found == "number" else ""
        if found not in ("string", "array") and fmt and not (
                found in types or value_fmt == fmt or is_float_int or is_int_float):
            self.type_invalid(path, fmt, value_fmt)
            return False
        if not ("number" in types or "integer" in types) and fmt and found in ("string", "array"):
            return True
        if not (found in types or is_float_int or is_int_float):
            self.type_invalid(path, ",".join(types), found)
            return False
        return True

    def check_props(self, data: Any, s: Schema, path: str) -> None:
        """allOf / anyOf / oneOf / not (kube-openapi's schemaPropsValidator)."""
        label = go_quote(path)
        any_of = s.get("anyOf") or []
        if any_of:
            results: list[list[FieldError]] = [self.sub(data, sub, path) for sub in any_of]
            if not any(not r for r in results):
                self.plain(f"{label} must validate at least one schema (anyOf)")
                best: list[FieldError] = min(results, key=len)
                self.errors.extend(best)
        one_of = s.get("oneOf") or []
        if one_of:
            results = [self.sub(data, sub, path) for sub in one_of]
            ok = sum(1 for r in results if not r)
            if ok != 1:
                more = "Found none valid" if ok == 0 else f"Found {ok} valid alternatives"
                self.plain(f"{label} must validate one and only one schema (oneOf). {more}")
                if ok == 0:
                    self.errors.extend(results[0])
        all_of = s.get("allOf") or []
        if all_of:
            results = [self.sub(data, sub, path) for sub in all_of]
            for r in results:
                self.errors.extend(r)
            ok = sum(1 for r in results if not r)
            if ok != len(all_of):
                self.plain(f"{label} must validate all the schemas (allOf){'. None validated' if ok == 0 else ''}")
        not_schema = s.get("not")
        if isinstance(not_schema, dict) and not self.sub(data, not_schema, path):
            self.plain(f"{label} must not validate the schema (not)")

    def sub(self, data: Any, s: Schema, path: str) -> list[FieldError]:
        v = _Validator(self.prefix)
        v.node(data, s, path)
        return v.errors

    def check_string(self, data: str, s: Schema, path: str) -> None:
        n = len(data)
        if isinstance(s.get("maxLength"), int) and n > s["maxLength"]:
            m = s["maxLength"]
            unit = "byte" if m == 1 else "bytes"
            self.errors.append(FieldError("FieldValueTooLong", self._field(path),
                                          f"Too long: may not be more than {m} {unit}"))
            return
        if isinstance(s.get("minLength"), int) and n < s["minLength"]:
            self.invalid(path, data, f"{path} in {IN} should be at least {s['minLength']} chars long")
            return
        pattern = s.get("pattern")
        if isinstance(pattern, str) and pattern:
            rx = _regex(pattern)
            if rx is None:
                self.invalid(path, data, f"{path} in {IN} should match '{pattern}, but pattern is invalid'")
            elif rx.search(data) is None:
                self.invalid(path, data, f"{path} in {IN} should match '{pattern}'")

    def check_format(self, data: str, s: Schema, path: str) -> None:
        fmt = effective_format(s)
        if fmt and fmt.replace("-", "") in _STRING_FORMATS and not formats.check(fmt, data):
            self.type_invalid(path, fmt, data)

    def check_number(self, data: int | float, s: Schema, path: str) -> None:
        types = schema_types(s)
        typ = types[0] if len(types) == 1 and types[0] in ("integer", "number") else ""
        fmt = effective_format(s) if typ else ""
        if typ == "integer" and fmt == "int32" and isinstance(data, int) and not _INT32[0] <= data <= _INT32[1]:
            self.plain(f"Checked value must be of type integer with format int32 in {path}")
        elif typ == "integer" and isinstance(data, int) and not _INT64[0] <= data <= _INT64[1]:
            self.plain(f"Checked value must be of type integer (default format) in {path}")
        mult = s.get("multipleOf")
        if isinstance(mult, (int, float)) and not isinstance(mult, bool) and mult > 0:
            q = data / mult
            if not float(q).is_integer():
                self.invalid(path, data, f"{path} in {IN} should be a multiple of {_go_num(mult)}")
        self._bound(data, s, path, "minimum", "exclusiveMinimum")
        self._bound(data, s, path, "maximum", "exclusiveMaximum")

    def _bound(self, data: int | float, s: Schema, path: str, key: str, excl_key: str) -> None:
        bound = s.get(key)
        if not isinstance(bound, (int, float)) or isinstance(bound, bool):
            return
        exclusive = bool(s.get(excl_key))
        shown: int | float = int(bound) if isinstance(data, int) else float(bound)
        cmp_bound = shown
        if key == "minimum":
            bad = data <= cmp_bound if exclusive else data < cmp_bound
            word = "greater than" if exclusive else "greater than or equal to"
        else:
            bad = data >= cmp_bound if exclusive else data > cmp_bound
            word = "less than" if exclusive else "less than or equal to"
        if bad:
            self.invalid(path, data, f"{path} in {IN} should be {word} {_go_num(shown)}")

    def check_array(self, data: list[Any], s: Schema, path: str) -> None:
        items = s.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(data):
                self.node(item, items, f"{path}[{i}]")
        n = len(data)
        if isinstance(s.get("minItems"), int) and n < s["minItems"]:
            self.invalid(path, n, f"{path} in {IN} should have at least {s['minItems']} items")
        if isinstance(s.get("maxItems"), int) and n > s["maxItems"]:
            m = s["maxItems"]
            self.errors.append(FieldError("FieldValueTooMany", self._field(path),
                                          f"Too many: {n}: must have at most {m} {'item' if m == 1 else 'items'}"))
        if s.get("uniqueItems") and _has_duplicates(data):
            self.invalid(path, None, f"{path} in {IN} shouldn't contain duplicates")

    def check_enum(self, data: Any, s: Schema, path: str) -> None:
        enum = s.get("enum")
        if not isinstance(enum, list) or not enum:
            return
        if data is not None and any(_enum_equal(data, e) for e in enum):
            return
        allowed = [e if isinstance(e, str) else _encode(e).decode() for e in enum]
        detail = "supported values: " + ", ".join(go_quote(v) for v in allowed)
        shown = "null" if data is None else go_value(data)
        self.errors.append(FieldError("FieldValueNotSupported", self._field(path),
                                      f"Unsupported value: {shown}: {detail}"))

    def check_object(self, data: dict[str, Any], s: Schema, path: str) -> None:
        n = len(data)
        props: dict[str, Any] = s.get("properties") or {}
        if isinstance(s.get("minProperties"), int) and n < s["minProperties"]:
            self.invalid(path, n, f"{path} in {IN} should have at least {s['minProperties']} properties")
        if isinstance(s.get("maxProperties"), int) and n > s["maxProperties"]:
            m = s["maxProperties"]
            self.errors.append(FieldError("FieldValueTooMany", self._field(path),
                                          f"Too many: {n}: must have at most {m} {'item' if m == 1 else 'items'}"))
        extra = s.get("additionalProperties")
        if extra is False:
            for k in data:
                if k not in props:
                    self.invalid(path, k, f"{path}.{k} in {IN} is a forbidden property")
        elif isinstance(extra, dict):
            for k, v in data.items():
                if k not in props:
                    self.node(v, extra, f"{path}.{k}")
        for name, sub in props.items():
            if name in data and isinstance(sub, dict):
                self.node(data[name], sub, f"{path}.{name}" if path else name)
        for name in s.get("required") or []:
            if name not in data:
                self.errors.append(FieldError.required(self._field(f"{path}.{name}")))


def _enum_equal(data: Any, e: Any) -> bool:
    """reflect.DeepEqual after converting the value to the enum member's type (numbers compare
    across int/float; booleans and strings only with their own kind)."""
    if isinstance(e, bool) or isinstance(data, bool):
        return isinstance(e, bool) and isinstance(data, bool) and e == data
    if isinstance(e, (int, float)) and isinstance(data, (int, float)):
        return float(data) == float(e) if isinstance(e, float) else int(data) == e
    return bool(type(e) is type(data) and e == data)


def _has_duplicates(items: list[Any]) -> bool:
    seen: list[Any] = []
    for it in items:
        if any(_deep_equal(it, s) for s in seen):
            return True
        seen.append(it)
    return False


def _deep_equal(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def validate(obj: Any, schema: Schema | None, *, prefix: str = "") -> list[FieldError]:
    """Every error kube-openapi finds in ``obj`` (empty when valid or without a schema)."""
    if not schema:
        return []
    v = _Validator(prefix)
    v.node(obj, schema, "")
    return v.errors


def validate_status(obj: dict[str, Any], schema: Schema | None) -> list[FieldError]:
    """A status update: only ``status`` against properties.status, paths under ``status``."""
    if not schema or "status" not in obj:
        return []
    status_schema = (schema.get("properties") or {}).get("status")
    if not isinstance(status_schema, dict):
        return []
    return validate(obj["status"], status_schema, prefix="status")



# ---- ratcheting ------------------------------------------------------------------------------

_PATH_TOKEN = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
_MISSING = object()


def _lookup(obj: Any, field: str) -> Any:
    """The value at a field path such as ``spec.items[2].name`` (``_MISSING`` when absent);
    None when the path cannot be followed unambiguously."""
    cur = obj
    for m in _PATH_TOKEN.finditer(field.lstrip(".")):
        key, index = m.group(1), m.group(2)
        if index is not None:
            if not isinstance(cur, list) or int(index) >= len(cur):
                return _MISSING
            cur = cur[int(index)]
        elif isinstance(cur, dict):
            if key not in cur:
                return _MISSING
            cur = cur[key]
        else:
            return _MISSING
    return cur


def ratchet(errors: list[FieldError], new: Any, old: Any) -> list[FieldError]:
    """CRDValidationRatcheting, by field: an update keeps an invalid value the object already
    had (same value, or absent in both, at the error's path) without failing on it."""
    kept = []
    for e in errors:
        if e.field in ("", "<nil>"):
            kept.append(e)
            continue
        path = e.field
        if e.type == "FieldValueRequired":  # the rule belongs to the object that lists it
            path = path[:max(path.rfind("."), 0)]
        a, b = (_lookup(new, path), _lookup(old, path)) if path else (new, old)
        if not (type(a) is type(b) and a == b or a is _MISSING and b is _MISSING):
            kept.append(e)
    return kept
