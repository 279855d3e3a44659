"""`$(VAR)` expansion, the downward API values and a container's environment (envvars.make_env):
upstream's rules and messages, against an in-memory ConfigMap/Secret source."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from kubecore.kubelet import downward, expansion
from kubecore.kubelet.envvars import EnvContext, EnvError, expand_command, make_env
from kubecore.kubelet.objects import CONFIGMAP, SECRET
from tests.unit.kubelet.kubelet_fixtures import FakeObjects, container, make_pod

Obj = dict[str, Any]


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def ctx(objects: FakeObjects | None = None, events: list[tuple[str, str, str]] | None = None) -> EnvContext:
    sink = events if events is not None else []
    return EnvContext(objects=objects or FakeObjects(), node_name="node-1", host_ips=["10.0.0.5"],
                      allocatable={"cpu": "4", "memory": "8Gi", "ephemeral-storage": "100Gi"},
                      record=lambda _ref, t, reason, msg: sink.append((t, reason, msg)))


OBJECTS = {
    (CONFIGMAP, "settings"): {"data": {"LEVEL": "debug", "1bad": "x", "mode": "fast"}},
    (SECRET, "creds"): {"data": {"password": b64("s3cret"), "user": b64("admin")}},
}


@pytest.mark.parametrize(("text", "expected"), [
    ("$(A)", "a"), ("x$(A)y$(B)z", "xaybz"), ("$$(A)", "$(A)"), ("$$$(A)", "$a"), ("$(MISSING)", "$(MISSING)"),
    ("$A", "$A"), ("$(A", "$(A"), ("$", "$"), ("$$", "$"), ("$()", ""), ("a$(A)$(A)", "aaa"),
    ("$(NESTED)", "$(A)"),
])
def test_expansion_follows_upstreams_rules(text: str, expected: str) -> None:
    mapping = expansion.mapping_for({"A": "a", "B": "b", "NESTED": "$(A)", "": ""})
    assert expansion.expand(text, mapping) == expected


def test_mapping_looks_in_each_context_in_order() -> None:
    lookup = expansion.mapping_for({"A": "first"}, {"A": "second", "B": "b"})
    assert (lookup("A"), lookup("B"), lookup("C")) == ("first", "b", "$(C)")


def test_metadata_fields_and_formatted_maps() -> None:
    pod = make_pod()
    pod["metadata"]["labels"] = {"b": "2", "a": 'quote"d'}
    assert downward.metadata_value(pod, "metadata.labels") == 'a="quote\\"d"\nb="2"'
    assert downward.metadata_value(pod, "metadata.labels['b']") == "2"
    assert downward.metadata_value(pod, "metadata.annotations['none']") == ""
    assert downward.metadata_value(pod, "metadata.uid") == pod["metadata"]["uid"]
    with pytest.raises(downward.DownwardError, match="unsupported fieldPath: spec.nodeName"):
        downward.metadata_value(pod, "spec.nodeName")


@pytest.mark.parametrize(("resources", "ref", "expected"), [
    ({"limits": {"cpu": "500m"}}, {"resource": "limits.cpu"}, "1"),
    ({"limits": {"cpu": "500m"}}, {"resource": "limits.cpu", "divisor": "1m"}, "500"),
    ({"limits": {"memory": "128Mi"}}, {"resource": "limits.memory", "divisor": "1Mi"}, "128"),
    ({"limits": {"memory": "1Gi"}}, {"resource": "limits.memory"}, str(1 << 30)),
    ({}, {"resource": "limits.cpu", "divisor": "1m"}, "4000"),
    ({}, {"resource": "limits.memory", "divisor": "1Gi"}, "8"),
    ({}, {"resource": "requests.memory"}, "0"),
    ({"requests": {"cpu": "250m"}}, {"resource": "requests.cpu", "divisor": "100m"}, "3"),
])
def test_resource_values_round_up_and_default_limits_to_allocatable(resources: Obj, ref: Obj, expected: str) -> None:
    c = container(resources=resources)
    assert downward.resource_value(c, ref, allocatable={"cpu": "4", "memory": "8Gi"}) == expected


def test_an_unknown_resource_is_upstreams_error() -> None:
    with pytest.raises(downward.DownwardError, match="unsupported container resource : limits.gpu"):
        downward.resource_value(container(), {"resource": "limits.gpu"}, allocatable={})


async def test_env_from_values_refs_and_expansion_in_order() -> None:
    events: list[tuple[str, str, str]] = []
    objects = FakeObjects(OBJECTS)
    c = container(
        envFrom=[{"configMapRef": {"name": "settings"}, "prefix": "CFG_"}, {"configMapRef": {"name": "settings"}},
                 {"secretRef": {"name": "creds"}}],
        env=[{"name": "HOST", "value": "db"}, {"name": "URL", "value": "$(HOST):$(PORT)/$(CFG_LEVEL)"},
             {"name": "PORT", "value": "5432"},
             {"name": "PASS", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
             {"name": "LEVEL", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "LEVEL"}}},
             {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
             {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
             {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
             {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}},
             {"name": "EMPTY"}],
        resources={"limits": {"memory": "64Mi"}})
    env = await make_env(make_pod(containers=[c]), c, ctx(objects, events), pod_ips=["10.128.0.9"])
    assert env == {"CFG_LEVEL": "debug", "CFG_1bad": "x", "CFG_mode": "fast", "LEVEL": "debug", "mode": "fast",
                   "password": "s3cret", "user": "admin", "HOST": "db", "URL": "db:$(PORT)/debug", "PORT": "5432",
                   "PASS": "s3cret", "POD": "web", "IP": "10.128.0.9", "NODE": "node-1", "MEM": "64", "EMPTY": ""}
    assert events == [("Warning", "InvalidEnvironmentVariableNames",
                       "Keys [1bad] from the EnvFrom configMap default/settings were skipped since they are "
                       "considered invalid environment variable names.")]


@pytest.mark.parametrize(("entry", "message"), [
    ({"configMapKeyRef": {"name": "nope", "key": "k"}}, 'configmap "nope" not found'),
    ({"configMapKeyRef": {"name": "settings", "key": "k"}}, "couldn't find key k in ConfigMap default/settings"),
    ({"secretKeyRef": {"name": "nope", "key": "k"}}, 'secret "nope" not found'),
    ({"secretKeyRef": {"name": "creds", "key": "k"}}, "couldn't find key k in Secret default/creds"),
    ({"fieldRef": {"fieldPath": "spec.bogus"}}, "unsupported fieldPath: spec.bogus"),
])
async def test_a_missing_reference_fails_with_upstreams_message(entry: Obj, message: str) -> None:
    c = container(env=[{"name": "X", "valueFrom": entry}])
    with pytest.raises(EnvError) as e:
        await make_env(make_pod(containers=[c]), c, ctx(FakeObjects(OBJECTS)))
    assert str(e.value) == message


async def test_optional_references_are_skipped() -> None:
    c = container(envFrom=[{"configMapRef": {"name": "nope", "optional": True}},
                           {"secretRef": {"name": "gone", "optional": True}}],
                  env=[{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "k", "optional": True}}},
                       {"name": "B", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "k", "optional": True}}},
                       {"name": "C", "value": "c"}])
    assert await make_env(make_pod(containers=[c]), c, ctx(FakeObjects(OBJECTS))) == {"C": "c"}


async def test_a_missing_env_from_source_fails_unless_optional() -> None:
    c = container(envFrom=[{"secretRef": {"name": "gone"}}])
    with pytest.raises(EnvError, match='secret "gone" not found'):
        await make_env(make_pod(containers=[c]), c, ctx(FakeObjects(OBJECTS)))


def test_command_and_args_expand_over_the_environment() -> None:
    c = container(command=["sh", "-c", "echo $(MSG) $$(MSG) $(NONE)"], args=["$(MSG)", "$$HOME"])
    assert expand_command(c, {"MSG": "hi"}) == (["sh", "-c", "echo hi $(MSG) $(NONE)"], ["hi", "$HOME"])
