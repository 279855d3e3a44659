"""The pod status the kubelet reports: phase (getPhase), conditions, container statuses."""

from __future__ import annotations

from typing import Any

import pytest

from kubecore.kubelet.backoff import ReasonCache
from kubecore.kubelet.cri import ContainerState
from kubecore.kubelet.runtime_status import PodRuntimeStatus
from kubecore.kubelet.status_gen import generate_pod_status, get_phase
from tests.unit.kubelet.kubelet_fixtures import (
    NOW, UID, container, exited, make_pod, running, runtime_status, sandbox, view,
)

Obj = dict[str, Any]


class Readiness:
    def __init__(self, ready: dict[str, str] | None = None, startup: dict[str, str] | None = None) -> None:
        self._r, self._s = ready or {}, startup or {}

    def readiness(self, cid: str) -> str | None:
        return self._r.get(cid)

    def startup(self, cid: str) -> str | None:
        return self._s.get(cid)


def gen(pod: Obj, rs: PodRuntimeStatus | None, *, old: Obj | None = None, terminal: bool = False,
        reasons: ReasonCache | None = None, probes: Readiness | None = None, now: float = NOW + 5) -> Obj:
    return generate_pod_status(pod, rs, old=old or {}, pod_is_terminal=terminal, reasons=reasons, probes=probes,
                               host_ips=["172.16.0.1"], runtime_name="sim", now=now)


def conditions(status: Obj) -> dict[str, tuple[str, str, str]]:
    return {c["type"]: (c["status"], c.get("reason", ""), c.get("message", "")) for c in status["conditions"]}


def cs(state: str, **fields: Any) -> Obj:
    return {"name": fields.pop("name", "app"), "state": {state: fields.pop("detail", {})}, **fields}


@pytest.mark.parametrize("policy,statuses,terminal,phase", [
    ("Always", [cs("waiting", detail={"reason": "ContainerCreating"})], False, "Pending"),
    ("Always", [cs("running")], False, "Running"),
    ("Always", [cs("terminated", detail={"exitCode": 0})], False, "Running"),
    ("Never", [cs("terminated", detail={"exitCode": 0})], False, "Succeeded"),
    ("Never", [cs("terminated", detail={"exitCode": 1})], False, "Failed"),
    ("OnFailure", [cs("terminated", detail={"exitCode": 1})], False, "Running"),
    ("OnFailure", [cs("terminated", detail={"exitCode": 0})], False, "Succeeded"),
    ("Always", [cs("terminated", detail={"exitCode": 0})], True, "Succeeded"),
    ("Always", [cs("terminated", detail={"exitCode": 137})], True, "Failed"),
    ("Always", [cs("waiting", lastState={"terminated": {"exitCode": 1}})], False, "Running"),
    ("Always", [], False, "Pending"),
])
def test_get_phase(policy: str, statuses: list[Obj], terminal: bool, phase: str) -> None:
    assert get_phase(make_pod(restart_policy=policy), [], statuses, pod_is_terminal=terminal) == phase


def test_phase_with_init_containers() -> None:
    pod = make_pod(init=[container("i1")], restart_policy="Never")
    assert get_phase(pod, [cs("running", name="i1")], [cs("waiting", detail={"reason": "PodInitializing"})],
                     pod_is_terminal=False) == "Pending"
    assert get_phase(pod, [cs("terminated", name="i1", detail={"exitCode": 2})],
                     [cs("waiting", detail={"reason": "PodInitializing"})], pod_is_terminal=False) == "Failed"


def test_a_new_pod_is_pending_with_container_creating() -> None:
    status = gen(make_pod(), None)
    assert status["phase"] == "Pending"
    assert status["containerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}
    assert status["containerStatuses"][0]["image"] == "busybox:1.36"
    c = conditions(status)
    assert c["PodReadyToStartContainers"][0] == "False"
    assert c["Ready"] == ("False", "ContainersNotReady", "containers with unready status: [app]")
    assert c["ContainersReady"] == c["Ready"] and c["Initialized"][0] == "True" and c["PodScheduled"][0] == "True"
    assert status["startTime"] == "2024-01-02T03:04:10Z" and status["qosClass"] == "BestEffort"
    assert status["hostIP"] == "172.16.0.1" and "podIP" not in status


def test_a_running_pod_is_ready_with_ip_and_container_details() -> None:
    rs = runtime_status(running("app", cid="abc", started=1))
    status = gen(make_pod(), rs)
    assert status["phase"] == "Running" and status["podIP"] == "10.128.0.2"
    assert status["podIPs"] == [{"ip": "10.128.0.2"}]
    c0 = status["containerStatuses"][0]
    assert c0["state"] == {"running": {"startedAt": "2024-01-02T03:04:06Z"}}
    assert c0["containerID"] == "sim://abc" and c0["ready"] is True and c0["started"] is True
    assert c0["imageID"] == "docker.io/library/busybox@sha256:abc" and c0["restartCount"] == 0
    assert all(v[0] == "True" for v in conditions(status).values())
    assert status["observedGeneration"] == 1
    assert all(c["observedGeneration"] == 1 for c in status["conditions"])


def test_readiness_probe_gates_ready() -> None:
    pod = make_pod(containers=[container("app", readinessProbe={"httpGet": {"port": 80}})])
    rs = runtime_status(running("app", cid="abc"))
    assert conditions(gen(pod, rs))["Ready"][0] == "False"   # no result yet
    assert conditions(gen(pod, rs, probes=Readiness(ready={"abc": "Failure"})))["Ready"][0] == "False"
    assert conditions(gen(pod, rs, probes=Readiness(ready={"abc": "Success"})))["Ready"][0] == "True"


def test_startup_probe_gates_started_and_ready() -> None:
    pod = make_pod(containers=[container("app", startupProbe={"exec": {"command": ["true"]}})])
    rs = runtime_status(running("app", cid="abc"))
    c0 = gen(pod, rs)["containerStatuses"][0]
    assert c0["started"] is False and c0["ready"] is False
    c0 = gen(pod, rs, probes=Readiness(startup={"abc": "Success"}))["containerStatuses"][0]
    assert c0["started"] is True and c0["ready"] is True


def test_crash_loop_shows_waiting_with_the_cached_reason_and_the_last_termination() -> None:
    reasons = ReasonCache()
    reasons.add(UID, "app", "CrashLoopBackOff", "back-off 10s restarting failed container=app pod=web_default(x)")
    rs = runtime_status(exited("app", 1, cid="new", created=2, started=2, finished=3, restarts=1),
                        exited("app", 1, cid="old", created=0, started=0, finished=1))
    c0 = gen(make_pod(), rs, reasons=reasons)["containerStatuses"][0]
    assert c0["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert c0["lastState"]["terminated"]["exitCode"] == 1
    assert c0["lastState"]["terminated"]["containerID"] == "sim://new"
    assert c0["restartCount"] == 1


def test_a_succeeded_pod_reports_completed_conditions() -> None:
    rs = runtime_status(exited("app", 0), sandboxes=[sandbox(ready=False)])
    status = gen(make_pod(restart_policy="Never"), rs, old={"podIPs": [{"ip": "10.128.0.9"}]})
    assert status["phase"] == "Succeeded"
    c = conditions(status)
    assert c["Ready"] == ("False", "PodCompleted", "") and c["ContainersReady"] == ("False", "PodCompleted", "")
    assert c["Initialized"] == ("True", "PodCompleted", "")
    assert status["podIP"] == "10.128.0.9", "IPs of a stopped sandbox are kept from the old status"
    term = status["containerStatuses"][0]["state"]["terminated"]
    assert term["reason"] == "Completed" and term["exitCode"] == 0


def test_a_failed_pod_reports_pod_failed() -> None:
    rs = runtime_status(exited("app", 3))
    status = gen(make_pod(restart_policy="Never"), rs)
    assert status["phase"] == "Failed"
    assert conditions(status)["ContainersReady"] == ("False", "PodFailed", "")


def test_a_terminal_phase_never_goes_back() -> None:
    pod = make_pod(status={"phase": "Failed"})
    assert gen(pod, runtime_status(running("app")))["phase"] == "Failed"


def test_init_container_statuses_and_initialized_condition() -> None:
    pod = make_pod(init=[container("i1"), container("i2")])
    rs = runtime_status(running("i1"))
    status = gen(pod, rs)
    assert [s["name"] for s in status["initContainerStatuses"]] == ["i1", "i2"]
    assert status["initContainerStatuses"][1]["state"] == {"waiting": {"reason": "PodInitializing"}}
    assert status["containerStatuses"][0]["state"] == {"waiting": {"reason": "PodInitializing"}}
    assert conditions(status)["Initialized"] == ("False", "ContainersNotInitialized",
                                                 "containers with incomplete status: [i1 i2]")
    done = gen(pod, runtime_status(exited("i1", 0), exited("i2", 0), running("app", created=3)))
    assert conditions(done)["Initialized"][0] == "True"
    assert [s["ready"] for s in done["initContainerStatuses"]] == [True, True]


def test_transition_times_move_only_when_status_changes() -> None:
    pod = make_pod()
    first = gen(pod, None, now=NOW + 5)
    second = gen(pod, runtime_status(running("app")), old=first, now=NOW + 9)
    times = {c["type"]: c["lastTransitionTime"] for c in second["conditions"]}
    assert times["PodScheduled"] == "2024-01-02T03:04:10Z"     # True both times
    assert times["Ready"] == "2024-01-02T03:04:14Z"            # False -> True
    assert second["startTime"] == first["startTime"]


def test_a_container_that_vanished_while_running_is_reported_terminated() -> None:
    pod = make_pod()
    old = gen(pod, runtime_status(running("app")))
    status = gen(pod, runtime_status(), old=old)
    c0 = status["containerStatuses"][0]
    assert c0["lastState"]["terminated"]["reason"] == "ContainerStatusUnknown"
    assert c0["lastState"]["terminated"]["exitCode"] == 137 and c0["restartCount"] == 1


def test_unknown_runtime_state_after_running_is_terminated_unknown() -> None:
    pod = make_pod()
    old = gen(pod, runtime_status(running("app", cid="x")))
    status = gen(pod, runtime_status(view("app", ContainerState.CONTAINER_UNKNOWN, cid="x")), old=old)
    assert status["containerStatuses"][0]["state"]["terminated"]["reason"] == "ContainerStatusUnknown"


def test_qos_classes() -> None:
    guaranteed = container("g", resources={"limits": {"cpu": "1", "memory": "1Gi"}})
    burstable = container("b", resources={"requests": {"cpu": "100m"}})
    assert gen(make_pod(containers=[guaranteed]), None)["qosClass"] == "Guaranteed"
    assert gen(make_pod(containers=[burstable]), None)["qosClass"] == "Burstable"
    assert gen(make_pod(containers=[guaranteed, burstable]), None)["qosClass"] == "Burstable"
