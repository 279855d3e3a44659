"""Current kubectl's websocket exec (`v5.channel.k8s.io`) and tunneled port-forward
(`SPDY/3.1+portforward.k8s.io`) end to end on containerd, whose streaming server speaks neither:
the kubelet server answers them over SPDY to it (`kubelet/streamtranslate.py`), so kubectl needs
no SPDY fallback; kubectl told to use SPDY still gets it, passed through. kubectl talks to the API
server through a small recording TCP relay, which shows which upgrades were asked for and what
was answered.

Root and the containerd packages are required (the module fails without them, never skips)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.integration.cluster import free_port, stop
from tests.integration.inprocess import eventually, run_kubectl, write_kubeconfig
from tests.integration.test_kubelet_containerd_streaming import (WAIT_S, containerd_node, machine_can_run_containerd,
                                                                  port_forward, served_page)

__all__ = ["machine_can_run_containerd"]  # the module's autouse fixture: root and the packages, or a failure


class Recorder:
    """A TCP relay to the API server that keeps each connection's first request and response heads."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.exchanges: list[list[str]] = []
        """[request head, response head] per connection, filled in as they pass."""

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, entry: list[str],
                    index: int) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                if not entry[index]:
                    entry[index] = data.split(b"\r\n\r\n", 1)[0].decode("latin-1")
                writer.write(data)
                await writer.drain()
        with contextlib.suppress(OSError):
            writer.write_eof()

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        server_r, server_w = await asyncio.open_connection(self.host, self.port)
        entry = ["", ""]
        self.exchanges.append(entry)
        try:
            await asyncio.gather(self._pipe(client_r, server_w, entry, 0), self._pipe(server_r, client_w, entry, 1))
        finally:
            server_w.close()
            client_w.close()

    def streaming(self, word: str) -> list[tuple[str, str]]:
        """The recorded exchanges whose request line names `word` (exec, portforward)."""
        return [(q, a) for q, a in self.exchanges if f"/{word}" in q.split("\r\n", 1)[0]]


@contextlib.asynccontextmanager
async def recording(upstream: str) -> AsyncIterator[tuple[Recorder, str]]:
    recorder = Recorder(upstream)
    server = await asyncio.start_server(recorder._serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield recorder, f"http://127.0.0.1:{port}"
    finally:
        server.close()


def header(head: str, name: str) -> str:
    for line in head.split("\r\n")[1:]:
        key, _, value = line.partition(":")
        if key.strip().lower() == name.lower():
            return value.strip()
    return ""


def only_websocket(exchanges: list[tuple[str, str]], protocol: str) -> None:
    """Every streaming request was a websocket upgrade offering `protocol`, answered 101 with it."""
    assert exchanges, "no streaming request reached the API server"
    for request, response in exchanges:
        assert header(request, "Upgrade").lower() == "websocket", request
        assert response.startswith("HTTP/1.1 101"), (request, response)
        assert header(response, "Sec-WebSocket-Protocol") == protocol, response


async def test_kubectl_exec_and_port_forward_use_websockets(server_url: str, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    async with containerd_node(server_url, tmp_path, prefix="ws") as node, recording(server_url) as (rec, url):
        (tmp_path / "kubectl").mkdir()
        kubeconfig = write_kubeconfig(tmp_path / "kubectl", url)
        script = "mkdir -p /tmp/www; echo served > /tmp/www/index.html; httpd -p 8080 -h /tmp/www; sleep 3600"
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bb"}, "spec": {
            "nodeName": node.name, "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "app", "image": "busybox", "imagePullPolicy": "IfNotPresent",
                            "command": ["sh", "-c", script]},
                           {"name": "reader", "image": "busybox", "imagePullPolicy": "IfNotPresent",
                            "stdin": True, "stdinOnce": True,
                            "command": ["sh", "-c", "read line; echo got $line"]}]}}
        await node.rest.send_json("POST", f"/api/v1/namespaces/{node.ns}/pods", pod)

        async def running() -> bool:
            p: dict[str, Any] = await node.rest.get_json(f"/api/v1/namespaces/{node.ns}/pods/bb")
            return (p.get("status") or {}).get("phase") == "Running"

        await eventually(running, "the pod running", timeout=WAIT_S)
        code, out, err = await run_kubectl(kubeconfig, node.ns, "exec", "-i", "bb", "-c", "app", "--", "cat",
                                           stdin="hi\n")
        assert (code, out) == (0, "hi\n"), (err, node.log_path.read_text()[-2000:])
        code, out, err = await run_kubectl(kubeconfig, node.ns, "exec", "bb", "-c", "app", "--", "sh", "-c", "exit 3")
        assert code == 3, (out, err)
        assert "command terminated with exit code 3" in err
        code, out, err = await run_kubectl(kubeconfig, node.ns, "exec", "bb", "-c", "app", "--", "sh", "-c",
                                           "echo out; echo err >&2; head -c 200000 /dev/zero | tr '\\0' x")
        assert (code, err) == (0, "err\n"), err
        assert out == "out\n" + "x" * 200000, (len(out), out[:20], out.count("x"))
        code, out, err = await run_kubectl(kubeconfig, node.ns, "attach", "-i", "bb", "-c", "reader", stdin="hi\n")
        assert (code, out) == (0, "got hi\n"), err
        only_websocket(rec.streaming("attach"), "v5.channel.k8s.io")
        exchanges = rec.streaming("exec")
        assert len(exchanges) == 3, exchanges  # one connection per exec: no SPDY retry
        only_websocket(exchanges, "v5.channel.k8s.io")

        monkeypatch.setenv("KUBECTL_REMOTE_COMMAND_WEBSOCKETS", "false")  # kubectl as before 1.30: SPDY only
        code, out, err = await run_kubectl(kubeconfig, node.ns, "exec", "-i", "bb", "-c", "app", "--", "cat",
                                           stdin="old\n")
        assert (code, out) == (0, "old\n"), err
        (request, response), = rec.streaming("exec")[3:]
        assert header(request, "Upgrade") == "SPDY/3.1" and response.startswith("HTTP/1.1 101"), request

        local = free_port()
        forward = port_forward(kubeconfig, node.ns, "pod/bb", f"{local}:8080")
        try:
            assert await eventually(lambda: served_page(local), "a page through kubectl port-forward",
                                    timeout=WAIT_S) == "served\n"
        finally:
            stop(forward)
        only_websocket(rec.streaming("portforward"), "SPDY/3.1+portforward.k8s.io")
