"""CustomResourceDefinitions end to end: real kubectl and the official client against `kubecore up`.

A CRD is created with kubectl and waited for (`kubectl wait --for condition=established`); its
custom resources are then served at once: discovery, printer columns, defaults and pruning,
422s naming the field, the status and scale subresources, several versions, watches, deletion
of the CRD (its resources go with it) and a server restart (stored CRDs are served again).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

Unique = Callable[[str], str]
REPO = Path(__file__).resolve().parents[2]


def widget_crd(group: str) -> str:
    return f"""
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.{group}
spec:
  group: {group}
  scope: Namespaced
  names: {{plural: widgets, kind: Widget, shortNames: [wdg]}}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {{}}
      scale: {{specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas, labelSelectorPath: .status.selector}}
    additionalPrinterColumns:
    - {{name: Replicas, type: integer, jsonPath: .spec.replicas}}
    - {{name: Color, type: string, jsonPath: .spec.color}}
    - {{name: Age, type: date, jsonPath: .metadata.creationTimestamp}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [color]
            properties:
              replicas: {{type: integer, minimum: 0, default: 1}}
              color: {{type: string, enum: [red, green, blue]}}
              size: {{type: string, default: medium}}
          status:
            type: object
            properties:
              replicas: {{type: integer}}
              selector: {{type: string}}
"""


def widget(group: str, name: str, spec: str) -> str:
    return f"apiVersion: {group}/v1\nkind: Widget\nmetadata:\n  name: {name}\nspec: {spec}\n"


def create_crd(kubectl: Any, manifest: str, name: str) -> None:
    kubectl.ok("apply", "-f", "-", input=manifest)
    kubectl.ok("wait", "--for", "condition=established", f"crd/{name}", "--timeout=20s")


@pytest.fixture
def group(unique: Unique) -> str:
    return f"{unique('g')}.example.com"


def test_crd_lifecycle_with_schema_validation_errors(kubectl: Any, server: Any, namespace: str, group: str) -> None:
    create_crd(kubectl, widget_crd(group), f"widgets.{group}")
    resources = kubectl.ok("api-resources", f"--api-group={group}")
    assert "widgets" in resources and "wdg" in resources and "Widget" in resources

    # kubectl validates strictly by default: an unknown field is refused by the server (400)...
    bad = kubectl.run("apply", "-n", namespace, "-f", "-", input=widget(group, "w1", "{color: red, bogus: 3}"))
    assert bad.returncode != 0
    assert 'strict decoding error: unknown field "spec.bogus"' in bad.stderr
    # ... and without validation it is pruned; defaults are applied.
    kubectl.ok("apply", "--validate=false", "-n", namespace, "-f", "-", input=widget(group, "w1", "{color: red, bogus: 3}"))
    obj = json.loads(kubectl.ok("get", "widgets", "w1", "-n", namespace, "-o", "json"))
    assert obj["spec"] == {"color": "red", "replicas": 1, "size": "medium"}
    assert obj["metadata"]["generation"] == 1

    table = kubectl.ok("get", "wdg", "-n", namespace).splitlines()
    assert table[0].split() == ["NAME", "REPLICAS", "COLOR", "AGE"]
    assert table[1].split()[:3] == ["w1", "1", "red"]

    invalid = kubectl.run("apply", "--validate=false", "-n", namespace, "-f", "-",
                          input=widget(group, "w2", '{color: purple, replicas: "three"}'))
    assert invalid.returncode != 0
    assert 'The Widget "w2" is invalid' in invalid.stderr
    assert 'spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"' in invalid.stderr
    assert 'spec.color: Unsupported value: "purple": supported values: "red", "green", "blue"' in invalid.stderr
    status, body = server.http("POST", f"/apis/{group}/v1/namespaces/{namespace}/widgets",
                               {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w3"},
                                "spec": {"color": "red", "replicas": -1}})
    assert status == 422 and body["reason"] == "Invalid"
    assert body["details"]["causes"] == [{"reason": "FieldValueInvalid", "field": "spec.replicas", "message":
                                          "Invalid value: -1: spec.replicas in body should be greater than or equal to 0"},
                                         {"reason": "FieldValueInvalid", "field": ".spec.replicas",
                                          "message": "Invalid value: -1: should be a non-negative integer"}]

    # status is ignored on the main resource, written through /status
    obj["status"] = {"replicas": 9}
    obj["spec"]["color"] = "blue"
    kubectl.ok("replace", "-f", "-", input=json.dumps(obj))
    obj = json.loads(kubectl.ok("get", "widgets", "w1", "-n", namespace, "-o", "json"))
    assert "status" not in obj and obj["spec"]["color"] == "blue" and obj["metadata"]["generation"] == 2
    kubectl.ok("patch", "widget", "w1", "-n", namespace, "--subresource=status", "--type=merge",
               "-p", '{"status":{"replicas":2,"selector":"app=w1"}}')

    kubectl.ok("scale", "widget", "w1", "-n", namespace, "--replicas=3")
    scale = json.loads(kubectl.ok("get", "--raw", f"/apis/{group}/v1/namespaces/{namespace}/widgets/w1/scale"))
    assert scale["spec"] == {"replicas": 3} and scale["status"] == {"replicas": 2, "selector": "app=w1"}
    obj = json.loads(kubectl.ok("get", "widgets", "w1", "-n", namespace, "-o", "json"))
    assert obj["spec"]["replicas"] == 3 and obj["status"]["replicas"] == 2 and obj["metadata"]["generation"] == 3

    # deleting the CRD deletes its resources and stops serving them
    kubectl.ok("delete", "crd", f"widgets.{group}", "--timeout=30s")
    assert group not in kubectl.ok("api-resources")
    assert server.http("GET", f"/apis/{group}/v1/namespaces/{namespace}/widgets")[0] == 404
    create_crd(kubectl, widget_crd(group), f"widgets.{group}")
    assert kubectl.ok("get", "widgets", "-n", namespace, "-o", "name").strip() == ""


def gadget_crd(group: str) -> str:
    schema = "{type: object, properties: {spec: {type: object, x-kubernetes-preserve-unknown-fields: true}}}"
    return f"""
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: gadgets.{group}}}
spec:
  group: {group}
  scope: Cluster
  names: {{plural: gadgets, kind: Gadget}}
  versions:
  - {{name: v1beta1, served: true, storage: false, schema: {{openAPIV3Schema: {schema}}}}}
  - {{name: v1, served: true, storage: true, schema: {{openAPIV3Schema: {schema}}}}}
  - {{name: v1alpha1, served: false, storage: false, schema: {{openAPIV3Schema: {schema}}}}}
"""


def test_several_versions(kubectl: Any, server: Any, group: str) -> None:
    create_crd(kubectl, gadget_crd(group), f"gadgets.{group}")
    crd = json.loads(kubectl.ok("get", "crd", f"gadgets.{group}", "-o", "json"))
    assert crd["status"]["storedVersions"] == ["v1"]
    kubectl.ok("create", "-f", "-", input=f"apiVersion: {group}/v1beta1\nkind: Gadget\nmetadata: {{name: g1}}\nspec: {{a: 1}}\n")
    assert json.loads(kubectl.ok("get", "gadgets", "g1", "-o", "json"))["apiVersion"] == f"{group}/v1"
    old = json.loads(kubectl.ok("get", f"gadgets.v1beta1.{group}", "g1", "-o", "json"))
    assert old["apiVersion"] == f"{group}/v1beta1" and old["spec"] == {"a": 1}
    group_doc = json.loads(kubectl.ok("get", "--raw", f"/apis/{group}"))
    assert [v["version"] for v in group_doc["versions"]] == ["v1", "v1beta1"]
    assert group_doc["preferredVersion"]["version"] == "v1"
    assert server.http("GET", f"/apis/{group}/v1alpha1/gadgets")[0] == 404


def test_watch_with_the_dynamic_client(kubectl: Any, server: Any, namespace: str, group: str) -> None:
    import kubernetes  # missing is a failure, never a skip
    from kubernetes import dynamic

    create_crd(kubectl, widget_crd(group), f"widgets.{group}")
    client = dynamic.DynamicClient(kubernetes.config.new_client_from_config(config_file=str(server.kubeconfig)))
    api = client.resources.get(api_version=f"{group}/v1", kind="Widget")
    events: list[tuple[str, str, Any]] = []
    ready = threading.Event()

    def watch() -> None:
        ready.set()
        for ev in api.watch(namespace=namespace, timeout=10):
            events.append((ev["type"], ev["object"].metadata.name, ev["raw_object"]["spec"].get("replicas")))
            if ev["type"] == "DELETED":
                return

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    ready.wait(5)
    time.sleep(0.5)
    api.create(body={"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"color": "red"}},
               namespace=namespace)
    api.patch(name="w", namespace=namespace, body={"spec": {"replicas": 4}}, content_type="application/merge-patch+json")
    api.delete(name="w", namespace=namespace)
    t.join(15)
    assert events == [("ADDED", "w", 1), ("MODIFIED", "w", 4), ("DELETED", "w", 4)]


# ---- restart -----------------------------------------------------------------------------------

def _launch(data_dir: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "python"), env.get("PYTHONPATH", "")) if p)
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "kubecore.cli.main", "up", "--data-dir", str(data_dir),
                                 "--listen", f"127.0.0.1:{port}"], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env)
    import urllib.request
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"server exited {proc.returncode}:\n{log.read_text()[-3000:]}", pytrace=False)
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
                if r.status == 200 and (data_dir / "kubeconfig").exists():
                    return proc
        except OSError:
            pass
        time.sleep(0.1)
    proc.kill()
    pytest.fail(f"server not ready:\n{log.read_text()[-3000:]}", pytrace=False)


@pytest.fixture
def restartable(tmp_path: Path, kubectl_bin: str) -> Iterator[Callable[[], Any]]:
    """Starts (and restarts) a private server on one data dir; yields a kubectl runner factory."""
    import socket

    from tests.e2e.conftest import Kubectl, Server  # noqa: PLC0415 - the shared helpers

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    data, log = tmp_path / "data", tmp_path / "server.log"
    procs: list[subprocess.Popen[bytes]] = []

    def start() -> Any:
        for p in procs:
            p.terminate()
            p.wait(10)
        procs.append(_launch(data, port, log))
        srv = Server(url=f"http://127.0.0.1:{port}", data_dir=data, kubeconfig=data / "kubeconfig",
                     kube_cache=tmp_path / "cache", log_path=log, proc=procs[-1])
        return Kubectl(binary=kubectl_bin, server=srv)

    try:
        yield start
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait(10)


def test_crds_are_served_after_a_restart(restartable: Callable[[], Any], group: str) -> None:
    kubectl = restartable()
    create_crd(kubectl, widget_crd(group), f"widgets.{group}")
    kubectl.ok("apply", "-n", "default", "-f", "-", input=widget(group, "kept", "{color: green}"))
    kubectl = restartable()
    obj = json.loads(kubectl.ok("get", "widgets", "kept", "-n", "default", "-o", "json"))
    assert obj["spec"] == {"color": "green", "replicas": 1, "size": "medium"}
    assert "widgets" in kubectl.ok("api-resources", f"--api-group={group}")
