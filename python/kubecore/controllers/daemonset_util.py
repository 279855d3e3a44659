"""What a DaemonSet's pods and revisions look like (upstream pkg/controller/daemon/util and the
helpers of update.go). Pure functions over plain dicts.

Placement. The controller never binds a pod: each pod it creates carries a required node affinity
that only one node satisfies,

    spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms =
        [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["<node>"]}]}]

(replacing whatever required terms the template had; the controller already checked those), and
the scheduler binds it. Until then `target_node_name` reads the node back from that term.

Tolerations added to every daemon pod (so node problems do not evict or block it):

    node.kubernetes.io/not-ready         Exists  NoExecute
    node.kubernetes.io/unreachable       Exists  NoExecute
    node.kubernetes.io/disk-pressure     Exists  NoSchedule
    node.kubernetes.io/memory-pressure   Exists  NoSchedule
    node.kubernetes.io/pid-pressure      Exists  NoSchedule
    node.kubernetes.io/unschedulable     Exists  NoSchedule
    node.kubernetes.io/network-unavailable Exists NoSchedule   (hostNetwork pods only)

Revisions. A pod is "updated" when its controller-revision-hash label is the current revision's
hash (or its pod-template-generation label equals the deprecated template-generation annotation).
Revision data is {"spec": {"template": <template + "$patch": "replace">}}, as for StatefulSets.
"""

from __future__ import annotations

import copy
from typing import Any

from kubecore.controllers.controller_utils import labels_of, meta, scaled_value_from_int_or_percent
from kubecore.controllers.history import canonical_json

Obj = dict[str, Any]

API_VERSION, KIND = "apps/v1", "DaemonSet"
UNIQUE_LABEL = "controller-revision-hash"
"""DefaultDaemonSetUniqueLabelKey: the hash of the revision a pod was made from."""
TEMPLATE_GENERATION_LABEL = "pod-template-generation"
TEMPLATE_GENERATION_ANNOTATION = "deprecated.daemonset.template.generation"
NODE_NAME_FIELD = "metadata.name"
ROLLING_UPDATE, ON_DELETE = "RollingUpdate", "OnDelete"

_NO_EXECUTE, _NO_SCHEDULE = "NoExecute", "NoSchedule"
DEFAULT_TOLERATIONS = (
    ("node.kubernetes.io/not-ready", _NO_EXECUTE),
    ("node.kubernetes.io/unreachable", _NO_EXECUTE),
    ("node.kubernetes.io/disk-pressure", _NO_SCHEDULE),
    ("node.kubernetes.io/memory-pressure", _NO_SCHEDULE),
    ("node.kubernetes.io/pid-pressure", _NO_SCHEDULE),
    ("node.kubernetes.io/unschedulable", _NO_SCHEDULE),
)
HOST_NETWORK_TOLERATION = ("node.kubernetes.io/network-unavailable", _NO_SCHEDULE)


# -- spec accessors -------------------------------------------------------------------------------
def spec(ds: Obj) -> Obj:
    s = ds.get("spec")
    return s if isinstance(s, dict) else {}


def template(ds: Obj) -> Obj:
    t = spec(ds).get("template")
    return t if isinstance(t, dict) else {}


def min_ready_seconds(ds: Obj) -> int:
    return int(spec(ds).get("minReadySeconds") or 0)


def strategy(ds: Obj) -> Obj:
    s = spec(ds).get("updateStrategy")
    return s if isinstance(s, dict) else {}


def strategy_type(ds: Obj) -> str:
    return str(strategy(ds).get("type") or ROLLING_UPDATE)


def revision_history_limit(ds: Obj) -> int:
    value = spec(ds).get("revisionHistoryLimit")
    return 10 if value is None else int(value)


def collision_count(ds: Obj) -> int | None:
    value = (ds.get("status") or {}).get("collisionCount")
    return None if value is None else int(value)


# -- surge and unavailability --------------------------------------------------------------------
def _rolling(ds: Obj) -> Obj | None:
    if strategy_type(ds) != ROLLING_UPDATE:
        return None
    ru = strategy(ds).get("rollingUpdate")
    return ru if isinstance(ru, dict) else None


def surge_count(ds: Obj, number_to_schedule: int) -> int:
    """maxSurge scaled against the desired number (rounded up); 0 when unset or not rolling."""
    ru = _rolling(ds)
    if ru is None or ru.get("maxSurge") is None:
        return 0
    return scaled_value_from_int_or_percent(ru["maxSurge"], number_to_schedule, round_up=True)


def unavailable_count(ds: Obj, number_to_schedule: int) -> int:
    """maxUnavailable scaled against the desired number (rounded up); 0 when not rolling."""
    ru = _rolling(ds)
    if ru is None:
        return 0
    return scaled_value_from_int_or_percent(ru.get("maxUnavailable"), number_to_schedule, round_up=True)


def allows_surge(ds: Obj) -> bool:
    try:
        return surge_count(ds, 1) > 0
    except ValueError:
        return False


# -- pods -----------------------------------------------------------------------------------------
def template_generation(ds: Obj) -> int | None:
    """The deprecated template-generation annotation (None when absent or malformed)."""
    raw = (meta(ds).get("annotations") or {}).get(TEMPLATE_GENERATION_ANNOTATION)
    try:
        return None if raw is None else int(str(raw))
    except ValueError:
        return None


def is_pod_updated(pod: Obj, hash_: str, generation: int | None) -> bool:
    labels = labels_of(pod)
    template_matches = generation is not None and labels.get(TEMPLATE_GENERATION_LABEL) == str(generation)
    return (bool(hash_) and labels.get(UNIQUE_LABEL) == hash_) or template_matches


def _same_toleration(a: Obj, b: Obj) -> bool:
    return all((a.get(k) or "") == (b.get(k) or "") for k in ("key", "operator", "value", "effect"))


def add_or_update_toleration(pod_spec: Obj, toleration: Obj) -> None:
    """Mutates `pod_spec`: replace a toleration of the same key/operator/value/effect, else append."""
    current = [t for t in pod_spec.get("tolerations") or () if isinstance(t, dict)]
    for i, t in enumerate(current):
        if _same_toleration(t, toleration):
            if t != toleration:
                current[i] = dict(toleration)
                pod_spec["tolerations"] = current
            return
    pod_spec["tolerations"] = [*current, dict(toleration)]


def add_daemon_pod_tolerations(pod_spec: Obj) -> None:
    """Mutates `pod_spec`: the default daemon tolerations (module docstring)."""
    extra = (HOST_NETWORK_TOLERATION,) if pod_spec.get("hostNetwork") else ()
    for key, effect in (*DEFAULT_TOLERATIONS, *extra):
        add_or_update_toleration(pod_spec, {"key": key, "operator": "Exists", "effect": effect})


def create_pod_template(tmpl: Obj, *, generation: int | None, hash_: str) -> Obj:
    """A copy of the template with the daemon tolerations and the generation and hash labels."""
    out = copy.deepcopy(tmpl)
    add_daemon_pod_tolerations(out.setdefault("spec", {}))
    labels = out.setdefault("metadata", {}).setdefault("labels", {})
    if generation is not None:
        labels[TEMPLATE_GENERATION_LABEL] = str(generation)
    if hash_:
        labels[UNIQUE_LABEL] = hash_
    return out


def replace_node_name_affinity(affinity: Obj | None, node_name: str) -> Obj:
    """A copy of `affinity` whose required node affinity selects exactly `node_name`."""
    term = {"matchFields": [{"key": NODE_NAME_FIELD, "operator": "In", "values": [node_name]}]}
    out = copy.deepcopy(affinity) if isinstance(affinity, dict) else {}
    node_affinity = out.setdefault("nodeAffinity", {})
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if not isinstance(required, dict):
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [term]}
    else:
        required["nodeSelectorTerms"] = [term]
    return out


def target_node_name(pod: Obj) -> str | None:
    """spec.nodeName, else the node of the pod's metadata.name matchFields term (None: neither)."""
    pod_spec = pod.get("spec") or {}
    if pod_spec.get("nodeName"):
        return str(pod_spec["nodeName"])
    required = (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    for term in required.get("nodeSelectorTerms") or ():
        for req in (term or {}).get("matchFields") or ():
            if req.get("key") == NODE_NAME_FIELD and req.get("operator") == "In":
                values = req.get("values") or []
                return str(values[0]) if len(values) == 1 else None
    return None


# -- revisions -------------------------------------------------------------------------------------
def get_patch(ds: Obj) -> Obj:
    """The revision data restoring the DaemonSet's template."""
    tmpl = copy.deepcopy(template(ds))
    tmpl["$patch"] = "replace"
    return {"spec": {"template": tmpl}}


def matches_revision(ds: Obj, revision: Obj) -> bool:
    """Whether `revision` stores the DaemonSet's current template (upstream's Match)."""
    return canonical_json(get_patch(ds)) == canonical_json(revision.get("data"))
