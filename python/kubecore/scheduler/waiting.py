"""Pods held at Permit (upstream runtime/waiting_pods_map.go).

When a Permit plugin answers Wait, the framework parks the pod here with one timeout per waiting
plugin. The pod's binding cycle then awaits `WaitingPod.wait()`, which ends with:

- Success once every waiting plugin has called `allow(plugin)`;
- Unschedulable when anyone calls `reject(plugin, msg)` (other plugins may, e.g. a gang plugin
  rejecting every sibling), or when a plugin's timeout passes first:
  "rejected due to timeout after waiting 10s at plugin Coscheduling".

Allow/reject never block and may come before `wait()` is called; the first decision wins and
later ones are ignored. Timeouts run on the injected clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from kubecore.api.gotime import format_seconds
from kubecore.client.clock import Clock
from kubecore.scheduler.podinfo import Obj, pod_key
from kubecore.scheduler.status import Code, Status

__all__ = ["WaitingPod", "WaitingPods", "MAX_PERMIT_TIMEOUT"]

MAX_PERMIT_TIMEOUT = 15 * 60.0


class WaitingPod:
    """A pod waiting at Permit for the plugins in `pending` (plugin -> timeout in seconds).

    Invariant: `_decision` is None until the first allow-by-all / reject / timeout, and never
    changes afterwards.
    """

    def __init__(self, pod: Obj, pending: dict[str, float], *, clock: Clock) -> None:
        self.pod = pod
        self.key = pod_key(pod)
        self._clock = clock
        start = clock.now()
        self._deadlines = {name: start + t for name, t in pending.items()}
        self._timeouts = dict(pending)
        self._decision: Status | None = None
        self._decided: asyncio.Event | None = None

    def pending_plugins(self) -> list[str]:
        return sorted(self._deadlines)

    @property
    def decided(self) -> bool:
        return self._decision is not None

    def allow(self, plugin: str) -> None:
        """`plugin` lets the pod go; the pod is allowed once no plugin is pending."""
        self._deadlines.pop(plugin, None)
        if not self._deadlines:
            self._decide(Status())

    def reject(self, plugin: str, msg: str) -> bool:
        """Reject the pod; False when the pod was already allowed or rejected (upstream Reject)."""
        return self._decide(Status(Code.UNSCHEDULABLE, msg, plugin=plugin))

    def _decide(self, status: Status) -> bool:
        if self._decision is not None:
            return False
        self._decision = status
        self._deadlines.clear()
        if self._decided is not None:
            self._decided.set()
        return True

    def _expire(self) -> None:
        now = self._clock.now()
        for name, deadline in sorted(self._deadlines.items(), key=lambda kv: kv[1]):
            if deadline <= now:
                msg = f"rejected due to timeout after waiting {format_seconds(self._timeouts[name])} at plugin {name}"
                self.reject(name, msg)
                return

    async def wait(self) -> Status:
        """The decision, waiting for it (timeouts included) when it has not been made yet."""
        if self._decided is None:
            self._decided = asyncio.Event()
        while self._decision is None:
            self._expire()
            if self._decision is not None:
                break
            remaining = min(self._deadlines.values()) - self._clock.now()
            sleeper = asyncio.ensure_future(self._clock.sleep(remaining))
            waiter = asyncio.ensure_future(self._decided.wait())
            try:
                await asyncio.wait({sleeper, waiter}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                sleeper.cancel()
                waiter.cancel()
        return self._decision


class WaitingPods:
    """The framework's waiting pods by pod key (upstream waitingPodsMap)."""

    def __init__(self) -> None:
        self._pods: dict[str, WaitingPod] = {}

    def add(self, wp: WaitingPod) -> None:
        self._pods[wp.key] = wp

    def remove(self, key: str) -> None:
        self._pods.pop(key, None)

    def get(self, key: str) -> WaitingPod | None:
        return self._pods.get(key)

    def __iter__(self) -> Iterator[WaitingPod]:
        return iter(list(self._pods.values()))

    def __len__(self) -> int:
        return len(self._pods)

    def reject(self, key: str, msg: str = "removed") -> bool:
        """Reject the waiting pod `key`; whether it was waiting (upstream RejectWaitingPod)."""
        wp = self._pods.get(key)
        if wp is None:
            return False
        wp.reject("", msg)
        return True
