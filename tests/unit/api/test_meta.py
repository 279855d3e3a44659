import random

import pytest

from kubecore.api.errors import StatusError
from kubecore.api.meta import NAME_ALPHABET, generate_name, now_rfc3339, prepare_create, prepare_update, validate_name
from kubecore.api.registry import builtin_registry

R = builtin_registry()
PODS = R.get("", "v1", "pods")
CM = R.get("", "v1", "configmaps")
DEPLOY = R.get("apps", "v1", "deployments")
NODES = R.get("", "v1", "nodes")
SVC = R.get("", "v1", "services")
NOW = "2026-12-02T10:00:00Z"


def create(rt, obj, ns="default", **kw):
    return prepare_create(rt, obj, namespace=ns, now=NOW, uid="u-1", rand=random.Random(1), **kw)


def test_now_and_generate_name():
    assert now_rfc3339(lambda: 1796205600.7) == "2026-12-02T10:00:00Z"
    name = generate_name("web-", random.Random(0))
    assert name.startswith("web-") and len(name) == 9 and all(c in NAME_ALPHABET for c in name[4:])
    assert len(generate_name("x" * 80)) == 63


def test_create_fills_system_fields():
    obj = create(PODS, {"metadata": {"generateName": "p-"}, "spec": {}, "status": {"phase": "Running"}})
    m = obj["metadata"]
    assert (obj["kind"], obj["apiVersion"], m["namespace"], m["uid"], m["creationTimestamp"]) == (
        "Pod", "v1", "default", "u-1", NOW)
    assert m["name"].startswith("p-") and len(m["name"]) == 7
    assert m["generation"] == 1 and obj["status"] == {"phase": "Pending"}
    cm = create(CM, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})
    assert "generation" not in cm["metadata"]
    d = create(DEPLOY, {"metadata": {"name": "d"}, "spec": {}, "status": {"replicas": 3}})
    assert "status" not in d and d["metadata"]["generation"] == 1


def test_cluster_scoped_namespace_cleared():
    n = prepare_create(NODES, {"metadata": {"name": "n1", "namespace": "x"}}, namespace=None, now=NOW, uid="u")
    assert "namespace" not in n["metadata"]


@pytest.mark.parametrize("rt,obj,ns,code,msg", [
    (PODS, {"metadata": {}}, "default", 422, 'Pod "" is invalid: metadata.name: Required value: name or generateName is required'),
    (PODS, {"metadata": {"name": "p", "namespace": "other"}}, "default", 400,
     "the namespace of the provided object does not match the namespace sent on the request"),
    (PODS, {"kind": "Service", "apiVersion": "v1", "metadata": {"name": "p"}}, "default", 400,
     'Service in version "v1" cannot be handled as a Pod: converting (v1.Service) to (core.Pod): unknown conversion'),
    (DEPLOY, {"kind": "Deployment", "apiVersion": "apps/v1beta1", "metadata": {"name": "p"}}, "default", 400,
     "the API version in the data (apps/v1beta1) does not match the expected API version (apps/v1)"),
    (PODS, [], "default", 400, "the body of the request must be a JSON object"),
    (SVC, {"metadata": {"name": "1svc"}}, "default", 422,
     'Service "1svc" is invalid: metadata.name: Invalid value: "1svc": a DNS-1035 label must consist of lower case '
     "alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character "
     "(e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"),
    (PODS, {"metadata": {"name": "p"}}, "", 422, 'Pod "p" is invalid: metadata.namespace: Required value'),
    (DEPLOY, {"metadata": {"name": "d", "labels": {"a": "b c"}}}, "ns", 422,
     'Deployment.apps "d" is invalid: metadata.labels: Invalid value: "b c": a valid label must be an empty string '
     "or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character "
     "(e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
     "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"),
])
def test_create_errors(rt, obj, ns, code, msg):
    with pytest.raises(StatusError) as ei:
        create(rt, obj, ns)
    assert (ei.value.code, ei.value.message) == (code, msg)


def test_invalid_name_causes():
    with pytest.raises(StatusError) as ei:
        create(PODS, {"metadata": {"name": "Bad_Name"}})
    d = ei.value.status()["details"]
    assert d["name"] == "Bad_Name" and d["kind"] == "Pod"
    assert d["causes"][0]["reason"] == "FieldValueInvalid" and d["causes"][0]["field"] == "metadata.name"
    assert validate_name(R.get("", "v1", "namespaces"), "a.b") == ["must not contain dots"]
    assert validate_name(R.get("rbac.authorization.k8s.io", "v1", "clusterroles"), "system:node") == []


def _deploy(replicas, gen=3, **meta):
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "ns", "uid": "u", "creationTimestamp": NOW, "generation": gen,
                         "resourceVersion": "5", **meta},
            "spec": {"replicas": replicas}, "status": {"replicas": 1}}


@pytest.mark.parametrize("new,gen", [
    (_deploy(2), 4),
    (_deploy(1), 3),
    (_deploy(1, labels={"a": "b"}), 3),
    (_deploy(1, annotations={"a": "b"}), 4),  # deployment strategy: annotations bump generation
    (_deploy(1, gen=99), 3),  # clients cannot set generation
])
def test_update_generation(new, gen):
    out = prepare_update(DEPLOY, _deploy(1), new)
    assert out["metadata"]["generation"] == gen


def test_update_keeps_system_fields_and_status():
    new = _deploy(2)
    del new["metadata"]["uid"]
    new["metadata"]["creationTimestamp"] = "2000-01-01T00:00:00Z"
    new["status"] = {"replicas": 9}
    out = prepare_update(DEPLOY, _deploy(1), new)
    assert out["metadata"]["uid"] == "u" and out["metadata"]["creationTimestamp"] == NOW
    assert out["status"] == {"replicas": 1}


def test_status_update():
    new = _deploy(7, labels={"x": "y"})
    new["status"] = {"replicas": 2}
    out = prepare_update(DEPLOY, _deploy(1), new, subresource="status")
    assert out["spec"] == {"replicas": 1} and out["status"] == {"replicas": 2}
    assert "labels" not in out["metadata"] and out["metadata"]["generation"] == 3


@pytest.mark.parametrize("mutate,msg", [
    (lambda m: m.update(uid="other"), 'metadata.uid: Invalid value: "other": field is immutable'),
    (lambda m: m.update(name="e"), 'metadata.name: Invalid value: "e": field is immutable'),
])
def test_update_immutable(mutate, msg):
    new = _deploy(1)
    mutate(new["metadata"])
    with pytest.raises(StatusError) as ei:
        prepare_update(DEPLOY, _deploy(1), new)
    assert ei.value.code == 422 and msg in ei.value.message


def test_update_url_name_and_finalizers():
    with pytest.raises(StatusError) as ei:
        prepare_update(DEPLOY, _deploy(1), _deploy(1), name="zzz")
    assert ei.value.message == "the name of the object (d) does not match the name on the URL (zzz)"
    old = _deploy(1, deletionTimestamp=NOW, finalizers=["a"])
    new = _deploy(1, finalizers=["a", "b"])
    with pytest.raises(StatusError) as ei:
        prepare_update(DEPLOY, old, new)
    assert ('metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, '
            'found new finalizers []string{"b"}') in ei.value.message
    out = prepare_update(DEPLOY, old, _deploy(1, finalizers=[]))
    assert out["metadata"]["deletionTimestamp"] == NOW
