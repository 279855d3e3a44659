"""meta.k8s.io/v1 Table responses (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`).

Columns come from printers.py (upstream's per-kind columns; Name and Age otherwise); the row's
object is PartialObjectMetadata unless `includeObject=Object` or `None` is asked for.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from kubecore.api.registry import ResourceType
from kubecore.apiserver import printers

DESCRIPTIONS = {
    "Name": "Name must be unique within a namespace. Is required when creating resources, although some resources "
    "may allow a client to request the generation of an appropriate name automatically. Name is primarily intended "
    "for creation idempotence and configuration definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
    "Age": "CreationTimestamp is a timestamp representing the server time when this object was created. It is not "
    "guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is "
    "represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
    # customresourcedefinitions
    "Scope": "Cluster/Namespaced",
    "Versions": "Served versions",
    "Group": "API group",
    "Kind": "CustomResource kind",
    "ShortNames": "Short names",
    "Established": "Established status",
}
DESCRIPTIONS["Created At"] = DESCRIPTIONS["Age"]


def wants_table(accept: str) -> bool:
    return "as=Table" in accept and "g=meta.k8s.io" in accept


def wants_partial_metadata(accept: str) -> str | None:
    """"PartialObjectMetadata" / "PartialObjectMetadataList" when the client asks for metadata only."""
    if "g=meta.k8s.io" not in accept:
        return None
    if "as=PartialObjectMetadataList" in accept:
        return "PartialObjectMetadataList"
    if "as=PartialObjectMetadata" in accept:
        return "PartialObjectMetadata"
    return None


def partial(obj: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata", {})}


def _row_object(obj: dict[str, Any], include: str) -> Any:
    if include == "None":
        return None
    if include == "Object":
        return obj
    return partial(obj)


def table(
    objs: list[dict[str, Any]], *, list_meta: dict[str, Any], group: str, kind: str, include: str = "Metadata",
    rt: ResourceType | None = None,
) -> dict[str, Any]:
    """A Table of `objs`; a custom resource's `rt` brings its printer columns."""
    custom = rt.printer_columns if rt is not None else None
    if custom is not None:
        defs, cells = printers.custom(custom)
    else:
        columns, cells = printers.printer(group, kind)
        defs = [
            {"name": name, "type": typ, "format": "name" if name == "Name" else "",
             "description": DESCRIPTIONS.get(name, name), "priority": prio}
            for name, typ, prio in columns
        ]
    now = dt.datetime.now(dt.timezone.utc)
    rows = []
    for obj in objs:
        row: dict[str, Any] = {"cells": cells(obj, now)}
        ro = _row_object(obj, include)
        if ro is not None:
            row["object"] = ro
        rows.append(row)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta, "columnDefinitions": defs, "rows": rows}


