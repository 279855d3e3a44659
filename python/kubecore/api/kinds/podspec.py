"""PodSpec and PodTemplateSpec validation: volumes, scheduling fields, policies, tolerations.

Ports ValidatePodSpec / ValidatePodTemplateSpec / ValidateVolumes / ValidateTolerations of
pkg/apis/core/validation/validation.go. ``pod_spec`` is shared by pods and every workload
template (deployments, jobs, ...); pod-only rules live in pods.py.
"""

from __future__ import annotations

from typing import Any

from kubecore.api.errors import FieldError
from kubecore.api.kinds.common import (
    Errs, Obj, dicts, dns_label, dns_subdomain, enum, exactly_one, invalid_raw, label_selector, lst, m, num, qty,
    qualified_name, s, valid_ip,
)
from kubecore.api.kinds.containers import containers, init_containers, local_descending_path, no_backsteps
from kubecore.api.validation import is_label_value, validate_annotations, validate_labels

RESTART_POLICIES = ("Always", "OnFailure", "Never")
DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
FILE_MODE = "must be a number between 0 and 0777 (octal), both inclusive"
MAX_INT32 = 2147483647

# Volume sources in the order upstream checks them, with the path name its "more than 1" error uses.
VOLUME_SOURCES = (
    ("emptyDir", "emptyDir"), ("hostPath", "hostPath"), ("gitRepo", "gitRepo"),
    ("gcePersistentDisk", "gcePersistentDisk"), ("awsElasticBlockStore", "awsElasticBlockStore"),
    ("secret", "secret"), ("nfs", "nfs"), ("iscsi", "iscsi"), ("glusterfs", "glusterfs"), ("flocker", "flocker"),
    ("persistentVolumeClaim", "persistentVolumeClaim"), ("rbd", "rbd"), ("cinder", "cinder"),
    ("cephfs", "cephFS"), ("quobyte", "quobyte"), ("downwardAPI", "downwarAPI"), ("fc", "fc"),
    ("flexVolume", "flexVolume"), ("configMap", "configMap"), ("azureFile", "azureFile"),
    ("vsphereVolume", "vsphereVolume"), ("photonPersistentDisk", "photonPersistentDisk"),
    ("portworxVolume", "portworxVolume"), ("azureDisk", "azureDisk"), ("storageos", "storageos"),
    ("projected", "projected"), ("scaleIO", "scaleIO"), ("csi", "csi"), ("ephemeral", "ephemeral"),
    ("image", "image"),
)
HOST_PATH_TYPES = ("", "BlockDevice", "CharDevice", "Directory", "DirectoryOrCreate", "File", "FileOrCreate",
                   "Socket")


def pod_spec(spec: Obj, path: str) -> Errs:
    """ValidatePodSpec."""
    errs: Errs = []
    if num(spec, "terminationGracePeriodSeconds") is None:
        errs.append(FieldError.required(f"{path}.terminationGracePeriodSeconds"))
    grace = num(spec, "terminationGracePeriodSeconds")
    good_volumes, vol_errs = volumes(lst(spec, "volumes"), f"{path}.volumes")
    errs.extend(vol_errs)
    errs.extend(containers(lst(spec, "containers"), volumes=good_volumes, grace=grace, path=f"{path}.containers"))
    errs.extend(init_containers(lst(spec, "initContainers"), lst(spec, "containers"), volumes=good_volumes,
                                grace=grace, path=f"{path}.initContainers"))
    errs.extend(_host_network_ports(spec, path))
    errs.extend(enum(s(spec, "restartPolicy"), RESTART_POLICIES, f"{path}.restartPolicy"))
    errs.extend(enum(s(spec, "dnsPolicy"), DNS_POLICIES, f"{path}.dnsPolicy"))
    errs.extend(validate_labels(spec.get("nodeSelector"), f"{path}.nodeSelector"))
    errs.extend(_pod_security_context(m(spec, "securityContext"), f"{path}.securityContext"))
    errs.extend(_image_pull_secrets(lst(spec, "imagePullSecrets"), f"{path}.imagePullSecrets"))
    errs.extend(affinity(m(spec, "affinity"), f"{path}.affinity"))
    errs.extend(_dns_config(spec, f"{path}.dnsConfig"))
    errs.extend(_topology_spread(lst(spec, "topologySpreadConstraints"), f"{path}.topologySpreadConstraints"))
    errs.extend(_names(spec, path))
    deadline = num(spec, "activeDeadlineSeconds")
    if deadline is not None and not 1 <= deadline <= MAX_INT32:
        errs.append(FieldError.invalid(f"{path}.activeDeadlineSeconds", deadline,
                                       f"must be between 1 and {MAX_INT32}, inclusive"))
    errs.extend(tolerations(lst(spec, "tolerations"), f"{path}.tolerations"))
    for i, alias in dicts(spec, "hostAliases"):
        errs.extend(valid_ip(s(alias, "ip"), f"{path}.hostAliases[{i}].ip"))
    if spec.get("preemptionPolicy") is not None:
        errs.extend(enum(s(spec, "preemptionPolicy"), ("PreemptLowerPriority", "Never"), f"{path}.preemptionPolicy"))
    if isinstance(spec.get("os"), dict):
        name = s(m(spec, "os"), "name")
        if not name:
            errs.append(FieldError.required(f"{path}.os.name", "cannot be empty"))
        elif name not in ("linux", "windows"):
            errs.append(FieldError.not_supported(f"{path}.os", name, ["linux", "windows"]))
    return errs


def _names(spec: Obj, path: str) -> Errs:
    errs: Errs = []
    for key, check in (("serviceAccountName", dns_subdomain), ("nodeName", dns_subdomain),
                       ("hostname", dns_label), ("subdomain", dns_label), ("priorityClassName", dns_subdomain)):
        if s(spec, key):
            errs.extend(check(s(spec, key), f"{path}.{key}"))
    return errs


def pod_template(tmpl: Any, path: str) -> Errs:
    """ValidatePodTemplateSpec (labels are reported at <path>.labels, as upstream does)."""
    tmpl = tmpl if isinstance(tmpl, dict) else {}
    meta = m(tmpl, "metadata")
    errs = validate_labels(meta.get("labels"), f"{path}.labels")
    errs.extend(validate_annotations(meta.get("annotations"), f"{path}.annotations"))
    spec = m(tmpl, "spec")
    errs.extend(pod_spec(spec, f"{path}.spec"))
    if lst(spec, "ephemeralContainers"):
        errs.append(FieldError.forbidden(f"{path}.spec.ephemeralContainers",
                                         "ephemeral containers not allowed in pod template"))
    return errs


# ---- volumes -------------------------------------------------------------------------------------------


def volumes(items: list[Any], path: str) -> tuple[set[str], Errs]:
    """ValidateVolumes: (names of volumes without errors, errors)."""
    good: set[str] = set()
    seen: set[str] = set()
    errs: Errs = []
    for i, vol in enumerate(items):
        vol = vol if isinstance(vol, dict) else {}
        ip, name = f"{path}[{i}]", s(vol, "name")
        el = _volume_source(vol, ip)
        el.extend([FieldError.required(f"{ip}.name")] if not name else dns_label(name, f"{ip}.name"))
        if name in seen:
            el.append(FieldError.duplicate(f"{ip}.name", name))
        seen.add(name)
        if el:
            errs.extend(el)
        else:
            good.add(name)
    return good, errs


def _volume_source(vol: Obj, path: str) -> Errs:
    return exactly_one(vol, VOLUME_SOURCES, path, what="volume type", check=_source_rules)


def _required(src: Obj, keys: tuple[str, ...], path: str) -> Errs:
    return [FieldError.required(f"{path}.{k}") for k in keys if not src.get(k)]


def _source_rules(key: str, src: Obj, path: str) -> Errs:
    if key == "emptyDir":
        if src.get("sizeLimit") is not None and qty(src["sizeLimit"]).sign() < 0:
            return [FieldError.forbidden(f"{path}.sizeLimit", "SizeLimit field must be a valid resource quantity")]
        return []
    if key == "hostPath":
        if not s(src, "path"):
            return [FieldError.required(f"{path}.path")]
        errs = no_backsteps(s(src, "path"), f"{path}.path")
        if src.get("type") is not None and src["type"] not in HOST_PATH_TYPES:
            errs.append(FieldError.not_supported(f"{path}.type", src["type"], HOST_PATH_TYPES))
        return errs
    if key in ("secret", "configMap"):
        errs = _required(src, ("secretName",) if key == "secret" else ("name",), path)
        return errs + _mode(src, "defaultMode", path) + _items(lst(src, "items"), f"{path}.items")
    if key == "persistentVolumeClaim":
        return _required(src, ("claimName",), path)
    if key == "nfs":
        errs = _required(src, ("server", "path"), path)
        if not s(src, "path").startswith("/"):
            errs.append(FieldError.invalid(f"{path}.path", s(src, "path"), "must be an absolute path"))
        return errs
    if key in ("csi", "flexVolume"):
        return _required(src, ("driver",), path)
    if key == "ephemeral":
        return _required(src, ("volumeClaimTemplate",), path)
    if key in ("projected", "downwardAPI"):
        return _mode(src, "defaultMode", path)
    return []


def _mode(src: Obj, key: str, path: str) -> Errs:
    mode = num(src, key)
    if mode is not None and not 0 <= mode <= 0o777:
        return [FieldError.invalid(f"{path}.{key}", mode, FILE_MODE)]
    return []


def _items(items: list[Any], path: str) -> Errs:
    """validateKeyToPath."""
    errs: Errs = []
    for i, kp in enumerate(items):
        kp = kp if isinstance(kp, dict) else {}
        ip = f"{path}[{i}]"
        errs.extend(_required(kp, ("key", "path"), ip))
        target = s(kp, "path")
        errs.extend(local_descending_path(target, f"{ip}.path"))
        if target.startswith("..") and not target.startswith("../"):
            errs.append(FieldError.invalid(f"{ip}.path", target, "must not start with '..'"))
        errs.extend(_mode(kp, "mode", ip))
    return errs


# ---- scheduling ----------------------------------------------------------------------------------------


def tolerations(items: list[Any], path: str) -> Errs:
    """ValidateTolerations."""
    errs: Errs = []
    for i, t in enumerate(items):
        t = t if isinstance(t, dict) else {}
        ip, key, op, value, effect = f"{path}[{i}]", s(t, "key"), s(t, "operator"), s(t, "value"), s(t, "effect")
        if key:
            errs.extend(qualified_name(key, f"{ip}.key"))
        if not key and op != "Exists":
            errs.append(FieldError.invalid(f"{ip}.operator", op, (
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"")))
        if t.get("tolerationSeconds") is not None and effect != "NoExecute":
            errs.append(FieldError.invalid(f"{ip}.effect", effect,
                                           "effect must be 'NoExecute' when `tolerationSeconds` is set"))
        if op in ("Equal", ""):
            msgs = is_label_value(value)
            if msgs:
                errs.append(FieldError.invalid(f"{ip}.operator", value, ";".join(msgs)))
        elif op == "Exists":
            if value:
                errs.append(FieldError.invalid(f"{ip}.operator", value, "value must be empty when `operator` is 'Exists'"))
        else:
            errs.append(FieldError.not_supported(f"{ip}.operator", op, ["Equal", "Exists"]))
        if effect:
            errs.extend(enum(effect, TAINT_EFFECTS, f"{ip}.effect"))
    return errs


def affinity(aff: Obj, path: str) -> Errs:
    errs: Errs = []
    node = m(aff, "nodeAffinity")
    required = node.get("requiredDuringSchedulingIgnoredDuringExecution")
    if isinstance(required, dict):
        errs.extend(node_selector(required, f"{path}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"))
    pref_path = f"{path}.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
    for i, term in dicts(node, "preferredDuringSchedulingIgnoredDuringExecution"):
        errs.extend(_weight(term, f"{pref_path}[{i}]"))
        errs.extend(_selector_term(m(term, "preference"), f"{pref_path}[{i}].preference", strict=False))
    for kind in ("podAffinity", "podAntiAffinity"):
        pa, kp = m(aff, kind), f"{path}.{kind}"
        for i, term in dicts(pa, "requiredDuringSchedulingIgnoredDuringExecution"):
            errs.extend(_pod_affinity_term(term, f"{kp}.requiredDuringSchedulingIgnoredDuringExecution[{i}]"))
        for i, wt in dicts(pa, "preferredDuringSchedulingIgnoredDuringExecution"):
            wp = f"{kp}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
            errs.extend(_weight(wt, wp))
            errs.extend(_pod_affinity_term(m(wt, "podAffinityTerm"), f"{wp}.podAffinityTerm"))
    return errs


def _weight(term: Obj, path: str) -> Errs:
    w = num(term, "weight") or 0
    return [] if 0 < w <= 100 else [FieldError.invalid(f"{path}.weight", w, "must be in the range 1-100")]


def _pod_affinity_term(term: Obj, path: str) -> Errs:
    errs = label_selector(term.get("labelSelector"), f"{path}.labelSelector")
    errs.extend(label_selector(term.get("namespaceSelector"), f"{path}.namespaceSelector"))
    for ns in lst(term, "namespaces"):
        errs.extend(dns_label(str(ns), f"{path}.namespace"))
    topo = s(term, "topologyKey")
    if not topo:
        errs.append(FieldError.required(f"{path}.topologyKey", "can not be empty"))
    return errs + qualified_name(topo, f"{path}.topologyKey")


def node_selector(sel: Obj, path: str) -> Errs:
    """ValidateNodeSelector."""
    terms = lst(sel, "nodeSelectorTerms")
    if not terms:
        return [FieldError.required(f"{path}.nodeSelectorTerms", "must have at least one node selector term")]
    errs: Errs = []
    for i, term in enumerate(terms):
        errs.extend(_selector_term(term if isinstance(term, dict) else {}, f"{path}.nodeSelectorTerms[{i}]",
                                   strict=True))
    return errs


def _selector_term(term: Obj, path: str, *, strict: bool) -> Errs:
    errs: Errs = []
    for j, req in dicts(term, "matchExpressions"):
        rp, op, values = f"{path}.matchExpressions[{j}]", s(req, "operator"), lst(req, "values")
        if op in ("In", "NotIn"):
            if not values:
                errs.append(FieldError.required(f"{rp}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
        elif op in ("Exists", "DoesNotExist"):
            if values:
                errs.append(FieldError.forbidden(
                    f"{rp}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
        elif op in ("Gt", "Lt"):
            if len(values) != 1:
                errs.append(FieldError.required(
                    f"{rp}.values", "must be specified single value when `operator` is 'Lt' or 'Gt'"))
        else:
            errs.append(FieldError.invalid(f"{rp}.operator", op, "not a valid selector operator"))
        errs.extend(qualified_name(s(req, "key"), f"{rp}.key"))
        if strict:
            for k, v in enumerate(values):
                errs.extend(FieldError.invalid(f"{rp}.values[{k}]", v, msg) for msg in is_label_value(str(v)))
    return errs


def _topology_spread(items: list[Any], path: str) -> Errs:
    errs: Errs = []
    seen: set[tuple[str, str]] = set()
    for i, c in enumerate(items):
        c = c if isinstance(c, dict) else {}
        ip = f"{path}[{i}]"
        skew = num(c, "maxSkew") or 0
        if skew <= 0:
            errs.append(FieldError.invalid(f"{ip}.maxSkew", skew, "must be greater than zero"))
        if not s(c, "topologyKey"):
            errs.append(FieldError.required(f"{ip}.topologyKey", "can not be empty"))
        when = s(c, "whenUnsatisfiable")
        if when not in ("DoNotSchedule", "ScheduleAnyway"):
            errs.append(FieldError.not_supported(f"{ip}.whenUnsatisfiable", when, ["DoNotSchedule", "ScheduleAnyway"]))
        pair = (s(c, "topologyKey"), when)
        if pair in seen:
            errs.append(FieldError.duplicate(f"{ip}.{{topologyKey, whenUnsatisfiable}}", f"{{{pair[0]}, {pair[1]}}}"))
        seen.add(pair)
        errs.extend(label_selector(c.get("labelSelector"), f"{ip}.labelSelector"))
    return errs


def _dns_config(spec: Obj, path: str) -> Errs:
    cfg = spec.get("dnsConfig")
    if s(spec, "dnsPolicy") == "None":
        if not isinstance(cfg, dict):
            return [FieldError.required(path, "must provide `dnsConfig` when `dnsPolicy` is None")]
        if not lst(cfg, "nameservers"):
            return [FieldError.required(f"{path}.nameservers",
                                        "must provide at least one DNS nameserver when `dnsPolicy` is None")]
    if not isinstance(cfg, dict):
        return []
    errs: Errs = []
    servers = lst(cfg, "nameservers")
    if len(servers) > 3:
        errs.append(invalid_raw(f"{path}.nameservers", "[]string{" + ", ".join(f'"{x}"' for x in servers) + "}",
                                "must not have more than 3 nameservers"))
    for i, ns in enumerate(servers):
        errs.extend(valid_ip(str(ns), f"{path}.nameservers[{i}]"))
    return errs


def _host_network_ports(spec: Obj, path: str) -> Errs:
    """In a template hostPort may be 0 (pods get it defaulted to containerPort) or equal it."""
    if spec.get("hostNetwork") is not True:
        return []
    errs: Errs = []
    for i, c in dicts(spec, "containers"):
        for j, p in dicts(c, "ports"):
            hp, cp = num(p, "hostPort") or 0, num(p, "containerPort") or 0
            if hp != 0 and hp != cp:
                errs.append(FieldError.invalid(f"{path}.containers[{i}].ports[{j}].hostPort", hp,
                                               "must match `containerPort` when `hostNetwork` is true"))
    return errs


def _pod_security_context(sc: Obj, path: str) -> Errs:
    errs: Errs = []
    for key in ("runAsUser", "runAsGroup", "fsGroup"):
        v = num(sc, key)
        if v is not None and not 0 <= v <= 0xFFFFFFFF:
            errs.append(FieldError.invalid(f"{path}.{key}", v, "must be between 0 and 4294967295, inclusive"))
    policy = sc.get("fsGroupChangePolicy")
    if policy is not None and policy not in ("Always", "OnRootMismatch"):
        errs.append(FieldError.not_supported(f"{path}.fsGroupChangePolicy", policy, ["Always", "OnRootMismatch"]))
    return errs


def _image_pull_secrets(items: list[Any], path: str) -> Errs:
    errs: Errs = []
    for i, ref in enumerate(items):
        if isinstance(ref, dict) and set(ref) - {"name"}:
            errs.append(invalid_raw(f"{path}[{i}]", f'core.LocalObjectReference{{Name:"{s(ref, "name")}"}}',
                                    "only name may be set"))
    return errs
