"""Per-kind validation of core/v1 objects: valid objects pass, each rule gives upstream's text."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubecore.api import defaults, errors, kinds
from kubecore.api.registry import builtin_registry

REG = builtin_registry()
Obj = dict[str, Any]


def rt(kind: str, group: str = "") -> Any:
    found = [t for t in REG.all() if t.kind == kind and t.group == group]
    assert found, kind
    return found[0]


def create_errors(kind: str, obj: Obj, group: str = "") -> list[str]:
    """The messages a create of `obj` gets (defaults applied first, as the API server does)."""
    obj = defaults.apply_defaults(group, kind, copy.deepcopy(obj))
    obj.setdefault("metadata", {}).setdefault("name", "x")
    obj["metadata"].setdefault("uid", "u-1")
    return [e.error() for e in kinds.validate_create(rt(kind, group), obj)]


def update_errors(kind: str, new: Obj, old: Obj, group: str = "") -> list[str]:
    old = defaults.apply_defaults(group, kind, copy.deepcopy(old))
    new = defaults.apply_defaults(group, kind, copy.deepcopy(new))
    return [e.error() for e in kinds.validate_update(rt(kind, group), new, old)]


def pod(**spec: Any) -> Obj:
    base: Obj = {"containers": [{"name": "c", "image": "nginx"}]}
    base.update(spec)
    return {"metadata": {"name": "p", "namespace": "ns"}, "spec": base}


def test_valid_pod() -> None:
    assert create_errors("Pod", pod(volumes=[{"name": "v", "emptyDir": {}}], tolerations=[
        {"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}])) == []


@pytest.mark.parametrize("spec, message", [
    ({"containers": []}, "spec.containers: Required value"),
    ({"containers": [{"name": "C", "image": "x"}]},
     "spec.containers[0].name: Invalid value: \"C\": a lowercase RFC 1123 label must consist of lower case "
     "alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
     "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"),
    ({"containers": [{"name": "c"}]}, "spec.containers[0].image: Required value"),
    ({"containers": [{"name": "c", "image": "x"}, {"name": "c", "image": "y"}]},
     'spec.containers[1].name: Duplicate value: "c"'),
    ({"initContainers": [{"name": "c", "image": "x"}]}, 'spec.initContainers[0].name: Duplicate value: "c"'),
    ({"containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 99999}]}]},
     "spec.containers[0].ports[0].containerPort: Invalid value: 99999: must be between 1 and 65535, inclusive"),
    ({"containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 80, "protocol": "HTTP"}]}]},
     'spec.containers[0].ports[0].protocol: Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP"'),
    ({"containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 80, "name": "a"},
                                                          {"containerPort": 81, "name": "a"}]}]},
     'spec.containers[0].ports[1].name: Duplicate value: "a"'),
    ({"containers": [{"name": "c", "image": "x", "volumeMounts": [{"name": "v", "mountPath": "/d"}]}]},
     'spec.containers[0].volumeMounts[0].name: Not found: "v"'),
    ({"volumes": [{"name": "v"}]}, "spec.volumes[0]: Required value: must specify a volume type"),
    ({"volumes": [{"name": "v", "emptyDir": {}, "hostPath": {"path": "/x"}}]},
     "spec.volumes[0].hostPath: Forbidden: may not specify more than 1 volume type"),
    ({"volumes": [{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}}]},
     'spec.volumes[1].name: Duplicate value: "v"'),
    ({"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}]},
     'spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1'),
    ({"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "-1"}}}]},
     'spec.containers[0].resources.requests[cpu]: Invalid value: "-1": must be greater than or equal to 0'),
    ({"restartPolicy": "Sometimes"},
     'spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"'),
    ({"dnsPolicy": "Bogus"}, 'spec.dnsPolicy: Unsupported value: "Bogus": supported values: '
                             '"ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"'),
    ({"containers": [{"name": "c", "image": "x", "imagePullPolicy": "Sometimes"}]},
     'spec.containers[0].imagePullPolicy: Unsupported value: "Sometimes": supported values: "Always", '
     '"IfNotPresent", "Never"'),
    ({"activeDeadlineSeconds": 0},
     "spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive"),
    ({"tolerations": [{"operator": "Equal", "value": "v"}]},
     'spec.tolerations[0].operator: Invalid value: "Equal": operator must be Exists when `key` is empty, '
     'which means "match all values and all keys"'),
    ({"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]},
     "spec.tolerations[0].operator: Invalid value: \"v\": value must be empty when `operator` is 'Exists'"),
    ({"tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}]},
     "spec.tolerations[0].effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' when "
     "`tolerationSeconds` is set"),
    ({"tolerations": [{"key": "k", "operator": "Exists", "effect": "Never"}]},
     'spec.tolerations[0].effect: Unsupported value: "Never": supported values: "NoSchedule", '
     '"PreferNoSchedule", "NoExecute"'),
    ({"nodeSelector": {"a b": "c"}}, "spec.nodeSelector: Invalid value: \"a b\": name part must consist of "
     "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
     "'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
    ({"containers": [{"name": "c", "image": "x", "env": [{"name": "A=B"}]}]},
     "spec.containers[0].env[0].name: Invalid value: \"A=B\": a valid environment variable name must consist "
     "only of printable ASCII characters other than '='"),
])
def test_pod_rules(spec: Obj, message: str) -> None:
    assert message in create_errors("Pod", pod(**spec))


def test_bad_quantity_is_a_bad_request() -> None:
    obj = pod(containers=[{"name": "c", "image": "x", "resources": {"limits": {"memory": "1Gb"}}}])
    with pytest.raises(errors.StatusError) as e:
        create_errors("Pod", obj)
    assert e.value.code == 400
    assert e.value.message == ('Pod in version "v1" cannot be handled as a Pod: quantities must match the regular '
                               "expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")


def test_pod_update_rules() -> None:
    old = pod(activeDeadlineSeconds=100)
    new_image = pod(activeDeadlineSeconds=50, containers=[{"name": "c", "image": "nginx:2", "imagePullPolicy": "Always"}])
    assert update_errors("Pod", new_image, old) == []
    msgs = update_errors("Pod", pod(activeDeadlineSeconds=100, restartPolicy="Never"), old)
    assert len(msgs) == 1 and msgs[0].startswith(
        "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
        "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to "
        "existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was "
        "previously negative)\n")
    assert update_errors("Pod", pod(activeDeadlineSeconds=200), old) == [
        "spec.activeDeadlineSeconds: Invalid value: 200: must be less than or equal to previous value"]
    two = pod(containers=[{"name": "c", "image": "x"}, {"name": "d", "image": "y"}])
    assert update_errors("Pod", two, pod()) == ["spec.containers: Forbidden: pod updates may not add or remove containers"]
    tol = [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}]
    more = tol + [{"key": "j", "operator": "Exists"}]
    assert update_errors("Pod", pod(tolerations=more), pod(tolerations=tol)) == []
    assert update_errors("Pod", pod(tolerations=[]), pod(tolerations=tol)) == [
        "spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"]


def svc(**spec: Any) -> Obj:
    base: Obj = {"ports": [{"port": 80}]}
    base.update(spec)
    return {"metadata": {"name": "s", "namespace": "ns"}, "spec": base}


def test_valid_services() -> None:
    assert create_errors("Service", svc()) == []
    assert create_errors("Service", svc(type="NodePort", ports=[{"port": 80, "nodePort": 30001}])) == []
    assert create_errors("Service", svc(type="LoadBalancer")) == []
    assert create_errors("Service", {"spec": {"type": "ExternalName", "externalName": "example.com."}}) == []
    assert create_errors("Service", {"spec": {"clusterIP": "None"}}) == []


@pytest.mark.parametrize("spec, message", [
    ({"ports": []}, "spec.ports: Required value"),
    ({"ports": [{"port": 99999}]}, "spec.ports[0].port: Invalid value: 99999: must be between 1 and 65535, inclusive"),
    ({"ports": [{"port": 80, "targetPort": 0}]},
     "spec.ports[0].targetPort: Invalid value: 0: must be between 1 and 65535, inclusive"),
    ({"ports": [{"port": 80}, {"port": 81}]}, "spec.ports[0].name: Required value"),
    ({"ports": [{"port": 80, "name": "a"}, {"port": 81, "name": "a"}]}, 'spec.ports[1].name: Duplicate value: "a"'),
    ({"ports": [{"port": 80, "protocol": "ICMP"}]},
     'spec.ports[0].protocol: Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"'),
    ({"type": "Weird"}, 'spec.type: Unsupported value: "Weird": supported values: "ClusterIP", "ExternalName", '
                        '"LoadBalancer", "NodePort"'),
    ({"ports": [{"port": 80, "nodePort": 30000}]},
     "spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"),
    ({"type": "ExternalName"}, "spec.externalName: Required value"),
    ({"type": "NodePort", "clusterIP": "None"},
     "spec.clusterIPs[0]: Invalid value: \"None\": may not be set to 'None' for NodePort services"),
    ({"selector": {"app": "-x"}}, "spec.selector: Invalid value: \"-x\": a valid label must be an empty string or "
     "consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character "
     "(e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?"
     "[A-Za-z0-9])?')"),
    ({"ports": [{"port": 80, "name": "a"}, {"port": 80, "name": "b"}]},
     'spec.ports[1]: Duplicate value: core.ServicePort{Name:"", Protocol:"TCP", AppProtocol:(*string)(nil), '
     'Port:80, TargetPort:intstr.IntOrString{Type:0, IntVal:0, StrVal:""}, NodePort:0}'),
    ({"clusterIP": "10.0.0.300"},
     "spec.clusterIPs[0]: Invalid value: \"10.0.0.300\": must be a valid IP address, (e.g. 10.9.8.7 or "
     "2001:db8::ffff)"),
])
def test_service_rules(spec: Obj, message: str) -> None:
    assert message in create_errors("Service", svc(**spec))


def test_service_update_keeps_cluster_ip() -> None:
    old = svc(clusterIP="10.0.0.5", clusterIPs=["10.0.0.5"])
    assert update_errors("Service", svc(), old) == []
    assert update_errors("Service", svc(clusterIP="10.0.0.6", clusterIPs=["10.0.0.6"]), old) == [
        'spec.clusterIPs[0]: Invalid value: []string{"10.0.0.6"}: may not change once set']
    node_port = svc(type="NodePort", ports=[{"port": 80, "nodePort": 30001}], externalTrafficPolicy="Cluster")
    to_cluster_ip = copy.deepcopy(node_port)
    to_cluster_ip["spec"]["type"] = "ClusterIP"
    assert update_errors("Service", to_cluster_ip, node_port) == []


def test_config_maps() -> None:
    assert create_errors("ConfigMap", {"data": {"a.b_c-d": "x"}}) == []
    assert create_errors("ConfigMap", {"data": {"a/b": "x"}}) == [
        "data[a/b]: Invalid value: \"a/b\": a valid config key must consist of alphanumeric characters, '-', '_' "
        "or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"]
    assert create_errors("ConfigMap", {"data": {"k": "x" * (1024 * 1024 + 1)}}) == [
        ": Too long: must have at most 1048576 bytes"]
    old = {"immutable": True, "data": {"k": "v"}}
    assert update_errors("ConfigMap", {"immutable": True, "data": {"k": "w"}}, old) == [
        "data: Forbidden: field is immutable when `immutable` is set"]
    assert update_errors("ConfigMap", {"data": {"k": "v"}}, old) == [
        "immutable: Forbidden: field is immutable when `immutable` is set"]


def test_secrets() -> None:
    assert create_errors("Secret", {"data": {"k": "dg=="}, "stringData": {"s": "plain"}}) == []
    assert create_errors("Secret", {"type": "kubernetes.io/tls", "data": {"tls.crt": "YQ=="}}) == [
        "data[tls.key]: Required value"]
    assert update_errors("Secret", {"type": "Other"}, {"type": "Opaque"}) == [
        'type: Invalid value: "Other": field is immutable']
    with pytest.raises(errors.StatusError) as e:
        create_errors("Secret", {"data": {"k": "not base64!"}})
    assert e.value.code == 400 and "illegal base64 data at input byte 3" in e.value.message


def test_string_data_is_folded_into_data() -> None:
    obj = defaults.apply_defaults("", "Secret", {"stringData": {"a": "b"}})
    assert obj == {"type": "Opaque", "data": {"a": "Yg=="}}


def test_nodes_and_endpoints() -> None:
    assert create_errors("Node", {"spec": {"podCIDR": "10.0.0.0/24", "podCIDRs": ["10.0.0.0/24"],
                                           "taints": [{"key": "k", "effect": "NoSchedule"}]}}) == []
    assert create_errors("Node", {"spec": {"taints": [{"key": "k", "effect": "Sometimes"}]}}) == [
        'metadata.taints[0].effect: Unsupported value: "Sometimes": supported values: "NoSchedule", '
        '"PreferNoSchedule", "NoExecute"']
    assert create_errors("Node", {"spec": {"podCIDRs": ["10.0.0.0"]}}) == [
        'spec.podCIDRs[0]: Invalid value: "10.0.0.0": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)']
    assert update_errors("Node", {"spec": {"podCIDRs": ["10.0.1.0/24"]}}, {"spec": {"podCIDRs": ["10.0.0.0/24"]}}) == [
        'spec.podCIDRs: Forbidden: node updates may not change podCIDR except from "" to valid']
    assert create_errors("Endpoints", {"subsets": [{"ports": [{"port": 80}]}]}) == [
        "subsets[0]: Required value: must specify `addresses` or `notReadyAddresses`"]


def test_quotas_limits_volumes() -> None:
    assert create_errors("ResourceQuota", {"spec": {"hard": {"pods": "10", "requests.cpu": "4"}}}) == []
    assert create_errors("ResourceQuota", {"spec": {"hard": {"pods": "-1"}}}) == [
        'spec.hard[pods]: Invalid value: "-1": must be greater than or equal to 0']
    assert create_errors("LimitRange", {"spec": {"limits": [
        {"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}}]}}) == [
        'spec.limits[0].min[cpu]: Invalid value: "2": min value 2 is greater than max value 1']
    pvc: Obj = {"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
    assert create_errors("PersistentVolumeClaim", pvc) == []
    assert create_errors("PersistentVolumeClaim", {"spec": {"resources": {"requests": {"storage": "1Gi"}}}}) == [
        "spec.accessModes: Required value: at least 1 access mode is required"]
    assert create_errors("PersistentVolumeClaim", {"spec": {"accessModes": ["ReadWriteSometimes"],
                                                            "resources": {"requests": {"storage": "1Gi"}}}}) == [
        'spec.accessModes: Unsupported value: "ReadWriteSometimes": supported values: "ReadOnlyMany", '
        '"ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"']
    pv: Obj = {"spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}, "hostPath": {"path": "/d"}}}
    assert create_errors("PersistentVolume", pv) == []


def test_events_and_namespaces() -> None:
    ev = {"metadata": {"name": "e", "namespace": "a"}, "involvedObject": {"kind": "Pod", "namespace": "b"}}
    assert create_errors("Event", ev) == ['involvedObject.namespace: Invalid value: "b": does not match event.namespace']
    assert create_errors("Namespace", {"spec": {"finalizers": ["kubernetes"]}}) == []
