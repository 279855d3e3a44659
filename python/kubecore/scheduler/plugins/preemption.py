"""DefaultPreemption: make room for a pod that fits nowhere by evicting lower-priority pods
(upstream plugins/defaultpreemption + framework/preemption).

PostFilter, in upstream's order:

1. Eligibility: not with preemptionPolicy Never ("not eligible due to preemptionPolicy=Never.");
   not while a victim of an earlier preemption still terminates on the pod's nominated node
   (unless that node is now UnschedulableAndUnresolvable).
2. Candidates: only nodes the cycle rejected as Unschedulable (never UnschedulableAndUnresolvable,
   which preemption cannot fix). Starting at a random node, dry-run each until enough candidates
   are found: max(minCandidateNodesPercentage % of the potential nodes, minCandidateNodesAbsolute),
   stopping early only once a candidate without PDB violations exists. Of each kind (with and
   without PDB violations) only the first that many found are kept, as upstream's candidate lists.
3. Victims on a node: remove every pod of lower priority; if the pod still does not fit, the node
   is no candidate. Otherwise add pods back ("reprieve"), most important first (priority, then
   earlier start), PDB-violating ones before the others, keeping each one that still lets the pod
   fit; the rest are the victims, and the PDB-violating victims are counted.
   A dry run that fails with an error (a PreFilter extension's RemovePod, say) makes its node no
   candidate; when no candidate is left, PostFilter returns those errors as an Error status
   (upstream's aggregate message: one error as is, several as "[a, b]").
4. The node: fewest PDB violations, then the lowest highest-victim priority, then the smallest
   sum of victim priorities, then the fewest victims, then the latest start among the
   highest-priority victims, then the first found.
5. Evict the victims (victims still waiting at Permit are rejected instead), clear lower-priority
   nominations on that node, and nominate the node.

Evictions are asynchronous, as upstream's (KEP-4832, on by default since 1.33) when the wiring
offers the `evict_victims` service, and the preemptor waits for them: PreEnqueue keeps it out of
activeQ ("waiting for the preemption for this pod to be finished") while any victim it evicts is
still in the scheduler's cache, and the deletion that removes the last one moves it (the plugin
registers for pod deletions so a gated preemptor hears them; its hint is Skip, and the plugins
that rejected the pod decide). Upstream instead lifts the gate just before evicting the last
victim; under load the last eviction can wait behind thousands of API calls, and a preemptor
retried in that window fails again and doubles its backoff (measured: 404 of PreemptionBasic's
500 preemptors did). If an eviction fails, the preemptor is activated at once, as upstream.

When only native filters run in the cycle, the dry runs of all nodes happen in the kernels:
one call per cycle without PDBs, a few with them (`kubecore.scheduler.plugins.victims`).
Otherwise they go through `Framework.dry_run_node`: one native `filter_node(..., without=victims)`
call, then the Python filters on a copy of the node without the victims. With no candidate the status
message is a FitError over the dry-run statuses, e.g.
"preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod,
2 Preemption is not helpful for scheduling."
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

import msgspec

from kubecore.controllers.controller_utils import parse_time
from kubecore.scheduler.config_args import DefaultPreemptionArgs
from kubecore.scheduler.events import POD, ActionType, ClusterEvent, ClusterEventWithHint, QueueingHint
from kubecore.scheduler.fiterror import Diagnosis, NodeToStatus, fit_error_message
from kubecore.scheduler.handle import Handle
from kubecore.scheduler.interface import CycleState, PostFilterResult, PreFilterExtensions
from kubecore.scheduler.nominator import status_nominated_node
from kubecore.scheduler.plugins.victims import (Candidate, importance_key, keep, native_search, native_select,
                                                pods_with_pdb_violation, victim_order)
from kubecore.scheduler.podinfo import NodeInfo, Obj, pod_key, pod_priority
from kubecore.scheduler.status import Code, Status, as_status

if TYPE_CHECKING:
    from kubecore.scheduler.framework import Framework

__all__ = ["DefaultPreemption", "Candidate", "pick_one_node", "pods_with_pdb_violation"]

_U, _UU = Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
_MAX_INT32 = (1 << 31) - 1


def pick_one_node(candidates: Sequence[Candidate], *, now: float) -> Candidate:
    """Upstream pickOneNodeForPreemption: a node without victims at once; otherwise each
    criterion keeps the best nodes, in order."""
    for c in candidates:
        if not c.victims:
            return c

    def start(p: Obj) -> float:
        t = parse_time((p.get("status") or {}).get("startTime"))
        return now if t is None else t

    def earliest_top_start(c: Candidate) -> float:
        top = pod_priority(c.victims[0])
        return min(start(p) for p in c.victims if pod_priority(p) == top)

    criteria = [
        lambda c: -c.pdb_violations,
        lambda c: -pod_priority(c.victims[0]),
        lambda c: -sum(pod_priority(p) + _MAX_INT32 + 1 for p in c.victims),
        lambda c: -len(c.victims),
        earliest_top_start,
    ]
    left = list(candidates)
    for score in criteria:
        best = max(score(c) for c in left)
        left = [c for c in left if score(c) == best]
        if len(left) == 1:
            break
    return left[0]


class DefaultPreemption:
    name = "DefaultPreemption"

    def __init__(self, args: DefaultPreemptionArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.preempting: dict[str, list[tuple[str, str]]] = {}
        """Preemptor (uid, else key) -> its evicted victims (key, uid) not yet seen deleted."""

    def pre_enqueue(self, pod: Obj) -> Status | None:
        if not self.preempting:
            return None
        who = _identity(pod)
        victims = self.preempting.get(who)
        if victims is None:
            return None
        get = self.handle.cache.get_pod
        while victims and not _same(get(victims[-1][0]), victims[-1][1]):
            victims.pop()  # seen deleted (asked once per event a gated preemptor hears: O(1) then)
        if victims:
            return _WAITING
        del self.preempting[who]
        return None

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # a gated preemptor must hear its last victim's deletion; the plugins that rejected it decide
        return [ClusterEventWithHint(ClusterEvent(POD, ActionType.DELETE), _skip)]

    def post_filter(self, state: CycleState, pod: Obj,
                    statuses: NodeToStatus) -> tuple[PostFilterResult | None, Status | None]:
        result, status = self.preempt(state, pod, statuses)
        msg = status.message()
        if msg:
            return result, Status(status.code, "preemption: " + msg, plugin=status.plugin, error=status.error)
        return result, status

    # ---- the algorithm -----------------------------------------------------------------------

    def preempt(self, state: CycleState, pod: Obj, statuses: NodeToStatus) -> tuple[PostFilterResult | None, Status]:
        eligible, why = self.eligible(pod, statuses)
        if not eligible:
            return None, Status(_U, why)
        nodes = self.handle.cache.node_infos()
        if not nodes:
            return None, as_status(RuntimeError("no nodes available"))
        candidates, tried = self.find_candidates(state, pod, statuses, nodes)
        if not candidates:
            errors = [st.message() for st in tried.explicit.values() if st.code is Code.ERROR]
            if errors:  # upstream: the dry runs' errors, aggregated, once no candidate is left
                return None, as_status(RuntimeError(_aggregate(errors)))
            diag = Diagnosis(tried)
            tried.set_absent(Status(_UU, NOT_HELPFUL))
            return PostFilterResult.nominate(""), Status(_U, fit_error_message(len(nodes), diag))
        best = candidates[0] if len(candidates) == 1 else pick_one_node(candidates, now=self.handle.clock.now())
        self.prepare(best, pod)
        return PostFilterResult.nominate(best.node), Status()

    def eligible(self, pod: Obj, statuses: NodeToStatus) -> tuple[bool, str]:
        if (pod.get("spec") or {}).get("preemptionPolicy") == "Never":
            return False, "not eligible due to preemptionPolicy=Never."
        nominated = status_nominated_node(pod)
        if not nominated:
            return True, ""
        if statuses.get(nominated).code is _UU:
            return True, ""
        ni = self.handle.cache.node_info(nominated)
        prio = pod_priority(pod)
        for p in (ni.pods.values() if ni is not None else ()):
            if pod_priority(p) < prio and _terminating_by_preemption(p):
                return False, "not eligible due to a terminating pod on the nominated node."
        return True, ""

    def _num_candidates(self, potential: int) -> int:
        n = potential * self.args.min_candidate_nodes_percentage // 100
        n = max(n, self.args.min_candidate_nodes_absolute)
        return min(n, potential)

    def _potential_count(self, statuses: NodeToStatus, total: int) -> int:
        explicit_u = sum(1 for s in statuses.explicit.values() if s.code is _U)
        rest = total - len(statuses.explicit) - statuses.native_failed
        absent_u = rest if statuses.absent.code is _U else 0
        return explicit_u + absent_u + statuses.native_failed - statuses.native_unresolvable

    def find_candidates(self, state: CycleState, pod: Obj, statuses: NodeToStatus,
                        nodes: list[NodeInfo]) -> tuple[list[Candidate], NodeToStatus]:
        """Dry-run the potential nodes from a random start; (candidates, statuses of the tried).

        Nodes without lower-priority pods need no dry run: when no candidate turns up, the
        potential ones among them are counted as "No preemption victims found" (their number is
        the potential nodes less those the dry runs classified). When only native filters run
        this cycle, every dry run happens in the kernels (`victims.native_select` without PDBs,
        `victims.native_search` with them), with the same outcome as the node-by-node search."""
        tried = NodeToStatus()
        potential = self._potential_count(statuses, len(nodes))
        if potential <= 0:
            return [], tried
        prio = pod_priority(pod)
        if self.handle.cache.min_priority() >= prio:  # nobody to preempt anywhere
            tried.add_native({NO_VICTIMS: potential}, failed=potential, unresolvable=potential)
            return [], tried
        wanted = self._num_candidates(potential)
        fw = self.handle.framework
        raw = msgspec.json.encode(pod)
        pdbs = self.handle.services.list_pdbs() if self.handle.services.list_pdbs else []
        nominated = self.handle.nominator.higher_or_equal_raw(prio, exclude=pod_key(pod))
        offset = self.handle.rng.randrange(len(nodes))
        order = nodes[offset:] + nodes[:offset]
        ctx = fw.native.nominated(nominated) if fw.native is not None else nullcontext()
        with ctx:
            native = fw.native if _native_dry_runs(fw, state) else None
            if native is not None:
                to_try, now = _to_try(statuses, order), self.handle.clock.now()
                found = (native_search(native, raw, to_try=to_try, prio=prio, wanted=wanted, pdbs=pdbs, now=now)
                         if pdbs else native_select(native, raw, to_try=to_try, wanted=wanted, now=now))
                candidates, tried, classified = found.candidates, found.tried, found.classified
            else:
                candidates, tried, classified = self._search(state, pod, raw=raw, statuses=statuses, order=order,
                                                             wanted=wanted, pdbs=pdbs)
        if not candidates and potential > classified:
            n = potential - classified
            tried.add_native({NO_VICTIMS: n}, failed=n, unresolvable=n)
        return candidates, tried

    def _search(self, state: CycleState, pod: Obj, *, raw: bytes, statuses: NodeToStatus, order: list[NodeInfo],
                wanted: int, pdbs: list[Obj]) -> tuple[list[Candidate], NodeToStatus, int]:
        """The node-by-node search (Python filters run in the dry runs): (candidates, tried, classified)."""
        tried = NodeToStatus()
        good: list[Candidate] = []
        violating: list[Candidate] = []
        classified = 0
        for ni in order:
            c, st, was_potential = self._try_node(state, pod, raw, ni, statuses, pdbs)
            classified += was_potential
            if c is not None:
                keep(violating if c.pdb_violations else good, c, wanted)
                if good and len(good) + len(violating) >= wanted:
                    break
            elif st is not None:
                tried.set(ni.name, st)
        return good + violating, tried, classified

    def _try_node(self, state: CycleState, pod: Obj, raw: bytes, ni: NodeInfo, statuses: NodeToStatus,
                  pdbs: list[Obj]) -> tuple[Candidate | None, Status | None, bool]:
        """(candidate, dry-run status, whether the node proved potential) for one node."""
        tryable, implicit = _tryable(statuses, ni.name)
        if not tryable:
            return None, None, False
        prio = pod_priority(pod)
        lower = [p for p in ni.pods.values() if pod_priority(p) < prio]
        if not lower:
            return None, None, False
        st = self.handle.framework.dry_run_node(state, pod, raw, ni, lower)
        if st is None:
            try:
                return self._select_victims(state, pod, raw, ni, lower, pdbs), None, True
            except _DryRunError as e:
                return None, e.status, True
        if implicit and st.code is _UU:
            return None, None, False  # rejected as unresolvable in the cycle too: not a potential node
        return None, st, True

    def _select_victims(self, state: CycleState, pod: Obj, raw: bytes, ni: NodeInfo, lower: list[Obj],
                        pdbs: list[Obj]) -> Candidate:
        """The victims on a node the pod fits once `lower` are gone; `_DryRunError` when a dry
        run fails with an error (the node is then no candidate)."""
        now = self.handle.clock.now()
        bad, fine = victim_order(lower, pdbs, now=now)
        removed = {pod_key(p): p for p in bad + fine}
        victims: list[Obj] = []
        fw = self.handle.framework

        def reprieve(p: Obj) -> bool:
            key = pod_key(p)
            del removed[key]
            st = fw.dry_run_node(state, pod, raw, ni, list(removed.values()))
            if st is None:
                return True
            if st.code is Code.ERROR:
                raise _DryRunError(st)
            removed[key] = p
            victims.append(p)
            return False

        violations = sum(1 for p in bad if not reprieve(p))
        for p in fine:
            reprieve(p)
        if bad and fine:
            victims.sort(key=lambda p: importance_key(p, now))
        return Candidate(ni.name, victims, violations)

    def prepare(self, c: Candidate, pod: Obj) -> None:
        """Evict the victims (reject those waiting at Permit) and clear lower nominations."""
        fw = self.handle.framework
        services = self.handle.services
        victims = [v for v in c.victims if not fw.waiting_pods.reject(pod_key(v), "preempted")
                   and not (v.get("metadata") or {}).get("deletionTimestamp")]
        if victims and services.evict_victims is not None:
            self._evict_async(victims, pod, c.node)
        elif services.evict is not None:
            for victim in victims:
                services.evict(victim, pod, c.node)
        prio = pod_priority(pod)
        clear = self.handle.services.clear_nominated_node
        for p in self.handle.nominator.pods_for_node(c.node):
            if pod_priority(p) < prio:
                self.handle.nominator.delete(pod_key(p))
                if clear is not None:
                    clear(p)

    def _evict_async(self, victims: list[Obj], pod: Obj, node: str) -> None:
        who = _identity(pod)
        if len(self.preempting) >= PRUNE_AT:  # preemptors deleted while held are never asked again
            get = self.handle.cache.get_pod
            self.preempting = {k: v for k, v in self.preempting.items() if any(_same(get(key), uid) for key, uid in v)}
        self.preempting[who] = [(pod_key(v), str((v.get("metadata") or {}).get("uid") or "")) for v in victims]
        activate = self.handle.services.activate

        def failed() -> None:
            self.preempting.pop(who, None)
            if activate is not None:
                activate([pod])

        assert self.handle.services.evict_victims is not None
        self.handle.services.evict_victims(victims, pod, node, failed=failed)


class _DryRunError(Exception):
    def __init__(self, status: Status) -> None:
        super().__init__(status.message())
        self.status = status


def _aggregate(messages: list[str]) -> str:
    """Upstream's utilerrors aggregate message: one error as is, else the distinct ones in [a, b]."""
    distinct = list(dict.fromkeys(messages))
    return distinct[0] if len(distinct) == 1 else "[" + ", ".join(distinct) + "]"


WAITING = "waiting for the preemption for this pod to be finished"
PRUNE_AT = 1024
_WAITING = Status(_UU, WAITING)


def _identity(pod: Obj) -> str:
    meta = pod.get("metadata") or {}
    return str(meta.get("uid") or pod_key(pod))


def _same(cached: Obj | None, uid: str) -> bool:
    """Whether the cache still holds that victim (a pod of the same name and another uid is not it)."""
    return cached is not None and (not uid or (cached.get("metadata") or {}).get("uid") == uid)


def _skip(pod: Obj, old: Any, new: Any) -> QueueingHint:
    return QueueingHint.SKIP


def _tryable(statuses: NodeToStatus, node: str) -> tuple[bool, bool]:
    """(whether the cycle's status leaves the node to preemption, whether that status was implicit)."""
    known = statuses.explicit.get(node)
    if known is not None:
        return known.code is _U, False
    return bool(statuses.native_failed) or statuses.absent.code is _U, True


def _to_try(statuses: NodeToStatus, order: list[NodeInfo]) -> list[tuple[NodeInfo, bool]]:
    """(node, whether its status was implicit) for the nodes preemption may try, in order."""
    if not statuses.explicit:  # every status implicit: all nodes or none
        return [(ni, True) for ni in order] if _tryable(statuses, "")[0] else []
    out = []
    for ni in order:
        tryable, implicit = _tryable(statuses, ni.name)
        if tryable:
            out.append((ni, implicit))
    return out


def _native_dry_runs(fw: Framework, state: CycleState) -> bool:
    """Whether the kernels alone decide this cycle's dry runs: no Python Filter plugin and no
    PreFilter extension runs (PreFilter Skip leaves them out)."""
    native = fw.native
    if native is None or not native.has_filters:
        return False
    skip = state.skip_filter_plugins
    if fw.plugins.filter and fw.filters_left(state):
        return False
    return all(pl.name in skip for pl in fw.plugins.pre_filter if isinstance(pl, PreFilterExtensions))


def _terminating_by_preemption(p: Obj) -> bool:
    if not (p.get("metadata") or {}).get("deletionTimestamp"):
        return False
    for cond in (p.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "DisruptionTarget":
            return bool(cond.get("status") == "True" and cond.get("reason") == "PreemptionByScheduler")
    return False


def new(args: Any, handle: Handle) -> DefaultPreemption:
    return DefaultPreemption(args if isinstance(args, DefaultPreemptionArgs) else DefaultPreemptionArgs(), handle)
