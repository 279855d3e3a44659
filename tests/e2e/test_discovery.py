"""Aggregated discovery (apidiscovery.k8s.io/v2) against a real server and real kubectl."""

from __future__ import annotations

import json
import urllib.request

from tests.e2e.conftest import Server

V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
CLIENT_GO_ACCEPT = V2 + ",application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"


def _get(server: Server, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(server.url + path, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def test_aggregated_discovery_documents(server: Server) -> None:
    status, headers, body = _get(server, "/apis", {"Accept": CLIENT_GO_ACCEPT})
    assert status == 200 and headers["Content-Type"] == V2
    doc = json.loads(body)
    assert doc["kind"] == "APIGroupDiscoveryList" and doc["apiVersion"] == "apidiscovery.k8s.io/v2"
    apps = next(i for i in doc["items"] if i["metadata"]["name"] == "apps")
    v1 = apps["versions"][0]
    assert v1["version"] == "v1" and v1["freshness"] == "Current"
    deploy = next(r for r in v1["resources"] if r["resource"] == "deployments")
    assert deploy["responseKind"] == {"group": "apps", "version": "v1", "kind": "Deployment"}
    assert deploy["scope"] == "Namespaced" and deploy["shortNames"] == ["deploy"]
    assert {"subresource": "scale", "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
            "verbs": ["get", "patch", "update"]} in deploy["subresources"]
    status, headers, body = _get(server, "/api", {"Accept": CLIENT_GO_ACCEPT})
    core = json.loads(body)["items"]
    assert len(core) == 1 and core[0]["metadata"] == {"creationTimestamp": None}
    pods = next(r for r in core[0]["versions"][0]["resources"] if r["resource"] == "pods")
    assert [s["subresource"] for s in pods["subresources"]] == ["attach", "binding", "eviction", "exec", "log", "portforward", "status"]


def test_etag_and_legacy_fallback(server: Server) -> None:
    _, headers, _ = _get(server, "/apis", {"Accept": V2})
    status, _, body = _get(server, "/apis", {"Accept": V2, "If-None-Match": headers["ETag"]})
    assert status == 304 and body == b""
    status, headers, body = _get(server, "/apis", {"Accept": "application/json"})
    assert status == 200 and json.loads(body)["kind"] == "APIGroupList"


def test_kubectl_discovers_with_two_requests(kubectl) -> None:
    res = kubectl.run("api-resources", "-v=6")
    assert res.returncode == 0, res.stderr
    assert "deployments" in res.stdout and "pods" in res.stdout
    fetched = [line for line in res.stderr.splitlines() if '"GET"' in line or "GET http" in line]
    assert any("/apis?" in line or line.rstrip().endswith("/apis") or "/apis " in line for line in fetched), res.stderr
    assert not [line for line in fetched if "/apis/apps/v1" in line], fetched
