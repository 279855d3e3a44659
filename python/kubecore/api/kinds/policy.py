"""policy/v1, scheduling.k8s.io/v1, coordination.k8s.io/v1, rbac.authorization.k8s.io/v1 and
autoscaling/v2: the commonly hit rules of each group's validation package, upstream's texts.
"""

from __future__ import annotations

from kubecore.api.errors import FieldError, go_quote
from kubecore.api.kinds.common import (
    Errs, Obj, dicts, immutable, int_or_percent, invalid_raw, label_selector, lst, m, nonneg,
    not_more_than_100_percent, num, s,
)
from kubecore.api.validation import name_is_dns_subdomain, validate_path_segment_name

HIGHEST_USER_PRIORITY = 1_000_000_000
SYSTEM_PRIORITY_CLASSES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}
RBAC_GROUP = "rbac.authorization.k8s.io"
METRIC_TYPES = ("ContainerResource", "External", "Object", "Pods", "Resource")


def pod_disruption_budget(obj: Obj) -> Errs:
    """ValidatePodDisruptionBudgetSpec."""
    spec = m(obj, "spec")
    errs: Errs = []
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        errs.append(invalid_raw("spec", "policy.PodDisruptionBudgetSpec{...}",
                                "minAvailable and maxUnavailable cannot be both set"))
    for key in ("minAvailable", "maxUnavailable"):
        if spec.get(key) is not None:
            errs.extend(int_or_percent(spec[key], f"spec.{key}"))
            errs.extend(not_more_than_100_percent(spec[key], f"spec.{key}"))
    errs.extend(label_selector(spec.get("selector"), "spec.selector"))
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in ("AlwaysAllow", "IfHealthyBudget"):
        errs.append(FieldError.not_supported("spec.unhealthyPodEvictionPolicy", policy, ["AlwaysAllow", "IfHealthyBudget"]))
    return errs


def pod_disruption_budget_update(new: Obj, old: Obj) -> Errs:
    return pod_disruption_budget(new)


def priority_class(obj: Obj) -> Errs:
    """ValidatePriorityClass."""
    name, value = s(m(obj, "metadata"), "name"), num(obj, "value") or 0
    errs: Errs = []
    if name.startswith("system-"):
        known = SYSTEM_PRIORITY_CLASSES.get(name)
        detail = (f"{name} is not a known system priority class" if known is None else
                  f"value of {name} PriorityClass must be {known}" if known != value else "")
        if detail:
            errs.append(FieldError.forbidden("metadata.name", "priority class names with 'system-' prefix are "
                                             f"reserved for system use only. error: {detail}"))
    elif value > HIGHEST_USER_PRIORITY:
        errs.append(FieldError.forbidden("value", f"maximum allowed value of a user defined priority is {HIGHEST_USER_PRIORITY}"))
    policy = obj.get("preemptionPolicy")
    if policy is not None and policy not in ("PreemptLowerPriority", "Never"):
        errs.append(FieldError.not_supported("preemptionPolicy", policy, ["PreemptLowerPriority", "Never"]))
    return errs


def priority_class_update(new: Obj, old: Obj) -> Errs:
    """ValidatePriorityClassUpdate: value and preemptionPolicy may not change."""
    errs: Errs = []
    if new.get("value") != old.get("value"):
        errs.append(FieldError.forbidden("value", "may not be changed in an update."))
    errs.extend(immutable(new.get("preemptionPolicy"), old.get("preemptionPolicy"), "preemptionPolicy"))
    return errs


def lease(obj: Obj) -> Errs:
    """ValidateLeaseSpec."""
    spec = m(obj, "spec")
    errs: Errs = []
    duration = num(spec, "leaseDurationSeconds")
    if duration is not None and duration <= 0:
        errs.append(FieldError.invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
    errs.extend(nonneg(spec, "leaseTransitions", "spec"))
    return errs


def lease_update(new: Obj, old: Obj) -> Errs:
    return lease(new)


# ---- rbac ------------------------------------------------------------------------------------------


def _rule(rule: Obj, *, namespaced: bool, path: str) -> Errs:
    """ValidatePolicyRule."""
    errs: Errs = []
    if not lst(rule, "verbs"):
        errs.append(FieldError.required(f"{path}.verbs", "verbs must contain at least one value"))
    urls = lst(rule, "nonResourceURLs")
    if urls:
        rendered = "[]string{" + ", ".join(go_quote(str(u)) for u in urls) + "}"
        if namespaced:
            errs.append(invalid_raw(f"{path}.nonResourceURLs", rendered, "namespaced rules cannot apply to non-resource URLs"))
        if lst(rule, "apiGroups") or lst(rule, "resources") or lst(rule, "resourceNames"):
            errs.append(invalid_raw(f"{path}.nonResourceURLs", rendered,
                                    "rules cannot apply to both regular resources and non-resource URLs"))
        return errs
    if not lst(rule, "apiGroups"):
        errs.append(FieldError.required(f"{path}.apiGroups", "resource rules must supply at least one api group"))
    if not lst(rule, "resources"):
        errs.append(FieldError.required(f"{path}.resources", "resource rules must supply at least one resource"))
    return errs


def role(obj: Obj) -> Errs:
    errs: Errs = []
    for i, rule in dicts(obj, "rules"):
        errs.extend(_rule(rule, namespaced=True, path=f"rules[{i}]"))
    return errs


def cluster_role(obj: Obj) -> Errs:
    errs: Errs = []
    for i, rule in dicts(obj, "rules"):
        errs.extend(_rule(rule, namespaced=False, path=f"rules[{i}]"))
    agg = obj.get("aggregationRule")
    if isinstance(agg, dict):
        if not lst(agg, "clusterRoleSelectors"):
            errs.append(FieldError.required("aggregationRule.clusterRoleSelectors",
                                            "at least one clusterRoleSelector required if aggregationRule is non-nil"))
        for i, sel in enumerate(lst(agg, "clusterRoleSelectors")):
            errs.extend(label_selector(sel, f"aggregationRule.clusterRoleSelectors[{i}]"))
    return errs


def _binding(obj: Obj, *, namespaced: bool) -> Errs:
    ref = m(obj, "roleRef")
    errs: Errs = []
    if s(ref, "apiGroup") != RBAC_GROUP:
        errs.append(FieldError.not_supported("roleRef.apiGroup", s(ref, "apiGroup"), [RBAC_GROUP]))
    kinds = ["Role", "ClusterRole"] if namespaced else ["ClusterRole"]
    if s(ref, "kind") not in kinds:
        errs.append(FieldError.not_supported("roleRef.kind", s(ref, "kind"), kinds))
    name = s(ref, "name")
    if not name:
        errs.append(FieldError.required("roleRef.name"))
    else:
        errs.extend(FieldError.invalid("roleRef.name", name, msg) for msg in validate_path_segment_name(name, False))
    for i, subject in dicts(obj, "subjects"):
        errs.extend(_subject(subject, namespaced=namespaced, path=f"subjects[{i}]"))
    return errs


def _subject(subject: Obj, *, namespaced: bool, path: str) -> Errs:
    """ValidateRoleBindingSubject."""
    errs: Errs = []
    name, kind, group = s(subject, "name"), s(subject, "kind"), s(subject, "apiGroup")
    if not name:
        errs.append(FieldError.required(f"{path}.name"))
    if kind == "ServiceAccount":
        if name:
            errs.extend(FieldError.invalid(f"{path}.name", name, msg) for msg in name_is_dns_subdomain(name, False))
        if group:
            errs.append(FieldError.not_supported(f"{path}.apiGroup", group, [""]))
        if not namespaced and not s(subject, "namespace"):
            errs.append(FieldError.required(f"{path}.namespace"))
    elif kind in ("User", "Group"):
        if group != RBAC_GROUP:
            errs.append(FieldError.not_supported(f"{path}.apiGroup", group, [RBAC_GROUP]))
    else:
        errs.append(FieldError.not_supported(f"{path}.kind", kind, ["ServiceAccount", "User", "Group"]))
    return errs


def role_binding(obj: Obj) -> Errs:
    return _binding(obj, namespaced=True)


def cluster_role_binding(obj: Obj) -> Errs:
    return _binding(obj, namespaced=False)


def _role_ref_unchanged(new: Obj, old: Obj) -> Errs:
    ref = m(new, "roleRef")
    if ref == m(old, "roleRef"):
        return []
    rendered = (f'rbac.RoleRef{{APIGroup:{go_quote(s(ref, "apiGroup"))}, Kind:{go_quote(s(ref, "kind"))}, '
                f'Name:{go_quote(s(ref, "name"))}}}')
    return [invalid_raw("roleRef", rendered, "cannot change roleRef")]


def role_binding_update(new: Obj, old: Obj) -> Errs:
    return role_binding(new) + _role_ref_unchanged(new, old)


def cluster_role_binding_update(new: Obj, old: Obj) -> Errs:
    return cluster_role_binding(new) + _role_ref_unchanged(new, old)


# ---- autoscaling/v2 ------------------------------------------------------------------------------------


def horizontal_pod_autoscaler(obj: Obj) -> Errs:
    """ValidateHorizontalPodAutoscalerSpec."""
    spec = m(obj, "spec")
    errs: Errs = []
    min_replicas, max_replicas = num(spec, "minReplicas"), num(spec, "maxReplicas") or 0
    if min_replicas is not None and min_replicas < 1:
        errs.append(FieldError.invalid("spec.minReplicas", min_replicas, "must be greater than or equal to 1"))
    if max_replicas < 1:
        errs.append(FieldError.invalid("spec.maxReplicas", max_replicas, "must be greater than 0"))
    if min_replicas is not None and max_replicas < min_replicas:
        errs.append(FieldError.invalid("spec.maxReplicas", max_replicas, "must be greater than or equal to `minReplicas`"))
    errs.extend(_scale_target(m(spec, "scaleTargetRef"), "spec.scaleTargetRef"))
    for i, metric in dicts(spec, "metrics"):
        errs.extend(_metric(metric, f"spec.metrics[{i}]"))
    return errs


def _scale_target(ref: Obj, path: str) -> Errs:
    errs: Errs = []
    for key in ("kind", "name"):
        value = s(ref, key)
        if not value:
            errs.append(FieldError.required(f"{path}.{key}"))
        else:
            errs.extend(FieldError.invalid(f"{path}.{key}", value, msg) for msg in validate_path_segment_name(value, False))
    return errs


_SOURCE_KEYS = {"Object": "object", "Pods": "pods", "Resource": "resource", "ContainerResource": "containerResource",
                "External": "external"}


def _metric(metric: Obj, path: str) -> Errs:
    kind = s(metric, "type")
    if not kind:
        return [FieldError.required(f"{path}.type", "must specify a metric source type")]
    if kind not in METRIC_TYPES:
        return [FieldError.not_supported(f"{path}.type", kind, METRIC_TYPES)]
    key = _SOURCE_KEYS[kind]
    errs: Errs = []
    for other, other_key in _SOURCE_KEYS.items():
        if other != kind and metric.get(other_key) is not None:
            errs.append(FieldError.forbidden(f"{path}.{other_key}", "must populate the given metric source only"))
    source = metric.get(key)
    if not isinstance(source, dict):
        errs.append(FieldError.required(f"{path}.{key}", "must populate information for the given metric source"))
        return errs
    if kind in ("Resource", "ContainerResource") and not s(source, "name"):
        errs.append(FieldError.required(f"{path}.{key}.name", "must specify a resource name"))
    target = m(source, "target")
    target_type = s(target, "type")
    if target_type not in ("Utilization", "Value", "AverageValue"):
        errs.append(FieldError.required(f"{path}.{key}.target.type", "must specify a metric target type"))
    return errs


def horizontal_pod_autoscaler_update(new: Obj, old: Obj) -> Errs:
    return horizontal_pod_autoscaler(new)
