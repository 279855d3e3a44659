"""A real etcd server on loopback, for benchmarks and tests that compare with or use etcd.

    from bench.etcd_peer import EtcdPeer

    with EtcdPeer() as etcd:             # installs etcd if missing, starts it, waits for /health
        etcd.client_port                 # gRPC + HTTP on 127.0.0.1:<client_port>
        etcd.pid                         # server process id (for RSS)
        seconds = etcd.restart()         # stop + start on the same data dir; time until healthy
    # on exit: server stopped, temp data dir removed

Guarantees:
- the server listens on 127.0.0.1 only, on ports that were free when it started;
- its data lives in a fresh temporary directory (removed on exit unless ``keep_data``);
- durability is etcd's default (WAL fsync on every commit); no ``--unsafe-no-fsync``;
- ``start`` returns only once ``GET /health`` says ``"health": "true"``, or raises ``EtcdError``
  with the tail of the server log.

Import as ``bench.etcd_peer`` with the repository root on ``sys.path`` (``python -m ...`` from the
root, or pytest with ``pythonpath = ["."]``); it depends only on the standard library.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Self

APT_PACKAGE = "etcd-server"  # Debian bookworm: etcd 3.4.23
_INSTALL_HINT = (
    "etcd is required: install the Debian package `etcd-server` "
    "(apt-get update && apt-get install -y etcd-server), or put an `etcd` v3.4+ binary on PATH"
)


class EtcdError(RuntimeError):
    """etcd could not be installed, started or stopped."""


def _log(message: str) -> None:
    print(f"[etcd_peer] {message}", file=sys.stderr, flush=True)


def ensure_etcd_binary() -> str:
    """Return the path of the ``etcd`` binary, installing Debian's etcd-server if it is missing."""
    found = shutil.which("etcd")
    if found:
        return found
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        raise EtcdError(f"`etcd` not found on PATH and cannot apt-get install it here. {_INSTALL_HINT}")
    _log(f"`etcd` not found; installing Debian package {APT_PACKAGE} (apt-get, about a minute) ...")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = ["apt-get", "install", "-y", "--no-install-recommends", APT_PACKAGE]
    if subprocess.run(install, env=env, check=False, capture_output=True).returncode != 0:
        _log("install failed; running apt-get update and retrying ...")
        subprocess.run(["apt-get", "update"], env=env, check=False, capture_output=True)
        done = subprocess.run(install, env=env, check=False, capture_output=True, text=True)
        if done.returncode != 0:
            raise EtcdError(f"apt-get install {APT_PACKAGE} failed:\n{done.stderr[-2000:]}\n{_INSTALL_HINT}")
    found = shutil.which("etcd")
    if not found:
        raise EtcdError(f"{APT_PACKAGE} installed but no `etcd` on PATH. {_INSTALL_HINT}")
    _log(f"installed {found}")
    return found


def etcd_version(binary: str | None = None) -> str:
    out = subprocess.run([binary or ensure_etcd_binary(), "--version"], check=False, capture_output=True, text=True)
    first = out.stdout.splitlines()[0] if out.stdout else ""
    return first.split(":", 1)[-1].strip()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now (the usual bind-to-0 race applies)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class EtcdPeer:
    """One single-member etcd cluster on loopback; see the module docstring."""

    def __init__(
        self,
        *,
        extra_args: Sequence[str] = (),
        data_dir: str | os.PathLike[str] | None = None,
        keep_data: bool = False,
        startup_timeout: float = 30.0,
    ) -> None:
        self.binary = ensure_etcd_binary()
        self.extra_args = list(extra_args)
        self._own_dir = data_dir is None
        self.base_dir = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix="kubecore-etcd-"))
        self.data_dir = self.base_dir / "data"
        self.log_path = self.base_dir / "etcd.log"
        self.keep_data = keep_data
        self.startup_timeout = startup_timeout
        self.client_port = free_port()
        self.peer_port = free_port()
        self._proc: subprocess.Popen[bytes] | None = None

    # -- addresses -----------------------------------------------------------------------------
    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def client_url(self) -> str:
        return f"http://127.0.0.1:{self.client_port}"

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise EtcdError("etcd is not running")
        return self._proc.pid

    def _command(self) -> list[str]:
        peer_url = f"http://127.0.0.1:{self.peer_port}"
        return [
            self.binary,
            "--name", "bench",
            "--data-dir", str(self.data_dir),
            "--listen-client-urls", self.client_url,
            "--advertise-client-urls", self.client_url,
            "--listen-peer-urls", peer_url,
            "--initial-advertise-peer-urls", peer_url,
            "--initial-cluster", f"bench={peer_url}",
            "--initial-cluster-state", "new",
            "--logger", "zap",
            "--log-level", "warn",
            *self.extra_args,
        ]

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> float:
        """Start the server and wait until healthy; returns seconds from spawn to healthy."""
        if self._proc is not None:
            raise EtcdError("etcd is already running")
        self.base_dir.mkdir(parents=True, exist_ok=True)
        began = time.perf_counter()
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(self._command(), stdout=log, stderr=subprocess.STDOUT)
        self._wait_healthy()
        return time.perf_counter() - began

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise EtcdError(f"etcd exited with {self._proc.returncode}:\n{self.log_tail()}")
            if self.healthy():
                return
            time.sleep(0.01)
        self.stop()
        raise EtcdError(f"etcd not healthy after {self.startup_timeout}s:\n{self.log_tail()}")

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.client_url}/health", timeout=1.0) as response:
                return json.loads(response.read()).get("health") == "true"
        except (OSError, ValueError, urllib.error.URLError):
            return False

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM (clean shutdown), SIGKILL after ``timeout``. Data stays until ``cleanup``."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def restart(self) -> float:
        """Stop, then start on the same data dir; returns seconds from spawn to healthy."""
        self.stop()
        return self.start()

    def cleanup(self) -> None:
        self.stop()
        if self._own_dir and not self.keep_data:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def log_tail(self, lines: int = 30) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return "(no log)"

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.cleanup()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


if __name__ == "__main__":  # smoke: python -m bench.etcd_peer
    with EtcdPeer() as peer:
        print(f"etcd {etcd_version(peer.binary)} healthy at {peer.client_url} (pid {peer.pid})")
        print(f"restart took {peer.restart():.3f}s")
