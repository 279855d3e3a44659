"""Informer events into the cache and the queue (upstream eventhandlers.go).

Pods come from one informer of all pods, split by two filters as upstream's
FilteringResourceEventHandlers split them:

    queue filter   not terminal, spec.nodeName == "", schedulerName one of our profiles
    cache filter   not terminal, spec.nodeName != ""

For each filter an update becomes an update when old and new both pass, an add when only the
new one passes (a pod bound by our binding enters the cache, confirming the assumed pod), and a
delete when only the old one passes (the bound pod leaves the queue; a pod that Succeeded or
Failed leaves the cache — upstream's informer drops terminal pods with a field selector, here the
filter does it). Upstream's special cases:

- an update of a pod the cache holds as assumed does not reach the queue (it is being bound);
- a pending pod that got bound leaves the queue without waking anyone (upstream's inBinding:
  the cache's add is the event);
- a deleted pending pod that waits at Permit is rejected there, and the room it held wakes the
  unschedulable pods (AssignedPodDelete); so does a deleted pending pod that was nominated, for
  pods of lower or equal priority; deleting any other pending pod moves no one;
- a deleted bound pod frees its room: unschedulable pods that wait for that move.

Nodes: add / update / delete to the cache and the queue (`node_added` etc.). PVCs, PVs and
StorageClasses only move unschedulable pods (`move_all_to_active_or_backoff`).
Cache errors (an event the cache's state machine does not expect) are logged, not raised, as
upstream logs them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from kubecore.client.indexer import DeletedFinalStateUnknown
from kubecore.client.informer import EventHandlerFuncs
from kubecore.scheduler import events as ev
from kubecore.scheduler.cache import CacheError
from kubecore.scheduler.events import ActionType, ClusterEvent
from kubecore.scheduler.namespaces import NamespaceResolver
from kubecore.scheduler.podinfo import DEFAULT_SCHEDULER_NAME, Obj, pod_key, pod_priority, scheduler_name
from kubecore.scheduler.registry import SchedulerCore

__all__ = ["PodHandlers", "node_handler", "storage_handler", "is_terminal", "assigned", "unwrap"]

log = logging.getLogger(__name__)

TERMINAL_PHASES = ("Succeeded", "Failed")
_CACHE, _QUEUE = 1, 2
"""What `PodHandlers._passes` answers: the cache filter, the queue filter (0: neither)."""


def _same(pod: Obj) -> Obj:
    return pod


def unwrap(obj: Obj | DeletedFinalStateUnknown) -> Obj:
    """The object of a delete notification (the last known state of a tombstone)."""
    if isinstance(obj, DeletedFinalStateUnknown):
        inner: Obj = obj.obj
        return inner
    return obj


def is_terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in TERMINAL_PHASES


def assigned(pod: Obj) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))


class PodHandlers:
    """The two filtered pod handlers over one core (see the module docstring)."""

    def __init__(self, core: SchedulerCore, *, scheduler_names: Collection[str] | None = None,
                 namespaces: NamespaceResolver | None = None,
                 json_of: Callable[[Obj], bytes | None] | None = None) -> None:
        self.core = core
        self.json_of = json_of
        """The JSON bytes of an informer pod when the informer has them (`Indexer.json_of`): the
        queue then hands them to the native kernels instead of encoding the pod again."""
        self.names = frozenset(scheduler_names if scheduler_names is not None else core.frameworks)
        self.namespaces = namespaces
        self.resolve = namespaces.resolve if namespaces is not None else _same
        """Applied to a pod before the queue or the cache sees it (namespaces.NamespaceResolver)."""

    def for_queue(self, pod: Obj) -> bool:
        return not is_terminal(pod) and not assigned(pod) and scheduler_name(pod) in self.names

    @staticmethod
    def for_cache(pod: Obj) -> bool:
        return not is_terminal(pod) and assigned(pod)

    # -- the informer's three calls, dispatched through both filters -------------------------------

    def _passes(self, pod: Obj) -> int:
        """Which filter `pod` passes: _CACHE, _QUEUE or 0 (both filters in one look at the pod)."""
        status = pod.get("status")
        if status and status.get("phase") in TERMINAL_PHASES:
            return 0
        spec = pod.get("spec") or {}
        if spec.get("nodeName"):
            return _CACHE
        return _QUEUE if (spec.get("schedulerName") or DEFAULT_SCHEDULER_NAME) in self.names else 0

    def on_add(self, pod: Obj, is_in_initial_list: bool = False) -> None:
        pod = self.resolve(pod)
        passes = self._passes(pod)
        if passes == _CACHE:
            self.add_to_cache(pod)
        elif passes == _QUEUE:
            self.core.queue.add(pod, raw=self.json_of(pod) if self.json_of is not None else None)

    def on_update(self, old: Obj, new: Obj) -> None:
        resolve = self.resolve
        old, new = resolve(old), resolve(new)
        was, now = self._passes(old), self._passes(new)
        if was == _CACHE:
            if now == _CACHE:
                self.update_in_cache(old, new)
            else:
                self.delete_from_cache(old)
        elif now == _CACHE:
            self.add_to_cache(new)
        if was == _QUEUE:
            if now == _QUEUE:
                self.update_in_queue(old, new)
            elif now == _CACHE:
                self.delete_from_queue(old, in_binding=True)  # bound: not a removal (upstream inBinding)
            else:
                self.delete_from_queue(old)
        elif now == _QUEUE:
            self.core.queue.add(new)

    def on_delete(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        pod = unwrap(obj)
        if self.namespaces is not None:
            self.namespaces.forget(pod)
        if self.for_cache(pod):
            self.delete_from_cache(pod)
        elif self.for_queue(pod):
            self.delete_from_queue(pod)

    def on_namespaces_changed(self) -> None:
        """A Namespace was added, relabelled or deleted: pods whose affinity terms select
        namespaces by label and now resolve differently reach the cache and queue as updates."""
        if self.namespaces is None:
            return
        for old, new in self.namespaces.refresh():
            self._filtered(self.for_cache, old, new, add=self.add_to_cache, update=self.update_in_cache,
                           delete=self.delete_from_cache)
            self._filtered(self.for_queue, old, new, add=self.core.queue.add, update=self.core.queue.update,
                           delete=self.delete_from_queue)

    def namespace_handler(self) -> EventHandlerFuncs:
        """The handlers for the Namespace informer (label changes only matter)."""
        def on_add(ns: Obj, is_in_initial_list: bool = False) -> None:
            self.on_namespaces_changed()

        def on_update(old: Obj, new: Obj) -> None:
            if (old.get("metadata") or {}).get("labels") != (new.get("metadata") or {}).get("labels"):
                self.on_namespaces_changed()

        def on_delete(ns: Obj | DeletedFinalStateUnknown) -> None:
            self.on_namespaces_changed()

        return EventHandlerFuncs(on_add_func=on_add, on_update_func=on_update, on_delete_func=on_delete)

    @staticmethod
    def _filtered(passes: Callable[[Obj], bool], old: Obj, new: Obj, *, add: Callable[[Obj], None],
                  update: Callable[[Obj, Obj], None], delete: Callable[[Obj], None]) -> None:
        was, now = passes(old), passes(new)
        if was and now:
            update(old, new)
        elif now:
            add(new)
        elif was:
            delete(old)

    def handler(self) -> EventHandlerFuncs:
        return EventHandlerFuncs(on_add_func=self.on_add, on_update_func=self.on_update,
                                 on_delete_func=self.on_delete)

    # -- the queue's side (upstream addPodToSchedulingQueue & co) ---------------------------------

    def update_in_queue(self, old: Obj, new: Obj) -> None:
        if (old.get("metadata") or {}).get("resourceVersion") == (new.get("metadata") or {}).get("resourceVersion"):
            return  # a resync: nothing changed
        if self.core.cache.is_assumed(pod_key(new)):
            return
        self.core.queue.update(old, new)

    def delete_from_queue(self, pod: Obj, *, in_binding: bool = False) -> None:
        """Upstream deletePodFromSchedulingQueue: a pod that got bound only leaves the queue (the
        cache's add tells the others); a deleted one frees room only if it was assumed (waiting
        at Permit) or nominated, and then wakes the pods that room may help. Deleting a pod that
        held nothing moves no one."""
        queue = self.core.queue
        queue.delete(pod)
        if in_binding:
            return
        fw = self.core.framework_for(pod)
        if fw is not None and fw.waiting_pods.reject(pod_key(pod), "pod was deleted"):
            # it was assumed: its room is free again for the others
            queue.move_all_to_active_or_backoff(ev.EVENT_ASSIGNED_POD_DELETE, pod, None)
        elif (pod.get("status") or {}).get("nominatedNodeName"):
            # lower or equal priority pods counted it as if it ran on that node
            priority = pod_priority(pod)
            queue.move_all_to_active_or_backoff(ev.EVENT_ASSIGNED_POD_DELETE, pod, None,
                                                pre_check=lambda p: pod_priority(p) <= priority)

    # -- the cache's side (upstream addPodToCache & co) -------------------------------------------

    def add_to_cache(self, pod: Obj) -> None:
        try:
            self.core.cache.add_pod(pod)
        except CacheError as e:
            log.error("scheduler cache AddPod failed: %s", e)
        self.core.queue.assigned_pod_added(pod)

    def update_in_cache(self, old: Obj, new: Obj) -> None:
        try:
            self.core.cache.update_pod(old, new)
        except CacheError as e:
            log.error("scheduler cache UpdatePod failed: %s", e)
        self.core.queue.assigned_pod_updated(old, new)

    def delete_from_cache(self, pod: Obj) -> None:
        try:
            self.core.cache.remove_pod(pod)
        except CacheError as e:
            log.error("scheduler cache RemovePod failed: %s", e)
        self.core.queue.assigned_pod_deleted(pod)


def node_handler(core: SchedulerCore) -> EventHandlerFuncs:
    """Nodes into the cache, and the queue's node events."""

    def add(node: Obj, is_in_initial_list: bool = False) -> None:
        core.cache.add_node(node)
        core.queue.node_added(node)

    def update(old: Obj, new: Obj) -> None:
        core.cache.update_node(new)
        core.queue.node_updated(old, new)

    def delete(obj: Obj | DeletedFinalStateUnknown) -> None:
        node = unwrap(obj)
        core.cache.remove_node(str((node.get("metadata") or {}).get("name") or ""))
        core.queue.node_deleted(node)

    return EventHandlerFuncs(on_add_func=add, on_update_func=update, on_delete_func=delete)


def storage_handler(core: SchedulerCore, resource: str) -> EventHandlerFuncs:
    """PVC / PV / StorageClass events: they only move unschedulable pods (`resource` as in events.py)."""
    move = core.queue.move_all_to_active_or_backoff
    on_add = ClusterEvent(resource, ActionType.ADD)
    on_update = ClusterEvent(resource, ActionType.UPDATE)
    on_delete = ClusterEvent(resource, ActionType.DELETE)

    def add(obj: Obj, is_in_initial_list: bool = False) -> None:
        move(on_add, None, obj)

    def update(old: Obj, new: Obj) -> None:
        move(on_update, old, new)

    def delete(obj: Obj | DeletedFinalStateUnknown) -> None:
        move(on_delete, unwrap(obj), None)

    return EventHandlerFuncs(on_add_func=add, on_update_func=update, on_delete_func=delete)
