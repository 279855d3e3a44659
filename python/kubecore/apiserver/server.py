"""Running the API server: open the store, create the system namespaces, serve until a signal.

`kubecore up` also writes DIR/kubeconfig pointing at the server, for kubectl and the
`kubernetes` Python client.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from kubecore.api import meta
from kubecore.api.errors import StatusError
from kubecore.apiserver.admission import ensure_system_namespaces
from kubecore.apiserver.app import ALLOCATORS, DIRECT, FAST_READS, OBJECTS, REGISTRY, build_app
from kubecore.apiserver.fastpath import FastAppRunner
from kubecore.apiserver.httpserver import LeanServer
from kubecore.apiserver.leases import DEFAULT_EVENT_TTL
from kubecore.heap import settle_heap
from kubecore.store import Store

# Pending connections the kernel queues before accept (capped by net.core.somaxconn). aiohttp's
# default of 128 overflowed when a controller opened a few hundred connections at once: the
# dropped SYNs were retried after the kernel's 1 s timeout, stalling those requests by a second.
LISTEN_BACKLOG = 4096

KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: kubecore
  cluster:
    server: {server}
contexts:
- name: kubecore
  context:
    cluster: kubecore
    user: kubecore-admin
    namespace: default
current-context: kubecore
users:
- name: kubecore-admin
  user: {{}}
"""


@dataclass(frozen=True)
class Listen:
    host: str
    port: int

    @classmethod
    def parse(cls, value: str) -> Listen:
        host, sep, port = value.rpartition(":")
        if not sep or not port.isdigit() or not (0 < int(port) < 65536):
            raise ValueError(f"--listen must be HOST:PORT (e.g. 127.0.0.1:6443), got {value!r}")
        return cls(host or "127.0.0.1", int(port))

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


def write_kubeconfig(data_dir: Path, listen: Listen) -> Path:
    path = data_dir / "kubeconfig"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(KUBECONFIG.format(server=listen.url))
    os.replace(tmp, path)
    return path


async def ensure_kubernetes_service(app: web.Application, port: int) -> None:
    """The `kubernetes` service in `default`, on the first address of the service range."""
    objects, registry, alloc = app[OBJECTS], app[REGISTRY], app[ALLOCATORS]
    services = registry.get("", "v1", "services")
    assert services is not None
    try:
        objects.get(services, "default", "kubernetes")
        return
    except StatusError as e:
        if e.code != 404:
            raise
    first = str(alloc.cidr.network_address + 1)
    body = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"type": "ClusterIP", "clusterIP": first, "sessionAffinity": "None",
                 "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}]},
    }
    obj = meta.prepare_create(services, body, namespace="default", now=meta.now_rfc3339(), uid=meta.new_uid())
    alloc.allocate(obj)
    await objects.create(services, "default", "kubernetes", obj)


async def run(data_dir: Path, listen: Listen, *, on_ready: str = "", event_ttl: int = DEFAULT_EVENT_TTL) -> None:
    """Serves until SIGINT/SIGTERM; the store is closed cleanly on the way out. Events expire
    `event_ttl` seconds after their last write (0: never)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with Store.open(data_dir / "store") as store:
        app = build_app(store, event_ttl=event_ttl)
        await ensure_system_namespaces(app[OBJECTS], app[REGISTRY], meta.now_rfc3339(), meta.new_uid)
        await ensure_kubernetes_service(app, listen.port)
        runner = FastAppRunner(app, fast=app[FAST_READS], direct=app[DIRECT], access_log=None, handle_signals=False,
                               handler_cancellation=True)
        await runner.setup()
        assert runner.server is not None
        site = LeanServer(handler=app[DIRECT], fallback=runner.server, fast=app[FAST_READS])
        await site.start(listen.host, listen.port, backlog=LISTEN_BACKLOG)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        settle_heap()
        if on_ready:
            print(on_ready, flush=True)
        try:
            await stop.wait()
        finally:
            print("kubecore: shutting down", file=sys.stderr, flush=True)
            await site.close()
            await runner.cleanup()


def serve(data_dir: Path, listen: Listen, *, on_ready: str = "", event_ttl: int = DEFAULT_EVENT_TTL) -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency; keep working without it
        asyncio.run(run(data_dir, listen, on_ready=on_ready, event_ttl=event_ttl))
    else:
        uvloop.run(run(data_dir, listen, on_ready=on_ready, event_ttl=event_ttl))
