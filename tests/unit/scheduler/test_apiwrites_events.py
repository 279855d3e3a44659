"""The scheduler's events: what kube-scheduler records through client-go's tools/events (reason,
action, note, related), and by which profile's recorder."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from kubecore.scheduler.apiwrites import ApiWrites, TaskSet, truncate_message

Obj = dict[str, Any]


class FakeRecorder:
    def __init__(self, name: str) -> None:
        self.name = name
        self.calls: list[tuple[Any, ...]] = []

    def eventf(self, regarding: Obj, related: Obj | None, event_type: str, reason: str, action: str,
               note: str) -> None:
        self.calls.append((regarding, related, event_type, reason, action, note))


class FakePods:
    def __init__(self) -> None:
        self.deleted: list[str] = []

    async def patch(self, name: str, patch: Obj, **_: Any) -> Obj:
        return {}

    async def delete(self, name: str, **_: Any) -> Obj:
        self.deleted.append(name)
        return {}


class FakeRest:
    def __init__(self) -> None:
        self.pods = FakePods()

    async def resource(self, api_version: str, resource: str) -> FakePods:
        return self.pods


def pod(name: str, scheduler: str | None = None, uid: str = "") -> Obj:
    spec: Obj = {"schedulerName": scheduler} if scheduler else {}
    meta: Obj = {"name": name, "namespace": "ns"}
    if uid:
        meta["uid"] = uid
    return {"metadata": meta, "spec": spec}


def make() -> tuple[ApiWrites, FakeRecorder, FakeRecorder, FakeRest]:
    default, other = FakeRecorder("default-scheduler"), FakeRecorder("other")
    rest = FakeRest()
    writes = ApiWrites(rest, {"default-scheduler": default, "other": other},  # type: ignore[arg-type]
                       tasks=TaskSet(), lookup=lambda key: None)
    return writes, default, other, rest


def test_scheduled_is_a_binding_event_of_the_pods_profile() -> None:
    writes, default, other, _ = make()
    writes.scheduled(SimpleNamespace(assumed=SimpleNamespace(pod=pod("a", "other", uid="u1")), node="n1"))  # type: ignore[arg-type]
    assert default.calls == []
    assert other.calls == [({"kind": "Pod", "apiVersion": "v1", "namespace": "ns", "name": "a", "uid": "u1"}, None,
                            "Normal", "Scheduled", "Binding", "Successfully assigned ns/a to n1")]


def test_skipped_is_a_scheduling_warning() -> None:
    writes, default, _, _ = make()
    writes.skipped(pod("d"))
    assert [c[2:] for c in default.calls] == [("Warning", "FailedScheduling", "Scheduling",
                                               "skip schedule deleting pod: ns/d")]


def test_failed_cuts_the_note_to_1024_characters() -> None:
    writes, default, _, _ = make()
    failed = SimpleNamespace(pinfo=SimpleNamespace(pod=pod("big"), key="ns/big"), message="x" * 2000,
                             reason="Unschedulable", nominating=None)
    writes.failed(failed)  # type: ignore[arg-type]
    (_, related, kind, reason, action, note), = default.calls
    assert (related, kind, reason, action) == (None, "Warning", "FailedScheduling", "Scheduling")
    assert note == "x" * 1020 + " ..."


def test_truncate_message_counts_bytes_and_keeps_whole_characters() -> None:
    assert truncate_message("é" * 512) == "é" * 512  # exactly 1024 bytes
    cut = truncate_message("é" * 600)
    assert cut == "é" * 510 + " ..." and len(cut.encode()) == 1024
    cut = truncate_message("a" + "é" * 600)  # the 1020-byte cut falls inside a character
    assert cut == "a" + "é" * 509 + " ..." and len(cut.encode()) == 1023


def test_preempted_names_the_preemptor_and_uses_its_profile() -> None:
    writes, default, other, rest = make()
    victim, preemptor = pod("victim", uid="v1"), pod("high", "other", uid="p1")
    assert asyncio.run(writes._evict(victim, preemptor, "n3"))
    assert rest.pods.deleted == ["victim"]
    assert default.calls == []  # the victim's own profile does not report the preemption
    (regarding, related, kind, reason, action, note), = other.calls
    assert regarding["name"] == "victim" and related is not None and related["name"] == "high"
    assert (kind, reason, action, note) == ("Normal", "Preempted", "Preempting", "Preempted by pod p1 on node n3")


def test_a_pod_of_no_profile_records_nothing() -> None:
    writes, default, other, _ = make()
    writes.skipped(pod("x", "somebody-else"))
    assert default.calls == [] and other.calls == []
