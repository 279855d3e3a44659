"""`kubecore controller-manager`: the built-in controllers against any API server.

Flags follow kube-controller-manager's names: --kubeconfig, --controllers (comma list; "*" =
defaults, "-name" turns one off), --leader-elect / --no-leader-elect, --leader-elect-lease-duration,
--leader-elect-renew-deadline, --leader-elect-retry-period (Go durations such as "15s", "500ms",
or plain seconds), --leader-elect-resource-namespace/-name, the --concurrent-<controller>-syncs
worker counts (gc, namespace, deployment, replicaset, rc, statefulset, daemonset, job, cron-job,
ttl-after-finished, endpoint, service-endpoint, resource-quota), --kube-api-qps, --kube-api-burst, and the node lifecycle
controller's --node-monitor-period, --node-monitor-grace-period, --node-startup-grace-period,
--node-eviction-rate, --secondary-node-eviction-rate, --large-cluster-size-threshold,
--unhealthy-zone-threshold. SIGINT/SIGTERM stop it cleanly
(controllers stopped, lease released). Exit status 1 when leadership is lost, as upstream.

`kubecore up` starts this command as its child process once the API server is ready.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from kubecore.api import gotime

DEFAULT_QPS, DEFAULT_BURST = 5000.0, 10000
"""--kube-api-qps / --kube-api-burst: see the flag's comment in add_parser."""

# kube-controller-manager's --concurrent-<x>-syncs flags and the controllers they size; the
# defaults are each controller's own (upstream's: gc 20, namespace 10, daemonset 2, the rest 5).
CONCURRENCY_FLAGS = {
    "gc": "garbagecollector", "namespace": "namespace", "deployment": "deployment", "replicaset": "replicaset",
    "rc": "replicationcontroller", "statefulset": "statefulset", "daemonset": "daemonset", "job": "job",
    "cron-job": "cronjob", "ttl-after-finished": "ttl-after-finished", "endpoint": "endpoint",
    "service-endpoint": "endpointslice", "resource-quota": "resourcequota",
}


def parse_duration(text: str) -> float:
    """Go's time.ParseDuration ("1m30s", "500ms") or plain seconds, for argparse."""
    try:
        return gotime.parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def int_arg(text: str, *, low: int, high: int | None = None, says: str) -> int:
    """A whole number flag within [low, high], for argparse: "must be <says>, got '<text>'" otherwise."""
    try:
        n = int(text)
    except ValueError:
        n = low - 1
    if n < low or (high is not None and n > high):
        raise argparse.ArgumentTypeError(f"must be {says}, got {text!r}")
    return n


def _workers(text: str) -> int:
    return int_arg(text, low=1, says="a positive number of workers")


def register(sub: Any) -> None:
    p = sub.add_parser("controller-manager", help="run the built-in controllers (garbage collector, namespace, ...)")
    p.add_argument("--kubeconfig", type=Path, default=None, help="kubeconfig of the API server (default: $KUBECONFIG)")
    p.add_argument("--controllers", default="*", help='comma list of controllers; "*" = defaults, "-foo" disables foo')
    p.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=True,
                   help="compete for a Lease and run controllers only while holding it (default: on)")
    p.add_argument("--leader-elect-lease-duration", type=parse_duration, default=15.0, metavar="DURATION")
    p.add_argument("--leader-elect-renew-deadline", type=parse_duration, default=10.0, metavar="DURATION")
    p.add_argument("--leader-elect-retry-period", type=parse_duration, default=2.0, metavar="DURATION")
    p.add_argument("--leader-elect-resource-namespace", default="kube-system")
    p.add_argument("--leader-elect-resource-name", default="kube-controller-manager")
    for flag, controller in CONCURRENCY_FLAGS.items():
        p.add_argument(f"--concurrent-{flag}-syncs", type=_workers, default=None, metavar="N",
                       help=f"workers of the {controller} controller (default: upstream's)")
    # Upstream's defaults (20 / 30 per controller) would cap pod creation at ~20/s; a pod costs
    # ~2.6 writes (the pod, its SuccessfulCreate Event, a share of status writes), so 1,000 pods/s
    # needs ~2,600 requests/s. The API server guards itself (429 + Retry-After at its inflight
    # limit); this bucket only stops a runaway loop from flooding it.
    p.add_argument("--kube-api-qps", type=float, default=DEFAULT_QPS,
                   help=f"client requests per second, shared by all controllers (default {DEFAULT_QPS:g}; <= 0: no limit)")
    p.add_argument("--kube-api-burst", type=int, default=DEFAULT_BURST, help=f"(default {DEFAULT_BURST})")
    _add_node_lifecycle_flags(p)
    p.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-v info, -vv debug)")
    p.set_defaults(run=_run)


def _configure_logging(verbosity: int) -> None:
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(level=level, stream=sys.stderr,
                        format="%(asctime)s %(levelname).1s %(name)s: %(message)s")


def _run(args: argparse.Namespace) -> int:
    from kubecore.client.config import ConfigError, load_kubeconfig
    from kubecore.controllers.base import UnknownController
    from kubecore.controllers.manager import ControllerManager, ManagerOptions
    from kubecore.heap import tune_collector

    _configure_logging(args.verbose if args.verbose else 1)
    tune_collector()  # informer caches are long-lived: see kubecore.heap
    try:
        config = load_kubeconfig(args.kubeconfig)
    except ConfigError as e:
        print(f"kubecore: error: {e}", file=sys.stderr)
        return 2
    config.qps, config.burst = args.kube_api_qps, args.kube_api_burst
    options = ManagerOptions(
        controllers=[args.controllers], leader_elect=args.leader_elect,
        lease_duration=args.leader_elect_lease_duration, renew_deadline=args.leader_elect_renew_deadline,
        retry_period=args.leader_elect_retry_period, lease_namespace=args.leader_elect_resource_namespace,
        lease_name=args.leader_elect_resource_name,
        workers={controller: n for flag, controller in CONCURRENCY_FLAGS.items()
                 if (n := getattr(args, f"concurrent_{flag.replace('-', '_')}_syncs")) is not None})
    options.controller_options.update(_node_lifecycle_options(args))
    try:
        manager = ControllerManager(config, options=options)
    except (UnknownController, ValueError) as e:
        print(f"kubecore: error: {e}", file=sys.stderr)
        return 2
    return run_loop(until_signalled(manager.run()))


async def until_signalled(main: Any, *, component: str = "controller manager") -> int:
    """Runs a component's main coroutine until it returns or SIGINT/SIGTERM cancels it (exit 0);
    leader-election timings that do not fit together (ValueError) exit 2, a port it cannot listen
    on (OSError) exit 1, each with the message."""
    task: asyncio.Task[int] = asyncio.ensure_future(main)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, task.cancel)
    try:
        return await task
    except asyncio.CancelledError:
        print(f"kubecore: {component} stopped", file=sys.stderr, flush=True)
        return 0
    except ValueError as e:
        print(f"kubecore: error: {e}", file=sys.stderr, flush=True)
        return 2
    except OSError as e:  # a port it serves on (metrics) is taken
        print(f"kubecore: error: {e}", file=sys.stderr, flush=True)
        return 1


def run_loop(coro: Any) -> int:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency
        code: int = asyncio.run(coro)
        return code
    result: int = uvloop.run(coro)
    return result


async def wait_ready(url: str) -> None:
    while not await asyncio.to_thread(_ready, url):
        await asyncio.sleep(0.2)


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/readyz", timeout=1.0) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


NODE_LIFECYCLE_FLAGS = (
    # (flag, type, default, ControllerContext.options key): kube-controller-manager's names and defaults
    ("--node-monitor-period", parse_duration, 5.0, "node_monitor_period"),
    ("--node-monitor-grace-period", parse_duration, 50.0, "node_monitor_grace_period"),
    ("--node-startup-grace-period", parse_duration, 60.0, "node_startup_grace_period"),
    ("--node-eviction-rate", float, 0.1, "node_eviction_rate"),
    ("--secondary-node-eviction-rate", float, 0.01, "secondary_node_eviction_rate"),
    ("--large-cluster-size-threshold", int, 50, "large_cluster_size_threshold"),
    ("--unhealthy-zone-threshold", float, 0.55, "unhealthy_zone_threshold"),
)


def _add_node_lifecycle_flags(p: Any) -> None:
    for flag, kind, default, _ in NODE_LIFECYCLE_FLAGS:
        p.add_argument(flag, type=kind, default=default, metavar="DURATION" if kind is parse_duration else None)


def _node_lifecycle_options(args: argparse.Namespace) -> dict[str, Any]:
    return {key: getattr(args, flag[2:].replace("-", "_")) for flag, _, _, key in NODE_LIFECYCLE_FLAGS}
