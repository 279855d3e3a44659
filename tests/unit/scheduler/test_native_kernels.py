"""kubecore._native's scheduler kernels from Python: profiles, the snapshot, errors, batches,
filter_node dry runs and upstream reason strings (the per-plugin rules are cargo tests in
rust/sched/tests)."""

from __future__ import annotations

import threading
from typing import Any

import msgspec
import pytest

from kubecore._native import (
    NATIVE_FILTER_PLUGINS,
    NATIVE_SCORE_PLUGINS,
    NativeSchedProfile,
    NativeSchedSnapshot,
)
from kubecore.scheduler.config import DEFAULT_PLUGINS

# Upstream's default score weights, for the plugins the kernels run.
DEFAULT_SCORES = [(name, weight) for name, weight in DEFAULT_PLUGINS if name in NATIVE_SCORE_PLUGINS and weight]


def enc(obj: dict[str, Any]) -> bytes:
    return msgspec.json.encode(obj)


def node(name: str, *, cpu: str = "4", memory: str = "8Gi", pods: int = 110, **spec: Any) -> bytes:
    return enc(
        {
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": spec,
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": str(pods)}},
        }
    )


def pod(name: str, *, cpu: str = "100m", memory: str = "64Mi", **spec: Any) -> bytes:
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
    return enc({"metadata": {"name": name, "namespace": "default"}, "spec": {"containers": [container], **spec}})


@pytest.fixture
def profile() -> NativeSchedProfile:
    return NativeSchedProfile(filters=list(NATIVE_FILTER_PLUGINS), scores=DEFAULT_SCORES)


@pytest.fixture
def snap() -> NativeSchedSnapshot:
    s = NativeSchedSnapshot(seed=7)
    for i in range(3):
        s.set_node(node(f"n{i}"))
    return s


def test_plugin_constants_and_profile_errors() -> None:
    assert NATIVE_FILTER_PLUGINS == (  # upstream's default order
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "PodTopologySpread",
        "InterPodAffinity",
    )
    assert set(NATIVE_SCORE_PLUGINS) == {name for name, _ in DEFAULT_SCORES}
    with pytest.raises(ValueError, match="VolumeBinding"):
        NativeSchedProfile(filters=["VolumeBinding"], scores=[])
    with pytest.raises(ValueError, match="Nope"):
        NativeSchedProfile(filters=[], scores=[("Nope", 1)])
    with pytest.raises(ValueError, match="not supported"):
        NativeSchedProfile(filters=[], scores=[], fit_strategy="Random")
    with pytest.raises(ValueError, match="shape"):
        NativeSchedProfile(filters=[], scores=[], fit_strategy="RequestedToCapacityRatio")
    rtc = NativeSchedProfile(
        filters=["NodeResourcesFit"],
        scores=[("NodeResourcesFit", 1)],
        fit_strategy="RequestedToCapacityRatio",
        rtc_shape=[(0, 0), (100, 10)],
        fit_resources=[("cpu", 1), ("memory", 1), ("nvidia.com/gpu", 5)],
        percentage_of_nodes_to_score=50,
    )
    assert isinstance(rtc, NativeSchedProfile)


def test_bad_input_errors(snap: NativeSchedSnapshot, profile: NativeSchedProfile) -> None:
    with pytest.raises(ValueError, match="malformed"):
        snap.set_node(b"{not json")
    with pytest.raises(ValueError, match="metadata.name"):
        snap.set_node(b"{}")
    with pytest.raises(ValueError, match="quantity"):
        snap.set_node(node("bad", cpu="four"))
    with pytest.raises(ValueError, match="quantity"):
        snap.schedule(profile, pod("p", cpu="1 core"))
    with pytest.raises(ValueError):
        snap.add_pod("default/p", b"[", "n0")
    with pytest.raises(KeyError):
        snap.requested("nowhere")
    with pytest.raises(KeyError):
        snap.filter_node(profile, pod("p"), "nowhere")
    assert snap.node_count() == 3 and snap.pod_count() == 0


def test_schedule_and_reasons(snap: NativeSchedSnapshot, profile: NativeSchedProfile) -> None:
    snap.set_node(node("tainted", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]))
    snap.set_node(node("small", cpu="500m"))
    r = snap.schedule(profile, pod("p", cpu="1"))
    assert r.node in {"n0", "n1", "n2"}
    assert sorted(r.feasible) == ["n0", "n1", "n2"]
    assert len(r.scores) == 3 and max(r.scores) == r.scores[r.feasible.index(r.node)]
    assert r.evaluated == 5
    assert r.reasons == {"node(s) had untolerated taint(s)": 1, "Insufficient cpu": 1}
    assert r.unresolvable == 2  # the taint, and 1 cpu can never fit 500m
    unplaced = snap.schedule(profile, pod("huge", cpu="64"))
    assert unplaced.node is None and unplaced.feasible == [] and unplaced.scores == []
    # TaintToleration runs before NodeResourcesFit: the tainted node fails on its taint.
    assert unplaced.reasons == {"Insufficient cpu": 4, "node(s) had untolerated taint(s)": 1}
    no_select = snap.schedule(profile, pod("p"), select=False)
    assert no_select.node is None and sorted(no_select.feasible) == ["n0", "n1", "n2", "small"]
    assert "NativeScheduleResult(node=None" in repr(no_select)


def test_batch_assumes_each_placed_pod(snap: NativeSchedSnapshot, profile: NativeSchedProfile) -> None:
    # 3 nodes of 4 cpu: 12 pods of 1 cpu fit, the 13th does not.
    pods = [(f"default/p{i}", pod(f"p{i}", cpu="1")) for i in range(13)]
    results = snap.schedule_batch(profile, pods)
    placed = [r.node for r in results if r.node is not None]
    assert len(placed) == 12 and sorted(set(placed)) == ["n0", "n1", "n2"]
    assert results[12].node is None and results[12].reasons == {"Insufficient cpu": 3}
    assert snap.pod_count() == 12
    for name in snap.node_names():
        assert snap.requested(name)["cpu"] == 4000 and snap.requested(name)["pods"] == 4
        assert snap.allocatable(name) == {"cpu": 4000, "memory": 8 << 30, "ephemeral-storage": 0, "pods": 110}
    assert snap.remove_pod("default/p0") and not snap.remove_pod("default/p0")
    assert sum(snap.requested(n)["cpu"] for n in snap.node_names()) == 11000


def test_bad_pod_fails_the_whole_batch(snap: NativeSchedSnapshot, profile: NativeSchedProfile) -> None:
    with pytest.raises(ValueError, match="default/bad"):
        snap.schedule_batch(profile, [("default/ok", pod("ok")), ("default/bad", pod("bad", memory="lots"))])
    assert snap.pod_count() == 0


def test_filter_node_dry_run(snap: NativeSchedSnapshot, profile: NativeSchedProfile) -> None:
    snap.add_pod("default/a", pod("a", cpu="3"), "n0")
    snap.add_pod("default/b", pod("b", cpu="500m"), "n0")
    big = pod("p", cpu="1")
    assert snap.filter_node(profile, big, "n0") == ["Insufficient cpu"]
    assert snap.filter_node(profile, big, "n0", without=["default/b"]) == []
    assert snap.filter_node(profile, big, "n1") == []
    assert snap.requested("n0")["cpu"] == 3500
    mismatched = pod("p", nodeSelector={"disk": "ssd"})
    assert snap.filter_node(profile, mismatched, "n1") == ["node(s) didn't match Pod's node affinity/selector"]
    both = pod("p", cpu="8", memory="64Gi")
    assert snap.filter_node(profile, both, "n1") == ["Insufficient cpu", "Insufficient memory"]


def test_node_lifecycle(snap: NativeSchedSnapshot, profile: NativeSchedProfile) -> None:
    snap.add_pod("default/early", pod("early", cpu="2"), "later")
    assert snap.pod_count() == 1
    snap.set_node(node("later"))
    assert snap.requested("later")["cpu"] == 2000
    assert snap.remove_node("later") and not snap.remove_node("later")
    assert "later" not in snap.node_names()
    cordoned = node("n0", unschedulable=True)
    snap.set_node(cordoned)
    r = snap.schedule(profile, pod("p", nodeName="n0"))
    assert r.node is None
    assert r.reasons == {"node(s) were unschedulable": 1, "node(s) didn't match the requested node name": 2}


def test_spread_and_pod_affinity(profile: NativeSchedProfile) -> None:
    s = NativeSchedSnapshot(seed=2)
    for i in range(4):
        labels = {"kubernetes.io/hostname": f"n{i}", "zone": "ab"[i % 2]}
        allocatable = {"cpu": "4", "memory": "8Gi", "pods": "110"}
        s.set_node(enc({"metadata": {"name": f"n{i}", "labels": labels}, "status": {"allocatable": allocatable}}))
    web = {"matchLabels": {"app": "web"}}
    spread = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": web}
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": web, "topologyKey": "kubernetes.io/hostname"}]}}
    spec = {"containers": [{"name": "c"}], "topologySpreadConstraints": [spread], "affinity": anti}
    pods = [
        (f"default/w{i}", enc({"metadata": {"name": f"w{i}", "namespace": "default", "labels": {"app": "web"}}, "spec": spec}))
        for i in range(5)
    ]
    results = s.schedule_batch(profile, pods)
    placed = [r.node for r in results[:4]]
    assert sorted(n for n in placed if n is not None) == ["n0", "n1", "n2", "n3"]
    zones = ["ab"[int(n[1]) % 2] for n in placed if n is not None]
    for k in range(1, 5):  # the zones never differ by more than maxSkew along the way
        assert abs(zones[:k].count("a") - zones[:k].count("b")) <= 1
    assert results[4].node is None
    assert results[4].reasons == {"node(s) didn't match pod anti-affinity rules": 4}


def test_seeded_snapshots_choose_alike(profile: NativeSchedProfile) -> None:
    def picks(seed: int) -> list[str | None]:
        s = NativeSchedSnapshot(seed=seed)
        for i in range(5):
            s.set_node(node(f"n{i}"))
        return [s.schedule(profile, pod("p")).node for _ in range(20)]

    assert picks(3) == picks(3)
    assert len(set(picks(4))) > 1


def test_calls_from_threads_are_serialized(profile: NativeSchedProfile) -> None:
    s = NativeSchedSnapshot(seed=1)
    for i in range(50):
        s.set_node(node(f"n{i}", cpu="1"))

    def worker(t: int) -> None:
        s.schedule_batch(profile, [(f"default/t{t}-{i}", pod(f"t{t}-{i}", cpu="100m")) for i in range(100)])

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    # 50 nodes x 10 pods of 100m: every pod placed, no node over 1 cpu.
    assert s.pod_count() == 400
    assert all(s.requested(n)["cpu"] <= 1000 for n in s.node_names())


def test_nominated_pods_count_only_inside_the_block(snap: NativeSchedSnapshot, profile: NativeSchedProfile) -> None:
    from kubecore.scheduler.native import NativeKernels
    kernels = NativeKernels(snap, filters=["NodeResourcesFit"], scores=[], args={}, percentage_of_nodes_to_score=0)
    snap.set_node(node("n1", cpu="4"))
    big = pod("big", cpu="3")
    for _ in range(2):  # the second block reuses what the first left in place
        with kernels.nominated([("default/nominee", pod("nominee", cpu="2"), "n1")]):
            # added while its own node is filtered (upstream's RunFilterPluginsWithNominatedPods),
            # never counted among the snapshot's pods
            assert kernels.filter_node(big, "n1") == ["Insufficient cpu"]
            assert snap.pod_count() == 0
        assert kernels.filter_node(big, "n1") == []
        assert snap.requested("n1")["cpu"] == 0 and snap.pod_count() == 0


def test_preemption_dry_runs_over_many_nodes(snap: NativeSchedSnapshot, profile: NativeSchedProfile) -> None:
    low = {"priority": 0}
    for n in ("n1", "n2"):
        snap.set_node(node(n, cpu="2"))
        for i in range(2):
            snap.add_pod(f"default/{n}-{i}", pod(f"{n}-{i}", cpu="1", **low), n)
    high = pod("high", cpu="2", priority=10)
    kinds, rejected = snap.dry_run_lower(profile, high, ["n1", "n2"])
    assert (kinds, rejected) == (b"\x01\x01", [])
    assert snap.reprieve(profile, high, [("n1", ["default/n1-0", "default/n1-1"])]) == [[0, 1]]
    chosen, candidates, classified, none = snap.preempt_select(profile, high, [("n1", True), ("n2", True)], 100, 0.0)
    assert chosen == ("n1", ["default/n1-0", "default/n1-1"]) and (candidates, classified, none) == (2, 2, [])
    huge = pod("huge", cpu="3", priority=10)
    chosen, candidates, classified, rejected2 = snap.preempt_select(profile, huge, [("n1", False)], 100, 0.0)
    assert chosen is None and candidates == 0 and rejected2 == [("n1", ["Insufficient cpu"], True)]
