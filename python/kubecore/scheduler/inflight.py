"""In-flight pods and the cluster events seen while they were being scheduled.

A pod is in flight from `Pop` until `done` (end of its scheduling or binding cycle). An event
that arrives meanwhile may be exactly what the pod needs if the cycle fails, yet the pod is not
in the unschedulable pool to be moved by it. So, while any pod is in flight, every event of
interest is recorded with a sequence number; when a failed pod comes back, the queue replays
the events recorded after it was popped through its queueing hints (upstream's inFlightPods /
inFlightEvents, which replaced moveRequestCycle).

Events older than the oldest in-flight pod are dropped as pods finish; with nothing in flight
nothing is recorded.

    pop(a)=1  event E1=2  pop(b)=3  event E2=4  done(a) -> E1 dropped; events_for(b) == [E2]
"""

from __future__ import annotations

from bisect import bisect_right
from collections import OrderedDict
from typing import Any

from kubecore.scheduler.events import ClusterEvent

__all__ = ["InFlight", "RecordedEvent"]

RecordedEvent = tuple[int, ClusterEvent, Any, Any]  # (seq, event, old object, new object)


class InFlight:
    """Invariants: `_pods` is ordered by increasing sequence; `_events[_head:]` is ordered by
    sequence and holds no event older than the oldest in-flight pod."""

    def __init__(self) -> None:
        self._pods: OrderedDict[str, int] = OrderedDict()
        self._events: list[RecordedEvent] = []
        self._seqs: list[int] = []
        """The sequence numbers of `_events`, index for index (bisected without a key function)."""
        self._head = 0
        self._seq = 0

    def pop(self, key: str) -> None:
        """`key` starts a scheduling cycle."""
        self._seq += 1
        self._pods[key] = self._seq
        self._pods.move_to_end(key)

    def __contains__(self, key: str) -> bool:
        return key in self._pods

    def __len__(self) -> int:
        return len(self._pods)

    def keys(self) -> list[str]:
        return list(self._pods)

    def add_event(self, event: ClusterEvent, old: Any, new: Any) -> bool:
        """Record `event` if anything is in flight; whether it was recorded."""
        if not self._pods:
            return False
        self._seq += 1
        self._events.append((self._seq, event, old, new))
        self._seqs.append(self._seq)
        return True

    def events_for(self, key: str) -> list[RecordedEvent]:
        """The events recorded since `key` was popped (none when it is not in flight)."""
        since = self._pods.get(key)
        if since is None:
            return []
        start = bisect_right(self._seqs, since, lo=self._head)
        return self._events[start:]

    def done(self, key: str) -> None:
        """`key`'s cycle ended; drop events no remaining in-flight pod can need."""
        if self._pods.pop(key, None) is None:
            return
        if not self._pods:
            self._events.clear()
            self._seqs.clear()
            self._head = 0
            return
        oldest = next(iter(self._pods.values()))
        self._head = bisect_right(self._seqs, oldest, lo=self._head)
        if self._head > 1024 and self._head * 2 > len(self._events):
            del self._events[:self._head]
            del self._seqs[:self._head]
            self._head = 0

    def clear(self) -> None:
        """Forget every pod in flight and every recorded event (the queue is closing)."""
        self._pods.clear()
        self._events.clear()
        self._seqs.clear()
        self._head = 0

    def timeline(self) -> list[str | ClusterEvent]:
        """In-flight pod keys and the recorded events still kept, in the order they happened
        (what upstream's listInFlightEvents shows)."""
        kept = self._events[self._head:]
        entries: list[tuple[int, str | ClusterEvent]] = [(seq, key) for key, seq in self._pods.items()]
        entries += [(seq, event) for seq, event, _, _ in kept]
        return [entry for _, entry in sorted(entries, key=lambda e: e[0])]

    @property
    def recorded(self) -> int:
        return len(self._events) - self._head
