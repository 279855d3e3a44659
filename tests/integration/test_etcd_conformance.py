"""Differential conformance: the same scripted operations against a real etcd and kubecore.store.

Every test gets a *fresh* etcd (its own data dir; both systems then start at revision 1, so absolute
revisions must match) and a fresh ``Store.memory()``. A script is a list of neutral steps
(``Put``, ``Range``, ``Delete``, ``Txn``, ``Compact``, ``LeaseGrant``, ``LeaseRevoke``, ``LeaseTTL``,
``Watch``); the runner executes each step on etcd (raw gRPC through aetcd's stubs, so every request
field is reachable) and on kubecore, normalises both answers into plain dicts and compares them
field by field. All mismatches of a script are reported together, one block per step.

Normalised shapes (both sides):
- key-value: key, value, create_revision, mod_revision, version, lease
- put: revision (header), prev_kv;  range: revision (header), kvs, count, more
- delete: revision (header), deleted, prev_kvs;  txn: succeeded, revision, responses[*]
- watch: the events up to a sentinel put written last (type, kv, prev_kv), or the error
- errors: ("error", category) with category one of compacted, future, lease_not_found,
  lease_exists, invalid (etcd INVALID_ARGUMENT / Python ValueError), or the raw etcd status.

etcd starts take ~1.5 s (mostly election), so a small pool starts the next servers in background
threads while a test runs. If etcd cannot be installed or started the tests fail (never skip).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import time
from collections import deque
from collections.abc import AsyncIterator, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import aetcd
import pytest
from aetcd import rpc
from kubecore.store import (
    CompactedError,
    Compare,
    FutureRevisionError,
    LeaseExistsError,
    LeaseNotFoundError,
    Op,
    Store,
    prefix_end,
)

from bench.etcd_peer import EtcdPeer

WATCH_TIMEOUT = 10.0
TRACE = bool(os.environ.get("KUBECORE_CONFORMANCE_TRACE"))  # print every step's etcd answer (pytest -s)
SENTINEL_SUFFIX = b"\xfe~sentinel"  # sorts after every scripted key under the same prefix


# -- neutral script steps -----------------------------------------------------------------------
@dataclass(frozen=True)
class Put:
    key: bytes
    value: bytes
    lease: int = 0
    prev_kv: bool = False


@dataclass(frozen=True)
class Range:
    key: bytes
    end: bytes | None = None
    revision: int = 0
    limit: int = 0
    keys_only: bool = False
    count_only: bool = False


@dataclass(frozen=True)
class Delete:
    key: bytes
    end: bytes | None = None
    prev_kv: bool = False


@dataclass(frozen=True)
class Cmp:
    target: str  # value | version | create | mod | lease
    key: bytes
    op: str  # = != < >
    against: bytes | int


@dataclass(frozen=True)
class Txn:
    compare: Sequence[Cmp] = ()
    success: Sequence[Put | Range | Delete] = ()
    failure: Sequence[Put | Range | Delete] = ()


@dataclass(frozen=True)
class Compact:
    revision: int


@dataclass(frozen=True)
class LeaseGrant:
    ttl: int
    id: int


@dataclass(frozen=True)
class LeaseRevoke:
    id: int


@dataclass(frozen=True)
class LeaseTTL:
    id: int


@dataclass(frozen=True)
class Watch:
    """Watch [key, end) from start_revision; run ``then`` after the watch exists; then put a
    sentinel key (``sentinel``, which must lie in the watched range) and collect every event up
    to and including the sentinel's."""

    key: bytes
    end: bytes | None
    sentinel: bytes
    start_revision: int = 0
    prev_kv: bool = False
    then: Sequence[Any] = ()


Step = Put | Range | Delete | Txn | Compact | LeaseGrant | LeaseRevoke | LeaseTTL | Watch


# -- normalisation ----------------------------------------------------------------------------
def nkv(kv: Any) -> dict[str, Any] | None:
    if kv is None:
        return None
    return {
        "key": bytes(kv.key),
        "value": bytes(kv.value),
        "create_revision": kv.create_revision,
        "mod_revision": kv.mod_revision,
        "version": kv.version,
        "lease": kv.lease,
    }


def err(category: str, detail: object = None) -> dict[str, Any]:
    out: dict[str, Any] = {"error": category}
    if detail is not None:
        out["detail"] = detail
    return out


_ETCD_ERRORS = {
    "etcdserver: mvcc: required revision has been compacted": "compacted",
    "etcdserver: mvcc: required revision is a future revision": "future",
    "etcdserver: requested lease not found": "lease_not_found",
    "etcdserver: lease already exists": "lease_exists",
    "etcdserver: too large lease TTL": "ttl_too_large",
}


def etcd_error(e: rpc.AioRpcError) -> dict[str, Any]:
    details = e.details() or ""
    if details in _ETCD_ERRORS:
        return err(_ETCD_ERRORS[details])
    if e.code() == rpc.StatusCode.INVALID_ARGUMENT:
        return err("invalid")
    return err(f"{e.code().name}: {details}")


def kubecore_error(e: Exception) -> dict[str, Any]:
    if isinstance(e, CompactedError):
        return err("compacted")
    if isinstance(e, FutureRevisionError):
        return err("future")
    if isinstance(e, LeaseNotFoundError):
        return err("lease_not_found")
    if isinstance(e, LeaseExistsError):
        return err("lease_exists")
    if isinstance(e, ValueError):
        return err("ttl_too_large" if "too large lease TTL" in str(e) else "invalid")
    return err(f"{type(e).__name__}: {e}")


# -- etcd side ----------------------------------------------------------------------------------
_CMP_OP = {"=": rpc.Compare.EQUAL, "!=": rpc.Compare.NOT_EQUAL, "<": rpc.Compare.LESS, ">": rpc.Compare.GREATER}
_CMP_TARGET = {
    "value": (rpc.Compare.VALUE, "value"),
    "version": (rpc.Compare.VERSION, "version"),
    "create": (rpc.Compare.CREATE, "create_revision"),
    "mod": (rpc.Compare.MOD, "mod_revision"),
    "lease": (rpc.Compare.LEASE, "lease"),
}


class EtcdSide:
    name = "etcd"

    def __init__(self, client: aetcd.Client) -> None:
        self.client = client
        self.kv = client.kvstub
        self.lease = client.leasestub
        self.watchstub = rpc.WatchStub(client.channel)

    # requests
    @staticmethod
    def _range_req(s: Range) -> rpc.RangeRequest:
        return rpc.RangeRequest(
            key=s.key,
            range_end=s.end or b"",
            revision=s.revision,
            limit=s.limit,
            keys_only=s.keys_only,
            count_only=s.count_only,
        )

    @staticmethod
    def _put_req(s: Put) -> rpc.PutRequest:
        return rpc.PutRequest(key=s.key, value=s.value, lease=s.lease, prev_kv=s.prev_kv)

    @staticmethod
    def _delete_req(s: Delete) -> rpc.DeleteRangeRequest:
        return rpc.DeleteRangeRequest(key=s.key, range_end=s.end or b"", prev_kv=s.prev_kv)

    def _request_op(self, s: Put | Range | Delete) -> rpc.RequestOp:
        if isinstance(s, Put):
            return rpc.RequestOp(request_put=self._put_req(s))
        if isinstance(s, Range):
            return rpc.RequestOp(request_range=self._range_req(s))
        return rpc.RequestOp(request_delete_range=self._delete_req(s))

    @staticmethod
    def _compare(c: Cmp) -> rpc.Compare:
        target, fld = _CMP_TARGET[c.target]
        return rpc.Compare(result=_CMP_OP[c.op], target=target, key=c.key, **{fld: c.against})

    # responses
    @staticmethod
    def _put(r: Any, prev_kv: bool) -> dict[str, Any]:
        return {"revision": r.header.revision, "prev_kv": nkv(r.prev_kv) if r.HasField("prev_kv") else None}

    @staticmethod
    def _range(r: Any) -> dict[str, Any]:
        return {"revision": r.header.revision, "kvs": [nkv(kv) for kv in r.kvs], "count": r.count, "more": r.more}

    @staticmethod
    def _delete(r: Any) -> dict[str, Any]:
        return {"revision": r.header.revision, "deleted": r.deleted, "prev_kvs": [nkv(kv) for kv in r.prev_kvs]}

    async def run(self, s: Step) -> Any:
        try:
            return await self._run(s)
        except rpc.AioRpcError as e:
            return etcd_error(e)

    async def _run(self, s: Step) -> Any:
        if isinstance(s, Put):
            return self._put(await self.kv.Put(self._put_req(s)), s.prev_kv)
        if isinstance(s, Range):
            return self._range(await self.kv.Range(self._range_req(s)))
        if isinstance(s, Delete):
            return self._delete(await self.kv.DeleteRange(self._delete_req(s)))
        if isinstance(s, Txn):
            r = await self.kv.Txn(
                rpc.TxnRequest(
                    compare=[self._compare(c) for c in s.compare],
                    success=[self._request_op(o) for o in s.success],
                    failure=[self._request_op(o) for o in s.failure],
                )
            )
            responses = []
            for op in r.responses:
                kind = op.WhichOneof("response")
                if kind == "response_put":
                    responses.append({"put": self._put(op.response_put, True)})
                elif kind == "response_range":
                    responses.append({"range": self._range(op.response_range)})
                else:
                    responses.append({"delete": self._delete(op.response_delete_range)})
            return {"succeeded": r.succeeded, "revision": r.header.revision, "responses": responses}
        if isinstance(s, Compact):
            await self.kv.Compact(rpc.CompactionRequest(revision=s.revision, physical=True))
            return {"compacted": s.revision}
        if isinstance(s, LeaseGrant):
            r = await self.lease.LeaseGrant(rpc.LeaseGrantRequest(TTL=s.ttl, ID=s.id))
            if r.error:
                return err(f"grant: {r.error}")
            return {"id": r.ID if s.id else "auto" if r.ID > 0 else r.ID, "ttl": r.TTL}
        if isinstance(s, LeaseRevoke):
            await self.lease.LeaseRevoke(rpc.LeaseRevokeRequest(ID=s.id))
            return {"revoked": s.id}
        if isinstance(s, LeaseTTL):
            r = await self.lease.LeaseTimeToLive(rpc.LeaseTimeToLiveRequest(ID=s.id, keys=True))
            if r.TTL == -1:
                return err("lease_not_found")
            return {"id": r.ID, "granted_ttl": r.grantedTTL, "keys": sorted(bytes(k) for k in r.keys),
                    "ttl_in_range": 0 < r.TTL <= r.grantedTTL}
        if isinstance(s, Watch):
            return await self._watch(s)
        raise TypeError(s)

    async def _watch(self, s: Watch) -> Any:
        call = self.watchstub.Watch()
        try:
            await call.write(
                rpc.WatchRequest(
                    create_request=rpc.WatchCreateRequest(
                        key=s.key, range_end=s.end or b"", start_revision=s.start_revision, prev_kv=s.prev_kv
                    )
                )
            )
            created = await asyncio.wait_for(call.read(), WATCH_TIMEOUT)
            assert created.created, created
            events: list[Any] = list(created.events)
            if created.compact_revision or created.canceled:
                return err("compacted", created.compact_revision) if created.compact_revision else err(
                    f"canceled: {created.cancel_reason}"
                )
            writes = [await self.run(step) for step in s.then]
            sentinel = await self.run(Put(s.sentinel, b"end"))
            while not any(bytes(e.kv.key) == s.sentinel for e in events):
                resp = await asyncio.wait_for(call.read(), WATCH_TIMEOUT)
                if resp.compact_revision or resp.canceled:
                    return err("compacted", resp.compact_revision) if resp.compact_revision else err(
                        f"canceled: {resp.cancel_reason}"
                    )
                events.extend(resp.events)
            return {
                "writes": writes,
                "sentinel": sentinel,
                "events": [
                    {
                        "type": "PUT" if e.type == rpc.Event.PUT else "DELETE",
                        "kv": nkv(e.kv),
                        "prev_kv": nkv(e.prev_kv) if e.HasField("prev_kv") else None,
                    }
                    for e in events
                ],
            }
        finally:
            call.cancel()


# -- kubecore side ------------------------------------------------------------------------------
_KC_COMPARE = {
    "value": Compare.value,
    "version": Compare.version,
    "create": Compare.create_revision,
    "mod": Compare.mod_revision,
    "lease": Compare.lease,
}


class KubecoreSide:
    name = "kubecore"

    def __init__(self, store: Store) -> None:
        self.store = store

    @staticmethod
    def _put(r: Any) -> dict[str, Any]:
        return {"revision": r.revision, "prev_kv": nkv(r.prev_kv)}

    @staticmethod
    def _range(r: Any) -> dict[str, Any]:
        return {"revision": r.revision, "kvs": [nkv(kv) for kv in r.kvs], "count": r.count, "more": r.more}

    @staticmethod
    def _delete(r: Any) -> dict[str, Any]:
        return {"revision": r.revision, "deleted": r.deleted, "prev_kvs": [nkv(kv) for kv in r.prev_kvs]}

    @staticmethod
    def _op(s: Put | Range | Delete) -> Op:
        if isinstance(s, Put):
            return Op.put(s.key, s.value, lease=s.lease, prev_kv=s.prev_kv)
        if isinstance(s, Range):
            return Op.range(s.key, s.end, revision=s.revision, limit=s.limit, keys_only=s.keys_only,
                            count_only=s.count_only)
        return Op.delete(s.key, s.end, prev_kv=s.prev_kv)

    async def run(self, s: Step) -> Any:
        try:
            return await self._run(s)
        except Exception as e:  # noqa: BLE001 -- every failure is normalised and compared with etcd's
            return kubecore_error(e)

    async def _run(self, s: Step) -> Any:
        st = self.store
        if isinstance(s, Put):
            return self._put(await st.aput(s.key, s.value, lease=s.lease, prev_kv=s.prev_kv))
        if isinstance(s, Range):
            return self._range(st.range(s.key, s.end, revision=s.revision, limit=s.limit, keys_only=s.keys_only,
                                        count_only=s.count_only))
        if isinstance(s, Delete):
            return self._delete(await st.adelete(s.key, s.end, prev_kv=s.prev_kv))
        if isinstance(s, Txn):
            r = await st.atxn(
                [_KC_COMPARE[c.target](c.key, c.op, c.against) for c in s.compare],
                [self._op(o) for o in s.success],
                [self._op(o) for o in s.failure],
            )
            responses = []
            for resp in r.responses:
                kind = type(resp).__name__
                if kind == "PutResult":
                    responses.append({"put": self._put(resp)})
                elif kind == "RangeResult":
                    responses.append({"range": self._range(resp)})
                else:
                    responses.append({"delete": self._delete(resp)})
            return {"succeeded": r.succeeded, "revision": r.revision, "responses": responses}
        if isinstance(s, Compact):
            await st.acompact(s.revision)
            return {"compacted": s.revision}
        if isinstance(s, LeaseGrant):
            lease_id = await st.alease_grant(s.ttl, id=s.id)
            ttl = st.lease_time_to_live(lease_id).granted_ttl
            return {"id": lease_id if s.id else "auto" if lease_id > 0 else lease_id, "ttl": ttl}
        if isinstance(s, LeaseRevoke):
            await st.alease_revoke(s.id)
            return {"revoked": s.id}
        if isinstance(s, LeaseTTL):
            r = st.lease_time_to_live(s.id, keys=True)
            return {"id": r.id, "granted_ttl": r.granted_ttl, "keys": sorted(bytes(k) for k in r.keys),
                    "ttl_in_range": 0 < r.ttl <= r.granted_ttl}
        if isinstance(s, Watch):
            return await self._watch(s)
        raise TypeError(s)

    async def _watch(self, s: Watch) -> Any:
        try:
            w = self.store.watch(s.key, s.end, start_revision=s.start_revision, prev_kv=s.prev_kv)
        except Exception as e:  # noqa: BLE001 -- keep revisions in step with etcd, which writes either way
            for step in (*s.then, Put(s.sentinel, b"end")):
                await self.run(step)
            return self._watch_error(e)
        with w:
            writes = [await self.run(step) for step in s.then]
            sentinel = await self.run(Put(s.sentinel, b"end"))
            events: list[Any] = []
            deadline = time.monotonic() + WATCH_TIMEOUT
            try:
                while not any(e.kv.key == s.sentinel for e in events):
                    left = deadline - time.monotonic()
                    assert left > 0 and not w.ended, f"kubecore watch: no sentinel event; got {events}"
                    events.extend(w.poll(1024, timeout=left))
            except Exception as e:  # noqa: BLE001 -- normalised like every other answer
                return self._watch_error(e)
        return {
            "writes": writes,
            "sentinel": sentinel,
            "events": [{"type": e.type, "kv": nkv(e.kv), "prev_kv": nkv(e.prev_kv)} for e in events],
        }

    @staticmethod
    def _watch_error(e: Exception) -> dict[str, Any]:
        if isinstance(e, CompactedError):
            return err("compacted", getattr(e, "compact_revision", None))
        return kubecore_error(e)


# -- fresh etcd per test, started ahead of time -------------------------------------------------
class EtcdPool:
    """Hands out freshly started etcd servers; keeps ``spare`` more starting in the background."""

    def __init__(self, spare: int = 2) -> None:
        self._executor = ThreadPoolExecutor(max_workers=spare + 1, thread_name_prefix="etcd-pool")
        self._ready: deque[tuple[EtcdPeer, Future[float]]] = deque()
        self._spare = spare
        for _ in range(spare):
            self._spawn()

    def _spawn(self) -> None:
        peer = EtcdPeer()  # EtcdError (test failure) if etcd is missing and cannot be installed
        self._ready.append((peer, self._executor.submit(peer.start)))

    @contextlib.contextmanager
    def peer(self) -> Iterator[EtcdPeer]:
        peer, started = self._ready.popleft()
        self._spawn()
        try:
            started.result(timeout=60)  # re-raises EtcdError with the server log
            yield peer
        finally:
            self._executor.submit(peer.cleanup)

    def close(self) -> None:
        while self._ready:
            peer, started = self._ready.popleft()
            with contextlib.suppress(Exception):
                started.result(timeout=60)
            peer.cleanup()
        self._executor.shutdown(wait=True)


@pytest.fixture(scope="module")
def etcd_pool() -> Iterator[EtcdPool]:
    pool = EtcdPool()
    try:
        yield pool
    finally:
        pool.close()


@dataclass
class Pair:
    etcd: EtcdSide
    kc: KubecoreSide
    mismatches: list[str] = field(default_factory=list)
    step_no: itertools.count = field(default_factory=itertools.count)

    async def both(self, step: Step, note: str = "") -> Any:
        """Runs ``step`` on both systems; records a mismatch; returns etcd's normalised answer."""
        n = next(self.step_no)
        e = await self.etcd.run(step)
        k = await self.kc.run(step)
        if e != k:
            self.mismatches.append(describe(n, step, note, e, k))
        if TRACE:
            print(f"[{n}] {note} {step!r}\n    etcd: {e!r}\n    same: {e == k}")
        return e

    async def script(self, steps: Sequence[Step]) -> list[Any]:
        return [await self.both(s) for s in steps]

    def check(self) -> None:
        if self.mismatches:
            pytest.fail(
                f"{len(self.mismatches)} step(s) differ between etcd and kubecore:\n\n" + "\n\n".join(self.mismatches),
                pytrace=False,
            )


def describe(n: int, step: Step, note: str, e: Any, k: Any) -> str:
    lines = [f"step {n}: {step!r}" + (f"  [{note}]" if note else "")]
    if isinstance(e, dict) and isinstance(k, dict):
        for key in sorted(set(e) | set(k)):
            if e.get(key, "<absent>") != k.get(key, "<absent>"):
                lines.append(f"  {key}:\n    etcd:     {e.get(key, '<absent>')!r}\n    kubecore: {k.get(key, '<absent>')!r}")
    else:
        lines.append(f"  etcd:     {e!r}\n  kubecore: {k!r}")
    return "\n".join(lines)


@pytest.fixture
async def pair(etcd_pool: EtcdPool) -> AsyncIterator[Pair]:
    with etcd_pool.peer() as peer:
        async with aetcd.Client(host=peer.host, port=peer.client_port, timeout=30) as client:
            with Store.memory() as store:
                p = Pair(EtcdSide(client), KubecoreSide(store))
                # a fresh etcd and a fresh store are both at revision 1
                assert await p.both(Range(b"\0", b"\0")) == {"revision": 1, "kvs": [], "count": 0, "more": False}
                yield p


def kvs_of(result: dict[str, Any]) -> list[bytes]:
    return [kv["key"] for kv in result["kvs"]]


# -- tests ----------------------------------------------------------------------------------------
async def test_put_overwrite_delete_recreate(pair: Pair) -> None:
    steps: list[Step] = [
        Put(b"/a", b"1"),
        Put(b"/a", b"2", prev_kv=True),
        Put(b"/a", b"", prev_kv=True),  # empty value is a value
        Range(b"/a"),
        Put(b"/b", b"x", prev_kv=True),  # prev_kv of a new key: none
        Delete(b"/a", prev_kv=True),
        Range(b"/a"),
        Delete(b"/a", prev_kv=True),  # nothing to delete: no new revision
        Put(b"/a", b"again"),  # recreated: new create_revision, version 1
        Range(b"/a"),
        Put(b"\x00\xff", b"\x00binary\xff"),
        Put(b"/\xff\xff", b"v"),
        Range(b"\x00", b"\x00"),  # every key
        Range(b"/", b"\x00"),  # every key from "/"
        Put(b"", b"empty key"),  # etcd: key is not provided
    ]
    results = await pair.script(steps)
    assert [r["revision"] for r in results[:3]] == [2, 3, 4]  # harness sanity: etcd answered
    pair.check()


async def test_range_limit_keys_only_count_only(pair: Pair) -> None:
    for i in range(5):
        await pair.both(Put(b"/r/%d" % i, b"v%d" % i))
    await pair.both(Put(b"/r/2", b"v2b"))
    await pair.both(Put(b"/s", b"outside"))
    end = prefix_end(b"/r/")
    for limit in (0, 1, 2, 4, 5, 6, 100):
        await pair.both(Range(b"/r/", end, limit=limit), f"limit={limit}")
        await pair.both(Range(b"/r/", end, limit=limit, keys_only=True), f"keys_only limit={limit}")
        await pair.both(Range(b"/r/", end, limit=limit, count_only=True), f"count_only limit={limit}")
    await pair.both(Range(b"/r/1", b"/r/3"))  # half-open
    await pair.both(Range(b"/r/3", b"/r/1"))  # end < start
    await pair.both(Range(b"/r/3", b"/r/3"))  # end == start
    await pair.both(Range(b"/r/3", b"\x00", limit=2))  # from key on
    await pair.both(Range(b"/r/9"))  # missing single key
    await pair.both(Range(b"/r/2", keys_only=True))
    await pair.both(Range(b"/r/2", count_only=True))
    await pair.both(Range(b"/r/", end, revision=3, limit=1))
    await pair.both(Range(b"/r/", end, revision=3, count_only=True))
    pair.check()


async def test_range_at_every_past_revision(pair: Pair) -> None:
    await pair.script(
        [
            Put(b"/p/a", b"1"),
            Put(b"/p/b", b"1"),
            Put(b"/p/a", b"2"),
            Delete(b"/p/b"),
            Txn(success=[Put(b"/p/c", b"1"), Put(b"/p/d", b"1"), Delete(b"/p/a")]),
            Put(b"/p/b", b"again"),
            Delete(b"/p/", prefix_end(b"/p/")),
            Put(b"/p/a", b"3"),
        ]
    )
    current = (await pair.both(Range(b"/p/a")))["revision"]
    assert current == 9
    for rev in range(current + 3):  # 0 = current; beyond current = future revision
        await pair.both(Range(b"/p/", prefix_end(b"/p/"), revision=rev), f"prefix at {rev}")
        await pair.both(Range(b"/p/a", revision=rev), f"/p/a at {rev}")
        await pair.both(Range(b"/p/b", revision=rev, keys_only=True), f"/p/b keys_only at {rev}")
        await pair.both(Range(b"/p/", prefix_end(b"/p/"), revision=rev, limit=1), f"limit 1 at {rev}")
    pair.check()


async def test_delete_range_counts_and_prev_kvs(pair: Pair) -> None:
    for k in (b"/d/a", b"/d/b", b"/d/b/x", b"/d/c", b"/e", b"/f"):
        await pair.both(Put(k, b"v-" + k))
    await pair.both(Put(b"/d/b", b"v2"))
    await pair.script(
        [
            Delete(b"/d/zz", prev_kv=True),  # missing: deleted 0, revision unchanged
            Delete(b"/d/b", prev_kv=True),  # single key, not its "children"
            Delete(b"/d/", prefix_end(b"/d/"), prev_kv=True),  # prefix, prev_kvs in key order
            Delete(b"/d/", prefix_end(b"/d/"), prev_kv=True),  # again: nothing
            Delete(b"/e", b"/g"),  # range without prev_kv
            Range(b"\x00", b"\x00"),
            Put(b"/x1", b"1"),
            Put(b"/x2", b"2"),
            Delete(b"/x1", b"\x00", prev_kv=True),  # from key on
            Delete(b"/x3", b"/x1"),  # end < start
            Range(b"\x00", b"\x00"),
        ]
    )
    pair.check()


async def test_txn_compare_matrix(pair: Pair) -> None:
    """Every target and operator, below/at/above the actual value, on an existing and a missing key
    (etcd: a value compare on a missing key is always false; other targets compare against 0)."""
    lease = 0x4A11
    await pair.both(LeaseGrant(ttl=300, id=lease))
    await pair.both(Put(b"/c/k", b"m"))
    await pair.both(Put(b"/c/other", b"o"))
    await pair.both(Put(b"/c/k", b"m", lease=lease))
    await pair.both(Put(b"/c/empty", b""))
    k = await pair.both(Range(b"/c/k"))
    kv = k["kvs"][0]
    assert (kv["create_revision"], kv["mod_revision"], kv["version"], kv["lease"]) == (2, 4, 2, lease)
    probes: dict[str, list[bytes | int]] = {
        "value": [b"", b"l", b"m", b"ma", b"n"],
        "version": [0, 1, 2, 3],
        "create": [0, 1, 2, 3],
        "mod": [0, 3, 4, 5],
        "lease": [0, lease - 1, lease, lease + 1],
    }
    for key in (b"/c/k", b"/c/missing", b"/c/other", b"/c/empty"):
        for target, values in probes.items():
            for op in ("=", "!=", "<", ">"):
                for v in values:
                    await pair.both(Txn([Cmp(target, key, op, v)], [Range(key)], [Range(b"/c/other")]))
    # several compares: all must hold
    await pair.both(Txn([Cmp("value", b"/c/k", "=", b"m"), Cmp("version", b"/c/k", "=", 2)], [Range(b"/c/k")]))
    await pair.both(Txn([Cmp("value", b"/c/k", "=", b"m"), Cmp("version", b"/c/k", "=", 3)], [], [Range(b"/c/k")]))
    # the classic create-if-absent and update-if-unchanged
    await pair.both(Txn([Cmp("create", b"/c/new", "=", 0)], [Put(b"/c/new", b"1")], [Range(b"/c/new")]))
    await pair.both(Txn([Cmp("create", b"/c/new", "=", 0)], [Put(b"/c/new", b"2")], [Range(b"/c/new")]))
    await pair.both(Txn([Cmp("mod", b"/c/new", "=", 6)], [Put(b"/c/new", b"3", prev_kv=True)], [Range(b"/c/new")]))
    await pair.both(Txn([Cmp("mod", b"/c/new", "=", 6)], [Put(b"/c/new", b"4")], [Range(b"/c/new")]))
    pair.check()


async def test_txn_ops_revisions_and_rejections(pair: Pair) -> None:
    await pair.both(Put(b"/t/a", b"1"))
    await pair.script(
        [
            Txn(),  # empty: succeeded, read-only
            Txn(success=[Range(b"/t/a")]),  # read-only txn: no new revision
            Txn(success=[Put(b"/t/b", b"1"), Put(b"/t/c", b"1", prev_kv=True), Put(b"/t/a", b"2", prev_kv=True)]),
            Range(b"/t/", prefix_end(b"/t/")),  # all three at one revision
            # a range after a put in the same txn sees the put
            Txn(success=[Put(b"/t/a", b"3"), Range(b"/t/a"), Range(b"/t/", prefix_end(b"/t/"))]),
            # delete and range inside a txn
            Txn(success=[Delete(b"/t/b", prev_kv=True), Range(b"/t/", prefix_end(b"/t/"), count_only=True)]),
            # a delete of nothing alone: no new revision
            Txn(success=[Delete(b"/t/nothing")]),
            # a delete of nothing after a put: reported at the txn's revision
            Txn(success=[Put(b"/t/d", b"1"), Delete(b"/t/nothing")]),
            # failure branch with writes
            Txn([Cmp("value", b"/t/a", "=", b"no")], [Put(b"/t/a", b"yes")], [Put(b"/t/e", b"1"), Range(b"/t/e")]),
            # rejected by etcd: the same key written twice, overlapping put/delete in one branch
            Txn(success=[Put(b"/t/a", b"x"), Put(b"/t/a", b"y")]),
            Txn(success=[Put(b"/t/a", b"x"), Delete(b"/t/a")]),
            Txn(success=[Delete(b"/t/", prefix_end(b"/t/")), Put(b"/t/c", b"x")]),
            Txn(success=[Delete(b"/t/a"), Delete(b"/t/a")]),
            # not rejected: overlapping puts in different branches
            Txn([Cmp("version", b"/t/a", ">", 0)], [Put(b"/t/a", b"s")], [Put(b"/t/a", b"f")]),
            # a lease that does not exist fails the whole txn
            Txn(success=[Put(b"/t/f", b"1"), Put(b"/t/g", b"1", lease=0x777)]),
            Range(b"/t/", prefix_end(b"/t/")),
            # a past-revision range inside a txn; a compacted/future one fails the txn
            Txn(success=[Range(b"/t/", prefix_end(b"/t/"), revision=3)]),
            Txn(success=[Put(b"/t/h", b"1"), Range(b"/t/a", revision=1000)]),
            Range(b"/t/h"),
        ]
    )
    pair.check()


async def test_compaction_errors(pair: Pair) -> None:
    for i in range(6):
        await pair.both(Put(b"/k/%d" % (i % 3), b"v%d" % i))  # revisions 2..7
    await pair.both(Delete(b"/k/0"))  # 8
    await pair.script(
        [
            Compact(5),
            Range(b"/k/", prefix_end(b"/k/"), revision=4),  # below compact revision
            Range(b"/k/", prefix_end(b"/k/"), revision=5),  # at it: still readable
            Range(b"/k/1", revision=5),
            Range(b"/k/", prefix_end(b"/k/"), revision=6),
            Range(b"/k/", prefix_end(b"/k/")),
            Compact(5),  # twice
            Compact(3),  # below
            Compact(9),  # future
            Compact(100),
            Compact(8),  # current revision
            Range(b"/k/", prefix_end(b"/k/"), revision=7),
            Range(b"/k/", prefix_end(b"/k/"), revision=8),
            Range(b"/k/0", revision=8),
            Txn(success=[Range(b"/k/1", revision=7)]),
            Put(b"/k/3", b"after"),
            Range(b"/k/", prefix_end(b"/k/"), revision=9),
        ]
    )
    pair.check()


async def test_compaction_and_watch(pair: Pair) -> None:
    for i in range(6):
        await pair.both(Put(b"/w/%d" % (i % 2), b"v%d" % i))  # 2..7
    await pair.both(Compact(4))
    await pair.both(Watch(b"/w/", prefix_end(b"/w/"), b"/w/" + SENTINEL_SUFFIX, start_revision=2), "below compact")
    await pair.both(Watch(b"/w/", prefix_end(b"/w/"), b"/w/" + SENTINEL_SUFFIX, start_revision=4), "at compact")
    await pair.both(
        Watch(b"/w/", prefix_end(b"/w/"), b"/w/" + SENTINEL_SUFFIX, start_revision=5, prev_kv=True), "after compact"
    )
    pair.check()


async def test_watch_replay_from_revisions(pair: Pair) -> None:
    pre = b"/v/"
    sentinel = pre + SENTINEL_SUFFIX
    await pair.script(
        [
            Put(pre + b"a", b"1"),  # 2
            Put(pre + b"b", b"1"),  # 3
            Put(b"/vv", b"outside the prefix"),  # 4
            Put(pre + b"a", b"2"),  # 5
            Txn(success=[Put(pre + b"c", b"1"), Put(pre + b"d", b"1"), Delete(pre + b"b"), Put(pre + b"a", b"3")]),  # 6
            Delete(pre + b"a"),  # 7
            Delete(pre, prefix_end(pre)),  # 8: c and d at one revision
            Put(pre + b"a", b"reborn"),  # 9
        ]
    )
    end = prefix_end(pre)
    for start in (1, 2, 5, 6, 7, 8):
        for prev in (False, True):
            await pair.both(Watch(pre, end, sentinel, start_revision=start, prev_kv=prev), f"from {start}")
    # a single key, from the start, then from now on with writes after the watch was created
    await pair.both(Watch(sentinel, None, sentinel, start_revision=1, prev_kv=True), "single key")
    await pair.both(
        Watch(pre, end, sentinel, prev_kv=True, then=[Put(pre + b"e", b"1"), Delete(pre + b"a"),
                                                      Txn(success=[Put(pre + b"f", b"1"), Put(pre + b"g", b"1")])]),
        "from now",
    )
    # a start revision in the future: only the changes from it on
    current = (await pair.both(Range(pre)))["revision"]
    await pair.both(
        Watch(pre, end, sentinel, start_revision=current + 2, then=[Put(pre + b"h", b"1"), Put(pre + b"i", b"1")]),
        "future start",
    )
    # everything from key on
    await pair.both(Watch(b"/v/d", b"\x00", sentinel, start_revision=1), "from key on")
    pair.check()


async def test_lease_grant_attach_revoke(pair: Pair) -> None:
    lease, other = 0x1001, 0x2002
    pre = b"/l/"
    sentinel = pre + SENTINEL_SUFFIX
    await pair.script(
        [
            LeaseGrant(ttl=120, id=lease),  # no new revision
            Range(pre, prefix_end(pre)),
            LeaseGrant(ttl=120, id=lease),  # exists
            LeaseGrant(ttl=120, id=other),
            LeaseGrant(ttl=120, id=0),  # server-chosen id (not compared: etcd's are not sequential)
            Put(pre + b"b", b"1", lease=lease),
            Put(pre + b"a", b"1", lease=lease),
            Put(pre + b"c", b"1", lease=lease),
            Put(pre + b"d", b"1", lease=other),
            Put(pre + b"e", b"1"),
            Put(pre + b"x", b"1", lease=0x3003),  # no such lease
            Put(pre + b"c", b"2", lease=0),  # put without lease detaches
            Put(pre + b"e", b"2", lease=other, prev_kv=True),  # attach by overwriting
            LeaseTTL(lease),
            LeaseTTL(other),
            LeaseTTL(0x3003),
            Range(pre, prefix_end(pre)),
            Txn([Cmp("lease", pre + b"a", "=", lease)], [Put(pre + b"f", b"1", lease=lease)]),
            LeaseRevoke(lease),  # deletes a, b, f in one revision
            Range(pre, prefix_end(pre)),
            LeaseTTL(lease),
            LeaseRevoke(lease),  # already gone
            Put(pre + b"g", b"1", lease=lease),  # revoked lease
            Delete(pre + b"d"),
            LeaseTTL(other),  # a deleted key leaves its lease
            LeaseRevoke(other),  # deletes e only
            LeaseGrant(ttl=120, id=0x4004),
            LeaseRevoke(0x4004),  # no keys: no new revision
            Range(pre, prefix_end(pre)),
            LeaseGrant(ttl=120, id=lease),  # an id can be granted again after revoke
            LeaseTTL(lease),
        ]
    )
    await pair.both(Watch(pre, prefix_end(pre), sentinel, start_revision=1, prev_kv=True), "lease history")
    pair.check()


async def test_compaction_of_tombstones_and_lost_prev_kv(pair: Pair) -> None:
    """Compaction keeps, per key, the newest revision at or below the compact revision; a tombstone
    there is dropped. A watch's prev_kv that was compacted away is left out."""
    await pair.script(
        [
            Put(b"/g/a", b"1"),  # 2
            Put(b"/g/a", b"2"),  # 3
            Put(b"/g/b", b"1"),  # 4
            Delete(b"/g/b"),  # 5
            Put(b"/g/a", b"3"),  # 6
            Put(b"/g/c", b"1"),  # 7
            Compact(1),
            Compact(5),  # newest change at 5 is a tombstone
            Range(b"/g/", prefix_end(b"/g/"), revision=5),
            Range(b"/g/b", revision=5),
            Range(b"/g/", prefix_end(b"/g/"), revision=5, count_only=True),
        ]
    )
    sentinel = b"/g/" + SENTINEL_SUFFIX
    # etcd 3.4.23 drops a tombstone whose revision equals the compact revision, so a watch from that
    # revision misses the DELETE (etcd-io/etcd#18089, fixed by #18274 in 3.4.34 / 3.5.15: "keep
    # tombstone if revision == compactAtRev"). kubecore keeps it, as fixed etcd does: expect etcd's
    # events with that one DELETE in front.
    watch = Watch(b"/g/", prefix_end(b"/g/"), sentinel, start_revision=5, prev_kv=True)
    e, k = await pair.etcd.run(watch), await pair.kc.run(watch)
    tombstone = {"type": "DELETE", "prev_kv": None,
                 "kv": {"key": b"/g/b", "value": b"", "create_revision": 0, "mod_revision": 5, "version": 0, "lease": 0}}
    assert tombstone not in e["events"], "etcd now keeps the tombstone: drop this special case"
    assert k == {**e, "events": [tombstone, *e["events"]]}, describe(-1, watch, "tombstone at compact revision", e, k)
    await pair.script([Compact(6), Range(b"/g/a", revision=6)])
    await pair.both(Watch(b"/g/", prefix_end(b"/g/"), sentinel, start_revision=7, prev_kv=True), "after compact")
    await pair.both(Watch(b"/g/", prefix_end(b"/g/"), sentinel, start_revision=5, prev_kv=True), "below compact")
    pair.check()


async def test_argument_edges(pair: Pair) -> None:
    """Arguments etcd accepts with a defined meaning (negative limit / revision) or rejects."""
    for k in (b"/e/a", b"/e/b", b"/e/c"):
        await pair.both(Put(k, b"1"))
    end = prefix_end(b"/e/")
    await pair.script(
        [
            Range(b"/e/", end, revision=-1),  # etcd: current revision
            Range(b"/e/", end, keys_only=True, count_only=True),
            Range(b"/e/", end, limit=2, keys_only=True, count_only=True),
            Range(b""),  # etcd: key is not provided
            Range(b"", b"\x00"),
            Delete(b""),
            Txn([Cmp("version", b"", "=", 0)], [Range(b"/e/a")]),
            Txn(success=[Put(b"", b"x")]),
            Put(b"/e/d", b"1", lease=-5),
            LeaseGrant(ttl=9_000_000_000, id=0x54),  # etcd's MaxLeaseTTL
            LeaseRevoke(0x54),
            Delete(b"\x00", b"\x00", prev_kv=True),  # everything
            Range(b"\x00", b"\x00"),
        ]
    )
    pair.check()


# -- one test per difference found so far (see the module docstring of each) --------------------
async def test_txn_range_before_first_write_reports_begin_revision(pair: Pair) -> None:
    """etcd: a range inside a txn that runs before the txn's first write answers at (and reports in
    its header) the revision the txn began at; ranges after a write report the txn's revision."""
    await pair.both(Put(b"/t/a", b"1"))
    await pair.both(Txn(success=[Range(b"/t/a"), Put(b"/t/a", b"2"), Range(b"/t/a"), Delete(b"/t/none")]))
    pair.check()


async def test_watch_prev_kv_left_out_when_compacted(pair: Pair) -> None:
    """etcd fills a watch event's prev_kv by reading at mod_revision - 1; once that revision is
    compacted the event comes without prev_kv -- also when the compaction happened in two steps."""
    pre, sentinel = b"/g/", b"/g/" + SENTINEL_SUFFIX
    await pair.script(
        [
            Put(pre + b"a", b"1"),  # 2
            Put(pre + b"a", b"2"),  # 3
            Put(pre + b"a", b"3"),  # 4
            Put(pre + b"b", b"1"),  # 5
            Put(pre + b"a", b"4"),  # 6
            Compact(4),
            Watch(pre, prefix_end(pre), sentinel, start_revision=4, prev_kv=True),  # 4's prev (3) gone
            Compact(5),
            Watch(pre, prefix_end(pre), sentinel, start_revision=6, prev_kv=True),  # 6's prev (4) readable at 5
            Compact(6),
            Watch(pre, prefix_end(pre), sentinel, start_revision=6, prev_kv=True),  # 6's prev (4) gone now
            Range(pre + b"a", revision=5),
        ]
    )
    pair.check()


async def test_range_negative_limit_means_no_limit(pair: Pair) -> None:
    """etcd applies a limit only when it is > 0."""
    await pair.script([Put(b"/n/a", b"1"), Put(b"/n/b", b"1")])
    await pair.both(Range(b"/n/", prefix_end(b"/n/"), limit=-1))
    pair.check()


async def test_lease_ttl_bounds(pair: Pair) -> None:
    """etcd raises a TTL below its minimum (derived from its election timeout: 2 s with the
    defaults EtcdPeer uses) to that minimum, and rejects TTLs above MaxLeaseTTL (9,000,000,000 s)."""
    await pair.script(
        [
            LeaseGrant(ttl=1, id=0x51),
            LeaseRevoke(0x51),
            LeaseGrant(ttl=0, id=0x52),
            LeaseRevoke(0x52),
            LeaseGrant(ttl=-3, id=0x53),
            LeaseRevoke(0x53),
            LeaseGrant(ttl=9_000_000_001, id=0x54),
        ]
    )
    pair.check()


async def test_lease_negative_id(pair: Pair) -> None:
    """etcd 3.4 grants a caller-chosen negative lease id (only 0 means "choose one")."""
    await pair.script([LeaseGrant(ttl=60, id=-7), Put(b"/n/a", b"1", lease=-7), Range(b"/n/a"), LeaseRevoke(-7)])
    pair.check()
