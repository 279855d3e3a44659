"""core/v1 Endpoints subsets: build, repack, truncate, compare (upstream pkg/api/v1/endpoints/util.go
RepackSubsets and pkg/controller/endpoint's truncateEndpoints / capacity helpers).

The controller adds one subset per (pod, port): `{"addresses" | "notReadyAddresses": [addr],
"ports": [port]}`. `repack_subsets` turns that into the N-to-M form the API wants: addresses that
offer the same set of ports share one subset, each address listed once per subset, ready when it is
ready for that port in any input subset. Addresses are identified by (ip, targetRef uid).

    in : [a:80 ready] [b:80 ready] [a:443 ready] [b:443 not ready]
    out: [{addresses: [a, b], ports: [80]},
          {addresses: [a], notReadyAddresses: [b], ports: [443]}]
         (port 80 and port 443 are offered by different (address, ready) sets)

Order is deterministic: addresses by (ip, uid), ports by (name, port, protocol), subsets by their
ports then first address. (Upstream orders ports and subsets by a hash, which is equally arbitrary;
clients must not depend on it.)

At most `MAX_CAPACITY` (1000) addresses are kept: `truncate_subsets` keeps ready addresses first,
sharing what is left among subsets in proportion to their size (rounded up, so later subsets get
fewer), and the controller then sets endpoints.kubernetes.io/over-capacity: truncated.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

Obj = dict[str, Any]
MAX_CAPACITY = 1000
ANNOTATION_OVER_CAPACITY = "endpoints.kubernetes.io/over-capacity"
TRUNCATED = "truncated"

AddrKey = tuple[str, str]
PortKey = tuple[str, int, str, str]


def address_key(addr: Obj) -> AddrKey:
    return str(addr.get("ip") or ""), str((addr.get("targetRef") or {}).get("uid") or "")


def port_key(port: Obj) -> PortKey:
    return (str(port.get("name") or ""), int(port.get("port") or 0), str(port.get("protocol") or ""),
            str(port.get("appProtocol") or ""))


_SENTINEL: PortKey = ("", -1, "", "")


def repack_subsets(subsets: Iterable[Obj]) -> list[Obj]:
    """Upstream's RepackSubsets (see the module docstring)."""
    addresses: dict[AddrKey, Obj] = {}
    ports: dict[PortKey, Obj] = {}
    by_port: dict[PortKey, dict[AddrKey, bool]] = {}
    for given in subsets:
        keys = [port_key(p) for p in given.get("ports") or ()] or [_SENTINEL]
        for p in given.get("ports") or ():
            ports.setdefault(port_key(p), p)
        for is_ready, field in ((True, "addresses"), (False, "notReadyAddresses")):
            for addr in given.get(field) or ():
                ak = address_key(addr)
                addresses.setdefault(ak, addr)
                for pk in keys:
                    group = by_port.setdefault(pk, {})
                    if not group.get(ak, False):
                        group[ak] = is_ready
    grouped: dict[tuple[tuple[AddrKey, bool], ...], list[PortKey]] = {}
    for pk, group in by_port.items():
        members = tuple(sorted(group.items()))
        keys = grouped.setdefault(members, [])
        if pk != _SENTINEL:
            keys.append(pk)
    final = []
    for members, pks in grouped.items():
        subset: Obj = {}
        ready = [addresses[ak] for ak, r in members if r]
        not_ready = [addresses[ak] for ak, r in members if not r]
        if ready:
            subset["addresses"] = ready
        if not_ready:
            subset["notReadyAddresses"] = not_ready
        if pks:
            subset["ports"] = [ports[k] for k in sorted(pks)]
        final.append(subset)
    return sort_subsets(final)


def sort_subsets(subsets: list[Obj]) -> list[Obj]:
    for s in subsets:
        for field in ("addresses", "notReadyAddresses"):
            if field in s:
                s[field] = sorted(s[field], key=address_key)
        if "ports" in s:
            s["ports"] = sorted(s["ports"], key=port_key)

    def order(s: Obj) -> tuple[list[PortKey], list[AddrKey], list[AddrKey]]:
        return ([port_key(p) for p in s.get("ports") or ()], [address_key(a) for a in s.get("addresses") or ()],
                [address_key(a) for a in s.get("notReadyAddresses") or ()])

    return sorted(subsets, key=order)


def count_addresses(subsets: Iterable[Obj]) -> tuple[int, int]:
    """(ready, not ready) addresses over all subsets."""
    ready = not_ready = 0
    for s in subsets:
        ready += len(s.get("addresses") or ())
        not_ready += len(s.get("notReadyAddresses") or ())
    return ready, not_ready


def truncate_subsets(subsets: list[Obj], capacity: int = MAX_CAPACITY) -> tuple[list[Obj], bool]:
    """At most `capacity` addresses, ready ones first; (subsets, whether anything was cut)."""
    total_ready, total_not_ready = count_addresses(subsets)
    if total_ready + total_not_ready <= capacity:
        return subsets, False
    truncate_ready = total_ready > capacity
    room = capacity if truncate_ready else capacity - total_ready
    total = total_ready if truncate_ready else total_not_ready
    left = room
    out = []
    for s in subsets:
        s = dict(s)
        field = "addresses" if truncate_ready else "notReadyAddresses"
        items = list(s.get(field) or [])
        take = min(math.ceil(len(items) / total * room), left) if total else 0
        s[field] = items[:take]
        if truncate_ready:
            s["notReadyAddresses"] = []
        left -= len(s[field])
        out.append(s)
    return out, True


def capacity_annotation_correct(annotations: dict[str, str], subsets: Iterable[Obj],
                                capacity: int = MAX_CAPACITY) -> bool:
    """False when over capacity (a truncation is due); else true iff the annotation is absent."""
    ready, not_ready = count_addresses(subsets)
    if ready + not_ready > capacity:
        return False
    return ANNOTATION_OVER_CAPACITY not in annotations


def _normalized(value: Any) -> Any:
    """Drop empty values and targetRef.resourceVersion, so server round trips compare equal."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k == "resourceVersion":
                continue
            n = _normalized(v)
            if n not in (None, [], {}, ""):
                out[k] = n
        return out
    if isinstance(value, list):
        return [_normalized(v) for v in value]
    return value


def subsets_equal_ignoring_rv(a: Iterable[Obj] | None, b: Iterable[Obj] | None) -> bool:
    return bool(_normalized(list(a or [])) == _normalized(list(b or [])))
