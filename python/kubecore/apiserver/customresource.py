"""Custom resources (and their definitions) inside the generic handlers of rest.py.

The handlers call three hooks that cost nothing for built-in kinds:

    decode(request, rt, body, verb)       a create/update body, or a patched object, as upstream's
                                          decoder leaves it: CRs pruned (unknown fields refused,
                                          warned about or ignored per fieldValidation), nulls
                                          dropped, defaults applied; CRDs defaulted
    validate_create(rt, obj)              after the generic create preparation: the CR strategy
                                          (schema, embedded resources, scale paths) or the CRD
                                          strategy (fresh status, storedVersions) and validation
    validate_update(rt, new, old, sub)    the same for updates, status updates and patches

``resource_types(crd)`` builds the ResourceTypes a CRD serves (one per served version), and
``plan_crd_delete`` makes a CRD's DELETE only mark it (finalizer + Terminating condition), as
upstream's CRD storage does; the CRD controller (crd.py) then deletes the instances.
"""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from aiohttp import web

from kubecore.api import crd_validation, errors, pruning, structural
from kubecore.api.errors import FieldError
from kubecore.api.registry import ResourceType
from kubecore.apiserver import deletion

__all__ = ["CRD_GROUP", "is_crd", "is_cr", "resource_types", "decode", "validate_create", "validate_update",
           "plan_crd_delete", "set_condition", "CR_VERBS"]

Obj = dict[str, Any]
CRD_GROUP = "apiextensions.k8s.io"
# The verbs upstream's discovery lists for every custom resource, in its order.
CR_VERBS = ("delete", "deletecollection", "get", "list", "patch", "create", "update", "watch")
# Patch types upstream serves for custom resources (no strategic merge patch: no Go struct tags).
CR_PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml")
DEFAULT_COLUMNS: tuple[Obj, ...] = ({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},)
_MAX_INT32 = (1 << 31) - 1


def is_crd(rt: ResourceType) -> bool:
    return rt.name_rule == "crd"


def is_cr(rt: ResourceType) -> bool:
    return bool(rt.crd)


def _d(v: Any) -> Obj:
    return v if isinstance(v, dict) else {}


# ---- the types a CRD serves --------------------------------------------------------------------

def _names(crd: Obj) -> Obj:
    accepted = _d(_d(crd.get("status")).get("acceptedNames"))
    return accepted if accepted.get("plural") else _d(_d(crd.get("spec")).get("names"))


def _scale_paths(sub: Obj) -> tuple[str, str, str] | None:
    scale = sub.get("scale")
    if not isinstance(scale, dict):
        return None
    return (str(scale.get("specReplicasPath") or ""), str(scale.get("statusReplicasPath") or ""),
            str(scale.get("labelSelectorPath") or ""))


def resource_types(crd: Obj) -> list[ResourceType]:
    """One ResourceType per served version, named by the accepted names."""
    spec = _d(crd.get("spec"))
    names = _names(crd)
    versions = [v for v in spec.get("versions") or [] if isinstance(v, dict)]
    storage = crd_validation.storage_version(crd)
    several = len(versions) > 1
    out = []
    for v in versions:
        if not v.get("served"):
            continue
        schema = _d(v.get("schema")).get("openAPIV3Schema")
        schema = schema if isinstance(schema, dict) else None
        sub = _d(v.get("subresources"))
        columns = v.get("additionalPrinterColumns") or list(DEFAULT_COLUMNS)
        out.append(ResourceType(
            group=str(spec.get("group", "")), version=str(v.get("name", "")), resource=str(names.get("plural", "")),
            kind=str(names.get("kind", "")), namespaced=spec.get("scope") == "Namespaced",
            singular=str(names.get("singular") or str(names.get("kind", "")).lower()),
            short_names=tuple(names.get("shortNames") or ()), categories=tuple(names.get("categories") or ()),
            verbs=CR_VERBS, subresources=tuple(s for s in ("status", "scale") if s in sub),
            tracks_generation=True, crd=str(_d(crd.get("metadata")).get("name", "")), schema=schema,
            scale_paths=_scale_paths(sub), printer_columns=tuple(c for c in columns if isinstance(c, dict)),
            storage_version=storage, converts=several or pruning.has_defaults(schema),
            terminating=bool(_d(crd.get("metadata")).get("deletionTimestamp")),
        ))
    return out


# ---- decoding ----------------------------------------------------------------------------------

def _directive(request: web.Request, verb: str) -> str:
    value = request.query.get("fieldValidation") or ""
    if value in ("", "Warn"):
        return "Warn"
    if value in ("Ignore", "Strict"):
        return value
    cause = FieldError.not_supported("fieldValidation", value, ["", "Ignore", "Strict", "Warn"])
    kinds = {"create": "CreateOptions", "update": "UpdateOptions", "patch": "PatchOptions"}
    raise errors.invalid(("meta.k8s.io", kinds.get(verb, "CreateOptions")), "", [cause])


def _check_kind(rt: ResourceType, body: Obj) -> None:
    """ValidateTypeMeta for a body whose apiVersion fits the URL but names another kind."""
    kind, api_version = body.get("kind"), body.get("apiVersion")
    if kind and kind != rt.kind and api_version in (None, "", rt.api_version):
        raise errors.invalid(rt, str(_d(body.get("metadata")).get("name") or ""),
                             [FieldError.invalid("kind", kind, f"must be {rt.kind}")])


def decode(request: web.Request, rt: ResourceType, body: Obj, verb: str, *, patch: Any = None) -> Obj:
    """See the module doc; ``verb`` is create, update or patch (then ``body`` is the patched
    object and ``patch`` the patch)."""
    if is_crd(rt):
        crd_validation.set_defaults(body)
        if verb == "create":  # the name rule and the spec are reported together, as upstream
            prepared = copy.deepcopy(body)
            crd_validation.prepare_create(prepared)
            _raise(rt, body, crd_validation.name_errors(body) + crd_validation.validate_create(prepared))
        return body
    if not rt.crd:
        return body
    mode = _directive(request, verb)
    if verb == "patch" and request.content_type == "application/strategic-merge-patch+json":
        raise errors.unsupported_media_type(accepted=CR_PATCH_TYPES)
    if verb != "patch":
        _check_kind(rt, body)
    unknown = pruning.coerce(body, rt.schema)
    if unknown and mode != "Ignore":
        found = [f'unknown field "{p}"' for p in unknown]
        detail = "strict decoding error: " + ", ".join(found)
        if mode == "Strict" and verb == "patch":
            raise errors.invalid(("", ""), "", [FieldError.invalid("patch", errors.encode_go_json(patch).decode(), detail)])
        if mode == "Strict":
            raise errors.bad_request(f"{rt.kind} in version {errors.go_quote(rt.version)} cannot be handled as a "
                                     f"{rt.kind}: {detail}")
        request["warnings"] = list(request.get("warnings") or ()) + found
    return body


# ---- validation --------------------------------------------------------------------------------

def _type_name(v: Any) -> str:
    """Go's %T of a decoded JSON value, as the unstructured accessors print it."""
    return {bool: "bool", int: "int64", float: "float64", str: "string", list: "[]interface {}",
            dict: "map[string]interface {}"}.get(type(v), "<nil>")


def _go_text(v: Any) -> str:
    if isinstance(v, (dict, list)):
        return errors.encode_go_json(v).decode()
    return structural.go_value(v) if not isinstance(v, str) else v


def _scale_errors(rt: ResourceType, obj: Obj, *, spec: bool) -> list[FieldError]:
    """ValidateScaleSpec / ValidateScaleStatus: the replica counts are int32s, the selector a string."""
    if rt.scale_paths is None:
        return []
    errs: list[FieldError] = []
    spec_path, status_path, selector_path = rt.scale_paths
    for path in ((spec_path, status_path) if spec else (status_path,)):
        value, found = _nested(obj, path)
        if found and (isinstance(value, bool) or not isinstance(value, int)):
            errs.append(FieldError.invalid(path, 0, f"{path} accessor error: {_go_text(value)} is of the type "
                                           f"{_type_name(value)}, expected int64"))
        elif found and value < 0:
            errs.append(FieldError.invalid(path, value, "should be a non-negative integer"))
        elif found and value > _MAX_INT32:
            errs.append(FieldError.invalid(path, value, f"should be less than or equal to {_MAX_INT32}"))
    if selector_path:
        value, found = _nested(obj, selector_path)
        if found and not isinstance(value, str):
            errs.append(FieldError.invalid(selector_path, "", f"{selector_path} accessor error: {_go_text(value)} "
                                           f"is of the type {_type_name(value)}, expected string"))
    return errs


def _nested(obj: Any, path: str) -> tuple[Any, bool]:
    cur = obj
    for part in path.lstrip(".").split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None, False
        cur = cur[part]
    return cur, cur is not None


def _raise(rt: ResourceType, obj: Obj, errs: list[FieldError]) -> None:
    if errs:
        raise errors.invalid(rt, str(_d(obj.get("metadata")).get("name") or ""), errs)


def validate_create(rt: ResourceType, obj: Obj) -> None:
    """After meta.prepare_create: the kind's strategy (PrepareForCreate, Validate); 422 on errors."""
    if is_crd(rt):
        crd_validation.prepare_create(obj)  # validated when decoded
        return
    if not rt.crd:
        return
    if rt.terminating:
        raise errors.forbidden(rt, str(_d(obj.get("metadata")).get("name") or ""),
                               "create not allowed while custom resource definition is terminating")
    errs = structural.validate(obj, rt.schema)
    errs += _scale_errors(rt, obj, spec=True)
    errs += pruning.validate_embedded(obj, rt.schema)
    _raise(rt, obj, errs)


def validate_update(rt: ResourceType, new: Obj, old: Obj, *, subresource: str = "") -> None:
    """After meta.prepare_update: PrepareForUpdate and ValidateUpdate of the kind's (status)
    strategy; 422 on errors."""
    if is_crd(rt):
        if subresource == "status":
            _raise(rt, new, crd_validation.validate_status_update(new))
            return
        crd_validation.prepare_update(new, old)
        _raise(rt, new, crd_validation.validate_update(new, old))
        return
    if not rt.crd:
        return
    if subresource == "status":
        errs = structural.validate_status(new, rt.schema)
        errs += _scale_errors(rt, new, spec=False)
    else:
        _bump_generation_for_status(rt, new, old)
        errs = structural.validate(new, rt.schema)
        errs += _scale_errors(rt, new, spec=True)
        errs += pruning.validate_embedded(new, rt.schema)
    _raise(rt, new, structural.ratchet(errs, new, old))


def _bump_generation_for_status(rt: ResourceType, new: Obj, old: Obj) -> None:
    """Without a status subresource status is content like spec: a change bumps the generation
    (the CR strategy compares everything but metadata)."""
    if "status" in rt.subresources or new.get("status") == old.get("status"):
        return
    old_gen = int(_d(old.get("metadata")).get("generation") or 0)
    m = new.setdefault("metadata", {})
    if int(m.get("generation") or 0) == old_gen:
        m["generation"] = old_gen + 1


# ---- CRD deletion ------------------------------------------------------------------------------

def set_condition(crd: Obj, ctype: str, status: str, reason: str, message: str, *, now: str) -> bool:
    """SetCRDCondition: replaces the condition of that type (the transition time moves only when
    the status changes); returns whether anything changed."""
    conds = crd.setdefault("status", {}).setdefault("conditions", [])
    new = {"type": ctype, "status": status, "lastTransitionTime": now, "reason": reason, "message": message}
    for i, c in enumerate(conds):
        if isinstance(c, dict) and c.get("type") == ctype:
            if c.get("status") == status and c.get("lastTransitionTime"):
                new["lastTransitionTime"] = c["lastTransitionTime"]
            if c == new:
                return False
            conds[i] = new
            return True
    conds.append(new)
    return True


def plan_crd_delete(rt: ResourceType, old: Obj, opts: deletion.DeleteOptions, *, now: dt.datetime) -> deletion.Outcome:
    """A CRD's first DELETE marks it: the cleanup finalizer and Terminating=True
    (InstanceDeletionPending); later DELETEs are the generic ones."""
    if (old.get("metadata") or {}).get("deletionTimestamp"):
        return deletion.plan(rt, old, opts, now=now)
    crd = copy.deepcopy(old)
    finalizers = crd["metadata"].setdefault("finalizers", [])
    if crd_validation.CLEANUP_FINALIZER not in finalizers:
        finalizers.append(crd_validation.CLEANUP_FINALIZER)
    set_condition(crd, "Terminating", "True", "InstanceDeletionPending",
                  "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
                  now=now.strftime("%Y-%m-%dT%H:%M:%SZ"))
    return deletion.plan(rt, crd, opts, now=now)
