"""PodTopologySpread's cluster default constraints: the default selector (upstream's
helper.DefaultSelector) and, end to end over the native kernels, System defaulting spreading a
ReplicaSet's pods over nodes that have no zone label."""

from __future__ import annotations

from collections import Counter
from typing import Any

from kubecore.scheduler.config_args import SYSTEM_DEFAULT_CONSTRAINTS, PodTopologySpreadArgs
from kubecore.scheduler.defaultspread import DefaultSpread, controller_ref, default_selector
from kubecore.scheduler.driver import Driver
from kubecore.scheduler.handle import Services
from kubecore.scheduler.podinfo import Obj
from tests.unit.scheduler.helpers import Recorder, build, config, needs_native, node, pod

RS_REF = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "u1", "controller": True}


def svc(selector: dict[str, str] | None) -> Obj:
    spec: Obj = {} if selector is None else {"selector": selector}
    return {"metadata": {"name": "s", "namespace": "default"}, "spec": spec}


def owned(name: str, labels: dict[str, str], ref: Obj | None = None) -> Obj:
    p = pod(name, labels=labels)
    if ref is not None:
        p["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "u0"}, ref]
    return p


def test_services_that_select_the_pod_are_merged() -> None:
    p = owned("p", {"app": "web", "tier": "front"})
    services = [svc({"app": "web"}), svc({"tier": "front"}), svc({"app": "db"}), svc(None), svc({})]
    assert default_selector(p, services=services, controller=None) == {"matchLabels": {"app": "web", "tier": "front"}}
    assert default_selector(owned("q", {"app": "other"}), services=services, controller=None) is None


def test_controller_selectors() -> None:
    p = owned("p", {"app": "web", "pod-template-hash": "1"}, RS_REF)
    assert controller_ref(p) == RS_REF
    rs = {"spec": {"selector": {"matchLabels": {"app": "web"},
                                "matchExpressions": [{"key": "pod-template-hash", "operator": "Exists"}]}}}
    got = default_selector(p, services=[svc({"app": "web"})], controller=rs, controller_kind=("apps/v1", "ReplicaSet"))
    assert got == {"matchLabels": {"app": "web"},
                   "matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]},
                                        {"key": "pod-template-hash", "operator": "Exists"}]}
    rc = {"spec": {"selector": {"app": "web"}}}
    assert default_selector(p, services=[], controller=rc, controller_kind=("v1", "ReplicationController")) == \
        {"matchLabels": {"app": "web"}}
    # a controller of another kind contributes nothing (upstream: "not owned by a supported controller")
    assert default_selector(p, services=[], controller=rc, controller_kind=("batch/v1", "Job")) is None


def test_for_pod() -> None:
    sel = {"matchLabels": {"app": "web"}}
    system = DefaultSpread(PodTopologySpreadArgs(), lambda p: sel)
    got = system.for_pod(owned("p", {"app": "web"}))
    assert got == {"system": True, "constraints": [{**c, "labelSelector": sel} for c in SYSTEM_DEFAULT_CONSTRAINTS]}
    own = owned("q", {"app": "web"})
    own["spec"]["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]
    assert system.for_pod(own) is None
    assert DefaultSpread(PodTopologySpreadArgs(), lambda p: None).for_pod(owned("p", {"app": "web"})) is None
    listed = DefaultSpread(PodTopologySpreadArgs(defaulting_type="List", default_constraints=[
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "matchLabelKeys": ["a"]}]),
        lambda p: sel)
    assert listed.for_pod(owned("p", {"app": "web"})) == {"system": False, "constraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": sel}]}
    assert DefaultSpread(PodTopologySpreadArgs(defaulting_type="List"), lambda p: sel).for_pod(owned("p", {})) is None


class WithSelector(Recorder):
    def services(self) -> Services:
        s = super().services()
        s.default_selector = lambda p: {"matchLabels": {"app": "web"}} if controller_ref(p) else None
        return s


def spread_only() -> Any:
    return config([{"schedulerName": "default-scheduler", "plugins": {
        "score": {"disabled": [{"name": "*"}], "enabled": [{"name": "PodTopologySpread", "weight": 2}]}}}])


@needs_native
async def test_system_defaults_spread_a_replicaset_over_nodes_without_zones() -> None:
    core, rec, _ = build(spread_only(), rec=WithSelector(), native=True)
    for i in range(4):
        core.cache.add_node(node(f"n{i}"))  # hostname labels, no zone label
    for i in range(3):
        core.cache.add_pod(owned(f"old{i}", {"app": "web"}, RS_REF) | {"spec": {**pod("x")["spec"], "nodeName": "n0"}})
    for i in range(9):
        core.queue.add(owned(f"new{i}", {"app": "web"}, RS_REF))
    await Driver(core).drain()
    # every new pod went to a node with the fewest of the ReplicaSet's pods: 3 on each node
    assert Counter(where for _, where in rec.bound) == {"n1": 3, "n2": 3, "n3": 3}
