"""Real probe handlers against local sockets (httpGet, tcpSocket) and a fake ExecSync; the
simulated handlers' annotation answers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from kubecore.client.clock import FakeClock
from kubecore.kubelet import cri
from kubecore.kubelet.handlers import FAILURE, SUCCESS, UNKNOWN, RealHandlers, Target, resolve_port
from kubecore.kubelet.sim.behaviour import SimHandlers
from tests.unit.kubelet.kubelet_fixtures import container, make_pod

Obj = dict[str, Any]


class Exec:
    """ExecSync answers by command."""

    async def exec_sync(self, container_id: str, cmd: list[str], timeout: int) -> cri.ExecSyncResponse:
        if cmd == ["hang"]:
            raise cri.DeadlineExceeded("timed out")
        if cmd == ["gone"]:
            raise cri.FailedPrecondition("container is not running")
        return cri.ExecSyncResponse(stdout=b"out", exit_code=0 if cmd == ["true"] else 1)


@pytest.fixture
async def http_port() -> AsyncIterator[int]:
    async def handler(request: web.Request) -> web.Response:
        status = int(request.match_info["code"])
        assert request.headers["User-Agent"].startswith("kube-probe/")
        return web.Response(status=status, text=request.headers.get("X-Probe", "ok"))

    app = web.Application()
    app.router.add_get("/code/{code}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield int(port)
    await runner.cleanup()


def target(pod: Obj | None = None, ports: list[Obj] | None = None) -> Target:
    return Target(pod=pod or make_pod(), container=container("app", ports=ports or []), container_id="c1",
                  pod_ip="127.0.0.1")


async def test_http_get_codes_headers_and_named_ports(http_port: int) -> None:
    h = RealHandlers(Exec(), clock=FakeClock())  # type: ignore[arg-type]
    t = target(ports=[{"name": "web", "containerPort": http_port}])
    ok = await h.run(t, {"httpGet": {"path": "/code/200", "port": "web",
                                     "httpHeaders": [{"name": "X-Probe", "value": "hi"}]}}, timeout=2)
    assert (ok.result, ok.output) == (SUCCESS, "hi")
    assert (await h.run(t, {"httpGet": {"path": "/code/302", "port": http_port}}, timeout=2)).result == SUCCESS
    bad = await h.run(t, {"httpGet": {"path": "/code/503", "port": http_port}}, timeout=2)
    assert (bad.result, bad.output) == (FAILURE, "HTTP probe failed with statuscode: 503")
    await h.close()


async def test_tcp_socket_open_and_refused(http_port: int) -> None:
    h = RealHandlers(Exec(), clock=FakeClock())  # type: ignore[arg-type]
    assert (await h.run(target(), {"tcpSocket": {"port": http_port}}, timeout=2)).result == SUCCESS
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    refused = await h.run(target(), {"tcpSocket": {"port": port}}, timeout=2)
    assert refused.result == FAILURE and refused.output.startswith(f"dial tcp 127.0.0.1:{port}:")


async def test_exec_exit_codes_and_timeouts() -> None:
    h = RealHandlers(Exec(), clock=FakeClock())  # type: ignore[arg-type]
    assert (await h.run(target(), {"exec": {"command": ["true"]}}, timeout=1)).result == SUCCESS
    assert (await h.run(target(), {"exec": {"command": ["false"]}}, timeout=1)).result == FAILURE
    hang = await h.run(target(), {"exec": {"command": ["hang"]}}, timeout=1)
    assert (hang.result, hang.output) == (FAILURE, "command [hang] timed out")
    assert (await h.run(target(), {"exec": {"command": ["gone"]}}, timeout=1)).result == UNKNOWN


def test_resolve_port() -> None:
    c = container("app", ports=[{"name": "http", "containerPort": 8080}])
    assert resolve_port(80, c) == 80 and resolve_port("8443", c) == 8443 and resolve_port("http", c) == 8080
    assert resolve_port("nope", c) is None


async def test_sim_handlers_answer_from_annotations() -> None:
    h = SimHandlers(Exec(), clock=FakeClock())  # type: ignore[arg-type]
    pod = make_pod(annotations={"sim.kubecore.io/readiness": "fail"})
    failed = await h.probe("readiness", target(pod), {"httpGet": {"port": 80}})
    assert failed == type(failed)(FAILURE, "simulated readiness probe failure (annotation sim.kubecore.io/readiness)")
    assert (await h.probe("liveness", target(pod), {"tcpSocket": {"port": 80}})).result == SUCCESS
    assert (await h.probe("liveness", target(pod), {"exec": {"command": ["false"]}})).result == FAILURE
    assert await h.hook("PreStop", target(pod), {"exec": {"command": ["true"]}}, timeout=5) is None


async def test_grpc_health_check_against_a_real_grpc_server() -> None:
    """A grpc.aio server with the standard health service (one service SERVING, one NOT_SERVING)
    and a second server without it: upstream's outcomes and messages."""
    import grpc
    import grpc.aio

    from kubecore.kubelet import grpcprobe

    async def check(request: bytes, context: grpc.aio.ServicerContext) -> bytes:  # type: ignore[type-arg]
        service = grpcprobe.decode_request(request)
        return grpcprobe.encode_response(1 if service in ("", "app") else 2)

    health = grpc.method_handlers_generic_handler("grpc.health.v1.Health", {
        "Check": grpc.unary_unary_rpc_method_handler(check)})
    with_health, without = grpc.aio.server(), grpc.aio.server()
    with_health.add_generic_rpc_handlers((health,))
    port = with_health.add_insecure_port("127.0.0.1:0")
    bare_port = without.add_insecure_port("127.0.0.1:0")
    await with_health.start()
    await without.start()
    h = RealHandlers(Exec(), clock=FakeClock())  # type: ignore[arg-type]
    try:
        ok = await h.run(target(), {"grpc": {"port": port}}, timeout=2)
        assert (ok.result, ok.output) == (SUCCESS, "service healthy")
        assert (await h.run(target(), {"grpc": {"port": port, "service": "app"}}, timeout=2)).result == SUCCESS
        sick = await h.run(target(), {"grpc": {"port": port, "service": "db"}}, timeout=2)
        assert (sick.result, sick.output) == (FAILURE, 'service unhealthy (responded with "NOT_SERVING")')
        bare = await h.run(target(), {"grpc": {"port": bare_port}}, timeout=2)
        assert bare.result == FAILURE
        assert bare.output.startswith("error: this server does not implement the grpc health protocol "
                                      "(grpc.health.v1.Health): ")
    finally:
        await with_health.stop(None)
        await without.stop(None)
    # nothing listens any more: the connection cannot be made within the timeout
    gone = await h.run(target(), {"grpc": {"port": port}}, timeout=0.5)
    assert (gone.result, gone.output) == (
        FAILURE, f'timeout: failed to connect service "127.0.0.1:{port}" within 500ms: context deadline exceeded')
    await h.close()
