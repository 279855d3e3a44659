"""Many pods per native call: the default profile's fast path.

When a profile's Filter and Score plugins are all native, a run of popped pods whose Python
PreFilter plugins all Skip (or succeed without narrowing) and which have no nominated node is
scheduled by one `schedule_batch` call: the kernels take the pods in queue order and assume each
placed pod at once, so every pod sees the ones before it, exactly as consecutive cycles would.
Then each pod gets its own Reserve and Permit in Python (or PostFilter when nothing fit). A pod
that needs the general path (a PreFilter result, a nominated node, ...) ends the run and goes
through `schedule_one`; the batch resumes after it.

What differs from strictly one-by-one cycles: a pod whose Reserve or Permit fails was seen as
placed by the later pods of its run (they were placed more conservatively, never over-committed),
and PostFilter of a pod that fit nowhere runs after the later pods of its run were placed. While
nominated pods exist, every pod takes the general path so they are honoured.
"""

from __future__ import annotations

from collections.abc import Sequence

from kubecore.scheduler.fiterror import Diagnosis, FitError, NoNodesAvailable
from kubecore.scheduler.framework import Framework
from kubecore.scheduler.interface import CLEAR_NOMINATED_NODE, CycleState
from kubecore.scheduler.nominator import status_nominated_node
from kubecore.scheduler.podinfo import QueuedPodInfo
from kubecore.scheduler.schedule_one import (
    Assumed, Failed, assume_and_reserve, fail_with_post_filter, record_native, resolve_default_spread,
    schedule_one,
)
from kubecore.scheduler.status import Code, Status

__all__ = ["schedule_batch", "batchable"]


def batchable(fw: Framework) -> bool:
    """Whether the profile scores only natively and no nominations are pending (then pods whose
    Python Filter plugins all Skip can be batched)."""
    return fw.native is not None and not fw.plugins.score and not fw.handle.nominator


def _fast(fw: Framework, state: CycleState, p: QueuedPodInfo) -> bool:
    if status_nominated_node(p.pod):
        return False
    if not fw.plugins.pre_filter:
        return not fw.plugins.filter
    pre, s, _ = fw.run_pre_filter(state, p.pod)
    return s is None and (pre is None or pre.node_names is None) and not fw.filters_left(state)


def _flush(fw: Framework, run: list[tuple[QueuedPodInfo, CycleState]], out: list[Assumed | Failed]) -> None:
    if not run:
        return
    native = fw.native
    assert native is not None
    cache = fw.handle.cache
    num_nodes = cache.num_nodes
    if num_nodes == 0:
        for p, _ in run:
            out.append(Failed(p, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE).with_error(NoNodesAvailable()),
                              nominating=CLEAR_NOMINATED_NODE))
        return
    results = native.schedule_batch([(p.key, p.raw) for p, _ in run])
    for (p, state), res in zip(run, results):
        node = res.node
        if node is not None:
            out.append(assume_and_reserve(fw, state, p, node, native_added=True, evaluated=res.evaluated))
            continue
        error = res.error
        if error is not None:  # a native plugin's Error status ended the cycle (InterPodAffinity's PreScore)
            out.append(Failed(p, Status(Code.ERROR, error), nominating=CLEAR_NOMINATED_NODE))
            continue
        diag = Diagnosis()
        record_native(fw, diag, res, p.raw, feasible=0)  # with selection on, no node means none feasible
        out.append(fail_with_post_filter(fw, state, p, FitError(p.pod, num_nodes, diag)))


def schedule_batch(fw: Framework, pinfos: Sequence[QueuedPodInfo]) -> list[Assumed | Failed]:
    """The scheduling cycles of `pinfos`, in order (see the module docstring)."""
    if len(pinfos) < 2 or not batchable(fw):
        return [schedule_one(fw, p) for p in pinfos]
    out: list[Assumed | Failed] = []
    run: list[tuple[QueuedPodInfo, CycleState]] = []
    for p in pinfos:
        state = CycleState()
        if _fast(fw, state, p):
            resolve_default_spread(fw, p)  # schedule_one does it for the others
            run.append((p, state))
            continue
        _flush(fw, run, out)
        run = []
        out.append(schedule_one(fw, p))
    _flush(fw, run, out)
    return out
