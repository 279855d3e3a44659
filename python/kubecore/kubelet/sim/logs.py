"""Container logs of simulated containers: CRI log files written only for pods that ask.

A simulated container has no process, so nothing writes its stdout. A pod annotated
`sim.kubecore.io/log` (or `sim.kubecore.io/log.<container>`) gets CRI log records (`crilog.py`'s
format) in its container's log file, so `kubectl logs` has something to read:

- when the container starts, each line of the annotation's value is written as an stdout record
  (`{attempt}`, `{container}`, `{pod}` in it become the restart count, the container name and
  `namespace/name`);
- with `sim.kubecore.io/log-every: <duration>` the lines are written again at that interval
  while the container runs (a log to follow).

Pods without the annotation cost nothing: no file, no directory, no timer (thirty thousand
hollow pods write nothing). The files live where the kubelet asked (the sandbox's
log_directory / the container's log_path, as a CRI runtime does), or, with `log_root`, under
`<log_root>/<basename of the log directory>/...` so a hollow-node process needs no write access
to /var/log/pods. A removed container's file is deleted with it.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Mapping

from kubecore.client.clock import Clock
from kubecore.kubelet.crilog import format_line
from kubecore.kubelet.sim import behaviour
from kubecore.kubelet.timers import Periodic, Timers

log = logging.getLogger(__name__)


class SimLogs:
    """The log files of one simulated runtime (see the module docstring)."""

    def __init__(self, *, clock: Clock, timers: Timers, log_root: str | None = None) -> None:
        self.clock = clock
        self.timers = timers
        self.log_root = log_root
        self._written: dict[str, str] = {}
        """container id -> the file written for it (only containers whose pod asked)."""
        self._repeats: dict[str, Periodic] = {}

    def directory(self, log_directory: str) -> str:
        """Where a sandbox's logs go (its log_directory, or under log_root)."""
        if not log_directory or self.log_root is None:
            return log_directory
        return os.path.join(self.log_root, os.path.basename(log_directory.rstrip("/")))

    @staticmethod
    def path(directory: str, log_path: str) -> str:
        """The full path a CRI runtime reports as ContainerStatus.log_path."""
        return os.path.join(directory, log_path) if directory and log_path else log_path

    def started(self, container_id: str, *, path: str, annotations: Mapping[str, str], container: str,
                attempt: int, pod: str) -> None:
        text = behaviour.lookup(annotations, behaviour.LOG, container)
        if text is None or not path:
            return
        lines = [line.replace("{attempt}", str(attempt)).replace("{container}", container).replace("{pod}", pod)
                 for line in text.splitlines() or [""]]
        self._written[container_id] = path
        self._write(path, lines)
        every = behaviour.lookup(annotations, behaviour.LOG_EVERY, container)
        if every is not None:
            try:
                period = behaviour.parse_go_duration(every)
            except behaviour.BehaviourError as e:
                log.warning("pod %s: %s", pod, e)
                return
            if period > 0:
                self._repeats[container_id] = self.timers.every(period, lambda: self._write(path, lines),
                                                                first=period)

    def _write(self, path: str, lines: list[str]) -> None:
        now = self.clock.now()
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "ab") as f:
                f.write(b"".join(format_line(now, "stdout", line) for line in lines))
        except OSError as e:
            log.warning("cannot write the simulated log %s: %s", path, e)

    def stopped(self, container_id: str) -> None:
        timer = self._repeats.pop(container_id, None)
        if timer is not None:
            timer.cancel()

    def removed(self, container_id: str) -> None:
        self.stopped(container_id)
        path = self._written.pop(container_id, None)
        if path is not None:
            with contextlib.suppress(OSError):
                os.remove(path)
            with contextlib.suppress(OSError):
                os.rmdir(os.path.dirname(path))
