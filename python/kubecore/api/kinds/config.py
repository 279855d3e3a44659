"""ConfigMaps, Secrets, Namespaces, ServiceAccounts and Events (core/v1).

ValidateConfigMap(Update), ValidateSecret(Update), ValidateNamespace, ValidateServiceAccount and
ValidateEventCreate/ValidateEventUpdate (core/v1 and events.k8s.io/v1 requests). Secret ``data`` values are base64 in JSON; a value that is not
base64 is a decode error (400), as upstream's decoder reports it.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import re
from typing import Any

from kubecore.api.errors import FieldError
from kubecore.api.kinds.common import DecodeError, Errs, Obj, config_key_msgs, immutable, m, num, qualified_name, s

MAX_SECRET_SIZE = 1024 * 1024
IMMUTABLE_WHEN_SET = "field is immutable when `immutable` is set"
_B64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
STANDARD_FINALIZERS = frozenset({"kubernetes", "foregroundDeletion", "orphan"})


def _b64_bytes(value: Any) -> bytes:
    """Go's base64.StdEncoding for a []byte field; CorruptInputError's text on failure."""
    if not isinstance(value, str):
        return b""
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        for i, ch in enumerate(value):
            if not (ch.isascii() and (ch.isalnum() or ch in "+/=")):
                raise DecodeError(f"illegal base64 data at input byte {i}") from None
        m_ = _B64.match(value)
        raise DecodeError(f"illegal base64 data at input byte {m_.end() if m_ else 0}") from None


def _keys(data: Any, path: str) -> Errs:
    errs: Errs = []
    for key in data if isinstance(data, dict) else {}:
        errs.extend(FieldError.invalid(f"{path}[{key}]", key, msg) for msg in config_key_msgs(key))
    return errs


def config_map(obj: Obj) -> Errs:
    """ValidateConfigMap."""
    data, binary = m(obj, "data"), m(obj, "binaryData")
    errs: Errs = []
    total = 0
    for key, value in data.items():
        errs.extend(FieldError.invalid(f"data[{key}]", key, msg) for msg in config_key_msgs(key))
        if key in binary:
            errs.append(FieldError.invalid(f"data[{key}]", key, "duplicate of key present in binaryData"))
        total += len(value.encode()) if isinstance(value, str) else 0
    for key, value in binary.items():
        errs.extend(FieldError.invalid(f"binaryData[{key}]", key, msg) for msg in config_key_msgs(key))
        total += len(_b64_bytes(value))
    if total > MAX_SECRET_SIZE:
        errs.append(FieldError.too_long("", MAX_SECRET_SIZE))
    return errs


def config_map_update(new: Obj, old: Obj) -> Errs:
    errs: Errs = []
    if old.get("immutable") is True:
        if new.get("immutable") is not True:
            errs.append(FieldError.forbidden("immutable", IMMUTABLE_WHEN_SET))
        for key in ("data", "binaryData"):
            if (new.get(key) or None) != (old.get(key) or None):
                errs.append(FieldError.forbidden(key, IMMUTABLE_WHEN_SET))
    return errs + config_map(new)


def secret(obj: Obj) -> Errs:
    """ValidateSecret (type-specific keys included)."""
    data = m(obj, "data")
    decoded = {k: _b64_bytes(v) for k, v in data.items()}
    errs = _keys(data, "data")
    if sum(len(v) for v in decoded.values()) > MAX_SECRET_SIZE:
        errs.append(FieldError.too_long("data", MAX_SECRET_SIZE))
    errs.extend(_secret_type(s(obj, "type"), decoded, m(m(obj, "metadata"), "annotations")))
    return errs


def _secret_type(kind: str, data: dict[str, bytes], annotations: Obj) -> Errs:
    if kind == "kubernetes.io/service-account-token":
        if not s(annotations, "kubernetes.io/service-account.name"):
            return [FieldError.required("metadata.annotations[kubernetes.io/service-account.name]")]
    elif kind in ("kubernetes.io/dockercfg", "kubernetes.io/dockerconfigjson"):
        key = ".dockercfg" if kind == "kubernetes.io/dockercfg" else ".dockerconfigjson"
        if key not in data:
            return [FieldError.required(f"data[{key}]")]
        try:
            json.loads(data[key] or b"null")
        except ValueError as e:
            return [FieldError.invalid(f"data[{key}]", "<secret contents redacted>", str(e))]
    elif kind == "kubernetes.io/basic-auth":
        if "username" not in data and "password" not in data:
            return [FieldError.required("data[username]"), FieldError.required("data[password]")]
    elif kind == "kubernetes.io/ssh-auth":
        if not data.get("ssh-privatekey"):
            return [FieldError.required("data[ssh-privatekey]")]
    elif kind == "kubernetes.io/tls":
        return [FieldError.required(f"data[{k}]") for k in ("tls.crt", "tls.key") if k not in data]
    return []


def secret_update(new: Obj, old: Obj) -> Errs:
    errs = immutable(s(new, "type"), s(old, "type"), "type")
    if old.get("immutable") is True:
        if new.get("immutable") is not True:
            errs.append(FieldError.forbidden("immutable", IMMUTABLE_WHEN_SET))
        if (new.get("data") or None) != (old.get("data") or None):
            errs.append(FieldError.forbidden("data", IMMUTABLE_WHEN_SET))
    return errs + secret(new)


def namespace(obj: Obj) -> Errs:
    """ValidateNamespace: spec.finalizers are standard or qualified names."""
    errs: Errs = []
    finalizers = m(obj, "spec").get("finalizers")
    for f in finalizers if isinstance(finalizers, list) else []:
        f = str(f)
        if "/" not in f and f not in STANDARD_FINALIZERS:
            errs.append(FieldError.invalid("spec.finalizers", f,
                                           "name is neither a standard finalizer name nor is it fully qualified"))
    return errs


# pkg/apis/core/validation/events.go
REPORTING_INSTANCE_LENGTH_LIMIT = 128
ACTION_LENGTH_LIMIT = 128
REASON_LENGTH_LIMIT = 128
NOTE_LENGTH_LIMIT = 1024
_NOT_MATCHING_NS = "does not match event.namespace"
_EVENTS_CONTROLLER = "reportingController"  # the field's name in events.k8s.io (and the internal type)


def _too_long(path: str, value: str, limit: int) -> Errs:
    """Go's len(): bytes, not characters."""
    if len(value.encode()) > limit:
        return [FieldError.invalid(path, "", f"can have at most {limit} characters")]
    return []


def event(obj: Obj, *, controller_path: str = "reportingComponent") -> Errs:
    """legacyValidateEvent (every event, whatever the API group; ``obj`` in core/v1 form).

    Without eventTime (an "old" event): involvedObject.namespace matches the event's (an event
    about a cluster-scoped object lives in "default" or has no namespace). With eventTime: an
    event without involvedObject.namespace lives in "default" or "kube-system";
    reportingController (core/v1: reportingComponent), reportingInstance, action and reason are
    required, with upstream's length limits, and the message has at most 1024 bytes. Field paths
    are the internal type's, as upstream reports them through either group, except the reporting
    controller's: ``controller_path`` names it as the request's version does."""
    meta_ns = s(m(obj, "metadata"), "namespace")
    inv_ns = s(m(obj, "involvedObject"), "namespace")
    if not obj.get("eventTime"):
        if (not inv_ns and meta_ns not in ("", "default")) or (inv_ns and inv_ns != meta_ns):
            return [FieldError.invalid("involvedObject.namespace", inv_ns, _NOT_MATCHING_NS)]
        return []
    errs: Errs = []
    if not inv_ns and meta_ns not in ("default", "kube-system"):
        errs.append(FieldError.invalid("involvedObject.namespace", inv_ns, _NOT_MATCHING_NS))
    controller = s(obj, "reportingComponent")
    if not controller:
        errs.append(FieldError.required(controller_path))
    errs += qualified_name(controller, controller_path)
    instance, action, reason = s(obj, "reportingInstance"), s(obj, "action"), s(obj, "reason")
    if not instance:
        errs.append(FieldError.required("reportingInstance"))
    errs += _too_long("reportingInstance", instance, REPORTING_INSTANCE_LENGTH_LIMIT)
    if not action:
        errs.append(FieldError.required("action"))
    errs += _too_long("action", action, ACTION_LENGTH_LIMIT)
    if not reason:
        errs.append(FieldError.required("reason"))
    errs += _too_long("reason", reason, REASON_LENGTH_LIMIT)
    errs += _too_long("message", s(obj, "message"), NOTE_LENGTH_LIMIT)
    return errs


def _series(obj: Obj) -> Errs:
    """validateV1EventSeries."""
    series = obj.get("series")
    if not isinstance(series, dict):
        return []
    errs: Errs = []
    count = num(series, "count")
    if (count or 0) < 2:
        errs.append(FieldError.invalid("series.count", "", "should be at least 2"))
    if not series.get("lastObservedTime"):
        errs.append(FieldError.required("series.lastObservedTime"))
    return errs


def events_event(obj: Obj) -> Errs:
    """ValidateEventCreate for a request through events.k8s.io/v1 (``obj`` in core/v1 form):
    legacyValidateEvent, then the strict rules (series; eventTime required; type Normal or
    Warning; the deprecated fields unset). ObjectMeta is kubecore.api.meta's."""
    errs = event(obj, controller_path=_EVENTS_CONTROLLER) + _series(obj)
    if not obj.get("eventTime"):
        errs.append(FieldError.required("eventTime"))
    type_ = s(obj, "type")
    if type_ not in ("Normal", "Warning"):
        errs.append(FieldError.invalid("type", "", f"has invalid value: {type_}"))
    for field in ("firstTimestamp", "lastTimestamp"):
        if obj.get(field):
            errs.append(FieldError.invalid(field, "", "needs to be unset"))
    if num(obj, "count"):
        errs.append(FieldError.invalid("count", "", "needs to be unset"))
    source = m(obj, "source")
    if s(source, "component") or s(source, "host"):
        errs.append(FieldError.invalid("source", "", "needs to be unset"))
    return errs


# ValidateEventUpdate's immutable fields, in its order (reason twice, as upstream checks it),
# with each field's zero value (a missing field reads as it).
_IMMUTABLE_EVENT_FIELDS: tuple[tuple[str, Any], ...] = (
    ("involvedObject", {}), ("reason", ""), ("message", ""), ("source", {}), ("firstTimestamp", None),
    ("lastTimestamp", None), ("count", 0), ("reason", ""), ("type", ""), ("eventTime", None), ("action", ""),
    ("related", None), ("reportingComponent", ""), ("reportingInstance", ""),
)


def events_event_update(new: Obj, old: Obj) -> Errs:
    """ValidateEventUpdate for a request through events.k8s.io/v1 (both in core/v1 form):
    legacyValidateEvent, the series when it changed, and every field but metadata and series
    immutable."""
    errs = event(new, controller_path=_EVENTS_CONTROLLER)
    if new.get("series") != old.get("series"):
        errs += _series(new)
    for field, zero in _IMMUTABLE_EVENT_FIELDS:
        path = _EVENTS_CONTROLLER if field == "reportingComponent" else field
        nv, ov = new.get(field), old.get(field)
        if field == "eventTime" and _micro(nv) == _micro(ov):
            continue  # changes below a microsecond are tolerated (kubernetes#111928)
        errs += immutable(zero if nv is None else nv, zero if ov is None else ov, path)
    return errs


_RFC3339 = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)")


def _micro(value: Any) -> Any:
    """An RFC 3339 time truncated to the microsecond, in UTC (anything else as it is)."""
    match = _RFC3339.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        return value
    base, frac, zone = match.groups()
    try:
        at = dt.datetime.fromisoformat(base + ("+00:00" if zone == "Z" else zone))
    except ValueError:
        return value
    return at.replace(microsecond=int((frac or "0")[:6].ljust(6, "0"))).astimezone(dt.timezone.utc)
