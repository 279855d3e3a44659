"""ConfigMaps, Secrets, Namespaces, ServiceAccounts and Events (core/v1).

ValidateConfigMap(Update), ValidateSecret(Update), ValidateNamespace, ValidateServiceAccount and
a minimal ValidateEventCreate. Secret ``data`` values are base64 in JSON; a value that is not
base64 is a decode error (400), as upstream's decoder reports it.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

from kubecore.api.errors import FieldError
from kubecore.api.kinds.common import DecodeError, Errs, Obj, config_key_msgs, immutable, m, s

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


def event(obj: Obj) -> Errs:
    """legacyValidateEvent's namespace rule: involvedObject.namespace matches the event's (an event
    about a cluster-scoped object lives in "default" or has no namespace)."""
    meta_ns = s(m(obj, "metadata"), "namespace")
    inv_ns = s(m(obj, "involvedObject"), "namespace")
    if (not inv_ns and meta_ns not in ("", "default")) or (inv_ns and inv_ns != meta_ns):
        return [FieldError.invalid("involvedObject.namespace", inv_ns, "does not match event.namespace")]
    return []
