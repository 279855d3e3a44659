"""Preemption's native dry runs (`plugins.victims`) give what the node-by-node search gives.

Random clusters, each preempted twice over the same native snapshot setup: once through the
kernels' many-node calls (`native_select` without PDBs, `native_search` with them) and once
node by node (`Framework.dry_run_node`, forced by turning the native path off). The nominated
node, the victims (in eviction order) and the status message must be identical.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from kubecore.scheduler import default_config
from kubecore.scheduler.config_args import DefaultPreemptionArgs
from kubecore.scheduler.plugins import preemption
from kubecore.scheduler.plugins.preemption import Candidate, DefaultPreemption, pick_one_node
from kubecore.scheduler.podinfo import Obj
from kubecore.scheduler.schedule_one import Failed, schedule_one
from tests.unit.scheduler.helpers import build, milli_cpu, native_available, node, pod

pytestmark = pytest.mark.skipif(not native_available(), reason="kubecore._native has no scheduler kernels")

CPUS = ["250m", "500m", "1", "1500m", "2"]


def cluster(rng: random.Random, *, pdbs: bool) -> tuple[list[Obj], list[Obj], list[Obj]]:
    """(nodes, pods on them, PDBs): full-ish 4-cpu nodes, pods of mixed priority and start."""
    nodes = [node(f"n{i}", cpu=rng.choice(["2", "4", "4"]),
                  taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}] if rng.random() < 0.1 else None)
             for i in range(rng.randint(3, 25))]
    pods: list[Obj] = []
    for n in nodes:
        for j in range(rng.randint(1, 5)):
            p = pod(f"{n['metadata']['name']}-p{j}", cpu=rng.choice(CPUS), priority=rng.choice([0, 0, 1, 3, 7, 20]),
                    node_name=n["metadata"]["name"], labels={"app": rng.choice(["a", "b", "c"])})
            if rng.random() < 0.8:  # the others count as starting now
                p["status"] = {"startTime": f"2024-01-01T00:{rng.randrange(60):02d}:{len(pods) % 60:02d}Z"}
            pods.append(p)
    budget = [{"metadata": {"name": f"pdb-{app}", "namespace": "default"},
               "spec": {"selector": {"matchLabels": {"app": app}}},
               "status": {"disruptionsAllowed": rng.randint(0, 2)}} for app in ("a", "b")]
    return nodes, pods, budget if pdbs else []


def most_free(case: tuple[list[Obj], list[Obj], list[Obj]]) -> int:
    """The most millicores free on any node: a preemptor asking for more fits nowhere."""
    nodes, pods, _ = case
    used = {n["metadata"]["name"]: 0 for n in nodes}
    for p in pods:
        used[p["spec"]["nodeName"]] += milli_cpu(p)
    return max(int(n["status"]["allocatable"]["cpu"]) * 1000 - used[n["metadata"]["name"]] for n in nodes)


def preempt(case: tuple[list[Obj], list[Obj], list[Obj]], preemptor: Obj, *, native_path: bool,
            absolute: int, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, ...]:
    nodes, pods, pdbs = case
    core, rec, _ = build(default_config(), native=True, seed=11)
    for n in nodes:
        core.cache.add_node(n)
    for p in pods:
        core.cache.add_pod(p)
    rec.pdbs = pdbs
    fw = core.frameworks["default-scheduler"]
    plugin = next(pl for pl in fw.plugins.post_filter if isinstance(pl, DefaultPreemption))
    plugin.args = DefaultPreemptionArgs(min_candidate_nodes_percentage=10, min_candidate_nodes_absolute=absolute)
    with monkeypatch.context() as m:
        if not native_path:
            m.setattr(preemption, "_native_dry_runs", lambda fw, state: False)
        core.queue.add(preemptor)
        pinfo = core.queue.pop()
        assert pinfo is not None
        out = schedule_one(fw, pinfo)
    assert isinstance(out, Failed), out
    node_name = out.nominating.node if out.nominating is not None else None
    return node_name, rec.evicted, out.message


@pytest.mark.parametrize("pdbs", [False, True], ids=["no-pdb", "pdb"])
@pytest.mark.parametrize("seed", range(40))
def test_native_dry_runs_match_the_node_by_node_search(seed: int, pdbs: bool,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    case = cluster(rng, pdbs=pdbs)
    preemptor = pod("preemptor", cpu=f"{min(most_free(case) + rng.choice([250, 500, 1000]), 4000)}m", priority=10)
    absolute = rng.choice([1, 3, 100])
    fast = preempt(case, preemptor, native_path=True, absolute=absolute, monkeypatch=monkeypatch)
    slow = preempt(case, preemptor, native_path=False, absolute=absolute, monkeypatch=monkeypatch)
    assert fast == slow
    assert fast[0], "every generated case has a candidate: the comparison covers victims and node"


def test_the_native_path_is_taken_with_the_default_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    """A dry run through `filter_node` would mean the many-node calls were skipped."""
    nodes = [node(f"n{i}", cpu="2") for i in range(3)]
    case = (nodes, [pod(f"low{i}", cpu="1", priority=0, node_name=f"n{i // 2}") for i in range(6)], [])
    calls: list[str] = []
    from kubecore.scheduler.native import NativeKernels
    monkeypatch.setattr(NativeKernels, "filter_node", lambda *a, **k: calls.append("filter_node") or [])
    node_name, evicted, _ = preempt(case, pod("preemptor", cpu="1500m", priority=10), native_path=True,
                                    absolute=100, monkeypatch=monkeypatch)
    assert calls == []
    assert node_name and evicted and all(n == node_name for _, _, n in evicted)


def test_a_candidate_without_victims_is_picked_at_once() -> None:
    v = pod("v", priority=0)
    cands = [Candidate("a", [v], 0), Candidate("b", [], 1), Candidate("c", [], 0)]
    assert pick_one_node(cands, now=0).node == "b"
