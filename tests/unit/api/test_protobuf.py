"""Kubernetes protobuf request bodies -> JSON dicts (kubecore.api.protobuf).

Two kinds of tests:
* hand-built bodies from a tiny encoder below (scalars, packed, maps, special types, errors);
* real kubectl: a throwaway HTTP server records what ``kubectl create ...`` sends (protobuf since
  client-go 1.35), and the decoded dict must equal ``kubectl create ... --dry-run=client -o json``.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import struct
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from kubecore.api.errors import StatusError
from kubecore.api.protobuf import (
    MAGIC,
    MEDIA_TYPE,
    decode_body,
    decode_message,
    lookup_kind,
    wire,
)
from kubecore.api.gotime import format_duration as go_duration
from kubecore.api.protobuf.schema import KINDS, MESSAGES

# ---------------------------------------------------------------------------------------------
# a tiny encoder (test side only)


def varint(v: int) -> bytes:
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def tag(num: int, wt: int) -> bytes:
    return varint(num << 3 | wt)


def vi(num: int, v: int) -> bytes:
    return tag(num, 0) + varint(v)


def ld(num: int, payload: bytes | str) -> bytes:
    if isinstance(payload, str):
        payload = payload.encode()
    return tag(num, 2) + varint(len(payload)) + payload


def f64(num: int, v: float) -> bytes:
    return tag(num, 1) + struct.pack("<d", v)


def entry(k: str, v: bytes | str) -> bytes:
    return ld(1, k) + ld(2, v)


def envelope(api_version: str, kind: str, raw: bytes, **extra: str) -> bytes:
    body = ld(1, ld(1, api_version) + ld(2, kind)) + ld(2, raw)
    if "encoding" in extra:
        body += ld(3, extra["encoding"])
    if "content_type" in extra:
        body += ld(4, extra["content_type"])
    return MAGIC + body


def meta(name: str = "", **kw: Any) -> bytes:
    """ObjectMeta as Go's marshaller writes it: non-pointer strings always, zero time as empty."""
    b = ld(1, name) + ld(2, kw.get("generateName", "")) + ld(3, kw.get("namespace", "")) + ld(4, "") + \
        ld(5, "") + ld(6, "") + vi(7, 0) + ld(8, kw.get("creation", b""))
    for k, v in kw.get("labels", {}).items():
        b += ld(11, entry(k, v))
    return b


# ---------------------------------------------------------------------------------------------
# wire reader


def test_varint_and_signed() -> None:
    for v in (0, 1, 127, 128, 300, 2**31 - 1, 2**63 - 1, 2**64 - 1):
        assert wire.read_varint(varint(v), 0) == (v, len(varint(v)))
    assert wire.as_int32(varint(-5)[0] and wire.read_varint(varint(-5), 0)[0]) == -5
    assert wire.as_int64(wire.read_varint(varint(-1), 0)[0]) == -1
    assert len(varint(-1)) == 10
    with pytest.raises(wire.WireError):
        wire.read_varint(b"\x80\x80", 0)
    with pytest.raises(wire.WireError):
        wire.read_varint(b"\xff" * 11, 0)


def test_iter_fields_all_wire_types() -> None:
    buf = vi(1, 7) + f64(2, 1.5) + ld(3, "abc") + tag(4, 5) + struct.pack("<I", 9)
    got = list(wire.iter_fields(buf))
    assert got[0] == (1, 0, 7)
    assert got[1][0:2] == (2, 1) and wire.as_double(got[1][2]) == 1.5  # type: ignore[arg-type]
    assert got[2] == (3, 2, b"abc")
    assert got[3] == (4, 5, 9)
    with pytest.raises(wire.WireError):
        list(wire.iter_fields(ld(1, "abc")[:-1]))  # truncated
    with pytest.raises(wire.WireError):
        list(wire.iter_fields(tag(1, 3)))  # groups are not used by Kubernetes
    with pytest.raises(wire.WireError):
        list(wire.iter_fields(b"\x00\x01"))  # field number 0
    assert wire.unpack_packed(varint(1) + varint(300), 0) == [1, 300]


# ---------------------------------------------------------------------------------------------
# schema sanity


def test_schema_covers_the_kinds_kubectl_sends() -> None:
    need = [
        ("v1", "Namespace"), ("v1", "ConfigMap"), ("v1", "Secret"), ("v1", "Service"), ("v1", "ServiceAccount"),
        ("v1", "ResourceQuota"), ("v1", "Pod"), ("v1", "Node"), ("v1", "Binding"), ("v1", "Endpoints"),
        ("v1", "Event"), ("v1", "LimitRange"), ("v1", "PersistentVolume"), ("v1", "PersistentVolumeClaim"),
        ("v1", "ReplicationController"), ("v1", "PodTemplate"),
        ("apps/v1", "Deployment"), ("apps/v1", "ReplicaSet"), ("apps/v1", "StatefulSet"), ("apps/v1", "DaemonSet"),
        ("apps/v1", "ControllerRevision"), ("batch/v1", "Job"), ("batch/v1", "CronJob"),
        ("rbac.authorization.k8s.io/v1", "Role"), ("rbac.authorization.k8s.io/v1", "RoleBinding"),
        ("rbac.authorization.k8s.io/v1", "ClusterRole"), ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
        ("policy/v1", "PodDisruptionBudget"), ("policy/v1", "Eviction"), ("networking.k8s.io/v1", "Ingress"),
        ("networking.k8s.io/v1", "NetworkPolicy"), ("networking.k8s.io/v1", "IngressClass"),
        ("scheduling.k8s.io/v1", "PriorityClass"), ("autoscaling/v1", "Scale"),
        ("autoscaling/v2", "HorizontalPodAutoscaler"), ("coordination.k8s.io/v1", "Lease"),
        ("discovery.k8s.io/v1", "EndpointSlice"), ("storage.k8s.io/v1", "StorageClass"),
        ("events.k8s.io/v1", "Event"), ("authentication.k8s.io/v1", "TokenRequest"),
        ("v1", "DeleteOptions"), ("apps/v1", "DeleteOptions"), ("meta.k8s.io/v1", "DeleteOptions"),
    ]
    for api_version, kind in need:
        assert lookup_kind(api_version, kind) is not None, (api_version, kind)
    # every message reference resolves
    for fields in MESSAGES.values():
        for _num, _name, t, _flags in fields:
            for part in t.replace("[]", " ").replace("map[", " ").replace("]", " ").split():
                if part.startswith("msg:"):
                    assert part[4:] in MESSAGES
    assert all(m in MESSAGES for m in KINDS.values())


# ---------------------------------------------------------------------------------------------
# decoding


def test_namespace_minimal() -> None:
    body = envelope("v1", "Namespace", ld(1, meta("x")) + ld(2, b"") + ld(3, b""))
    assert decode_body(body) == {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "x"},
                                 "spec": {}, "status": {}}


def test_key_order_kind_apiversion_then_struct_order() -> None:
    body = envelope("v1", "ConfigMap", ld(2, entry("a", "b")) + ld(1, meta("cm")))
    assert list(decode_body(body)) == ["kind", "apiVersion", "metadata", "data"]


def test_secret_bytes_base64_and_maps() -> None:
    raw = ld(1, meta("s", labels={"a": "1", "b": "2"})) + ld(2, entry("k", b"\x00\xffv")) + \
        ld(2, entry("e", b"")) + ld(3, "Opaque")
    got = decode_body(envelope("v1", "Secret", raw))
    assert got["data"] == {"k": base64.b64encode(b"\x00\xffv").decode(), "e": ""}
    assert got["type"] == "Opaque"
    assert got["metadata"] == {"name": "s", "labels": {"a": "1", "b": "2"}}
    assert "immutable" not in got and "stringData" not in got


def test_configmap_binary_data() -> None:
    raw = ld(1, meta("cm")) + ld(3, entry("bin", b"\x01\x02"))
    assert decode_body(envelope("v1", "ConfigMap", raw))["binaryData"] == {"bin": "AQI="}


def test_pointer_zero_kept_nonpointer_zero_dropped() -> None:
    # DeploymentSpec: replicas *int32 (pointer: 0 stays), minReadySeconds int32 omitempty (0 dropped),
    # paused bool omitempty
    spec = vi(1, 0) + vi(5, 0) + vi(7, 0) + ld(3, ld(1, meta()) + ld(2, b"")) + ld(4, b"")
    got = decode_body(envelope("apps/v1", "Deployment", ld(1, meta("d")) + ld(2, spec) + ld(3, b"")))
    assert got["spec"]["replicas"] == 0
    assert "minReadySeconds" not in got["spec"] and "paused" not in got["spec"]
    assert got["spec"]["strategy"] == {}
    assert got["spec"]["template"] == {"metadata": {}, "spec": {"containers": None}}
    assert got["status"] == {}


def test_negative_ints_and_int64() -> None:
    # PriorityClass.value int32 (non-omitempty), Pod.spec.activeDeadlineSeconds *int64
    got = decode_body(envelope("scheduling.k8s.io/v1", "PriorityClass", ld(1, meta("pc")) + vi(2, -7)))
    assert got["value"] == -7
    spec = vi(5, 2**40) + ld(2, ld(1, "c") + ld(2, "img"))
    got = decode_body(envelope("v1", "Pod", ld(1, meta("p")) + ld(2, spec)))
    assert got["spec"]["activeDeadlineSeconds"] == 2**40
    assert got["spec"]["containers"] == [{"name": "c", "image": "img", "resources": {}}]


def test_packed_and_unpacked_repeated_ints() -> None:
    # PodSecurityContext.supplementalGroups []int64 (field 4)
    sc_unpacked = vi(4, 1) + vi(4, 2)
    sc_packed = ld(4, varint(1) + varint(2))
    for sc in (sc_unpacked, sc_packed):
        spec = ld(14, sc)
        got = decode_body(envelope("v1", "Pod", ld(1, meta("p")) + ld(2, spec)))
        assert got["spec"]["securityContext"]["supplementalGroups"] == [1, 2]


def test_quantity_intorstring_time() -> None:
    # ResourceQuota spec.hard map[string]Quantity
    raw = ld(1, meta("q")) + ld(2, ld(1, entry("cpu", ld(1, "500m")) + b"") + ld(1, entry("pods", ld(1, "2"))))
    got = decode_body(envelope("v1", "ResourceQuota", raw))
    assert got["spec"]["hard"] == {"cpu": "500m", "pods": "2"}
    # ServicePort.targetPort IntOrString: int and string forms
    port_int = ld(1, "") + ld(2, "TCP") + vi(3, 80) + ld(4, vi(1, 0) + vi(2, 8080) + ld(3, "")) + vi(5, 0)
    port_str = ld(1, "web") + ld(2, "TCP") + vi(3, 81) + ld(4, vi(1, 1) + vi(2, 0) + ld(3, "http")) + vi(5, 0)
    got = decode_body(envelope("v1", "Service", ld(1, meta("svc")) + ld(2, ld(1, port_int) + ld(1, port_str))))
    assert got["spec"]["ports"] == [
        {"protocol": "TCP", "port": 80, "targetPort": 8080},
        {"name": "web", "protocol": "TCP", "port": 81, "targetPort": "http"},
    ]
    # Time: seconds only (nanos dropped, as upstream's metav1.Time); empty = zero time = omitted (omitzero)
    ts = ld(1, vi(1, 1767323045) + vi(2, 123456789))
    got = decode_body(envelope("v1", "Namespace", ld(1, meta("x", creation=ts[2:]))))
    assert got["metadata"]["creationTimestamp"] == "2026-01-02T03:04:05Z"
    got = decode_body(envelope("v1", "Namespace", ld(1, meta("x")) + b""))
    assert "creationTimestamp" not in got["metadata"]
    # deletionTimestamp *Time
    got = decode_body(envelope("v1", "Namespace", ld(1, ld(1, "x") + ld(9, vi(1, 0)))))
    assert got["metadata"]["deletionTimestamp"] == "1970-01-01T00:00:00Z"


def test_microtime_and_duration() -> None:
    # Lease spec.renewTime *MicroTime (field 4), leaseDurationSeconds *int32
    raw = ld(1, meta("l")) + ld(2, ld(1, "holder") + vi(2, 15) + ld(4, vi(1, 1767323045) + vi(2, 123456789)))
    got = decode_body(envelope("coordination.k8s.io/v1", "Lease", raw))
    assert got["spec"] == {"holderIdentity": "holder", "leaseDurationSeconds": 15,
                           "renewTime": "2026-01-02T03:04:05.123456Z"}
    assert go_duration(0) == "0s"
    assert go_duration(3600 * 10**9) == "1h0m0s"
    assert go_duration(90 * 10**9) == "1m30s"
    assert go_duration(1_500_000_000) == "1.5s"
    assert go_duration(1_500_000) == "1.5ms"
    assert go_duration(1500) == "1.5µs"
    assert go_duration(999) == "999ns"
    assert go_duration(-2 * 10**9) == "-2s"


def test_inline_volume_source_and_env_from() -> None:
    vol = ld(1, "cfg") + ld(2, ld(19, ld(1, ld(1, "my-cm")) + vi(3, 0o644)))
    spec = ld(1, vol) + ld(2, ld(1, "c") + ld(2, "img"))
    got = decode_body(envelope("v1", "Pod", ld(1, meta("p")) + ld(2, spec)))
    assert got["spec"]["volumes"] == [{"name": "cfg", "configMap": {"name": "my-cm", "defaultMode": 0o644}}]


def test_unknown_fields_are_ignored() -> None:
    raw = ld(1, meta("x")) + vi(99, 5) + ld(100, "junk")
    assert decode_body(envelope("v1", "Namespace", raw))["metadata"] == {"name": "x"}


def test_repeated_message_field_merges() -> None:
    # two occurrences of a singular message field are merged (proto semantics)
    raw = ld(1, ld(1, "x")) + ld(1, ld(11, entry("a", "b")))
    assert decode_body(envelope("v1", "Namespace", raw))["metadata"] == {"name": "x", "labels": {"a": "b"}}


def test_delete_options_any_group_version() -> None:
    raw = vi(1, 0) + ld(2, ld(1, "uid-1") + ld(2, "42")) + ld(4, "Foreground") + ld(5, "All")
    for av in ("v1", "apps/v1", "meta.k8s.io/v1"):
        got = decode_body(envelope(av, "DeleteOptions", raw))
        assert got == {"kind": "DeleteOptions", "apiVersion": av, "gracePeriodSeconds": 0,
                       "preconditions": {"uid": "uid-1", "resourceVersion": "42"},
                       "propagationPolicy": "Foreground", "dryRun": ["All"]}


def test_eviction_binding_scale() -> None:
    got = decode_body(envelope("policy/v1", "Eviction", ld(1, meta("p", namespace="ns")) + ld(2, vi(1, 30))))
    assert got == {"kind": "Eviction", "apiVersion": "policy/v1", "metadata": {"name": "p", "namespace": "ns"},
                   "deleteOptions": {"gracePeriodSeconds": 30}}
    got = decode_body(envelope("v1", "Binding", ld(1, meta("p")) + ld(2, ld(1, "Node") + ld(3, "n1"))))
    assert got["target"] == {"kind": "Node", "name": "n1"}
    got = decode_body(envelope("autoscaling/v1", "Scale", ld(1, meta("d")) + ld(2, vi(1, 0)) + ld(3, b"")))
    assert got["spec"] == {} and got["status"] == {"replicas": 0}
    got = decode_body(envelope("autoscaling/v1", "Scale", ld(1, meta("d")) + ld(2, vi(1, 5))))
    assert got["spec"] == {"replicas": 5}


def test_raw_extension_json_and_nested_protobuf() -> None:
    inner = envelope("v1", "ConfigMap", ld(1, meta("cm")))
    for data, want in ((b'{"a":1}', {"a": 1}), (inner, {"kind": "ConfigMap", "apiVersion": "v1",
                                                        "metadata": {"name": "cm"}})):
        raw = ld(1, meta("rev")) + ld(2, ld(1, data)) + vi(3, 1)
        got = decode_body(envelope("apps/v1", "ControllerRevision", raw))
        assert got["data"] == want and got["revision"] == 1


def test_decode_message_direct() -> None:
    assert decode_message("meta.v1.LabelSelector", ld(1, entry("app", "x"))) == {"matchLabels": {"app": "x"}}


@pytest.mark.parametrize("body,fragment", [
    (b'{"kind":"Namespace"}', "does not appear to be a protobuf message"),
    (MAGIC + b"\x0a\x05\x0a", "could not be decoded as protobuf"),
    (envelope("v1", "Nope", b""), 'no kind "Nope" is registered for version "v1"'),
    (envelope("example.com/v1", "Widget", b""), 'no kind "Widget"'),
    (envelope("v1", "Namespace", b"", encoding="gzip"), "content encoding"),
    (MAGIC + ld(1, ld(1, "v1")), "'Kind' is missing"),
    (envelope("v1", "Namespace", vi(1, 5)), "wrong wire type"),
    (envelope("v1", "Service", ld(2, ld(1, ld(4, vi(1, 7))))), "IntOrString"),
    (envelope("v1", "Namespace", ld(1, b"\x0a\x50")), "runs past the end"),
])
def test_malformed_is_400(body: bytes, fragment: str) -> None:
    with pytest.raises(StatusError) as ei:
        decode_body(body)
    assert ei.value.code == 400 and ei.value.reason == "BadRequest"
    assert fragment in ei.value.message


# ---------------------------------------------------------------------------------------------
# real kubectl round trip

KUBECTL = shutil.which("kubectl")

_DISCOVERY: dict[str, Any] = {
    "/api": {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
        {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]},
    "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
        {"name": g, "versions": [{"groupVersion": f"{g}/v1", "version": "v1"}],
         "preferredVersion": {"groupVersion": f"{g}/v1", "version": "v1"}}
        for g in ("apps", "batch", "rbac.authorization.k8s.io")]},
    "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
        {"name": r, "singularName": s, "namespaced": ns, "kind": k, "verbs": ["create", "get", "list"]}
        for r, s, ns, k in (("pods", "pod", True, "Pod"), ("nodes", "node", False, "Node"),
                            ("configmaps", "configmap", True, "ConfigMap"),
                            ("namespaces", "namespace", False, "Namespace"))]},
    "/apis/apps/v1": {"kind": "APIResourceList", "groupVersion": "apps/v1", "resources": [
        {"name": "deployments", "singularName": "deployment", "namespaced": True, "kind": "Deployment",
         "verbs": ["create", "get", "list"]}]},
    "/apis/batch/v1": {"kind": "APIResourceList", "groupVersion": "batch/v1", "resources": [
        {"name": "jobs", "singularName": "job", "namespaced": True, "kind": "Job", "verbs": ["create"]}]},
    "/apis/rbac.authorization.k8s.io/v1": {"kind": "APIResourceList",
                                           "groupVersion": "rbac.authorization.k8s.io/v1", "resources": [
        {"name": r, "singularName": r[:-1], "namespaced": ns, "kind": k, "verbs": ["create"]}
        for r, ns, k in (("roles", True, "Role"), ("rolebindings", True, "RoleBinding"),
                         ("clusterroles", False, "ClusterRole"),
                         ("clusterrolebindings", False, "ClusterRoleBinding"))]},
}


class _Recorder(BaseHTTPRequestHandler):
    bodies: ClassVar[list[tuple[str, str, Any]]] = []

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, code: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/version":
            self._send(200, {"major": "1", "minor": "37", "gitVersion": "v1.37.0"})
        elif path in _DISCOVERY:
            self._send(200, _DISCOVERY[path])
        else:
            self._send(404, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                             "reason": "NotFound", "code": 404})

    def _write(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n)
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        try:
            obj = decode_body(raw) if ctype == MEDIA_TYPE else json.loads(raw)
        except StatusError as e:
            self._send(e.code, e.status())
            return
        type(self).bodies.append((self.command, ctype, obj))
        self._send(201, obj)

    do_POST = _write
    do_PUT = _write


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    if KUBECTL is None:
        pytest.skip("kubectl not installed")
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    d = tmp_path_factory.mktemp("kubectl")
    kc = d / "kubeconfig"
    kc.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "t",
        "clusters": [{"name": "t", "cluster": {"server": f"http://127.0.0.1:{srv.server_address[1]}"}}],
        "users": [{"name": "t", "user": {}}],
        "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t", "namespace": "default"}}],
    }))
    yield kc
    srv.shutdown()
    srv.server_close()


def _kubectl(kc: Path, args: list[str]) -> str:
    env = dict(os.environ, KUBECONFIG=str(kc), HOME=str(kc.parent))
    assert KUBECTL is not None
    p = subprocess.run([KUBECTL, *args], check=False, env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout


KUBECTL_CREATE = [
    ["namespace", "ns1"],
    ["configmap", "cm1", "--from-literal=a=b", "--from-literal=c=multi\nline"],
    ["secret", "generic", "s1", "--from-literal=user=admin", "--from-literal=pw=s3cr3t!",
     "--type=Opaque"],
    ["secret", "docker-registry", "reg", "--docker-server=r.example", "--docker-username=u",
     "--docker-password=p"],
    ["deployment", "web", "--image=nginx:1.27", "--replicas=3", "--port=80"],
    ["deployment", "zero", "--image=nginx", "--replicas=0"],
    ["service", "clusterip", "svc1", "--tcp=80:8080", "--tcp=443:https"],
    ["service", "nodeport", "svc2", "--tcp=80:8080", "--node-port=30080"],
    ["service", "externalname", "svc3", "--external-name=example.com"],
    ["job", "job1", "--image=busybox", "--", "echo", "hi"],
    ["cronjob", "cj1", "--image=busybox", "--schedule=*/5 * * * *", "--", "date"],
    ["role", "r1", "--verb=get,list,watch", "--resource=pods,deployments.apps",
     "--resource-name=a"],
    ["rolebinding", "rb1", "--role=r1", "--user=alice", "--group=devs", "--serviceaccount=default:sa1"],
    ["clusterrole", "cr1", "--verb=get", "--resource=nodes", "--non-resource-url=/healthz"],
    ["clusterrolebinding", "crb1", "--clusterrole=cr1", "--group=g"],
    ["serviceaccount", "sa1"],
    ["quota", "q1", "--hard=cpu=1,memory=1Gi,pods=2", "--scopes=NotTerminating"],
    ["priorityclass", "pc1", "--value=1000", "--description=high", "--preemption-policy=Never"],
    ["poddisruptionbudget", "pdb1", "--selector=app=x", "--min-available=50%"],
    ["poddisruptionbudget", "pdb2", "--selector=app=y", "--max-unavailable=1"],
    ["ingress", "ing1", "--rule=foo.com/bar*=svc1:8080,tls=my-cert", "--class=nginx",
     "--annotation=a=b"],
]


@pytest.mark.parametrize("args", KUBECTL_CREATE, ids=lambda a: "-".join(a[:2]))
def test_real_kubectl_create_matches_json(kubeconfig: Path, args: list[str]) -> None:
    cut = args.index("--") if "--" in args else len(args)
    expected = json.loads(_kubectl(kubeconfig, ["create", *args[:cut], "--dry-run=client", "-o", "json",
                                                *args[cut:]]))
    before = len(_Recorder.bodies)
    _kubectl(kubeconfig, ["create", *args])
    sent = _Recorder.bodies[before:]
    assert len(sent) == 1, sent
    method, ctype, obj = sent[0]
    assert (method, ctype) == ("POST", MEDIA_TYPE)
    assert obj == expected
    assert list(obj)[:2] == ["kind", "apiVersion"]
