"""The gRPC probe (upstream pkg/probe/grpc): `grpc.health.v1.Health/Check` against the pod.

The container must serve the standard gRPC health protocol on the probe's port (plaintext; the
kubelet offers no credentials, as upstream). One call per probe, within the probe's timeout:

- no connection within the timeout -> Failure "timeout: failed to connect service "ip:port" within 1s: ...";
- the server lacks the health service (UNIMPLEMENTED) -> Failure "error: this server does not
  implement the grpc health protocol (grpc.health.v1.Health): <message>";
- the call times out -> Failure "timeout: health rpc did not complete within 1s";
- any other error -> Failure "error: health rpc probe failed: <error>";
- a status other than SERVING -> Failure "service unhealthy (responded with "NOT_SERVING")";
- SERVING -> Success "service healthy".

The messages are tiny (`HealthCheckRequest{service = 1}`, `HealthCheckResponse{status = 1}`), so
they are encoded by hand with the project's protobuf writer and reader.
"""

from __future__ import annotations

import asyncio

import grpc
import grpc.aio

from kubecore.api.gotime import format_seconds
from kubecore.api.protobuf.encode import Writer
from kubecore.api.protobuf.wire import VARINT, WireError, iter_fields

__all__ = ["CHECK", "SERVING_STATUS", "encode_request", "decode_response", "encode_response", "check"]

CHECK = "/grpc.health.v1.Health/Check"
SERVING_STATUS = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}
SERVING = 1
USER_AGENT = "kube-probe/1.34"


def encode_request(service: str) -> bytes:
    return Writer().string(1, service).finish()


def decode_request(raw: bytes) -> str:
    for num, wire_type, value in iter_fields(raw):
        if num == 1 and isinstance(value, bytes):
            return value.decode("utf-8", errors="replace")
    return ""


def encode_response(status: int) -> bytes:
    return Writer().integer(1, status).finish()


def decode_response(raw: bytes) -> int:
    """The ServingStatus number (0, UNKNOWN, when absent)."""
    for num, wire_type, value in iter_fields(raw):
        if num == 1 and wire_type == VARINT and isinstance(value, int):
            return value
    return 0


async def check(host: str, port: int, service: str, *, timeout: float) -> tuple[bool, str]:
    """(healthy, message) for one probe; never raises for the server's behaviour."""
    addr = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    limit = format_seconds(timeout)
    async with grpc.aio.insecure_channel(addr, options=[("grpc.primary_user_agent", USER_AGENT)]) as channel:
        try:
            await asyncio.wait_for(channel.channel_ready(), timeout)
        except asyncio.TimeoutError:
            return False, f'timeout: failed to connect service "{addr}" within {limit}: context deadline exceeded'
        call = channel.unary_unary(CHECK, request_serializer=encode_request, response_deserializer=decode_response)
        try:
            status = await call(service, timeout=timeout)
        except grpc.aio.AioRpcError as e:
            if e.code() == grpc.StatusCode.UNIMPLEMENTED:
                return False, ("error: this server does not implement the grpc health protocol "
                               f"(grpc.health.v1.Health): {e.details()}")
            if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                return False, f"timeout: health rpc did not complete within {limit}"
            return False, f"error: health rpc probe failed: rpc error: code = {_code_name(e.code())} desc = {e.details()}"
        except WireError as e:
            return False, f"error: health rpc probe failed: {e}"
    if status != SERVING:
        return False, f'service unhealthy (responded with "{SERVING_STATUS.get(status, str(status))}")'
    return True, "service healthy"


def _code_name(code: grpc.StatusCode) -> str:
    """Go's codes.Code String(): "Unavailable", "PermissionDenied", ..."""
    return "".join(part.capitalize() for part in code.name.split("_"))
