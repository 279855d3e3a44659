"""`kubecore up`'s supervisor: children start after the server is ready, a child that exits is
restarted, and everything stops (children first, in reverse order) with the server."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from kubecore.cli import supervise
from kubecore.cli.supervise import ChildSpec, serve_with_children


def child(name: str, log: Path, *, exit_after: float | None = None) -> ChildSpec:
    """A child that appends 'start <name>' to `log`, and 'stop <name>' on SIGTERM."""
    code = (
        "import signal, sys, time\n"
        f"log = open({str(log)!r}, 'a')\n"
        f"log.write('start {name}\\n'); log.flush()\n"
        f"def stop(*_):\n    log.write('stop {name}\\n'); log.flush(); sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        + (f"time.sleep({exit_after})\n" if exit_after is not None else "time.sleep(60)\n")
    )
    return ChildSpec(name, [sys.executable, "-c", code])


async def wait_for_lines(log: Path, n: int) -> list[str]:
    for _ in range(400):
        lines = log.read_text().splitlines() if log.exists() else []
        if len(lines) >= n:
            return lines
        await asyncio.sleep(0.025)
    pytest.fail(f"expected {n} lines in the children's log, got {log.read_text() if log.exists() else ''!r}")


async def test_children_start_after_ready_and_stop_in_reverse_order_with_the_server(tmp_path: Path) -> None:
    log = tmp_path / "log"
    ready = asyncio.Event()
    stop_server = asyncio.Event()

    async def server() -> None:
        ready.set()
        await stop_server.wait()

    async def is_ready() -> None:
        await ready.wait()

    task = asyncio.ensure_future(serve_with_children(server(), is_ready, [child("a", log), child("b", log)]))
    assert sorted(await wait_for_lines(log, 2)) == ["start a", "start b"]
    stop_server.set()  # the server stops by itself: the children go too, b before a
    await asyncio.wait_for(task, 30)
    assert (await wait_for_lines(log, 4))[2:] == ["stop b", "stop a"]


async def test_a_child_that_exits_is_restarted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(supervise, "RESTART_DELAY", 0.05)
    log = tmp_path / "log"
    stop_server = asyncio.Event()

    async def server() -> None:
        await stop_server.wait()

    async def is_ready() -> None:
        return None

    task = asyncio.ensure_future(serve_with_children(server(), is_ready, [child("flaky", log, exit_after=0.1)]))
    assert (await wait_for_lines(log, 3))[:3] == ["start flaky"] * 3
    stop_server.set()
    await asyncio.wait_for(task, 30)


async def test_a_server_that_fails_before_ready_starts_no_child(tmp_path: Path) -> None:
    log = tmp_path / "log"

    async def server() -> None:
        raise OSError("address in use")

    async def never() -> None:
        await asyncio.Event().wait()

    with pytest.raises(OSError, match="address in use"):
        await serve_with_children(server(), never, [child("a", log)])
    await asyncio.sleep(0.2)
    assert not log.exists()
