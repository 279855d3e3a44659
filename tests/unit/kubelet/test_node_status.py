"""The Node a kubelet registers: labels, status setters, condition transitions, change detection,
re-registration reconcile, and the node Lease's shape."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubecore.client.clock import FAKE_EPOCH, FakeClock
from kubecore.client.errors import NotFound
from kubecore.kubelet import cri
from kubecore.kubelet.config import KubeletConfig, MachineInfo
from kubecore.kubelet.node_agent import NodeLease
from kubecore.kubelet.node_status import (
    Pressure, initial_node, reconcile_existing, set_node_status, status_changed,
)

Obj = dict[str, Any]
MACHINE = MachineInfo(machine_id="m", system_uuid="s", boot_id="b", kernel_version="6.1", os_image="Debian")
RUNTIME = cri.VersionResponse(runtime_name="sim", runtime_version="0.1.0")


def fill(node: Obj, config: KubeletConfig, *, now: float, errors: list[str] | None = None,
         pressure: Pressure = Pressure()) -> list[tuple[str, str]]:
    images = [cri.Image(id="sha256:1", repo_tags=["docker.io/library/a:1"], repo_digests=["a@sha256:1"], size=5),
              cri.Image(id="sha256:2", repo_tags=["docker.io/library/b:1"], repo_digests=[], size=9)]
    return set_node_status(node, config, now=now, machine=MACHINE, runtime=RUNTIME, images=images,
                           node_ip="172.16.0.1", ready_errors=errors or [], pressure=pressure)


def conds(node: Obj) -> dict[str, Obj]:
    return {c["type"]: c for c in node["status"]["conditions"]}


def test_initial_node_labels_capacity_and_endpoint() -> None:
    config = KubeletConfig(node_name="n1", cpu="8", memory="16Gi", pods=50, instance_type="sim.large",
                           labels={"zone": "a"}, architecture="amd64")
    node = initial_node(config)
    events = fill(node, config, now=FAKE_EPOCH)
    labels = node["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == "n1" and labels["kubernetes.io/os"] == "linux"
    assert labels["kubernetes.io/arch"] == "amd64" and labels["node.kubernetes.io/instance-type"] == "sim.large"
    assert labels["zone"] == "a"
    status = node["status"]
    assert status["capacity"] == {"cpu": "8", "ephemeral-storage": "100Gi", "memory": "16Gi", "pods": "50"}
    assert status["allocatable"] == status["capacity"]
    assert status["addresses"] == [{"type": "InternalIP", "address": "172.16.0.1"},
                                   {"type": "Hostname", "address": "n1"}]
    assert status["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 10250}}
    assert status["nodeInfo"]["containerRuntimeVersion"] == "sim://0.1.0"
    assert status["images"][0] == {"names": ["docker.io/library/b:1"], "sizeBytes": 9}
    c = conds(node)
    assert [x["type"] for x in status["conditions"]] == ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
    assert (c["Ready"]["status"], c["Ready"]["reason"], c["Ready"]["message"]) == (
        "True", "KubeletReady", "kubelet is posting ready status")
    assert (c["MemoryPressure"]["reason"], c["MemoryPressure"]["message"]) == (
        "KubeletHasSufficientMemory", "kubelet has sufficient memory available")
    assert c["DiskPressure"]["reason"] == "KubeletHasNoDiskPressure"
    assert c["PIDPressure"]["reason"] == "KubeletHasSufficientPID"
    assert events == [("Normal", "NodeHasSufficientMemory"), ("Normal", "NodeHasNoDiskPressure"),
                      ("Normal", "NodeHasSufficientPID")]


def test_no_instance_type_label_unless_given() -> None:
    node = initial_node(KubeletConfig(node_name="n1"))
    assert "node.kubernetes.io/instance-type" not in node["metadata"]["labels"]


def test_heartbeats_move_transitions_do_not_and_change_detection_ignores_heartbeats() -> None:
    config = KubeletConfig(node_name="n1")
    node = initial_node(config)
    fill(node, config, now=FAKE_EPOCH)
    before = {"status": copy.deepcopy(node["status"])}
    events = fill(node, config, now=FAKE_EPOCH + 10)
    c = conds(node)
    assert c["Ready"]["lastHeartbeatTime"] == "2024-01-02T03:04:15Z"
    assert c["Ready"]["lastTransitionTime"] == "2024-01-02T03:04:05Z"
    assert events == [] and not status_changed(before["status"], node["status"])
    events = fill(node, config, now=FAKE_EPOCH + 20, errors=["PLEG is not healthy"])
    c = conds(node)
    assert (c["Ready"]["status"], c["Ready"]["reason"], c["Ready"]["message"]) == (
        "False", "KubeletNotReady", "PLEG is not healthy")
    assert c["Ready"]["lastTransitionTime"] == "2024-01-02T03:04:25Z"
    assert events == [("Normal", "NodeNotReady")] and status_changed(before["status"], node["status"])
    events = fill(node, config, now=FAKE_EPOCH + 30, pressure=Pressure(memory=True))
    assert ("Normal", "NodeHasInsufficientMemory") in events and ("Normal", "NodeReady") in events
    assert conds(node)["MemoryPressure"]["reason"] == "KubeletHasInsufficientMemory"


def test_a_status_set_unknown_by_the_controller_counts_as_changed() -> None:
    config = KubeletConfig(node_name="n1")
    node = initial_node(config)
    fill(node, config, now=FAKE_EPOCH)
    controller_view = copy.deepcopy(node["status"])
    for c in controller_view["conditions"]:
        c.update(status="Unknown", reason="NodeStatusUnknown", message="Kubelet stopped posting node status.")
    mine = {"status": copy.deepcopy(controller_view)}
    fill(mine, config, now=FAKE_EPOCH + 60)
    assert status_changed(controller_view, mine["status"])
    assert conds(mine)["Ready"]["status"] == "True"


def test_reconcile_existing_fixes_default_labels_only() -> None:
    config = KubeletConfig(node_name="n1", architecture="amd64")
    mine = initial_node(config)
    existing = {"metadata": {"labels": {"kubernetes.io/hostname": "n1", "kubernetes.io/os": "linux",
                                        "kubernetes.io/arch": "arm64", "beta.kubernetes.io/os": "linux",
                                        "beta.kubernetes.io/arch": "amd64",
                                        "node.kubernetes.io/instance-type": "old", "team": "x"},
                             "annotations": {}}}
    patch = reconcile_existing(mine, existing)
    assert patch == {"metadata": {"labels": {"kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": None},
                                  "annotations": {"volumes.kubernetes.io/controller-managed-attach-detach": "true"}}}
    existing["metadata"] = mine["metadata"]
    assert reconcile_existing(mine, existing) is None


def test_allocatable_subtracts_reservations_but_not_pods() -> None:
    config = KubeletConfig(node_name="n1", cpu="4", memory="8Gi", reserved={"cpu": "500m", "memory": "1Gi",
                                                                             "pods": "10"})
    assert config.allocatable() == {"cpu": "3500m", "ephemeral-storage": "100Gi", "memory": "7Gi", "pods": "110"}
    with pytest.raises(ValueError, match="cpu"):
        KubeletConfig(node_name="n1", cpu="lots")


class LeaseSink:
    def __init__(self) -> None:
        self.stored: Obj | None = None
        self.calls: list[str] = []

    async def get_lease(self, namespace: str, name: str) -> Obj:
        self.calls.append("get")
        if self.stored is None:
            raise NotFound({"reason": "NotFound"}, code=404)
        return self.stored

    async def create_lease(self, lease: Obj) -> Obj:
        self.calls.append("create")
        self.stored = {**lease, "metadata": {**lease["metadata"], "resourceVersion": "1"}}
        return self.stored

    async def update_lease(self, lease: Obj) -> Obj:
        self.calls.append("update")
        self.stored = lease
        return lease


async def test_lease_is_created_then_renewed_with_owner_and_micro_time() -> None:
    clock = FakeClock()
    sink = LeaseSink()
    lease = NodeLease(sink, node_name="n1", clock=clock, node_uid=lambda: "uid-1")  # type: ignore[arg-type]
    await lease.sync()
    assert sink.calls == ["get", "create"]
    stored = sink.stored
    assert stored is not None
    assert stored["metadata"]["namespace"] == "kube-node-lease"
    assert stored["spec"] == {"holderIdentity": "n1", "leaseDurationSeconds": 40,
                              "renewTime": "2024-01-02T03:04:05.000000Z"}
    assert stored["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node", "name": "n1",
                                                      "uid": "uid-1"}]
    clock.advance(10.25)
    await lease.sync()
    assert sink.calls == ["get", "create", "update"]
    assert sink.stored is not None and sink.stored["spec"]["renewTime"] == "2024-01-02T03:04:15.250000Z"
