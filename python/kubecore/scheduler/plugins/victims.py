"""Preemption's victims on a node and the candidate search through the native kernels.

What this module guarantees:

- `victim_order(pods, pdbs, now=...)`: the potential victims in upstream's reprieve order: most
  important first (higher priority, then earlier start; a pod without a start time counts as
  starting `now`), the PDB-violating ones (`pods_with_pdb_violation`) before the others.
- `native_select(...)`: the same when no PDB exists, in one native call that also picks the
  node (upstream's pickOneNodeForPreemption): the search's only candidate is the chosen one.
- `native_search(...)`: DefaultPreemption's candidate search with every dry run in the kernels,
  for a cycle where no Python Filter plugin (or PreFilter extension) would run. It gives the
  same candidates, in the same order, as dry-running node after node in Python: one native call
  dry-runs every node to try with all its lower-priority pods removed (in parallel, results in
  visiting order); the nodes that fit are then reprieved in chunks (one native call each), and
  the search stops where the sequential one would: at the `wanted`-th candidate once a candidate
  without PDB violations exists, keeping the first `wanted` of each kind (`keep`). When no
  candidate turns up, the tried nodes' statuses are
  those the sequential search records (status code UnschedulableAndUnresolvable exactly when the
  failing filter says so, as upstream's plugins do).
"""

from __future__ import annotations

from collections.abc import Sequence

from kubecore.controllers.controller_utils import InvalidSelector, parse_time, selector_from_label_selector
from kubecore.scheduler.fiterror import NodeToStatus
from kubecore.scheduler.native import NativeKernels, rejection_status
from kubecore.scheduler.podinfo import NodeInfo, Obj, pod_key, pod_priority

__all__ = ["Candidate", "keep", "pods_with_pdb_violation", "victim_order", "importance_key", "NativeSearch",
           "native_search", "native_select"]

# Nodes reprieved per native call once the first `wanted` fitting nodes had no PDB-clean candidate.
_MORE = 16


class Candidate:
    """A node and the pods to evict there, most important first."""

    __slots__ = ("node", "victims", "pdb_violations")

    def __init__(self, node: str, victims: list[Obj], pdb_violations: int) -> None:
        self.node, self.victims, self.pdb_violations = node, victims, pdb_violations

    def __repr__(self) -> str:
        return f"Candidate({self.node}, victims={[pod_key(v) for v in self.victims]}, pdb={self.pdb_violations})"


def keep(found: list[Candidate], c: Candidate, wanted: int) -> None:
    """Add `c` to the candidates of its kind (PDB-clean or violating) unless `wanted` of that
    kind were found already: upstream's candidateList holds numCandidates of each kind and drops
    the later ones."""
    if len(found) < wanted:
        found.append(c)


def pods_with_pdb_violation(pods: Sequence[Obj], pdbs: Sequence[Obj]) -> tuple[list[Obj], list[Obj]]:
    """(violating, non-violating), order kept: a pod violates when evicting it (after the pods
    before it) takes a matching PDB's disruptionsAllowed below zero."""
    if not pdbs:
        return [], list(pods)
    allowed = [int((pdb.get("status") or {}).get("disruptionsAllowed") or 0) for pdb in pdbs]
    violating: list[Obj] = []
    fine: list[Obj] = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        labels, ns, hit = meta.get("labels") or {}, meta.get("namespace") or "default", False
        for i, pdb in enumerate(pdbs if labels else ()):
            pmeta = pdb.get("metadata") or {}
            if (pmeta.get("namespace") or "default") != ns:
                continue
            try:
                sel = selector_from_label_selector((pdb.get("spec") or {}).get("selector"))
            except InvalidSelector:
                continue
            if sel.empty or not sel.matches(labels):
                continue
            if meta.get("name") in ((pdb.get("status") or {}).get("disruptedPods") or {}):
                continue
            allowed[i] -= 1
            if allowed[i] < 0:
                hit = True
        (violating if hit else fine).append(pod)
    return violating, fine


def importance_key(p: Obj, now: float) -> tuple[int, float]:
    """Sort key of upstream's MoreImportantPod: higher priority, then earlier start, first."""
    t = parse_time((p.get("status") or {}).get("startTime"))
    return (-pod_priority(p), now if t is None else t)


def victim_order(pods: Sequence[Obj], pdbs: Sequence[Obj], *, now: float) -> tuple[list[Obj], list[Obj]]:
    """(PDB-violating, the others), each most important first: the order pods are reprieved in."""
    ordered = sorted(pods, key=lambda p: importance_key(p, now))
    return pods_with_pdb_violation(ordered, pdbs)


class NativeSearch:
    """What `native_search` found: candidates in the order found (PDB-clean ones first), the
    statuses of the tried nodes that cannot host the pod, and how many nodes proved potential."""

    __slots__ = ("candidates", "tried", "classified")

    def __init__(self, candidates: list[Candidate], tried: NodeToStatus, classified: int) -> None:
        self.candidates, self.tried, self.classified = candidates, tried, classified


def _candidate(ni: NodeInfo, order: tuple[list[Obj], list[Obj]], *, victim_idx: list[int], now: float) -> Candidate:
    bad, fine = order
    pods = bad + fine
    victims = [pods[i] for i in victim_idx]
    violations = sum(1 for i in victim_idx if i < len(bad))
    if bad and fine:
        victims.sort(key=lambda p: importance_key(p, now))
    return Candidate(ni.name, victims, violations)


def _reprieve(native: NativeKernels, raw: bytes, *, nodes: Sequence[NodeInfo], prio: int, pdbs: Sequence[Obj],
              now: float) -> list[Candidate]:
    """The candidates on `nodes` (each known to fit once its lower-priority pods are gone)."""
    orders = [victim_order([p for p in ni.pods.values() if pod_priority(p) < prio], pdbs, now=now) for ni in nodes]
    keys = [(ni.name, [pod_key(p) for p in bad + fine]) for ni, (bad, fine) in zip(nodes, orders)]
    kept = native.reprieve(raw, keys)
    return [_candidate(ni, order, victim_idx=idx, now=now) for ni, order, idx in zip(nodes, orders, kept)]


def native_search(native: NativeKernels, raw: bytes, *, to_try: Sequence[tuple[NodeInfo, bool]], prio: int,
                  wanted: int, pdbs: Sequence[Obj], now: float) -> NativeSearch:
    """Candidates among `to_try` ((node, whether the cycle left its status implicit), in visiting
    order); see the module docstring for the rules."""
    kinds, rejected = native.dry_run_lower(raw, [ni.name for ni, _ in to_try])
    fitting: list[NodeInfo] = []
    failed: list[tuple[NodeInfo, list[str], bool]] = []
    classified = 0
    rejects = iter(rejected)
    for (ni, implicit), kind in zip(to_try, kinds):
        if kind == 0:
            continue
        if kind == 2:
            reasons, unresolvable = next(rejects)
            if implicit and unresolvable:
                continue  # the cycle would have rejected it as unresolvable: not potential
            failed.append((ni, reasons, unresolvable))
        else:
            fitting.append(ni)
        classified += 1
    good: list[Candidate] = []
    violating: list[Candidate] = []
    done = 0
    while done < len(fitting) and not (good and len(good) + len(violating) >= wanted):
        step = wanted - done if done < wanted else _MORE
        for c in _reprieve(native, raw, nodes=fitting[done:done + step], prio=prio, pdbs=pdbs, now=now):
            done += 1
            keep(violating if c.pdb_violations else good, c, wanted)
            if good and len(good) + len(violating) >= wanted:
                break
    tried = NodeToStatus()
    if not good and not violating:
        for ni, reasons, unresolvable in failed:
            tried.set(ni.name, rejection_status(reasons, unresolvable=unresolvable))
    return NativeSearch(good + violating, tried, classified)


def native_select(native: NativeKernels, raw: bytes, *, to_try: Sequence[tuple[NodeInfo, bool]], wanted: int,
                  now: float) -> NativeSearch:
    """`native_search` without PDBs, the node picked in the kernels: at most one candidate, the
    chosen node with its victims (most important first)."""
    chosen, _, classified, rejected = native.preempt_select(raw, [(ni.name, implicit) for ni, implicit in to_try],
                                                            wanted=wanted, now=now)
    tried = NodeToStatus()
    if chosen is None:
        for name, reasons, unresolvable in rejected:
            tried.set(name, rejection_status(reasons, unresolvable=unresolvable))
        return NativeSearch([], tried, classified)
    node, keys = chosen
    pods = next(ni for ni, _ in to_try if ni.name == node).pods
    return NativeSearch([Candidate(node, [pods[k] for k in keys if k in pods], 0)], tried, classified)
