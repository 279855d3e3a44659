"""The downward API: a pod's own fields and its containers' resources as strings, for env vars
(`valueFrom.fieldRef` / `resourceFieldRef`) and downwardAPI volume files (upstream
pkg/fieldpath, pkg/api/v1/resource ExtractContainerResourceValue, kubelet podFieldSelectorRuntimeValue).

Field paths:
- everywhere: metadata.name, metadata.namespace, metadata.uid, metadata.labels['k'] and
  metadata.annotations['k'] (a missing key is "");
- volumes also: metadata.labels and metadata.annotations whole, one `k="v"` line per key, keys
  sorted, values quoted as Go's %q (`format_map`);
- env also: spec.nodeName, spec.serviceAccountName, status.hostIP(s), status.podIP(s) (the IPs of
  the sandbox being started, which the API may not show yet).
Anything else is a `DownwardError` ("unsupported fieldPath: x").

Resources (`resource_value`): limits.cpu|memory|ephemeral-storage and requests.* of a container,
divided by `divisor` (default 1) and rounded up; cpu in millicores (`limits.cpu` with divisor 1m
is the millicores). A limit the container does not set is the node's allocatable, as upstream's
defaultPodLimitsForDownwardAPI; a request it does not set is 0.
"""

from __future__ import annotations

from typing import Any

from kubecore.api import quantity
from kubecore.api.errors import go_quote
from kubecore.kubelet import podutil

Obj = dict[str, Any]
RESOURCES = ("cpu", "memory", "ephemeral-storage")


class DownwardError(Exception):
    """A field path or resource this kubelet cannot resolve; the message is upstream's."""


def format_map(m: dict[str, Any]) -> str:
    """fieldpath.FormatMap: `k="v"` lines, sorted by key, without a final newline."""
    return "\n".join(f"{k}={go_quote(str(m[k]))}" for k in sorted(m))


def _subscript(path: str) -> tuple[str, str] | None:
    """`metadata.labels['k']` -> ("labels", "k")."""
    for section in ("labels", "annotations"):
        prefix = f"metadata.{section}['"
        if path.startswith(prefix) and path.endswith("']"):
            return section, path[len(prefix):-2]
    return None


def metadata_value(pod: Obj, path: str) -> str:
    """ExtractFieldPathAsString over the pod's metadata."""
    m = podutil.meta(pod)
    sub = _subscript(path)
    if sub is not None:
        return str((m.get(sub[0]) or {}).get(sub[1], ""))
    if path in ("metadata.labels", "metadata.annotations"):
        return format_map(m.get(path.split(".", 1)[1]) or {})
    if path in ("metadata.name", "metadata.namespace", "metadata.uid"):
        return str(m.get(path.split(".", 1)[1]) or "")
    raise DownwardError(f"unsupported fieldPath: {path}")


def env_field_value(pod: Obj, path: str, *, node_name: str, host_ips: list[str], pod_ips: list[str]) -> str:
    """podFieldSelectorRuntimeValue: what an env var's fieldRef resolves to."""
    spec = podutil.spec(pod)
    if path == "spec.nodeName":
        return str(spec.get("nodeName") or node_name)
    if path == "spec.serviceAccountName":
        return str(spec.get("serviceAccountName") or "")
    if path in ("status.hostIP", "status.hostIPs"):
        return host_ips[0] if path == "status.hostIP" and host_ips else ",".join(host_ips)
    if path in ("status.podIP", "status.podIPs"):
        ips = pod_ips or [str(p.get("ip")) for p in (pod.get("status") or {}).get("podIPs") or []]
        return (ips[0] if ips else "") if path == "status.podIP" else ",".join(ips)
    return metadata_value(pod, path)


def _divisor(ref: Obj) -> quantity.Quantity:
    raw = ref.get("divisor")
    if raw in (None, "", 0, "0"):
        return quantity.parse("1")
    try:
        d = quantity.parse_json(raw)
    except quantity.QuantityError as e:
        raise DownwardError(f"invalid divisor {raw!r}: {e}") from None
    return d if not d.is_zero() else quantity.parse("1")


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def amount(section: Any, name: str) -> quantity.Quantity | None:
    """`section[name]` as a quantity (None when absent or not a quantity)."""
    if not isinstance(section, dict) or section.get(name) is None:
        return None
    try:
        return quantity.parse_json(section[name])
    except quantity.QuantityError:
        return None


def resource_value(container: Obj, ref: Obj, *, allocatable: dict[str, str]) -> str:
    """ExtractContainerResourceValue with node-allocatable limits (see the module docstring)."""
    resource = str(ref.get("resource") or "")
    kind, _, name = resource.partition(".")
    if kind not in ("limits", "requests") or name not in RESOURCES:
        raise DownwardError(f"unsupported container resource : {resource}")
    res = container.get("resources") or {}
    amount_ = amount(res.get(kind), name)
    if amount_ is None and kind == "limits" and allocatable.get(name):
        amount_ = quantity.parse(allocatable[name])
    value = amount_ or quantity.parse("0")
    divisor = _divisor(ref)
    if name == "cpu":
        return str(_ceil_div(value.milli_value(), max(1, divisor.milli_value())))
    return str(_ceil_div(value.value(), max(1, divisor.value())))


def find_container(pod: Obj, name: str) -> Obj:
    """The container (or init container) called `name`, for a volume's resourceFieldRef."""
    for c in [*podutil.containers(pod), *podutil.init_containers(pod)]:
        if c.get("name") == name:
            return c
    raise DownwardError(f"container {name} not found in pod {podutil.format_pod(pod)}")
