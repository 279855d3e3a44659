"""Published OpenAPI (/openapi/v2 as JSON and protobuf, /openapi/v3), `kubectl explain`, and
fieldValidation over HTTP.

kubectl explain (1.37) reads /openapi/v3, follows the group-version's `serverRelativeURL` (with its
`?hash=`) and renders the kind's schema from `components.schemas`; with `--output=plaintext-openapiv2`
it reads /openapi/v2 as protobuf through client-go's discovery `OpenAPISchema()`, as Helm does. The
protobuf answers are decoded with the unit tests' independent decoder. Field validation is checked
with plain HTTP so that what the server answers (Status bodies, Warning headers) is seen unfiltered.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
import uuid
from typing import Any

import pytest

from tests.e2e.conftest import Kubectl, Server
from tests.unit.apiserver.test_openapi_proto import decode, to_json


def _request(server: Server, method: str, path: str, body: bytes | None = None, *,
             content_type: str = "application/json", accept: str = "application/json",
             headers: dict[str, str] | None = None) -> tuple[int, dict[str, list[str]], bytes]:
    """(status, headers as name -> values, raw body); never follows redirects."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    req = urllib.request.Request(server.url + path, data=body, method=method)
    if body is not None:
        req.add_header("Content-Type", content_type)
    if accept:
        req.add_header("Accept", accept)
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(req, timeout=30) as resp:
            status, hdrs, raw = resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as e:
        status, hdrs, raw = e.code, e.headers, e.read()
    out: dict[str, list[str]] = {}
    for k, v in hdrs.items():
        out.setdefault(k.lower(), []).append(v)
    return status, out, raw


def _cm(name: str, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "b"}, **extra}


# ---- documents ---------------------------------------------------------------------------------

def test_v3_index_and_documents_with_schemas(server: Server) -> None:
    status, _, raw = _request(server, "GET", "/openapi/v3")
    assert status == 200
    paths = json.loads(raw)["paths"]
    assert {"api/v1", "apis/apps/v1", "apis/batch/v1"} <= set(paths)
    url = paths["apis/apps/v1"]["serverRelativeURL"]
    status, headers, raw = _request(server, "GET", url)
    assert status == 200
    assert headers["cache-control"] == ["public, immutable"] and "expires" in headers
    etag = headers["etag"][0]
    assert url.endswith("?hash=" + etag.strip('"'))
    schemas = json.loads(raw)["components"]["schemas"]
    dep = schemas["io.k8s.api.apps.v1.Deployment"]
    assert dep["x-kubernetes-group-version-kind"] == [{"group": "apps", "kind": "Deployment", "version": "v1"}]
    assert schemas["io.k8s.api.core.v1.Container"]["required"] == ["name"]
    # a cached copy is revalidated with its ETag; an outdated hash is redirected to the current one
    status, _, raw = _request(server, "GET", url, headers={"If-None-Match": etag})
    assert status == 304 and raw == b""
    status, headers, _ = _request(server, "GET", "/openapi/v3/apis/apps/v1?hash=0123")
    assert status == 301 and headers["location"] == [url]
    assert _request(server, "GET", "/openapi/v3/apis/nope/v1")[0] == 404


def test_v2_json_with_every_definition(server: Server) -> None:
    status, headers, raw = _request(server, "GET", "/openapi/v2")
    assert status == 200 and headers["content-type"][0].startswith("application/json")
    doc = json.loads(raw)
    assert doc["swagger"] == "2.0"
    defs = doc["definitions"]
    for name in ("io.k8s.api.core.v1.Pod", "io.k8s.api.apps.v1.Deployment", "io.k8s.api.core.v1.Service",
                 "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "io.k8s.apimachinery.pkg.api.resource.Quantity"):
        assert name in defs
    spec = defs["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert spec["items"] == {"$ref": "#/definitions/io.k8s.api.core.v1.Container"}
    assert spec["x-kubernetes-patch-merge-key"] == "name"
    status, _, _ = _request(server, "GET", "/openapi/v2", headers={"If-None-Match": headers["etag"][0]})
    assert status == 304
    assert _request(server, "GET", "/openapi/v2", accept="application/yaml")[0] == 406


# ---- /openapi/v2 as protobuf -------------------------------------------------------------------

PB = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
PB_ANSWER = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"  # upstream answers the new spelling


def test_v2_protobuf_is_the_json_document(server: Server) -> None:
    status, jheaders, jraw = _request(server, "GET", "/openapi/v2")
    assert status == 200
    status, headers, raw = _request(server, "GET", "/openapi/v2", accept=PB)
    assert status == 200, raw[:200]
    assert headers["content-type"] == [PB_ANSWER]
    assert headers["etag"] == jheaders["etag"] and headers["vary"] == ["Accept"] and "last-modified" in headers
    assert to_json(decode(raw)) == json.loads(jraw)
    # revalidation as client-go's HTTP cache does it, with either validator
    assert _request(server, "GET", "/openapi/v2", accept=PB, headers={"If-None-Match": headers["etag"][0]})[0] == 304
    since = {"If-Modified-Since": headers["last-modified"][0]}
    assert _request(server, "GET", "/openapi/v2", accept=PB, headers=since)[0] == 304
    # the newer spelling, and a client that accepts both (first clause wins at equal q)
    assert _request(server, "GET", "/openapi/v2", accept=PB_ANSWER)[2] == raw
    status, headers, _ = _request(server, "GET", "/openapi/v2", accept=f"{PB}, application/json")
    assert headers["content-type"] == [PB_ANSWER]
    status, headers, _ = _request(server, "GET", "/openapi/v2", accept=f"application/json, {PB}")
    assert headers["content-type"][0].startswith("application/json")


def test_v2_protobuf_with_the_official_client(server: Server) -> None:
    import kubernetes as k8s  # a test dependency: missing is a failure, not a skip

    client = k8s.config.new_client_from_config(config_file=str(server.kubeconfig))
    try:
        method, url, headers, _, _ = client.param_serialize("GET", "/openapi/v2", header_params={"Accept": PB},
                                                            auth_settings=["BearerToken"])
        resp = client.call_api(method, url, header_params=headers)
        assert resp.status == 200 and resp.getheader("Content-Type") == PB_ANSWER
        doc = decode(resp.read())
    finally:
        client.close()
    assert doc.swagger == "2.0"
    names = {n.name for n in doc.definitions.additional_properties}
    assert {"io.k8s.api.core.v1.Pod", "io.k8s.api.apps.v1.Deployment"} <= names


def _explain_fields(out: str) -> dict[str, str]:
    """field name -> type from `kubectl explain` FIELDS (either output format)."""
    fields = out.split("FIELDS:", 1)[1]
    return {m.group(1): m.group(2) for m in re.finditer(r"^\s+(\w+)\t<([^>]+)>", fields, re.M)}


def test_explain_plaintext_openapiv2(kubectl: Kubectl) -> None:
    """kubectl reads /openapi/v2 as protobuf (client-go's OpenAPISchema) for the v2 renderer."""
    v2 = kubectl.ok("explain", "--output=plaintext-openapiv2", "pods.spec.containers")
    assert "KIND:     Pod" in v2 and "VERSION:  v1" in v2 and "RESOURCE: containers <[]Object>" in v2
    assert "name\t<string> -required-" in v2
    v2_fields, v3_fields = _explain_fields(v2), _explain_fields(kubectl.ok("explain", "pods.spec.containers"))
    assert set(v2_fields) == set(v3_fields) and {"image", "ports", "resources", "env"} <= set(v2_fields)
    for name in ("name", "image", "args", "stdin", "terminationMessagePath"):
        assert v2_fields[name] == v3_fields[name], name  # primitives read the same in both
    assert v2_fields["ports"] == "[]Object" and v3_fields["ports"] == "[]ContainerPort"
    limits = kubectl.ok("explain", "--output=plaintext-openapiv2", "pods.spec.containers.resources.limits")
    assert "<map[string]string>" in limits
    assert "replicas\t<integer>" in kubectl.ok("explain", "--output=plaintext-openapiv2", "deployments.spec")


GADGET_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.GROUP}
spec:
  group: GROUP
  scope: Namespaced
  names: {plural: gadgets, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [color]
            properties:
              color: {type: string, enum: [red, green]}
              count: {type: integer, minimum: 1, default: 2}
"""


def test_custom_resource_in_the_protobuf_document(kubectl: Kubectl, server: Server) -> None:
    group = f"pb{uuid.uuid4().hex[:6]}.example.com"
    _, before, _ = _request(server, "GET", "/openapi/v2", accept=PB)
    kubectl.ok("apply", "-f", "-", input=GADGET_CRD.replace("GROUP", group))
    kubectl.ok("wait", "--for", "condition=established", f"crd/gadgets.{group}", "--timeout=20s")
    status, headers, raw = _request(server, "GET", "/openapi/v2", accept=PB)
    assert status == 200 and headers["etag"] != before["etag"]
    defs = to_json(decode(raw))["definitions"]
    gadget = defs[".".join([*reversed(group.split(".")), "v1", "Gadget"])]
    assert gadget["x-kubernetes-group-version-kind"] == [{"group": group, "kind": "Gadget", "version": "v1"}]
    spec = gadget["properties"]["spec"]
    assert spec["required"] == ["color"] and spec["properties"]["color"]["enum"] == ["red", "green"]
    assert spec["properties"]["count"] == {"type": "integer", "minimum": 1, "default": 2}
    out = kubectl.ok("explain", "--output=plaintext-openapiv2", f"gadgets.{group}.spec")
    assert "color\t<string> -required-" in out and "count\t<integer>" in out


# ---- kubectl explain ---------------------------------------------------------------------------

def test_explain_nested_fields(kubectl: Kubectl) -> None:
    out = kubectl.ok("explain", "pods.spec.containers")
    assert "KIND:       Pod" in out and "VERSION:    v1" in out
    assert "FIELD: containers <[]Container>" in out
    assert "name\t<string> -required-" in out and "ports\t<[]ContainerPort>" in out
    assert "resources\t<ResourceRequirements>" in out
    out = kubectl.ok("explain", "svc.spec.ports")
    assert "FIELD: ports <[]ServicePort>" in out
    assert "port\t<integer> -required-" in out and "targetPort\t<IntOrString>" in out
    out = kubectl.ok("explain", "pods.spec.containers.resources.limits")
    assert "<map[string]Quantity>" in out


def test_explain_recursive_and_other_groups(kubectl: Kubectl) -> None:
    out = kubectl.ok("explain", "deployments", "--recursive")
    assert "GROUP:      apps" in out and "KIND:       Deployment" in out
    for line in ("  spec\t<DeploymentSpec>", "    replicas\t<integer>", "    template\t<PodTemplateSpec> -required-",
                 "          image\t<string>", "  status\t<DeploymentStatus>"):
        assert line in out, line
    assert "schedule\t<string> -required-" in kubectl.ok("explain", "cronjobs.spec")
    assert "rules\t<[]PolicyRule>" in kubectl.ok("explain", "clusterroles")
    res = kubectl.run("explain", "pods.spec.nosuchfield")
    assert res.returncode != 0 and "nosuchfield" in res.stderr


# ---- fieldValidation over HTTP -----------------------------------------------------------------

def _warnings(headers: dict[str, list[str]]) -> list[str]:
    return headers.get("warning", [])


def test_strict_create_is_refused_with_upstreams_message(server: Server, namespace: str) -> None:
    raw = json.dumps(_cm("s1", bogus=1)).encode()
    status, _, body = _request(server, "POST", f"/api/v1/namespaces/{namespace}/configmaps?fieldValidation=Strict", raw)
    st = json.loads(body)
    assert status == 400 and st["reason"] == "BadRequest" and st["code"] == 400
    assert st["message"] == ('ConfigMap in version "v1" cannot be handled as a ConfigMap: '
                             'strict decoding error: unknown field "bogus"')
    assert server.http("GET", f"/api/v1/namespaces/{namespace}/configmaps/s1")[0] == 404


def test_duplicate_and_unknown_fields_in_strict_mode(server: Server, namespace: str) -> None:
    raw = (b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"d1","name":"d2"},'
           b'"data":{"a":"b"},"dta":{"x":1}}')
    status, _, body = _request(server, "POST", f"/api/v1/namespaces/{namespace}/configmaps?fieldValidation=Strict", raw)
    assert status == 400
    assert json.loads(body)["message"].endswith(
        'strict decoding error: duplicate field "metadata.name", unknown field "dta"')


def test_warn_is_the_default_and_drops_unknown_fields(server: Server, namespace: str) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "w1"}, "bogus": True,
           "spec": {"containers": [{"name": "c", "image": "busybox", "imagePullPolicy": "Never", "x": 1}]}}
    raw = json.dumps(pod).encode().replace(b'"name": "w1"', b'"name": "w0", "name": "w1"')
    status, headers, body = _request(server, "POST", f"/api/v1/namespaces/{namespace}/pods", raw)
    assert status == 201, body
    assert _warnings(headers) == ['299 - "duplicate field \\"metadata.name\\""',
                                  '299 - "unknown field \\"bogus\\""',
                                  '299 - "unknown field \\"spec.containers[0].x\\""']
    created = json.loads(body)
    assert "bogus" not in created and "x" not in created["spec"]["containers"][0]
    status, stored = server.http("GET", f"/api/v1/namespaces/{namespace}/pods/w1")
    assert status == 200 and "bogus" not in stored and "x" not in stored["spec"]["containers"][0]


def test_ignore_drops_silently(server: Server, namespace: str) -> None:
    raw = json.dumps(_cm("i1", bogus=1)).encode()
    status, headers, body = _request(server, "POST", f"/api/v1/namespaces/{namespace}/configmaps?fieldValidation=Ignore", raw)
    assert status == 201 and _warnings(headers) == []
    assert "bogus" not in json.loads(body)
    assert "bogus" not in server.http("GET", f"/api/v1/namespaces/{namespace}/configmaps/i1")[1]


def test_update_and_patch_validate_too(server: Server, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    assert server.http("POST", base, _cm("u1"))[0] == 201
    obj = server.http("GET", f"{base}/u1")[1]
    obj["extra"] = {"k": "v"}
    status, headers, body = _request(server, "PUT", f"{base}/u1", json.dumps(obj).encode())
    assert status == 200 and _warnings(headers) == ['299 - "unknown field \\"extra\\""']
    assert "extra" not in json.loads(body)
    status, _, body = _request(server, "PUT", f"{base}/u1?fieldValidation=Strict", json.dumps(obj).encode())
    assert status == 400 and 'unknown field "extra"' in json.loads(body)["message"]
    merge = b'{"data":{"b":"c"},"zzz":1}'
    status, headers, body = _request(server, "PATCH", f"{base}/u1", merge, content_type="application/merge-patch+json")
    assert status == 200 and _warnings(headers) == ['299 - "unknown field \\"zzz\\""']
    assert json.loads(body)["data"] == {"a": "b", "b": "c"} and "zzz" not in json.loads(body)
    smp = b'{"data":{"c":"d"},"data":{"e":"f"},"zzz":1}'
    status, _, body = _request(server, "PATCH", f"{base}/u1?fieldValidation=Strict", smp,
                               content_type="application/strategic-merge-patch+json")
    st = json.loads(body)
    assert status == 422 and st["reason"] == "Invalid"
    assert st["message"] == (' "" is invalid: patch: Invalid value: "map[data:map[e:f] zzz:1]": '
                             'strict decoding error: duplicate field "data", unknown field "zzz"')
    status, _, body = _request(server, "PATCH", f"{base}/u1?fieldValidation=Nope", merge,
                               content_type="application/merge-patch+json")
    assert status == 422 and json.loads(body)["details"]["kind"] == "PatchOptions"


def test_custom_resource_like_free_form_fields_are_kept(server: Server, namespace: str) -> None:
    """Maps and embedded objects (annotations, ConfigMap data, ControllerRevision data) are not fields."""
    cr = {"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": {"name": "r1"},
          "data": {"anything": {"nested": [1, {"x": 2}]}}, "revision": 1}
    status, headers, body = _request(server, "POST", f"/apis/apps/v1/namespaces/{namespace}/controllerrevisions?fieldValidation=Strict",
                                     json.dumps(cr).encode())
    assert status == 201, body
    assert json.loads(body)["data"] == cr["data"] and _warnings(headers) == []


@pytest.mark.parametrize("flag, created", [("--validate=strict", False), ("--validate=warn", True)])
def test_kubectl_validate_flags(kubectl: Kubectl, namespace: str, tmp_path: Any, flag: str, created: bool) -> None:
    path = tmp_path / "cm.json"
    path.write_text(json.dumps(_cm("k-" + flag.split("=")[1], bogus=1)))
    res = kubectl.run("create", flag, "-n", namespace, "-f", str(path))
    assert (res.returncode == 0) == created, res
    assert 'unknown field "bogus"' in res.stderr
