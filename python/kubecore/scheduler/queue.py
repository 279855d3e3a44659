"""The scheduling queue: activeQ, backoffQ, the unschedulable pool (upstream PriorityQueue).

- activeQ: pods ready to be tried, ordered by the profile's QueueSort (PrioritySort: higher
  priority first, then earlier timestamp). `pop` hands out the head and marks it in flight.
- backoffQ: pods that failed and wait out their backoff: 1 s after the first failure, doubling
  per failure up to 10 s (podInitialBackoffSeconds / podMaxBackoffSeconds), counted from when
  they came back; failures are the consecutive errors if the last ones were errors, else the
  unschedulable results (upstream). `pop` first moves every pod whose backoff ended to activeQ.
  Pods that failed with an error wait in a second heap (upstream podErrorBackoffQ).
- `pop_from_backoff` (upstream's SchedulerPopFromBackoffQ, on by default since Kubernetes 1.33;
  off by default in kubecore, `kubecore scheduler --feature-gates SchedulerPopFromBackoffQ=true`
  turns it on): when activeQ is empty, `pop` takes the head of backoffQ
  (never of the error heap) instead of idling. Backoff expiries are then truncated to whole
  seconds (ordering windows): a pod backs off while its window is not before the current one, and
  pods of one window leave it in activeQ order. PreEnqueue runs when a pod enters backoffQ, not
  when it leaves. Off, the queue is upstream's with the gate off: exact expiries, no early pop.
- unschedulable pool: pods rejected by plugins. A cluster event moves a pod out only when one of
  the plugins that rejected it registered for the event and its queueing hint says QUEUE (to
  backoffQ, or straight to activeQ once the backoff is over or when a Pending plugin asked). Pods
  that stay longer than 5 minutes are flushed (checked every 30 s, as upstream).
- gated pods: a PreEnqueue plugin (SchedulingGates) that rejects a pod keeps it in the pool,
  marked gated, until an event its gating plugin registered for lets it pass.
- in flight: events that arrive while a pod is being scheduled are replayed through its hints
  if it fails (`InFlight`), so an event during a cycle is never lost.

Time comes from the injected clock; nothing here sleeps except `pop_wait`, which waits for an
add or the next backoff expiry. Not thread-safe: call it from one event loop.
"""

from __future__ import annotations

import asyncio
import enum
import heapq
import itertools
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.controllers.controller_utils import InvalidSelector, selector_from_label_selector
from kubecore.scheduler import events as ev
from kubecore.scheduler.events import ClusterEvent, QueueingHint, QueueingHintFn
from kubecore.scheduler.inflight import InFlight
from kubecore.scheduler.interface import NominatingInfo, PreEnqueuePlugin
from kubecore.scheduler.nominator import Nominator, status_nominated_node
from kubecore.scheduler.podinfo import Obj, QueuedPodInfo, pod_key, scheduler_name
from kubecore.scheduler.pool import Pool
from kubecore.scheduler.status import Code

__all__ = ["SchedulingQueue", "QueueProfile", "QueueError", "QueueClosed", "Strategy", "ACTIVE", "BACKOFF",
           "UNSCHEDULABLE"]

ACTIVE, BACKOFF, UNSCHEDULABLE = "Active", "Backoff", "Unschedulable"
_POD_SCALE_DOWN = ClusterEvent(ev.POD, ev.ActionType.UPDATE_POD_SCALE_DOWN)
_POD_ADD = ev.EVENT_UNSCHEDULED_POD_ADD.describe()
_POD_UPDATE = ev.EVENT_UNSCHEDULED_POD_UPDATE.describe()
_UNSCHEDULED_POD_EVENTS = (_POD_ADD, _POD_UPDATE)


class QueueError(Exception):
    """A pod handed back to the queue while the queue already holds it."""


class QueueClosed(Exception):
    """`pop_wait` on a closed queue."""


class Strategy(enum.Enum):
    """Where an event sends an unschedulable pod (upstream queueingStrategy)."""

    SKIP = 0
    AFTER_BACKOFF = 1
    IMMEDIATELY = 2


@dataclass
class QueueProfile:
    """What the queue needs from one profile: PreEnqueue plugins and the registered hints."""

    pre_enqueue: list[PreEnqueuePlugin] = field(default_factory=list)
    hints: list[tuple[ClusterEvent, str, QueueingHintFn | None]] = field(default_factory=list)

    def events_of(self, plugin: str) -> list[ClusterEvent]:
        return [e for e, name, _ in self.hints if name == plugin]


class _LessKey:
    """Adapts a QueueSort `less(a, b)` to heap ordering."""

    __slots__ = ("pinfo", "less")

    def __init__(self, pinfo: QueuedPodInfo, less: Callable[[QueuedPodInfo, QueuedPodInfo], bool]) -> None:
        self.pinfo, self.less = pinfo, less

    def __lt__(self, other: _LessKey) -> bool:
        return self.less(self.pinfo, other.pinfo)


def priority_sort_key(pinfo: QueuedPodInfo) -> tuple[int, float]:
    return (-pinfo.priority, pinfo.timestamp)


class SchedulingQueue:
    """See the module docstring. Invariant: a pod key is in at most one of activeQ, backoffQ and
    the unschedulable pool; heap entries of removed pods are blanked (entry[2] = None)."""

    def __init__(self, *, profiles: Mapping[str, QueueProfile] | None = None, clock: Clock = REAL_CLOCK,
                 sort_key: Callable[[QueuedPodInfo], Any] | None = None,
                 less: Callable[[QueuedPodInfo, QueuedPodInfo], bool] | None = None,
                 initial_backoff: float = 1.0, max_backoff: float = 10.0,
                 max_in_unschedulable: float = 300.0, leftover_flush_interval: float = 30.0,
                 nominator: Nominator | None = None, pop_from_backoff: bool = False) -> None:
        self.clock = clock
        self.profiles = dict(profiles or {})
        if sort_key is None:
            sort_key = priority_sort_key if less is None else (lambda p: _LessKey(p, less))
        self._sort_key = sort_key
        self.initial_backoff, self.max_backoff = initial_backoff, max_backoff
        self.max_in_unschedulable = max_in_unschedulable
        self.leftover_flush_interval = leftover_flush_interval
        self.nominator = nominator if nominator is not None else Nominator()
        self._seq = itertools.count()
        self._active_heap: list[list[Any]] = []
        self._active: dict[str, list[Any]] = {}
        self.pop_from_backoff = pop_from_backoff
        self._backoff_heap: list[list[Any]] = []
        """[order, seq, pod, expiry] of pods that were rejected: order is the expiry, or (expiry
        window, activeQ order) with `pop_from_backoff`."""
        self._error_heap: list[list[Any]] = []
        """[expiry, seq, pod, expiry] of pods whose cycle ended in an error."""
        self._backoff: dict[str, list[Any]] = {}
        """The entries of both heaps by pod key."""
        self._unschedulable = Pool(self._listens_to_pod_add)
        self._inflight = InFlight()
        self._cycle = 0
        self._next_leftover_flush = clock.now() + leftover_flush_interval
        self._wakeup: list[asyncio.Future[None]] = []
        """Futures of the coroutines in `wait_ready`; `_wake` resolves them all."""
        self._closed = False
        self._empty_profile = QueueProfile()
        self._interest: dict[ClusterEvent, bool] = {}  # whether any profile registered an event
        self._listeners: dict[tuple[int, ClusterEvent], frozenset[str]] = {}
        """(id of a profile, event) -> the profile's plugins registered for the event."""
        self._pod_add_matters = self._interesting(ev.EVENT_UNSCHEDULED_POD_ADD)

    # ---- introspection -----------------------------------------------------------------------

    @property
    def scheduling_cycle(self) -> int:
        return self._cycle

    def counts(self) -> dict[str, int]:
        """Pending pods by queue (gated pods are counted apart from the unschedulable pool)."""
        gated = sum(1 for p in self._unschedulable.values() if p.gated)
        return {"active": len(self._active), "backoff": len(self._backoff),
                "unschedulable": len(self._unschedulable) - gated, "gated": gated}

    def where(self, key: str) -> str | None:
        if key in self._active:
            return ACTIVE
        if key in self._backoff:
            return BACKOFF
        if key in self._unschedulable:
            return UNSCHEDULABLE
        return None

    def get(self, key: str) -> QueuedPodInfo | None:
        entry = self._active.get(key) or self._backoff.get(key)
        if entry is not None:
            p: QueuedPodInfo = entry[2]
            return p
        return self._unschedulable.get(key)

    def in_flight(self) -> list[str]:
        return self._inflight.keys()

    def __len__(self) -> int:
        return len(self._active) + len(self._backoff) + len(self._unschedulable)

    # ---- backoff ------------------------------------------------------------------------------

    def backoff_duration(self, failures: int) -> float:
        """1 s, 2 s, 4 s, 8 s, 10 s, 10 s, ... after 1, 2, 3, ... failures (0 for none); never
        more than the maximum (upstream calculateBackoffDuration)."""
        if failures == 0:
            return 0.0
        d = self.initial_backoff
        for _ in range(1, failures):
            if d > self.max_backoff - d:
                return self.max_backoff
            d += d
        return min(d, self.max_backoff)

    def _backoff_expiry(self, p: QueuedPodInfo) -> float:
        """When `p`'s backoff ends: its timestamp (last return to the queue) plus the backoff for
        its consecutive errors if the last failures were errors, else for its unschedulable
        failures (upstream getBackoffTime: an error streak is not punished for earlier
        rejections, nor the reverse). No backoff when the maximum is 0."""
        if p.backoff_expiration is None:
            failures = p.consecutive_errors_count or p.unschedulable_count
            duration = self.backoff_duration(failures) if self.max_backoff > 0 else 0.0
            if not self.pop_from_backoff:
                p.backoff_expiration = p.timestamp + duration
            elif duration == 0:  # never tried, or no backoff: no penalty, not even a window's rest
                p.backoff_expiration = -math.inf
            else:  # the start of its ordering window
                p.backoff_expiration = float(math.floor(p.timestamp + duration))
        return p.backoff_expiration

    def _backing_off(self, p: QueuedPodInfo) -> bool:
        return self._still_backing_off(self._backoff_expiry(p), self.clock.now())

    def _still_backing_off(self, expiry: float, now: float) -> bool:
        """Upstream isPodBackingoff: with windows, while the expiry's window is not before now's."""
        if self.pop_from_backoff:
            return expiry >= math.floor(now)
        return expiry > now

    # ---- the three places --------------------------------------------------------------------

    def _push_active(self, p: QueuedPodInfo) -> None:
        entry = [self._sort_key(p), next(self._seq), p]
        self._active[p.key] = entry
        heapq.heappush(self._active_heap, entry)

    def _drop(self, table: dict[str, list[Any]], key: str) -> bool:
        entry = table.pop(key, None)
        if entry is None:
            return False
        entry[2] = None
        return True

    def _move_to_active(self, p: QueuedPodInfo, event: str) -> bool:
        if not (self.pop_from_backoff and event == ev.BACKOFF_COMPLETE):  # ran when it entered backoffQ
            self._run_pre_enqueue(p)
        if p.gated:
            if p.key not in self._active and p.key not in self._backoff:
                self._unschedulable.setdefault(p.key, p)
            return False
        if p.initial_attempt_timestamp is None:
            p.initial_attempt_timestamp = self.clock.now()
        self._unschedulable.pop(p.key, None)
        self._drop(self._backoff, p.key)
        self._drop(self._active, p.key)
        self._push_active(p)
        if event in _UNSCHEDULED_POD_EVENTS and (self.nominator or status_nominated_node(p.pod)):
            self.nominator.add(p.pod)
        self._wake()
        return True

    def _move_to_backoff(self, p: QueuedPodInfo) -> bool:
        """Into backoffQ (or the error heap); False when PreEnqueue gated it (then it is in the pool)."""
        if self.pop_from_backoff:  # PreEnqueue runs on the way in, not on the way out
            self._run_pre_enqueue(p)
            if p.gated:
                self._unschedulable.setdefault(p.key, p)
                return False
        self._unschedulable.pop(p.key, None)
        expiry = self._backoff_expiry(p)
        if not p.unschedulable_plugins and not p.pending_plugins:
            entry = [expiry, next(self._seq), p, expiry]
            heapq.heappush(self._error_heap, entry)
        else:
            entry = [(expiry, self._sort_key(p)) if self.pop_from_backoff else expiry, next(self._seq), p, expiry]
            heapq.heappush(self._backoff_heap, entry)
        self._backoff[p.key] = entry
        self._wake()
        return True

    def _requeue(self, p: QueuedPodInfo, strategy: Strategy, event: str) -> str:
        if strategy is Strategy.SKIP:
            self._unschedulable[p.key] = p
            return UNSCHEDULABLE
        if strategy is Strategy.AFTER_BACKOFF and self._backing_off(p):
            return BACKOFF if self._move_to_backoff(p) else UNSCHEDULABLE
        return ACTIVE if self._move_to_active(p, event) else UNSCHEDULABLE

    def _profile(self, p: QueuedPodInfo) -> QueueProfile:
        return self.profiles.get(scheduler_name(p.pod), self._empty_profile)

    def _still_gated(self, p: QueuedPodInfo) -> bool:
        """Whether the plugin that gated `p` still refuses it: then any requeue would end with `p`
        gated in the pool again, and its hints need not run (a preemptor waiting for its victims
        hears every pod deletion)."""
        for pl in self._profile(p).pre_enqueue:
            if pl.name == p.gating_plugin:
                st = pl.pre_enqueue(p.pod)
                return st is not None and st.code is not Code.SUCCESS
        return False

    def _run_pre_enqueue(self, p: QueuedPodInfo) -> None:
        plugins = self._profile(p).pre_enqueue
        if p.gating_plugin:  # the plugin that gated it last time goes first
            plugins = sorted(plugins, key=lambda pl: pl.name != p.gating_plugin)
        for pl in plugins:
            st = pl.pre_enqueue(p.pod)
            if st is None or st.code is Code.SUCCESS:
                continue
            p.unschedulable_plugins = p.unschedulable_plugins | {pl.name}
            p.gating_plugin = pl.name
            p.gating_plugin_events = self._profile(p).events_of(pl.name)
            return
        p.gating_plugin = ""
        p.gating_plugin_events = ()

    # ---- pods from the informer --------------------------------------------------------------

    def add(self, pod: Obj, *, raw: bytes | None = None) -> None:
        """A new pending pod (`raw`: its JSON bytes, if the caller has them)."""
        key = pod_key(pod)
        known = self.get(key)
        if known is not None:
            self.update(known.pod, pod)
            return
        if key in self._inflight:  # being scheduled right now: its cycle decides what comes next
            return
        self._move_to_active(QueuedPodInfo(pod, timestamp=self.clock.now(), raw=raw, key=key), _POD_ADD)
        if self._pod_add_matters:  # a new pod may complete a gang (also for pods in flight)
            pool = self._unschedulable
            waiting = [pool[k] for k in list(pool.on_pod_add)] if pool.on_pod_add else []
            self._move_pods(waiting, ev.EVENT_UNSCHEDULED_POD_ADD, None, pod)

    def update(self, old: Obj | None, new: Obj) -> None:
        """A pending pod changed (upstream PriorityQueue.Update)."""
        key = pod_key(new)
        events = ev.pod_scheduling_properties_change(new, old) if old is not None else []
        if key in self._inflight:
            for e in events:
                self._inflight.add_event(e, old, new)
            return
        for table in (self._active, self._backoff):
            entry = table.get(key)
            if entry is not None:
                p: QueuedPodInfo = entry[2]
                p.update(new)
                self.nominator.update(p.pod if old is None else old, new)
                if table is self._active:
                    self._drop(self._active, key)
                    self._push_active(p)
                return
        p2 = self._unschedulable.get(key)
        if p2 is None:
            self._move_to_active(QueuedPodInfo(new, timestamp=self.clock.now()), _POD_UPDATE)
            return
        p2.update(new)
        self._unschedulable[key] = p2  # its terms may have changed: index it again
        self.nominator.update(old or new, new)
        # Every rejecting plugin's hints hear the pod's own update, gated or not (upstream
        # Update): a Queue runs PreEnqueue again, which may now pass.
        for e in events:
            if self._requeue(p2, self._worth_requeuing(p2, e, old, new), e.describe()) != UNSCHEDULABLE:
                break

    def delete(self, pod: Obj) -> None:
        key = pod_key(pod)
        self.nominator.delete(key)
        if not self._drop(self._active, key) and not self._drop(self._backoff, key):
            self._unschedulable.pop(key, None)

    def activate(self, pods: Iterable[Obj]) -> None:
        """Move pods to activeQ now (plugins' PodsToActivate); in-flight ones when they return."""
        for pod in pods:
            key = pod_key(pod)
            p = self._unschedulable.get(key)
            if p is None and key in self._backoff:
                p = self._backoff[key][2]
            if p is not None:
                self._move_to_active(p, ev.FORCE_ACTIVATE)
            elif key in self._inflight:
                self._inflight.add_event(ev.EVENT_FORCE_ACTIVATE, None, pod)

    # ---- the scheduling loop's side ----------------------------------------------------------

    def pop(self) -> QueuedPodInfo | None:
        """The head of activeQ (after flushing finished backoffs), else with `pop_from_backoff`
        the head of backoffQ, marked in flight; None if empty."""
        self.flush_backoff_completed()
        if self.clock.now() >= self._next_leftover_flush:
            self.flush_unschedulable_leftover()
        return self._pop_active()

    def pop_batch(self, limit: int) -> list[QueuedPodInfo]:
        """Up to `limit` pods from the head of activeQ, in order, each marked in flight."""
        self.flush_backoff_completed()
        if self.clock.now() >= self._next_leftover_flush:
            self.flush_unschedulable_leftover()
        out: list[QueuedPodInfo] = []
        while len(out) < limit:
            p = self._pop_active()
            if p is None:
                break
            out.append(p)
        return out

    def _pop_active(self) -> QueuedPodInfo | None:
        heap = self._active_heap
        while heap:
            p: QueuedPodInfo | None = heapq.heappop(heap)[2]
            if p is None:
                continue
            del self._active[p.key]
            if p.key in self._inflight:  # queued again while being scheduled: dropped, as upstream
                continue
            return self._to_in_flight(p)
        if self.pop_from_backoff:
            return self._pop_backoff()
        return None

    def _backoff_head(self) -> list[Any] | None:
        """backoffQ's first live entry (removed pods' entries dropped on the way)."""
        heap = self._backoff_heap
        while heap and heap[0][2] is None:
            heapq.heappop(heap)
        return heap[0] if heap else None

    def _pop_backoff(self) -> QueuedPodInfo | None:
        """activeQ is empty: the head of backoffQ, backing off or not (upstream popBackoff)."""
        while self._backoff_head() is not None:
            p: QueuedPodInfo = heapq.heappop(self._backoff_heap)[2]
            del self._backoff[p.key]
            if p.key in self._inflight:
                continue
            if p.initial_attempt_timestamp is None:
                p.initial_attempt_timestamp = self.clock.now()
            return self._to_in_flight(p)
        return None

    def _to_in_flight(self, p: QueuedPodInfo) -> QueuedPodInfo:
        p.attempts += 1
        self._cycle += 1
        p.cycle = self._cycle
        # unschedulable_plugins and pending_plugins stay (upstream keeps them for logging);
        # the failure path always sets them anew before the pod comes back.
        p.gating_plugin = ""
        p.gating_plugin_events = ()
        self._inflight.pop(p.key)
        return p

    async def wait_ready(self) -> None:
        """Return once activeQ has a pod (after an add, or when a backoff or the leftover flush
        is due), or backoffQ one with `pop_from_backoff`; QueueClosed once the queue is closed."""
        while True:
            if self._closed:
                raise QueueClosed()
            self.flush_backoff_completed()
            if self.clock.now() >= self._next_leftover_flush:
                self.flush_unschedulable_leftover()
            if self._active or (self.pop_from_backoff and self._backoff_head() is not None):
                return
            await self._wait_for_work()

    async def pop_wait(self) -> QueuedPodInfo:
        """`pop`, waiting for a pod when activeQ is empty."""
        while True:
            await self.wait_ready()
            p = self._pop_active()
            if p is not None:
                return p

    def done(self, key: str) -> None:
        """`key`'s scheduling (and binding) cycle is over."""
        self._inflight.done(key)

    def add_unschedulable_if_not_present(self, p: QueuedPodInfo, *, latest: Obj | None = None) -> str:
        """Take back a pod whose cycle failed; the queue it went to (upstream
        AddUnschedulableIfNotPresent). Events seen while it was in flight are replayed first."""
        key = p.key
        try:
            if key in self._unschedulable:
                raise QueueError(f"Pod {key} is already present in unschedulable queue")
            if key in self._active:
                raise QueueError(f"Pod {key} is already present in the active queue")
            if key in self._backoff:
                raise QueueError(f"Pod {key} is already present in the backoff queue")
            if latest is not None:
                p.update(latest)
            if not p.unschedulable_plugins and not p.pending_plugins:
                p.consecutive_errors_count += 1
            else:
                p.unschedulable_count += 1
                p.consecutive_errors_count = 0
            p.timestamp = self.clock.now()
            p.backoff_expiration = None
            strategy = self._hint_for_in_flight(p)
            return self._requeue(p, strategy, ev.SCHEDULE_ATTEMPT_FAILURE)
        finally:
            self.done(key)

    # ---- cluster events ----------------------------------------------------------------------

    def _interesting(self, event: ClusterEvent) -> bool:
        known = self._interest.get(event)
        if known is None:
            known = self._interest[event] = event.is_wildcard() or any(
                reg.matches(event) for prof in self.profiles.values() for reg, _, _ in prof.hints)
        return known

    def _listeners_of(self, profile: QueueProfile, event: ClusterEvent) -> frozenset[str]:
        """The plugins of `profile` registered for `event` (cached)."""
        found = self._listeners.get((id(profile), event))
        if found is None:
            found = self._listeners[(id(profile), event)] = frozenset(
                plugin for registered, plugin, _ in profile.hints if registered.matches(event))
        return found

    def _listens_to_pod_add(self, p: QueuedPodInfo) -> bool:
        listeners = self._listeners_of(self._profile(p), ev.EVENT_UNSCHEDULED_POD_ADD)
        return not (listeners.isdisjoint(p.unschedulable_plugins) and listeners.isdisjoint(p.pending_plugins))

    def _worth_requeuing(self, p: QueuedPodInfo, event: ClusterEvent, old: Any, new: Any,
                         known: dict[int, frozenset[str]] | None = None) -> Strategy:
        """`known`: listeners of `event` by profile id, for a caller offering it to many pods
        (saves hashing the event once per pod)."""
        rejectors = p.unschedulable_plugins | p.pending_plugins
        if not rejectors:
            return Strategy.AFTER_BACKOFF
        if event.is_wildcard():
            if isinstance(new, dict) and pod_key(new) != p.key:
                return Strategy.SKIP  # a wildcard event aimed at another pod
            return Strategy.AFTER_BACKOFF
        profile = self._profile(p)
        listeners = None if known is None else known.get(id(profile))
        if listeners is None:
            listeners = self._listeners_of(profile, event)
            if known is not None:
                known[id(profile)] = listeners
        if listeners.isdisjoint(rejectors):
            return Strategy.SKIP  # the common case, decided without walking the hints
        strategy = Strategy.SKIP
        for registered, plugin, hint in profile.hints:
            if plugin not in rejectors or not registered.matches(event):
                continue
            if hint is not None:
                try:
                    if hint(p.pod, old, new) is QueueingHint.SKIP:
                        continue
                except Exception:  # noqa: BLE001 - upstream treats a failing hint as Queue
                    pass
            if plugin in p.pending_plugins:
                return Strategy.IMMEDIATELY
            if not p.pending_plugins:
                return Strategy.AFTER_BACKOFF
            strategy = Strategy.AFTER_BACKOFF
        return strategy

    def _hint_for_in_flight(self, p: QueuedPodInfo) -> Strategy:
        if not p.unschedulable_plugins and not p.pending_plugins:
            return Strategy.AFTER_BACKOFF
        strategy = Strategy.SKIP
        for _, event, old, new in self._inflight.events_for(p.key):
            s = self._worth_requeuing(p, event, old, new)
            if s is Strategy.IMMEDIATELY:
                return s
            if s is Strategy.AFTER_BACKOFF:
                strategy = s
                if not p.pending_plugins:
                    return s
        return strategy

    def _move_pods(self, pods: list[QueuedPodInfo], event: ClusterEvent, old: Any, new: Any) -> None:
        if not self._interesting(event):
            return
        if not pods:  # the usual case for a bound pod's event: only pods in flight may need it
            self._inflight.add_event(event, old, new)
            return
        known: dict[int, frozenset[str]] = {}
        for p in list(pods):
            if p.gated and (not ev.match_any(event, p.gating_plugin_events) or self._still_gated(p)):
                continue
            strategy = self._worth_requeuing(p, event, old, new, known)
            if strategy is Strategy.SKIP:
                continue
            self._unschedulable.pop(p.key, None)
            self._requeue(p, strategy, event.describe())
        self._inflight.add_event(event, old, new)

    def move_all_to_active_or_backoff(self, event: ClusterEvent, old: Any = None, new: Any = None, *,
                                      pre_check: Callable[[Obj], bool] | None = None) -> None:
        """Offer `event` to every unschedulable pod (upstream MoveAllToActiveOrBackoffQueue)."""
        if not self._interesting(event):
            return
        pods = [p for p in self._unschedulable.values() if pre_check is None or pre_check(p.pod)]
        self._move_pods(pods, event, old, new)

    def node_added(self, node: Obj) -> None:
        self.move_all_to_active_or_backoff(ev.EVENT_NODE_ADD, None, node)

    def node_updated(self, old: Obj, new: Obj) -> None:
        for e in ev.node_scheduling_properties_change(new, old):
            self.move_all_to_active_or_backoff(e, old, new)

    def node_deleted(self, node: Obj) -> None:
        self.move_all_to_active_or_backoff(ev.EVENT_NODE_DELETE, node, None)

    def assigned_pod_added(self, pod: Obj) -> None:
        self._move_pods(self._cross_topology(pod), ev.EVENT_ASSIGNED_POD_ADD, None, pod)

    def assigned_pod_updated(self, old: Obj, new: Obj) -> None:
        for e in ev.pod_scheduling_properties_change(new, old):
            if _POD_SCALE_DOWN.matches(e):
                self.move_all_to_active_or_backoff(e, old, new)
            else:
                self._move_pods(self._cross_topology(new), e, old, new)

    def assigned_pod_deleted(self, pod: Obj) -> None:
        self.move_all_to_active_or_backoff(ev.EVENT_ASSIGNED_POD_DELETE, pod, None)

    def _cross_topology(self, pod: Obj) -> list[QueuedPodInfo]:
        """Unschedulable pods a bound pod may help: spread-rejected ones of its namespace and
        those with a required pod-affinity term matching it."""
        pool = self._unschedulable
        if not pool.on_topology:  # the usual case: nothing to look at in the pod
            return []
        ns = (pod.get("metadata") or {}).get("namespace") or "default"
        labels = (pod.get("metadata") or {}).get("labels") or {}
        out = []
        for key in pool.on_topology:
            p = pool[key]
            if "PodTopologySpread" in p.unschedulable_plugins and p.key.split("/", 1)[0] == ns:
                out.append(p)
            elif _affinity_matches(p.pod, ns, labels):
                out.append(p)
        return out

    # ---- timers ------------------------------------------------------------------------------

    def flush_backoff_completed(self) -> None:
        """Move every pod whose backoff is over to activeQ (both heaps, upstream's order)."""
        now = self.clock.now()
        for heap in (self._backoff_heap, self._error_heap):
            while heap and (heap[0][2] is None or not self._still_backing_off(heap[0][3], now)):
                p: QueuedPodInfo | None = heapq.heappop(heap)[2]
                if p is None:
                    continue
                del self._backoff[p.key]
                self._move_to_active(p, ev.BACKOFF_COMPLETE)

    def flush_unschedulable_leftover(self) -> None:
        now = self.clock.now()
        self._next_leftover_flush = now + self.leftover_flush_interval
        old = [p for p in self._unschedulable.values() if now - p.timestamp > self.max_in_unschedulable]
        if old:
            self._move_pods(old, ev.EVENT_UNSCHEDULABLE_TIMEOUT, None, None)

    def next_wakeup(self) -> float | None:
        """When `pop` may next have something new without an add: the earliest backoff expiry,
        or the next leftover flush while the pool is not empty."""
        times: list[float] = []
        for heap in (self._backoff_heap, self._error_heap):
            while heap and heap[0][2] is None:
                heapq.heappop(heap)
            if heap:  # with windows, released when the next window begins
                times.append(heap[0][3] + 1.0 if self.pop_from_backoff else heap[0][3])
        if self._unschedulable:
            times.append(self._next_leftover_flush)
        return min(times) if times else None

    def _wake(self) -> None:
        if not self._wakeup:  # (once per added pod: nobody waits while the loop is busy)
            return
        waiters, self._wakeup = self._wakeup, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    async def _wait_for_work(self) -> None:
        """Until `_wake` or the next deadline (on the queue's clock). One future per wait, and a
        sleeper task only when a deadline exists: this runs whenever the scheduler goes idle, often
        once per handful of pods, so it avoids asyncio.wait and Event (each looks the loop up: a
        getpid() system call on Python 3.11)."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._wakeup.append(waiter)
        deadline = self.next_wakeup()
        sleeper = None
        if deadline is not None:
            sleeper = loop.create_task(self._wake_after(deadline - self.clock.now(), waiter))
        try:
            await waiter
        finally:
            if sleeper is not None:
                sleeper.cancel()
            if not waiter.done():
                waiter.cancel()
            if waiter in self._wakeup:  # woken by the deadline or cancelled, not by `_wake`
                self._wakeup.remove(waiter)

    async def _wake_after(self, seconds: float, waiter: asyncio.Future[None]) -> None:
        await self.clock.sleep(seconds)
        if not waiter.done():
            waiter.set_result(None)

    def close(self) -> None:
        """Stop the queue: waiters get QueueClosed; pods in flight and their events are dropped."""
        self._closed = True
        self._inflight.clear()
        self._wake()

    # ---- nominated pods ----------------------------------------------------------------------

    def add_nominated_pod(self, pod: Obj, info: NominatingInfo | None) -> None:
        self.nominator.add(pod, info)

    def delete_nominated_pod_if_exists(self, key: str) -> None:
        self.nominator.delete(key)


def _affinity_matches(pending: Obj, ns: str, labels: dict[str, str]) -> bool:
    terms = ((((pending.get("spec") or {}).get("affinity") or {}).get("podAffinity") or {})
             .get("requiredDuringSchedulingIgnoredDuringExecution") or [])
    own_ns = (pending.get("metadata") or {}).get("namespace") or "default"
    for term in terms:
        namespaces = term.get("namespaces") or []
        if term.get("namespaceSelector") is None and ns not in (namespaces or [own_ns]):
            continue
        try:
            if selector_from_label_selector(term.get("labelSelector")).matches(labels):
                return True
        except InvalidSelector:
            continue
    return False
