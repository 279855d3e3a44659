"""The Node object a kubelet registers and the status it reports, as pure functions (upstream
kubelet_node_status.go initialNode and pkg/kubelet/nodestatus setters).

`initial_node(config, ...)`: labels kubernetes.io/hostname, kubernetes.io/os, kubernetes.io/arch
(and the beta.kubernetes.io/ os/arch twins upstream still sets), node.kubernetes.io/instance-type
only when an instance type is given, plus --node-labels; the controller-managed attach/detach
annotation; --register-with-taints; and a first status.

`set_node_status(node, ...)` runs the setters in upstream's order on the node's status:
addresses (InternalIP, Hostname), capacity/allocatable, nodeInfo, daemonEndpoints
(kubeletEndpoint.Port 10250), images (the largest `max_images`), then the conditions
MemoryPressure, DiskPressure, PIDPressure, Ready. Every condition's lastHeartbeatTime is now;
its lastTransitionTime changes only when its status does. Reasons and messages are upstream's:

| condition | False (healthy) | True |
| --- | --- | --- |
| MemoryPressure | KubeletHasSufficientMemory "kubelet has sufficient memory available" | KubeletHasInsufficientMemory |
| DiskPressure | KubeletHasNoDiskPressure "kubelet has no disk pressure" | KubeletHasDiskPressure |
| PIDPressure | KubeletHasSufficientPID "kubelet has sufficient PID available" | KubeletHasInsufficientPID |
| Ready | KubeletNotReady (message: the errors) | KubeletReady "kubelet is posting ready status" |

It returns the node events upstream records on transitions (NodeReady, NodeNotReady,
NodeHasSufficientMemory, ...). `status_changed(old, new)` is nodeStatusHasChanged: everything
compared except the conditions' lastHeartbeatTime.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from kubecore.kubelet import config as cfg
from kubecore.kubelet import cri
from kubecore.kubelet.podutil import rfc3339

Obj = dict[str, Any]
CMAD_ANNOTATION = "volumes.kubernetes.io/controller-managed-attach-detach"


@dataclass(frozen=True)
class Pressure:
    memory: bool = False
    disk: bool = False
    pid: bool = False


# (type, healthy reason, healthy message, healthy event, pressure reason, pressure message, pressure event)
_PRESSURE_CONDITIONS = (
    ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available",
     "NodeHasSufficientMemory", "KubeletHasInsufficientMemory", "kubelet has insufficient memory available",
     "NodeHasInsufficientMemory"),
    ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure", "NodeHasNoDiskPressure",
     "KubeletHasDiskPressure", "kubelet has disk pressure", "NodeHasDiskPressure"),
    ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available", "NodeHasSufficientPID",
     "KubeletHasInsufficientPID", "kubelet has insufficient PID available", "NodeHasInsufficientPID"),
)


def default_labels(config: cfg.KubeletConfig) -> dict[str, str]:
    labels = {cfg.LABEL_HOSTNAME: config.hostname or config.node_name, cfg.LABEL_OS: config.operating_system,
              cfg.LABEL_ARCH: config.architecture, cfg.BETA_LABEL_OS: config.operating_system,
              cfg.BETA_LABEL_ARCH: config.architecture}
    if config.instance_type:
        labels[cfg.LABEL_INSTANCE_TYPE] = labels[cfg.BETA_LABEL_INSTANCE_TYPE] = config.instance_type
    return labels


def initial_node(config: cfg.KubeletConfig) -> Obj:
    """The Node to create (status is filled by `set_node_status` before the create)."""
    node: Obj = {"apiVersion": "v1", "kind": "Node",
                 "metadata": {"name": config.node_name, "labels": {**default_labels(config), **config.labels},
                              "annotations": {CMAD_ANNOTATION: "true"}},
                 "spec": {}, "status": {}}
    if config.taints:
        node["spec"]["taints"] = [dict(t) for t in config.taints]
    return node


def node_ref(node_name: str) -> Obj:
    """The involvedObject of node events (upstream: uid = the node name)."""
    return {"kind": "Node", "name": node_name, "uid": node_name}


def _images(images: list[cri.Image], max_images: int) -> list[Obj]:
    ordered = sorted(images, key=lambda i: i.size, reverse=True)
    if max_images >= 0:
        ordered = ordered[:max_images]
    out = []
    for image in ordered:
        names = [*image.repo_digests, *image.repo_tags]
        if names:
            out.append({"names": names, "sizeBytes": image.size})
    return out


def set_node_status(node: Obj, config: cfg.KubeletConfig, *, now: float, machine: cfg.MachineInfo,
                    runtime: cri.VersionResponse, images: list[cri.Image], node_ip: str,
                    ready_errors: list[str], pressure: Pressure = Pressure()) -> list[tuple[str, str]]:
    """Fill `node`'s status (in place); returns (event type, reason) pairs to record."""
    status = node.setdefault("status", {})
    status["addresses"] = [{"type": "InternalIP", "address": node_ip},
                           {"type": "Hostname", "address": config.hostname or config.node_name}]
    status["capacity"] = config.capacity()
    status["allocatable"] = config.allocatable()
    status["nodeInfo"] = {
        "machineID": machine.machine_id, "systemUUID": machine.system_uuid, "bootID": machine.boot_id,
        "kernelVersion": machine.kernel_version, "osImage": machine.os_image,
        "containerRuntimeVersion": f"{runtime.runtime_name}://{runtime.runtime_version}",
        "kubeletVersion": cfg.KUBELET_VERSION, "operatingSystem": config.operating_system,
        "architecture": config.architecture,
    }
    status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": config.kubelet_port}}
    listed = _images(images, config.max_images)
    if listed:
        status["images"] = listed
    else:
        status.pop("images", None)
    return set_conditions(status, now=now, ready_errors=ready_errors, pressure=pressure)


def _condition(conditions: list[Obj], ctype: str) -> Obj | None:
    return next((c for c in conditions if c.get("type") == ctype), None)


def set_conditions(status: Obj, *, now: float, ready_errors: list[str], pressure: Pressure) -> list[tuple[str, str]]:
    conditions: list[Obj] = status.setdefault("conditions", [])
    stamp = rfc3339(now)
    events: list[tuple[str, str]] = []
    flags = {"MemoryPressure": pressure.memory, "DiskPressure": pressure.disk, "PIDPressure": pressure.pid}
    for ctype, ok_reason, ok_msg, ok_event, bad_reason, bad_msg, bad_event in _PRESSURE_CONDITIONS:
        c = _condition(conditions, ctype)
        if c is None:
            c = {"type": ctype, "status": "Unknown"}
            conditions.append(c)
        c["lastHeartbeatTime"] = stamp
        want = "True" if flags[ctype] else "False"
        if c.get("status") != want:
            c["status"] = want
            c["reason"], c["message"] = (bad_reason, bad_msg) if flags[ctype] else (ok_reason, ok_msg)
            c["lastTransitionTime"] = stamp
            events.append(("Normal", bad_event if flags[ctype] else ok_event))
    if ready_errors:
        ready = {"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": ", ".join(ready_errors)}
    else:
        ready = {"type": "Ready", "status": "True", "reason": "KubeletReady",
                 "message": "kubelet is posting ready status"}
    ready["lastHeartbeatTime"] = stamp
    old = _condition(conditions, "Ready")
    if old is None:
        ready["lastTransitionTime"] = stamp
        conditions.append(ready)
    else:
        if old.get("status") == ready["status"]:
            ready["lastTransitionTime"] = old.get("lastTransitionTime") or stamp
        else:
            ready["lastTransitionTime"] = stamp
            events.append(("Normal", "NodeReady" if ready["status"] == "True" else "NodeNotReady"))
        conditions[conditions.index(old)] = ready
    return events


def _without_heartbeats(status: Obj) -> Obj:
    out = dict(status)
    out["conditions"] = [{k: v for k, v in c.items() if k != "lastHeartbeatTime"}
                         for c in status.get("conditions") or []]
    return out


def status_changed(old: Obj, new: Obj) -> bool:
    """nodeStatusHasChanged: any difference but the conditions' heartbeat times."""
    return bool(_without_heartbeats(old) != _without_heartbeats(new))


def reconcile_existing(initial: Obj, existing: Obj) -> Obj | None:
    """What to change on a node that already exists (re-registration): the controller-managed
    attach/detach annotation and the kubelet's default labels (set to ours, or removed when we
    no longer have them). Returns a metadata merge patch, or None when nothing differs."""
    want_labels = (initial.get("metadata") or {}).get("labels") or {}
    have_labels = (existing.get("metadata") or {}).get("labels") or {}
    labels: dict[str, str | None] = {}
    for key in cfg.DEFAULT_LABELS:
        if key in want_labels and have_labels.get(key) != want_labels[key]:
            labels[key] = want_labels[key]
        elif key not in want_labels and key in have_labels:
            labels[key] = None
    annotations: dict[str, str] = {}
    have_ann = (existing.get("metadata") or {}).get("annotations") or {}
    if have_ann.get(CMAD_ANNOTATION) != "true":
        annotations[CMAD_ANNOTATION] = "true"
    meta: Obj = {}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    return {"metadata": meta} if meta else None


def copy_node(node: Obj) -> Obj:
    return copy.deepcopy(node)
