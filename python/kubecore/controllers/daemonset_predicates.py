"""Which nodes a DaemonSet runs on (upstream daemon_controller.go NodeShouldRunDaemonPod and
predicates, with component-helpers' node affinity and taint matching).

The controller simulates the pod it would create on the node (the template, the node's name,
the default daemon tolerations) and asks:

- fits node name: the template's spec.nodeName is empty or this node;
- fits node affinity: every spec.nodeSelector label is on the node, and at least one of the
  required node affinity terms matches (a term matches when all its matchExpressions match the
  node's labels and all its matchFields match its fields, where only metadata.name exists; an
  empty term matches nothing; a requirement that cannot be parsed fails its term);
- fits taints: every NoSchedule/NoExecute taint of the node is tolerated.

Answer (should_run, should_continue_running):

    name or affinity does not fit                 (False, False)
    a NoSchedule/NoExecute taint not tolerated    (False, no NoExecute taint untolerated)
    otherwise                                     (True, True)

so an existing pod keeps running on a node that gained only a NoSchedule taint, and is removed
from one with an untolerated NoExecute taint.

Tolerations (v1 Toleration.ToleratesTaint): an empty effect matches every effect, an empty key
with Exists matches every key; Exists ignores the value, Equal (or empty) compares it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubecore.controllers.controller_utils import labels_of, meta
from kubecore.controllers.daemonset_util import NODE_NAME_FIELD, add_daemon_pod_tolerations, template

Obj = dict[str, Any]
NO_SCHEDULE, NO_EXECUTE = "NoSchedule", "NoExecute"


class InvalidRequirement(ValueError):
    """A node selector requirement that cannot be evaluated."""


def requirement_matches(req: Obj, values_by_key: dict[str, str]) -> bool:
    """One NodeSelectorRequirement against labels (or fields). Raises InvalidRequirement."""
    key, op, values = str(req.get("key") or ""), req.get("operator"), [str(v) for v in req.get("values") or ()]
    present = key in values_by_key
    if op in ("In", "NotIn"):
        if not values:
            raise InvalidRequirement(f"{op} needs values (key {key!r})")
        inside = present and values_by_key[key] in values
        return inside if op == "In" else not inside
    if op in ("Exists", "DoesNotExist"):
        if values:
            raise InvalidRequirement(f"{op} takes no values (key {key!r})")
        return present if op == "Exists" else not present
    if op in ("Gt", "Lt"):
        if len(values) != 1:
            raise InvalidRequirement(f"{op} needs exactly one value (key {key!r})")
        try:
            bound = int(values[0])
        except ValueError:
            raise InvalidRequirement(f"{op} needs an integer (key {key!r})") from None
        if not present:
            return False
        try:
            actual = int(values_by_key[key])
        except ValueError:
            return False
        return actual > bound if op == "Gt" else actual < bound
    raise InvalidRequirement(f"{op!r} is not a valid node selector operator")


def _field_requirement_matches(req: Obj, fields: dict[str, str]) -> bool:
    if req.get("key") != NODE_NAME_FIELD or req.get("operator") not in ("In", "NotIn"):
        raise InvalidRequirement(f"unsupported field requirement {req!r}")
    return requirement_matches(req, fields)


def term_matches(term: Obj, node: Obj) -> bool:
    """A NodeSelectorTerm: non-empty, and all requirements match (unparseable: no match)."""
    expressions = [r for r in term.get("matchExpressions") or () if isinstance(r, dict)]
    fields_reqs = [r for r in term.get("matchFields") or () if isinstance(r, dict)]
    if not expressions and not fields_reqs:
        return False
    labels, fields = labels_of(node), {NODE_NAME_FIELD: str(meta(node).get("name", ""))}
    try:
        return (all(requirement_matches(r, labels) for r in expressions)
                and all(_field_requirement_matches(r, fields) for r in fields_reqs))
    except InvalidRequirement:
        return False


def required_node_affinity_matches(pod_spec: Obj, node: Obj) -> bool:
    """spec.nodeSelector and the required node affinity terms (nodeaffinity.GetRequiredNodeAffinity)."""
    node_labels = labels_of(node)
    for k, v in (pod_spec.get("nodeSelector") or {}).items():
        if node_labels.get(k) != v:
            return False
    required = (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if required is None:
        return True
    return any(term_matches(t, node) for t in required.get("nodeSelectorTerms") or () if isinstance(t, dict))


def tolerates(toleration: Obj, taint: Obj) -> bool:
    """v1 Toleration.ToleratesTaint."""
    effect, key = toleration.get("effect") or "", toleration.get("key") or ""
    if effect and effect != taint.get("effect"):
        return False
    if key and key != taint.get("key"):
        return False
    op = toleration.get("operator") or "Equal"
    if op == "Exists":
        return True
    if op == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def find_untolerated_taint(taints: list[Obj], tolerations: list[Obj],
                           consider: Callable[[Obj], bool]) -> Obj | None:
    """The first taint passing `consider` that no toleration tolerates."""
    for taint in taints:
        if consider(taint) and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def simulated_pod_spec(ds: Obj, node_name: str) -> Obj:
    """The spec of the pod the DaemonSet would run on `node_name` (upstream's NewPod)."""
    tmpl_spec = template(ds).get("spec") or {}
    pod_spec = {**tmpl_spec, "nodeName": node_name}
    if "tolerations" in tmpl_spec:
        pod_spec["tolerations"] = list(tmpl_spec["tolerations"] or ())
    add_daemon_pod_tolerations(pod_spec)
    return pod_spec


def node_should_run_daemon_pod(node: Obj, ds: Obj) -> tuple[bool, bool]:
    """(should_run, should_continue_running) for `ds` on `node` (module docstring)."""
    name = str(meta(node).get("name", ""))
    wanted = (template(ds).get("spec") or {}).get("nodeName")
    if wanted and wanted != name:
        return False, False
    pod_spec = simulated_pod_spec(ds, name)
    if not required_node_affinity_matches(pod_spec, node):
        return False, False
    taints = [t for t in (node.get("spec") or {}).get("taints") or () if isinstance(t, dict)]
    tolerations = [t for t in pod_spec.get("tolerations") or () if isinstance(t, dict)]
    if find_untolerated_taint(taints, tolerations, lambda t: t.get("effect") in (NO_SCHEDULE, NO_EXECUTE)) is None:
        return True, True
    untolerated_no_execute = find_untolerated_taint(taints, tolerations, lambda t: t.get("effect") == NO_EXECUTE)
    return False, untolerated_no_execute is None
