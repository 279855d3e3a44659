"""Custom resources (and built-in views of shared storage) in storage: written in the storage
version, read in the version asked.

A CRD with one version and no defaults stores and serves objects byte for byte like any other
kind. Otherwise (``ResourceType.converts``) every object read is rewritten as upstream's
storage decoder and conversion strategy None do: ``apiVersion`` becomes the requested version,
then the requested version's schema prunes it and applies its defaults (so a default added to
the schema shows on existing objects). Writes store ``apiVersion`` of the storage version.

``VersionedObjectStore`` does this for every handler (it is the app's ObjectStore; built-in
kinds pass straight through). The watch cache holds stored bytes, so such kinds never use it
(``cache`` answers "not from the cache" for them), and their watches read store events with
``reading(rt, match)`` as the selector: it rewrites each object before matching.

Built-in resources served by one group from another group's storage take the same paths
(``ResourceType.shares_storage``): events.k8s.io/v1 events are the core/v1 events (one key
space, one resourceVersion sequence), converted by kubecore.api.eventconv on every read and
stored in core/v1 form on every write. The core/v1 events themselves pass straight through.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, cast

import msgspec

from kubecore.api import eventconv, pruning
from kubecore.api.registry import ResourceType
from kubecore.apiserver.storage import ObjectStore, Page

if TYPE_CHECKING:
    from kubecore.apiserver.cache import WatchCache

__all__ = ["VersionedObjectStore", "to_served", "reading"]

Obj = dict[str, Any]
_decode = msgspec.json.Decoder(dict[str, Any]).decode
_encode = msgspec.json.encode


Convert = Callable[[Obj], Obj]

# Built-in views of another group's storage: (group, version, kind) -> (stored -> served,
# served -> stored), both in place.
_VIEWS: dict[tuple[str, str, str], tuple[Convert, Convert]] = {
    ("events.k8s.io", "v1", "Event"): (eventconv.to_events, eventconv.to_core),
}


def _view(rt: ResourceType) -> tuple[Convert, Convert]:
    """(stored -> served, served -> stored) of a built-in view of another group's storage."""
    return _VIEWS[(rt.group, rt.version, rt.kind)]


def to_served(rt: ResourceType, obj: Obj) -> Obj:
    """A stored object as version ``rt.version`` shows it (in place)."""
    if rt.converts:
        if rt.shares_storage:
            return _view(rt)[0](obj)
        obj["apiVersion"] = rt.api_version
        pruning.coerce(obj, rt.schema)
    return obj


def _to_stored(rt: ResourceType, obj: Obj) -> None:
    """An object to write, rewritten in place into the stored form."""
    if rt.shares_storage:
        _view(rt)[1](obj)
    else:
        obj["apiVersion"] = f"{rt.group}/{rt.storage_version}"


def _back_to_served(rt: ResourceType, obj: Obj) -> None:
    """Undoes `_to_stored` on the caller's object once it is written (or the write failed)."""
    if rt.shares_storage:
        _view(rt)[0](obj)
    else:
        obj["apiVersion"] = rt.api_version


def _stores_elsewhere(rt: ResourceType) -> bool:
    """Written in another form than served (only kinds that convert on read: the built-in kinds
    served as stored answer after one attribute)."""
    return rt.converts and (rt.shares_storage or bool(rt.crd and rt.storage_version and rt.storage_version != rt.version))


class _Reading:
    """A selector that rewrites each object (in place) before ``match`` sees it."""

    __slots__ = ("rt", "match")

    def __init__(self, rt: ResourceType, match: Callable[[Obj], bool]) -> None:
        self.rt, self.match = rt, match

    def __call__(self, obj: Obj) -> bool:
        return self.match(to_served(self.rt, obj))


def reading(rt: ResourceType, match: Callable[[Obj], bool]) -> Callable[[Obj], bool]:
    """A watch selector that rewrites each object before ``match`` sees it (not MATCH_ALL, so
    the watch never streams stored bytes of another version)."""
    if not rt.converts or isinstance(match, _Reading):
        return match
    return _Reading(rt, match)


class _ConvertedBody:
    """A LIST body of a converted view, whole (what rest.send_chunks reads of a NativeListBody)."""

    def __init__(self, body: bytes) -> None:
        self._body: bytes | None = body
        self._len = len(body)

    def __len__(self) -> int:
        return self._len

    def next_chunk(self, max_bytes: int) -> bytes | None:
        body, self._body = self._body, None
        return body


def _stored_type(rt: ResourceType) -> ResourceType:
    """The type whose stored objects a shared-storage view serves (its watch cache holds them)."""
    assert rt.storage_group is not None
    return replace(rt, group=rt.storage_group, version=rt.storage_version, storage_group=None, converts=False)


class _SkipConverting:
    """The watch cache, except that kinds whose objects are rewritten on read are not served
    from it (LIST and WATCH then take the store path, which rewrites). A LIST of a view of
    shared storage (events.k8s.io/v1 events) is selected by the stored type's cache (its field
    labels converted) and only the objects selected are converted."""

    def __init__(self, cache: WatchCache) -> None:
        self._cache = cache
        self._stored: dict[ResourceType, ResourceType] = {}

    def list_body(self, rt: ResourceType, namespace: str, query: Any, *, limit: int) -> Any:
        if not rt.converts:
            return self._cache.list_body(rt, namespace, query, limit=limit)
        if not rt.shares_storage:
            return None
        stored = self._stored.get(rt)
        if stored is None:
            stored = self._stored[rt] = _stored_type(rt)
        body = self._cache.list_body(stored, namespace, query, limit=limit, view=rt)
        if body is None:
            return None
        doc = _decode(b"".join(iter(lambda: body.next_chunk(1 << 22), None)))
        for obj in doc.get("items") or ():
            to_served(rt, obj)
        doc["kind"], doc["apiVersion"] = rt.list_kind, rt.api_version
        return _ConvertedBody(_encode(doc))

    def watcher(self, rt: ResourceType, *args: Any, **kwargs: Any) -> Any:
        return None if rt.converts else self._cache.watcher(rt, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cache, name)


class VersionedObjectStore(ObjectStore):
    """ObjectStore with the read/write rewriting above for custom resources that need it."""

    @property
    def cache(self) -> WatchCache:
        if not hasattr(self, "_skip_converting"):
            self._skip_converting = _SkipConverting(super().cache)
        return cast("WatchCache", self._skip_converting)

    def get_raw(self, rt: ResourceType, *args: Any, **kwargs: Any) -> bytes:
        raw = super().get_raw(rt, *args, **kwargs)
        if not rt.converts:
            return raw
        return _encode(to_served(rt, _decode(raw)))

    def get(self, rt: ResourceType, *args: Any, **kwargs: Any) -> Obj:
        return to_served(rt, super().get(rt, *args, **kwargs))

    def get_pair(self, rt: ResourceType, *args: Any, **kwargs: Any) -> tuple[Obj, Obj]:
        live, copy = super().get_pair(rt, *args, **kwargs)
        return to_served(rt, live), to_served(rt, copy)

    def list(self, rt: ResourceType, *args: Any, **kwargs: Any) -> Page[Obj]:
        if not rt.converts:
            return super().list(rt, *args, **kwargs)
        match = kwargs.get("match")
        if match is not None:  # selectors see the served object (field labels are the view's)
            kwargs["match"] = reading(rt, match)
            return super().list(rt, *args, **kwargs)  # matching rewrote every item
        page = super().list(rt, *args, **kwargs)
        for obj in page.items:
            to_served(rt, obj)
        return page

    def list_raw(self, rt: ResourceType, *args: Any, **kwargs: Any) -> Page[bytes]:
        page = super().list_raw(rt, *args, **kwargs)
        if rt.converts:
            page.items = [_encode(to_served(rt, _decode(raw))) for raw in page.items]
        return page

    async def create(self, rt: ResourceType, namespace: str, name: str, obj: Obj) -> Obj:
        if not _stores_elsewhere(rt):
            return await super().create(rt, namespace, name, obj)
        await self.create_encoded(rt, namespace, name, obj)
        return obj

    async def create_encoded(self, rt: ResourceType, namespace: str, name: str, obj: Obj) -> bytes:
        """Stores `obj` in its stored form; `obj` is the served form again afterwards (with its
        resourceVersion), and the answer is it encoded. One coroutine: Events come here at every create."""
        if not _stores_elsewhere(rt):
            return await super().create_encoded(rt, namespace, name, obj)
        _to_stored(rt, obj)
        try:
            await ObjectStore.create_encoded(self, rt, namespace, name, obj)
        finally:
            _back_to_served(rt, obj)
        return _encode(obj)

    async def replace_encoded(self, rt: ResourceType, *args: Any, **kwargs: Any) -> bytes:
        if not _stores_elsewhere(rt):
            return await super().replace_encoded(rt, *args, **kwargs)
        return _encode(await self.replace(rt, *args, **kwargs))

    async def replace(self, rt: ResourceType, *args: Any, **kwargs: Any) -> Obj:
        obj: Obj = args[2] if len(args) > 2 else kwargs["obj"]
        if not _stores_elsewhere(rt):
            return await super().replace(rt, *args, **kwargs)
        _to_stored(rt, obj)
        try:
            return await super().replace(rt, *args, **kwargs)
        finally:
            _back_to_served(rt, obj)
