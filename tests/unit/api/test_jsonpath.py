"""The JSONPath subset of CRD printer columns, and the custom printer built on it."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from kubecore.api import jsonpath
from kubecore.apiserver import printers

OBJ: dict[str, Any] = {
    "metadata": {"name": "w", "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"a.b/c": "x"}},
    "spec": {"replicas": 3, "ratio": 0.5, "on": True, "tags": ["t1", "t2"], "sel": {"k": "v"}},
    "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Synced", "status": "False"}]},
}


@pytest.mark.parametrize("path, found", [
    (".spec.replicas", [3]),
    ("{.spec.replicas}", [3]),
    (".spec.missing", []),
    (".spec.tags[1]", ["t2"]),
    (".spec.tags[-1]", ["t2"]),
    (".spec.tags[*]", ["t1", "t2"]),
    (".spec.tags[0:1]", ["t1"]),
    (".metadata.labels['a.b/c']", ["x"]),
    ('.status.conditions[?(@.type=="Ready")].status', ["True"]),
    (".status.conditions[?(@.type!='Ready')].type", ["Synced"]),
])
def test_find(path: str, found: list[Any]) -> None:
    assert jsonpath.find(OBJ, path) == found


def test_custom_printer_cells() -> None:
    columns = ({"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
               {"name": "Ratio", "type": "number", "jsonPath": ".spec.replicas"},
               {"name": "On", "type": "boolean", "jsonPath": ".spec.on"},
               {"name": "Sel", "type": "string", "jsonPath": ".spec.sel", "priority": 1},
               {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
               {"name": "Gone", "type": "string", "jsonPath": ".spec.gone"},
               {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"})
    defs, cells = printers.custom(columns)
    assert [(d["name"], d["priority"]) for d in defs][:2] == [("Name", 0), ("Replicas", 0)]
    assert defs[4]["description"] == "Custom resource definition column (in JSONPath format): .spec.sel"
    assert defs[-1]["description"] == printers.CREATION_TIMESTAMP_DESCRIPTION
    now = dt.datetime(2026, 1, 1, 0, 5, tzinfo=dt.timezone.utc)
    assert cells(OBJ, now) == ["w", 3, 3.0, True, '{"k":"v"}', "True", None, "5m"]
