"""Per-kind validation through real kubectl: invalid objects get upstream's error text (422, or 400
for undecodable quantities) and nothing is stored."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e.conftest import Kubectl

POD_NO_CONTAINERS = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": []}}
SVC_BAD_PORT = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
                "spec": {"ports": [{"port": 99999, "targetPort": 8080}]}}
DEPLOY_MISMATCH = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                   "spec": {"selector": {"matchLabels": {"app": "a"}},
                            "template": {"metadata": {"labels": {"app": "b"}},
                                         "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
CM_SLASH = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"a/b": "x"}}
PC_TOO_HIGH = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "too-high"},
               "value": 2000000000}
CRON_BAD = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "cj"},
            "spec": {"schedule": "* * * *", "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}}}
POD_BAD_QUANTITY = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "q"},
                    "spec": {"containers": [{"name": "c", "image": "nginx",
                                             "resources": {"limits": {"memory": "1Gb"}}}]}}


@pytest.mark.parametrize("obj, resource, message", [
    (POD_NO_CONTAINERS, "pod/p", 'The Pod "p" is invalid: spec.containers: Required value'),
    (SVC_BAD_PORT, "service/s",
     'The Service "s" is invalid: spec.ports[0].port: Invalid value: 99999: must be between 1 and 65535, inclusive'),
    (DEPLOY_MISMATCH, "deployment/d", 'The Deployment "d" is invalid: spec.template.metadata.labels: Invalid '
     'value: map[string]string{"app":"b"}: `selector` does not match template `labels`'),
    (CM_SLASH, "configmap/cm", "The ConfigMap \"cm\" is invalid: data[a/b]: Invalid value: \"a/b\": a valid config "
     "key must consist of alphanumeric characters, '-', '_' or '.'"),
    (PC_TOO_HIGH, "priorityclass/too-high", 'The PriorityClass "too-high" is invalid: value: Forbidden: maximum '
     "allowed value of a user defined priority is 1000000000"),
    (CRON_BAD, "cronjob/cj", 'The CronJob "cj" is invalid: spec.schedule: Invalid value: "* * * *": expected '
     "exactly 5 fields, found 4: [* * * *]"),
    (POD_BAD_QUANTITY, "pod/q", 'Pod in version "v1" cannot be handled as a Pod: quantities must match the regular '
     "expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"),
])
def test_invalid_objects_are_refused_and_not_stored(kubectl: Kubectl, namespace: str, obj: dict[str, Any],
                                                     resource: str, message: str) -> None:
    res = kubectl.run("create", "-n", namespace, "-f", "-", input=json.dumps(obj))
    assert res.returncode != 0, res.stdout
    assert message in res.stderr
    got = kubectl.run("get", "-n", namespace, resource)
    assert got.returncode != 0 and "NotFound" in got.stderr


def test_pod_updates_of_immutable_fields_are_forbidden(kubectl: Kubectl, namespace: str) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "u"},
           "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}
    kubectl.ok("create", "-n", namespace, "-f", "-", input=json.dumps(pod))
    kubectl.ok("patch", "-n", namespace, "pod/u", "-p", '{"spec":{"activeDeadlineSeconds":100}}')
    res = kubectl.run("patch", "-n", namespace, "pod/u", "-p", '{"spec":{"restartPolicy":"Never"}}')
    assert res.returncode != 0
    assert 'The Pod "u" is invalid: spec: Forbidden: pod updates may not change fields other than' in res.stderr
    assert kubectl.ok("get", "-n", namespace, "pod/u", "-o", "jsonpath={.spec.restartPolicy}") == "Always"


def test_deployment_selector_is_immutable(kubectl: Kubectl, namespace: str) -> None:
    ok = json.loads(json.dumps(DEPLOY_MISMATCH))
    ok["spec"]["template"]["metadata"]["labels"]["app"] = "a"
    kubectl.ok("create", "-n", namespace, "-f", "-", input=json.dumps(ok))
    patch = '{"spec":{"selector":{"matchLabels":{"app":"a","x":"y"}},"template":{"metadata":{"labels":{"x":"y"}}}}}'
    res = kubectl.run("patch", "-n", namespace, "deployment/d", "-p", patch)
    assert res.returncode != 0
    assert ('spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{"app":"a", "x":"y"}, '
            "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable") in res.stderr
