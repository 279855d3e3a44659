"""`kubecore up`'s process tree: the API server in this process, and once it is ready the other
components as child processes (each with its own core and event loop, as upstream runs
kube-controller-manager, kube-scheduler and the kubelets as separate processes).

Guarantees:
- children start in the order given, after the API server answers /readyz;
- a child that exits while the cluster is up is restarted after RESTART_DELAY seconds (a
  component that lost its lease, or crashed), with a line on stderr saying so;
- SIGINT/SIGTERM stop the children first, in reverse order (their watches would hold the
  server's shutdown; a kubelet stops before the scheduler and controllers), each with SIGTERM
  and SIGKILL after STOP_TIMEOUT seconds, then the server;
- a child also gets SIGTERM if this process dies without cleaning up (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

RESTART_DELAY = 2.0
STOP_TIMEOUT = 10.0


@dataclass(frozen=True)
class ChildSpec:
    name: str  # as the component calls itself in messages: "the controller manager"
    argv: list[str]


class Child:
    """One supervised component."""

    def __init__(self, spec: ChildSpec) -> None:
        self.spec = spec
        self.proc = self._spawn()
        self.stopping = False

    def _spawn(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(self.spec.argv, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)

    async def supervise(self) -> None:
        while True:
            code = await asyncio.to_thread(self.proc.wait)
            if self.stopping:
                return
            print(f"kubecore: {self.spec.name} exited with {code}; restarting it in {RESTART_DELAY:g} s",
                  file=sys.stderr, flush=True)
            await asyncio.sleep(RESTART_DELAY)
            if self.stopping:
                return
            self.proc = self._spawn()

    async def stop(self) -> None:
        self.stopping = True
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            await asyncio.wait_for(asyncio.to_thread(self.proc.wait), timeout=STOP_TIMEOUT)
        except asyncio.TimeoutError:
            print(f"kubecore: {self.spec.name} did not stop within {STOP_TIMEOUT:g} s; killing it",
                  file=sys.stderr, flush=True)
            self.proc.kill()
            await asyncio.to_thread(self.proc.wait)


async def serve_with_children(server: Awaitable[None], ready: Callable[[], Awaitable[None]],
                              children: Sequence[ChildSpec]) -> None:
    """Runs `server` (a coroutine serving until cancelled or stopped); starts `children` once
    `ready()` returns; stops everything on SIGINT/SIGTERM (see the module docstring)."""
    server_task = asyncio.ensure_future(server)
    ready_task = asyncio.ensure_future(ready())
    await asyncio.wait({server_task, ready_task}, return_when=asyncio.FIRST_COMPLETED)
    if server_task.done():
        ready_task.cancel()
        await server_task  # raises what stopped it (LockedError, OSError ...)
        return
    running: list[Child] = []
    supervisors: list[asyncio.Future[None]] = []
    stopping: list[asyncio.Future[None]] = []

    async def shutdown() -> None:
        for child in reversed(running):
            await child.stop()
        server_task.cancel()

    def on_signal() -> None:
        if not stopping:
            stopping.append(asyncio.ensure_future(shutdown()))

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):  # replaces the server's own handlers
        loop.add_signal_handler(sig, on_signal)
    for spec in children:
        child = Child(spec)
        running.append(child)
        supervisors.append(asyncio.ensure_future(child.supervise()))
    try:
        await server_task
    except asyncio.CancelledError:
        if not stopping:
            raise
    finally:
        if not stopping:  # the server stopped by itself: take the children down with it
            stopping.append(asyncio.ensure_future(shutdown()))
        await asyncio.gather(*stopping, return_exceptions=True)
        for s in supervisors:
            s.cancel()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def _die_with_parent() -> None:  # runs in the child between fork and exec
    import ctypes

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
