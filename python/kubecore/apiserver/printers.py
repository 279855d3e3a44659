"""Table columns per kind, as upstream's printers (pkg/printers/internalversion) show them.

A printer is a list of columns and a function from an object to its cells. Types without one of
their own get Name and Age. Ages are rendered as kubectl does (`HumanDuration`).
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Callable

from kubecore.api import jsonpath

Obj = dict[str, Any]
Column = tuple[str, str, int]  # name, type, priority (1 = only with -o wide)
Cells = Callable[[Obj, dt.datetime], list[Any]]


def human_duration(seconds: float) -> str:
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rem = s % 60
        return f"{minutes}m" if rem == 0 else f"{minutes}m{rem}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rem = minutes % 60
        return f"{hours}h" if rem == 0 else f"{hours}h{rem}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rem = hours % 24
        return f"{hours // 24}d" if rem == 0 else f"{hours // 24}d{rem}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def age(obj: Obj, now: dt.datetime) -> str:
    ts = (obj.get("metadata") or {}).get("creationTimestamp")
    if not ts:
        return "<unknown>"
    created = dt.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)
    return human_duration((now - created).total_seconds())


def _name(o: Obj) -> str:
    return str((o.get("metadata") or {}).get("name", ""))


def _pod_cells(o: Obj, now: dt.datetime) -> list[Any]:
    spec, status = o.get("spec") or {}, o.get("status") or {}
    containers = spec.get("containers") or []
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for c in statuses if c.get("ready"))
    restarts = sum(int(c.get("restartCount", 0)) for c in statuses)
    phase = status.get("reason") or status.get("phase") or "Pending"
    if (o.get("metadata") or {}).get("deletionTimestamp"):
        phase = "Terminating"
    gates = spec.get("readinessGates") or []
    return [
        _name(o), f"{ready}/{len(containers)}", phase, restarts, age(o, now),
        status.get("podIP") or "<none>", spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>", f"{len(gates)}" if gates else "<none>",
    ]


def _svc_ports(spec: Obj) -> str:
    out = []
    for p in spec.get("ports") or []:
        s = f"{p.get('port')}"
        if p.get("nodePort"):
            s += f":{p['nodePort']}"
        out.append(f"{s}/{p.get('protocol', 'TCP')}")
    return ",".join(out) or "<none>"


def _selector(sel: Any) -> str:
    if not sel:
        return "<none>"
    return ",".join(f"{k}={v}" for k, v in sorted(sel.items()))


def _workload(o: Obj, now: dt.datetime) -> list[Any]:
    spec, st = o.get("spec") or {}, o.get("status") or {}
    return [_name(o), f"{st.get('readyReplicas', 0)}/{spec.get('replicas', 1)}", st.get("updatedReplicas", 0),
            st.get("availableReplicas", 0), age(o, now)]


def _statefulset(o: Obj, now: dt.datetime) -> list[Any]:
    spec, st = o.get("spec") or {}, o.get("status") or {}
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    return [_name(o), f"{st.get('readyReplicas', 0)}/{spec.get('replicas', 1)}", age(o, now),
            ",".join(str(c.get("name", "")) for c in containers), ",".join(str(c.get("image", "")) for c in containers)]


def _daemonset(o: Obj, now: dt.datetime) -> list[Any]:
    spec, st = o.get("spec") or {}, o.get("status") or {}
    pod_spec = (spec.get("template") or {}).get("spec") or {}
    containers = pod_spec.get("containers") or []
    match = (spec.get("selector") or {}).get("matchLabels")
    return [_name(o), st.get("desiredNumberScheduled", 0), st.get("currentNumberScheduled", 0),
            st.get("numberReady", 0), st.get("updatedNumberScheduled", 0), st.get("numberAvailable", 0),
            _selector(pod_spec.get("nodeSelector")), age(o, now),
            ",".join(str(c.get("name", "")) for c in containers), ",".join(str(c.get("image", "")) for c in containers),
            _selector(match)]


def _controller_revision(o: Obj, now: dt.datetime) -> list[Any]:
    controller = "<none>"
    for ref in (o.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            group = str(ref.get("apiVersion", "")).rpartition("/")[0]
            kind = str(ref.get("kind", "")) + (f".{group}" if group else "")
            controller = f"{kind.lower()}/{ref.get('name', '')}"
    return [_name(o), controller, o.get("revision", 0), age(o, now)]


S, I = "string", "integer"
PRINTERS: dict[tuple[str, str], tuple[list[Column], Cells]] = {
    ("", "Namespace"): ([("Name", S, 0), ("Status", S, 0), ("Age", S, 0)],
                       lambda o, n: [_name(o), (o.get("status") or {}).get("phase", "Active"), age(o, n)]),
    ("", "ConfigMap"): ([("Name", S, 0), ("Data", I, 0), ("Age", S, 0)],
                       lambda o, n: [_name(o), len(o.get("data") or {}) + len(o.get("binaryData") or {}), age(o, n)]),
    ("", "Secret"): ([("Name", S, 0), ("Type", S, 0), ("Data", I, 0), ("Age", S, 0)],
                    lambda o, n: [_name(o), o.get("type", "Opaque"), len(o.get("data") or {}), age(o, n)]),
    ("", "ServiceAccount"): ([("Name", S, 0), ("Secrets", I, 0), ("Age", S, 0)],
                            lambda o, n: [_name(o), len(o.get("secrets") or []), age(o, n)]),
    ("", "Pod"): ([("Name", S, 0), ("Ready", S, 0), ("Status", S, 0), ("Restarts", S, 0), ("Age", S, 0),
                  ("IP", S, 1), ("Node", S, 1), ("Nominated Node", S, 1), ("Readiness Gates", S, 1)], _pod_cells),
    ("", "Service"): ([("Name", S, 0), ("Type", S, 0), ("Cluster-IP", S, 0), ("External-IP", S, 0), ("Port(s)", S, 0),
                      ("Age", S, 0), ("Selector", S, 1)],
                     lambda o, n: [_name(o), (o.get("spec") or {}).get("type", "ClusterIP"),
                                   (o.get("spec") or {}).get("clusterIP") or "<none>", "<none>",
                                   _svc_ports(o.get("spec") or {}), age(o, n), _selector((o.get("spec") or {}).get("selector"))]),
    ("", "Node"): ([("Name", S, 0), ("Status", S, 0), ("Roles", S, 0), ("Age", S, 0), ("Version", S, 0)],
                  lambda o, n: [_name(o), _node_status(o), "<none>", age(o, n),
                                ((o.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion", "")]),
    ("apps", "Deployment"): ([("Name", S, 0), ("Ready", S, 0), ("Up-to-date", I, 0), ("Available", I, 0), ("Age", S, 0)], _workload),
    ("apps", "StatefulSet"): ([("Name", S, 0), ("Ready", S, 0), ("Age", S, 0), ("Containers", S, 1), ("Images", S, 1)],
                              _statefulset),
    ("apps", "DaemonSet"): ([("Name", S, 0), ("Desired", I, 0), ("Current", I, 0), ("Ready", I, 0),
                            ("Up-to-date", I, 0), ("Available", I, 0), ("Node Selector", S, 0), ("Age", S, 0),
                            ("Containers", S, 1), ("Images", S, 1), ("Selector", S, 1)], _daemonset),
    ("apps", "ControllerRevision"): ([("Name", S, 0), ("Controller", S, 0), ("Revision", I, 0), ("Age", S, 0)],
                                     _controller_revision),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): (
        [("Name", S, 0), ("Scope", S, 0), ("Versions", S, 0), ("Created At", "date", 0), ("Group", S, 1),
         ("Kind", S, 1), ("ShortNames", S, 1), ("Established", "boolean", 1)],
        lambda o, n: _crd_cells(o)),
}


def _crd_cells(o: Obj) -> list[Any]:
    """registry/customresourcedefinition/tableconvertor: served versions sorted, the storage one marked."""
    spec = o.get("spec") or {}
    versions = sorted(f"{v.get('name', '')}{'(storage)' if v.get('storage') else ''}"
                      for v in spec.get("versions") or [] if isinstance(v, dict) and v.get("served"))
    names = spec.get("names") or {}
    established = any(c.get("type") == "Established" and c.get("status") == "True"
                      for c in (o.get("status") or {}).get("conditions") or [] if isinstance(c, dict))
    return [_name(o), spec.get("scope", ""), ",".join(versions), (o.get("metadata") or {}).get("creationTimestamp", ""),
            spec.get("group", ""), names.get("kind", ""), ",".join(names.get("shortNames") or []), established]


def _node_status(o: Obj) -> str:
    conds = (o.get("status") or {}).get("conditions") or []
    ready = next((c for c in conds if c.get("type") == "Ready"), None)
    s = "Ready" if ready and ready.get("status") == "True" else "NotReady" if ready else "Unknown"
    if (o.get("spec") or {}).get("unschedulable"):
        s += ",SchedulingDisabled"
    return s


DEFAULT: tuple[list[Column], Cells] = ([("Name", S, 0), ("Age", S, 0)], lambda o, n: [_name(o), age(o, n)])


def printer(group: str, kind: str) -> tuple[list[Column], Cells]:
    return PRINTERS.get((group, kind), DEFAULT)


# ---- custom resources: the CRD version's additionalPrinterColumns (tableconvertor) -------------

NAME_DESCRIPTION = (
    "Name must be unique within a namespace. Is required when creating resources, although some resources may "
    "allow a client to request the generation of an appropriate name automatically. Name is primarily intended "
    "for creation idempotence and configuration definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)
CREATION_TIMESTAMP_DESCRIPTION = (
    "CreationTimestamp is a timestamp representing the server time when this object was created. It is not "
    "guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It "
    "is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More "
    "info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
)


def _date_cell(value: Any, now: dt.datetime) -> Any:
    if not isinstance(value, str):
        return None
    try:
        t = dt.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)
    except ValueError:
        try:
            t = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return "<invalid>"
    return human_duration((now - t).total_seconds())


def _cell(typ: str, value: Any, now: dt.datetime) -> Any:
    """cellForJSONValue (and the string column's JSONPath printing)."""
    if value is None:
        return None
    if typ == "string":
        return jsonpath.text(value)
    if typ == "integer" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    if typ == "number" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if typ == "boolean" and isinstance(value, bool):
        return value
    if typ == "date":
        return _date_cell(value, now)
    return None


def custom(columns: tuple[dict[str, Any], ...]) -> tuple[list[dict[str, Any]], Cells]:
    """Column definitions and cells of a custom resource: Name, then the printer columns."""
    defs: list[dict[str, Any]] = [{"name": "Name", "type": "string", "format": "name",
                                   "description": NAME_DESCRIPTION, "priority": 0}]
    paths: list[jsonpath.Steps | None] = []
    for col in columns:
        jp = str(col.get("jsonPath") or "")
        desc = col.get("description") or (CREATION_TIMESTAMP_DESCRIPTION if jp == ".metadata.creationTimestamp"
                                          and col.get("name") == "Age" and col.get("type") == "date"
                                          else f"Custom resource definition column (in JSONPath format): {jp}")
        defs.append({"name": col.get("name", ""), "type": col.get("type", ""), "format": col.get("format", ""),
                     "description": desc, "priority": int(col.get("priority") or 0)})
        try:
            paths.append(jsonpath.parse(jp))
        except (jsonpath.JSONPathError, ValueError):
            paths.append(None)
    types = [str(c.get("type") or "") for c in columns]

    def cells(o: Obj, now: dt.datetime) -> list[Any]:
        row: list[Any] = [_name(o)]
        for typ, steps in zip(types, paths):
            found = jsonpath.find(o, steps) if steps is not None else []
            row.append(_cell(typ, found[0], now) if found else None)
        return row

    return defs, cells
