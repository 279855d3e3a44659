"""Pod statuses from the kubelet to the API server (upstream pkg/kubelet/status/status_manager.go).

`StatusManager` (one per kubelet) caches the status the kubelet last generated for each pod and
knows what it last wrote; `StatusWriter` (one per process) does the writing for every kubelet,
with a few concurrent requests over the shared client.

    manager.set_pod_status(pod, status)      # after every sync: queued only if it changed
    manager.get_pod_status(uid)              # what the kubelet reports now (probes read it)
    manager.terminate_pod(pod)               # containers are stopped for good: make it terminal

What is written, and when:
- A strategic merge patch of `pods/status` carrying `metadata.uid` (so a pod recreated under the
  same name is never patched by mistake) and the kubelet-owned status: phase, the kubelet's five
  conditions (merged by type on the server, so others' conditions stay), container statuses,
  IPs, startTime, qosClass, observedGeneration. A pod IP that changed is removed with a
  `$patch: delete` element (podIPs merge by ip).
- Only when it differs from what was last written; updates that arrive while a write is queued
  or in flight coalesce into one write of the newest status. When the kubelet first sees a pod
  (also after a restart) the API's current status counts as written.
- mergePodStatus at write time: a terminal phase is held back (the API's phase is written
  instead) while the pod worker could still have running containers, and Ready/ContainersReady
  are never written True with a terminal phase.
- The final delete: once the pod is finished (`terminate_pod` ran), its terminal status is
  written and the pod has a deletionTimestamp, the pod is deleted with gracePeriodSeconds=0 and
  a uid precondition (canBeDeleted).
- A failed write is retried after `retry_period` (1 s); a pod that is gone (404) or replaced
  (409) is dropped.
Cached statuses are kept as JSON bytes (a pod's status is ~1 KB that way instead of several KB
of dicts); what was last written is remembered as a hash.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import msgspec

from kubecore.client import errors
from kubecore.client.rest import RestClient
from kubecore.kubelet import podutil
from kubecore.kubelet.status_gen import kubelet_owned, terminal_ready_conditions
from kubecore.kubelet.timers import Spawner, Timers

log = logging.getLogger(__name__)
Obj = dict[str, Any]
PodLookup = Callable[[str], Obj | None]
"""uid -> the newest pod the kubelet knows (from the API, or its last copy of a removed one)."""

SMP = "application/strategic-merge-patch+json"
RETRY_PERIOD = 1.0
STATUS_UNKNOWN_MESSAGE = "The container could not be located when the pod was terminated"
_encode = msgspec.json.encode
_decode = msgspec.json.decode


def _prune(value: Any) -> Any:
    """A status without nulls (what typed Go structs make of both sides before comparing)."""
    if isinstance(value, dict):
        return {k: _prune(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_prune(v) for v in value]
    return value


def same_status(a: Obj, b: Obj) -> bool:
    return bool(_prune(kubelet_owned(a)) == _prune(kubelet_owned(b)))


@dataclass(slots=True)
class _Entry:
    uid: str
    namespace: str
    name: str
    status: bytes
    sent_hash: int = 0
    sent_ips: tuple[str, ...] = ()
    finished: bool = False
    deleted: bool = False


class StatusManager:
    """One kubelet's pod statuses (see the module docstring)."""

    def __init__(self, writer: StatusWriter, *, pod_lookup: PodLookup,
                 could_have_running_containers: Callable[[str], bool]) -> None:
        self.writer = writer
        self.pod_lookup = pod_lookup
        self.could_have_running_containers = could_have_running_containers
        self._pods: dict[str, _Entry] = {}
        self.writes = 0
        self.deletes = 0

    def __len__(self) -> int:
        return len(self._pods)

    def get_pod_status(self, uid: str) -> Obj | None:
        entry = self._pods.get(uid)
        if entry is None:
            return None
        out: Obj = _decode(entry.status)
        return out

    def set_pod_status(self, pod: Obj, status: Obj) -> None:
        uid = podutil.uid_of(pod)
        raw = _encode(status)
        entry = self._pods.get(uid)
        if entry is None:
            m = podutil.meta(pod)
            entry = self._pods[uid] = _Entry(uid, str(m.get("namespace") or ""), str(m.get("name") or ""), raw)
            api = pod.get("status") or {}
            merged = self._for_write(entry, status, pod)
            if api and same_status(merged, api):
                entry.sent_hash = hash(_encode(merged))
                entry.sent_ips = tuple(str(p.get("ip")) for p in api.get("podIPs") or [])
                return
        elif entry.status == raw:
            return
        entry.status = raw
        self.writer.enqueue(self, uid)

    def terminate_pod(self, pod: Obj) -> None:
        """TerminatePod: every container not terminated is reported terminated (137,
        ContainerStatusUnknown) once the pod has initialized, a Pending/Running phase becomes Failed,
        and the pod counts as finished (it may be deleted from the API)."""
        uid = podutil.uid_of(pod)
        status = self.get_pod_status(uid) or _decode(_encode(pod.get("status") or {}))
        unknown = {"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown",
                                  "message": STATUS_UNKNOWN_MESSAGE, "startedAt": None, "finishedAt": None}}
        initialized = any(c.get("type") == "Initialized" and c.get("status") == "True"
                          for c in status.get("conditions") or [])
        if initialized or not podutil.init_containers(pod):
            for cs in status.get("containerStatuses") or []:
                if "terminated" not in (cs.get("state") or {}):
                    cs["state"] = unknown
        if status.get("phase") not in podutil.TERMINAL_PHASES:
            status["phase"] = podutil.FAILED
        self.set_pod_status(pod, status)
        entry = self._pods[uid]
        entry.finished = True
        self.writer.enqueue(self, uid)

    def request_sync(self, uid: str) -> None:
        """Look at the pod again (its deletion may now be due)."""
        if uid in self._pods:
            self.writer.enqueue(self, uid)

    def remove(self, uid: str) -> None:
        self._pods.pop(uid, None)

    def is_finished(self, uid: str) -> bool:
        entry = self._pods.get(uid)
        return entry is not None and entry.finished

    # -- writing (called by the writer) ----------------------------------------------------------
    def _for_write(self, entry: _Entry, status: Obj, pod: Obj | None) -> Obj:
        merged = dict(status)
        if podutil.is_terminal(str(merged.get("phase"))) and self.could_have_running_containers(entry.uid):
            merged["phase"] = podutil.phase_of(pod) if pod is not None and podutil.phase_of(pod) else podutil.RUNNING
        terminal_ready_conditions(merged, pod or {})
        return merged

    def _patch_body(self, entry: _Entry, merged: Obj) -> bytes:
        status = dict(merged)
        ips = tuple(str(p.get("ip")) for p in status.get("podIPs") or [])
        stale = [ip for ip in entry.sent_ips if ip not in ips]
        if stale:
            status["podIPs"] = [*(status.get("podIPs") or []), *({"$patch": "delete", "ip": ip} for ip in stale)]
        return _encode({"metadata": {"uid": entry.uid}, "status": status})

    def _path(self, entry: _Entry) -> str:
        return f"/api/v1/namespaces/{quote(entry.namespace, safe='')}/pods/{quote(entry.name, safe='')}"

    async def _write(self, rest: RestClient, uid: str) -> None:
        entry = self._pods.get(uid)
        if entry is None or entry.deleted:
            return
        pod = self.pod_lookup(uid)
        merged = self._for_write(entry, _decode(entry.status), pod)
        raw = _encode(merged)
        digest = hash(raw)
        try:
            if digest != entry.sent_hash:
                await rest.request("PATCH", self._path(entry) + "/status", body=self._patch_body(entry, merged),
                                   content_type=SMP)
                entry.sent_hash = digest
                entry.sent_ips = tuple(str(p.get("ip")) for p in merged.get("podIPs") or [])
                self.writes += 1
            if (entry.finished and pod is not None and podutil.deletion_timestamp(pod)
                    and podutil.is_terminal(str(merged.get("phase")))):
                body = _encode({"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0,
                                "preconditions": {"uid": uid}})
                await rest.request("DELETE", self._path(entry), body=body, content_type="application/json")
                entry.deleted = True
                self.deletes += 1
        except (errors.NotFound, errors.Conflict) as e:
            log.info("pod %s/%s is gone or replaced (%s); dropping its status", entry.namespace, entry.name, e.reason)
            entry.deleted = True


class StatusWriter:
    """Writes statuses for any number of StatusManagers with `workers` requests in flight.
    Invariant: a (manager, uid) pair is queued at most once and written by one worker at a time;
    one that becomes dirty while being written is queued again when that write ends."""

    def __init__(self, rest: RestClient, *, timers: Timers, workers: int = 4,
                 retry_period: float = RETRY_PERIOD) -> None:
        self.rest = rest
        self.timers = timers
        self.workers = workers
        self.retry_period = retry_period
        self._queue: deque[tuple[StatusManager, str]] = deque()
        self._queued: set[tuple[int, str]] = set()
        self._writing: set[tuple[int, str]] = set()
        self._dirty: set[tuple[int, str]] = set()
        self._wake = asyncio.Event()
        self._spawner = Spawner(name="status-writer")
        self.failures = 0

    def start(self) -> None:
        for i in range(self.workers):
            self._spawner.spawn(self._work(), name=f"status-writer-{i}")

    async def stop(self) -> None:
        await self._spawner.stop()

    @property
    def backlog(self) -> int:
        return len(self._queue) + len(self._writing)

    def enqueue(self, manager: StatusManager, uid: str) -> None:
        key = (id(manager), uid)
        if key in self._writing:
            self._dirty.add(key)
            return
        if key in self._queued:
            return
        self._queued.add(key)
        self._queue.append((manager, uid))
        self._wake.set()

    async def _work(self) -> None:
        while True:
            while not self._queue:
                self._wake.clear()
                await self._wake.wait()
            manager, uid = self._queue.popleft()
            key = (id(manager), uid)
            self._queued.discard(key)
            self._writing.add(key)
            try:
                await manager._write(self.rest, uid)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                self.failures += 1
                log.warning("writing the status of pod %s failed (%s); retrying", uid, e)
                self.timers.call_later(self.retry_period, functools.partial(self.enqueue, manager, uid))
            finally:
                self._writing.discard(key)
                if key in self._dirty:
                    self._dirty.discard(key)
                    self.enqueue(manager, uid)

    async def flush(self) -> None:
        """Wait until nothing is queued or being written (tests)."""
        while self._queue or self._writing:
            await asyncio.sleep(0.01)
