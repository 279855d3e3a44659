"""The inflight stage's limiter (kubecore.apiserver.inflight): bounded holders, bounded queue,
arrival order, 429 after the wait, no slot lost to a cancelled waiter."""

from __future__ import annotations

import asyncio

import pytest

from kubecore.api import errors
from kubecore.apiserver.inflight import InflightLimiter


def run(coro: object) -> None:
    asyncio.run(coro)  # type: ignore[arg-type]


def test_waiters_get_slots_in_arrival_order_and_never_exceed_the_limit() -> None:
    async def main() -> None:
        lim = InflightLimiter(2, queue=10, wait=30.0)
        order: list[int] = []
        peak = 0

        async def one(i: int) -> None:
            nonlocal peak
            await lim.acquire()
            peak = max(peak, lim.running)
            order.append(i)
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            lim.release()

        await asyncio.gather(*(one(i) for i in range(8)))
        assert order == list(range(8)) and peak == 2 and lim.running == 0

    run(main())


def test_a_full_queue_refuses_at_once_with_retry_after() -> None:
    async def main() -> None:
        lim = InflightLimiter(1, queue=1, wait=30.0, retry_after=3)
        await lim.acquire()
        waiter = asyncio.ensure_future(lim.acquire())
        await asyncio.sleep(0)
        with pytest.raises(errors.StatusError) as e:
            await lim.acquire()
        assert e.value.code == 429 and e.value.details == {"retryAfterSeconds": 3}
        lim.release()
        await waiter  # the queued one got the slot
        assert lim.running == 1
        lim.release()
        assert lim.running == 0

    run(main())


def test_a_waiter_gives_up_after_the_wait_with_429() -> None:
    async def main() -> None:
        lim = InflightLimiter(1, queue=5, wait=0.01)
        await lim.acquire()
        with pytest.raises(errors.StatusError) as e:
            await lim.acquire()
        assert e.value.code == 429 and lim.running == 1
        lim.release()
        assert lim.running == 0
        await lim.acquire()  # nothing stale left in the queue
        assert lim.running == 1

    run(main())


def test_a_slot_handed_to_a_cancelled_waiter_is_passed_on() -> None:
    async def main() -> None:
        lim = InflightLimiter(1, queue=5, wait=30.0)
        await lim.acquire()
        first = asyncio.ensure_future(lim.acquire())
        second = asyncio.ensure_future(lim.acquire())
        await asyncio.sleep(0)
        lim.release()  # the slot goes to `first` ...
        first.cancel()  # ... which is cancelled before it runs again
        try:
            await first
        except asyncio.CancelledError:
            pass  # it gave the slot on to `second`
        else:
            lim.release()  # the cancellation came too late: `first` held the slot; now `second` gets it
        await second
        assert lim.running == 1
        lim.release()
        assert lim.running == 0

    run(main())


def test_the_chain_holds_a_slot_per_write_queues_the_next_and_refuses_beyond(tmp_path: object) -> None:
    """Through the handler chain: with one write slot and a queue of one, three creates sent at
    once get 201, 201 (after waiting) and 429; every slot is given back."""
    from pathlib import Path

    import msgspec
    from multidict import CIMultiDict, CIMultiDictProxy

    from kubecore.api import meta
    from kubecore.apiserver.admission import ensure_system_namespaces
    from kubecore.apiserver.app import DIRECT, OBJECTS, REGISTRY, ChainConfig, build_app
    from kubecore.apiserver.httpserver import LeanRequest
    from kubecore.store import Store

    headers = CIMultiDictProxy(CIMultiDict({"Content-Type": "application/json"}))

    async def main() -> None:
        with Store.open(Path(str(tmp_path)) / "s", fsync=False) as store:
            app = build_app(store, chain=ChainConfig(max_mutating=1, queue_wait_seconds=30.0))
            await ensure_system_namespaces(app[OBJECTS], app[REGISTRY], meta.now_rfc3339(), meta.new_uid)
            handle = app[DIRECT]

            def create(name: str) -> LeanRequest:
                body = msgspec.json.encode({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})
                return LeanRequest(None, "POST", "/api/v1/namespaces/default/configmaps", headers, body)  # type: ignore[arg-type]

            answers = await asyncio.gather(*(handle(create(f"c{i}")) for i in range(3)))
            assert sorted(r.status for r in answers) == [201, 201, 429]
            again = await handle(create("c3"))
            assert again.status == 201, "the slots were given back"

    run(main())
