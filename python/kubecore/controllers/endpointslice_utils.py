"""What the EndpointSlice and Endpoints controllers derive from a Service and its pods
(upstream staging/src/k8s.io/endpointslice: utils.go, util/controller_utils.go, util/endpointset.go).

Objects are API dicts; nothing here mutates its arguments.

- Membership: `should_pod_be_in_endpoints` (not terminal, has an IP; terminating pods only when
  asked), `services_to_update` (which Services a pod event concerns: upstream's
  GetServicesToUpdateOnPodChange with its label/readiness/IP change rules).
- Ports: `find_port` resolves a Service port's targetPort in a pod (a number is used as is; a name
  is looked up in the containers' ports with the same protocol, then in restartable init
  containers); `endpoint_ports` gives a pod's EndpointPorts, so pods whose named ports resolve to
  different numbers land in different port groups (`port_map_key`).
- Endpoints: `pod_to_endpoint` (addresses of one family, conditions ready/serving/terminating,
  targetRef, nodeName, zone, hostname), `endpoint_key` (upstream's endpoint hash: addresses,
  hostname, target namespace/name — other attributes change in place), `endpoints_equal_beyond_key`.
- Slices: `new_endpoint_slice`, `slice_labels` (the Service's labels plus the reserved
  service-name/managed-by/headless labels), `owned_by`, `address_types_for_service`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from typing import Any

from kubecore.controllers.controller_utils import is_pod_ready, labels_of, meta, selector_from_set

Obj = dict[str, Any]

CONTROLLER_NAME = "endpointslice-controller.k8s.io"
LABEL_SERVICE_NAME = "kubernetes.io/service-name"
LABEL_MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
LABEL_HEADLESS = "service.kubernetes.io/headless"
LABEL_TOPOLOGY_ZONE = "topology.kubernetes.io/zone"
ANNOTATION_TRIGGER_TIME = "endpoints.kubernetes.io/last-change-trigger-time"
IPV4, IPV6 = "IPv4", "IPv6"
CLUSTER_IP_NONE = "None"
_RESERVED_LABELS = frozenset({LABEL_SERVICE_NAME, LABEL_MANAGED_BY, LABEL_HEADLESS})

EndpointKey = tuple[tuple[str, ...], str, str, str]
PortMapKey = tuple[tuple[str, int, str, str], ...]


def _spec(obj: Obj) -> Obj:
    s = obj.get("spec")
    return s if isinstance(s, dict) else {}


def _status(obj: Obj) -> Obj:
    s = obj.get("status")
    return s if isinstance(s, dict) else {}


# -- pods -------------------------------------------------------------------------------------------
def pod_ips(pod: Obj) -> list[str]:
    """status.podIPs, or status.podIP when the list is absent."""
    ips = [str(p.get("ip")) for p in _status(pod).get("podIPs") or () if isinstance(p, dict) and p.get("ip")]
    if not ips and _status(pod).get("podIP"):
        ips = [str(_status(pod)["podIP"])]
    return ips


def is_ipv6(ip: str) -> bool:
    try:
        return ipaddress.ip_address(ip).version == 6
    except ValueError:
        return ":" in ip


def normalize_ip(ip: str) -> str:
    """Parse and print again (upstream's ParseIPSloppy + String); unparseable values stay as they are."""
    try:
        return str(ipaddress.ip_address(ip))
    except ValueError:
        return ip


def should_pod_be_in_endpoints(pod: Obj, *, include_terminating: bool) -> bool:
    if _status(pod).get("phase") in ("Succeeded", "Failed"):
        return False
    if not pod_ips(pod):
        return False
    return include_terminating or not meta(pod).get("deletionTimestamp")


def should_set_hostname(pod: Obj, service: Obj) -> bool:
    spec = _spec(pod)
    return bool(spec.get("hostname")) and spec.get("subdomain") == meta(service).get("name") \
        and meta(service).get("namespace") == meta(pod).get("namespace")


def find_port(pod: Obj, service_port: Obj) -> int | None:
    """The port number `service_port.targetPort` means in `pod` (None: no suitable port)."""
    target = service_port.get("targetPort", service_port.get("port"))
    if isinstance(target, int) and not isinstance(target, bool):
        return target
    if not isinstance(target, str):
        return None
    proto = service_port.get("protocol") or "TCP"
    spec = _spec(pod)
    containers = list(spec.get("containers") or ())
    containers += [c for c in spec.get("initContainers") or ()
                   if isinstance(c, dict) and c.get("restartPolicy") == "Always"]
    for c in containers:
        for p in (c.get("ports") or ()) if isinstance(c, dict) else ():
            if isinstance(p, dict) and p.get("name") == target and (p.get("protocol") or "TCP") == proto:
                return int(p.get("containerPort") or 0)
    return None


def endpoint_ports(service: Obj, pod: Obj) -> list[Obj]:
    """The EndpointPorts of `pod` for `service` (ports that do not resolve are left out)."""
    spec = _spec(service)
    ports = spec.get("ports") or []
    out: list[Obj] = []
    if not ports and spec.get("clusterIP") == CLUSTER_IP_NONE:
        return out
    for sp in ports:
        if not isinstance(sp, dict):
            continue
        number = find_port(pod, sp)
        if number is None:
            continue
        ep: Obj = {"name": str(sp.get("name") or ""), "port": number, "protocol": sp.get("protocol") or "TCP"}
        if sp.get("appProtocol") is not None:
            ep["appProtocol"] = sp["appProtocol"]
        out.append(ep)
    return out


def port_map_key(ports: Iterable[Obj] | None) -> PortMapKey:
    """Identifies a group of EndpointPorts regardless of their order (upstream's PortMapKey)."""
    return tuple(sorted((str(p.get("name") or ""), int(p.get("port") or 0), str(p.get("protocol") or ""),
                         str(p.get("appProtocol") or "")) for p in ports or ()))


# -- endpoints --------------------------------------------------------------------------------------
def endpoint_addresses(pod: Obj, address_type: str) -> list[str]:
    want_v6 = address_type == IPV6
    return [normalize_ip(ip) for ip in pod_ips(pod) if is_ipv6(ip) == want_v6]


def pod_to_endpoint(pod: Obj, node: Obj | None, service: Obj, address_type: str) -> Obj:
    """The Endpoint of `pod` (upstream's podToEndpoint)."""
    serving = is_pod_ready(pod)
    terminating = bool(meta(pod).get("deletionTimestamp"))
    ready = bool(_spec(service).get("publishNotReadyAddresses")) or (serving and not terminating)
    m = meta(pod)
    ep: Obj = {
        "addresses": endpoint_addresses(pod, address_type),
        "conditions": {"ready": ready, "serving": serving, "terminating": terminating},
        "targetRef": {"kind": "Pod", "namespace": m.get("namespace", ""), "name": m.get("name", ""),
                      "uid": m.get("uid", "")},
    }
    node_name = _spec(pod).get("nodeName")
    if node_name:
        ep["nodeName"] = node_name
    zone = labels_of(node).get(LABEL_TOPOLOGY_ZONE) if node is not None else None
    if zone:
        ep["zone"] = zone
    if should_set_hostname(pod, service):
        ep["hostname"] = _spec(pod)["hostname"]
    return ep


def endpoint_key(ep: Obj) -> EndpointKey:
    """Upstream's endpoint hash: what identifies an endpoint across syncs."""
    ref = ep.get("targetRef") or {}
    return (tuple(sorted(str(a) for a in ep.get("addresses") or ())), str(ep.get("hostname") or ""),
            str(ref.get("namespace") or ""), str(ref.get("name") or ""))


def _ref_without_rv(ref: Any) -> Any:
    if isinstance(ref, dict):
        return {k: v for k, v in ref.items() if k != "resourceVersion"}
    return ref


def endpoints_equal_beyond_key(a: Obj, b: Obj) -> bool:
    """Equal in what `endpoint_key` leaves out: nodeName, zone, conditions, targetRef (ignoring its
    resourceVersion)."""
    if a.get("nodeName") != b.get("nodeName") or a.get("zone") != b.get("zone"):
        return False
    ca, cb = a.get("conditions") or {}, b.get("conditions") or {}
    if any(ca.get(k) != cb.get(k) for k in ("ready", "serving", "terminating")):
        return False
    return bool(_ref_without_rv(a.get("targetRef")) == _ref_without_rv(b.get("targetRef")))


# -- services and slices ----------------------------------------------------------------------------
def is_service_ip_set(service: Obj) -> bool:
    ip = _spec(service).get("clusterIP")
    return bool(ip) and ip != CLUSTER_IP_NONE


def address_types_for_service(service: Obj) -> list[str]:
    """IPv4/IPv6 from spec.ipFamilies; without them, from the clusterIP; headless: both."""
    spec = _spec(service)
    families = [f for f in spec.get("ipFamilies") or () if f in (IPV4, IPV6)]
    if families:
        return [IPV4] if families == [IPV4] else [IPV6] if families == [IPV6] else [IPV4, IPV6]
    if is_service_ip_set(service):
        return [IPV6 if is_ipv6(str(spec["clusterIP"])) else IPV4]
    return [IPV4, IPV6]


def slice_labels(current: Mapping[str, str], service: Obj, controller_name: str) -> tuple[dict[str, str], bool]:
    """The labels a slice of `service` should have, and whether the non-reserved ones differ from
    `current` (upstream's setEndpointSliceLabels)."""
    ep_labels = {k: v for k, v in current.items() if k not in _RESERVED_LABELS}
    svc_labels = {k: v for k, v in labels_of(service).items() if k not in _RESERVED_LABELS}
    changed = ep_labels != svc_labels
    if not is_service_ip_set(service):
        svc_labels[LABEL_HEADLESS] = ""
    svc_labels[LABEL_SERVICE_NAME] = str(meta(service).get("name") or "")
    svc_labels[LABEL_MANAGED_BY] = controller_name
    return svc_labels, changed


def service_owner_ref(service: Obj) -> Obj:
    return {"apiVersion": "v1", "kind": "Service", "name": meta(service).get("name", ""),
            "uid": meta(service).get("uid", ""), "controller": True, "blockOwnerDeletion": True}


def slice_prefix(service_name: str) -> str:
    """"<name>-", unless that is not a valid DNS subdomain prefix (then the bare name)."""
    prefix = f"{service_name}-"
    return prefix if len(prefix) <= 253 else service_name


def new_endpoint_slice(service: Obj, *, ports: list[Obj], address_type: str,
                       controller_name: str = CONTROLLER_NAME) -> Obj:
    m = meta(service)
    labels, _ = slice_labels({}, service, controller_name)
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"generateName": slice_prefix(str(m.get("name") or "")), "namespace": m.get("namespace"),
                         "labels": labels, "ownerReferences": [service_owner_ref(service)]},
            "addressType": address_type, "ports": list(ports), "endpoints": []}


def owned_by(endpoint_slice: Obj, service: Obj) -> bool:
    uid = meta(service).get("uid")
    return any(isinstance(r, dict) and r.get("uid") == uid and r.get("kind") == "Service"
               and r.get("apiVersion") == "v1"
               for r in meta(endpoint_slice).get("ownerReferences") or ())


def service_selects(service: Obj, labels: Mapping[str, str]) -> bool:
    """A Service with a selector matches the labels (a missing selector matches nothing)."""
    sel = _spec(service).get("selector")
    return sel is not None and selector_from_set(sel).matches(labels)


# -- which services a pod event concerns ------------------------------------------------------------
def _ready(pod: Obj) -> bool:
    return is_pod_ready(pod)


def pod_endpoints_changed(old: Obj, new: Obj) -> tuple[bool, bool]:
    """(the pod changed in a way its endpoints show, its labels/hostname/subdomain changed)."""
    so, sn = _spec(old), _spec(new)
    labels_changed = labels_of(old) != labels_of(new) or so.get("hostname") != sn.get("hostname") \
        or so.get("subdomain") != sn.get("subdomain")
    if meta(old).get("deletionTimestamp") != meta(new).get("deletionTimestamp"):
        return True, labels_changed
    if _ready(old) != _ready(new):
        return True, labels_changed
    return pod_ips(old) != pod_ips(new), labels_changed


def _matching(services: Iterable[Obj], labels: Mapping[str, str]) -> set[str]:
    return {f"{meta(s).get('namespace')}/{meta(s).get('name')}" for s in services if service_selects(s, labels)}


def services_to_update(services: list[Obj], old: Obj | None, new: Obj | None) -> set[str]:
    """Keys of the Services (of the pod's namespace, given) whose endpoints a pod event may change."""
    if new is None or old is None:
        pod = new if new is not None else old
        return _matching(services, labels_of(pod)) if pod is not None else set()
    if meta(old).get("resourceVersion") == meta(new).get("resourceVersion"):
        return set()  # a resync: the service informer resyncs everything anyway
    pod_changed, labels_changed = pod_endpoints_changed(old, new)
    if not pod_changed and not labels_changed:
        return set()
    current = _matching(services, labels_of(new))
    if not labels_changed:
        return current
    previous = _matching(services, labels_of(old))
    return current | previous if pod_changed else current ^ previous
