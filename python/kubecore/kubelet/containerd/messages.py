"""The CRI v1 request and response messages that `cri.py` does not model, because the kubelet's
interface passes their fields as parameters or returns one of their fields.

Messages with the same shape share one Struct (the wire only sees field numbers):
`Ref` is every message whose only field is a string at 1 (StopPodSandboxRequest,
RunPodSandboxResponse, StartContainerRequest, PullImageResponse, ...), `RefVerbose` the two status
requests, `Empty` every message without fields.
"""

from __future__ import annotations

import msgspec

from kubecore.kubelet import cri


class Empty(msgspec.Struct, kw_only=True, gc=False):
    pass


class Ref(msgspec.Struct, kw_only=True, gc=False):
    value: str = ""


class RefVerbose(msgspec.Struct, kw_only=True, gc=False):
    value: str = ""
    verbose: bool = False


class VersionRequest(msgspec.Struct, kw_only=True, gc=False):
    version: str = ""


class StatusRequest(msgspec.Struct, kw_only=True, gc=False):
    verbose: bool = False


class UpdateRuntimeConfigRequest(msgspec.Struct, kw_only=True, gc=False):
    runtime_config: cri.RuntimeConfig | None = None


class RunPodSandboxRequest(msgspec.Struct, kw_only=True, gc=False):
    config: cri.PodSandboxConfig | None = None
    runtime_handler: str = ""


class ListPodSandboxRequest(msgspec.Struct, kw_only=True, gc=False):
    filter: cri.PodSandboxFilter | None = None


class ListPodSandboxResponse(msgspec.Struct, kw_only=True, gc=False):
    items: list[cri.PodSandbox] = msgspec.field(default_factory=list)


class CreateContainerRequest(msgspec.Struct, kw_only=True, gc=False):
    pod_sandbox_id: str = ""
    config: cri.ContainerConfig | None = None
    sandbox_config: cri.PodSandboxConfig | None = None


class StopContainerRequest(msgspec.Struct, kw_only=True, gc=False):
    container_id: str = ""
    timeout: int = 0


class ListContainersRequest(msgspec.Struct, kw_only=True, gc=False):
    filter: cri.ContainerFilter | None = None


class ListContainersResponse(msgspec.Struct, kw_only=True, gc=False):
    containers: list[cri.Container] = msgspec.field(default_factory=list)


class ExecSyncRequest(msgspec.Struct, kw_only=True, gc=False):
    container_id: str = ""
    cmd: list[str] = msgspec.field(default_factory=list)
    timeout: int = 0


class ImageFilter(msgspec.Struct, kw_only=True, gc=False):
    image: cri.ImageSpec | None = None


class ListImagesRequest(msgspec.Struct, kw_only=True, gc=False):
    filter: ImageFilter | None = None


class ListImagesResponse(msgspec.Struct, kw_only=True, gc=False):
    images: list[cri.Image] = msgspec.field(default_factory=list)


class ImageStatusRequest(msgspec.Struct, kw_only=True, gc=False):
    image: cri.ImageSpec | None = None
    verbose: bool = False


class PullImageRequest(msgspec.Struct, kw_only=True, gc=False):
    image: cri.ImageSpec | None = None
    auth: cri.AuthConfig | None = None
    sandbox_config: cri.PodSandboxConfig | None = None


class RemoveImageRequest(msgspec.Struct, kw_only=True, gc=False):
    image: cri.ImageSpec | None = None


class ListContainerStatsRequest(msgspec.Struct, kw_only=True, gc=False):
    filter: cri.ContainerStatsFilter | None = None


class ListContainerStatsResponse(msgspec.Struct, kw_only=True, gc=False):
    stats: list[cri.ContainerStats] = msgspec.field(default_factory=list)


class ContainerStatsResponse(msgspec.Struct, kw_only=True, gc=False):
    stats: cri.ContainerStats | None = None


class ListPodSandboxStatsRequest(msgspec.Struct, kw_only=True, gc=False):
    filter: cri.PodSandboxStatsFilter | None = None


class ListPodSandboxStatsResponse(msgspec.Struct, kw_only=True, gc=False):
    stats: list[cri.PodSandboxStats] = msgspec.field(default_factory=list)


class PodSandboxStatsResponse(msgspec.Struct, kw_only=True, gc=False):
    stats: cri.PodSandboxStats | None = None
