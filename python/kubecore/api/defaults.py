"""Defaulting: the fields upstream fills in when a client leaves them out (pkg/apis/*/v1/defaults.go).

Applied to every create and update before validation, as upstream's decoder does. Covered so far:
pods and pod templates (in every workload kind, probes included), services, the workload kinds'
own fields (jobs and cron jobs too), secrets (stringData folded into data), volumes and claims,
storage and priority classes, RBAC bindings, network policies and HPAs.
"""

from __future__ import annotations

import base64
from typing import Any

Obj = dict[str, Any]


def _image_pull_policy(image: str) -> str:
    """Always for `:latest` or an untagged image, IfNotPresent otherwise (digests count as tags)."""
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else ""
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def _handler(h: Any) -> None:
    """SetDefaults_HTTPGetAction (probes and lifecycle hooks)."""
    if isinstance(h, dict) and isinstance(h.get("httpGet"), dict):
        h["httpGet"].setdefault("path", "/")
        h["httpGet"].setdefault("scheme", "HTTP")


def _probe(p: Any) -> None:
    if isinstance(p, dict):
        _handler(p)
        for key, value in (("timeoutSeconds", 1), ("periodSeconds", 10), ("successThreshold", 1),
                           ("failureThreshold", 3)):
            p.setdefault(key, value)


def _container(c: Obj) -> None:
    for kind in ("livenessProbe", "readinessProbe", "startupProbe"):
        _probe(c.get(kind))
    if isinstance(c.get("lifecycle"), dict):
        _handler(c["lifecycle"].get("postStart"))
        _handler(c["lifecycle"].get("preStop"))
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    if "image" in c:
        c.setdefault("imagePullPolicy", _image_pull_policy(str(c["image"])))
    c.setdefault("resources", {})
    for p in c.get("ports") or []:
        if isinstance(p, dict):
            p.setdefault("protocol", "TCP")


def pod_spec(spec: Obj) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("enableServiceLinks", True)
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or []:
            if isinstance(c, dict):
                _container(c)


def _template(spec: Obj) -> None:
    tmpl = spec.get("template")
    if isinstance(tmpl, dict) and isinstance(tmpl.get("spec"), dict):
        pod_spec(tmpl["spec"])


def _pod(obj: Obj) -> None:
    if isinstance(obj.get("spec"), dict):
        pod_spec(obj["spec"])
    status = obj.setdefault("status", {})
    if isinstance(status, dict):
        status.setdefault("phase", "Pending")


def _service(obj: Obj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if spec["sessionAffinity"] == "ClientIP" and spec.get("sessionAffinityConfig") is None:
        spec["sessionAffinityConfig"] = {"clientIP": {"timeoutSeconds": 10800}}
    if spec["type"] != "ExternalName":
        spec.setdefault("internalTrafficPolicy", "Cluster")
    if spec["type"] in ("NodePort", "LoadBalancer") or (spec["type"] == "ClusterIP" and spec.get("externalIPs")):
        spec.setdefault("externalTrafficPolicy", "Cluster")
    if spec["type"] == "LoadBalancer":
        spec.setdefault("allocateLoadBalancerNodePorts", True)
    for p in spec.get("ports") or []:
        if isinstance(p, dict):
            p.setdefault("protocol", "TCP")
            if "port" in p:
                p.setdefault("targetPort", p["port"])


def _deployment(obj: Obj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    spec.setdefault("replicas", 1)
    strategy = spec.setdefault("strategy", {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        ru = strategy.setdefault("rollingUpdate", {})
        ru.setdefault("maxUnavailable", "25%")
        ru.setdefault("maxSurge", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    _template(spec)


def _replicated(obj: Obj) -> None:
    spec = obj.get("spec")
    if isinstance(spec, dict):
        spec.setdefault("replicas", 1)
        _template(spec)


def _templated(obj: Obj) -> None:
    spec = obj.get("spec")
    if isinstance(spec, dict):
        _template(spec)


def _stateful_set(obj: Obj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    _replicated(obj)
    spec.setdefault("podManagementPolicy", "OrderedReady")
    strategy = spec.setdefault("updateStrategy", {})
    if isinstance(strategy, dict):
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            strategy.setdefault("rollingUpdate", {}).setdefault("partition", 0)
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("persistentVolumeClaimRetentionPolicy", {"whenDeleted": "Retain", "whenScaled": "Retain"})


def _daemon_set(obj: Obj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    _template(spec)
    strategy = spec.setdefault("updateStrategy", {})
    if isinstance(strategy, dict):
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            ru = strategy.setdefault("rollingUpdate", {})
            ru.setdefault("maxUnavailable", 1)
            ru.setdefault("maxSurge", 0)
    spec.setdefault("revisionHistoryLimit", 10)


def _job_spec(spec: Any) -> None:
    if not isinstance(spec, dict):
        return
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    _template(spec)


def _cron_job(obj: Obj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    spec.setdefault("concurrencyPolicy", "Allow")
    spec.setdefault("suspend", False)
    spec.setdefault("successfulJobsHistoryLimit", 3)
    spec.setdefault("failedJobsHistoryLimit", 1)
    tmpl = spec.get("jobTemplate")
    if isinstance(tmpl, dict):
        _job_spec(tmpl.get("spec"))


def _secret(obj: Obj) -> None:
    """stringData is write-only: merged into data (base64) as upstream's conversion does."""
    obj.setdefault("type", "Opaque")
    string_data = obj.pop("stringData", None)
    if isinstance(string_data, dict) and string_data:
        data = obj.get("data")
        data = data if isinstance(data, dict) else {}
        for k, v in string_data.items():
            data[k] = base64.b64encode(str(v).encode()).decode()
        obj["data"] = data


def _binding(obj: Obj) -> None:
    ref = obj.get("roleRef")
    if isinstance(ref, dict):
        ref.setdefault("apiGroup", "rbac.authorization.k8s.io")
    for subject in obj.get("subjects") or []:
        if isinstance(subject, dict) and subject.get("kind") in ("User", "Group"):
            subject.setdefault("apiGroup", "rbac.authorization.k8s.io")


def _network_policy(obj: Obj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    for rule in (spec.get("ingress") or []) + (spec.get("egress") or []):
        for port in (rule.get("ports") or []) if isinstance(rule, dict) else []:
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")
    if not spec.get("policyTypes"):
        spec["policyTypes"] = ["Ingress", "Egress"] if spec.get("egress") else ["Ingress"]


def _endpoints(obj: Obj) -> None:
    """Endpoint ports (Endpoints subsets, EndpointSlices) default to TCP."""
    groups = [ss.get("ports") for ss in obj.get("subsets") or [] if isinstance(ss, dict)] + [obj.get("ports")]
    for ports in groups:
        for port in ports if isinstance(ports, list) else []:
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")


def _set(**fields: Any) -> Any:
    def fn(obj: Obj) -> None:
        for k, v in fields.items():
            obj.setdefault(k, v)
    return fn


def _spec_set(**fields: Any) -> Any:
    def fn(obj: Obj) -> None:
        spec = obj.get("spec")
        if isinstance(spec, dict):
            for k, v in fields.items():
                spec.setdefault(k, v)
    return fn


DEFAULTERS = {
    ("", "Pod"): _pod,
    ("", "PodTemplate"): lambda o: _template(o),
    ("", "Service"): _service,
    ("", "ReplicationController"): _replicated,
    ("apps", "Deployment"): _deployment,
    ("apps", "ReplicaSet"): _replicated,
    ("apps", "StatefulSet"): _stateful_set,
    ("apps", "DaemonSet"): _daemon_set,
    ("batch", "Job"): lambda o: _job_spec(o.get("spec")),
    ("batch", "CronJob"): _cron_job,
    ("", "Secret"): _secret,
    ("", "Endpoints"): _endpoints,
    ("discovery.k8s.io", "EndpointSlice"): _endpoints,
    ("", "PersistentVolumeClaim"): _spec_set(volumeMode="Filesystem"),
    ("", "PersistentVolume"): _spec_set(volumeMode="Filesystem", persistentVolumeReclaimPolicy="Retain"),
    ("storage.k8s.io", "StorageClass"): _set(reclaimPolicy="Delete", volumeBindingMode="Immediate"),
    ("scheduling.k8s.io", "PriorityClass"): _set(preemptionPolicy="PreemptLowerPriority"),
    ("rbac.authorization.k8s.io", "RoleBinding"): _binding,
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): _binding,
    ("networking.k8s.io", "NetworkPolicy"): _network_policy,
    ("autoscaling", "HorizontalPodAutoscaler"): _spec_set(minReplicas=1),
}


def apply_defaults(group: str, kind: str, obj: Obj) -> Obj:
    """Fills in upstream's defaults in place and returns `obj`."""
    fn = DEFAULTERS.get((group, kind))
    if fn is not None:
        fn(obj)
    return obj
