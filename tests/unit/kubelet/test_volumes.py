"""Pod volumes on disk (volumes.VolumeManager, volume_payloads, atomic_writer): upstream's layout,
file modes, hostPath type checks, FailedMount messages, container mounts, clean-up. Real files
under pytest's tmp_path; ConfigMaps and Secrets from an in-memory source."""

from __future__ import annotations

import base64
import os
import socket
import stat
from pathlib import Path
from typing import Any

import pytest

from kubecore.client.clock import FakeClock
from kubecore.kubelet import atomic_writer, cri, etc_hosts
from kubecore.kubelet.atomic_writer import FileProjection
from kubecore.kubelet.objects import CONFIGMAP, SECRET
from kubecore.kubelet.volumes import MountError, VolumeManager
from tests.unit.kubelet.kubelet_fixtures import UID, FakeObjects, container, make_pod

Obj = dict[str, Any]
OBJECTS = {
    (CONFIGMAP, "app"): {"data": {"app.conf": "level=debug\n", "other": "x"},
                         "binaryData": {"blob": base64.b64encode(b"\x00\x01").decode()}},
    (SECRET, "creds"): {"data": {"password": base64.b64encode(b"s3cret").decode()}},
}


class Node:
    def __init__(self, root: Path | None, objects: dict[tuple[str, str], Obj] | None = None) -> None:
        self.clock = FakeClock()
        self.events: list[tuple[str, str]] = []
        self.objects = FakeObjects(dict(OBJECTS if objects is None else objects))
        self.volumes = VolumeManager(root_dir=str(root) if root else None, objects=self.objects, clock=self.clock,
                                     record=lambda _ref, _t, reason, msg: self.events.append((reason, msg)),
                                     allocatable=lambda: {"cpu": "2", "memory": "1Gi"})


def pod_with(volumes: list[Obj], mounts: list[Obj] | None = None, **container_extra: Any) -> Obj:
    pod = make_pod(containers=[container(volumeMounts=mounts or [], **container_extra)])
    pod["spec"]["volumes"] = volumes
    pod["metadata"]["labels"] = {"app": "web", "tier": "front"}
    return pod


def vol_dir(root: Path, plugin: str, name: str) -> Path:
    return root / "pods" / UID / "volumes" / plugin / name


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


async def test_config_map_secret_and_downward_files_with_modes(tmp_path: Path) -> None:
    node = Node(tmp_path)
    pod = pod_with([
        {"name": "cfg", "configMap": {"name": "app"}},
        {"name": "some", "configMap": {"name": "app", "items": [{"key": "other", "path": "sub/o.txt", "mode": 0o600}],
                                       "defaultMode": 0o640}},
        {"name": "sec", "secret": {"secretName": "creds", "defaultMode": 0o400}},
        {"name": "info", "downwardAPI": {"items": [
            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
            {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
            {"path": "cpu", "resourceFieldRef": {"containerName": "app", "resource": "limits.cpu", "divisor": "1m"}}]}},
    ])
    assert await node.volumes.setup(pod) == []
    cfg = vol_dir(tmp_path, "kubernetes.io~configmap", "cfg")
    assert (cfg / "app.conf").read_text() == "level=debug\n" and (cfg / "blob").read_bytes() == b"\x00\x01"
    assert (cfg / "app.conf").is_symlink() and os.readlink(cfg / "app.conf") == "..data/app.conf"
    assert mode(cfg / "app.conf") == 0o644
    some = vol_dir(tmp_path, "kubernetes.io~configmap", "some")
    assert sorted(p.name for p in some.iterdir() if not p.name.startswith("..")) == ["sub"]
    assert (some / "sub" / "o.txt").read_text() == "x" and mode(some / "sub" / "o.txt") == 0o600
    sec = vol_dir(tmp_path, "kubernetes.io~secret", "sec")
    assert (sec / "password").read_bytes() == b"s3cret" and mode(sec / "password") == 0o400
    info = vol_dir(tmp_path, "kubernetes.io~downward-api", "info")
    assert (info / "labels").read_text() == 'app="web"\ntier="front"'
    assert (info / "name").read_text() == "web" and (info / "cpu").read_text() == "2000"


async def test_projected_sources_share_one_directory(tmp_path: Path) -> None:
    node = Node(tmp_path)
    pod = pod_with([{"name": "all", "projected": {"defaultMode": 0o440, "sources": [
        {"configMap": {"name": "app", "items": [{"key": "app.conf", "path": "app.conf"}]}},
        {"secret": {"name": "creds"}},
        {"downwardAPI": {"items": [{"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
        {"serviceAccountToken": {"path": "token"}},
        {"configMap": {"name": "absent", "optional": True}}]}}])
    assert await node.volumes.setup(pod) == []
    d = vol_dir(tmp_path, "kubernetes.io~projected", "all")
    names = sorted(p.name for p in d.iterdir() if not p.name.startswith(".."))
    assert names == ["app.conf", "ns", "password"]
    assert (d / "ns").read_text() == "default" and mode(d / "password") == 0o440


async def test_a_changed_config_map_is_swapped_in_atomically(tmp_path: Path) -> None:
    node = Node(tmp_path)
    pod = pod_with([{"name": "cfg", "configMap": {"name": "app"}}])
    await node.volumes.setup(pod)
    cfg = vol_dir(tmp_path, "kubernetes.io~configmap", "cfg")
    first = os.readlink(cfg / "..data")
    await node.volumes.setup(pod)
    assert os.readlink(cfg / "..data") == first  # nothing changed: nothing written
    node.objects.objects[(CONFIGMAP, "app")] = {"data": {"app.conf": "level=info\n"}}
    await node.volumes.setup(pod)
    assert os.readlink(cfg / "..data") != first and not (cfg / first).exists()
    assert (cfg / "app.conf").read_text() == "level=info\n"
    assert not (cfg / "other").exists() and not (cfg / "other").is_symlink()


@pytest.mark.parametrize(("volume", "message"), [
    ({"configMap": {"name": "missing"}}, 'configmap "missing" not found'),
    ({"secret": {"secretName": "missing"}}, 'secret "missing" not found'),
    ({"configMap": {"name": "app", "items": [{"key": "nope", "path": "n"}]}},
     "configmap references non-existent config key: nope"),
    ({"secret": {"secretName": "creds", "items": [{"key": "nope", "path": "n"}]}},
     "secret references non-existent secret key: nope"),
    ({"projected": {"sources": [{"configMap": {"name": "m1"}}, {"secret": {"name": "m2"}}]}},
     '[configmap "m1" not found, secret "m2" not found]'),
    ({"persistentVolumeClaim": {"claimName": "data"}}, "volume type persistentVolumeClaim is not supported"),
])
async def test_a_failed_volume_is_a_failed_mount_event_and_blocks_the_pod(tmp_path: Path, volume: Obj,
                                                                         message: str) -> None:
    node = Node(tmp_path)
    pod = pod_with([{"name": "v", **volume}])
    first = await node.volumes.wait_for_mount(pod)
    second = await node.volumes.wait_for_mount(pod)
    assert first is not None and second is not None and second > first  # backing off
    reason, text = node.events[0]
    assert reason == "FailedMount" and text.startswith(f'MountVolume.SetUp failed for volume "v" : {message}')


async def test_optional_missing_objects_give_empty_volumes(tmp_path: Path) -> None:
    node = Node(tmp_path)
    pod = pod_with([{"name": "c", "configMap": {"name": "missing", "optional": True}},
                    {"name": "k", "configMap": {"name": "app", "optional": True, "items": [{"key": "nope", "path": "n"}]}}])
    assert await node.volumes.wait_for_mount(pod) is None
    assert [p.name for p in vol_dir(tmp_path, "kubernetes.io~configmap", "c").iterdir()
            if not p.name.startswith("..")] == []


async def test_a_config_map_created_later_unblocks_the_pod(tmp_path: Path) -> None:
    node = Node(tmp_path, objects={})
    pod = pod_with([{"name": "cfg", "configMap": {"name": "app"}}])
    assert await node.volumes.wait_for_mount(pod) is not None
    node.objects.objects[(CONFIGMAP, "app")] = OBJECTS[(CONFIGMAP, "app")]
    assert await node.volumes.wait_for_mount(pod) is None
    del node.objects.objects[(CONFIGMAP, "app")]  # deleted under a running pod: reported, files stay
    assert await node.volumes.wait_for_mount(pod) is None
    assert (vol_dir(tmp_path, "kubernetes.io~configmap", "cfg") / "other").read_text() == "x"
    assert [r for r, _ in node.events] == ["FailedMount", "FailedMount"]


async def test_host_path_types(tmp_path: Path) -> None:
    node = Node(tmp_path / "root")
    sock_path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(sock_path))
        (tmp_path / "file").write_text("x")
        pod = pod_with([
            {"name": "mk", "hostPath": {"path": str(tmp_path / "made" / "dir"), "type": "DirectoryOrCreate"}},
            {"name": "mkf", "hostPath": {"path": str(tmp_path / "made" / "f"), "type": "FileOrCreate"}},
            {"name": "sock", "hostPath": {"path": str(sock_path), "type": "Socket"}},
            {"name": "any", "hostPath": {"path": str(tmp_path / "whatever")}},
            {"name": "notdir", "hostPath": {"path": str(tmp_path / "file"), "type": "Directory"}},
            {"name": "nofile", "hostPath": {"path": str(tmp_path / "absent"), "type": "File"}},
            {"name": "notsock", "hostPath": {"path": str(tmp_path / "file"), "type": "Socket"}},
        ])
        failures = await node.volumes.setup(pod)
    assert (tmp_path / "made" / "dir").is_dir() and mode(tmp_path / "made" / "dir") & 0o755 == 0o755
    assert (tmp_path / "made" / "f").is_file()
    assert [str(f) for f in failures] == [
        f'MountVolume.SetUp failed for volume "notdir" : hostPath type check failed: {tmp_path}/file is not a directory',
        f'MountVolume.SetUp failed for volume "nofile" : hostPath type check failed: {tmp_path}/absent is not a file',
        f'MountVolume.SetUp failed for volume "notsock" : hostPath type check failed: {tmp_path}/file is not a socket file']


async def test_container_mounts_with_sub_paths_and_read_only_file_volumes(tmp_path: Path) -> None:
    node = Node(tmp_path)
    pod = pod_with([{"name": "scratch", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "app"}},
                    {"name": "host", "hostPath": {"path": "/srv/data"}}],
                   mounts=[{"name": "scratch", "mountPath": "/tmp/s"},
                           {"name": "scratch", "mountPath": "/cache", "subPathExpr": "$(POD)/cache"},
                           {"name": "cfg", "mountPath": "/etc/app"},
                           {"name": "cfg", "mountPath": "/etc/app.conf", "subPath": "app.conf"},
                           {"name": "host", "mountPath": "/data", "readOnly": True}])
    await node.volumes.setup(pod)
    scratch = vol_dir(tmp_path, "kubernetes.io~empty-dir", "scratch")
    assert scratch.is_dir() and mode(scratch) == 0o777
    cfg = vol_dir(tmp_path, "kubernetes.io~configmap", "cfg")
    mounts = node.volumes.container_mounts(pod, pod["spec"]["containers"][0], {"POD": "web"})
    assert mounts == [
        cri.Mount(container_path="/tmp/s", host_path=str(scratch)),
        cri.Mount(container_path="/cache", host_path=str(scratch / "web" / "cache")),
        cri.Mount(container_path="/etc/app", host_path=str(cfg), readonly=True),
        cri.Mount(container_path="/etc/app.conf", host_path=str(cfg / "app.conf"), readonly=True),
        cri.Mount(container_path="/data", host_path="/srv/data", readonly=True)]
    assert (scratch / "web" / "cache").is_dir()


@pytest.mark.parametrize(("mount", "message"), [
    ({"name": "nope", "mountPath": "/x"}, 'cannot find volume "nope" to mount into container "app"'),
    ({"name": "scratch", "mountPath": "/x", "subPath": "/abs"}, "error SubPath `/abs` must not be an absolute path"),
    ({"name": "scratch", "mountPath": "/x", "subPath": "a/../../b"},
     "unable to provision SubPath `a/../../b`: must not contain '..'"),
    ({"name": "scratch", "mountPath": "/x", "subPathExpr": "$(NOPE)/$(EMPTY)"}, "missing value for EMPTY, NOPE"),
])
def test_bad_mounts_fail_the_container(tmp_path: Path, mount: Obj, message: str) -> None:
    node = Node(tmp_path)
    pod = pod_with([{"name": "scratch", "emptyDir": {}}], mounts=[mount])
    with pytest.raises(MountError) as e:
        node.volumes.container_mounts(pod, pod["spec"]["containers"][0], {"EMPTY": ""})
    assert str(e.value) == message


async def test_without_a_root_dir_nothing_is_written_but_references_are_checked(tmp_path: Path) -> None:
    node = Node(None)
    pod = pod_with([{"name": "cfg", "configMap": {"name": "app"}},
                    {"name": "h", "hostPath": {"path": str(tmp_path / "x"), "type": "DirectoryOrCreate"}}],
                   mounts=[{"name": "cfg", "mountPath": "/etc/app"}])
    assert await node.volumes.wait_for_mount(pod) is None
    assert node.volumes.container_mounts(pod, pod["spec"]["containers"][0], {}) == []
    assert not (tmp_path / "x").exists() and node.objects.reads == [(CONFIGMAP, "default", "app")]
    missing = pod_with([{"name": "cfg", "configMap": {"name": "missing"}}])
    missing["metadata"]["uid"] = "another-pod"
    assert await node.volumes.wait_for_mount(missing) is not None


async def test_cleanup_and_orphans(tmp_path: Path) -> None:
    node = Node(tmp_path)
    pod = pod_with([{"name": "scratch", "emptyDir": {}}])
    await node.volumes.setup(pod)
    (tmp_path / "pods" / "orphan-uid" / "volumes").mkdir(parents=True)
    assert node.volumes.cleanup_orphans([UID]) == ["orphan-uid"]
    assert (tmp_path / "pods" / UID).is_dir() and not (tmp_path / "pods" / "orphan-uid").exists()
    node.volumes.cleanup(UID)
    assert not (tmp_path / "pods" / UID).exists()


@pytest.mark.parametrize(("path", "message"), [
    ("/abs", "must be relative path"), ("a/../b", "must not contain '..'"), ("..x", "must not start with '..'"),
    ("", "must not be empty"),
])
def test_the_atomic_writer_refuses_paths_leaving_the_directory(tmp_path: Path, path: str, message: str) -> None:
    with pytest.raises(atomic_writer.PayloadError, match=message):
        atomic_writer.write(tmp_path, {path: FileProjection(b"x", 0o644)})
    assert list(tmp_path.iterdir()) == []


def test_the_managed_etc_hosts(tmp_path: Path) -> None:
    pod = make_pod()
    pod["spec"]["hostname"], pod["spec"]["subdomain"] = "db-0", "db"
    pod["spec"]["hostAliases"] = [{"ip": "10.1.2.3", "hostnames": ["foo.local", "bar.local"]}]
    assert etc_hosts.content(pod, ["10.128.0.7"]) == (
        "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
        "fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n"
        "10.128.0.7\tdb-0.db.default.svc.cluster.local\tdb-0\n"
        "\n# Entries added by HostAliases.\n10.1.2.3\tfoo.local\tbar.local\n")
    node_hosts = tmp_path / "hosts"
    node_hosts.write_text("127.0.0.1 localhost\n")
    host_pod = make_pod()
    host_pod["spec"]["hostNetwork"] = True
    assert etc_hosts.content(host_pod, ["10.0.0.5"], node_hosts=str(node_hosts)) == \
        "# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n"


def test_a_container_mounting_its_own_etc_hosts_keeps_it(tmp_path: Path) -> None:
    node = Node(tmp_path)
    pod = pod_with([{"name": "h", "hostPath": {"path": "/srv/hosts"}}], mounts=[{"name": "h", "mountPath": "/etc/hosts"}])
    mounts = node.volumes.container_mounts(pod, pod["spec"]["containers"][0], {}, pod_ips=["10.128.0.7"])
    assert mounts == [cri.Mount(container_path="/etc/hosts", host_path="/srv/hosts")]
    assert not (tmp_path / "pods" / UID / "etc-hosts").exists()
