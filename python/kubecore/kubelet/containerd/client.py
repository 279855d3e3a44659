"""`ContainerdRuntime`: `cri.Runtime` over gRPC to a CRI v1 runtime (containerd's CRI plugin) on a
unix socket, with the hand-written codec of `codec.py` (no generated code, no `protobuf` package).

    runtime = ContainerdRuntime("/var/lib/kubecore/containerd/containerd.sock")
    sid = await runtime.run_pod_sandbox(config)
    ...
    await runtime.close()

What it guarantees on top of the wire:
- A failed call raises the `cri.CriError` subclass named after its gRPC status code (`NotFound`,
  `DeadlineExceeded`, ...; codes without a subclass raise `CriError` with `code` set to the name).
  A socket nobody answers on is `Unavailable`.
- Stop*/Remove* never raise NotFound (the proto's idempotence, whatever the runtime answers).
- A container created without a Linux security context gets the kubelet's default namespaces
  (network and IPC of the pod, its own PID namespace, the sandbox's network mode), so containerd
  does not fall back to sharing the sandbox's PID namespace (proto enum 0 is POD).
- A pull that fails while the image is present locally answers the local image and logs the
  failure: a node without a registry (kubecore builds its images locally, `images.py`) still runs
  pods whose pull policy is Always.
- `get_container_events` follows GetContainerEvents and raises `cri.Unimplemented` when the
  runtime has none (containerd 1.6 answers UNIMPLEMENTED; the PLEG then relists).

Every call carries a deadline (`timeout`, 2 minutes by default as the Go kubelet's runtime
requests); ExecSync and StopContainer extend it by their own timeout.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, TypeVar

import grpc
import grpc.aio
import msgspec

from kubecore.kubelet import cri
from kubecore.kubelet.containerd import codec
from kubecore.kubelet.containerd import messages as m
from kubecore.kubelet.containerd.streaming_rpc import StreamingCalls

log = logging.getLogger(__name__)

RUNTIME_SERVICE = "/runtime.v1.RuntimeService/"
IMAGE_SERVICE = "/runtime.v1.ImageService/"
DEFAULT_TIMEOUT = 120.0
MAX_MESSAGE = 16 << 20

R = TypeVar("R", bound=msgspec.Struct)

_ERRORS: dict[grpc.StatusCode, type[cri.CriError]] = {
    grpc.StatusCode.NOT_FOUND: cri.NotFound,
    grpc.StatusCode.ALREADY_EXISTS: cri.AlreadyExists,
    grpc.StatusCode.INVALID_ARGUMENT: cri.InvalidArgument,
    grpc.StatusCode.FAILED_PRECONDITION: cri.FailedPrecondition,
    grpc.StatusCode.DEADLINE_EXCEEDED: cri.DeadlineExceeded,
    grpc.StatusCode.UNIMPLEMENTED: cri.Unimplemented,
    grpc.StatusCode.UNAVAILABLE: cri.Unavailable,
}


def cri_error(e: grpc.aio.AioRpcError, method: str) -> cri.CriError:
    """The typed error for a failed call (`code` is the gRPC code's CamelCase name)."""
    status = e.code()
    cls = _ERRORS.get(status, cri.CriError)
    err = cls(f"{method}: {e.details() or status.name}")
    if cls is cri.CriError:
        err.code = "".join(part.capitalize() for part in status.name.split("_"))
    return err


class ContainerdRuntime(StreamingCalls):  # Exec/Attach/PortForward: streaming_rpc.py
    """A CRI v1 runtime behind `socket` (see the module docstring). Implements `cri.Runtime`."""

    def __init__(self, socket: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.socket = socket
        self.timeout = timeout
        self._channel: grpc.aio.Channel | None = None

    def _chan(self) -> grpc.aio.Channel:
        if self._channel is None:
            self._channel = grpc.aio.insecure_channel(
                f"unix://{self.socket}",
                options=[("grpc.max_receive_message_length", MAX_MESSAGE),
                         ("grpc.max_send_message_length", MAX_MESSAGE)])
        return self._channel

    async def close(self) -> None:
        if self._channel is not None:
            channel, self._channel = self._channel, None
            await channel.close()

    async def __aenter__(self) -> ContainerdRuntime:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _call(self, method: str, request: msgspec.Struct, response: type[R], *,
                    extra_timeout: float = 0.0) -> R:
        stub = self._chan().unary_unary(method, request_serializer=codec.encode,
                                        response_deserializer=functools.partial(codec.decode, response))
        try:
            result: R = await stub(request, timeout=self.timeout + extra_timeout)
        except grpc.aio.AioRpcError as e:
            raise cri_error(e, method.rsplit("/", 1)[-1]) from None
        return result

    async def _rt(self, name: str, request: msgspec.Struct, response: type[R], *, extra_timeout: float = 0.0) -> R:
        return await self._call(RUNTIME_SERVICE + name, request, response, extra_timeout=extra_timeout)

    async def _img(self, name: str, request: msgspec.Struct, response: type[R]) -> R:
        return await self._call(IMAGE_SERVICE + name, request, response)

    async def _idempotent(self, name: str, request: msgspec.Struct) -> None:
        try:
            await self._rt(name, request, m.Empty)
        except cri.NotFound:
            pass

    # -- runtime -----------------------------------------------------------------------------------
    async def version(self, api_version: str = "v1") -> cri.VersionResponse:
        return await self._rt("Version", m.VersionRequest(version=api_version), cri.VersionResponse)

    async def status(self, verbose: bool = False) -> cri.StatusResponse:
        return await self._rt("Status", m.StatusRequest(verbose=verbose), cri.StatusResponse)

    async def update_runtime_config(self, runtime_config: cri.RuntimeConfig) -> None:
        await self._rt("UpdateRuntimeConfig", m.UpdateRuntimeConfigRequest(runtime_config=runtime_config), m.Empty)

    # -- sandboxes ---------------------------------------------------------------------------------
    async def run_pod_sandbox(self, config: cri.PodSandboxConfig, runtime_handler: str = "") -> str:
        req = m.RunPodSandboxRequest(config=config, runtime_handler=runtime_handler)
        return (await self._rt("RunPodSandbox", req, m.Ref)).value

    async def stop_pod_sandbox(self, pod_sandbox_id: str) -> None:
        await self._idempotent("StopPodSandbox", m.Ref(value=pod_sandbox_id))

    async def remove_pod_sandbox(self, pod_sandbox_id: str) -> None:
        await self._idempotent("RemovePodSandbox", m.Ref(value=pod_sandbox_id))

    async def pod_sandbox_status(self, pod_sandbox_id: str, verbose: bool = False) -> cri.PodSandboxStatusResponse:
        req = m.RefVerbose(value=pod_sandbox_id, verbose=verbose)
        return await self._rt("PodSandboxStatus", req, cri.PodSandboxStatusResponse)

    async def list_pod_sandbox(self, filter: cri.PodSandboxFilter | None = None) -> list[cri.PodSandbox]:
        return (await self._rt("ListPodSandbox", m.ListPodSandboxRequest(filter=filter), m.ListPodSandboxResponse)).items

    # -- containers --------------------------------------------------------------------------------
    async def create_container(self, pod_sandbox_id: str, config: cri.ContainerConfig,
                               sandbox_config: cri.PodSandboxConfig) -> str:
        req = m.CreateContainerRequest(pod_sandbox_id=pod_sandbox_id, config=with_default_security(config, sandbox_config),
                                       sandbox_config=sandbox_config)
        return (await self._rt("CreateContainer", req, m.Ref)).value

    async def start_container(self, container_id: str) -> None:
        await self._rt("StartContainer", m.Ref(value=container_id), m.Empty)

    async def stop_container(self, container_id: str, timeout: int) -> None:
        try:
            await self._rt("StopContainer", m.StopContainerRequest(container_id=container_id, timeout=timeout),
                           m.Empty, extra_timeout=max(0, timeout))
        except cri.NotFound:
            pass

    async def remove_container(self, container_id: str) -> None:
        await self._idempotent("RemoveContainer", m.Ref(value=container_id))

    async def list_containers(self, filter: cri.ContainerFilter | None = None) -> list[cri.Container]:
        req = m.ListContainersRequest(filter=filter)
        return (await self._rt("ListContainers", req, m.ListContainersResponse)).containers

    async def container_status(self, container_id: str, verbose: bool = False) -> cri.ContainerStatusResponse:
        req = m.RefVerbose(value=container_id, verbose=verbose)
        return await self._rt("ContainerStatus", req, cri.ContainerStatusResponse)

    async def exec_sync(self, container_id: str, cmd: list[str], timeout: int) -> cri.ExecSyncResponse:
        req = m.ExecSyncRequest(container_id=container_id, cmd=cmd, timeout=timeout)
        try:
            return await self._rt("ExecSync", req, cri.ExecSyncResponse, extra_timeout=max(0, timeout))
        except cri.CriError as e:
            if timeout > 0 and type(e) is cri.CriError and "timeout" in str(e) and "exceeded" in str(e):
                raise cri.DeadlineExceeded(str(e)) from None
            raise

    async def get_container_events(self) -> AsyncIterator[cri.ContainerEventResponse]:
        stub = self._chan().unary_stream(
            RUNTIME_SERVICE + "GetContainerEvents", request_serializer=codec.encode,
            response_deserializer=functools.partial(codec.decode, cri.ContainerEventResponse))
        call: Any = stub(m.Empty())
        try:
            async for event in call:
                yield event
        except grpc.aio.AioRpcError as e:
            raise cri_error(e, "GetContainerEvents") from None
        finally:
            call.cancel()

    # -- stats -------------------------------------------------------------------------------------
    async def container_stats(self, container_id: str) -> cri.ContainerStats:
        resp = await self._rt("ContainerStats", m.Ref(value=container_id), m.ContainerStatsResponse)
        return resp.stats or cri.ContainerStats()

    async def list_container_stats(self, filter: cri.ContainerStatsFilter | None = None) -> list[cri.ContainerStats]:
        req = m.ListContainerStatsRequest(filter=filter)
        return (await self._rt("ListContainerStats", req, m.ListContainerStatsResponse)).stats

    async def pod_sandbox_stats(self, pod_sandbox_id: str) -> cri.PodSandboxStats:
        resp = await self._rt("PodSandboxStats", m.Ref(value=pod_sandbox_id), m.PodSandboxStatsResponse)
        return resp.stats or cri.PodSandboxStats()

    async def list_pod_sandbox_stats(self, filter: cri.PodSandboxStatsFilter | None = None,
                                     ) -> list[cri.PodSandboxStats]:
        req = m.ListPodSandboxStatsRequest(filter=filter)
        return (await self._rt("ListPodSandboxStats", req, m.ListPodSandboxStatsResponse)).stats

    async def image_fs_info(self) -> cri.ImageFsInfoResponse:
        return await self._img("ImageFsInfo", m.Empty(), cri.ImageFsInfoResponse)

    # -- images ------------------------------------------------------------------------------------
    async def list_images(self, filter: cri.ImageSpec | None = None) -> list[cri.Image]:
        wanted = m.ImageFilter(image=filter) if filter is not None and filter.image else None
        return (await self._img("ListImages", m.ListImagesRequest(filter=wanted), m.ListImagesResponse)).images

    async def image_status(self, image: cri.ImageSpec, verbose: bool = False) -> cri.ImageStatusResponse:
        return await self._img("ImageStatus", m.ImageStatusRequest(image=image, verbose=verbose),
                               cri.ImageStatusResponse)

    async def pull_image(self, image: cri.ImageSpec, auth: cri.AuthConfig | None = None,
                         sandbox_config: cri.PodSandboxConfig | None = None) -> str:
        req = m.PullImageRequest(image=image, auth=auth, sandbox_config=sandbox_config)
        try:
            return (await self._img("PullImage", req, m.Ref)).value
        except cri.CriError as e:
            local = (await self.image_status(image)).image
            if local is None:
                raise
            log.warning("pulling %s failed (%s); using the local image %s", image.image, e, local.id)
            return local.id

    async def remove_image(self, image: cri.ImageSpec) -> None:
        try:
            await self._img("RemoveImage", m.RemoveImageRequest(image=image), m.Empty)
        except cri.NotFound:
            pass


def with_default_security(config: cri.ContainerConfig, sandbox_config: cri.PodSandboxConfig) -> cri.ContainerConfig:
    """`config` with a security context: the kubelet's defaults when it has none (see module docstring)."""
    linux = config.linux or cri.LinuxContainerConfig()
    if linux.security_context is not None:
        return config
    network = cri.NamespaceMode.POD
    if sandbox_config.linux is not None:
        network = sandbox_config.linux.security_context.namespace_options.network
    ctx = cri.LinuxContainerSecurityContext(namespace_options=cri.NamespaceOption(
        network=network, pid=cri.NamespaceMode.CONTAINER, ipc=cri.NamespaceMode.POD))
    return msgspec.structs.replace(config, linux=msgspec.structs.replace(linux, security_context=ctx))


if TYPE_CHECKING:
    _implements: type[cri.Runtime] = ContainerdRuntime  # mypy checks the class against the protocol
