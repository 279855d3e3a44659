"""How much of a ResourceQuota objects use: shared by the quota controller (which recalculates
status.used from every object of a namespace) and the API server's ResourceQuota admission (which
charges one object at a time). Upstream: pkg/quota/v1 (resources.go, generic/),
pkg/quota/v1/evaluator/core/{pods,services,persistent_volume_claims}.go, install/registry.go.

A ResourceList is a dict resource name -> `Quantity`; `rl_add`, `rl_subtract_floor`, `rl_mask`,
`rl_equal`, `rl_less_or_equal`, `rl_remove_zeros` and `to_json` / `from_json` are upstream's
quota.Add/SubtractWithNonNegativeResult/Mask/Equals/LessThanOrEqual/RemoveZeros and the wire
form (canonical strings).

An `Evaluator` knows one group-resource: which quota resource names it can measure
(`matching`), one object's usage (`usage`), whether an object matches a quota scope
(`matches_scope`; pods only, other kinds never match a scoped quota), which writes admission
charges (`handles`: pods and plain object counts on create, services and claims on create and
update) and, for pods, the resources every container must name (`constraints`):

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
from datetime import datetime
from typing import Any

from kubecore.api.quantity import DECIMAL_SI, NANO, Quantity, QuantityError, from_int, parse_json

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
# Quota'd cpu or memory obliges every container to name it (upstream's "mistake", kept for compatibility).
POD_REQUIRED = frozenset({"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"})
SERVICE_RESOURCES = frozenset({"services", "count/services", "services.loadbalancers", "services.nodeports"})
PVC_RESOURCES = frozenset({"persistentvolumeclaims", "count/persistentvolumeclaims", "requests.storage"})
# Never quota'd: virtual resources that are not stored, and events (install/registry.go).
IGNORED_RESOURCES = frozenset({
    ("", "bindings"), ("", "componentstatuses"), ("authentication.k8s.io", "tokenreviews"),
    ("authentication.k8s.io", "selfsubjectreviews"), ("authorization.k8s.io", "subjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectaccessreviews"), ("authorization.k8s.io", "localsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectrulesreviews"), ("", "events"), ("events.k8s.io", "events"),
})
ONE = from_int(1)
ZERO = Quantity(0, DECIMAL_SI)


def _meta(obj: Obj) -> Obj:
    m = obj.get("metadata")
    return m if isinstance(m, dict) else {}


def _spec(obj: Obj) -> Obj:
    s = obj.get("spec")
    return s if isinstance(s, dict) else {}


def _timestamp(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


# -- resource lists -----------------------------------------------------------------------------------
def q_add(a: Quantity, b: Quantity) -> Quantity:
    """Quantity.Add: the sum keeps the left format, unless the left is zero."""
    return Quantity(a.nanos + b.nanos, b.format if a.nanos == 0 else a.format)


def rl_add(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    out = dict(a)
    for k, v in b.items():
        out[k] = q_add(out[k], v) if k in out else v
    return out


def rl_subtract_floor(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    """SubtractWithNonNegativeResult: a - b per name, never below zero; names only in b are zero."""
    out: ResourceList = {}
    for k, v in a.items():
        diff = v.nanos - b[k].nanos if k in b else v.nanos
        out[k] = Quantity(diff, v.format) if diff > 0 else ZERO
    for k in b:
        out.setdefault(k, ZERO)
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


def rl_less_or_equal(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> list[str]:
    """LessThanOrEqual: the names of `b` that `a` exceeds (empty: a <= b)."""
    return [k for k, limit in b.items() if k in a and a[k].cmp(limit) > 0]


def rl_remove_zeros(rl: Mapping[str, Quantity]) -> ResourceList:
    return {k: v for k, v in rl.items() if not v.is_zero()}


def rl_negative(rl: Mapping[str, Quantity]) -> list[str]:
    return [k for k, v in rl.items() if v.sign() < 0]


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


def pretty(rl: Mapping[str, Quantity]) -> str:
    """prettyPrint: "name=value" sorted by name, comma-separated."""
    return ",".join(f"{k}={rl[k].canonical()}" for k in sorted(rl))


# -- pods ---------------------------------------------------------------------------------------------
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
    m = _meta(pod)
    deleted, grace = _timestamp(m.get("deletionTimestamp")), m.get("deletionGracePeriodSeconds")
    return not (deleted is not None and grace is not None and now > deleted + int(grace))


def _is_extended(name: str) -> bool:
    """helper.IsExtendedResourceName: a domain-qualified name outside kubernetes.io, not requests.*."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def compute_usage(requests: Mapping[str, Quantity], limits: Mapping[str, Quantity]) -> ResourceList:
    """podComputeUsageHelper: the quota names a set of requests and limits uses (pods=1 included)."""
    result: ResourceList = {"pods": ONE}
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
        elif _is_extended(name):
            result[f"requests.{name}"] = value  # extended resources are quota'd as requests.<name>
    return result


def pod_usage(pod: Obj, now: float) -> ResourceList:
    """podEvaluator.Usage."""
    result: ResourceList = {"count/pods": ONE}
    if not quota_v1_pod(pod, now):
        return result
    return rl_add(result, compute_usage(pod_resources(pod, "requests"), pod_resources(pod, "limits")))


def pod_constraints(required: Iterable[str], pod: Obj) -> str | None:
    """podEvaluator.Constraints: "must specify <name> for: <containers>; ..." when a quota that
    measures cpu or memory meets a container that does not name them; None when all do."""
    wanted = POD_REQUIRED.intersection(required)
    if not wanted:
        return None
    missing: dict[str, set[str]] = {}
    spec = _spec(pod)
    for c in list(spec.get("containers") or ()) + list(spec.get("initContainers") or ()):
        if not isinstance(c, dict):
            continue
        named = compute_usage(_container_list(c, "requests"), _container_list(c, "limits"))
        for name in wanted.difference(named):
            missing.setdefault(name, set()).add(str(c.get("name") or ""))
    if not missing:
        return None
    return "must specify " + "; ".join(f"{name} for: {','.join(sorted(missing[name]))}" for name in sorted(missing))


def is_terminating(pod: Obj) -> bool:
    deadline = _spec(pod).get("activeDeadlineSeconds")
    return deadline is not None and int(deadline) >= 0


def is_best_effort(pod: Obj) -> bool:
    """QOS class BestEffort: no container asks for or limits cpu or memory."""
    spec = _spec(pod)
    for c in list(spec.get("containers") or ()) + list(spec.get("initContainers") or ()):
        for field in ("requests", "limits"):
            rl = _container_list(c, field)
            if any(name in rl and rl[name].sign() > 0 for name in ("cpu", "memory")):
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
    """A label selector requirement on the one label "PriorityClass" ("" = the pod has none)."""
    if operator == "In":
        return bool(value) and value in values
    if operator == "NotIn":
        return not value or value not in values
    if operator == "Exists":
        return bool(value)
    return operator == "DoesNotExist" and not value


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
        return _selector_op(str(_spec(pod).get("priorityClassName") or ""), operator, list(values or []))
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
        if spec.get("allocateLoadBalancerNodePorts") is False:  # only the node ports asked for by number
            result["services.nodeports"] = from_int(sum(1 for p in ports if p.get("nodePort")))
        else:
            result["services.nodeports"] = from_int(len(ports))
    return result


def pvc_class(pvc: Obj) -> str:
    annotations = _meta(pvc).get("annotations") or {}
    if "volume.beta.kubernetes.io/storage-class" in annotations:
        return str(annotations["volume.beta.kubernetes.io/storage-class"])
    return str(_spec(pvc).get("storageClassName") or "")


def _whole_bytes(q: Quantity) -> Quantity:
    """RoundUp(0): storage is charged in whole bytes."""
    return q if q.nanos % NANO == 0 else Quantity(-((-q.nanos) // NANO) * NANO, q.format)


def pvc_storage(pvc: Obj) -> Quantity | None:
    """getStorageUsage: the request, or the allocated size when the request exists and is smaller."""
    requested = from_json((_spec(pvc).get("resources") or {}).get("requests")).get("storage")
    if requested is None:
        return None
    allocated = from_json((pvc.get("status") or {}).get("allocatedResources")).get("storage")
    if allocated is not None and allocated.cmp(requested) > 0:
        return _whole_bytes(allocated)
    return _whole_bytes(requested)


def pvc_usage(pvc: Obj) -> ResourceList:
    result: ResourceList = {"persistentvolumeclaims": ONE, "count/persistentvolumeclaims": ONE}
    cls = pvc_class(pvc)
    if cls:
        result[f"{cls}{STORAGE_CLASS_SUFFIX}persistentvolumeclaims"] = ONE
    storage = pvc_storage(pvc)
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
    handles_update: bool = False
    """Admission charges creates always; updates only where usage can change (services, claims)."""
    constraints: Callable[[Iterable[str], Obj], str | None] = lambda _required, _obj: None  # pods only


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
        return Evaluator(gr, _pod_matching, pod_usage, _pod_scope, constraints=pod_constraints)
    if gr == ("", "services"):
        return Evaluator(gr, lambda names: [n for n in names if n in SERVICE_RESOURCES],
                         lambda obj, _now: service_usage(obj), _no_scope, handles_update=True)
    if gr == ("", "persistentvolumeclaims"):
        return Evaluator(gr, _pvc_matching, lambda obj, _now: pvc_usage(obj), _no_scope, handles_update=True)
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


def scope_selectors(quota: Obj) -> list[tuple[str, str, list[str]]]:
    """getScopeSelectorsFromQuota: (scopeName, operator, values) of spec.scopes (as Exists) and
    spec.scopeSelector.matchExpressions."""
    spec = _spec(quota)
    out: list[tuple[str, str, list[str]]] = [(str(s), "Exists", []) for s in spec.get("scopes") or ()]
    for r in (spec.get("scopeSelector") or {}).get("matchExpressions") or ():
        if isinstance(r, dict):
            values = [str(v) for v in r.get("values") or ()]
            out.append((str(r.get("scopeName")), str(r.get("operator") or "Exists"), values))
    return out


def matches_scopes(ev: Evaluator, obj: Obj, selectors: list[tuple[str, str, list[str]]]) -> bool:
    return all(ev.matches_scope(scope, obj, op, values) for scope, op, values in selectors)


def calculate_usage(quota: Obj, objects: Mapping[GroupResource, list[Obj]], *, now: float) -> ResourceList:
    """Usage of every hard resource some evaluator can measure, from `objects` (the namespace's
    objects of each group-resource the quota needs; a group-resource missing here is skipped)."""
    hard_names = list(from_json(_spec(quota).get("hard")).keys())
    selectors = scope_selectors(quota)
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
            if matches_scopes(ev, obj, selectors):
                stats = rl_add(stats, ev.usage(obj, now))
        used = rl_add(used, stats)
    return rl_mask(used, matched)
