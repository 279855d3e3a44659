"""VolumeBinding for pods whose PersistentVolumeClaims are already bound (upstream plugins/volumebinding).

PreFilter (Skip for pods without claims, so they cost nothing more): every claim of the pod
(persistentVolumeClaim volumes, and generic ephemeral volumes, whose claim is "<pod>-<volume>"
and must be owned by the pod) must exist, not be terminating, and be bound:

    persistentvolumeclaim "data" not found                      UnschedulableAndUnresolvable
    persistentvolumeclaim "data" is being deleted               UnschedulableAndUnresolvable
    pod has unbound immediate PersistentVolumeClaims            UnschedulableAndUnresolvable

Filter: the bound PersistentVolumes must exist and their spec.nodeAffinity.required must match
the node:

    node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)
    node(s) had volume node affinity conflict

Dynamic provisioning and delayed (WaitForFirstConsumer) binding are not done here: an unbound
claim is reported as above. Lookups go through the `get_pvc` / `get_pv` services.
"""

from __future__ import annotations

from typing import Any

from kubecore.controllers.daemonset_predicates import term_matches
from kubecore.scheduler import events as ev
from kubecore.scheduler.events import ActionType, ClusterEvent, ClusterEventWithHint
from kubecore.scheduler.handle import Handle
from kubecore.scheduler.interface import CycleState, PreFilterResult
from kubecore.scheduler.podinfo import NodeInfo, Obj
from kubecore.scheduler.status import Code, Status, as_status

__all__ = ["VolumeBinding", "pod_claim_names"]

_UU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
_STATE_KEY = "PreFilterVolumeBinding"
ERR_NODE_CONFLICT = "node(s) had volume node affinity conflict"
ERR_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
ERR_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
_SKIP = Status(Code.SKIP)


def pod_claim_names(pod: Obj) -> list[tuple[str, bool]]:
    """(claim name, is generic ephemeral) for every claim-backed volume of the pod."""
    meta = pod.get("metadata") or {}
    out: list[tuple[str, bool]] = []
    for vol in (pod.get("spec") or {}).get("volumes") or ():
        pvc = vol.get("persistentVolumeClaim")
        if pvc is not None:
            out.append((str(pvc.get("claimName", "")), False))
        elif vol.get("ephemeral") is not None:
            out.append((f"{meta.get('name', '')}-{vol.get('name', '')}", True))
    return out


def _owned_by(pvc: Obj, pod: Obj) -> bool:
    uid = (pod.get("metadata") or {}).get("uid")
    return any(ref.get("controller") and ref.get("uid") == uid
               for ref in (pvc.get("metadata") or {}).get("ownerReferences") or ())


def _pv_fits(pv: Obj, node: Obj) -> bool:
    required = ((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required")
    if required is None:
        return True
    return any(term_matches(t, node) for t in required.get("nodeSelectorTerms") or () if isinstance(t, dict))


class VolumeBinding:
    name = "VolumeBinding"

    def __init__(self, handle: Handle) -> None:
        handle.require("get_pvc", self.name)
        handle.require("get_pv", self.name)
        get_pvc, get_pv = handle.services.get_pvc, handle.services.get_pv
        assert get_pvc is not None and get_pv is not None
        self._get_pvc, self._get_pv = get_pvc, get_pv

    def pre_filter(self, state: CycleState, pod: Obj) -> tuple[PreFilterResult | None, Status | None]:
        claims = pod_claim_names(pod)
        if not claims:
            return None, _SKIP
        meta = pod.get("metadata") or {}
        ns = meta.get("namespace") or "default"
        volumes: list[str] = []
        for claim, ephemeral in claims:
            pvc = self._get_pvc(ns, claim)
            if pvc is None:
                return None, Status(_UU, f'persistentvolumeclaim "{claim}" not found')
            if ephemeral and not _owned_by(pvc, pod):
                return None, Status(_UU, f"PVC {ns}/{claim} was not created for pod {ns}/{meta.get('name', '')} "
                                         "(pod is not owner)")
            if (pvc.get("metadata") or {}).get("deletionTimestamp"):
                return None, Status(_UU, f'persistentvolumeclaim "{claim}" is being deleted')
            volume = (pvc.get("spec") or {}).get("volumeName")
            if not volume:
                return None, Status(_UU, ERR_UNBOUND_IMMEDIATE)
            volumes.append(str(volume))
        state.write(_STATE_KEY, volumes)
        return None, None

    def filter(self, state: CycleState, pod: Obj, node_info: NodeInfo) -> Status | None:
        volumes = state.get(_STATE_KEY)
        if volumes is None:
            return as_status(RuntimeError(f"reading {_STATE_KEY!r} from cycle state: not found"))
        node = node_info.node or {}
        for name in volumes:
            pv = self._get_pv(name)
            if pv is None:
                return Status(_UU, ERR_PV_NOT_EXIST)
            if not _pv_fits(pv, node):
                return Status(_UU, ERR_NODE_CONFLICT)
        return None

    def events_to_register(self) -> list[ClusterEventWithHint]:
        a = ActionType
        return [ClusterEventWithHint(ClusterEvent(ev.PERSISTENT_VOLUME_CLAIM, a.ADD | a.UPDATE)),
                ClusterEventWithHint(ClusterEvent(ev.PERSISTENT_VOLUME, a.ADD | a.UPDATE)),
                ClusterEventWithHint(ClusterEvent(ev.STORAGE_CLASS, a.ADD | a.UPDATE)),
                ClusterEventWithHint(ClusterEvent(ev.NODE, a.ADD | a.UPDATE_NODE_LABEL | a.UPDATE_NODE_TAINT)),
                ClusterEventWithHint(ClusterEvent(ev.CSI_NODE, a.ADD | a.UPDATE))]


def new(args: Any, handle: Handle) -> VolumeBinding:
    return VolumeBinding(handle)
