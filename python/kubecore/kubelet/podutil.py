"""Small facts about pods as the kubelet reads them (JSON dicts straight from the API).

Names follow upstream's helpers: `format_pod` is format.Pod ("name_namespace(uid)"),
`is_restartable_init_container` is podutil.IsRestartableInitContainer (an init container with
restartPolicy Always: a sidecar), `qos_class` is v1qos.GetPodQOS, `normalize_image` is what
containerd reports for an image name ("busybox" -> "docker.io/library/busybox:latest").
"""

from __future__ import annotations

import functools
import zlib
from datetime import datetime, timezone
from typing import Any

import msgspec

from kubecore.api import quantity

Obj = dict[str, Any]

RESTART_ALWAYS, RESTART_ON_FAILURE, RESTART_NEVER = "Always", "OnFailure", "Never"
PULL_ALWAYS, PULL_IF_NOT_PRESENT, PULL_NEVER = "Always", "IfNotPresent", "Never"
PENDING, RUNNING, SUCCEEDED, FAILED = "Pending", "Running", "Succeeded", "Failed"
TERMINAL_PHASES = frozenset({SUCCEEDED, FAILED})
DEFAULT_TERMINATION_GRACE = 30
MIN_GRACE_PERIOD = 2
"""kuberuntime's minimumGracePeriodInSeconds: a container always gets at least this long."""

_encode = msgspec.json.encode


def meta(pod: Obj) -> Obj:
    m: Obj = pod.get("metadata") or {}
    return m


def spec(pod: Obj) -> Obj:
    s: Obj = pod.get("spec") or {}
    return s


def uid_of(pod: Obj) -> str:
    return str(meta(pod).get("uid") or "")


def key_of(pod: Obj) -> str:
    m = meta(pod)
    return f"{m.get('namespace') or ''}/{m.get('name') or ''}"


def format_pod(pod: Obj) -> str:
    m = meta(pod)
    return f"{m.get('name')}_{m.get('namespace')}({m.get('uid')})"


def containers(pod: Obj) -> list[Obj]:
    out: list[Obj] = spec(pod).get("containers") or []
    return out


def init_containers(pod: Obj) -> list[Obj]:
    out: list[Obj] = spec(pod).get("initContainers") or []
    return out


def restart_policy(pod: Obj) -> str:
    return str(spec(pod).get("restartPolicy") or RESTART_ALWAYS)


def should_restart_on_failure(pod: Obj) -> bool:
    return restart_policy(pod) != RESTART_NEVER


def is_restartable_init_container(container: Obj) -> bool:
    return container.get("restartPolicy") == RESTART_ALWAYS


def is_host_network(pod: Obj) -> bool:
    return bool(spec(pod).get("hostNetwork"))


def deletion_timestamp(pod: Obj) -> str | None:
    ts = meta(pod).get("deletionTimestamp")
    return str(ts) if ts else None


def termination_grace(pod: Obj) -> int:
    """The grace period a kill uses: the deletion's if the pod is being deleted, else the spec's."""
    m = meta(pod)
    if m.get("deletionTimestamp") and m.get("deletionGracePeriodSeconds") is not None:
        return int(m["deletionGracePeriodSeconds"])
    grace = spec(pod).get("terminationGracePeriodSeconds")
    return DEFAULT_TERMINATION_GRACE if grace is None else int(grace)


def phase_of(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def is_terminal(phase: str) -> bool:
    return phase in TERMINAL_PHASES


def pod_annotations(pod: Obj) -> dict[str, str]:
    out: dict[str, str] = meta(pod).get("annotations") or {}
    return out


# -- time --------------------------------------------------------------------------------------------


def rfc3339(t: float) -> str:
    """metav1.Time: whole seconds, UTC."""
    return _rfc3339_seconds(int(t))


@functools.lru_cache(maxsize=4096)
def _rfc3339_seconds(seconds: int) -> str:
    # Statuses stamp the same few seconds over and over: formatting dominates otherwise.
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(t: float) -> str:
    """metav1.MicroTime (Lease renewTime): microseconds, UTC."""
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(s: str | None) -> float | None:
    """An RFC 3339 timestamp (with or without fraction) as epoch seconds; None if absent or bad."""
    if not s:
        return None
    try:
        return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


# -- images ------------------------------------------------------------------------------------------


def split_image(name: str) -> tuple[str, str, str]:
    """(repository, tag, digest) of an image reference, docker's defaults filled in."""
    digest = ""
    if "@" in name:
        name, digest = name.split("@", 1)
    tag = ""
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name, tag = name.rsplit(":", 1)
    first, _, rest = name.partition("/")
    if not rest:
        name = f"docker.io/library/{name}"
    elif "." not in first and ":" not in first and first != "localhost":
        name = f"docker.io/{name}"
    if not tag and not digest:
        tag = "latest"
    return name, tag, digest


def normalize_image(name: str) -> str:
    repo, tag, digest = split_image(name)
    return f"{repo}:{tag}" if tag else f"{repo}@{digest}"


def image_pull_policy(container: Obj) -> str:
    """The container's policy, or the API default (Always for :latest or no tag, else IfNotPresent)."""
    policy = container.get("imagePullPolicy")
    if policy:
        return str(policy)
    _, tag, digest = split_image(str(container.get("image") or ""))
    return PULL_ALWAYS if tag == "latest" and not digest else PULL_IF_NOT_PRESENT


# -- containers ----------------------------------------------------------------------------------------


def container_hash(container: Obj) -> str:
    """A hash of the container's definition minus resources (in-place resize is not a restart),
    as the container.hash annotation records it: a changed hash means "definition changed"."""
    body = {k: v for k, v in container.items() if k != "resources"}
    return f"{zlib.crc32(_encode(body)):x}"


def container_ref(pod: Obj, container_name: str, *, init: bool = False) -> Obj:
    """The involvedObject of an event about one container (GenerateContainerRef)."""
    m = meta(pod)
    field = "spec.initContainers" if init else "spec.containers"
    path = f"{field}{{{container_name}}}"
    return {"kind": "Pod", "apiVersion": "v1", "namespace": m.get("namespace", ""), "name": m.get("name", ""),
            "uid": m.get("uid", ""), "resourceVersion": m.get("resourceVersion", ""), "fieldPath": path}


def pod_ref(pod: Obj) -> Obj:
    m = meta(pod)
    ref = {"kind": "Pod", "apiVersion": "v1", "namespace": m.get("namespace", ""), "name": m.get("name", ""),
           "uid": m.get("uid", ""), "resourceVersion": m.get("resourceVersion", "")}
    return {k: v for k, v in ref.items() if v}


def is_init_container_name(pod: Obj, name: str) -> bool:
    return any(c.get("name") == name for c in init_containers(pod))


# -- QoS ---------------------------------------------------------------------------------------------

_QOS_RESOURCES = ("cpu", "memory")


def _quantities(section: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    if not isinstance(section, dict):
        return out
    for name in _QOS_RESOURCES:
        value = section.get(name)
        if value is None:
            continue
        try:
            q = quantity.parse_json(value)
        except quantity.QuantityError:
            continue
        if q.nanos > 0:
            out[name] = q.nanos
    return out


def qos_class(pod: Obj) -> str:
    """GetPodQOS: Guaranteed when every container has cpu and memory limits equal to its requests
    (requests default to limits), BestEffort when none asks for any, else Burstable."""
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    guaranteed = True
    for c in [*containers(pod), *init_containers(pod)]:
        res = c.get("resources") or {}
        req, lim = _quantities(res.get("requests")), _quantities(res.get("limits"))
        for name, v in req.items():
            requests[name] = requests.get(name, 0) + v
        for name, v in lim.items():
            limits[name] = limits.get(name, 0) + v
        if set(lim) != set(_QOS_RESOURCES):
            guaranteed = False
        elif any(req.get(name, lim[name]) != lim[name] for name in _QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"
