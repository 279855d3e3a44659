"""Recording core/v1 Events about objects, as client-go's tools/record does.

One `EventBroadcaster` per process owns the writer: a bounded queue (1000 events; more are dropped
rather than blocking the caller, counted in `dropped` and logged at most once per 10 s) drained
by one task that correlates each event (`events_cache.EventCorrelator`: aggregation of similar
events, counting of identical ones, spam filtering) and writes it through an `EventSink`. Each component gets an `EventRecorder` from
`broadcaster.new_recorder(component)`; `recorder.event(obj, "Normal", reason=..., message=...)`
never blocks and never raises for API trouble.

An Event written for object `obj` looks like upstream's:

    metadata.name       "<obj name>.<UnixNano of now in hex>" (16 hex digits today; a UUID if that
                        is not a valid name), metadata.namespace = obj's namespace or "default"
    involvedObject      kind, namespace, name, uid, apiVersion, resourceVersion (+ fieldPath)
    type, reason, message, source.component (+ source.host)
    firstTimestamp, lastTimestamp (RFC 3339, whole seconds), count
    reportingComponent = source.component, reportingInstance = source.host

A repeat of an identical event is a strategic merge PATCH of {count, lastTimestamp, message} on the
first one's name; if that Event is gone (404) it is created again. Any other API error drops the
event (the server rejected it; it would reject it again); transport errors are retried up to 12
times, `retry_sleep` (10 s) apart, the first sleep randomised so clients do not retry in step.

Names: the nanosecond stamp is made strictly increasing per broadcaster, so two events about one
object in the same instant (easy on a fake clock) never share a name.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
import uuid
from typing import Any, Protocol

from kubecore.client.errors import AlreadyExists, ApiError, NotFound
from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.client.events_cache import CorrelatorOptions, Event, EventCorrelator, rfc3339

log = logging.getLogger(__name__)

NORMAL = "Normal"
WARNING = "Warning"
MAX_QUEUED_EVENTS = 1000
MAX_TRIES_PER_EVENT = 12
RETRY_SLEEP = 10.0
DROP_REPORT_INTERVAL = 10.0
"""Seconds between two log lines about events dropped on a full queue (the first is logged at once)."""

_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class EventNamer:
    """Event names as both of client-go's recorders make them: "<object name>.<UnixNano hex>", a
    UUID when that is not a valid name. The stamp is strictly increasing per namer, so two events
    about one object at one instant (easy on a fake clock) never share a name."""

    def __init__(self) -> None:
        self._last_nanos = 0

    def __call__(self, ref_name: str, t: float) -> str:
        nanos = int(t * 1e9)
        if nanos <= self._last_nanos:
            nanos = self._last_nanos + 1
        self._last_nanos = nanos
        name = f"{ref_name}.{nanos:x}"
        # "<ref>.<hex>" is a valid subdomain exactly when <ref> is one (checking it is cheaper)
        if len(name) > 253 or not _DNS1123_SUBDOMAIN.match(ref_name):
            name = str(uuid.uuid4())
        return name


class EventSink(Protocol):
    """Where events go. Must raise `kubecore.client.errors.NotFound` for 404 and other `ApiError`s
    for other error answers; anything else counts as a transport failure (retried)."""

    async def create_event(self, event: dict[str, Any]) -> dict[str, Any]:
        """POST `event` into its metadata.namespace."""
        ...

    async def patch_event(self, event: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
        """Strategic-merge-PATCH the Event named by `event`'s metadata with `patch`."""
        ...


def object_reference(obj: dict[str, Any], *, field_path: str = "") -> dict[str, Any]:
    """The involvedObject for `obj`: a full object (with metadata) or already a reference."""
    if "metadata" not in obj:
        ref = {k: v for k, v in obj.items() if v not in (None, "")}
    else:
        meta = obj.get("metadata") or {}
        ref = {"kind": obj.get("kind", ""), "namespace": meta.get("namespace", ""), "name": meta.get("name", ""),
               "uid": meta.get("uid", ""), "apiVersion": obj.get("apiVersion", ""),
               "resourceVersion": meta.get("resourceVersion", "")}
        ref = {k: v for k, v in ref.items() if v}
    if field_path:
        ref["fieldPath"] = field_path
    if not ref.get("kind") or not ref.get("name"):
        raise ValueError(f"cannot refer to an object without kind and name: {ref!r}")
    return ref


class EventBroadcaster:
    """Owns the queue, the correlator and the writer task for every recorder made from it."""

    def __init__(self, sink: EventSink, *, clock: Clock = REAL_CLOCK,
                 options: CorrelatorOptions = CorrelatorOptions(), max_queued: int = MAX_QUEUED_EVENTS,
                 retry_sleep: float = RETRY_SLEEP, max_tries: int = MAX_TRIES_PER_EVENT,
                 rng: random.Random | None = None) -> None:
        self._sink = sink
        self._clock = clock
        self._name_for = EventNamer()
        self._correlator = EventCorrelator(clock=clock, options=options, name_for=self._name_for)
        self._queue: asyncio.Queue[Event] = asyncio.Queue(max_queued)
        self._retry_sleep = retry_sleep
        self._max_tries = max_tries
        self._rng = rng or random.Random()
        self._writer: asyncio.Task[None] | None = None
        self._closed = False
        self.dropped = 0  # events dropped because the queue was full (informational)
        self._dropped_reported = 0
        self._drop_reported_at: float | None = None

    def new_recorder(self, component: str, *, host: str = "") -> EventRecorder:
        """A recorder whose events carry source.component = `component` (and source.host)."""
        return EventRecorder(self, component=component, host=host)

    async def flush(self) -> None:
        """Wait until every event queued so far has been written (or given up on)."""
        self._ensure_writer()
        await self._queue.join()

    async def shutdown(self, *, drain: bool = True) -> None:
        """Stop accepting events; with `drain`, first write what is queued. Then stop the writer."""
        self._closed = True
        if drain and self._writer is not None:
            await self._queue.join()
        if self._writer is not None:
            self._writer.cancel()
            await asyncio.wait({self._writer})
            self._writer = None

    def now(self) -> float:
        return self._clock.now()

    def _enqueue(self, event: Event) -> None:
        if self._closed:
            log.debug("event broadcaster shut down; dropping event %s", event.get("reason"))
            return
        self._ensure_writer()
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            self._drop(str(event.get("reason")), str(event.get("message")))

    def full(self) -> bool:
        """Open, and the queue holds `max_queued` events: the next one would be dropped."""
        return not self._closed and self._queue.full()

    def _drop(self, reason: str, message: str) -> None:
        """Counts an event dropped on a full queue. client-go logs every one; under a burst that
        is thousands of lines a second, so this logs the first at once and then at most one line
        per DROP_REPORT_INTERVAL with the count since the last line."""
        self.dropped += 1
        now = self._clock.now()
        if self._drop_reported_at is not None and now - self._drop_reported_at < DROP_REPORT_INTERVAL:
            return
        log.error("too many queued events; dropped %d event(s) since the last report, the latest %s/%s",
                  self.dropped - self._dropped_reported, reason, message)
        self._drop_reported_at, self._dropped_reported = now, self.dropped

    def _ensure_writer(self) -> None:
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write_loop(), name="event-writer")

    async def _write_loop(self) -> None:
        while True:
            event = await self._queue.get()
            try:
                await self._record_to_sink(event)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("writing event failed")
            finally:
                self._queue.task_done()

    async def _record_to_sink(self, event: Event) -> None:
        result = self._correlator.correlate(event)
        if result.skip:
            return
        tries = 0
        while not await self._record(result.event, result.patch):
            tries += 1
            if tries >= self._max_tries:
                log.error("unable to write event %s (retry limit exceeded)", result.event["metadata"].get("name"))
                return
            delay = self._retry_sleep * (self._rng.random() if tries == 1 else 1.0)
            await self._clock.sleep(delay)

    async def _record(self, event: Event, patch: dict[str, Any] | None) -> bool:
        """Write once: True when written or not worth retrying, False to retry later."""
        meta = event["metadata"]
        written: Event | None = None
        try:
            if patch is not None and int(event.get("count") or 0) > 1:
                try:
                    written = await self._sink.patch_event(event, patch)
                except NotFound:
                    written = None  # the Event was deleted (or expired): create it again
            if written is None:
                body = dict(event, metadata={k: v for k, v in meta.items() if k != "resourceVersion"})
                written = await self._sink.create_event(body)
        except AlreadyExists as e:
            log.debug("server rejected event (will not retry): %s", e)
            return True
        except ApiError as e:
            log.error("server rejected event %s (will not retry): %s", meta.get("name"), e)
            return True
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.warning("unable to write event %s (may retry): %s", meta.get("name"), e)
            return False
        self._correlator.update_state(written)
        return True


class EventRecorder:
    """Records events on behalf of one source component (see the module docstring)."""

    def __init__(self, broadcaster: EventBroadcaster, *, component: str, host: str = "") -> None:
        self._broadcaster = broadcaster
        self._source = {"component": component, **({"host": host} if host else {})}
        self._component = component
        self._host = host

    def event(self, obj: dict[str, Any], event_type: str, *, reason: str, message: str,
              annotations: dict[str, str] | None = None, field_path: str = "") -> None:
        """Queue an Event about `obj` (a full object or an object reference). Never blocks.

        `event_type` is "Normal" or "Warning"; anything else is logged and dropped, as upstream."""
        if event_type not in (NORMAL, WARNING):
            log.error("unsupported event type %r; event %s dropped", event_type, reason)
            return
        broadcaster = self._broadcaster
        if broadcaster.full():  # it would be dropped: do not build it
            broadcaster._drop(reason, message)
            return
        try:
            ref = object_reference(obj, field_path=field_path)
        except ValueError as e:
            log.error("could not construct reference, will not report event %s: %s", reason, e)
            return
        self._broadcaster._enqueue(self.make_event(ref, event_type, reason=reason, message=message,
                                                   annotations=annotations))

    def make_event(self, ref: dict[str, Any], event_type: str, *, reason: str, message: str,
                   annotations: dict[str, str] | None = None) -> Event:
        """The Event as first written (count 1), before correlation."""
        t = self._broadcaster.now()
        stamp = rfc3339(t)
        meta: dict[str, Any] = {"name": self._broadcaster._name_for(str(ref["name"]), t),
                                "namespace": ref.get("namespace") or "default"}
        if annotations:
            meta["annotations"] = dict(annotations)
        return {
            "apiVersion": "v1", "kind": "Event", "metadata": meta,
            "involvedObject": ref, "reason": reason, "message": message, "type": event_type,
            "source": dict(self._source), "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
            "reportingComponent": self._component, "reportingInstance": self._host,
        }
