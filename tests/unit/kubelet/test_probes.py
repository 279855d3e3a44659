"""Probe workers on a fake clock: periods, initial delay, thresholds, hold after liveness failure."""

from __future__ import annotations

from typing import Any

from kubecore.client.clock import FAKE_EPOCH, FakeClock, settle
from kubecore.kubelet.handlers import FAILURE, SUCCESS, Outcome, Target
from kubecore.kubelet.probes import ProbeManager
from kubecore.kubelet.timers import Spawner, Timers
from tests.unit.kubelet.kubelet_fixtures import UID, Events, container, make_pod

Obj = dict[str, Any]


class Answers:
    """Scripted probe answers; every probe call is counted."""

    def __init__(self) -> None:
        self.answer = SUCCESS
        self.calls: list[str] = []

    async def probe(self, kind: str, target: Target, probe: Obj) -> Outcome:
        self.calls.append(kind)
        return Outcome(self.answer, "" if self.answer == SUCCESS else "HTTP probe failed with statuscode: 500")

    async def hook(self, kind: str, target: Target, handler: Obj, *, timeout: float) -> str | None:
        return None


class World:
    def __init__(self, pod: Obj) -> None:
        self.clock = FakeClock()
        self.timers = Timers(self.clock)
        self.timers.start()
        self.pod = pod
        self.status: Obj | None = None
        self.answers = Answers()
        self.events = Events()
        self.changes: list[str] = []
        self.manager = ProbeManager(self.answers, clock=self.clock, timers=self.timers, spawner=Spawner(),
                                    record=self.events, status_lookup=lambda uid: self.status,
                                    pod_lookup=lambda uid: self.pod,
                                    on_result=lambda uid, kind: self.changes.append(kind))
        self.manager.add_pod(pod)

    def run(self, cid: str = "c1", started: bool = True, started_at: float = 0.0) -> None:
        self.status = {"phase": "Running", "containerStatuses": [{
            "name": "app", "containerID": f"sim://{cid}", "started": started,
            "state": {"running": {"startedAt": "2024-01-02T03:04:05Z"}}}]}
        if started_at:
            self.status["containerStatuses"][0]["state"]["running"]["startedAt"] = (
                "2024-01-02T03:04:%02dZ" % (5 + int(started_at)))

    async def stop(self) -> None:
        await self.timers.stop()


def probe(**fields: Any) -> Obj:
    return {"httpGet": {"port": 80, "path": "/"}, "periodSeconds": 10, "failureThreshold": 3, "successThreshold": 1,
            **fields}


async def test_readiness_starts_failed_and_turns_ready_on_success() -> None:
    w = World(make_pod(containers=[container("app", readinessProbe=probe())]))
    w.run()
    await w.clock.run_for(0)
    assert w.manager.readiness("c1") == SUCCESS
    assert w.changes == ["readiness", "readiness"]  # initial Failure, then Success
    await w.stop()


async def test_failure_threshold_counts_consecutive_failures() -> None:
    w = World(make_pod(containers=[container("app", readinessProbe=probe(failureThreshold=3))]))
    w.run()
    await w.clock.run_for(0)
    w.answers.answer = FAILURE
    await w.clock.run_for(20)
    assert w.manager.readiness("c1") == SUCCESS, "two failures are below the threshold"
    await w.clock.run_for(10)
    assert w.manager.readiness("c1") == FAILURE
    assert w.events.items[-1] == ("Warning", "Unhealthy", "Readiness probe failed: HTTP probe failed with statuscode: 500")
    await w.stop()


async def test_success_threshold() -> None:
    w = World(make_pod(containers=[container("app", readinessProbe=probe(successThreshold=2))]))
    w.run()
    await w.clock.run_for(0)
    assert w.manager.readiness("c1") == FAILURE
    await w.clock.run_for(10)
    assert w.manager.readiness("c1") == SUCCESS
    await w.stop()


async def test_initial_delay_is_measured_from_the_container_start() -> None:
    w = World(make_pod(containers=[container("app", readinessProbe=probe(initialDelaySeconds=15))]))
    w.run()
    await w.clock.run_for(10)
    assert w.answers.calls == []
    await w.clock.run_for(10)
    assert w.answers.calls == ["readiness"]
    await w.stop()


async def test_liveness_failure_holds_until_a_new_container() -> None:
    w = World(make_pod(containers=[container("app", livenessProbe=probe(failureThreshold=1))]))
    w.run()
    w.answers.answer = FAILURE
    await w.clock.run_for(0)
    assert w.manager.liveness("c1") == FAILURE and w.changes == ["liveness", "liveness"]  # Success, then Failure
    await w.clock.run_for(30)
    assert len(w.answers.calls) == 1, "on hold: no probing of the failed container"
    w.answers.answer = SUCCESS
    w.run(cid="c2")
    await w.clock.run_for(10)
    assert w.manager.liveness("c2") == SUCCESS and w.manager.liveness("c1") is None
    await w.stop()


async def test_liveness_and_readiness_wait_for_startup() -> None:
    w = World(make_pod(containers=[container("app", startupProbe=probe(), readinessProbe=probe())]))
    w.run(started=False)
    await w.clock.run_for(0)
    assert sorted(w.answers.calls) == ["startup"]
    assert w.manager.startup("c1") == SUCCESS
    w.run(started=True)
    await w.clock.run_for(10)
    assert sorted(w.answers.calls) == ["readiness", "startup"], "startup probes stop once started"
    await w.stop()


async def test_a_deleting_pod_reports_liveness_success() -> None:
    w = World(make_pod(containers=[container("app", livenessProbe=probe(failureThreshold=1))], deleting=True))
    w.run()
    w.answers.answer = FAILURE
    await w.clock.run_for(0)
    assert w.manager.liveness("c1") == SUCCESS and w.answers.calls == []
    await w.stop()


async def test_workers_stop_for_terminal_pods_and_on_remove() -> None:
    w = World(make_pod(containers=[container("app", readinessProbe=probe())]))
    w.run()
    await w.clock.run_for(0)
    assert len(w.manager) == 1
    w.status = {"phase": "Succeeded", "containerStatuses": []}
    await w.clock.run_for(10)
    assert len(w.manager) == 0
    w.manager.add_pod(w.pod)
    w.manager.remove_pod(UID)
    assert len(w.manager) == 0 and len(w.timers) == 0
    await w.stop()


async def test_trigger_probes_at_once_and_restarts_the_period() -> None:
    w = World(make_pod(containers=[container("app", readinessProbe=probe())]))
    await w.clock.run_for(0)  # no container yet
    w.run()
    w.clock.advance(4)
    w.manager.trigger(UID, "app")
    await settle()
    assert w.answers.calls == ["readiness"]
    await w.clock.run_for(9)
    assert len(w.answers.calls) == 1
    await w.clock.run_for(1)
    assert len(w.answers.calls) == 2 and w.clock.now() == FAKE_EPOCH + 14
    await w.stop()
