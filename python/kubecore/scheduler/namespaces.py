"""Pod affinity `namespaceSelector`s resolved against the Namespace objects.

The kernels never see Namespaces (rust/sched podaffinity.rs): a term's empty `namespaceSelector`
(`{}`) means every namespace, and any other selects the namespaces listed in the term's
`resolvedNamespaces` field (kubecore's extension, not part of the Kubernetes API; missing: none).
`NamespaceResolver.resolve(pod)` fills that field from the namespace informer, for the pod's
required and preferred pod affinity and anti-affinity terms, before the pod reaches the queue
or the cache; a pod without such a term is returned as is (no copy).

A term is resolved when its pod is added or updated, and again whenever a Namespace is added,
relabelled or deleted: the resolver remembers the pods it resolved (`forget` drops one) and
`refresh()` answers the (old, new) pairs whose resolution changed, which the pod handlers pass
on as updates (`PodHandlers.on_namespaces_changed`). Upstream re-reads the namespace lister every
cycle; the outcome is the same.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterable, Iterator

from kubecore.controllers.controller_utils import InvalidSelector, selector_from_label_selector
from kubecore.scheduler.podinfo import Obj, pod_key

__all__ = ["NamespaceResolver", "RESOLVED"]

log = logging.getLogger(__name__)

RESOLVED = "resolvedNamespaces"
_KINDS = ("podAffinity", "podAntiAffinity")
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def _terms(pod: Obj) -> Iterator[Obj]:
    affinity = (pod.get("spec") or {}).get("affinity") or {}
    for kind in _KINDS:
        section = affinity.get(kind) or {}
        yield from section.get(_REQUIRED) or ()
        for weighted in section.get(_PREFERRED) or ():
            term = weighted.get("podAffinityTerm")
            if term:
                yield term


def _selective(term: Obj) -> bool:
    """Whether the term has a namespaceSelector that is not `{}` (which selects all)."""
    sel = term.get("namespaceSelector") or {}
    return bool(sel.get("matchLabels") or sel.get("matchExpressions"))


class NamespaceResolver:
    """Fills `resolvedNamespaces` from `list_namespaces()` (see the module docstring)."""

    def __init__(self, list_namespaces: Callable[[], Iterable[Obj]]) -> None:
        self.list_namespaces = list_namespaces
        self.resolved: dict[str, Obj] = {}
        """"namespace/name" -> the last resolution of each pod with a selective term."""

    def _matching(self, selector: Obj) -> list[str]:
        try:
            sel = selector_from_label_selector(selector)
        except InvalidSelector as e:
            log.info("pod affinity namespaceSelector %r selects nothing: %s", selector, e)
            return []
        out = []
        for ns in self.list_namespaces():
            meta = ns.get("metadata") or {}
            if sel.matches(meta.get("labels") or {}):
                out.append(str(meta.get("name") or ""))
        return sorted(out)

    def resolve(self, pod: Obj) -> Obj:
        affinity = (pod.get("spec") or {}).get("affinity")
        if not affinity or not (affinity.get("podAffinity") or affinity.get("podAntiAffinity")):
            return pod  # most pods: no term at all (checked without a generator: this runs per pod event)
        if not any(_selective(t) for t in _terms(pod)):
            return pod
        out = copy.deepcopy(pod)  # informer objects are shared and read-only
        for term in _terms(out):
            if _selective(term):
                term[RESOLVED] = self._matching(term["namespaceSelector"])
        self.resolved[pod_key(out)] = out
        return out

    def forget(self, pod: Obj) -> None:
        self.resolved.pop(pod_key(pod), None)

    def refresh(self) -> list[tuple[Obj, Obj]]:
        """After a Namespace change: (previous, new) resolutions of the pods whose changed."""
        changed = []
        for old in list(self.resolved.values()):
            new = self.resolve(old)  # re-resolving a resolution overwrites its lists
            if [t.get(RESOLVED) for t in _terms(new)] != [t.get(RESOLVED) for t in _terms(old)]:
                changed.append((old, new))
        return changed
