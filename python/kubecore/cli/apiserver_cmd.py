"""`kubecore apiserver` and `kubecore up`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from kubecore.cli.controller_manager_cmd import int_arg
from kubecore.cli.kubelet_cmd import eviction_hard, percent
from kubecore.store import LockedError, StoreError

DEFAULT_LISTEN = "127.0.0.1:6443"
RUNTIMES = ("auto", "sim", "containerd")


def register(sub: Any) -> None:
    p = sub.add_parser("apiserver", help="serve the Kubernetes API over a data directory")
    p.add_argument("--data-dir", required=True, type=Path, help="where the store lives")
    p.add_argument("--listen", default=DEFAULT_LISTEN, help=f"HOST:PORT (default {DEFAULT_LISTEN}; plain HTTP)")
    _event_ttl_flag(p)
    p.set_defaults(run=lambda a: _run(a, kubeconfig=False))
    p = sub.add_parser("up", help="start a cluster in DIR (API server, controller manager, scheduler, optional "
                                  "simulated nodes) and write DIR/kubeconfig")
    p.add_argument("--data-dir", required=True, type=Path)
    p.add_argument("--listen", default=DEFAULT_LISTEN, help=f"HOST:PORT (default {DEFAULT_LISTEN})")
    _event_ttl_flag(p)
    p.add_argument("--controllers", default="*",
                   help='controllers to run (as controller-manager --controllers); "" runs no controller manager')
    p.add_argument("--scheduler", action=argparse.BooleanOptionalAction, default=True,
                   help="run the scheduler (default: on)")
    p.add_argument("--scheduler-config", type=Path, default=None, metavar="FILE",
                   help="the scheduler's KubeSchedulerConfiguration (scheduler --config)")
    p.add_argument("--scheduler-metrics-port", type=int, default=10259, metavar="PORT",
                   help="the scheduler's metrics port on 127.0.0.1 (default 10259; 0: off)")
    p.add_argument("--nodes", type=_node_count, default=0, metavar="N",
                   help="also run nodes: with the sim runtime N simulated nodes (one `kubecore hollow-nodes` "
                        "process); with containerd this machine as one node whenever N >= 1 (default 0)")
    p.add_argument("--runtime", choices=RUNTIMES, default="auto",
                   help="the nodes' container runtime: containerd (real containers; needs root and Debian's "
                        "containerd, runc, containernetworking-plugins, busybox-static; implies --nodes 1), sim "
                        "(simulated containers), auto (containerd when this machine can run it, else sim)")
    p.add_argument("--pod-cidr", default=None, metavar="CIDR",
                   help="the containerd node's pod CIDR (default 10.244.0.0/24; give each cluster on one machine "
                        "its own)")
    p.add_argument("--kubelet-port", type=int, default=10250, metavar="PORT",
                   help="the containerd node's kubelet server port (logs, exec, port-forward; default 10250)")
    p.add_argument("--eviction-hard", type=_checked_eviction_hard, default=UP_EVICTION_HARD,
                   metavar="SIGNAL<THRESHOLD,...",
                   help=f"the containerd node's hard eviction thresholds (kubelet --eviction-hard; default "
                        f"{UP_EVICTION_HARD}: the node shares this machine's disk, so, as kind's nodes, it "
                        "evicts for memory only)")
    p.add_argument("--image-gc-high-threshold", type=percent, default=UP_IMAGE_GC_HIGH, metavar="PERCENT",
                   help=f"the containerd node's image GC threshold (kubelet --image-gc-high-threshold; default "
                        f"{UP_IMAGE_GC_HIGH}: off, as kind's)")
    p.set_defaults(run=lambda a: _run(a, kubeconfig=True))


def _event_ttl(text: str) -> int:
    """kube-apiserver's --event-ttl: a Go duration ("1h", "30m", "90s"), whole seconds, 0 = never."""
    from kubecore.api.gotime import parse_duration

    try:
        seconds = parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if seconds < 0 or seconds != int(seconds):
        raise argparse.ArgumentTypeError(f"invalid event TTL {text!r}: whole seconds, 0 or more (e.g. 1h, 30m, 90s)")
    return int(seconds)


def _event_ttl_flag(p: Any) -> None:
    p.add_argument("--event-ttl", type=_event_ttl, default=3600, metavar="DURATION",
                   help="how long Events are kept after their last write (default 1h, as kube-apiserver; "
                        "0: forever)")


def _checked_eviction_hard(text: str) -> str:
    eviction_hard(text)  # the kubelet's check, made before anything starts
    return text


def _node_count(text: str) -> int:
    return int_arg(text, low=0, says="a number of nodes (0 or more)")


def _run(args: argparse.Namespace, *, kubeconfig: bool) -> int:
    from kubecore.apiserver.server import Listen, serve, write_kubeconfig

    try:
        listen = Listen.parse(args.listen)
    except ValueError as e:
        print(f"kubecore: error: {e}", file=sys.stderr)
        return 2
    ready = f"kubecore: API server listening on {listen.url} (data in {args.data_dir})"
    if kubeconfig:
        args.data_dir.mkdir(parents=True, exist_ok=True)
        path = write_kubeconfig(args.data_dir, listen)
        ready += f"\n  export KUBECONFIG={path.resolve()}\n  kubectl get namespaces\nCtrl-C stops it; run the same command again to resume."
    children = up_children(args, kubeconfig=path) if kubeconfig else []
    try:
        if children:
            _serve_with_children(args.data_dir, listen, ready=ready, children=children, event_ttl=args.event_ttl)
        else:
            serve(args.data_dir, listen, on_ready=ready, event_ttl=args.event_ttl)
    except LockedError:
        print(f"kubecore: error: {args.data_dir} is in use by another kubecore process; stop it first", file=sys.stderr)
        return 1
    except StoreError as e:
        print(f"kubecore: error: cannot open the store in {args.data_dir}: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"kubecore: error: cannot listen on {listen.url}: {e}", file=sys.stderr)
        return 1
    return 0


def _port_free(port: int) -> bool:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def up_children(args: argparse.Namespace, *, kubeconfig: Path) -> list[Any]:
    """`up`'s components besides the API server, in start order: the controller manager (unless
    --controllers ""), the scheduler (unless --no-scheduler), the hollow nodes (with --nodes N)."""
    from kubecore.cli.supervise import ChildSpec

    base = [sys.executable, "-m", "kubecore.cli.main"]
    children = []
    if args.controllers.strip():
        children.append(ChildSpec("the controller manager", [
            *base, "controller-manager", "--kubeconfig", str(kubeconfig), "--controllers", args.controllers]))
    if args.scheduler:
        port = args.scheduler_metrics_port
        if port and not _port_free(port):
            print(f"kubecore: 127.0.0.1:{port} is in use (another cluster?): the scheduler serves no metrics; "
                  "--scheduler-metrics-port PORT picks another", file=sys.stderr)
            port = 0
        argv = [*base, "scheduler", "--kubeconfig", str(kubeconfig), "--metrics-port", str(port)]
        if args.scheduler_config is not None:
            argv += ["--config", str(args.scheduler_config)]
        children.append(ChildSpec("the scheduler", argv))
    runtime = node_runtime(args)
    if runtime == "containerd":
        children.append(ChildSpec("the kubelet", [
            *base, "kubelet", "--kubeconfig", str(kubeconfig), "--runtime", "containerd",
            "--root-dir", str((args.data_dir / "kubelet").absolute()), "--pod-cidr", args.pod_cidr or UP_POD_CIDR,
            "--port", str(args.kubelet_port), "--eviction-hard", args.eviction_hard,
            "--image-gc-high-threshold", str(args.image_gc_high_threshold)]))
    elif runtime == "sim":
        children.append(ChildSpec("the hollow nodes", [
            *base, "hollow-nodes", "--kubeconfig", str(kubeconfig), "--count", str(args.nodes)]))
    return children


UP_EVICTION_HARD = "memory.available<100Mi"
"""`up`'s node evicts for memory only: its disk is this machine's, shared with everything else on it,
and a laptop or CI runner with 85% of it used would otherwise taint its only node DiskPressure
(kind disables disk eviction and image GC on its nodes for the same reason)."""
UP_IMAGE_GC_HIGH = 100

UP_POD_CIDR = "10.244.0.0/24"
"""The pod CIDR of `up`'s containerd node (kubecore has no node IPAM controller to assign one)."""


def node_runtime(args: argparse.Namespace) -> str | None:
    """Which nodes `up` runs: "containerd" (this machine as one node), "sim" (--nodes hollow nodes)
    or None; says on stderr what auto chose and what --nodes means with containerd."""
    from kubecore.kubelet.containerd_node import unusable

    if args.runtime == "sim" or (args.runtime == "auto" and not args.nodes):
        return "sim" if args.nodes else None
    if args.runtime == "auto":
        why = unusable()
        if why:
            print(f"kubecore: --runtime auto: the {args.nodes} node(s) use the sim runtime (simulated containers; "
                  f"containerd cannot run here: {why})", file=sys.stderr)
            return "sim"
        print("kubecore: --runtime auto: this machine is the node, with containerd (real containers)", file=sys.stderr)
    if args.nodes > 1:
        print(f"kubecore: --nodes {args.nodes} with containerd: this machine runs one node (more need more machines, "
              "each with `kubecore kubelet --runtime containerd`)", file=sys.stderr)
    return "containerd"


def _serve_with_children(data_dir: Path, listen: Any, *, ready: str, children: list[Any], event_ttl: int) -> None:
    """`up`: the API server, and once it is ready the other components as supervised child
    processes (see `kubecore.cli.supervise`)."""
    from kubecore.apiserver.server import run
    from kubecore.cli.controller_manager_cmd import run_loop, wait_ready
    from kubecore.cli.supervise import serve_with_children

    run_loop(serve_with_children(run(data_dir, listen, on_ready=ready, event_ttl=event_ttl), lambda: wait_ready(listen.url),
                                 children))
