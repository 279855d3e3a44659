"""The two implementations of ``loadgen.KV``: etcd through aetcd, kubecore's Store in-process.

Each method is one call of the system's own asyncio API and nothing else, so the load generator
measures both sides through the same path. Results are consumed only as far as needed to prove the
operation happened (range: count of kvs returned).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any


# -- etcd (gRPC over loopback, aetcd client) -------------------------------------------------------
class EtcdWatch:
    def __init__(self, watch: Any) -> None:
        self._watch = watch
        self._events: AsyncIterator[Any] = aiter(watch)

    async def receive(self) -> int:
        await anext(self._events)
        return 1  # aetcd yields one event at a time

    def drain(self) -> int:
        raise NotImplementedError("etcd watches are consumed over gRPC; use receive()")

    async def cancel(self) -> None:
        await self._watch.cancel()


class EtcdKV:
    """``loadgen.KV`` over an ``aetcd.Client`` (linearizable reads: etcd's and aetcd's default)."""

    name = "etcd"

    def __init__(self, client: Any) -> None:
        self.client = client

    async def put(self, key: bytes, value: bytes) -> None:
        await self.client.put(key, value)

    async def get(self, key: bytes) -> None:
        await self.client.get(key)

    async def range_prefix(self, prefix: bytes) -> int:
        return len((await self.client.get_prefix(prefix)).kvs)

    async def watch_prefix(self, prefix: bytes) -> EtcdWatch:
        return EtcdWatch(await self.client.watch_prefix(prefix))


@contextlib.asynccontextmanager
async def etcd_kv(host: str, port: int) -> AsyncIterator[EtcdKV]:
    import aetcd  # imported here so `--only kubecore` runs without it

    async with aetcd.Client(host=host, port=port) as client:
        yield EtcdKV(client)


# -- kubecore (in-process Rust store) --------------------------------------------------------------
class KubecoreWatch:
    def __init__(self, watch: Any) -> None:
        self._watch = watch
        self._events: AsyncIterator[Any] = aiter(watch)

    async def receive(self) -> int:
        await anext(self._events)
        return 1

    def drain(self, max_events: int = 1024) -> int:
        return len(self._watch.poll(max_events=max_events, timeout=0))

    async def cancel(self) -> None:
        self._watch.cancel()


class KubecoreKV:
    """``loadgen.KV`` over ``kubecore.store.Store`` (the async ``a*`` methods)."""

    name = "kubecore"

    def __init__(self, store: Any) -> None:
        from kubecore.store import prefix_end

        self.store = store
        self._prefix_end = prefix_end

    async def put(self, key: bytes, value: bytes) -> None:
        await self.store.aput(key, value)

    async def get(self, key: bytes) -> None:
        await self.store.aget(key)

    async def range_prefix(self, prefix: bytes) -> int:
        return len((await self.store.arange(prefix, self._prefix_end(prefix))).kvs)

    async def watch_prefix(self, prefix: bytes) -> KubecoreWatch:
        return KubecoreWatch(self.store.watch(prefix, self._prefix_end(prefix)))


@contextlib.asynccontextmanager
async def kubecore_kv(path: str, *, fsync: bool = True) -> AsyncIterator[KubecoreKV]:
    from kubecore.store import Store

    store = Store.open(path, fsync=fsync)
    try:
        yield KubecoreKV(store)
    finally:
        store.close()
