"""Server-side apply and metadata.managedFields against a real `kubecore up`: real kubectl
(`apply --server-side`, client-side `apply`, `create`, `label`, `patch`, `get --show-managed-fields`),
the official `kubernetes` client (typed patch with the apply content type, the dynamic client's
server_side_apply) and plain HTTP for the option checks and Status bodies.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import Kubectl, Server

Unique = Callable[[str], str]
APPLY = "application/apply-patch+yaml"
pytestmark = pytest.mark.usefixtures("kubectl_bin")


def _cm(name: str, data: dict[str, str], **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **meta}, "data": data}


def _apply(kubectl: Kubectl, tmp_path: Path, ns: str, doc: dict[str, Any], *flags: str) -> Any:
    path = tmp_path / "obj.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return kubectl.run("apply", "-n", ns, "-f", str(path), *flags)


def _get(kubectl: Kubectl, ns: str, kind: str, name: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(kubectl.ok("get", "-n", ns, kind, name, "-o", "json", "--show-managed-fields"))
    return out


def _entries(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """managedFields by manager name (each manager appears once in these tests)."""
    return {e["manager"]: e for e in obj["metadata"].get("managedFields", [])}


# --- kubectl -------------------------------------------------------------------------------------


def test_server_side_apply_creates_and_records_the_applier(kubectl: Kubectl, tmp_path: Path, namespace: str) -> None:
    res = _apply(kubectl, tmp_path, namespace, _cm("ssa", {"a": "1"}, labels={"app": "x"}), "--server-side")
    assert res.returncode == 0, res.stderr
    assert "serverside-applied" in res.stdout
    obj = _get(kubectl, namespace, "configmap", "ssa")
    entry = _entries(obj)["kubectl"]
    assert entry["operation"] == "Apply" and entry["apiVersion"] == "v1" and entry["fieldsType"] == "FieldsV1"
    assert entry["fieldsV1"] == {"f:data": {"f:a": {}}, "f:metadata": {"f:labels": {"f:app": {}}}}
    assert entry["time"].endswith("Z")
    plain = yaml.safe_load(kubectl.ok("get", "-n", namespace, "configmap", "ssa", "-o", "yaml"))
    assert "managedFields" not in plain["metadata"]  # kubectl hides them unless asked
    shown = kubectl.ok("get", "-n", namespace, "configmap", "ssa", "-o", "yaml", "--show-managed-fields")
    assert "manager: kubectl" in shown and "operation: Apply" in shown


def test_conflicting_appliers_and_force(kubectl: Kubectl, tmp_path: Path, namespace: str) -> None:
    ok = _apply(kubectl, tmp_path, namespace, _cm("fight", {"a": "1", "b": "1"}), "--server-side", "--field-manager=a")
    assert ok.returncode == 0, ok.stderr
    # Same value: no conflict, both own it.
    same = _apply(kubectl, tmp_path, namespace, _cm("fight", {"b": "1"}), "--server-side", "--field-manager=b")
    assert same.returncode == 0, same.stderr
    bad = _apply(kubectl, tmp_path, namespace, _cm("fight", {"a": "2"}), "--server-side", "--field-manager=b")
    assert bad.returncode != 0
    assert 'Apply failed with 1 conflict: conflict with "a": .data.a' in bad.stderr
    assert _get(kubectl, namespace, "configmap", "fight")["data"] == {"a": "1", "b": "1"}
    forced = _apply(kubectl, tmp_path, namespace, _cm("fight", {"a": "2"}), "--server-side", "--field-manager=b",
                    "--force-conflicts")
    assert forced.returncode == 0, forced.stderr
    obj = _get(kubectl, namespace, "configmap", "fight")
    # b no longer applies .data.b; a still owns it, so it stays.
    assert obj["data"] == {"a": "2", "b": "1"}
    entries = _entries(obj)
    assert entries["b"]["fieldsV1"] == {"f:data": {"f:a": {}}}
    assert entries["a"]["fieldsV1"] == {"f:data": {"f:b": {}}}


def test_fields_an_applier_stops_applying_are_removed(kubectl: Kubectl, tmp_path: Path, namespace: str) -> None:
    first = _cm("prune", {"keep": "1", "drop": "1"}, labels={"x": "1", "y": "1"})
    assert _apply(kubectl, tmp_path, namespace, first, "--server-side").returncode == 0
    second = _cm("prune", {"keep": "1"}, labels={"x": "1"})
    res = _apply(kubectl, tmp_path, namespace, second, "--server-side")
    assert res.returncode == 0, res.stderr
    obj = _get(kubectl, namespace, "configmap", "prune")
    assert obj["data"] == {"keep": "1"}
    assert obj["metadata"]["labels"] == {"x": "1"}
    assert _entries(obj)["kubectl"]["fieldsV1"] == {"f:data": {"f:keep": {}}, "f:metadata": {"f:labels": {"f:x": {}}}}


def test_client_side_apply_then_server_side(kubectl: Kubectl, tmp_path: Path, namespace: str) -> None:
    res = _apply(kubectl, tmp_path, namespace, _cm("csa", {"a": "1", "b": "1"}))
    assert res.returncode == 0, res.stderr
    entry = _entries(_get(kubectl, namespace, "configmap", "csa"))["kubectl-client-side-apply"]
    assert entry["operation"] == "Update"
    assert entry["fieldsV1"]["f:data"] == {".": {}, "f:a": {}, "f:b": {}}
    assert "f:kubectl.kubernetes.io/last-applied-configuration" in entry["fieldsV1"]["f:metadata"]["f:annotations"]
    # Another applier conflicts with the client-side applier ...
    other = _apply(kubectl, tmp_path, namespace, _cm("csa", {"b": "2"}), "--server-side", "--field-manager=other")
    assert other.returncode != 0
    assert 'conflict with "kubectl-client-side-apply" using v1: .data.b' in other.stderr
    # ... while `kubectl apply --server-side` takes over what the last-applied annotation describes.
    up = _apply(kubectl, tmp_path, namespace, _cm("csa", {"a": "3", "b": "1"}), "--server-side")
    assert up.returncode == 0, up.stderr
    obj = _get(kubectl, namespace, "configmap", "csa")
    assert obj["data"] == {"a": "3", "b": "1"}
    last = json.loads(obj["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"])
    assert last["data"] == {"a": "3", "b": "1"}
    assert _entries(obj)["kubectl"]["fieldsV1"]["f:data"] == {"f:a": {}, "f:b": {}}


def test_create_label_and_patch_are_update_managers(kubectl: Kubectl, namespace: str, unique: Unique) -> None:
    name = unique("cm")
    kubectl.ok("create", "configmap", name, "-n", namespace, "--from-literal=a=1")
    kubectl.ok("label", "configmap", name, "-n", namespace, "team=blue")
    kubectl.ok("patch", "configmap", name, "-n", namespace, "--type=merge", "-p", '{"data":{"a":"2"}}')
    obj = _get(kubectl, namespace, "configmap", name)
    entries = _entries(obj)
    assert entries["kubectl-create"]["fieldsV1"] == {"f:data": {}}  # .data.a was taken by the patch
    assert entries["kubectl-label"]["fieldsV1"] == {"f:metadata": {"f:labels": {".": {}, "f:team": {}}}}
    assert entries["kubectl-patch"]["fieldsV1"] == {"f:data": {"f:a": {}}}
    assert all(e["operation"] == "Update" and e["apiVersion"] == "v1" for e in entries.values())


def test_deployment_containers_are_keyed_by_name(kubectl: Kubectl, tmp_path: Path, namespace: str) -> None:
    def deploy(*containers: str) -> dict[str, Any]:
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                "spec": {"selector": {"matchLabels": {"app": "web"}},
                         "template": {"metadata": {"labels": {"app": "web"}},
                                      "spec": {"containers": [{"name": c, "image": f"{c}:1",
                                                               "ports": [{"containerPort": 80}]}
                                                              for c in containers]}}}}

    assert _apply(kubectl, tmp_path, namespace, deploy("main", "side"), "--server-side").returncode == 0
    obj = _get(kubectl, namespace, "deployment", "web")
    fields = _entries(obj)["kubectl"]["fieldsV1"]["f:spec"]
    assert fields["f:selector"] == {}
    main = fields["f:template"]["f:spec"]["f:containers"]['k:{"name":"main"}']
    assert main["."] == {} and main["f:image"] == {}
    assert 'k:{"containerPort":80,"protocol":"TCP"}' in main["f:ports"]
    res = _apply(kubectl, tmp_path, namespace, deploy("main"), "--server-side")
    assert res.returncode == 0, res.stderr
    obj = _get(kubectl, namespace, "deployment", "web")
    assert [c["name"] for c in obj["spec"]["template"]["spec"]["containers"]] == ["main"]


# --- plain HTTP: options and Status bodies ---------------------------------------------------------


def test_apply_needs_a_field_manager(server: Server, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps/nomgr"
    status, body = server.http("PATCH", path, _cm("nomgr", {"a": "1"}), content_type=APPLY)
    assert status == 422
    assert body["message"] == 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch'
    assert body["details"] == {"group": "meta.k8s.io", "kind": "PatchOptions", "causes": [
        {"reason": "FieldValueRequired", "message": "Required value: is required for apply patch", "field": "fieldManager"}]}


def test_bad_field_manager_and_force_on_a_merge_patch(server: Server, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    status, body = server.http("POST", base + "?fieldManager=" + "m" * 129, _cm("long", {"a": "1"}))
    assert status == 422
    assert body["message"] == ('CreateOptions.meta.k8s.io "" is invalid: '
                               'fieldManager: Too long: may not be more than 128 bytes')
    assert server.http("POST", base, _cm("plain", {"a": "1"}))[0] == 201
    status, body = server.http("PATCH", f"{base}/plain?force=true", {"data": {"b": "2"}},
                               content_type="application/merge-patch+json")
    assert status == 422
    assert body["message"] == 'PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch'


def test_apply_yaml_body_and_conflict_status(server: Server, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps/yml"
    doc = f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yml\n  namespace: {namespace}\ndata:\n  a: '1'\n"
    status, body = server.http("PATCH", path + "?fieldManager=first", doc.encode(), content_type=APPLY)
    assert status == 201, body
    status, body = server.http("PATCH", path + "?fieldManager=first", doc.encode(), content_type=APPLY)
    assert status == 200, body
    status, body = server.http("PATCH", path + "?fieldManager=second", doc.replace("'1'", "'2'").encode(),
                               content_type=APPLY)
    assert status == 409
    assert body == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'Apply failed with 1 conflict: conflict with "first": .data.a', "reason": "Conflict",
        "details": {"causes": [{"reason": "FieldManagerConflict", "message": 'conflict with "first"', "field": ".data.a"}]},
        "code": 409}
    status, body = server.http("PATCH", path + "?fieldManager=second", b"apiVersion: v2\nkind: ConfigMap\n",
                               content_type=APPLY)
    assert (status, body["message"]) == (400, "invalid object type: /v2, Kind=ConfigMap")


def test_user_agent_names_the_manager_and_empty_list_resets(server: Server, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    assert server.http("POST", base, _cm("ua", {"a": "1"}))[0] == 201
    status, obj = server.http("GET", f"{base}/ua")
    assert [e["manager"] for e in obj["metadata"]["managedFields"]] == ["Python-urllib"]
    status, obj = server.http("PATCH", f"{base}/ua", {"metadata": {"managedFields": []}},
                              content_type="application/merge-patch+json")
    assert status == 200 and "managedFields" not in obj["metadata"]


# --- the official Python client ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def api_client(server: Server) -> Any:
    try:
        import kubernetes
    except ImportError as e:  # pragma: no cover - environment problem
        pytest.fail(f"the official client is not installed (pip install kubernetes): {e}", pytrace=False)
    client = kubernetes.config.new_client_from_config(config_file=str(server.kubeconfig))
    yield client
    client.close()


def test_python_client_typed_apply_and_force(api_client: Any, namespace: str) -> None:
    import kubernetes

    core = kubernetes.client.CoreV1Api(api_client)
    body = _cm("pyapply", {"a": "1"})
    created = core.patch_namespaced_config_map("pyapply", namespace, body, field_manager="py-a",
                                               _content_type=APPLY)
    assert created.data == {"a": "1"}
    assert [(m.manager, m.operation) for m in created.metadata.managed_fields] == [("py-a", "Apply")]
    with pytest.raises(kubernetes.client.ApiException) as exc:
        core.patch_namespaced_config_map("pyapply", namespace, _cm("pyapply", {"a": "2"}), field_manager="py-b",
                                         _content_type=APPLY)
    assert exc.value.status == 409
    status = json.loads(exc.value.body)
    assert status["details"]["causes"][0] == {"reason": "FieldManagerConflict", "message": 'conflict with "py-a"',
                                              "field": ".data.a"}
    forced = core.patch_namespaced_config_map("pyapply", namespace, _cm("pyapply", {"a": "2"}), field_manager="py-b",
                                              force=True, _content_type=APPLY)
    assert forced.data == {"a": "2"}
    assert [m.manager for m in forced.metadata.managed_fields] == ["py-b"]


def test_dynamic_client_server_side_apply(api_client: Any, namespace: str) -> None:
    from kubernetes.dynamic import DynamicClient

    dyn = DynamicClient(api_client)
    cms = dyn.resources.get(api_version="v1", kind="ConfigMap")
    out = cms.server_side_apply(body=_cm("dyn", {"a": "1", "b": "1"}), namespace=namespace, field_manager="dyn")
    assert out.data.a == "1"
    out = cms.server_side_apply(body=_cm("dyn", {"a": "1"}), namespace=namespace, field_manager="dyn",
                                force_conflicts=True)
    assert dict(out.data) == {"a": "1"}
    entries = out.metadata.managedFields
    assert len(entries) == 1 and entries[0].manager == "dyn" and entries[0].operation == "Apply"


# --- custom resources: list semantics from the CRD's schema ------------------------------------------

GADGETS = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.{group}
spec:
  group: {group}
  scope: Namespaced
  names: {{plural: gadgets, kind: Gadget}}
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
            properties:
              parts:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {{type: string}}
                    size: {{type: integer}}
              tags: {{type: array, items: {{type: string}}}}
"""


def test_custom_resource_lists_follow_the_schema(kubectl: Kubectl, tmp_path: Path, namespace: str,
                                                  unique: Unique) -> None:
    group = f"{unique('g')}.example.com"
    kubectl.ok("apply", "-f", "-", input=GADGETS.format(group=group))
    kubectl.ok("wait", "--for", "condition=established", f"crd/gadgets.{group}", "--timeout=20s")

    def gadget(parts: list[dict[str, Any]], tags: list[str]) -> dict[str, Any]:
        return {"apiVersion": f"{group}/v1", "kind": "Gadget", "metadata": {"name": "g1"},
                "spec": {"parts": parts, "tags": tags}}

    res = _apply(kubectl, tmp_path, namespace, gadget([{"name": "a", "size": 1}], ["x"]), "--server-side",
                 "--field-manager=one")
    assert res.returncode == 0, res.stderr
    res = _apply(kubectl, tmp_path, namespace, gadget([{"name": "b", "size": 2}], ["x"]), "--server-side",
                 "--field-manager=two")
    assert res.returncode == 0, res.stderr  # another item of a keyed list; the same atomic tags
    obj = _get(kubectl, namespace, f"gadgets.{group}", "g1")
    assert [p["name"] for p in obj["spec"]["parts"]] == ["a", "b"]
    assert _entries(obj)["two"]["fieldsV1"] == {"f:spec": {
        "f:parts": {'k:{"name":"b"}': {".": {}, "f:name": {}, "f:size": {}}}, "f:tags": {}}}
    bad = _apply(kubectl, tmp_path, namespace, gadget([{"name": "b", "size": 2}], ["y"]), "--server-side",
                 "--field-manager=two")
    assert bad.returncode != 0 and 'conflict with "one": .spec.tags' in bad.stderr


def test_apply_to_the_status_subresource(kubectl: Kubectl, tmp_path: Path, namespace: str) -> None:
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "st"},
             "spec": {"selector": {"matchLabels": {"app": "st"}},
                      "template": {"metadata": {"labels": {"app": "st"}},
                                   "spec": {"containers": [{"name": "c", "image": "i"}]}}}}
    assert _apply(kubectl, tmp_path, namespace, deploy, "--server-side").returncode == 0
    status = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "st"},
              "spec": {"replicas": 7}, "status": {"observedGeneration": 1, "replicas": 3}}
    res = _apply(kubectl, tmp_path, namespace, status, "--server-side", "--subresource=status",
                 "--field-manager=ctl")
    assert res.returncode == 0, res.stderr
    obj = _get(kubectl, namespace, "deployment", "st")
    assert obj["status"]["replicas"] == 3 and obj["spec"].get("replicas") != 7
    entry = _entries(obj)["ctl"]
    assert (entry["operation"], entry["subresource"]) == ("Apply", "status")
    assert entry["fieldsV1"] == {"f:status": {"f:observedGeneration": {}, "f:replicas": {}}}
