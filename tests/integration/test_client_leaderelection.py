"""Leader election against a real kubecore API server: two electors compete for one Lease, the
leader is cancelled, the other takes over. Short lease settings (2 s / 1.5 s / 0.2 s) and generous
timeouts; nothing asserts on wall-clock durations."""

from __future__ import annotations

import asyncio
import json
import re
import urllib.error
import urllib.request
import uuid
from typing import Any

import pytest

from kubecore.client.config import ClientConfig
from kubecore.client.rest import RestClient
from kubecore.client.sinks import RestApiSink
from kubecore.client.leaderelection import LeaderElector, LeaseLock

MICRO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
GENEROUS = 30.0  # seconds to wait for something that takes ~2 s; a bound, never an assertion


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


class Elector:
    def __init__(self, url: str, *, lease: str, identity: str, leading: set[str], max_leaders: list[int],
                 release: bool) -> None:
        self.rest = RestClient(ClientConfig(server=url, qps=0))
        self.client = RestApiSink(self.rest)
        self.identity = identity
        self.became_leader = asyncio.Event()
        self.stopped = asyncio.Event()
        self.cancelled_while_leading = False
        self._leading, self._max = leading, max_leaders
        lock = LeaseLock(self.client, namespace="default", name=lease, identity=identity)
        self.elector = LeaderElector(lock, on_started_leading=self._lead, on_stopped_leading=self.stopped.set,
                                     lease_duration=2.0, renew_deadline=1.5, retry_period=0.2,
                                     release_on_cancel=release)
        self.task = asyncio.create_task(self.elector.run())

    async def _lead(self) -> None:
        self._leading.add(self.identity)
        self._max[0] = max(self._max[0], len(self._leading))
        self.became_leader.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled_while_leading = True
            raise
        finally:
            self._leading.discard(self.identity)

    async def close(self) -> None:
        self.task.cancel()
        await asyncio.wait({self.task})
        await self.rest.close()


async def _first(*events: asyncio.Event) -> None:
    waits = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait_for(asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED), GENEROUS)
    finally:
        for w in waits:
            w.cancel()


@pytest.mark.parametrize("release", [False, True], ids=["expiry", "release-on-cancel"])
async def test_two_electors_fail_over(server_url: str, release: bool) -> None:
    lease = f"le-{uuid.uuid4().hex[:8]}"
    leading: set[str] = set()
    max_leaders = [0]
    a = Elector(server_url, lease=lease, identity="a", leading=leading, max_leaders=max_leaders, release=release)
    b = Elector(server_url, lease=lease, identity="b", leading=leading, max_leaders=max_leaders, release=release)
    try:
        await _first(a.became_leader, b.became_leader)
        leader, standby = (a, b) if a.became_leader.is_set() else (b, a)
        path = f"{server_url}/apis/coordination.k8s.io/v1/namespaces/default/leases/{lease}"
        obj = _get(path)
        spec = obj["spec"]
        assert spec["holderIdentity"] == leader.identity
        assert spec["leaseDurationSeconds"] == 2
        assert spec["leaseTransitions"] == 0
        assert MICRO.match(spec["acquireTime"]) and MICRO.match(spec["renewTime"])
        # the leader keeps renewing: the resourceVersion moves, the standby stays out
        rv = obj["metadata"]["resourceVersion"]
        for _ in range(int(GENEROUS / 0.1)):
            await asyncio.sleep(0.1)
            if _get(path)["metadata"]["resourceVersion"] != rv:
                break
        assert _get(path)["spec"]["holderIdentity"] == leader.identity
        assert not standby.became_leader.is_set()

        leader.task.cancel()
        await asyncio.wait({leader.task})
        assert leader.cancelled_while_leading and leader.stopped.is_set()
        if release:
            assert _get(path)["spec"]["holderIdentity"] in ("", standby.identity)

        await asyncio.wait_for(standby.became_leader.wait(), GENEROUS)
        spec = _get(path)["spec"]
        assert spec["holderIdentity"] == standby.identity
        assert spec["leaseTransitions"] == 1
        assert standby.elector.is_leader
        assert max_leaders[0] == 1  # never two acting leaders in this process
    finally:
        await a.close()
        await b.close()
