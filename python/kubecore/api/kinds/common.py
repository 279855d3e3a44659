"""Shared pieces of per-kind validation: field-error builders that print values as upstream's
field.Error does (Go's %#v for maps, selectors and int-or-strings), quantities, label selectors,
int-or-percent, ports, IPs and immutability.

Objects are decoded JSON: every accessor tolerates a missing or wrongly typed field (the
request's field validation reports types; here a wrong type reads as "unset").
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kubecore.api import quantity
from kubecore.api.errors import FieldError, go_quote
from kubecore.api.validation import (
    is_dns1123_label, is_dns1123_subdomain, is_label_value, is_qualified_name, regex_error, validate_labels,
)

Obj = dict[str, Any]
Errs = list[FieldError]

IMMUTABLE = "field is immutable"
NEGATIVE = "must be greater than or equal to 0"


class DecodeError(Exception):
    """A value upstream's decoder rejects before validation (400, not 422): a bad quantity."""


# ---- reading decoded JSON ---------------------------------------------------------------------


def m(obj: Any, key: str) -> Obj:
    """obj[key] as a dict ({} when missing or not a dict)."""
    v = obj.get(key) if type(obj) is dict or isinstance(obj, Mapping) else None
    return v if isinstance(v, dict) else {}


def lst(obj: Any, key: str) -> list[Any]:
    v = obj.get(key) if type(obj) is dict or isinstance(obj, Mapping) else None
    return v if isinstance(v, list) else []


def s(obj: Any, key: str) -> str:
    v = obj.get(key) if type(obj) is dict or isinstance(obj, Mapping) else None
    return v if isinstance(v, str) else ""


def num(obj: Any, key: str) -> int | None:
    v = obj.get(key) if type(obj) is dict or isinstance(obj, Mapping) else None
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def dicts(obj: Any, key: str) -> list[tuple[int, Obj]]:
    """Enumerated list items that are objects."""
    return [(i, x) for i, x in enumerate(lst(obj, key)) if isinstance(x, dict)]


# ---- Go-style values in messages ----------------------------------------------------------------


def go_map(v: Any) -> str:
    """%#v of a map[string]string (keys sorted, as fmt prints maps)."""
    if not isinstance(v, Mapping):
        return "map[string]string(nil)"
    inner = ", ".join(f"{go_quote(str(k))}:{go_quote(str(v[k]))}" for k in sorted(v))
    return "map[string]string{" + inner + "}"


def go_strings(v: Any) -> str:
    if not isinstance(v, list):
        return "[]string(nil)"
    return "[]string{" + ", ".join(go_quote(str(x)) for x in v) + "}"


def go_selector(sel: Any) -> str:
    """%#v of a metav1.LabelSelector (the pointer is dereferenced by field.Error)."""
    if not isinstance(sel, Mapping):
        return "null"
    exprs = sel.get("matchExpressions")
    if isinstance(exprs, list):
        items = ", ".join(
            f'v1.LabelSelectorRequirement{{Key:{go_quote(s(e, "key"))}, Operator:{go_quote(s(e, "operator"))}, '
            f'Values:{go_strings(e.get("values") if isinstance(e, Mapping) else None)}}}' for e in exprs)
        rendered = "[]v1.LabelSelectorRequirement{" + items + "}"
    else:
        rendered = "[]v1.LabelSelectorRequirement(nil)"
    return f"v1.LabelSelector{{MatchLabels:{go_map(sel.get('matchLabels'))}, MatchExpressions:{rendered}}}"


def go_int_or_string(v: Any) -> str:
    """%#v of an intstr.IntOrString."""
    if isinstance(v, str):
        return f"intstr.IntOrString{{Type:1, IntVal:0, StrVal:{go_quote(v)}}}"
    return f'intstr.IntOrString{{Type:0, IntVal:{v if isinstance(v, int) else 0}, StrVal:""}}'


def invalid_raw(field: str, rendered: str, detail: str) -> FieldError:
    """field.Invalid whose value is already rendered the Go way."""
    return FieldError("FieldValueInvalid", field, f"Invalid value: {rendered}: {detail}")


def not_found(field: str, value: Any) -> FieldError:
    """field.NotFound."""
    return FieldError._make("FieldValueNotFound", field, value, "", omit_value=False)


def duplicate_raw(field: str, rendered: str) -> FieldError:
    return FieldError("FieldValueDuplicate", field, f"Duplicate value: {rendered}")


def not_supported_raw(field: str, rendered: str, valid: Sequence[str]) -> FieldError:
    return FieldError("FieldValueNotSupported", field,
                      f"Unsupported value: {rendered}: supported values: " + ", ".join(go_quote(v) for v in valid))


# ---- small rules ---------------------------------------------------------------------------------


def nonneg(obj: Any, key: str, path: str) -> Errs:
    """ValidateNonnegativeField for an optional integer field."""
    v = num(obj, key)
    if v is not None and v < 0:
        return [FieldError.invalid(f"{path}.{key}" if path else key, v, NEGATIVE)]
    return []


def enum(value: str, valid: Sequence[str], path: str, *, required: bool = True) -> Errs:
    if value == "":
        return [FieldError.required(path)] if required else []
    if value not in valid:
        return [FieldError.not_supported(path, value, valid)]
    return []


def dns_label(value: str, path: str) -> Errs:
    return [FieldError.invalid(path, value, msg) for msg in is_dns1123_label(value)]


def dns_subdomain(value: str, path: str) -> Errs:
    return [FieldError.invalid(path, value, msg) for msg in is_dns1123_subdomain(value)]


def qualified_name(value: str, path: str) -> Errs:
    return [FieldError.invalid(path, value, msg) for msg in is_qualified_name(value)]


def exactly_one(obj: Obj, choices: Sequence[tuple[str, str]], path: str, *, what: str,
                check: Callable[[str, Obj, str], Errs]) -> Errs:
    """Upstream's "one of these" rule over (key, name in errors) choices: the first one set is
    checked with `check(key, value, path.key)`; any further one is Forbidden ("may not specify
    more than 1 <what>"); none is Required ("must specify a <what>")."""
    errs: Errs = []
    count = 0
    for key, err_name in choices:
        value = obj.get(key)
        if not isinstance(value, dict):
            continue
        if count:
            errs.append(FieldError.forbidden(f"{path}.{err_name}", f"may not specify more than 1 {what}"))
            continue
        count += 1
        errs.extend(check(key, value, f"{path}.{key}"))
    if not count:
        errs.append(FieldError.required(path, f"must specify a {what}"))
    return errs


def immutable(new: Any, old: Any, path: str, render: Callable[[Any], str] | None = None) -> Errs:
    """ValidateImmutableField."""
    if new == old:
        return []
    if render is not None:
        return [invalid_raw(path, render(new), IMMUTABLE)]
    return [FieldError.invalid(path, new, IMMUTABLE)]


def port_num(value: Any, path: str) -> Errs:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 65535:
        return [FieldError.invalid(path, value if isinstance(value, int) else 0, "must be between 1 and 65535, inclusive")]
    return []


_PORT_NAME = re.compile(r"[-a-z0-9]+")
_ONE_LETTER = re.compile(r"[a-z]")


def port_name_msgs(name: str) -> list[str]:
    """IsValidPortName."""
    msgs = []
    if len(name) > 15:
        msgs.append("must be no more than 15 characters")
    if not _PORT_NAME.fullmatch(name):
        msgs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not _ONE_LETTER.search(name):
        msgs.append("must contain at least one letter (a-z)")
    if "--" in name:
        msgs.append("must not contain consecutive hyphens")
    if name and (name[0] == "-" or name[-1] == "-"):
        msgs.append("must not begin or end with a hyphen")
    return msgs


def port_num_or_name(value: Any, path: str) -> Errs:
    """ValidatePortNumOrName (an intstr)."""
    if isinstance(value, str):
        return [FieldError.invalid(path, value, msg) for msg in port_name_msgs(value)]
    return port_num(value, path)


def valid_ip(value: str, path: str) -> Errs:
    """validation.IsValidIP."""
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return [FieldError.invalid(path, value, "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)")]
    return []


def valid_cidr(value: str, path: str) -> Errs:
    """validation.IsValidCIDR."""
    try:
        ipaddress.ip_network(value, strict=False)
        if "/" not in value:
            raise ValueError(value)
    except ValueError:
        return [FieldError.invalid(path, value, "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)")]
    return []


# ---- quantities ----------------------------------------------------------------------------------


def qty(value: Any) -> quantity.Quantity:
    """A quantity from decoded JSON; a malformed one is a decode error (400), as upstream."""
    try:
        return quantity.parse_json(value)
    except quantity.QuantityError as e:
        raise DecodeError(str(e)) from None


def nonneg_quantity(q: quantity.Quantity, path: str) -> Errs:
    if q.sign() < 0:
        return [FieldError.invalid(path, q.canonical(), NEGATIVE)]
    return []


# ---- int-or-percent ------------------------------------------------------------------------------

_PERCENT = re.compile(r"[0-9]+%")
PERCENT_MSG = regex_error("a valid percent string must be a numeric string followed by an ending '%'", "[0-9]+%",
                          "1%", "93%")


def int_or_percent(value: Any, path: str) -> Errs:
    """ValidatePositiveIntOrPercent."""
    if isinstance(value, str):
        if not _PERCENT.fullmatch(value):
            return [invalid_raw(path, go_int_or_string(value), PERCENT_MSG)]
        return []
    if isinstance(value, int) and value < 0:
        return [FieldError.invalid(path, value, NEGATIVE)]
    return []


def percent_value(value: Any) -> int | None:
    if isinstance(value, str) and _PERCENT.fullmatch(value):
        return int(value[:-1])
    return None


def int_or_percent_value(value: Any) -> int:
    p = percent_value(value)
    if p is not None:
        return p
    return value if isinstance(value, int) else 0


def not_more_than_100_percent(value: Any, path: str) -> Errs:
    p = percent_value(value)
    if p is not None and p > 100:
        return [invalid_raw(path, go_int_or_string(value), "must not be greater than 100%")]
    return []


# ---- label selectors -----------------------------------------------------------------------------

SELECTOR_OPS = ("In", "NotIn", "Exists", "DoesNotExist")


def label_selector(sel: Any, path: str) -> Errs:
    """metav1 validation.ValidateLabelSelector (label values checked strictly)."""
    if not isinstance(sel, Mapping):
        return []
    errs = validate_labels(sel.get("matchLabels"), f"{path}.matchLabels")
    for i, expr in dicts(sel, "matchExpressions"):
        errs.extend(_requirement(expr, f"{path}.matchExpressions[{i}]"))
    return errs


def _requirement(expr: Obj, path: str) -> Errs:
    errs: Errs = []
    op, values = s(expr, "operator"), lst(expr, "values")
    if op in ("In", "NotIn"):
        if not values:
            errs.append(FieldError.required(f"{path}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
    elif op in ("Exists", "DoesNotExist"):
        if values:
            errs.append(FieldError.forbidden(
                f"{path}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
    else:
        errs.append(FieldError.not_supported(f"{path}.operator", op, SELECTOR_OPS))
    errs.extend(qualified_name(s(expr, "key"), f"{path}.key"))
    for j, v in enumerate(values):
        errs.extend(FieldError.invalid(f"{path}.values[{j}]", v, msg) for msg in is_label_value(str(v)))
    return errs


def selector_ok(sel: Any) -> bool:
    """LabelSelectorAsSelector succeeds (operators and values well formed)."""
    return isinstance(sel, Mapping) and not label_selector(sel, "x")


def selector_empty(sel: Any) -> bool:
    return not (m({"s": sel}, "s").get("matchLabels") or lst(sel, "matchExpressions"))


def selector_matches(sel: Any, labels: Mapping[str, Any]) -> bool:
    """A metav1.LabelSelector against a label set (empty selector matches everything)."""
    for k, v in m({"s": sel}, "s").get("matchLabels", {}).items():
        if labels.get(k) != v:
            return False
    return all(_expr_matches(expr, labels) for _, expr in dicts(sel, "matchExpressions"))


def _expr_matches(expr: Obj, labels: Mapping[str, Any]) -> bool:
    key, op, values = s(expr, "key"), s(expr, "operator"), lst(expr, "values")
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not (present and labels[key] in values)
    if op == "Exists":
        return present
    return not present


def template_matches(sel: Any, template: Any, path: str, *, skip_empty: bool = True) -> Errs:
    """"`selector` does not match template `labels`" at <path>.metadata.labels."""
    if not selector_ok(sel) or (skip_empty and selector_empty(sel)):
        return []
    labels = m(m({"t": template}, "t"), "metadata").get("labels")
    if selector_matches(sel, labels if isinstance(labels, dict) else {}):
        return []
    return [invalid_raw(f"{path}.metadata.labels", go_map(labels), "`selector` does not match template `labels`")]


# ---- configmap / secret keys ---------------------------------------------------------------------

_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")


def config_key_msgs(key: str) -> list[str]:
    """validation.IsConfigMapKey."""
    msgs = []
    if len(key) > 253:
        msgs.append("must be no more than 253 characters")
    if not _CONFIG_KEY.fullmatch(key):
        msgs.append(regex_error("a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                                "[-._a-zA-Z0-9]+", "key.name", "KEY_NAME", "key-name"))
    if key == ".":
        msgs.append("must not be '.'")
    elif key == "..":
        msgs.append("must not be '..'")
    elif key.startswith(".."):
        msgs.append("must not start with '..'")
    return msgs
