"""Reflector against the misbehaving fake server: paged LIST then WATCH, resume after a dropped
connection, relist on 410, bookmarks, streaming lists and the fallbacks, backoff."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from kubecore.client.clock import FakeClock
from kubecore.client.config import ClientConfig
from kubecore.client.flowcontrol import Backoff, BackoffManager
from kubecore.client.indexer import Indexer
from kubecore.client.reflector import Reflector, StoreSink
from kubecore.client.rest import RestClient
from tests.unit.client.fakeapi import FakeApi, InstantClock, eventually, serve


@asynccontextmanager
async def running(api: FakeApi, *, clock: object, **kw: object) -> AsyncIterator[tuple[Reflector, Indexer]]:
    async with serve(api) as url:
        async with RestClient(ClientConfig(server=url, qps=0, max_retries=0), clock=clock) as rest:  # type: ignore[arg-type]
            rc = await rest.resource("v1", "configmaps")
            ix = Indexer()
            refl = Reflector(rc, StoreSink(ix), clock=clock, rand=lambda: 0.0, **kw)  # type: ignore[arg-type]
            task = asyncio.ensure_future(refl.run())
            try:
                yield refl, ix
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)


def data_of(ix: Indexer) -> dict[str, dict[str, str]]:
    return {k: (ix.get_by_key(k) or {}).get("data", {}) for k in ix.list_keys()}


async def test_paged_list_then_watch_and_bookmarks_advance_the_version() -> None:
    api = FakeApi()
    for n in "abcde":
        await api.put(n)
    async with running(api, clock=InstantClock(), use_watch_list=False, page_size=2) as (refl, ix):
        await eventually(lambda: len(ix) == 5, what="initial list")
        lists = api.queries(watch=False)
        assert [(q.get("limit"), q.get("continue"), q.get("resourceVersion")) for q in lists] == [
            ("2", None, "0"), ("2", "2", None), ("2", "4", None)]  # the pager: first page carries the RV
        assert refl.last_sync_resource_version == "105"
        await eventually(lambda: api.queries(watch=True), what="watch")
        w = api.queries(watch=True)[0]
        assert (w["resourceVersion"], w["allowWatchBookmarks"]) == ("105", "true")
        await api.put("a", {"x": "1"})
        await api.remove("b")
        await eventually(lambda: "default/b" not in ix and data_of(ix)["default/a"] == {"x": "1"}, what="events")
        assert refl.last_sync_resource_version == "107"
        await api.bookmark()
        await eventually(lambda: refl.last_sync_resource_version == "108", what="bookmark")
        assert len(ix) == 4 and refl.lists == 1


async def test_dropped_watch_resumes_from_the_last_seen_version_without_relisting() -> None:
    api = FakeApi()
    await api.put("a")
    api.watch_plan = ["drop-after:1"]
    async with running(api, clock=InstantClock(), use_watch_list=False) as (refl, ix):
        await eventually(lambda: len(api.queries(watch=True)) == 1, what="first watch")
        await api.put("b")  # delivered
        await api.put("c")  # cut in half: the connection dies
        await eventually(lambda: len(api.queries(watch=True)) == 2, what="second watch")
        assert api.queries(watch=True)[1]["resourceVersion"] == "102"  # resumes after "b"
        await eventually(lambda: len(ix) == 3, what="c replayed by the new watch")
        assert refl.lists == 1 and len(api.queries(watch=False)) == 1


async def test_410_on_watch_relists_and_a_410_on_that_list_reads_the_latest() -> None:
    api = FakeApi()
    await api.put("a")
    api.watch_plan = ["gone", "drop-after:0"]
    clock = InstantClock()
    async with running(api, clock=clock, use_watch_list=False) as (refl, ix):
        await eventually(lambda: refl.lists == 2, what="relist after 410")
        assert [q.get("resourceVersion") for q in api.queries(watch=False)] == ["0", "101"]
        assert clock.slept and clock.slept[0] == 0.8  # the reflector's first backoff step (rand=0)
        # The server forgets everything up to 102, then the watch connection drops at "b":
        # re-watching from 101 is 410, LIST at 101 is 410 too, so the reflector reads the latest.
        await eventually(lambda: len(api.queries(watch=True)) == 2, what="second watch")
        api.compacted = 102
        await api.put("b")
        await eventually(lambda: refl.lists == 3 and len(ix) == 2, what="relist at latest")
        assert [q.get("resourceVersion") for q in api.queries(watch=False)] == ["0", "101", "101", ""]
        assert api.queries(watch=True)[2]["resourceVersion"] == "101"


async def test_relist_drops_objects_deleted_while_away() -> None:
    api = FakeApi()
    for n in "abc":
        await api.put(n)
    api.watch_plan = ["drop-after:0", "gone"]
    async with running(api, clock=InstantClock(), use_watch_list=False) as (refl, ix):
        await eventually(lambda: len(ix) == 3, what="list")
        api.history.clear()  # deletions the watch will never replay
        del api.objects["default/b"]
        api.rv += 1
        await api.put("d")
        await eventually(lambda: refl.lists == 2, what="relist")
        await eventually(lambda: sorted(ix.list_keys()) == ["default/a", "default/c", "default/d"], what="replace")


async def test_streaming_list_when_the_server_supports_it() -> None:
    api = FakeApi()
    for n in "abc":
        await api.put(n)
    async with running(api, clock=FakeClock()) as (refl, ix):
        await eventually(lambda: refl.watch_lists == 1 and len(ix) == 3, what="streaming list")
        q = api.queries(watch=True)[0]
        assert (q["sendInitialEvents"], q["resourceVersionMatch"], q["allowWatchBookmarks"]) == \
            ("true", "NotOlderThan", "true")
        assert q.get("resourceVersion", "") == ""  # client-go's first watch-list: most recent
        assert api.queries(watch=False) == [] and refl.last_sync_resource_version == "103"
        await api.put("d")  # the same stream continues as the watch
        await eventually(lambda: len(ix) == 4, what="event after the bookmark")
        assert len(api.queries(watch=True)) == 1


async def test_streaming_list_rejected_falls_back_to_list_and_watch() -> None:
    api = FakeApi()
    await api.put("a")
    api.watch_list = "reject"
    async with running(api, clock=FakeClock()) as (refl, ix):
        await eventually(lambda: refl.lists == 1 and len(ix) == 1, what="fallback list")
        await eventually(lambda: len(api.queries(watch=True)) == 2, what="plain watch")
        assert "sendInitialEvents" not in api.queries(watch=True)[1]
        assert refl.watch_lists == 0


async def test_a_server_that_ignores_send_initial_events_is_detected_by_silence() -> None:
    api = FakeApi()
    await api.put("a")
    api.watch_list = "ignore"  # a plain watch, never the bookmark
    clock = FakeClock()
    async with running(api, clock=clock, initial_events_timeout=30.0) as (refl, ix):
        await eventually(lambda: len(api.queries(watch=True)) == 1, what="watch-list attempt")
        await clock.step(29.0)
        assert refl.lists == 0
        await clock.step(1.0)  # 30 quiet seconds: give up on streaming, LIST instead
        await eventually(lambda: refl.lists == 1 and len(ix) == 1, what="fallback list")
        await eventually(lambda: len(api.queries(watch=True)) == 2, what="plain watch")
        assert "sendInitialEvents" not in api.queries(watch=True)[1]


async def test_a_watch_that_closes_at_once_counts_as_a_failure_and_backs_off() -> None:
    api = FakeApi()
    api.watch_plan = ["close", "close", "close"]
    clock = InstantClock()
    async with running(api, clock=clock, use_watch_list=False) as (refl, _):
        await eventually(lambda: refl.lists == 4, what="relists")
    assert clock.slept[:3] == [0.8, 1.6, 3.2]


def test_backoff_manager_matches_client_go_and_resets_after_quiet_time() -> None:
    clock = FakeClock()
    mgr = BackoffManager.reflector_default(clock=clock, rand=lambda: 0.0)
    assert [mgr.next_delay() for _ in range(8)] == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]
    clock.advance(121)
    assert mgr.next_delay() == 0.8
    jittered = BackoffManager.reflector_default(clock=clock, rand=lambda: 1.0)
    assert jittered.next_delay() == 1.6  # jitter 1.0: up to twice the step
    b = Backoff(duration=1.0, factor=3.0, steps=2)
    assert [b.step(), b.step(), b.step(), b.step()] == [1.0, 3.0, 9.0, 9.0]
