"""Node-pressure eviction: thresholds, signals, upstream's ranking and messages, admission, and the
manager's loop (conditions, reclaim before eviction, one pod per pass) over injected stats and
over the simulated runtime's stats."""

from __future__ import annotations

from typing import Any

import pytest

from kubecore.client.clock import FakeClock
from kubecore.kubelet import eviction
from kubecore.kubelet.config import KubeletConfig, ResourcePolicy
from kubecore.kubelet.eviction import Observation, Threshold, ThresholdError
from kubecore.kubelet.eviction_manager import EvictionManager, apply_status
from kubecore.kubelet.stats import SimSource, StatsProvider
from tests.unit.kubelet.kubelet_fixtures import SimNode, container, make_pod
from tests.unit.kubelet.test_stats import run_pod

Obj = dict[str, Any]
MI = 1 << 20
GI = 1 << 30


def pod(name: str, *, memory_request: str | None = None, priority: int | None = None, storage: str | None = None,
        qos_limits: bool = False, tolerations: list[Obj] | None = None) -> Obj:
    resources: Obj = {}
    if memory_request or storage:
        resources["requests"] = {k: v for k, v in (("memory", memory_request), ("ephemeral-storage", storage)) if v}
    if qos_limits:
        resources["limits"] = {"memory": memory_request or "1Gi"}
    p = make_pod(name, uid=f"uid-{name}", containers=[container(name, resources=resources)])
    if priority is not None:
        p["spec"]["priority"] = priority
    if tolerations:
        p["spec"]["tolerations"] = tolerations
    return p


def pod_stats(name: str, *, working_set: int = 0, rootfs: int = 0, logs: int = 0, volumes: int = 0) -> Obj:
    return {"podRef": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "containers": [{"name": name, "memory": {"workingSetBytes": working_set},
                            "rootfs": {"usedBytes": rootfs, "inodesUsed": rootfs // 4096},
                            "logs": {"usedBytes": logs, "inodesUsed": 1}}],
            "memory": {"workingSetBytes": working_set},
            "volume": [{"name": "v", "usedBytes": volumes, "inodesUsed": 1}] if volumes else []}


def summary(*, mem_available: int = 4 * GI, mem_working: int = 4 * GI, fs: tuple[int, int] = (100 * GI, 50 * GI),
            image_fs: tuple[int, int] | None = None, pods: list[Obj] | None = None) -> Obj:
    image_fs = image_fs or fs
    return {"node": {"memory": {"availableBytes": mem_available, "workingSetBytes": mem_working},
                     "fs": {"capacityBytes": fs[0], "availableBytes": fs[1], "inodes": 1000, "inodesFree": 500},
                     "runtime": {"imageFs": {"capacityBytes": image_fs[0], "availableBytes": image_fs[1],
                                             "inodes": 1000, "inodesFree": 500}}},
            "pods": pods or []}


# -- thresholds and signals ------------------------------------------------------------------------

def test_default_thresholds_parse_in_signal_order() -> None:
    parsed = eviction.parse_thresholds(eviction.DEFAULT_EVICTION_HARD)
    assert [t.signal for t in parsed] == list(eviction.SIGNALS)
    assert parsed[0].value(GI).canonical() == "100Mi"
    # the percentage is a float32, as upstream's: 10% of 10^12 bytes is not exactly 10^11
    assert parsed[1].value(10 ** 12).nanos // 10 ** 9 == 100000001490
    assert eviction.parse_thresholds({"nodefs.available": "0%"}) == []
    for bad in ({"memory.available": "lots"}, {"cpu.available": "1"}, {"nodefs.available": "120%"}):
        with pytest.raises(ThresholdError):
            eviction.parse_thresholds(bad)


def test_observations_and_thresholds_met() -> None:
    s = summary(mem_available=50 * MI, mem_working=974 * MI, fs=(100 * GI, 5 * GI), image_fs=(200 * GI, 100 * GI))
    obs = eviction.observe(s)
    assert obs[eviction.MEMORY_AVAILABLE] == Observation(50 * MI, 1024 * MI)
    assert obs[eviction.NODEFS_INODES_FREE] == Observation(500, 1000)
    met = eviction.thresholds_met(eviction.parse_thresholds(eviction.DEFAULT_EVICTION_HARD), obs)
    assert [t.signal for t in met] == [eviction.MEMORY_AVAILABLE, eviction.NODEFS_AVAILABLE]
    assert eviction.node_conditions(met) == ["MemoryPressure", "DiskPressure"]
    assert eviction.dedicated_image_fs(s) and not eviction.dedicated_image_fs(summary())


# -- ranking and messages --------------------------------------------------------------------------

def stats_lookup(*entries: Obj) -> Any:
    by_uid = {e["podRef"]["uid"]: e for e in entries}
    return lambda p: by_uid.get(p["metadata"]["uid"])


def names(pods: list[Obj]) -> list[str]:
    return [p["metadata"]["name"] for p in pods]


def test_memory_ranking_exceeds_requests_then_priority_then_usage_above_request() -> None:
    pods = [pod("under", memory_request="100Mi"), pod("high-prio", priority=1000),
            pod("besteffort-small"), pod("besteffort-big"), pod("nostats"),
            pod("over", memory_request="100Mi")]
    stats = stats_lookup(pod_stats("under", working_set=80 * MI), pod_stats("high-prio", working_set=900 * MI),
                         pod_stats("besteffort-small", working_set=10 * MI),
                         pod_stats("besteffort-big", working_set=300 * MI), pod_stats("over", working_set=350 * MI))
    ranked = eviction.rank(eviction.MEMORY_AVAILABLE, pods, stats)
    # no stats first; then exceeding requests (priority 0 before 1000; within a priority, more above
    # the request first: big 300Mi > over 250Mi > small 10Mi); the pod under its request last
    assert names(ranked) == ["nostats", "besteffort-big", "over", "besteffort-small", "high-prio", "under"]


def test_disk_ranking_counts_rootfs_logs_and_volumes_against_the_storage_request() -> None:
    pods = [pod("logs"), pod("vol", storage="1Gi"), pod("root", priority=-5)]
    stats = stats_lookup(pod_stats("logs", logs=200 * MI), pod_stats("vol", volumes=2 * GI),
                         pod_stats("root", rootfs=50 * MI))
    assert names(eviction.rank(eviction.NODEFS_AVAILABLE, pods, stats)) == ["root", "vol", "logs"]
    # with a dedicated image fs, imagefs ranks by rootfs only and nodefs by logs + volumes
    assert names(eviction.rank(eviction.IMAGEFS_AVAILABLE, pods, stats, dedicated_imagefs=True))[0] == "root"
    assert names(eviction.rank(eviction.NODEFS_AVAILABLE, pods[:2], stats, dedicated_imagefs=True)) == \
        ["vol", "logs"]


def test_eviction_message_is_upstreams() -> None:
    met = [Threshold(eviction.MEMORY_AVAILABLE, amount=eviction.parse_thresholds({"memory.available": "100Mi"})[0]
                     .amount)]
    obs = {eviction.MEMORY_AVAILABLE: Observation(50 * MI, GI)}
    p = pod("app", memory_request="64Mi")
    message, annotations = eviction.eviction_message("memory", p, pod_stats("app", working_set=200 * MI), met=met,
                                                     observations=obs)
    assert message == ("The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. "
                       "Container app was using 200Mi, request is 64Mi, has larger consumption of memory. ")
    assert annotations == {"offending_containers": "app", "offending_containers_usage": "200Mi",
                           "starved_resource": "memory"}
    disk_met = eviction.parse_thresholds({"nodefs.available": "10%"})
    disk_obs = {eviction.NODEFS_AVAILABLE: Observation(1000 * MI, 100 * GI)}
    msg, _ = eviction.eviction_message("ephemeral-storage", pod("d"), pod_stats("d", rootfs=MI, logs=1024),
                                       met=disk_met, observations=disk_obs)
    # 10% as a float32 of 100Gi is 10737418400 bytes (not 10737418240); 1049600 bytes print as 1025Ki
    assert msg == ("The node was low on resource: ephemeral-storage. Threshold quantity: 10737418400, "
                   "available: 1000Mi. Container d was using 1025Ki, request is 0, has larger consumption of "
                   "ephemeral-storage. ")


# -- admission -------------------------------------------------------------------------------------

def test_admission_under_pressure() -> None:
    best_effort, burstable = pod("be"), pod("b", memory_request="10Mi")
    critical = pod("crit", priority=eviction.SYSTEM_CRITICAL_PRIORITY)
    tolerant = pod("tol", tolerations=[{"key": "node.kubernetes.io/memory-pressure", "operator": "Exists",
                                        "effect": "NoSchedule"}])
    assert eviction.admit(best_effort, []).admit
    rejected = eviction.admit(best_effort, ["MemoryPressure"])
    assert (rejected.admit, rejected.reason, rejected.message) == \
        (False, "Evicted", "The node had condition: [MemoryPressure]. ")
    assert eviction.admit(burstable, ["MemoryPressure"]).admit and eviction.admit(tolerant, ["MemoryPressure"]).admit
    both = eviction.admit(burstable, ["MemoryPressure", "DiskPressure"])
    assert not both.admit and both.message == "The node had condition: [MemoryPressure DiskPressure]. "
    assert eviction.admit(critical, ["DiskPressure"]).admit


# -- the manager -----------------------------------------------------------------------------------

class Harness:
    def __init__(self, pods: list[Obj], *, reclaim_frees: bool = False) -> None:
        self.clock = FakeClock()
        self.pods = pods
        self.current = summary()
        self.evicted: list[tuple[str, int, Obj]] = []
        self.reclaims: list[str] = []
        self.changes = 0
        self.events: list[tuple[str, str, str]] = []
        self.reclaim_frees = reclaim_frees
        self.manager = EvictionManager(
            summary=self.summary, clock=self.clock,
            thresholds=eviction.parse_thresholds(eviction.DEFAULT_EVICTION_HARD), active_pods=lambda: list(self.pods),
            evict=self.evict, reclaim=self.reclaim, record=lambda ref, t, r, m: self.events.append((ref["name"], r, m)),
            on_conditions_changed=self.changed)

    async def summary(self) -> Obj:
        return self.current

    def evict(self, p: Obj, grace: int, status: Obj) -> bool:
        self.evicted.append((p["metadata"]["name"], grace, status))
        self.pods.remove(p)
        return True

    async def reclaim(self, signal: str) -> None:
        self.reclaims.append(signal)
        if self.reclaim_frees:
            self.current = summary(pods=self.current["pods"])

    def changed(self) -> None:
        self.changes += 1


async def test_memory_pressure_sets_the_condition_and_evicts_one_pod_per_pass() -> None:
    h = Harness([pod("a", memory_request="500Mi"), pod("b")])
    stats = [pod_stats("a", working_set=400 * MI), pod_stats("b", working_set=100 * MI)]
    h.current = summary(mem_available=60 * MI, mem_working=964 * MI, pods=stats)
    (evicted,) = await h.manager.synchronize()
    assert evicted["metadata"]["name"] == "b"
    assert h.manager.conditions == ["MemoryPressure"] and h.manager.pressure().memory and h.changes == 1
    name, grace, status = h.evicted[0]
    message = ("The node was low on resource: memory. Threshold quantity: 100Mi, available: 60Mi. "
               "Container b was using 100Mi, request is 0, has larger consumption of memory. ")
    assert (name, grace, status["phase"], status["reason"], status["message"]) == ("b", 1, "Failed", "Evicted",
                                                                                   message)
    assert status["conditions"][0]["type"] == "DisruptionTarget"
    assert status["conditions"][0]["reason"] == "TerminationByKubelet"
    assert h.events == [("", "EvictionThresholdMet", "Attempting to reclaim memory"), ("b", "Evicted", message)]
    assert status["conditions"][0]["observedGeneration"] == 1
    assert h.reclaims == []  # memory is not reclaimed at node level
    await h.manager.synchronize()
    assert [e[0] for e in h.evicted] == ["b", "a"]


async def test_conditions_stay_for_the_transition_period() -> None:
    h = Harness([])
    h.current = summary(mem_available=10 * MI, mem_working=GI)
    await h.manager.synchronize()
    h.current = summary()
    h.clock.advance(299)
    await h.manager.synchronize()
    assert h.manager.conditions == ["MemoryPressure"]
    h.clock.advance(1)
    await h.manager.synchronize()
    assert h.manager.conditions == [] and h.changes == 2


async def test_disk_pressure_reclaims_first_and_evicts_only_if_still_short() -> None:
    freed = Harness([pod("x")], reclaim_frees=True)
    freed.current = summary(fs=(100 * GI, 5 * GI), pods=[pod_stats("x", rootfs=GI)])
    assert await freed.manager.synchronize() == []
    assert freed.reclaims == ["nodefs.available"] and freed.evicted == []
    assert freed.manager.conditions == ["DiskPressure"]
    short = Harness([pod("x"), pod("y", priority=10)])
    short.current = summary(fs=(100 * GI, 5 * GI), pods=[pod_stats("x", rootfs=GI), pod_stats("y", rootfs=2 * GI)])
    (evicted,) = await short.manager.synchronize()
    assert evicted["metadata"]["name"] == "x"
    assert short.evicted[0][2]["message"].startswith(
        "The node was low on resource: ephemeral-storage. Threshold quantity: 10737418400, available: 5Gi. ")


async def test_critical_pods_are_never_evicted() -> None:
    h = Harness([pod("crit", priority=eviction.SYSTEM_CRITICAL_PRIORITY)])
    h.current = summary(mem_available=MI, mem_working=GI, pods=[pod_stats("crit", working_set=GI)])
    assert await h.manager.synchronize() == [] and h.evicted == []


def test_apply_status_replaces_conditions_by_type() -> None:
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"},
                                                 {"type": "DisruptionTarget", "status": "False"}]}
    apply_status(status, {"phase": "Failed", "reason": "Evicted", "conditions": [
        {"type": "DisruptionTarget", "status": "True"}]})
    assert status["phase"] == "Failed" and status["reason"] == "Evicted"
    assert status["conditions"] == [{"type": "Ready", "status": "True"}, {"type": "DisruptionTarget", "status": "True"}]


async def test_simulated_node_memory_pressure_end_to_end_over_sim_stats() -> None:
    """The SimRuntime's annotated usage -> Summary -> signals -> the BestEffort hog is evicted."""
    node = SimNode()
    hog = make_pod("hog", uid="u-hog", annotations={"sim.kubecore.io/memory-usage": "900Mi"})
    quiet = make_pod("quiet", uid="u-quiet", containers=[container("app", resources={"requests": {"memory": "64Mi"}})],
                     annotations={"sim.kubecore.io/memory-usage": "50Mi"})
    for p in (hog, quiet):
        await run_pod(node, p)
    provider = StatsProvider(node.runtime, node_name="node-1", clock=node.clock,
                             source=SimSource(memory="1Gi", ephemeral_storage="10Gi", max_pods=110, clock=node.clock))
    evicted: list[tuple[str, Obj]] = []
    active = [hog, quiet]

    def evict(p: Obj, grace: int, status: Obj) -> bool:
        evicted.append((p["metadata"]["name"], status))
        active.remove(p)
        return True

    manager = EvictionManager(summary=provider.summary, clock=node.clock,
                              thresholds=eviction.parse_thresholds(eviction.DEFAULT_EVICTION_HARD),
                              active_pods=lambda: list(active), evict=evict)
    await manager.synchronize()
    assert manager.conditions == ["MemoryPressure"]
    assert evicted[0][0] == "hog"
    assert evicted[0][1]["message"] == (
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 74Mi. "
        "Container app was using 900Mi, request is 0, has larger consumption of memory. ")


# -- local storage limits --------------------------------------------------------------------------

def limited(name: str, *, container_limit: str | None = None, size_limit: str | None = None,
            init_limit: str | None = None) -> Obj:
    resources = {"limits": {"ephemeral-storage": container_limit}} if container_limit else {}
    p = make_pod(name, uid=f"uid-{name}", containers=[container(name, resources=resources)])
    if size_limit:
        p["spec"]["volumes"] = [{"name": "v", "emptyDir": {"sizeLimit": size_limit}}]
    if init_limit:
        p["spec"]["initContainers"] = [container("init", resources={"limits": {"ephemeral-storage": init_limit}})]
    return p


def test_local_storage_violations_and_their_messages() -> None:
    over_dir = pod_stats("d", volumes=2 * MI)
    assert eviction.local_storage_violation(limited("d", size_limit="1Mi"), over_dir, dedicated_imagefs=False) == \
        'Usage of EmptyDir volume "v" exceeds the limit "1Mi". '
    assert eviction.local_storage_violation(limited("d", size_limit="3Mi"), over_dir, dedicated_imagefs=False) is None
    c = pod_stats("c", rootfs=3 * MI, logs=MI)
    assert eviction.local_storage_violation(limited("c", container_limit="2Mi"), c, dedicated_imagefs=False) == \
        'Container c exceeded its local ephemeral storage limit "2Mi". '
    # with a dedicated image fs only the logs count against the container's limit
    assert eviction.local_storage_violation(limited("c", container_limit="2Mi"), c, dedicated_imagefs=True) is None
    whole = {**pod_stats("p", logs=10), "ephemeral-storage": {"usedBytes": 5 * MI}}
    assert eviction.local_storage_violation(limited("p", container_limit="4Mi"), whole, dedicated_imagefs=False) == \
        "Pod ephemeral local storage usage exceeds the total limit of containers 4Mi. "
    # the pod's limit is at least its largest init container's
    assert eviction.pod_ephemeral_limit(limited("p", container_limit="4Mi", init_limit="6Mi")) is not None
    assert eviction.local_storage_violation(limited("p", container_limit="4Mi", init_limit="6Mi"), whole,
                                            dedicated_imagefs=False) is None


async def test_local_storage_eviction_needs_no_threshold_and_sets_no_disruption_condition() -> None:
    h = Harness([limited("c", container_limit="1Mi"), pod("fine")])
    h.current = summary(pods=[pod_stats("c", rootfs=2 * MI), pod_stats("fine", rootfs=GI)])
    (evicted,) = await h.manager.synchronize()
    assert evicted["metadata"]["name"] == "c" and h.manager.conditions == []
    name, grace, status = h.evicted[0]
    assert (grace, status) == (1, {"phase": "Failed", "reason": "Evicted",
                                   "message": 'Container c exceeded its local ephemeral storage limit "1Mi". '})


async def test_simulated_disk_usage_over_the_pods_limit_is_evicted() -> None:
    """The pod-level check comes before the container's (upstream's order), and with one container
    the pod's limit is that container's."""
    node = SimNode()
    p = make_pod("writer", uid="u-writer", annotations={"sim.kubecore.io/disk-usage": "5Mi"},
                 containers=[container("app", resources={"limits": {"ephemeral-storage": "4Mi"}})])
    await run_pod(node, p)
    provider = StatsProvider(node.runtime, node_name="node-1", clock=node.clock,
                             source=SimSource(memory="1Gi", ephemeral_storage="10Gi", max_pods=110, clock=node.clock))
    killed: list[str] = []
    manager = EvictionManager(summary=provider.summary, clock=node.clock, thresholds=[], active_pods=lambda: [p],
                              evict=lambda pod, grace, status: killed.append(status["message"]) is None)
    assert [x["metadata"]["name"] for x in await manager.synchronize()] == ["writer"]
    assert killed == ["Pod ephemeral local storage usage exceeds the total limit of containers 4Mi. "]


def test_resource_policy_is_checked_when_made_and_shared_by_default() -> None:
    with pytest.raises(ThresholdError, match="memory.available"):
        ResourcePolicy(eviction_hard={"memory.available": "plenty"})
    with pytest.raises(ValueError, match="image GC thresholds"):
        ResourcePolicy(image_gc_high_threshold_percent=70, image_gc_low_threshold_percent=80)
    a, b = KubeletConfig(node_name="a"), KubeletConfig(node_name="b")
    assert a.resource_policy is b.resource_policy and a.manage_resources
    assert dict(a.resource_policy.eviction_hard) == eviction.DEFAULT_EVICTION_HARD


def test_the_eviction_hard_flag_replaces_the_defaults_and_reads_back() -> None:
    spec = eviction.parse_flag(" memory.available<100Mi, nodefs.available<10% ,")
    assert spec == {"memory.available": "100Mi", "nodefs.available": "10%"}
    assert eviction.eviction_flag(spec) == "memory.available<100Mi,nodefs.available<10%"
    assert eviction.parse_flag("") == {}  # hard eviction off, as upstream's --eviction-hard=""
    assert eviction.parse_flag(eviction.eviction_flag(eviction.DEFAULT_EVICTION_HARD)) == eviction.DEFAULT_EVICTION_HARD
    for bad, says in (("memory.available=1Gi", "malformed"), ("<1Gi", "malformed"), ("memory.available<", "malformed"),
                      ("swap.available<1Gi", "unsupported eviction signal 'swap.available'"),
                      ("nodefs.available<-1%", "must be >= 0%")):
        with pytest.raises(eviction.ThresholdError, match=says):
            eviction.parse_flag(bad)


def test_a_crossed_threshold_is_described_with_figures() -> None:
    met = eviction.parse_thresholds({"imagefs.available": "15%", "nodefs.inodesFree": "5%", "memory.available": "1Gi"})
    seen = {"imagefs.available": eviction.Observation(36 * 2**30, 250 * 2**30),
            "nodefs.inodesFree": eviction.Observation(1_000, 100_000),
            "memory.available": eviction.Observation(512 * 2**20, 8 * 2**30)}
    assert eviction.describe(met, seen).split("; ") == [
        "memory.available is 6.2% (512.0Mi of 8.0Gi), below 1.0Gi",
        "nodefs.inodesFree is 1.0% (1,000 of 100,000), below 5% (5,000)",
        "imagefs.available is 14.4% (36.0Gi of 250.0Gi), below 15% (37.5Gi)"]
