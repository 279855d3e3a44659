"""WATCH: a chunked stream of `{"type": ..., "object": ...}` lines.

From `resourceVersion=N` the stream replays every change after N (410 Gone as an ERROR event when
N was compacted), then goes live. Without a resourceVersion (or "0") it first sends the current
objects as ADDED. `sendInitialEvents=true` does the same and then a BOOKMARK annotated
`k8s.io/initial-events-end: "true"`. With selectors, an object that starts or stops matching is
sent as ADDED or DELETED, as upstream does.

Watches are served from the watch cache (frames encoded in Rust, one write per batch) unless
they ask for Tables or PartialObjectMetadata, start before the cache's event ring, or select on a
field the cache cannot extract; those read a store watch and match in Python here.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable

import msgspec
from aiohttp import web

from kubecore.api import errors
from kubecore.api.registry import ResourceType
from kubecore._native import NativeCacheWatcher
from kubecore.apiserver import table
from kubecore.apiserver.cache import WatchCache
from kubecore.apiserver.storage import MATCH_ALL, ObjectStore, decode, parse_rv, with_rv
from kubecore.store import CompactedError, Event, prefix_end

Obj = dict[str, Any]
_encode = msgspec.json.encode

BOOKMARK_EVERY = 10.0

DEFAULT_TIMEOUT = 1800.0

# Frames taken from a cache watcher per poll (a poll that returns less left nothing behind).
POLL_BYTES = 1 << 20


def frame(kind: str, obj: Obj) -> bytes:
    return b'{"type":"' + kind.encode() + b'","object":' + _encode(obj) + b"}\n"


class Framer:
    """Encodes events as the client asked: objects, PartialObjectMetadata (metadata-only
    informers), or one-row Tables (column definitions only in the first event, as upstream sends
    them)."""

    def __init__(self, rt: ResourceType, accept: str, include: str) -> None:
        self.rt, self.tables, self.include, self.first = rt, table.wants_table(accept), include, True
        self.partial = not self.tables and table.wants_partial_metadata(accept) is not None

    @property
    def plain(self) -> bool:
        """The objects as stored (the watch cache can frame those itself)."""
        return not self.tables and not self.partial

    def __call__(self, kind: str, obj: Obj) -> bytes:
        if kind in ("BOOKMARK", "ERROR"):
            return frame(kind, obj)
        if self.partial:
            return frame(kind, table.partial(obj))
        if not self.tables:
            return frame(kind, obj)
        lm = {"resourceVersion": (obj.get("metadata") or {}).get("resourceVersion", "")}
        t = table.table([obj], list_meta=lm, group=self.rt.group, kind=self.rt.kind, include=self.include, rt=self.rt)
        if not self.first:
            t["columnDefinitions"] = []
        self.first = False
        return frame(kind, t)


def bookmark(rt: ResourceType, revision: int, *, initial_end: bool = False) -> bytes:
    meta: Obj = {"resourceVersion": str(revision)}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return frame("BOOKMARK", {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta})


def raw_frame(ev: Event) -> bytes:
    """The event for a watcher without selectors, from the stored bytes (never decoded)."""
    if ev.type == "DELETE":
        assert ev.prev_kv is not None
        kind, value = b"DELETED", with_rv(ev.prev_kv.value, ev.kv.mod_revision)
    else:
        kind, value = (b"MODIFIED" if ev.prev_kv is not None else b"ADDED"), with_rv(ev.kv.value, ev.kv.mod_revision)
    return b'{"type":"' + kind + b'","object":' + value + b"}\n"


def _transition(ev: Event, match: Callable[[Obj], bool]) -> tuple[str, Obj] | None:
    """The watch event a store change makes for a client with this selector, if any."""
    old = decode(ev.prev_kv.value, ev.prev_kv.mod_revision) if ev.prev_kv is not None else None
    old_in = old is not None and match(old)
    if ev.type == "DELETE":
        if not old_in or old is None:
            return None
        old["metadata"]["resourceVersion"] = str(ev.kv.mod_revision)
        return "DELETED", old
    new = decode(ev.kv.value, ev.kv.mod_revision)
    new_in = match(new)
    if new_in:
        return ("MODIFIED" if old_in else "ADDED"), new
    if old_in and old is not None:  # it left the selection: upstream sends the last state it matched
        old["metadata"]["resourceVersion"] = str(ev.kv.mod_revision)
        return "DELETED", old
    return None


async def serve(
    request: web.Request,
    objects: ObjectStore,
    rt: ResourceType,
    namespace: str,
    match: Callable[[Obj], bool],
    *,
    name: str = "",
) -> web.StreamResponse:
    """Serves a WATCH from the watch cache when it can (see kubecore.apiserver.cache), else from
    a store watch with `match` (Python) deciding. `name`: the deprecated /pods/NAME?watch=1 form,
    already folded into `match`."""
    q = request.query
    rv = parse_rv(q.get("resourceVersion"))
    raw_timeout = q.get("timeoutSeconds") or ""
    if raw_timeout and not raw_timeout.isdigit():
        raise errors.bad_request(f"invalid timeoutSeconds {raw_timeout!r}: must be a non-negative integer")
    timeout = float(raw_timeout or DEFAULT_TIMEOUT)
    bookmarks = q.get("allowWatchBookmarks") in ("true", "1")
    send_initial = q.get("sendInitialEvents") == "true"
    # Without a resourceVersion a watch starts with the current objects, unless the client asked
    # for no initial events (sendInitialEvents=false: start at the most recent revision).
    initial = send_initial or (rv == 0 and q.get("sendInitialEvents") != "false")
    deadline = time.monotonic() + timeout
    framer = Framer(rt, request.headers.get("Accept", ""), q.get("includeObject", "Metadata"))

    if rv > objects.store.revision and not initial:
        raise errors.timeout(f"Too large resource version: {rv}, current: {objects.store.revision}", 1)
    if framer.plain:
        cached = objects.cache.watcher(rt, namespace, q, initial=initial, end_bookmark=send_initial, name=name)
        if cached is not None:
            return await _serve_cached(request, objects.cache, cached, rt, deadline=deadline, bookmarks=bookmarks)

    # the current objects are read before the response starts, so that errors are plain Statuses
    current: list[Obj] = []
    if initial:
        page = objects.list(rt, namespace, match=match, revision=rv if send_initial and rv else 0)
        current, start = page.items, page.revision + 1
    else:
        start = (rv or objects.store.revision) + 1

    resp = web.StreamResponse(headers={"Content-Type": "application/json", "Cache-Control": "no-cache, private"})
    resp.enable_chunked_encoding()
    await resp.prepare(request)
    prefix = objects.prefix(rt, namespace)
    watch = objects.store.watch(prefix, prefix_end(prefix), start_revision=start, prev_kv=True)
    try:
        out = b"".join(framer("ADDED", o) for o in current)
        if send_initial:
            out += bookmark(rt, start - 1, initial_end=True)
        if out:
            await resp.write(out)
        await _stream(resp, watch, rt, match, framer, deadline=deadline, bookmarks=bookmarks, last_rev=start - 1)
    except CompactedError:
        err = errors.expired(f"too old resource version: {rv} ({objects.store.compact_revision})")
        await resp.write(frame("ERROR", err.status()))
    except ConnectionResetError:
        pass  # the client went away while we were writing
    finally:
        watch.cancel()  # also when the handler is cancelled because the client disconnected
    return resp


async def _serve_cached(
    request: web.Request,
    cache: WatchCache,
    watcher: NativeCacheWatcher,
    rt: ResourceType,
    *,
    deadline: float,
    bookmarks: bool,
) -> web.StreamResponse:
    """Streams what the cache watcher has, as it comes: one write per batch of frames. The
    stream ends when the watcher does (a client too slow for its buffer re-watches). One timer
    per watch (deadline, bookmarks) wakes it; waiting for frames costs a future, no timer."""
    resp = web.StreamResponse(headers={"Content-Type": "application/json", "Cache-Control": "no-cache, private"})
    resp.enable_chunked_encoding()
    loop = asyncio.get_running_loop()
    end = loop.time() + (deadline - time.monotonic())
    next_bookmark = loop.time() + BOOKMARK_EVERY
    timer = loop.call_at(min(end, next_bookmark), cache.wake, watcher.id)
    try:
        await resp.prepare(request)
        while True:
            data = watcher.poll(POLL_BYTES)
            if data is None:
                return resp
            if data:
                await resp.write(data)
                if len(data) >= POLL_BYTES:
                    continue  # maybe more pending: poll again before waiting
            now = loop.time()
            if now >= end:
                return resp
            if now >= next_bookmark:
                rev = watcher.progress() if bookmarks else None
                if rev is not None:
                    await resp.write(bookmark(rt, rev))
                next_bookmark = now + BOOKMARK_EVERY
                timer.cancel()
                timer = loop.call_at(min(end, next_bookmark), cache.wake, watcher.id)
            await cache.wait(watcher.id)
    except ConnectionResetError:
        pass  # the client went away while we were writing
    finally:
        timer.cancel()
        watcher.cancel()  # also when the handler is cancelled because the client disconnected
    return resp


async def _stream(
    resp: web.StreamResponse,
    watch: Any,
    rt: ResourceType,
    match: Callable[[Obj], bool],
    framer: Framer,
    *,
    deadline: float,
    bookmarks: bool,
    last_rev: int,
) -> None:
    raw = match is MATCH_ALL and framer.plain
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        try:
            ev = await asyncio.wait_for(watch.__anext__(), timeout=min(left, BOOKMARK_EVERY))
        except StopAsyncIteration:
            return
        except asyncio.TimeoutError:
            if bookmarks:
                await resp.write(bookmark(rt, last_rev))
            continue
        last_rev = ev.kv.mod_revision
        if raw:
            await resp.write(raw_frame(ev))
            continue
        t = _transition(ev, match)
        if t is not None:
            await resp.write(framer(*t))
