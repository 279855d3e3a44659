"""The binding cycle and handing results back to the queue (upstream bindingCycle, handleSchedulingFailure,
handleBindingCycleError).

    outcome = schedule_one(fw, pinfo)              # scheduling cycle, synchronous
    if isinstance(outcome, Assumed):
        finish_scheduling_cycle(queue, outcome)    # activate the pods plugins asked for
        result = await bind_one(outcome)           # WaitOnPermit, PreBind, Bind, PostBind
        if isinstance(result, Bound): queue.done(key)
        else: record_binding_failure(queue, result)
    else:
        record_failure(queue, outcome)

A failed binding cycle unreserves and forgets the pod (its resources are free again), which
counts as an assigned pod's deletion for the other unschedulable pods; the pod itself goes back
to the queue. A rejection while waiting at Permit is a FitError naming the plugin ("0/1 nodes are
available: 1 <reason>."); a PreBind or Bind failure keeps its own status and message (a rejection
there still makes the PodScheduled reason Unschedulable). The FailedScheduling event and the PodScheduled
condition (reason `Failed.reason`, message `Failed.message`) are the caller's I/O.
"""

from __future__ import annotations

from kubecore.scheduler import events as ev
from kubecore.scheduler.cache import CacheError
from kubecore.scheduler.interface import CLEAR_NOMINATED_NODE
from kubecore.scheduler.podinfo import Obj, pod_key
from kubecore.scheduler.queue import QueueError, SchedulingQueue
from kubecore.scheduler.schedule_one import Assumed, Failed, rejection_failure
from kubecore.scheduler.status import Code, Status

__all__ = ["Bound", "bind_one", "record_failure", "record_binding_failure", "finish_scheduling_cycle"]


class Bound:
    """The pod is bound (the Bind plugin returned Success)."""

    __slots__ = ("assumed",)

    def __init__(self, assumed: Assumed) -> None:
        self.assumed = assumed

    @property
    def key(self) -> str:
        return self.assumed.pinfo.key

    @property
    def node(self) -> str:
        return self.assumed.node

    def __repr__(self) -> str:
        return f"Bound({self.key} -> {self.node})"


def _undo(a: Assumed, status: Status, *, at_permit: bool = False) -> Failed:
    """Unreserve and forget the pod. A rejection while waiting at Permit is a FitError over the
    node (upstream bindingCycle); a PreBind or Bind failure, rejection or not, is reported as its
    own status: it does not make the pod unschedulable (upstream handleBindingCycleError)."""
    fw = a.framework
    fw.run_unreserve(a.state, a.pod, a.node)
    try:
        fw.handle.cache.forget_pod(a.pinfo.key)
    except CacheError:
        pass
    if at_permit:
        return rejection_failure(a.pinfo, status, a.node)
    return Failed(a.pinfo, status, nominating=CLEAR_NOMINATED_NODE)


async def bind_one(a: Assumed) -> Bound | Failed:
    """WaitOnPermit (when the pod waits), PreBind, Bind, then finish binding and PostBind."""
    fw, state, pod, node = a.framework, a.state, a.pod, a.node
    if a.waiting:
        st = await fw.wait_on_permit(pod)
        if st is not None:
            return _undo(a, st, at_permit=True)
    if fw.plugins.pre_bind:
        st = await fw.run_pre_bind(state, pod, node)
        if st is not None:
            return _undo(a, st)
    st = await fw.run_bind(state, pod, node)
    if st is not None and st.code is not Code.SUCCESS:
        return _undo(a, st)
    fw.handle.cache.finish_binding(a.pinfo.key)
    if fw.plugins.post_bind:
        fw.run_post_bind(state, pod, node)
    return Bound(a)


def finish_scheduling_cycle(queue: SchedulingQueue, a: Assumed) -> None:
    """End of a successful scheduling cycle: move up the pods plugins asked to activate."""
    if a.state.has_pods_to_activate():
        queue.activate(list(a.state.pods_to_activate.values()))
        a.state.pods_to_activate.clear()


def record_failure(queue: SchedulingQueue, failed: Failed, *, latest: Obj | None = None) -> str | None:
    """Give a failed pod back to the queue with the plugins that rejected it, and record its
    nomination; the queue it went to (None if the queue already had it)."""
    p = failed.pinfo
    p.unschedulable_plugins = failed.unschedulable_plugins
    p.pending_plugins = failed.pending_plugins
    try:
        where = queue.add_unschedulable_if_not_present(p, latest=latest)
    except QueueError:
        where = None
    queue.nominator.add(latest or p.pod, failed.nominating)
    return where


def record_binding_failure(queue: SchedulingQueue, failed: Failed, *, latest: Obj | None = None) -> str | None:
    """A binding cycle failed: the forgotten pod's room may fit others (an assigned pod's
    deletion for them), and the pod goes back to the queue."""
    key = failed.pinfo.key
    if failed.status.is_rejected():
        where = record_failure(queue, failed, latest=latest)
        queue.move_all_to_active_or_backoff(ev.EVENT_ASSIGNED_POD_DELETE, failed.pinfo.pod, None,
                                            pre_check=lambda pod: pod_key(pod) != key)
        return where
    queue.move_all_to_active_or_backoff(ev.EVENT_ASSIGNED_POD_DELETE, failed.pinfo.pod, None)
    return record_failure(queue, failed, latest=latest)
