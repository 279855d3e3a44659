"""The asyncio side of the store: futures resolved from the native completion queue.

Writers submit without waiting; the native store keeps their writes in an outbox, which the
bridge flushes to the Raft thread once per event-loop iteration (`call_soon`), so the writes one
iteration produced cost one wake-up of that thread. The Raft thread finishes many writes per fsync
and signals one eventfd, which the running event loop watches. One wake-up drains every finished
write and every watch with news, so concurrent writers share both the fsync and the wake-up.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any, Callable

from kubecore._native import NativeStore


class Bridge:
    def __init__(self, native: NativeStore) -> None:
        self._native = native
        self._fd = native.completion_fd()
        self._tokens = itertools.count(1)
        self._writes: dict[int, asyncio.Future[Any]] = {}
        self._watchers: dict[int, asyncio.Future[None]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._flush_due = False

    def _attach(self) -> asyncio.AbstractEventLoop:
        loop = self._loop
        if loop is not None and loop.is_running():
            return loop  # the common case, without get_running_loop (a getpid() syscall per call on 3.11)
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self.detach()
            loop.add_reader(self._fd, self._drain)
            self._loop = loop
            self._flush()  # a flush the previous loop scheduled may never have run
        return loop

    def detach(self) -> None:
        """Stops watching the completion fd (store closing, or another loop takes over)."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._fd)
        self._loop = None

    async def write(self, submit: Callable[..., Any], *args: Any) -> Any:
        """Submits a write with a fresh token and waits for its result."""
        loop = self._attach()
        token = next(self._tokens)
        fut: asyncio.Future[Any] = loop.create_future()
        self._writes[token] = fut
        try:
            immediate = submit(token, *args)
        except BaseException:
            del self._writes[token]
            raise
        if immediate is not None:  # a read-only txn is answered at once
            del self._writes[token]
            return immediate
        if not self._flush_due:
            self._flush_due = True
            loop.call_soon(self._flush)
        try:
            return await fut
        finally:
            self._writes.pop(token, None)

    def _flush(self) -> None:
        self._flush_due = False
        self._native.flush()

    async def wait_watch(self, watch_id: int) -> None:
        """Waits until the watch has news (or may have: wake-ups can be spurious)."""
        loop = self._attach()
        fut: asyncio.Future[None] = loop.create_future()
        self._watchers[watch_id] = fut
        try:
            await fut
        finally:
            if self._watchers.get(watch_id) is fut:
                del self._watchers[watch_id]

    def wake_watch(self, watch_id: int) -> None:
        fut = self._watchers.pop(watch_id, None)
        if fut is not None and not fut.done():
            fut.set_result(None)

    def _drain(self) -> None:
        done, watches = self._native.drain()
        for token, ok, value in done:
            fut = self._writes.pop(token, None)
            if fut is None or fut.done():
                continue
            if ok:
                fut.set_result(value)
            else:
                fut.set_exception(value)
        for watch_id in watches:
            self.wake_watch(watch_id)
