"""The native field-set walkers (rust/fieldpath via kubecore._native.FieldFacts) against the former
Python walkers (fieldpath_reference.py): same sets, same errors, on every object fixture the test
suite has, on the benchmark pod, and on objects generated with Hypothesis (keyed lists with
repeated and missing keys, nulls, bools vs numbers, floats, keys and values needing Go's
escaping) — alone for field_set, and as (before, after) pairs for compare."""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubecore.api import managedfields as mf
from kubecore.api.defaults import apply_defaults
from kubecore.api.typefacts import SchemaFacts, TypeFacts, facts_for, skeleton

from . import fieldpath_reference as ref

ROOT = Path(__file__).resolve().parents[3]

SCHEMA: dict[str, Any] = {"type": "object", "properties": {
    "metadata": {"type": "object"},
    "spec": {"type": "object", "properties": {
        "containers": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                       "items": {"type": "object", "properties": {
                           "ports": {"type": "array", "x-kubernetes-list-type": "map",
                                     "x-kubernetes-list-map-keys": ["containerPort", "protocol"],
                                     "items": {"type": "object"}},
                           "env": {"type": "array", "x-kubernetes-list-type": "set"}}}},
        "volumes": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "x-kubernetes-map-type": "atomic"}},
        "selector": {"type": "object", "x-kubernetes-map-type": "atomic"},
        "a": {"type": "object", "additionalProperties": {
            "type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}},
        "tolerations": {"type": "array", "items": {"type": "array", "x-kubernetes-list-type": "set"}}}},
    "status": {"type": "object", "x-kubernetes-map-type": "atomic"}}}

FACTS: dict[str, TypeFacts] = {
    "pod": facts_for("", "Pod"),
    "service": facts_for("", "Service"),
    "deployment": facts_for("apps", "Deployment"),
    "configmap": facts_for("", "ConfigMap"),
    "untyped": facts_for("example.com", "Widget", typed=False),
    "schema": SchemaFacts("example.com", "Gadget", SCHEMA),
}
SKIPS = [frozenset(), frozenset({"status"}), frozenset({"spec", "metadata"})]


# ---- the differential check ---------------------------------------------------------------------

def _outcome(fn: Callable[[], Any]) -> Any:
    try:
        return ("ok", fn())
    except mf.FieldPathError as e:
        return ("error", str(e))


def check_field_set(obj: Any, facts: TypeFacts, skip: frozenset[str] = frozenset()) -> None:
    native = _outcome(lambda: mf.field_set(obj, facts, skip=skip))
    expected = _outcome(lambda: ref.field_set(obj, facts, skip=skip))
    assert native == expected, (obj, skip)


def check_compare(lhs: Any, rhs: Any, facts: TypeFacts, skip: frozenset[str] = frozenset()) -> None:
    def sets(c: Any) -> tuple[set[Any], set[Any], set[Any]]:
        return (c.added, c.modified, c.removed)

    native = _outcome(lambda: sets(mf.compare(lhs, rhs, facts, skip=skip)))
    expected = _outcome(lambda: sets(ref.compare(lhs, rhs, facts, skip=skip)))
    assert native == expected, (lhs, rhs, skip)


# ---- fixtures: every literal object in the tests, and the benchmark pod ---------------------------

_OBJECT_KEYS = {"metadata", "spec", "data", "status", "apiVersion"}


def _is_json(v: Any) -> bool:
    try:
        return bool(msgspec.json.decode(msgspec.json.encode(v)) == v)
    except (TypeError, msgspec.EncodeError):
        return False


def _literal_objects() -> list[dict[str, Any]]:
    seen: set[bytes] = set()
    out: list[dict[str, Any]] = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Dict):
                continue
            if not any(isinstance(k, ast.Constant) and k.value in _OBJECT_KEYS for k in node.keys):
                continue
            try:
                v = ast.literal_eval(node)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                continue
            if isinstance(v, dict) and _is_json(v):
                key = msgspec.json.encode(v)
                if key not in seen:
                    seen.add(key)
                    out.append(v)
    return out


def _bench_pod() -> dict[str, Any]:
    from bench.apiserver_load import pod

    return apply_defaults("", "Pod", pod("load-small-00000-6f8b9c7d4-abcde", 0))


FIXTURES = _literal_objects()


def _facts_of(obj: dict[str, Any]) -> list[TypeFacts]:
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    out = list(FACTS.values())
    if isinstance(kind, str) and isinstance(api_version, str):
        out.append(facts_for(api_version.rpartition("/")[0], kind))
    return out


def test_the_fixtures_are_many() -> None:
    assert len(FIXTURES) > 200
    assert sum(1 for o in FIXTURES if o.get("kind") == "Pod") > 5


def test_field_set_of_every_fixture() -> None:
    for obj in FIXTURES + [_bench_pod()]:
        for facts in _facts_of(obj):
            for skip in SKIPS:
                check_field_set(obj, facts, skip)


def test_compare_of_fixture_pairs() -> None:
    """Each fixture against the next ones of its kind, its kind's empty object, nothing, and an edited copy."""
    by_kind: dict[Any, list[dict[str, Any]]] = {}
    for obj in FIXTURES:
        by_kind.setdefault(obj.get("kind"), []).append(obj)
    pod = _bench_pod()
    by_kind.setdefault("Pod", []).append(pod)
    for kind, objs in by_kind.items():
        for i, obj in enumerate(objs):
            others = objs[i + 1:i + 4] + [skeleton("", kind if isinstance(kind, str) else "")]
            edited = copy.deepcopy(obj)
            meta = edited.get("metadata")
            edited["metadata"] = {**(meta if isinstance(meta, dict) else {}), "labels": {"edited": "true"}}
            edited["spec"] = None if "spec" not in obj else {"replaced": [1, True]}
            for facts in _facts_of(obj):
                for other in others + [edited]:
                    check_compare(obj, other, facts)
                    check_compare(other, obj, facts, frozenset({"status"}))
                check_compare(mf.ABSENT, obj, facts)
                check_compare(obj, mf.ABSENT, facts)


def test_bench_pod_updates() -> None:
    pod = _bench_pod()
    updated = copy.deepcopy(pod)
    updated["metadata"]["annotations"]["bench/seq"] = "1"
    updated["spec"]["containers"][0]["env"].append({"name": "X", "value": "<&>"})
    updated["spec"]["containers"][0]["ports"][0]["containerPort"] = 8081
    updated["spec"]["tolerations"].pop()
    updated["status"] = {"phase": "Running"}
    for facts in FACTS.values():
        for skip in SKIPS:
            check_compare(pod, updated, facts, skip)
            check_compare(updated, pod, facts, skip)


_CORNERS: list[Any] = [None, True, False, 0, 1, 1.0, 0.0, -0.0, "1", "", [], {}, [1], [True], [None], {"a": 1},
                       {"a": True}, {"a": None}, 2**64, float(2**64), 2**53 + 1, float(2**53), 10**400,
                       [{"name": "a"}], [{"name": "a"}, {"name": "a"}], [{"name": 1}], [{"name": True}]]


def test_compare_of_every_pair_of_corner_values() -> None:
    """Null vs absent vs empty, bools vs ints vs floats, exact big ints: as fields, items, roots."""
    for a in _CORNERS:
        for b in _CORNERS:
            for facts in FACTS.values():
                check_compare({"x": a}, {"x": b}, facts)
                check_compare({"spec": {"containers": [{"name": "c", "image": a}]}},
                              {"spec": {"containers": [{"name": "c", "image": b}]}}, facts)
                check_compare({"spec": {"env": a}}, {"spec": {"env": b}}, facts)
                check_compare({"metadata": {"finalizers": [a, b]}}, {"metadata": {"finalizers": [b]}}, facts)
                check_compare(a, b, facts)
        check_compare(mf.ABSENT, a, FACTS["pod"])
        check_field_set({"metadata": {"finalizers": [a, a, 1]}, "x": a}, FACTS["pod"])


def test_long_lists_and_large_maps() -> None:
    """Past 16 items or members the walkers look elements and members up by hash."""
    env = [{"name": f"E{i % 23}", "value": str(i)} for i in range(40)]
    data = {f"k{i}": str(i) for i in range(50)}
    obj = {"metadata": {"finalizers": [f"f{i % 19}" for i in range(30)], "labels": data},
           "spec": {"containers": [{"name": f"c{i}", "env": env[i:]} for i in range(20)]}, "data": data}
    edited = copy.deepcopy(obj)
    edited["spec"]["containers"] = edited["spec"]["containers"][3:] + [{"name": "c1", "env": env[:5]}]
    edited["metadata"]["finalizers"] = edited["metadata"]["finalizers"][::-1][5:]
    edited["data"] = {**{f"k{i}": str(i) for i in range(10, 60)}, "k12": "changed"}
    for facts in FACTS.values():
        check_field_set(obj, facts)
        check_field_set(edited, facts)
        check_compare(obj, edited, facts)
        check_compare(edited, obj, facts)
        check_compare(mf.ABSENT, edited, facts)


# ---- generated objects -----------------------------------------------------------------------------

_CHARS = st.sampled_from(list("ab<>&\"\\\n\x01\x7fé\u2028\u2029😀 :./"))
_NAMES = ["metadata", "spec", "status", "containers", "initContainers", "env", "ports", "volumes", "finalizers",
          "ownerReferences", "name", "containerPort", "protocol", "port", "uid", "selector", "nodeSelector",
          "tolerations", "topologySpreadConstraints", "topologyKey", "whenUnsatisfiable", "imagePullSecrets",
          "value", "a", "é<&>", "\u2028"]
_KEYS = st.sampled_from(_NAMES) | st.text(_CHARS, max_size=3)
_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-2, 2), st.sampled_from([2**64, -2**63, 10**30, 2**53 + 1]),
    st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([0.0, -0.0, 1.0, 2.0, 1e16, 1e30, 0.5]),
    st.text(_CHARS, max_size=4), st.text(max_size=3),
)
# Values of key fields: few, so items repeat; numbers and bools that compare equal in Python.
_KEY_VALUES = st.sampled_from(["a", "a", "b", "<&>", 1, 1.0, True, 80, "TCP", "UDP"])
_KEYED_FIELDS = st.sampled_from(["containers", "initContainers", "env", "ports", "volumes", "ownerReferences",
                                 "imagePullSecrets", "topologySpreadConstraints", "finalizers", "tolerations",
                                 "selector", "nodeSelector", "a"])
_FLAT_ITEM = st.fixed_dictionaries(
    {"name": _KEY_VALUES}, optional={"value": _SCALARS, "uid": _KEY_VALUES, "mountPath": _KEY_VALUES})
_PORT = st.fixed_dictionaries(
    {"containerPort": _KEY_VALUES}, optional={"protocol": _KEY_VALUES, "port": _KEY_VALUES, "name": _SCALARS})


def _items(children: st.SearchStrategy[Any]) -> st.SearchStrategy[list[Any]]:
    """Keyed-list items: usually with their keys (containers with keyed env and ports), sometimes
    without, with a null key, or scalars."""
    optional: dict[str, st.SearchStrategy[Any]] = {
        k: _KEY_VALUES for k in ("containerPort", "protocol", "port", "uid", "topologyKey", "whenUnsatisfiable")}
    optional.update({"image": children, "selector": children, "env": st.lists(_FLAT_ITEM, max_size=3),
                     "ports": st.lists(_PORT, max_size=3), "args": st.lists(_SCALARS, max_size=2)})
    item = st.fixed_dictionaries({"name": _KEY_VALUES}, optional=optional)
    odd = st.one_of(st.dictionaries(_KEYS, children, max_size=2), _SCALARS, st.just({"name": None}))
    mixed = st.integers(0, 11).flatmap(lambda i: item if i < 10 else _PORT if i == 10 else odd)  # one_of dedupes
    return st.lists(mixed, max_size=4)


def _extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    items = _items(children)
    return st.one_of(st.lists(children, max_size=4), st.dictionaries(_KEYS, children, max_size=4), items,
                     st.dictionaries(_KEYED_FIELDS, items | children, max_size=3))


_VALUES = st.recursive(_SCALARS, _extend, max_leaves=20)
_META = st.fixed_dictionaries({}, optional={
    "labels": st.dictionaries(_KEYS, _SCALARS, max_size=3), "finalizers": st.lists(_VALUES, max_size=3),
    "ownerReferences": st.lists(_FLAT_ITEM, max_size=3), "name": _SCALARS})
_SHAPED = st.fixed_dictionaries(
    {"metadata": _META | st.dictionaries(_KEYS, _VALUES, max_size=3),
     "spec": st.integers(0, 2).flatmap(lambda i: st.dictionaries(_KEYED_FIELDS, _items(_VALUES), max_size=3) if i
                                       else st.dictionaries(_KEYED_FIELDS | _KEYS, _VALUES, max_size=5))},
    optional={"status": _VALUES})
_OBJECTS = st.integers(0, 3).flatmap(lambda i: _SHAPED if i else st.dictionaries(_KEYS, _VALUES, max_size=5))
_HYPOTHESIS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _edit(v: Any, data: st.DataObject, depth: int = 0) -> Any:
    """A copy of `v` with random edits: members dropped, replaced or added, items dropped,
    repeated or swapped, scalars changed."""
    choice = data.draw(st.integers(0, 9))
    if choice == 0 or depth > 6:
        return data.draw(_VALUES) if choice == 0 else copy.deepcopy(v)
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            c = data.draw(st.integers(0, 5))
            if c == 0:
                continue
            out[k] = _edit(x, data, depth + 1) if c < 4 else copy.deepcopy(x)
        if data.draw(st.booleans()):
            out[data.draw(_KEYS)] = data.draw(_VALUES)
        return out
    if isinstance(v, list):
        items = [_edit(x, data, depth + 1) for x in v]
        c = data.draw(st.integers(0, 4))
        if c == 0 and items:
            items.pop(data.draw(st.integers(0, len(items) - 1)))
        elif c == 1 and items:
            items.append(copy.deepcopy(items[0]))
        elif c == 2:
            items.reverse()
        return items
    return v if choice < 5 else data.draw(_SCALARS)


@_HYPOTHESIS
@given(obj=_OBJECTS, facts=st.sampled_from(list(FACTS)), skip=st.sampled_from(SKIPS))
def test_field_set_of_generated_objects(obj: dict[str, Any], facts: str, skip: frozenset[str]) -> None:
    check_field_set(obj, FACTS[facts], skip)


@_HYPOTHESIS
@given(obj=_OBJECTS, facts=st.sampled_from(list(FACTS)), skip=st.sampled_from(SKIPS), data=st.data())
def test_compare_of_generated_edits(obj: dict[str, Any], facts: str, skip: frozenset[str],
                                    data: st.DataObject) -> None:
    edited = _edit(obj, data)
    check_compare(obj, edited, FACTS[facts], skip)
    check_compare(edited, obj, FACTS[facts], skip)


@_HYPOTHESIS
@given(lhs=_OBJECTS | _VALUES, rhs=_OBJECTS | _VALUES, facts=st.sampled_from(list(FACTS)))
def test_compare_of_unrelated_values(lhs: Any, rhs: Any, facts: str) -> None:
    check_compare(lhs, rhs, FACTS[facts])


@_HYPOTHESIS
@given(value=_VALUES)
def test_set_elements_are_canonical_json(value: Any) -> None:
    """A set item's element is canon() of the item: sorted keys, Go's escaping, numbers as written."""
    try:
        paths = mf.field_set({"metadata": {"finalizers": [value]}}, FACTS["configmap"])
    except mf.FieldPathError:
        return  # the item is walked too (as upstream does), and has a keyed list without keys
    assert (("f", "metadata"), ("f", "finalizers"), ("v", mf.canon(value))) in paths


# ---- the binding itself ------------------------------------------------------------------------------

def test_errors_are_field_path_errors_with_upstreams_message() -> None:
    obj = {"spec": {"containers": [{"name": "a", "ports": [{"protocol": "TCP"}]}]}}
    with pytest.raises(mf.FieldPathError, match=r'^\.spec\.containers\.ports: associative list with keys has an '
                       r'element that omits key field "containerPort" \(and doesn\'t have default value\)$'):
        mf.field_set(obj, FACTS["pod"])
    assert issubclass(mf.FieldPathError, ValueError)


def test_other_facts_classes_are_refused() -> None:
    class Custom(TypeFacts):
        pass

    with pytest.raises(TypeError, match="Custom"):
        mf.field_set({"a": 1}, Custom("", "Pod"))


def test_deep_objects_raise_recursion_error() -> None:
    deep: Any = 1
    for _ in range(1100):
        deep = [deep]
    with pytest.raises(RecursionError):
        mf.field_set({"a": deep}, FACTS["pod"])
