"""The node's presence in the API: registering the Node, keeping its status current, and its
heartbeat Lease (upstream kubelet_node_status.go registerWithAPIServer, tryRegisterWithAPIServer,
tryUpdateNodeStatus, and the component-helpers nodelease controller).

Registration (`NodeAgent`): build the initial node (labels, annotation, taints, a first status) and create
it. 409 AlreadyExists means a node of this name was registered before (a kubelet restart): take
the existing node and reconcile it (default labels and the attach/detach annotation, written as
a metadata patch when they differ); its status follows with the first status sync. Any other
failure is retried with upstream's back-off: 100 ms doubling to 7 s.

Status sync (`sync_status`, every nodeStatusUpdateFrequency = 10 s): start from the node as the
node informer has it (a GET from the server on retries, as upstream), run the setters, and PATCH
`nodes/<name>/status` (strategic merge: conditions merge by type) when the status changed
(heartbeat times aside) or when nodeStatusReportFrequency (5 min) passed since the last report.
Up to 5 tries per sync (nodeStatusUpdateRetry).

Lease (`NodeLease`): `sync()` is called every renew interval (10 s = a quarter of
leaseDurationSeconds 40):
- the first time (or after losing track of the Lease): GET it; absent -> create it
  (holderIdentity = the node name, leaseDurationSeconds, renewTime = now, an ownerReference to
  the Node when its uid is known) and stop there, as upstream does after a create;
- otherwise update the last Lease seen with renewTime = now (and the owner reference if it was
  missing), up to 5 tries; a conflict reads the Lease again first.
renewTime is a MicroTime ("2024-01-02T03:04:05.123456Z"). Failures are logged and left to the
next tick: the Lease stays valid for four renew intervals.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote

from kubecore.client import errors
from kubecore.client.clock import Clock
from kubecore.client.rest import RestClient
from kubecore.client.sinks import RestApiSink
from kubecore.kubelet import config as cfg
from kubecore.kubelet import cri, node_status
from kubecore.kubelet.node_status import Pressure
from kubecore.kubelet.podutil import micro_time

log = logging.getLogger(__name__)
Obj = dict[str, Any]

NODE_STATUS_UPDATE_RETRY = 5
REGISTER_BACKOFF_INITIAL, REGISTER_BACKOFF_CAP = 0.1, 7.0
SMP = "application/strategic-merge-patch+json"


class NodeAgent:
    """One node's registration and status (see the module docstring)."""

    def __init__(self, rest: RestClient, *, config: cfg.KubeletConfig, runtime: cri.Runtime, clock: Clock,
                 machine: cfg.MachineInfo, node_ip: str, node_lookup: Callable[[], Obj | None],
                 ready_errors: Callable[[], Awaitable[list[str]]],
                 record: Callable[[str, str], None], pressure: Callable[[], Pressure] | None = None) -> None:
        self.rest = rest
        self.config = config
        self.runtime = runtime
        self.clock = clock
        self.machine = machine
        self.node_ip = node_ip
        self.node_lookup = node_lookup
        self.ready_errors = ready_errors
        self.record = record
        self.pressure = pressure or Pressure
        """The MemoryPressure/DiskPressure flags to report (the eviction manager's, when it runs)."""
        self.node: Obj | None = None
        """The node as last written or read by this agent."""
        self.registered = False
        self.last_report: float | None = None
        self.status_writes = 0
        self._version: cri.VersionResponse | None = None
        self._path = f"/api/v1/nodes/{quote(config.node_name, safe='')}"

    @property
    def uid(self) -> str | None:
        node = self.node_lookup() or self.node
        uid = (node or {}).get("metadata", {}).get("uid")
        return str(uid) if uid else None

    async def _fill_status(self, node: Obj) -> list[tuple[str, str]]:
        if self._version is None:
            self._version = await self.runtime.version()
        images = await self.runtime.list_images()
        return node_status.set_node_status(
            node, self.config, now=self.clock.now(), machine=self.machine, runtime=self._version, images=images,
            node_ip=self.node_ip, ready_errors=await self.ready_errors(), pressure=self.pressure())

    # -- registration ------------------------------------------------------------------------------
    async def register(self) -> None:
        """Register, retrying with back-off until it works (or the task is cancelled)."""
        step = REGISTER_BACKOFF_INITIAL
        while not self.registered:
            try:
                await self.try_register()
            except errors.ClientError as e:
                log.warning("node %s: unable to register with the API server: %s", self.config.node_name, e)
            if not self.registered:
                await self.clock.sleep(step)
                step = min(step * 2, REGISTER_BACKOFF_CAP)

    async def try_register(self) -> None:
        node = node_status.initial_node(self.config)
        events = await self._fill_status(node)
        try:
            self.node = await self.rest.send_json("POST", "/api/v1/nodes", node)
            self.registered = True
            self.last_report = self.clock.now()
            for event_type, reason in events:
                self.record(event_type, reason)
            return
        except errors.AlreadyExists:
            pass
        existing: Obj = await self.rest.get_json(self._path)
        log.info("node %s was previously registered", self.config.node_name)
        patch = node_status.reconcile_existing(node, existing)
        if patch is not None:
            existing = await self.rest.send_json("PATCH", self._path, patch,
                                                 content_type="application/merge-patch+json")
        self.node = existing
        self.registered = True

    # -- status ------------------------------------------------------------------------------------
    async def sync_status(self) -> None:
        """syncNodeStatus: one pass, up to NODE_STATUS_UPDATE_RETRY tries."""
        if not self.registered:
            return
        for attempt in range(NODE_STATUS_UPDATE_RETRY):
            try:
                await self._try_update(attempt)
                return
            except errors.ClientError as e:
                log.warning("node %s: error updating node status, will retry: %s", self.config.node_name, e)
        log.error("node %s: update node status exceeds retry count", self.config.node_name)

    async def _try_update(self, attempt: int) -> None:
        original: Obj | None = self.node_lookup() if attempt == 0 else None
        if original is None:
            original = await self.rest.get_json(self._path)
        assert original is not None
        updated = {"metadata": original.get("metadata") or {}, "status": copy.deepcopy(original.get("status") or {})}
        events = await self._fill_status(updated)
        changed = node_status.status_changed(original.get("status") or {}, updated["status"])
        now = self.clock.now()
        due = self.last_report is None or now - self.last_report >= self.config.node_status_report_frequency
        if not changed and not due:
            return
        self.node = await self.rest.send_json("PATCH", self._path + "/status", {"status": updated["status"]},
                                              content_type=SMP)
        self.last_report = now
        self.status_writes += 1
        for event_type, reason in events:
            self.record(event_type, reason)


NODE_LEASE_NAMESPACE = "kube-node-lease"
MAX_UPDATE_RETRIES = 5


class NodeLease:
    """One node's Lease (see the module docstring)."""

    def __init__(self, sink: RestApiSink, *, node_name: str, clock: Clock, duration: int = 40,
                 node_uid: Callable[[], str | None]) -> None:
        self.sink = sink
        self.node_name = node_name
        self.clock = clock
        self.duration = duration
        self.node_uid = node_uid
        self.latest: Obj | None = None
        self.renewals = 0
        self.failures = 0

    def _new_lease(self, base: Obj | None) -> Obj:
        if base is None:
            lease: Obj = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                          "metadata": {"name": self.node_name, "namespace": NODE_LEASE_NAMESPACE}, "spec": {}}
        else:
            lease = copy.deepcopy(base)
        spec = lease.setdefault("spec", {})
        spec["holderIdentity"] = self.node_name
        spec["leaseDurationSeconds"] = self.duration
        spec["renewTime"] = micro_time(self.clock.now())
        meta = lease.setdefault("metadata", {})
        if not meta.get("ownerReferences"):
            uid = self.node_uid()
            if uid:
                meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": self.node_name, "uid": uid}]
        return lease

    async def sync(self) -> None:
        try:
            if self.latest is None and await self._ensure():
                return
            await self._update()
        except errors.ClientError as e:
            self.failures += 1
            log.warning("node %s: renewing its lease failed: %s", self.node_name, e)

    async def _ensure(self) -> bool:
        """Read the Lease, creating it when absent; True when it was just created."""
        try:
            self.latest = await self.sink.get_lease(NODE_LEASE_NAMESPACE, self.node_name)
            return False
        except errors.NotFound:
            pass
        try:
            self.latest = await self.sink.create_lease(self._new_lease(None))
        except errors.AlreadyExists:
            self.latest = await self.sink.get_lease(NODE_LEASE_NAMESPACE, self.node_name)
            return False
        self.renewals += 1
        return True

    async def _update(self) -> None:
        for _ in range(MAX_UPDATE_RETRIES):
            try:
                self.latest = await self.sink.update_lease(self._new_lease(self.latest))
                self.renewals += 1
                return
            except errors.Conflict:
                self.latest = None
                await self._ensure()
            except errors.NotFound:
                self.latest = None
                if await self._ensure():
                    return
        raise errors.ClientError(f"failed {MAX_UPDATE_RETRIES} attempts to update the lease")
