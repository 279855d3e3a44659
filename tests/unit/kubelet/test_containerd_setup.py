"""The files kubecore writes for containerd: config.toml, the CNI conflist, the OCI image tarballs
(kubecore.kubelet.containerd.daemon / images) and `kubecore images build-local --output`.
Images are built from a stand-in busybox (a script that lists applets), so no package is needed."""

from __future__ import annotations

import hashlib
import io
import json
import struct
import tarfile
import tomllib
from pathlib import Path
import pytest

from kubecore.cli.main import main
from kubecore.kubelet.containerd import daemon, images


@pytest.fixture
def fake_busybox(tmp_path: Path) -> str:
    path = tmp_path / "busybox"
    path.write_text("#!/bin/sh\nprintf 'bin/sh\\nbin/busybox\\nusr/bin/wget\\nsbin/ip\\nlinuxrc\\n'\n")
    path.chmod(0o755)
    return str(path)


def test_config_keeps_everything_under_the_state_dir(tmp_path: Path) -> None:
    paths = daemon.Paths(tmp_path)
    conf = tomllib.loads(daemon.containerd_config(paths))
    assert conf["version"] == 2
    for key in ("root", "state"):
        assert Path(conf[key]).is_relative_to(tmp_path)
    assert conf["grpc"]["address"] == str(paths.socket)
    assert Path(conf["ttrpc"]["address"]).is_relative_to(tmp_path)
    cri_conf = conf["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri_conf["sandbox_image"] == images.PAUSE_IMAGE
    assert cri_conf["cni"] == {"bin_dir": daemon.CNI_BIN_DIR, "conf_dir": str(paths.cni_conf_dir), "max_conf_num": 1}
    runc = cri_conf["containerd"]["runtimes"]["runc"]
    assert runc["runtime_type"] == "io.containerd.runc.v2"
    assert runc["options"]["SystemdCgroup"] is False
    assert Path(runc["options"]["Root"]).is_relative_to(tmp_path)
    assert cri_conf["restrict_oom_score_adj"] is (not daemon.can_lower_oom_score())
    assert Path(conf["plugins"]["io.containerd.internal.v1.opt"]["path"]).is_relative_to(tmp_path)


def test_cni_conflist_for_the_pod_cidr(tmp_path: Path) -> None:
    path = daemon.write_cni_config(tmp_path, "10.88.7.0/24")
    conf = json.loads(path.read_text())
    bridge, portmap = conf["plugins"]
    assert bridge["type"] == "bridge" and bridge["isGateway"] and bridge["ipMasq"]
    assert bridge["bridge"] == daemon.bridge_name(tmp_path) and len(bridge["bridge"]) <= 15
    assert bridge["ipam"]["type"] == "host-local"
    assert bridge["ipam"]["ranges"] == [[{"subnet": "10.88.7.0/24"}]]
    assert Path(bridge["ipam"]["dataDir"]).is_relative_to(tmp_path)
    assert portmap == {"type": "portmap", "capabilities": {"portMappings": True}}
    assert list(path.parent.iterdir()) == [path]  # no temporary file left for containerd to read
    again = daemon.write_cni_config(tmp_path, "10.88.8.0/24", bridge="kcbr0")
    assert json.loads(again.read_text())["plugins"][0]["bridge"] == "kcbr0"


@pytest.mark.parametrize("cidr", ["10.0.0.0/33", "banana"])
def test_cni_rejects_bad_cidr(tmp_path: Path, cidr: str) -> None:
    with pytest.raises(daemon.ContainerdError, match="pod CIDR"):
        daemon.write_cni_config(tmp_path, cidr)


def test_bridge_names_differ_per_state_dir(tmp_path: Path) -> None:
    assert daemon.bridge_name(tmp_path / "a") != daemon.bridge_name(tmp_path / "b")


def _members(data: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: m for m in tar.getmembers()}


def _blob_file(data: bytes, name: str) -> bytes:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        f = tar.extractfile(name)
        assert f is not None
        return f.read()


def _blob(data: bytes, digest: str) -> bytes:
    return _blob_file(data, "blobs/sha256/" + digest.split(":", 1)[1])


def test_layer_is_deterministic_and_links_applets(fake_busybox: str) -> None:
    layer = images.busybox_layer(fake_busybox)
    assert layer == images.busybox_layer(fake_busybox)
    members = _members(layer)
    assert members["bin/busybox"].isfile() and members["bin/busybox"].mode == 0o755
    for applet in ("bin/sh", "usr/bin/wget", "sbin/ip"):
        assert members[applet].issym() and members[applet].linkname == "/bin/busybox"
    assert "linuxrc" not in members and members["tmp"].mode == 0o1777
    assert all(m.mtime == 0 and m.uid == 0 for m in members.values())


def test_oci_layout_names_and_digests(fake_busybox: str) -> None:
    built = images.build_local_images(fake_busybox)
    assert [i.name for i in built] == [images.BUSYBOX_IMAGE, images.PAUSE_IMAGE]
    for image in built:
        index = json.loads(_blob_file(image.data, "index.json"))
        (desc,) = index["manifests"]
        assert desc["annotations"]["io.containerd.image.name"] == image.name
        assert desc["digest"] == image.digest
        manifest_bytes = _blob(image.data, image.digest)
        assert "sha256:" + hashlib.sha256(manifest_bytes).hexdigest() == image.digest
        manifest = json.loads(manifest_bytes)
        config = json.loads(_blob(image.data, manifest["config"]["digest"]))
        (layer,) = manifest["layers"]
        layer_bytes = _blob(image.data, layer["digest"])
        assert config["rootfs"]["diff_ids"] == [layer["digest"]] and len(layer_bytes) == layer["size"]
    pause_config = json.loads(_blob(built[1].data, json.loads(_blob(built[1].data, built[1].digest))["config"]["digest"]))
    assert pause_config["config"]["Entrypoint"] == ["/bin/sh", "-c", images.PAUSE_SCRIPT]
    assert [i.digest for i in images.build_local_images(fake_busybox)] == [i.digest for i in built]


def _elf(*segments: int) -> bytes:
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", header, 0x20, 64)
    struct.pack_into("<HH", header, 0x36, 56, len(segments))
    return bytes(header) + b"".join(struct.pack("<I", t) + bytes(52) for t in segments)


def test_static_elf_detection(tmp_path: Path) -> None:
    static, dynamic, text = tmp_path / "static", tmp_path / "dynamic", tmp_path / "text"
    static.write_bytes(_elf(1, 1, 4))
    dynamic.write_bytes(_elf(6, images.PT_INTERP, 1))
    text.write_text("#!/bin/sh\n")
    assert images.is_static_elf(str(static))
    assert not images.is_static_elf(str(dynamic)) and not images.is_static_elf(str(text))


def test_cli_build_local_writes_tarballs(tmp_path: Path, fake_busybox: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["images", "build-local", "--output", str(out), "--busybox", fake_busybox]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["busybox.tar", "pause.tar"]
    assert (out / "busybox.tar").read_bytes() == images.build_local_images(fake_busybox)[0].data
    assert main(["images", "build-local"]) == 2
    assert main(["images", "build-local", "--socket", str(tmp_path / "none.sock"), "--busybox", fake_busybox]) == 1
    assert "no containerd socket" in capsys.readouterr().err
