"""`kubecore apiserver` and `kubecore up`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from kubecore.store import LockedError, StoreError

DEFAULT_LISTEN = "127.0.0.1:6443"


def register(sub: Any) -> None:
    p = sub.add_parser("apiserver", help="serve the Kubernetes API over a data directory")
    p.add_argument("--data-dir", required=True, type=Path, help="where the store lives")
    p.add_argument("--listen", default=DEFAULT_LISTEN, help=f"HOST:PORT (default {DEFAULT_LISTEN}; plain HTTP)")
    p.set_defaults(run=lambda a: _run(a, kubeconfig=False))
    p = sub.add_parser("up", help="start a cluster in DIR (API server + controller manager) and write DIR/kubeconfig")
    p.add_argument("--data-dir", required=True, type=Path)
    p.add_argument("--listen", default=DEFAULT_LISTEN, help=f"HOST:PORT (default {DEFAULT_LISTEN})")
    p.add_argument("--controllers", default="*",
                   help='controllers to run in-process (as controller-manager --controllers); "" runs none')
    p.set_defaults(run=lambda a: _run(a, kubeconfig=True))


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
    try:
        if kubeconfig and args.controllers.strip():
            _serve_with_controllers(args.data_dir, listen, ready=ready, kubeconfig=path, controllers=args.controllers)
        else:
            serve(args.data_dir, listen, on_ready=ready)
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


def _serve_with_controllers(data_dir: Path, listen: Any, *, ready: str, kubeconfig: Path, controllers: str) -> None:
    """`up`: the API server, and once it is ready the controller manager as a supervised child
    process (see `kubecore.cli.supervise`)."""
    from kubecore.apiserver.server import run
    from kubecore.cli.controller_manager_cmd import run_loop, wait_ready
    from kubecore.cli.supervise import ChildSpec, serve_with_children

    children = [ChildSpec("the controller manager", [
        sys.executable, "-m", "kubecore.cli.main", "controller-manager", "--kubeconfig", str(kubeconfig),
        "--controllers", controllers])]
    run_loop(serve_with_children(run(data_dir, listen, on_ready=ready), lambda: wait_ready(listen.url), children))
