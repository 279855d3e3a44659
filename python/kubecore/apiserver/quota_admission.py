"""The ResourceQuota admission plugin (upstream staging/src/k8s.io/apiserver/pkg/admission/plugin/
resourcequota: admission.go, controller.go, resource_access.go): a create (or an update that can
change usage: services, persistentvolumeclaims) that would take a quota of its namespace over
status.hard is refused with 403 Forbidden; an admitted one is charged to status.used of every
quota it matches before the object is stored.

`check_request` is upstream's CheckRequest, pure: for each quota whose status.hard names something
the kind's evaluator measures and whose scopes the object matches, the pod constraints ("must
specify ..."), usage known for every such name ("status unknown ..."), then usage (the difference
to the old object on an update, for quotas the old object matched too) added to status.used and
compared with status.hard ("exceeded quota: ..."). A quota the controller has not processed yet
(no status.hard) matches nothing, as upstream.

`ResourceQuotaAdmission.admit` reads the namespace's quotas through the admission lookups (a
namespace without quotas costs one keys-only range), serialises the evaluations of one namespace
(upstream's per-namespace work queue) and writes each changed quota's status with a compare-and-swap
on its resourceVersion; a quota whose write lost a race is read again and checked again, up to
three more times, as upstream's checkQuotas (quotas already charged stay charged). dryRun checks
and never charges. A charge whose object then fails to be stored stays until the quota controller
recalculates, as upstream.

Not done (no AdmissionConfiguration here): limitedResources ("insufficient quota to consume") and
limited scopes.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubecore.api import errors
from kubecore.api.jsoncopy import json_copy
from kubecore.api.quota import (
    IGNORED_RESOURCES, Evaluator, GroupResource, ResourceList, evaluator_for, from_json, matches_scopes, pretty,
    rl_add, rl_equal, rl_less_or_equal, rl_mask, rl_negative, rl_remove_zeros, rl_subtract_floor, scope_selectors,
    to_json,
)
from kubecore.api.registry import Registry, ResourceType
from kubecore.apiserver.lookups import Lookups
from kubecore.apiserver.storage import ObjectStore
from kubecore.store import prefix_end

Obj = dict[str, Any]
RETRIES = 3  # after the first attempt, as upstream's checkQuotas(..., 3)
MAX_BOUNDS = 4096  # namespaces whose quota key range is remembered; cleared past this


class QuotaError(Exception):
    """A request the quotas refuse; the message is upstream's (the API server wraps it in a 403)."""


@dataclass(frozen=True)
class Charge:
    """A quota (as read: shared, never mutated) and the status.used it gets."""

    quota: Obj
    used: ResourceList


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _status(quota: Obj, field: str) -> ResourceList:
    return from_json((quota.get("status") or {}).get(field))


def quota_matches(ev: Evaluator, quota: Obj, hard: ResourceList, obj: Obj) -> bool:
    """generic.Matches: the quota's status.hard names something `ev` measures and `obj` matches
    every scope and scope selector."""
    return bool(ev.matching(hard.keys())) and matches_scopes(ev, obj, scope_selectors(quota))


def _interesting(quotas: list[Obj], ev: Evaluator, obj: Obj) -> list[tuple[Obj, ResourceList, ResourceList]]:
    """The quotas that apply to `obj` as (quota, hard, used); raises for a pod that misses a
    required resource or a quota whose usage is not known yet."""
    out = []
    for quota in quotas:
        hard = _status(quota, "hard")
        if not quota_matches(ev, quota, hard, obj):
            continue
        restricted = ev.matching(hard.keys())
        if (missing := ev.constraints(restricted, obj)) is not None:
            raise QuotaError(f"failed quota: {_name(quota)}: {missing}")
        used = _status(quota, "used")
        if any(name not in used for name in restricted):
            raise QuotaError(f"status unknown for quota: {_name(quota)}, resources: {','.join(sorted(restricted))}")
        out.append((quota, hard, used))
    return out


def check_request(quotas: list[Obj], ev: Evaluator, obj: Obj, old: Obj | None, *, now: float) -> list[Charge]:
    """The charges admitting `obj` makes (none when no quota applies or nothing changes);
    raises QuotaError when a quota refuses it. `old` is the stored object on an update."""
    interesting = _interesting(quotas, ev, obj)
    if not interesting:
        return []
    usage = ev.usage(obj, now)
    if negative := rl_negative(usage):
        raise QuotaError(f"quota usage is negative for resource(s): {','.join(sorted(negative))}")
    deltas = [usage] * len(interesting)
    if old is not None and (old.get("metadata") or {}).get("resourceVersion"):
        delta = rl_subtract_floor(usage, ev.usage(old, now))
        deltas = [delta if quota_matches(ev, q, hard, old) else usage for q, hard, _used in interesting]
    charges = []
    for (quota, hard, used), delta in zip(interesting, deltas):
        requested = rl_mask(rl_remove_zeros(delta), hard.keys())
        if not requested:
            continue
        new_used = rl_add(used, requested)
        exceeded = rl_less_or_equal(rl_mask(new_used, requested.keys()), hard)
        if exceeded:
            raise QuotaError(
                f"exceeded quota: {_name(quota)}, requested: {pretty(rl_mask(requested, exceeded))}, "
                f"used: {pretty(rl_mask(used, exceeded))}, limited: {pretty(rl_mask(hard, exceeded))}")
        if not rl_equal(new_used, used):
            charges.append(Charge(quota, new_used))
    return charges


class ResourceQuotaAdmission:
    """The plugin: `await plugin.admit(rt, obj, old, dry_run=...)` after the other admission
    plugins (it sees the object they mutated) and before the store write."""

    def __init__(self, registry: Registry, objects: ObjectStore, lookups: Lookups, *,
                 clock: Callable[[], float] = time.time) -> None:
        rt = registry.get("", "v1", "resourcequotas")
        assert rt is not None, "the registry serves core/v1 resourcequotas"
        self.quotas = rt
        self.objects = objects
        self.lookups = lookups
        self.clock = clock
        self._evaluators: dict[GroupResource, Evaluator | None] = {}
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        self._bounds: dict[str, tuple[bytes, bytes]] = {}

    def evaluator(self, rt: ResourceType) -> Evaluator | None:
        """The kind's evaluator (an object count for kinds without their own); None when ignored."""
        gr = (rt.group, rt.resource)
        if gr not in self._evaluators:
            self._evaluators[gr] = None if gr in IGNORED_RESOURCES else evaluator_for(gr)
        return self._evaluators[gr]

    async def admit(self, rt: ResourceType, obj: Obj, old: Obj | None = None, *, dry_run: bool = False) -> None:
        """Refuses (403) or charges a create (`old` None) or an update of the object itself."""
        namespace = str((obj.get("metadata") or {}).get("namespace") or "")
        if not namespace or not rt.namespaced:
            return
        ev = self.evaluator(rt)
        if ev is None or (old is not None and not ev.handles_update):
            return
        if not self._has_quotas(namespace):
            return  # the common case
        lock = self._locks.get(namespace)
        if lock is None:
            lock = self._locks[namespace] = asyncio.Lock()
        async with lock:
            await self._evaluate(rt, ev, obj, old, namespace=namespace, dry_run=dry_run)

    def _has_quotas(self, namespace: str) -> bool:
        """Whether the namespace has a quota: one keys-only range of at most one key (the pod
        create path pays this and nothing more when there is none)."""
        bounds = self._bounds.get(namespace)
        if bounds is None:
            if len(self._bounds) >= MAX_BOUNDS:
                self._bounds.clear()
            prefix = self.objects.prefix(self.quotas, namespace)
            bounds = self._bounds[namespace] = (prefix, prefix_end(prefix))
        return bool(self.objects.store.range(bounds[0], bounds[1], keys_only=True, limit=1).kvs)

    async def _evaluate(self, rt: ResourceType, ev: Evaluator, obj: Obj, old: Obj | None, *, namespace: str,
                        dry_run: bool) -> None:
        only: set[str] | None = None  # on a retry: the quotas whose write failed
        last: errors.StatusError | None = None
        for _ in range(1 + RETRIES):
            quotas = self.lookups.items(self.quotas, namespace)
            if only is not None:
                quotas = [q for q in quotas if _name(q) in only]
            try:
                charges = check_request(quotas, ev, obj, old, now=self.clock())
            except QuotaError as e:
                raise errors.forbidden(rt, _name(obj), str(e)) from None
            if dry_run or not charges:
                return
            only = set()
            for charge in charges:
                try:
                    await self._write(namespace, charge)
                except errors.StatusError as e:
                    only.add(_name(charge.quota))
                    last = e
            if not only:
                return
        assert last is not None
        raise last

    async def _write(self, namespace: str, charge: Charge) -> None:
        """UpdateQuotaStatus: status.used replaced if the quota is still the version read."""
        quota = charge.quota
        body = json_copy(quota)
        body["status"] = {**(body.get("status") or {}), "used": to_json(charge.used)}
        revision = int(quota["metadata"]["resourceVersion"])
        await self.objects.replace(self.quotas, namespace, _name(quota), body, expect_revision=revision)
