"""persistentVolumeClaimRetentionPolicy as owner references on a StatefulSet's claims (upstream
stateful_set_utils.go: isClaimOwnerUpToDate, updateClaimOwnerRefForSetAndPod and helpers).

The controller never deletes a claim itself. It sets owner references and lets the garbage
collector delete the claim when its owner goes away:

    whenScaled  whenDeleted   claim of a pod in range        claim of a scaled-down pod
    Retain      Retain        no reference                   no reference
    Retain      Delete        controller ref -> the set      controller ref -> the set
    Delete      Retain        no reference                   controller ref -> the pod
    Delete      Delete        controller ref -> the set      controller ref -> the pod

So deleting the set (whenDeleted=Delete) deletes the claims that point at it, and scaling down
(whenScaled=Delete) deletes a claim together with its condemned pod.

Claims in a state the policy does not explain are left alone: a reference to a set or pod of our
name but another UID (a previous incarnation: "stale"), or another controller on a claim when the
policy is not Retain/Retain ("unexpected controller": our own references are removed, none added).
"""

from __future__ import annotations

from typing import Any

from kubecore.controllers.controller_utils import meta
from kubecore.controllers.statefulset_utils import (
    API_VERSION, DELETE, KIND, RETAIN, pod_in_ordinal_range, retention_policy,
)

Obj = dict[str, Any]
POD_API_VERSION, POD_KIND = "v1", "Pod"


def _refs(obj: Obj) -> list[Obj]:
    return [r for r in meta(obj).get("ownerReferences") or () if isinstance(r, dict)]


def matches_ref(ref: Obj, obj: Obj, *, api_version: str, kind: str) -> bool:
    """Same group/version, kind and name (the UID is not compared)."""
    return ref.get("apiVersion") == api_version and ref.get("kind") == kind and ref.get("name") == meta(obj).get("name")


def has_owner_ref(target: Obj, owner: Obj) -> bool:
    uid = meta(owner).get("uid")
    return any(r.get("uid") == uid for r in _refs(target))


def has_stale_owner_ref(target: Obj, obj: Obj, *, api_version: str, kind: str) -> bool:
    """The first reference naming `obj` carries another UID."""
    for ref in _refs(target):
        if matches_ref(ref, obj, api_version=api_version, kind=kind):
            return ref.get("uid") != meta(obj).get("uid")
    return False


def has_unexpected_controller(claim: Obj, set_: Obj, pod: Obj) -> bool:
    """Some controller other than this set or pod manages the claim (never with Retain/Retain)."""
    if retention_policy(set_) == (RETAIN, RETAIN):
        return False
    for ref in _refs(claim):
        if matches_ref(ref, set_, api_version=API_VERSION, kind=KIND):
            if ref.get("uid") != meta(set_).get("uid"):
                return True
            continue
        if matches_ref(ref, pod, api_version=POD_API_VERSION, kind=POD_KIND):
            if ref.get("uid") != meta(pod).get("uid"):
                return True
            continue
        if ref.get("controller") is True:
            return True
    return False


def has_non_controller_owner(claim: Obj, set_: Obj, pod: Obj) -> bool:
    uids = {meta(set_).get("uid"), meta(pod).get("uid")}
    return any(r.get("uid") in uids and r.get("controller") is not True for r in _refs(claim))


def is_claim_owner_up_to_date(claim: Obj, set_: Obj, pod: Obj) -> bool:
    """Whether the claim's owner references already say what the policy wants (module table)."""
    if (has_stale_owner_ref(claim, set_, api_version=API_VERSION, kind=KIND)
            or has_stale_owner_ref(claim, pod, api_version=POD_API_VERSION, kind=POD_KIND)):
        return True
    if has_unexpected_controller(claim, set_, pod):
        return not (has_owner_ref(claim, set_) or has_owner_ref(claim, pod))
    if has_non_controller_owner(claim, set_, pod):
        return False
    when_deleted, when_scaled = retention_policy(set_)
    set_ref, pod_ref = has_owner_ref(claim, set_), has_owner_ref(claim, pod)
    scaled_down = not pod_in_ordinal_range(pod, set_)
    if when_scaled == RETAIN and when_deleted == DELETE:
        return set_ref and not pod_ref
    if when_scaled == DELETE and when_deleted == RETAIN:
        return not set_ref and scaled_down == pod_ref
    if when_scaled == DELETE and when_deleted == DELETE:
        return scaled_down != set_ref and scaled_down == pod_ref
    return not set_ref and not pod_ref  # Retain/Retain, and unknown values treated as Retain


def _controller_ref(owner: Obj, *, api_version: str, kind: str) -> Obj:
    m = meta(owner)
    return {"apiVersion": api_version, "kind": kind, "name": m.get("name", ""), "uid": m.get("uid", ""),
            "controller": True, "blockOwnerDeletion": True}


def _add_controller_ref(refs: list[Obj], owner: Obj, *, api_version: str, kind: str) -> list[Obj]:
    if any(r.get("uid") == meta(owner).get("uid") for r in refs):
        return refs
    return [*refs, _controller_ref(owner, api_version=api_version, kind=kind)]


def claim_owner_refs_for(claim: Obj, set_: Obj, pod: Obj) -> list[Obj]:
    """The owner references the claim should carry under the policy (upstream's
    updateClaimOwnerRefForSetAndPod): our old references scrubbed, the wanted ones added."""
    unexpected = has_unexpected_controller(claim, set_, pod)
    refs = [dict(r) for r in _refs(claim)
            if not (matches_ref(r, set_, api_version=API_VERSION, kind=KIND)
                    or matches_ref(r, pod, api_version=POD_API_VERSION, kind=POD_KIND))]
    if unexpected:
        return refs
    when_deleted, when_scaled = retention_policy(set_)
    scaled_down = not pod_in_ordinal_range(pod, set_)
    if when_scaled == RETAIN and when_deleted == DELETE:
        refs = _add_controller_ref(refs, set_, api_version=API_VERSION, kind=KIND)
    elif when_scaled == DELETE and when_deleted == RETAIN:
        if scaled_down:
            refs = _add_controller_ref(refs, pod, api_version=POD_API_VERSION, kind=POD_KIND)
    elif when_scaled == DELETE and when_deleted == DELETE:
        if scaled_down:
            refs = _add_controller_ref(refs, pod, api_version=POD_API_VERSION, kind=POD_KIND)
        else:
            refs = _add_controller_ref(refs, set_, api_version=API_VERSION, kind=KIND)
    return refs


def with_owner_refs(claim: Obj, refs: list[Obj]) -> Obj:
    """A copy of `claim` (metadata copied) carrying `refs`; `claim` is untouched."""
    out = {**claim, "metadata": {**meta(claim)}}
    if refs:
        out["metadata"]["ownerReferences"] = refs
    else:
        out["metadata"].pop("ownerReferences", None)
    return out
