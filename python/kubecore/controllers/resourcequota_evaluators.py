"""How much of a quota the objects of a namespace use (upstream pkg/quota/v1: resources.go, generic/,
evaluator/core/{pods,services,persistent_volume_claims}.go).

A ResourceList is a dict resource name -> `Quantity`; `rl_add`, `rl_mask`, `rl_equal` and
`to_json` / `from_json` are upstream's quota.Add/Mask/Equals and the wire form (canonical strings).

An `Evaluator` knows one group-resource: which quota resource names it can measure
(`matching`) and one object's usage (`usage`), and whether an object matches a quota scope
(`matches_scope`; only pods have scopes, other kinds never match a scoped quota):

- pods: pods (only pods not finished and not stuck terminating past their grace period),
  count/pods (every pod), cpu/memory/ephemeral-storage and their requests./limits. forms from the
  pod's effective requests and limits (containers summed, init containers as a maximum,
  restartable init containers added, overhead added), hugepages-* and requests.<extended>;
  scopes Terminating / NotTerminating (activeDeadlineSeconds), BestEffort / NotBestEffort (no cpu
  or memory requests or limits anywhere), PriorityClass (scopeSelector In/NotIn/Exists/
  DoesNotExist on spec.priorityClassName), CrossNamespacePodAffinity;
- services: services, count/services, services.loadbalancers, services.nodeports;
- persistentvolumeclaims: persistentvolumeclaims, count/persistentvolumeclaims, requests.storage and
  the <class>.storageclass.storage.k8s.io/ forms;
- anything else: an object count, count/<resource>.<group> (plus the legacy name for configmaps,
  secrets, replicationcontrollers and resourcequotas).

`calculate_usage` is upstream's CalculateUsage: for the quota's hard names every evaluator can
measure, the sum of usage over the objects matching all scopes and the scopeSelector, zero when
nothing matches, masked to what was asked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubecore.api.quantity import DECIMAL_SI, Quantity, QuantityError, from_int, parse_json
from kubecore.controllers.controller_utils import meta, parse_time

Obj = dict[str, Any]
ResourceList = dict[str, Quantity]
GroupResource = tuple[str, str]
"""(group, resource); the core group is ""."""

STORAGE_CLASS_SUFFIX = ".storageclass.storage.k8s.io/"
LEGACY_COUNT_NAMES = {("", "configmaps"): "configmaps", ("", "secrets"): "secrets",
                      ("", "replicationcontrollers"): "replicationcontrollers",
                      ("", "resourcequotas"): "resourcequotas"}
POD_RESOURCES = frozenset({"pods", "count/pods", "cpu", "memory", "ephemeral-storage", "requests.cpu",
                           "requests.memory", "requests.ephemeral-storage", "limits.cpu", "limits.memory",
                           "limits.ephemeral-storage"})
POD_RESOURCE_PREFIXES = ("hugepages-", "requests.hugepages-")
SERVICE_RESOURCES = frozenset({"services", "count/services", "services.loadbalancers", "services.nodeports"})
PVC_RESOURCES = frozenset({"persistentvolumeclaims", "count/persistentvolumeclaims", "requests.storage"})
ONE = from_int(1)
ZERO = Quantity(0, DECIMAL_SI)


# -- resource lists -----------------------------------------------------------------------------------
def q_add(a: Quantity, b: Quantity) -> Quantity:
    """Quantity.Add: the sum keeps the left format, unless the left is zero."""
    return Quantity(a.nanos + b.nanos, b.format if a.nanos == 0 else a.format)


def rl_add(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    out = dict(a)
    for k, v in b.items():
        out[k] = q_add(out[k], v) if k in out else v
    return out


def rl_max(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    out = dict(a)
    for k, v in b.items():
        if k not in out or out[k] < v:
            out[k] = v
    return out


def rl_mask(rl: Mapping[str, Quantity], names: Iterable[str]) -> ResourceList:
    keep = set(names)
    return {k: v for k, v in rl.items() if k in keep}


def rl_equal(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> bool:
    return a.keys() == b.keys() and all(a[k].cmp(b[k]) == 0 for k in a)


def from_json(value: Any) -> ResourceList:
    """A ResourceList from its wire form; unparseable quantities are left out."""
    out: ResourceList = {}
    for k, v in (value or {}).items() if isinstance(value, dict) else ():
        try:
            out[str(k)] = parse_json(v)
        except QuantityError:
            continue
    return out


def to_json(rl: Mapping[str, Quantity]) -> dict[str, str]:
    return {k: rl[k].canonical() for k in sorted(rl)}


# -- pods ---------------------------------------------------------------------------------------------
def _spec(obj: Obj) -> Obj:
    s = obj.get("spec")
    return s if isinstance(s, dict) else {}


def _container_list(c: Obj, field: str) -> ResourceList:
    return from_json((c.get("resources") or {}).get(field))


def pod_resources(pod: Obj, field: str) -> ResourceList:
    """The pod's effective requests or limits (resourcehelper.PodRequests / PodLimits)."""
    spec = _spec(pod)
    total: ResourceList = {}
    for c in spec.get("containers") or ():
        total = rl_add(total, _container_list(c, field))
    sidecars: ResourceList = {}
    init_max: ResourceList = {}
    for c in spec.get("initContainers") or ():
        own = _container_list(c, field)
        if c.get("restartPolicy") == "Always":
            sidecars = rl_add(sidecars, own)
            init_max = rl_max(init_max, sidecars)
        else:
            init_max = rl_max(init_max, rl_add(own, sidecars))
    total = rl_max(rl_add(total, sidecars), init_max)
    overhead = from_json(spec.get("overhead"))
    if field == "limits":  # overhead only counts towards limits that are set
        overhead = {k: v for k, v in overhead.items() if k in total}
    return rl_add(total, overhead)


def quota_v1_pod(pod: Obj, now: float) -> bool:
    """Whether a pod is charged to compute quota: not finished, not stuck terminating past its grace."""
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return False
    m = meta(pod)
    deleted, grace = parse_time(m.get("deletionTimestamp")), m.get("deletionGracePeriodSeconds")
    return not (deleted is not None and grace is not None and now > deleted + int(grace))


def pod_usage(pod: Obj, now: float) -> ResourceList:
    """podEvaluator.Usage."""
    result: ResourceList = {"count/pods": ONE}
    if not quota_v1_pod(pod, now):
        return result
    requests, limits = pod_resources(pod, "requests"), pod_resources(pod, "limits")
    result["pods"] = ONE
    for name in ("cpu", "memory", "ephemeral-storage"):
        if name in requests:
            result[name] = requests[name]
            result[f"requests.{name}"] = requests[name]
        if name in limits:
            result[f"limits.{name}"] = limits[name]
    for name, value in requests.items():
        if name.startswith("hugepages-"):
            result[name] = value
            result[f"requests.{name}"] = value
        elif "/" in name and not name.startswith("requests.") and "kubernetes.io/" not in name:
            result[f"requests.{name}"] = value  # extended resources are quota'd as requests.<name>
    return result


def is_terminating(pod: Obj) -> bool:
    deadline = _spec(pod).get("activeDeadlineSeconds")
    return deadline is not None and int(deadline) >= 0


def is_best_effort(pod: Obj) -> bool:
    """QOS class BestEffort: no container asks for or limits cpu or memory."""
    spec = _spec(pod)
    for c in list(spec.get("containers") or ()) + list(spec.get("initContainers") or ()):
        for field in ("requests", "limits"):
            rl = _container_list(c, field)
            if any(name in rl and not rl[name].is_zero() for name in ("cpu", "memory")):
                return False
    return True


def uses_cross_namespace_affinity(pod: Obj) -> bool:
    affinity = _spec(pod).get("affinity") or {}
    for kind in ("podAffinity", "podAntiAffinity"):
        a = affinity.get(kind) or {}
        terms = list(a.get("requiredDuringSchedulingIgnoredDuringExecution") or [])
        preferred = a.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        terms += [w.get("podAffinityTerm") or {} for w in preferred]
        if any(t.get("namespaces") or t.get("namespaceSelector") is not None for t in terms):
            return True
    return False


def _selector_op(value: str, operator: str, values: list[str]) -> bool:
    if operator == "In":
        return value in values
    if operator == "NotIn":
        return value not in values
    return operator == "Exists"  # the key is always there (DoesNotExist never matches)


def pod_matches_scope(scope: str, pod: Obj, *, operator: str = "Exists", values: list[str] | None = None) -> bool:
    if scope == "Terminating":
        return is_terminating(pod)
    if scope == "NotTerminating":
        return not is_terminating(pod)
    if scope == "BestEffort":
        return is_best_effort(pod)
    if scope == "NotBestEffort":
        return not is_best_effort(pod)
    if scope == "PriorityClass":
        name = str(_spec(pod).get("priorityClassName") or "")
        return bool(name) if operator == "Exists" else _selector_op(name, operator, list(values or []))
    if scope == "CrossNamespacePodAffinity":
        return uses_cross_namespace_affinity(pod)
    return False


# -- services and claims --------------------------------------------------------------------------------
def service_usage(svc: Obj) -> ResourceList:
    spec = _spec(svc)
    result: ResourceList = {"count/services": ONE, "services": ONE, "services.loadbalancers": ZERO,
                            "services.nodeports": ZERO}
    ports = [p for p in spec.get("ports") or () if isinstance(p, dict)]
    if spec.get("type") == "NodePort":
        result["services.nodeports"] = from_int(len(ports))
    elif spec.get("type") == "LoadBalancer":
        result["services.loadbalancers"] = ONE
        if spec.get("allocateLoadBalancerNodePorts", True) is not False:
            result["services.nodeports"] = from_int(sum(1 for p in ports if p.get("nodePort")))
    return result


def pvc_class(pvc: Obj) -> str:
    annotations = meta(pvc).get("annotations") or {}
    if "volume.beta.kubernetes.io/storage-class" in annotations:
        return str(annotations["volume.beta.kubernetes.io/storage-class"])
    return str(_spec(pvc).get("storageClassName") or "")


def pvc_usage(pvc: Obj) -> ResourceList:
    result: ResourceList = {"persistentvolumeclaims": ONE, "count/persistentvolumeclaims": ONE}
    cls = pvc_class(pvc)
    if cls:
        result[f"{cls}{STORAGE_CLASS_SUFFIX}persistentvolumeclaims"] = ONE
    requested = from_json((_spec(pvc).get("resources") or {}).get("requests")).get("storage")
    allocated = from_json((pvc.get("status") or {}).get("allocatedResources")).get("storage")
    storage = max((q for q in (requested, allocated) if q is not None), default=None, key=lambda q: q.nanos)
    if storage is not None:
        result["requests.storage"] = storage
        if cls:
            result[f"{cls}{STORAGE_CLASS_SUFFIX}requests.storage"] = storage
    return result


# -- evaluators -----------------------------------------------------------------------------------------
def count_name(gr: GroupResource) -> str:
    group, resource = gr
    return f"count/{resource}.{group}" if group else f"count/{resource}"


def parse_count_name(name: str) -> GroupResource | None:
    """"count/deployments.apps" -> ("apps", "deployments"); None for other names."""
    if not name.startswith("count/") or len(name) <= len("count/"):
        return None
    resource, _, group = name[len("count/"):].partition(".")
    return group, resource


@dataclass(frozen=True)
class Evaluator:
    group_resource: GroupResource
    matching: Callable[[Iterable[str]], list[str]]
    usage: Callable[[Obj, float], ResourceList]
    matches_scope: Callable[[str, Obj, str, list[str]], bool]


def _no_scope(_scope: str, _obj: Obj, _op: str, _values: list[str]) -> bool:
    return False


def _pod_scope(scope: str, obj: Obj, op: str, values: list[str]) -> bool:
    return pod_matches_scope(scope, obj, operator=op, values=values)


def _extended_for_quota(name: str) -> bool:
    """"requests.<extended resource>": a name with a domain that is not kubernetes.io."""
    rest = name[len("requests."):] if name.startswith("requests.") else ""
    return "/" in rest and "kubernetes.io/" not in rest and not rest.startswith("requests.")


def _pod_matching(names: Iterable[str]) -> list[str]:
    return [n for n in names if n in POD_RESOURCES or n.startswith(POD_RESOURCE_PREFIXES) or _extended_for_quota(n)]


def _pvc_matching(names: Iterable[str]) -> list[str]:
    return [n for n in names if n in PVC_RESOURCES or (STORAGE_CLASS_SUFFIX in n and n.endswith(
        ("/persistentvolumeclaims", "/requests.storage")))]


def evaluator_for(gr: GroupResource) -> Evaluator:
    if gr == ("", "pods"):
        return Evaluator(gr, _pod_matching, pod_usage, _pod_scope)
    if gr == ("", "services"):
        return Evaluator(gr, lambda names: [n for n in names if n in SERVICE_RESOURCES],
                         lambda obj, _now: service_usage(obj), _no_scope)
    if gr == ("", "persistentvolumeclaims"):
        return Evaluator(gr, _pvc_matching, lambda obj, _now: pvc_usage(obj), _no_scope)
    names = {count_name(gr)} | ({LEGACY_COUNT_NAMES[gr]} if gr in LEGACY_COUNT_NAMES else set())
    usage = {n: ONE for n in names}
    return Evaluator(gr, lambda given: [n for n in given if n in names], lambda _obj, _now: dict(usage), _no_scope)


def group_resources_for(hard_names: Iterable[str]) -> set[GroupResource]:
    """The group-resources whose objects a quota with these hard names needs to look at."""
    out: set[GroupResource] = set()
    for name in hard_names:
        counted = parse_count_name(name)
        if counted is not None:
            out.add(counted)
        elif _pod_matching([name]):
            out.add(("", "pods"))
        elif name in SERVICE_RESOURCES:
            out.add(("", "services"))
        elif _pvc_matching([name]):
            out.add(("", "persistentvolumeclaims"))
        else:
            out.update(gr for gr, legacy in LEGACY_COUNT_NAMES.items() if legacy == name)
    return out


def _matches(ev: Evaluator, obj: Obj, scopes: list[str], selector: list[Obj]) -> bool:
    if not all(ev.matches_scope(s, obj, "Exists", []) for s in scopes):
        return False
    return all(ev.matches_scope(str(r.get("scopeName")), obj, str(r.get("operator") or "Exists"),
                                [str(v) for v in r.get("values") or ()]) for r in selector)


def calculate_usage(quota: Obj, objects: Mapping[GroupResource, list[Obj]], *, now: float) -> ResourceList:
    """Usage of every hard resource some evaluator can measure, from `objects` (the namespace's
    objects of each group-resource the quota needs; a group-resource missing here is skipped)."""
    spec = quota.get("spec") or {}
    hard_names = list(from_json(spec.get("hard")).keys())
    scopes = [str(s) for s in spec.get("scopes") or ()]
    selector = [r for r in (spec.get("scopeSelector") or {}).get("matchExpressions") or () if isinstance(r, dict)]
    used: ResourceList = {}
    matched: set[str] = set()
    for gr, items in objects.items():
        ev = evaluator_for(gr)
        names = ev.matching(hard_names)
        if not names:
            continue
        matched.update(names)
        stats: ResourceList = {n: ZERO for n in names}
        for obj in items:
            if _matches(ev, obj, scopes, selector):
                stats = rl_add(stats, ev.usage(obj, now))
        used = rl_add(used, stats)
    return rl_mask(used, matched)
