"""Objects in the store: one key per object (`ResourceType.key`), JSON bytes as the value.

The stored JSON has no `metadata.resourceVersion`: an object's resourceVersion is the store's
mod_revision of its key, put back on every read (as upstream's etcd3 storage does). Writes that
must not race use transactions that compare the key's mod_revision (or create_revision == 0).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Generic, TypeVar

import msgspec

from kubecore.api import errors
from kubecore.api.registry import ResourceType
from kubecore.apiserver.leases import DEFAULT_EVENT_TTL, LeaseManager
from kubecore.store import CompactedError, Compare, FutureRevisionError, KeyValue, Op, Store, prefix_end

if TYPE_CHECKING:
    from kubecore.apiserver.cache import WatchCache

_decode = msgspec.json.Decoder(dict[str, Any]).decode
_encode = msgspec.json.encode

Obj = dict[str, Any]
EVENTS_PREFIX = "/registry/events/"
"""Where the Events of both API groups are stored (they expire: `ObjectStore.event_ttl`)."""


def decode(value: bytes, revision: int) -> Obj:
    obj = _decode(value)
    obj.setdefault("metadata", {})["resourceVersion"] = str(revision)
    return obj


_META_FIRST = b'{"metadata":{'


def encode(obj: Obj) -> bytes:
    """The stored form: metadata first and without resourceVersion, so that `with_rv` can put
    the revision back into the bytes without decoding them."""
    meta = obj.get("metadata") or {}
    if "resourceVersion" in meta:
        meta = {k: v for k, v in meta.items() if k != "resourceVersion"}
    out = {"metadata": meta, **obj}  # "metadata" stays first; the spread put obj's back: undo that
    out["metadata"] = meta
    return _encode(out)


def with_rv(value: bytes, revision: int) -> bytes:
    """The stored bytes as a client sees them: resourceVersion spliced in as the first field of
    metadata. Bytes in any other layout are decoded and encoded again."""
    if not value.startswith(_META_FIRST):
        return _encode(decode(value, revision))
    at = len(_META_FIRST)
    rv = b'"resourceVersion":"%d"' % revision
    sep = b"" if value[at:at + 1] == b"}" else b","
    return value[:at] + rv + sep + value[at:]


def MATCH_ALL(obj: Obj) -> bool:  # noqa: N802 - a sentinel, compared by identity
    """The selector of a request without label or field selectors: lets a handler take the
    byte paths (`with_rv`) that never decode objects."""
    return True


def parse_rv(value: str | None, *, what: str = "resourceVersion") -> int:
    """A resourceVersion from a client: "" / None -> 0; anything not a decimal -> 400."""
    if value in (None, ""):
        return 0
    assert value is not None
    if not value.isdigit():
        raise errors.bad_request(f"invalid {what}: {value!r}: must be an unsigned integer")
    return int(value)


T = TypeVar("T")


@dataclass
class Page(Generic[T]):
    items: list[T]
    revision: int
    continue_token: str
    remaining: int | None


def _encode_continue(revision: int, start: bytes, prefix: bytes) -> str:
    body = {"v": "meta.k8s.io/v1", "rv": revision, "start": start[len(prefix):].decode("utf-8", "surrogateescape")}
    return base64.urlsafe_b64encode(_encode(body)).decode().rstrip("=")


LATEST = -1  # a continue token's rv for "continue at the latest revision" (handed out with a 410)


def _decode_continue(token: str) -> tuple[int, str]:
    """(revision, start key relative to the prefix); revision LATEST: the current one."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        body = _decode(raw)
        rv, start = int(body["rv"]), str(body["start"])
        if body.get("v") != "meta.k8s.io/v1" or (rv <= 0 and rv != LATEST):
            raise ValueError
        return rv, start
    except (ValueError, KeyError, TypeError, msgspec.DecodeError):
        raise errors.bad_request(f"invalid continue token: {token!r}") from None


EXPIRED_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new list "
    "without the continue parameter, or use the continue token in this response to retrieve the remainder of the "
    "results. Continuing with the provided token results in an inconsistent list - objects that were created, "
    "modified, or deleted between the time the first chunk was returned and now may show up in the list."
)


class ObjectStore:
    """CRUD of Kubernetes objects on a kubecore Store. Reads here go to the store; LIST and WATCH
    requests are served from `cache` (kubecore.apiserver.cache) when it can, with these methods
    as the fallback."""

    def __init__(self, store: Store, *, event_ttl: int = DEFAULT_EVENT_TTL) -> None:
        self.store = store
        self._cache: WatchCache | None = None
        self.event_ttl = event_ttl
        """Seconds an Event lives after its last write (kube-apiserver's --event-ttl; 0: forever)."""
        self._leases = LeaseManager(store)

    def _expires(self, rt: ResourceType) -> bool:
        """Whether writes of `rt` go on a lease: Events do (unless --event-ttl 0), nothing else."""
        return self.event_ttl > 0 and rt.storage_prefix == EVENTS_PREFIX

    @property
    def cache(self) -> WatchCache:
        """The watch cache of this store (created on first use)."""
        if self._cache is None:
            from kubecore.apiserver.cache import WatchCache  # cache.py imports this module

            self._cache = WatchCache(self.store)
        return self._cache

    @staticmethod
    def prefix(rt: ResourceType, namespace: str) -> bytes:
        base = rt.storage_prefix.encode()
        return base + namespace.encode() + b"/" if (rt.namespaced and namespace) else base

    def get_raw(self, rt: ResourceType, namespace: str, name: str) -> bytes:
        """The object's JSON, with its resourceVersion, without decoding it."""
        kv = self.get_stored(rt, namespace, name)
        return with_rv(kv.value, kv.mod_revision)

    def get(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        kv = self.get_stored(rt, namespace, name)
        return decode(kv.value, kv.mod_revision)

    def get_pair(self, rt: ResourceType, namespace: str, name: str) -> tuple[Obj, Obj]:
        """Two independent decodings of the object: the live one and a copy to edit (decoding the
        bytes again costs half of deep-copying the first)."""
        kv = self.get_stored(rt, namespace, name)
        return decode(kv.value, kv.mod_revision), decode(kv.value, kv.mod_revision)

    def list(
        self,
        rt: ResourceType,
        namespace: str,
        *,
        match: Callable[[Obj], bool] | None = None,
        limit: int = 0,
        continue_token: str = "",
        revision: int = 0,
    ) -> Page[Obj]:
        """A page of objects in key order, all read at one revision (a consistent snapshot)."""

        def convert(kv: KeyValue) -> Obj | None:
            obj = decode(kv.value, kv.mod_revision)
            return obj if match is None or match(obj) else None

        return self._page(rt, namespace, convert, limit=limit, continue_token=continue_token, revision=revision,
                          filtered=match is not None)

    def list_raw(self, rt: ResourceType, namespace: str, *, limit: int = 0, continue_token: str = "",
                 revision: int = 0) -> Page[bytes]:
        """Like `list` without selectors, the objects as JSON bytes (never decoded)."""
        return self._page(rt, namespace, lambda kv: with_rv(kv.value, kv.mod_revision), limit=limit,
                          continue_token=continue_token, revision=revision, filtered=False)

    def _page(
        self,
        rt: ResourceType,
        namespace: str,
        convert: Callable[[KeyValue], T | None],
        *,
        limit: int,
        continue_token: str,
        revision: int,
        filtered: bool,
    ) -> Page[T]:
        prefix = self.prefix(rt, namespace)
        end = prefix_end(prefix)
        start = prefix
        if continue_token:
            revision, rel = _decode_continue(continue_token)
            start = prefix + rel.encode("utf-8", "surrogateescape")
            revision = max(revision, 0)  # LATEST: read the current revision
        items: list[T] = []
        read_rev = revision
        while True:
            batch = max(limit - len(items), 0) if limit else 0
            if batch and filtered:
                batch = max(batch, 64)
            try:
                r = self.store.range(start, end, revision=read_rev, limit=batch)
            except CompactedError:
                if continue_token:  # upstream hands out a token that continues at the latest revision
                    raise errors.expired(EXPIRED_CONTINUE,
                                         continue_token=_encode_continue(LATEST, start, prefix)) from None
                raise errors.expired(f"too old resource version: {read_rev} ({self.store.compact_revision})") from None
            except FutureRevisionError:
                raise errors.timeout(f"Too large resource version: {read_rev}, current: {self.store.revision}", 1) from None
            read_rev = read_rev or r.revision
            for i, kv in enumerate(r.kvs):
                item = convert(kv)
                if item is None:
                    continue
                items.append(item)
                if limit and len(items) >= limit:
                    left = len(r.kvs) - i - 1 + (r.count - len(r.kvs))
                    if left > 0:
                        token = _encode_continue(read_rev, kv.key + b"\0", prefix)
                        return Page(items, read_rev, token, None if filtered else left)
                    return Page(items, read_rev, "", None)
            if not r.more:
                return Page(items, read_rev, "", None)
            start = r.kvs[-1].key + b"\0"

    async def create(self, rt: ResourceType, namespace: str, name: str, obj: Obj) -> Obj:
        await ObjectStore.create_encoded(self, rt, namespace, name, obj)  # not an override's
        return obj

    async def create_encoded(self, rt: ResourceType, namespace: str, name: str, obj: Obj) -> bytes:
        """Stores a new object (409 if the key exists); sets its resourceVersion and returns it
        encoded as a client sees it, from the bytes that were stored."""
        key = rt.key(namespace or None, name)
        value = encode(obj)
        res = await self.store.atxn(
            compare=[Compare.create_revision(key, "=", 0)],
            success=[Op.put(key, value, lease=await self._leases.lease(self.event_ttl) if self._expires(rt) else 0)],
        )
        if not res.succeeded:
            raise errors.already_exists(rt, name)
        obj.setdefault("metadata", {})["resourceVersion"] = str(res.revision)
        return with_rv(value, res.revision)

    async def replace(self, rt: ResourceType, namespace: str, name: str, obj: Obj, *, expect_revision: int) -> Obj:
        """Writes `obj` if the key's mod_revision is still `expect_revision` (else 409)."""
        await self._put_over(rt, namespace, name, obj, expect_revision=expect_revision)
        return obj

    async def replace_encoded(self, rt: ResourceType, namespace: str, name: str, obj: Obj, *,
                              expect_revision: int) -> bytes:
        """replace(), returning the object encoded as a client sees it (see create_encoded)."""
        return await self._put_over(rt, namespace, name, obj, expect_revision=expect_revision)

    async def _put_over(self, rt: ResourceType, namespace: str, name: str, obj: Obj, *, expect_revision: int) -> bytes:
        value = encode(obj)
        revision = await self.replace_stored(rt, namespace, name, value, expect_revision=expect_revision)
        obj.setdefault("metadata", {})["resourceVersion"] = str(revision)
        return with_rv(value, revision)

    def get_stored(self, rt: ResourceType, namespace: str, name: str) -> KeyValue:
        """The object's key-value as stored (no resourceVersion in the bytes: it is the
        mod_revision). Only for kinds stored as served (no conversion)."""
        kv = self.store.get(rt.key(namespace or None, name))
        if kv is None:
            raise errors.not_found(rt, name)
        return kv

    async def replace_stored(self, rt: ResourceType, namespace: str, name: str, value: bytes, *,
                             expect_revision: int) -> int:
        """Writes stored-form bytes (see `encode`) if the key's mod_revision is still
        `expect_revision` (else 409); returns the new revision."""
        key = rt.key(namespace or None, name)
        res = await self.store.atxn(
            compare=[Compare.mod_revision(key, "=", expect_revision)],
            success=[Op.put(key, value, lease=await self._leases.lease(self.event_ttl) if self._expires(rt) else 0)],
        )
        if not res.succeeded:
            raise errors.conflict(rt, name, "the object has been modified; please apply your changes to the latest version and try again")
        return res.revision

    async def remove(self, rt: ResourceType, namespace: str, name: str, *, expect_revision: int) -> int:
        key = rt.key(namespace or None, name)
        res = await self.store.atxn(
            compare=[Compare.mod_revision(key, "=", expect_revision)],
            success=[Op.delete(key)],
        )
        if not res.succeeded:
            raise errors.conflict(rt, name, "the object has been modified; please apply your changes to the latest version and try again")
        return res.revision
