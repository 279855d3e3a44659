"""Custom resources in storage: written in the CRD's storage version, read in the version asked.

A CRD with one version and no defaults stores and serves objects byte for byte like any other
kind. Otherwise (``ResourceType.converts``) every object read is rewritten as upstream's
storage decoder and conversion strategy None do: ``apiVersion`` becomes the requested version,
then the requested version's schema prunes it and applies its defaults (so a default added to
the schema shows on existing objects). Writes store ``apiVersion`` of the storage version.

``VersionedObjectStore`` does this for every handler (it is the app's ObjectStore; built-in
kinds pass straight through). The watch cache holds stored bytes, so such kinds never use it
(``cache`` answers "not from the cache" for them), and their watches read store events with
``reading(rt, match)`` as the selector: it rewrites each object before matching.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, cast

import msgspec

from kubecore.api import pruning
from kubecore.api.registry import ResourceType
from kubecore.apiserver.storage import ObjectStore, Page

if TYPE_CHECKING:
    from kubecore.apiserver.cache import WatchCache

__all__ = ["VersionedObjectStore", "to_served", "reading"]

Obj = dict[str, Any]
_decode = msgspec.json.Decoder(dict[str, Any]).decode
_encode = msgspec.json.encode


def to_served(rt: ResourceType, obj: Obj) -> Obj:
    """A stored object as version ``rt.version`` shows it (in place)."""
    if rt.converts:
        obj["apiVersion"] = rt.api_version
        pruning.coerce(obj, rt.schema)
    return obj


def _stores_elsewhere(rt: ResourceType) -> bool:
    return bool(rt.crd and rt.storage_version and rt.storage_version != rt.version)


def reading(rt: ResourceType, match: Callable[[Obj], bool]) -> Callable[[Obj], bool]:
    """A watch selector that rewrites each object before ``match`` sees it (not MATCH_ALL, so
    the watch never streams stored bytes of another version)."""
    if not rt.converts:
        return match

    def rewritten(obj: Obj) -> bool:
        return match(to_served(rt, obj))

    return rewritten


class _SkipConverting:
    """The watch cache, except that kinds whose objects are rewritten on read are not served
    from it (LIST and WATCH then take the store path, which rewrites)."""

    def __init__(self, cache: WatchCache) -> None:
        self._cache = cache

    def list_body(self, rt: ResourceType, *args: Any, **kwargs: Any) -> Any:
        return None if rt.converts else self._cache.list_body(rt, *args, **kwargs)

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
        page = super().list(rt, *args, **kwargs)
        if rt.converts:
            for obj in page.items:
                to_served(rt, obj)
        return page

    def list_raw(self, rt: ResourceType, *args: Any, **kwargs: Any) -> Page[bytes]:
        page = super().list_raw(rt, *args, **kwargs)
        if rt.converts:
            page.items = [_encode(to_served(rt, _decode(raw))) for raw in page.items]
        return page

    async def create(self, rt: ResourceType, *args: Any, **kwargs: Any) -> Obj:
        obj: Obj = args[2] if len(args) > 2 else kwargs["obj"]
        if not _stores_elsewhere(rt):
            return await super().create(rt, *args, **kwargs)
        obj["apiVersion"] = f"{rt.group}/{rt.storage_version}"
        try:
            return await super().create(rt, *args, **kwargs)
        finally:
            obj["apiVersion"] = rt.api_version

    async def create_encoded(self, rt: ResourceType, *args: Any, **kwargs: Any) -> bytes:
        if not _stores_elsewhere(rt):
            return await super().create_encoded(rt, *args, **kwargs)
        return _encode(await self.create(rt, *args, **kwargs))

    async def replace_encoded(self, rt: ResourceType, *args: Any, **kwargs: Any) -> bytes:
        if not _stores_elsewhere(rt):
            return await super().replace_encoded(rt, *args, **kwargs)
        return _encode(await self.replace(rt, *args, **kwargs))

    async def replace(self, rt: ResourceType, *args: Any, **kwargs: Any) -> Obj:
        obj: Obj = args[2] if len(args) > 2 else kwargs["obj"]
        if not _stores_elsewhere(rt):
            return await super().replace(rt, *args, **kwargs)
        obj["apiVersion"] = f"{rt.group}/{rt.storage_version}"
        try:
            return await super().replace(rt, *args, **kwargs)
        finally:
            obj["apiVersion"] = rt.api_version
