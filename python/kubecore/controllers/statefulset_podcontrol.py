"""How the StatefulSet controller writes pods and claims (upstream stateful_pod_control.go).

- `create_stateful_pod`: the pod's claims first (one per volumeClaimTemplate, from the claim
  cache, created when missing), then the pod under its fixed name, then the claims' owner
  references for the retention policy (`statefulset_pvc`).
- `update_stateful_pod`: restore identity (name labels) and storage (claim volumes, creating missing
  claims), fix claim owner references; PUT the pod only if something changed, re-reading it from
  the cache and retrying after a conflict.
- `delete_stateful_pod`, `pod_claim_is_stale` (with whenScaled=Delete, a claim still owned by a
  previous pod of that name blocks creating the pod until the garbage collector removed it).

Every write records upstream's event on the set:

    SuccessfulCreate  "create Pod web-0 in StatefulSet web successful"
    FailedCreate      "create Pod web-0 in StatefulSet web failed error: <error>"
    SuccessfulCreate  "create Claim data-web-0 Pod web-0 in StatefulSet web success"
    FailedCreate      "create Claim data-web-0 for Pod web-0 in StatefulSet web failed error: <error>"
    (and the same for update and delete)
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from kubecore.client.errors import AlreadyExists, Conflict
from kubecore.client.indexer import Indexer
from kubecore.client.resource import ResourceClient
from kubecore.controllers.controller_utils import meta
from kubecore.controllers.podcontrol import NORMAL, WARNING, EventRecorderLike
from kubecore.controllers.refmanager import AggregateError
from kubecore.controllers.statefulset_pvc import (
    POD_API_VERSION, POD_KIND, claim_owner_refs_for, has_stale_owner_ref, has_unexpected_controller,
    is_claim_owner_up_to_date, with_owner_refs,
)
from kubecore.controllers.statefulset_utils import (
    RETAIN, claim_name, claim_templates, identity_matches, ordinal_of, persistent_volume_claims, retention_policy,
    storage_matches, update_identity, update_storage,
)

log = logging.getLogger(__name__)

Obj = dict[str, Any]
UPDATE_RETRIES = 5


class StatefulPodControl:
    """Pod and claim writes for the StatefulSet controller; reads come from the informer caches."""

    def __init__(self, *, pods: ResourceClient, claims: ResourceClient, pod_indexer: Indexer,
                 claim_indexer: Indexer, recorder: EventRecorderLike) -> None:
        self.pods = pods
        self.claims = claims
        self.pod_indexer = pod_indexer
        self.claim_indexer = claim_indexer
        self.recorder = recorder

    # -- events -----------------------------------------------------------------------------------
    def record_pod_event(self, verb: str, set_: Obj, pod: Obj, err: BaseException | None) -> None:
        pod_name, set_name = meta(pod).get("name"), meta(set_).get("name")
        if err is None:
            self.recorder.event(set_, NORMAL, reason=f"Successful{verb.title()}",
                                message=f"{verb} Pod {pod_name} in StatefulSet {set_name} successful")
        else:
            self.recorder.event(set_, WARNING, reason=f"Failed{verb.title()}",
                                message=f"{verb} Pod {pod_name} in StatefulSet {set_name} failed error: {err}")

    def record_claim_event(self, verb: str, set_: Obj, pod: Obj, claim: Obj, err: BaseException | None) -> None:
        names = (meta(claim).get("name"), meta(pod).get("name"), meta(set_).get("name"))
        if err is None:
            self.recorder.event(set_, NORMAL, reason=f"Successful{verb.title()}",
                                message="%s Claim %s Pod %s in StatefulSet %s success" % (verb, *names))
        else:
            self.recorder.event(set_, WARNING, reason=f"Failed{verb.title()}",
                                message="%s Claim %s for Pod %s in StatefulSet %s failed error: %s"
                                % (verb, *names, err))

    # -- reads --------------------------------------------------------------------------------------
    def get_claim(self, namespace: str, name: str) -> Obj | None:
        return self.claim_indexer.get_by_key(f"{namespace}/{name}")

    # -- pods ---------------------------------------------------------------------------------------
    async def create_stateful_pod(self, set_: Obj, pod: Obj) -> None:
        try:
            await self.create_persistent_volume_claims(set_, pod)
        except Exception as e:
            self.record_pod_event("create", set_, pod, e)
            raise
        namespace = str(meta(set_).get("namespace") or "")
        try:
            await self.pods.create(pod, namespace=namespace)
        except AlreadyExists:
            raise  # no event: the cache is behind, the next sync sees the pod
        except Exception as e:
            self.record_pod_event("create", set_, pod, e)
            raise
        try:
            await self.update_pod_claim_for_retention_policy(set_, pod)
        except Exception as e:
            self.record_pod_event("update", set_, pod, e)
            raise
        self.record_pod_event("create", set_, pod, None)

    async def update_stateful_pod(self, set_: Obj, pod: Obj) -> None:
        """Make an existing pod conform to the set's identity, storage and claim policy."""
        pod = copy.deepcopy(pod)
        attempted = False
        error: BaseException | None = None
        for attempt in range(UPDATE_RETRIES):
            consistent = True
            if not identity_matches(set_, pod):
                update_identity(set_, pod)
                consistent = False
            try:
                if not storage_matches(set_, pod):
                    update_storage(set_, pod)
                    consistent = False
                    await self.create_persistent_volume_claims(set_, pod)
                if not self.claims_match_retention_policy(set_, pod):
                    await self.update_pod_claim_for_retention_policy(set_, pod)
                    consistent = False
            except Exception as e:
                self.record_pod_event("update", set_, pod, e)
                raise
            if consistent:
                return
            attempted = True
            try:
                await self.pods.update(pod, namespace=str(meta(set_).get("namespace") or ""))
                error = None
                break
            except Conflict as e:
                error = e
                fresh = self.pod_indexer.get_by_key(f"{meta(set_).get('namespace')}/{meta(pod).get('name')}")
                if fresh is not None:
                    pod = copy.deepcopy(fresh)
                if attempt == UPDATE_RETRIES - 1:
                    break
            except Exception as e:
                error = e
                break
        if attempted:
            self.record_pod_event("update", set_, pod, error)
        if error is not None:
            raise error

    async def delete_stateful_pod(self, set_: Obj, pod: Obj) -> None:
        try:
            await self.pods.delete(str(meta(pod).get("name")), namespace=str(meta(pod).get("namespace") or ""))
        except Exception as e:
            self.record_pod_event("delete", set_, pod, e)
            raise
        self.record_pod_event("delete", set_, pod, None)

    # -- claims and the retention policy ----------------------------------------------------------
    def _pod_claims(self, set_: Obj, pod: Obj) -> list[tuple[str, Obj | None]]:
        namespace, ordinal = str(meta(set_).get("namespace") or ""), ordinal_of(pod)
        out = []
        for template in claim_templates(set_):
            name = claim_name(set_, str(meta(template).get("name", "")), ordinal)
            out.append((name, self.get_claim(namespace, name)))
        return out

    def claims_match_retention_policy(self, set_: Obj, pod: Obj) -> bool:
        """False when some existing claim's owner references disagree with the policy."""
        return all(claim is None or is_claim_owner_up_to_date(claim, set_, pod)
                   for _, claim in self._pod_claims(set_, pod))

    async def update_pod_claim_for_retention_policy(self, set_: Obj, pod: Obj) -> None:
        for name, claim in self._pod_claims(set_, pod):
            if claim is None:
                log.debug("expected claim %s missing, continuing to pick up in next iteration", name)
                continue
            if has_unexpected_controller(claim, set_, pod):
                self.recorder.event(set_, WARNING, reason="ConflictingController",
                                    message=f"PersistentVolumeClaim {name} has a conflicting OwnerReference that "
                                            "acts as a manging controller, the retention policy is ignored for "
                                            "this claim")
            if is_claim_owner_up_to_date(claim, set_, pod):
                continue
            updated = with_owner_refs(claim, claim_owner_refs_for(claim, set_, pod))
            try:
                await self.claims.update(updated, namespace=str(meta(claim).get("namespace") or ""))
            except Exception as e:
                raise RuntimeError(f"could not update claim {name} for delete policy ownerRefs: {e}") from e

    def pod_claim_is_stale(self, set_: Obj, pod: Obj) -> bool:
        """With whenScaled=Delete, a claim owned by another pod of this name blocks the create."""
        if retention_policy(set_)[1] == RETAIN:
            return False
        return any(claim is not None and has_stale_owner_ref(claim, pod, api_version=POD_API_VERSION, kind=POD_KIND)
                   for _, claim in self._pod_claims(set_, pod))

    async def create_missing_persistent_volume_claims(self, set_: Obj, pod: Obj) -> None:
        await self.create_persistent_volume_claims(set_, pod)
        try:
            await self.update_pod_claim_for_retention_policy(set_, pod)
        except Exception as e:
            self.record_pod_event("update", set_, pod, e)
            raise

    async def create_persistent_volume_claims(self, set_: Obj, pod: Obj) -> None:
        """Create every missing claim of `pod`; raise all failures together."""
        errors: list[BaseException] = []
        namespace = str(meta(set_).get("namespace") or "")
        for claim in persistent_volume_claims(set_, ordinal_of(pod)).values():
            name = str(claim["metadata"]["name"])
            existing = self.get_claim(namespace, name)
            if existing is None:
                try:
                    await self.claims.create(claim, namespace=namespace)
                    self.record_claim_event("create", set_, pod, claim, None)
                except AlreadyExists as e:
                    errors.append(RuntimeError(f"failed to create PVC {name}: {e}"))
                except Exception as e:
                    errors.append(RuntimeError(f"failed to create PVC {name}: {e}"))
                    self.record_claim_event("create", set_, pod, claim, e)
            elif meta(existing).get("deletionTimestamp"):
                errors.append(RuntimeError(f"pvc {name} is being deleted"))
        if errors:
            raise errors[0] if len(errors) == 1 else AggregateError(errors)
