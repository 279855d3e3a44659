"""`kubecore scheduler`: the scheduler against any API server (kubecore.scheduler.server).

    kubecore scheduler --kubeconfig K [--config FILE] [--leader-elect/--no-leader-elect] [--metrics-port N]
                       [--feature-gates SchedulerPopFromBackoffQ=true]

`--config` is a kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration (YAML or JSON); without
it the default profile runs. Its `leaderElection` (leaderElect, leaseDuration, renewDeadline,
retryPeriod, resourceNamespace, resourceName) and `clientConnection` (qps, burst) sections are
honoured; the flags of the same meaning (kube-scheduler's names: --leader-elect,
--leader-elect-lease-duration, --leader-elect-renew-deadline, --leader-elect-retry-period,
--leader-elect-resource-namespace, --leader-elect-resource-name, --kube-api-qps, --kube-api-burst)
override them. Metrics: plain HTTP on 127.0.0.1:--metrics-port (default 10259, kube-scheduler's
secure port; 0 turns it off), paths /metrics and /healthz.

SIGINT/SIGTERM stop it cleanly (lease released). Exit status 1 when leadership is lost (as
upstream), 2 for a bad flag, configuration or kubeconfig.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path
from typing import Any

from kubecore.cli.controller_manager_cmd import _configure_logging, parse_duration, run_loop, until_signalled

DEFAULT_QPS = 5000.0
DEFAULT_BURST = 10000
"""Far above upstream's 50/100: binding throughput is the scheduler's point here."""


def register(sub: Any) -> None:
    p = sub.add_parser("scheduler", help="run the scheduler (assigns pending pods to nodes)")
    p.add_argument("--kubeconfig", type=Path, default=None, help="kubeconfig of the API server (default: $KUBECONFIG)")
    p.add_argument("--config", type=Path, default=None, metavar="FILE",
                   help="a KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) file")
    p.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=None,
                   help="compete for the kube-system/kube-scheduler Lease and schedule only while holding it "
                        "(default: on)")
    p.add_argument("--leader-elect-lease-duration", type=parse_duration, default=None, metavar="DURATION")
    p.add_argument("--leader-elect-renew-deadline", type=parse_duration, default=None, metavar="DURATION")
    p.add_argument("--leader-elect-retry-period", type=parse_duration, default=None, metavar="DURATION")
    p.add_argument("--leader-elect-resource-namespace", default=None)
    p.add_argument("--leader-elect-resource-name", default=None)
    p.add_argument("--metrics-port", type=int, default=None,
                   help="serve /metrics on 127.0.0.1:PORT over plain HTTP (default 10259; 0: off)")
    p.add_argument("--kube-api-qps", type=float, default=None,
                   help=f"client requests per second (default {DEFAULT_QPS:g}; <= 0: no limit)")
    p.add_argument("--kube-api-burst", type=int, default=None, help=f"(default {DEFAULT_BURST})")
    p.add_argument("--feature-gates", type=parse_feature_gates, default={}, metavar="KEY=BOOL[,...]",
                   help="upstream feature gates kubecore models: " + ", ".join(
                       f"{k} (default {str(v).lower()})" for k, v in FEATURE_GATES.items()))
    p.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-v info, -vv debug)")
    p.set_defaults(run=_run)


FEATURE_GATES = {"SchedulerPopFromBackoffQ": False}
"""The gates `--feature-gates` accepts, with kubecore's defaults (upstream turned
SchedulerPopFromBackoffQ on in 1.33; kubecore keeps it off: an unsatisfiable gang would be retried
without pause whenever activeQ is empty)."""


def parse_feature_gates(text: str) -> dict[str, bool]:
    """`A=true,B=false` (kube-scheduler's --feature-gates syntax) for the gates kubecore models."""
    gates: dict[str, bool] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep or value.strip().lower() not in ("true", "false"):
            raise argparse.ArgumentTypeError(f"invalid feature gate {item!r}: want NAME=true or NAME=false")
        name = name.strip()
        if name not in FEATURE_GATES:
            raise argparse.ArgumentTypeError(f"unrecognized feature gate: {name} (known: {', '.join(FEATURE_GATES)})")
        gates[name] = value.strip().lower() == "true"
    return gates


def _pick(flag: Any, section: dict[str, Any], key: str, default: Any, convert: Any = None) -> Any:
    """A flag when given, else the configuration's value, else the default."""
    if flag is not None:
        return flag
    if section.get(key) is not None:
        value = section[key]
        return convert(str(value)) if convert is not None else value
    return default


def options_from(args: argparse.Namespace) -> Any:
    """`SchedulerOptions` from the flags and the configuration file (ConfigError if it is bad)."""
    from kubecore.scheduler.config import default_config, load_config
    from kubecore.scheduler.metrics import DEFAULT_METRICS_PORT
    from kubecore.scheduler.server import LEASE_NAME, SchedulerOptions

    config = load_config(args.config) if args.config is not None else default_config()
    gates: dict[str, bool] = args.feature_gates
    le = config.leader_election
    return SchedulerOptions(
        config=config,
        leader_elect=bool(_pick(args.leader_elect, le, "leaderElect", True)),
        lease_duration=_pick(args.leader_elect_lease_duration, le, "leaseDuration", 15.0, parse_duration),
        renew_deadline=_pick(args.leader_elect_renew_deadline, le, "renewDeadline", 10.0, parse_duration),
        retry_period=_pick(args.leader_elect_retry_period, le, "retryPeriod", 2.0, parse_duration),
        lease_namespace=_pick(args.leader_elect_resource_namespace, le, "resourceNamespace", "kube-system"),
        lease_name=_pick(args.leader_elect_resource_name, le, "resourceName", LEASE_NAME),
        metrics_port=args.metrics_port if args.metrics_port is not None else DEFAULT_METRICS_PORT,
        pop_from_backoff=gates.get("SchedulerPopFromBackoffQ", FEATURE_GATES["SchedulerPopFromBackoffQ"]))


def _run(args: argparse.Namespace) -> int:
    from kubecore.client.config import ConfigError as KubeconfigError
    from kubecore.client.config import load_kubeconfig
    from kubecore.scheduler.configerrors import ConfigError
    from kubecore.scheduler.server import SchedulerServer

    _configure_logging(args.verbose if args.verbose else 1)
    try:
        options = options_from(args)
        client = load_kubeconfig(args.kubeconfig)
    except (ConfigError, KubeconfigError, argparse.ArgumentTypeError) as e:
        print(f"kubecore: error: {e}", file=sys.stderr)
        return 2
    cc = options.config.client_connection
    client.qps = float(_pick(args.kube_api_qps, cc, "qps", DEFAULT_QPS))
    client.burst = int(_pick(args.kube_api_burst, cc, "burst", DEFAULT_BURST))
    return run_loop(until_signalled(SchedulerServer(client, options=options).run(), component="scheduler"))
