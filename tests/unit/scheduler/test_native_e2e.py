"""End to end over the native kernels: the default profile on a few hundred nodes.

Independent checks in Python: resources are never over-committed, taints are honoured, node
names and selectors are obeyed, and failures read as upstream's messages.
"""

from __future__ import annotations

import random
from collections import defaultdict

import pytest

from kubecore.api import quantity
from kubecore.scheduler import default_config
from kubecore.scheduler.driver import Driver
from kubecore.scheduler.interface import CycleState, PreFilterResult
from kubecore.scheduler.plugins.example import MAINTENANCE_LABEL, TIER_KEY, NodeLabelPreference
from kubecore.scheduler.podinfo import Obj
from kubecore.scheduler.schedule_one import Assumed, Failed, schedule_one
from kubecore.scheduler.status import Status
from tests.unit.scheduler.helpers import Recorder, build, config, needs_native, node, pod

pytestmark = needs_native

TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
TOLERATE = [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]


def requests(p: Obj) -> tuple[int, int]:
    cpu = mem = 0
    for c in p["spec"]["containers"]:
        r = c["resources"]["requests"]
        cpu += quantity.parse_json(r["cpu"]).milli_value()
        mem += quantity.parse_json(r["memory"]).value()
    return cpu, mem


async def test_hundreds_of_nodes_never_overcommitted_and_taints_honoured() -> None:
    rng = random.Random(3)
    core, rec, _ = build(default_config(), native=True)
    nodes = {}
    for i in range(300):
        n = node(f"n{i:03}", cpu=rng.choice(["2", "4", "8"]), memory=rng.choice(["4Gi", "8Gi"]), pods="12",
                 taints=[TAINT] if i % 10 == 0 else None)
        nodes[n["metadata"]["name"]] = n
        core.cache.add_node(n)
    pods = {}
    for i in range(4000):
        p = pod(f"p{i}", cpu=rng.choice(["100m", "250m", "500m", "1"]), memory=rng.choice(["64Mi", "256Mi", "1Gi"]),
                tolerations=TOLERATE if i % 7 == 0 else None)
        pods[p["metadata"]["name"]] = p
        core.queue.add(p)
    failed: list[Failed] = []
    driver = Driver(core, on_failed=failed.append)
    await driver.drain()
    assert driver.bound + len(failed) == 4000 and driver.bound > 2000 and failed
    used: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for name, where in rec.bound:
        cpu, mem = requests(pods[name])
        used[where][0] += cpu
        used[where][1] += mem
        used[where][2] += 1
        if where in {n for n, x in nodes.items() if x["spec"]["taints"]}:
            assert pods[name]["spec"].get("tolerations"), f"{name} on tainted {where}"
    for where, (cpu, mem, count) in used.items():
        alloc = nodes[where]["status"]["allocatable"]
        assert cpu <= quantity.parse(alloc["cpu"]).milli_value()
        assert mem <= quantity.parse(alloc["memory"]).value()
        assert count <= 12
        assert core.cache.snapshot is not None and core.cache.snapshot.requested(where)["cpu"] == cpu
    assert all(f.message.startswith("0/300 nodes are available: ") for f in failed)


@pytest.mark.parametrize("small_cpu, preemption", [
    # a request above the node's allocatable: preemption cannot help there (upstream NodeResourcesFit)
    ("1", "5 Preemption is not helpful for scheduling."),
    # room would exist without the pod already there, but it has the same priority
    ("3", "2 Preemption is not helpful for scheduling, 3 No preemption victims found for incoming pod."),
])
def test_fit_error_from_native_reasons_reads_like_upstream(small_cpu: str, preemption: str) -> None:
    core, _, _ = build(default_config(), native=True)
    for i in range(3):
        core.cache.add_node(node(f"small{i}", cpu=small_cpu))
        core.cache.add_pod(pod(f"peer{i}", cpu="1500m", node_name=f"small{i}"))
    for i in range(2):
        core.cache.add_node(node(f"gpu{i}", cpu="8", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]))
    core.queue.add(pod("big", cpu="2"))
    pinfo = core.queue.pop()
    assert pinfo is not None
    out = schedule_one(core.frameworks["default-scheduler"], pinfo)
    assert isinstance(out, Failed)
    assert out.message == ("0/5 nodes are available: 2 node(s) had untolerated taint(s), 3 Insufficient cpu. "
                           f"preemption: 0/5 nodes are available: {preemption}")
    assert out.unschedulable_plugins == {"TaintToleration", "NodeResourcesFit"}


def test_node_name_and_node_selector() -> None:
    core, _, _ = build(default_config(), native=True)
    for i in range(5):
        core.cache.add_node(node(f"n{i}", labels={"disk": "ssd"} if i == 3 else None))
    fw = core.frameworks["default-scheduler"]
    for p, want in [(pod("pinned", spec_node="n2"), "n2"), (pod("ssd", nodeSelector={"disk": "ssd"}), "n3")]:
        if "spec_node" in p["spec"]:
            p["spec"]["nodeName"] = p["spec"].pop("spec_node")
        core.queue.add(p)
        pinfo = core.queue.pop()
        assert pinfo is not None
        out = schedule_one(fw, pinfo)
        assert isinstance(out, Assumed) and out.node == want


async def test_python_filter_and_score_run_on_native_feasible_nodes() -> None:
    cfg = config([{"plugins": {"multiPoint": {"enabled": [{"name": "NodeLabelPreference", "weight": 50}]}}}])
    core, rec, _ = build(cfg, native=True, out_of_tree={"NodeLabelPreference": NodeLabelPreference.new})
    for i in range(200):
        labels = {}
        if i % 4 == 0:
            labels[MAINTENANCE_LABEL] = "true"
        if i % 5 == 0:
            labels[TIER_KEY] = "gold"
        core.cache.add_node(node(f"n{i:03}", cpu="2", labels=labels))
    for i in range(30):
        core.queue.add(pod(f"p{i}", cpu="100m", annotations={TIER_KEY: "gold"}))
    await Driver(core).drain()
    placed = dict(rec.bound)
    assert len(placed) == 30
    for where in placed.values():
        idx = int(where[1:])
        assert idx % 4 != 0, "a node under maintenance was used"
        assert idx % 5 == 0, "the gold tier is preferred"


def test_prefilter_narrowing_over_native_filters() -> None:
    class OnlyOdd:
        name = "OnlyOdd"

        def pre_filter(self, state: CycleState, p: Obj) -> tuple[PreFilterResult | None, Status | None]:
            return PreFilterResult(["n1", "n3"]), None

    cfg = config([{"plugins": {"multiPoint": {"enabled": [{"name": "OnlyOdd"}]}}}])
    core, _, _ = build(cfg, native=True, out_of_tree={"OnlyOdd": lambda a, h: OnlyOdd()})
    core.cache.add_node(node("n0"))
    core.cache.add_node(node("n1", cpu="100m"))
    core.cache.add_node(node("n2"))
    core.cache.add_node(node("n3"))
    core.queue.add(pod("p", cpu="500m"))
    pinfo = core.queue.pop()
    assert pinfo is not None
    out = schedule_one(core.frameworks["default-scheduler"], pinfo)
    assert isinstance(out, Assumed) and out.node == "n3"
    core.queue.add(pod("q", cpu="4"))
    pinfo = core.queue.pop()
    assert pinfo is not None
    bad = schedule_one(core.frameworks["default-scheduler"], pinfo)
    assert isinstance(bad, Failed)
    assert bad.message.startswith("0/4 nodes are available: 2 Insufficient cpu, "
                                  "2 node(s) didn't satisfy plugin(s) [OnlyOdd].")


@pytest.mark.parametrize("claim, expected", [
    ("bound", "n2"),
    ("missing", 'persistentvolumeclaim "missing" not found'),
    ("unbound", "pod has unbound immediate PersistentVolumeClaims"),
    ("elsewhere", "node(s) had volume node affinity conflict"),
])
def test_volume_binding_for_bound_claims(claim: str, expected: str) -> None:
    rec = Recorder()
    rec.pvcs[("default", "bound")] = {"metadata": {"name": "bound"}, "spec": {"volumeName": "pv-a"}}
    rec.pvcs[("default", "unbound")] = {"metadata": {"name": "unbound"}, "spec": {}}
    rec.pvcs[("default", "elsewhere")] = {"metadata": {"name": "elsewhere"}, "spec": {"volumeName": "pv-z"}}

    def on(node_name: str) -> Obj:
        return {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node_name]}]}]}}

    rec.pvs["pv-a"] = {"metadata": {"name": "pv-a"}, "spec": {"nodeAffinity": on("n2")}}
    rec.pvs["pv-z"] = {"metadata": {"name": "pv-z"}, "spec": {"nodeAffinity": on("zz")}}
    core, _, _ = build(default_config(), native=True, rec=rec)
    for i in range(4):
        core.cache.add_node(node(f"n{i}"))
    core.queue.add(pod("p", volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]))
    pinfo = core.queue.pop()
    assert pinfo is not None
    out = schedule_one(core.frameworks["default-scheduler"], pinfo)
    if expected == "n2":
        assert isinstance(out, Assumed) and out.node == expected
    else:
        assert isinstance(out, Failed) and expected in out.message, out.message
        assert out.unschedulable_plugins == {"VolumeBinding"}


async def test_batches_keep_queue_order_and_fill_exactly() -> None:
    core, rec, _ = build(default_config(), native=True)
    for i in range(10):
        core.cache.add_node(node(f"n{i}", cpu="1"))
    for i in range(24):
        core.queue.add(pod(f"p{i:02}", cpu="500m", priority=i % 3))
    failed: list[Failed] = []
    await Driver(core, on_failed=failed.append).drain()
    assert len(rec.bound) == 20 and len(failed) == 4  # exactly the 20 half-cpu slots are used
    per_node: dict[str, int] = defaultdict(int)
    for _, where in rec.bound:
        per_node[where] += 1
    assert max(per_node.values()) <= 2
    # priority order: the highest priorities were bound first; the lowest ones were left out
    prios = [int(name[1:]) % 3 for name, _ in rec.bound]
    assert prios == sorted(prios, reverse=True)
    assert all(int(f.pinfo.key.split("/p")[1]) % 3 == 0 for f in failed)


async def test_gpu_bin_packing_with_most_allocated() -> None:
    cfg = config([{"pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {
        "type": "MostAllocated", "resources": [{"name": "nvidia.com/gpu", "weight": 5}, {"name": "cpu", "weight": 1}]}}}],
        "plugins": {"score": {"disabled": [{"name": "NodeResourcesBalancedAllocation"}]}}}])
    core, rec, _ = build(cfg, native=True)
    for i in range(4):
        n = node(f"g{i}", cpu="32")
        n["status"]["allocatable"]["nvidia.com/gpu"] = "4"
        core.cache.add_node(n)
    for i in range(8):
        p = pod(f"train{i}", cpu="1")
        p["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1", "nvidia.com/gpu": "1"},
                                                   "limits": {"nvidia.com/gpu": "1"}}
        core.queue.add(p)
    await Driver(core).drain()
    per_node: dict[str, int] = defaultdict(int)
    for _, where in rec.bound:
        per_node[where] += 1
    assert sorted(per_node.values()) == [4, 4]  # two full GPU nodes, two left empty
    assert core.cache.snapshot is not None
    assert sorted(core.cache.snapshot.requested(n).get("nvidia.com/gpu", 0) for n in core.cache.node_names()) == [0, 0, 4, 4]
