"""The controller manager: leader election, then every enabled controller, until stopped
(kube-controller-manager's app/controllermanager.go).

    manager = ControllerManager(load_kubeconfig(path), options=ManagerOptions(controllers=["*"]))
    code = await manager.run()           # until cancelled, or leadership lost

- With leader election (the default) the manager competes for the Lease
  `kube-system/kube-controller-manager` as `<hostname>_<uuid>`; only the holder runs controllers.
  A term starts with a fresh `ControllerContext` (new informer factory, so caches are rebuilt from
  the server) and ends by cancelling every controller and stopping the informers. A leader that
  cannot renew within the renew deadline stops its controllers; then, like upstream, `run()`
  returns 1 (`exit_on_lost_lease`), or competes again (`kubecore up`, where the process must live on).
- Without leader election the controllers simply run until cancelled.
- Cancelling `run()` (SIGINT/SIGTERM in the CLI) stops controllers and informers, flushes events,
  releases the lease when `release_on_cancel` (so a standby takes over at once) and closes the
  client.
A controller that crashes is logged and restarted after a pause; it never takes the others down.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubecore.client.clock import REAL_CLOCK, Clock
from kubecore.client.config import ClientConfig
from kubecore.client.events import EventBroadcaster
from kubecore.client.factory import SharedInformerFactory
from kubecore.client.indexer import strip_managed_fields
from kubecore.client.leaderelection import (DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD,
                                            compete_and_lead)
from kubecore.client.rest import RestClient
from kubecore.client.sinks import RestApiSink
from kubecore.controllers.base import (ControllerContext, ControllerSpec, cancel_and_wait, load_builtin_controllers,
                                       select_controllers)

log = logging.getLogger(__name__)

LEASE_NAMESPACE = "kube-system"
LEASE_NAME = "kube-controller-manager"
RESTART_PAUSE = 5.0


def default_identity() -> str:
    """Upstream's `<hostname>_<uuid>`: unique per process even on one host."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass
class ManagerOptions:
    controllers: list[str] = field(default_factory=lambda: ["*"])
    leader_elect: bool = True
    lease_duration: float = DEFAULT_LEASE_DURATION
    renew_deadline: float = DEFAULT_RENEW_DEADLINE
    retry_period: float = DEFAULT_RETRY_PERIOD
    lease_namespace: str = LEASE_NAMESPACE
    lease_name: str = LEASE_NAME
    identity: str = ""
    release_on_cancel: bool = True
    exit_on_lost_lease: bool = True
    workers: dict[str, int] = field(default_factory=dict)
    """Per-controller worker counts overriding the registry's defaults."""
    controller_options: dict[str, Any] = field(default_factory=dict)
    """Passed to every controller as `ControllerContext.options`."""


class ControllerManager:
    def __init__(self, config: ClientConfig, *, options: ManagerOptions | None = None, clock: Clock = REAL_CLOCK,
                 registry: Mapping[str, ControllerSpec] | None = None) -> None:
        self.config = config
        self.options = options or ManagerOptions()
        self.clock = clock
        self.registry = dict(registry) if registry is not None else dict(load_builtin_controllers())
        self.specs = select_controllers(self.options.controllers, self.registry)  # raises on unknown names
        self.identity = self.options.identity or default_identity()
        self.leading = asyncio.Event()
        """Set while controllers run (informational; tests and `up` read it)."""

    async def run(self) -> int:
        """Run until cancelled (returns 0 then, via CancelledError) or leadership is lost (1)."""
        log.info("controller manager %s: controllers %s", self.identity, ", ".join(s.name for s in self.specs))
        async with RestClient(self.config, clock=self.clock) as rest:
            if not self.options.leader_elect:
                await self._lead(rest)
                return 0
            return await compete_and_lead(RestApiSink(rest), self.options, component="controller manager",
                                          identity=self.identity, lead=lambda: self._lead(rest), clock=self.clock)

    async def _lead(self, rest: RestClient) -> None:
        """One leadership term: build a context, run every controller until cancelled."""
        log.info("controller manager %s: leading; starting controllers", self.identity)
        # kube-controller-manager trims managedFields from every shared informer (memory; no
        # controller reads them): the same transform here.
        factory = SharedInformerFactory(rest, clock=self.clock, transform=strip_managed_fields)
        broadcaster = EventBroadcaster(RestApiSink(rest), clock=self.clock)
        host = socket.gethostname()
        ctx = ControllerContext(rest=rest, informers=factory, clock=self.clock,
                                recorder=lambda component: broadcaster.new_recorder(component, host=host),
                                options=dict(self.options.controller_options))
        tasks = [asyncio.ensure_future(self._supervise(spec, ctx)) for spec in self.specs]
        self.leading.set()
        try:
            await asyncio.gather(*tasks)
        finally:
            self.leading.clear()
            log.info("controller manager %s: stopping controllers", self.identity)
            await cancel_and_wait(tasks)
            await factory.shutdown()
            await broadcaster.shutdown(drain=False)

    async def _supervise(self, spec: ControllerSpec, ctx: ControllerContext) -> None:
        workers = self.options.workers.get(spec.name, spec.workers)
        while True:
            try:
                controller = spec.constructor(ctx)
                log.info("starting controller %s (%d workers)", spec.name, workers)
                await controller.run(workers)
                log.warning("controller %s returned; restarting", spec.name)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("controller %s failed; restarting in %ss", spec.name, RESTART_PAUSE)
            await self.clock.sleep(RESTART_PAUSE)
