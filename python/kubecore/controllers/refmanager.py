"""Claiming pods: adopt orphans that match a controller's selector, release owned pods that no
longer match (upstream's PodControllerRefManager, pkg/controller/controller_ref_manager.go).

For each pod, `claim_pods` decides (claim_object's table):

    controllerRef            selector matches   controller deleting   action           claimed
    another controller's     -                  -                     ignore           no
    ours                     yes                -                     none             yes
    ours                     no                 no                    release (patch)  no
    ours                     no                 yes                   none             no
    none, pod not deleting   yes                no                    adopt (patch)    yes
    none                     otherwise                                ignore           no

Adoption is a strategic merge patch adding the controller reference and carrying the pod's UID,
so it cannot land on a pod of the same name created since the cache saw it (changing a UID is
refused with 422); the API server also refuses a second controller reference. Before the first
adoption of a pass, `can_adopt` runs once (a live GET of the controller checking it still exists
with the same UID and is not being deleted, upstream's RecheckDeletionTimestamp): the cache may
be behind a deletion. Releasing is a `$patch: delete` of our ownerReference by UID, also carrying
the pod's UID; 404 (pod gone) and 422 (pod recreated, or no such reference) are not errors.

Errors of individual pods are collected: the claimed list is always returned, together with an
`AggregateError` when some adoption or release failed (the caller requeues).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kubecore.client.errors import Invalid, NotFound
from kubecore.controllers.controller_utils import Selector, get_controller_of, labels_of, meta
from kubecore.controllers.podcontrol import PodControl

log = logging.getLogger(__name__)

Obj = dict[str, Any]
CanAdopt = Callable[[], Awaitable[None]]
"""Raises when adoption must not happen (the controller is gone or being deleted)."""


class AggregateError(Exception):
    """Several errors of one claim pass; `errors` holds them in pod order."""

    def __init__(self, errors: list[BaseException]) -> None:
        self.errors = errors
        super().__init__("; ".join(str(e) for e in errors) if len(errors) > 1 else str(errors[0]))


class CannotAdopt(Exception):
    """The live controller failed the adoption recheck."""


def adopt_patch(*, api_version: str, kind: str, owner: Obj, pod: Obj, finalizers: tuple[str, ...] = ()) -> Obj:
    """The adoption patch; `finalizers` are added too (the Job controller's tracking finalizer)."""
    m = meta(owner)
    patch: Obj = {"metadata": {"ownerReferences": [{"apiVersion": api_version, "kind": kind, "name": m.get("name"),
                                                    "uid": m.get("uid"), "controller": True,
                                                    "blockOwnerDeletion": True}],
                               "uid": meta(pod).get("uid")}}
    if finalizers:
        patch["metadata"]["finalizers"] = list(finalizers)
    return patch


def release_patch(*, owner: Obj, pod: Obj) -> Obj:
    return {"metadata": {"ownerReferences": [{"$patch": "delete", "uid": meta(owner).get("uid")}],
                         "uid": meta(pod).get("uid")}}


def recheck_deletion_timestamp(get_fresh: Callable[[], Awaitable[Obj]], *, uid: str) -> CanAdopt:
    """A `CanAdopt` that GETs the controller and refuses if it was replaced or is being deleted."""

    async def can_adopt() -> None:
        try:
            fresh = await get_fresh()
        except Exception as e:
            raise CannotAdopt(f"can't recheck DeletionTimestamp: {e}") from e
        fm = meta(fresh)
        if fm.get("uid") != uid:
            raise CannotAdopt(f"original {fm.get('namespace')}/{fm.get('name')} is gone: got uid {fm.get('uid')}, "
                              f"wanted {uid}")
        if fm.get("deletionTimestamp"):
            raise CannotAdopt(f"{fm.get('namespace')}/{fm.get('name')} has just been deleted at "
                              f"{fm.get('deletionTimestamp')}")

    return can_adopt


class PodControllerRefManager:
    """Claims pods for one controller object in one sync pass (make a new one per pass)."""

    def __init__(self, pod_control: PodControl, controller: Obj, selector: Selector, *, api_version: str,
                 kind: str, can_adopt: CanAdopt | None = None, finalizers: tuple[str, ...] = ()) -> None:
        self.pod_control = pod_control
        self.finalizers = finalizers
        self.controller = controller
        self.selector = selector
        self.api_version = api_version
        self.kind = kind
        self._can_adopt = can_adopt
        self._can_adopt_result: BaseException | None = None
        self._can_adopt_done = False
        m = meta(controller)
        self._uid = m.get("uid")
        self._deleting = bool(m.get("deletionTimestamp"))

    async def can_adopt(self) -> None:
        """Run the recheck at most once per manager; every later call repeats its answer."""
        if not self._can_adopt_done:
            self._can_adopt_done = True
            if self._can_adopt is not None:
                try:
                    await self._can_adopt()
                except Exception as e:
                    self._can_adopt_result = e
        if self._can_adopt_result is not None:
            raise self._can_adopt_result

    def _match(self, pod: Obj) -> bool:
        return self.selector.matches(labels_of(pod))

    async def claim_pods(self, pods: list[Obj]) -> tuple[list[Obj], AggregateError | None]:
        """The pods this controller owns after reconciling each one (see the module table)."""
        claimed: list[Obj] = []
        errors: list[BaseException] = []
        for pod in pods:
            try:
                if await self._claim(pod):
                    claimed.append(pod)
            except Exception as e:
                errors.append(e)
        return claimed, AggregateError(errors) if errors else None

    async def _claim(self, pod: Obj) -> bool:
        ref = get_controller_of(pod)
        if ref is not None:
            if ref.get("uid") != self._uid:
                return False
            if self._match(pod):
                return True
            if self._deleting:
                return False
            try:
                await self.release_pod(pod)
            except NotFound:
                pass
            return False
        if self._deleting or not self._match(pod) or meta(pod).get("deletionTimestamp"):
            return False
        try:
            await self.adopt_pod(pod)
        except NotFound:
            return False
        return True

    async def adopt_pod(self, pod: Obj) -> None:
        pm = meta(pod)
        try:
            await self.can_adopt()
        except Exception as e:
            raise CannotAdopt(f"can't adopt Pod {pm.get('namespace')}/{pm.get('name')} ({pm.get('uid')}): {e}") from e
        patch = adopt_patch(api_version=self.api_version, kind=self.kind, owner=self.controller, pod=pod,
                            finalizers=self.finalizers)
        await self.pod_control.patch_pod(str(pm.get("namespace", "")), str(pm.get("name", "")), patch)

    async def release_pod(self, pod: Obj) -> None:
        pm = meta(pod)
        log.info("patching pod %s/%s to remove its controllerRef to %s %s", pm.get("namespace"), pm.get("name"),
                 self.kind, meta(self.controller).get("name"))
        try:
            await self.pod_control.patch_pod(str(pm.get("namespace", "")), str(pm.get("name", "")),
                                             release_patch(owner=self.controller, pod=pod))
        except (NotFound, Invalid):
            return
