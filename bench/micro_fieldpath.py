"""Cost of the field-set walkers behind metadata.managedFields: native (kubecore._native.FieldFacts,
what the product runs) against the former pure-Python walkers (tests/unit/api/fieldpath_reference.py).

    python -m pytest bench/micro_fieldpath.py --benchmark-only [--benchmark-json out.json]
    python -m bench.micro_fieldpath [--rounds N]      # one JSON document on stdout, with ratios

The object is bench/apiserver_load.py's workload pod after the API server's defaulting; `update`
is the same pod with an annotation bumped, a status added and one env var more (what a PUT
compares). Each figure times one call of kubecore.api.managedfields' public function, so the
native figures include encoding the objects with msgspec and building the Python path tuples.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import platform
import sys
import timeit
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from bench.apiserver_load import pod
from kubecore.api import managedfields
from kubecore.api.defaults import apply_defaults
from kubecore.api.typefacts import facts_for, skeleton

ROOT = Path(__file__).resolve().parents[1]
FACTS = facts_for("", "Pod")
STATUS = frozenset({"status"})


def _reference() -> ModuleType:
    """The Python walkers, loaded from the tests (they are not part of the product)."""
    spec = importlib.util.spec_from_file_location("fieldpath_reference", ROOT / "tests/unit/api/fieldpath_reference.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def objects() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(empty pod, created pod, updated pod)."""
    created = apply_defaults("", "Pod", pod("load-small-00000-6f8b9c7d4-abcde", 0))
    updated = copy.deepcopy(created)
    updated["metadata"]["annotations"]["bench/seq"] = "1"
    updated["spec"]["containers"][0]["env"].append({"name": "EXTRA", "value": "1"})
    updated["status"] = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}
    return skeleton("", "Pod"), created, updated


def cases() -> dict[str, tuple[Callable[[], Any], Callable[[], Any]]]:
    """name -> (native call, reference call); both give the same result."""
    ref = _reference()
    empty, created, updated = objects()
    out: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {}
    for name, mod in (("native", managedfields), ("reference", ref)):
        calls = {
            "field_set_pod": lambda m=mod: m.field_set(created, FACTS, skip=STATUS),
            "compare_create": lambda m=mod: m.compare(empty, created, FACTS, skip=STATUS),
            "compare_update": lambda m=mod: m.compare(created, updated, FACTS, skip=STATUS),
        }
        for case, fn in calls.items():
            pair = out.get(case, (fn, fn))
            out[case] = (fn, pair[1]) if name == "native" else (pair[0], fn)
    for case, (native, reference) in out.items():
        n, r = native(), reference()
        same = n == r if case.startswith("field_set") else (n.added, n.modified, n.removed) == (r.added, r.modified, r.removed)
        assert same, case
    return out


_CASES = cases()


@pytest.mark.parametrize("impl", ["native", "reference"])
@pytest.mark.parametrize("case", list(_CASES))
def test_walker(benchmark: Any, case: str, impl: str) -> None:
    native, reference = _CASES[case]
    benchmark(native if impl == "native" else reference)


def _best_us(fn: Callable[[], Any], rounds: int) -> float:
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    return min(timer.repeat(repeat=rounds, number=number)) / number * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7, help="repeats per figure; the best is reported")
    args = ap.parse_args()
    results: dict[str, Any] = {}
    for case, (native, reference) in _CASES.items():
        n, r = _best_us(native, args.rounds), _best_us(reference, args.rounds)
        results[case] = {"native_us": round(n, 2), "reference_us": round(r, 2), "speedup": round(r / n, 1)}
    doc = {"benchmark": "micro_fieldpath", "python": sys.version.split()[0], "machine": platform.machine(),
           "unit": "µs per call (best of rounds)", "results": results}
    print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
