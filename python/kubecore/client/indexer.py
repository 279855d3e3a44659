"""The informer's cache: objects by key, plus secondary indexes (client-go's cache.Indexer over
threadSafeMap + storeIndex), kept compact.

Keys are "namespace/name" ("name" for cluster-scoped objects: `meta_namespace_key`). Objects are
stored as `codec.CompactCodec` entries (deflated JSON, ~150-300 bytes for a pod instead of ~20 KB
of dicts) and decoded on access; a small LRU keeps the most recently written or read objects
decoded. Indexes map an index name to {indexed value -> set of keys}; `NAMESPACE_INDEX` is built in
and is derived from the key alone, so updates and deletes never decode the old object for it.
Custom index functions (`obj -> list[str]`) decode the old object on update/delete to unindex it.

Guarantees and rules (the same as client-go's, written down):
- Objects returned by `get_by_key`/`by_index`/`list` may be shared with other readers and with
  event handlers (the LRU hands out the same dict): treat them as read-only; copy before changing.
- Not thread-safe; safe under asyncio because no method awaits: every call is atomic with respect
  to other coroutines, and the reflector writes through the same event loop.
- After every write, each index holds exactly the index values of the stored objects (no empty
  sets are kept, so `list_index_func_values` lists only values with at least one object).
- `list()`/`by_index()` decode every object they return: for 150,000 pods prefer `list_keys()`,
  `index_keys()` and `get_by_key()` on what you need, or `iter_objects()`.

Objects arrive from the wire as JSON bytes: `prepare_raw(raw)` decodes them once, and a transform
that has a bytes-level equivalent (`RAW_TRANSFORMS`: `strip_managed_fields` -> `rawmeta`) runs on
the bytes first, so the dropped part is never decoded and the entry is those bytes, not a second
encode. `json_of(obj)` hands those bytes back for the cached object itself (no encode either).

`replacement()` builds a whole new content (a relist) beside the current one, compacting each
object as it arrives, and `commit_replacement()` swaps it in and returns the previous entries
(so the informer can tell adds from updates and compute deletions without a second decode).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from kubecore.client import errors
from kubecore.client.codec import CompactCodec
from kubecore.client.rawmeta import MetaProbe, decode_without_managed_fields

IndexFunc = Callable[[dict[str, Any]], list[str]]
KeyFunc = Callable[[dict[str, Any]], str]
TransformFunc = Callable[[dict[str, Any]], dict[str, Any]]
"""client-go's TransformFunc: what the cache keeps of an object (may change it in place)."""
NAMESPACE_INDEX = "namespace"


class ObjectKeyError(KeyError):
    """An object without metadata.name cannot be keyed."""


def meta_namespace_key(obj: dict[str, Any]) -> str:
    """"<namespace>/<name>", or "<name>" when the object has no namespace."""
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not name:
        raise ObjectKeyError("object has no metadata.name")
    ns = meta.get("namespace")
    return f"{ns}/{name}" if ns else str(name)


def strip_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """The transform kube-scheduler (pods) and kube-controller-manager (every informer) install:
    drop metadata.managedFields, which no controller reads and which is a third of a pod."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


RawTransformFunc = Callable[[bytes, MetaProbe | None], tuple[Any, bytes]]
"""A transform done on JSON bytes: (raw, its `rawmeta.probe` if known) -> (the decoded transformed
object, its JSON bytes). Must equal the dict transform applied to the decoded bytes."""


def _strip_managed_fields_raw(raw: bytes, probed: MetaProbe | None) -> tuple[Any, bytes]:
    return decode_without_managed_fields(raw, probed=probed)


RAW_TRANSFORMS: dict[TransformFunc, RawTransformFunc] = {strip_managed_fields: _strip_managed_fields_raw}
"""Transforms with a bytes-level equivalent, which `Indexer.prepare_raw` uses (rawmeta)."""


class NotAnObject(errors.ClientError):
    """JSON bytes given as an object hold another JSON value."""


def decode_object(raw: bytes) -> dict[str, Any]:
    """`raw` decoded; NotAnObject when it is not a JSON object."""
    obj = msgspec.json.decode(raw)
    if not isinstance(obj, dict):
        raise NotAnObject("JSON that is not an object where an object was expected")
    return obj


def split_meta_namespace_key(key: str) -> tuple[str, str]:
    """(namespace, name); namespace is "" for cluster-scoped keys."""
    ns, sep, name = key.partition("/")
    if not sep:
        return "", key
    if "/" in name:
        raise ValueError(f"unexpected key format: {key!r}")
    return ns, name


def meta_namespace_index_func(obj: dict[str, Any]) -> list[str]:
    """The NAMESPACE_INDEX function: [metadata.namespace] ("" for cluster-scoped objects)."""
    return [str((obj.get("metadata") or {}).get("namespace") or "")]


def _namespace_from_key(key: str) -> list[str]:
    return [split_meta_namespace_key(key)[0]]


@dataclass(frozen=True)
class DeletedFinalStateUnknown:
    """A delete the informer inferred on relist: `obj` is the last state it had cached."""

    key: str
    obj: dict[str, Any]


class Replacement:
    """New content for an indexer, built one object at a time (see `Indexer.replacement`)."""

    def __init__(self, indexer: Indexer) -> None:
        self._indexer = indexer
        self.items: dict[str, bytes] = {}
        self.indices: dict[str, dict[str, set[str]]] = {name: {} for name in indexer._indexers}

    def add(self, obj: dict[str, Any], *, raw: bytes | None = None) -> str:
        """Add one object (with its JSON bytes when the caller has them); returns its key."""
        obj, raw = self._indexer.prepare(obj, raw)
        return self._add_prepared(obj, raw)

    def add_prepared(self, obj: dict[str, Any], raw: bytes | None) -> str:
        """Add one object that already went through `Indexer.prepare`/`prepare_raw` (or the
        indexer's `raw_decoder`), with its JSON bytes if valid; returns its key."""
        return self._add_prepared(obj, raw)

    def add_raw(self, raw: bytes, *, probed: MetaProbe | None = None) -> str:
        """Add one object given as JSON bytes (decoded here: `Indexer.prepare_raw`); its key."""
        obj, prepared = self._indexer.prepare_raw(raw, probed=probed)
        return self._add_prepared(obj, prepared)

    def _add_prepared(self, obj: dict[str, Any], raw: bytes | None) -> str:
        ix = self._indexer
        key = ix.key_func(obj)
        if key in self.items:  # a duplicate in one list: unindex the earlier copy (rare, so brute force)
            self.remove(key)
        self.items[key] = ix._entry_of(obj, raw)
        for name, values in ix._index_values(key, obj):
            index = self.indices[name]
            for v in values:
                index.setdefault(v, set()).add(key)
        return key

    def remove(self, key: str) -> None:
        """Drop `key` again (a DELETED event inside an initial-events stream)."""
        if self.items.pop(key, None) is not None:
            for index in self.indices.values():
                for value in [v for v, keys in index.items() if key in keys]:
                    index[value].discard(key)
                    if not index[value]:
                        del index[value]

    def __len__(self) -> int:
        return len(self.items)


class Indexer:
    """Key -> compact object store with indexes. See the module docstring for the rules."""

    def __init__(self, *, indexers: Mapping[str, IndexFunc] | None = None, codec: CompactCodec | None = None,
                 lru_size: int = 1024, key_func: KeyFunc = meta_namespace_key) -> None:
        self.codec = codec or CompactCodec()
        self.key_func = key_func
        self.lru_size = lru_size
        self._transform: TransformFunc | None = None
        self._raw_transform: RawTransformFunc | None = None
        self._items: dict[str, bytes] = {}
        self._lru: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._indexers: dict[str, IndexFunc] = {}
        self._indices: dict[str, dict[str, set[str]]] = {}
        self._from_key: dict[str, Callable[[str], list[str]]] = {}
        self.add_indexers({NAMESPACE_INDEX: meta_namespace_index_func, **(indexers or {})})

    @property
    def transform(self) -> TransformFunc | None:
        """Applied to every object before it is stored (`prepare`); set it before the first write."""
        return self._transform

    @transform.setter
    def transform(self, transform: TransformFunc | None) -> None:
        self._transform = transform
        self._raw_transform = None if transform is None else RAW_TRANSFORMS.get(transform)

    # -- indexes -------------------------------------------------------------------------------------
    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Register more index functions; existing objects are indexed at once (decoding each)."""
        for name in indexers:
            if name in self._indexers:
                raise ValueError(f"indexer {name!r} already exists")
        for name, fn in indexers.items():
            self._indexers[name] = fn
            self._indices[name] = {}
            if fn is meta_namespace_index_func and self.key_func is meta_namespace_key:
                self._from_key[name] = _namespace_from_key
        if self._items:
            for key in self._items:
                obj = self._decoded(key)
                for name, values in self._index_values(key, obj, only=indexers):
                    for v in values:
                        self._indices[name].setdefault(v, set()).add(key)

    def get_indexers(self) -> dict[str, IndexFunc]:
        return dict(self._indexers)

    def _index_values(self, key: str, obj: dict[str, Any] | None,
                      only: Iterable[str] | None = None) -> Iterator[tuple[str, list[str]]]:
        for name in (only if only is not None else self._indexers):
            from_key = self._from_key.get(name)
            if from_key is not None:
                yield name, from_key(key)
            elif obj is not None:
                yield name, self._indexers[name](obj)

    def _needs_object_to_unindex(self) -> bool:
        return len(self._from_key) < len(self._indexers)

    def _unindex(self, key: str, old: dict[str, Any] | None) -> None:
        for name, values in self._index_values(key, old):
            index = self._indices[name]
            for v in values:
                keys = index.get(v)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[v]

    def _reindex(self, key: str, obj: dict[str, Any]) -> None:
        for name, values in self._index_values(key, obj):
            index = self._indices[name]
            for v in values:
                index.setdefault(v, set()).add(key)

    # -- writes --------------------------------------------------------------------------------------
    def _entry_of(self, obj: dict[str, Any], raw: bytes | None) -> bytes:
        return self.codec.encode_raw(raw) if raw is not None else self.codec.encode(obj)

    def _remember(self, key: str, obj: dict[str, Any]) -> None:
        if self.lru_size <= 0:
            return
        self._lru[key] = obj
        self._lru.move_to_end(key)
        while len(self._lru) > self.lru_size:
            self._lru.popitem(last=False)

    def prepare(self, obj: dict[str, Any], raw: bytes | None) -> tuple[dict[str, Any], bytes | None]:
        """(the object to store, its JSON bytes if still valid): `transform` applied, whose
        result no longer matches the bytes the server sent."""
        transform = self._transform
        if transform is None:
            return obj, raw
        return transform(obj), None

    def prepare_raw(self, raw: bytes, *, probed: MetaProbe | None = None) -> tuple[dict[str, Any], bytes | None]:
        """`prepare` for an object given as JSON bytes (`probed`: its `rawmeta.probe`, if known):
        decoded here, and a transform with a bytes-level equivalent (`RAW_TRANSFORMS`) runs on the
        bytes, which then stay valid for the result. NotAnObject if `raw` is not a JSON object."""
        rt = self._raw_transform
        if rt is None:
            return self.prepare(decode_object(raw), raw)
        obj, prepared = rt(raw, probed)
        if not isinstance(obj, dict):
            raise NotAnObject("JSON that is not an object where an object was expected")
        return obj, prepared

    def raw_decoder(self) -> Callable[[bytes], tuple[Any, bytes]] | None:
        """The bytes-level transform as a decoder of JSON bytes, when the transform has one
        (`RAW_TRANSFORMS`): what `prepare_raw` does, short of refusing a value that is not an
        object. A watch can run it as it parses each event (`WatchStream.decoder`)."""
        rt = self._raw_transform
        if rt is None:
            return None

        def decode(raw: bytes) -> tuple[Any, bytes]:
            return rt(raw, None)

        return decode

    def put(self, obj: dict[str, Any], *, raw: bytes | None = None) -> bytes | None:
        """Add or update `obj` (raw: its JSON bytes, saves an encode). Returns the previous entry."""
        obj, raw = self.prepare(obj, raw)
        return self.swap(obj, raw=raw)[0]

    def swap(self, obj: dict[str, Any], *, raw: bytes | None = None) -> tuple[bytes | None, dict[str, Any] | None]:
        """`put`, returning the previous entry and, when the LRU still holds it decoded, the previous
        object (so an update's old object costs no decode; None when it is not cached). `obj` must
        have been through `prepare` (put does it)."""
        return self.swap_keyed(self.key_func(obj), obj, raw=raw)

    def swap_keyed(self, key: str, obj: dict[str, Any], *,
                   raw: bytes | None = None) -> tuple[bytes | None, dict[str, Any] | None]:
        """`swap` when the caller already has `key_func(obj)`."""
        old = self._items.get(key)
        old_obj = None
        reindex = True
        if old is not None:
            old_obj = self._lru.get(key)
            if self._needs_object_to_unindex():
                self._unindex(key, old_obj if old_obj is not None else self.decode_entry(old))
            else:  # every index is derived from the key alone: an update moves nothing
                reindex = False
        self._items[key] = self._entry_of(obj, raw)
        if reindex:
            self._reindex(key, obj)
        self._remember(key, obj)
        return old, old_obj

    add = put
    update = put

    def delete_key(self, key: str) -> bytes | None:
        """Remove `key`; returns its entry (None if absent)."""
        old = self._items.pop(key, None)
        if old is not None:
            self._unindex(key, self.decode_entry(old) if self._needs_object_to_unindex() else None)
            self._lru.pop(key, None)
        return old

    def delete(self, obj: dict[str, Any]) -> bytes | None:
        return self.delete_key(self.key_func(obj))

    def replacement(self) -> Replacement:
        return Replacement(self)

    def commit_replacement(self, new: Replacement) -> dict[str, bytes]:
        """Swap in `new`'s content; returns the previous key -> entry map."""
        old = self._items
        self._items, self._indices = new.items, new.indices
        self._lru.clear()
        return old

    def replace(self, objects: Iterable[dict[str, Any]]) -> dict[str, bytes]:
        r = self.replacement()
        for obj in objects:
            r.add(obj)
        return self.commit_replacement(r)

    # -- reads ---------------------------------------------------------------------------------------
    def decode_entry(self, entry: bytes) -> dict[str, Any]:
        return self.codec.decode(entry)

    def entry(self, key: str) -> bytes | None:
        """The compact entry of `key` (None if absent)."""
        return self._items.get(key)

    def _decoded(self, key: str) -> dict[str, Any]:
        obj = self._lru.get(key)
        if obj is not None:
            self._lru.move_to_end(key)
            return obj
        obj = self.codec.decode(self._items[key])
        self._remember(key, obj)
        return obj

    def get_by_key(self, key: str) -> dict[str, Any] | None:
        return self._decoded(key) if key in self._items else None

    def copy_by_key(self, key: str) -> dict[str, Any] | None:
        """A freshly decoded copy of `key`'s object that the caller owns and may change (client-go's
        `obj.DeepCopy()` after a lister Get), without a round trip through the shared one."""
        entry = self._items.get(key)
        return None if entry is None else self.codec.decode(entry)

    def json_of(self, obj: dict[str, Any]) -> bytes | None:
        """The JSON bytes of `obj` if it is the decoded object the cache holds for its key and the
        entry is plain JSON (`CompactCodec(compress=False)`, or a small object): what encoding it
        would give, without encoding it. None otherwise (then encode it yourself)."""
        try:
            key = self.key_func(obj)
        except ObjectKeyError:
            return None
        if self._lru.get(key) is not obj:
            return None
        entry = self._items.get(key)
        return entry if entry is not None and entry[:1] == b"{" else None

    def get(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        return self.get_by_key(self.key_func(obj))

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def list_keys(self) -> list[str]:
        return list(self._items)

    def iter_objects(self) -> Iterator[dict[str, Any]]:
        """Every object, decoded one at a time (not kept in the LRU: a full scan would flush it)."""
        for key, entry in list(self._items.items()):
            cached = self._lru.get(key)
            yield cached if cached is not None else self.codec.decode(entry)

    def index_keys(self, index_name: str, value: str) -> list[str]:
        """Keys whose object has `value` under index `index_name`."""
        try:
            index = self._indices[index_name]
        except KeyError:
            raise KeyError(f"index {index_name!r} does not exist") from None
        return sorted(index.get(value, ()))

    def by_index(self, index_name: str, value: str) -> list[dict[str, Any]]:
        return [self._decoded(k) for k in self.index_keys(index_name, value)]

    def index(self, index_name: str, obj: dict[str, Any]) -> list[dict[str, Any]]:
        """Objects sharing at least one `index_name` value with `obj`."""
        if index_name not in self._indexers:
            raise KeyError(f"index {index_name!r} does not exist")
        values = self._indexers[index_name](obj)
        keys: set[str] = set()
        for v in values:
            keys.update(self._indices[index_name].get(v, ()))
        return [self._decoded(k) for k in sorted(keys)]

    def list_index_func_values(self, index_name: str) -> list[str]:
        return sorted(self._indices.get(index_name, {}))

    def list(self) -> list[dict[str, Any]]:  # last in the class: the name shadows the builtin below it
        return [*self.iter_objects()]
