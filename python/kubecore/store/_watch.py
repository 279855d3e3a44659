"""Watch: an iterator and an async iterator over a key range's changes."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from kubecore._native import Event, NativeWatch

if TYPE_CHECKING:
    from types import TracebackType

    from kubecore.store._bridge import Bridge


class Watch:
    """Every change to the watched range, exactly once, in revision order.

    Iterate it (blocking) or ``async for`` over it. ``cancel()`` ends the iteration. If events the
    watch still had to deliver were compacted away, iteration raises ``CompactedError``.
    """

    def __init__(self, native: NativeWatch, bridge: Bridge, *, batch: int = 1024) -> None:
        self._native = native
        self._bridge = bridge
        self._batch = batch
        self._buf: deque[Event] = deque()
        self._ended = False

    @property
    def id(self) -> int:
        return self._native.id

    @property
    def ended(self) -> bool:
        """True once the watch was cancelled or its store closed and every event was read."""
        return self._ended and not self._buf

    def poll(self, max_events: int = 1024, timeout: float | None = None) -> list[Event]:
        """Up to ``max_events`` events, waiting up to ``timeout`` seconds (None: until some come).

        Returns [] on timeout and once the watch has ended (see ``ended``).
        """
        if self._buf:
            n = min(max_events, len(self._buf))
            return [self._buf.popleft() for _ in range(n)]
        if self._ended:
            return []
        events = self._native.poll(max_events, timeout)
        if events is None:
            self._ended = True
            return []
        return events

    def cancel(self) -> None:
        self._native.cancel()
        self._bridge.wake_watch(self._native.id)

    def __iter__(self) -> Watch:
        return self

    def __next__(self) -> Event:
        if not self._buf:
            if self._ended:
                raise StopIteration
            events = self._native.poll(self._batch, None)
            if events is None:
                self._ended = True
                raise StopIteration
            self._buf.extend(events)
        return self._buf.popleft()

    def __aiter__(self) -> Watch:
        return self

    async def __anext__(self) -> Event:
        while not self._buf:
            if self._ended:
                raise StopAsyncIteration
            events = self._native.poll(self._batch, 0.0)
            if events is None:
                self._ended = True
                raise StopAsyncIteration
            if events:
                self._buf.extend(events)
            else:
                await self._bridge.wait_watch(self._native.id)
        return self._buf.popleft()

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.cancel()

    async def __aenter__(self) -> Watch:
        return self

    async def __aexit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.cancel()
