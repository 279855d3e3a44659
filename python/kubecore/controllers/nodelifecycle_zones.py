"""Per-zone, rate-limited NoExecute tainting: how fast the node lifecycle controller lets
evictions start when nodes fail (upstream nodelifecycle/scheduler/rate_limited_queue.go and
node_lifecycle_controller.go handleDisruption / setLimiterInZone / ReducedQPSFunc).

Tainting a failed node with not-ready/unreachable:NoExecute is what evicts its pods (the taint
eviction controller does the deleting), so the *tainting* is what gets rate limited, per zone
(`zone_key`: region + zone labels; one zone "" in a cluster without them):

- `RateLimitedTimedQueue`: a set-like queue of node names ordered by when to process them, each
  `try_(fn)` processing as many heads as a token bucket (burst 1) allows. A name is added only
  once until it is `remove`d (the node became healthy again); a processed name stays "seen" so
  a node is not tainted twice while it stays unhealthy. qps <= 0 means nothing is ever processed.
- `ZoneTracker`: every zone's state and queue. Each monitor pass gives it the Ready conditions
  per zone; a zone is FullDisruption with no Ready node, PartialDisruption with more than 2 and
  at least unhealthy-zone-threshold (0.55) not Ready, Normal otherwise; a new zone starts Initial.
  Rates: Normal -> node-eviction-rate (0.1/s); PartialDisruption -> secondary-node-eviction-rate
  (0.01/s) when the zone has more than large-cluster-size-threshold (50) nodes, else 0 (stop);
  FullDisruption -> node-eviction-rate, unless *every* zone is fully disrupted: then the
  control plane suspects itself (its network), stops all tainting and asks the caller to untaint
  every node (`ENTER_FULL_DISRUPTION`); when a zone comes back the caller resets every node's
  probe time (`EXIT_FULL_DISRUPTION`) so nodes are not declared dead for the outage.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.client.flowcontrol import TokenBucket
from kubecore.controllers.nodelifecycle_health import (
    STATE_FULL_DISRUPTION, STATE_INITIAL, STATE_NORMAL, STATE_PARTIAL_DISRUPTION, compute_zone_state,
)

log = logging.getLogger(__name__)

Obj = dict[str, Any]

EVICTION_RATE_LIMITER_BURST = 1
ENTER_FULL_DISRUPTION, EXIT_FULL_DISRUPTION = "enter", "exit"


@dataclass
class TimedValue:
    value: str
    uid: str
    added_at: float
    process_at: float
    seq: int


ActionFunc = Callable[[TimedValue], Awaitable[tuple[bool, float]]]
"""Process one value: (done, wait). Not done -> retried no sooner than `wait` seconds later."""


class RateLimitedTimedQueue:
    """Invariants: every value in `_queue` is in `_seen`; `_seen` may hold values already processed
    (they are not re-added until `remove`). `_limiter` None means "never" (qps <= 0)."""

    def __init__(self, qps: float, *, clock: Clock = REAL_CLOCK) -> None:
        self._clock = clock
        self._seq = itertools.count()
        self._queue: dict[str, TimedValue] = {}
        self._seen: set[str] = set()
        self.qps = qps
        self._limiter = self._new_limiter(qps)

    def _new_limiter(self, qps: float) -> TokenBucket | None:
        return TokenBucket(qps, EVICTION_RATE_LIMITER_BURST, clock=self._clock) if qps > 0 else None

    def _accept(self) -> bool:
        return self._limiter is not None and self._limiter.try_accept()

    def __len__(self) -> int:
        return len(self._queue)

    def __contains__(self, value: object) -> bool:
        return value in self._queue

    def add(self, value: str, uid: str) -> bool:
        """Queue `value` for now unless it was added and not removed since; True if added."""
        if value in self._seen:
            return False
        now = self._clock.now()
        self._queue[value] = TimedValue(value, uid, now, now, next(self._seq))
        self._seen.add(value)
        return True

    def remove(self, value: str) -> bool:
        """Forget `value` entirely (it may be added again); True if it was known."""
        if value not in self._seen:
            return False
        self._seen.discard(value)
        self._queue.pop(value, None)
        return True

    def clear(self) -> None:
        self._queue.clear()
        self._seen.clear()

    def head(self) -> TimedValue | None:
        if not self._queue:
            return None
        return min(self._queue.values(), key=lambda v: (v.process_at, v.seq))

    async def try_(self, fn: ActionFunc) -> None:
        """Process heads while the limiter gives tokens and their time has come (Try)."""
        val = self.head()
        while val is not None:
            if not self._accept():
                break
            now = self._clock.now()
            if now < val.process_at:
                break
            done, wait = await fn(val)
            if val.value in self._queue:
                if done:
                    del self._queue[val.value]  # stays in _seen
                else:
                    val.process_at = now + wait + 1e-9
            val = self.head()

    def swap_limiter(self, qps: float) -> None:
        """Change the rate; a new bucket is drained if the old one was empty (SwapLimiter)."""
        if qps == self.qps:
            return
        limiter = self._new_limiter(qps)
        if limiter is not None and not self._accept():
            limiter.try_accept()
        self._limiter, self.qps = limiter, qps


class ZoneTracker:
    """Zone states and each zone's tainting queue (see the module docstring)."""

    def __init__(self, *, eviction_qps: float, secondary_eviction_qps: float, large_cluster_threshold: int,
                 unhealthy_zone_threshold: float, clock: Clock = REAL_CLOCK) -> None:
        self.eviction_qps = eviction_qps
        self.secondary_eviction_qps = secondary_eviction_qps
        self.large_cluster_threshold = large_cluster_threshold
        self.unhealthy_zone_threshold = unhealthy_zone_threshold
        self.clock = clock
        self.zone_states: dict[str, str] = {}
        self.tainters: dict[str, RateLimitedTimedQueue] = {}

    def ensure_zone(self, zone: str) -> bool:
        """Start tracking a zone not seen before (addPodEvictorForNewZone); True if new."""
        if zone in self.zone_states:
            return False
        self.zone_states[zone] = STATE_INITIAL
        self.tainters[zone] = RateLimitedTimedQueue(self.eviction_qps, clock=self.clock)
        log.info("initializing eviction metric for zone %r", zone)
        return True

    def tainter(self, zone: str) -> RateLimitedTimedQueue:
        queue = self.tainters.get(zone)
        if queue is None:
            queue = self.tainters[zone] = RateLimitedTimedQueue(self.eviction_qps, clock=self.clock)
            self.zone_states.setdefault(zone, STATE_INITIAL)
        return queue

    def healthy_qps(self, zone_size: int) -> float:
        return self.eviction_qps

    def reduced_qps(self, zone_size: int) -> float:
        """Large zones slow down, small ones stop (ReducedQPSFunc)."""
        return self.secondary_eviction_qps if zone_size > self.large_cluster_threshold else 0.0

    def set_limiter(self, zone: str, zone_size: int, state: str) -> None:
        if state == STATE_NORMAL:
            self.tainter(zone).swap_limiter(self.eviction_qps)
        elif state == STATE_PARTIAL_DISRUPTION:
            self.tainter(zone).swap_limiter(self.reduced_qps(zone_size))
        elif state == STATE_FULL_DISRUPTION:
            self.tainter(zone).swap_limiter(self.healthy_qps(zone_size))

    def handle_disruption(self, zone_conditions: dict[str, list[Obj | None]]) -> str | None:
        """Update zone states and rates from this pass's Ready conditions per zone. Returns
        ENTER_FULL_DISRUPTION / EXIT_FULL_DISRUPTION when the caller has work to do."""
        new_states: dict[str, str] = {}
        all_are_full = True
        for zone, conditions in zone_conditions.items():
            _, state = compute_zone_state(conditions, unhealthy_threshold=self.unhealthy_zone_threshold)
            all_are_full = all_are_full and state == STATE_FULL_DISRUPTION
            new_states[zone] = state
            if zone not in self.zone_states:
                log.error("setting initial state for unseen zone %r", zone)
                self.zone_states[zone] = STATE_INITIAL
        for zone in [z for z in self.zone_states if z not in zone_conditions]:
            del self.zone_states[zone]  # no node left there
        all_were_full = all(s == STATE_FULL_DISRUPTION for s in self.zone_states.values())
        if all_are_full and all_were_full:
            return None
        if all_are_full:
            log.info("controller detected that all nodes are not-Ready; entering master disruption mode")
            for zone in self.zone_states:
                self.tainter(zone).swap_limiter(0.0)
                self.zone_states[zone] = STATE_FULL_DISRUPTION
            return ENTER_FULL_DISRUPTION
        if all_were_full:
            log.info("controller detected that some nodes are Ready; exiting master disruption mode")
            for zone, state in list(self.zone_states.items()):
                new = new_states.get(zone, state)
                self.set_limiter(zone, len(zone_conditions.get(zone, ())), new)
                self.zone_states[zone] = new
            return EXIT_FULL_DISRUPTION
        for zone, state in list(self.zone_states.items()):
            new = new_states.get(zone, state)
            if state != new:
                log.info("controller detected that zone %r is now in state %s", zone, new)
                self.set_limiter(zone, len(zone_conditions.get(zone, ())), new)
                self.zone_states[zone] = new
        return None
