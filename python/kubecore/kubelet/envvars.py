"""A container's environment, command and args as the runtime gets them (upstream kubelet_pods.go
makeEnvironmentVariables and kubecontainer.ExpandContainerCommandAndArgs).

Order of work, as upstream:
1. `envFrom`, in order: every key of the ConfigMap's `data` / the Secret's `data`, with `prefix`
   put in front. Keys that are not C-style env var names (`[-._a-zA-Z][-._a-zA-Z0-9]*`) are
   skipped and named in one Warning event per source, "InvalidEnvironmentVariableNames": "Keys
   [1badkey, 2alsobad] from the EnvFrom configMap default/myconfig were skipped since they are
   considered invalid environment variable names." A missing source fails the container unless
   it is `optional`.
2. `env`, in order: a `value` is expanded (`$(VAR)` over the variables defined so far: envFrom's
   and earlier env entries); `valueFrom` resolves fieldRef, resourceFieldRef (limits default to
   the node's allocatable), configMapKeyRef and secretKeyRef. A missing object or key is skipped
   when `optional`, else the container fails with upstream's message (`configmap "x" not found`,
   `couldn't find key k in ConfigMap ns/x`, `secret "x" not found`, `couldn't find key k in
   Secret ns/x`). A later definition of a name replaces an earlier one in place.
3. command and args: each string expanded over the final environment.

A failure is an `EnvError`; the runtime manager reports it as the container's waiting reason
CreateContainerConfigError. Service link variables (`enableServiceLinks`) are not generated.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubecore.kubelet import downward, expansion, podutil
from kubecore.kubelet.objects import CONFIGMAP, SECRET, ObjectError, ObjectNotFound, ObjectSource, object_data

Obj = dict[str, Any]
Event = Callable[[Obj, str, str, str], None]
"""record(involved object, "Normal"|"Warning", reason, message)."""
ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*\Z")
INVALID_NAMES = "InvalidEnvironmentVariableNames"
_KIND_WORD = {CONFIGMAP: "ConfigMap", SECRET: "Secret"}
_SOURCE_WORD = {CONFIGMAP: "configMap", SECRET: "secret"}


class EnvError(Exception):
    """The container's environment cannot be built; the message is upstream's."""


@dataclass
class EnvContext:
    """What env resolution needs besides the pod: the node's facts and where objects come from."""

    objects: ObjectSource
    node_name: str
    host_ips: list[str]
    allocatable: dict[str, str]
    record: Event = field(default=lambda _r, _t, _reason, _m: None)


async def _source(ctx: EnvContext, kind: str, namespace: str, name: str, *, optional: bool) -> dict[str, bytes] | None:
    """The object's keys, None when it is missing and optional; EnvError otherwise."""
    try:
        return object_data(kind, await ctx.objects.get(kind, namespace, name))
    except ObjectNotFound as e:
        if optional:
            return None
        raise EnvError(str(e)) from None
    except ObjectError as e:
        raise EnvError(str(e)) from None


async def _env_from(pod: Obj, container: Obj, ctx: EnvContext, env: dict[str, str]) -> None:
    namespace = str(podutil.meta(pod).get("namespace") or "")
    for source in container.get("envFrom") or []:
        kind = CONFIGMAP if source.get("configMapRef") else SECRET if source.get("secretRef") else ""
        if not kind:
            continue
        ref = source.get("configMapRef") or source.get("secretRef") or {}
        name = str(ref.get("name") or "")
        data = await _source(ctx, kind, namespace, name, optional=bool(ref.get("optional")))
        if data is None:
            continue
        prefix = str(source.get("prefix") or "")
        invalid = []
        for key, value in data.items():
            key = prefix + key
            if not ENV_NAME.match(key):
                invalid.append(key)
                continue
            env[key] = value.decode(errors="replace")
        if invalid:
            ctx.record(podutil.pod_ref(pod), "Warning", INVALID_NAMES,
                       f"Keys [{', '.join(sorted(invalid))}] from the EnvFrom {_SOURCE_WORD[kind]} {namespace}/{name} "
                       "were skipped since they are considered invalid environment variable names.")


async def _key_ref(pod: Obj, ref: Obj, kind: str, ctx: EnvContext) -> str | None:
    namespace = str(podutil.meta(pod).get("namespace") or "")
    name, key, optional = str(ref.get("name") or ""), str(ref.get("key") or ""), bool(ref.get("optional"))
    data = await _source(ctx, kind, namespace, name, optional=optional)
    if data is None:
        return None
    if key not in data:
        if optional:
            return None
        raise EnvError(f"couldn't find key {key} in {_KIND_WORD[kind]} {namespace}/{name}")
    return data[key].decode(errors="replace")


async def _value_from(pod: Obj, container: Obj, source: Obj, ctx: EnvContext, pod_ips: list[str]) -> str | None:
    try:
        if source.get("fieldRef"):
            return downward.env_field_value(pod, str(source["fieldRef"].get("fieldPath") or ""),
                                            node_name=ctx.node_name, host_ips=ctx.host_ips, pod_ips=pod_ips)
        if source.get("resourceFieldRef"):
            ref = source["resourceFieldRef"]
            target = downward.find_container(pod, str(ref["containerName"])) if ref.get("containerName") else container
            return downward.resource_value(target, ref, allocatable=ctx.allocatable)
    except downward.DownwardError as e:
        raise EnvError(str(e)) from None
    if source.get("configMapKeyRef"):
        return await _key_ref(pod, source["configMapKeyRef"], CONFIGMAP, ctx)
    if source.get("secretKeyRef"):
        return await _key_ref(pod, source["secretKeyRef"], SECRET, ctx)
    return ""


async def make_env(pod: Obj, container: Obj, ctx: EnvContext, *, pod_ips: list[str] | None = None) -> dict[str, str]:
    """The container's variables in definition order (see the module docstring)."""
    env: dict[str, str] = {}
    await _env_from(pod, container, ctx, env)
    mapping = expansion.mapping_for(env)
    for e in container.get("env") or []:
        name = str(e.get("name") or "")
        value = str(e.get("value") or "")
        if value:
            env[name] = expansion.expand(value, mapping)
        elif e.get("valueFrom"):
            resolved = await _value_from(pod, container, e["valueFrom"], ctx, pod_ips or [])
            if resolved is None:
                continue
            env[name] = resolved
        else:
            env[name] = ""
    return env


def expand_command(container: Obj, env: dict[str, str]) -> tuple[list[str], list[str]]:
    """ExpandContainerCommandAndArgs: command and args with `$(VAR)` over the final environment."""
    mapping = expansion.mapping_for(env)
    return ([expansion.expand(str(x), mapping) for x in container.get("command") or []],
            [expansion.expand(str(x), mapping) for x in container.get("args") or []])
