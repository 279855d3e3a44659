"""`kubecore kubelet` (one node) and `kubecore hollow-nodes` (many simulated nodes in one process).

    kubecore kubelet --kubeconfig K --node-name N --runtime sim [--cpu 4 --memory 32Gi --pods 110]
    kubecore kubelet --kubeconfig K --runtime containerd [--root-dir DIR] [--pod-cidr 10.244.0.0/24]
    kubecore hollow-nodes --kubeconfig K --count 1000 [--prefix hollow-node-]

Capacity: a `kubelet` reports this machine's CPUs, memory and root file system unless --cpu,
--memory or --ephemeral-storage say otherwise; hollow nodes claim 4 CPUs, 32Gi and 100Gi each.
Flags follow the kubelet's names where it has them: --node-ip, --pod-cidr, --node-labels
(k=v,...), --register-with-taints (key=value:Effect,...), --node-status-update-frequency,
--node-status-report-frequency, --node-lease-duration-seconds, --sync-frequency, --kube-api-qps,
--kube-api-burst, --root-dir (pod volumes under <root-dir>/pods/<uid>/volumes; default
/var/lib/kubecore/kubelet/<node> as root, else ~/.local/state/kubecore/kubelet/<node>),
--eviction-hard (signal<threshold,...; given, it replaces upstream's defaults), and
--image-gc-high-threshold / --image-gc-low-threshold (percent; 100 turns image GC off).

Runtimes: `sim` (simulated containers; see kubecore.kubelet.sim.behaviour for the annotations that
steer them) and `containerd` (this machine's containers, as root: a private containerd under
--containerd-state, default the root dir; the locally built busybox and pause images imported;
a CNI bridge for the pod CIDR: --pod-cidr, else the Node's spec.podCIDR, else 10.244.0.0/24).

The kubelet server (`kubecore.kubelet.server`: logs, exec, attach, port-forward for the API
server; plain HTTP) listens on --address:--port (default 0.0.0.0:10250; --port 0 turns it off; a
port already taken is reported and the node runs on without it). `hollow-nodes` runs one server
for all its nodes on --address (default 127.0.0.1), and every node reports --node-ip (default:
that address) as its InternalIP so the API server can reach it. Simulated containers of a
`kubelet --runtime sim` write their (annotated, see kubecore.kubelet.sim.logs) logs under
<root-dir>/pod-logs.

Progress goes to stderr; SIGINT/SIGTERM stop cleanly (the simulated containers go with the
process). A bad flag, an unreadable kubeconfig or an API server that cannot be reached exits
non-zero with a one-line message.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import signal
import socket
import sys
from pathlib import Path
from typing import Any

from kubecore.cli.controller_manager_cmd import int_arg, parse_duration, run_loop
from kubecore.heap import settle_heap

RUNTIMES = ("sim", "containerd")


def _key_values(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"expected key=value, not {part!r}")
        out[key] = value
    return out


def _taints(text: str) -> list[dict[str, str]]:
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        kv, sep, effect = part.rpartition(":")
        if not sep or effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise argparse.ArgumentTypeError(f"expected key[=value]:NoSchedule|PreferNoSchedule|NoExecute, not {part!r}")
        key, _, value = kv.partition("=")
        taint = {"key": key, "effect": effect}
        if value:
            taint["value"] = value
        out.append(taint)
    return out


def eviction_hard(text: str) -> dict[str, str]:
    from kubecore.kubelet.eviction import ThresholdError, parse_flag

    try:
        return parse_flag(text)
    except ThresholdError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def percent(text: str) -> int:
    return int_arg(text, low=0, high=100, says="a whole percentage from 0 to 100")


def _common(p: argparse.ArgumentParser, *, capacity_default: str) -> None:
    p.add_argument("--kubeconfig", type=Path, default=None, help="kubeconfig of the API server (default: $KUBECONFIG)")
    p.add_argument("--cpu", default=None, help=f"CPU capacity reported (default: {capacity_default})")
    p.add_argument("--memory", default=None, help=f"memory capacity reported (default: {capacity_default})")
    p.add_argument("--pods", type=int, default=110, help="pod capacity (default 110)")
    p.add_argument("--ephemeral-storage", default=None,
                   help=f"ephemeral-storage capacity (default: {capacity_default})")
    p.add_argument("--node-labels", type=_key_values, default={}, metavar="K=V,...")
    p.add_argument("--instance-type", default=None, help="sets node.kubernetes.io/instance-type")
    p.add_argument("--node-status-update-frequency", type=parse_duration, default=10.0, metavar="DURATION")
    p.add_argument("--node-status-report-frequency", type=parse_duration, default=300.0, metavar="DURATION")
    p.add_argument("--node-lease-duration-seconds", type=int, default=40)
    p.add_argument("--kube-api-qps", type=float, default=None, help="client requests per second (<= 0: no limit)")
    p.add_argument("--kube-api-burst", type=int, default=None)
    p.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-v info, -vv debug)")
    p.add_argument("--port", type=int, default=10250,
                   help="port of the kubelet server (logs, exec; plain HTTP; 0: off; default 10250)")


def register(sub: Any) -> None:
    from kubecore.kubelet.eviction import DEFAULT_EVICTION_HARD, eviction_flag

    p = sub.add_parser("kubelet", help="run a node agent (kubelet) for one node")
    _common(p, capacity_default="this machine's")
    p.add_argument("--node-name", default=None, help="the Node's name (default: this machine's hostname)")
    p.add_argument("--runtime", choices=RUNTIMES, default="sim", help="container runtime (default sim)")
    p.add_argument("--node-ip", default=None, help="InternalIP to report (default: this machine's address)")
    p.add_argument("--address", default="0.0.0.0", help="address the kubelet server binds (default 0.0.0.0)")
    p.add_argument("--pod-cidr", default=None, help="pod CIDR when the node has no spec.podCIDR")
    p.add_argument("--root-dir", type=Path, default=None, metavar="DIR",
                   help="where pod volumes live (default /var/lib/kubecore/kubelet/<node> as root, else "
                        "~/.local/state/kubecore/kubelet/<node>)")
    p.add_argument("--containerd-state", type=Path, default=None, metavar="DIR",
                   help="the private containerd's directory (--runtime containerd; default: the root dir)")
    p.add_argument("--register-with-taints", type=_taints, default=[], metavar="K=V:EFFECT,...")
    p.add_argument("--sync-frequency", type=parse_duration, default=60.0, metavar="DURATION",
                   help="every pod is synced at least this often (default 1m)")
    p.add_argument("--record-events", action=argparse.BooleanOptionalAction, default=True,
                   help="write Events (default: on)")
    defaults = eviction_flag(DEFAULT_EVICTION_HARD).replace("%", "%%")
    p.add_argument("--eviction-hard", type=eviction_hard, default=None, metavar="SIGNAL<THRESHOLD,...",
                   help=f"hard eviction thresholds (default {defaults}); as upstream's, a signal left out has "
                        "none, \"\" turns eviction off")
    p.add_argument("--image-gc-high-threshold", type=percent, default=85, metavar="PERCENT",
                   help="image fs usage that starts image garbage collection (default 85; 100: never)")
    p.add_argument("--image-gc-low-threshold", type=percent, default=80, metavar="PERCENT",
                   help="image fs usage image garbage collection frees down to (default 80)")
    p.set_defaults(run=_run_kubelet)

    h = sub.add_parser("hollow-nodes", help="run N simulated (hollow) nodes in one process, like kubemark")
    _common(h, capacity_default="4 CPUs, 32Gi memory, 100Gi ephemeral-storage")
    h.add_argument("--count", type=int, required=True, help="how many nodes")
    h.add_argument("--address", default="127.0.0.1",
                   help="address the one kubelet server of all the nodes binds (default 127.0.0.1)")
    h.add_argument("--node-ip", default=None,
                   help="InternalIP every node reports, where the API server finds the kubelet server "
                        "(default: --address, or each node's own 172.16.x.y when that is 0.0.0.0)")
    h.add_argument("--prefix", default="hollow-node-", help="node name prefix (default hollow-node-)")
    h.add_argument("--first-index", type=int, default=0, help="number of the first node (default 0)")
    h.add_argument("--status-workers", type=int, default=32, help="concurrent pod status writes (default 32)")
    h.add_argument("--register-concurrency", type=int, default=32, help="nodes registering at once (default 32)")
    h.add_argument("--record-events", action=argparse.BooleanOptionalAction, default=False,
                   help="write Events (default: off, to spare the API server)")
    h.set_defaults(run=_run_hollow)


def _configure_logging(verbosity: int) -> None:
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(level=level, stream=sys.stderr, format="%(asctime)s %(levelname).1s %(name)s: %(message)s")


def _say(message: str) -> None:
    print(f"kubecore: {message}", file=sys.stderr, flush=True)


def _fail(message: str, code: int = 1) -> int:
    print(f"kubecore: error: {message}", file=sys.stderr, flush=True)
    return code


def _client(args: argparse.Namespace, *, qps: float, burst: int) -> Any:
    from kubecore.client.config import load_kubeconfig
    from kubecore.client.rest import RestClient

    config = load_kubeconfig(args.kubeconfig)
    config.qps = qps if args.kube_api_qps is None else args.kube_api_qps
    config.burst = burst if args.kube_api_burst is None else args.kube_api_burst
    config.user_agent = "kubelet/kubecore"
    return RestClient(config)


def _run_kubelet(args: argparse.Namespace) -> int:
    from kubecore.client.config import ConfigError
    from kubecore.kubelet.config import DEFAULT_RESOURCE_POLICY, KubeletConfig, default_node_ip, machine_capacity

    _configure_logging(args.verbose)
    machine = machine_capacity()
    try:
        config = KubeletConfig(
            node_name=args.node_name or socket.gethostname().lower(), cpu=args.cpu or machine["cpu"],
            memory=args.memory or machine["memory"], pods=args.pods,
            ephemeral_storage=args.ephemeral_storage or machine["ephemeral-storage"], labels=args.node_labels,
            taints=args.register_with_taints, instance_type=args.instance_type, node_ip=args.node_ip,
            pod_cidr=args.pod_cidr, node_status_update_frequency=args.node_status_update_frequency,
            node_status_report_frequency=args.node_status_report_frequency,
            node_lease_duration=args.node_lease_duration_seconds, resync_interval=args.sync_frequency,
            record_events=args.record_events, kubelet_port=args.port,
            resource_policy=dataclasses.replace(
                DEFAULT_RESOURCE_POLICY, image_gc_high_threshold_percent=args.image_gc_high_threshold,
                image_gc_low_threshold_percent=args.image_gc_low_threshold,
                **({} if args.eviction_hard is None else {"eviction_hard": args.eviction_hard})))
        config.root_dir = str((args.root_dir or default_root_dir(config.node_name)).absolute())
        rest = _client(args, qps=50.0, burst=100)
    except (ConfigError, ValueError) as e:
        return _fail(str(e), 2)
    node_ip = args.node_ip or default_node_ip()
    if args.runtime == "containerd":
        state = str(args.containerd_state or config.root_dir)
        return run_loop(_until_signalled(_serve_containerd(rest, config, node_ip=node_ip, state_dir=state,
                                                           address=args.address)))
    return run_loop(_until_signalled(_serve_one(rest, config, node_ip=node_ip, address=args.address)))


def default_root_dir(node_name: str) -> Path:
    """Where a kubelet keeps pod volumes unless --root-dir says (one directory per node name, so
    kubelets of several nodes on one machine never clean up each other's pods)."""
    import os

    if os.geteuid() == 0:
        return Path("/var/lib/kubecore/kubelet") / node_name
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "kubecore" / "kubelet" / node_name


def _run_hollow(args: argparse.Namespace) -> int:
    from kubecore.client.config import ConfigError
    from kubecore.kubelet.hollow import HollowOptions

    _configure_logging(args.verbose)
    try:
        options = HollowOptions(
            count=args.count, prefix=args.prefix, first_index=args.first_index, cpu=args.cpu or "4",
            memory=args.memory or "32Gi", pods=args.pods, ephemeral_storage=args.ephemeral_storage or "100Gi",
            instance_type=args.instance_type,
            labels=args.node_labels, record_events=args.record_events, kubelet_port=args.port,
            node_ip=args.node_ip or (args.address if args.address not in ("0.0.0.0", "::") else None))
        options_extra = {"node_status_update_frequency": args.node_status_update_frequency,
                         "node_status_report_frequency": args.node_status_report_frequency,
                         "node_lease_duration": args.node_lease_duration_seconds}
        rest = _client(args, qps=0.0, burst=1)
    except (ConfigError, ValueError) as e:
        return _fail(str(e), 2)
    return run_loop(_until_signalled(_serve_hollow(rest, options, options_extra, workers=args.status_workers,
                                                   concurrency=args.register_concurrency, address=args.address)))


async def _reachable(rest: Any) -> str | None:
    """None when the API server answers discovery (a few quick retries, not the client's ten)."""
    from kubecore.client import errors

    saved, rest.config.max_retries = rest.config.max_retries, 2
    try:
        await rest.resource("v1", "pods")
    except errors.ClientError as e:
        return f"cannot reach the API server at {rest.config.server}: {e}"
    finally:
        rest.config.max_retries = saved
    return None


async def _serve_one(rest: Any, config: Any, *, node_ip: str, address: str) -> int:
    from kubecore.kubelet.hollow import sim_kubelet
    from kubecore.kubelet.host import KubeletHost

    async with rest:
        problem = await _reachable(rest)
        if problem:
            return _fail(problem)
        host = KubeletHost(rest, record_events=config.record_events)
        sim_kubelet(host, config, node_ip=node_ip, log_root=str(Path(config.root_dir) / "pod-logs"))
        _say(f"kubelet for node {config.node_name} (runtime sim, InternalIP {node_ip}, volumes in "
             f"{config.root_dir}) starting")
        await _run_node(host, config, address=address)
    return 0


async def _run_node(host: Any, config: Any, *, address: str) -> None:
    """Start the node and its server, say so, and run until cancelled; then stop both."""
    server = None
    try:
        await host.start(progress=_say)
        server = await _kubelet_server(host, address=address, port=config.kubelet_port)
        settle_heap()
        _say(f"node {config.node_name} is registered and ready; Ctrl-C stops")
        await asyncio.Event().wait()
    finally:
        if server is not None:
            await server.stop()
        await host.stop()


async def _serve_containerd(rest: Any, config: Any, *, node_ip: str, state_dir: str, address: str) -> int:
    from kubecore.kubelet.containerd_node import DEFAULT_POD_CIDR, containerd_kubelet, node_pod_cidr, unusable
    from kubecore.kubelet.host import KubeletHost

    why = unusable()
    if why:
        return _fail(f"the containerd runtime cannot run here: {why}")
    async with rest:
        problem = await _reachable(rest)
        if problem:
            return _fail(problem)
        if not config.pod_cidr:
            config.pod_cidr = await node_pod_cidr(rest, config.node_name) or DEFAULT_POD_CIDR
        host = KubeletHost(rest, record_events=config.record_events)
        _say(f"starting containerd in {state_dir}/containerd (pod CIDR {config.pod_cidr})")
        try:
            node = await containerd_kubelet(host, config, node_ip=node_ip, state_dir=state_dir)
        except Exception as e:  # ContainerdError, OSError: say it in one line
            return _fail(f"containerd did not start: {e}")
        _say(f"kubelet for node {config.node_name} (runtime containerd, InternalIP {node_ip}, "
             f"volumes in {config.root_dir}) starting")
        try:
            await _run_node(host, config, address=address)
        finally:
            await node.stop()
    return 0


async def _serve_hollow(rest: Any, options: Any, extra: dict[str, Any], *, workers: int, concurrency: int,
                        address: str) -> int:
    from kubecore.kubelet.hollow import add_hollow_nodes
    from kubecore.kubelet.host import KubeletHost

    async with rest:
        problem = await _reachable(rest)
        if problem:
            return _fail(problem)
        host = KubeletHost(rest, status_workers=workers, record_events=options.record_events)
        for kubelet in add_hollow_nodes(host, options):
            for key, value in extra.items():
                setattr(kubelet.config, key, value)
        last = options.first_index + options.count - 1
        _say(f"{options.count} hollow node(s) {options.prefix}{options.first_index}..{options.prefix}{last} starting")
        server = None
        try:
            await host.start(progress=_say, register_concurrency=concurrency)
            server = await _kubelet_server(host, address=address, port=options.kubelet_port)
            settle_heap()
            _say("all hollow nodes registered; Ctrl-C stops")
            await asyncio.Event().wait()
        finally:
            if server is not None:
                await server.stop()
            await host.stop()
    return 0


async def _kubelet_server(host: Any, *, address: str, port: int) -> Any:
    from kubecore.kubelet.server import serve

    server, message = await serve(host, address=address, port=port)
    _say(message)
    return server


async def _until_signalled(main: Any) -> int:
    """Run `main` until it returns or SIGINT/SIGTERM arrives (then cancel it and let it clean up)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    work: asyncio.Task[int] = asyncio.ensure_future(main)
    signalled = asyncio.ensure_future(stop.wait())
    await asyncio.wait((work, signalled), return_when=asyncio.FIRST_COMPLETED)
    if work.done():
        signalled.cancel()
        return work.result()
    work.cancel()
    await asyncio.gather(work, return_exceptions=True)
    _say("stopped")
    return 0
