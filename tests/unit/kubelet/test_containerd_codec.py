"""The CRI v1 protobuf codec (kubecore.kubelet.containerd.codec) and the wire writer beneath it.

Round trips cover every row of every message table: `populated(cls)` builds an instance whose
every field holds a non-default value. Known-bytes cases pin field numbers and encodings to
upstream's api.proto independently of the tables."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from kubecore.api.protobuf import wire
from kubecore.api.protobuf.encode import Writer, varint
from kubecore.kubelet import cri
from kubecore.kubelet.containerd import codec
from kubecore.kubelet.containerd import messages as m


def populated(cls: type[msgspec.Struct], depth: int = 0) -> Any:
    """An instance of `cls` with every field of its table set to a non-default value."""
    kwargs: dict[str, Any] = {}
    for num, name, kind, typ in codec.SCHEMA[cls]:
        if kind == codec.STR:
            kwargs[name] = f"{name}-{num}-ü"
        elif kind == codec.BYTES:
            kwargs[name] = bytes([0, 255, num])
        elif kind == codec.BOOL:
            kwargs[name] = True
        elif kind == codec.INT64:
            kwargs[name] = -(1 << 40) - num
        elif kind == codec.INT32:
            kwargs[name] = -num - 1
        elif kind == codec.UINT:
            kwargs[name] = (1 << 33) + num
        elif kind == codec.ENUM:
            kwargs[name] = list(typ)[-1]
        elif kind == codec.MSG:
            kwargs[name] = populated(typ, depth + 1)
        elif kind == codec.MSGS:
            kwargs[name] = [populated(typ, depth + 1), typ()]
        elif kind == codec.STRS:
            kwargs[name] = ["a", "", "c"]
        elif kind == codec.MAP:
            kwargs[name] = {"k": "v", "empty": "", "ключ": "значение"}
        elif kind == codec.WRAPPED:
            kwargs[name] = list(typ)[-1] if typ is not None else -7
        else:
            raise AssertionError(kind)
    return cls(**kwargs)


@pytest.mark.parametrize("cls", list(codec.SCHEMA), ids=lambda c: c.__name__)
def test_every_message_round_trips_fully_populated(cls: type[msgspec.Struct]) -> None:
    obj = populated(cls)
    data = codec.encode(obj)
    assert codec.decode(cls, data) == obj
    assert codec.encode(codec.decode(cls, data)) == data


@pytest.mark.parametrize("cls", list(codec.SCHEMA), ids=lambda c: c.__name__)
def test_default_instance_round_trips(cls: type[msgspec.Struct]) -> None:
    required = {f.name: f.type for f in msgspec.structs.fields(cls) if f.required}
    obj = cls(**{name: typ() for name, typ in required.items()})
    assert codec.decode(cls, codec.encode(obj)) == obj


def test_every_table_row_names_a_struct_field() -> None:
    for cls, rows in codec.SCHEMA.items():
        names = {f.name for f in msgspec.structs.fields(cls)}
        nums = [row[0] for row in rows]
        assert len(nums) == len(set(nums)), cls
        assert {row[1] for row in rows} <= names, cls


# -- known bytes (upstream field numbers) ---------------------------------------------------------

def test_known_bytes_string_and_negative_int64() -> None:
    req = m.StopContainerRequest(container_id="c1", timeout=-1)
    assert codec.encode(req) == b"\x0a\x02c1" + b"\x10" + b"\xff" * 9 + b"\x01"


def test_known_bytes_wrapped_state_and_map() -> None:
    f = cri.ContainerFilter(state=cri.ContainerState.CONTAINER_RUNNING, label_selector={"a": "b"})
    # state: field 2 -> ContainerStateValue{state (1) = 1}; label_selector: field 4 -> entry{1: "a", 2: "b"}
    assert codec.encode(f) == b"\x12\x02\x08\x01" + b"\x22\x06\x0a\x01a\x12\x01b"
    # an absent state is not written at all; CONTAINER_CREATED (0) is written as an empty wrapper
    assert codec.encode(cri.ContainerFilter()) == b""
    assert codec.encode(cri.ContainerFilter(state=cri.ContainerState.CONTAINER_CREATED)) == b"\x12\x00"
    assert codec.decode(cri.ContainerFilter, b"\x12\x00").state == cri.ContainerState.CONTAINER_CREATED


def test_known_bytes_high_field_number() -> None:
    # ImageSpec.user_specified_image is field 18: key (18 << 3 | 2) = 146 = varint 0x92 0x01
    assert codec.encode(cri.ImageSpec(user_specified_image="x")) == b"\x92\x01\x01x"


def test_known_bytes_nested_config() -> None:
    c = cri.ContainerConfig(linux=cri.LinuxContainerConfig(
        resources=cri.LinuxContainerResources(memory_limit_in_bytes=1 << 20)))
    # linux (15) { resources (1) { memory_limit_in_bytes (4) = 1 << 20 } }
    inner = b"\x20" + varint(1 << 20)
    mid = b"\x0a" + bytes([len(inner)]) + inner
    assert codec.encode(c) == b"\x0a\x00\x12\x00" + b"\x7a" + bytes([len(mid)]) + mid


def test_run_as_user_zero_is_present() -> None:
    ctx = cri.LinuxContainerSecurityContext(run_as_user=0)
    data = codec.encode(ctx)
    assert codec.decode(cri.LinuxContainerSecurityContext, data).run_as_user == 0
    assert codec.decode(cri.LinuxContainerSecurityContext, codec.encode(cri.LinuxContainerSecurityContext())
                        ).run_as_user is None


# -- decoding what the tables do not know ------------------------------------------------------------

def test_unknown_fields_of_every_wire_type_are_skipped() -> None:
    status = populated(cri.ContainerStatus)
    extra = (Writer().integer(99, 12345).string(100, "future").message(16, b"\x08\x01").finish()
             + varint(101 << 3 | wire.FIXED32) + b"\x01\x02\x03\x04"
             + varint(102 << 3 | wire.FIXED64) + b"\x00" * 8)
    assert codec.decode(cri.ContainerStatus, codec.encode(status) + extra) == status
    assert codec.decode(cri.ContainerStatus, extra + codec.encode(status)) == status


def test_known_field_with_another_wire_type_is_skipped() -> None:
    # id (1) sent as a varint: not a string, so ignored rather than misread
    data = varint(1 << 3 | wire.VARINT) + varint(7) + Writer().string(10, "Completed").finish()
    assert codec.decode(cri.ContainerStatus, data) == cri.ContainerStatus(reason="Completed")


def test_unknown_enum_value_stays_an_int() -> None:
    data = Writer().integer(3, 9).finish()
    status = codec.decode(cri.ContainerStatus, data)
    assert status.state == 9 and not isinstance(status.state, cri.ContainerState)


def test_response_without_status_decodes_an_empty_status() -> None:
    resp = codec.decode(cri.ContainerStatusResponse, Writer().string_map(2, {"info": "x"}).finish())
    assert resp.status == cri.ContainerStatus() and resp.info == {"info": "x"}


def test_truncated_input_raises_wire_error() -> None:
    data = codec.encode(populated(cri.PodSandboxStatus))
    with pytest.raises(wire.WireError):
        codec.decode(cri.PodSandboxStatus, data[:-3])


def test_event_with_sandbox_and_containers() -> None:
    ev = cri.ContainerEventResponse(
        container_id="abc", container_event_type=cri.ContainerEventType.CONTAINER_STOPPED_EVENT, created_at=5,
        pod_sandbox_status=cri.PodSandboxStatus(id="s", network=cri.PodSandboxNetworkStatus(ip="10.0.0.2")),
        containers_statuses=[cri.ContainerStatus(id="abc", exit_code=137, reason="OOMKilled")])
    assert codec.decode(cri.ContainerEventResponse, codec.encode(ev)) == ev


# -- the writer ---------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, (1 << 63) - 1, -1, -(1 << 63), 1 << 40])
def test_varint_round_trips_through_the_reader(value: int) -> None:
    data = varint(value)
    raw, end = wire.read_varint(data, 0)
    assert end == len(data) and wire.as_int64(raw) == value
    if value < 0:
        assert len(data) == 10


def test_writer_skips_defaults_but_writes_present_messages() -> None:
    w = Writer().integer(1, 0).boolean(2, False).string(3, "").blob(4, b"").message(5, b"")
    assert w.finish() == b"\x2a\x00"
    assert Writer().strings(1, ["", "x"]).finish() == b"\x0a\x00\x0a\x01x"
