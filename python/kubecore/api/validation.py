"""Name and label syntax rules with upstream's exact messages.

Mirrors k8s.io/apimachinery/pkg/util/validation (validation.go), api/validate/content (kube.go),
api/validation (generic.go, objectmeta.go) and api/validation/path (name.go). Every function
returns a list of messages (empty = valid) or a list of FieldError, as upstream does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from kubecore.api.errors import FieldError

__all__ = [
    "regex_error", "max_len_error", "is_dns1123_label", "is_dns1123_subdomain", "is_dns1035_label",
    "is_qualified_name", "is_label_value", "name_is_dns_subdomain", "name_is_dns_label",
    "name_is_dns1035_label", "validate_path_segment_name", "validate_labels", "validate_annotations",
    "validate_finalizers", "validate_owner_references", "NameFunc",
]

NameFunc = Callable[[str, bool], list[str]]

DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_LABEL_ERR = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
                     "and must start and end with an alphanumeric character")
DNS1123_SUBDOMAIN_FMT = DNS1123_LABEL_FMT + "(\\." + DNS1123_LABEL_FMT + ")*"
DNS1123_SUBDOMAIN_ERR = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
                         "'-' or '.', and must start and end with an alphanumeric character")
DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
DNS1035_LABEL_ERR = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
                     "an alphabetic character, and end with an alphanumeric character")
LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
LABEL_KEY_ERR = ("must consist of alphanumeric characters, '-', '_' or '.', "
                 "and must start and end with an alphanumeric character")
LABEL_VALUE_FMT = "(" + LABEL_KEY_FMT + ")?"
LABEL_VALUE_ERR = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                   "and must start and end with an alphanumeric character")

_dns1123_label = re.compile(DNS1123_LABEL_FMT)
_dns1123_subdomain = re.compile(DNS1123_SUBDOMAIN_FMT)
_dns1035_label = re.compile(DNS1035_LABEL_FMT)
_label_key = re.compile(LABEL_KEY_FMT)
_label_value = re.compile(LABEL_VALUE_FMT)


def _full(rx: re.Pattern[str], s: str) -> bool:
    # Go's regexp with ^...$ : '$' does not match before a trailing newline, fullmatch behaves the same.
    return rx.fullmatch(s) is not None


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """validation.RegexError."""
    if not examples:
        return msg + " (regex used for validation is '" + fmt + "')"
    return _regex_error(msg, fmt, examples)


def _regex_error(msg: str, fmt: str, examples: tuple[str, ...]) -> str:
    msg += " (e.g. "
    for i, e in enumerate(examples):
        if i > 0:
            msg += " or "
        msg += "'" + e + "', "
    return msg + "regex used for validation is '" + fmt + "')"


def max_len_error(n: int) -> str:
    return f"must be no more than {n} characters"


def is_dns1123_label(value: str) -> list[str]:
    errs: list[str] = []
    if len(value.encode()) > 63:
        errs.append(max_len_error(63))
    if not _full(_dns1123_label, value):
        if _full(_dns1123_subdomain, value):
            errs.append("must not contain dots")
        else:
            errs.append(regex_error(DNS1123_LABEL_ERR, DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    errs: list[str] = []
    if len(value.encode()) > 253:
        errs.append(max_len_error(253))
    if not _full(_dns1123_subdomain, value):
        errs.append(regex_error(DNS1123_SUBDOMAIN_ERR, DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_dns1035_label(value: str) -> list[str]:
    errs: list[str] = []
    if len(value.encode()) > 63:
        errs.append(max_len_error(63))
    if not _full(_dns1035_label, value):
        errs.append(regex_error(DNS1035_LABEL_ERR, DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errs


def is_qualified_name(value: str) -> list[str]:
    """content.IsLabelKey (a.k.a. IsQualifiedName): ``[prefix/]name``."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in is_dns1123_subdomain(prefix))
    else:
        return ["a valid label key " + regex_error(LABEL_KEY_ERR, LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name.encode()) > 63:
        errs.append("name part " + max_len_error(63))
    if not _full(_label_key, name):
        errs.append("name part " + regex_error(LABEL_KEY_ERR, LABEL_KEY_FMT, "MyName", "my.name", "123-abc"))
    return errs


def is_label_value(value: str) -> list[str]:
    errs: list[str] = []
    if len(value.encode()) > 63:
        errs.append(max_len_error(63))
    if not _full(_label_value, value):
        errs.append(regex_error(LABEL_VALUE_ERR, LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def _mask_trailing_dash(name: str) -> str:
    if len(name) > 1 and name.endswith("-"):
        return name[:-1] + "a"
    return name


def name_is_dns_subdomain(name: str, prefix: bool) -> list[str]:
    return is_dns1123_subdomain(_mask_trailing_dash(name) if prefix else name)


def name_is_dns_label(name: str, prefix: bool) -> list[str]:
    return is_dns1123_label(_mask_trailing_dash(name) if prefix else name)


def name_is_dns1035_label(name: str, prefix: bool) -> list[str]:
    return is_dns1035_label(_mask_trailing_dash(name) if prefix else name)


def validate_path_segment_name(name: str, prefix: bool) -> list[str]:
    """path.ValidatePathSegmentName: what every name must satisfy to appear in a URL path."""
    errs: list[str] = []
    if not prefix:
        for bad in (".", ".."):
            if name == bad:
                errs.append(f"may not be '{bad}'")
    for bad in ("/", "%"):
        if bad in name:
            errs.append(f"may not contain '{bad}'")
    return errs


_VALID_MAPS: set[tuple[str, tuple[tuple[Any, Any], ...]]] = set()
"""Label and annotation maps already found valid (a controller's pods repeat their template's);
cleared when it reaches _VALID_MAPS_SIZE."""
_VALID_MAPS_SIZE = 8192


_NOT_MEMOIZABLE = ("", ())


def _known_valid(kind: str, m: Mapping[Any, Any]) -> tuple[str, tuple[tuple[Any, Any], ...]] | None:
    """None when `m` is known valid, else the memo key to add once it validates."""
    key = (kind, tuple(m.items()))
    try:
        if key in _VALID_MAPS:
            return None
    except TypeError:  # an unhashable value (a list where a string belongs): validate, never memoize
        return _NOT_MEMOIZABLE
    return key


def _remember_valid(key: tuple[str, tuple[tuple[Any, Any], ...]]) -> None:
    if key is _NOT_MEMOIZABLE:
        return
    if len(_VALID_MAPS) >= _VALID_MAPS_SIZE:
        _VALID_MAPS.clear()
    _VALID_MAPS.add(key)


def validate_labels(labels: Any, field: str) -> list[FieldError]:
    """v1validation.ValidateLabels (keys, then values; Go map order is random, we keep insertion order)."""
    errs: list[FieldError] = []
    if labels is None:
        return errs
    if not isinstance(labels, Mapping):
        return [FieldError.invalid(field, labels, "must be a map of strings")]
    memo = _known_valid("labels", labels)
    if memo is None:
        return errs
    for k, v in labels.items():
        for msg in is_qualified_name(k):
            errs.append(FieldError.invalid(field, k, msg))
        if not isinstance(v, str):
            errs.append(FieldError.invalid(field, v, "must be a string"))
            continue
        for msg in is_label_value(v):
            errs.append(FieldError.invalid(field, v, msg))
    if not errs:
        _remember_valid(memo)
    return errs


ANNOTATIONS_SIZE_LIMIT = 256 * (1 << 10)


def validate_annotations(annotations: Any, field: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if annotations is None:
        return errs
    if not isinstance(annotations, Mapping):
        return [FieldError.invalid(field, annotations, "must be a map of strings")]
    memo = _known_valid("annotations", annotations)
    if memo is None:
        return errs
    total = 0
    for k, v in annotations.items():
        for msg in is_qualified_name(k.lower()):
            errs.append(FieldError.invalid(field, k, msg))
        total += len(k.encode()) + (len(v.encode()) if isinstance(v, str) else 0)
    if total > ANNOTATIONS_SIZE_LIMIT:
        errs.append(FieldError.too_long(field, ANNOTATIONS_SIZE_LIMIT))
    if not errs:
        _remember_valid(memo)
    return errs


def validate_finalizers(finalizers: Any, field: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if not finalizers:
        return errs
    for f in finalizers:
        for msg in is_qualified_name(f):
            errs.append(FieldError.invalid(field, f, msg))
    if "orphan" in finalizers and "foregroundDeletion" in finalizers:
        errs.append(FieldError.invalid(field, list(finalizers),
                                       "finalizer orphan and foregroundDeletion cannot be both set"))
    return errs


def validate_owner_references(refs: Any, field: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if not refs:
        return errs
    first_controller = ""
    for ref in refs:
        api_version = ref.get("apiVersion", "")
        version = api_version.rsplit("/", 1)[-1] if api_version else ""
        if not version:
            errs.append(FieldError.invalid(field + ".apiVersion", api_version, "version must not be empty"))
        for key in ("kind", "name", "uid"):
            if not ref.get(key):
                errs.append(FieldError.invalid(f"{field}.{key}", ref.get(key, ""), "must not be empty"))
        if api_version == "v1" and ref.get("kind") == "Event":
            errs.append(FieldError.invalid(field, ref, "/v1, Kind=Event is disallowed from being an owner"))
        if ref.get("controller") is True:
            cur = f"{ref.get('kind', '')}/{ref.get('name', '')}"
            if first_controller:
                errs.append(FieldError.invalid(field, refs, (
                    'Only one reference can have Controller set to true. Found "true" in references for '
                    f"{first_controller} and {cur}")))
            else:
                first_controller = cur
    return errs
