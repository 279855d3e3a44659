"""Writing pod statuses: only changes, coalesced, terminal phase held while containers may run,
the final delete with a uid precondition, and nothing written when the API already agrees."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from kubecore.client.clock import FakeClock, settle
from kubecore.client.errors import NotFound
from kubecore.kubelet.status_manager import StatusManager, StatusWriter
from kubecore.kubelet.timers import Timers
from tests.unit.kubelet.kubelet_fixtures import UID, make_pod

Obj = dict[str, Any]


class FakeRest:
    def __init__(self) -> None:
        self.requests: list[tuple[str, str, Obj]] = []
        self.gate: asyncio.Event | None = None
        self.fail_with: Exception | None = None

    async def request(self, method: str, path: str, *, body: bytes | None = None, content_type: str | None = None,
                      **_: Any) -> None:
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_with is not None:
            raise self.fail_with
        self.requests.append((method, path, msgspec.json.decode(body) if body else {}))


def status(phase: str = "Running", ip: str = "10.128.0.2", ready: str = "True") -> Obj:
    return {"phase": phase, "conditions": [{"type": "Ready", "status": ready}], "podIPs": [{"ip": ip}],
            "podIP": ip, "containerStatuses": []}


class World:
    def __init__(self, pod: Obj | None = None) -> None:
        self.clock = FakeClock()
        self.timers = Timers(self.clock)
        self.timers.start()
        self.rest = FakeRest()
        self.writer = StatusWriter(self.rest, timers=self.timers, workers=2)  # type: ignore[arg-type]
        self.writer.start()
        self.pod = pod or make_pod()
        self.running = True
        self.manager = StatusManager(self.writer, pod_lookup=lambda uid: self.pod,
                                     could_have_running_containers=lambda uid: self.running)

    async def stop(self) -> None:
        await self.writer.stop()
        await self.timers.stop()


async def test_writes_a_strategic_patch_with_the_uid_and_only_on_change() -> None:
    w = World()
    w.manager.set_pod_status(w.pod, status())
    await settle()
    assert len(w.rest.requests) == 1
    method, path, body = w.rest.requests[0]
    assert (method, path) == ("PATCH", "/api/v1/namespaces/default/pods/web/status")
    assert body["metadata"] == {"uid": UID} and body["status"]["phase"] == "Running"
    w.manager.set_pod_status(w.pod, status())
    await settle()
    assert len(w.rest.requests) == 1
    await w.stop()


async def test_updates_coalesce_while_a_write_is_in_flight() -> None:
    w = World()
    w.rest.gate = asyncio.Event()
    w.manager.set_pod_status(w.pod, status(ready="False"))
    await settle()
    for ready in ("True", "False", "True"):
        w.manager.set_pod_status(w.pod, status(ready=ready))
    w.rest.gate.set()
    await settle()
    assert [r[2]["status"]["conditions"][0]["status"] for r in w.rest.requests] == ["False", "True"]
    await w.stop()


async def test_nothing_is_written_when_the_api_already_has_it() -> None:
    api = status()
    w = World(make_pod(status=api))
    w.manager.set_pod_status(w.pod, dict(api))
    await settle()
    assert w.rest.requests == []
    assert w.manager.get_pod_status(UID) == api
    await w.stop()


async def test_a_changed_ip_is_deleted_from_the_merge_list() -> None:
    w = World()
    w.manager.set_pod_status(w.pod, status(ip="10.128.0.2"))
    await settle()
    w.manager.set_pod_status(w.pod, status(ip="10.128.0.3"))
    await settle()
    assert w.rest.requests[-1][2]["status"]["podIPs"] == [{"ip": "10.128.0.3"}, {"$patch": "delete", "ip": "10.128.0.2"}]
    await w.stop()


async def test_terminal_phase_is_held_until_termination_then_the_pod_is_deleted() -> None:
    w = World(make_pod(deleting=True, status={"phase": "Running"}))
    w.manager.set_pod_status(w.pod, status(phase="Failed"))
    await settle()
    sent = w.rest.requests[-1][2]["status"]
    assert sent["phase"] == "Running", "containers may still run: the terminal phase waits"
    w.running = False
    w.manager.terminate_pod(w.pod)
    await settle()
    methods = [(m, b["status"]["phase"] if m == "PATCH" else b.get("preconditions")) for m, _, b in w.rest.requests]
    assert methods[-2:] == [("PATCH", "Failed"), ("DELETE", {"uid": UID})]
    assert w.rest.requests[-1][2]["gracePeriodSeconds"] == 0
    assert w.rest.requests[-2][2]["status"]["conditions"][0] == {"type": "Ready", "status": "False",
                                                                   "reason": "PodFailed"}, \
        "a terminal phase is never written with Ready True"
    await w.stop()


async def test_terminate_pod_marks_unterminated_containers_unknown() -> None:
    w = World()
    running = status()
    running["containerStatuses"] = [{"name": "app", "state": {"running": {"startedAt": "x"}}}]
    running["conditions"].append({"type": "Initialized", "status": "True"})
    w.manager.set_pod_status(w.pod, running)
    w.running = False
    w.manager.terminate_pod(w.pod)
    got = w.manager.get_pod_status(UID)
    assert got is not None and got["phase"] == "Failed"
    assert got["containerStatuses"][0]["state"]["terminated"]["reason"] == "ContainerStatusUnknown"
    await w.stop()


async def test_a_pod_that_is_gone_is_dropped_and_errors_are_retried() -> None:
    w = World()
    w.rest.fail_with = RuntimeError("connection reset")
    w.manager.set_pod_status(w.pod, status())
    await settle()
    assert w.writer.failures == 1 and w.rest.requests == []
    w.rest.fail_with = None
    await w.clock.run_for(1)
    assert len(w.rest.requests) == 1
    w.rest.fail_with = NotFound({"reason": "NotFound"}, code=404)
    w.manager.set_pod_status(w.pod, status(phase="Pending"))
    await settle()
    w.rest.fail_with = None
    w.manager.set_pod_status(w.pod, status(phase="Running", ready="False"))
    await settle()
    assert len(w.rest.requests) == 1, "a pod that was not found is not written again"
    await w.stop()
