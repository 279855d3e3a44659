"""Per-kind validation of apps/v1 and batch/v1 objects (upstream's texts)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubecore.api.kinds import cron
from tests.unit.api.test_kinds_core import create_errors, update_errors

Obj = dict[str, Any]
TEMPLATE: Obj = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}


def workload(**spec: Any) -> Obj:
    base: Obj = {"selector": {"matchLabels": {"app": "web"}}, "template": copy.deepcopy(TEMPLATE)}
    base.update(spec)
    return {"metadata": {"name": "w", "namespace": "ns"}, "spec": base}


@pytest.mark.parametrize("kind", ["Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"])
def test_valid_workloads(kind: str) -> None:
    assert create_errors(kind, workload(), "apps") == []


@pytest.mark.parametrize("kind, spec, message", [
    ("Deployment", {"selector": {"matchLabels": {"app": "db"}}},
     'spec.template.metadata.labels: Invalid value: map[string]string{"app":"web"}: `selector` does not match '
     'template `labels`'),
    ("Deployment", {"selector": None}, "spec.selector: Required value"),
    ("Deployment", {"selector": {}},
     "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), "
     "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for deployment"),
    ("Deployment", {"replicas": -1}, "spec.replicas: Invalid value: -1: must be greater than or equal to 0"),
    ("Deployment", {"strategy": {"type": "Sideways"}},
     'spec.strategy: Unsupported value: "Sideways": supported values: "Recreate", "RollingUpdate"'),
    ("Deployment", {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}},
     "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}: "
     "may not be 0 when `maxSurge` is 0"),
    ("Deployment", {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "5x"}}},
     "spec.strategy.rollingUpdate.maxSurge: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"5x\"}: a "
     "valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for "
     "validation is '[0-9]+%')"),
    ("Deployment", {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "120%"}}},
     "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, "
     "StrVal:\"120%\"}: must not be greater than 100%"),
    ("Deployment", {"template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}}},
     "spec.template.spec.containers: Required value"),
    ("ReplicaSet", {"template": {"metadata": {"labels": {"app": "web"}},
                                 "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}},
     'spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"'),
    ("StatefulSet", {"podManagementPolicy": "Random"},
     "spec.podManagementPolicy: Invalid value: \"Random\": must be 'OrderedReady' or 'Parallel'"),
    ("DaemonSet", {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0}}},
     "spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: cannot be 0 when maxSurge is 0"),
])
def test_workload_rules(kind: str, spec: Obj, message: str) -> None:
    assert message in create_errors(kind, workload(**spec), "apps")


def test_selector_is_immutable() -> None:
    new = workload(selector={"matchLabels": {"app": "web", "tier": "x"}})
    new["spec"]["template"]["metadata"]["labels"]["tier"] = "x"
    assert update_errors("Deployment", new, workload(), "apps") == [
        'spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{"app":"web", "tier":"x"}, '
        "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"]
    assert update_errors("Deployment", workload(replicas=3), workload(), "apps") == []
    sts_new = workload(serviceName="other")
    assert update_errors("StatefulSet", sts_new, workload(), "apps") == [
        "spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', "
        "'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"]


def job(**spec: Any) -> Obj:
    base: Obj = {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}
    base.update(spec)
    return {"metadata": {"name": "j", "namespace": "ns"}, "spec": base}


def test_jobs() -> None:
    assert create_errors("Job", job(), "batch") == []
    always = job(template={"spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    assert create_errors("Job", always, "batch") == [
        'spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"']
    assert "spec.parallelism: Invalid value: -1: must be greater than or equal to 0" in create_errors(
        "Job", job(parallelism=-1), "batch")
    assert create_errors("Job", job(completionMode="Sometimes"), "batch") == [
        'spec.completionMode: Unsupported value: "Sometimes": supported values: "NonIndexed", "Indexed"']
    manual = job(manualSelector=True)
    assert create_errors("Job", manual, "batch") == ["spec.selector: Required value"]


def cronjob(schedule: str, **spec: Any) -> Obj:
    base: Obj = {"schedule": schedule, "jobTemplate": {"spec": job()["spec"]}}
    base.update(spec)
    return {"metadata": {"name": "cj", "namespace": "ns"}, "spec": base}


@pytest.mark.parametrize("schedule, detail", [
    ("*/5 * * * *", None), ("@hourly", None), ("0 0 * jan mon-fri", None), ("@every 1h30m", None),
    ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
    ("61 * * * *", "end of range (61) above maximum (59): 61"),
    ("x * * * *", 'failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax'),
    ("5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"),
    ("*/0 * * * *", "step of range should be a positive number: */0"),
    ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
    ("@sometimes", "unrecognized descriptor: @sometimes"),
    ("", "empty spec string"),
])
def test_cron_schedules(schedule: str, detail: str | None) -> None:
    assert cron.parse_error(schedule) == detail


def test_cron_jobs() -> None:
    assert create_errors("CronJob", cronjob("*/5 * * * *"), "batch") == []
    assert create_errors("CronJob", cronjob("*/5 * * *"), "batch") == [
        'spec.schedule: Invalid value: "*/5 * * *": expected exactly 5 fields, found 4: [*/5 * * *]']
    assert create_errors("CronJob", cronjob("* * * * *", concurrencyPolicy="Sometimes"), "batch") == [
        'spec.concurrencyPolicy: Unsupported value: "Sometimes": supported values: "Allow", "Forbid", "Replace"']
    assert create_errors("CronJob", cronjob("* * * * *", timeZone="Mars/Base"), "batch") == [
        'spec.timeZone: Invalid value: "Mars/Base": unknown time zone Mars/Base']
    assert create_errors("CronJob", cronjob("TZ=UTC * * * * *"), "batch") == [
        'spec.schedule: Invalid value: "TZ=UTC * * * * *": cannot use TZ or CRON_TZ in schedule, use timeZone '
        "field instead"]
