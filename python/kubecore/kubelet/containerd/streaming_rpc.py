"""CRI's streaming calls (Exec, Attach, PortForward) over the containerd client: each asks the
runtime for the URL of its streaming server, which the kubelet's server (`kubelet/server.py`)
then passes the client's upgraded connection to (containerd speaks SPDY and websocket there).

The requests are described for `codec.encode` here (field numbers of cri-api's api.proto:
ExecRequest container_id 1, cmd 2, tty 3, stdin 4, stdout 5, stderr 6; AttachRequest
container_id 1, stdin 2, tty 3, stdout 4, stderr 5; PortForwardRequest pod_sandbox_id 1, port 2
as a packed repeated int32). Every response is `{url = 1}`, which is `messages.Ref`'s shape.

`StreamingCalls` is a mixin of `ContainerdRuntime`: it needs only its `_rt` call.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from kubecore.api.protobuf.encode import varint
from kubecore.kubelet.containerd import codec
from kubecore.kubelet.containerd import messages as m

R = TypeVar("R", bound=msgspec.Struct)


class ExecRequest(msgspec.Struct, kw_only=True, gc=False):
    container_id: str = ""
    cmd: list[str] = msgspec.field(default_factory=list)
    tty: bool = False
    stdin: bool = False
    stdout: bool = False
    stderr: bool = False


class AttachRequest(msgspec.Struct, kw_only=True, gc=False):
    container_id: str = ""
    stdin: bool = False
    tty: bool = False
    stdout: bool = False
    stderr: bool = False


class PortForwardRequest(msgspec.Struct, kw_only=True, gc=False):
    pod_sandbox_id: str = ""
    packed_ports: bytes = b""
    """The repeated int32 `port`, already packed (proto3's encoding of repeated scalars)."""


def _register(cls: type[msgspec.Struct], rows: tuple[codec.Row, ...]) -> None:
    """Describe a message to the codec, for encoding and decoding alike."""
    codec.SCHEMA[cls] = rows
    codec._INDEX[cls] = {row[0]: row for row in rows}


_B = codec.BOOL
_register(ExecRequest, ((1, "container_id", codec.STR, None), (2, "cmd", codec.STRS, None), (3, "tty", _B, None),
                        (4, "stdin", _B, None), (5, "stdout", _B, None), (6, "stderr", _B, None)))
_register(AttachRequest, ((1, "container_id", codec.STR, None), (2, "stdin", _B, None), (3, "tty", _B, None),
                          (4, "stdout", _B, None), (5, "stderr", _B, None)))
_register(PortForwardRequest, ((1, "pod_sandbox_id", codec.STR, None), (2, "packed_ports", codec.BYTES, None)))


def pack_ports(ports: list[int]) -> bytes:
    return b"".join(varint(p) for p in ports)


class StreamingCalls:
    """Exec, Attach and PortForward (see the module docstring)."""

    streaming_needs_translation = True
    """containerd 1.6/1.7's streaming server (Kubernetes <1.29 libraries) speaks SPDY and the old
    websocket protocols but not websocket `v5.channel.k8s.io` nor tunneled port-forward: the
    kubelet server answers those (`kubelet/streamtranslate.py`)."""

    async def _rt(self, name: str, request: msgspec.Struct, response: type[R], *, extra_timeout: float = 0.0) -> R:
        raise NotImplementedError  # ContainerdRuntime's

    async def exec(self, container_id: str, cmd: list[str], *, tty: bool = False, stdin: bool = False,
                   stdout: bool = True, stderr: bool = True) -> str:
        req = ExecRequest(container_id=container_id, cmd=cmd, tty=tty, stdin=stdin, stdout=stdout, stderr=stderr)
        return (await self._rt("Exec", req, m.Ref)).value

    async def attach(self, container_id: str, *, stdin: bool = False, tty: bool = False, stdout: bool = True,
                     stderr: bool = True) -> str:
        req = AttachRequest(container_id=container_id, stdin=stdin, tty=tty, stdout=stdout, stderr=stderr)
        return (await self._rt("Attach", req, m.Ref)).value

    async def port_forward(self, pod_sandbox_id: str, port: list[int]) -> str:
        req = PortForwardRequest(pod_sandbox_id=pod_sandbox_id, packed_ports=pack_ports(port))
        return (await self._rt("PortForward", req, m.Ref)).value


__all__: list[Any] = ["AttachRequest", "ExecRequest", "PortForwardRequest", "StreamingCalls", "pack_ports"]
