"""apps/v1: Deployments, ReplicaSets, StatefulSets, DaemonSets, ControllerRevisions.

Ports pkg/apis/apps/validation plus the apps/v1 strategies' rule that a selector is immutable.
Pod templates are validated with the pod rules under ``spec.template``.
"""

from __future__ import annotations

from typing import Any

from kubecore.api.errors import FieldError
from kubecore.api.kinds.common import (
    Errs, Obj, go_int_or_string, go_selector, immutable, int_or_percent, int_or_percent_value, invalid_raw,
    label_selector, m, nonneg, not_more_than_100_percent, num, s, selector_empty, selector_ok, template_matches,
)
from kubecore.api.kinds.podspec import pod_template
from kubecore.api.validation import validate_annotations, validate_labels


def _selector(spec: Obj, kind: str) -> Errs:
    sel = spec.get("selector")
    if not isinstance(sel, dict):
        return [FieldError.required("spec.selector")]
    errs = label_selector(sel, "spec.selector")
    if selector_empty(sel):
        errs.append(invalid_raw("spec.selector", go_selector(sel), f"empty selector is invalid for {kind}"))
    return errs


def _template_for_replicas(spec: Obj, kind: str) -> Errs:
    """ValidatePodTemplateSpecForReplicaSet."""
    tmpl = spec.get("template")
    errs: Errs = []
    if not isinstance(tmpl, dict):
        return [FieldError.required("spec.template")]
    if selector_ok(spec.get("selector")):
        errs.extend(template_matches(spec.get("selector"), tmpl, "spec.template"))
    errs.extend(pod_template(tmpl, "spec.template"))
    errs.extend(_always_restart(m(tmpl, "spec"), kind))
    return errs


def _always_restart(tspec: Obj, kind: str) -> Errs:
    errs: Errs = []
    if s(tspec, "restartPolicy") != "Always":
        errs.append(FieldError.not_supported("spec.template.spec.restartPolicy", s(tspec, "restartPolicy"), ["Always"]))
    if tspec.get("activeDeadlineSeconds") is not None:
        errs.append(FieldError.forbidden("spec.template.spec.activeDeadlineSeconds",
                                         f"activeDeadlineSeconds in {kind} is not Supported"))
    return errs


def deployment(obj: Obj) -> Errs:
    """ValidateDeploymentSpec."""
    spec = m(obj, "spec")
    errs = nonneg(spec, "replicas", "spec")
    errs.extend(_selector(spec, "deployment"))
    errs.extend(_template_for_replicas(spec, "ReplicaSet"))
    errs.extend(_strategy(m(spec, "strategy")))
    errs.extend(nonneg(spec, "minReadySeconds", "spec"))
    errs.extend(nonneg(spec, "revisionHistoryLimit", "spec"))
    deadline = num(spec, "progressDeadlineSeconds")
    if deadline is not None:
        errs.extend(nonneg(spec, "progressDeadlineSeconds", "spec"))
        if deadline <= (num(spec, "minReadySeconds") or 0):
            errs.append(FieldError.invalid("spec.progressDeadlineSeconds", deadline, "must be greater than minReadySeconds"))
    return errs


def _strategy(strategy: Obj) -> Errs:
    kind, path = s(strategy, "type"), "spec.strategy"
    ru = strategy.get("rollingUpdate")
    if kind == "Recreate":
        if ru is not None:
            return [FieldError.forbidden(f"{path}.rollingUpdate", "may not be specified when strategy `type` is 'Recreate'")]
        return []
    if kind == "RollingUpdate":
        if not isinstance(ru, dict):
            return [FieldError.required(f"{path}.rollingUpdate", "this should be defaulted and never be nil")]
        return _rolling_update(ru, f"{path}.rollingUpdate")
    return [FieldError.not_supported(path, kind, ["Recreate", "RollingUpdate"])]


def _rolling_update(ru: Obj, path: str) -> Errs:
    """ValidateRollingUpdateDeployment."""
    unavailable, surge = ru.get("maxUnavailable", 0), ru.get("maxSurge", 0)
    errs = int_or_percent(unavailable, f"{path}.maxUnavailable")
    errs.extend(int_or_percent(surge, f"{path}.maxSurge"))
    if int_or_percent_value(unavailable) == 0 and int_or_percent_value(surge) == 0:
        errs.append(invalid_raw(f"{path}.maxUnavailable", go_int_or_string(unavailable),
                                "may not be 0 when `maxSurge` is 0"))
    errs.extend(not_more_than_100_percent(unavailable, f"{path}.maxUnavailable"))
    return errs


def _selector_immutable(new: Obj, old: Obj) -> Errs:
    return immutable(m(new, "spec").get("selector"), m(old, "spec").get("selector"), "spec.selector", go_selector)


def deployment_update(new: Obj, old: Obj) -> Errs:
    return deployment(new) + _selector_immutable(new, old)


def replica_set(obj: Obj) -> Errs:
    """ValidateReplicaSetSpec."""
    spec = m(obj, "spec")
    errs = nonneg(spec, "replicas", "spec")
    errs.extend(nonneg(spec, "minReadySeconds", "spec"))
    errs.extend(_selector(spec, "deployment"))
    errs.extend(_template_for_replicas(spec, "ReplicaSet"))
    return errs


def replica_set_update(new: Obj, old: Obj) -> Errs:
    return replica_set(new) + _selector_immutable(new, old)


def stateful_set(obj: Obj) -> Errs:
    """ValidateStatefulSetSpec."""
    spec = m(obj, "spec")
    errs: Errs = []
    policy = s(spec, "podManagementPolicy")
    if not policy:
        errs.append(FieldError.required("spec.podManagementPolicy"))
    elif policy not in ("OrderedReady", "Parallel"):
        errs.append(FieldError.invalid("spec.podManagementPolicy", policy, "must be 'OrderedReady' or 'Parallel'"))
    errs.extend(_sts_strategy(m(spec, "updateStrategy")))
    errs.extend(nonneg(spec, "replicas", "spec"))
    errs.extend(nonneg(spec, "minReadySeconds", "spec"))
    errs.extend(_selector(spec, "statefulset"))
    tmpl = spec.get("template")
    if selector_ok(spec.get("selector")):
        errs.extend(template_matches(spec.get("selector"), tmpl, "spec.template"))
    meta = m(m(spec, "template"), "metadata")
    errs.extend(validate_labels(meta.get("labels"), "spec.template.labels"))
    errs.extend(validate_annotations(meta.get("annotations"), "spec.template.annotations"))
    errs.extend(_always_restart(m(m(spec, "template"), "spec"), "StatefulSet"))
    return errs  # upstream does not validate a stateful set's pod spec (a TODO there)


def _sts_strategy(strategy: Obj) -> Errs:
    kind, ru = s(strategy, "type"), strategy.get("rollingUpdate")
    if not kind:
        return [FieldError.required("spec.updateStrategy")]
    if kind == "OnDelete":
        if ru is not None:
            return [FieldError.invalid("spec.updateStrategy.rollingUpdate", ru, "only allowed for updateStrategy 'RollingUpdate'")]
        return []
    if kind == "RollingUpdate":
        if not isinstance(ru, dict):
            return []
        path = "spec.updateStrategy.rollingUpdate"
        errs = nonneg(ru, "partition", path)
        if ru.get("maxUnavailable") is not None:
            mu = ru["maxUnavailable"]
            errs.extend(int_or_percent(mu, f"{path}.maxUnavailable"))
            if int_or_percent_value(mu) == 0:
                errs.append(invalid_raw(f"{path}.maxUnavailable", go_int_or_string(mu), "cannot be 0"))
            errs.extend(not_more_than_100_percent(mu, f"{path}.maxUnavailable"))
        return errs
    return [FieldError.invalid("spec.updateStrategy", strategy, "must be 'RollingUpdate' or 'OnDelete'")]


STS_MUTABLE = ("replicas", "ordinals", "template", "updateStrategy", "persistentVolumeClaimRetentionPolicy",
               "minReadySeconds")


def stateful_set_update(new: Obj, old: Obj) -> Errs:
    errs = stateful_set(new)
    spec, old_spec = m(new, "spec"), m(old, "spec")
    rest = {k: v for k, v in spec.items() if k not in STS_MUTABLE}
    old_rest = {k: v for k, v in old_spec.items() if k not in STS_MUTABLE}
    if rest != old_rest:
        errs.append(FieldError.forbidden("spec", (
            "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', "
            "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden")))
    return errs


def daemon_set(obj: Obj) -> Errs:
    """ValidateDaemonSetSpec."""
    spec = m(obj, "spec")
    sel = spec.get("selector")
    errs = label_selector(sel, "spec.selector")
    if selector_ok(sel):
        errs.extend(template_matches(sel, spec.get("template"), "spec.template", skip_empty=False))
    elif sel is None:
        errs.extend(template_matches({}, spec.get("template"), "spec.template", skip_empty=False))
    if isinstance(sel, dict) and selector_empty(sel):
        errs.append(invalid_raw("spec.selector", go_selector(sel), "empty selector is invalid for daemonset"))
    errs.extend(pod_template(spec.get("template"), "spec.template"))
    errs.extend(_always_restart(m(m(spec, "template"), "spec"), "DaemonSet"))
    errs.extend(nonneg(spec, "minReadySeconds", "spec"))
    errs.extend(nonneg(spec, "templateGeneration", "spec"))
    errs.extend(_ds_strategy(m(spec, "updateStrategy")))
    errs.extend(nonneg(spec, "revisionHistoryLimit", "spec"))
    return errs


def _ds_strategy(strategy: Obj) -> Errs:
    kind, path = s(strategy, "type"), "spec.updateStrategy"
    if kind == "OnDelete":
        return []
    if kind != "RollingUpdate":
        return [FieldError.not_supported(path, strategy, ["RollingUpdate", "OnDelete"])]
    ru = strategy.get("rollingUpdate")
    if not isinstance(ru, dict):
        return [FieldError.required(f"{path}.rollingUpdate")]
    path += ".rollingUpdate"
    unavailable, surge = ru.get("maxUnavailable", 0), ru.get("maxSurge", 0)
    errs = int_or_percent(unavailable, f"{path}.maxUnavailable") + int_or_percent(surge, f"{path}.maxSurge")
    errs += not_more_than_100_percent(unavailable, f"{path}.maxUnavailable")
    errs += not_more_than_100_percent(surge, f"{path}.maxSurge")
    has_unavailable, has_surge = int_or_percent_value(unavailable) != 0, int_or_percent_value(surge) != 0
    if has_unavailable and has_surge:
        errs.append(invalid_raw(f"{path}.maxSurge", go_int_or_string(surge), "may not be set when maxUnavailable is non-zero"))
    elif not has_unavailable and not has_surge:
        errs.append(FieldError.required(f"{path}.maxUnavailable", "cannot be 0 when maxSurge is 0"))
    return errs


def daemon_set_update(new: Obj, old: Obj) -> Errs:
    return daemon_set(new) + _selector_immutable(new, old)


def controller_revision(obj: Obj) -> Errs:
    errs: Errs = []
    if obj.get("data") is None:
        errs.append(FieldError.required("data", "data is mandatory"))
    return errs + nonneg(obj, "revision", "")


def controller_revision_update(new: Obj, old: Obj) -> Errs:
    return controller_revision(new) + _data_immutable(new.get("data"), old.get("data"))


def _data_immutable(new: Any, old: Any) -> Errs:
    return [] if new == old else [FieldError("FieldValueInvalid", "data", "Invalid value: \"\": field is immutable")]
