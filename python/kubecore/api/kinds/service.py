"""Services (core/v1): ValidateService, ValidateServiceUpdate and the cluster-IP rules.

Validation runs before the allocators fill in cluster IPs and node ports, so an unset
clusterIP is valid; ``clusterIP`` alone stands for ``clusterIPs`` (upstream's strategy syncs the
two before validating). On update an unset clusterIP keeps the old one, as upstream's
patchAllocatedValues does, and then may not differ from it.
"""

from __future__ import annotations

from typing import Any

from kubecore.api.errors import FieldError, go_quote
from kubecore.api.kinds.common import (
    Errs, Obj, dicts, dns_label, dns_subdomain, duplicate_raw, enum, go_int_or_string, go_strings,
    invalid_raw, lst, m, num, port_num, port_num_or_name, qualified_name, s, valid_cidr, valid_ip,
)
from kubecore.api.kinds.containers import PROTOCOLS
from kubecore.api.validation import validate_labels

SERVICE_TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")
AFFINITIES = ("ClientIP", "None")
TRAFFIC_POLICIES = ("Cluster", "Local")
IP_FAMILIES = ("IPv4", "IPv6")
IP_FAMILY_POLICIES = ("PreferDualStack", "RequireDualStack", "SingleStack")
TRAFFIC_DISTRIBUTIONS = ("PreferClose", "PreferSameZone", "PreferSameNode")
ONLY_LB = "may only be used when `type` is 'LoadBalancer'"
MAX_AFFINITY_SECONDS = 86400


def cluster_ips(spec: Obj) -> list[str]:
    ips = [str(x) for x in lst(spec, "clusterIPs")]
    if not ips and s(spec, "clusterIP"):
        ips = [s(spec, "clusterIP")]
    return ips


def is_headless(spec: Obj) -> bool:
    return cluster_ips(spec) == ["None"]


def service(obj: Obj) -> Errs:
    """ValidateService."""
    spec = m(obj, "spec")
    kind, ports = s(spec, "type"), lst(spec, "ports")
    errs: Errs = []
    if not ports and not is_headless(spec) and kind != "ExternalName":
        errs.append(FieldError.required("spec.ports"))
    errs.extend(_type_rules(spec, kind))
    names: set[str] = set()
    for i, p in dicts(spec, "ports"):
        errs.extend(_port(p, require_name=len(ports) > 1, names=names, path=f"spec.ports[{i}]"))
    if spec.get("selector") is not None:
        errs.extend(validate_labels(spec.get("selector"), "spec.selector"))
    errs.extend(_affinity(spec))
    errs.extend(_cluster_ip_fields(spec, kind))
    for i, ip in enumerate(lst(spec, "externalIPs")):
        errs.extend(valid_ip(str(ip), f"spec.externalIPs[{i}]"))
    errs.extend(enum(kind, SERVICE_TYPES, "spec.type"))
    errs.extend(_node_ports(spec, kind))
    errs.extend(_duplicate_ports(spec))
    errs.extend(_load_balancer(obj, spec, kind))
    errs.extend(_traffic_policies(spec, kind))
    return errs


def _type_rules(spec: Obj, kind: str) -> Errs:
    if kind in ("LoadBalancer", "NodePort") and is_headless(spec):
        return [FieldError.invalid("spec.clusterIPs[0]", "None", f"may not be set to 'None' for {kind} services")]
    if kind != "ExternalName":
        return []
    errs: Errs = []
    if cluster_ips(spec):
        errs.append(FieldError.forbidden("spec.clusterIPs", "may not be set for ExternalName services"))
    if lst(spec, "ipFamilies"):
        errs.append(FieldError.forbidden("spec.ipFamilies", "may not be set for ExternalName services"))
    if spec.get("ipFamilyPolicy") is not None:
        errs.append(FieldError.forbidden("spec.ipFamilyPolicy", "may not be set for ExternalName services"))
    cname = s(spec, "externalName").removesuffix(".")
    errs.extend(dns_subdomain(cname, "spec.externalName") if cname else [FieldError.required("spec.externalName")])
    return errs


def _port(p: Obj, *, require_name: bool, names: set[str], path: str) -> Errs:
    """validateServicePort."""
    errs: Errs = []
    name = s(p, "name")
    if require_name and not name:
        errs.append(FieldError.required(f"{path}.name"))
    elif name:
        errs.extend(dns_label(name, f"{path}.name"))
        if name in names:
            errs.append(FieldError.duplicate(f"{path}.name", name))
        names.add(name)
    errs.extend(port_num(p.get("port", 0), f"{path}.port"))
    errs.extend(enum(s(p, "protocol"), PROTOCOLS, f"{path}.protocol"))
    errs.extend(port_num_or_name(p.get("targetPort", 0), f"{path}.targetPort"))
    if p.get("appProtocol") is not None:
        errs.extend(qualified_name(s(p, "appProtocol"), f"{path}.appProtocol"))
    return errs


def _affinity(spec: Obj) -> Errs:
    affinity = s(spec, "sessionAffinity")
    errs = enum(affinity, AFFINITIES, "spec.sessionAffinity")
    config = spec.get("sessionAffinityConfig")
    if affinity == "ClientIP" and isinstance(config, dict):
        timeout = num(m(config, "clientIP"), "timeoutSeconds")
        if timeout is not None and not 0 < timeout <= MAX_AFFINITY_SECONDS:
            errs.append(FieldError.invalid("spec.sessionAffinityConfig.clientIP.timeoutSeconds", timeout,
                                           f"must be greater than 0 and less than {MAX_AFFINITY_SECONDS}"))
    elif affinity == "None" and config is not None:
        errs.append(FieldError.forbidden("spec.sessionAffinityConfig", "must not be set when session affinity is None"))
    return errs


def _cluster_ip_fields(spec: Obj, kind: str) -> Errs:
    """ValidateServiceClusterIPsRelatedFields (dual-stack pairing of two IPs not checked)."""
    if kind == "ExternalName":
        return []
    errs: Errs = []
    ips, given = cluster_ips(spec), lst(spec, "clusterIPs")
    if s(spec, "clusterIP") and given and given[0] != s(spec, "clusterIP"):
        errs.append(invalid_raw("spec.clusterIPs", go_strings(given), "first value must match `clusterIP`"))
    seen: set[str] = set()
    for i, fam in enumerate(lst(spec, "ipFamilies")):
        if fam not in IP_FAMILIES:
            errs.append(FieldError.not_supported(f"spec.ipFamilies[{i}]", fam, IP_FAMILIES))
        if fam in seen:
            errs.append(FieldError.duplicate(f"spec.ipFamilies[{i}]", fam))
        seen.add(str(fam))
    if spec.get("ipFamilyPolicy") is not None:
        errs.extend(enum(s(spec, "ipFamilyPolicy"), IP_FAMILY_POLICIES, "spec.ipFamilyPolicy"))
    for i, ip in enumerate(ips):
        if i == 0 and ip == "None":
            if len(ips) > 1:
                errs.append(invalid_raw("spec.clusterIPs", go_strings(ips), "'None' must be the first and only value"))
            continue
        errs.extend(valid_ip(ip, f"spec.clusterIPs[{i}]"))
    if len(ips) > 2:
        errs.append(invalid_raw("spec.clusterIPs", go_strings(ips), "may only hold up to 2 values"))
    return errs


def _node_ports(spec: Obj, kind: str) -> Errs:
    errs: Errs = []
    seen: set[tuple[str, int]] = set()
    for i, p in dicts(spec, "ports"):
        node_port = num(p, "nodePort") or 0
        if not node_port:
            continue
        if kind == "ClusterIP":
            errs.append(FieldError.forbidden(f"spec.ports[{i}].nodePort", "may not be used when `type` is 'ClusterIP'"))
        key = (s(p, "protocol"), node_port)
        if key in seen:
            errs.append(FieldError.duplicate(f"spec.ports[{i}].nodePort", node_port))
        seen.add(key)
    return errs


def _duplicate_ports(spec: Obj) -> Errs:
    errs: Errs = []
    seen: set[tuple[str, Any]] = set()
    for i, p in dicts(spec, "ports"):
        key = (s(p, "protocol"), p.get("port"))
        if key in seen:
            rendered = (f'core.ServicePort{{Name:"", Protocol:{go_quote(key[0])}, AppProtocol:(*string)(nil), '
                        f'Port:{key[1]}, TargetPort:{go_int_or_string(0)}, NodePort:0}}')
            errs.append(duplicate_raw(f"spec.ports[{i}]", rendered))
        seen.add(key)
    return errs


def _load_balancer(obj: Obj, spec: Obj, kind: str) -> Errs:
    errs: Errs = []
    ranges = lst(spec, "loadBalancerSourceRanges")
    if ranges:
        if kind != "LoadBalancer":
            errs.append(FieldError.forbidden("spec.LoadBalancerSourceRanges", ONLY_LB))
        for i, cidr in enumerate(ranges):
            errs.extend(valid_cidr(str(cidr).strip(), f"spec.LoadBalancerSourceRanges[{i}]"))
    if spec.get("allocateLoadBalancerNodePorts") is not None and kind != "LoadBalancer":
        errs.append(FieldError.forbidden("spec.allocateLoadBalancerNodePorts", ONLY_LB))
    if kind == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is None:
        errs.append(FieldError.required("allocateLoadBalancerNodePorts"))
    if spec.get("loadBalancerClass") is not None:
        if kind == "LoadBalancer":
            errs.extend(qualified_name(s(spec, "loadBalancerClass"), "spec.loadBalancerClass"))
        else:
            errs.append(FieldError.forbidden("spec.loadBalancerClass", ONLY_LB))
    return errs


def _traffic_policies(spec: Obj, kind: str) -> Errs:
    errs: Errs = []
    external = s(spec, "externalTrafficPolicy")
    accessible = kind in ("LoadBalancer", "NodePort") or (kind == "ClusterIP" and bool(lst(spec, "externalIPs")))
    if not accessible:
        if external:
            errs.append(FieldError.invalid("spec.externalTrafficPolicy", external,
                                           "may only be set for externally-accessible services"))
    else:
        errs.extend(enum(external, TRAFFIC_POLICIES, "spec.externalTrafficPolicy"))
    health = num(spec, "healthCheckNodePort") or 0
    if health and not (kind == "LoadBalancer" and external == "Local"):
        errs.append(FieldError.invalid("spec.healthCheckNodePort", health,
                                       "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"))
    internal = spec.get("internalTrafficPolicy")
    if internal is None and kind in ("ClusterIP", "NodePort", "LoadBalancer"):
        errs.append(FieldError.required("spec.internalTrafficPolicy"))
    elif internal is not None and internal not in TRAFFIC_POLICIES:
        errs.append(FieldError.not_supported("spec.internalTrafficPolicy", internal, TRAFFIC_POLICIES))
    dist = spec.get("trafficDistribution")
    if dist is not None and dist not in TRAFFIC_DISTRIBUTIONS:
        errs.append(FieldError.not_supported("spec.trafficDistribution", dist, TRAFFIC_DISTRIBUTIONS))
    return errs


def _needs_node_ports(spec: Obj) -> bool:
    return s(spec, "type") in ("NodePort", "LoadBalancer")


def _externally_accessible(spec: Obj) -> bool:
    return _needs_node_ports(spec) or (s(spec, "type") == "ClusterIP" and bool(lst(spec, "externalIPs")))


def drop_type_dependent_fields(new: Obj, old: Obj) -> None:
    """The service strategy's dropTypeDependentFields: fields the old type needed and the new
    type does not are cleared when the client left them as they were."""
    spec, old_spec = new.get("spec"), m(old, "spec")
    if not isinstance(spec, dict):
        return
    if _needs_node_ports(old_spec) and not _needs_node_ports(spec):
        old_ports = [num(p, "nodePort") for _, p in dicts(old_spec, "ports")]
        if [num(p, "nodePort") for _, p in dicts(spec, "ports")] == old_ports[:len(lst(spec, "ports"))]:
            for _, p in dicts(spec, "ports"):
                p.pop("nodePort", None)
    if _externally_accessible(old_spec) and not _externally_accessible(spec):
        if spec.get("externalTrafficPolicy") == old_spec.get("externalTrafficPolicy"):
            spec.pop("externalTrafficPolicy", None)
    if s(old_spec, "type") == "LoadBalancer" and s(spec, "type") != "LoadBalancer":
        for key in ("allocateLoadBalancerNodePorts", "loadBalancerClass", "healthCheckNodePort"):
            if spec.get(key) == old_spec.get(key):
                spec.pop(key, None)


def service_update(new: Obj, old: Obj) -> Errs:
    """ValidateServiceUpdate: allocated cluster IPs may not change (ExternalName exempt)."""
    spec, old_spec = m(new, "spec"), m(old, "spec")
    errs: Errs = []
    if "ExternalName" not in (s(spec, "type"), s(old_spec, "type")):
        old_ips, new_ips = cluster_ips(old_spec), cluster_ips(spec) or cluster_ips(old_spec)
        if not (old_ips == ["None"] and new_ips == ["None"]):
            for i, ip in enumerate(old_ips[:len(new_ips)]):
                if ip != new_ips[i]:
                    errs.append(invalid_raw(f"spec.clusterIPs[{i}]", go_strings(new_ips), "may not change once set"))
    if s(spec, "type") == s(old_spec, "type") == "LoadBalancer" and \
            spec.get("loadBalancerClass") != old_spec.get("loadBalancerClass"):
        errs.append(FieldError.invalid("spec.loadBalancerClass", spec.get("loadBalancerClass"), "may not change once set"))
    return errs + service(new)
