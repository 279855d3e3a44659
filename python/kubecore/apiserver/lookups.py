"""Read-mostly lookups for admission: the few objects every create consults (its namespace, the
PriorityClasses, the namespace's LimitRanges), decoded once and reused until the store says they
changed.

The checks read the store's key index only (no value is copied, no Python object made per key):

- one object: its key's ``mod_revision`` (`Store.mod_revision`; any write to the key changes it,
  a delete removes it);
- a set of objects under a prefix: ``(count, max mod_revision)`` (`Store.signature`). A write
  that keeps the count must create or put a key, which raises the maximum; a delete lowers the
  count. So equal signatures mean the same objects at the same versions.

Cached objects are shared between requests: callers must not mutate them.
"""

from __future__ import annotations

from typing import Any

from kubecore.api.registry import ResourceType
from kubecore.apiserver.storage import ObjectStore, decode
from kubecore.store import prefix_end

Obj = dict[str, Any]
MAX_ENTRIES = 4096  # cached prefixes and objects each; cleared (not evicted one by one) past this


class Lookups:
    def __init__(self, objects: ObjectStore) -> None:
        self.objects = objects
        self._one: dict[bytes, tuple[int, Obj]] = {}
        self._many: dict[bytes, tuple[tuple[int, int], list[Obj]]] = {}

    def get(self, rt: ResourceType, namespace: str, name: str) -> Obj | None:
        """The object, or None when it does not exist (read-only)."""
        key = rt.key(namespace or None, name)
        store = self.objects.store
        rev = store.mod_revision(key)
        if rev is None:
            self._one.pop(key, None)
            return None
        hit = self._one.get(key)
        if hit is not None and hit[0] == rev:
            return hit[1]
        kv = store.get(key)  # may be newer than `rev`: cached by its own revision
        if kv is None:
            self._one.pop(key, None)
            return None
        obj = decode(kv.value, kv.mod_revision)
        if len(self._one) >= MAX_ENTRIES:
            self._one.clear()
        self._one[key] = (kv.mod_revision, obj)
        return obj

    def items(self, rt: ResourceType, namespace: str) -> list[Obj]:
        """Every object of `rt` in `namespace` (all namespaces for ""), in key order (read-only)."""
        prefix = self.objects.prefix(rt, namespace)
        end = prefix_end(prefix)
        signature = self.objects.store.signature(prefix, end)
        if not signature[0]:
            self._many.pop(prefix, None)
            return []
        hit = self._many.get(prefix)
        if hit is not None and hit[0] == signature:
            return hit[1]
        found = self.objects.store.range(prefix, end)  # may be newer than `signature`: cached by its own
        objs = [decode(kv.value, kv.mod_revision) for kv in found.kvs]
        if len(self._many) >= MAX_ENTRIES:
            self._many.clear()
        self._many[prefix] = ((found.count, max((kv.mod_revision for kv in found.kvs), default=0)), objs)
        return objs
