"""What scheduler_perf measures, taken from outside the scheduler: which pods are bound (one
watch), SchedulingThroughput samples, and the scheduler as a child process.

- `BoundPods` holds, per namespace, the names of the pods bound to a node, from one cluster-wide
  watch with `fieldSelector=spec.nodeName!=` opened at a LIST's resourceVersion (a pod enters the
  selection when its binding is written and leaves it when it is deleted). It reopens the watch
  from the last resourceVersion it saw if the stream ends.
- `ThroughputCollector` samples one namespace's bound count every second the way upstream's
  throughputCollector does (scheduler_perf/util.go): nothing is recorded until a first pod is
  bound, that first sample is dropped (warm-up), an interval in which nothing was bound is merged
  into the next one (which is then recorded once per interval it spans), and the throughput of
  a sample is new pods / its actual duration. `summary()` is upstream's DataItem: Average and
  Perc50/90/95/99 of the sorted samples, index ceil(n·p/100) − 1. A run too short for any
  sample gets one that stands for it (`finish`; upstream would report nothing).
- `SchedulerProcess` is `kubecore scheduler --kubeconfig K --no-leader-elect --metrics-port 0
  [--config F]` as a child (stderr to a file), with its CPU seconds from /proc.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

from bench.apiserver_load import ROOT, process_cpu_seconds
from kubecore.client.rest import RestClient

__all__ = ["BoundPods", "ThroughputCollector", "SchedulerProcess", "summarize", "process_cpu_seconds", "cancel"]

SAMPLE_INTERVAL = 1.0


class _Meta(msgspec.Struct):
    name: str = ""
    namespace: str = ""
    resourceVersion: str = ""


class _Spec(msgspec.Struct):
    nodeName: str = ""


class _Pod(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    spec: _Spec = msgspec.field(default_factory=_Spec)


class _Event(msgspec.Struct):
    type: str
    object: _Pod = msgspec.field(default_factory=_Pod)


_decode_event = msgspec.json.Decoder(_Event).decode


async def cancel(task: asyncio.Task[None] | None) -> None:
    """Cancel `task` (if any) and wait until it has finished."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


class BoundPods:
    """Per namespace, the pods currently bound to a node (see the module docstring)."""

    def __init__(self, rest: RestClient) -> None:
        self.rest = rest
        self.bound: dict[str, set[str]] = {}
        self.events = 0
        self._rv = ""
        self._task: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()

    def count(self, namespace: str) -> int:
        return len(self.bound.get(namespace, ()))

    async def start(self) -> None:
        doc = await self.rest.get_json("/api/v1/pods", params={"limit": "1"})
        self._rv = doc["metadata"]["resourceVersion"]
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        await cancel(self._task)

    async def wait_for(self, namespace: str, count: int, *, timeout: float, what: str,
                       check: Any = None) -> float:
        """Until `namespace` holds `count` bound pods; perf_counter time then. `check()` (if
        given) is called about once a second and may raise (a child process died)."""
        deadline = time.perf_counter() + timeout
        last_note = time.perf_counter()
        while self.count(namespace) < count:
            if self._task is not None and self._task.done():
                self._task.result()  # the watch failed: raise its error
            now = time.perf_counter()
            if now > deadline:
                raise TimeoutError(f"{what}: {self.count(namespace)}/{count} bound after {timeout:.0f} s")
            if now - last_note > 5:
                _log(f"  {what}: {self.count(namespace)}/{count} bound")
                last_note = now
            if check is not None:
                check()
            self._changed.clear()
            waiter = asyncio.ensure_future(self._changed.wait())
            try:  # not wait_for: on 3.11 it can swallow a cancellation (Ctrl-C) racing the event
                await asyncio.wait({waiter}, timeout=1.0)
            finally:
                waiter.cancel()
        return time.perf_counter()

    async def _run(self) -> None:
        while True:
            params = {"watch": "1", "fieldSelector": "spec.nodeName!=", "resourceVersion": self._rv,
                      "timeoutSeconds": "3600", "allowWatchBookmarks": "true"}
            resp = await self.rest.stream("GET", "/api/v1/pods", params=params)
            try:
                buf = b""
                async for chunk in resp.content.iter_any():
                    *lines, buf = (buf + chunk).split(b"\n")
                    for line in lines:
                        if line:
                            self._apply(_decode_event(line))
                    self._changed.set()
            finally:
                resp.release()

    def _apply(self, ev: _Event) -> None:
        meta = ev.object.metadata
        if meta.resourceVersion:
            self._rv = meta.resourceVersion
        if ev.type == "ERROR":
            raise RuntimeError(f"pod watch failed: {ev!r}")
        if ev.type == "BOOKMARK":
            return
        self.events += 1
        names = self.bound.setdefault(meta.namespace, set())
        if ev.type == "DELETED" or not ev.object.spec.nodeName:
            names.discard(meta.name)
        else:
            names.add(meta.name)


class ThroughputCollector:
    """SchedulingThroughput samples of one namespace (see the module docstring)."""

    def __init__(self, bound: BoundPods, namespace: str) -> None:
        self.bound, self.namespace = bound, namespace
        self.samples: list[float] = []
        self.tail_sample_used: str | None = None
        self._last_count = 0
        self._start_time = self._last_time = 0.0
        self._started = False
        self._skipped = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._start_time = self._last_time = time.perf_counter()
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        """Stop sampling (see `finish`)."""
        await cancel(self._task)
        self.finish(time.perf_counter(), self.bound.count(self.namespace))

    def finish(self, now: float, scheduled: int) -> None:
        """When no sample was recorded at all (a run shorter than two intervals), one sample
        stands for the run, and `tail_sample_used` says which: "since-baseline" — the pods bound
        since the baseline over the time since it; "whole-run" — every pod over the time since
        the collector started, when all of them were bound before the first sample."""
        if self.samples or scheduled == 0:
            return
        if self._started and scheduled > self._last_count and now > self._last_time:
            self.samples.append((scheduled - self._last_count) / (now - self._last_time))
            self.tail_sample_used = "since-baseline"
        elif now > self._start_time:
            self.samples.append(scheduled / (now - self._start_time))
            self.tail_sample_used = "whole-run"

    async def _run(self) -> None:
        next_tick = time.perf_counter() + SAMPLE_INTERVAL
        while True:
            await asyncio.sleep(max(0.0, next_tick - time.perf_counter()))
            next_tick += SAMPLE_INTERVAL
            self._sample(time.perf_counter(), self.bound.count(self.namespace))

    def _sample(self, now: float, scheduled: int) -> None:
        if scheduled == 0:
            return
        if not self._started:  # the first sample is an outlier (warm-up): a baseline only
            self._started = True
            self._last_count, self._last_time = scheduled, now
            return
        new = scheduled - self._last_count
        if new == 0:
            self._skipped += 1
            return
        throughput = new / (now - self._last_time)
        self.samples.extend([throughput] * (self._skipped + 1))
        self._last_count, self._last_time, self._skipped = scheduled, now, 0


def summarize(samples: list[float]) -> dict[str, Any]:
    """Upstream's SchedulingThroughput DataItem over `samples` (pods/s)."""
    ordered = sorted(samples)
    n = len(ordered)
    if n == 0:
        return {"Average": None, "Perc50": None, "Perc90": None, "Perc95": None, "Perc99": None, "samples": 0}

    def perc(p: int) -> float:
        return round(ordered[math.ceil(n * p / 100) - 1], 1)

    return {"Average": round(sum(ordered) / n, 1), "Perc50": perc(50), "Perc90": perc(90), "Perc95": perc(95),
            "Perc99": perc(99), "samples": n}


def _log(message: str) -> None:
    print(f"[scheduler-perf {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class SchedulerProcess:
    """`kubecore scheduler` against the bench's API server, as a child process."""

    def __init__(self, kubeconfig: Path, workdir: Path, *, config: dict[str, Any] | None = None,
                 verbose: int = 0, feature_gates: str = "") -> None:
        self.log_path = workdir / "scheduler.stderr"
        self.errlog = open(self.log_path, "w+b")  # noqa: SIM115 - closed in stop()
        cmd = [sys.executable, "-m", "kubecore.cli.main", "scheduler", "--kubeconfig", str(kubeconfig),
               "--no-leader-elect", "--metrics-port", "0", *(["-" + "v" * verbose] if verbose else [])]
        if feature_gates:
            cmd += ["--feature-gates", feature_gates]
        if config is not None:
            path = workdir / "scheduler-config.json"
            path.write_text(json.dumps(config))
            cmd += ["--config", str(path)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.errlog, cwd=ROOT)
        self.pid = self.proc.pid

    def cpu_seconds(self) -> float:
        return process_cpu_seconds(self.pid)

    def check(self) -> None:
        """Raise with the tail of its log if the scheduler has exited."""
        if self.proc.poll() is not None:
            raise RuntimeError(f"the scheduler exited with {self.proc.returncode}: {self.stderr_tail()}")

    def stderr_tail(self) -> str:
        self.errlog.flush()
        self.errlog.seek(0)
        return self.errlog.read()[-3000:].decode(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.errlog.close()
