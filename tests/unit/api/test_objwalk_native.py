"""The native walks of the create path (rust/py/src/objwalk.rs) against the Python versions they
replace: `shape_key` gives two objects equal keys exactly when fieldmanager's `_shape_key_py` does,
and `NativeFieldModel.count` is fieldvalidation's `fast_count`. Checked on realistic bodies (Pod,
both Events, Deployment, Node), on objects generated with Hypothesis and on mutations of both
(scalars changed outside and inside lists, bools vs ints vs floats, keys reordered, unknown fields
at any depth, values of the wrong type); and the cases left to Python (None) one by one."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubecore._native import NativeFieldModel, shape_key
from kubecore.api import fieldmanager as fm
from kubecore.api import fieldvalidation as fv
from kubecore.api.defaults import apply_defaults
from kubecore.client.events_v1 import build_event

Obj = dict[str, Any]
_HYPOTHESIS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SKIP = fm._UNOWNED_META
SURROGATE = chr(0xD800)  # a lone surrogate (not written literally: other tests read this file's literals)


# ---- realistic bodies ------------------------------------------------------------------------------

def _pod(name: str = "web-6f8b9c7d4-abcde") -> Obj:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": "default", "generateName": "web-6f8b9c7d4-",
            "labels": {"app": "web", "pod-template-hash": "6f8b9c7d4"},
            "annotations": {"kubernetes.io/config.source": "api"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-6f8b9c7d4",
                                 "uid": "6b2f3a4e-0000-4c1d-9e8f-0a1b2c3d4e5f", "controller": True,
                                 "blockOwnerDeletion": True}],
        },
        "spec": {
            "containers": [{
                "name": "web", "image": "registry.k8s.io/pause:3.9",
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                "resources": {"requests": {"cpu": "10m", "memory": "10M"}, "limits": {"cpu": "10m"}},
                "volumeMounts": [{"name": "kube-api-access", "readOnly": True,
                                  "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
                "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 5},
            }],
            "volumes": [{"name": "kube-api-access", "emptyDir": {}}],
            "nodeSelector": {"type": "hollow-node"},
            "terminationGracePeriodSeconds": 1,
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                             "tolerationSeconds": 300}],
            "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "web"}},
                                                    "topologyKey": "kubernetes.io/hostname"}}]}},
        },
    }


def _reference(pod: Obj) -> Obj:
    meta = pod["metadata"]
    return {"kind": "Pod", "apiVersion": "v1", "namespace": meta["namespace"], "name": meta["name"],
            "uid": "0b6f3c1e-2c0a-4f8e-9d51-1b2c3d4e5f60", "resourceVersion": "1234"}


def _event_v1(name: str = "web-6f8b9c7d4-abcde") -> Obj:
    """A scheduler's Scheduled event, as kubecore.client.events_v1 writes it."""
    pod = _pod(name)
    return build_event(f"{name}.17a1b2c3d4e5f6a7", 1700000000.123456, "default-scheduler",
                       "default-scheduler-node-1", "Binding", "Scheduled", _reference(pod),
                       f"Successfully assigned default/{name} to node-0001", "Normal", None)


def _event_core() -> Obj:
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "web.17a1b2c3d4e5f6a7", "namespace": "default"},
            "involvedObject": _reference(_pod()), "reason": "Pulled", "message": "Container image already present",
            "source": {"component": "kubelet", "host": "node-0001"}, "firstTimestamp": "2024-01-01T00:00:00Z",
            "lastTimestamp": "2024-01-01T00:00:00Z", "count": 1, "type": "Normal",
            "reportingComponent": "kubelet", "reportingInstance": "node-0001"}


def _deployment() -> Obj:
    template = _pod()
    del template["apiVersion"], template["kind"]
    template["metadata"] = {"labels": {"app": "web"}}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": template,
                     "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}}}}


def _node() -> Obj:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "node-0001", "labels": {"kubernetes.io/hostname": "node-0001", "type": "hollow-node"},
                         "managedFields": [{"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
                                            "fieldsType": "FieldsV1",
                                            "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:type": {}}},
                                                         "f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {}}}}}]},
            "spec": {"podCIDR": "10.0.1.0/24", "taints": [{"key": "kubemark", "value": "true", "effect": "NoSchedule"}]},
            "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                       "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "lastHeartbeatTime": "2024-01-01T00:00:00Z"}],
                       "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                       "nodeInfo": {"kubeletVersion": "v1.30.0", "architecture": "amd64"},
                       "images": [{"names": ["registry.k8s.io/pause:3.9"], "sizeBytes": 744000}]}}


# (group, version, kind) -> body
BODIES: dict[tuple[str, str, str], Callable[[], Obj]] = {
    ("", "v1", "Pod"): _pod,
    ("", "v1", "Event"): _event_core,
    ("events.k8s.io", "v1", "Event"): _event_v1,
    ("apps", "v1", "Deployment"): _deployment,
    ("", "v1", "Node"): _node,
}


def _model(gvk: tuple[str, str, str]) -> fv.Node:
    node = fv.model(*gvk)
    assert node is not None
    return node


MODELS = {gvk: NativeFieldModel(_model(gvk)) for gvk in BODIES}


def _created(obj: Obj) -> Obj:
    """What FieldManager.create sees: defaulted, with the metadata the server sets."""
    out = copy.deepcopy(obj)
    group = out["apiVersion"].rpartition("/")[0]
    out = apply_defaults(group, out["kind"], out)
    out["metadata"].update(uid="0b6f3c1e-2c0a-4f8e-9d51-1b2c3d4e5f60", creationTimestamp="2024-01-01T00:00:00Z")
    return out


# ---- shape_key: helpers ----------------------------------------------------------------------------

def _py_key(obj: Obj) -> bytes:
    return fm._shape_key_py(obj, obj["metadata"])


def _native_key(obj: Obj) -> bytes:
    key = shape_key(obj, SKIP)
    assert key is not None, obj
    return key


def _same_relation(a: Obj, b: Obj) -> bool:
    """Whether a and b share a key (asserting that both versions say the same)."""
    py_equal = _py_key(a) == _py_key(b)
    assert (_native_key(a) == _native_key(b)) == py_equal, (a, b)
    assert (fm._shape_key(a, a["metadata"]) == fm._shape_key(b, b["metadata"])) == py_equal
    return py_equal


def _same_type_scalar(v: Any, n: int) -> Any:
    """Another scalar of v's type (n picks which)."""
    if type(v) is bool:
        return not v
    if type(v) is int:
        return v + n + 1
    if type(v) is float:
        return v + n + 0.5 if math.isfinite(v) else float(n)
    if type(v) is str:
        return v + "x" * (n + 1)
    return v


def _revalue(v: Any, n: int = 0) -> Any:
    """v with every scalar outside lists changed to another of its type (lists untouched)."""
    if type(v) is dict:
        return {k: _revalue(x, n + i) for i, (k, x) in enumerate(v.items())}
    if type(v) is list:
        return v
    return _same_type_scalar(v, n)


def _paths(v: Any, inside_list: bool = False, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], bool]]:
    """Every (path, inside a list) of a scalar in v."""
    if type(v) is dict:
        return [p for k, x in v.items() for p in _paths(x, inside_list, path + (k,))]
    if type(v) is list:
        return [p for i, x in enumerate(v) for p in _paths(x, True, path + (i,))]
    return [(path, inside_list)]


def _set(obj: Any, path: tuple[Any, ...], value: Any) -> None:
    for step in path[:-1]:
        obj = obj[step]
    obj[path[-1]] = value


# ---- shape_key: generated objects ------------------------------------------------------------------

_keys = st.one_of(
    st.sampled_from(["name", "spec", "metadata", "a", "", "\"", "\\", "{", ":", "\x00", "é", "日本", "k\"ey", "1"]),
    st.text(max_size=6),
)
_scalars = st.one_of(
    st.none(), st.booleans(), st.sampled_from([0, 1, -1, 0.0, -0.0, 1.0, 2**63 - 1, -2**63, 2**64, -2**70]),
    st.integers(), st.floats(), st.text(max_size=8), st.sampled_from(["", "0", "1", "true", "null", "\"", "\\u0000"]),
)
_json = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_keys, inner, max_size=4)),
    max_leaves=24,
)
_meta = st.dictionaries(
    st.one_of(st.sampled_from(sorted(SKIP)), st.sampled_from(["labels", "annotations", "generateName"]), _keys),
    _json, max_size=6)


@st.composite
def _objects(draw: st.DrawFn) -> Obj:
    body = draw(st.dictionaries(_keys, _json, max_size=5))
    body.pop("metadata", None)
    items = list(body.items())
    at = draw(st.integers(0, len(items)))
    items.insert(at, ("metadata", draw(_meta)))
    return dict(items)


@_HYPOTHESIS
@given(_objects(), _objects())
def test_shape_key_relation_on_unrelated_objects(a: Obj, b: Obj) -> None:
    _same_relation(a, b)
    _same_relation(a, copy.deepcopy(a))
    assert _native_key(a) != _py_key(a)  # the two kinds of keys never meet


@_HYPOTHESIS
@given(_objects(), st.integers(0, 5))
def test_values_outside_lists_collide(a: Obj, n: int) -> None:
    b = _revalue(a, n)
    assert _same_relation(a, b)


@_HYPOTHESIS
@given(_objects(), _json, st.data())
def test_unowned_metadata_and_the_place_of_metadata_do_not_matter(a: Obj, value: Any, data: st.DataObject) -> None:
    b = {k: v for k, v in a.items() if k != "metadata"}
    meta = dict(a["metadata"])
    meta[data.draw(st.sampled_from(sorted(SKIP)))] = value
    b["metadata"] = meta  # now last
    assert _same_relation(a, b)


@_HYPOTHESIS
@given(_objects(), st.data())
def test_one_scalar_changed(a: Obj, data: st.DataObject) -> None:
    """Inside a list a value matters (equal only if msgspec writes both alike: nan and inf are null);
    outside one only its type does."""
    paths = _paths({k: v for k, v in a.items()})
    if not paths:
        return
    path, _inside = data.draw(st.sampled_from(paths))
    b = copy.deepcopy(a)
    _set(b, path, data.draw(_scalars))
    _same_relation(a, b)


@_HYPOTHESIS
@given(_objects(), st.data())
def test_keys_reordered(a: Obj, data: st.DataObject) -> None:
    b = copy.deepcopy(a)
    dicts = [b] + [d for d in _containers(b) if type(d) is dict]
    target = data.draw(st.sampled_from(dicts))
    items = data.draw(st.permutations(list(target.items())))
    target.clear()
    target.update(items)
    _same_relation(a, b)


def _containers(v: Any) -> list[Any]:
    out: list[Any] = []
    children = v.values() if type(v) is dict else v if type(v) is list else []
    for x in children:
        if type(x) in (dict, list):
            out.append(x)
            out += _containers(x)
    return out


@pytest.mark.parametrize("a,b,equal", [
    ({"x": 1}, {"x": 2}, True),
    ({"x": 1}, {"x": True}, False),
    ({"x": 1}, {"x": 1.0}, False),
    ({"x": 0.0}, {"x": None}, False),
    ({"x": ""}, {"x": None}, False),
    ({"x": "a"}, {"x": []}, False),
    ({"x": {}}, {"x": []}, False),
    ({"x": [1]}, {"x": [2]}, False),
    ({"x": [1]}, {"x": [True]}, False),
    ({"x": [1]}, {"x": [1.0]}, False),
    ({"x": [0.0]}, {"x": [-0.0]}, False),
    ({"x": [float("nan")]}, {"x": [None]}, True),  # msgspec writes nan as null
    ({"x": [float("inf")]}, {"x": [float("-inf")]}, True),
    ({"x": [2**64]}, {"x": [2**64 + 1]}, False),
    ({"x": [2**64]}, {"x": [2**64]}, True),
    ({"x": [{"a": "b"}]}, {"x": [{"a": "c"}]}, False),
    ({"x": ["a", "b"]}, {"x": ["ab"]}, False),
    ({"x": ["a\"", "b"]}, {"x": ["a", "\"b"]}, False),
    ({"x": [{"a": 1, "b": 2}]}, {"x": [{"b": 2, "a": 1}]}, False),
    ({"a": 1, "b": 2}, {"b": 2, "a": 1}, False),
    ({"a\"": 1}, {"a": 1}, False),
    ({"x": {"y": "z"}}, {"x": {"y": "w"}}, True),
])
def test_shape_key_examples(a: Obj, b: Obj, equal: bool) -> None:
    a = {**a, "metadata": {"name": "n1", "labels": {"x": "y"}}}
    b = {**b, "metadata": {"labels": {"x": "z"}, "name": "n2", "uid": "u"}}
    assert _same_relation(a, b) is equal


@pytest.mark.parametrize("gvk", list(BODIES))
def test_shape_key_of_real_objects(gvk: tuple[str, str, str]) -> None:
    obj = _created(BODIES[gvk]())
    other = copy.deepcopy(obj)
    other["metadata"].update(name="other", uid="another", creationTimestamp="2025-01-01T00:00:00Z")
    assert _same_relation(obj, other)
    edited = _revalue(copy.deepcopy(obj))
    assert _same_relation(obj, edited)
    for path, inside in _paths(obj):
        changed = copy.deepcopy(obj)
        _set(changed, path, _same_type_scalar(_get(obj, path), 3))
        if path[:2] in {("metadata", k) for k in SKIP}:
            assert _same_relation(obj, changed)
        else:
            assert _same_relation(obj, changed) is not inside, path


def _get(obj: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        obj = obj[step]
    return obj


# ---- shape_key: what is left to Python -------------------------------------------------------------

class _Dict(dict[str, Any]):
    pass


class _Str(str):
    pass


def _deep(depth: int) -> Any:
    v: Any = "leaf"
    for i in range(depth):
        v = {"d": v} if i % 2 else [v]
    return v


@pytest.mark.parametrize("obj", [
    _Dict({"a": 1, "metadata": {}}),
    {"a": _Dict(), "metadata": {}},
    {"a": [_Dict()], "metadata": {}},
    {"a": (1, 2), "metadata": {}},
    {"a": [(1, 2)], "metadata": {}},
    {"a": {1: "x"}, "metadata": {}},
    {1: "x", "metadata": {}},
    {"a": [{None: 1}], "metadata": {}},
    {"metadata": {2: "x"}},
    {"metadata": {"labels": {"k": [set()]}}},
    {"a": _Str("x"), "metadata": {}},
    {_Str("a"): 1, "metadata": {}},
    {"a": [_Str("x")], "metadata": {}},
    {"a": [b"x"], "metadata": {}},
    {"a": _deep(250), "metadata": {}},
    {"a": 1},
    {"a": 1, "metadata": None},
    {"a": 1, "metadata": _Dict()},
    {"a": 1, "metadata": []},
])
def test_shape_key_declines_what_json_does_not_make(obj: Any) -> None:
    assert shape_key(obj, SKIP) is None
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        try:
            expected = fm._shape_key_py(obj, meta)
        except (TypeError, msgspec.EncodeError, RecursionError):
            return
        assert fm._shape_key(obj, meta) == expected


def test_shape_key_surrogates() -> None:
    """A lone surrogate: Python cannot encode the key (neither can msgspec); outside lists a value's
    text is not needed."""
    assert shape_key({SURROGATE: 1, "metadata": {}}, SKIP) is None
    assert shape_key({"a": [SURROGATE], "metadata": {}}, SKIP) is None
    with pytest.raises(UnicodeEncodeError):
        fm._shape_key({SURROGATE: 1, "metadata": {}}, {})
    a = {"a": SURROGATE, "metadata": {}}
    assert _same_relation(a, {"a": "x", "metadata": {}})


def test_shape_key_depth_just_inside_the_limit() -> None:
    a = {"a": _deep(150), "metadata": {}}
    assert shape_key(a, SKIP) is not None
    assert _same_relation(a, copy.deepcopy(a))


def test_shape_key_skip_set_is_the_callers() -> None:
    obj = {"a": 1, "metadata": {"name": "x", "labels": {}}}
    assert shape_key(obj, frozenset()) != shape_key(obj, frozenset({"name"}))
    assert shape_key(obj, frozenset({"name"})) == shape_key({"a": 2, "metadata": {"labels": {}}}, frozenset({"name"}))


# ---- NativeFieldModel.count ------------------------------------------------------------------------

def _check_count(obj: Any, node: fv.Node, compiled: NativeFieldModel) -> int:
    expected = fv.fast_count(obj, node)
    got = compiled.count(obj)
    assert got is None or got == expected, (obj, got, expected)
    assert fv.native_count(obj, node) == expected
    return expected


@pytest.mark.parametrize("gvk", list(BODIES))
def test_count_of_real_bodies(gvk: tuple[str, str, str]) -> None:
    node, compiled = _model(gvk), MODELS[gvk]
    for body in (BODIES[gvk](), _created(BODIES[gvk]())):
        assert compiled.count(body) == fv.fast_count(body, node) > 10
        assert compiled.count(body) == fv.raw_key_count(msgspec.json.encode(body))  # every key, once
        for path in _dict_paths(body):  # an unknown field in each object: -1 unless a map or free-form there
            changed = copy.deepcopy(body)
            _get(changed, path)["bogus"] = {"x": [1, {"y": 2}]}
            base = fv.fast_count(body, node)
            assert _check_count(changed, node, compiled) in (-1, base + 1, base + 3)
            _get(changed, path)["bogus"] = [{}]
            _check_count(changed, node, compiled)


def _dict_paths(v: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The path of every dict in v, v itself included."""
    if type(v) is dict:
        return [path] + [p for k, x in v.items() for p in _dict_paths(x, path + (k,))]
    if type(v) is list:
        return [p for i, x in enumerate(v) for p in _dict_paths(x, path + (i,))]
    return []


_WRONG: list[Any] = [None, 1, 1.5, True, "s", [], [1], ["x"], [None, {}], {}, {"bogus": 1}, {"name": "x"},
                     [{"bogus": {}}], [[{"a": 1}]], {"a": [{"b": {}}]}, {"k": {"n": {}}}]


@st.composite
def _mutated(draw: st.DrawFn, gvk: tuple[str, str, str]) -> Obj:
    body = copy.deepcopy(draw(st.sampled_from([BODIES[gvk](), _created(BODIES[gvk]())])))
    for _ in range(draw(st.integers(1, 3))):
        holders = [body] + _containers(body)
        target = draw(st.sampled_from(holders))
        how = draw(st.sampled_from(["add", "replace", "append"]))
        value = copy.deepcopy(draw(st.one_of(st.sampled_from(_WRONG), _json)))
        if type(target) is dict:
            if how == "add" or not target:
                target[draw(st.one_of(st.sampled_from(["bogus", "name", "spec", "fieldsV1", "labels"]), _keys))] = value
            else:
                target[draw(st.sampled_from(sorted(target)))] = value
        elif how == "append" or not target:
            target.append(value)
        else:
            target[draw(st.integers(0, len(target) - 1))] = value
    return body


@pytest.mark.parametrize("gvk", list(BODIES))
def test_count_of_mutated_bodies(gvk: tuple[str, str, str]) -> None:
    node, compiled = _model(gvk), MODELS[gvk]

    @_HYPOTHESIS
    @given(_mutated(gvk))
    def check(body: Obj) -> None:
        assert compiled.count(body) is not None
        _check_count(body, node, compiled)

    check()


@_HYPOTHESIS
@given(st.dictionaries(_keys, _json, max_size=6))
def test_count_of_generated_bodies(body: Obj) -> None:
    for gvk, compiled in MODELS.items():
        _check_count(body, _model(gvk), compiled)


def _synthetic() -> fv.Node:
    """Every node kind, a message that refers to itself, and a shared one."""
    shared, top, me = fv.Node(), fv.Node(), fv.Node()
    shared.spec.update(x=(fv.LEAF, None), y=(fv.SMAP, None))
    me.spec.update(name=(fv.LEAF, None), child=(fv.MSG, me), children=(fv.LIST, me), byName=(fv.MAP, me),
                   raw=(fv.FREE, None), s=(fv.MSG, shared))
    top.spec.update(a=(fv.MSG, me), b=(fv.LIST, shared), c=(fv.MAP, shared), d=(fv.FREE, None), e=(fv.SMAP, None),
                    f=(fv.LEAF, None))
    for n in (shared, top, me):
        n.seal()
    return top


SYNTHETIC = _synthetic()
SYNTHETIC_COMPILED = NativeFieldModel(SYNTHETIC)


def test_synthetic_model_compiles_each_node_once() -> None:
    assert len(SYNTHETIC_COMPILED) == 3
    assert len(MODELS[("", "v1", "Pod")]) > 50


_synthetic_values = st.recursive(
    st.one_of(_scalars, st.sampled_from([{}, [], {"x": 1}, {"y": {"k": "v"}}])),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["a", "b", "c", "d", "e", "f", "name", "child", "children", "byName", "raw",
                                         "s", "x", "y", "bogus"]), inner, max_size=4)),
    max_leaves=20,
)


@_HYPOTHESIS
@given(st.dictionaries(st.sampled_from(["a", "b", "c", "d", "e", "f", "bogus"]), _synthetic_values, max_size=6))
def test_count_of_every_node_kind(body: Obj) -> None:
    _check_count(body, SYNTHETIC, SYNTHETIC_COMPILED)


def test_count_examples() -> None:
    me = {"name": "n", "child": {"name": "m", "raw": [{"a": {"b": [{}]}}, 1, [[{"c": 1}]]]},
          "children": [{"name": "x"}, 1, "s", None, {"s": {"x": 1, "y": {"a": 1, "b": 2}}}],
          "byName": {"k1": {"name": "y"}, "k2": "not a dict", "k3": {"child": None}}}
    body = {"a": me, "b": [{"x": 1}, [], {"y": {"p": "q"}}], "c": {"m": {"x": {}}, "n": 5}, "d": {"any": {"thing": 1}},
            "e": {"k": "v", "l": "w"}, "f": {"not": "looked at"}}
    assert _check_count(body, SYNTHETIC, SYNTHETIC_COMPILED) == fv.fast_count(body, SYNTHETIC) > 20
    for path, bogus in [(("a", "child", "bogus"), 1), (("a", "children", 0, "bogus"), 1),
                        (("a", "byName", "k1", "bogus"), 1), (("b", 0, "bogus"), 1), (("c", "m", "bogus"), 1),
                        (("a", "children", 4, "s", "bogus"), 1)]:
        changed = copy.deepcopy(body)
        _set(changed, path, bogus)
        assert _check_count(changed, SYNTHETIC, SYNTHETIC_COMPILED) == -1
    for path in [("d", "bogus"), ("e", "bogus"), ("a", "child", "raw", 0, "bogus")]:
        changed = copy.deepcopy(body)
        _set(changed, path, {"free": 1})
        assert _check_count(changed, SYNTHETIC, SYNTHETIC_COMPILED) > 0


# ---- NativeFieldModel.count: what is left to Python ------------------------------------------------

@pytest.mark.parametrize("body", [
    _Dict({"f": 1}),
    {1: "x"},
    {"a": {None: 1}},
    {_Str("f"): 1},
    {"d": _deep(250)},
    {"a": {"child": {"child": {"child": {}}}, SURROGATE: 1}},
    {"a": {"child": {"child": {"child": {}}}}, SURROGATE: 1},
])
def test_count_declines_or_agrees(body: Any) -> None:
    got = SYNTHETIC_COMPILED.count(body)
    try:
        expected = fv.fast_count(body, SYNTHETIC)
    except RecursionError:
        assert got is None
        return
    assert got is None or got == expected
    assert fv.native_count(body, SYNTHETIC) == expected


def test_count_declines_python_only_cases() -> None:
    assert SYNTHETIC_COMPILED.count(_Dict({"f": 1})) is None
    assert SYNTHETIC_COMPILED.count({1: "x"}) is None
    assert SYNTHETIC_COMPILED.count({_Str("f"): 1}) is None
    assert SYNTHETIC_COMPILED.count({"d": _deep(250)}) is None
    assert SYNTHETIC_COMPILED.count([]) is None  # type: ignore[arg-type]
    nested: Obj = {}
    cur = nested
    for _ in range(250):
        cur["child"] = {}
        cur = cur["child"]
    assert SYNTHETIC_COMPILED.count({"a": nested}) is None
    assert fv.native_count({"a": nested}, SYNTHETIC) == fv.fast_count({"a": nested}, SYNTHETIC) == 251
    # a subclass in a value is only "not a dict", as in Python
    assert SYNTHETIC_COMPILED.count({"a": _Dict(bogus=1)}) == fv.fast_count({"a": _Dict(bogus=1)}, SYNTHETIC) == 1


def test_bad_models_are_refused() -> None:
    bad = fv.Node()
    bad.spec["x"] = (fv.MSG, None)
    bad.seal()
    with pytest.raises(TypeError):
        NativeFieldModel(bad)
    bad.spec["x"] = (9, None)
    bad.seal()
    with pytest.raises(ValueError):
        NativeFieldModel(bad)


def test_strict_errors_use_the_compiled_model() -> None:
    node = _model(("", "v1", "Pod"))
    body = _pod()
    assert fv.strict_errors(body, node, msgspec.json.encode(body)) == []
    assert isinstance(node.native, NativeFieldModel)
    body["spec"]["bogus"] = 1
    assert fv.strict_errors(body, node, None) == ['unknown field "spec.bogus"']
    assert "bogus" not in body["spec"]
