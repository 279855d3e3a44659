"""PodTopologySpread's cluster default constraints, resolved for one pod.

A pod without `topologySpreadConstraints` of its own is spread by the profile's default
constraints (`PodTopologySpreadArgs`: with `defaultingType: System`, maxSkew 3 over
`kubernetes.io/hostname` and 5 over `topology.kubernetes.io/zone`, both ScheduleAnyway). Their
label selector is the pod's "default selector" (upstream's `helper.DefaultSelector`):

- the selectors of the pod's namespace's Services that select the pod, merged (a Service
  without a selector selects nothing);
- plus its controller's selector: a ReplicationController's map is merged in; a ReplicaSet's or
  StatefulSet's LabelSelector is added as requirements;
- a pod with neither gets no default constraints at all.

The native kernels have no Services or controllers, so the scheduler resolves the constraints
here, once per scheduling cycle, and passes them beside the pod's JSON as `kubecoreDefaultSpread`
(`{"system": bool, "constraints": [...]}`; never sent to the API). `system` tells the kernels
upstream's `requireAllTopologies` is off: a node without the zone label still scores by hostname.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from kubecore.scheduler.config_args import PodTopologySpreadArgs

__all__ = ["default_selector", "DefaultSpread", "SelectorFor"]

Obj = dict[str, Any]
SelectorFor = Callable[[Obj], "Obj | None"]
"""pod -> its default LabelSelector (JSON), None when empty."""

_MERGED = {("v1", "ReplicationController")}
_REQUIREMENTS = {("apps/v1", "ReplicaSet"), ("apps/v1", "StatefulSet")}


def controller_ref(pod: Obj) -> Obj | None:
    """The ownerReference with controller: true (metav1.GetControllerOf)."""
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def default_selector(pod: Obj, *, services: Sequence[Obj], controller: Obj | None,
                     controller_kind: tuple[str, str] = ("", "")) -> Obj | None:
    """The pod's default LabelSelector; `controller` is its controlling object (looked up by the
    caller from `controller_ref`), `controller_kind` its (apiVersion, kind)."""
    if controller is None and not services:
        return None  # the usual case (a pod without an owner, no Services): nothing to select
    labels = (pod.get("metadata") or {}).get("labels") or {}
    merged: dict[str, str] = {}
    for svc in services:
        sel = (svc.get("spec") or {}).get("selector")
        if sel and _selects(sel, labels):
            merged.update(sel)
    expressions: list[Obj] = []
    spec = (controller or {}).get("spec") or {}
    if controller is not None and controller_kind in _MERGED:
        merged.update(spec.get("selector") or {})
    elif controller is not None and controller_kind in _REQUIREMENTS:
        sel = spec.get("selector") or {}
        expressions += [{"key": k, "operator": "In", "values": [v]} for k, v in (sel.get("matchLabels") or {}).items()]
        expressions += [dict(e) for e in sel.get("matchExpressions") or []]
    if not merged and not expressions:
        return None
    out: Obj = {}
    if merged:
        out["matchLabels"] = merged
    if expressions:
        out["matchExpressions"] = expressions
    return out


class DefaultSpread:
    """One profile's default constraints and how to find a pod's selector."""

    def __init__(self, args: PodTopologySpreadArgs, selector_for: SelectorFor) -> None:
        self.system = args.defaulting_type == "System"
        # matchLabelKeys would be dropped anyway: upstream overwrites the selector
        self.constraints = [{k: v for k, v in c.items() if k not in ("labelSelector", "matchLabelKeys")}
                            for c in args.effective_constraints()]
        self.selector_for = selector_for

    def for_pod(self, pod: Obj) -> Obj | None:
        """The `kubecoreDefaultSpread` value for `pod`, or None (own constraints, no defaults,
        or an empty default selector)."""
        if not self.constraints or (pod.get("spec") or {}).get("topologySpreadConstraints"):
            return None
        selector = self.selector_for(pod)
        if selector is None:
            return None
        return {"system": self.system, "constraints": [{**c, "labelSelector": selector} for c in self.constraints]}
