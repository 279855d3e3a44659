"""The CRD controllers of the API server process: naming, establishing, serving and finalizing.

One worker syncs one CRD at a time (names queued from a watch of the CRDs' storage prefix,
deduplicated). A sync, in upstream's terms:

1. gone            -> its types are removed from the registry (no longer served or discovered);
                      CRDs that were refused names are synced again (the names may be free).
2. being deleted   -> the finalizer controller: Terminating=True (InstanceDeletionInProgress),
                      every custom resource deleted (objects with finalizers are only marked),
                      Terminating=False (InstanceDeletionCompleted, or NeverEstablished), the
                      cleanup finalizer removed, which deletes the CRD; while instances with
                      finalizers remain, InstanceDeletionCheck and a retry 5 s later.
3. otherwise       -> the naming controller: accepted names (a name another CRD of the group, or a
                      built-in resource of the group, already uses is refused: NamesAccepted=False
                      with PluralConflict, KindConflict, ...), then the establishing controller:
                      Established=True (InitialNamesAccepted) once names are accepted. The types
                      are registered *before* Established is written, so a client that waited for
                      the condition is served at once.

``start()`` registers every stored CRD before it returns (the server serves them from its first
request after a restart), then follows changes. Status writes use the CRD's resourceVersion; a
lost race just queues the CRD again.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable
from typing import Any

from kubecore.api import crd_validation, errors
from kubecore.api.meta import now_rfc3339
from kubecore.api.registry import Registry, ResourceType
from kubecore.apiserver import customresource
from kubecore.apiserver.storage import ObjectStore
from kubecore.store import prefix_end

__all__ = ["CRDController", "accepted_names"]

log = logging.getLogger("kubecore.apiserver.crd")
Obj = dict[str, Any]
RETRY_SECONDS = 5.0
NAME_KEYS = ("plural", "singular", "shortNames", "kind", "listKind", "categories")


def _d(v: Any) -> Obj:
    return v if isinstance(v, dict) else {}


def _fresh(requested: str, accepted: str, used: set[str]) -> str:
    """equalToAcceptedOrFresh: the error text, or "" when the name may be taken."""
    if requested == accepted or requested not in used:
        return ""
    return f'"{requested}" is already in use'


def accepted_names(crd: Obj, used_resources: set[str], used_kinds: set[str]) -> tuple[Obj, Obj]:
    """calculateNamesAndConditions: (the new acceptedNames, the NamesAccepted condition as
    (status, reason, message) in a dict)."""
    requested = _d(_d(crd.get("spec")).get("names"))
    accepted = _d(_d(crd.get("status")).get("acceptedNames"))
    new = dict(accepted)
    cond = {"status": "Unknown", "reason": "", "message": ""}

    def conflict(reason: str, message: str) -> None:
        cond.update(status="False", reason=reason, message=message)

    for key, reason in (("plural", "PluralConflict"), ("singular", "SingularConflict")):
        err = _fresh(str(requested.get(key) or ""), str(accepted.get(key) or ""), used_resources)
        if err:
            conflict(reason, err)
        else:
            new[key] = requested.get(key, "")
    shorts, old_shorts = list(requested.get("shortNames") or []), list(accepted.get("shortNames") or [])
    if shorts != old_shorts:
        errs = [e for s in shorts if s not in old_shorts for e in [_fresh(s, "", used_resources)] if e]
        if errs:
            conflict("ShortNamesConflict", errors.aggregate_message(errs))
        else:
            new["shortNames"] = shorts
    for key, reason in (("kind", "KindConflict"), ("listKind", "ListKindConflict")):
        err = _fresh(str(requested.get(key) or ""), str(accepted.get(key) or ""), used_kinds)
        if err:
            conflict(reason, err)
        else:
            new[key] = requested.get(key, "")
    if requested.get("categories"):
        new["categories"] = requested["categories"]
    else:
        new.pop("categories", None)
    if cond["status"] == "Unknown":
        cond.update(status="True", reason="NoConflicts", message="no conflicts found")
    ordered = {k: new[k] for k in NAME_KEYS if new.get(k) or k in ("plural", "kind")}
    return ordered, cond


class CRDController:
    def __init__(self, registry: Registry, objects: ObjectStore, *, clock: Callable[[], str] = now_rfc3339) -> None:
        self.registry = registry
        self.objects = objects
        self.clock = clock
        crd_rt = registry.get(customresource.CRD_GROUP, "v1", "customresourcedefinitions")
        assert crd_rt is not None, "the registry serves apiextensions.k8s.io/v1 customresourcedefinitions"
        self.crd_rt = crd_rt
        self.served: dict[str, list[ResourceType]] = {}  # CRD name -> the types registered for it
        self.queue: asyncio.Queue[str] = asyncio.Queue()
        self.pending: set[str] = set()
        self.tasks: list[asyncio.Task[None]] = []

    # ---- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Registers every stored CRD (and settles their status), then follows changes."""
        revision = await self.resync()
        self.tasks = [asyncio.create_task(self._watch(revision + 1)), asyncio.create_task(self._work())]

    async def stop(self) -> None:
        for t in self.tasks:
            t.cancel()
        for t in self.tasks:
            try:
                await t
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - shutting down
                pass
        self.tasks = []

    async def resync(self) -> int:
        page = self.objects.list(self.crd_rt, "")
        names = {str(c["metadata"]["name"]) for c in page.items}
        for name in sorted(names | set(self.served)):
            await self._sync_safely(name)
        return page.revision

    def enqueue(self, name: str, delay: float = 0.0) -> None:
        if delay > 0:
            asyncio.get_running_loop().call_later(delay, self.enqueue, name)
            return
        if name not in self.pending:
            self.pending.add(name)
            self.queue.put_nowait(name)

    async def _watch(self, start: int) -> None:
        prefix = self.crd_rt.storage_prefix.encode()
        while True:
            watch = self.objects.store.watch(prefix, prefix_end(prefix), start_revision=start)
            try:
                async for ev in watch:
                    start = ev.kv.mod_revision + 1
                    self.enqueue(ev.kv.key[len(prefix):].decode())
                return
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - e.g. compacted: read everything again
                log.warning("CRD watch failed; resyncing", exc_info=True)
                await asyncio.sleep(1.0)
                start = await self.resync() + 1
            finally:
                watch.cancel()

    async def _work(self) -> None:
        while True:
            name = await self.queue.get()
            self.pending.discard(name)
            await self._sync_safely(name)

    async def _sync_safely(self, name: str) -> None:
        try:
            await self.sync(name)
        except errors.StatusError as e:
            if e.code in (404, 409):
                self.enqueue(name)
            else:
                log.warning("syncing CRD %s: %s", name, e.message)
                self.enqueue(name, RETRY_SECONDS)
        except Exception:  # noqa: BLE001 - keep the controller alive
            log.exception("syncing CRD %s", name)
            self.enqueue(name, RETRY_SECONDS)

    # ---- one CRD -----------------------------------------------------------------------------

    def _get(self, name: str) -> Obj | None:
        try:
            return self.objects.get(self.crd_rt, "", name)
        except errors.StatusError as e:
            if e.code == 404:
                return None
            raise

    async def sync(self, name: str) -> None:
        crd = self._get(name)
        if crd is None:
            self.unregister(name)
            self._requeue_refused()
            return
        if crd["metadata"].get("deletionTimestamp"):
            if crd_validation.condition_true(crd, "Established"):
                self.register(crd)
            if crd_validation.CLEANUP_FINALIZER in (crd["metadata"].get("finalizers") or []):
                await self.finalize(crd)
            return
        await self.establish(crd)

    def _requeue_refused(self) -> None:
        """A CRD went away: names it held may be free now for CRDs that were refused them."""
        for other in self.objects.list(self.crd_rt, "").items:
            if not crd_validation.condition_true(other, "NamesAccepted"):
                self.enqueue(str(other["metadata"]["name"]))

    def _used_names(self, crd: Obj) -> tuple[set[str], set[str]]:
        """Names of the group already taken: accepted names of the other CRDs, built-in types."""
        group = _d(crd.get("spec")).get("group")
        resources: set[str] = set()
        kinds: set[str] = set()
        for other in self.objects.list(self.crd_rt, "").items:
            if other["metadata"]["name"] == crd["metadata"]["name"] or _d(other.get("spec")).get("group") != group:
                continue
            names = _d(_d(other.get("status")).get("acceptedNames"))
            resources.update(str(x) for x in [names.get("plural"), names.get("singular"), *(names.get("shortNames") or [])] if x)
            kinds.update(str(x) for x in (names.get("kind"), names.get("listKind")) if x)
        for rt in self.registry.all():
            if rt.group == group and not rt.crd:
                resources.update([rt.resource, rt.singular, *rt.short_names])
                kinds.update([rt.kind, rt.list_kind])
        return resources, kinds

    async def establish(self, crd: Obj) -> None:
        new = copy.deepcopy(crd)
        status = new.setdefault("status", {})
        names, cond = accepted_names(new, *self._used_names(new))
        status["acceptedNames"] = names
        now = self.clock()
        customresource.set_condition(new, "NamesAccepted", cond["status"], cond["reason"], cond["message"], now=now)
        established = crd_validation.condition_true(new, "Established")
        if cond["status"] == "True" and not established:
            customresource.set_condition(new, "Established", "True", "InitialNamesAccepted",
                                         "the initial names have been accepted", now=now)
        elif not established and not any(c.get("type") == "Established" for c in status.get("conditions") or []):
            customresource.set_condition(new, "Established", "False", "NotAccepted", "not all names are accepted", now=now)
        if crd_validation.condition_true(new, "Established"):
            self.register(new)
        else:
            self.unregister(new["metadata"]["name"])
        if new != crd:
            await self._write(new)

    async def _write(self, crd: Obj) -> Obj:
        rv = int(crd["metadata"]["resourceVersion"])
        out = copy.deepcopy(crd)
        out["metadata"].pop("resourceVersion", None)
        return await self.objects.replace(self.crd_rt, "", crd["metadata"]["name"], out, expect_revision=rv)

    # ---- serving -----------------------------------------------------------------------------

    def register(self, crd: Obj) -> None:
        """The CRD's served versions in the registry (replacing what it served before)."""
        name = str(crd["metadata"]["name"])
        new = customresource.resource_types(crd)
        keys = {(rt.group, rt.version, rt.resource) for rt in new}
        for old in self.served.get(name, []):
            if (old.group, old.version, old.resource) not in keys:
                self._remove(old)
        for rt in new:
            current = self.registry.get(rt.group, rt.version, rt.resource)
            if current is not None and not current.crd:
                continue  # never shadow a built-in type
            self.registry.add(rt)
        self.served[name] = new

    def unregister(self, name: str) -> None:
        for rt in self.served.pop(name, []):
            self._remove(rt)

    def _remove(self, rt: ResourceType) -> None:
        current = self.registry.get(rt.group, rt.version, rt.resource)
        if current is not None and current.crd == rt.crd:
            self.registry.remove(rt.group, rt.version, rt.resource)

    # ---- deletion ------------------------------------------------------------------------------

    async def finalize(self, crd: Obj) -> None:
        now = self.clock()
        if customresource.set_condition(crd, "Terminating", "True", "InstanceDeletionInProgress",
                                        "CustomResource deletion is in progress", now=now):
            crd = await self._write(crd)
        if not crd_validation.condition_true(crd, "Established"):
            customresource.set_condition(crd, "Terminating", "False", "NeverEstablished",
                                         "resource was never established", now=now)
        else:
            remaining = await self.delete_instances(crd)
            if remaining:
                customresource.set_condition(
                    crd, "Terminating", "True", "InstanceDeletionCheck",
                    f"could not confirm zero CustomResources remaining: {remaining} remaining", now=now)
                await self._write(crd)
                self.enqueue(crd["metadata"]["name"], RETRY_SECONDS)
                return
            customresource.set_condition(crd, "Terminating", "False", "InstanceDeletionCompleted",
                                         "removed all instances", now=now)
        finalizers = [f for f in crd["metadata"].get("finalizers") or [] if f != crd_validation.CLEANUP_FINALIZER]
        if finalizers:
            crd["metadata"]["finalizers"] = finalizers
            await self._write(crd)
            return
        await self.objects.remove(self.crd_rt, "", crd["metadata"]["name"],
                                  expect_revision=int(crd["metadata"]["resourceVersion"]))
        self.unregister(crd["metadata"]["name"])

    async def delete_instances(self, crd: Obj) -> int:
        """Deletes every custom resource of the CRD; returns how many are still there (being
        finalized)."""
        rts = self.served.get(crd["metadata"]["name"]) or customresource.resource_types(crd)
        if not rts:
            return 0
        rt = rts[0]
        remaining = 0
        for obj in self.objects.list(rt, "").items:
            m = obj["metadata"]
            rv = int(m["resourceVersion"])
            try:
                if m.get("finalizers"):
                    remaining += 1
                    if not m.get("deletionTimestamp"):
                        m["deletionTimestamp"] = self.clock()
                        m["deletionGracePeriodSeconds"] = 0
                        m.pop("resourceVersion")
                        await self.objects.replace(rt, m.get("namespace", ""), m["name"], obj, expect_revision=rv)
                else:
                    await self.objects.remove(rt, m.get("namespace", ""), m["name"], expect_revision=rv)
            except errors.StatusError as e:
                if e.code not in (404, 409):
                    raise
                remaining += 1
        return remaining
