"""API semantics over plain HTTP: dry runs, retries of unconditional writes, preconditions,
selector transitions in watches, bad query values, service allocations on paths that do not write."""

from __future__ import annotations

import json
import threading
import urllib.request
from typing import Any

from tests.e2e.conftest import Server

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


def cm(name: str, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **extra}, "data": {"a": "1"}}


def test_delete_dry_run_in_the_body_keeps_the_object(server: Server, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    assert server.http("POST", base, cm("keep"))[0] == 201
    status, _ = server.http("DELETE", f"{base}/keep", {"kind": "DeleteOptions", "apiVersion": "v1", "dryRun": ["All"]})
    assert status == 200
    assert server.http("GET", f"{base}/keep")[0] == 200
    assert server.http("DELETE", f"{base}/keep", {"dryRun": ["Bogus"]})[0] == 400


def test_unconditional_writes_retry_instead_of_conflicting(server: Server, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    assert server.http("POST", base, cm("busy"))[0] == 201
    codes: list[int] = []

    def put(i: int) -> None:
        body = cm("busy")
        body["data"] = {"i": str(i)}
        codes.append(server.http("PUT", f"{base}/busy", body)[0])

    threads = [threading.Thread(target=put, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert codes == [200] * 20, codes
    stale = cm("busy", resourceVersion="1")
    assert server.http("PUT", f"{base}/busy", stale)[0] == 409, "a stale resourceVersion still conflicts"


def test_patch_preconditions(server: Server, namespace: str) -> None:
    base = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
           "spec": {"selector": {"matchLabels": {"a": "b"}},
                    "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}
    status, created = server.http("POST", base, dep)
    assert status == 201
    rv = created["metadata"]["resourceVersion"]
    stale = {"metadata": {"resourceVersion": "1"}, "status": {"replicas": 3}}
    assert server.http("PATCH", f"{base}/d/status", stale, content_type=MERGE)[0] == 409
    test_rv = [{"op": "test", "path": "/metadata/resourceVersion", "value": rv},
               {"op": "add", "path": "/metadata/labels", "value": {"x": "y"}}]
    status, patched = server.http("PATCH", f"{base}/d", test_rv, content_type=JSON_PATCH)
    assert status == 200 and patched["metadata"]["labels"] == {"x": "y"}
    assert server.http("PATCH", f"{base}/d", test_rv, content_type=JSON_PATCH)[0] == 422, "the test op now fails"


def test_an_object_leaving_the_selector_is_deleted_with_its_last_matching_state(server: Server, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    status, created = server.http("POST", base, cm("sel", labels={"a": "b"}))
    rv = created["metadata"]["resourceVersion"]
    relabel = {"metadata": {"labels": {"a": "c"}}}
    assert server.http("PATCH", f"{base}/sel", relabel, content_type=MERGE)[0] == 200
    url = f"{server.url}{base}?watch=1&labelSelector=a%3Db&resourceVersion={rv}&timeoutSeconds=1"
    with urllib.request.urlopen(url, timeout=10) as r:
        events = [json.loads(line) for line in r.read().splitlines() if line.strip()]
    assert [e["type"] for e in events] == ["DELETED"]
    assert events[0]["object"]["metadata"]["labels"] == {"a": "b"}
    assert int(events[0]["object"]["metadata"]["resourceVersion"]) > int(rv)


def test_bad_query_values_get_client_errors(server: Server, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    assert server.http("GET", f"{base}?watch=1&timeoutSeconds=abc")[0] == 400
    status, body = server.http("GET", f"{base}?resourceVersion=999999999&resourceVersionMatch=Exact")
    assert status == 504 and "Too large resource version" in body["message"]
    assert server.http("GET", f"{base}?watch=1&resourceVersion=999999999")[0] == 504
    assert server.http("GET", f"{base}?resourceVersion=abc")[0] == 400


def test_service_allocations_change_only_when_a_write_is_stored(server: Server, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/services"

    def svc(name: str, port: int) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
                "spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": port}]}}

    assert server.http("POST", base, svc("np1", 31080))[0] == 201
    dry = {"spec": {"type": "ClusterIP"}}
    assert server.http("PATCH", f"{base}/np1?dryRun=All", dry, content_type=MERGE)[0] == 200
    status, body = server.http("POST", base, svc("np2", 31080))
    assert status == 422 and "already allocated" in body["message"], "a dry run released nothing"
    assert server.http("POST", f"{base}?dryRun=bogus", svc("np3", 31081))[0] == 400
    assert server.http("POST", base, svc("np3", 31081))[0] == 201, "a refused request took nothing"
    bad = svc("np4", 31082)
    bad["spec"]["ports"][0]["nodePort"] = "abc"
    assert server.http("POST", base, bad)[0] == 422


def test_discovery_lists_the_served_subresources(server: Server) -> None:
    _, apps = server.http("GET", "/apis/apps/v1")
    names = {r["name"] for r in apps["resources"]}
    assert {"deployments/status", "deployments/scale", "daemonsets/status"} <= names
    assert "daemonsets/scale" not in names
    _, core = server.http("GET", "/api/v1")
    names = {r["name"] for r in core["resources"]}
    assert {"pods/binding", "pods/eviction", "pods/status", "namespaces/finalize", "replicationcontrollers/scale"} <= names


def test_post_to_a_named_path_is_not_allowed(server: Server, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    status, body = server.http("POST", f"{base}/zzz", cm("other"))
    assert status == 405 and body["reason"] == "MethodNotAllowed"
    assert server.http("GET", f"{base}/other")[0] == 404


def test_binding_assigns_a_pod_to_a_node_once(server: Server, namespace: str) -> None:
    pods = f"/api/v1/namespaces/{namespace}/pods"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}
    for name in ("p", "q"):
        assert server.http("POST", pods, {**pod, "metadata": {"name": name}})[0] == 201
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p", "annotations": {"why": "test"}},
               "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"}}
    status, body = server.http("POST", f"{pods}/p/binding", binding)
    assert status == 201 and body["status"] == "Success", body
    _, bound = server.http("GET", f"{pods}/p")
    assert bound["spec"]["nodeName"] == "node-1" and bound["metadata"]["annotations"] == {"why": "test"}
    assert [c["type"] for c in bound["status"]["conditions"]] == ["PodScheduled"]
    status, body = server.http("POST", f"{pods}/p/binding", binding)
    assert status == 409 and body["message"].endswith('pod p is already assigned to node "node-1"'), body
    # the `bindings` resource does the same, the pod named by the body
    status, _ = server.http("POST", f"/api/v1/namespaces/{namespace}/bindings", {**binding, "metadata": {"name": "q"}})
    assert status == 201
    assert server.http("GET", f"{pods}/q")[1]["spec"]["nodeName"] == "node-1"
    assert server.http("GET", f"/api/v1/namespaces/{namespace}/bindings/q")[0] in (404, 405), "bindings are not stored"
    status, _ = server.http("POST", f"{pods}/nope/binding", {**binding, "metadata": {"name": "nope"}})
    assert status == 404
    assert server.http("POST", f"{pods}/p/binding", {**binding, "metadata": {"name": "other"}})[0] == 400


def test_list_options_are_validated(server: Server, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    status, body = server.http("GET", f"{base}?resourceVersionMatch=Exact")
    assert status == 422 and body["message"] == (
        'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
        "resourceVersionMatch is forbidden unless resourceVersion is provided")
    status, body = server.http("GET", f"{base}?resourceVersion=0&resourceVersionMatch=Exact")
    assert status == 422 and 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"' in body["message"]
    status, body = server.http("GET", f"{base}?resourceVersion=1&resourceVersionMatch=Newest")
    assert status == 422 and 'Unsupported value: "Newest"' in body["message"]
    status, body = server.http("GET", f"{base}?sendInitialEvents=true")
    assert status == 422 and "sendInitialEvents is forbidden for list" in body["message"]
    for n in ("a", "b"):
        server.http("POST", base, cm(n))
    _, page = server.http("GET", f"{base}?limit=1")
    token = page["metadata"]["continue"]
    status, body = server.http("GET", f"{base}?limit=1&continue={token}&resourceVersion=5")
    assert status == 400 and body["message"] == "specifying resource version is not allowed when using continue"


def _events(text: Any) -> list[dict[str, Any]]:
    lines = [text] if isinstance(text, dict) else [json.loads(line) for line in str(text).splitlines() if line]
    return lines


def test_watch_options_as_client_go_sends_them(server: Server, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    server.http("POST", base, cm("w1"))
    # client-go's streaming list: no resourceVersion, sendInitialEvents + NotOlderThan
    status, text = server.http("GET", f"{base}?watch=1&timeoutSeconds=1&allowWatchBookmarks=true"
                                      "&sendInitialEvents=true&resourceVersionMatch=NotOlderThan")
    events = _events(text)
    assert status == 200 and events[0]["type"] == "ADDED" and events[0]["object"]["metadata"]["name"] == "w1"
    assert any(e["type"] == "BOOKMARK" and e["object"]["metadata"].get("annotations", {}).get(
        "k8s.io/initial-events-end") == "true" for e in events)
    # sendInitialEvents=false without a resourceVersion starts at the most recent revision
    status, text = server.http("GET", f"{base}?watch=1&timeoutSeconds=1"
                                      "&sendInitialEvents=false&resourceVersionMatch=NotOlderThan")
    assert status == 200 and not [e for e in _events(text) if e.get("type") == "ADDED"]
    status, body = server.http("GET", f"{base}?watch=1&timeoutSeconds=1&resourceVersion=1&resourceVersionMatch=NotOlderThan")
    assert status == 422 and "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided" in body["message"]
    status, body = server.http("GET", f"{base}?watch=1&sendInitialEvents=true&resourceVersionMatch=Exact&resourceVersion=1")
    assert status == 422 and "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan" in body["message"]


def test_a_large_list_is_streamed_whole(server: Server, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    blob = "x" * 900_000  # five of them: a LIST body over the 4 MiB streaming threshold
    for i in range(5):
        assert server.http("POST", base, {**cm(f"big{i}"), "data": {"blob": blob}})[0] == 201
    for path in (base, base + "?resourceVersionMatch=Exact&resourceVersion=" +
                 server.http("GET", base)[1]["metadata"]["resourceVersion"]):  # cache, then store path
        status, body = server.http("GET", path, timeout=30)
        assert status == 200 and len(body["items"]) == 5
        assert all(i["data"]["blob"] == blob for i in body["items"])


def test_an_update_that_changes_nothing_is_not_written(server: Server, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/configmaps"
    _, created = server.http("POST", base, cm("same"))
    status, first = server.http("PUT", f"{base}/same", created)
    assert status == 200 and first["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    status, patched = server.http("PATCH", f"{base}/same", {"data": {"a": "1"}},
                                  content_type="application/merge-patch+json")
    assert status == 200 and patched["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    changed = {**first, "data": {"a": "c"}}
    status, second = server.http("PUT", f"{base}/same", changed)
    assert status == 200 and int(second["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
