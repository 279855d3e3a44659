"""The kubelet's predicate admission (upstream pkg/kubelet/lifecycle/predicate.go): a pod bound to
this node is run only if it fits next to the pods already admitted, as the scheduler would have
checked. It matters for pods that bypass the scheduler (`spec.nodeName` set at creation) and for
races (the node's labels or taints changed since the pod was placed).

Checks, in upstream's order (`scheduler.AdmissionCheck` with every failure, then taints); the
first failure is the pod's reason:

- resources (noderesources.Fits): pods count, then cpu, memory, ephemeral-storage and extended
  resources the node has (requests of the pod against allocatable minus the other pods'
  requests) -> reason `OutOfpods` / `OutOfcpu` / `OutOfmemory` / `OutOfephemeral-storage` /
  `OutOf<name>`, message "Node didn't have enough resource: cpu, requested: 500, used: 3800,
  capacity: 4000" (milli-CPU, bytes, counts);
- node affinity (nodeSelector and required terms) -> `NodeAffinity`, "Predicate NodeAffinity
  failed: node(s) didn't match Pod's node affinity/selector";
- host ports (nodeports.Fits) -> `NodePorts`, "Predicate NodePorts failed: node(s) didn't have
  free ports for the requested pod ports";
- an untolerated NoExecute taint -> `TaintToleration`, "Predicate TaintToleration failed:
  node(s) had taints that the pod didn't tolerate" (the kubelet only looks at NoExecute).

A rejected pod ends Failed with that reason and message (the resource manager's reject path).
Hollow nodes do not run these checks: their pods come from the scheduler, which made them.
"""

from __future__ import annotations

from typing import Any

from kubecore.api import quantity
from kubecore.api.quota import pod_resources
from kubecore.controllers.daemonset_predicates import find_untolerated_taint, required_node_affinity_matches
from kubecore.kubelet import podutil
from kubecore.kubelet.eviction import AdmitResult

__all__ = ["predicate_admit"]

Obj = dict[str, Any]
_STANDARD = ("cpu", "memory", "ephemeral-storage")
_NATIVE_PREFIXES = ("kubernetes.io/", "requests.")


def _q(value: Any) -> int:
    """A quantity in nanos (0 when missing or unreadable)."""
    try:
        return quantity.parse(str(value)).nanos if value is not None else 0
    except quantity.QuantityError:
        return 0


def pod_requests(pod: Obj) -> dict[str, int]:
    """The pod's effective requests in nanos (upstream's PodRequests: `api.quota.pod_resources`)."""
    return {name: q.nanos for name, q in pod_resources(pod, "requests").items()}


def _unit(resource: str, nanos: int) -> int:
    return nanos // 1_000_000 if resource == "cpu" else nanos // 1_000_000_000


def _insufficient(resource: str, requested: int, used: int, capacity: int) -> AdmitResult:
    reason = "OutOf" + resource
    return AdmitResult(False, reason, f"Node didn't have enough resource: {resource}, requested: {requested}, "
                                      f"used: {used}, capacity: {capacity}")


def _fits_resources(pod: Obj, others: list[Obj], allocatable: dict[str, str]) -> AdmitResult | None:
    allowed = _q(allocatable.get("pods")) // 1_000_000_000
    if len(others) + 1 > allowed:
        return _insufficient("pods", 1, len(others), allowed)
    want = pod_requests(pod)
    if not any(want.values()):
        return None
    used: dict[str, int] = {}
    for other in others:
        for name, v in pod_requests(other).items():
            used[name] = used.get(name, 0) + v
    names = [*_STANDARD, *sorted(n for n in want if n not in _STANDARD and n != "pods")]
    for name in names:
        need = want.get(name, 0)
        if need <= 0:
            continue
        if name not in _STANDARD and name not in allocatable:
            continue  # an extended resource the node does not know (upstream drops its request)
        cap = _q(allocatable.get(name))
        if need > cap - used.get(name, 0):
            return _insufficient(name, _unit(name, need), _unit(name, used.get(name, 0)), _unit(name, cap))
    return None


def _host_ports(pod: Obj) -> set[tuple[str, str, int]]:
    out = set()
    for c in [*podutil.init_containers(pod), *podutil.containers(pod)]:
        for p in c.get("ports") or []:
            if p.get("hostPort"):
                out.add((str(p.get("hostIP") or "0.0.0.0"), str(p.get("protocol") or "TCP"), int(p["hostPort"])))
    return out


def _ports_conflict(want: set[tuple[str, str, int]], used: set[tuple[str, str, int]]) -> bool:
    for ip, proto, port in want:
        for uip, uproto, uport in used:
            if port == uport and proto == uproto and (ip == uip or "0.0.0.0" in (ip, uip)):
                return True
    return False


def predicate_admit(pod: Obj, *, node: Obj, other_pods: list[Obj], allocatable: dict[str, str]) -> AdmitResult:
    """Whether `pod` may run on `node` next to `other_pods` (see the module docstring)."""
    spec = podutil.spec(pod)
    failed = _fits_resources(pod, other_pods, allocatable)
    if failed is not None:
        return failed
    if not required_node_affinity_matches(spec, node):
        return AdmitResult(False, "NodeAffinity",
                           "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector")
    want = _host_ports(pod)
    if want and _ports_conflict(want, set().union(*(_host_ports(p) for p in other_pods))):
        return AdmitResult(False, "NodePorts",
                           "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports")
    taints = list(((node.get("spec") or {}).get("taints")) or [])
    if find_untolerated_taint(taints, list(spec.get("tolerations") or []),
                              lambda t: t.get("effect") == "NoExecute") is not None:
        return AdmitResult(False, "TaintToleration",
                           "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate")
    return AdmitResult(True)
