"""What went wrong last and when to try again: per-key exponential back-off (client-go's
util/flowcontrol.Backoff, as the kubelet uses it) and the kubelet's reason cache.

`Backoff(initial=10, cap=300)` is the kubelet's crash-loop and image-pull back-off (backOffPeriod
10 s, MaxContainerBackOff 300 s). Per key it remembers the current delay and when it was last
stepped (`last_update`):

- `next(key, event_time)`: no entry, or the entry expired -> start at `initial`; else double the
  delay up to `cap`. Stamps `last_update = now`.
- An entry expires when `event_time - last_update > 2 * cap` (10 minutes for containers): a
  container that ran that long after its last restart starts over at 10 s.
- `is_in_backoff_since(key, event_time)`: `now - event_time < delay` (unexpired entries only).
  The kubelet passes the finish time of the container's last exit: it may restart the container
  `delay` seconds after that exit.
- `is_in_backoff_since_update(key, event_time)`: `event_time - last_update < delay` (image pulls:
  counted from the failed pull).

Worked example (crash loop, every run exits at once): exit at t=0 -> not in back-off, `next`
(10 s), restart; exit at t=0 -> in back-off until t=10; restart at 10, `next` (20 s); exit at 10
-> back-off until 30; then 40 s, 80, 160, 300, 300, ... If a run lasts more than 10 minutes
after the last `next`, the next exit starts over: restart at once, then 10 s.

`ReasonCache`: the last sync error of each (pod uid, container name) — "CrashLoopBackOff",
"ErrImagePull", ... with its message — which the status generator shows as the container's
waiting reason (kubelet reason_cache.go; an LRU of 1,000 entries there, per kubelet).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from kubecore.client.clock import Clock

CONTAINER_BACKOFF_INITIAL = 10.0
CONTAINER_BACKOFF_CAP = 300.0


@dataclass(slots=True)
class _Entry:
    delay: float
    last_update: float


class Backoff:
    """Per-key exponential back-off on an injected clock (see the module docstring)."""

    def __init__(self, *, clock: Clock, initial: float = CONTAINER_BACKOFF_INITIAL,
                 cap: float = CONTAINER_BACKOFF_CAP) -> None:
        self.clock = clock
        self.initial = initial
        self.cap = cap
        self._entries: dict[str, _Entry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def _expired(self, event_time: float, entry: _Entry) -> bool:
        return event_time - entry.last_update > 2 * self.cap

    def get(self, key: str) -> float:
        """The current delay of `key` (0 when it has none)."""
        entry = self._entries.get(key)
        return entry.delay if entry is not None else 0.0

    def next(self, key: str, event_time: float) -> float:
        """Step `key`'s delay (see the module docstring); returns the new delay."""
        entry = self._entries.get(key)
        now = self.clock.now()
        if entry is None or self._expired(event_time, entry):
            entry = self._entries[key] = _Entry(self.initial, now)
        else:
            entry.delay = min(entry.delay * 2, self.cap)
            entry.last_update = now
        return entry.delay

    def is_in_backoff_since(self, key: str, event_time: float) -> bool:
        entry = self._entries.get(key)
        if entry is None or self._expired(event_time, entry):
            return False
        return self.clock.now() - event_time < entry.delay

    def is_in_backoff_since_update(self, key: str, event_time: float) -> bool:
        entry = self._entries.get(key)
        if entry is None or self._expired(event_time, entry):
            return False
        return event_time - entry.last_update < entry.delay

    def remaining(self, key: str, event_time: float) -> float:
        """Seconds until `is_in_backoff_since(key, event_time)` turns false (0 if it is)."""
        entry = self._entries.get(key)
        if entry is None or self._expired(event_time, entry):
            return 0.0
        return max(0.0, event_time + entry.delay - self.clock.now())

    def remaining_since_update(self, key: str) -> float:
        """Seconds until `is_in_backoff_since_update(key, now)` turns false (0 if it is)."""
        entry = self._entries.get(key)
        if entry is None:
            return 0.0
        return max(0.0, entry.last_update + entry.delay - self.clock.now())

    def reset(self, key: str) -> None:
        self._entries.pop(key, None)

    def forget_prefix(self, prefix: str) -> None:
        """Drop every key starting with `prefix` (a pod's keys when it goes away)."""
        for key in [k for k in self._entries if k.startswith(prefix)]:
            del self._entries[key]

    def gc(self) -> None:
        """Drop entries untouched for more than 2 * cap (flowcontrol's GC)."""
        now = self.clock.now()
        for key in [k for k, e in self._entries.items() if now - e.last_update > 2 * self.cap]:
            del self._entries[key]


@dataclass(frozen=True, slots=True)
class Reason:
    reason: str
    message: str


class ReasonCache:
    """The last start failure of each container (uid, name), least recently used dropped first."""

    def __init__(self, size: int = 1000) -> None:
        self.size = size
        self._items: OrderedDict[tuple[str, str], Reason] = OrderedDict()

    def add(self, uid: str, name: str, reason: str, message: str) -> None:
        key = (uid, name)
        self._items[key] = Reason(reason, message)
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def remove(self, uid: str, name: str) -> None:
        self._items.pop((uid, name), None)

    def get(self, uid: str, name: str) -> Reason | None:
        return self._items.get((uid, name))

    def forget_pod(self, uid: str) -> None:
        for key in [k for k in self._items if k[0] == uid]:
            del self._items[key]
