"""What a StatefulSet's pods, claims and revisions look like (upstream
pkg/controller/statefulset/stateful_set_utils.go). Pure functions over plain dicts; nothing here
talks to the API server, and nothing mutates its arguments unless its name says so.

Identity. The pod of ordinal i is named "<set>-<i>" (ordinals run from spec.ordinals.start, default
0, for spec.replicas pods) and carries the labels

    statefulset.kubernetes.io/pod-name   "<set>-<i>"
    apps.kubernetes.io/pod-index         "<i>"
    controller-revision-hash             the name of the ControllerRevision it was made from

and spec.hostname "<set>-<i>", spec.subdomain spec.serviceName (set once, at creation). A pod's
ordinal is parsed back from its name ("(.*)-([0-9]+)$"); a name that does not parse has ordinal -1.

Storage. Each volumeClaimTemplate "data" gives the pod a claim "data-<set>-<i>" (the template with
that name, the set's namespace and the selector's matchLabels added to its labels) and a volume
"data" referring to it, replacing any template volume of the same name.

Revisions. A revision's data is `get_patch(set)`, {"spec": {"template": <template + "$patch":
"replace">}}; applying it (`apply_revision`) puts that template back into a copy of the set.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from kubecore.controllers.controller_utils import (
    is_pod_available, is_pod_ready, labels_of, meta, new_controller_ref, pod_phase,
    scaled_value_from_int_or_percent,
)
from kubecore.controllers.history import new_controller_revision
from kubecore.controllers.podcontrol import pod_from_template

Obj = dict[str, Any]

API_VERSION, KIND = "apps/v1", "StatefulSet"
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
REVISION_LABEL = "controller-revision-hash"
ORDERED_READY, PARALLEL = "OrderedReady", "Parallel"
ROLLING_UPDATE, ON_DELETE = "RollingUpdate", "OnDelete"
RETAIN, DELETE = "Retain", "Delete"

_POD_NAME = re.compile(r"^(.*)-([0-9]+)$")


# -- spec accessors -------------------------------------------------------------------------------
def spec(set_: Obj) -> Obj:
    s = set_.get("spec")
    return s if isinstance(s, dict) else {}


def replicas(set_: Obj) -> int:
    value = spec(set_).get("replicas")
    return 1 if value is None else int(value)


def min_ready_seconds(set_: Obj) -> int:
    return int(spec(set_).get("minReadySeconds") or 0)


def update_strategy(set_: Obj) -> Obj:
    s = spec(set_).get("updateStrategy")
    return s if isinstance(s, dict) else {}


def strategy_type(set_: Obj) -> str:
    return str(update_strategy(set_).get("type") or ROLLING_UPDATE)


def rolling_update(set_: Obj) -> Obj | None:
    ru = update_strategy(set_).get("rollingUpdate")
    return ru if isinstance(ru, dict) else None


def partition(set_: Obj) -> int:
    ru = rolling_update(set_)
    return int(ru.get("partition") or 0) if ru is not None else 0


def allows_burst(set_: Obj) -> bool:
    """Parallel pod management: create and delete without waiting on each other."""
    return spec(set_).get("podManagementPolicy") == PARALLEL


def revision_history_limit(set_: Obj) -> int:
    value = spec(set_).get("revisionHistoryLimit")
    return 10 if value is None else int(value)


def claim_templates(set_: Obj) -> list[Obj]:
    return [t for t in spec(set_).get("volumeClaimTemplates") or () if isinstance(t, dict)]


def retention_policy(set_: Obj) -> tuple[str, str]:
    """(whenDeleted, whenScaled); Retain for whatever is unset."""
    policy = spec(set_).get("persistentVolumeClaimRetentionPolicy") or {}
    return str(policy.get("whenDeleted") or RETAIN), str(policy.get("whenScaled") or RETAIN)


def max_unavailable(set_: Obj) -> int:
    """rollingUpdate.maxUnavailable scaled against replicas (rounded down), at least 1."""
    ru = rolling_update(set_) or {}
    value = ru.get("maxUnavailable")
    n = scaled_value_from_int_or_percent(1 if value is None else value, replicas(set_), round_up=False)
    return max(1, n)


# -- ordinals and names ---------------------------------------------------------------------------
def parent_name_and_ordinal(name: str) -> tuple[str, int]:
    """("web", 3) for "web-3"; ("", -1) when the name has no ordinal."""
    match = _POD_NAME.match(name)
    if match is None:
        return "", -1
    ordinal = int(match.group(2))
    return match.group(1), ordinal if ordinal < 2**31 else -1


def ordinal_of(pod: Obj) -> int:
    return parent_name_and_ordinal(str(meta(pod).get("name", "")))[1]


def start_ordinal(set_: Obj) -> int:
    ordinals = spec(set_).get("ordinals")
    return int(ordinals.get("start") or 0) if isinstance(ordinals, dict) else 0


def end_ordinal(set_: Obj) -> int:
    """The last ordinal of the set (inclusive)."""
    return start_ordinal(set_) + replicas(set_) - 1


def pod_in_ordinal_range(pod: Obj, set_: Obj) -> bool:
    return start_ordinal(set_) <= ordinal_of(pod) <= end_ordinal(set_)


def pod_name(set_: Obj, ordinal: int) -> str:
    return f"{meta(set_).get('name', '')}-{ordinal}"


def claim_name(set_: Obj, template_name: str, ordinal: int) -> str:
    return f"{template_name}-{meta(set_).get('name', '')}-{ordinal}"


def is_member_of(set_: Obj, pod: Obj) -> bool:
    return parent_name_and_ordinal(str(meta(pod).get("name", "")))[0] == meta(set_).get("name")


# -- pod predicates ---------------------------------------------------------------------------------
def is_created(pod: Obj) -> bool:
    """The API server has the pod (it has a phase)."""
    return pod_phase(pod) != ""


def is_pending(pod: Obj) -> bool:
    return pod_phase(pod) == "Pending"


def is_failed(pod: Obj) -> bool:
    return pod_phase(pod) == "Failed"


def is_succeeded(pod: Obj) -> bool:
    return pod_phase(pod) == "Succeeded"


def is_terminating(pod: Obj) -> bool:
    return bool(meta(pod).get("deletionTimestamp"))


def is_running_and_ready(pod: Obj) -> bool:
    return pod_phase(pod) == "Running" and is_pod_ready(pod)


def is_running_and_available(pod: Obj, min_ready: int, now: float) -> bool:
    return is_pod_available(pod, min_ready, now)


def is_healthy(pod: Obj) -> bool:
    return is_running_and_ready(pod) and not is_terminating(pod)


def is_unavailable(pod: Obj, min_ready: int, now: float) -> bool:
    return not is_pod_available(pod, min_ready, now) or is_terminating(pod)


def pod_revision(pod: Obj) -> str:
    return labels_of(pod).get(REVISION_LABEL, "")


# -- identity and storage ---------------------------------------------------------------------------
def identity_matches(set_: Obj, pod: Obj) -> bool:
    m = meta(pod)
    parent, ordinal = parent_name_and_ordinal(str(m.get("name", "")))
    return (ordinal >= 0 and parent == meta(set_).get("name") and m.get("name") == pod_name(set_, ordinal)
            and m.get("namespace") == meta(set_).get("namespace")
            and labels_of(pod).get(POD_NAME_LABEL) == m.get("name"))


def storage_matches(set_: Obj, pod: Obj) -> bool:
    """Every claim template has a pod volume of its name referring to the pod's claim."""
    ordinal = ordinal_of(pod)
    if ordinal < 0:
        return False
    volumes = {str(v.get("name")): v for v in (pod.get("spec") or {}).get("volumes") or () if isinstance(v, dict)}
    for template in claim_templates(set_):
        name = str(meta(template).get("name", ""))
        source = (volumes.get(name) or {}).get("persistentVolumeClaim")
        if not isinstance(source, dict) or source.get("claimName") != claim_name(set_, name, ordinal):
            return False
    return True


def persistent_volume_claims(set_: Obj, ordinal: int) -> dict[str, Obj]:
    """Template name -> the claim the pod of `ordinal` uses (upstream's getPersistentVolumeClaims)."""
    match_labels = (spec(set_).get("selector") or {}).get("matchLabels") or {}
    claims: dict[str, Obj] = {}
    for template in claim_templates(set_):
        claim = copy.deepcopy(template)
        claim.setdefault("apiVersion", "v1")
        claim.setdefault("kind", "PersistentVolumeClaim")
        cm = claim.setdefault("metadata", {})
        template_name = str(cm.get("name", ""))
        cm["name"] = claim_name(set_, template_name, ordinal)
        cm["namespace"] = meta(set_).get("namespace")
        cm["labels"] = {**(cm.get("labels") or {}), **match_labels}
        claim.pop("status", None)
        claims[template_name] = claim
    return claims


def update_storage(set_: Obj, pod: Obj) -> None:
    """Mutates `pod`: claim volumes first (template order), then its other volumes."""
    pod_spec = pod.setdefault("spec", {})
    claims = persistent_volume_claims(set_, ordinal_of(pod))
    volumes = [{"name": name, "persistentVolumeClaim": {"claimName": claim["metadata"]["name"]}}
               for name, claim in claims.items()]
    volumes.extend(v for v in pod_spec.get("volumes") or () if isinstance(v, dict) and v.get("name") not in claims)
    pod_spec["volumes"] = volumes


def update_identity(set_: Obj, pod: Obj) -> None:
    """Mutates `pod`: name, namespace, pod-name and pod-index labels."""
    ordinal = ordinal_of(pod)
    pm = pod.setdefault("metadata", {})
    pm["name"] = pod_name(set_, ordinal)
    pm["namespace"] = meta(set_).get("namespace")
    labels = pm.setdefault("labels", {})
    labels[POD_NAME_LABEL] = pm["name"]
    labels[POD_INDEX_LABEL] = str(ordinal)


def init_identity(set_: Obj, pod: Obj) -> None:
    """`update_identity` plus hostname and subdomain, which are immutable once created."""
    update_identity(set_, pod)
    pod_spec = pod.setdefault("spec", {})
    pod_spec["hostname"] = pod["metadata"]["name"]
    service_name = spec(set_).get("serviceName")
    if service_name:
        pod_spec["subdomain"] = service_name


def new_stateful_set_pod(set_: Obj, ordinal: int) -> Obj:
    """The pod of `ordinal` from the set's template (not yet created: it has no status)."""
    template = spec(set_).get("template") or {}
    ref = new_controller_ref(set_, api_version=API_VERSION, kind=KIND)
    pod = pod_from_template(template, owner=set_, controller_ref=ref)
    pod["metadata"]["name"] = pod_name(set_, ordinal)
    init_identity(set_, pod)
    update_storage(set_, pod)
    return pod


def new_versioned_stateful_set_pod(current_set: Obj, update_set: Obj, *, current_revision: str,
                                   update_revision: str, ordinal: int) -> Obj:
    """A new pod at the current revision when it is below the partition (or, without a
    rollingUpdate block, below start + status.currentReplicas), else at the update revision."""
    rolling = rolling_update(current_set)
    start = start_ordinal(current_set)
    current_replicas = int((current_set.get("status") or {}).get("currentReplicas") or 0)
    use_current = ((strategy_type(current_set) == ROLLING_UPDATE and rolling is None
                    and ordinal < start + current_replicas)
                   or (rolling is not None and ordinal < start + partition(current_set)))
    source, revision = (current_set, current_revision) if use_current else (update_set, update_revision)
    pod = new_stateful_set_pod(source, ordinal)
    pod["metadata"].setdefault("labels", {})[REVISION_LABEL] = revision
    return pod


# -- revisions --------------------------------------------------------------------------------------
def get_patch(set_: Obj) -> Obj:
    """The revision data restoring the set's template."""
    template = copy.deepcopy(spec(set_).get("template") or {})
    template["$patch"] = "replace"
    return {"spec": {"template": template}}


def new_revision(set_: Obj, revision: int, collision_count: int | None) -> Obj:
    """An unsaved ControllerRevision of the set's current template, carrying its annotations."""
    template_labels = ((spec(set_).get("template") or {}).get("metadata") or {}).get("labels") or {}
    cr = new_controller_revision(set_, api_version=API_VERSION, kind=KIND, template_labels=dict(template_labels),
                                 data=get_patch(set_), revision=revision, collision_count=collision_count)
    annotations = meta(set_).get("annotations")
    if annotations:
        cr["metadata"]["annotations"] = dict(annotations)
    return cr


def apply_revision(set_: Obj, revision: Obj) -> Obj:
    """A copy of the set with the revision's template (the strategic merge patch's effect)."""
    clone = copy.deepcopy(set_)
    template = ((revision.get("data") or {}).get("spec") or {}).get("template")
    if isinstance(template, dict):
        clone.setdefault("spec", {})["template"] = {k: copy.deepcopy(v) for k, v in template.items()
                                                    if k != "$patch"}
    return clone


# -- status -------------------------------------------------------------------------------------------
STATUS_FIELDS = ("replicas", "currentReplicas", "readyReplicas", "updatedReplicas", "availableReplicas",
                 "currentRevision", "updateRevision")


def inconsistent_status(set_: Obj, status: Obj) -> bool:
    """Whether `status` says something the set's status does not (so it must be written)."""
    old = set_.get("status") or {}
    if int(status.get("observedGeneration") or 0) > int(old.get("observedGeneration") or 0):
        return True
    for f in STATUS_FIELDS:
        default: Any = "" if f.endswith("Revision") else 0
        if (status.get(f) or default) != (old.get(f) or default):
            return True
    return False


def complete_rolling_update(set_: Obj, status: Obj) -> None:
    """Mutates `status`: once every replica is updated and ready, the update revision becomes current."""
    want = replicas(set_)
    if (strategy_type(set_) == ROLLING_UPDATE and status.get("updatedReplicas") == want
            and status.get("readyReplicas") == want and status.get("replicas") == want):
        status["currentReplicas"] = status["updatedReplicas"]
        status["currentRevision"] = status["updateRevision"]
