"""Fixtures shared by the integration tests: a real `kubecore apiserver` process."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.cluster import REPO, free_port

STARTUP_TIMEOUT_S = 60.0


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/readyz", timeout=1.0) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`kubecore apiserver` on a free loopback port for one test module, stopped with SIGTERM."""
    with apiserver(tmp_path_factory.mktemp("apiserver")) as url:
        yield url


@contextlib.contextmanager
def apiserver(base: Path, *args: str) -> Iterator[str]:
    """`kubecore apiserver [args]` with its data and log in `base`; yields its URL once ready."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    pythonpath = os.pathsep.join(filter(None, [str(REPO / "python"), os.environ.get("PYTHONPATH")]))
    log_path = base / "server.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kubecore.cli.main", "apiserver", "--data-dir", str(base / "data"),
             "--listen", f"127.0.0.1:{port}", *args],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=dict(os.environ, PYTHONPATH=pythonpath), cwd=str(base))
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not _ready(url):
            if proc.poll() is not None:
                pytest.fail(f"apiserver exited {proc.returncode}: {log_path.read_text()[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"apiserver not ready within {STARTUP_TIMEOUT_S:.0f} s: {log_path.read_text()[-3000:]}")
            time.sleep(0.1)
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
