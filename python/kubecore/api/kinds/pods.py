"""Pods, pod templates and replication controllers (core/v1).

ValidatePodCreate / ValidatePodUpdate, ValidatePodTemplate and ValidateReplicationController.
A pod update may change only container images, activeDeadlineSeconds (down, or from unset),
tolerations (additions; tolerationSeconds may change) and a negative grace period to 1; any
other spec change is upstream's single Forbidden error at ``spec`` whose text starts
"pod updates may not change fields other than ..." and continues with a diff. The diff here
names the changed fields in JSON rather than as Go's cmp.Diff of core.PodSpec.
"""

from __future__ import annotations

from typing import Any

import msgspec

from kubecore.api.jsoncopy import json_copy
from kubecore.api.errors import FieldError
from kubecore.api.kinds.common import Errs, Obj, lst, m, nonneg, num, s, template_matches
from kubecore.api.kinds.podspec import MAX_INT32, pod_spec, pod_template, tolerations

UPDATABLE_POD_FIELDS = (
    "`spec.containers[*].image`",
    "`spec.initContainers[*].image`",
    "`spec.activeDeadlineSeconds`",
    "`spec.tolerations` (only additions to existing tolerations)",
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
)


def pod_create(obj: Obj) -> Errs:
    """ValidatePodCreate (metadata is meta.py's)."""
    spec = m(obj, "spec")
    errs = _pod_spec_and_images(spec)
    if lst(spec, "ephemeralContainers"):
        errs.append(FieldError.forbidden("spec.ephemeralContainers", "cannot be set on create"))
    if s(spec, "nodeName") and lst(spec, "schedulingGates"):
        errs.append(FieldError.forbidden("spec.nodeName", "cannot be set until all schedulingGates have been cleared"))
    return errs


def _pod_spec_and_images(spec: Obj) -> Errs:
    errs = pod_spec(spec, "spec")
    for key in ("containers", "initContainers"):
        for i, c in enumerate(lst(spec, key)):
            image = s(c, "image")
            if image != image.strip():
                errs.append(FieldError.invalid(f"spec.{key}[{i}].image", image,
                                               "must not have leading or trailing whitespace"))
    return errs


def pod_update(new: Obj, old: Obj) -> Errs:
    """ValidatePodUpdate."""
    spec, old_spec = m(new, "spec"), m(old, "spec")
    if spec == old_spec:
        return []  # the stored spec passed these rules already (metadata/status writes: the common case)
    errs = _pod_spec_and_images(spec)
    for key in ("containers", "initContainers"):
        if len(lst(spec, key)) != len(lst(old_spec, key)):
            errs.append(FieldError.forbidden(f"spec.{key}", "pod updates may not add or remove containers"))
            return errs
    deadline_errs = _deadline_update(num(spec, "activeDeadlineSeconds"), num(old_spec, "activeDeadlineSeconds"))
    errs.extend(deadline_errs)
    if any(e.body.startswith("Invalid value") and "between 0" in e.body for e in deadline_errs):
        return errs
    errs.extend(_only_added_tolerations(lst(spec, "tolerations"), lst(old_spec, "tolerations")))
    if spec == old_spec:
        return errs
    munged = _munge(spec, old_spec)
    if munged != old_spec:
        diff = _diff(old_spec, munged)
        errs.append(FieldError.forbidden(
            "spec", "pod updates may not change fields other than " + ",".join(UPDATABLE_POD_FIELDS) + "\n" + diff))
    return errs


def _deadline_update(new: int | None, old: int | None) -> Errs:
    path = "spec.activeDeadlineSeconds"
    if new is not None:
        if not 0 <= new <= MAX_INT32:
            return [FieldError.invalid(path, new, f"must be between 0 and {MAX_INT32}, inclusive")]
        if old is not None and old < new:
            return [FieldError.invalid(path, new, "must be less than or equal to previous value")]
    elif old is not None:
        return [FieldError.invalid(path, None, "must not update from a positive integer to nil value")]
    return []


def _only_added_tolerations(new: list[Any], old: list[Any]) -> Errs:
    """validateOnlyAddedTolerations."""
    for t in old:
        base = {k: v for k, v in (t if isinstance(t, dict) else {}).items() if k != "tolerationSeconds"}
        if not any(isinstance(n, dict) and {k: v for k, v in n.items() if k != "tolerationSeconds"} == base
                   for n in new):
            return [FieldError.forbidden("spec.tolerations", "existing toleration can not be modified except its "
                                         "tolerationSeconds")]
    return tolerations(new, "spec.tolerations")


def _munge(spec: Obj, old_spec: Obj) -> Obj:
    """The new spec with the mutable fields set back to the old values."""
    munged = json_copy(spec)
    for key in ("containers", "initContainers"):
        for c, oc in zip(lst(munged, key), lst(old_spec, key)):
            if isinstance(c, dict) and isinstance(oc, dict):
                c["image"] = oc.get("image")
                if oc.get("image") is None:
                    c.pop("image", None)
    for key in ("activeDeadlineSeconds", "tolerations", "schedulingGates"):
        if key in old_spec:
            munged[key] = json_copy(old_spec[key])
        else:
            munged.pop(key, None)
    old_grace = num(old_spec, "terminationGracePeriodSeconds")
    if old_grace is not None and old_grace < 0 and num(munged, "terminationGracePeriodSeconds") == 1:
        munged["terminationGracePeriodSeconds"] = old_grace
    return munged


def _diff(old: Obj, new: Obj) -> str:
    """A readable, deterministic diff of the changed spec fields (old `-`, new `+`)."""
    lines = ["  core.PodSpec{"]
    for key in sorted(set(old) | set(new)):
        if old.get(key) == new.get(key):
            continue
        if key in old:
            lines.append(f"- \t{key}: {msgspec.json.encode(old[key]).decode()},")
        if key in new:
            lines.append(f"+ \t{key}: {msgspec.json.encode(new[key]).decode()},")
    lines.append("  }")
    return "\n".join(lines) + "\n"


def pod_template_create(obj: Obj) -> Errs:
    """ValidatePodTemplate."""
    return pod_template(obj.get("template"), "template")


def pod_template_update(new: Obj, old: Obj) -> Errs:
    return pod_template_create(new)


def replication_controller(obj: Obj) -> Errs:
    """ValidateReplicationControllerSpec."""
    spec = m(obj, "spec")
    errs = nonneg(spec, "minReadySeconds", "spec")
    selector = spec.get("selector")
    if not (isinstance(selector, dict) and selector):
        errs.append(FieldError.required("spec.selector"))
    errs.extend(nonneg(spec, "replicas", "spec"))
    tmpl = spec.get("template")
    if not isinstance(tmpl, dict):
        errs.append(FieldError.required("spec.template"))
        return errs
    if isinstance(selector, dict) and selector:
        errs.extend(template_matches({"matchLabels": selector}, tmpl, "spec.template"))
    errs.extend(pod_template(tmpl, "spec.template"))
    tspec = m(tmpl, "spec")
    if s(tspec, "restartPolicy") != "Always":
        errs.append(FieldError.not_supported("spec.template.spec.restartPolicy", s(tspec, "restartPolicy"), ["Always"]))
    if tspec.get("activeDeadlineSeconds") is not None:
        errs.append(FieldError.forbidden("spec.template.spec.activeDeadlineSeconds",
                                         "activeDeadlineSeconds in ReplicationController is not Supported"))
    return errs


def replication_controller_update(new: Obj, old: Obj) -> Errs:
    return replication_controller(new)
