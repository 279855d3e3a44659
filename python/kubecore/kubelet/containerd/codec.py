"""Protobuf encoding of the CRI v1 messages (k8s.io/cri-api pkg/apis/runtime/v1/api.proto) to and
from the msgspec Structs of `cri.py` and `messages.py`.

Each message is described once, as a table of (field number, attribute, kind, type) rows in
`SCHEMA`; `encode` and `decode` walk that table, so both directions agree by construction. The
field numbers are upstream's. What the guarantees are:

- `decode(cls, encode(obj)) == obj` for every message in `SCHEMA` (proto3 drops nothing the
  Structs can hold: defaults are not written and come back as the Structs' defaults).
- Fields the table does not know (newer runtimes, the proto's fields kubecore does not model) are
  skipped; a field with an unexpected wire type is skipped too, never mistaken for another.
- Enum values the Structs' IntEnums do not know come back as plain ints.
- Malformed bytes raise `wire.WireError`.

Wrapper messages (`PodSandboxStateValue`, `ContainerStateValue`, `Int64Value`) are the `| None`
attributes of kind WRAPPED: None is "absent", anything else is written as `{1: value}`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

from kubecore.api.protobuf import wire
from kubecore.api.protobuf.encode import Writer
from kubecore.kubelet import cri
from kubecore.kubelet.containerd import messages as m

__all__ = ["SCHEMA", "decode", "encode"]

T = TypeVar("T", bound=msgspec.Struct)

# Field kinds.
STR, BYTES, BOOL, INT64, INT32, UINT, ENUM = "str", "bytes", "bool", "int64", "int32", "uint", "enum"
MSG, MAP, STRS, MSGS, WRAPPED = "msg", "map", "strs", "msgs", "wrapped"

Row = tuple[int, str, str, Any]

_NS = cri.NamespaceMode
SCHEMA: dict[type[msgspec.Struct], tuple[Row, ...]] = {
    # -- shared shapes and requests (messages.py) --
    m.Empty: (),
    m.Ref: ((1, "value", STR, None),),
    m.RefVerbose: ((1, "value", STR, None), (2, "verbose", BOOL, None)),
    m.VersionRequest: ((1, "version", STR, None),),
    m.StatusRequest: ((1, "verbose", BOOL, None),),
    m.UpdateRuntimeConfigRequest: ((1, "runtime_config", MSG, cri.RuntimeConfig),),
    m.RunPodSandboxRequest: ((1, "config", MSG, cri.PodSandboxConfig), (2, "runtime_handler", STR, None)),
    m.ListPodSandboxRequest: ((1, "filter", MSG, cri.PodSandboxFilter),),
    m.ListPodSandboxResponse: ((1, "items", MSGS, cri.PodSandbox),),
    m.CreateContainerRequest: ((1, "pod_sandbox_id", STR, None), (2, "config", MSG, cri.ContainerConfig),
                               (3, "sandbox_config", MSG, cri.PodSandboxConfig)),
    m.StopContainerRequest: ((1, "container_id", STR, None), (2, "timeout", INT64, None)),
    m.ListContainersRequest: ((1, "filter", MSG, cri.ContainerFilter),),
    m.ListContainersResponse: ((1, "containers", MSGS, cri.Container),),
    m.ExecSyncRequest: ((1, "container_id", STR, None), (2, "cmd", STRS, None), (3, "timeout", INT64, None)),
    m.ImageFilter: ((1, "image", MSG, cri.ImageSpec),),
    m.ListImagesRequest: ((1, "filter", MSG, m.ImageFilter),),
    m.ListImagesResponse: ((1, "images", MSGS, cri.Image),),
    m.ImageStatusRequest: ((1, "image", MSG, cri.ImageSpec), (2, "verbose", BOOL, None)),
    m.PullImageRequest: ((1, "image", MSG, cri.ImageSpec), (2, "auth", MSG, cri.AuthConfig),
                         (3, "sandbox_config", MSG, cri.PodSandboxConfig)),
    m.RemoveImageRequest: ((1, "image", MSG, cri.ImageSpec),),
    # -- runtime --
    cri.VersionResponse: ((1, "version", STR, None), (2, "runtime_name", STR, None),
                          (3, "runtime_version", STR, None), (4, "runtime_api_version", STR, None)),
    cri.RuntimeCondition: ((1, "type", STR, None), (2, "status", BOOL, None), (3, "reason", STR, None),
                           (4, "message", STR, None)),
    cri.RuntimeStatus: ((1, "conditions", MSGS, cri.RuntimeCondition),),
    cri.StatusResponse: ((1, "status", MSG, cri.RuntimeStatus), (2, "info", MAP, None)),
    cri.NetworkConfig: ((1, "pod_cidr", STR, None),),
    cri.RuntimeConfig: ((1, "network_config", MSG, cri.NetworkConfig),),
    # -- sandboxes --
    cri.DNSConfig: ((1, "servers", STRS, None), (2, "searches", STRS, None), (3, "options", STRS, None)),
    cri.PortMapping: ((1, "protocol", ENUM, cri.Protocol_), (2, "container_port", INT32, None),
                      (3, "host_port", INT32, None), (4, "host_ip", STR, None)),
    cri.NamespaceOption: ((1, "network", ENUM, _NS), (2, "pid", ENUM, _NS), (3, "ipc", ENUM, _NS),
                          (4, "target_id", STR, None)),
    cri.LinuxSandboxSecurityContext: ((1, "namespace_options", MSG, cri.NamespaceOption),
                                      (6, "privileged", BOOL, None)),
    cri.LinuxPodSandboxConfig: ((1, "cgroup_parent", STR, None),
                                (2, "security_context", MSG, cri.LinuxSandboxSecurityContext),
                                (3, "sysctls", MAP, None)),
    cri.PodSandboxMetadata: ((1, "name", STR, None), (2, "uid", STR, None), (3, "namespace", STR, None),
                             (4, "attempt", UINT, None)),
    cri.PodSandboxConfig: ((1, "metadata", MSG, cri.PodSandboxMetadata), (2, "hostname", STR, None),
                           (3, "log_directory", STR, None), (4, "dns_config", MSG, cri.DNSConfig),
                           (5, "port_mappings", MSGS, cri.PortMapping), (6, "labels", MAP, None),
                           (7, "annotations", MAP, None), (8, "linux", MSG, cri.LinuxPodSandboxConfig)),
    cri.PodIP: ((1, "ip", STR, None),),
    cri.PodSandboxNetworkStatus: ((1, "ip", STR, None), (2, "additional_ips", MSGS, cri.PodIP)),
    cri.Namespace: ((2, "options", MSG, cri.NamespaceOption),),
    cri.LinuxPodSandboxStatus: ((1, "namespaces", MSG, cri.Namespace),),
    cri.PodSandboxStatus: ((1, "id", STR, None), (2, "metadata", MSG, cri.PodSandboxMetadata),
                           (3, "state", ENUM, cri.PodSandboxState), (4, "created_at", INT64, None),
                           (5, "network", MSG, cri.PodSandboxNetworkStatus),
                           (6, "linux", MSG, cri.LinuxPodSandboxStatus), (7, "labels", MAP, None),
                           (8, "annotations", MAP, None), (9, "runtime_handler", STR, None)),
    cri.PodSandboxStatusResponse: ((1, "status", MSG, cri.PodSandboxStatus), (2, "info", MAP, None),
                                   (3, "containers_statuses", MSGS, cri.ContainerStatus),
                                   (4, "timestamp", INT64, None)),
    cri.PodSandboxFilter: ((1, "id", STR, None), (2, "state", WRAPPED, cri.PodSandboxState),
                           (3, "label_selector", MAP, None)),
    cri.PodSandbox: ((1, "id", STR, None), (2, "metadata", MSG, cri.PodSandboxMetadata),
                     (3, "state", ENUM, cri.PodSandboxState), (4, "created_at", INT64, None),
                     (5, "labels", MAP, None), (6, "annotations", MAP, None), (7, "runtime_handler", STR, None)),
    # -- containers --
    cri.ContainerMetadata: ((1, "name", STR, None), (2, "attempt", UINT, None)),
    cri.ImageSpec: ((1, "image", STR, None), (2, "annotations", MAP, None), (18, "user_specified_image", STR, None)),
    cri.KeyValue: ((1, "key", STR, None), (2, "value", STR, None)),
    cri.Mount: ((1, "container_path", STR, None), (2, "host_path", STR, None), (3, "readonly", BOOL, None)),
    cri.LinuxContainerResources: ((1, "cpu_period", INT64, None), (2, "cpu_quota", INT64, None),
                                  (3, "cpu_shares", INT64, None), (4, "memory_limit_in_bytes", INT64, None),
                                  (5, "oom_score_adj", INT64, None)),
    cri.Capability: ((1, "add_capabilities", STRS, None), (2, "drop_capabilities", STRS, None)),
    cri.LinuxContainerSecurityContext: ((1, "capabilities", MSG, cri.Capability), (2, "privileged", BOOL, None),
                                        (3, "namespace_options", MSG, cri.NamespaceOption),
                                        (5, "run_as_user", WRAPPED, None), (7, "readonly_rootfs", BOOL, None),
                                        (11, "no_new_privs", BOOL, None), (12, "run_as_group", WRAPPED, None)),
    cri.LinuxContainerConfig: ((1, "resources", MSG, cri.LinuxContainerResources),
                               (2, "security_context", MSG, cri.LinuxContainerSecurityContext)),
    cri.ContainerConfig: ((1, "metadata", MSG, cri.ContainerMetadata), (2, "image", MSG, cri.ImageSpec),
                          (3, "command", STRS, None), (4, "args", STRS, None), (5, "working_dir", STR, None),
                          (6, "envs", MSGS, cri.KeyValue), (7, "mounts", MSGS, cri.Mount),
                          (9, "labels", MAP, None), (10, "annotations", MAP, None), (11, "log_path", STR, None),
                          (12, "stdin", BOOL, None), (13, "stdin_once", BOOL, None), (14, "tty", BOOL, None),
                          (15, "linux", MSG, cri.LinuxContainerConfig)),
    cri.ContainerFilter: ((1, "id", STR, None), (2, "state", WRAPPED, cri.ContainerState),
                          (3, "pod_sandbox_id", STR, None), (4, "label_selector", MAP, None)),
    cri.Container: ((1, "id", STR, None), (2, "pod_sandbox_id", STR, None), (3, "metadata", MSG, cri.ContainerMetadata),
                    (4, "image", MSG, cri.ImageSpec), (5, "image_ref", STR, None),
                    (6, "state", ENUM, cri.ContainerState), (7, "created_at", INT64, None), (8, "labels", MAP, None),
                    (9, "annotations", MAP, None), (10, "image_id", STR, None)),
    cri.ContainerStatus: ((1, "id", STR, None), (2, "metadata", MSG, cri.ContainerMetadata),
                          (3, "state", ENUM, cri.ContainerState), (4, "created_at", INT64, None),
                          (5, "started_at", INT64, None), (6, "finished_at", INT64, None),
                          (7, "exit_code", INT32, None), (8, "image", MSG, cri.ImageSpec),
                          (9, "image_ref", STR, None), (10, "reason", STR, None), (11, "message", STR, None),
                          (12, "labels", MAP, None), (13, "annotations", MAP, None), (14, "mounts", MSGS, cri.Mount),
                          (15, "log_path", STR, None), (17, "image_id", STR, None)),
    cri.ContainerStatusResponse: ((1, "status", MSG, cri.ContainerStatus), (2, "info", MAP, None)),
    cri.ExecSyncResponse: ((1, "stdout", BYTES, None), (2, "stderr", BYTES, None), (3, "exit_code", INT32, None)),
    cri.ContainerEventResponse: ((1, "container_id", STR, None),
                                 (2, "container_event_type", ENUM, cri.ContainerEventType),
                                 (3, "created_at", INT64, None), (4, "pod_sandbox_status", MSG, cri.PodSandboxStatus),
                                 (5, "containers_statuses", MSGS, cri.ContainerStatus)),
    # -- images --
    cri.AuthConfig: ((1, "username", STR, None), (2, "password", STR, None), (3, "auth", STR, None),
                     (4, "server_address", STR, None), (5, "identity_token", STR, None),
                     (6, "registry_token", STR, None)),
    cri.Image: ((1, "id", STR, None), (2, "repo_tags", STRS, None), (3, "repo_digests", STRS, None),
                (4, "size", UINT, None), (6, "username", STR, None), (7, "spec", MSG, cri.ImageSpec),
                (8, "pinned", BOOL, None)),
    cri.ImageStatusResponse: ((1, "image", MSG, cri.Image), (2, "info", MAP, None)),
    # -- stats (UInt64Value wrappers are WRAPPED ints) --
    m.ListContainerStatsRequest: ((1, "filter", MSG, cri.ContainerStatsFilter),),
    m.ListContainerStatsResponse: ((1, "stats", MSGS, cri.ContainerStats),),
    m.ContainerStatsResponse: ((1, "stats", MSG, cri.ContainerStats),),
    m.ListPodSandboxStatsRequest: ((1, "filter", MSG, cri.PodSandboxStatsFilter),),
    m.ListPodSandboxStatsResponse: ((1, "stats", MSGS, cri.PodSandboxStats),),
    m.PodSandboxStatsResponse: ((1, "stats", MSG, cri.PodSandboxStats),),
    cri.ContainerStatsFilter: ((1, "id", STR, None), (2, "pod_sandbox_id", STR, None),
                               (3, "label_selector", MAP, None)),
    cri.PodSandboxStatsFilter: ((1, "id", STR, None), (2, "label_selector", MAP, None)),
    cri.ContainerAttributes: ((1, "id", STR, None), (2, "metadata", MSG, cri.ContainerMetadata),
                              (3, "labels", MAP, None), (4, "annotations", MAP, None)),
    cri.PodSandboxAttributes: ((1, "id", STR, None), (2, "metadata", MSG, cri.PodSandboxMetadata),
                               (3, "labels", MAP, None), (4, "annotations", MAP, None)),
    cri.CpuUsage: ((1, "timestamp", INT64, None), (2, "usage_core_nano_seconds", WRAPPED, None),
                   (3, "usage_nano_cores", WRAPPED, None)),
    cri.MemoryUsage: ((1, "timestamp", INT64, None), (2, "working_set_bytes", WRAPPED, None),
                      (3, "available_bytes", WRAPPED, None), (4, "usage_bytes", WRAPPED, None),
                      (5, "rss_bytes", WRAPPED, None), (6, "page_faults", WRAPPED, None),
                      (7, "major_page_faults", WRAPPED, None)),
    cri.FilesystemIdentifier: ((1, "mountpoint", STR, None),),
    cri.FilesystemUsage: ((1, "timestamp", INT64, None), (2, "fs_id", MSG, cri.FilesystemIdentifier),
                          (3, "used_bytes", WRAPPED, None), (4, "inodes_used", WRAPPED, None)),
    cri.ContainerStats: ((1, "attributes", MSG, cri.ContainerAttributes), (2, "cpu", MSG, cri.CpuUsage),
                         (3, "memory", MSG, cri.MemoryUsage), (4, "writable_layer", MSG, cri.FilesystemUsage)),
    cri.NetworkInterfaceUsage: ((1, "name", STR, None), (2, "rx_bytes", WRAPPED, None),
                                (3, "rx_errors", WRAPPED, None), (4, "tx_bytes", WRAPPED, None),
                                (5, "tx_errors", WRAPPED, None)),
    cri.NetworkUsage: ((1, "timestamp", INT64, None), (2, "default_interface", MSG, cri.NetworkInterfaceUsage),
                       (3, "interfaces", MSGS, cri.NetworkInterfaceUsage)),
    cri.ProcessUsage: ((1, "timestamp", INT64, None), (2, "process_count", WRAPPED, None)),
    cri.LinuxPodSandboxStats: ((1, "cpu", MSG, cri.CpuUsage), (2, "memory", MSG, cri.MemoryUsage),
                               (3, "network", MSG, cri.NetworkUsage), (4, "process", MSG, cri.ProcessUsage),
                               (5, "containers", MSGS, cri.ContainerStats)),
    cri.PodSandboxStats: ((1, "attributes", MSG, cri.PodSandboxAttributes), (2, "linux", MSG, cri.LinuxPodSandboxStats)),
    cri.ImageFsInfoResponse: ((1, "image_filesystems", MSGS, cri.FilesystemUsage),
                              (2, "container_filesystems", MSGS, cri.FilesystemUsage)),
}


# -- encoding --------------------------------------------------------------------------------------

def _write_int(w: Writer, num: int, value: int) -> None:
    w.integer(num, int(value))


def _write_msg(w: Writer, num: int, value: msgspec.Struct | None) -> None:
    if value is not None:
        w.message(num, encode(value))


def _write_msgs(w: Writer, num: int, values: list[msgspec.Struct]) -> None:
    for item in values:
        w.message(num, encode(item))


def _write_wrapped(w: Writer, num: int, value: int | None) -> None:
    if value is not None:
        w.message(num, Writer().integer(1, int(value)).finish())


_WRITE: dict[str, Callable[[Writer, int, Any], object]] = {
    STR: Writer.string, BYTES: Writer.blob, BOOL: Writer.boolean, STRS: Writer.strings, MAP: Writer.string_map,
    INT64: _write_int, INT32: _write_int, UINT: _write_int, ENUM: _write_int,
    MSG: _write_msg, MSGS: _write_msgs, WRAPPED: _write_wrapped,
}


def encode(obj: msgspec.Struct) -> bytes:
    """The message's wire bytes (`obj`'s class must be in SCHEMA)."""
    w = Writer()
    for num, name, kind, _ in SCHEMA[type(obj)]:
        _WRITE[kind](w, num, getattr(obj, name))
    return w.finish()


# -- decoding --------------------------------------------------------------------------------------

_EXPECTED_WIRE = {STR: wire.LEN, BYTES: wire.LEN, MSG: wire.LEN, MSGS: wire.LEN, STRS: wire.LEN, MAP: wire.LEN,
                  WRAPPED: wire.LEN, BOOL: wire.VARINT, INT64: wire.VARINT, INT32: wire.VARINT,
                  UINT: wire.VARINT, ENUM: wire.VARINT}

_INDEX: dict[type[msgspec.Struct], dict[int, Row]] = {
    cls: {row[0]: row for row in rows} for cls, rows in SCHEMA.items()}


def _enum(typ: Any, v: int) -> Any:
    try:
        return typ(v)
    except ValueError:
        return v


def _map_entry(buf: bytes) -> tuple[str, str]:
    key = value = ""
    for num, wt, v in wire.iter_fields(buf):
        if wt == wire.LEN and isinstance(v, bytes):
            if num == 1:
                key = v.decode()
            elif num == 2:
                value = v.decode()
    return key, value


def _wrapped(buf: bytes, typ: Any) -> Any:
    raw = 0
    for num, wt, v in wire.iter_fields(buf):
        if num == 1 and wt == wire.VARINT and isinstance(v, int):
            raw = v
    return wire.as_int64(raw) if typ is None else _enum(typ, raw)


_SCALAR: dict[str, Callable[[Any, Any], Any]] = {
    STR: lambda v, _t: v.decode(),
    BYTES: lambda v, _t: v,
    BOOL: lambda v, _t: v != 0,
    INT64: lambda v, _t: wire.as_int64(v),
    INT32: lambda v, _t: wire.as_int32(v),
    UINT: lambda v, _t: v,
    ENUM: lambda v, _t: _enum(_t, wire.as_int32(v)),
    MSG: lambda v, t: decode(t, v),
    WRAPPED: lambda v, t: _wrapped(v, t),
}


def _len(v: wire.FieldValue) -> bytes:
    assert isinstance(v, bytes)  # the wire type was checked against the row
    return v


def decode(cls: type[T], data: bytes) -> T:
    """The message of type `cls` in `data` (unknown fields skipped)."""
    index = _INDEX[cls]
    kwargs: dict[str, Any] = {}
    for num, wt, v in wire.iter_fields(data):
        row = index.get(num)
        if row is None or _EXPECTED_WIRE[row[2]] != wt:
            continue
        _, name, kind, typ = row
        if kind == MSGS:
            kwargs.setdefault(name, []).append(decode(typ, _len(v)))
        elif kind == STRS:
            kwargs.setdefault(name, []).append(_len(v).decode())
        elif kind == MAP:
            k, val = _map_entry(_len(v))
            kwargs.setdefault(name, {})[k] = val
        else:
            kwargs[name] = _SCALAR[kind](v, typ)
    for name, typ in _REQUIRED.get(cls, ()):
        kwargs.setdefault(name, typ())
    return cls(**kwargs)


_REQUIRED: dict[type[msgspec.Struct], list[tuple[str, Any]]] = {}
"""Attributes without a default (a response's `status`): an absent one decodes as the empty message."""
for _cls, _rows in SCHEMA.items():
    _required = {f.name for f in msgspec.structs.fields(_cls) if f.required}
    _REQUIRED[_cls] = [(name, typ) for _, name, kind, typ in _rows if name in _required and kind == MSG]
