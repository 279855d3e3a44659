"""Recording events.k8s.io/v1 Events, as client-go's tools/events does (kube-scheduler's recorder).

Unlike `kubecore.client.events` (tools/record: one bounded queue, one serial writer), every event
is written by its own asyncio task, so a burst of N events is N concurrent writes and nothing is
dropped for a full queue. One `EventBroadcaster` per process owns the isomorphic-event cache and
the two maintenance loops; each component gets an `EventRecorder` from
`broadcaster.new_recorder(controller, reporting_instance=...)`, whose
`eventf(regarding, related, type, reason, action, note)` never blocks and never raises for API
trouble.

The Event written for `regarding` is upstream's makeEvent:

    metadata.name        "<regarding name>.<UnixNano of now in hex>" (a UUID if that is not a valid
                         name); metadata.namespace = regarding's namespace or "default"
    eventTime            MicroTime of now, "2006-01-02T15:04:05.000000Z"
    reportingController, reportingInstance, action, reason, type, note
    regarding            kind, namespace, name, uid, apiVersion, resourceVersion (+ fieldPath)
    related              the same for the optional second object

Aggregation (upstream recordToSink): events are keyed by (type, action, reason, reportingController,
reportingInstance, regarding, related) -- the note is not part of the key. The first event of a key
is created (POST). The first repeat turns the cached event into a series (count 2,
lastObservedTime now) and writes it as a strategic merge PATCH of `series`; later repeats only
count in the cache. Every 30 minutes `refresh_existing_series` PATCHes every cached series (its
current count); every 6 minutes `finish_series` writes a series last observed more than 6 minutes
ago one final time and forgets it, and forgets a single event older than 6 minutes. Both hold the
cache for their whole run, as upstream's mutex does: events arriving meanwhile wait (in order) and
are admitted when it ends.

Writing (upstream attemptRecording/recordEvent): a series is PATCHed; a PATCH answered 404 creates
the Event again (resourceVersion cleared). Success, or any API error answer, ends the attempt (the
server rejected it and would again), except AlreadyExists on the create of a series, which is
retried; anything that is not an API answer (connection refused/reset, timeout) is retried up to
12 tries in all, each sleep 10 s plus up to 25 % jitter.

Names: the nanosecond stamp is strictly increasing per broadcaster, so two events about one object
at one instant (easy on a fake clock) never share a name.

Memory: a cached event is about 0.7 KB (the key, the first Event's name, note and time; the rest of
the Event is rebuilt from the key when a series is written). As upstream, the cache holds one
entry per distinct key seen in the last 6 to 12 minutes and finish_series is what empties it;
`max_cached` (a kubecore option, off by default) also bounds it, forgetting the oldest tenth when
exceeded (a forgotten series gets its final write first, as finish_series would do).

`eventf` must be called on the event loop's thread (it starts tasks); the first call starts the
refresh/finish loops if `start()` was not called.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import socket
from collections.abc import Callable, Coroutine
from datetime import datetime, timezone
from typing import Any, Protocol

from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.client.errors import AlreadyExists, ApiError, NotFound
from kubecore.client.events import NORMAL, WARNING, EventNamer, object_reference

__all__ = ["EventBroadcaster", "EventRecorder", "EventSink", "FINISH_TIME", "MAX_TRIES_PER_EVENT",
           "NORMAL", "REFRESH_TIME", "SLEEP_DURATION", "WARNING", "micro_time"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

MAX_TRIES_PER_EVENT = 12
FINISH_TIME = 6 * 60.0
"""Seconds between two finish_series runs, and how long a series stays open without a repeat."""
REFRESH_TIME = 30 * 60.0
"""Seconds between two refresh_existing_series runs."""
SLEEP_DURATION = 10.0
"""Seconds between two tries of one write (plus up to JITTER of it)."""
JITTER = 0.25
API_VERSION = "events.k8s.io/v1"

_last_second: tuple[int, str] = (-1, "")


def micro_time(t: float) -> str:
    """metav1.MicroTime text for epoch seconds `t`: "2006-01-02T15:04:05.000000Z"."""
    global _last_second
    second, micros = divmod(round(t * 1e6), 1_000_000)
    last = _last_second
    if last[0] != second:
        last = _last_second = (second, datetime.fromtimestamp(second, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S"))
    return f"{last[1]}.{micros:06d}Z"


class EventSink(Protocol):
    """Where events go (upstream's EventSink, the two calls the broadcaster makes). Must raise
    `kubecore.client.errors.NotFound` for 404 and other `ApiError`s for other error answers;
    anything else counts as a transport failure (retried)."""

    async def create(self, event: Obj, *, keep: bool = True) -> Obj | None:
        """POST `event` into its metadata.namespace; return the server's copy (with `keep`
        False the caller does not use it, and None may be returned)."""
        ...

    async def patch(self, event: Obj, patch: bytes | Obj) -> Obj:
        """Strategic-merge-PATCH the Event named by `event`'s metadata; return the server's copy."""
        ...


_REF_FIELDS = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")


def _ref_key(ref: Obj) -> tuple[Any, ...]:
    """An ObjectReference as a key: its seven fields, compared as Go compares the struct."""
    g = ref.get
    return (g("kind"), g("namespace"), g("name"), g("uid"), g("apiVersion"), g("resourceVersion"), g("fieldPath"))


def _ref_from_key(key: tuple[Any, ...]) -> Obj:
    """The reference again (object_reference leaves out empty fields; so does this)."""
    return {f: v for f, v in zip(_REF_FIELDS, key) if v}


_Key = tuple[Any, ...]
_Args = tuple[_Key, float, "EventRecorder", Obj, "Obj | None", str, str, str, str]
"""`EventBroadcaster._admit`'s arguments: key, now, recorder, regarding, related, type, reason,
action, note."""


class _Entry:
    """One cached isomorphic event and its series so far (count 0: no repeat yet).

    The Event as first created is not kept: everything in it but its name, note and eventTime is
    in the cache key, so it is rebuilt when a series is written (0.7 KB an entry instead of 1.7).
    After a refresh the entry holds the server's copy instead (`written`), as upstream's cache does."""

    __slots__ = ("name", "note", "event_time", "count", "last_observed", "written")

    def __init__(self, name: str, note: str, event_time: float) -> None:
        self.name = name
        self.note = note
        self.event_time = event_time
        self.count = 0
        self.last_observed = 0.0
        self.written: Obj | None = None

    def with_series(self, key: _Key) -> Obj:
        """The Event with its current series, as written (always a new dict)."""
        event = self.written
        if event is None:
            event_type, action, reason, controller, instance, regarding, related = key
            event = build_event(self.name, self.event_time, controller, instance, action, reason,
                                _ref_from_key(regarding), self.note, event_type,
                                None if related is None else _ref_from_key(related))
        return {**event, "series": {"count": self.count, "lastObservedTime": micro_time(self.last_observed)}}


def build_event(name: str, t: float, reporting_controller: str, reporting_instance: str, action: str,
                reason: str, regarding: Obj, note: str, event_type: str, related: Obj | None) -> Obj:
    """upstream's makeEvent: the Event as first written (no series), named `name`, at time `t`."""
    event: Obj = {
        "apiVersion": API_VERSION, "kind": "Event",
        "metadata": {"name": name, "namespace": regarding.get("namespace") or "default"},
        "eventTime": micro_time(t),
        "reportingController": reporting_controller, "reportingInstance": reporting_instance,
        "action": action, "reason": reason, "regarding": regarding, "note": note, "type": event_type,
    }
    if related is not None:
        event["related"] = related
    return event


class EventBroadcaster:
    """The isomorphic-event cache, the per-event writers and the refresh/finish loops of every
    recorder made from it (upstream's eventBroadcasterImpl)."""

    def __init__(self, sink: EventSink, *, clock: Clock = REAL_CLOCK, sleep_duration: float = SLEEP_DURATION,
                 max_tries: int = MAX_TRIES_PER_EVENT, rng: random.Random | None = None,
                 max_cached: int | None = None) -> None:
        self._sink = sink
        self._max_cached = max_cached
        self._clock = clock
        self._sleep_duration = sleep_duration
        self._max_tries = max_tries
        self._rng = rng or random.Random()
        self._cache: dict[_Key, _Entry] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._loops: list[asyncio.Task[None]] = []
        self._maintenance = asyncio.Lock()  # refresh and finish run one at a time
        self._holding = False  # a refresh/finish holds the cache: new events wait in _backlog
        self._backlog: list[_Args] = []
        self._task_done = self._tasks.discard
        self._name_for = EventNamer()
        self._closed = False
        self._started = False

    # -- recorders -----------------------------------------------------------------------------------
    def new_recorder(self, reporting_controller: str, *, reporting_instance: str | None = None) -> EventRecorder:
        """A recorder writing as `reporting_controller`; the instance defaults to upstream's
        "<controller>-<hostname>"."""
        if reporting_instance is None:
            reporting_instance = f"{reporting_controller}-{socket.gethostname()}"
        return EventRecorder(self, reporting_controller, reporting_instance)

    @property
    def cached(self) -> int:
        """How many isomorphic events the cache holds (informational)."""
        return len(self._cache)

    @property
    def in_flight(self) -> int:
        """How many writes are running or waiting to retry."""
        return len(self._tasks)

    # -- lifecycle -----------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the refresh (every 30 min) and finish (every 6 min) loops. Idempotent; recording
        the first event starts them too. (wait.Until also runs each once at start, on an empty
        cache; that run does nothing, so here the first run is one period after the start.)"""
        if self._started or self._closed:
            return
        self._started = True
        loop = asyncio.get_running_loop()
        self._loops = [loop.create_task(self._every(REFRESH_TIME, self.refresh_existing_series), name="events-refresh"),
                       loop.create_task(self._every(FINISH_TIME, self.finish_series), name="events-finish")]

    async def flush(self) -> None:
        """Wait until every write started so far (and every event waiting for a refresh/finish to
        end) has been written or given up on."""
        while True:
            if self._holding:
                async with self._maintenance:
                    pass
            elif self._tasks:
                await asyncio.wait(set(self._tasks))
            else:
                return

    async def shutdown(self, *, drain: bool = True) -> None:
        """Stop accepting events and stop the loops; with `drain`, first let the in-flight writes
        end (retries included), otherwise cancel them."""
        self._closed = True
        loops, self._loops = self._loops, []
        for t in loops:
            t.cancel()
        if loops:
            await asyncio.wait(loops)
        if drain:
            await self.flush()
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks)

    # -- the hot path --------------------------------------------------------------------------------
    def _admit(self, key: _Key, now: float, recorder: EventRecorder, ref: Obj, related: Obj | None,
               event_type: str, reason: str, action: str, note: str) -> None:
        """recordToSink's critical section: count a repeat in the cache, or start a write. (The
        Event is only built when it is the first of its key: a repeat needs nothing from it.)"""
        entry = self._cache.get(key)
        if entry is None:
            event = recorder.make_event(ref, related, now, event_type, reason, action, note)
            cache = self._cache
            cache[key] = _Entry(event["metadata"]["name"], note, now)
            self._spawn(self._attempt(event))
            if self._max_cached is not None and len(cache) > self._max_cached:
                self._evict()
        elif entry.count:
            entry.count += 1
            entry.last_observed = now
        else:
            entry.count, entry.last_observed = 2, now
            self._spawn(self._attempt(entry.with_series(key)))

    def _evict(self) -> None:
        """Over `max_cached` (a kubecore option; upstream's cache is bounded only by finish_series):
        forget the oldest tenth, each as finish_series would (a series gets its final write)."""
        cache = self._cache
        assert self._max_cached is not None
        batch = len(cache) - self._max_cached + self._max_cached // 10
        for key in list(itertools.islice(cache, batch)):
            entry = cache.pop(key)
            if entry.count:
                self._spawn(self._attempt(entry.with_series(key)))

    def _record(self, args: _Args) -> None:
        """The slow path of `EventRecorder.eventf`: closed, not started, or the cache is held."""
        if self._closed:
            log.debug("event broadcaster shut down; dropping event %s", args[5])
            return
        if not self._started:
            self.start()
        if self._holding:
            self._backlog.append(args)
        else:
            self._admit(*args)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    # -- writing -------------------------------------------------------------------------------------
    async def _attempt(self, event: Obj) -> None:
        """attemptRecording: up to max_tries tries, sleep_duration (+ jitter) apart."""
        tries = 0
        while True:
            _, retry = await self._record_event(event, keep=False)
            if not retry:
                return
            tries += 1
            if tries >= self._max_tries:
                log.error("unable to write event %s (retry limit exceeded)", event["metadata"]["name"])
                return
            await self._clock.sleep(self._sleep_duration * (1.0 + JITTER * self._rng.random()))

    async def _record_event(self, event: Obj, *, keep: bool = True) -> tuple[Obj | None, bool]:
        """recordEvent: write once; (the server's copy or None, whether to retry). Without `keep`
        a create's answer is not decoded (only a refresh keeps the server's copy)."""
        series = event.get("series")
        try:
            written: Obj | None = None
            if series is not None:
                try:
                    written = await self._sink.patch(event, {"series": series})
                except NotFound:
                    written = None  # the Event is gone (deleted, expired): create it again
            if written is None:
                meta = event["metadata"]
                if "resourceVersion" in meta:
                    event = {**event, "metadata": {k: v for k, v in meta.items() if k != "resourceVersion"}}
                written = await self._sink.create(event, keep=keep)
            return written, False
        except AlreadyExists as e:
            if series is not None:  # the first create of this Event raced the patch: try again
                return None, True
            log.debug("server rejected event (will not retry): %s", e)
            return None, False
        except ApiError as e:
            log.error("server rejected event %s (will not retry): %s", event["metadata"].get("name"), e)
            return None, False
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.warning("unable to write event %s (may retry after sleeping): %s", event["metadata"].get("name"), e)
            return None, True

    # -- maintenance ---------------------------------------------------------------------------------
    async def _every(self, period: float, fn: Callable[[], Coroutine[Any, Any, None]]) -> None:
        while True:
            await self._clock.sleep(period)
            try:
                await fn()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("event series maintenance failed")

    async def _holding_cache(self, fn: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run `fn` with the cache held; then admit, in order, the events that arrived meanwhile."""
        async with self._maintenance:
            self._holding = True
            try:
                await fn()
            finally:
                self._holding = False
                backlog, self._backlog = self._backlog, []
                for args in backlog:
                    self._admit(*args)

    async def refresh_existing_series(self) -> None:
        """PATCH every cached series with its current count (refreshing the Event's TTL)."""
        async def run() -> None:
            for key, entry in list(self._cache.items()):
                if entry.count:
                    written, retry = await self._record_event(entry.with_series(key))
                    if not retry and written is not None:
                        entry.written = written
        await self._holding_cache(run)

    async def finish_series(self) -> None:
        """Write the final count of every series not observed for FINISH_TIME and forget it;
        forget every single event older than FINISH_TIME."""
        async def run() -> None:
            cutoff = self._clock.now() - FINISH_TIME
            cache = self._cache
            due: list[tuple[_Key, _Entry]] = []
            expired: list[_Key] = []
            for key, entry in cache.items():
                if entry.count:
                    if entry.last_observed < cutoff:
                        due.append((key, entry))
                elif entry.event_time < cutoff:
                    expired.append(key)
            for key in expired:
                del cache[key]
            for key, entry in due:
                _, retry = await self._record_event(entry.with_series(key))
                if not retry:
                    cache.pop(key, None)
        await self._holding_cache(run)


class EventRecorder:
    """Records events.k8s.io/v1 Events for one reporting controller/instance (upstream's recorderImpl)."""

    def __init__(self, broadcaster: EventBroadcaster, reporting_controller: str, reporting_instance: str) -> None:
        self._broadcaster = broadcaster
        self.reporting_controller = reporting_controller
        self.reporting_instance = reporting_instance

    def eventf(self, regarding: Obj, related: Obj | None, event_type: str, reason: str, action: str,
               note: str) -> None:
        """Record an Event about `regarding` (a full object or an object reference), optionally
        `related` to a second one. Never blocks; an unsupported type is logged and dropped."""
        try:
            ref = object_reference(regarding)
        except ValueError as e:
            log.error("could not construct reference, will not report event %s %s: %s", event_type, reason, e)
            return
        rel: Obj | None = None
        if related is not None:
            try:
                rel = object_reference(related)
            except ValueError as e:
                log.debug("could not construct reference to the related object: %s", e)
        if event_type != NORMAL and event_type != WARNING:
            log.error("unsupported event type %r; event %s dropped", event_type, reason)
            return
        b = self._broadcaster
        now = b._clock.now()
        key = (event_type, action, reason, self.reporting_controller, self.reporting_instance,
               _ref_key(ref), None if rel is None else _ref_key(rel))
        if b._started and not b._holding and not b._closed:
            b._admit(key, now, self, ref, rel, event_type, reason, action, note)
        else:
            b._record((key, now, self, ref, rel, event_type, reason, action, note))

    def make_event(self, ref: Obj, related: Obj | None, t: float, event_type: str, reason: str, action: str,
                   note: str) -> Obj:
        """The Event as first written (no series)."""
        return build_event(self._broadcaster._name_for(ref["name"], t), t, self.reporting_controller,
                           self.reporting_instance, action, reason, ref, note, event_type, related)
