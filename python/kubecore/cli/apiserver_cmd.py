"""`kubecore apiserver` and `kubecore up`."""

from __future__ import annotations

import argparse
import subprocess
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
    """`up`: the API server, and once it is ready the controller manager as a child process (its
    own core and event loop, as upstream runs kube-controller-manager). SIGINT/SIGTERM stop the
    controller manager first (its watches would hold the server's shutdown), then the server; the
    child also gets SIGTERM if this process dies without cleaning up (PR_SET_PDEATHSIG)."""
    import asyncio
    import signal

    from kubecore.apiserver.server import run
    from kubecore.cli.controller_manager_cmd import run_loop, wait_ready

    async def both() -> int:
        server = asyncio.ensure_future(run(data_dir, listen, on_ready=ready))
        ready_task = asyncio.ensure_future(wait_ready(listen.url))
        await asyncio.wait({server, ready_task}, return_when=asyncio.FIRST_COMPLETED)
        if server.done():
            ready_task.cancel()
            await server  # raises what stopped it (LockedError, OSError ...)
            return 0
        argv = [sys.executable, "-m", "kubecore.cli.main", "controller-manager", "--kubeconfig", str(kubeconfig),
                "--controllers", controllers]
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        loop = asyncio.get_running_loop()
        stopping: list[asyncio.Future[None]] = []

        async def supervise() -> None:  # a controller manager that exits (lost lease, crash) is restarted
            nonlocal child
            while True:
                code = await asyncio.to_thread(child.wait)
                if stopping:
                    return
                print(f"kubecore: the controller manager exited with {code}; restarting it in 2 s",
                      file=sys.stderr, flush=True)
                await asyncio.sleep(2.0)
                if stopping:
                    return
                child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)

        async def shutdown() -> None:
            child.terminate()
            try:
                await asyncio.wait_for(asyncio.to_thread(child.wait), timeout=10.0)
            except asyncio.TimeoutError:
                child.kill()
            server.cancel()

        def on_signal() -> None:
            if not stopping:
                stopping.append(asyncio.ensure_future(shutdown()))

        for sig in (signal.SIGINT, signal.SIGTERM):  # replaces the server's own handlers
            loop.add_signal_handler(sig, on_signal)
        supervisor = asyncio.ensure_future(supervise())
        try:
            await server
        except asyncio.CancelledError:
            if not stopping:
                raise
        finally:
            if not stopping:
                stopping.append(asyncio.ensure_future(asyncio.sleep(0)))
            if child.poll() is None:
                child.terminate()
            await asyncio.gather(*stopping, return_exceptions=True)
            await asyncio.to_thread(child.wait)
            supervisor.cancel()
        return 0

    run_loop(both())


def _die_with_parent() -> None:  # runs in the child between fork and exec
    import ctypes
    import signal

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
