"""Store: the embedding API over the native engine (see the package docstring)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Coroutine, Sequence

from kubecore._native import (
    Compare,
    DeleteResult,
    KeyValue,
    LeaseTTL,
    NativeStore,
    Op,
    PutResult,
    RangeResult,
    TxnResult,
    prefix_end,
)
from kubecore.store._bridge import Bridge
from kubecore.store._watch import Watch

if TYPE_CHECKING:
    from types import TracebackType

DEFAULT_MAX_REQUEST_BYTES = 1536 * 1024


class Store:
    """An MVCC key-value store with etcd v3 semantics.

    Keys and values are ``bytes``. Writes go through a Raft log (fsynced before they are
    acknowledged unless ``fsync=False``); reads are served from memory. Errors are subclasses of
    ``StoreError``; a non-bytes key or value raises ``TypeError``, an empty key ``ValueError``.
    """

    prefix_end = staticmethod(prefix_end)

    def __init__(self, native: NativeStore) -> None:
        self._native = native
        self._bridge = Bridge(native)

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        fsync: bool = True,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        snapshot_every: int = 100_000,
        watch_buffer: int = 8192,
    ) -> Store:
        """Opens (creating if needed) the store kept in directory ``path``.

        Loads the newest snapshot and replays the log; raises ``LockedError`` if another open
        store holds the directory and ``CorruptionError`` if the log is damaged before its tail.
        """
        native = NativeStore.open(
            os.fspath(path),
            fsync=fsync,
            max_request_bytes=max_request_bytes,
            snapshot_every=snapshot_every,
            watch_buffer=watch_buffer,
        )
        return cls(native)

    @classmethod
    def memory(cls, *, max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES, watch_buffer: int = 8192) -> Store:
        """A store without files: same semantics, nothing survives close()."""
        return cls(NativeStore.open(None, fsync=False, max_request_bytes=max_request_bytes, watch_buffer=watch_buffer))

    # ---- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Finishes in-flight writes, ends every watch and releases the directory. Idempotent."""
        self._native.close()
        self._bridge._drain()
        self._bridge.detach()

    @property
    def closed(self) -> bool:
        return self._native.closed

    def __enter__(self) -> Store:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    @property
    def revision(self) -> int:
        """The store's current revision (1 for an empty store, +1 per changing write)."""
        return self._native.revision

    @property
    def compact_revision(self) -> int:
        return self._native.compact_revision

    def stats(self) -> dict[str, int]:
        """Counters: revision, compact_revision, keys, versions, leases, fsyncs, applied_index, ..."""
        return self._native.stats()

    # ---- key-value ---------------------------------------------------------------------------

    def put(self, key: bytes, value: bytes, *, lease: int = 0, prev_kv: bool = False) -> PutResult:
        return self._native.put(key, value, lease=lease, prev_kv=prev_kv)

    def get(self, key: bytes, *, revision: int = 0) -> KeyValue | None:
        return self._native.get(key, revision=revision)

    def mod_revision(self, key: bytes) -> int | None:
        """The key's current ``mod_revision``, None when it does not exist; nothing else is read."""
        return self._native.mod_revision(key)

    def signature(self, start: bytes, end: bytes | None = None) -> tuple[int, int]:
        """``(count, highest mod_revision)`` of the keys in ``[start, end)``, from the index alone:
        two equal signatures of one range mean the same keys at the same versions."""
        return self._native.signature(start, end)

    def range(
        self,
        start: bytes,
        end: bytes | None = None,
        *,
        revision: int = 0,
        limit: int = 0,
        keys_only: bool = False,
        count_only: bool = False,
    ) -> RangeResult:
        """Keys in ``[start, end)``: ``end=None`` is the single key ``start``, ``end=b"\\0"`` every
        key from ``start`` on. ``count`` counts every match; ``more`` says ``limit`` cut some off."""
        return self._native.range(
            start, end, revision=revision, limit=limit, keys_only=keys_only, count_only=count_only
        )

    def delete(self, key: bytes, end: bytes | None = None, *, prev_kv: bool = False) -> DeleteResult:
        return self._native.delete(key, end, prev_kv=prev_kv)

    def txn(
        self, compare: Sequence[Compare] = (), success: Sequence[Op] = (), failure: Sequence[Op] = ()
    ) -> TxnResult:
        """If every compare holds, run ``success``, else ``failure``: atomically, at one revision."""
        return self._native.txn(list(compare), list(success), list(failure))

    def compact(self, revision: int) -> None:
        """Forgets history before ``revision``: reads below it raise ``CompactedError``."""
        self._native.compact(revision)

    # ---- leases ------------------------------------------------------------------------------

    def lease_grant(self, ttl: int, *, id: int = 0) -> int:
        """Grants a lease of ``ttl`` seconds; returns its id."""
        return self._native.lease_grant(ttl, id=id)

    def lease_keepalive(self, id: int) -> int:
        """Renews the lease for its full TTL; returns the TTL."""
        return self._native.lease_keepalive(id)

    def lease_revoke(self, id: int) -> None:
        """Revokes the lease, deleting every key attached to it in one revision."""
        self._native.lease_revoke(id)

    def lease_time_to_live(self, id: int, *, keys: bool = False) -> LeaseTTL:
        return self._native.lease_time_to_live(id, keys=keys)

    def leases(self) -> list[int]:
        return self._native.leases()

    # ---- watch -------------------------------------------------------------------------------

    def watch(self, key: bytes, end: bytes | None = None, *, start_revision: int = 0, prev_kv: bool = False) -> Watch:
        """Changes to ``[key, end)`` from ``start_revision`` (0: from the next change on)."""
        native = self._native.watch(key, end, start_revision=start_revision, prev_kv=prev_kv, notify=True)
        return Watch(native, self._bridge)

    # ---- asyncio counterparts ----------------------------------------------------------------

    async def aput(self, key: bytes, value: bytes, *, lease: int = 0, prev_kv: bool = False) -> PutResult:
        result: PutResult = await self._bridge.write(self._native.submit_put, key, value, lease, prev_kv)
        return result

    async def aget(self, key: bytes, *, revision: int = 0) -> KeyValue | None:
        return self.get(key, revision=revision)

    async def arange(
        self,
        start: bytes,
        end: bytes | None = None,
        *,
        revision: int = 0,
        limit: int = 0,
        keys_only: bool = False,
        count_only: bool = False,
    ) -> RangeResult:
        return self.range(start, end, revision=revision, limit=limit, keys_only=keys_only, count_only=count_only)

    async def adelete(self, key: bytes, end: bytes | None = None, *, prev_kv: bool = False) -> DeleteResult:
        result: DeleteResult = await self._bridge.write(self._native.submit_delete, key, end, prev_kv)
        return result

    def atxn(
        self, compare: Sequence[Compare] = (), success: Sequence[Op] = (), failure: Sequence[Op] = ()
    ) -> Coroutine[Any, Any, TxnResult]:
        """`txn` through the Raft log without blocking the event loop: await the result. (A plain
        function returning the bridge's coroutine: one coroutine less per write, the same laziness.)"""
        return self._bridge.write(self._native.submit_txn, list(compare), list(success), list(failure))

    async def acompact(self, revision: int) -> None:
        await self._bridge.write(self._native.submit_compact, revision)

    async def alease_grant(self, ttl: int, *, id: int = 0) -> int:
        lease_id: int = await self._bridge.write(self._native.submit_lease_grant, ttl, id)
        return lease_id

    async def alease_keepalive(self, id: int) -> int:
        return self.lease_keepalive(id)

    async def alease_revoke(self, id: int) -> None:
        await self._bridge.write(self._native.submit_lease_revoke, id)

    async def alease_time_to_live(self, id: int, *, keys: bool = False) -> LeaseTTL:
        return self.lease_time_to_live(id, keys=keys)

    async def aleases(self) -> list[int]:
        return self.leases()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"revision={self.revision}"
        return f"<Store {state}>"


__all__ = ["Store"]

