"""Turning a Service's pods into EndpointSlices with as few writes as possible (upstream
staging/src/k8s.io/endpointslice/reconciler.go).

`plan_slices` is pure: from the Service, its pods, the existing slices and a node lookup it
computes which slices to create, update and delete. Per address type (IPv4/IPv6 from the
Service's ipFamilies; slices of a type the Service no longer has are deleted), pods are grouped by
their resolved ports (`port_map_key`), and each group is reconciled with its existing slices:

1. every existing slice keeps only endpoints still desired (updated in place when their
   conditions, node, zone or targetRef changed); a slice left empty is deleted, a changed one
   (or one whose labels no longer mirror the Service's) is updated;
2. desired endpoints not placed yet first fill the slices already being updated, fullest first,
   up to `max_per_slice` (100);
3. what remains goes into the unchanged slice it fits best (only when fewer than a whole slice
   remain), then into new slices.

Slices of a port group no longer wanted, and slices not owned by the Service, are deleted. With
no slice left at all, one empty placeholder slice is kept (not deleted and re-created). Finally,
creates are turned into updates of slices that would be deleted (same address type, owned by the
Service), so churn stays low: updating beats deleting and creating.

`Reconciler.reconcile` applies a plan: creates (skipped while the Service is being deleted),
updates, deletes, stamping the last-change-trigger-time annotation on what it writes, and records
what it wrote in the `EndpointSliceTracker`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from kubecore.client.errors import NotFound
from kubecore.client.resource import ResourceClient
from kubecore.controllers.controller_utils import (
    NAMESPACE_TERMINATING_CAUSE, format_time, has_status_cause, labels_of, meta,
)
from kubecore.controllers.endpointslice_tracking import EndpointSliceTracker
from kubecore.controllers.endpointslice_utils import (
    ANNOTATION_TRIGGER_TIME, CONTROLLER_NAME, EndpointKey, PortMapKey, address_types_for_service, endpoint_key,
    endpoint_ports, endpoints_equal_beyond_key, new_endpoint_slice, owned_by, pod_to_endpoint, port_map_key,
    should_pod_be_in_endpoints, slice_labels,
)

log = logging.getLogger(__name__)

Obj = dict[str, Any]
MAX_ENDPOINTS_PER_SLICE = 100
NodeLookup = Callable[[str], "Obj | None"]


def _copy(obj: Obj) -> Obj:
    out: Obj = msgspec.json.decode(msgspec.json.encode(obj))
    return out


def _endpoints(s: Obj) -> list[Obj]:
    return list(s.get("endpoints") or [])


@dataclass
class SlicePlan:
    create: list[Obj] = field(default_factory=list)
    update: list[Obj] = field(default_factory=list)
    delete: list[Obj] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    """Pods left out for now (their node is unknown): the sync fails after writing, to retry."""


def _slice_to_fill(slices: list[Obj], count: int, max_per_slice: int) -> Obj | None:
    """The slice that would be closest to full after taking `count` endpoints (getSliceToFill)."""
    closest_diff, closest = max_per_slice, None
    for s in slices:
        diff = max_per_slice - (count + len(_endpoints(s)))
        if 0 <= diff < closest_diff:
            closest_diff, closest = diff, s
            if diff == 0:
                break
    return closest


def _pop(desired: dict[EndpointKey, Obj]) -> Obj:
    key = next(iter(desired))
    return desired.pop(key)


def plan_port_group(service: Obj, existing: list[Obj], desired: dict[EndpointKey, Obj], *, ports: list[Obj],
                    address_type: str, max_per_slice: int,
                    controller_name: str = CONTROLLER_NAME) -> tuple[list[Obj], list[Obj], list[Obj]]:
    """(create, update, delete) for one port group (upstream's reconcileByPortMapping). Consumes `desired`."""
    by_name: dict[str, Obj] = {}
    unchanged: list[str] = []
    to_update: list[str] = []
    to_delete: list[str] = []
    for s in existing:  # 1. keep what is still desired
        name = str(meta(s).get("name"))
        by_name[name] = s
        kept, changed = [], False
        for ep in _endpoints(s):
            want = desired.pop(endpoint_key(ep), None)
            if want is not None:
                kept.append(want)
                changed = changed or not endpoints_equal_beyond_key(want, ep)
        labels, labels_changed = slice_labels(labels_of(s), service, controller_name)
        if changed or len(kept) != len(_endpoints(s)):
            if not kept:
                to_delete.append(name)
                continue
            new = _copy(s)
            new["endpoints"] = kept
            new["metadata"]["labels"] = labels
            by_name[name] = new
            to_update.append(name)
        elif labels_changed:
            new = _copy(s)
            new["metadata"]["labels"] = labels
            by_name[name] = new
            to_update.append(name)
        else:
            unchanged.append(name)
    if desired and to_update:  # 2. fill the slices being updated, fullest first
        for s in sorted((by_name[n] for n in to_update), key=lambda x: -len(_endpoints(x))):
            while desired and len(s["endpoints"]) < max_per_slice:
                s["endpoints"].append(_pop(desired))
    creates: list[Obj] = []
    while desired:  # 3. an unchanged slice that fits the rest, or new slices
        target: Obj | None = None
        if len(desired) < max_per_slice and unchanged:
            target = _slice_to_fill([by_name[n] for n in unchanged], len(desired), max_per_slice)
        if target is None:
            target = new_endpoint_slice(service, ports=ports, address_type=address_type,
                                        controller_name=controller_name)
        else:
            target = _copy(target)
            by_name[str(meta(target).get("name"))] = target
        target.setdefault("endpoints", [])
        while desired and len(target["endpoints"]) < max_per_slice:
            target["endpoints"].append(_pop(desired))
        target_name = str(meta(target).get("name") or "")
        if target_name:
            to_update.append(target_name)
            unchanged.remove(target_name)
        else:
            creates.append(target)
    return creates, [by_name[n] for n in to_update], [by_name[n] for n in to_delete]


def _same_placeholder(existing: Obj, placeholder: Obj) -> bool:
    """Upstream's placeholderSliceCompare: namespace, labels, owners, ports, type, endpoints."""
    em, pm = meta(existing), meta(placeholder)
    return (em.get("namespace") == pm.get("namespace") and (em.get("labels") or {}) == (pm.get("labels") or {})
            and (em.get("ownerReferences") or []) == (pm.get("ownerReferences") or [])
            and not existing.get("ports") and not _endpoints(existing)
            and existing.get("addressType") == placeholder.get("addressType"))


def plan_address_type(service: Obj, pods: list[Obj], existing: list[Obj], *, address_type: str,
                      node_lookup: NodeLookup, max_per_slice: int = MAX_ENDPOINTS_PER_SLICE,
                      controller_name: str = CONTROLLER_NAME) -> SlicePlan:
    """The plan for one address type (upstream's reconcileByAddressType)."""
    plan = SlicePlan()
    existing_by_ports: dict[PortMapKey, list[Obj]] = {}
    for s in existing:
        if owned_by(s, service):
            existing_by_ports.setdefault(port_map_key(s.get("ports")), []).append(s)
        else:
            plan.delete.append(s)
    desired_ports: dict[PortMapKey, list[Obj]] = {}
    desired_eps: dict[PortMapKey, dict[EndpointKey, Obj]] = {}
    publish_not_ready = bool((service.get("spec") or {}).get("publishNotReadyAddresses"))
    for pod in pods:
        if not should_pod_be_in_endpoints(pod, include_terminating=True):
            continue
        ports = endpoint_ports(service, pod)
        key = port_map_key(ports)
        desired_ports.setdefault(key, ports)
        group = desired_eps.setdefault(key, {})
        node_name = str((pod.get("spec") or {}).get("nodeName") or "")
        node = node_lookup(node_name)
        if node is None and not publish_not_ready:
            plan.errors.append(f"skipping Pod {meta(pod).get('name')} for Service {meta(service).get('namespace')}/"
                               f"{meta(service).get('name')}: Node {node_name} Not Found")
            continue
        ep = pod_to_endpoint(pod, node, service, address_type)
        if ep["addresses"]:
            group[endpoint_key(ep)] = ep
    for key, eps in desired_eps.items():
        c, u, d = plan_port_group(service, existing_by_ports.get(key, []), eps, ports=desired_ports[key],
                                  address_type=address_type, max_per_slice=max_per_slice,
                                  controller_name=controller_name)
        plan.create += c
        plan.update += u
        plan.delete += d
    for key, slices in existing_by_ports.items():
        if key not in desired_eps:
            plan.delete += slices
    if len(existing) == len(plan.delete) and not plan.create:
        placeholder = new_endpoint_slice(service, ports=[], address_type=address_type, controller_name=controller_name)
        if len(plan.delete) == 1 and _same_placeholder(plan.delete[0], placeholder):
            plan.delete = []
        else:
            plan.create.append(placeholder)
    return plan


def recycle_deletes(service: Obj, plan: SlicePlan) -> SlicePlan:
    """Turn creates into updates of slices that would be deleted (upstream's finalize, first loop)."""
    creates, updates, deletes = list(plan.create), list(plan.update), list(plan.delete)
    i = 0
    while i < len(deletes) and creates:
        old, new = deletes[i], creates[-1]
        if old.get("addressType") == new.get("addressType") and owned_by(old, service):
            new = _copy(new)
            new["metadata"]["name"] = meta(old).get("name")
            creates.pop()
            updates.append(new)
            deletes.pop(i)
        else:
            i += 1
    return SlicePlan(create=creates, update=updates, delete=deletes, errors=plan.errors)


def plan_slices(service: Obj, pods: list[Obj], existing: list[Obj], *, node_lookup: NodeLookup,
                max_per_slice: int = MAX_ENDPOINTS_PER_SLICE, controller_name: str = CONTROLLER_NAME) -> SlicePlan:
    """Everything to write for `service` (upstream's Reconcile up to finalize's writes)."""
    supported = address_types_for_service(service)
    plan = SlicePlan()
    by_type: dict[str, list[Obj]] = {t: [] for t in supported}
    for s in existing:
        t = str(s.get("addressType") or "")
        if t in by_type:
            by_type[t].append(s)
        else:
            plan.delete.append(s)
    for t in supported:
        p = plan_address_type(service, pods, by_type[t], address_type=t, node_lookup=node_lookup,
                              max_per_slice=max_per_slice, controller_name=controller_name)
        p = recycle_deletes(service, p)
        plan.create += p.create
        plan.update += p.update
        plan.delete += p.delete
        plan.errors += p.errors
    return plan


def with_trigger_time(endpoint_slice: Obj, trigger_time: float | None) -> Obj:
    out = dict(endpoint_slice)
    m = dict(meta(out))
    annotations = dict(m.get("annotations") or {})
    if trigger_time is not None:
        annotations[ANNOTATION_TRIGGER_TIME] = format_time(trigger_time)
    else:
        annotations.pop(ANNOTATION_TRIGGER_TIME, None)
    m["annotations"] = annotations
    out["metadata"] = m
    return out


class Reconciler:
    """Applies plans through the API; remembers its writes in `tracker`."""

    def __init__(self, slices: ResourceClient, tracker: EndpointSliceTracker, *,
                 max_per_slice: int = MAX_ENDPOINTS_PER_SLICE, controller_name: str = CONTROLLER_NAME) -> None:
        self.slices = slices
        self.tracker = tracker
        self.max_per_slice = max_per_slice
        self.controller_name = controller_name

    async def reconcile(self, service: Obj, pods: list[Obj], existing: list[Obj], *, node_lookup: NodeLookup,
                        trigger_time: float | None) -> None:
        plan = plan_slices(service, pods, existing, node_lookup=node_lookup, max_per_slice=self.max_per_slice,
                           controller_name=self.controller_name)
        await self.apply(service, plan, trigger_time=trigger_time)
        if plan.errors:
            raise RuntimeError("; ".join(plan.errors))

    async def apply(self, service: Obj, plan: SlicePlan, *, trigger_time: float | None) -> None:
        m = meta(service)
        ns, name = str(m.get("namespace")), str(m.get("name"))
        if not m.get("deletionTimestamp"):  # no new slices racing the garbage collector
            for s in plan.create:
                try:
                    created = await self.slices.create(with_trigger_time(s, trigger_time), namespace=ns)
                except Exception as e:
                    if has_status_cause(e, NAMESPACE_TERMINATING_CAUSE):
                        return
                    raise RuntimeError(f"failed to create EndpointSlice for Service {ns}/{name}: {e}") from e
                self.tracker.update(created)
        for s in plan.update:
            try:
                updated = await self.slices.update(with_trigger_time(s, trigger_time), namespace=ns)
            except Exception as e:
                raise RuntimeError(f"failed to update {meta(s).get('name')} EndpointSlice for Service "
                                   f"{ns}/{name}: {e}") from e
            self.tracker.update(updated)
        for s in plan.delete:
            try:
                await self.slices.delete(str(meta(s).get("name")), namespace=ns)
            except NotFound:
                continue
            except Exception as e:
                raise RuntimeError(f"failed to delete {meta(s).get('name')} EndpointSlice for Service "
                                   f"{ns}/{name}: {e}") from e
            self.tracker.expect_deletion(s)
