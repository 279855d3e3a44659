"""Fixtures shared by the kubecore.store unit tests.

The tests are written against etcd v3 semantics (server/storage/mvcc): a revision is
bumped once per write request that changes something, versions count puts since the
key's creation, a delete leaves a tombstone that resets the version, and so on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kubecore.store import Store


@pytest.fixture
def store() -> Iterator[Store]:
    s = Store.memory()
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def data_dir(tmp_path) -> str:
    # Deliberately not created: Store.open must create it.
    return str(tmp_path / "data")


@pytest.fixture
def disk_store(data_dir: str) -> Iterator[Store]:
    s = Store.open(data_dir)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def wait_until() -> Callable[..., None]:
    """Poll `cond` until it is true or `timeout` seconds pass (then fail with `what`)."""

    def _wait(cond: Callable[[], bool], *, timeout: float = 8.0, what: str = "condition") -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if cond():
                return
            time.sleep(0.05)
        assert cond(), f"timed out after {timeout}s waiting for {what}"

    return _wait


@pytest.fixture
def bounded() -> Callable[..., Any]:
    """Run a blocking call in a helper thread; fail instead of hanging the suite if it blocks."""

    def _run(fn: Callable[[], Any], *, timeout: float = 10.0, what: str = "call") -> Any:
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["result"] = fn()
            except BaseException as e:  # re-raised in the caller
                box["error"] = e

        t = threading.Thread(target=target, daemon=True)
        t.start()
        t.join(timeout)
        assert not t.is_alive(), f"{what} still blocked after {timeout}s"
        if "error" in box:
            raise box["error"]
        return box.get("result")

    return _run
