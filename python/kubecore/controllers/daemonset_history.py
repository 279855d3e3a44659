"""A DaemonSet's ControllerRevisions (upstream pkg/controller/daemon/update.go: constructHistory,
snapshot, dedupCurHistories, cleanupHistory, controlledHistories).

Every sync first settles the history:

1. Claim revisions: owned ones matching the selector are kept, owned ones that stopped matching
   released, matching orphans adopted (after re-reading the DaemonSet from the server).
2. A revision without the controller-revision-hash label gets its own name as the label.
3. Revisions storing the current template are "current", the rest "old". With none current, a new
   revision "<ds>-<hash>" is created (hash = `compute_hash(template, status.collisionCount)`,
   revision = highest old + 1). A name clash with other data bumps status.collisionCount and
   fails the sync, so the retry uses a new name. Several current revisions are deduplicated:
   the highest-numbered is kept, pods are relabelled to its hash, the others deleted. A current
   revision numbered below an old one is renumbered (a rollback: `kubectl rollout undo`).

After the pods are reconciled, `cleanup_history` deletes old revisions beyond
revisionHistoryLimit, lowest revision first, skipping any a pod still carries the hash of.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kubecore.client.errors import AlreadyExists, NotFound
from kubecore.client.indexer import NAMESPACE_INDEX
from kubecore.client.resource import ResourceClient
from kubecore.controllers.controller_utils import Selector, get_controller_of, labels_of, meta
from kubecore.controllers.daemonset_util import (
    API_VERSION, KIND, UNIQUE_LABEL, collision_count, get_patch, matches_revision, revision_history_limit, template,
)
from kubecore.controllers.history import ControllerHistory, compute_hash, max_revision, revision_number

log = logging.getLogger(__name__)

Obj = dict[str, Any]
FreshGetter = Callable[[], Awaitable[Obj]]


class DaemonSetHistory:
    """History operations of the DaemonSet controller (reads from the revision cache)."""

    def __init__(self, *, history: ControllerHistory, ds_client: ResourceClient, pods: ResourceClient) -> None:
        self.history = history
        self.ds_client = ds_client
        self.pods = pods

    async def controlled_histories(self, ds: Obj, selector: Selector, fresh: FreshGetter) -> list[Obj]:
        """The revisions `ds` controls after adopting and releasing (module step 1)."""
        uid, deleting = meta(ds).get("uid"), bool(meta(ds).get("deletionTimestamp"))
        namespace = str(meta(ds).get("namespace") or "")
        checked = False
        out: list[Obj] = []
        for rev in self.history.indexer.by_index(NAMESPACE_INDEX, namespace):
            ref, matches = get_controller_of(rev), selector.matches(labels_of(rev))
            if ref is not None:
                if ref.get("uid") != uid:
                    continue
                if matches:
                    out.append(rev)
                elif not deleting:
                    await self.history.release_controller_revision(ds, rev)
                continue
            if deleting or not matches or meta(rev).get("deletionTimestamp"):
                continue
            if not checked:
                live = await fresh()
                if meta(live).get("deletionTimestamp"):
                    raise RuntimeError(f"{namespace}/{meta(ds).get('name')} has just been deleted at "
                                       f"{meta(live).get('deletionTimestamp')}")
                checked = True
            try:
                out.append(await self.history.adopt_controller_revision(ds, api_version=API_VERSION, kind=KIND,
                                                                        revision=rev))
            except NotFound:
                continue
        return out

    async def construct_history(self, ds: Obj, selector: Selector, *, fresh: FreshGetter,
                                daemon_pods: Callable[[], Awaitable[list[Obj]]]) -> tuple[Obj, list[Obj]]:
        """(the current revision, the old ones), creating or renumbering as needed (steps 2-3)."""
        current: list[Obj] = []
        old: list[Obj] = []
        namespace = str(meta(ds).get("namespace") or "")
        for rev in await self.controlled_histories(ds, selector, fresh):
            if UNIQUE_LABEL not in labels_of(rev):
                labelled = copy.deepcopy(rev)
                labelled["metadata"].setdefault("labels", {})[UNIQUE_LABEL] = meta(rev).get("name")
                rev = await self.history.client.update(labelled, namespace=namespace)
            (current if matches_revision(ds, rev) else old).append(rev)
        next_number = max_revision(old) + 1
        if not current:
            return await self.snapshot(ds, next_number), old
        cur = await self.dedup(ds, current, daemon_pods)
        if revision_number(cur) < next_number:
            cur = await self.history.update_controller_revision(cur, next_number)
        return cur, old

    async def dedup(self, ds: Obj, currents: list[Obj], daemon_pods: Callable[[], Awaitable[list[Obj]]]) -> Obj:
        """Keep the highest-numbered current revision; relabel pods to it, delete the others."""
        if len(currents) == 1:
            return currents[0]
        keep = currents[0]
        for rev in currents:
            if revision_number(rev) >= revision_number(keep):
                keep = rev
        keep_hash = labels_of(keep).get(UNIQUE_LABEL)
        namespace = str(meta(ds).get("namespace") or "")
        for pod in await daemon_pods():
            if labels_of(pod).get(UNIQUE_LABEL) != keep_hash:
                await self.pods.patch(str(meta(pod).get("name")), {"metadata": {"labels": {UNIQUE_LABEL: keep_hash}}},
                                      namespace=namespace, patch_type="merge")
        for rev in currents:
            if meta(rev).get("name") != meta(keep).get("name"):
                await self.history.delete_controller_revision(rev)
        return keep

    def new_revision(self, ds: Obj, revision: int) -> Obj:
        """The unsaved revision of the DaemonSet's current template."""
        hash_ = compute_hash(template(ds), collision_count(ds))
        m = meta(ds)
        labels = dict((template(ds).get("metadata") or {}).get("labels") or {})
        labels[UNIQUE_LABEL] = hash_
        rev_meta: Obj = {"name": f"{m.get('name')}-{hash_}", "namespace": m.get("namespace"), "labels": labels,
                         "ownerReferences": [{"apiVersion": API_VERSION, "kind": KIND, "name": m.get("name"),
                                              "uid": m.get("uid"), "controller": True, "blockOwnerDeletion": True}]}
        if m.get("annotations"):
            rev_meta["annotations"] = dict(m["annotations"])
        return {"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": rev_meta, "data": get_patch(ds),
                "revision": revision}

    async def snapshot(self, ds: Obj, revision: int) -> Obj:
        """Create the current revision; on a clash with other data bump the collision count and
        raise (the retry computes a new name)."""
        wanted = self.new_revision(ds, revision)
        namespace, name = str(meta(ds).get("namespace") or ""), wanted["metadata"]["name"]
        try:
            return await self.history.client.create(wanted, namespace=namespace)
        except AlreadyExists as outer:
            existing = await self.history.client.get(name, namespace=namespace)
            if matches_revision(ds, existing):
                return existing
            live = await self.ds_client.get(str(meta(ds).get("name")), namespace=namespace)
            if collision_count(live) != collision_count(ds):
                raise RuntimeError(f"found a stale collision count ({collision_count(ds)}, expected "
                                   f"{collision_count(live)}) of DaemonSet {meta(ds).get('name')!r} while processing; "
                                   "will retry until it is updated") from outer
            bumped = (collision_count(live) or 0) + 1
            live.setdefault("status", {})["collisionCount"] = bumped
            await self.ds_client.update_status(live, namespace=namespace)
            log.info("found a hash collision for DaemonSet %s - bumping collisionCount to %d to resolve it",
                     meta(ds).get("name"), bumped)
            raise

    async def cleanup_history(self, ds: Obj, old: list[Obj], live_hashes: set[str]) -> None:
        """Delete old revisions beyond the limit, oldest first, keeping those pods still run."""
        to_kill = len(old) - revision_history_limit(ds)
        if to_kill <= 0:
            return
        for rev in sorted(old, key=revision_number):
            if to_kill <= 0:
                break
            if labels_of(rev).get(UNIQUE_LABEL) in live_hashes:
                continue
            await self.history.delete_controller_revision(rev)
            to_kill -= 1
