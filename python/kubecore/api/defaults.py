"""Defaulting: the fields upstream fills in when a client leaves them out (pkg/apis/*/v1/defaults.go).

Applied to every create and update before validation, as upstream's decoder does. Covered so far:
pods and pod templates (in every workload kind), services, and the workload kinds' own fields.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


def _image_pull_policy(image: str) -> str:
    """Always for `:latest` or an untagged image, IfNotPresent otherwise (digests count as tags)."""
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else ""
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def _container(c: Obj) -> None:
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
    if spec["type"] != "ExternalName":
        spec.setdefault("internalTrafficPolicy", "Cluster")
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


DEFAULTERS = {
    ("", "Pod"): _pod,
    ("", "PodTemplate"): lambda o: _template(o),
    ("", "Service"): _service,
    ("", "ReplicationController"): _replicated,
    ("apps", "Deployment"): _deployment,
    ("apps", "ReplicaSet"): _replicated,
    ("apps", "StatefulSet"): _replicated,
    ("apps", "DaemonSet"): _templated,
    ("batch", "Job"): _templated,
}


def apply_defaults(group: str, kind: str, obj: Obj) -> Obj:
    """Fills in upstream's defaults in place and returns `obj`."""
    fn = DEFAULTERS.get((group, kind))
    if fn is not None:
        fn(obj)
    return obj
