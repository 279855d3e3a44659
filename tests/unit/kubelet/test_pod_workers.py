"""Pod workers: serial per pod, coalescing, the termination states, re-queues on the fake clock."""

from __future__ import annotations

import asyncio

from kubecore.client.clock import FakeClock, settle
from kubecore.kubelet.pod_workers import PodWork, PodWorkers, SyncOutcome, WorkState
from kubecore.kubelet.timers import Spawner, Timers


class Syncer:
    """Records calls; `gate` (when set) holds sync_pod until released, to test concurrency."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.outcomes: list[SyncOutcome] = []
        self.gate: asyncio.Event | None = None
        self.active = 0
        self.max_active = 0
        self.raise_next = False
        self.graces: list[int | None] = []

    async def _enter(self, what: str, work: PodWork) -> None:
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        self.calls.append((what, work.uid))
        try:
            if self.gate is not None:
                await self.gate.wait()
            await asyncio.sleep(0)
        finally:
            self.active -= 1

    async def sync_pod(self, work: PodWork) -> SyncOutcome:
        await self._enter("sync", work)
        if self.raise_next:
            self.raise_next = False
            raise RuntimeError("boom")
        return self.outcomes.pop(0) if self.outcomes else SyncOutcome()

    async def sync_terminating_pod(self, work: PodWork, grace: int | None) -> None:
        self.graces.append(grace)
        await self._enter("terminating", work)

    async def sync_terminated_pod(self, work: PodWork) -> None:
        await self._enter("terminated", work)

    async def forget(self, work: PodWork) -> None:
        self.calls.append(("forget", work.uid))


def setup() -> tuple[FakeClock, Syncer, PodWorkers, Timers]:
    clock = FakeClock()
    timers = Timers(clock)
    timers.start()
    syncer = Syncer()
    return clock, syncer, PodWorkers(syncer, timers=timers, spawner=Spawner()), timers


def kinds(syncer: Syncer) -> list[str]:
    return [k for k, _ in syncer.calls]


async def test_updates_during_a_sync_coalesce_into_one_more_pass() -> None:
    _, syncer, workers, timers = setup()
    syncer.gate = asyncio.Event()
    workers.update_pod("u1", "ns/a")
    await settle()
    for _ in range(5):
        workers.update_pod("u1", "ns/a")
    syncer.gate.set()
    await settle()
    assert kinds(syncer) == ["sync", "sync"]
    assert syncer.max_active == 1
    assert not workers.get("u1").running  # type: ignore[union-attr]
    await timers.stop()


async def test_pods_are_independent_but_each_is_serial() -> None:
    _, syncer, workers, timers = setup()
    syncer.gate = asyncio.Event()
    workers.update_pod("u1", "ns/a")
    workers.update_pod("u2", "ns/b")
    await settle()
    assert syncer.active == 2
    syncer.gate.set()
    await settle()
    await timers.stop()


async def test_terminal_sync_goes_through_terminating_and_terminated() -> None:
    _, syncer, workers, timers = setup()
    syncer.outcomes = [SyncOutcome(terminal=True)]
    workers.update_pod("u1", "ns/a")
    await settle()
    assert kinds(syncer) == ["sync", "terminating", "terminated"]
    assert workers.get("u1").state == WorkState.FINISHED  # type: ignore[union-attr]
    workers.update_pod("u1", "ns/a")  # finished pods ignore updates
    await settle()
    assert len(syncer.calls) == 3
    workers.update_pod("u1", "ns/a", removed_pod={"metadata": {"uid": "u1"}})
    await settle()
    assert kinds(syncer)[-1] == "forget" and workers.get("u1") is None
    await timers.stop()


async def test_an_update_while_the_pod_finishes_does_not_forget_it() -> None:
    # the pod's own status write (or a probe) sends an update while sync_terminated_pod runs: the
    # pod must stay known (its status manager entry makes the final delete) until it is removed
    _, syncer, workers, timers = setup()
    syncer.outcomes = [SyncOutcome(terminal=True)]
    workers.update_pod("u1", "ns/a")
    await settle()
    assert kinds(syncer) == ["sync", "terminating", "terminated"]
    workers.get("u1").state = WorkState.TERMINATED  # type: ignore[union-attr]
    syncer.gate = asyncio.Event()
    workers.update_pod("u1", "ns/a", kill=True)  # runs sync_terminated_pod again, held by the gate
    await settle()
    workers.update_pod("u1", "ns/a")  # arrives while it finishes
    syncer.gate.set()
    await settle()
    assert kinds(syncer) == ["sync", "terminating", "terminated", "terminated"]
    assert workers.get("u1") is not None and workers.get("u1").state == WorkState.FINISHED  # type: ignore[union-attr]
    workers.update_pod("u1", "ns/a", removed_pod={"metadata": {"uid": "u1"}})
    await settle()
    assert kinds(syncer)[-1] == "forget" and workers.get("u1") is None
    await timers.stop()


async def test_a_kill_during_a_sync_terminates_next_with_the_smallest_grace() -> None:
    _, syncer, workers, timers = setup()
    syncer.gate = asyncio.Event()
    workers.update_pod("u1", "ns/a")
    await settle()
    workers.update_pod("u1", "ns/a", kill=True, grace=30)
    workers.update_pod("u1", "ns/a", kill=True, grace=5)
    workers.update_pod("u1", "ns/a", kill=True, grace=20)
    syncer.gate.set()
    await settle()
    assert kinds(syncer) == ["sync", "terminating", "terminated"]
    assert syncer.graces == [5]
    await timers.stop()


async def test_a_removed_pod_is_terminated_then_forgotten() -> None:
    _, syncer, workers, timers = setup()
    workers.update_pod("u1", "ns/a")
    await settle()
    workers.update_pod("u1", "ns/a", removed_pod={"metadata": {"uid": "u1"}})
    await settle()
    assert kinds(syncer) == ["sync", "terminating", "terminated", "forget"]
    assert len(workers) == 0
    await timers.stop()


async def test_a_pod_seen_terminal_at_start_skips_to_terminated() -> None:
    _, syncer, workers, timers = setup()
    workers.update_pod("u1", "ns/a", start_terminated=True)
    await settle()
    assert kinds(syncer) == ["terminated"]
    await timers.stop()


async def test_again_resyncs_once_and_retry_after_requeues_on_the_clock() -> None:
    clock, syncer, workers, timers = setup()
    syncer.outcomes = [SyncOutcome(again=True), SyncOutcome(again=True, retry_after=10), SyncOutcome()]
    workers.update_pod("u1", "ns/a")
    await settle()
    assert kinds(syncer) == ["sync", "sync"]  # the second "again" is not followed
    await clock.run_for(9)
    assert len(syncer.calls) == 2
    await clock.run_for(1)
    assert len(syncer.calls) == 3
    await timers.stop()


async def test_an_earlier_requeue_wins() -> None:
    clock, syncer, workers, timers = setup()
    workers.update_pod("u1", "ns/a")
    await settle()
    workers.requeue("u1", 10)
    workers.requeue("u1", 3)
    workers.requeue("u1", 7)
    await clock.run_for(3)
    assert len(syncer.calls) == 2
    await clock.run_for(10)
    assert len(syncer.calls) == 2
    await timers.stop()


async def test_a_failing_sync_is_retried_after_the_backoff_period() -> None:
    clock, syncer, workers, timers = setup()
    syncer.raise_next = True
    workers.update_pod("u1", "ns/a")
    await settle()
    assert len(syncer.calls) == 1
    await clock.run_for(10)
    assert len(syncer.calls) == 2
    await timers.stop()


async def test_could_have_running_containers_until_terminated() -> None:
    _, syncer, workers, timers = setup()
    syncer.gate = asyncio.Event()
    workers.update_pod("u1", "ns/a", kill=True)
    await settle()
    assert workers.could_have_running_containers("u1") and not workers.is_terminated("u1")
    syncer.gate.set()
    await settle()
    assert not workers.could_have_running_containers("u1") and workers.is_terminated("u1")
    await timers.stop()
