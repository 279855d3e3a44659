"""networking.k8s.io/v1 (Ingress, IngressClass, NetworkPolicy) and discovery.k8s.io/v1
(EndpointSlice): the commonly hit rules, upstream's field paths and texts.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from kubecore.api.errors import FieldError
from kubecore.api.kinds.common import (
    Errs, Obj, dicts, dns_label, dns_subdomain, enum, immutable, invalid_raw, label_selector,
    lst, m, num, port_name_msgs, port_num, port_num_or_name, s, valid_cidr,
)
from kubecore.api.kinds.containers import PROTOCOLS
from kubecore.api.validation import is_dns1035_label

PATH_TYPES = ("Exact", "ImplementationSpecific", "Prefix")
ADDRESS_TYPES = ("FQDN", "IPv4", "IPv6")
POLICY_TYPES = ("Ingress", "Egress")
_BAD_PATH_PARTS = ("//", "/./", "/../", "%2f", "%2F")


def ingress(obj: Obj) -> Errs:
    """ValidateIngressSpec."""
    spec = m(obj, "spec")
    errs: Errs = []
    rules = lst(spec, "rules")
    if not rules and spec.get("defaultBackend") is None:
        errs.append(invalid_raw("spec", "[]networking.IngressRule(nil)", "either `defaultBackend` or `rules` must be specified"))
    if isinstance(spec.get("defaultBackend"), dict):
        errs.extend(_backend(m(spec, "defaultBackend"), "spec.defaultBackend"))
    for i, rule in dicts(spec, "rules"):
        errs.extend(_rule(rule, f"spec.rules[{i}]"))
    for i, tls in dicts(spec, "tls"):
        for j, host in enumerate(lst(tls, "hosts")):
            errs.extend(_host(str(host), f"spec.tls[{i}].hosts[{j}]"))
    if spec.get("ingressClassName") is not None:
        errs.extend(dns_subdomain(s(spec, "ingressClassName"), "spec.ingressClassName"))
    return errs


def _host(host: str, path: str) -> Errs:
    try:
        ipaddress.ip_address(host)
        return [FieldError.invalid(path, host, "must be a DNS name, not an IP address")]
    except ValueError:
        pass
    if host.startswith("*."):
        return [] if not dns_subdomain(host[2:], path) else [FieldError.invalid(path, host, (
            "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must "
            "consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character "
            "(e.g. '*.example.com', regex used for validation is "
            "'\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"))]
    return dns_subdomain(host, path)


def _rule(rule: Obj, path: str) -> Errs:
    errs = _host(s(rule, "host"), f"{path}.host") if s(rule, "host") else []
    http = rule.get("http")
    if not isinstance(http, dict):
        return errs
    paths = lst(http, "paths")
    if not paths:
        errs.append(FieldError.required(f"{path}.http.paths"))
    for i, p in dicts(http, "paths"):
        errs.extend(_http_path(p, f"{path}.http.paths[{i}]"))
    return errs


def _http_path(p: Obj, path: str) -> Errs:
    errs: Errs = []
    kind, value = p.get("pathType"), s(p, "path")
    if kind is None:
        errs.append(FieldError.required(f"{path}.pathType", "pathType must be specified"))
    elif kind not in PATH_TYPES:
        errs.append(FieldError.not_supported(f"{path}.pathType", kind, PATH_TYPES))
    elif kind in ("Exact", "Prefix"):
        if not value.startswith("/"):
            errs.append(FieldError.invalid(f"{path}.path", value, "must be an absolute path"))
        for bad in _BAD_PATH_PARTS:
            if bad in value:
                errs.append(FieldError.invalid(f"{path}.path", value, f"must not contain '{bad}'"))
        if value.endswith(("/..", "/.")):
            errs.append(FieldError.invalid(f"{path}.path", value, f"cannot end with '{value[value.rindex('/'):]}'"))
    elif value and not value.startswith("/"):
        errs.append(FieldError.invalid(f"{path}.path", value, "must be an absolute path"))
    errs.extend(_backend(m(p, "backend"), f"{path}.backend"))
    return errs


def _backend(backend: Obj, path: str) -> Errs:
    """validateIngressBackend."""
    service, resource = backend.get("service"), backend.get("resource")
    if service is not None and resource is not None:
        return [FieldError.invalid(path, "", "cannot set both resource and service backends")]
    if isinstance(resource, dict):
        return [FieldError.required(f"{path}.resource.{k}") for k in ("kind", "name") if not s(resource, k)]
    if not isinstance(service, dict):
        return [FieldError.invalid(path, "", "resource or service backend is required")]
    errs: Errs = []
    name = s(service, "name")
    if not name:
        errs.append(FieldError.required(f"{path}.service.name"))
    else:
        errs.extend(FieldError.invalid(f"{path}.service.name", name, msg) for msg in is_dns1035_label(name))
    port = m(service, "port")
    port_name, number = s(port, "name"), num(port, "number") or 0
    if port_name and number:
        errs.append(invalid_raw(f"{path}.service.port", f'networking.ServiceBackendPort{{Name:"{port_name}", '
                                f"Number:{number}}}", "cannot set both port name & port number"))
    elif port_name:
        errs.extend(FieldError.invalid(f"{path}.service.port.name", port_name, msg) for msg in port_name_msgs(port_name))
    elif number:
        errs.extend(port_num(number, f"{path}.service.port.number"))
    else:
        errs.append(FieldError.required(f"{path}.service.port", "port name or number is required"))
    return errs


def ingress_update(new: Obj, old: Obj) -> Errs:
    return ingress(new)


def ingress_class(obj: Obj) -> Errs:
    """validateIngressClassSpec."""
    controller = s(m(obj, "spec"), "controller")
    path = "spec.controller"
    if not controller:
        return [FieldError.required(path)]
    if len(controller) > 250:
        return [FieldError.too_long(path, 250)]
    parts = controller.split("/", 1)
    if len(parts) != 2 or not parts[0] or not parts[1]:
        return [FieldError.invalid(path, controller, 'must be a domain-prefixed path (such as "acme.io/foo")')]
    return dns_subdomain(parts[0], path)


def ingress_class_update(new: Obj, old: Obj) -> Errs:
    return ingress_class(new) + immutable(s(m(new, "spec"), "controller"), s(m(old, "spec"), "controller"),
                                          "spec.controller")


def network_policy(obj: Obj) -> Errs:
    """ValidateNetworkPolicySpec."""
    spec = m(obj, "spec")
    errs = label_selector(spec.get("podSelector"), "spec.podSelector")
    for direction, peers_key in (("ingress", "from"), ("egress", "to")):
        for i, rule in dicts(spec, direction):
            rp = f"spec.{direction}[{i}]"
            for j, port in dicts(rule, "ports"):
                errs.extend(_np_port(port, f"{rp}.ports[{j}]"))
            for j, peer in dicts(rule, peers_key):
                errs.extend(_peer(peer, f"{rp}.{peers_key}[{j}]"))
    types = lst(spec, "policyTypes")
    for i, t in enumerate(types):
        if t not in POLICY_TYPES:
            errs.append(FieldError.not_supported(f"spec.policyTypes[{i}]", t, POLICY_TYPES))
    if len(types) > 2:
        errs.append(invalid_raw("spec.policyTypes", "[]networking.PolicyType{...}", "may not specify more than two policyTypes"))
    return errs


def _np_port(port: Obj, path: str) -> Errs:
    errs: Errs = []
    if port.get("protocol") is not None:
        errs.extend(enum(s(port, "protocol"), PROTOCOLS, f"{path}.protocol"))
    value: Any = port.get("port")
    if value is not None:
        errs.extend(port_num_or_name(value, f"{path}.port"))
    end = num(port, "endPort")
    if end is not None:
        if isinstance(value, str):
            errs.append(FieldError.forbidden(f"{path}.endPort", "may not be specified when `port` is non-numeric"))
        elif value is None:
            errs.append(FieldError.forbidden(f"{path}.endPort", "may not be specified when `port` is not specified"))
        elif end < value:
            errs.append(FieldError.invalid(f"{path}.endPort", end, "must be greater than or equal to `port`"))
    return errs


def _peer(peer: Obj, path: str) -> Errs:
    errs: Errs = []
    present = [k for k in ("podSelector", "namespaceSelector", "ipBlock") if peer.get(k) is not None]
    if not present:
        errs.append(FieldError.required(path, "must specify a peer"))
    elif "ipBlock" in present and len(present) > 1:
        errs.append(FieldError.forbidden(path, "may not specify both ipBlock and another peer"))
    for k in ("podSelector", "namespaceSelector"):
        errs.extend(label_selector(peer.get(k), f"{path}.{k}"))
    block = peer.get("ipBlock")
    if isinstance(block, dict):
        cidr = s(block, "cidr")
        errs.extend([FieldError.required(f"{path}.ipBlock.cidr")] if not cidr else valid_cidr(cidr, f"{path}.ipBlock.cidr"))
        for i, ex in enumerate(lst(block, "except")):
            errs.extend(valid_cidr(str(ex), f"{path}.ipBlock.except[{i}]"))
    return errs


def network_policy_update(new: Obj, old: Obj) -> Errs:
    return network_policy(new)


def endpoint_slice(obj: Obj) -> Errs:
    """ValidateEndpointSlice."""
    kind = s(obj, "addressType")
    errs = enum(kind, ADDRESS_TYPES, "addressType")
    for i, ep in dicts(obj, "endpoints"):
        ip = f"endpoints[{i}]"
        addresses = lst(ep, "addresses")
        if not addresses:
            errs.append(FieldError.required(f"{ip}.addresses", "must contain at least 1 address"))
        elif len(addresses) > 100:
            errs.append(FieldError("FieldValueTooMany", f"{ip}.addresses",
                                   f"Too many: {len(addresses)}: must have at most 100 items"))
        for j, addr in enumerate(addresses):
            errs.extend(_slice_address(str(addr), kind, f"{ip}.addresses[{j}]"))
        if s(ep, "hostname"):
            errs.extend(dns_label(s(ep, "hostname"), f"{ip}.hostname"))
        if ep.get("nodeName") is not None:
            errs.extend(dns_subdomain(s(ep, "nodeName"), f"{ip}.nodeName"))
    for i, port in dicts(obj, "ports"):
        pp = f"ports[{i}]"
        if s(port, "name"):
            errs.extend(dns_label(s(port, "name"), f"{pp}.name"))
        if port.get("protocol") is not None:
            errs.extend(enum(s(port, "protocol"), PROTOCOLS, f"{pp}.protocol"))
        if port.get("port") is not None:
            errs.extend(port_num(port["port"], f"{pp}.port"))
    return errs


def _slice_address(addr: str, kind: str, path: str) -> Errs:
    if kind in ("IPv4", "IPv6"):
        try:
            ok = ipaddress.ip_address(addr).version == (4 if kind == "IPv4" else 6)
        except ValueError:
            ok = False
        return [] if ok else [FieldError.invalid(path, addr, f"must be an {kind} address")]
    if kind == "FQDN":
        return dns_subdomain(addr, path)
    return []


def endpoint_slice_update(new: Obj, old: Obj) -> Errs:
    return endpoint_slice(new) + immutable(s(new, "addressType"), s(old, "addressType"), "addressType")

