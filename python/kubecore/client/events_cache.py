"""Event correlation: what the recorder does to an Event before it reaches the API server.

client-go's tools/record/events_cache.go, in three stages applied in order by `EventCorrelator`:

1. `EventAggregator` - similar events (same source, involvedObject, type, reason, reporting
   controller/instance; only the message differs): once `max_events` (10) distinct messages were
   seen with no gap longer than `max_interval` (600 s) between them, each further one is replaced
   by a single aggregate Event whose message is "(combined from similar events): <message>".
   The aggregate then counts up like any repeated event (stage 2).
2. `EventLogger` - identical events (same source, involvedObject, type, reason, message) are
   de-duplicated: the repeat keeps the first occurrence's name and firstTimestamp, gets
   count = previous + 1, and is written as a PATCH of {count, lastTimestamp, message} instead of a
   new Event.
3. `EventSourceObjectSpamFilter` - a token bucket per (source, involvedObject, type): 25 events
   burst, refilled at one per 5 minutes; events beyond that are dropped (skip).

Events are plain JSON dicts (core/v1 Event). Caches are LRUs of 4096 entries. Time comes from the
injected clock. Everything runs on one event loop; no locks.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Generic, TypeVar

from kubecore.client.clock import REAL_CLOCK, Clock

LRU_SIZE = 4096
AGGREGATE_MAX_EVENTS = 10
AGGREGATE_INTERVAL = 600.0
SPAM_BURST = 25
SPAM_QPS = 1.0 / 300.0
COMBINED_PREFIX = "(combined from similar events): "

Event = dict[str, Any]
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


_last_stamp: tuple[int, str] = (-1, "")
"""The last (second, text) `rfc3339` made: events come in bursts within one second."""


def rfc3339(t: float) -> str:
    """metav1.Time text for epoch seconds `t` (whole seconds): "2006-01-02T15:04:05Z"."""
    global _last_stamp
    second = int(t)
    last = _last_stamp
    if last[0] == second:
        return last[1]
    text = datetime.fromtimestamp(second, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    _last_stamp = (second, text)
    return text


class LRU(Generic[K, V]):
    """A bounded mapping that forgets the least recently used entry first."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._data: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._data.get(key)
        if value is not None:
            self._data.move_to_end(key)
        return value

    def add(self, key: K, value: V) -> None:
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self._size:
            self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)


def _ref_key(event: Event) -> tuple[str, ...]:
    src = event.get("source") or {}
    ref = event.get("involvedObject") or {}
    return (src.get("component", ""), src.get("host", ""), ref.get("kind", ""), ref.get("namespace", ""),
            ref.get("name", ""), ref.get("uid", ""), ref.get("apiVersion", ""))


def event_key(event: Event) -> tuple[str, ...]:
    """Identity of an event for de-duplication: source, involvedObject, type, reason, message."""
    ref = event.get("involvedObject") or {}
    return (*_ref_key(event), ref.get("fieldPath", ""), event.get("type", ""), event.get("reason", ""),
            event.get("message", ""))


def spam_key(event: Event) -> tuple[str, ...]:
    """Identity for spam filtering: source, involvedObject and type."""
    return (*_ref_key(event), event.get("type", ""))


def aggregate_by_reason(event: Event) -> tuple[tuple[str, ...], str]:
    """(aggregate key, local key): events are similar when all but the message match."""
    agg = (*_ref_key(event), event.get("type", ""), event.get("reason", ""),
           event.get("reportingComponent", ""), event.get("reportingInstance", ""))
    return agg, str(event.get("message", ""))


def combined_message(event: Event) -> str:
    return COMBINED_PREFIX + str(event.get("message", ""))


class EventSourceObjectSpamFilter:
    """A passive token bucket per spam key; `filter(event)` is True when the event must be dropped."""

    def __init__(self, *, lru_size: int = LRU_SIZE, burst: int = SPAM_BURST, qps: float = SPAM_QPS,
                 clock: Clock = REAL_CLOCK) -> None:
        self._cache: LRU[tuple[str, ...], list[float]] = LRU(lru_size)  # key -> [tokens, last]
        self._burst = float(burst)
        self._qps = qps
        self._clock = clock

    def filter(self, event: Event) -> bool:
        now = self._clock.now()
        key = spam_key(event)
        bucket = self._cache.get(key)
        if bucket is None:
            bucket = [self._burst, now]
        tokens = min(self._burst, bucket[0] + max(0.0, now - bucket[1]) * self._qps)
        accept = tokens >= 1.0
        bucket[0], bucket[1] = (tokens - 1.0 if accept else tokens), now
        self._cache.add(key, bucket)
        return not accept


@dataclass
class _AggregateRecord:
    local_keys: set[str] = field(default_factory=set)
    last: float = float("-inf")


class EventAggregator:
    """Combines floods of similar events into one (stage 1 in the module docstring)."""

    def __init__(self, *, lru_size: int = LRU_SIZE, max_events: int = AGGREGATE_MAX_EVENTS,
                 max_interval: float = AGGREGATE_INTERVAL, clock: Clock = REAL_CLOCK,
                 key_func: Callable[[Event], tuple[tuple[str, ...], str]] = aggregate_by_reason,
                 message_func: Callable[[Event], str] = combined_message) -> None:
        self._cache: LRU[tuple[str, ...], _AggregateRecord] = LRU(lru_size)
        self._max_events = max_events
        self._max_interval = max_interval
        self._clock = clock
        self._key_func = key_func
        self._message_func = message_func

    def aggregate(self, event: Event, *, name_for: Callable[[str, float], str]) -> tuple[Event, Hashable]:
        """The event to write (the given one, or an aggregate) and its cache key for stage 2."""
        now = self._clock.now()
        agg_key, local_key = self._key_func(event)
        record = self._cache.get(agg_key)
        if record is None or now - record.last > self._max_interval:
            record = _AggregateRecord()
        record.local_keys.add(local_key)
        record.last = now
        self._cache.add(agg_key, record)
        if len(record.local_keys) < self._max_events:
            return event, event_key(event)
        record.local_keys.pop()  # never let the set grow past the threshold
        ref = event.get("involvedObject") or {}
        stamp = rfc3339(now)
        combined: Event = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name_for(str(ref.get("name", "")), now),
                         "namespace": (event.get("metadata") or {}).get("namespace", "")},
            "involvedObject": ref, "reason": event.get("reason", ""), "message": self._message_func(event),
            "source": event.get("source", {}), "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
            "type": event.get("type", ""),
        }
        return combined, agg_key


@dataclass
class _Observation:
    count: int
    first_timestamp: str
    name: str
    resource_version: str


class EventLogger:
    """Counts identical events (stage 2 in the module docstring)."""

    def __init__(self, *, lru_size: int = LRU_SIZE) -> None:
        self._cache: LRU[Hashable, _Observation] = LRU(lru_size)

    def observe(self, event: Event, key: Hashable) -> tuple[Event, dict[str, Any] | None]:
        """The event updated from the last observation under `key`, and the patch to send when it
        is a repeat (None for a first occurrence, which is created)."""
        event = dict(event)
        meta = dict(event.get("metadata") or {})
        patch: dict[str, Any] | None = None
        last = self._cache.get(key)
        if last is not None and last.count > 0:
            meta["name"] = last.name
            if last.resource_version:
                meta["resourceVersion"] = last.resource_version
            event["firstTimestamp"] = last.first_timestamp
            event["count"] = last.count + 1
            patch = {"count": event["count"], "lastTimestamp": event.get("lastTimestamp")}
            if event.get("message"):
                patch["message"] = event["message"]
        event["metadata"] = meta
        self._remember(key, event)
        return event, patch

    def update_state(self, event: Event) -> None:
        """Record what the server answered (name, resourceVersion, count) for later repeats."""
        self._remember(event_key(event), event)

    def _remember(self, key: Hashable, event: Event) -> None:
        meta = event.get("metadata") or {}
        self._cache.add(key, _Observation(count=int(event.get("count") or 0),
                                          first_timestamp=str(event.get("firstTimestamp") or ""),
                                          name=str(meta.get("name", "")),
                                          resource_version=str(meta.get("resourceVersion") or "")))


@dataclass(frozen=True)
class CorrelateResult:
    event: Event
    patch: dict[str, Any] | None  # a strategic merge patch when the event repeats an existing one
    skip: bool = False


@dataclass(frozen=True)
class CorrelatorOptions:
    """Tuning knobs; the defaults are client-go's."""

    lru_size: int = LRU_SIZE
    burst: int = SPAM_BURST
    qps: float = SPAM_QPS
    max_events: int = AGGREGATE_MAX_EVENTS
    max_interval: float = AGGREGATE_INTERVAL


class EventCorrelator:
    """Aggregate, count, then spam-filter (see the module docstring)."""

    def __init__(self, *, clock: Clock = REAL_CLOCK, options: CorrelatorOptions = CorrelatorOptions(),
                 name_for: Callable[[str, float], str]) -> None:
        self._aggregator = EventAggregator(lru_size=options.lru_size, max_events=options.max_events,
                                           max_interval=options.max_interval, clock=clock)
        self._logger = EventLogger(lru_size=options.lru_size)
        self._spam = EventSourceObjectSpamFilter(lru_size=options.lru_size, burst=options.burst,
                                                 qps=options.qps, clock=clock)
        self._name_for = name_for

    def correlate(self, event: Event) -> CorrelateResult:
        aggregated, key = self._aggregator.aggregate(event, name_for=self._name_for)
        observed, patch = self._logger.observe(aggregated, key)
        if self._spam.filter(observed):
            return CorrelateResult(event=observed, patch=None, skip=True)
        return CorrelateResult(event=observed, patch=patch)

    def update_state(self, event: Event) -> None:
        self._logger.update_state(event)
