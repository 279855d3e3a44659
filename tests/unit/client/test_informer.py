"""SharedIndexInformer and SharedInformerFactory against the fake server: handler events in order
with the cache already updated, late handlers, relist tombstones, resync, isolation of handlers,
compact queues, one watch per resource."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import pytest

from kubecore.client import informer as informer_mod
from kubecore.client.clock import FakeClock
from kubecore.client.config import ClientConfig
from kubecore.client.factory import SharedInformerFactory
from kubecore.client.indexer import DeletedFinalStateUnknown, strip_managed_fields
from kubecore.client.informer import EventHandlerFuncs, SharedIndexInformer
from kubecore.client.rest import RestClient
from tests.unit.client.fakeapi import FakeApi, InstantClock, eventually, serve


class Recorder:
    """A handler that records what it saw and what the cache held at that moment."""

    def __init__(self, informer: SharedIndexInformer | None = None) -> None:
        self.informer = informer
        self.events: list[tuple[Any, ...]] = []

    def _cached(self, key: str) -> Any:
        if self.informer is None:
            return None
        obj = self.informer.indexer.get_by_key(key)
        return obj["metadata"]["resourceVersion"] if obj else None

    def on_add(self, obj: dict[str, Any], initial: bool) -> None:
        self.events.append(("add", obj["metadata"]["name"], initial))

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        key = f"default/{new['metadata']['name']}"
        self.events.append(("update", new["metadata"]["name"], old["metadata"]["resourceVersion"],
                            new["metadata"]["resourceVersion"], self._cached(key)))

    def on_delete(self, obj: Any) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            self.events.append(("tombstone", obj.key, obj.obj["metadata"]["name"]))
        else:
            self.events.append(("delete", obj["metadata"]["name"]))


@asynccontextmanager
async def informer_on(api: FakeApi, *, clock: Any, **kw: Any) -> AsyncIterator[SharedIndexInformer]:
    async with serve(api) as url:
        async with RestClient(ClientConfig(server=url, qps=0, max_retries=0), clock=clock) as rest:
            rc = await rest.resource("v1", "configmaps")
            inf = SharedIndexInformer(rc, clock=clock, **kw)
            try:
                yield inf
            finally:
                await inf.stop()


async def test_handlers_see_adds_updates_deletes_after_the_cache_has_them() -> None:
    api = FakeApi()
    await api.put("a")
    async with informer_on(api, clock=FakeClock()) as inf:
        rec = Recorder(inf)
        reg = inf.add_event_handler(rec)
        inf.start()
        assert await inf.wait_for_sync(10)
        await eventually(reg.has_synced, what="handler synced")
        await api.put("b")
        await api.put("a", {"k": "v"})
        await api.remove("b")
        await eventually(lambda: len(rec.events) == 4, what="events")
    assert rec.events == [("add", "a", True), ("add", "b", False), ("update", "a", "101", "103", "103"),
                          ("delete", "b")]


async def test_a_late_handler_gets_synthetic_adds_and_async_handlers_work() -> None:
    api = FakeApi()
    for n in "abc":
        await api.put(n)
    async with informer_on(api, clock=FakeClock()) as inf:
        inf.start()
        await inf.wait_for_sync(10)
        seen: list[tuple[str, bool]] = []

        async def on_add(obj: dict[str, Any], initial: bool) -> None:
            await asyncio.sleep(0)
            seen.append((obj["metadata"]["name"], initial))

        reg = inf.add_event_handler(EventHandlerFuncs(on_add_func=on_add))
        await eventually(reg.has_synced, what="late handler synced")
        await api.put("d")
        await eventually(lambda: len(seen) == 4, what="live add")
    assert sorted(seen[:3]) == [("a", True), ("b", True), ("c", True)] and seen[3] == ("d", False)


async def test_relist_turns_missed_deletes_into_tombstones_and_known_objects_into_updates() -> None:
    api = FakeApi()
    for n in "abc":
        await api.put(n)
    api.watch_plan = ["drop-after:0", "gone"]
    async with informer_on(api, clock=InstantClock(), use_watch_list=False) as inf:
        rec = Recorder()
        inf.add_event_handler(rec)
        inf.start()
        await inf.wait_for_sync(10)
        api.history.clear()  # what happens now is never replayed: only a relist can see it
        del api.objects["default/b"]
        api.rv += 1
        await api.put("d")
        await eventually(lambda: inf.reflector.lists == 2 and len(rec.events) == 7, what="relist")
    assert rec.events[:3] == [("add", "a", True), ("add", "b", True), ("add", "c", True)]
    assert sorted(rec.events[3:]) == [("add", "d", False), ("tombstone", "default/b", "b"),
                                      ("update", "a", "101", "101", None), ("update", "c", "103", "103", None)]


async def test_resync_redelivers_every_object_as_an_update() -> None:
    api = FakeApi()
    for n in "ab":
        await api.put(n)
    clock = FakeClock()
    async with informer_on(api, clock=clock, resync_period=60.0) as inf:
        rec = Recorder()
        inf.add_event_handler(rec)
        quiet = Recorder()
        inf.add_event_handler(quiet, resync_period=0)
        inf.start()
        await inf.wait_for_sync(10)
        await eventually(lambda: len(rec.events) == 2, what="initial adds")
        await clock.step(59.0)
        assert len(rec.events) == 2
        await clock.step(1.0)
        await eventually(lambda: len(rec.events) == 4, what="resync")
    assert sorted(rec.events[2:]) == [("update", "a", "101", "101", None), ("update", "b", "102", "102", None)]
    assert len(quiet.events) == 2  # a handler without resync is not resynced


async def test_a_failing_or_slow_handler_does_not_hold_up_the_others() -> None:
    api = FakeApi()
    async with informer_on(api, clock=FakeClock()) as inf:
        gate = asyncio.Event()
        slow_seen: list[str] = []
        fast = Recorder()

        async def slow(obj: dict[str, Any], initial: bool) -> None:
            await gate.wait()
            slow_seen.append(obj["metadata"]["name"])

        def boom(obj: dict[str, Any], initial: bool) -> None:
            if obj["metadata"]["name"] == "a":
                raise RuntimeError("handler bug")
            fast.events.append(("after-error", obj["metadata"]["name"]))

        slow_reg = inf.add_event_handler(EventHandlerFuncs(on_add_func=slow))
        inf.add_event_handler(EventHandlerFuncs(on_add_func=boom))
        inf.add_event_handler(fast)
        inf.start()
        await inf.wait_for_sync(10)
        n = informer_mod.INLINE_LIMIT + 50
        for i in range(n):
            await api.put(f"p{i}" if i else "a")
        await eventually(lambda: len(fast.events) == 2 * n - 1, what="fast handler")
        queued = list(slow_reg._listener.pending)
        assert any(isinstance(new, bytes) for _, _, new, _ in queued)  # long queue: compact entries
        gate.set()
        await eventually(lambda: len(slow_seen) == n, what="slow handler catches up")
    assert slow_seen[:2] == ["a", "p1"] and slow_seen[-1] == f"p{n - 1}"  # in order, decoded again


async def test_factory_shares_one_informer_and_one_watch_per_resource() -> None:
    api = FakeApi()
    await api.put("a")
    async with serve(api) as url:
        async with RestClient(ClientConfig(server=url, qps=0)) as rest:
            factory = SharedInformerFactory(rest, clock=FakeClock())
            one = await factory.informer_for("v1", "configmaps")
            two = await factory.informer_for(None, "cm", indexers={"byname": lambda o: [o["metadata"]["name"]]})
            assert one is two and "byname" in one.indexer.get_indexers()
            factory.start()
            assert await factory.wait_for_cache_sync(10) == {"configmaps.core": True}
            assert one.indexer.index_keys("byname", "a") == ["default/a"]
            await api.put("b")
            await eventually(lambda: len(one.indexer) == 2, what="watch event")
            await factory.shutdown()
    assert len(api.queries(watch=True)) == 1


MANAGED = [{"manager": "kubectl", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:k": {}}}}]


async def test_a_transform_shapes_what_the_cache_and_handlers_get_from_lists_and_watches() -> None:
    api = FakeApi()
    listed = await api.put("a")
    listed["metadata"]["managedFields"] = MANAGED  # served by the first LIST
    async with informer_on(api, clock=FakeClock()) as inf:
        inf.set_transform(strip_managed_fields)
        seen: list[dict[str, Any]] = []
        inf.add_event_handler(EventHandlerFuncs(on_add_func=lambda o, _i: seen.append(o),
                                                on_update_func=lambda _o, n: seen.append(n)))
        inf.start()
        assert await inf.wait_for_sync(10)
        watched = await api.put("b", {"k": "v"})
        watched["metadata"]["managedFields"] = MANAGED
        await api.put("a", {"k": "2"})
        await eventually(lambda: len(seen) == 3, what="events")
        with pytest.raises(RuntimeError):
            inf.set_transform(None)  # client-go: not after the informer started
        cached = [inf.indexer.get_by_key(k) for k in ("default/a", "default/b")]
        fresh = [inf.indexer.copy_by_key(k) for k in ("default/a", "default/b")]  # decoded from the entries
    for obj in [*seen, *cached, *fresh]:
        assert obj is not None and "managedFields" not in obj["metadata"], obj
    assert [o["metadata"]["name"] for o in seen] == ["a", "b", "a"]


async def test_factory_transform_reaches_every_full_informer() -> None:
    api = FakeApi()
    async with serve(api) as url:
        async with RestClient(ClientConfig(server=url, qps=0)) as rest:
            factory = SharedInformerFactory(rest, clock=FakeClock(), transform=strip_managed_fields)
            inf = await factory.informer_for("v1", "configmaps")
            assert inf.indexer.transform is strip_managed_fields
            await factory.shutdown()


async def test_watch_events_reach_cache_and_handlers_decoded_once_after_the_cut() -> None:
    import msgspec

    from kubecore.client.codec import CompactCodec
    from kubecore.client.watch import parse_line

    inf = SharedIndexInformer(object(), name="t")  # type: ignore[arg-type] - the reflector is not started
    inf.set_transform(strip_managed_fields)
    inf.indexer.codec = CompactCodec(compress=False)
    seen: list[tuple[str, Any]] = []

    async def on_update(old: dict[str, Any], new: dict[str, Any]) -> None:  # a coroutine handler still works
        await asyncio.sleep(0)
        seen.append(("update", new))

    inf.add_event_handler(EventHandlerFuncs(on_add_func=lambda o, _i: seen.append(("add", o)),
                                            on_update_func=on_update))
    for lis in inf._listeners:
        lis.start()
    obj = {"metadata": {"name": "a", "namespace": "default", "resourceVersion": "5", "managedFields": MANAGED},
           "data": {"k": "v"}}
    for kind, rv in (("ADDED", "5"), ("MODIFIED", "6")):
        obj["metadata"]["resourceVersion"] = rv
        ev = parse_line(msgspec.json.encode({"type": kind, "object": obj}))
        inf.on_event(ev)
        assert not ev.is_decoded and ev.resource_version() == rv  # the informer decoded only the cut bytes
    await eventually(lambda: len(seen) == 2, what="handler calls")
    for lis in inf._listeners:
        assert lis.task is not None
        lis.task.cancel()
    cached = inf.indexer.get_by_key("default/a")
    assert [k for k, _ in seen] == ["add", "update"] and seen[1][1] is cached
    assert cached is not None and "managedFields" not in cached["metadata"]
    assert cached["metadata"]["resourceVersion"] == "6"
    assert msgspec.json.decode(inf.indexer.json_of(cached) or b"") == cached


@pytest.mark.parametrize("transform", [strip_managed_fields, None])
async def test_watch_events_are_decoded_as_parsed_when_the_transform_works_on_bytes(transform: Any) -> None:
    api = FakeApi()
    await api.put("a")
    async with informer_on(api, clock=FakeClock()) as inf:
        inf.set_transform(transform)
        arrived: list[tuple[str, bool]] = []
        deliver = inf.on_event

        def spy(ev: Any) -> None:
            arrived.append((ev.type, ev.prepared is not None))
            deliver(ev)

        inf.on_event = spy  # type: ignore[method-assign]
        seen: list[dict[str, Any]] = []
        inf.add_event_handler(EventHandlerFuncs(on_add_func=lambda o, _i: seen.append(o),
                                                on_update_func=lambda _o, n: seen.append(n),
                                                on_delete_func=lambda o: seen.append(o)))  # type: ignore[arg-type]
        inf.start()
        assert await inf.wait_for_sync(10)
        assert (inf.reflector.decoder is not None) == (transform is not None)
        watched = await api.put("b", {"k": "v"})
        watched["metadata"]["managedFields"] = MANAGED
        await api.put("a", {"k": "2"})
        await api.remove("b")
        await eventually(lambda: len(seen) == 4, what="events")
        cached = inf.indexer.get_by_key("default/a")
    assert arrived == [(kind, transform is not None) for kind in ("ADDED", "MODIFIED", "DELETED")]
    assert [o["metadata"]["name"] for o in seen] == ["a", "b", "a", "b"]
    assert cached is not None and cached["data"] == {"k": "2"}
    if transform is not None:
        assert all("managedFields" not in o["metadata"] for o in seen)


async def test_handler_objects_partial_funcs_and_subclasses_all_get_their_calls() -> None:
    from kubecore.client.watch import parse_line

    class Counting(EventHandlerFuncs):
        def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
            got.append(("subclass update", new["metadata"]["resourceVersion"]))

    class Plain:
        def on_add(self, obj: dict[str, Any], is_in_initial_list: bool) -> None:
            got.append(("plain add", obj["metadata"]["resourceVersion"]))

        def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
            got.append(("plain update", new["metadata"]["resourceVersion"]))

        def on_delete(self, obj: Any) -> None:
            got.append(("plain delete", obj["metadata"]["resourceVersion"]))

    got: list[tuple[str, str]] = []
    inf = SharedIndexInformer(object(), name="t")  # type: ignore[arg-type] - the reflector is not started
    inf.add_event_handler(EventHandlerFuncs(on_delete_func=lambda o: got.append(("funcs delete", "-"))))
    inf.add_event_handler(Counting(on_add_func=lambda o, _i: got.append(("subclass add", "-"))))
    inf.add_event_handler(Plain())
    for lis in inf._listeners:
        lis.start()
    obj = {"metadata": {"name": "a", "namespace": "default", "resourceVersion": "1"}}
    for kind, rv in (("ADDED", "1"), ("MODIFIED", "2"), ("DELETED", "3")):
        obj["metadata"]["resourceVersion"] = rv
        inf.on_event(parse_line(msgspec.json.encode({"type": kind, "object": obj})))
    await eventually(lambda: len(got) == 6, what="handler calls")
    for lis in inf._listeners:
        assert lis.task is not None
        lis.task.cancel()
    assert sorted(got) == sorted([("funcs delete", "-"), ("subclass add", "-"), ("subclass update", "2"),
                                  ("plain add", "1"), ("plain update", "2"), ("plain delete", "3")])
