"""Nodes, Endpoints, LimitRanges and ResourceQuotas (core/v1).

ValidateNode(Update) (taints, podCIDRs, status quantities), ValidateEndpoints, ValidateLimitRange
and ValidateResourceQuota(Update) with upstream's texts.
"""

from __future__ import annotations

from kubecore.api import quantity
from kubecore.api.errors import FieldError
from kubecore.api.kinds.common import (
    Errs, Obj, dicts, dns_label, dns_subdomain, duplicate_raw, enum, go_strings, invalid_raw, lst, m, port_num, qty,
    qualified_name, s, valid_cidr, valid_ip,
)
from kubecore.api.kinds.containers import (
    PROTOCOLS, container_resource_name, overcommit_allowed, quantity_value, resource_name,
)
from kubecore.api.kinds.podspec import TAINT_EFFECTS
from kubecore.api.validation import is_label_value

QUOTA_SCOPES = ("Terminating", "NotTerminating", "BestEffort", "NotBestEffort", "PriorityClass",
                "CrossNamespacePodAffinity", "VolumeAttributesClass")
STANDARD_QUOTA = frozenset({
    "pods", "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps",
    "persistentvolumeclaims", "services.nodeports", "services.loadbalancers", "cpu", "memory",
    "ephemeral-storage", "requests.cpu", "requests.memory", "requests.ephemeral-storage", "requests.storage",
    "limits.cpu", "limits.memory", "limits.ephemeral-storage",
})
LIMIT_TYPES = ("Pod", "Container", "PersistentVolumeClaim")
NODE_CIDR_CHANGE = "node updates may not change podCIDR except from \"\" to valid"


def node(obj: Obj) -> Errs:
    """ValidateNode."""
    spec = m(obj, "spec")
    errs = taints(lst(spec, "taints"), "metadata.taints")
    errs.extend(_node_resources(m(obj, "status")))
    cidrs = lst(spec, "podCIDRs")
    for i, cidr in enumerate(cidrs):
        errs.extend(valid_cidr(str(cidr), f"spec.podCIDRs[{i}]"))
    if len(cidrs) > 2:
        errs.append(invalid_raw("spec.podCIDRs", go_strings(cidrs), "may specify no more than one CIDR for each IP family"))
    for i, cidr in enumerate(cidrs):
        if cidr in cidrs[:i]:
            errs.append(FieldError.duplicate(f"spec.podCIDRs[{i}]", cidr))
    return errs


def taints(items: list[object], path: str) -> Errs:
    """validateNodeTaints: key, value, effect; unique by key and effect."""
    errs: Errs = []
    seen: set[tuple[str, str]] = set()
    for i, t in enumerate(items):
        t = t if isinstance(t, dict) else {}
        ip, key, effect = f"{path}[{i}]", s(t, "key"), s(t, "effect")
        errs.extend(qualified_name(key, f"{ip}.key"))
        msgs = is_label_value(s(t, "value"))
        if msgs:
            errs.append(FieldError.invalid(f"{ip}.value", s(t, "value"), ";".join(msgs)))
        errs.extend(enum(effect, TAINT_EFFECTS, f"{ip}.effect"))
        if (key, effect) in seen:
            rendered = f'core.Taint{{Key:"{key}", Value:"{s(t, "value")}", Effect:"{effect}", TimeAdded:<nil>}}'
            err = duplicate_raw(ip, rendered)
            err.body += ": taints must be unique by key and effect pair"
            errs.append(err)
            continue
        seen.add((key, effect))
    return errs


def _node_resources(status: Obj) -> Errs:
    errs: Errs = []
    for section in ("capacity", "allocatable"):
        for name, raw in m(status, section).items():
            errs.extend(quantity_value(name, qty(raw), f"status.{section}.{name}"))
    return errs


def node_update(new: Obj, old: Obj) -> Errs:
    """ValidateNodeUpdate: podCIDRs and providerID may only be set once."""
    spec, old_spec = m(new, "spec"), m(old, "spec")
    errs = taints(lst(spec, "taints"), "metadata.taints")
    errs.extend(_node_resources(m(new, "status")))
    old_cidrs = lst(old_spec, "podCIDRs")
    if old_cidrs and old_cidrs != lst(spec, "podCIDRs"):
        errs.append(FieldError.forbidden("spec.podCIDRs", NODE_CIDR_CHANGE))
    if s(old_spec, "providerID") and s(old_spec, "providerID") != s(spec, "providerID"):
        errs.append(FieldError.forbidden("spec.providerID", "node updates may not change providerID except from \"\" to valid"))
    if spec.get("externalID") != old_spec.get("externalID"):
        errs.append(FieldError.forbidden("spec.externalID", "may not be updated"))
    return errs


def endpoints(obj: Obj) -> Errs:
    """ValidateEndpoints."""
    errs: Errs = []
    for i, ss in dicts(obj, "subsets"):
        ip = f"subsets[{i}]"
        if not lst(ss, "addresses") and not lst(ss, "notReadyAddresses"):
            errs.append(FieldError.required(ip, "must specify `addresses` or `notReadyAddresses`"))
        for key in ("addresses", "notReadyAddresses"):
            for j, addr in dicts(ss, key):
                errs.extend(_endpoint_address(addr, f"{ip}.{key}[{j}]"))
        ports = lst(ss, "ports")
        for j, port in dicts(ss, "ports"):
            errs.extend(_endpoint_port(port, len(ports) > 1, f"{ip}.ports[{j}]"))
    return errs


def _endpoint_address(addr: Obj, path: str) -> Errs:
    errs = valid_ip(s(addr, "ip"), f"{path}.ip")
    if s(addr, "hostname"):
        errs.extend(dns_label(s(addr, "hostname"), f"{path}.hostname"))
    if addr.get("nodeName") is not None:
        errs.extend(dns_subdomain(s(addr, "nodeName"), f"{path}.nodeName"))
    if not errs:
        errs.extend(non_special_ip(s(addr, "ip"), f"{path}.ip"))
    return errs


def non_special_ip(value: str, path: str) -> Errs:
    """ValidateNonSpecialIP."""
    import ipaddress
    try:
        ip = ipaddress.ip_address(value)
    except ValueError:
        return [FieldError.invalid(path, value, "must be a valid IP address")]
    errs: Errs = []
    if ip.is_unspecified:
        errs.append(FieldError.invalid(path, value, f"may not be unspecified ({value})"))
    if ip.is_loopback:
        errs.append(FieldError.invalid(path, value, "may not be in the loopback range (127.0.0.0/8, ::1/128)"))
    if ip.is_link_local and not ip.is_multicast:
        errs.append(FieldError.invalid(path, value, "may not be in the link-local range (169.254.0.0/16, fe80::/10)"))
    link_local_mc = ipaddress.ip_network("224.0.0.0/24" if ip.version == 4 else "ff02::/16")
    if ip in link_local_mc:
        errs.append(FieldError.invalid(path, value,
                                       "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"))
    return errs


def _endpoint_port(port: Obj, require_name: bool, path: str) -> Errs:
    errs: Errs = []
    name = s(port, "name")
    if require_name and not name:
        errs.append(FieldError.required(f"{path}.name"))
    elif name:
        errs.extend(dns_label(name, f"{path}.name"))
    errs.extend(port_num(port.get("port", 0), f"{path}.port"))
    errs.extend(enum(s(port, "protocol"), PROTOCOLS, f"{path}.protocol"))
    return errs


def limit_range(obj: Obj) -> Errs:
    """ValidateLimitRange (names, types, and the min <= default <= max orderings)."""
    errs: Errs = []
    seen: set[str] = set()
    for i, item in dicts(m(obj, "spec"), "limits"):
        ip, kind = f"spec.limits[{i}]", s(item, "type")
        errs.extend(_limit_type(kind, f"{ip}.type"))
        if kind in seen:
            errs.append(FieldError.duplicate(f"{ip}.type", kind))
        seen.add(kind)
        errs.extend(_limit_item(item, kind, ip))
    return errs


def _limit_type(kind: str, path: str) -> Errs:
    errs = qualified_name(kind, path)
    if not errs and "/" not in kind and kind not in LIMIT_TYPES:
        errs.append(FieldError.invalid(path, kind, "must be a standard limit type or fully qualified"))
    return errs


def _limit_item(item: Obj, kind: str, path: str) -> Errs:
    errs: Errs = []
    sections: dict[str, dict[str, quantity.Quantity]] = {}
    for section in ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio"):
        if kind == "Pod" and section in ("default", "defaultRequest"):
            if m(item, section):
                errs.append(FieldError.forbidden(f"{path}.{section}", "may not be specified when `type` is 'Pod'"))
            continue
        sections[section] = {}
        for name, raw in m(item, section).items():
            check = container_resource_name if kind in ("Pod", "Container") else resource_name
            errs.extend(check(name, f"{path}.{section}[{name}]"))
            sections[section][name] = qty(raw)
    if kind == "PersistentVolumeClaim" and "storage" not in sections["min"] and "storage" not in sections["max"]:
        errs.append(FieldError.required(f"{path}.limits", "either minimum or maximum storage value is required, but "
                                                          "neither was provided"))
    keys = {k for sec in sections.values() for k in sec}
    for k in sorted(keys):
        errs.extend(_limit_orderings(sections, k, path))
    return errs


def _limit_orderings(sections: dict[str, dict[str, quantity.Quantity]], k: str, path: str) -> Errs:
    lo, hi = sections["min"].get(k), sections["max"].get(k)
    dflt, req = sections.get("default", {}).get(k), sections.get("defaultRequest", {}).get(k)
    ratio = sections["maxLimitRequestRatio"].get(k)
    errs: Errs = []
    if lo and hi and lo.cmp(hi) > 0:
        errs.append(FieldError.invalid(f"{path}.min[{k}]", lo.canonical(),
                                       f"min value {lo} is greater than max value {hi}"))
    if req and lo and lo.cmp(req) > 0:
        errs.append(FieldError.invalid(f"{path}.defaultRequest[{k}]", req.canonical(),
                                       f"min value {lo} is greater than default request value {req}"))
    if req and hi and req.cmp(hi) > 0:
        errs.append(FieldError.invalid(f"{path}.defaultRequest[{k}]", req.canonical(),
                                       f"default request value {req} is greater than max value {hi}"))
    if req and dflt and req.cmp(dflt) > 0:
        errs.append(FieldError.invalid(f"{path}.defaultRequest[{k}]", req.canonical(),
                                       f"default request value {req} is greater than default limit value {dflt}"))
    if dflt and lo and lo.cmp(dflt) > 0:
        errs.append(FieldError.invalid(f"{path}.default[{k}]", lo.canonical(),
                                       f"min value {lo} is greater than default value {dflt}"))
    if dflt and hi and dflt.cmp(hi) > 0:
        errs.append(FieldError.invalid(f"{path}.default[{k}]", hi.canonical(),
                                       f"default value {dflt} is greater than max value {hi}"))
    if ratio and ratio.cmp(quantity.from_int(1)) < 0:
        errs.append(FieldError.invalid(f"{path}.maxLimitRequestRatio[{k}]", ratio.canonical(),
                                       f"ratio {ratio} is less than 1"))
    if not overcommit_allowed(k) and dflt and req and dflt.cmp(req) != 0:
        errs.append(FieldError.invalid(f"{path}.defaultRequest[{k}]", req.canonical(),
                                       f"default value {dflt} must equal to defaultRequest value {req} in {k}"))
    return errs


def resource_quota(obj: Obj) -> Errs:
    """ValidateResourceQuota: hard resource names and quantities, scopes."""
    spec = m(obj, "spec")
    errs: Errs = []
    for name, raw in m(spec, "hard").items():
        path = f"spec.hard[{name}]"
        name_errs = resource_name(name, path)
        errs.extend(name_errs)
        if "/" not in name and not name_errs and name not in STANDARD_QUOTA and not name.startswith(
                ("count/", "hugepages-", "requests.hugepages-")):
            errs.append(FieldError.invalid(path, name, "must be a standard resource for quota"))
        errs.extend(quantity_value(name, qty(raw), path))
    scopes = lst(spec, "scopes")
    for scope in scopes:
        if scope not in QUOTA_SCOPES:
            errs.append(invalid_raw("spec.scopes", _go_scopes(scopes), "unsupported scope"))
    for a, b in (("BestEffort", "NotBestEffort"), ("Terminating", "NotTerminating")):
        if a in scopes and b in scopes:
            errs.append(invalid_raw("spec.scopes", _go_scopes(scopes), "conflicting scopes"))
    return errs


def _go_scopes(scopes: list[object]) -> str:
    return "[]core.ResourceQuotaScope{" + ", ".join(f'"{x}"' for x in scopes) + "}"


def resource_quota_update(new: Obj, old: Obj) -> Errs:
    errs = resource_quota(new)
    new_scopes, old_scopes = lst(m(new, "spec"), "scopes"), lst(m(old, "spec"), "scopes")
    if set(map(str, new_scopes)) != set(map(str, old_scopes)):
        errs.append(invalid_raw("spec.scopes", _go_scopes(new_scopes), "field is immutable"))
    return errs
