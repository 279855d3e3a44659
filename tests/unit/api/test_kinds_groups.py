"""Per-kind validation of policy, scheduling, rbac, networking, discovery, storage, autoscaling."""

from __future__ import annotations

from tests.unit.api.test_kinds_core import create_errors, update_errors

RBAC, NET = "rbac.authorization.k8s.io", "networking.k8s.io"


def test_pod_disruption_budgets() -> None:
    assert create_errors("PodDisruptionBudget", {"spec": {"minAvailable": "50%"}}, "policy") == []
    assert create_errors("PodDisruptionBudget", {"spec": {"minAvailable": 1, "maxUnavailable": 1}}, "policy") == [
        "spec: Invalid value: policy.PodDisruptionBudgetSpec{...}: minAvailable and maxUnavailable cannot be both set"]
    assert create_errors("PodDisruptionBudget", {"spec": {"maxUnavailable": -1}}, "policy") == [
        "spec.maxUnavailable: Invalid value: -1: must be greater than or equal to 0"]


def test_priority_classes() -> None:
    sched = "scheduling.k8s.io"
    assert create_errors("PriorityClass", {"metadata": {"name": "high"}, "value": 1000}, sched) == []
    assert create_errors("PriorityClass", {"metadata": {"name": "high"}, "value": 2000000000}, sched) == [
        "value: Forbidden: maximum allowed value of a user defined priority is 1000000000"]
    assert create_errors("PriorityClass", {"metadata": {"name": "system-mine"}, "value": 1}, sched) == [
        "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. "
        "error: system-mine is not a known system priority class"]
    assert update_errors("PriorityClass", {"value": 2}, {"value": 1}, sched) == [
        "value: Forbidden: may not be changed in an update."]


def test_rbac() -> None:
    assert create_errors("Role", {"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}, RBAC) == []
    assert create_errors("Role", {"rules": [{"apiGroups": [""], "resources": ["pods"]}]}, RBAC) == [
        "rules[0].verbs: Required value: verbs must contain at least one value"]
    assert create_errors("ClusterRole", {"rules": [{"verbs": ["get"]}]}, RBAC) == [
        "rules[0].apiGroups: Required value: resource rules must supply at least one api group",
        "rules[0].resources: Required value: resource rules must supply at least one resource"]
    binding = {"roleRef": {"kind": "ClusterRole", "name": "view"}, "subjects": [{"kind": "User", "name": "u"}]}
    assert create_errors("RoleBinding", binding, RBAC) == []
    assert create_errors("RoleBinding", {**binding, "subjects": [{"kind": "Robot", "name": "r"}]}, RBAC) == [
        'subjects[0].kind: Unsupported value: "Robot": supported values: "ServiceAccount", "User", "Group"']
    changed = {**binding, "roleRef": {"kind": "ClusterRole", "name": "edit"}}
    assert update_errors("RoleBinding", changed, binding, RBAC) == [
        'roleRef: Invalid value: rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", Kind:"ClusterRole", '
        'Name:"edit"}: cannot change roleRef']


def test_networking_and_discovery() -> None:
    backend = {"service": {"name": "web", "port": {"number": 80}}}
    ok = {"spec": {"rules": [{"host": "example.com", "http": {"paths": [
        {"path": "/", "pathType": "Prefix", "backend": backend}]}}]}}
    assert create_errors("Ingress", ok, NET) == []
    bad = {"spec": {"rules": [{"http": {"paths": [{"path": "api", "pathType": "Prefix", "backend": backend}]}}]}}
    assert create_errors("Ingress", bad, NET) == [
        'spec.rules[0].http.paths[0].path: Invalid value: "api": must be an absolute path']
    assert create_errors("Ingress", {"spec": {}}, NET) == [
        "spec: Invalid value: []networking.IngressRule(nil): either `defaultBackend` or `rules` must be specified"]
    assert create_errors("NetworkPolicy", {"spec": {"podSelector": {}, "ingress": [{"ports": [{"port": 80}]}]}},
                         NET) == []
    assert create_errors("EndpointSlice", {"addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"]}]},
                         "discovery.k8s.io") == []
    assert create_errors("EndpointSlice", {"addressType": "IPv5", "endpoints": [{"addresses": []}]},
                         "discovery.k8s.io") == [
        'addressType: Unsupported value: "IPv5": supported values: "FQDN", "IPv4", "IPv6"',
        "endpoints[0].addresses: Required value: must contain at least 1 address"]


def test_storage_classes_and_hpas() -> None:
    sc = "storage.k8s.io"
    assert create_errors("StorageClass", {"provisioner": "example.com/disk"}, sc) == []
    assert create_errors("StorageClass", {}, sc) == ["provisioner: Required value"]
    assert create_errors("StorageClass", {"provisioner": "p", "reclaimPolicy": "Recycle"}, sc) == [
        'reclaimPolicy: Unsupported value: "Recycle": supported values: "Delete", "Retain"']
    hpa = {"spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "minReplicas": 3, "maxReplicas": 2}}
    assert create_errors("HorizontalPodAutoscaler", hpa, "autoscaling") == [
        "spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`"]
    hpa["spec"]["maxReplicas"] = 5
    assert create_errors("HorizontalPodAutoscaler", hpa, "autoscaling") == []
