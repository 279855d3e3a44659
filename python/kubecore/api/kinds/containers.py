"""Containers of a pod spec: names, images, ports, env, volume mounts, resources, probes.

Ports the container parts of pkg/apis/core/validation/validation.go (validateContainers,
validateInitContainers, validateContainerCommon and what they call) with upstream's field
paths and texts. ``volumes`` is the set of volume names that validated cleanly: a mount of any
other name is NotFound, as upstream's map of good volumes makes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubecore.api import quantity
from kubecore.api.errors import FieldError
from kubecore.api.kinds.common import (
    Errs, Obj, config_key_msgs, dicts, dns_label, enum, exactly_one, lst, m, nonneg, not_found, num, port_name_msgs,
    port_num, port_num_or_name, qty, s,
)
from kubecore.api.validation import is_dns1123_subdomain, is_qualified_name

PROTOCOLS = ("SCTP", "TCP", "UDP")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
TERMINATION_POLICIES = ("File", "FallbackToLogsOnError")
HANDLERS = ("exec", "httpGet", "tcpSocket", "grpc", "sleep")
INIT_NO_RESTART = "may not be set for init containers without restartPolicy=Always"
STANDARD_CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")
STANDARD_RESOURCES = frozenset({
    "cpu", "memory", "ephemeral-storage", "storage", "requests.cpu", "requests.memory",
    "requests.ephemeral-storage", "requests.storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage",
    "pods", "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps",
    "persistentvolumeclaims", "services.nodeports", "services.loadbalancers",
})


def containers(items: list[Any], *, volumes: set[str], grace: int | None, path: str) -> Errs:
    """validateContainers: at least one; names unique among regular containers."""
    if not items:
        return [FieldError.required(path)]
    errs: Errs = []
    names: set[str] = set()
    for i, c in enumerate(items):
        c = c if isinstance(c, dict) else {}
        p = f"{path}[{i}]"
        errs.extend(container_common(c, volumes=volumes, path=p))
        name = s(c, "name")
        if name in names:
            errs.append(FieldError.duplicate(f"{p}.name", name))
        else:
            names.add(name)
        errs.extend(_lifecycle_and_probes(c, grace, p))
        if c.get("restartPolicy") is not None:
            errs.append(FieldError.forbidden(f"{p}.restartPolicy", "may not be set for non-init containers"))
    errs.extend(host_port_conflicts(items, path))
    return errs


def init_containers(items: list[Any], regular: list[Any], *, volumes: set[str], grace: int | None,
                    path: str) -> Errs:
    """validateInitContainers: names unique across regular and init containers."""
    errs: Errs = []
    names = {s(c, "name") for c in regular if isinstance(c, dict)}
    for i, c in enumerate(items):
        c = c if isinstance(c, dict) else {}
        p = f"{path}[{i}]"
        errs.extend(container_common(c, volumes=volumes, path=p))
        restart = c.get("restartPolicy")
        if restart is not None and restart != "Always":
            errs.append(FieldError.not_supported(f"{p}.restartPolicy", restart, ["Always"]))
        name = s(c, "name")
        if name in names:
            errs.append(FieldError.duplicate(f"{p}.name", name))
        elif name:
            names.add(name)
        errs.extend(host_port_conflicts([c], path))
        if restart == "Always":
            errs.extend(_lifecycle_and_probes(c, grace, p))
        else:
            errs.extend(FieldError.forbidden(f"{p}.{k}", INIT_NO_RESTART)
                        for k in ("lifecycle", "livenessProbe", "readinessProbe", "startupProbe") if c.get(k) is not None)
    return errs


def container_common(c: Obj, *, volumes: set[str], path: str) -> Errs:
    """validateContainerCommon."""
    errs: Errs = []
    name = s(c, "name")
    errs.extend([FieldError.required(f"{path}.name")] if not name else dns_label(name, f"{path}.name"))
    if not s(c, "image"):
        errs.append(FieldError.required(f"{path}.image"))
    errs.extend(enum(s(c, "terminationMessagePolicy"), TERMINATION_POLICIES, f"{path}.terminationMessagePolicy"))
    errs.extend(ports(lst(c, "ports"), f"{path}.ports"))
    errs.extend(env(lst(c, "env"), f"{path}.env"))
    errs.extend(env_from(lst(c, "envFrom"), f"{path}.envFrom"))
    errs.extend(volume_mounts(lst(c, "volumeMounts"), volumes, f"{path}.volumeMounts"))
    errs.extend(enum(s(c, "imagePullPolicy"), PULL_POLICIES, f"{path}.imagePullPolicy"))
    errs.extend(resources(m(c, "resources"), f"{path}.resources"))
    errs.extend(_security_context(m(c, "securityContext"), f"{path}.securityContext"))
    return errs


def ports(items: list[Any], path: str) -> Errs:
    """validateContainerPorts."""
    errs: Errs = []
    names: set[str] = set()
    for i, p in enumerate(items):
        p = p if isinstance(p, dict) else {}
        ip = f"{path}[{i}]"
        name = s(p, "name")
        if name:
            msgs = port_name_msgs(name)
            if msgs:
                errs.extend(FieldError.invalid(f"{ip}.name", name, msg) for msg in msgs)
            elif name in names:
                errs.append(FieldError.duplicate(f"{ip}.name", name))
            else:
                names.add(name)
        cp = p.get("containerPort")
        errs.extend([FieldError.required(f"{ip}.containerPort")] if not cp else port_num(cp, f"{ip}.containerPort"))
        if p.get("hostPort"):
            errs.extend(port_num(p["hostPort"], f"{ip}.hostPort"))
        errs.extend(enum(s(p, "protocol"), PROTOCOLS, f"{ip}.protocol"))
    return errs


def host_port_conflicts(items: list[Any], path: str) -> Errs:
    """AccumulateUniqueHostPorts: protocol/hostIP/hostPort unique across the containers."""
    seen: set[str] = set()
    errs: Errs = []
    for ci, c in enumerate(items):
        for pi, p in dicts(c, "ports"):
            if not num(p, "hostPort"):
                continue
            key = f"{s(p, 'protocol')}/{s(p, 'hostIP')}/{p['hostPort']}"
            if key in seen:
                errs.append(FieldError.duplicate(f"{path}[{ci}].ports[{pi}].hostPort", key))
            seen.add(key)
    return errs


def env(items: list[Any], path: str) -> Errs:
    """ValidateEnv with relaxed names (the RelaxedEnvironmentVariableValidation default)."""
    errs: Errs = []
    for i, e in enumerate(items):
        e = e if isinstance(e, dict) else {}
        name = s(e, "name")
        if not name:
            errs.append(FieldError.required(f"{path}[{i}].name"))
        elif any(ord(ch) > 126 or ord(ch) < 32 or ch == "=" for ch in name):
            errs.append(FieldError.invalid(f"{path}[{i}].name", name, (
                "a valid environment variable name must consist only of printable ASCII characters other than '='")))
        errs.extend(_value_from(e, f"{path}[{i}].valueFrom"))
    return errs


def _value_from(e: Obj, path: str) -> Errs:
    vf = e.get("valueFrom")
    if not isinstance(vf, dict):
        return []
    errs: Errs = []
    sources = [k for k in ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef") if vf.get(k) is not None]
    for k in ("configMapKeyRef", "secretKeyRef"):
        if k in sources:
            errs.extend(_key_selector(m(vf, k), f"{path}.{k}"))
    if "fieldRef" in sources:
        ref = m(vf, "fieldRef")
        if not s(ref, "fieldPath"):
            errs.append(FieldError.required(f"{path}.fieldRef.fieldPath"))
    if not sources:
        errs.append(FieldError.invalid(path, "", (
            "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`")))
    elif s(e, "value"):
        errs.append(FieldError.invalid(path, "", "may not be specified when `value` is not empty"))
    elif len(sources) > 1:
        errs.append(FieldError.invalid(path, "", "may not have more than one field specified at a time"))
    return errs


def _key_selector(ref: Obj, path: str) -> Errs:
    errs = [FieldError.invalid(f"{path}.name", s(ref, "name"), msg) for msg in is_dns1123_subdomain(s(ref, "name"))]
    key = s(ref, "key")
    if not key:
        errs.append(FieldError.required(f"{path}.key"))
    else:
        errs.extend(FieldError.invalid(f"{path}.key", key, msg) for msg in config_key_msgs(key))
    return errs


def env_from(items: list[Any], path: str) -> Errs:
    errs: Errs = []
    for i, e in enumerate(items):
        e = e if isinstance(e, dict) else {}
        sources = [k for k in ("configMapRef", "secretRef") if e.get(k) is not None]
        for k in sources:
            if not s(m(e, k), "name"):
                errs.append(FieldError.required(f"{path}[{i}].{k}.name"))
        if not sources:
            errs.append(FieldError.invalid(path, "", "must specify one of: `configMapRef` or `secretRef`"))
        elif len(sources) > 1:
            errs.append(FieldError.invalid(path, "", "may not have more than one field specified at a time"))
    return errs


def volume_mounts(items: list[Any], volumes: set[str], path: str) -> Errs:
    """ValidateVolumeMounts (subPath errors carry upstream's path without the index)."""
    errs: Errs = []
    mount_points: set[str] = set()
    for i, vm in enumerate(items):
        vm = vm if isinstance(vm, dict) else {}
        ip = f"{path}[{i}]"
        name, mount_path = s(vm, "name"), s(vm, "mountPath")
        if not name:
            errs.append(FieldError.required(f"{ip}.name"))
        if name not in volumes:
            errs.append(not_found(f"{ip}.name", name))
        if not mount_path:
            errs.append(FieldError.required(f"{ip}.mountPath"))
        if mount_path in mount_points:
            errs.append(FieldError.invalid(f"{ip}.mountPath", mount_path, "must be unique"))
        mount_points.add(mount_path)
        sub = s(vm, "subPath")
        if sub:
            errs.extend(local_descending_path(sub, f"{path}.subPath"))
        if s(vm, "subPathExpr") and sub:
            errs.append(FieldError.invalid(f"{ip}.subPathExpr", s(vm, "subPathExpr"),
                                           "subPathExpr and subPath are mutually exclusive"))
        prop = vm.get("mountPropagation")
        if prop is not None and prop not in ("Bidirectional", "HostToContainer", "None"):
            errs.append(FieldError.not_supported(f"{path}.mountPropagation", prop,
                                                 ["Bidirectional", "HostToContainer", "None"]))
    return errs


def no_backsteps(target: str, path: str) -> Errs:
    """validatePathNoBacksteps."""
    if ".." in target.replace("\\", "/").split("/"):
        return [FieldError.invalid(path, target, "must not contain '..'")]
    return []


def local_descending_path(target: str, path: str) -> Errs:
    """validateLocalDescendingPath: relative, no '..' elements."""
    errs: Errs = []
    if target.startswith("/"):
        errs.append(FieldError.invalid(path, target, "must be a relative path"))
    return errs + no_backsteps(target, path)


# ---- resources ---------------------------------------------------------------------------------------


def _is_native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _is_hugepages(name: str) -> bool:
    return name.startswith("hugepages-")


def overcommit_allowed(name: str) -> bool:
    return _is_native(name) and not _is_hugepages(name)


def resource_name(name: str, path: str) -> Errs:
    """validateResourceName."""
    errs = [FieldError.invalid(path, name, msg) for msg in is_qualified_name(name)]
    if errs:
        return errs
    if "/" not in name and name not in STANDARD_RESOURCES and not _is_hugepages(name):
        errs.append(FieldError.invalid(path, name, "must be a standard resource type or fully qualified"))
    return errs


def container_resource_name(name: str, path: str) -> Errs:
    """validateContainerResourceName."""
    errs = resource_name(name, path)
    if "/" not in name:
        if name not in STANDARD_CONTAINER_RESOURCES and not _is_hugepages(name):
            errs.append(FieldError.invalid(path, name, "must be a standard resource for containers"))
    elif not _is_native(name) and (name.startswith("requests.") or is_qualified_name("requests." + name)):
        errs.append(FieldError.invalid(path, name, "doesn't follow extended resource name standard"))
    return errs


def quantity_value(name: str, q: quantity.Quantity, path: str) -> Errs:
    """ValidateResourceQuantityValue."""
    errs: Errs = []
    if q.sign() < 0:
        errs.append(FieldError.invalid(path, q.canonical(), "must be greater than or equal to 0"))
    if not _is_native(name) and q.milli_value() % 1000:
        errs.append(FieldError.invalid(path, q.canonical(), "must be an integer"))
    return errs


def resources(res: Mapping[str, Any], path: str) -> Errs:
    """validateResourceRequirements for a container."""
    errs: Errs = []
    limits = {k: qty(v) for k, v in m(res, "limits").items()}
    for name, q in limits.items():
        errs.extend(container_resource_name(name, f"{path}.limits[{name}]"))
        errs.extend(quantity_value(name, q, f"{path}.limits[{name}]"))
    for name, raw in m(res, "requests").items():
        q, rp = qty(raw), f"{path}.requests[{name}]"
        errs.extend(container_resource_name(name, rp))
        errs.extend(quantity_value(name, q, rp))
        limit = limits.get(name)
        if limit is not None:
            if q.cmp(limit) != 0 and not overcommit_allowed(name):
                errs.append(FieldError.invalid(f"{path}.requests", q.canonical(),
                                               f"must be equal to {name} limit of {limit.canonical()}"))
            elif q.cmp(limit) > 0:
                errs.append(FieldError.invalid(f"{path}.requests", q.canonical(),
                                               f"must be less than or equal to {name} limit of {limit.canonical()}"))
        elif not overcommit_allowed(name):
            errs.append(FieldError.required(f"{path}.limits", "Limit must be set for non overcommitable resources"))
    return errs


# ---- probes, lifecycle, security context -------------------------------------------------------------


def _lifecycle_and_probes(c: Obj, grace: int | None, path: str) -> Errs:
    errs: Errs = []
    life = c.get("lifecycle")
    if isinstance(life, dict):
        for hook in ("postStart", "preStop"):
            if isinstance(life.get(hook), dict):
                errs.extend(_handler(life[hook], f"{path}.lifecycle.{hook}"))
    for kind in ("livenessProbe", "readinessProbe", "startupProbe"):
        probe = c.get(kind)
        if isinstance(probe, dict):
            errs.extend(_probe(probe, kind, f"{path}.{kind}"))
    return errs


def _probe(probe: Obj, kind: str, path: str) -> Errs:
    errs = _handler(probe, path)
    for key in ("initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold", "failureThreshold"):
        errs.extend(nonneg(probe, key, path))
    success = num(probe, "successThreshold")
    if kind != "readinessProbe" and success is not None and success != 1:
        errs.append(FieldError.invalid(f"{path}.successThreshold", success, "must be 1"))
    grace = num(probe, "terminationGracePeriodSeconds")
    if grace is not None:
        if kind == "readinessProbe":
            errs.append(FieldError.invalid(f"{path}.terminationGracePeriodSeconds", grace,
                                           "must not be set for readinessProbes"))
        elif grace <= 0:
            errs.append(FieldError.invalid(f"{path}.terminationGracePeriodSeconds", grace, "must be greater than 0"))
    return errs


def _handler(h: Obj, path: str) -> Errs:
    """validateHandler: exactly one action."""
    return exactly_one(h, [(kind, kind) for kind in HANDLERS], path, what="handler type", check=_action)


def _action(kind: str, action: Obj, path: str) -> Errs:
    if kind == "exec":
        return [] if lst(action, "command") else [FieldError.required(f"{path}.command")]
    if kind == "httpGet":
        errs = [] if s(action, "path") else [FieldError.required(f"{path}.path")]
        errs.extend(port_num_or_name(action.get("port"), f"{path}.port"))
        errs.extend(enum(s(action, "scheme"), ("HTTP", "HTTPS"), f"{path}.scheme", required=False))
        return errs
    if kind in ("tcpSocket", "grpc"):
        return port_num_or_name(action.get("port"), f"{path}.port")
    return []


def _security_context(sc: Obj, path: str) -> Errs:
    errs: Errs = []
    for key in ("runAsUser", "runAsGroup"):
        v = num(sc, key)
        if v is not None and not 0 <= v <= 0xFFFFFFFF:
            errs.append(FieldError.invalid(f"{path}.{key}", v, "must be between 0 and 4294967295, inclusive"))
    pm = sc.get("procMount")
    if pm is not None and pm not in ("Default", "Unmasked"):
        errs.append(FieldError.not_supported(f"{path}.procMount", pm, ["Default", "Unmasked"]))
    return errs
