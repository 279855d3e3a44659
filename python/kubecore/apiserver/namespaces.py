"""The namespace lifecycle on the server side (upstream's namespace strategy and REST).

- Create: ``spec.finalizers`` always holds ``kubernetes`` and ``status.phase`` is ``Active``.
- Updates never change ``spec.finalizers`` (only ``PUT .../namespaces/N/finalize`` does) nor the
  status (only ``.../status`` does).
- The first DELETE only marks the namespace: ``deletionTimestamp`` set, phase ``Terminating``,
  the garbage collector's orphan/foregroundDeletion finalizers set as the options ask. Nothing
  can be created in it from then on (admission). The namespace controller empties it, removes
  ``kubernetes`` through ``/finalize`` and deletes it again; a DELETE while ``spec.finalizers``
  is not empty is a 409.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from kubecore.api.jsoncopy import json_copy
from kubecore.api import errors
from kubecore.api.errors import FieldError
from kubecore.api.registry import ResourceType
from kubecore.apiserver import deletion
from kubecore.apiserver.deletion import DeleteOptions, Outcome

Obj = dict[str, Any]
KUBERNETES = "kubernetes"
STANDARD_FINALIZERS = frozenset({KUBERNETES, deletion.ORPHAN, deletion.FOREGROUND})
STILL_FINALIZING = (
    "The system is ensuring all content is removed from this namespace.  "
    "Upon completion, this namespace will automatically be purged by the system."
)


def is_namespace(rt: ResourceType) -> bool:
    return rt.group == "" and rt.resource == "namespaces"


def prepare_create(obj: Obj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        spec = obj["spec"] = {}
    finalizers = list(spec.get("finalizers") or [])
    if KUBERNETES not in finalizers:
        finalizers.append(KUBERNETES)
    spec["finalizers"] = finalizers
    obj["status"] = {"phase": "Active"}


def prepare_update(old: Obj, new: Obj, *, subresource: str) -> None:
    """Keeps what this kind of update may not change (in place on `new`)."""
    if subresource == "finalize":
        if "status" in old:
            new["status"] = json_copy(old["status"])
        else:
            new.pop("status", None)
        _validate_finalizers(new)
        return
    old_finalizers = (old.get("spec") or {}).get("finalizers")
    spec = new.get("spec")
    if not isinstance(spec, dict):
        spec = new["spec"] = {}
    if old_finalizers is not None:
        spec["finalizers"] = json_copy(old_finalizers)
    else:
        spec.pop("finalizers", None)
    if not spec:
        new.pop("spec", None)


def _validate_finalizers(ns: Obj) -> None:
    causes = []
    for i, f in enumerate((ns.get("spec") or {}).get("finalizers") or []):
        if not isinstance(f, str) or ("/" not in f and f not in STANDARD_FINALIZERS):
            causes.append(FieldError.invalid(f"spec.finalizers[{i}]", f,
                                             "name is neither a standard finalizer name nor is it fully qualified"))
    if causes:
        raise errors.invalid(("", "Namespace"), ns["metadata"]["name"], causes)


def plan_delete(rt: ResourceType, old: Obj, opts: DeleteOptions, *, now: dt.datetime) -> Outcome:
    """The namespace REST's Delete."""
    deletion.check_preconditions(rt, old, opts)
    m = old["metadata"]
    if not m.get("deletionTimestamp"):
        new = json_copy(old)
        nm = new["metadata"]
        nm["deletionTimestamp"] = deletion.rfc3339(now)
        new.setdefault("status", {})["phase"] = "Terminating"
        finalizers = deletion.gc_finalizers(rt, list(nm.get("finalizers") or []), opts)
        if finalizers:
            nm["finalizers"] = finalizers
        else:
            nm.pop("finalizers", None)
        return Outcome("mark", new)
    if (old.get("spec") or {}).get("finalizers"):
        raise errors.conflict(rt, m["name"], STILL_FINALIZING)
    return deletion.plan(rt, old, opts, now=now)
