"""ContainerdRuntime against an in-process gRPC server that plays a CRI runtime (no root, no
containerd): method paths, request bytes, gRPC codes -> cri errors, idempotent Stop/Remove, the
default security context, the local-image fallback of pulls, Unimplemented events.
The same client against a real containerd: tests/integration/test_containerd_runtime.py."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import grpc
import grpc.aio
import pytest

from kubecore.kubelet import cri
from kubecore.kubelet.containerd import ContainerdRuntime, codec
from kubecore.kubelet.containerd import messages as m

Handler = Callable[[bytes, grpc.aio.ServicerContext[bytes, bytes]], Awaitable[bytes]]


def _answer(data: bytes) -> Handler:
    async def handle(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        return data
    return handle


def _fail(code: grpc.StatusCode, details: str) -> Handler:
    async def handle(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        await context.abort(code, details)
        raise AssertionError("abort returned")
    return handle


class FakeRuntime:
    """Records each request's bytes by method name; answers from `runtime` / `images` handlers."""

    def __init__(self) -> None:
        self.requests: dict[str, bytes] = {}
        self.runtime: dict[str, Handler] = {
            "Version": _answer(codec.encode(cri.VersionResponse(runtime_name="fake", runtime_api_version="v1"))),
            "Status": _fail(grpc.StatusCode.RESOURCE_EXHAUSTED, "busy"),
            "StopContainer": _fail(grpc.StatusCode.NOT_FOUND, 'container "x" not found'),
            "RemovePodSandbox": _fail(grpc.StatusCode.NOT_FOUND, 'sandbox "x" not found'),
            "StartContainer": _fail(grpc.StatusCode.FAILED_PRECONDITION, "not created"),
            "ContainerStatus": _fail(grpc.StatusCode.NOT_FOUND, "no such container"),
            "CreateContainer": _answer(codec.encode(m.Ref(value="cid-1"))),
            "ExecSync": _fail(grpc.StatusCode.UNKNOWN, "failed to exec in container: timeout 1s exceeded"),
        }
        self.images: dict[str, Handler] = {
            "PullImage": _fail(grpc.StatusCode.UNKNOWN, "dial tcp: lookup registry-1.docker.io: no such host"),
            "ImageStatus": _answer(codec.encode(cri.ImageStatusResponse(image=cri.Image(id="sha256:local")))),
        }

    def _record(self, table: dict[str, Handler], name: str) -> grpc.RpcMethodHandler[bytes, bytes]:
        async def handle(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
            self.requests[name] = request
            return await table[name](request, context)  # looked up per call: tests swap answers
        return grpc.unary_unary_rpc_method_handler(handle)

    def handlers(self) -> list[grpc.GenericRpcHandler]:
        return [grpc.method_handlers_generic_handler(service, {n: self._record(table, n) for n in table})
                for service, table in (("runtime.v1.RuntimeService", self.runtime),
                                       ("runtime.v1.ImageService", self.images))]


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[FakeRuntime, ContainerdRuntime]]:
    fake = FakeRuntime()
    socket = str(tmp_path / "cri.sock")
    server = grpc.aio.server()
    server.add_generic_rpc_handlers(fake.handlers())
    server.add_insecure_port(f"unix://{socket}")
    await server.start()
    client = ContainerdRuntime(socket, timeout=10)
    try:
        yield fake, client
    finally:
        await client.close()
        await server.stop(None)


async def test_version_request_and_response(served: tuple[FakeRuntime, ContainerdRuntime]) -> None:
    fake, rt = served
    v = await rt.version()
    assert v.runtime_name == "fake" and v.runtime_api_version == "v1"
    assert codec.decode(m.VersionRequest, fake.requests["Version"]).version == "v1"


async def test_status_codes_become_typed_errors(served: tuple[FakeRuntime, ContainerdRuntime]) -> None:
    _, rt = served
    with pytest.raises(cri.FailedPrecondition, match="not created"):
        await rt.start_container("x")
    with pytest.raises(cri.NotFound):
        await rt.container_status("x")
    with pytest.raises(cri.CriError) as info:
        await rt.status()
    assert type(info.value) is cri.CriError and info.value.code == "ResourceExhausted"
    with pytest.raises(cri.Unimplemented):
        await rt.list_containers()


async def test_stop_and_remove_swallow_not_found(served: tuple[FakeRuntime, ContainerdRuntime]) -> None:
    fake, rt = served
    await rt.stop_container("x", 3)
    await rt.remove_pod_sandbox("x")
    assert codec.decode(m.StopContainerRequest, fake.requests["StopContainer"]) == m.StopContainerRequest(
        container_id="x", timeout=3)


async def test_exec_timeout_is_deadline_exceeded(served: tuple[FakeRuntime, ContainerdRuntime]) -> None:
    _, rt = served
    with pytest.raises(cri.DeadlineExceeded):
        await rt.exec_sync("c", ["sleep", "5"], 1)


async def test_create_container_adds_default_security_context(served: tuple[FakeRuntime, ContainerdRuntime]) -> None:
    fake, rt = served
    sandbox = cri.PodSandboxConfig(metadata=cri.PodSandboxMetadata(name="p", uid="u"), linux=cri.LinuxPodSandboxConfig(
        security_context=cri.LinuxSandboxSecurityContext(namespace_options=cri.NamespaceOption(
            network=cri.NamespaceMode.NODE))))
    config = cri.ContainerConfig(metadata=cri.ContainerMetadata(name="c"), command=["sh"])
    assert await rt.create_container("sid", config, sandbox) == "cid-1"
    sent = codec.decode(m.CreateContainerRequest, fake.requests["CreateContainer"])
    assert sent.pod_sandbox_id == "sid" and sent.sandbox_config == sandbox
    assert sent.config is not None and sent.config.linux is not None
    ctx = sent.config.linux.security_context
    assert ctx is not None and ctx.namespace_options == cri.NamespaceOption(
        network=cri.NamespaceMode.NODE, pid=cri.NamespaceMode.CONTAINER, ipc=cri.NamespaceMode.POD)


async def test_explicit_security_context_is_sent_unchanged(served: tuple[FakeRuntime, ContainerdRuntime]) -> None:
    fake, rt = served
    ctx = cri.LinuxContainerSecurityContext(privileged=True, run_as_user=1000)
    config = cri.ContainerConfig(linux=cri.LinuxContainerConfig(security_context=ctx))
    await rt.create_container("sid", config, cri.PodSandboxConfig())
    sent = codec.decode(m.CreateContainerRequest, fake.requests["CreateContainer"])
    assert sent.config == config


async def test_failed_pull_of_a_local_image_answers_the_local_image(
        served: tuple[FakeRuntime, ContainerdRuntime]) -> None:
    fake, rt = served
    assert await rt.pull_image(cri.ImageSpec(image="busybox")) == "sha256:local"
    fake.images["ImageStatus"] = _answer(codec.encode(cri.ImageStatusResponse()))
    with pytest.raises(cri.CriError, match="no such host"):
        await rt.pull_image(cri.ImageSpec(image="nginx"))


async def test_events_unimplemented(served: tuple[FakeRuntime, ContainerdRuntime]) -> None:
    _, rt = served
    with pytest.raises(cri.Unimplemented):
        async for _ in rt.get_container_events():
            pass


async def test_nobody_listening_is_unavailable(tmp_path: Path) -> None:
    async with ContainerdRuntime(str(tmp_path / "absent.sock"), timeout=5) as rt:
        with pytest.raises(cri.Unavailable):
            await rt.version()
