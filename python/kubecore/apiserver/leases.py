"""Store leases for objects that expire: Events live `--event-ttl` (1 h by default) after their
last write, as kube-apiserver's etcd3 storage makes them.

Upstream attaches each Event write to an etcd lease whose TTL is the event TTL, and shares leases
between writes (its leaseManager): a lease granted at time t with TTL ttl + reuse (reuse = 5 % of
ttl, at most 60 s) serves every later write until t + reuse, or until 1,000 objects were attached
to it; a write then expires between ttl and ttl + reuse seconds after it was made. One grant per
minute at most, instead of one per Event. The lease's keys vanish together when it expires (the
store deletes them in one revision, and watchers see DELETED events).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from kubecore.store import Store

__all__ = ["DEFAULT_EVENT_TTL", "LeaseManager"]

DEFAULT_EVENT_TTL = 3600
"""Seconds (kube-apiserver's --event-ttl default, 1h)."""
REUSE_SECONDS = 60
REUSE_PERCENT = 0.05
MAX_ATTACHED = 1000


class LeaseManager:
    """Hands out store leases for writes that expire after `ttl` seconds (see the module docstring)."""

    def __init__(self, store: Store, *, reuse_seconds: int = REUSE_SECONDS, reuse_percent: float = REUSE_PERCENT,
                 max_attached: int = MAX_ATTACHED, clock: Callable[[], float] = time.monotonic) -> None:
        self._store = store
        self._reuse_seconds = reuse_seconds
        self._reuse_percent = reuse_percent
        self._max_attached = max_attached
        self._clock = clock
        self._lock = asyncio.Lock()
        self._id = 0
        self._expires = 0.0
        self._attached = 0
        self._ttl = -1  # the current lease's ttl and the end of its reuse window (the fast path)
        self._reuse_until = 0.0

    def _reuse(self, ttl: int) -> int:
        return min(int(self._reuse_percent * ttl), self._reuse_seconds)

    def _current(self, ttl: int, now: float) -> int:
        """The current lease if a write at `now` may join it, else 0."""
        reuse = self._reuse(ttl)
        valid = now + ttl < self._expires  # it outlives this write's ttl
        sufficient = now + ttl + reuse >= self._expires  # ... by at most `reuse`
        if self._id and valid and sufficient and self._attached < self._max_attached:
            self._attached += 1
            return self._id
        return 0

    async def lease(self, ttl: int) -> int:
        """A lease id for one write that must live at least `ttl` seconds."""
        # the common case, on every Event write: the same ttl as the current lease's, within its
        # reuse window (valid and sufficient above reduce to granted <= now < granted + reuse)
        if ttl == self._ttl and self._attached < self._max_attached and self._clock() < self._reuse_until:
            self._attached += 1
            return self._id
        lease = self._current(ttl, self._clock())
        if lease:
            return lease
        async with self._lock:  # one grant for the writes that arrive while it is made
            now = self._clock()
            lease = self._current(ttl, now)
            if lease:
                return lease
            reuse = self._reuse(ttl)
            self._id = await self._store.alease_grant(ttl + reuse)
            self._expires = now + ttl + reuse
            self._ttl, self._reuse_until = ttl, now + reuse
            self._attached = 1
            return self._id
