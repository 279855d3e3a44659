"""Pod admission plugins, in upstream's order: ServiceAccount, LimitRanger, Priority,
DefaultTolerationSeconds. Each mutates a new pod in place (or refuses it with 403 Forbidden).

ServiceAccount here only names the account ("default" when none is given); requiring that the
account exists, and mounting its token, wait for the service-account controller.
"""

from __future__ import annotations

from typing import Any

from kubecore.api import errors
from kubecore.api.registry import Registry, ResourceType
from kubecore.apiserver.lookups import Lookups

Obj = dict[str, Any]
SYSTEM_PRIORITY_CLASSES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}
NOT_READY, UNREACHABLE = "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"
DEFAULT_TOLERATION_SECONDS = 300


class PodAdmission:
    def __init__(self, registry: Registry, lookups: Lookups) -> None:
        self.lookups = lookups
        pods, pcs, lrs = (registry.get("", "v1", "pods"), registry.get("scheduling.k8s.io", "v1", "priorityclasses"),
                          registry.get("", "v1", "limitranges"))
        assert pods is not None and pcs is not None and lrs is not None
        self.pods, self.priority_classes, self.limit_ranges = pods, pcs, lrs

    def admit(self, pod: Obj) -> None:
        spec = pod.setdefault("spec", {})
        if not isinstance(spec, dict):
            return
        self.service_account(spec)
        self.limit_ranger(pod["metadata"].get("namespace", ""), spec)
        self.priority(pod["metadata"].get("name", ""), spec)
        self.default_toleration_seconds(spec)

    @staticmethod
    def service_account(spec: Obj) -> None:
        name = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
        spec["serviceAccountName"] = name
        spec["serviceAccount"] = name

    def limit_ranger(self, namespace: str, spec: Obj) -> None:
        """Container defaults from the namespace's LimitRanges (type Container)."""
        for lr in self.lookups.items(self.limit_ranges, namespace):
            for item in (lr.get("spec") or {}).get("limits") or []:
                if item.get("type") != "Container":
                    continue
                limits = item.get("default") or {}
                requests = {**limits, **(item.get("defaultRequest") or {})}
                for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
                    res = c.setdefault("resources", {})
                    for k, v in limits.items():
                        res.setdefault("limits", {}).setdefault(k, v)
                    for k, v in requests.items():
                        res.setdefault("requests", {}).setdefault(k, v)

    def _class_value(self, name: str) -> tuple[int, str] | None:
        pc = self.lookups.get(self.priority_classes, "", name)
        if pc is None:
            return None
        return int(pc.get("value", 0)), str(pc.get("preemptionPolicy") or "PreemptLowerPriority")

    def _global_default(self) -> tuple[str, int, str] | None:
        for pc in self.lookups.items(self.priority_classes, ""):
            if pc.get("globalDefault"):
                return pc["metadata"]["name"], int(pc.get("value", 0)), str(pc.get("preemptionPolicy") or "PreemptLowerPriority")
        return None

    def priority(self, pod_name: str, spec: Obj) -> None:
        name = spec.get("priorityClassName") or ""
        policy = "PreemptLowerPriority"
        if name:
            found = self._class_value(name)
            if found is None:
                raise errors.forbidden(self.pods, pod_name, f"no PriorityClass with name {name} was found")
            value, policy = found
        else:
            default = self._global_default()
            value = 0
            if default is not None:
                name, value, policy = default
                spec["priorityClassName"] = name
        if spec.get("priority") is not None and spec["priority"] != value:
            raise errors.forbidden(
                self.pods, pod_name,
                f"the integer value of priority ({spec['priority']}) must not be provided in pod spec; priority "
                f"admission controller computed {value} from the given PriorityClass name",
            )
        spec["priority"] = value
        spec.setdefault("preemptionPolicy", policy)

    @staticmethod
    def default_toleration_seconds(spec: Obj) -> None:
        """Tolerations of the not-ready and unreachable taints for 300 s, unless the pod tolerates
        them already: upstream counts a toleration whose key is the taint's or empty and whose
        effect is NoExecute or empty (the operator does not matter)."""
        tolerations = spec.get("tolerations") or []
        not_ready = unreachable = False
        for t in tolerations:
            if type(t) is not dict or t.get("effect") not in (None, "", "NoExecute"):
                continue
            key = t.get("key")
            if not key:
                not_ready = unreachable = True
            elif key == NOT_READY:
                not_ready = True
            elif key == UNREACHABLE:
                unreachable = True
        for key, tolerated in ((NOT_READY, not_ready), (UNREACHABLE, unreachable)):
            if not tolerated:
                tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute",
                                    "tolerationSeconds": DEFAULT_TOLERATION_SECONDS})
        spec["tolerations"] = tolerations


def system_priority_classes() -> list[Obj]:
    return [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value,
         "description": "Used for system critical pods that must not be moved from their current node."
         if name == "system-node-critical" else "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
         "preemptionPolicy": "PreemptLowerPriority"}
        for name, value in SYSTEM_PRIORITY_CLASSES.items()
    ]


def is_pod(rt: ResourceType) -> bool:
    return rt.group == "" and rt.kind == "Pod"
