"""Object metadata on create and update: what the generic registry does before storage.

Ports the parts of k8s.io/apiserver's create/update handlers and rest.BeforeCreate /
rest.BeforeUpdate that touch ObjectMeta: kind/apiVersion checks, namespace reconciliation,
system fields (uid, creationTimestamp), generateName, generation (set to 1 and bumped by the
strategies of kinds that track it), status reset for kinds with a status subresource, and
metadata validation with upstream's messages. resourceVersion and managedFields are the caller's.

Clocks and randomness are injected (``now``, ``uid``, ``rand``); nothing here reads wall time
unless ``now_rfc3339`` is called.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Mapping
from typing import Any

from kubecore.api.jsoncopy import json_copy
from kubecore.api.errors import FieldError, bad_request, invalid
from kubecore.api.registry import ResourceType
from kubecore.api.validation import (
    NameFunc, name_is_dns1035_label, name_is_dns_label, name_is_dns_subdomain, validate_annotations,
    validate_finalizers, validate_labels, validate_owner_references, validate_path_segment_name,
)

__all__ = [
    "now_rfc3339", "new_uid", "generate_name", "validate_name", "name_func", "prepare_create",
    "prepare_update", "NAME_ALPHABET",
]

NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand: no vowels, no 0/1/3
_MAX_GENERATED_BASE = 63 - 5

_NAME_FUNCS: dict[str, NameFunc] = {
    "subdomain": name_is_dns_subdomain,
    "label": name_is_dns_label,
    "dns1035": name_is_dns1035_label,
    "path": validate_path_segment_name,
    "crd": name_is_dns_subdomain,  # plus the plural.group rule checked in _validate_create_meta
}


_last_second: list[Any] = [-1, ""]  # the wall clock's last formatted second (hot: every write)


def now_rfc3339(clock: Callable[[], float] = time.time) -> str:
    """metav1.Time as JSON: RFC 3339, UTC, whole seconds (``2026-12-02T10:00:00Z``)."""
    t = int(clock())
    if clock is time.time and t == _last_second[0]:
        return str(_last_second[1])
    text = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
    if clock is time.time:
        _last_second[0], _last_second[1] = t, text
    return text


_uid_pool = bytearray()  # os.urandom bytes not yet used; refilled 4 KiB (256 uids) at a time


def new_uid() -> str:
    """A random (version 4) UUID as upstream's uuid.NewUUID prints it; the randomness comes from
    os.urandom in batches instead of one system call per object. Event-loop thread only."""
    global _uid_pool
    if len(_uid_pool) < 16:
        _uid_pool = bytearray(os.urandom(4096))
    b = _uid_pool[-16:]
    del _uid_pool[-16:]
    b[6] = (b[6] & 0x0F) | 0x40
    b[8] = (b[8] & 0x3F) | 0x80
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def generate_name(base: str, rand: random.Random | None = None) -> str:
    """names.SimpleNameGenerator: base cut to 58 characters plus 5 random characters."""
    r = rand or random
    return base[:_MAX_GENERATED_BASE] + "".join(r.choice(NAME_ALPHABET) for _ in range(5))


def name_func(rt: ResourceType) -> NameFunc:
    return _NAME_FUNCS.get(rt.name_rule, name_is_dns_subdomain)


def validate_name(rt: ResourceType, name: str, prefix: bool = False) -> list[str]:
    """The kind's name rule (e.g. pods: DNS-1123 subdomain, services: DNS-1035 label);
    messages without the field path, empty when valid."""
    return name_func(rt)(name, prefix)


def _check_type(rt: ResourceType, obj: dict[str, Any]) -> None:
    """Fill missing kind/apiVersion; reject a body of another kind or group/version (400)."""
    kind = obj.get("kind") or rt.kind
    api_version = obj.get("apiVersion") or rt.api_version
    if not isinstance(kind, str) or not isinstance(api_version, str):
        raise bad_request("Object 'Kind' is missing or not a string")
    if kind != rt.kind:
        version = api_version.rsplit("/", 1)[-1]
        internal = (rt.group.split(".")[0] if rt.group else "core")
        raise bad_request(f'{kind} in version "{version}" cannot be handled as a {rt.kind}: '
                          f"converting ({version}.{kind}) to ({internal}.{rt.kind}): unknown conversion")
    if api_version != rt.api_version:
        raise bad_request(f"the API version in the data ({api_version}) does not match the expected "
                          f"API version ({rt.api_version})")
    obj["kind"] = kind
    obj["apiVersion"] = api_version


def _metadata(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    if meta is None:
        meta = obj["metadata"] = {}
    if not isinstance(meta, dict):
        raise bad_request("metadata must be an object")
    return meta


def _reconcile_namespace(meta: dict[str, Any], request_ns: str) -> None:
    """rest.EnsureObjectNamespaceMatchesRequestNamespace."""
    obj_ns = meta.get("namespace") or ""
    if obj_ns == request_ns:
        pass
    elif obj_ns == "":
        meta["namespace"] = request_ns
    elif request_ns == "":
        meta.pop("namespace", None)
    else:
        raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
    if not meta.get("namespace"):
        meta.pop("namespace", None)


def _common_meta_errors(rt: ResourceType, meta: Mapping[str, Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    ns = meta.get("namespace") or ""
    if rt.namespaced:
        if not ns:
            errs.append(FieldError.required("metadata.namespace"))
        else:
            errs.extend(FieldError.invalid("metadata.namespace", ns, m) for m in name_is_dns_label(ns, False))
    elif ns:
        errs.append(FieldError.forbidden("metadata.namespace", "not allowed on this type"))
    gen = meta.get("generation")
    if isinstance(gen, int) and gen < 0:
        errs.append(FieldError.invalid("metadata.generation", gen, "must be greater than or equal to 0"))
    errs.extend(validate_labels(meta.get("labels"), "metadata.labels"))
    errs.extend(validate_annotations(meta.get("annotations"), "metadata.annotations"))
    errs.extend(validate_owner_references(meta.get("ownerReferences"), "metadata.ownerReferences"))
    errs.extend(validate_finalizers(meta.get("finalizers"), "metadata.finalizers"))
    return errs


def _validate_create_meta(rt: ResourceType, obj: Mapping[str, Any], meta: Mapping[str, Any]) -> list[FieldError]:
    """ValidateObjectMeta with the kind's name function (the strategy's Validate)."""
    errs: list[FieldError] = []
    fn = name_func(rt)
    gen_name = meta.get("generateName") or ""
    if gen_name:
        errs.extend(FieldError.invalid("metadata.generateName", gen_name, m) for m in fn(gen_name, True))
    name = meta.get("name") or ""
    if not name:
        errs.append(FieldError.required("metadata.name", "name or generateName is required"))
    else:
        errs.extend(FieldError.invalid("metadata.name", name, m) for m in fn(name, False))
        if rt.name_rule == "crd":
            names = obj.get("spec", {}).get("names", {}) if isinstance(obj.get("spec"), Mapping) else {}
            expected = f"{names.get('plural', '')}.{obj.get('spec', {}).get('group', '')}"
            if name != expected:
                errs.append(FieldError.invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group'))
    errs.extend(_common_meta_errors(rt, meta))
    return errs


# Status an object starts with, for kinds whose strategies reset status on create.
_INITIAL_STATUS: dict[tuple[str, str], dict[str, Any]] = {
    ("", "Pod"): {"phase": "Pending"},
    ("", "Namespace"): {"phase": "Active"},
    ("", "PersistentVolume"): {"phase": "Pending"},
    ("", "PersistentVolumeClaim"): {"phase": "Pending"},
    ("", "Service"): {"loadBalancer": {}},
}


def prepare_create(rt: ResourceType, obj: Any, *, namespace: str | None, now: str, uid: str,
                   rand: random.Random | None = None) -> dict[str, Any]:
    """Make a decoded request body ready to store (mutates and returns ``obj``).

    Raises StatusError: 400 for a wrong kind/apiVersion, a non-object body or a namespace that
    differs from the URL's; 422 (Invalid, with causes) for bad metadata.
    """
    if not isinstance(obj, dict):
        raise bad_request("the body of the request must be a JSON object")
    _check_type(rt, obj)
    meta = _metadata(obj)
    _reconcile_namespace(meta, (namespace or "") if rt.namespaced else "")
    meta["uid"] = uid
    meta["creationTimestamp"] = now
    meta.pop("deletionTimestamp", None)
    meta.pop("deletionGracePeriodSeconds", None)
    if meta.get("generateName") and not meta.get("name"):
        meta["name"] = generate_name(meta["generateName"], rand)
    if rt.tracks_generation:
        meta["generation"] = 1
    if "status" in rt.subresources and rt.kind != "Node":
        initial = _INITIAL_STATUS.get((rt.group, rt.kind))
        if initial is not None:
            obj["status"] = json_copy(initial)
        else:
            obj.pop("status", None)
    errs = _validate_create_meta(rt, obj, meta)
    if errs:
        raise invalid(rt, meta.get("name") or "", errs)
    return obj


_IMMUTABLE = ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds")
_STATUS_RESET_META = ("deletionTimestamp", "generation", "labels", "annotations", "finalizers", "ownerReferences")
# Kinds whose status strategy resets less metadata: upstream's deploymentStatusStrategy resets
# only spec and labels, so the Deployment controller can write the revision annotation with status.
_STATUS_KEEPS_META: dict[tuple[str, str], tuple[str, ...]] = {
    ("apps", "Deployment"): ("annotations", "finalizers", "ownerReferences"),
}


def status_kept_metadata(rt: ResourceType) -> tuple[str, ...]:
    """The metadata fields a status write of `rt` may change (most kinds: none)."""
    return _STATUS_KEEPS_META.get((rt.group, rt.kind), ())


def _spec_changed(rt: ResourceType, old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Anything outside metadata/status/kind/apiVersion changed (deployments: annotations too)."""
    skip = ("metadata", "status", "kind", "apiVersion")
    keys = (set(old) | set(new)) - set(skip)
    if any(old.get(k) != new.get(k) for k in keys):
        return True
    if (rt.group, rt.kind) == ("apps", "Deployment"):
        return (old.get("metadata") or {}).get("annotations") != (new.get("metadata") or {}).get("annotations")
    return False


def _set_or_drop(meta: dict[str, Any], key: str, value: Any) -> None:
    if value is None:
        meta.pop(key, None)
    else:
        meta[key] = json_copy(value)


def prepare_update(rt: ResourceType, old: Mapping[str, Any], new: Any, *, subresource: str = "",
                   name: str | None = None) -> dict[str, Any]:
    """Make an update body ready to store over ``old`` (mutates and returns ``new``).

    ``subresource`` is "" for the object itself or "status": the main resource keeps the old
    status when the kind has a status subresource; a status update keeps everything but status
    (and resets labels, annotations, finalizers, ownerReferences as ResetObjectMetaForStatus).
    ``name``, when given, is the name in the URL (mismatch -> 400). resourceVersion is the caller's.
    """
    if not isinstance(new, dict):
        raise bad_request("the body of the request must be a JSON object")
    _check_type(rt, new)
    meta = _metadata(new)
    old_meta: Mapping[str, Any] = old.get("metadata") or {}
    if name is not None and meta.get("name") and meta.get("name") != name:
        raise bad_request(f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})")
    meta.setdefault("name", old_meta.get("name"))
    _reconcile_namespace(meta, old_meta.get("namespace") or "")
    if subresource == "status":
        for key in list(new):
            if key not in ("metadata", "status", "kind", "apiVersion"):
                del new[key]
        for key, value in old.items():
            if key not in ("metadata", "status", "kind", "apiVersion"):
                new[key] = json_copy(value)
        kept = status_kept_metadata(rt)
        for key in _STATUS_RESET_META:
            if key not in kept:
                _set_or_drop(meta, key, old_meta.get(key))
    elif "status" in rt.subresources:
        if "status" in old:
            new["status"] = json_copy(old["status"])
        else:
            new.pop("status", None)
    _set_or_drop(meta, "generation", old_meta.get("generation"))
    if rt.tracks_generation and subresource == "" and _spec_changed(rt, old, new):
        meta["generation"] = int(old_meta.get("generation") or 0) + 1
    if not meta.get("uid"):
        _set_or_drop(meta, "uid", old_meta.get("uid"))
    if old_meta.get("creationTimestamp"):
        meta["creationTimestamp"] = old_meta["creationTimestamp"]
    if old_meta.get("deletionTimestamp"):
        meta["deletionTimestamp"] = old_meta["deletionTimestamp"]
    if old_meta.get("deletionGracePeriodSeconds") is not None and meta.get("deletionGracePeriodSeconds") is None:
        meta["deletionGracePeriodSeconds"] = old_meta["deletionGracePeriodSeconds"]
    errs = _update_meta_errors(rt, old_meta, meta)
    if errs:
        raise invalid(rt, meta.get("name") or "", errs)
    return new


def _update_meta_errors(rt: ResourceType, old_meta: Mapping[str, Any], meta: Mapping[str, Any]) -> list[FieldError]:
    """ValidateObjectMetaAccessorUpdate (without the resourceVersion rule, which is the caller's)."""
    errs: list[FieldError] = []
    if old_meta.get("deletionTimestamp"):
        extra = sorted(set(meta.get("finalizers") or ()) - set(old_meta.get("finalizers") or ()))
        if extra:
            listed = "[]string{" + ", ".join(f'"{f}"' for f in extra) + "}"
            errs.append(FieldError.forbidden(
                "metadata.finalizers",
                f"no new finalizers can be added if the object is being deleted, found new finalizers {listed}"))
    for key in _IMMUTABLE:
        if meta.get(key) != old_meta.get(key):
            errs.append(FieldError.invalid(f"metadata.{key}", meta.get(key, ""), "field is immutable"))
    errs.extend(validate_labels(meta.get("labels"), "metadata.labels"))
    errs.extend(validate_annotations(meta.get("annotations"), "metadata.annotations"))
    errs.extend(validate_owner_references(meta.get("ownerReferences"), "metadata.ownerReferences"))
    errs.extend(validate_finalizers(meta.get("finalizers"), "metadata.finalizers"))
    return errs

