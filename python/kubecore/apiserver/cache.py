"""The watch cache: LIST and WATCH served from Rust (kubecore-watchcache) instead of the store.

One native cache per resource type, created on first use: it lists the type's prefix from the
store once, then follows the store's watch inside Rust (no Python per event). Python decides
*whether* a request can be served from the cache and hands over the parsed selectors; Rust
matches, pages, and writes the response bytes.

Which reads the cache serves (upstream's cacher makes the same choices):
- LIST without resourceVersion: a consistent read — the cache first catches up with the store's
  current revision (`sync`, no waiting on a thread); resourceVersion="0": whatever is cached;
  resourceVersion=N: served once the cache is at N or later; resourceVersionMatch=Exact goes to
  the store. A continue token is served from the snapshot its first page kept, else from the store.
- WATCH from N: replayed from the cache's event ring when N is still in it, else the store path;
  without resourceVersion (or with sendInitialEvents) the current objects come first.
- Table / PartialObjectMetadata output, and field selectors on a field the cache cannot extract
  for the kind (see `FIELD_SPECS`), keep the Python paths.
- A resource served as a converted view of stored objects (custom resources with several
  versions or schema defaults, events.k8s.io/v1 events over the core/v1 ones) is never served
  from here as is: the cache holds stored bytes (kubecore.apiserver.crstore takes those
  requests; a LIST of events.k8s.io/v1 events is selected by the core/v1 events' cache, its
  field labels converted, and crstore converts the objects selected; its WATCH takes the store).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from kubecore._native import NativeCacheWatcher, NativeListBody, NativeResourceCache, NativeWatchCache, StoreError
from kubecore.api.registry import ResourceType
from kubecore.api.selectors import object_fields, parse_field_selector, parse_label_selector
from kubecore.apiserver.storage import ObjectStore, _decode_continue, parse_rv

if TYPE_CHECKING:
    from kubecore.store import Store

# KUBECORE_WATCH_CACHE=0 turns the cache off (every LIST/WATCH takes the store path), as
# kube-apiserver's --watch-cache=false does: for comparisons and as an escape hatch.
ENABLED = os.environ.get("KUBECORE_WATCH_CACHE", "1") != "0"

Path = list[str | int]
FieldSpecs = list[tuple[str, str, list[Path]]]
LabelReqs = list[tuple[str, str, list[str]]]
FieldTerms = list[tuple[str, str, str]]


def _spec(label: str, fmt: str, *paths: Path) -> tuple[str, str, list[Path]]:
    return label, fmt, list(paths)


def _strings(base: Path, **labels: str) -> FieldSpecs:
    return [_spec(label, "s", [*base, member]) for label, member in labels.items()]


_INVOLVED = {f"involvedObject.{m}": m for m in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")}

# Per kind, the fields kubecore.api.fieldsets extracts, as JSON paths + format ("s": Go fmt of a
# string, "i": of an int, "b": of a bool, "s*": the first of the paths whose string is not
# empty). tests/unit/apiserver/test_watchcache.py checks them against fieldsets.object_fields; a
# kind whose extracted fields are not all here keeps Python matching for field selectors on them.
FIELD_SPECS: dict[tuple[str, str], FieldSpecs] = {
    ("", "Pod"): [
        *_strings(["spec"], **{f"spec.{m}": m for m in ("nodeName", "restartPolicy", "schedulerName", "serviceAccountName")}),
        _spec("spec.hostNetwork", "b", ["spec", "hostNetwork"]),
        _spec("status.phase", "s", ["status", "phase"]),
        _spec("status.podIP", "s", ["status", "podIPs", 0, "ip"], ["status", "podIP"]),
        _spec("status.nominatedNodeName", "s", ["status", "nominatedNodeName"]),
    ],
    ("", "Node"): [_spec("spec.unschedulable", "b", ["spec", "unschedulable"])],
    ("", "ReplicationController"): [_spec("status.replicas", "i", ["status", "replicas"])],
    ("", "Event"): [
        *_strings(["involvedObject"], **_INVOLVED),
        *_strings([], reason="reason", reportingComponent="reportingComponent", type="type"),
        _spec("source", "s*", ["source", "component"], ["reportingComponent"]),  # the first non-empty
    ],
    ("", "Namespace"): [_spec("status.phase", "s", ["status", "phase"])],
    ("", "Secret"): [_spec("type", "s", ["type"])],
    ("", "Service"): [_spec("spec.clusterIP", "s", ["spec", "clusterIP"]), _spec("spec.type", "s", ["spec", "type"])],
    ("apps", "ReplicaSet"): [_spec("status.replicas", "i", ["status", "replicas"])],
    ("batch", "Job"): [_spec("status.successful", "i", ["status", "succeeded"])],
}


def field_specs(rt: ResourceType) -> FieldSpecs:
    """metadata.name (and metadata.namespace for namespaced kinds) plus the kind's own fields."""
    meta = [_spec("metadata.name", "s", ["metadata", "name"])]
    if rt.namespaced:
        meta.append(_spec("metadata.namespace", "s", ["metadata", "namespace"]))
    return meta + FIELD_SPECS.get((rt.group, rt.kind), [])


class ResourceCache:
    """The native cache of one resource type, and which field labels it can match."""

    def __init__(self, native: NativeResourceCache, rt: ResourceType) -> None:
        self.native = native
        self.rt = rt
        # Labels fieldsets extracts for this kind but the specs do not: matching them needs Python.
        # (A label fieldsets never extracts is "" for every object, in Rust as in Python.)
        specified = {label for label, _, _ in field_specs(rt)}
        self.python_only = frozenset(set(object_fields(rt, {})) - specified)
        self.head = b'{"kind":"' + rt.list_kind.encode() + b'","apiVersion":"' + rt.api_version.encode() + b'","metadata":'

    def selection(self, query: Mapping[str, str], *, name: str = "",
                  view: ResourceType | None = None) -> tuple[LabelReqs, FieldTerms] | None:
        """The request's selectors for Rust, or None when one needs Python matching. `view`: the
        type the request named when it is a converted view of this one (its field labels are
        converted to the stored type's, as upstream's field label conversion does)."""
        labels = parse_label_selector(query.get("labelSelector", ""))
        fields = parse_field_selector(query.get("fieldSelector", ""), view or self.rt)
        if any(t.field in self.python_only for t in fields.terms):
            return None
        terms = [(t.field, t.op, t.value) for t in fields.terms]
        if name:
            terms.append(("metadata.name", "=", name))
        return [(r.key, r.op, list(r.values)) for r in labels.requirements], terms

    def fresh(self, raw_rv: str | None) -> bool:
        """Brings the cache to what the request's resourceVersion asks for: unset -> the store's
        current revision (consistent read), "0" -> anything, N -> at least N. False when it
        cannot be (N is ahead of the store)."""
        if raw_rv == "0":
            return True
        want = parse_rv(raw_rv)
        if not raw_rv or want > self.native.revision:
            self.native.sync()
        return want <= self.native.revision


class WatchCache:
    """The caches of one store, created on first use, and the wake-ups of their watchers."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._native: NativeWatchCache | None = None
        self._caches: dict[tuple[str, str, str, str], ResourceCache] = {}
        self._waiters: dict[int, asyncio.Future[None]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    def _cache_set(self) -> NativeWatchCache:
        if self._native is None:
            self._native = NativeWatchCache(self._store._native)  # the store's own native handle
        return self._native

    def resource(self, rt: ResourceType) -> ResourceCache | None:
        """The cache of `rt` (listed from the store the first time); None if the store is closed
        or the cache is turned off."""
        if not ENABLED:
            return None
        key = (rt.storage_prefix, rt.group, rt.version, rt.kind)
        rc = self._caches.get(key)
        if rc is None:
            if rt.shares_storage:  # another group's stored form: the bytes are not this view's
                return None
            try:
                native = self._cache_set().resource(
                    rt.storage_prefix.encode(), kind=rt.kind, api_version=rt.api_version, fields=field_specs(rt)
                )
            except StoreError:
                return None
            rc = self._caches[key] = ResourceCache(native, rt)
        return rc

    def list_body(self, rt: ResourceType, namespace: str, query: Mapping[str, str], *,
                  limit: int, view: ResourceType | None = None) -> NativeListBody | None:
        """A LIST response body served from the cache (taken in chunks), or None: take the store
        path. `view`: the request named a converted view of `rt` (the body is `rt`'s: the caller
        converts it)."""
        if query.get("resourceVersionMatch") == "Exact":
            return None
        rc = self.resource(rt)
        sel = rc.selection(query, view=view) if rc is not None else None
        if rc is None or sel is None:
            return None
        prefix = ObjectStore.prefix(rt, namespace)
        token, cont_rev, cont_key = query.get("continue", ""), 0, None
        try:
            if token:
                cont_rev, rel = _decode_continue(token)
                cont_key = prefix + rel.encode("utf-8", "surrogateescape")
            elif not rc.fresh(query.get("resourceVersion")):
                return None
        except StoreError:
            return None
        return rc.native.list_body(prefix, head=rc.head, labels=sel[0], fields=sel[1], limit=limit,
                                   continue_revision=cont_rev, continue_key=cont_key)

    def watcher(
        self, rt: ResourceType, namespace: str, query: Mapping[str, str], *, initial: bool, end_bookmark: bool, name: str = ""
    ) -> NativeCacheWatcher | None:
        """A cache watcher for a WATCH request, or None: take the store path. `initial`: send the
        current objects first (no resourceVersion, or sendInitialEvents)."""
        rc = self.resource(rt)
        sel = rc.selection(query, name=name) if rc is not None else None
        if rc is None or sel is None:
            return None
        prefix = ObjectStore.prefix(rt, namespace)
        raw_rv = query.get("resourceVersion")
        try:
            if initial:
                if not rc.fresh(raw_rv):
                    return None
                return rc.native.watch(prefix, labels=sel[0], fields=sel[1], initial=True, initial_end_bookmark=end_bookmark)
            start = parse_rv(raw_rv) or rc.native.sync()  # no resourceVersion, no initial events: from now
            return rc.native.watch(prefix, labels=sel[0], fields=sel[1], start_revision=start)
        except StoreError:
            return None

    # ---- waiting for watchers (one eventfd for all of them) ----------------------------------

    def _attach(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            if self._loop is not None and not self._loop.is_closed():
                self._loop.remove_reader(self._cache_set().completion_fd())
            loop.add_reader(self._cache_set().completion_fd(), self._drain)
            self._loop = loop
        return loop

    async def wait(self, watcher_id: int) -> None:
        """Until the watcher has news or ended (wake-ups may be spurious)."""
        fut: asyncio.Future[None] = self._attach().create_future()
        self._waiters[watcher_id] = fut
        try:
            await fut
        finally:
            if self._waiters.get(watcher_id) is fut:
                del self._waiters[watcher_id]

    def wake(self, watcher_id: int) -> None:
        """Ends the watcher's current wait (if any), e.g. for a timer."""
        fut = self._waiters.pop(watcher_id, None)
        if fut is not None and not fut.done():
            fut.set_result(None)

    def _drain(self) -> None:
        for watcher_id in self._cache_set().drain():
            self.wake(watcher_id)

    def close(self) -> None:
        """Stops feeding every cache; their watchers end."""
        if self._native is not None:
            if self._loop is not None and not self._loop.is_closed():
                self._loop.remove_reader(self._native.completion_fd())
            self._native.close()
        self._loop = None
