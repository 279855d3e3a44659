"""The scheduler's Prometheus metrics (text format 0.0.4), named as upstream's kube-scheduler names them:

    scheduler_schedule_attempts_total{profile,result}        counter; result scheduled | unschedulable | error
    scheduler_pod_scheduling_sli_duration_seconds{attempts}  histogram: from the pod entering the
                                                              queue to its binding, for bound pods
    scheduler_pending_pods{queue}                             gauge: active | backoff | unschedulable | gated

`MetricsServer` serves them over plain HTTP on 127.0.0.1 (`/metrics`, and `/healthz` answering
"ok"); kube-scheduler serves the same on its secure port 10259.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Callable, Mapping

from aiohttp import web

from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.scheduler.binding import Bound
from kubecore.scheduler.schedule_one import Failed

__all__ = ["SchedulerMetrics", "MetricsServer", "SLI_BUCKETS", "DEFAULT_METRICS_PORT"]

DEFAULT_METRICS_PORT = 10259
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
SLI_BUCKETS = tuple(0.01 * 2 ** i for i in range(20))
"""Upstream's ExponentialBuckets(0.01, 2, 20)."""


def _le(bound: float) -> str:
    return f"{bound:.6g}"


class SchedulerMetrics:
    """Counts what the driver reports; `pending` reads the queue when rendered."""

    def __init__(self, *, pending: Callable[[], Mapping[str, int]], clock: Clock = REAL_CLOCK) -> None:
        self.pending = pending
        self.clock = clock
        self.attempts: dict[tuple[str, str], int] = defaultdict(int)
        self.sli: dict[str, list[float]] = {}
        """attempts label -> bucket counts, then [sum, count]."""

    def bound(self, b: Bound) -> None:
        a = b.assumed
        self.attempts[(a.framework.name, "scheduled")] += 1
        p = a.pinfo
        start = p.initial_attempt_timestamp if p.initial_attempt_timestamp is not None else p.timestamp
        self._observe(str(max(p.attempts, 1)), max(self.clock.now() - start, 0.0))

    def failed(self, f: Failed, profile: str) -> None:
        self.attempts[(profile, "unschedulable" if f.status.is_rejected() else "error")] += 1

    def _observe(self, attempts: str, seconds: float) -> None:
        h = self.sli.get(attempts)
        if h is None:
            h = self.sli[attempts] = [0.0] * (len(SLI_BUCKETS) + 2)
        i = bisect.bisect_left(SLI_BUCKETS, seconds)
        if i < len(SLI_BUCKETS):
            h[i] += 1
        h[-2] += seconds
        h[-1] += 1

    def render(self) -> str:
        out = ["# HELP scheduler_schedule_attempts_total Number of attempts to schedule pods, by the result. "
               "'unschedulable' means a pod could not be scheduled, while 'error' means an internal scheduler problem.",
               "# TYPE scheduler_schedule_attempts_total counter"]
        for (profile, result), n in sorted(self.attempts.items()):
            out.append(f'scheduler_schedule_attempts_total{{profile="{profile}",result="{result}"}} {n}')
        out += ["# HELP scheduler_pod_scheduling_sli_duration_seconds E2e latency for a pod being scheduled, "
                "from the time the pod enters the scheduling queue and might involve multiple scheduling attempts.",
                "# TYPE scheduler_pod_scheduling_sli_duration_seconds histogram"]
        for attempts, h in sorted(self.sli.items()):
            cum = 0
            for le, in_bucket in zip(SLI_BUCKETS, h):
                cum += int(in_bucket)
                out.append(f'scheduler_pod_scheduling_sli_duration_seconds_bucket{{attempts="{attempts}",'
                           f'le="{_le(le)}"}} {cum}')
            out.append(f'scheduler_pod_scheduling_sli_duration_seconds_bucket{{attempts="{attempts}",le="+Inf"}} '
                       f'{int(h[-1])}')
            out.append(f'scheduler_pod_scheduling_sli_duration_seconds_sum{{attempts="{attempts}"}} {h[-2]:.6f}')
            out.append(f'scheduler_pod_scheduling_sli_duration_seconds_count{{attempts="{attempts}"}} {int(h[-1])}')
        out += ["# HELP scheduler_pending_pods Number of pending pods, by the queue type.",
                "# TYPE scheduler_pending_pods gauge"]
        for queue, n in sorted(self.pending().items()):
            out.append(f'scheduler_pending_pods{{queue="{queue}"}} {n}')
        return "\n".join(out) + "\n"


class MetricsServer:
    """`/metrics` and `/healthz` over plain HTTP (port 0 in `start` picks a free port)."""

    def __init__(self, render: Callable[[], str], *, host: str = "127.0.0.1") -> None:
        self.render = render
        self.host = host
        self.port = 0
        self._runner: web.AppRunner | None = None

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.render().encode(), headers={"Content-Type": CONTENT_TYPE})

    @staticmethod
    async def _healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def start(self, port: int) -> int:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.host, port)
        await site.start()
        self._runner = runner
        server = getattr(site, "_server", None)
        sockets = getattr(server, "sockets", None) or []
        self.port = int(sockets[0].getsockname()[1]) if sockets else port
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
