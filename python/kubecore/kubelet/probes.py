"""Liveness, readiness and startup probes (upstream pkg/kubelet/prober: manager, worker, results).

One `_Worker` per (pod, container, probe kind), for containers and restartable init containers
that declare the probe. Workers are timer entries, not tasks: every `periodSeconds` the worker's
tick runs one probe (never two at once for a worker), as upstream's ticker does.

One probe pass (doProbe), in upstream's order:
1. no status for the pod yet -> wait; the pod is Succeeded/Failed -> the worker stops;
2. the container has no id yet -> wait; a new container id -> the result resets to the kind's
   initial value (readiness Failure, liveness Success, startup none) and probing resumes;
3. on hold (after a liveness/startup failure, until the container is replaced) -> wait;
4. not running -> the result is Failure; the worker stops if the container terminated and
   restartPolicy is Never;
5. the pod is being deleted -> liveness and startup report Success (never kill a terminating pod);
6. within initialDelaySeconds of the container's start -> wait;
7. startup probes stop once the container has started; liveness and readiness wait for it;
8. probe (timeoutSeconds); the result counts only after failureThreshold failures or
   successThreshold successes in a row; a counted liveness/startup failure puts the worker on hold.
Failures record an "Unhealthy" event ("Readiness probe failed: ..."), as upstream.

A changed result calls `on_result(uid, kind)`: the kubelet syncs the pod, so readiness shows in
the Ready condition and a liveness/startup failure restarts the container. Results are read by
runtime container id (`readiness`, `liveness`, `startup`). `trigger(uid, name)` runs a
readiness probe now (upstream's manual trigger when a status shows a running container that is
not ready yet), so readiness does not wait a whole period after the container starts.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubecore.client.clock import Clock
from kubecore.kubelet import podutil
from kubecore.kubelet.handlers import FAILURE, SUCCESS, UNKNOWN, Handlers, Target
from kubecore.kubelet.runtime_manager import Record
from kubecore.kubelet.status_gen import raw_container_id
from kubecore.kubelet.timers import Periodic, Spawner, Timers

log = logging.getLogger(__name__)
Obj = dict[str, Any]

LIVENESS, READINESS, STARTUP = "liveness", "readiness", "startup"
PROBE_FIELDS = {LIVENESS: "livenessProbe", READINESS: "readinessProbe", STARTUP: "startupProbe"}
INITIAL = {LIVENESS: SUCCESS, READINESS: FAILURE, STARTUP: None}


@dataclass(slots=True)
class _Worker:
    uid: str
    container: str
    kind: str
    probe: Obj
    period: float
    container_id: str = ""
    last_result: str | None = None
    run: int = 0
    on_hold: bool = False
    busy: bool = False
    stopped: bool = False
    ticker: Periodic | None = None
    probes: int = 0


class ProbeManager:
    """One kubelet's probe workers and results (see the module docstring)."""

    def __init__(self, handlers: Handlers, *, clock: Clock, timers: Timers, spawner: Spawner, record: Record,
                 status_lookup: Callable[[str], Obj | None], pod_lookup: Callable[[str], Obj | None],
                 on_result: Callable[[str, str], None]) -> None:
        self.handlers = handlers
        self.clock = clock
        self.timers = timers
        self.spawner = spawner
        self.record = record
        self.status_lookup = status_lookup
        self.pod_lookup = pod_lookup
        self.on_result = on_result
        self._workers: dict[tuple[str, str, str], _Worker] = {}
        self._results: dict[tuple[str, str], str] = {}

    def __len__(self) -> int:
        return len(self._workers)

    # -- results -----------------------------------------------------------------------------------
    def readiness(self, container_id: str) -> str | None:
        return self._results.get((READINESS, container_id))

    def liveness(self, container_id: str) -> str | None:
        return self._results.get((LIVENESS, container_id))

    def startup(self, container_id: str) -> str | None:
        return self._results.get((STARTUP, container_id))

    def _set(self, w: _Worker, result: str | None) -> None:
        key = (w.kind, w.container_id)
        previous = self._results.get(key)
        if result is None:
            self._results.pop(key, None)
        else:
            self._results[key] = result
        if previous != result:
            self.on_result(w.uid, w.kind)

    # -- workers -----------------------------------------------------------------------------------
    def add_pod(self, pod: Obj) -> None:
        """Start workers for every probe of the pod's containers (idempotent)."""
        uid = podutil.uid_of(pod)
        sidecars = [c for c in podutil.init_containers(pod) if podutil.is_restartable_init_container(c)]
        for c in [*sidecars, *podutil.containers(pod)]:
            for kind, fieldname in PROBE_FIELDS.items():
                probe = c.get(fieldname)
                if not isinstance(probe, dict):
                    continue
                key = (uid, str(c.get("name")), kind)
                if key in self._workers:
                    continue
                period = float(probe.get("periodSeconds") or 10)
                w = self._workers[key] = _Worker(uid, str(c.get("name")), kind, probe, period)
                w.ticker = self.timers.every(period, functools.partial(self._tick, w), first=0.0)

    def remove_pod(self, uid: str) -> None:
        for key in [k for k in self._workers if k[0] == uid]:
            self._stop(self._workers[key])

    def _stop(self, w: _Worker) -> None:
        w.stopped = True
        if w.ticker is not None:
            w.ticker.cancel()
        self._workers.pop((w.uid, w.container, w.kind), None)
        if w.container_id:
            self._results.pop((w.kind, w.container_id), None)

    def has_probe(self, uid: str, container: str, kind: str) -> bool:
        return (uid, container, kind) in self._workers

    def trigger(self, uid: str, container: str, kind: str = READINESS) -> None:
        """Probe now (and restart the worker's period from now)."""
        w = self._workers.get((uid, container, kind))
        if w is None or w.busy:
            return
        if w.ticker is not None:
            w.ticker.cancel()
        w.ticker = self.timers.every(w.period, functools.partial(self._tick, w), first=w.period)
        self._tick(w)

    def _tick(self, w: _Worker) -> None:
        if w.stopped or w.busy:
            return
        w.busy = True
        self.spawner.spawn(self._probe_once(w), name=f"probe {w.kind}")

    async def _probe_once(self, w: _Worker) -> None:
        try:
            keep = await self.do_probe(w)
        finally:
            w.busy = False
        if not keep:
            self._stop(w)

    async def do_probe(self, w: _Worker) -> bool:
        """One pass (see the module docstring); returns whether the worker keeps going."""
        status = self.status_lookup(w.uid)
        pod = self.pod_lookup(w.uid)
        if status is None or pod is None:
            return True
        if podutil.is_terminal(str(status.get("phase"))):
            return False
        cs = next((s for s in [*(status.get("containerStatuses") or []), *(status.get("initContainerStatuses") or [])]
                   if s.get("name") == w.container and s.get("containerID")), None)
        if cs is None:
            return True
        cid = raw_container_id(str(cs["containerID"]))
        if cid != w.container_id:
            if w.container_id:
                self._results.pop((w.kind, w.container_id), None)
            w.container_id = cid
            self._set(w, INITIAL[w.kind])
            w.on_hold = False
        if w.on_hold:
            return True
        state = cs.get("state") or {}
        running = state.get("running")
        if running is None:
            self._set(w, FAILURE)
            return "terminated" not in state or podutil.restart_policy(pod) != podutil.RESTART_NEVER
        if podutil.deletion_timestamp(pod) and w.kind in (LIVENESS, STARTUP):
            self._set(w, SUCCESS)
            return True
        started_at = podutil.parse_time(running.get("startedAt")) or 0.0
        if self.clock.now() - started_at < float(w.probe.get("initialDelaySeconds") or 0):
            return True
        if cs.get("started"):
            if w.kind == STARTUP:
                return True
        elif w.kind != STARTUP:
            return True
        result = await self._run(w, pod, cs, status)
        if result == w.last_result:
            w.run += 1
        else:
            w.last_result, w.run = result, 1
        if (result == FAILURE and w.run < int(w.probe.get("failureThreshold") or 3)) or \
                (result == SUCCESS and w.run < int(w.probe.get("successThreshold") or 1)):
            return True
        self._set(w, result)
        if w.kind in (LIVENESS, STARTUP) and result == FAILURE:
            w.on_hold = True
            w.run = 0
        return True

    async def _run(self, w: _Worker, pod: Obj, cs: Obj, status: Obj) -> str:
        spec = next((c for c in [*podutil.containers(pod), *podutil.init_containers(pod)]
                     if c.get("name") == w.container), {})
        target = Target(pod=pod, container=spec, container_id=w.container_id, pod_ip=str(status.get("podIP") or ""))
        w.probes += 1
        try:
            outcome = await self.handlers.probe(w.kind, target, w.probe)
        except Exception as e:  # a handler bug must not end the worker
            log.exception("probe %s of %s/%s failed to run", w.kind, podutil.key_of(pod), w.container)
            outcome_result, output = UNKNOWN, str(e)
        else:
            outcome_result, output = outcome.result, outcome.output
        if outcome_result == SUCCESS:
            return SUCCESS
        kind = w.kind.capitalize()
        ref = podutil.container_ref(pod, w.container, init=podutil.is_init_container_name(pod, w.container))
        if outcome_result == UNKNOWN:
            self.record(ref, "Warning", "Unhealthy", f"{kind} probe errored and resulted in unknown state: {output}")
        else:
            self.record(ref, "Warning", "Unhealthy", f"{kind} probe failed: {output}")
        return FAILURE
