"""The event TTL's lease manager (upstream etcd3 leaseManager): leases are shared within the
reuse window and up to 1,000 objects, each lease outlives its writes by at most the reuse."""

from __future__ import annotations

import asyncio

from kubecore.apiserver.leases import LeaseManager
from kubecore.store import Store


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_writes_share_a_lease_within_the_reuse_window() -> None:
    async def main() -> None:
        with Store.memory() as store:
            clock = Clock()
            leases = LeaseManager(store, clock=clock)
            first = await leases.lease(3600)
            assert store.lease_time_to_live(first).granted_ttl == 3660  # ttl + min(5 %, 60 s)
            clock.t += 59
            assert await leases.lease(3600) == first  # expires 1..60 s after the ttl: joins
            clock.t += 2
            second = await leases.lease(3600)  # would expire before its ttl: a new lease
            assert second != first
            assert await leases.lease(600) != second  # 600 s + 30 s: the 3,660 s lease is too long
    asyncio.run(main())


def test_a_lease_takes_at_most_max_attached_writes() -> None:
    async def main() -> None:
        with Store.memory() as store:
            leases = LeaseManager(store, max_attached=3, clock=Clock())
            ids = [await leases.lease(3600) for _ in range(7)]
            assert ids[0] == ids[1] == ids[2] != ids[3] == ids[4] == ids[5] != ids[6]
    asyncio.run(main())


def test_concurrent_writes_wait_for_one_grant() -> None:
    async def main() -> None:
        with Store.memory() as store:
            leases = LeaseManager(store, clock=Clock())
            ids = await asyncio.gather(*(leases.lease(3600) for _ in range(50)))
            assert len(set(ids)) == 1 and store.leases() == [ids[0]]
    asyncio.run(main())


def test_a_short_ttl_has_no_reuse() -> None:
    async def main() -> None:
        with Store.memory() as store:
            leases = LeaseManager(store, clock=Clock())
            a, b = await leases.lease(2), await leases.lease(2)
            assert a != b and store.lease_time_to_live(a).granted_ttl == 2
    asyncio.run(main())
