"""`kubectl logs` and `kubectl exec` end to end: real kubectl -> the real API server (pods/log,
pods/exec) -> the kubelet's server -> CRI log files written by the simulated runtime.

Every wait polls with a deadline (inprocess.eventually); nothing asserts on elapsed time."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp
from aiohttp import web

from kubecore.client.errors import NotFound
from kubecore.client.rest import RestClient
from kubecore.kubelet.hollow import HollowOptions, add_hollow_nodes, sim_kubelet
from kubecore.kubelet.host import KubeletHost
from kubecore.kubelet.server import KubeletServer
from kubecore.kubelet.sim.runtime import SimRuntime
from tests.integration.cluster import env, free_port, stop
from tests.integration.inprocess import eventually, new_client, run_kubectl, write_kubeconfig
from tests.integration.test_kubelet_sim import Node, condition, fast_config, get_pod, pod_when, run_pod

Obj = dict[str, Any]
LOG = "sim.kubecore.io/log"
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z ")


@dataclass
class Served:
    node: Node
    server: KubeletServer
    kubeconfig: Path
    logs: Path

    async def kubectl(self, *args: str) -> tuple[int, str, str]:
        return await run_kubectl(self.kubeconfig, self.node.ns, *args)


async def _namespace(rest: RestClient) -> str:
    ns = f"ks-{uuid.uuid4().hex[:8]}"
    await rest.send_json("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                        "metadata": {"name": ns}})
    return ns


@asynccontextmanager
async def served_node(server_url: str, tmp_path: Path) -> AsyncIterator[Served]:
    """A simulated kubelet whose server listens on loopback (the node's InternalIP)."""
    rest = new_client(server_url)
    ns = await _namespace(rest)
    host = KubeletHost(rest)
    port = free_port()
    name = f"sim-{uuid.uuid4().hex[:6]}"
    logs = tmp_path / "logs"
    kubelet = sim_kubelet(host, fast_config(name, kubelet_port=port), node_ip="127.0.0.1", log_root=str(logs))
    await host.start()
    server = KubeletServer(host, address="127.0.0.1", port=port)
    await server.start()
    try:
        yield Served(Node(rest=rest, host=host, kubelet=kubelet, ns=ns), server,
                     write_kubeconfig(tmp_path, server_url), logs)
    finally:
        await server.stop()
        await host.stop()
        await rest.close()


async def test_kubectl_logs_tail_timestamps_and_the_kubelet_endpoints(server_url: str, tmp_path: Path) -> None:
    async with served_node(server_url, tmp_path) as s:
        n: Obj = await s.node.rest.get_json(f"/api/v1/nodes/{s.node.name}")
        assert n["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] == s.server.port
        await run_pod(s.node, "web", annotations={LOG: "hello {attempt} from {container}\nsecond line"})
        await pod_when(s.node, "web", "Running")
        code, out, err = await s.kubectl("logs", "web")
        assert (code, out) == (0, "hello 0 from app\nsecond line\n"), err
        code, out, err = await s.kubectl("logs", "web", "--tail=1")
        assert (code, out) == (0, "second line\n"), err
        code, out, err = await s.kubectl("logs", "web", "--timestamps")
        lines = out.splitlines()
        assert code == 0 and len(lines) == 2 and all(STAMP.match(line) for line in lines), (out, err)
        assert [STAMP.sub("", line) for line in lines] == ["hello 0 from app", "second line"]
        code, out, err = await s.kubectl("logs", "web", "--limit-bytes=5")
        assert (code, out) == (0, "hello"), err
        async with aiohttp.ClientSession() as http:
            base = f"http://127.0.0.1:{s.server.port}"
            async with http.get(f"{base}/healthz") as r:
                assert (r.status, await r.text()) == (200, "ok")
            async with http.get(f"{base}/pods") as r:
                body = await r.json()
                assert body["kind"] == "PodList" and [p["metadata"]["name"] for p in body["items"]] == ["web"]
            async with http.get(f"{base}/containerLogs/{s.node.ns}/web/nope") as r:
                assert (r.status, (await r.text()).strip()) == (404, 'container "nope" not found in pod "web"')
            async with http.get(f"{base}/containerLogs/{s.node.ns}/web/app?tailLines=-1") as r:
                assert r.status == 422


async def test_kubectl_logs_container_choice_and_errors(server_url: str, tmp_path: Path) -> None:
    async with served_node(server_url, tmp_path) as s:
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "duo", "namespace": s.node.ns,
                            "annotations": {f"{LOG}.a": "from a", f"{LOG}.b": "from b"}},
               "spec": {"nodeName": s.node.name, "containers": [{"name": "a", "image": "img/a:1"},
                                                                 {"name": "b", "image": "img/b:1"}]}}
        await s.node.rest.send_json("POST", f"/api/v1/namespaces/{s.node.ns}/pods", pod)
        await pod_when(s.node, "duo", "Running")
        code, out, err = await s.kubectl("logs", "duo", "-c", "b")
        assert (code, out) == (0, "from b\n"), err
        code, out, err = await s.kubectl("logs", "duo", "-c", "nope")
        assert code != 0 and "container nope is not valid for pod duo" in err
        code, out, err = await s.kubectl("get", "--raw", f"/api/v1/namespaces/{s.node.ns}/pods/duo/log")
        assert code != 0 and "a container name must be specified for pod duo, choose one of: [a b]" in err, err
        code, out, err = await s.kubectl("get", "--raw",
                                         f"/api/v1/namespaces/{s.node.ns}/pods/duo/log?container=a&tailLines=-2")
        assert code != 0 and "tailLines: Invalid value: -2: must be greater than or equal to 0" in err, err

        await run_pod(s.node, "stuck", annotations={"sim.kubecore.io/pull-fail": "*"})

        async def waiting() -> Obj | None:
            p = await get_pod(s.node, "stuck")
            cs = ((p.get("status") or {}).get("containerStatuses") or [{}])[0]
            return p if (cs.get("state") or {}).get("waiting") else None

        await eventually(waiting, "a container waiting on its image")
        code, out, err = await s.kubectl("logs", "stuck")
        assert code != 0 and re.search(r'container "app" in pod "stuck" is waiting to start: (image can.t be pulled|'
                                       r'trying and failing to pull image)', err), err


async def test_kubectl_logs_follow_ends_with_the_container_and_previous(server_url: str, tmp_path: Path) -> None:
    async with served_node(server_url, tmp_path) as s:
        await run_pod(s.node, "job", restart_policy="Never",
                      annotations={LOG: "tick", "sim.kubecore.io/log-every": "300ms", "sim.kubecore.io/duration": "3s"})
        await pod_when(s.node, "job", "Running")
        code, out, err = await s.kubectl("logs", "-f", "job")
        assert code == 0 and len(out.splitlines()) >= 2 and set(out.splitlines()) == {"tick"}, (out, err)
        await pod_when(s.node, "job", "Succeeded")

        await run_pod(s.node, "crash", annotations={LOG: "attempt {attempt}", "sim.kubecore.io/duration": "500ms",
                                                    "sim.kubecore.io/exit-code": "1"})

        async def restarted() -> Obj | None:
            p = await get_pod(s.node, "crash")
            cs = ((p.get("status") or {}).get("containerStatuses") or [{}])[0]
            return p if cs.get("restartCount", 0) >= 1 and (cs.get("state") or {}).get("running") else None

        await eventually(restarted, "a restarted container")
        code, out, err = await s.kubectl("logs", "crash", "--previous")
        assert code == 0 and re.fullmatch(r"attempt \d+\n", out), (out, err)
        previous = int(out.split()[1])
        code, out, err = await s.kubectl("logs", "crash")
        assert code == 0 and re.fullmatch(r"attempt \d+\n", out) and int(out.split()[1]) > previous, (out, err)


async def test_kubectl_exec_on_a_simulated_pod_says_why_it_cannot(server_url: str, tmp_path: Path) -> None:
    async with served_node(server_url, tmp_path) as s:
        await run_pod(s.node, "web")
        await pod_when(s.node, "web", "Running")
        code, out, err = await s.kubectl("exec", "web", "--", "ls")
        assert code != 0 and "simulated runtime (sim) runs no processes" in err, (code, out, err)
        code, out, err = await s.kubectl("exec", "web", "-c", "nope", "--", "ls")
        assert code != 0 and "nope" in err, err


async def test_one_server_for_many_hollow_nodes(server_url: str, tmp_path: Path) -> None:
    rest = new_client(server_url)
    ns = await _namespace(rest)
    host = KubeletHost(rest)
    port = free_port()
    prefix = f"hl-{uuid.uuid4().hex[:4]}-"
    nodes = add_hollow_nodes(host, HollowOptions(count=3, prefix=prefix, node_ip="127.0.0.1", kubelet_port=port,
                                                 log_root=str(tmp_path / "logs")))
    await host.start()
    server = KubeletServer(host, address="127.0.0.1", port=port)
    await server.start()
    try:
        for i, kubelet in enumerate(nodes):
            await run_pod(Node(rest=rest, host=host, kubelet=kubelet, ns=ns), f"p{i}",
                          annotations={LOG: f"on {kubelet.name}"})
        for i, kubelet in enumerate(nodes):
            await pod_when(Node(rest=rest, host=host, kubelet=kubelet, ns=ns), f"p{i}", "Running")
            code, out, err = await run_kubectl(write_kubeconfig(tmp_path, server_url), ns, "logs", f"p{i}")
            assert (code, out) == (0, f"on {kubelet.name}\n"), err
    finally:
        await server.stop()
        await host.stop()
        await rest.close()


class StreamingSim(SimRuntime):
    """A simulated runtime with a streaming server (`FakeStreams`), as containerd has one: its Exec
    URL carries the command, so the fake server can answer it."""

    def __init__(self, streams: FakeStreams, **kw: Any) -> None:
        super().__init__(**kw)
        self.streams = streams

    async def exec(self, container_id: str, cmd: list[str], *, tty: bool = False, stdin: bool = False,
                   stdout: bool = True, stderr: bool = True) -> str:
        return f"http://127.0.0.1:{self.streams.port}/exec/{container_id}?{urlencode([('cmd', c) for c in cmd])}"


class FakeStreams:
    """A runtime streaming server: websocket exec with the v5/v4 channel protocols (stdout on
    channel 1, the final Status on channel 3), and any other upgrade echoed byte for byte."""

    def __init__(self) -> None:
        self.port = free_port()
        self.runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/exec/{cid}", self.exec)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    async def exec(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("Upgrade", "").lower() != "websocket":
            return await self._echo(request)
        ws = web.WebSocketResponse(protocols=("v5.channel.k8s.io", "v4.channel.k8s.io"))
        await ws.prepare(request)
        await ws.send_bytes(b"\x01" + " ".join(request.query.getall("cmd", [])).encode() + b"\n")
        await ws.send_bytes(b"\x03" + json.dumps({"metadata": {}, "status": "Success"}).encode())
        await ws.close()
        return ws

    async def _echo(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(status=101, headers={"Connection": "Upgrade", "Upgrade": "echo"})
        await resp.prepare(request)
        transport = request.transport
        assert transport is not None
        queue: asyncio.Queue[bytes] = asyncio.Queue()

        class Echo:
            def feed_data(self, data: bytes) -> tuple[bool, bytes]:
                queue.put_nowait(data)
                return False, b""

            def feed_eof(self) -> None:
                queue.put_nowait(b"")

        request.protocol.set_parser(Echo())  # type: ignore[arg-type]
        while data := await queue.get():
            transport.write(data.upper())
        transport.close()
        return resp


async def test_exec_is_passed_through_to_the_runtime_streaming_server(server_url: str, tmp_path: Path) -> None:
    streams = FakeStreams()
    await streams.start()
    rest = new_client(server_url)
    ns = await _namespace(rest)
    host = KubeletHost(rest)
    port = free_port()
    name = f"sim-{uuid.uuid4().hex[:6]}"
    runtime = StreamingSim(streams, clock=host.clock, timers=host.timers, pod_cidr="10.200.0.0/24")
    kubelet = sim_kubelet(host, fast_config(name, kubelet_port=port), node_ip="127.0.0.1", runtime=runtime)
    await host.start()
    server = KubeletServer(host, address="127.0.0.1", port=port)
    await server.start()
    try:
        node = Node(rest=rest, host=host, kubelet=kubelet, ns=ns)
        await run_pod(node, "web")
        await pod_when(node, "web", "Running")
        code, out, err = await run_kubectl(write_kubeconfig(tmp_path, server_url), ns, "exec", "web", "--",
                                           "echo", "hi")
        assert (code, out) == (0, "echo hi\n"), err
        reader, writer = await asyncio.open_connection("127.0.0.1", int(server_url.rsplit(":", 1)[1]))
        writer.write(f"POST /api/v1/namespaces/{ns}/pods/web/exec?command=x&stdout=true HTTP/1.1\r\n"
                     f"Host: x\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nContent-Length: 0\r\n\r\n".encode())
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        assert head.startswith(b"HTTP/1.1 101"), head
        writer.write(b"raw bytes\x00\x01")
        assert await asyncio.wait_for(reader.readexactly(11), 30) == b"RAW BYTES\x00\x01"
        writer.close()
    finally:
        await server.stop()
        await host.stop()
        await rest.close()
        await streams.stop()


async def test_the_kubelet_cli_serves_logs(server_url: str, tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path, server_url)
    name = f"cli-{uuid.uuid4().hex[:6]}"
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "kubecore.cli.main", "kubelet", "--kubeconfig", str(kubeconfig),
                             "--node-name", name, "--runtime", "sim", "--node-ip", "127.0.0.1", "--address",
                             "127.0.0.1", "--port", str(port), "--root-dir", str(tmp_path / "root")],
                            env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    rest = new_client(server_url)
    try:
        async def serving() -> bool:
            try:
                n: Obj = await rest.get_json(f"/api/v1/nodes/{name}")
            except NotFound:
                return False
            endpoint = n["status"].get("daemonEndpoints", {}).get("kubeletEndpoint", {})
            return condition(n, "Ready").get("status") == "True" and endpoint.get("Port") == port

        await eventually(serving, "the CLI's node Ready, reporting the kubelet server's port")
        ns = await _namespace(rest)
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "web", "namespace": ns, "annotations": {LOG: "from the cli"}},
               "spec": {"nodeName": name, "containers": [{"name": "app", "image": "img/app:1"}]}}
        await rest.send_json("POST", f"/api/v1/namespaces/{ns}/pods", pod)

        async def logged() -> str | None:
            code, out, _ = await run_kubectl(kubeconfig, ns, "logs", "web")
            return out if code == 0 and out else None

        assert await eventually(logged, "the pod's log through the CLI's kubelet server") == "from the cli\n"
        assert list((tmp_path / "root" / "pod-logs").iterdir()), "the simulated log lives under the root dir"
    finally:
        stop(proc)
        await rest.close()
