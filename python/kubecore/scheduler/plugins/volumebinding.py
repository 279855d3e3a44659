"""VolumeBinding for pods whose PersistentVolumeClaims are already bound (upstream plugins/volumebinding).

PreFilter (Skip for pods without claims, so they cost nothing more) first checks every claim of the
pod (persistentVolumeClaim volumes, and generic ephemeral volumes, whose claim is "<pod>-<volume>"
and must be controlled by the pod), in volume order, as upstream's podHasPVCs; the first problem
is the answer, UnschedulableAndUnresolvable:

    persistentvolumeclaim "data" not found
    waiting for ephemeral volume controller to create the persistentvolumeclaim "web-0-scratch"
    persistentvolumeclaim "data" bound to non-existent persistentvolume "pv-1"   (status.phase Lost)
    persistentvolumeclaim "data" is being deleted
    PVC ns/web-0-scratch was not created for pod ns/web-0 (pod is not owner)

Then every claim must be bound (spec.volumeName set), else

    pod has unbound immediate PersistentVolumeClaims

Filter: the bound PersistentVolumes must exist and their spec.nodeAffinity.required must match the
node's labels (upstream's CheckNodeAffinity sees only the labels: matchFields never match):

    node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)
    node(s) had volume node affinity conflict

No PreFilterResult (upstream dropped its node-name narrowing for local volumes). Reserve, PreBind
and Unreserve have nothing to do for bound claims (upstream's AssumePodVolumes finds them all
bound), so the plugin has none. Known differences: upstream counts a claim as bound only once the
PV controller set `pv.kubernetes.io/bind-completed` (a claim with only spec.volumeName is
"unbound immediate" there); dynamic provisioning and delayed (WaitForFirstConsumer) binding are
not done here: any unbound claim is reported as "unbound immediate". Lookups go through the
`get_pvc` / `get_pv` services.

Events, with upstream's queueing hints: PersistentVolumeClaim Add/Update (a claim of the pod, in its
namespace), PersistentVolume Add/Update, StorageClass Add/Update (a new class, or changed
allowedTopologies), Node Add/UpdateNodeLabel, CSINode Add/Update (new, or its migrated-plugins
annotation changed).
"""

from __future__ import annotations

from typing import Any

from kubecore.controllers.daemonset_predicates import term_matches
from kubecore.scheduler import events as ev
from kubecore.scheduler.events import ActionType, ClusterEvent, ClusterEventWithHint, QueueingHint
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
MIGRATED_PLUGINS_ANNOTATION = "storage.alpha.kubernetes.io/migrated-plugins"
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


def _controlled_by(pvc: Obj, pod: Obj) -> bool:
    """metav1.IsControlledBy: the claim's (first) controller reference names the pod's uid."""
    uid = (pod.get("metadata") or {}).get("uid") or ""
    for ref in (pvc.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return bool((ref.get("uid") or "") == uid)
    return False


def _claim_problem(pvc: Obj | None, claim: str, ephemeral: bool, pod: Obj) -> str:
    """Why the claim rules the pod out before any binding question (upstream podHasPVCs), or ""."""
    if pvc is None:
        if ephemeral:
            return f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{claim}"'
        return f'persistentvolumeclaim "{claim}" not found'
    meta = pvc.get("metadata") or {}
    name = meta.get("name", claim)
    if (pvc.get("status") or {}).get("phase") == "Lost":
        volume = (pvc.get("spec") or {}).get("volumeName") or ""
        return f'persistentvolumeclaim "{name}" bound to non-existent persistentvolume "{volume}"'
    if meta.get("deletionTimestamp"):
        return f'persistentvolumeclaim "{name}" is being deleted'
    if ephemeral and not _controlled_by(pvc, pod):
        ns = _namespace(pod)
        return f"PVC {ns}/{name} was not created for pod {ns}/{(pod.get('metadata') or {}).get('name', '')} " \
               "(pod is not owner)"
    return ""


def _pv_fits(pv: Obj, labels: dict[str, str]) -> bool:
    """volume.CheckNodeAffinity: the required terms against a node that has only these labels."""
    required = ((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required")
    if required is None:
        return True
    node = {"metadata": {"labels": labels}}
    return any(term_matches(t, node) for t in required.get("nodeSelectorTerms") or () if isinstance(t, dict))


def _objects(old: Any, new: Any) -> tuple[Obj | None, Obj]:
    """util.As: the event's objects, or an error (a hint's error counts as Queue)."""
    if not isinstance(new, dict) or (old is not None and not isinstance(old, dict)):
        raise TypeError(f"unexpected objects {type(old).__name__}, {type(new).__name__}")
    return old, new


def _namespace(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "default")


def after_claim_change(pod: Obj, old: Any, new: Any) -> QueueingHint:
    """A claim of the pod (in its namespace) was created or updated."""
    _, pvc = _objects(old, new)
    if _namespace(pvc) != _namespace(pod):
        return QueueingHint.SKIP
    name = (pvc.get("metadata") or {}).get("name")
    return QueueingHint.QUEUE if any(claim == name for claim, _ in pod_claim_names(pod)) else QueueingHint.SKIP


def after_storage_class_change(pod: Obj, old: Any, new: Any) -> QueueingHint:
    """A new StorageClass, or one whose allowedTopologies changed (the binding mode is immutable)."""
    before, after = _objects(old, new)
    if before is None:
        return QueueingHint.QUEUE
    changed = (before.get("allowedTopologies") or []) != (after.get("allowedTopologies") or [])
    return QueueingHint.QUEUE if changed else QueueingHint.SKIP


def after_csi_node_change(pod: Obj, old: Any, new: Any) -> QueueingHint:
    """A new CSINode, or one whose migrated-plugins annotation changed."""
    before, after = _objects(old, new)
    if before is None:
        return QueueingHint.QUEUE

    def migrated(obj: Obj) -> str:
        return str(((obj.get("metadata") or {}).get("annotations") or {}).get(MIGRATED_PLUGINS_ANNOTATION, ""))

    return QueueingHint.QUEUE if migrated(before) != migrated(after) else QueueingHint.SKIP


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
        ns = _namespace(pod)
        pvcs: list[Obj] = []
        for claim, ephemeral in claims:
            pvc = self._get_pvc(ns, claim)
            problem = _claim_problem(pvc, claim, ephemeral, pod)
            if problem:
                return None, Status(_UU, problem)
            assert pvc is not None
            pvcs.append(pvc)
        volumes: list[str] = []
        for pvc in pvcs:
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
        labels = node_info.labels
        for name in volumes:
            pv = self._get_pv(name)
            if pv is None:
                return Status(_UU, ERR_PV_NOT_EXIST)
            if not _pv_fits(pv, labels):
                return Status(_UU, ERR_NODE_CONFLICT)
        return None

    def events_to_register(self) -> list[ClusterEventWithHint]:
        a = ActionType
        return [ClusterEventWithHint(ClusterEvent(ev.STORAGE_CLASS, a.ADD | a.UPDATE), after_storage_class_change),
                ClusterEventWithHint(ClusterEvent(ev.PERSISTENT_VOLUME_CLAIM, a.ADD | a.UPDATE), after_claim_change),
                ClusterEventWithHint(ClusterEvent(ev.PERSISTENT_VOLUME, a.ADD | a.UPDATE)),
                ClusterEventWithHint(ClusterEvent(ev.NODE, a.ADD | a.UPDATE_NODE_LABEL)),
                ClusterEventWithHint(ClusterEvent(ev.CSI_NODE, a.ADD | a.UPDATE), after_csi_node_change)]


def new(args: Any, handle: Handle) -> VolumeBinding:
    return VolumeBinding(handle)
