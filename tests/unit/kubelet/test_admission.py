"""Predicate admission (upstream lifecycle/predicate.go): resources, affinity, host ports and
NoExecute taints, the first failure's reason and message."""

from __future__ import annotations

from typing import Any

from kubecore.kubelet.admission import pod_requests, predicate_admit

Obj = dict[str, Any]
NODE: Obj = {"metadata": {"name": "n", "labels": {"disk": "ssd", "kubernetes.io/hostname": "n"}},
             "spec": {"taints": [{"key": "maint", "effect": "NoSchedule"}]}}
ALLOC = {"cpu": "2", "memory": "4Gi", "pods": "3", "example.com/gpu": "1"}


def pod(name: str, *, cpu: str = "", memory: str = "", gpu: str = "", ports: list[Obj] | None = None, **spec: Any) -> Obj:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory), ("example.com/gpu", gpu)) if v}
    c: Obj = {"name": "c", "resources": {"requests": requests}, "ports": ports or []}
    return {"metadata": {"name": name, "uid": name}, "spec": {"containers": [c], **spec}}


def admit(p: Obj, others: list[Obj] | None = None, node: Obj | None = None) -> tuple[bool, str, str]:
    r = predicate_admit(p, node=node or NODE, other_pods=others or [], allocatable=ALLOC)
    return r.admit, r.reason, r.message


def test_resources_in_upstreams_order_and_units() -> None:
    assert admit(pod("a", cpu="1", memory="1Gi"))[0]
    assert admit(pod("b", cpu="1500m"), [pod("o", cpu="1")]) == (
        False, "OutOfcpu", "Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000")
    assert admit(pod("c", memory="3Gi"), [pod("o", memory="2Gi")]) == (
        False, "OutOfmemory", "Node didn't have enough resource: memory, requested: 3221225472, used: 2147483648, "
                              "capacity: 4294967296")
    assert admit(pod("d"), [pod("o1"), pod("o2"), pod("o3")]) == (
        False, "OutOfpods", "Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3")
    assert admit(pod("e", gpu="2")) == (
        False, "OutOfexample.com/gpu", "Node didn't have enough resource: example.com/gpu, requested: 2, used: 0, "
                                       "capacity: 1")
    unknown = pod("f")
    unknown["spec"]["containers"][0]["resources"]["requests"]["vendor.io/fpga"] = "1"
    assert admit(unknown)[0], "an extended resource the node does not have is not checked"


def test_requests_count_init_containers_sidecars_and_overhead() -> None:
    p = pod("p", cpu="100m")
    p["spec"]["initContainers"] = [{"name": "i", "resources": {"requests": {"cpu": "1"}}},
                                   {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "200m"}}}]
    p["spec"]["overhead"] = {"cpu": "50m"}
    assert pod_requests(p)["cpu"] == (1000 + 50) * 1_000_000  # max(init 1000, 100 + sidecar 200) + overhead


def test_affinity_ports_and_no_execute_taints() -> None:
    assert admit(pod("a", nodeSelector={"disk": "hdd"})) == (
        False, "NodeAffinity", "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector")
    assert admit(pod("b", nodeSelector={"disk": "ssd"}))[0]
    web = [{"containerPort": 80, "hostPort": 8080}]
    assert admit(pod("c", ports=web), [pod("o", ports=web)]) == (
        False, "NodePorts", "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports")
    assert admit(pod("d", ports=[{"containerPort": 80, "hostPort": 8080, "protocol": "UDP"}]),
                 [pod("o", ports=web)])[0]
    tainted = {**NODE, "spec": {"taints": [{"key": "gone", "effect": "NoExecute"}]}}
    assert admit(pod("e"), node=tainted) == (
        False, "TaintToleration", "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate")
    assert admit(pod("f", tolerations=[{"key": "gone", "operator": "Exists"}]), node=tainted)[0]
    assert admit(pod("g"))[0], "NoSchedule taints are the scheduler's business"
