"""The decisions of one DaemonSet sync, as pure functions of cached state (upstream
daemon_controller.go podsShouldBeOnNode / updateDaemonSetStatus and update.go rollingUpdate).

Inputs are the DaemonSet, the nodes, and `node_to_pods`: its claimed pods grouped by target node
(spec.nodeName, else the node of the placement affinity). Outputs are names: nodes that need a pod
created, pods to delete. The controller (`daemonset`) performs them.

Per node (`pods_should_be_on_node`):

    should run, no pod                  create one
    should continue running             delete Failed pods (at most once per backoff period per
                                        node and generation, 1 s doubling to 15 min) and Succeeded
                                        ones; without maxSurge keep only the oldest running pod;
                                        with maxSurge keep the oldest old and the oldest new pod
                                        until the new one is available (or the old one unready)
    should not continue running         delete every pod on the node

Rolling update (`rolling_update_plan`), with the counts of `updated_desired_node_counts`:
- maxSurge 0: delete old pods while (unavailable pods + deletions) stays within maxUnavailable;
  old pods that are not available anyway are always replaced. The next manage pass creates the
  new pods on the emptied nodes.
- maxSurge > 0: create a new pod beside every unavailable old pod, and beside up to
  maxSurge - (new pods not yet available) available old pods; delete an old pod once the new
  pod on its node is available.

Nodes are visited in name order, so ties are broken the same way every time (upstream visits a Go
map: in no particular order).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubecore.controllers.controller_utils import is_pod_available, is_pod_ready, labels_of, meta, parse_time, pod_phase
from kubecore.controllers.daemonset_predicates import node_should_run_daemon_pod
from kubecore.controllers.daemonset_util import (
    UNIQUE_LABEL, allows_surge, is_pod_updated, min_ready_seconds, surge_count, template_generation,
    unavailable_count,
)

Obj = dict[str, Any]
NodeToPods = dict[str, list[Obj]]
FAILED_DAEMON_POD = "FailedDaemonPod"
SUCCEEDED_DAEMON_POD = "SucceededDaemonPod"
BACKOFF_INITIAL, BACKOFF_MAX = 1.0, 15 * 60.0


class FailedPodsBackoff:
    """Per-key exponential backoff (client-go flowcontrol.Backoff: 1 s doubling to 15 min; an
    entry untouched for twice the maximum starts over)."""

    def __init__(self, initial: float = BACKOFF_INITIAL, maximum: float = BACKOFF_MAX) -> None:
        self.initial, self.maximum = initial, maximum
        self._entries: dict[str, tuple[float, float]] = {}  # key -> (delay, last update)

    def _expired(self, now: float, last: float) -> bool:
        return now - last > 2 * self.maximum

    def in_backoff(self, key: str, now: float) -> bool:
        entry = self._entries.get(key)
        if entry is None or self._expired(now, entry[1]):
            return False
        return now - entry[1] < entry[0]

    def get(self, key: str) -> float:
        entry = self._entries.get(key)
        return entry[0] if entry is not None else 0.0

    def next(self, key: str, now: float) -> None:
        entry = self._entries.get(key)
        delay = self.initial if entry is None or self._expired(now, entry[1]) else min(2 * entry[0], self.maximum)
        self._entries[key] = (delay, now)

    def gc(self, now: float) -> None:
        for key in [k for k, (_, last) in self._entries.items() if self._expired(now, last)]:
            del self._entries[key]


@dataclass
class Plan:
    """What a pass wants done, plus what it wants said and when to look again."""

    create_on: list[str] = field(default_factory=list)
    """Node names that need a new daemon pod."""
    delete: list[str] = field(default_factory=list)
    """Names of pods to delete."""
    events: list[tuple[str, str, str]] = field(default_factory=list)
    """(type, reason, message) to record on the DaemonSet."""
    requeue_after: float | None = None


def pod_order_key(pod: Obj) -> tuple[int, float, str]:
    """Scheduled pods first, then oldest, then by name (podByCreationTimestampAndPhase)."""
    scheduled = bool((pod.get("spec") or {}).get("nodeName"))
    created = parse_time(meta(pod).get("creationTimestamp"))
    return (0 if scheduled else 1), created if created is not None else 0.0, str(meta(pod).get("name", ""))


def failed_pods_backoff_key(ds: Obj, node_name: str) -> str:
    return f"{meta(ds).get('uid')}/{int((ds.get('status') or {}).get('observedGeneration') or 0)}/{node_name}"


def _prune_running(ds: Obj, running: list[Obj], hash_: str, now: float) -> list[str]:
    """Surplus running pods of one node (see the module table)."""
    running = sorted(running, key=pod_order_key)
    if not allows_surge(ds):
        return [str(meta(p).get("name")) for p in running[1:]]
    oldest_new: Obj | None = None
    oldest_old: Obj | None = None
    delete: list[str] = []
    for pod in running:
        if labels_of(pod).get(UNIQUE_LABEL) == hash_:
            if oldest_new is None:
                oldest_new = pod
                continue
        elif oldest_old is None:
            oldest_old = pod
            continue
        delete.append(str(meta(pod).get("name")))
    if oldest_new is not None and oldest_old is not None:
        if not is_pod_ready(oldest_old) or is_pod_available(oldest_new, min_ready_seconds(ds), now):
            delete.append(str(meta(oldest_old).get("name")))
    return delete


def pods_should_be_on_node(node: Obj, node_to_pods: NodeToPods, ds: Obj, hash_: str, *, now: float,
                           backoff: FailedPodsBackoff, plan: Plan) -> None:
    """Add to `plan` what one node needs (module table)."""
    node_name = str(meta(node).get("name", ""))
    should_run, should_continue = node_should_run_daemon_pod(node, ds)
    pods = node_to_pods.get(node_name)
    if should_run and pods is None:
        plan.create_on.append(node_name)
        return
    if should_continue:
        running: list[Obj] = []
        for pod in pods or ():
            name = str(meta(pod).get("name"))
            if meta(pod).get("deletionTimestamp"):
                continue
            phase = pod_phase(pod)
            if phase == "Failed":
                key = failed_pods_backoff_key(ds, node_name)
                if backoff.in_backoff(key, now):
                    delay = backoff.get(key)
                    plan.requeue_after = delay if plan.requeue_after is None else min(plan.requeue_after, delay)
                    continue
                backoff.next(key, now)
                plan.events.append(("Warning", FAILED_DAEMON_POD, f"Found failed daemon pod "
                                    f"{meta(pod).get('namespace')}/{name} on node {node_name}, will try to kill it"))
                plan.delete.append(name)
            elif phase == "Succeeded":
                plan.events.append(("Normal", SUCCEEDED_DAEMON_POD, f"Found succeeded daemon pod "
                                    f"{meta(pod).get('namespace')}/{name} on node {node_name}, will try to delete it"))
                plan.delete.append(name)
            else:
                running.append(pod)
        if allows_surge(ds) and not running and should_run:
            plan.create_on.append(node_name)  # surging: keep at least one pod that is not being deleted
        elif len(running) > 1:
            plan.delete.extend(_prune_running(ds, running, hash_, now))
        return
    if pods is not None:
        plan.delete.extend(str(meta(p).get("name")) for p in pods if not meta(p).get("deletionTimestamp"))


def unscheduled_pods_without_node(nodes: list[Obj], node_to_pods: NodeToPods) -> list[str]:
    """Pods still waiting for a node that no longer exists (PodGC never sees these)."""
    existing = {str(meta(n).get("name")) for n in nodes}
    return [str(meta(p).get("name")) for node_name, pods in sorted(node_to_pods.items()) if node_name not in existing
            for p in pods if not (p.get("spec") or {}).get("nodeName")]


def updated_desired_node_counts(ds: Obj, nodes: list[Obj], node_to_pods: NodeToPods) -> tuple[int, int, int]:
    """(max surge, max unavailable, desired) and an empty entry in `node_to_pods` for every node
    that should run a pod (mutated). Neither surge nor unavailability allowed means one unavailable."""
    desired = 0
    for node in nodes:
        if node_should_run_daemon_pod(node, ds)[0]:
            desired += 1
            node_to_pods.setdefault(str(meta(node).get("name")), [])
    max_unavailable = unavailable_count(ds, desired)
    max_surge = surge_count(ds, desired)
    if desired > 0 and max_unavailable == 0 and max_surge == 0:
        max_unavailable = 1
    return max_surge, max_unavailable, desired


def find_updated_pods_on_node(ds: Obj, pods: list[Obj], hash_: str) -> tuple[Obj | None, Obj | None, bool]:
    """(new pod, old pod, True) when the node has at most one of each (terminating pods ignored)."""
    new: Obj | None = None
    old: Obj | None = None
    generation = template_generation(ds)
    for pod in pods:
        if meta(pod).get("deletionTimestamp"):
            continue
        if is_pod_updated(pod, hash_, generation):
            if new is not None:
                return None, None, False
            new = pod
        else:
            if old is not None:
                return None, None, False
            old = pod
    return new, old, True


def rolling_update_plan(ds: Obj, node_to_pods: NodeToPods, hash_: str, *, max_surge: int, max_unavailable: int,
                        desired: int, now: float, should_run: Callable[[str], bool]) -> tuple[list[str], list[str]]:
    """(pods to delete, nodes to create on) for one rolling-update pass (module docstring).
    `should_run(node)` may raise for a node that is gone."""
    min_ready = min_ready_seconds(ds)
    if max_surge == 0:
        unavailable, replace, candidates = 0, [], []
        for node_name in sorted(node_to_pods):
            new, old, ok = find_updated_pods_on_node(ds, node_to_pods[node_name], hash_)
            if not ok or (new is None) == (old is None):
                unavailable += 1  # excess or missing pods: the manage pass deals with the node
            elif new is not None:
                unavailable += not is_pod_available(new, min_ready, now)
            elif old is not None and not is_pod_available(old, min_ready, now):
                replace.append(str(meta(old).get("name")))
                unavailable += 1
            elif old is not None and unavailable < max_unavailable:
                candidates.append(str(meta(old).get("name")))
        budget = min(max(0, max_unavailable - unavailable), len(candidates))
        return replace + candidates[:budget], []
    return _surge_plan(ds, node_to_pods, hash_, max_surge=max_surge, desired=desired, now=now, should_run=should_run)


def _surge_plan(ds: Obj, node_to_pods: NodeToPods, hash_: str, *, max_surge: int, desired: int, now: float,
                should_run: Callable[[str], bool]) -> tuple[list[str], list[str]]:
    min_ready = min_ready_seconds(ds)
    delete, should_not_run, candidates, allowed = [], [], [], []
    surging = available = 0
    for node_name in sorted(node_to_pods):
        new, old, ok = find_updated_pods_on_node(ds, node_to_pods[node_name], hash_)
        if not ok:
            surging += 1
            continue
        current = old if old is not None else new
        available += current is not None and is_pod_available(current, min_ready, now)
        if old is None:
            continue
        old_name = str(meta(old).get("name"))
        if new is None:
            if not is_pod_available(old, min_ready, now):
                if should_run(node_name):
                    allowed.append(node_name)  # replace an unavailable old pod at once
                else:
                    delete.append(old_name)
            elif not should_run(node_name):
                should_not_run.append(old_name)
            elif surging < max_surge:
                candidates.append(node_name)
        elif not is_pod_available(new, min_ready, now):
            surging += 1
        else:
            delete.append(old_name)
    deletable = min(max(0, available - desired), len(should_not_run))
    delete.extend(should_not_run[:deletable])
    remaining = min(max(0, max_surge - surging), len(candidates))
    return delete, allowed + candidates[:remaining]


def compute_status(ds: Obj, nodes: list[Obj], node_to_pods: NodeToPods, hash_: str, *, now: float) -> dict[str, int]:
    """The DaemonSet's counts (upstream's updateDaemonSetStatus), from the oldest pod per node."""
    desired = current = misscheduled = ready = updated = available = 0
    generation, min_ready = template_generation(ds), min_ready_seconds(ds)
    for node in nodes:
        should_run = node_should_run_daemon_pod(node, ds)[0]
        pods = node_to_pods.get(str(meta(node).get("name"))) or []
        if not should_run:
            misscheduled += bool(pods)
            continue
        desired += 1
        if not pods:
            continue
        current += 1
        pod = min(pods, key=pod_order_key)
        if is_pod_ready(pod):
            ready += 1
            available += is_pod_available(pod, min_ready, now)
        updated += is_pod_updated(pod, hash_, generation)
    return {"desiredNumberScheduled": desired, "currentNumberScheduled": current, "numberMisscheduled": misscheduled,
            "numberReady": ready, "updatedNumberScheduled": updated, "numberAvailable": available,
            "numberUnavailable": desired - available}
