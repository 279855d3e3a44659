"""What a DELETE does to one object: upstream's generic registry delete, as a pure decision.

The steps, in upstream's order (registry/rest/delete.go ``BeforeDelete`` and the generic store's
``Delete`` / ``updateForGracefulDeletionAndFinalizers``):

1. DeleteOptions are validated (422 ``DeleteOptions.meta.k8s.io "" is invalid``) and the
   preconditions (uid, resourceVersion) checked (409).
2. Graceful deletion (pods only): the grace period comes from the options, else the pod's
   ``terminationGracePeriodSeconds``; an unscheduled or finished pod gets 0. A positive period
   sets ``deletionTimestamp = now + period`` and ``deletionGracePeriodSeconds`` and leaves the pod
   for its kubelet; 0 deletes it now. A pod already being deleted may only be given a shorter
   period; otherwise the delete changes nothing ("pending").
3. Garbage-collector finalizers: ``orphan`` or ``foregroundDeletion`` are added or removed as
   the propagation policy (or orphanDependents, or the object's existing finalizers, or the
   kind's default) says. Core/v1 ReplicationControllers and batch/v1 Jobs orphan by default.
4. An object with finalizers is only marked (``deletionTimestamp``, grace 0, generation bumped
   the first time); the last finalizer's removal deletes it (see ``Resources._store_update``).
   Anything else is removed from the store.

The answer: the marked object (200, or 202 when orphanDependents=false was asked), the removed
object for the kinds whose storage returns it (pods, services, ...), else a ``Status`` Success
naming the object (details.kind is the *resource*, as upstream sets it).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from kubecore.api.jsoncopy import json_copy
from kubecore.api import errors
from kubecore.api.registry import ResourceType

Obj = dict[str, Any]

ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"
PROPAGATION_POLICIES = ("Foreground", "Background", "Orphan")

# Storages with ReturnDeletedObject: a DELETE that removes the object answers with it.
RETURNS_DELETED_OBJECT = frozenset({
    ("", "pods"), ("", "services"), ("", "serviceaccounts"), ("", "persistentvolumes"),
    ("", "persistentvolumeclaims"), ("", "namespaces"),
})
# Kinds whose strategy's DefaultGarbageCollectionPolicy is OrphanDependents (kept for backwards
# compatibility in these group/versions); every other kind deletes dependents in the background.
ORPHAN_BY_DEFAULT = frozenset({("", "v1", "replicationcontrollers"), ("batch", "v1", "jobs")})
DEFAULT_POD_GRACE_SECONDS = 30


@dataclass(frozen=True)
class DeleteOptions:
    """meta/v1 DeleteOptions, validated."""

    grace_period: int | None = None
    propagation: str | None = None
    orphan_dependents: bool | None = None
    uid: str | None = None
    resource_version: str | None = None


@dataclass(frozen=True)
class Outcome:
    """``remove``: delete `obj` from the store; ``mark``: store `obj` (deletionTimestamp and/or
    finalizers changed); ``pending``: nothing to write, `obj` is the current object."""

    action: Literal["remove", "mark", "pending"]
    obj: Obj


def _options_error(causes: list[errors.FieldError]) -> errors.StatusError:
    return errors.invalid(("meta.k8s.io", "DeleteOptions"), "", causes)


def _int_option(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise errors.bad_request(f"invalid {name}: must be an integer")
    try:
        return int(value)
    except ValueError:
        raise errors.bad_request(f"invalid {name} {value!r}: must be an integer") from None


def _bool_option(value: Any, name: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    if value in ("true", "1"):
        return True
    if value in ("false", "0"):
        return False
    raise errors.bad_request(f"invalid {name} {value!r}: must be a boolean")


def parse_options(body: Mapping[str, Any], query: Mapping[str, str]) -> DeleteOptions:
    """DeleteOptions from the request body or, without one, from the query parameters."""
    src: Mapping[str, Any] = body if body else query
    pre = body.get("preconditions") or {} if body else {}
    if not isinstance(pre, Mapping):
        raise errors.bad_request("preconditions must be an object")
    opts = DeleteOptions(
        grace_period=_int_option(src.get("gracePeriodSeconds"), "gracePeriodSeconds"),
        propagation=src.get("propagationPolicy") or None,
        orphan_dependents=_bool_option(src.get("orphanDependents"), "orphanDependents"),
        uid=pre.get("uid") or None,
        resource_version=pre.get("resourceVersion") or None,
    )
    causes: list[errors.FieldError] = []
    if opts.orphan_dependents is not None and opts.propagation is not None:
        causes.append(errors.FieldError.invalid(
            "propagationPolicy", opts.propagation, "orphanDependents and deletionPropagation cannot be both set"))
    if opts.propagation is not None and opts.propagation not in PROPAGATION_POLICIES:
        causes.append(errors.FieldError.not_supported(
            "propagationPolicy", opts.propagation, [*PROPAGATION_POLICIES, "nil"]))
    if causes:
        raise _options_error(causes)
    return opts


def check_preconditions(rt: ResourceType, obj: Obj, opts: DeleteOptions) -> None:
    """409 when the uid or resourceVersion precondition does not hold (BeforeDelete's texts)."""
    m = obj["metadata"]
    gr = (rt.group, rt.kind)  # upstream names the kind here, not the resource
    if opts.uid is not None and opts.uid != m.get("uid"):
        raise errors.conflict(gr, m["name"], f"the UID in the precondition ({opts.uid}) does not match the UID in "
                              f"record ({m.get('uid', '')}). The object might have been deleted and then recreated")
    if opts.resource_version is not None and opts.resource_version != m.get("resourceVersion"):
        raise errors.conflict(gr, m["name"], f"the ResourceVersion in the precondition ({opts.resource_version}) does "
                              f"not match the ResourceVersion in record ({m.get('resourceVersion', '')}). "
                              "The object might have been modified")


def rfc3339(t: dt.datetime) -> str:
    return t.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(s: str) -> dt.datetime | None:
    try:
        return dt.datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)
    except (TypeError, ValueError):
        return None


def _is_pod(rt: ResourceType) -> bool:
    return rt.group == "" and rt.resource == "pods"


def _pod_grace(pod: Obj, requested: int | None) -> int:
    """The pod strategy's CheckGracefulDelete."""
    spec = pod.get("spec") or {}
    period = requested if requested is not None else spec.get("terminationGracePeriodSeconds")
    if period is None:
        period = DEFAULT_POD_GRACE_SECONDS
    if not spec.get("nodeName"):
        period = 0  # never scheduled: nothing runs it
    if (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded"):
        period = 0
    return 1 if period < 0 else int(period)


def _bump_generation(m: Obj) -> None:
    if isinstance(m.get("generation"), int) and m["generation"] > 0:
        m["generation"] += 1


def _graceful(rt: ResourceType, obj: Obj, opts: DeleteOptions, now: dt.datetime) -> tuple[bool, bool]:
    """BeforeDelete on `obj` (modified in place): (graceful, pending)."""
    if not _is_pod(rt):
        return False, False
    m = obj["metadata"]
    requested = opts.grace_period
    if requested is not None and requested < 0:
        requested = 1  # negative periods mean 1 s on the delete path
    current = m.get("deletionGracePeriodSeconds")
    if m.get("deletionTimestamp"):
        if not current:
            return False, False
        if requested is None or requested >= current:
            return False, True
        started = _parse_time(m["deletionTimestamp"])
        base = (started - dt.timedelta(seconds=current)) if started else now
        m["deletionTimestamp"] = rfc3339(base + dt.timedelta(seconds=requested))
        m["deletionGracePeriodSeconds"] = requested
        return True, False
    period = _pod_grace(obj, requested)
    m["deletionTimestamp"] = rfc3339(now + dt.timedelta(seconds=period))
    m["deletionGracePeriodSeconds"] = period
    _bump_generation(m)
    return True, False


def _orphans(rt: ResourceType, finalizers: list[str], opts: DeleteOptions) -> bool:
    if opts.orphan_dependents is not None:
        return opts.orphan_dependents
    if opts.propagation is not None:
        return opts.propagation == "Orphan"
    for f in finalizers:
        if f in (ORPHAN, FOREGROUND):
            return f == ORPHAN
    return (rt.group, rt.version, rt.resource) in ORPHAN_BY_DEFAULT


def _foreground(finalizers: list[str], opts: DeleteOptions) -> bool:
    if opts.orphan_dependents is not None:
        return False
    if opts.propagation is not None:
        return opts.propagation == "Foreground"
    for f in finalizers:
        if f in (ORPHAN, FOREGROUND):
            return f == FOREGROUND
    return False


def gc_finalizers(rt: ResourceType, finalizers: list[str], opts: DeleteOptions) -> list[str]:
    """The object's finalizers with the garbage collector's two set as the options ask
    (deletionFinalizersForGarbageCollection); unchanged when nothing needs to change."""
    kept = [f for f in finalizers if f not in (ORPHAN, FOREGROUND)]
    if _orphans(rt, finalizers, opts):
        kept.append(ORPHAN)
    if _foreground(finalizers, opts):
        kept.append(FOREGROUND)
    return finalizers if set(kept) == set(finalizers) else kept


def mark_as_deleting(m: Obj, now: dt.datetime) -> None:
    """A non-graceful object with finalizers: deletionTimestamp now (never later than one
    already set), grace 0, generation bumped the first time."""
    existing = _parse_time(m.get("deletionTimestamp") or "")
    if not m.get("deletionTimestamp"):
        _bump_generation(m)
    if existing is None or existing > now:
        m["deletionTimestamp"] = rfc3339(now)
    m["deletionGracePeriodSeconds"] = 0


def plan(rt: ResourceType, old: Obj, opts: DeleteOptions, *, now: dt.datetime) -> Outcome:
    """What deleting `old` with `opts` does (old is not modified)."""
    check_preconditions(rt, old, opts)
    new = json_copy(old)
    graceful, pending = _graceful(rt, new, opts, now)
    if pending:
        return Outcome("pending", old)
    m = new["metadata"]
    finalizers = gc_finalizers(rt, list(m.get("finalizers") or []), opts)
    if finalizers:
        m["finalizers"] = finalizers
    else:
        m.pop("finalizers", None)
    if not graceful:
        if not finalizers:
            return Outcome("remove", old)
        mark_as_deleting(m, now)
    elif not finalizers and not m.get("deletionGracePeriodSeconds"):
        return Outcome("remove", old)
    if new == old:
        return Outcome("pending", old)
    return Outcome("mark", new)


def removed_response(rt: ResourceType, obj: Obj) -> Obj:
    """The body of a DELETE that removed `obj` (finalizeDelete)."""
    if (rt.group, rt.resource) in RETURNS_DELETED_OBJECT:
        return obj
    m = obj.get("metadata") or {}
    return errors.success_status(name=m.get("name", ""), group=rt.group, kind=rt.resource, uid=m.get("uid", ""))


def response_code(opts: DeleteOptions, removed: bool) -> int:
    """202 only when the object stays and the client asked orphanDependents=false."""
    return 202 if not removed and opts.orphan_dependents is False else 200


def should_delete_during_update(rt: ResourceType, old: Obj, new: Obj) -> bool:
    """An update that removes the last finalizer of an object being deleted without a pending
    grace period deletes it (ShouldDeleteDuringUpdate; namespaces also wait for spec.finalizers)."""
    nm, om = new.get("metadata") or {}, old.get("metadata") or {}
    if nm.get("finalizers") or not om.get("deletionTimestamp"):
        return False
    if rt.group == "" and rt.resource == "namespaces" and (new.get("spec") or {}).get("finalizers"):
        return False
    return not om.get("deletionGracePeriodSeconds")
