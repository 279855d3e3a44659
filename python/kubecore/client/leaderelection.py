"""Leader election over a coordination.k8s.io/v1 Lease, with client-go's semantics.

A set of candidates share one Lease. Whoever holds it (spec.holderIdentity) and keeps renewing it
(spec.renewTime) leads; the others retry every `retry_period` and take over once the lease has not
changed for `lease_duration` as measured on *their own* clock. Timestamps inside the Lease are never
compared with local time, only checked for change, so clock skew between candidates does not
matter (a skew *rate* does: keep lease_duration / renew_deadline above the tolerated ratio).
Writes use the Lease's resourceVersion (optimistic concurrency): of two candidates racing for an
expired lease, the API server lets exactly one update win; the other gets 409 Conflict.

Guarantees and duties, as in client-go's tools/leaderelection:

- `run()` first acquires (retrying every retry_period * [1, 2.2) jittered), then starts
  `on_started_leading()` as a task and renews: each round retries every `retry_period` for at most
  `renew_deadline`; a round that does not succeed ends the leadership. The `on_started_leading` task is
  then cancelled and awaited (the caller's guarded code has stopped before `run()` returns), and
  `on_stopped_leading()` is called. `run()` returns; it never re-acquires (start it again if wanted).
- `on_stopped_leading()` is called whenever `run()` ends, also when it never led.
- `on_new_leader(identity)` is called when the observed holder differs from the last reported one,
  including the first holder seen (and "" after a holder released the lease).
- `release_on_cancel=True`: when `run()` ends (cancelled, or renewal lost) while we hold the lease,
  the lease is rewritten with holderIdentity "" and leaseDurationSeconds 1 so a standby takes over
  at once instead of waiting out the lease. Only safe if nothing guarded still runs, which `run()`
  ensures by awaiting the cancelled `on_started_leading` task first.
- This is not fencing: a leader that is partitioned keeps believing it leads until its renew
  deadline passes, so renew_deadline < lease_duration is required (defaults 15 s / 10 s / 2 s).

The Lease is reached through `LeaseClient`, a three-method protocol (`sinks.RestApiSink` implements
it; tests use an in-memory one). It must raise `kubecore.client.errors.NotFound` for 404 and
`Conflict` (or its subclass `AlreadyExists`) for 409.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Protocol

from kubecore.client.errors import Conflict, NotFound
from kubecore.client.clock import REAL_CLOCK, Clock

log = logging.getLogger(__name__)

JITTER_FACTOR = 1.2
DEFAULT_LEASE_DURATION = 15.0
DEFAULT_RENEW_DEADLINE = 10.0
DEFAULT_RETRY_PERIOD = 2.0


def micro_time(t: float) -> str:
    """metav1.MicroTime text for epoch seconds `t`: "2006-01-02T15:04:05.000000Z"."""
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseClient(Protocol):
    """What leader election needs from an API client. Lease objects are plain JSON dicts."""

    async def get_lease(self, namespace: str, name: str) -> dict[str, Any]: ...

    async def create_lease(self, lease: dict[str, Any]) -> dict[str, Any]:
        """POST `lease` into metadata.namespace."""
        ...

    async def update_lease(self, lease: dict[str, Any]) -> dict[str, Any]:
        """PUT `lease` (metadata.namespace/name; metadata.resourceVersion guards the write)."""
        ...


@dataclass(frozen=True)
class LeaderElectionRecord:
    """The election state a Lease spec carries (times kept as the MicroTime text written)."""

    holder_identity: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str | None = None
    renew_time: str | None = None
    leader_transitions: int = 0

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> LeaderElectionRecord:
        return cls(
            holder_identity=spec.get("holderIdentity") or "",
            lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=spec.get("acquireTime"),
            renew_time=spec.get("renewTime"),
            leader_transitions=int(spec.get("leaseTransitions") or 0),
        )

    def to_spec(self) -> dict[str, Any]:
        return {
            "holderIdentity": self.holder_identity,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "acquireTime": self.acquire_time,
            "renewTime": self.renew_time,
            "leaseTransitions": self.leader_transitions,
        }


class LeaseLock:
    """One Lease used as a lock: remembers the last object seen so updates carry its
    resourceVersion (client-go's resourcelock.LeaseLock)."""

    def __init__(self, client: LeaseClient, *, namespace: str, name: str, identity: str,
                 labels: dict[str, str] | None = None) -> None:
        if not identity:
            raise ValueError("a lease lock needs a non-empty identity")
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self._labels = labels
        self._lease: dict[str, Any] | None = None

    def describe(self) -> str:
        return f"{self.namespace}/{self.name}"

    async def get(self) -> tuple[LeaderElectionRecord, dict[str, Any]]:
        """The current record and the raw spec it came from (raises NotFound)."""
        lease = await self.client.get_lease(self.namespace, self.name)
        self._lease = lease
        spec = dict(lease.get("spec") or {})
        return LeaderElectionRecord.from_spec(spec), spec

    async def create(self, record: LeaderElectionRecord) -> None:
        meta: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if self._labels:
            meta["labels"] = dict(self._labels)
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
                "spec": record.to_spec()}
        self._lease = await self.client.create_lease(body)

    async def update(self, record: LeaderElectionRecord) -> None:
        """Write `record` over the last Lease seen; Conflict if it changed meanwhile."""
        if self._lease is None:
            raise RuntimeError("lease not initialized: call get or create first")
        lease = dict(self._lease)
        lease["spec"] = record.to_spec()
        if self._labels:
            meta = dict(lease.get("metadata") or {})
            meta["labels"] = {**(meta.get("labels") or {}), **self._labels}
            lease["metadata"] = meta
        self._lease = await self.client.update_lease(lease)


class LeaderElector:
    """Runs one candidate's election loop (see the module docstring for the guarantees)."""

    def __init__(
        self,
        lock: LeaseLock,
        *,
        on_started_leading: Callable[[], Awaitable[None]],
        on_stopped_leading: Callable[[], None] | None = None,
        on_new_leader: Callable[[str], None] | None = None,
        lease_duration: float = DEFAULT_LEASE_DURATION,
        renew_deadline: float = DEFAULT_RENEW_DEADLINE,
        retry_period: float = DEFAULT_RETRY_PERIOD,
        release_on_cancel: bool = False,
        clock: Clock = REAL_CLOCK,
        rng: random.Random | None = None,
    ) -> None:
        if lease_duration < 1:
            raise ValueError("lease_duration must be at least 1 second (the Lease stores whole seconds)")
        if lease_duration <= renew_deadline:
            raise ValueError("lease_duration must be greater than renew_deadline")
        if retry_period <= 0 or renew_deadline <= JITTER_FACTOR * retry_period:
            raise ValueError("renew_deadline must be greater than retry_period * 1.2, and retry_period positive")
        self.lock = lock
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._on_new_leader = on_new_leader
        self._lease_duration = lease_duration
        self._renew_deadline = renew_deadline
        self._retry = retry_period
        self._release_on_cancel = release_on_cancel
        self._clock = clock
        self._rng = rng or random.Random()
        # What we last saw in (or wrote to) the Lease, and when (our clock) it last changed.
        self._observed = LeaderElectionRecord()
        self._observed_raw: dict[str, Any] | None = None
        self._observed_time = 0.0
        self._reported_leader = ""

    @property
    def leader(self) -> str:
        """The last observed holder ("" if none seen yet). Informational."""
        return self._observed.holder_identity

    @property
    def is_leader(self) -> bool:
        return self._observed.holder_identity == self.lock.identity

    @property
    def observed_record(self) -> LeaderElectionRecord:
        return self._observed

    async def run(self) -> None:
        """Acquire, lead until the lease is lost or this task is cancelled, then stop."""
        try:
            await self._acquire()
            leading = asyncio.get_running_loop().create_task(
                self._lead(), name=f"leading:{self.lock.describe()}")
            try:
                await self._renew()
            finally:
                leading.cancel()
                await asyncio.wait({leading})
                if self._release_on_cancel:
                    await self._bounded(self._try_release(), self._renew_deadline)
        finally:
            if self._on_stopped is not None:
                self._on_stopped()

    async def _lead(self) -> None:
        try:
            await self._on_started()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("on_started_leading failed (%s)", self.lock.describe())

    async def _acquire(self) -> None:
        log.info("attempting to acquire leader lease %s", self.lock.describe())
        while True:
            ok = await self._try_acquire_or_renew()
            self._maybe_report_transition()
            if ok:
                log.info("acquired lease %s", self.lock.describe())
                return
            await self._clock.sleep(self._retry * (1.0 + JITTER_FACTOR * self._rng.random()))

    async def _renew(self) -> None:
        while True:
            ok = await self._renew_round()
            self._maybe_report_transition()
            if not ok:
                log.info("failed to renew lease %s within %ss", self.lock.describe(), self._renew_deadline)
                return
            await self._clock.sleep(self._retry)

    async def _renew_round(self) -> bool:
        """Try every retry_period until one renewal succeeds or renew_deadline has passed."""
        deadline = self._clock.now() + self._renew_deadline
        while True:
            remaining = deadline - self._clock.now()
            if remaining <= 0:
                return False
            if await self._bounded(self._try_acquire_or_renew(), remaining):
                return True
            remaining = deadline - self._clock.now()
            if remaining <= 0:
                return False
            await self._clock.sleep(min(self._retry, remaining))

    async def _bounded(self, attempt: Awaitable[bool], seconds: float) -> bool:
        """`attempt`'s answer, or False if it takes longer than `seconds` on our clock (then it is
        cancelled)."""
        task = asyncio.ensure_future(attempt)
        timer = asyncio.ensure_future(self._clock.sleep(seconds))
        try:
            await asyncio.wait({task, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            if not task.done():
                task.cancel()
        if not task.done():
            await asyncio.wait({task})
            return False
        return (not task.cancelled()) and task.result()

    async def _try_acquire_or_renew(self) -> bool:
        try:
            return await self._try_acquire_or_renew_once()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # API errors and transport failures alike: retry later
            log.debug("lease %s: %s", self.lock.describe(), e)
            return False

    async def _try_acquire_or_renew_once(self) -> bool:
        now = self._clock.now()
        stamp = micro_time(now)
        ours = LeaderElectionRecord(holder_identity=self.lock.identity,
                                    lease_duration_seconds=int(self._lease_duration),
                                    acquire_time=stamp, renew_time=stamp)
        # 1. The leader's fast path: update assuming the record we last saw is still current.
        if self.is_leader and self._lease_valid(now):
            fast = _renewed(ours, self._observed)
            try:
                await self.lock.update(fast)
            except Exception as e:
                log.debug("lease %s: fast renew failed (%s), taking the slow path", self.lock.describe(), e)
            else:
                self._set_observed(fast)
                return True
        # 2. Get the record, or create the Lease when there is none.
        try:
            old, raw = await self.lock.get()
        except NotFound:
            await self.lock.create(ours)
            self._set_observed(ours)
            return True
        # 3. A changed record restarts the expiry countdown.
        if raw != self._observed_raw:
            self._set_observed(old)
            self._observed_raw = raw
        if old.holder_identity and self._lease_valid(now) and not self.is_leader:
            return False  # held by someone else, not expired
        # 4. Take over (one more transition) or renew (keep acquireTime and the count).
        if self.is_leader:
            record = _renewed(ours, old)
        else:
            record = LeaderElectionRecord(holder_identity=ours.holder_identity,
                                          lease_duration_seconds=ours.lease_duration_seconds,
                                          acquire_time=stamp, renew_time=stamp,
                                          leader_transitions=old.leader_transitions + 1)
        await self.lock.update(record)
        self._set_observed(record)
        return True

    async def _try_release(self) -> bool:
        """Give the lease up if we hold it: holderIdentity "" and a 1 s duration."""
        while True:
            try:
                old, _ = await self.lock.get()
            except NotFound:
                return False
            except Exception as e:
                log.warning("lease %s: cannot read it to release: %s", self.lock.describe(), e)
                return False
            if not self.is_leader:
                return True
            stamp = micro_time(self._clock.now())
            record = LeaderElectionRecord(holder_identity="", lease_duration_seconds=1, acquire_time=stamp,
                                          renew_time=stamp, leader_transitions=old.leader_transitions)
            try:
                await self.lock.update(record)
            except Conflict:
                continue  # raced with our own in-flight renewal: read again
            except Exception as e:
                log.warning("lease %s: release failed: %s", self.lock.describe(), e)
                return False
            self._set_observed(record)
            return True

    def _lease_valid(self, now: float) -> bool:
        return self._observed_time + self._observed.lease_duration_seconds > now

    def _set_observed(self, record: LeaderElectionRecord) -> None:
        self._observed = record
        self._observed_time = self._clock.now()

    def _maybe_report_transition(self) -> None:
        holder = self._observed.holder_identity
        if holder == self._reported_leader:
            return
        self._reported_leader = holder
        if self._on_new_leader is not None:
            try:
                self._on_new_leader(holder)
            except Exception:
                log.exception("on_new_leader failed (%s)", self.lock.describe())


def _renewed(ours: LeaderElectionRecord, previous: LeaderElectionRecord) -> LeaderElectionRecord:
    """Our fresh record, keeping the acquire time and transition count of our current term."""
    return LeaderElectionRecord(holder_identity=ours.holder_identity,
                                lease_duration_seconds=ours.lease_duration_seconds,
                                acquire_time=previous.acquire_time, renew_time=ours.renew_time,
                                leader_transitions=previous.leader_transitions)


class ElectionOptions(Protocol):
    """The leader-election settings a component's options carry (the controller manager's and the
    scheduler's have these fields)."""

    lease_namespace: str
    lease_name: str
    lease_duration: float
    renew_deadline: float
    retry_period: float
    release_on_cancel: bool
    exit_on_lost_lease: bool


async def compete_and_lead(client: LeaseClient, options: ElectionOptions, *, component: str, identity: str,
                           lead: Callable[[], Awaitable[None]], clock: Clock = REAL_CLOCK) -> int:
    """A component's life under leader election: compete for the Lease, run `lead()` while holding
    it; when leadership is lost, return 1 (upstream's components exit, to start clean) or, with
    `exit_on_lost_lease` False, compete again. Runs until cancelled otherwise."""
    while True:
        lock = LeaseLock(client, namespace=options.lease_namespace, name=options.lease_name, identity=identity)
        elector = LeaderElector(
            lock, on_started_leading=lead,
            on_new_leader=lambda who: log.info("%s: the leader is now %r", component, who),
            lease_duration=options.lease_duration, renew_deadline=options.renew_deadline,
            retry_period=options.retry_period, release_on_cancel=options.release_on_cancel, clock=clock)
        await elector.run()
        if options.exit_on_lost_lease:
            log.error("%s %s: leader election lost", component, identity)
            return 1
        log.warning("%s %s: leadership lost; competing again", component, identity)
