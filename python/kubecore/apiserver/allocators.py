"""Service ClusterIP and NodePort allocation.

One API server owns the allocations: at start they are rebuilt from the services in the store,
then kept in memory, taken when a service is created (before it is written, and given back if the
write fails) and released when it is deleted. The first address of the service CIDR belongs to the
`kubernetes` service, as upstream.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

from kubecore.api import errors
from kubecore.api.errors import FieldError

Obj = dict[str, Any]
DEFAULT_SERVICE_CIDR = "10.96.0.0/12"
DEFAULT_NODE_PORTS = (30000, 32767)


@dataclass
class Allocators:
    cidr: ipaddress.IPv4Network = field(default_factory=lambda: ipaddress.IPv4Network(DEFAULT_SERVICE_CIDR))
    node_ports: tuple[int, int] = DEFAULT_NODE_PORTS
    ips: set[int] = field(default_factory=set)
    ports: set[int] = field(default_factory=set)
    _next_ip: int = 0
    _next_port: int = 0

    def __post_init__(self) -> None:
        self._next_ip = int(self.cidr.network_address) + 2  # .1 is the kubernetes service's
        self._next_port = self.node_ports[0]

    # ---- addresses ---------------------------------------------------------------------------

    def _ip_range(self) -> tuple[int, int]:
        return int(self.cidr.network_address) + 1, int(self.cidr.broadcast_address) - 1

    def take_ip(self, wanted: str, svc: str) -> str:
        lo, hi = self._ip_range()
        if wanted:
            try:
                ip = int(ipaddress.IPv4Address(wanted))
            except ValueError:
                raise _invalid(svc, FieldError.invalid("spec.clusterIPs[0]", wanted, "must be a valid IP address")) from None
            if not lo <= ip <= hi:
                raise _invalid(svc, FieldError.invalid(
                    "spec.clusterIPs[0]", wanted, f"provided IP is not in the valid range. The range of valid IPs is {self.cidr}"))
            if ip in self.ips:
                raise _invalid(svc, FieldError.invalid("spec.clusterIPs[0]", wanted, "provided IP is already allocated"))
            self.ips.add(ip)
            return wanted
        lo += 1  # dynamic allocation never hands out the `kubernetes` service's address
        size = hi - lo + 1
        for i in range(size):
            ip = lo + (self._next_ip - lo + i) % size
            if ip not in self.ips:
                self.ips.add(ip)
                self._next_ip = ip + 1
                return str(ipaddress.IPv4Address(ip))
        raise errors.internal("failed to allocate a serviceIP: range is full")

    def release_ip(self, ip: str) -> None:
        try:
            self.ips.discard(int(ipaddress.IPv4Address(ip)))
        except ValueError:
            pass

    # ---- node ports --------------------------------------------------------------------------

    def take_port(self, wanted: int, svc: str, index: int) -> int:
        lo, hi = self.node_ports
        path = f"spec.ports[{index}].nodePort"
        if wanted:
            if not lo <= wanted <= hi:
                raise _invalid(svc, FieldError.invalid(path, wanted, f"provided port is not in the valid range. The range of valid ports is {lo}-{hi}"))
            if wanted in self.ports:
                raise _invalid(svc, FieldError.invalid(path, wanted, "provided port is already allocated"))
            self.ports.add(wanted)
            return wanted
        size = hi - lo + 1
        for i in range(size):
            port = lo + (self._next_port - lo + i) % size
            if port not in self.ports:
                self.ports.add(port)
                self._next_port = port + 1
                return port
        raise errors.internal("failed to allocate a nodePort: range is full")

    # ---- services ----------------------------------------------------------------------------

    def allocate(self, svc: Obj) -> None:
        """Fills spec.clusterIP(s) and nodePorts of a new service; all or nothing."""
        spec = svc.setdefault("spec", {})
        name = svc.get("metadata", {}).get("name", "")
        kind = spec.get("type", "ClusterIP")
        taken_ip, taken_ports = "", []
        try:
            if kind != "ExternalName":
                wanted = spec.get("clusterIP") or (spec.get("clusterIPs") or [""])[0]
                if wanted != "None":
                    taken_ip = self.take_ip(wanted or "", name)
                    wanted = taken_ip
                spec["clusterIP"] = wanted
                spec["clusterIPs"] = [wanted]
                if wanted != "None":
                    spec.setdefault("ipFamilies", ["IPv4"])
                spec.setdefault("ipFamilyPolicy", "SingleStack")
            if kind in ("NodePort", "LoadBalancer"):
                for i, port in enumerate(spec.get("ports") or []):
                    port["nodePort"] = self.take_port(_node_port(port, name, i), name, i)
                    taken_ports.append(port["nodePort"])
                spec.setdefault("externalTrafficPolicy", "Cluster")
        except Exception:
            if taken_ip:
                self.release_ip(taken_ip)
            self.ports.difference_update(taken_ports)
            raise

    def release(self, svc: Obj) -> None:
        spec = svc.get("spec") or {}
        for ip in spec.get("clusterIPs") or [spec.get("clusterIP")]:
            if ip and ip != "None":
                self.release_ip(ip)
        for port in spec.get("ports") or []:
            if port.get("nodePort"):
                self.ports.discard(int(port["nodePort"]))

    def record(self, svc: Obj) -> None:
        """Marks what an existing service holds (rebuilding state at start)."""
        spec = svc.get("spec") or {}
        for ip in spec.get("clusterIPs") or [spec.get("clusterIP")]:
            if ip and ip != "None":
                try:
                    self.ips.add(int(ipaddress.IPv4Address(ip)))
                except ValueError:
                    pass
        for port in spec.get("ports") or []:
            if port.get("nodePort"):
                self.ports.add(int(port["nodePort"]))


def _invalid(name: str, cause: FieldError) -> errors.StatusError:
    return errors.invalid(("", "Service"), name, [cause])


@dataclass
class PortChange:
    """Node ports an update takes and gives back. Taken ports are reserved at once; the ones
    given back are released only by `commit`, after the update is stored; `rollback` undoes."""

    alloc: Allocators
    taken: set[int] = field(default_factory=set)
    released: set[int] = field(default_factory=set)

    def commit(self) -> None:
        self.alloc.ports.difference_update(self.released)

    def rollback(self) -> None:
        self.alloc.ports.difference_update(self.taken)


def reconcile_update(alloc: Allocators, old: Obj, new: Obj) -> PortChange:
    """An update keeps the cluster IP (immutable; filled in when left out), reserves node ports
    for ports that need one and marks those no longer used for release."""
    o, n = old.get("spec") or {}, new.setdefault("spec", {})
    name = new.get("metadata", {}).get("name", "")
    if n.get("type", "ClusterIP") != "ExternalName" and o.get("type", "ClusterIP") != "ExternalName":
        for k in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
            if not n.get(k) and o.get(k):
                n[k] = o[k]
        if n.get("clusterIP") != o.get("clusterIP"):
            raise _invalid(name, FieldError.invalid("spec.clusterIPs[0]", n.get("clusterIP"), "field is immutable"))
    old_ports = {int(p["nodePort"]) for p in o.get("ports") or [] if p.get("nodePort")}
    change = PortChange(alloc)
    keep: set[int] = set()
    try:
        if n.get("type") in ("NodePort", "LoadBalancer"):
            for i, port in enumerate(n.get("ports") or []):
                want = _node_port(port, name, i)
                if want and want in old_ports:
                    keep.add(want)
                    continue
                port["nodePort"] = alloc.take_port(want, name, i)
                change.taken.add(port["nodePort"])
                keep.add(port["nodePort"])
        else:
            for port in n.get("ports") or []:
                port.pop("nodePort", None)
    except Exception:
        change.rollback()
        raise
    change.released = old_ports - keep
    return change


def _node_port(port: Obj, svc: str, index: int) -> int:
    value = port.get("nodePort") or 0
    if not isinstance(value, int) or isinstance(value, bool):
        raise _invalid(svc, FieldError.invalid(f"spec.ports[{index}].nodePort", value, "must be an integer"))
    return value
