"""fieldValidation: unknown and duplicate fields of write bodies, per directive (upstream's texts)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from kubecore.api import errors, fieldvalidation as fv
from kubecore.api.registry import ResourceType, builtin_registry

REG = builtin_registry()
PODS = REG.get("", "v1", "pods")
CONFIGMAPS = REG.get("", "v1", "configmaps")
DEPLOYMENTS = REG.get("apps", "v1", "deployments")
assert PODS is not None and CONFIGMAPS is not None and DEPLOYMENTS is not None


def _pod(**extra: Any) -> dict[str, Any]:
    spec = {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}],
                            "resources": {"limits": {"cpu": "1"}}, "env": [{"name": "A", "value": "b"}]}],
            "nodeSelector": {"k": "v"}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}}, "spec": spec, **extra}


def _check(rt: ResourceType, raw: bytes, mode: str = fv.WARN) -> tuple[list[str], dict[str, Any]]:
    body = msgspec.json.decode(raw)
    return fv.check_body(rt, body, mode=mode, raw=raw), body


def test_a_clean_body_passes_untouched() -> None:
    pod = _pod()
    raw = msgspec.json.encode(pod)
    found, body = _check(PODS, raw, fv.STRICT)
    assert found == [] and body == pod


def test_pretty_printed_clean_body_takes_the_exact_path_and_passes() -> None:
    raw = json.dumps(_pod(), indent=2, separators=(",", " : ")).encode()
    assert fv.raw_key_count(raw) == 0  # the cheap count cannot see keys written this way
    found, body = _check(PODS, raw, fv.STRICT)
    assert found == [] and body == _pod()


def test_unknown_fields_are_named_by_path_in_document_order_and_dropped() -> None:
    pod = _pod(bogus=1)
    pod["spec"]["containers"][0]["x"] = {"deep": {"er": 1}}
    pod["spec"]["containers"][0]["ports"][0]["y"] = 2
    pod["spec"]["zz"] = []
    found, body = _check(PODS, msgspec.json.encode(pod))
    assert found == ['unknown field "spec.containers[0].ports[0].y"', 'unknown field "spec.containers[0].x"',
                     'unknown field "spec.zz"', 'unknown field "bogus"']
    assert body == _pod()


def test_maps_and_free_form_values_are_not_checked_for_unknown_fields() -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "annotations": {"x": "{\"a\":1}"}},
          "data": {"anything": "goes", "k\\\"": "v"}}
    found, body = _check(CONFIGMAPS, msgspec.json.encode(cm), fv.STRICT)
    assert found == [] and body == cm
    cr = {"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": {"name": "r"},
          "data": {"free": {"form": [1, {"x": 2}]}}, "revision": 1}
    rt = REG.get("apps", "v1", "controllerrevisions")
    assert rt is not None
    assert _check(rt, msgspec.json.encode(cr), fv.STRICT) == ([], cr)


def test_duplicate_fields_are_found_with_unknown_ones_in_document_order() -> None:
    raw = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","name":"d"},"dta":{},"data":{"a":"b","a":"c"}}'
    found, body = _check(CONFIGMAPS, raw)
    assert found == ['duplicate field "metadata.name"', 'unknown field "dta"', 'duplicate field "data.a"']
    assert body == {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d"}, "data": {"a": "c"}}


def test_duplicates_inside_lists_of_objects() -> None:
    raw = (b'{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"spec":'
           b'{"containers":[{"name":"a","image":"x","image":"y"}]}}}}')
    found, body = _check(DEPLOYMENTS, raw)
    assert found == ['duplicate field "spec.template.spec.containers[0].image"']
    assert body["spec"]["template"]["spec"]["containers"][0]["image"] == "y"


def test_strict_is_upstreams_bad_request() -> None:
    raw = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","name":"d"},"dta":{}}'
    with pytest.raises(errors.StatusError) as e:
        _check(CONFIGMAPS, raw, fv.STRICT)
    assert e.value.code == 400 and e.value.reason == "BadRequest"
    assert e.value.message == ('ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: '
                               'duplicate field "metadata.name", unknown field "dta"')


def test_ignore_drops_silently_and_skips_the_duplicate_search() -> None:
    raw = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","name":"d"},"dta":{}}'
    found, body = _check(CONFIGMAPS, raw, fv.IGNORE)
    assert found == [] and "dta" not in body


def test_custom_resources_are_left_alone() -> None:
    class CustomType:
        group, version, kind, schema = "example.com", "v1", "Widget", {"type": "object"}

    body = {"apiVersion": "example.com/v1", "kind": "Widget", "anything": 1}
    assert fv.check_body(CustomType(), body, mode=fv.STRICT, raw=None) == []  # type: ignore[arg-type]
    assert body["anything"] == 1


def test_directive_values() -> None:
    assert fv.directive(None, "create") == fv.WARN
    assert fv.directive("", "update") == fv.WARN
    assert fv.directive("Strict", "patch") == fv.STRICT
    with pytest.raises(errors.StatusError) as e:
        fv.directive("strict", "create")
    assert e.value.code == 422
    assert e.value.message == ('CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: '
                               '"strict": supported values: "", "Ignore", "Strict", "Warn"')


def test_patched_objects_and_patch_duplicates() -> None:
    patched = _pod(bogus=1)
    raw = b'{"spec":{"nodeName":"a","nodeName":"b"},"bogus":1}'
    found = fv.check_patched(PODS, patched, mode=fv.WARN, patch=msgspec.json.decode(raw), raw=raw, strategic=True)
    assert found == ['duplicate field "spec.nodeName"', 'unknown field "bogus"']
    assert "bogus" not in patched


def test_strict_patch_is_upstreams_invalid_on_the_patch_field() -> None:
    patch = {"bogus": {"x": 1.5, "y": None}, "spec": {"paused": True, "replicas": 2}}
    with pytest.raises(errors.StatusError) as e:
        fv.check_patched(DEPLOYMENTS, {"kind": "Deployment", **patch}, mode=fv.STRICT, patch=patch, raw=None,
                         strategic=True)
    assert e.value.code == 422
    assert e.value.message == (' "" is invalid: patch: Invalid value: "map[bogus:map[x:1.5 y:<nil>] '
                               'spec:map[paused:true replicas:2]]": strict decoding error: unknown field "bogus"')
    with pytest.raises(errors.StatusError) as e:
        fv.check_patched(DEPLOYMENTS, {"kind": "Deployment", "bogus": 1}, mode=fv.STRICT, patch={}, raw=None,
                         strategic=False)
    assert e.value.message == (' "" is invalid: patch: Invalid value: "{\\"kind\\":\\"Deployment\\",\\"bogus\\":1}": '
                               'strict decoding error: unknown field "bogus"')


def test_go_format_floats() -> None:
    assert [fv.go_format(x) for x in (1.0, 0.5, 1e21, 1.5e-7, -2.0)] == ["1", "0.5", "1e+21", "1.5e-07", "-2"]


def test_warning_header_is_go_quoted() -> None:
    assert fv.warning_header('unknown field "spec.x"') == '299 - "unknown field \\"spec.x\\""'


def test_every_builtin_kind_has_a_model_with_type_meta() -> None:
    for rt in REG.all():
        node = fv.model(rt.group, rt.version, rt.kind)
        if node is not None:
            assert {"apiVersion", "kind", "metadata"} <= node.known, rt
