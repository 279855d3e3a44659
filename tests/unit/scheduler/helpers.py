"""Builders for the scheduler tests: nodes, pods, configs, a Python cpu/pods fit plugin."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kubecore.api import quantity
from kubecore.client.clock import FakeClock
from kubecore.scheduler import Services, build_scheduler
from kubecore.scheduler.config import config_from_dict
from kubecore.scheduler.interface import CycleState
from kubecore.scheduler.native import native_available
from kubecore.scheduler.podinfo import NodeInfo, Obj
from kubecore.scheduler.registry import SchedulerCore
from kubecore.scheduler.status import Code, Status

needs_native = pytest.mark.skipif(not native_available(), reason="kubecore._native has no scheduler kernels")

API = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"


def node(name: str, *, cpu: str = "4", memory: str = "8Gi", pods: str = "110",
         labels: dict[str, str] | None = None, taints: list[Obj] | None = None,
         unschedulable: bool = False) -> Obj:
    alloc = {"cpu": cpu, "memory": memory, "pods": pods}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": {"taints": taints or [], "unschedulable": unschedulable},
            "status": {"allocatable": alloc, "capacity": dict(alloc)}}


def pod(name: str, *, cpu: str = "100m", memory: str = "64Mi", priority: int = 0, namespace: str = "default",
        labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None, node_name: str = "",
        tolerations: list[Obj] | None = None, scheduler: str = "default-scheduler", **spec: Any) -> Obj:
    meta: Obj = {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}",
                 "labels": labels or {}, "annotations": annotations or {}}
    body: Obj = {"schedulerName": scheduler, "priority": priority,
                 "containers": [{"name": "c", "image": "pause",
                                 "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}
    if node_name:
        body["nodeName"] = node_name
    if tolerations:
        body["tolerations"] = tolerations
    body.update(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body, "status": {}}


def milli_cpu(p: Obj) -> int:
    total = 0
    for c in (p.get("spec") or {}).get("containers") or ():
        req = ((c.get("resources") or {}).get("requests") or {}).get("cpu")
        if req is not None:
            total += quantity.parse_json(req).milli_value()
    return total


class CpuFit:
    """A Python Filter plugin for pure-Python profiles: cpu and pod count against allocatable."""

    name = "CpuFit"

    def filter(self, state: CycleState, p: Obj, node_info: NodeInfo) -> Status | None:
        alloc = ((node_info.node or {}).get("status") or {}).get("allocatable") or {}
        reasons = []
        if len(node_info.pods) + 1 > int(alloc.get("pods", "110")):
            reasons.append("Too many pods")
        used = sum(milli_cpu(x) for x in node_info.pods.values())
        if used + milli_cpu(p) > quantity.parse_json(alloc.get("cpu", "0")).milli_value():
            reasons.append("Insufficient cpu")
        return Status(Code.UNSCHEDULABLE, *reasons) if reasons else None


def config(profiles: list[Obj] | None = None, **top: Any) -> Any:
    doc: Obj = {"apiVersion": API, "kind": KIND, **top}
    if profiles is not None:
        doc["profiles"] = profiles
    return config_from_dict(doc)


def python_profile(*enabled: str, name: str = "default-scheduler", plugin_config: list[Obj] | None = None,
                   **points: Any) -> Obj:
    """A profile with no default plugins: PrioritySort, DefaultBinder and `enabled` (multiPoint)."""
    plugins: Obj = {"multiPoint": {"enabled": [{"name": "PrioritySort"}, {"name": "DefaultBinder"}]
                                   + [{"name": n} for n in enabled], "disabled": [{"name": "*"}]}}
    plugins.update(points)
    prof: Obj = {"schedulerName": name, "plugins": plugins}
    if plugin_config:
        prof["pluginConfig"] = plugin_config
    return prof


class Recorder:
    """Services that record what the scheduler asked for."""

    def __init__(self) -> None:
        self.bound: list[tuple[str, str]] = []
        self.evicted: list[tuple[str, str, str]] = []
        self.pvcs: dict[tuple[str, str], Obj] = {}
        self.pvs: dict[str, Obj] = {}
        self.pdbs: list[Obj] = []
        self.pods: list[Obj] = []
        self.fail_bind: set[str] = set()

    async def bind(self, p: Obj, node_name: str) -> None:
        name = p["metadata"]["name"]
        if name in self.fail_bind:
            raise RuntimeError(f"binding {name} refused")
        self.bound.append((name, node_name))

    def evict(self, victim: Obj, preemptor: Obj, node_name: str) -> None:
        self.evicted.append((victim["metadata"]["name"], preemptor["metadata"]["name"], node_name))

    def services(self) -> Services:
        return Services(bind=self.bind, evict=self.evict, get_pvc=lambda ns, n: self.pvcs.get((ns, n)),
                        get_pv=self.pvs.get, list_pdbs=lambda: list(self.pdbs),
                        list_pods=lambda ns: [p for p in self.pods if p["metadata"]["namespace"] == ns])


def build(cfg: Any, *, rec: Recorder | None = None, clock: FakeClock | None = None, native: bool = False,
          out_of_tree: dict[str, Any] | None = None, seed: int = 7,
          pop_from_backoff: bool = False) -> tuple[SchedulerCore, Recorder, FakeClock]:
    rec = rec or Recorder()
    clock = clock or FakeClock()
    snapshot = None
    if native:
        from kubecore import _native
        snapshot = _native.NativeSchedSnapshot(seed=seed)
    core = build_scheduler(cfg, services=rec.services(), clock=clock, snapshot=snapshot, use_native=native,
                           out_of_tree={"CpuFit": lambda a, h: CpuFit(), **(out_of_tree or {})},
                           rng=random.Random(seed), pop_from_backoff=pop_from_backoff)
    return core, rec, clock
