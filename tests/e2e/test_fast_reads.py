"""The read fast path through a real server: same bytes as the handler chain, counted in
/metrics, and the official client reads through it."""

from __future__ import annotations

import json
import socket
import urllib.request

from tests.e2e.conftest import Server


def _raw(server: Server, path: str) -> bytes:
    with urllib.request.urlopen(server.url + path, timeout=10) as resp:
        return resp.read()


def test_fast_and_chain_answers_are_the_same(server: Server, namespace: str) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "same"},
           "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}
    assert server.http("POST", f"/api/v1/namespaces/{namespace}/pods", pod)[0] == 201
    path = f"/api/v1/namespaces/{namespace}/pods/same"
    fast = _raw(server, path)
    chain = _raw(server, path + "?pretty=false")  # a query string always takes the chain
    assert json.loads(fast) == json.loads(chain)
    metrics = _raw(server, "/metrics").decode()
    line = next(m for m in metrics.splitlines() if m.startswith("apiserver_request_total") and 'resource="pods"'
                in m and 'verb="GET"' in m and 'scope="resource"' in m and 'code="200"' in m)
    assert int(line.rsplit(" ", 1)[1]) >= 2


def test_keep_alive_connection_mixes_fast_and_chain_requests(server: Server, namespace: str) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "mix"}, "data": {"k": "v"}}
    body = json.dumps(cm).encode()
    host, port = server.url.removeprefix("http://").split(":")
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    with socket.create_connection((host, int(port)), timeout=10) as s:
        f = s.makefile("rb")

        def roundtrip(req: bytes) -> tuple[int, bytes]:
            s.sendall(req)
            status = int(f.readline().split()[1])
            length = 0
            while (line := f.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            return status, f.read(length)

        get = f"GET {base}/mix HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n\r\n".encode()
        assert roundtrip(get)[0] == 404  # the chain answers a missing object
        post = (f"POST {base} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode() + body
        assert roundtrip(post)[0] == 201
        for _ in range(3):
            status, payload = roundtrip(get)
            assert status == 200 and json.loads(payload)["data"] == {"k": "v"}


def test_official_client_reads(server: Server, namespace: str) -> None:
    from kubernetes import client, config

    config.load_kube_config(str(server.kubeconfig))
    api = client.CoreV1Api()
    api.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="py"),
                                                                   data={"a": "1"}))
    got = api.read_namespaced_config_map("py", namespace)
    assert got.data == {"a": "1"} and got.metadata.resource_version
